//! The sandbox as the shim's [`Runner`]: cgroup, device filter and init put
//! together in the one order that never lets a job run outside its limits.
//!
//! 1. start the sandbox init: it builds the namespaces and most of the
//!    filesystem on its own, then blocks (nothing of the job runs yet);
//! 2. meanwhile create the job's cgroup with every limit (read back);
//! 3. apply the device allow-list to it: v1 `devices.*` files and the v2
//!    eBPF filter, each one that exists (none at all is an error);
//! 4. release the init into the cgroup: it moves itself into the v1
//!    cgroups and forks pid 1 into the cgroup2 one, from descriptors sent
//!    with the release ([`JobCgroup::entry`]: no pid is written to a
//!    `cgroup.procs`, whose global lock waits for an RCU grace period);
//!    then cgroup namespace, `/proc`, privileges, seccomp, `exec`.
//!
//! Any failure undoes what was done (the init is killed, the cgroup
//! removed) and the job does not start. The init tells the job's end
//! before its own exit tears the namespaces down ([`Runner::early_exit`]).
//! After the job, [`Runner::finish`] asks the cgroup why the job died
//! (OOM), and [`Runner::cleanup`], once the exit record is written and the
//! init reaped, removes it.
//!
//! A warm shim runs the same steps in two halves. [`Runner::prepare`], before
//! the job is known, builds from a placeholder job of the node: the init with
//! its namespaces and shared tree, the cgroup with the node's default
//! limits and the device filter of a CPU job, the init entered in it, its
//! pid 1 forked and waiting. [`Runner::spawn`] then writes the job's limits,
//! hands pid 1 the job's config (it builds the job's part of the tree
//! meanwhile, and starts nothing yet), widens the device filter by the
//! job's extra devices (a GPU's nodes: v1 `devices.allow` lines and entries
//! in the eBPF program's device table) or, when the job's rules are not the
//! placeholder's plus exact devices, swaps in a filter of its own (never
//! allowing more than either in between), and only then tells pid 1 to go;
//! a job that does not fit the warm sandbox (another network mode, say)
//! gets a fresh one.

use std::ffi::OsString;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use joblet_shim::{HostRunner, JobIo, PreparedLeader, Runner, RunnerError, ShimSpec};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::cgroup::{CgroupRoots, JobCgroup, Layout, Limits};
use crate::devices::{bpf, v1 as devices_v1, AttachedFilter, DeviceRules};
use crate::init::{self, InitConfig};
use crate::mount_table::MountTable;

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
    /// The job runs under this OCI runtime instead of the native sandbox
    /// (its executor is one): the same settings, said as a bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<crate::oci::OciSettings>,
}

/// Runs jobs whose spec carries a [`JobSandbox`] in the sandbox, and jobs
/// without one (a node with `sandbox.enabled: false`) as plain processes.
pub struct SandboxRunner {
    program: PathBuf,
    args: Vec<OsString>,
    roots: CgroupRoots,
    active: Mutex<Option<Active>>,
    warm: Mutex<Option<Warm>>,
    /// The init [`Runner::fork_ahead`] forked, for `prepare` to use.
    forked: Mutex<Option<init::ForkedInit>>,
    /// The container of a job under an OCI runtime.
    oci: Mutex<Option<crate::oci::OciActive>>,
}

/// A sandbox built by [`Runner::prepare`], waiting for its job.
struct Warm {
    /// The placeholder job it was built from.
    settings: JobSandbox,
    /// The host's mount table when it was built (read before the init
    /// copied it): the sandbox binds host paths as they were mounted then.
    host_mounts: MountTable,
    layout: Layout,
    cgroup: JobCgroup,
    filter: Option<AttachedFilter>,
    pending: init::PendingInit,
}

impl Warm {
    /// Why `job` cannot run in this sandbox, if it cannot. A mount made
    /// or removed on the host since the sandbox was built (an MPS control
    /// daemon's `/dev/shm`, an admin's new filesystem) would be missing
    /// from it, so it only serves jobs while the host's table is unchanged.
    fn misfit(&self, job: &JobSandbox) -> Option<&'static str> {
        if (&job.cgroup_base, &job.cgroup_name)
            != (&self.settings.cgroup_base, &self.settings.cgroup_name)
        {
            return Some("cgroup");
        }
        if self.host_mounts.changed() {
            return Some("host mount table");
        }
        self.settings.init.warm_mismatch(&job.init)
    }

    /// Kills the init (its pid 1 and namespaces go with it) and removes
    /// the cgroup.
    fn discard(self) {
        let Warm {
            cgroup,
            filter,
            pending,
            ..
        } = self;
        pending.abort();
        drop(filter);
        if let Err(e) = cgroup.destroy() {
            tracing::error!(error = %e, "cannot remove the cgroup of a discarded warm sandbox");
        }
    }
}

