//! Executors: what runs a job's process. `native` is joblet's own sandbox;
//! the others are OCI runtimes (runc, crun, gVisor's runsc) given a bundle
//! built from the same settings. Each declares [`ExecutorCaps`]; the node's
//! [`ExecutorCatalog`] picks the executor of a job (its own, else the
//! node's default), checks that the caller may use it and that it has every
//! capability the job needs, and refuses the job before anything starts,
//! naming both the executor and the capability.

use serde::{Deserialize, Serialize};

use crate::spec::{is_name, FieldError, JobSpec};

/// The name of the executor that is joblet's own sandbox.
pub const NATIVE: &str = "native";

/// Which program runs the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    /// Joblet's own sandbox (namespaces, cgroups, eBPF device filter,
    /// seccomp), started by the per-job shim.
    Native,
    Runc,
    Crun,
    /// gVisor: the job runs on a user-space kernel; devices reach it only
    /// through nvproxy.
    Runsc,
}

impl ExecutorKind {
    pub const ALL: [ExecutorKind; 4] = [
        ExecutorKind::Native,
        ExecutorKind::Runc,
        ExecutorKind::Crun,
        ExecutorKind::Runsc,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ExecutorKind::Native => "native",
            ExecutorKind::Runc => "runc",
            ExecutorKind::Crun => "crun",
            ExecutorKind::Runsc => "runsc",
        }
    }

    /// `native`, `runc`, `crun` or `runsc`.
    pub fn parse(s: &str) -> Option<ExecutorKind> {
        ExecutorKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether the job runs under an OCI runtime's CLI.
    pub fn is_oci(self) -> bool {
        self != ExecutorKind::Native
    }
}

impl std::fmt::Display for ExecutorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an executor can do for a job on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ExecutorCaps {
    /// GPU jobs: the job gets exactly its GPUs' device nodes and driver
    /// files (runsc: only through nvproxy, on a release and host driver it
    /// supports).
    pub gpu: bool,
    /// CDI devices (`--device vendor.com/class=name`): a spec's
    /// `containerEdits` applied to the job's bundle.
    pub cdi: bool,
    /// Out-of-memory kills are told as such (the job's memory cgroup).
    pub oom_events: bool,
    /// The runtime can checkpoint and restore a running job.
    pub checkpoint_restore: bool,
    /// The job can join an existing network namespace.
    pub join_netns: bool,
    /// Device access is enforced by the kernel's device cgroup (v1 files
    /// or the v2 eBPF filter). Off under runsc: its own kernel decides.
    pub device_cgroup: bool,
}

impl ExecutorCaps {
    /// What joblet's own sandbox gives a job on a node that runs GPU jobs.
    pub const NATIVE: ExecutorCaps = ExecutorCaps {
        gpu: true,
        cdi: false,
        oom_events: true,
        checkpoint_restore: false,
        join_netns: false,
        device_cgroup: true,
    };

    /// Each capability's name and whether it is there, in a fixed order.
    pub fn flags(&self) -> [(&'static str, bool); 6] {
        [
            ("gpu", self.gpu),
            ("cdi", self.cdi),
            ("oom-events", self.oom_events),
            ("checkpoint-restore", self.checkpoint_restore),
            ("join-netns", self.join_netns),
            ("device-cgroup", self.device_cgroup),
        ]
    }

    /// The names of the capabilities it has.
    pub fn names(&self) -> Vec<&'static str> {
        self.flags()
            .into_iter()
            .filter(|(_, on)| *on)
            .map(|(n, _)| n)
            .collect()
    }
}

/// One executor of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutorInfo {
    /// What `--executor` names (`native`, `runc`, or an admin's own name).
    pub name: String,
    pub kind: ExecutorKind,
    /// The runtime's binary (none for `native`).
    pub binary: Option<String>,
    /// The runtime's version as it reports it.
    pub version: Option<String>,
    pub caps: ExecutorCaps,
    /// Why it cannot run GPU jobs, when it cannot (`caps.gpu` off): shown
    /// with the refusal of a GPU job.
    pub gpu_unavailable: Option<String>,
    /// Who may use it; empty: everyone who may run jobs.
    pub users: Vec<String>,
}

