//! A workflow job as the request `rnx job run` would send for it, so the
//! daemon admits it under the same rules ([`JobRequest::validate`]).

use joblet_core::spec::env_field;
use joblet_core::JobRequest;

use super::locate::Step;
use super::Job;

impl Job {
    /// The job as a request: `max_memory` → `max_memory_mb`,
    /// `environment` → `env`, `secret_environment` → `secret_env`,
    /// `timeout` → `timeout_ms` (and `timeout_seconds`, rounded up, for
    /// older nodes), `executor` and `devices` as they are (`--executor`,
    /// `--device`); a limit not asked for is 0 or empty, as in a request
    /// without that flag. `uploads` stays empty: the files are on the
    /// submitting machine, and whoever reads them ([`Job::uploads`] names
    /// them) fills in the manifest.
    pub fn request(&self) -> JobRequest {
        let r = &self.resources;
        let signed = |v: Option<u64>| v.map_or(0, |v| i64::try_from(v).unwrap_or(i64::MAX));
        let timeout_ms = self
            .timeout
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        JobRequest {
            command: self.command.clone(),
            args: self.args.clone(),
            max_cpu: signed(r.max_cpu),
            cpu_cores: r.cpu_cores.clone().unwrap_or_default(),
            max_memory_mb: signed(r.max_memory_mb),
            max_iobps: signed(r.max_iobps),
            gpu_count: signed(r.gpu_count),
            gpu_memory_mb: signed(r.gpu_memory_mb),
            gpu_milli: signed(r.gpu_milli),
            env: self.environment.clone(),
            secret_env: self.secret_environment.clone(),
            uploads: Vec::new(),
            volumes: self.volumes.clone(),
            runtime: self.runtime.clone().unwrap_or_default(),
            network: self.network.clone().unwrap_or_default(),
            timeout_ms,
            timeout_seconds: timeout_ms.map(|ms| ms / 1000 + i64::from(ms % 1000 != 0)),
            executor: self.executor.clone().unwrap_or_default(),
            devices: self.devices.clone(),
            ..JobRequest::default()
        }
    }
}

