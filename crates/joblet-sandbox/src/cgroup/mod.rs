//! cgroups v1 and v2 behind one interface.
//!
//! [`Layout::detect`] reads `/proc/self/mountinfo` (a parameter) and says
//! which hierarchies exist: pure v2 ([`Layout::Unified`]), v1 controllers
//! plus a cgroup2 tree ([`Layout::Hybrid`]) or v1 only ([`Layout::Legacy`]).
//! A controller listed in the cgroup2 root's `cgroup.controllers` is served
//! by v2, otherwise by v1 where mounted ([`Layout::placement`]).
//!
//! [`JobCgroup::create`] makes `<base>/<name>` in every hierarchy (each v1
//! hierarchy and always the cgroup2 tree, where the v2 device filter
//! attaches), writes the [`Limits`] into the serving version's files and
//! reads each one back. Anything that cannot be applied is an error and
//! nothing is left behind. [`JobCgroup::destroy`] kills what is left
//! (`cgroup.kill`, or SIGKILL under the v1 freezer) and removes the
//! directories; [`cleanup_stale`] removes empty leftovers at start-up.
//!
//! `base` is relative to each hierarchy's root (the mountpoint), like the
//! cgroupfs driver of runc and containerd. To nest job cgroups under the
//! caller's own cgroups instead (say, to stay inside a memory cgroup a
//! supervisor put the daemon in), use the layout from
//! [`Layout::nested_in`]. All paths come from the layout and
//! [`CgroupRoots`], so tests run against temp-dir trees.

mod error;
mod files;
mod iodev;
mod job;
mod layout;
mod limits;
mod stale;
mod v1;
mod v2;

pub use error::CgroupError;
pub use iodev::{block_device_for, whole_disk, BlockDevice};
pub use job::JobCgroup;
pub use layout::{Controller, Layout, Placement, Support, Version};
pub use limits::{CgroupRoots, Limits, CPU_PERIOD_US};
pub use stale::cleanup_stale;

/// Usage figures of a job's cgroups; `None` where no serving controller
/// reports the figure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupStats {
    /// v2 `memory.current`, v1 `memory.usage_in_bytes`.
    pub memory_current_bytes: Option<u64>,
    /// v2 `memory.peak` (5.19+), v1 `memory.max_usage_in_bytes`.
    pub memory_peak_bytes: Option<u64>,
    /// v1 `cpuacct.usage` (ns / 1000), else v2 `cpu.stat` `usage_usec`.
    pub cpu_usage_usec: Option<u64>,
    /// `pids.current`.
    pub pids_current: Option<u64>,
    /// OOM kills (see [`JobCgroup::oom_killed`]).
    pub oom_kills: Option<u64>,
}

/// What a sandbox runner needs from a job's cgroups once they exist,
/// whichever cgroup versions serve them; [`JobCgroup`] is the real one,
/// tests of a runner may substitute their own.
pub trait CgroupManager {
    /// Moves a process into the job's cgroups.
    fn add_pid(&self, pid: i32) -> Result<(), CgroupError>;
    /// The processes in the job.
    fn pids(&self) -> Result<Vec<i32>, CgroupError>;
    /// Whether the kernel OOM-killed one of the job's processes.
    fn oom_killed(&self) -> Result<bool, CgroupError>;
    /// Usage figures.
    fn stats(&self) -> Result<CgroupStats, CgroupError>;
    /// Kills every process of the job and waits until none is left.
    fn kill_all(&self) -> Result<(), CgroupError>;
    /// Removes the job's (empty) directories.
    fn remove(&self) -> Result<(), CgroupError>;
}

#[cfg(test)]
mod tests;
