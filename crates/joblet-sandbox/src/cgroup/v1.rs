//! cgroup v1 interface files: cpuset initialisation (a new v1 cpuset is
//! empty and refuses tasks until `cpuset.cpus` and `cpuset.mems` are set),
//! writing and verifying limits, OOM kills, usage, and killing through the
//! freezer. Every function takes the cgroup directory as a parameter.

use std::path::Path;
use std::time::{Duration, Instant};

use super::error::CgroupError;
use super::files;
use super::layout::Controller;
use super::limits::{Plan, CPU_PERIOD_US};
use super::{v2, CgroupStats};

/// Gives the v1 cpuset directory `dir` its CPUs (`cpus`, or the parent's
/// when `None` and `dir` has none yet) and the parent's memory nodes when
/// it has none yet.
pub(crate) fn init_cpuset(dir: &Path, cpus: Option<&[u32]>) -> Result<(), CgroupError> {
    let parent = dir.parent().unwrap_or(dir);
    match cpus {
        Some(list) => v2::write_cpus(&dir.join("cpuset.cpus"), list)?,
        None => inherit(dir, parent, "cpuset.cpus")?,
    }
    inherit(dir, parent, "cpuset.mems")
}

/// Copies `parent/file` into `dir/file` when the latter is empty.
fn inherit(dir: &Path, parent: &Path, file: &str) -> Result<(), CgroupError> {
    let own = dir.join(file);
    if !files::read(&own)?.trim().is_empty() {
        return Ok(());
    }
    let from = parent.join(file);
    let value = files::read(&from)?;
    let value = value.trim();
    if value.is_empty() {
        return Err(CgroupError::Parse {
            path: from,
            content: String::new(),
            reason: "the parent cpuset is empty, so a child cannot get CPUs or memory nodes; give it some first",
        });
    }
    files::write_verified(&own, value)
}

