//! A job's resource limits, their validation, and the resolved values the
//! v1 and v2 writers put into interface files.

use std::path::{Path, PathBuf};

use super::error::CgroupError;
use super::iodev::{self, BlockDevice};

/// The CFS period joblet uses: 100 ms, so 1 % of a CPU is 1000 µs of quota
/// (the kernel's minimum quota).
pub const CPU_PERIOD_US: u64 = 100_000;

/// A job's resource limits. `None` = not limited; `pids_max` is always set.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// CPU time in percent of one CPU (100 = one core, 250 = two and a
    /// half): v2 `cpu.max` `"<quota> 100000"`, v1 `cpu.cfs_quota_us` and
    /// `cpu.cfs_period_us`.
    pub cpu_percent: Option<u32>,
    /// CPUs the job may run on: `cpuset.cpus` (v1 also gets the parent's
    /// `cpuset.mems`, which it needs before tasks can join).
    pub cpuset: Option<Vec<u32>>,
    /// Memory in MiB: v2 `memory.max` plus `memory.swap.max = 0` and
    /// `memory.oom.group = 1` where present; v1 `memory.limit_in_bytes` plus
    /// `memory.memsw.limit_in_bytes` (same value: no swap) where present.
    /// No `memory.high`: the limit is a hard cap that ends in an OOM kill
    /// the job is told about, not throttling below it.
    pub memory_mb: Option<u64>,
    /// Read and write bytes per second on the disk backing `io_path`:
    /// v2 `io.max`, v1 `blkio.throttle.{read,write}_bps_device`.
    pub io_bps: Option<u64>,
    /// The job's work directory: the filesystem whose disk `io_bps` limits.
    /// Required with `io_bps`; ignored without it.
    pub io_path: Option<PathBuf>,
    /// Maximum number of tasks (processes and threads) in the job.
    pub pids_max: u64,
}

/// Where the kernel filesystems the cgroup code reads live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupRoots {
    /// Normally `/proc/self/mountinfo`.
    pub mountinfo: PathBuf,
    /// Normally `/sys` (block devices are looked up in `<sysfs>/dev/block`).
    pub sysfs: PathBuf,
}

impl Default for CgroupRoots {
    fn default() -> Self {
        CgroupRoots {
            mountinfo: PathBuf::from("/proc/self/mountinfo"),
            sysfs: PathBuf::from("/sys"),
        }
    }
}

/// Limits resolved to the values written into interface files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// CFS quota in µs per [`CPU_PERIOD_US`].
    pub cpu_quota_us: Option<u64>,
    /// Sorted, deduplicated CPU numbers.
    pub cpus: Option<Vec<u32>>,
    pub memory_bytes: Option<u64>,
    pub io: Option<(BlockDevice, u64)>,
    pub pids_max: u64,
}

impl Limits {
    /// Checks the values without touching the system.
    pub fn validate(&self) -> Result<(), CgroupError> {
        let bad = |field, value: String, reason| CgroupError::InvalidLimit {
            field,
            value,
            reason,
        };
        if let Some(p) = self.cpu_percent {
            if p == 0 {
                return Err(bad(
                    "cpu_percent",
                    p.to_string(),
                    "must be at least 1 (percent of one CPU); use None for no limit",
                ));
            }
        }
        if let Some(cpus) = &self.cpuset {
            if cpus.is_empty() {
                return Err(bad(
                    "cpuset",
                    "[]".to_string(),
                    "must name at least one CPU; use None for all CPUs",
                ));
            }
        }
        if let Some(mb) = self.memory_mb {
            if mb == 0 || mb > u64::MAX / (1024 * 1024) {
                return Err(bad(
                    "memory_mb",
                    mb.to_string(),
                    "must be at least 1 MiB and fit in bytes; use None for no limit",
                ));
            }
        }
        if let Some(bps) = self.io_bps {
            if bps == 0 {
                // The kernel reads 0 as "remove the limit" in v1.
                return Err(bad(
                    "io_bps",
                    bps.to_string(),
                    "must be at least 1 byte per second; use None for no limit",
                ));
            }
            if self.io_path.is_none() {
                return Err(bad(
                    "io_bps",
                    bps.to_string(),
                    "needs io_path: the directory whose disk is throttled",
                ));
            }
        }
        if self.pids_max == 0 {
            return Err(bad(
                "pids_max",
                "0".to_string(),
                "must be at least 1 (the job's first process)",
            ));
        }
        Ok(())
    }

