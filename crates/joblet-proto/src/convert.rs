//! Conversions between wire types and core types.

use joblet_core::{JobRequest, JobState};

use crate::pb;

pub fn state_to_pb(s: JobState) -> pb::JobState {
    match s {
        JobState::Pending => pb::JobState::Pending,
        JobState::Queued => pb::JobState::Queued,
        JobState::Running => pb::JobState::Running,
        JobState::Completed => pb::JobState::Completed,
        JobState::Failed => pb::JobState::Failed,
        JobState::Stopped => pb::JobState::Stopped,
        JobState::Preempted => pb::JobState::Preempted,
    }
}

/// `None` for `JOB_STATE_UNSPECIFIED` or a number this build does not know.
pub fn state_from_pb(v: i32) -> Option<JobState> {
    Some(match pb::JobState::try_from(v).ok()? {
        pb::JobState::Unspecified => return None,
        pb::JobState::Pending => JobState::Pending,
        pb::JobState::Queued => JobState::Queued,
        pb::JobState::Running => JobState::Running,
        pb::JobState::Completed => JobState::Completed,
        pb::JobState::Failed => JobState::Failed,
        pb::JobState::Stopped => JobState::Stopped,
        pb::JobState::Preempted => JobState::Preempted,
    })
}

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
        env,
        secret_env,
        uploads: r.uploads.into_iter().map(upload_from_pb).collect(),
        volumes: r.volumes,
        network: r.network,
        runtime: r.runtime,
        timeout_seconds: r.timeout_seconds,
        gpu_time_seconds: res.gpu_time_seconds,
        cuda_version: r.cuda_version,
        mig_profile: r.mig_profile,
        gpu_profiling: r.gpu_profiling,
    }
}

/// An unspecified or unknown kind maps to `Unknown`, which the manifest
/// check refuses by name.
pub fn upload_from_pb(e: pb::UploadEntry) -> joblet_core::UploadEntry {
    use joblet_core::UploadKind;
    let kind = match pb::UploadKind::try_from(e.kind) {
        Ok(pb::UploadKind::File) => UploadKind::File,
        Ok(pb::UploadKind::Dir) => UploadKind::Dir,
        Ok(pb::UploadKind::Symlink) => UploadKind::Symlink,
        _ => UploadKind::Unknown,
    };
    joblet_core::UploadEntry {
        path: e.path,
        kind,
        mode: e.mode,
        size: e.size,
        target: e.target,
    }
}

pub fn upload_to_pb(e: &joblet_core::UploadEntry) -> pb::UploadEntry {
    use joblet_core::UploadKind;
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
    fn job_mig_profile_and_gpu_profiling_are_new_fields_old_peers_read_as_unset() {
        use prost::Message;
        let job = pb::Job {
            id: "j".into(),
            mig_profile: "1g.10gb".into(),
            gpu_profiling: true,
            ..Default::default()
        };
        let bytes = job.encode_to_vec();
        // Field 21 (length-delimited) and field 22 (varint): new numbers.
        assert!(
            bytes.windows(2).any(|w| w == [21 << 3 | 2, 0x01]),
            "{bytes:x?}"
        );
        assert!(
            bytes.windows(3).any(|w| w == [22 << 3, 0x01, 0x01]),
            "{bytes:x?}"
        );
        let back = pb::Job::decode(bytes.as_slice()).unwrap();
        assert_eq!(
            (back.mig_profile.as_str(), back.gpu_profiling),
            ("1g.10gb", true)
        );
        // A Job from a node without them: whole GPUs, no profiling.
        let old = pb::Job {
            id: "j".into(),
            cuda_version: "12.2".into(),
            ..Default::default()
        };
        let back = pb::Job::decode(old.encode_to_vec().as_slice()).unwrap();
        assert_eq!((back.mig_profile.as_str(), back.gpu_profiling), ("", false));
    }

    #[test]
    fn states_round_trip() {
        for s in JobState::ALL {
            assert_eq!(state_from_pb(state_to_pb(s) as i32), Some(s));
        }
        assert_eq!(state_from_pb(0), None);
        assert_eq!(state_from_pb(99), None);
    }

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
}