struct Active {
    cgroup: JobCgroup,
    /// Where the init tells the job's end ([`init::Started::end`]), until
    /// the shim takes it.
    end: Option<OwnedFd>,
    /// Holds the init's exit (the namespaces' teardown) back until the
    /// shim has recorded the job's end ([`init::Started::teardown`]).
    teardown: Option<OwnedFd>,
    /// The cgroup holds its own reference to the program; keeping the
    /// handle documents that the filter lives as long as the job.
    _filter: Option<AttachedFilter>,
}

/// Where the init's output goes: the job's pipes for an init to spawn,
/// or an init forked ahead with them already.
enum Output {
    Fds(OwnedFd, OwnedFd),
    /// An interactive job's stdout, stderr and stdin.
    WithStdin(OwnedFd, OwnedFd, OwnedFd),
    Forked(init::ForkedInit),
}

fn isolation(what: &str, e: impl std::fmt::Display) -> RunnerError {
    RunnerError::Isolation(format!("{what}: {e}"))
}

impl SandboxRunner {
    /// Starts a job in a fresh sandbox. The init starts first: it execs and
    /// builds most of the sandbox while this thread creates the cgroup and
    /// the device filter. It runs nothing of the job until released, after
    /// the move. Dropping `pending` on an error below kills it.
    fn start_cold(
        &self,
        spec: &ShimSpec,
        job: &JobSandbox,
        config: &InitConfig,
        output: Output,
    ) -> Result<Pid, RunnerError> {
        let (pending, _, cgroup) = self.spawn_with_cgroup(config, job, output, None)?;
        match self.start(job, &cgroup, pending) {
            Ok((init::Started { pid, end, teardown }, filter)) => {
                tracing::info!(job = %spec.job_id, pid, "sandboxed job started");
                let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
                *active = Some(Active {
                    cgroup,
                    end: Some(end),
                    teardown: Some(teardown),
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

    /// `program args…` starts the sandbox init (the daemon binary with
    /// `sandbox-init`).
    pub fn new(program: PathBuf, args: Vec<OsString>, roots: CgroupRoots) -> Self {
        SandboxRunner {
            program,
            args,
            roots,
            active: Mutex::new(None),
            warm: Mutex::new(None),
            forked: Mutex::new(None),
            oci: Mutex::new(None),
        }
    }

    fn warm_slot(&self) -> MutexGuard<'_, Option<Warm>> {
        self.warm.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `rules` to `cgroup`: the v1 `devices.*` files and the v2
    /// eBPF filter, each one that exists (none at all is an error). The
    /// program keeps the exact devices in its device table
    /// ([`bpf::attach_with_table`]: cheaper to verify, and
    /// [`Self::extend_devices`] can widen it later).
    fn apply_devices(
        cgroup: &JobCgroup,
        rules: &DeviceRules,
    ) -> Result<Option<AttachedFilter>, RunnerError> {
        let v1_dir = cgroup.v1_devices_dir();
        let unified = cgroup.unified_dir();
        if v1_dir.is_none() && unified.is_none() {
            return Err(RunnerError::Isolation("no device control on this node (neither a v1 devices hierarchy nor cgroup2): refusing to start a job without a device filter".into()));
        }
        if let Some(dir) = v1_dir {
            devices_v1::apply(dir, rules).map_err(|e| isolation("device filter (cgroup v1)", e))?;
        }
        let Some(dir) = unified else {
            return Ok(None);
        };
        bpf::attach_with_table(dir, rules)
            .map(Some)
            .map_err(|e| isolation("device filter (cgroup v2 eBPF)", e))
    }

    /// Widens the filter applied for `from` (a warm sandbox's, with a
    /// table) to `to` by adding exact devices, when it can
    /// ([`DeviceRules::extension`], room in the table): no program is
    /// loaded. `Ok(false)`: it cannot, nothing was changed.
    fn extend_devices(
        cgroup: &JobCgroup,
        filter: &mut Option<AttachedFilter>,
        from: &DeviceRules,
        to: &DeviceRules,
    ) -> Result<bool, RunnerError> {
        let Some(added) = from.extension(to) else {
            return Ok(false);
        };
        let table = match filter.as_mut() {
            Some(f) => match f.table_mut() {
                Some(t) if t.room() >= added.len() => Some(t),
                _ => return Ok(false),
            },
            None if cgroup.unified_dir().is_none() => None,
            None => return Ok(false),
        };
        if let Some(dir) = cgroup.v1_devices_dir() {
            devices_v1::extend(dir, &added, to)
                .map_err(|e| isolation("device filter (cgroup v1)", e))?;
        }
        if let Some(table) = table {
            table
                .extend(&added)
                .map_err(|e| isolation("device filter (cgroup v2 eBPF)", e))?;
        }
        Ok(true)
    }

    /// Starts the init for `config` (it builds its namespaces and tree on
    /// its own meanwhile) and creates the cgroup of `sandbox` with its
    /// limits. On error the init is killed (dropping `PendingInit`).
    /// `mountinfo`: the host's mount table when the caller has read it
    /// already (the cgroup layout is parsed from it rather than read again).
    fn spawn_with_cgroup(
        &self,
        config: &InitConfig,
        sandbox: &JobSandbox,
        output: Output,
        mountinfo: Option<&str>,
    ) -> Result<(init::PendingInit, Layout, JobCgroup), RunnerError> {
        let t0 = std::time::Instant::now();
        let pending = match output {
            Output::Fds(stdout, stderr) => {
                init::spawn(&self.program, &self.args, config, stdout, stderr)
            }
            Output::WithStdin(stdout, stderr, stdin) => init::spawn_with_stdin(
                &self.program,
                &self.args,
                config,
                stdout,
                stderr,
                Some(stdin),
            ),
            Output::Forked(forked) => forked.start(config),
        }
        .map_err(|e| isolation("sandbox init", e))?;
        tracing::debug!(
            elapsed_us = t0.elapsed().as_micros() as u64,
            "sandbox init spawned"
        );
        let layout = match mountinfo {
            Some(text) => Layout::parse_mountinfo(text, &self.roots.mountinfo),
            None => Layout::detect(&self.roots.mountinfo),
        }
        .map_err(|e| isolation("detecting cgroups", e))?;
        let cgroup = JobCgroup::create(
            &layout,
            &self.roots,
            &sandbox.cgroup_base,
            &sandbox.cgroup_name,
            &sandbox.limits,
        )
        .map_err(|e| isolation("cgroup", e))?;
        Ok((pending, layout, cgroup))
    }

    /// Builds the warm sandbox of `settings` (see the module doc).
    fn build_warm(&self, settings: JobSandbox, output: Output) -> Result<Warm, RunnerError> {
        let mut config = settings.init.clone();
        config.warm = true;
        let t0 = std::time::Instant::now();
        let host_mounts = self.host_mounts()?;
        let (mut pending, layout, cgroup) =
            self.spawn_with_cgroup(&config, &settings, output, Some(host_mounts.text()))?;
        let entered = Self::apply_devices(&cgroup, &settings.devices).and_then(|filter| {
            let entry = cgroup
                .entry()
                .map_err(|e| isolation("moving the job into its cgroup", e))?;
            pending
                .enter_into(entry, init::RELEASE_TIMEOUT)
                .map_err(|e| RunnerError::Isolation(e.to_string()))?;
            Ok(filter)
        });
        match entered {
            Ok(filter) => {
                tracing::debug!(
                    elapsed_us = t0.elapsed().as_micros() as u64,
                    "warm sandbox ready"
                );
                Ok(Warm {
                    settings,
                    host_mounts,
                    layout,
                    cgroup,
                    filter,
                    pending,
                })
            }
            Err(e) => {
                pending.abort();
                if let Err(d) = cgroup.destroy() {
                    tracing::error!(error = %d, "cannot remove the cgroup of a warm sandbox that failed");
                }
                Err(e)
            }
        }
    }

    fn host_mounts(&self) -> Result<MountTable, RunnerError> {
        MountTable::read(&self.roots.mountinfo)
            .map_err(|e| isolation(&format!("reading {}", self.roots.mountinfo.display()), e))
    }

    /// Gives the warm sandbox `warm` its job: limits, device filter, config.
    fn start_warm(
        &self,
        warm: Warm,
        job: &JobSandbox,
        config: &InitConfig,
    ) -> Result<(i32, Active), RunnerError> {
        let Warm {
            settings,
            layout,
            cgroup,
            filter,
            pending,
            ..
        } = warm;
        let t0 = std::time::Instant::now();
        let mut pending = pending;
        let started = (|| {
            // Written and read back when the sandbox was built.
            if job.limits != settings.limits {
                cgroup
                    .set_limits(&layout, &self.roots, &job.limits)
                    .map_err(|e| isolation("cgroup", e))?;
            }
            // Pid 1 builds the job's part of the tree (within the job's
            // limits) while the device filter is widened here; it starts
            // nothing before `go`.
            pending
                .send_job(config)
                .map_err(|e| RunnerError::Isolation(e.to_string()))?;
            let mut filter = filter;
            let filter = if job.devices == settings.devices
                || Self::extend_devices(&cgroup, &mut filter, &settings.devices, &job.devices)?
            {
                filter
            } else {
                // The job's filter joins the placeholder's before that one
                // goes: both must allow an access meanwhile, so the job is
                // never allowed more than either.
                let new = Self::apply_devices(&cgroup, &job.devices)?;
                if let Some(old) = filter {
                    old.detach()
                        .map_err(|e| isolation("device filter (cgroup v2 eBPF)", e))?;
                }
                new
            };
            let started = pending
                .go(init::RELEASE_TIMEOUT)
                .map_err(|e| RunnerError::Isolation(e.to_string()))?;
            Ok((started, filter))
        })();
        match started {
            Ok((init::Started { pid, end, teardown }, filter)) => {
                tracing::debug!(
                    elapsed_us = t0.elapsed().as_micros() as u64,
                    "warm sandbox released: the job has exec'd"
                );
                Ok((
                    pid,
                    Active {
                        cgroup,
                        end: Some(end),
                        teardown: Some(teardown),
                        _filter: filter,
                    },
                ))
            }
            Err(e) => {
                if let Err(d) = cgroup.destroy() {
                    tracing::error!(error = %d, "cannot remove the cgroup of a job that failed to start");
                }
                Err(e)
            }
        }
    }

    /// Applies the job's device filter to `cgroup` and releases the waiting
    /// init into it.
    fn start(
        &self,
        job: &JobSandbox,
        cgroup: &JobCgroup,
        pending: init::PendingInit,
    ) -> Result<(init::Started, Option<AttachedFilter>), RunnerError> {
        let filter = Self::apply_devices(cgroup, &job.devices)?;
        let entry = cgroup
            .entry()
            .map_err(|e| isolation("moving the job into its cgroup", e))?;
        let t0 = std::time::Instant::now();
        let started = pending
            .release_into(entry, init::RELEASE_TIMEOUT)
            .map_err(|e| RunnerError::Isolation(e.to_string()))?;
        tracing::debug!(
            elapsed_us = t0.elapsed().as_micros() as u64,
            "sandbox init released: the job has exec'd"
        );
        Ok((started, filter))
    }
}

impl Runner for SandboxRunner {
    fn prepare(
        &self,
        warm: &serde_json::Value,
        stdout: BorrowedFd<'_>,
        stderr: BorrowedFd<'_>,
    ) -> Result<(), RunnerError> {
        // Taken first, so that on any error below it is killed now.
        let forked = self.forked.lock().unwrap_or_else(|p| p.into_inner()).take();
        let settings: JobSandbox = serde_json::from_value(warm.clone())
            .map_err(|e| isolation("invalid warm sandbox settings from the daemon", e))?;
        let output = match forked {
            Some(forked) => Output::Forked(forked),
            None => {
                let dup = |fd: BorrowedFd<'_>| {
                    fd.try_clone_to_owned()
                        .map_err(|e| isolation("duplicating the job's output pipe", e))
                };
                Output::Fds(dup(stdout)?, dup(stderr)?)
            }
        };
        let built = self.build_warm(settings, output)?;
        if let Some(old) = self.warm_slot().replace(built) {
            old.discard();
        }
        Ok(())
    }

    fn fork_ahead(&self, stdout: BorrowedFd<'_>, stderr: BorrowedFd<'_>) {
        match init::fork_ahead(stdout, stderr) {
            Ok(forked) => {
                *self.forked.lock().unwrap_or_else(|p| p.into_inner()) = Some(forked);
            }
            Err(e) => {
                tracing::warn!("cannot fork the warm sandbox's init ahead ({e}); it will be exec'd")
            }
        }
    }

    fn discard(&self) {
        drop(self.forked.lock().unwrap_or_else(|p| p.into_inner()).take());
        let warm = self.warm_slot().take();
        if let Some(warm) = warm {
            warm.discard();
        }
    }

    fn spawn(&self, spec: &ShimSpec, stdout: OwnedFd, stderr: OwnedFd) -> Result<Pid, RunnerError> {
        let Some(value) = &spec.runner else {
            self.discard();
            return HostRunner.spawn(spec, stdout, stderr);
        };
        let job: JobSandbox = serde_json::from_value(value.clone())
            .map_err(|e| isolation("invalid sandbox settings from the daemon", e))?;
        if let Some(oci) = &job.oci {
            // A warm sandbox is the native one's: of no use here.
            self.discard();
            let (pid, active) =
                crate::oci::start(&job, oci, spec, (stdout, stderr), &self.program)?;
            *self.oci.lock().unwrap_or_else(|p| p.into_inner()) = Some(active);
            return Ok(pid);
        }
        let mut config = job.init.clone();
        config.command = spec.command.clone();
        config.args = spec.args.clone();
        config.env = spec.env.clone();
        config.warm = false;

        let warm = self.warm_slot().take();
        if let Some(warm) = warm {
            match warm.misfit(&job) {
                None => {
                    let (pid, active) = self.start_warm(warm, &job, &config)?;
                    tracing::info!(job = %spec.job_id, pid, "sandboxed job started (warm)");
                    *self.active.lock().unwrap_or_else(|p| p.into_inner()) = Some(active);
                    return Ok(Pid::from_raw(pid));
                }
                Some(field) => {
                    tracing::info!(job = %spec.job_id, field, "the warm sandbox was built with another {field}; starting the job in a fresh one");
                    warm.discard();
                }
            }
        }

        self.start_cold(spec, &job, &config, Output::Fds(stdout, stderr))
    }

    fn spawn_interactive(&self, spec: &ShimSpec, io: JobIo) -> Result<Pid, RunnerError> {
        // A warm sandbox was built for a batch job's streams.
        self.discard();
        let Some(value) = &spec.runner else {
            return HostRunner.spawn_interactive(spec, io);
        };
        let job: JobSandbox = serde_json::from_value(value.clone())
            .map_err(|e| isolation("invalid sandbox settings from the daemon", e))?;
        if job.oci.is_some() {
            return Err(isolation(
                "interactive job",
                "jobs with -i/-t run on the native executor only",
            ));
        }
        let mut config = job.init.clone();
        config.command = spec.command.clone();
        config.args = spec.args.clone();
        config.env = spec.env.clone();
        config.warm = false;
        config.stdin = Some(init::JobStdin { tty: io.tty });
        let output = Output::WithStdin(io.stdout, io.stderr, io.stdin);
        self.start_cold(spec, &job, &config, output)
    }

    fn prepared_leader(&self) -> Option<PreparedLeader> {
        let slot = self.warm_slot();
        let pending = &slot.as_ref()?.pending;
        Some(PreparedLeader {
            pid: Pid::from_raw(pending.pid()),
            end: pending.end_duplicate(),
        })
    }

    fn early_exit(&self) -> Option<OwnedFd> {
        if let Some(oci) = self.oci.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            return oci.end.take();
        }
        self.active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()?
            .end
            .take()
    }

    fn end_told(&self) {
        if let Some(active) = self
            .active
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            active.teardown = None;
        }
    }

    fn finish(&self) -> Option<String> {
        if let Some(oci) = self.oci.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            return oci.death_reason();
        }
        let active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        match active.as_ref()?.cgroup.death_reason() {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read why the job ended from its cgroup");
                None
            }
        }
    }

    fn cleanup(&self) {
        self.discard();
        if let Some(oci) = self.oci.lock().unwrap_or_else(|p| p.into_inner()).take() {
            oci.cleanup();
        }
        let Some(active) = self.active.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let t0 = std::time::Instant::now();
        if let Err(e) = active.cgroup.destroy() {
            tracing::error!(error = %e, "cannot remove the job's cgroup");
        }
        tracing::debug!(
            elapsed_us = t0.elapsed().as_micros() as u64,
            "cgroup destroyed"
        );
    }
}
