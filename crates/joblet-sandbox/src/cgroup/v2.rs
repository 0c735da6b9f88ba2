//! cgroup v2 interface files: enabling controllers for children
//! (`cgroup.subtree_control`), writing and verifying limits, reading OOM
//! kills and usage, and `cgroup.kill`. Every function takes the cgroup
//! directory as a parameter.

use std::collections::BTreeSet;
use std::path::Path;

use joblet_core::parse::{format_cpu_list, parse_cpu_list};

use super::error::CgroupError;
use super::files;
use super::layout::Controller;
use super::limits::{Plan, CPU_PERIOD_US};
use super::CgroupStats;

/// Makes `dir`'s `cgroup.subtree_control` enable every controller of
/// `wanted` for its children, writing only the missing ones (in one write,
/// so the kernel accepts or refuses them together). Enabling fails with
/// `EBUSY` when `dir` is not the root and holds processes.
pub(crate) fn enable_controllers(
    dir: &Path,
    wanted: &BTreeSet<Controller>,
) -> Result<(), CgroupError> {
    let path = dir.join("cgroup.subtree_control");
    let current = files::read(&path)?;
    let on: BTreeSet<&str> = current.split_whitespace().collect();
    let missing: Vec<String> = wanted
        .iter()
        .filter_map(|c| c.v2_name())
        .filter(|n| !on.contains(n))
        .map(|n| format!("+{n}"))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    files::write(&path, &missing.join(" "))
}

/// Writes and verifies the limits of `plan` for the `controllers` v2 serves
/// into the job's directory `dir`.
pub(crate) fn apply(
    dir: &Path,
    controllers: &BTreeSet<Controller>,
    plan: &Plan,
) -> Result<(), CgroupError> {
    for c in controllers {
        match c {
            Controller::Cpu => {
                if let Some(q) = plan.cpu_quota_us {
                    files::write_verified(&dir.join("cpu.max"), &format!("{q} {CPU_PERIOD_US}"))?;
                }
            }
            Controller::Cpuset => {
                if let Some(cpus) = &plan.cpus {
                    write_cpus(&dir.join("cpuset.cpus"), cpus)?;
                }
            }
            Controller::Memory => {
                if let Some(bytes) = plan.memory_bytes {
                    files::write_verified(&dir.join("memory.max"), &bytes.to_string())?;
                    write_if_present(&dir.join("memory.swap.max"), "0")?;
                    write_if_present(&dir.join("memory.oom.group"), "1")?;
                }
            }
            Controller::Io => {
                if let Some((dev, bps)) = plan.io {
                    let value = format!("{dev} rbps={bps} wbps={bps}");
                    let prefix = format!("{dev} ");
                    files::write_checked(&dir.join("io.max"), &value, |back| {
                        back.lines().any(|l| {
                            l.starts_with(&prefix)
                                && l.split_whitespace().any(|t| t == format!("rbps={bps}"))
                                && l.split_whitespace().any(|t| t == format!("wbps={bps}"))
                        })
                    })?;
                }
            }
            Controller::Pids => {
                files::write_verified(&dir.join("pids.max"), &plan.pids_max.to_string())?;
            }
            Controller::Cpuacct | Controller::Devices | Controller::Freezer => {}
        }
    }
    Ok(())
}

/// Writes a CPU list and checks that the kernel's canonical read-back names
/// the same CPUs.
pub(crate) fn write_cpus(path: &Path, cpus: &[u32]) -> Result<(), CgroupError> {
    let value = format_cpu_list(cpus);
    files::write(path, &value)?;
    let back = files::read(path)?;
    match parse_cpu_list(&back) {
        Ok(got) if got == cpus => Ok(()),
        _ => Err(CgroupError::Verify {
            path: path.to_path_buf(),
            wrote: value,
            read_back: back.trim().to_string(),
        }),
    }
}

fn write_if_present(path: &Path, value: &str) -> Result<(), CgroupError> {
    if path.exists() {
        files::write_verified(path, value)
    } else {
        tracing::debug!(file = %path.display(), "not present on this kernel; not set");
        Ok(())
    }
}

/// How many processes the kernel OOM-killed in the cgroup
/// (`memory.events` `oom_kill`).
pub(crate) fn oom_kills(dir: &Path) -> Result<u64, CgroupError> {
    let path = dir.join("memory.events");
    let content = files::read(&path)?;
    Ok(files::keyed_u64(&path, &content, "oom_kill")?.unwrap_or(0))
}

/// Memory usage and peak (when the kernel has `memory.peak`).
pub(crate) fn memory_stats(dir: &Path, out: &mut CgroupStats) -> Result<(), CgroupError> {
    out.memory_current_bytes = Some(files::read_u64(&dir.join("memory.current"))?);
    let peak = dir.join("memory.peak");
    if peak.exists() {
        out.memory_peak_bytes = Some(files::read_u64(&peak)?);
    }
    out.oom_kills = Some(oom_kills(dir)?);
    Ok(())
}

/// CPU time used, from `cpu.stat` (present in every v2 cgroup).
pub(crate) fn cpu_usage_usec(dir: &Path) -> Result<Option<u64>, CgroupError> {
    let path = dir.join("cpu.stat");
    if !path.exists() {
        return Ok(None);
    }
    let content = files::read(&path)?;
    files::keyed_u64(&path, &content, "usage_usec")
}