/// Where a request field that [`JobRequest::validate`] names
/// (`resources.max_memory_mb`, `env["1X"]`, `args[2]`) is in the job's
/// part of the file: the key as the file names it, and the keys and
/// indexes that lead to it from the job. A field this does not know is
/// the job itself (no keys).
pub(crate) fn file_field(job: &Job, field: &str) -> (String, Vec<Step>) {
    let indexed = |prefix: &str| {
        field
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('['))
            .and_then(|rest| rest.strip_suffix(']'))
            .and_then(|i| i.parse::<usize>().ok())
    };
    let var = |name: &str, file_name: &str, vars: &[(String, String)]| {
        vars.iter()
            .find(|(k, _)| env_field(name, k) == field)
            .map(|(k, _)| {
                (
                    env_field(file_name, k),
                    vec![Step::Key(file_name.to_owned()), Step::Key(k.clone())],
                )
            })
    };
    if let Some(res) = field.strip_prefix("resources.") {
        let name = match res {
            "max_memory_mb" => "max_memory",
            other => other,
        };
        return (
            format!("resources.{name}"),
            vec![Step::Key("resources".into()), Step::Key(name.into())],
        );
    }
    if let Some(found) = var("env", "environment", &job.environment)
        .or_else(|| var("secret_env", "secret_environment", &job.secret_environment))
    {
        return found;
    }
    for list in ["args", "volumes", "devices"] {
        if let Some(i) = indexed(list) {
            return (
                field.to_owned(),
                vec![Step::Key(list.into()), Step::Index(i)],
            );
        }
    }
    if field == "executor" && job.executor.is_none() {
        // The node's default refused it: the job has no key for it.
        return ("executor (the node's default)".to_owned(), Vec::new());
    }
    let name = match field {
        "env" => "environment",
        "secret_env" => "secret_environment",
        "timeout_ms" | "timeout_seconds" => "timeout",
        "command" | "args" | "runtime" | "network" | "volumes" | "executor" | "devices" => field,
        _ => return (field.to_owned(), Vec::new()),
    };
    (name.to_owned(), vec![Step::Key(name.into())])
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::format::JobResources;

    fn job() -> Job {
        Job {
            name: "train".into(),
            command: "python3".into(),
            args: vec!["train.py".into()],
            runtime: Some("python-3.11-ml".into()),
            requires: Vec::new(),
            resources: JobResources {
                max_cpu: Some(800),
                max_memory_mb: Some(16384),
                max_iobps: Some(1_000_000),
                cpu_cores: Some("0-3".into()),
                gpu_count: Some(2),
                gpu_milli: None,
                gpu_memory_mb: Some(8192),
            },
            uploads: vec!["train.py".into()],
            volumes: vec!["data:ro".into()],
            network: Some("host".into()),
            environment: vec![("EPOCHS".into(), "100".into())],
            secret_environment: vec![("TOKEN".into(), "s".into())],
            timeout: Some(Duration::from_millis(1500)),
            retries: 2,
            retry_backoff: Duration::from_secs(1),
            executor: Some("runc".into()),
            devices: vec!["nvidia.com/gpu=0".into()],
        }
    }

    #[test]
    fn every_field_maps_to_the_request() {
        let r = job().request();
        assert_eq!(r.command, "python3");
        assert_eq!(r.args, ["train.py"]);
        assert_eq!(
            (r.max_cpu, r.max_memory_mb, r.max_iobps),
            (800, 16384, 1_000_000)
        );
        assert_eq!(r.cpu_cores, "0-3");
        assert_eq!((r.gpu_count, r.gpu_memory_mb), (2, 8192));
        assert_eq!(r.env, [("EPOCHS".to_owned(), "100".to_owned())]);
        assert_eq!(r.secret_env, [("TOKEN".to_owned(), "s".to_owned())]);
        assert_eq!(r.volumes, ["data:ro"]);
        assert_eq!(r.runtime, "python-3.11-ml");
        assert_eq!(r.network, "host");
        assert_eq!((r.timeout_ms, r.timeout_seconds), (Some(1500), Some(2)));
        assert_eq!(r.executor, "runc");
        assert_eq!(r.devices, ["nvidia.com/gpu=0"]);
        assert!(r.uploads.is_empty());
        let (spec, secrets) = r.validate().unwrap();
        assert_eq!(spec.resources.max_memory_mb, Some(16384));
        assert_eq!(spec.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(secrets["TOKEN"], "s");
    }

    #[test]
    fn what_is_not_asked_for_is_zero_or_empty() {
        let mut j = job();
        j.resources = JobResources::default();
        j.runtime = None;
        j.network = None;
        j.timeout = None;
        j.executor = None;
        j.devices = Vec::new();
        let r = j.request();
        assert_eq!((r.max_cpu, r.max_memory_mb, r.gpu_count), (0, 0, 0));
        assert_eq!((r.runtime.as_str(), r.network.as_str()), ("", ""));
        assert_eq!((r.timeout_ms, r.timeout_seconds), (None, None));
        assert_eq!((r.executor.as_str(), r.devices.len()), ("", 0));
    }

    #[test]
    fn request_fields_map_back_to_the_keys_of_the_file() {
        let j = job();
        let name = |s: &str| Step::Key(s.to_owned());
        assert_eq!(
            file_field(&j, "resources.max_memory_mb"),
            (
                "resources.max_memory".into(),
                vec![name("resources"), name("max_memory")]
            )
        );
        assert_eq!(
            file_field(&j, "env[\"EPOCHS\"]"),
            (
                "environment[\"EPOCHS\"]".into(),
                vec![name("environment"), name("EPOCHS")]
            )
        );
        assert_eq!(
            file_field(&j, "secret_env[\"TOKEN\"]"),
            (
                "secret_environment[\"TOKEN\"]".into(),
                vec![name("secret_environment"), name("TOKEN")]
            )
        );
        assert_eq!(
            file_field(&j, "volumes[0]"),
            ("volumes[0]".into(), vec![name("volumes"), Step::Index(0)])
        );
        assert_eq!(
            file_field(&j, "timeout_ms"),
            ("timeout".into(), vec![name("timeout")])
        );
        assert_eq!(
            file_field(&j, "runtime"),
            ("runtime".into(), vec![name("runtime")])
        );
        assert_eq!(
            file_field(&j, "executor"),
            ("executor".into(), vec![name("executor")])
        );
        let mut default = j.clone();
        default.executor = None;
        assert_eq!(
            file_field(&default, "executor"),
            ("executor (the node's default)".into(), vec![])
        );
        assert_eq!(
            file_field(&j, "devices[0]"),
            ("devices[0]".into(), vec![name("devices"), Step::Index(0)])
        );
        assert_eq!(
            file_field(&j, "cuda_version"),
            ("cuda_version".into(), vec![])
        );
    }
}
