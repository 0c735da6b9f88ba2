//! The per-job shim and the daemon's handle on it.
//!
//! One shim process runs per job (the containerd-shim / conmon model). It is
//! the job's parent: it starts the job through a [`Runner`], captures its
//! stdout/stderr into `output.log`, enforces the timeout, carries out stop and
//! kill requests arriving on `control.sock`, and records how the job ended in
//! `exit.json` (then tells the daemon through a pipe, then removes what its
//! runner set up, and exits). Everything it needs is in its job directory
//! ([`JobDir`]), so a daemon killed with `kill -9` leaves shims and jobs
//! running and a restarted daemon reattaches ([`reattach`]).
//!
//! The two halves:
//! - shim side (blocking threads, no async runtime): [`run_shim`], [`Runner`],
//!   [`HostRunner`];
//! - daemon side (tokio): [`launch`], [`reattach`], [`ShimHandle::wait`],
//!   [`read_exit`], [`request_stop`], [`request_kill`], [`LogReader`].
//!
//! "Shim alive" is defined by a `flock` on `shim.lock` that the shim holds for
//! its whole life, never by a pid, so pid reuse and a daemon crash between
//! spawn and bookkeeping cannot confuse it.
//!
//! This crate must not depend on the daemon's store, the gRPC API or TLS; the
//! only domain type it shares is the log framing of `joblet_core::joblog`.

mod atomic;
mod control_client;
mod error;
pub mod fence;
mod handle;
mod inherited_fds;
pub mod input;
mod jobdir;
mod launch;
pub mod logread;
mod pidfd;
mod priority;
pub mod pty;
pub use priority::set_own_policy;
pub mod procstat;
mod reap;
pub mod runner;
pub mod shim;
mod signal_defaults;
mod spawn;
pub mod spec;
mod tty;

pub use control_client::{request_kill, request_state, request_stop};
pub use error::ShimError;
pub use handle::{read_exit, ShimHandle};
pub use inherited_fds::Fd3Error;
pub use jobdir::JobDir;
pub use launch::{launch, launch_warm, reattach, WarmBuild, WarmReady, WarmShim};
pub use logread::{output_bytes, LogReader};
pub use runner::{HostRunner, JobIo, PreparedLeader, Runner, RunnerError};
pub use shim::{remove_shim_files, run_shim, run_shim_with, run_warm_shim_with, ShimRunError};
pub use spec::{Outcome, PidRecord, ShimExit, ShimSpec, WarmSpec};
