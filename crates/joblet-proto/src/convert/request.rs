//! Job requests (`RunJobRequest`, also SubmitJob's first message) and
//! their upload manifests.

use joblet_core::{JobRequest, UploadEntry, UploadKind};

use crate::pb;

/// The raw request, ready for [`JobRequest::validate`]. Map order is made
/// deterministic (sorted) so validation errors are stable.
pub fn job_request_from_pb(r: pb::RunJobRequest) -> JobRequest {
    let res = r.resources.unwrap_or_default();
    let mut env: Vec<(String, String)> = r.env.into_iter().collect();
    env.sort();
    let mut secret_env: Vec<(String, String)> = r.secret_env.into_iter().collect();
    secret_env.sort();
    JobRequest {
        command: r.command,
        args: r.args,
        max_cpu: res.max_cpu,
        cpu_cores: res.cpu_cores,
        max_memory_mb: res.max_memory_mb,
        max_iobps: res.max_iobps,
        gpu_count: res.gpu_count,
        gpu_memory_mb: res.gpu_memory_mb,
        gpu_milli: res.gpu_milli,
        env,
        secret_env,
        uploads: r.uploads.into_iter().map(upload_from_pb).collect(),
        volumes: r.volumes,
        network: r.network,
        runtime: r.runtime,
        timeout_ms: r.timeout_ms,
        timeout_seconds: r.timeout_seconds,
        gpu_time_seconds: res.gpu_time_seconds,
        cuda_version: r.cuda_version,
        mig_profile: r.mig_profile,
        gpu_profiling: r.gpu_profiling,
        restart: r.restart,
        executor: r.executor,
        devices: r.devices,
        interactive: r.interactive,
        tty: r.tty,
        tty_rows: r.tty_size.map_or(0, |t| i64::from(t.rows)),
        tty_cols: r.tty_size.map_or(0, |t| i64::from(t.cols)),
    }
}

/// The wire form of a request. A variable given twice in `env` (or in
/// `secret_env`) is sent once, with its last value: the wire's maps hold
/// each name once.
pub fn job_request_to_pb(r: &JobRequest) -> pb::RunJobRequest {
    pb::RunJobRequest {
        command: r.command.clone(),
        args: r.args.clone(),
        resources: Some(pb::Resources {
            max_cpu: r.max_cpu,
            cpu_cores: r.cpu_cores.clone(),
            max_memory_mb: r.max_memory_mb,
            max_iobps: r.max_iobps,
            gpu_count: r.gpu_count,
            gpu_memory_mb: r.gpu_memory_mb,
            gpu_time_seconds: r.gpu_time_seconds,
            gpu_milli: r.gpu_milli,
        }),
        env: r.env.iter().cloned().collect(),
        secret_env: r.secret_env.iter().cloned().collect(),
        uploads: r.uploads.iter().map(upload_to_pb).collect(),
        runtime: r.runtime.clone(),
        timeout_seconds: r.timeout_seconds,
        timeout_ms: r.timeout_ms,
        volumes: r.volumes.clone(),
        network: r.network.clone(),
        cuda_version: r.cuda_version.clone(),
        mig_profile: r.mig_profile.clone(),
        gpu_profiling: r.gpu_profiling,
        restart: r.restart.clone(),
        executor: r.executor.clone(),
        devices: r.devices.clone(),
        interactive: r.interactive,
        tty: r.tty,
        tty_size: (r.tty_rows != 0 || r.tty_cols != 0).then(|| pb::TerminalSize {
            rows: u32::try_from(r.tty_rows).unwrap_or(u32::MAX),
            cols: u32::try_from(r.tty_cols).unwrap_or(u32::MAX),
        }),
    }
}

/// An unspecified or unknown kind maps to `Unknown`, which the manifest
/// check refuses by name.
pub fn upload_from_pb(e: pb::UploadEntry) -> UploadEntry {
    let kind = match pb::UploadKind::try_from(e.kind) {
        Ok(pb::UploadKind::File) => UploadKind::File,
        Ok(pb::UploadKind::Dir) => UploadKind::Dir,
        Ok(pb::UploadKind::Symlink) => UploadKind::Symlink,
        _ => UploadKind::Unknown,
    };
    UploadEntry {
        path: e.path,
        kind,
        mode: e.mode,
        size: e.size,
        target: e.target,
    }
}

pub fn upload_to_pb(e: &UploadEntry) -> pb::UploadEntry {
    let kind = match e.kind {
        UploadKind::File => pb::UploadKind::File,
        UploadKind::Dir => pb::UploadKind::Dir,
        UploadKind::Symlink => pb::UploadKind::Symlink,
        UploadKind::Unknown => pb::UploadKind::Unspecified,
    };
    pb::UploadEntry {
        path: e.path.clone(),
        kind: kind as i32,
        mode: e.mode,
        size: e.size,
        target: e.target.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_time_cuda_mig_and_profiling_reach_the_core_request() {
        let r = job_request_from_pb(pb::RunJobRequest {
            command: "python".into(),
            resources: Some(pb::Resources {
                gpu_count: 1,
                gpu_time_seconds: Some(90),
                ..Default::default()
            }),
            cuda_version: "12.2".into(),
            mig_profile: "1g.10gb".into(),
            gpu_profiling: true,
            ..Default::default()
        });
        assert_eq!(r.gpu_time_seconds, Some(90));
        assert_eq!(r.cuda_version, "12.2");
        assert_eq!(r.mig_profile, "1g.10gb");
        assert!(r.gpu_profiling);
        let unset = job_request_from_pb(pb::RunJobRequest::default());
        assert_eq!(unset.gpu_time_seconds, None);
        assert_eq!(
            (unset.mig_profile.as_str(), unset.gpu_profiling),
            ("", false)
        );
    }

    #[test]
    fn executor_and_devices_reach_the_core_request() {
        let r = job_request_from_pb(pb::RunJobRequest {
            command: "id".into(),
            executor: "runc".into(),
            devices: vec!["nvidia.com/gpu=0".into(), "vendor.example/fpga=all".into()],
            ..Default::default()
        });
        assert_eq!(r.executor, "runc");
        assert_eq!(r.devices, ["nvidia.com/gpu=0", "vendor.example/fpga=all"]);
        let back = job_request_to_pb(&r);
        assert_eq!(back.executor, "runc");
        assert_eq!(back.devices, r.devices);
        // A client that predates executors: the node's default, no devices.
        let unset = job_request_from_pb(pb::RunJobRequest::default());
        assert_eq!((unset.executor.as_str(), unset.devices.len()), ("", 0));
    }

    #[test]
    fn maps_come_back_sorted_and_an_unknown_upload_kind_stays_unknown() {
        let r = job_request_from_pb(pb::RunJobRequest {
            command: "x".into(),
            env: [("B".into(), "2".into()), ("A".into(), "1".into())].into(),
            uploads: vec![pb::UploadEntry {
                path: "a".into(),
                kind: 9,
                ..Default::default()
            }],
            ..Default::default()
        });
        assert_eq!(
            r.env,
            [("A".to_owned(), "1".to_owned()), ("B".into(), "2".into())]
        );
        assert_eq!(r.uploads[0].kind, UploadKind::Unknown);
        assert_eq!(
            upload_to_pb(&r.uploads[0]).kind,
            pb::UploadKind::Unspecified as i32
        );
    }
}
