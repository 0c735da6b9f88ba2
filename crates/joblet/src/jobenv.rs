//! The environment a job starts with: a small clean base (no daemon
//! variables leak in), then its runtime's `environment`, then the user's
//! `--env`, then `--secret-env`.

use std::collections::BTreeMap;
use std::path::Path;

use joblet_core::{JobId, JobSpec};

pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

pub fn build(
    id: &JobId,
    spec: &JobSpec,
    secrets: &BTreeMap<String, String>,
    home: &Path,
    runtime: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::from([
        ("PATH".to_owned(), DEFAULT_PATH.to_owned()),
        ("HOME".to_owned(), home.display().to_string()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("JOBLET_JOB_ID".to_owned(), id.to_string()),
    ]);
    if let Some(r) = runtime {
        env.extend(r.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    env.extend(spec.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.extend(secrets.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_values_override_the_base_and_nothing_leaks() {
        let id = JobId::parse("00000000-0000-4000-8000-000000000001").unwrap();
        let req = joblet_core::JobRequest {
            command: "x".into(),
            env: vec![("PATH".into(), "/opt/bin".into())],
            secret_env: vec![("TOKEN".into(), "t".into())],
            ..Default::default()
        };
        let (spec, secrets) = req.validate().unwrap();
        let runtime = BTreeMap::from([
            ("PATH".to_owned(), "/opt/venv/bin:/usr/bin".to_owned()),
            ("PYTHONUNBUFFERED".to_owned(), "1".to_owned()),
        ]);
        let env = build(&id, &spec, &secrets, Path::new("/w"), Some(&runtime));
        assert_eq!(env["PATH"], "/opt/bin");
        assert_eq!(env["PYTHONUNBUFFERED"], "1");
        let env = build(&id, &spec, &secrets, Path::new("/w"), None);
        assert!(!env.contains_key("PYTHONUNBUFFERED"));
        assert_eq!(env["TOKEN"], "t");
        assert_eq!(env["HOME"], "/w");
        assert!(!env.contains_key("RUST_LOG"));
    }
}