    /// Validates and resolves the limits; the IO limit's disk is looked up
    /// under `sysfs`.
    pub(crate) fn plan(&self, sysfs: &Path) -> Result<Plan, CgroupError> {
        self.validate()?;
        let io = match (self.io_bps, &self.io_path) {
            (Some(bps), Some(path)) => Some((iodev::block_device_for(path, sysfs)?, bps)),
            _ => None,
        };
        let cpus = self.cpuset.as_ref().map(|c| {
            let mut c = c.clone();
            c.sort_unstable();
            c.dedup();
            c
        });
        Ok(Plan {
            cpu_quota_us: self.cpu_percent.map(|p| u64::from(p) * CPU_PERIOD_US / 100),
            cpus,
            memory_bytes: self.memory_mb.map(|mb| mb * 1024 * 1024),
            io,
            pids_max: self.pids_max,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Limits {
        Limits {
            pids_max: 100,
            ..Limits::default()
        }
    }

    #[test]
    fn plan_converts_units() {
        let l = Limits {
            cpu_percent: Some(50),
            cpuset: Some(vec![3, 1, 1, 2]),
            memory_mb: Some(512),
            ..base()
        };
        let p = l.plan(Path::new("/nonexistent")).unwrap();
        assert_eq!(p.cpu_quota_us, Some(50_000));
        assert_eq!(p.cpus, Some(vec![1, 2, 3]));
        assert_eq!(p.memory_bytes, Some(512 * 1024 * 1024));
        assert_eq!(p.io, None);
        assert_eq!(p.pids_max, 100);
        let two_and_a_half = Limits {
            cpu_percent: Some(250),
            ..base()
        };
        assert_eq!(
            two_and_a_half.plan(Path::new("/x")).unwrap().cpu_quota_us,
            Some(250_000)
        );
    }

    #[test]
    fn invalid_limits_name_the_field() {
        let cases: Vec<(Limits, &str)> = vec![
            (
                Limits {
                    cpu_percent: Some(0),
                    ..base()
                },
                "cpu_percent",
            ),
            (
                Limits {
                    cpuset: Some(vec![]),
                    ..base()
                },
                "cpuset",
            ),
            (
                Limits {
                    memory_mb: Some(0),
                    ..base()
                },
                "memory_mb",
            ),
            (
                Limits {
                    io_bps: Some(0),
                    io_path: Some("/".into()),
                    ..base()
                },
                "io_bps",
            ),
            (
                Limits {
                    io_bps: Some(1000),
                    ..base()
                },
                "io_path",
            ),
            (Limits::default(), "pids_max"),
        ];
        for (l, needle) in cases {
            let err = l.validate().unwrap_err();
            assert!(err.to_string().contains(needle), "{needle}: {err}");
        }
        base().validate().unwrap();
    }

    #[test]
    fn io_on_a_filesystem_without_a_block_device_fails_closed() {
        let tmp = tempfile::tempdir().unwrap();
        let empty_sysfs = tempfile::tempdir().unwrap();
        let l = Limits {
            io_bps: Some(1 << 20),
            io_path: Some(tmp.path().to_path_buf()),
            ..base()
        };
        let err = l.plan(empty_sysfs.path()).unwrap_err();
        assert!(matches!(err, CgroupError::NoBlockDevice { .. }), "{err}");
        assert!(err.to_string().contains(&tmp.path().display().to_string()));
    }
}
