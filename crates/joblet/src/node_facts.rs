//! What this node has and what its kernel accepts, read once at start-up
//! so admission ([`crate::service::Admission`]) refuses a job the kernel
//! would refuse later: the CPUs a job may be pinned to (`--cpu-cores`), and
//! what `execve` takes of a job's command line and environment (`ARG_MAX`,
//! `MAX_ARG_STRLEN`). Reading is here; the checks are pure functions of
//! these facts in the service layer.

use std::path::Path;

/// The kernel's cap on argv + envp whatever the stack limit: `_STK_LIM / 4
/// * 3` (6 MiB; `fs/exec.c`), which `sysconf(_SC_ARG_MAX)` does not apply.
pub const KERNEL_ARG_CAP: u64 = 6 * 1024 * 1024;

/// The facts; `None` = could not be read (logged), so not checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// CPUs online (`<sys>/devices/system/cpu/online`).
    pub online_cpus: Option<Vec<u32>>,
    /// CPUs the daemon may run on (its affinity, which its cpuset bounds).
    /// Job cgroups are made by the daemon and pinned within these.
    pub allowed_cpus: Option<Vec<u32>>,
    /// Bytes a job's argv and environment may take together, strings with
    /// their NUL bytes and one pointer each (`sysconf(_SC_ARG_MAX)`, at
    /// most [`KERNEL_ARG_CAP`]).
    pub arg_max: Option<u64>,
    /// Bytes one argv or environment string may take with its NUL byte
    /// (`MAX_ARG_STRLEN`: 32 pages, 131072 with 4 KiB pages).
    pub max_arg_strlen: Option<u64>,
}

impl NodeFacts {
    /// Reads the facts of this node; `sys` is where sysfs is (`/sys`).
    pub fn detect(sys: &Path) -> NodeFacts {
        let online_cpus = online_cpus(sys)
            .map_err(|e| tracing::warn!(sys = %sys.display(), error = %e, "cannot read the node's online CPUs: --cpu-cores is checked against the daemon's CPU affinity only"))
            .ok();
        let allowed_cpus = affinity()
            .map_err(|e| tracing::warn!(error = %e, "cannot read the daemon's CPU affinity: --cpu-cores is checked against the online CPUs only"))
            .ok();
        let sysconf = |var| {
            nix::unistd::sysconf(var)
                .ok()
                .flatten()
                .and_then(|v| u64::try_from(v).ok())
        };
        let arg_max = sysconf(nix::unistd::SysconfVar::ARG_MAX).map(|n| n.min(KERNEL_ARG_CAP));
        let max_arg_strlen = sysconf(nix::unistd::SysconfVar::PAGE_SIZE).map(|page| 32 * page);
        NodeFacts {
            online_cpus,
            allowed_cpus,
            arg_max,
            max_arg_strlen,
        }
    }

    /// The CPUs a job may be pinned to: online and in the daemon's
    /// affinity (either alone when the other is unknown).
    pub fn job_cpus(&self) -> Option<Vec<u32>> {
        match (&self.online_cpus, &self.allowed_cpus) {
            (Some(on), Some(allowed)) => {
                Some(on.iter().copied().filter(|c| allowed.contains(c)).collect())
            }
            (one, other) => one.clone().or_else(|| other.clone()),
        }
    }
}

/// The online CPUs, from `<sys>/devices/system/cpu/online` (`0-3,6`).
pub fn online_cpus(sys: &Path) -> std::io::Result<Vec<u32>> {
    let path = sys.join("devices/system/cpu/online");
    let text = std::fs::read_to_string(&path)?;
    joblet_core::parse::parse_cpu_list(text.trim()).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// The CPUs this process may run on.
fn affinity() -> nix::Result<Vec<u32>> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0))?;
    Ok((0..nix::sched::CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .filter_map(|c| u32::try_from(c).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn online_cpus_come_from_sysfs_under_the_given_root() {
        let dir = tempfile::tempdir().unwrap();
        let cpu = dir.path().join("devices/system/cpu");
        std::fs::create_dir_all(&cpu).unwrap();
        std::fs::write(cpu.join("online"), "0-1\n").unwrap();
        assert_eq!(online_cpus(dir.path()).unwrap(), vec![0, 1]);
        std::fs::write(cpu.join("online"), "0,2-3,7\n").unwrap();
        assert_eq!(online_cpus(dir.path()).unwrap(), vec![0, 2, 3, 7]);
        std::fs::write(cpu.join("online"), "garbage\n").unwrap();
        let e = online_cpus(dir.path()).unwrap_err();
        assert!(e.to_string().contains("cpu/online"), "{e}");
        assert!(online_cpus(&dir.path().join("missing")).is_err());

        // Unreadable: not known, so not checked.
        let facts = NodeFacts::detect(&dir.path().join("missing"));
        assert_eq!(facts.online_cpus, None);
    }

    #[test]
    fn job_cpus_are_online_and_in_the_daemons_affinity() {
        let facts = |online: Option<Vec<u32>>, allowed: Option<Vec<u32>>| NodeFacts {
            online_cpus: online,
            allowed_cpus: allowed,
            ..Default::default()
        };
        assert_eq!(
            facts(Some(vec![0, 1, 2, 3]), Some(vec![1, 3, 9])).job_cpus(),
            Some(vec![1, 3])
        );
        assert_eq!(facts(Some(vec![0, 1]), None).job_cpus(), Some(vec![0, 1]));
        assert_eq!(facts(None, Some(vec![2])).job_cpus(), Some(vec![2]));
        assert_eq!(facts(None, None).job_cpus(), None);
    }

    /// This host's own facts: whatever they are, they are sane.
    #[test]
    fn this_hosts_facts_are_read() {
        let facts = NodeFacts::detect(Path::new("/sys"));
        let allowed = facts.allowed_cpus.expect("the daemon's affinity");
        assert!(!allowed.is_empty());
        let arg_max = facts.arg_max.expect("ARG_MAX");
        assert!((131_072..=KERNEL_ARG_CAP).contains(&arg_max), "{arg_max}");
        assert!(facts.max_arg_strlen.expect("MAX_ARG_STRLEN") >= 131_072);
    }
}