impl ExecutorInfo {
    /// Whether `user` may run jobs on it.
    pub fn allows(&self, user: &str) -> bool {
        self.users.is_empty() || self.users.iter().any(|u| u == user)
    }
}

/// What a job needs from its executor, from its spec.
pub fn needed_caps(spec: &JobSpec) -> Vec<&'static str> {
    let mut need = Vec::new();
    if spec.resources.gpu_count > 0 {
        need.push("gpu");
    }
    if !spec.devices.is_empty() {
        need.push("cdi");
    }
    need
}

/// The executors of a node and its default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecutorCatalog {
    /// The executor of a job that names none.
    pub default: String,
    pub executors: Vec<ExecutorInfo>,
}

impl Default for ExecutorCatalog {
    /// Only the native sandbox, which every node has.
    fn default() -> Self {
        ExecutorCatalog {
            default: NATIVE.into(),
            executors: vec![ExecutorInfo {
                name: NATIVE.into(),
                kind: ExecutorKind::Native,
                binary: None,
                version: None,
                caps: ExecutorCaps::NATIVE,
                gpu_unavailable: None,
                users: Vec::new(),
            }],
        }
    }
}

impl ExecutorCatalog {
    pub fn get(&self, name: &str) -> Option<&ExecutorInfo> {
        self.executors.iter().find(|e| e.name == name)
    }

