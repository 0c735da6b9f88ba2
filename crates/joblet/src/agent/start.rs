//! A job's start on this node: its GPUs reserved and its start saved (one
//! commit), then its sandbox assembled — the node's settings, the job's
//! limits, and the edits each part contributes (the GPU edits of
//! [`crate::gpu::edits`]: device nodes, driver files, masks, environment)
//! — its environment built, and its shim started, in the warm sandbox
//! reserved for its id when there is one. RUNNING is saved before the shim
//! starts: a daemon that dies in between leaves a RUNNING job without a
//! shim, which the next start reports as lost, never a job that runs twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use joblet_engine::{Exit, Final, LaunchOrder};
use joblet_shim::{JobDir, ShimError, ShimHandle, ShimSpec};
use joblet_store::JobRecord;

use super::{AgentReport, LocalAgent, Persist, Secrets, StartError};
use crate::jobenv;
use crate::outcome;

impl LocalAgent {
    pub(super) fn start_job(
        &mut self,
        order: &LaunchOrder,
        rec: &JobRecord,
        persist: Persist<'_>,
        secrets: Secrets<'_>,
    ) -> Result<(), StartError> {
        let id = &order.job;
        let grant = if order.placement.units.is_empty() {
            persist(None).map_err(StartError::Persist)?;
            None
        } else {
            let Some(g) = &mut self.gpus else {
                return Err(StartError::NoGpus);
            };
            let grant = g.grant(&order.placement, &order.request, order.at, |records| {
                persist(Some(records))
            })?;
            Some(grant)
        };
        // Recorded RUNNING from here: on an error the engine ends the job
        // FAILED and releases what it holds.
        if let (Some(g), Some(grant)) = (&mut self.gpus, &grant) {
            g.start_mps(id.as_str(), grant)?;
        }
        // A job without secret variables has nothing sealed to unseal.
        let secrets = if rec.spec.secret_env_keys.is_empty() {
            BTreeMap::new()
        } else {
            secrets().map_err(StartError::Secrets)?
        };
        let dir = self.dirs.job(id);
        let workdir = JobDir::new(&dir).work_path();
        std::fs::create_dir_all(&workdir).map_err(|source| StartError::JobDir {
            path: workdir.clone(),
            source,
        })?;
        // In the sandbox the job sees its work dir as /work and runs as the
        // node's job user, who must own it (uploads included).
        let mut gpu_env = None;
        let mut runtime_env = None;
        let (home, runner) = match &self.sandbox {
            Some(sb) => {
                crate::uploads::chown_tree(&workdir, sb.uid, sb.gid).map_err(|source| {
                    StartError::Chown {
                        path: workdir.clone(),
                        uid: sb.uid,
                        source,
                    }
                })?;
                let gpu_part = match (&self.gpus, &grant) {
                    (Some(g), Some(a)) => crate::gpu::edits::gpu_job(
                        &g.settings,
                        &rec.spec,
                        &a.gpus,
                        a.quota_mb,
                        &dir,
                    )?,
                    (Some(g), None) => crate::gpu::edits::cpu_job(&g.settings),
                    (None, _) => Default::default(),
                };
                gpu_env = gpu_part.env.clone();
                let (mounts, env) = match &self.mounts {
                    Some(node) => super::mounts::job_mounts(node.as_ref(), &rec.spec)?,
                    // Admission refuses runtimes and volumes then.
                    None => Default::default(),
                };
                runtime_env = env;
                let mut job = sb.job(id, &rec.spec, &workdir, gpu_part, mounts);
                // A job under an OCI runtime: the same settings, carried
                // out by the runtime from a bundle in the job's directory.
                let executor = rec
                    .spec
                    .executor
                    .as_deref()
                    .unwrap_or(&self.executors.catalog.default);
                let caps = gpu_env
                    .as_ref()
                    .and_then(|g| g.vars.get("NVIDIA_DRIVER_CAPABILITIES"))
                    .or_else(|| rec.spec.env.get("NVIDIA_DRIVER_CAPABILITIES"))
                    .map(String::as_str);
                job.oci = self
                    .executors
                    .oci(executor, id, &rec.spec, &dir.join("bundle"), caps)?;
                let value = serde_json::to_value(&job).map_err(StartError::Encode)?;
                (PathBuf::from("/work"), Some(value))
            }
            None => (workdir.clone(), None),
        };
        let mut env = jobenv::build(id, &rec.spec, &secrets, &home, runtime_env.as_ref());
        if let Some(g) = &gpu_env {
            crate::gpu::edits::merge_env(&mut env, g);
        }
        let spec = ShimSpec {
            job_id: id.to_string(),
            command: rec.spec.command.clone(),
            args: rec.spec.args.clone(),
            env,
            cwd: workdir,
            timeout_ms: order.wall_limit_ms,
            stop_grace_ms: order.stop_grace_ms,
            runner,
            // A cluster job dies with the node's fencing deadline.
            fence: rec.spec.cluster.as_ref().map(|_| self.dirs.cluster_fence()),
            stdio: rec.spec.stdio,
        };
        let (handle, sandbox) = self.launch(id, &dir, &spec)?;
        tracing::info!(job = %id, shim_pid = handle.pid(), sandbox, "job started");
        self.watch(id.clone(), handle);
        Ok(())
    }