/// Writes and verifies the limits of `plan` for the `controllers` of one v1
/// hierarchy into the job's directory `dir` there.
pub(crate) fn apply(
    dir: &Path,
    controllers: &[Controller],
    plan: &Plan,
) -> Result<(), CgroupError> {
    for c in controllers {
        match c {
            Controller::Cpu => {
                if let Some(q) = plan.cpu_quota_us {
                    files::write_verified(
                        &dir.join("cpu.cfs_period_us"),
                        &CPU_PERIOD_US.to_string(),
                    )?;
                    files::write_verified(&dir.join("cpu.cfs_quota_us"), &q.to_string())?;
                }
            }
            Controller::Cpuset => init_cpuset(dir, plan.cpus.as_deref())?,
            Controller::Memory => {
                if let Some(bytes) = plan.memory_bytes {
                    // memsw must stay >= the memory limit, so set the memory
                    // limit first (a new cgroup starts unlimited in both).
                    files::write_verified(&dir.join("memory.limit_in_bytes"), &bytes.to_string())?;
                    let memsw = dir.join("memory.memsw.limit_in_bytes");
                    if memsw.exists() {
                        files::write_verified(&memsw, &bytes.to_string())?;
                    } else {
                        tracing::warn!(
                            dir = %dir.display(),
                            "no memory.memsw.limit_in_bytes (swap accounting off): swap is not limited"
                        );
                    }
                }
            }
            Controller::Io => {
                if let Some((dev, bps)) = plan.io {
                    for f in [
                        "blkio.throttle.read_bps_device",
                        "blkio.throttle.write_bps_device",
                    ] {
                        let value = format!("{dev} {bps}");
                        files::write_checked(&dir.join(f), &value, |back| {
                            back.lines().any(|l| l.trim() == value)
                        })?;
                    }
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

/// OOM kills in the cgroup: `oom_kill` of `memory.oom_control` (4.13+);
/// on older kernels, whether the limit was ever hit (`memory.failcnt`),
/// which is the closest v1 gives.
pub(crate) fn oom_kills(dir: &Path) -> Result<u64, CgroupError> {
    let path = dir.join("memory.oom_control");
    let content = files::read(&path)?;
    match files::keyed_u64(&path, &content, "oom_kill")? {
        Some(n) => Ok(n),
        None => Ok(u64::from(files::read_u64(&dir.join("memory.failcnt"))? > 0)),
    }
}

/// Memory usage and peak.
pub(crate) fn memory_stats(dir: &Path, out: &mut CgroupStats) -> Result<(), CgroupError> {
    out.memory_current_bytes = Some(files::read_u64(&dir.join("memory.usage_in_bytes"))?);
    out.memory_peak_bytes = Some(files::read_u64(&dir.join("memory.max_usage_in_bytes"))?);
    out.oom_kills = Some(oom_kills(dir)?);
    Ok(())
}

/// CPU time used in µs (`cpuacct.usage` is in ns).
pub(crate) fn cpu_usage_usec(dir: &Path) -> Result<u64, CgroupError> {
    Ok(files::read_u64(&dir.join("cpuacct.usage"))? / 1000)
}

/// The freezer state (`THAWED`, `FREEZING`, `FROZEN`).
fn freezer_state(dir: &Path) -> Result<String, CgroupError> {
    Ok(files::read(&dir.join("freezer.state"))?.trim().to_string())
}

/// Freezes the cgroup so its processes can neither fork nor exit while
/// they are being killed; waits up to `wait` for `FROZEN`. `Ok(false)` when
/// it did not get there in time (it stays `FREEZING`; thaw it anyway).
pub(crate) fn freeze(dir: &Path, wait: Duration) -> Result<bool, CgroupError> {
    files::write(&dir.join("freezer.state"), "FROZEN")?;
    let deadline = Instant::now() + wait;
    loop {
        if freezer_state(dir)? == "FROZEN" {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Thaws the cgroup (killed processes only die once thawed).
pub(crate) fn thaw(dir: &Path) -> Result<(), CgroupError> {
    files::write(&dir.join("freezer.state"), "THAWED")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::iodev::BlockDevice;

    fn plan() -> Plan {
        Plan {
            cpu_quota_us: Some(50_000),
            cpus: Some(vec![1]),
            memory_bytes: Some(64 << 20),
            io: Some((
                BlockDevice {
                    major: 254,
                    minor: 0,
                },
                2 << 20,
            )),
            pids_max: 10,
        }
    }

    fn mk(dir: &Path, files: &[(&str, &str)]) {
        std::fs::create_dir_all(dir).unwrap();
        for (f, v) in files {
            std::fs::write(dir.join(f), v).unwrap();
        }
    }

    fn read(dir: &Path, f: &str) -> String {
        std::fs::read_to_string(dir.join(f)).unwrap()
    }

    #[test]
    fn writes_each_limit_to_its_file() {
        let t = tempfile::tempdir().unwrap();
        let parent = t.path();
        mk(parent, &[("cpuset.cpus", "0-3\n"), ("cpuset.mems", "0\n")]);
        let d = parent.join("job");
        mk(
            &d,
            &[
                ("cpu.cfs_period_us", "100000"),
                ("cpu.cfs_quota_us", "-1"),
                ("cpuset.cpus", ""),
                ("cpuset.mems", ""),
                ("memory.limit_in_bytes", ""),
                ("memory.memsw.limit_in_bytes", ""),
                ("blkio.throttle.read_bps_device", ""),
                ("blkio.throttle.write_bps_device", ""),
                ("pids.max", "max"),
            ],
        );
        let all = [
            Controller::Cpu,
            Controller::Cpuacct,
            Controller::Cpuset,
            Controller::Memory,
            Controller::Io,
            Controller::Pids,
        ];
        apply(&d, &all, &plan()).unwrap();
        assert_eq!(read(&d, "cpu.cfs_period_us"), "100000");
        assert_eq!(read(&d, "cpu.cfs_quota_us"), "50000");
        assert_eq!(read(&d, "cpuset.cpus"), "1");
        assert_eq!(read(&d, "cpuset.mems"), "0");
        assert_eq!(read(&d, "memory.limit_in_bytes"), "67108864");
        assert_eq!(read(&d, "memory.memsw.limit_in_bytes"), "67108864");
        assert_eq!(read(&d, "blkio.throttle.read_bps_device"), "254:0 2097152");
        assert_eq!(read(&d, "blkio.throttle.write_bps_device"), "254:0 2097152");
        assert_eq!(read(&d, "pids.max"), "10");
    }

    #[test]
    fn cpuset_without_a_limit_inherits_the_parent() {
        let t = tempfile::tempdir().unwrap();
        mk(
            t.path(),
            &[("cpuset.cpus", "0-1\n"), ("cpuset.mems", "0\n")],
        );
        let d = t.path().join("base");
        mk(&d, &[("cpuset.cpus", "\n"), ("cpuset.mems", "\n")]);
        init_cpuset(&d, None).unwrap();
        assert_eq!(read(&d, "cpuset.cpus"), "0-1");
        assert_eq!(read(&d, "cpuset.mems"), "0");
        // Already set: left alone.
        std::fs::write(d.join("cpuset.cpus"), "1\n").unwrap();
        init_cpuset(&d, None).unwrap();
        assert_eq!(read(&d, "cpuset.cpus"), "1\n");
    }

    #[test]
    fn an_empty_parent_cpuset_is_an_error_naming_it() {
        let t = tempfile::tempdir().unwrap();
        mk(t.path(), &[("cpuset.cpus", "\n"), ("cpuset.mems", "\n")]);
        let d = t.path().join("base");
        mk(&d, &[("cpuset.cpus", ""), ("cpuset.mems", "")]);
        let err = init_cpuset(&d, None).unwrap_err();
        assert!(err.to_string().contains("cpuset.cpus"), "{err}");
    }

    #[test]
    fn memory_without_memsw_still_applies() {
        let t = tempfile::tempdir().unwrap();
        mk(t.path(), &[("memory.limit_in_bytes", "")]);
        apply(t.path(), &[Controller::Memory], &plan()).unwrap();
        assert_eq!(read(t.path(), "memory.limit_in_bytes"), "67108864");
    }

    #[test]
    fn a_dropped_throttle_is_a_verify_error() {
        let t = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/dev/null", t.path().join("blkio.throttle.read_bps_device"))
            .unwrap();
        let err = apply(t.path(), &[Controller::Io], &plan()).unwrap_err();
        assert!(matches!(err, CgroupError::Verify { .. }), "{err}");
    }

    #[test]
    fn oom_kill_count_with_and_without_the_oom_kill_line() {
        let t = tempfile::tempdir().unwrap();
        mk(
            t.path(),
            &[
                (
                    "memory.oom_control",
                    "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
                ),
                ("memory.failcnt", "0\n"),
            ],
        );
        assert_eq!(oom_kills(t.path()).unwrap(), 2);
        mk(
            t.path(),
            &[
                ("memory.oom_control", "oom_kill_disable 0\nunder_oom 0\n"),
                ("memory.failcnt", "5\n"),
            ],
        );
        assert_eq!(oom_kills(t.path()).unwrap(), 1);
    }

    #[test]
    fn cpu_usage_is_converted_to_microseconds() {
        let t = tempfile::tempdir().unwrap();
        mk(t.path(), &[("cpuacct.usage", "2500000\n")]);
        assert_eq!(cpu_usage_usec(t.path()).unwrap(), 2500);
    }

    #[test]
    fn freeze_waits_for_frozen_and_thaw_writes_thawed() {
        let t = tempfile::tempdir().unwrap();
        mk(t.path(), &[("freezer.state", "THAWED\n")]);
        // A plain file reads back what was written: FROZEN at once.
        assert!(freeze(t.path(), Duration::from_millis(50)).unwrap());
        thaw(t.path()).unwrap();
        assert_eq!(read(t.path(), "freezer.state"), "THAWED");
    }
}
