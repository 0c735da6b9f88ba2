//! The sandbox as the shim's [`Runner`]: cgroup, device filter and init put
//! together in the one order that never lets a job run outside its limits.
//!
//! 1. start the sandbox init: it builds the namespaces and most of the
//!    filesystem on its own, then blocks (nothing of the job runs yet);
//! 2. meanwhile create the job's cgroup with every limit (read back);
//! 3. apply the device allow-list to it: v1 `devices.*` files and the v2
//!    eBPF filter, each one that exists (none at all is an error);
//! 4. move the init into the cgroup and release it: cgroup namespace,
//!    pid 1, `/proc`, privileges, seccomp, `exec`.
//!
//! Any failure undoes what was done (the init is killed, the cgroup
//! removed) and the job does not start. After the job, [`Runner::finish`]
//! asks the cgroup why the job died (OOM) and removes it.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Mutex;

use joblet_shim::{HostRunner, Runner, RunnerError, ShimSpec};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::cgroup::{CgroupRoots, JobCgroup, Layout, Limits};
use crate::devices::{bpf, v1 as devices_v1, AttachedFilter, DeviceRules};
use crate::init::{self, InitConfig};

/// The daemon's decisions for one job, carried in `ShimSpec::runner`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct JobSandbox {
    /// The daemon's subtree in every cgroup hierarchy (e.g. `joblet`).
    pub cgroup_base: String,
    /// The job's own cgroup under it (the job id).
    pub cgroup_name: String,
    pub limits: Limits,
    pub devices: DeviceRules,
    /// Namespaces, mounts, user, seccomp. Its command, args and env are
    /// replaced by the spec's, so they are given once.
    pub init: InitConfig,
}

/// Runs jobs whose spec carries a [`JobSandbox`] in the sandbox, and jobs
/// without one (a node with `sandbox.enabled: false`) as plain processes.
pub struct SandboxRunner {
    program: PathBuf,
    args: Vec<OsString>,
    roots: CgroupRoots,
    active: Mutex<Option<Active>>,
}

struct Active {
    cgroup: JobCgroup,
    /// The cgroup holds its own reference to the program; keeping the
    /// handle documents that the filter lives as long as the job.
    _filter: Option<AttachedFilter>,
}

fn isolation(what: &str, e: impl std::fmt::Display) -> RunnerError {
    RunnerError::Isolation(format!("{what}: {e}"))
}

impl SandboxRunner {
    /// `program args…` starts the sandbox init (the daemon binary with
    /// `sandbox-init`).
    pub fn new(program: PathBuf, args: Vec<OsString>, roots: CgroupRoots) -> Self {
        SandboxRunner {
            program,
            args,
            roots,
            active: Mutex::new(None),
        }
    }

    /// Puts the waiting init in `cgroup` with the job's device filter and
    /// releases it.
    fn start(
        &self,
        job: &JobSandbox,
        cgroup: &JobCgroup,
        pending: init::PendingInit,
    ) -> Result<(i32, Option<AttachedFilter>), RunnerError> {
        let v1_dir = cgroup.v1_devices_dir();
        let unified = cgroup.unified_dir();
        if v1_dir.is_none() && unified.is_none() {
            return Err(RunnerError::Isolation("no device control on this node (neither a v1 devices hierarchy nor cgroup2): refusing to start a job without a device filter".into()));
        }
        if let Some(dir) = v1_dir {
            devices_v1::apply(dir, &job.devices)
                .map_err(|e| isolation("device filter (cgroup v1)", e))?;
        }
        let filter = match unified {
            Some(dir) => Some(
                bpf::attach(dir, &job.devices)
                    .map_err(|e| isolation("device filter (cgroup v2 eBPF)", e))?,
            ),
            None => None,
        };
        let t0 = std::time::Instant::now();
        cgroup
            .add_pid(pending.pid())
            .map_err(|e| isolation("moving the job into its cgroup", e))?;
        tracing::debug!(
            elapsed_us = t0.elapsed().as_micros() as u64,
            "sandbox init moved into the job's cgroups"
        );
        let t0 = std::time::Instant::now();
        let pid = pending
            .release()
            .map_err(|e| RunnerError::Isolation(e.to_string()))?;
        tracing::debug!(
            elapsed_us = t0.elapsed().as_micros() as u64,
            "sandbox init released: the job has exec'd"
        );
        Ok((pid, filter))
    }
}

impl Runner for SandboxRunner {
    fn spawn(&self, spec: &ShimSpec, stdout: OwnedFd, stderr: OwnedFd) -> Result<Pid, RunnerError> {
        let Some(value) = &spec.runner else {
            return HostRunner.spawn(spec, stdout, stderr);
        };
        let job: JobSandbox = serde_json::from_value(value.clone())
            .map_err(|e| isolation("invalid sandbox settings from the daemon", e))?;
        let mut config = job.init.clone();
        config.command = spec.command.clone();
        config.args = spec.args.clone();
        config.env = spec.env.clone();

        // The init starts first: it execs and builds most of the sandbox
        // while this thread creates the cgroup and the device filter. It
        // runs nothing of the job until released, after the move. Dropping
        // `pending` on an error below kills it.
        let t0 = std::time::Instant::now();
        let pending = init::spawn(&self.program, &self.args, &config, stdout, stderr)
            .map_err(|e| isolation("sandbox init", e))?;
        tracing::debug!(
            elapsed_us = t0.elapsed().as_micros() as u64,
            "sandbox init spawned"
        );
        let layout =
            Layout::detect(&self.roots.mountinfo).map_err(|e| isolation("detecting cgroups", e))?;
        let cgroup = JobCgroup::create(
            &layout,
            &self.roots,
            &job.cgroup_base,
            &job.cgroup_name,
            &job.limits,
        )
        .map_err(|e| isolation("cgroup", e))?;
        match self.start(&job, &cgroup, pending) {
            Ok((pid, filter)) => {
                tracing::info!(job = %spec.job_id, pid, "sandboxed job started");
                let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
                *active = Some(Active {
                    cgroup,
                    _filter: filter,
                });
                Ok(Pid::from_raw(pid))
            }
            Err(e) => {
                if let Err(d) = cgroup.destroy() {
                    tracing::error!(job = %spec.job_id, error = %d, "cannot remove the cgroup of a job that failed to start");
                }
                Err(e)
            }
        }
    }

    fn finish(&self) -> Option<String> {
        let active = self
            .active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        let reason = match active.cgroup.death_reason() {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read why the job ended from its cgroup");
                None
            }
        };
        let t0 = std::time::Instant::now();
        if let Err(e) = active.cgroup.destroy() {
            tracing::error!(error = %e, "cannot remove the job's cgroup");
        }
        tracing::debug!(
            elapsed_us = t0.elapsed().as_micros() as u64,
            "cgroup destroyed"
        );
        reason
    }
}