    /// Starts the job's shim: the warm one reserved for its id, or a fresh
    /// one.
    fn launch(
        &mut self,
        id: &joblet_core::JobId,
        dir: &Path,
        spec: &ShimSpec,
    ) -> Result<(ShimHandle, &'static str), StartError> {
        let launched = match self.warm.claim(id) {
            Some(shim) => match shim.claim(spec) {
                Ok(handle) => {
                    // The claim woke the shim, likely on this CPU (a pipe's
                    // wake-up is a "sync" one), where this SCHED_BATCH
                    // thread would keep it waiting until it sleeps: through
                    // the job's bookkeeping and the client's answer, none of
                    // which the job's start needs (~0.1 ms). Yielding lets
                    // the shim start the job first.
                    std::thread::yield_now();
                    Ok((handle, "warm"))
                }
                Err(e) => {
                    // Its shim died waiting; the job gets a fresh one.
                    tracing::warn!(job = %id, error = %e, "the job's warm shim is gone; starting a fresh one");
                    self.launch_fresh(dir, spec).map(|h| (h, "cold"))
                }
            },
            None => self.launch_fresh(dir, spec).map(|h| (h, "cold")),
        };
        launched.map_err(StartError::Shim)
    }

    /// Starts a fresh shim for the job whose directory is `dir`.
    fn launch_fresh(&self, dir: &Path, spec: &ShimSpec) -> Result<ShimHandle, ShimError> {
        let mut args = self.shim_args.clone();
        args.push(dir.as_os_str().to_owned());
        joblet_shim::launch(
            &self.shim_program,
            &args,
            &JobDir::new(dir.to_owned()),
            spec,
        )
    }

    /// Reports the job's end when its shim says it ended (or is gone: then
    /// whatever is left of the job is killed).
    pub(super) fn watch(&self, id: joblet_core::JobId, handle: ShimHandle) {
        let reports = self.reports.clone();
        let sandbox = self.sandbox.clone();
        let dir = handle.dir().path().to_owned();
        tokio::spawn(async move {
            let exit = match handle.wait().await {
                // Its directory was removed under it: its output is gone,
                // whatever its exit said.
                _ if !dir.exists() => {
                    tracing::error!(job = %id, dir = %dir.display(), "the job's directory was removed while it ran");
                    Exit::of(Final::dir_removed())
                }
                Ok(exit) => outcome::from_shim(&exit),
                Err(e) => {
                    tracing::error!(job = %id, error = %e, "job's shim ended without an exit record");
                    if let Some(sb) = &sandbox {
                        if let Err(e) = sb.destroy_job_cgroup(&id) {
                            tracing::error!(job = %id, error = %e, "cannot clean up the cgroup of a lost job");
                        }
                    }
                    Exit::of(Final::lost(false))
                }
            };
            let _ = reports.send(AgentReport::Exited { job: id, exit });
        });
    }
}