    fn names(&self) -> String {
        self.executors
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The executor `spec` runs on (its own or the default), once `user`
    /// may use it and it has every capability the job needs; otherwise a
    /// refusal naming the field, the executor and what is missing.
    pub fn resolve(&self, user: &str, spec: &JobSpec) -> Result<&ExecutorInfo, FieldError> {
        let (field, name) = match spec.executor.as_deref() {
            Some(n) => ("executor", n),
            None => ("executor", self.default.as_str()),
        };
        let Some(exec) = self.get(name) else {
            return Err(FieldError::new(
                field,
                format!(
                    "this node has no executor {name:?}; it has: {} (see `rnx whoami`)",
                    self.names()
                ),
            ));
        };
        if !exec.allows(user) {
            return Err(FieldError::new(
                field,
                format!(
                    "user {user:?} may not use executor {name:?} on this node (executors.{name}.users); ask the node's admin, or pick another executor"
                ),
            ));
        }
        for need in needed_caps(spec) {
            let has = exec
                .caps
                .flags()
                .into_iter()
                .any(|(cap, on)| cap == need && on);
            if has {
                continue;
            }
            let (what, hint) = match need {
                "gpu" => (
                    "GPU jobs",
                    exec.gpu_unavailable
                        .clone()
                        .unwrap_or_else(|| "run GPU jobs on native, runc or crun".into()),
                ),
                _ => (
                    "CDI devices (--device)",
                    "use runc or crun for --device".to_string(),
                ),
            };
            return Err(FieldError::new(
                field,
                format!(
                    "executor {name:?} ({}) lacks the {need} capability this job needs for {what}: {hint}",
                    exec.kind
                ),
            ));
        }
        Ok(exec)
    }
}

/// Checks an executor name as `--executor` takes it: the same rule as
/// runtime and volume names.
pub fn check_executor_name(name: &str) -> Result<(), FieldError> {
    if is_name(name) {
        Ok(())
    } else {
        Err(FieldError::new(
            "executor",
            format!("{name:?} is not an executor name: use letters, digits, '.', '_' and '-' (for example native, runc, crun, runsc)"),
        ))
    }
}

/// A CDI device name, `vendor/class=name` (CDI's rules: the vendor and
/// the class start with a letter and hold letters, digits, `_`, `-` and
/// `.`; the device name starts with a letter or digit and may also hold
/// `:`; each ends with a letter or digit), split into its parts; `None`
/// when it is not one. `joblet_oci::cdi::CdiDevice` parses the same names
/// (a test in the daemon checks that the two agree) and says why one is
/// not.
pub fn split_cdi_name(s: &str) -> Option<(&str, &str, &str)> {
    let (kind, name) = s.split_once('=')?;
    let (vendor, class) = kind.split_once('/')?;
    let ok = |p: &str, first: fn(&char) -> bool, extra: &str| {
        p.chars().next().is_some_and(|c| first(&c))
            && p.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
    };
    let letter = |c: &char| c.is_ascii_alphabetic();
    let alnum = |c: &char| c.is_ascii_alphanumeric();
    (ok(vendor, letter, "._-") && ok(class, letter, "._-") && ok(name, alnum, "_.:-"))
        .then_some((vendor, class, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> ExecutorCatalog {
        let mut c = ExecutorCatalog::default();
        c.executors.push(ExecutorInfo {
            name: "runsc".into(),
            kind: ExecutorKind::Runsc,
            binary: Some("/usr/bin/runsc".into()),
            version: Some("release-20221219.0".into()),
            caps: ExecutorCaps::default(),
            gpu_unavailable: Some("runsc release 20221219 has no nvproxy".into()),
            users: vec!["alice".into()],
        });
        c
    }

    fn spec(executor: Option<&str>, gpus: u32) -> JobSpec {
        let mut s = crate::JobRequest {
            command: "true".into(),
            ..Default::default()
        }
        .validate()
        .unwrap()
        .0;
        s.executor = executor.map(Into::into);
        s.resources.gpu_count = gpus;
        s
    }

    #[test]
    fn the_default_runs_a_job_that_names_none() {
        let c = catalog();
        assert_eq!(c.resolve("bob", &spec(None, 1)).unwrap().name, "native");
    }

    #[test]
    fn unknown_executors_are_refused_listing_the_known_ones() {
        let e = catalog()
            .resolve("bob", &spec(Some("kata"), 0))
            .unwrap_err();
        assert_eq!(e.field, "executor");
        assert!(e.problem.contains("native, runsc"), "{e}");
    }

    #[test]
    fn users_outside_the_list_are_refused() {
        let c = catalog();
        assert!(c.resolve("alice", &spec(Some("runsc"), 0)).is_ok());
        let e = c.resolve("bob", &spec(Some("runsc"), 0)).unwrap_err();
        assert!(e.problem.contains("may not use executor \"runsc\""), "{e}");
    }

    #[test]
    fn a_missing_capability_names_the_executor_and_the_capability() {
        let e = catalog()
            .resolve("alice", &spec(Some("runsc"), 1))
            .unwrap_err();
        assert!(
            e.problem
                .contains("\"runsc\" (runsc) lacks the gpu capability")
                && e.problem.contains("no nvproxy"),
            "{e}"
        );
        let mut s = spec(None, 0);
        s.devices = vec!["vendor.com/fpga=0".into()];
        let e = catalog().resolve("bob", &s).unwrap_err();
        assert!(e.problem.contains("lacks the cdi capability"), "{e}");
    }

    #[test]
    fn cdi_names_are_vendor_class_and_name() {
        assert_eq!(
            split_cdi_name("nvidia.com/gpu=0"),
            Some(("nvidia.com", "gpu", "0"))
        );
        assert!(split_cdi_name("nvidia.com/gpu=GPU-1a2b:0").is_some());
        for bad in [
            "nvidia.com/gpu",
            "gpu=0",
            "nvidia.com/=0",
            "/gpu=0",
            "a/b=",
            "a/b c=0",
            "a/b=-x",
            "9vendor.com/gpu=0",
        ] {
            assert_eq!(split_cdi_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn names_follow_the_runtime_rule() {
        assert!(check_executor_name("runc").is_ok());
        assert!(check_executor_name("run c").is_err());
        assert!(check_executor_name("").is_err());
    }
}