/// Kills every process in the cgroup and its descendants at once, if the
/// kernel has `cgroup.kill` (5.14+). `Ok(false)` when it does not.
pub(crate) fn kill(dir: &Path) -> Result<bool, CgroupError> {
    let path = dir.join("cgroup.kill");
    if !path.exists() {
        return Ok(false);
    }
    files::write(&path, "1")?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::iodev::BlockDevice;

    fn fixture(files: &[&str]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        for f in files {
            std::fs::write(tmp.path().join(f), "").unwrap();
        }
        tmp
    }

    fn plan() -> Plan {
        Plan {
            cpu_quota_us: Some(50_000),
            cpus: Some(vec![0, 2, 3]),
            memory_bytes: Some(64 << 20),
            io: Some((BlockDevice { major: 8, minor: 0 }, 1 << 20)),
            pids_max: 10,
        }
    }

    fn all() -> BTreeSet<Controller> {
        [
            Controller::Cpu,
            Controller::Cpuset,
            Controller::Memory,
            Controller::Io,
            Controller::Pids,
        ]
        .into()
    }

    fn read(dir: &Path, f: &str) -> String {
        std::fs::read_to_string(dir.join(f)).unwrap()
    }

    #[test]
    fn writes_each_limit_to_its_file() {
        let t = fixture(&[
            "cpu.max",
            "cpuset.cpus",
            "memory.max",
            "memory.swap.max",
            "memory.oom.group",
            "io.max",
            "pids.max",
        ]);
        apply(t.path(), &all(), &plan()).unwrap();
        assert_eq!(read(t.path(), "cpu.max"), "50000 100000");
        assert_eq!(read(t.path(), "cpuset.cpus"), "0,2-3");
        assert_eq!(read(t.path(), "memory.max"), "67108864");
        assert_eq!(read(t.path(), "memory.swap.max"), "0");
        assert_eq!(read(t.path(), "memory.oom.group"), "1");
        assert_eq!(read(t.path(), "io.max"), "8:0 rbps=1048576 wbps=1048576");
        assert_eq!(read(t.path(), "pids.max"), "10");
    }

    #[test]
    fn absent_limits_leave_files_alone_and_missing_optional_files_are_fine() {
        let t = fixture(&["cpu.max", "memory.max", "pids.max"]);
        let p = Plan {
            cpu_quota_us: None,
            cpus: None,
            io: None,
            ..plan()
        };
        apply(t.path(), &all(), &p).unwrap();
        assert_eq!(read(t.path(), "cpu.max"), "");
        assert_eq!(read(t.path(), "memory.max"), "67108864");
        assert!(!t.path().join("memory.swap.max").exists());
    }

    #[test]
    fn a_missing_controller_file_fails_naming_it() {
        // memory not enabled for the cgroup: no memory.max.
        let t = fixture(&["pids.max"]);
        let err = apply(t.path(), &all(), &plan()).unwrap_err();
        assert!(err.to_string().contains("cpu.max"), "{err}");
        let only_mem: BTreeSet<Controller> = [Controller::Memory].into();
        let err = apply(t.path(), &only_mem, &plan()).unwrap_err();
        assert!(err.to_string().contains("memory.max"), "{err}");
    }

    #[test]
    fn a_value_the_kernel_drops_is_a_verify_error() {
        // Files that swallow writes (like a kernel that did not apply them).
        let t = fixture(&[]);
        for f in ["cpu.max", "cpuset.cpus", "io.max", "pids.max"] {
            std::os::unix::fs::symlink("/dev/null", t.path().join(f)).unwrap();
        }
        for c in [
            Controller::Cpu,
            Controller::Cpuset,
            Controller::Io,
            Controller::Pids,
        ] {
            let err = apply(t.path(), &[c].into(), &plan()).unwrap_err();
            assert!(matches!(err, CgroupError::Verify { .. }), "{c:?}: {err}");
        }
        let err = apply(t.path(), &[Controller::Io].into(), &plan()).unwrap_err();
        assert!(
            err.to_string().contains("8:0 rbps=1048576 wbps=1048576"),
            "{err}"
        );
    }

    #[test]
    fn enable_writes_only_missing_controllers() {
        let t = fixture(&[]);
        let p = t.path().join("cgroup.subtree_control");
        std::fs::write(&p, "cpu memory\n").unwrap();
        enable_controllers(t.path(), &all()).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "+cpuset +io +pids");
        std::fs::write(&p, "cpuset cpu io memory pids\n").unwrap();
        enable_controllers(t.path(), &all()).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "cpuset cpu io memory pids\n"
        );
        let err = enable_controllers(&t.path().join("nope"), &all()).unwrap_err();
        assert!(err.to_string().contains("cgroup.subtree_control"));
    }

    #[test]
    fn oom_kills_and_usage_are_read() {
        let t = fixture(&[]);
        std::fs::write(
            t.path().join("memory.events"),
            "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n",
        )
        .unwrap();
        std::fs::write(t.path().join("memory.current"), "4096\n").unwrap();
        std::fs::write(
            t.path().join("cpu.stat"),
            "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n",
        )
        .unwrap();
        assert_eq!(oom_kills(t.path()).unwrap(), 1);
        let mut s = CgroupStats::default();
        memory_stats(t.path(), &mut s).unwrap();
        assert_eq!(s.memory_current_bytes, Some(4096));
        assert_eq!(s.memory_peak_bytes, None);
        assert_eq!(s.oom_kills, Some(1));
        assert_eq!(cpu_usage_usec(t.path()).unwrap(), Some(1500));
    }

    #[test]
    fn kill_writes_one_when_available() {
        let t = fixture(&[]);
        assert!(!kill(t.path()).unwrap());
        std::fs::write(t.path().join("cgroup.kill"), "").unwrap();
        assert!(kill(t.path()).unwrap());
        assert_eq!(read(t.path(), "cgroup.kill"), "1");
    }
}
