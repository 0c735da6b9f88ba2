//! The one error type of the device filter: every variant names the path,
//! rule or syscall involved so the job's failure says what to fix.

use std::io;
use std::path::PathBuf;

use nix::errno::Errno;

/// Why a device rule could not be parsed or applied. Applying fails closed:
/// any of these means the job must not start.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// A rule or access string did not follow `TYPE MAJOR:MINOR ACCESS`.
    #[error("invalid device rule {input:?}: expected {expected}")]
    Parse {
        /// The text that was given.
        input: String,
        /// What was expected instead.
        expected: &'static str,
    },

    /// Writing one line to a cgroup v1 `devices.deny` / `devices.allow`.
    #[error("writing {line:?} to {}: {source} (is this a cgroup v1 devices directory without child cgroups, and are we root?)", path.display())]
    V1Write {
        /// The interface file.
        path: PathBuf,
        /// The line written.
        line: String,
        /// What the kernel answered.
        #[source]
        source: io::Error,
    },

    /// Reading back a cgroup v1 `devices.list`.
    #[error("reading {}: {source}", path.display())]
    V1Read {
        /// The interface file.
        path: PathBuf,
        /// What the kernel answered.
        #[source]
        source: io::Error,
    },

    /// `devices.list` does not hold exactly the rules written: the kernel
    /// did not take them (or someone else changed them), so the job's
    /// devices are not what we promised.
    #[error("{} holds {found:?} but the rules written were {expected:?}; refusing to run the job with a device list we did not set", path.display())]
    V1Mismatch {
        /// The `devices.list` file.
        path: PathBuf,
        /// The rules we wrote, one `devices.list` line each.
        expected: String,
        /// What the kernel listed.
        found: String,
    },

    /// Opening the cgroup directory to attach or detach a program.
    #[error("opening cgroup directory {}: {source}", path.display())]
    CgroupOpen {
        /// The directory.
        path: PathBuf,
        /// Why it could not be opened.
        #[source]
        source: io::Error,
    },

    /// `bpf(BPF_PROG_LOAD)` refused the generated program.
    #[error("bpf(BPF_PROG_LOAD) of the {insns}-instruction device program failed: {errno}; verifier log: {verifier_log:?}")]
    BpfLoad {
        /// The kernel's answer.
        errno: Errno,
        /// Number of instructions in the program.
        insns: usize,
        /// The verifier's explanation (empty when the kernel gave none,
        /// e.g. EPERM for a caller without CAP_BPF/CAP_SYS_ADMIN).
        verifier_log: String,
    },

    /// `bpf(BPF_PROG_ATTACH)` failed.
    #[error("bpf(BPF_PROG_ATTACH, BPF_CGROUP_DEVICE) to {} failed: {errno} (EBADF: not a cgroup v2 directory)", path.display())]
    BpfAttach {
        /// The cgroup directory.
        path: PathBuf,
        /// The kernel's answer.
        errno: Errno,
    },

    /// `bpf(BPF_PROG_DETACH)` failed.
    #[error("bpf(BPF_PROG_DETACH, BPF_CGROUP_DEVICE) from {} failed: {errno} (ENOENT: the program is not attached there)", path.display())]
    BpfDetach {
        /// The cgroup directory.
        path: PathBuf,
        /// The kernel's answer.
        errno: Errno,
    },

    /// `bpf(BPF_PROG_QUERY)` failed.
    #[error("bpf(BPF_PROG_QUERY, BPF_CGROUP_DEVICE) on {} failed: {errno}", path.display())]
    BpfQuery {
        /// The cgroup directory.
        path: PathBuf,
        /// The kernel's answer.
        errno: Errno,
    },

    /// `bpf(BPF_MAP_CREATE)` of the device table failed.
    #[error("bpf(BPF_MAP_CREATE) of the device table ({capacity} entries) failed: {errno}")]
    BpfMapCreate {
        /// Entries asked for.
        capacity: u32,
        /// The kernel's answer.
        errno: Errno,
    },

    /// Adding a device to the table failed.
    #[error("bpf(BPF_MAP_UPDATE_ELEM) adding {rule} to the device table failed: {errno}")]
    BpfMapUpdate {
        /// The rule (in v1 syntax).
        rule: String,
        /// The kernel's answer.
        errno: Errno,
    },

    /// Reading the device table back failed.
    #[error("reading the device table back failed: {errno}")]
    BpfMapRead {
        /// The kernel's answer.
        errno: Errno,
    },

    /// The table does not hold what was written.
    #[error("the device table holds {found:?} but the rules written were {expected:?}; refusing to run the job with a device list we did not set")]
    TableMismatch {
        /// What was written, `type major:minor bits` per entry.
        expected: Vec<String>,
        /// What the kernel holds.
        found: Vec<String>,
    },

    /// The filter cannot take these rules in its table.
    #[error("the device filter {why}: it cannot be extended by {rules:?}")]
    TableRefused {
        /// The rules asked for.
        rules: Vec<String>,
        /// Why not (no table, full, a rule not naming one device).
        why: &'static str,
    },

    /// `bpf(BPF_OBJ_GET_INFO_BY_FD)` on our own program failed.
    #[error("bpf(BPF_OBJ_GET_INFO_BY_FD) on the loaded device program failed: {errno}")]
    BpfInfo {
        /// The kernel's answer.
        errno: Errno,
    },
}
