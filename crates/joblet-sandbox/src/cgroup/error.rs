//! Errors of the cgroup module: each names the file, directory or limit
//! involved and what to do about it.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong while detecting, creating, filling,
/// watching or removing a job's cgroups.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("cannot read {path}: {source}; is /proc mounted and readable?")]
    ReadMountInfo { path: PathBuf, source: io::Error },

    #[error("{path} line {line}: {reason}; this is not a mountinfo file the kernel wrote")]
    MountInfoLine {
        path: PathBuf,
        line: usize,
        reason: String,
    },

    #[error("no cgroup or cgroup2 filesystem is mounted according to {path}; mount cgroup2 at /sys/fs/cgroup (or the v1 controllers) before starting joblet")]
    NoCgroupMounts { path: PathBuf },

    #[error("{path} line {line}: {reason}; expected `<id>:<controllers>:<path>` lines as in /proc/self/cgroup")]
    ProcCgroupLine {
        path: PathBuf,
        line: usize,
        reason: String,
    },

    #[error(
        "{path} does not list the {hierarchy} hierarchy, so the current cgroup there is unknown"
    )]
    ProcCgroupMissing { path: PathBuf, hierarchy: String },

    #[error("invalid cgroup {what} {value:?}: {reason}")]
    InvalidName {
        what: &'static str,
        value: String,
        reason: &'static str,
    },

    #[error("invalid limit {field} = {value}: {reason}")]
    InvalidLimit {
        field: &'static str,
        value: String,
        reason: &'static str,
    },

    #[error("{limit} needs the {controller} controller, which this host offers neither in cgroup v2 ({unified}) nor as a mounted cgroup v1 hierarchy; the job was not started — enable the controller or drop the limit")]
    ControllerUnavailable {
        limit: &'static str,
        controller: &'static str,
        unified: String,
    },

    #[error("io limit: {path} is on device {major}:{minor}, which is not a block device ({sysfs_entry} does not exist: tmpfs, overlay, btrfs subvolumes and network filesystems have none); the IO limit cannot be applied, so the job was not started — put the work directory on a block-device filesystem or drop the IO limit")]
    NoBlockDevice {
        path: PathBuf,
        major: u32,
        minor: u32,
        sysfs_entry: PathBuf,
    },

    #[error("cannot stat {path}: {source}")]
    Stat { path: PathBuf, source: io::Error },

    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },

    #[error("cannot open {path} for the sandbox init to enter the job's cgroup: {source}; the job was not started")]
    Open { path: PathBuf, source: io::Error },

    #[error("cannot write {value:?} to {path}: {source}")]
    Write {
        path: PathBuf,
        value: String,
        source: io::Error,
    },

    #[error("wrote {wrote:?} to {path} but it reads back {read_back:?}; the kernel did not apply the limit, so the job was not started")]
    Verify {
        path: PathBuf,
        wrote: String,
        read_back: String,
    },

    #[error("cannot parse {path}: {reason} (content {content:?})")]
    Parse {
        path: PathBuf,
        content: String,
        reason: &'static str,
    },

    #[error("cannot create cgroup directory {path}: {source}")]
    Mkdir { path: PathBuf, source: io::Error },

    #[error("cgroup directory {path} already exists and holds processes {pids:?}; another job or a leftover uses this name — destroy it first")]
    Busy { path: PathBuf, pids: Vec<i32> },

    #[error("cannot list cgroup directory {path}: {source}")]
    ListDir { path: PathBuf, source: io::Error },

    #[error("cannot send SIGKILL to pid {pid} of {path}: {source}")]
    Kill {
        pid: i32,
        path: PathBuf,
        source: nix::errno::Errno,
    },

    #[error("processes {pids:?} are still in {path} {waited_ms} ms after being killed (stuck in uninterruptible sleep?); the cgroup was left in place — retry destroy later")]
    KillTimeout {
        path: PathBuf,
        pids: Vec<i32>,
        waited_ms: u64,
    },

    #[error("cannot remove cgroup directory {path}: {source}; it may still hold processes or child cgroups")]
    Remove { path: PathBuf, source: io::Error },
}
