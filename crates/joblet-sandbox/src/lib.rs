//! Joblet's job sandbox, built from kernel features only (no container
//! runtime):
//!
//! - [`cgroup`]: cgroup v1 and v2 behind one interface, detected at start
//!   (unified, hybrid, legacy): CPU quota, cpuset, memory (+ OOM reporting),
//!   IO throttling on the device that backs the job, pids; cleanup that leaves
//!   nothing behind.
//! - [`devices`]: the job's device allow-list (default deny) as one rule
//!   list, applied as v1 `devices.deny`/`devices.allow` and as a v2
//!   `BPF_PROG_TYPE_CGROUP_DEVICE` program generated from the same rules.
//! - [`init`]: the process that becomes the job: new namespaces, a
//!   pivot_root'ed filesystem of read-only host mounts, a minimal `/dev`,
//!   private `/tmp` and `/work`, dropped capabilities, `no_new_privs`,
//!   an unprivileged uid and a seccomp filter, then `exec`.
//!
//! - [`runner`]: the three put together as the shim's `Runner`, in the
//!   order that never lets a job run outside its limits; [`mount_table`]
//!   tells it cheaply whether a warm sandbox still matches the host.
//! - [`oci`]: the same settings carried out by an OCI runtime (runc, crun,
//!   runsc) instead, for a job whose executor is one: a bundle built from
//!   them, and the runtime's create/start/delete under the same shim.
//!
//! The package also builds `joblet-shim` (`src/bin/joblet-shim.rs`), the
//! binary each job's shim and sandbox init run as: the shim library and
//! this one, linked for a fast start by `build.rs`.
//!
//! Every part fails closed: a limit, filter or mount that cannot be applied
//! is an error and the job does not start. Kernel filesystems are reached
//! through root paths given as parameters so tests can use temp dirs.
//! Must not depend on the scheduler, the store or the daemon.

pub mod cgroup;
pub mod devices;
pub mod init;
pub mod mount_table;
pub mod oci;
pub mod runner;

pub use runner::{JobSandbox, SandboxRunner};
