//! The pool of warm sandboxes (`sandbox.warm_pool`): shims started ahead
//! of their jobs, each for a job id chosen in advance, that have built the
//! sandbox as far as it goes without the job (namespaces, the read-only
//! tree, the cgroup with the node's defaults and a CPU job's device filter,
//! pid 1 waiting; see `joblet_sandbox::runner`).
//!
//! A submitted job takes an idle warm shim's id ([`WarmPool::reserve`]), so
//! its job directory and cgroup are the ones already built, and hands the
//! shim its spec when it starts ([`WarmPool::claim`]). A job that ends
//! without starting gives its shim back to be discarded
//! ([`WarmPool::forget`]). Discarding is closing the shim's stdin: the shim
//! tears its sandbox down and removes its files itself, which also covers
//! a daemon that dies — every warm shim of a dead daemon goes away (and a
//! restarted daemon waits for one whose id a queued job took, see
//! `super::recover`). A daemon that stops discards them all and waits for
//! them ([`LocalAgent::close_warm`]), so none is left for the host's init
//! to reap.
//!
//! The pool only holds handles; launching a shim (a fork and exec) runs on
//! the blocking pool, not on the engine's loop, and the result comes back
//! as [`WarmReport::Landed`]; the same thread then waits for the shim's
//! word that its sandbox is built ([`WarmReport::Built`]).
//!
//! The pool is built at start-up, and refilled once no job has started or
//! ended for [`WARM_REFILL_QUIET`]: building a sandbox takes the same
//! kernel locks (mounts, cgroups, namespaces) as a job starting or ending
//! beside it, which would wait for it. A flavour with none left, or a
//! burst of submissions, is refilled at once ([`WarmPool::refill_now`]).
//!
//! A job in a runtime (`--runtime`) needs its sandbox's read-only tree
//! from the runtime, so it takes a third flavour: sandboxes built on the
//! tree of the runtime jobs last asked for (the pool's *hot* runtime,
//! [`WarmPool::heat`]), as many as CPU ones. The first job in a runtime
//! starts cold and makes it hot; a job in another runtime moves the heat
//! there, and the sandboxes built for the old one are discarded.
//!
//! Sandboxes are built one at a time: two builds at once share the CPU left
//! over by the jobs (warm shims run in `SCHED_IDLE`), so both finish late,
//! and back-to-back jobs then wait for one, every other job. A job takes a
//! built sandbox before one still being built, of either flavour, and one
//! being built before one whose build failed, and any before none (a build
//! under way is then its own start's first part).

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use joblet_core::JobId;
use joblet_shim::{JobDir, ShimError, ShimHandle, WarmBuild, WarmReady, WarmShim, WarmSpec};

use super::LocalAgent;
use crate::gpu::edits::EditsError;

/// How long no job must have started or ended before the pool of warm
/// sandboxes is refilled; submissions closer than this make a burst,
/// during which it is refilled at once.
pub(crate) const WARM_REFILL_QUIET: Duration = Duration::from_millis(20);

/// What the threads that launch warm shims report.
pub(crate) enum WarmReport {
    /// A warm shim's launch of that flavour (on that runtime tree) ended
    /// (`None`: it failed, and was logged).
    Landed(Flavour, Option<PathBuf>, Option<(JobId, WarmShim)>),
    /// The build of the warm shim launched for that job id is over: its
    /// sandbox is built (`true`), or it could not be, or the shim died, or
    /// the build is past [`BUILD_WAIT`] (`false`).
    Built(JobId, bool),
}

/// How long a stopping daemon waits for its warm shims to tear down (one
/// takes milliseconds).
const CLOSE_WAIT: Duration = Duration::from_secs(5);
/// How long the launching thread waits for a warm shim to say its sandbox
/// is built (a build takes milliseconds); past it, the next build starts
/// anyway and the shim stays in the pool as not built.
pub(super) const BUILD_WAIT: Duration = Duration::from_secs(10);

/// What a warm sandbox is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavour {
    /// A CPU job's sandbox (the node's driver files masked, no GPU node
    /// allowed); a GPU job can start in one too, which then binds and
    /// allows the job's GPU files itself.
    Cpu,
    /// GPU-ready (`gpu.warm_pool`): the driver's files for the node's
    /// default `NVIDIA_DRIVER_CAPABILITIES` and CUDA toolkit, and the
    /// control nodes (`nvidiactl`, `nvidia-uvm`), bound and allowed ahead;
    /// a GPU job adds its own GPUs' nodes. Never given to a CPU job.
    Gpu,
    /// A CPU job's, on the hot runtime's tree: for jobs in that runtime
    /// (CPU or GPU) only.
    Runtime,
}

impl Flavour {
    const ALL: [Flavour; 3] = [Flavour::Cpu, Flavour::Gpu, Flavour::Runtime];

    fn index(self) -> usize {
        match self {
            Flavour::Cpu => 0,
            Flavour::Gpu => 1,
            Flavour::Runtime => 2,
        }
    }
}

/// An idle warm shim.
struct Idle<S> {
    id: JobId,
    flavour: Flavour,
    /// The runtime tree a [`Flavour::Runtime`] sandbox was built on.
    root: Option<PathBuf>,
    shim: S,
    build: Build,
}

/// Where an idle warm shim's build is, in the order jobs take them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Build {
    /// Its sandbox is built (the shim said so).
    Done,
    /// Under way: a job that takes it waits for the rest.
    Going,
    /// It could not be built ahead (or its shim died, or the build is past
    /// [`BUILD_WAIT`]): a job that takes it gets a fresh sandbox.
    Failed,
}

/// The warm shims of one daemon (`S`: a [`WarmShim`]; tests use another
/// type).
pub(crate) struct WarmPool<S = WarmShim> {
    /// How many idle warm shims of each flavour to keep (runtime ones
    /// only while a runtime is hot).
    target: [usize; 3],
    /// The runtime tree [`Flavour::Runtime`] sandboxes are built on.
    hot: Option<PathBuf>,
    /// Launched and not yet given to a job.
    idle: VecDeque<Idle<S>>,
    /// Given to a job that has not started yet.
    reserved: HashMap<JobId, S>,
    /// Launches under way, by flavour.
    launching: [usize; 3],
    /// Sandboxes being built: launches under way, and launched shims that
    /// have not said their sandbox is built.
    building: usize,
    /// When the last job was submitted.
    last_submit: Option<Instant>,
    /// The last two submissions came less than [`WARM_REFILL_QUIET`]
    /// apart.
    burst: bool,
}

impl<S> WarmPool<S> {
    /// `cpu` CPU and `gpu` GPU-ready warm shims, and `cpu` on the hot
    /// runtime's tree once one is hot.
    pub(crate) fn new(cpu: usize, gpu: usize) -> Self {
        WarmPool {
            target: [cpu, gpu, cpu],
            hot: None,
            idle: VecDeque::new(),
            reserved: HashMap::new(),
            launching: [0, 0, 0],
            building: 0,
            last_submit: None,
            burst: false,
        }
    }

    /// The id for a new job that wants a sandbox of `flavour`: an idle
    /// warm shim's, reserved for it, when there is one, else `None`. A GPU
    /// job takes a CPU one when no GPU-ready one is idle; a CPU job never
    /// takes a GPU-ready one. A built sandbox goes first: a GPU job takes a
    /// built CPU one before a GPU-ready one still being built (adding its
    /// GPU's files takes less than the rest of a build); one whose build
    /// failed goes last. Jobs that wait in the queue hold at most as many
    /// warm shims between them as the pool keeps, so a long queue does not
    /// pin a sandbox per job.
    pub(crate) fn reserve(&mut self, flavour: Flavour) -> Option<JobId> {
        if self.reserved.len() >= self.target.iter().sum::<usize>() {
            return None;
        }
        let fits: &[Flavour] = match flavour {
            Flavour::Cpu => &[Flavour::Cpu],
            Flavour::Gpu => &[Flavour::Gpu, Flavour::Cpu],
            // Only with its tree: see `reserve_runtime`.
            Flavour::Runtime => return None,
        };
        let pos = [Build::Done, Build::Going, Build::Failed]
            .into_iter()
            .find_map(|build| {
                fits.iter().find_map(|f| {
                    self.idle
                        .iter()
                        .position(|i| i.flavour == *f && i.build == build)
                })
            })?;
        let Idle { id, shim, .. } = self.idle.remove(pos)?;
        self.reserved.insert(id.clone(), shim);
        Some(id)
    }

    /// The id for a new job in the runtime whose tree is `tree`: an idle
    /// warm shim's built on that tree, reserved for it, when there is one
    /// (built before being built before failed, as [`WarmPool::reserve`]).
    /// Makes the runtime hot first ([`WarmPool::heat`]); returns the
    /// shims that takes out of the pool, to discard.
    pub(crate) fn reserve_runtime(&mut self, tree: &Path) -> (Option<JobId>, Vec<S>) {
        let cold = self.heat(tree);
        if self.reserved.len() >= self.target.iter().sum::<usize>() {
            return (None, cold);
        }
        let pos = [Build::Done, Build::Going, Build::Failed]
            .into_iter()
            .find_map(|build| {
                self.idle.iter().position(|i| {
                    i.flavour == Flavour::Runtime
                        && i.build == build
                        && i.root.as_deref() == Some(tree)
                })
            });
        let Some(Idle { id, shim, .. }) = pos.and_then(|p| self.idle.remove(p)) else {
            return (None, cold);
        };
        self.reserved.insert(id.clone(), shim);
        (Some(id), cold)
    }

    /// Makes `tree` the runtime whose sandboxes the pool keeps; the idle
    /// ones built on another tree are returned, to discard.
    pub(crate) fn heat(&mut self, tree: &Path) -> Vec<S> {
        if self.hot.as_deref() == Some(tree) {
            return Vec::new();
        }
        self.hot = Some(tree.to_owned());
        let (cold, keep): (VecDeque<Idle<S>>, VecDeque<Idle<S>>) = self
            .idle
            .drain(..)
            .partition(|i| i.flavour == Flavour::Runtime && i.root.as_deref() != Some(tree));
        self.idle = keep;
        cold.into_iter().map(|i| i.shim).collect()
    }

    /// No runtime is hot any more (its tree was removed, or replaced at the
    /// same path): the idle runtime sandboxes are returned, to discard.
    pub(crate) fn cool(&mut self) -> Vec<S> {
        self.hot = None;
        let (cold, keep): (VecDeque<Idle<S>>, VecDeque<Idle<S>>) = self
            .idle
            .drain(..)
            .partition(|i| i.flavour == Flavour::Runtime);
        self.idle = keep;
        cold.into_iter().map(|i| i.shim).collect()
    }

    /// The runtime tree warm runtime sandboxes are built on now.
    pub(crate) fn hot(&self) -> Option<&Path> {
        self.hot.as_deref()
    }

    /// The warm shim reserved for job `id`, to start it in.
    pub(crate) fn claim(&mut self, id: &JobId) -> Option<S> {
        self.reserved.remove(id)
    }

    /// Job `id` ended without starting, or its submission failed: its warm
    /// shim, if it had one, is returned, to discard it.
    pub(crate) fn forget(&mut self, id: &JobId) -> Option<S> {
        self.reserved.remove(id)
    }

    /// Whether an idle warm shim (or one being launched) of every flavour
    /// the pool keeps is there for the next job.
    pub(crate) fn has_idle(&self) -> bool {
        Flavour::ALL.into_iter().all(|f| {
            let i = f.index();
            self.target_of(f) == 0
                || self.launching[i] > 0
                || self.idle.iter().any(|s| s.flavour == f)
        })
    }

    /// How many launches of `flavour` to begin now to get back to its
    /// target of idle shims.
    pub(crate) fn wanted_of(&self, flavour: Flavour) -> usize {
        let idle = self.idle.iter().filter(|i| i.flavour == flavour).count();
        self.target_of(flavour)
            .saturating_sub(idle + self.launching[flavour.index()])
    }

    /// How many idle shims of `flavour` to keep now.
    fn target_of(&self, flavour: Flavour) -> usize {
        match flavour {
            Flavour::Runtime if self.hot.is_none() => 0,
            f => self.target[f.index()],
        }
    }

    /// How many launches, of any flavour, to begin now.
    pub(crate) fn wanted(&self) -> usize {
        Flavour::ALL.into_iter().map(|f| self.wanted_of(f)).sum()
    }

    /// Keeps no more warm shims of `flavour` (they cannot be built).
    pub(crate) fn give_up(&mut self, flavour: Flavour) {
        self.target[flavour.index()] = 0;
    }

    /// Records that a launch of `flavour` began: a build is under way until
    /// it fails ([`WarmPool::landed`] without a shim) or its shim says its
    /// sandbox is built ([`WarmPool::built`]).
    pub(crate) fn launching(&mut self, flavour: Flavour) {
        self.launching[flavour.index()] += 1;
        self.building += 1;
    }

    /// A launch of `flavour` (on runtime tree `root`) ended: with a shim,
    /// it joins the idle ones, not built yet (or is returned for
    /// discarding when the pool is already full, or its runtime is no
    /// longer hot); without, its build is over.
    pub(crate) fn landed(
        &mut self,
        flavour: Flavour,
        root: Option<PathBuf>,
        shim: Option<(JobId, S)>,
    ) -> Option<S> {
        let i = flavour.index();
        self.launching[i] = self.launching[i].saturating_sub(1);
        let Some((id, shim)) = shim else {
            self.building = self.building.saturating_sub(1);
            return None;
        };
        let idle = self.idle.iter().filter(|i| i.flavour == flavour).count();
        let stale = flavour == Flavour::Runtime && root.as_deref() != self.hot.as_deref();
        if idle >= self.target_of(flavour) || stale {
            return Some(shim);
        }
        self.idle.push_back(Idle {
            id,
            flavour,
            root,
            shim,
            build: Build::Going,
        });
        None
    }

    /// The build of the shim launched for `id` is over (whether it is
    /// still idle, or already given to a job or discarded): `built`, or
    /// not (it stays idle, taken after every other).
    pub(crate) fn built(&mut self, id: &JobId, built: bool) {
        self.building = self.building.saturating_sub(1);
        if let Some(i) = self.idle.iter_mut().find(|i| &i.id == id) {
            i.build = if built { Build::Done } else { Build::Failed };
        }
    }

    /// A job was submitted `at`.
    pub(crate) fn submitted(&mut self, at: Instant) {
        self.burst = self
            .last_submit
            .is_some_and(|last| at.saturating_duration_since(last) < WARM_REFILL_QUIET);
        self.last_submit = Some(at);
    }

    /// Whether the next build should start now rather than once the node
    /// is quiet: when a flavour has none left, or while submissions come
    /// in a burst, where waiting for quiet would leave the pool empty for
    /// the rest of the burst (builds run in `SCHED_IDLE`, one at a time).
    /// A job every so often (the last two submissions further apart) never
    /// has a build beside it.
    pub(crate) fn refill_now(&self) -> bool {
        !self.has_idle() || self.burst
    }

    /// The flavours to launch a warm shim of now, in the order to try
    /// (GPU-ready first), each wanted: none while a sandbox is being built,
    /// as the next build waits for it.
    pub(crate) fn to_build(&self) -> Vec<Flavour> {
        if self.building > 0 {
            return Vec::new();
        }
        [Flavour::Gpu, Flavour::Cpu, Flavour::Runtime]
            .into_iter()
            .filter(|f| self.wanted_of(*f) > 0)
            .collect()
    }

    /// Keeps no more warm shims and returns every one it holds, idle or
    /// reserved, to discard them; launches still under way come back
    /// from [`WarmPool::landed`] to be discarded too.
    /// Every shim, each with whether no job took its id (its directory
    /// can go with it).
    pub(crate) fn close(&mut self) -> Vec<(S, bool)> {
        self.target = [0, 0, 0];
        let idle = self.idle.drain(..).map(|i| (i.shim, true));
        idle.chain(self.reserved.drain().map(|(_, s)| (s, false)))
            .collect()
    }

    /// Whether a launch is under way.
    pub(crate) fn is_launching(&self) -> bool {
        self.launching.iter().any(|n| *n > 0)
    }

    #[cfg(test)]
    fn idle(&self) -> usize {
        self.idle.len()
    }
}

impl LocalAgent {
    /// A warm shim's launch or build report.
    pub(super) fn on_warm(&mut self, report: WarmReport) {
        match report {
            WarmReport::Landed(flavour, root, shim) => {
                if let Some(extra) = self.warm.landed(flavour, root, shim) {
                    reap(extra.discard(), true);
                }
            }
            WarmReport::Built(id, built) => {
                self.warm.built(&id, built);
                // The next build, one at a time (see `refill_warm`).
                self.refill_when();
            }
        }
    }

    /// After a job event or a finished build: the pool's next build now
    /// (see [`WarmPool::refill_now`]) or once the node has been quiet for
    /// [`WARM_REFILL_QUIET`].
    pub(super) fn refill_when(&mut self) {
        if self.warm.wanted() == 0 {
            return;
        }
        if self.warm.refill_now() {
            self.refill_warm();
        } else {
            self.refill_at = Some(tokio::time::Instant::now() + WARM_REFILL_QUIET);
        }
    }

    /// Undoes a submission that failed before the job was recorded: its
    /// uploads go, and its warm shim (if it had one) is discarded, which
    /// removes the shim's own files, then the directory goes.
    pub(super) fn abandon_submit(&mut self, id: &JobId) {
        let dir = self.dirs.job(id);
        match self.warm.forget(id) {
            Some(shim) => {
                let _ = std::fs::remove_dir_all(JobDir::new(dir).work_path());
                reap(shim.discard(), true);
            }
            None => {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }

    /// The daemon is stopping: discards every warm shim, waits for the
    /// launches under way, and reaps them all, for [`CLOSE_WAIT`] at most;
    /// the directories of those no job took go. A reserved shim's queued
    /// job keeps its directory and uploads (the shim removes only its own
    /// files).
    pub(super) async fn close_warm(&mut self) {
        let deadline = tokio::time::Instant::now() + CLOSE_WAIT;
        let mut shims: Vec<(ShimHandle, bool)> = self
            .warm
            .close()
            .into_iter()
            .map(|(shim, unowned)| (shim.discard(), unowned))
            .collect();
        while self.warm.is_launching() {
            match tokio::time::timeout_at(deadline, self.warm_rx.recv()).await {
                Ok(Some(WarmReport::Landed(flavour, root, landed))) => {
                    shims.extend(
                        self.warm
                            .landed(flavour, root, landed)
                            .map(|s| (s.discard(), true)),
                    );
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        let count = shims.len();
        let waits =
            futures::future::join_all(shims.into_iter().map(|(shim, unowned)| async move {
                let dir = shim.dir().clone();
                let _ = shim.wait().await;
                if unowned {
                    remove_unowned_dir(&dir);
                }
            }));
        match tokio::time::timeout_at(deadline, waits).await {
            Ok(_) => tracing::info!(count, "warm sandboxes torn down"),
            Err(_) => tracing::warn!(
                count,
                "warm sandboxes still tearing down after {CLOSE_WAIT:?}; they finish on their own"
            ),
        }
    }

    /// Starts the launch of one warm shim, GPU-ready first, when the pool
    /// wants one and no sandbox is being built; it runs on the blocking
    /// pool and reports back through [`WarmReport::Landed`], then
    /// [`WarmReport::Built`], which starts the next.
    pub(super) fn refill_warm(&mut self) {
        for flavour in self.warm.to_build() {
            if self.launch_warm(flavour) {
                return;
            }
        }
    }

    /// Starts one launch of a warm shim of `flavour`; `false` when none
    /// can be launched (which is logged).
    fn launch_warm(&mut self, flavour: Flavour) -> bool {
        let Some(sb) = &self.sandbox else {
            return false;
        };
        let Ok(id) = JobId::parse(&uuid::Uuid::new_v4().to_string()) else {
            return false;
        };
        let dir = self.dirs.job(&id);
        let root = match flavour {
            Flavour::Runtime => match self.warm.hot() {
                Some(tree) => Some(tree.to_owned()),
                None => return false,
            },
            _ => None,
        };
        let gpu_part = match (&self.gpus, flavour) {
            (Some(g), Flavour::Cpu | Flavour::Runtime) => crate::gpu::edits::cpu_job(&g.settings),
            (Some(g), Flavour::Gpu) => {
                // Its driver parameters overlay is written there.
                let ready = std::fs::create_dir_all(&dir)
                    .map_err(|source| GpuReadyError::Dir {
                        path: dir.clone(),
                        source,
                    })
                    .and_then(|()| {
                        crate::gpu::edits::gpu_ready(&g.settings, &dir)
                            .map_err(GpuReadyError::Edits)
                    });
                match ready {
                    Ok(part) => part,
                    Err(e) => {
                        // A node that cannot build one now will not later
                        // (its driver files and nodes were found at start).
                        tracing::warn!(error = %e, "cannot build GPU-ready warm sandboxes; GPU jobs start in CPU ones");
                        self.warm.give_up(Flavour::Gpu);
                        let _ = std::fs::remove_dir_all(&dir);
                        return false;
                    }
                }
            }
            (None, Flavour::Cpu | Flavour::Runtime) => Default::default(),
            (None, Flavour::Gpu) => return false,
        };
        let job_dir = JobDir::new(dir.clone());
        let mut settings = sb.warm(&id, &job_dir.work_path(), gpu_part);
        if let Some(tree) = &root {
            settings.init.ro_mounts = crate::sandbox::runtime_entries(tree);
            settings.init.root = Some(tree.clone());
        }
        let runner = match serde_json::to_value(&settings) {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(error = %e, "cannot encode a warm sandbox's settings; no warm sandboxes");
                return false;
            }
        };
        let warm = WarmSpec {
            job_id: id.to_string(),
            runner: Some(runner),
        };
        let program = self.shim_program.clone();
        let mut args = self.shim_args.clone();
        args.push(dir.clone().into_os_string());
        let tx = self.warm_tx.clone();
        self.warm.launching(flavour);
        tokio::task::spawn_blocking(move || {
            // Made now, off the job's path (creating a directory can take
            // a while on a busy ext4); an empty one goes with the shim.
            if let Err(e) = std::fs::create_dir_all(job_dir.work_path()) {
                tracing::warn!(dir = %job_dir.work_path().display(), error = %e, "cannot make a warm shim's work directory; its job will");
            }
            let (landed, ready) = match joblet_shim::launch_warm(&program, &args, &job_dir, &warm) {
                Ok(mut shim) => {
                    let ready = shim.take_ready();
                    (Some((id.clone(), shim)), ready)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot launch a warm shim");
                    (None, None)
                }
            };
            let launched = landed.is_some();
            if let Err(e) = tx.send(WarmReport::Landed(flavour, root, landed)) {
                // The agent is gone: dropping the shim discards it.
                drop(e);
                return;
            }
            if launched {
                let built = wait_built(ready);
                let _ = tx.send(WarmReport::Built(id, built));
            }
        });
        true
    }
}

/// Why a GPU-ready warm sandbox cannot be built.
#[derive(Debug, thiserror::Error)]
enum GpuReadyError {
    /// Its job directory, where the driver parameters overlay goes.
    #[error("cannot create {}: {source}", path.display())]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Edits(EditsError),
}

/// Waits (on the launching thread) for a warm shim's build to end,
/// [`BUILD_WAIT`] at most: whether its sandbox is built.
fn wait_built(ready: Option<WarmReady>) -> bool {
    let Some(ready) = ready else {
        return false;
    };
    match ready.wait(BUILD_WAIT) {
        WarmBuild::Built => true,
        // The shim logged why, in its shim.log.
        WarmBuild::NotBuilt => false,
        WarmBuild::StillBuilding => {
            tracing::warn!(
                "a warm sandbox is still being built after {BUILD_WAIT:?}; the next starts anyway"
            );
            false
        }
    }
}

/// Reaps a discarded warm shim once it has torn its sandbox down; with
/// `unowned` (no job took its id) its directory goes too.
pub(crate) fn reap(shim: ShimHandle, unowned: bool) {
    tokio::spawn(async move {
        let pid = shim.pid();
        let dir = shim.dir().clone();
        // A discarded shim leaves no exit record: "lost" is its normal end.
        if let Err(e @ ShimError::Wait { .. }) = shim.wait().await {
            tracing::warn!(pid, error = %e, "cannot reap a discarded warm shim");
        }
        if unowned {
            remove_unowned_dir(&dir);
        }
    });
}

/// Removes the directory of a warm shim no job took (and its empty
/// `work`); one with anything else in it is left.
pub(crate) fn remove_unowned_dir(dir: &JobDir) {
    let _ = std::fs::remove_dir(dir.work_path());
    let _ = std::fs::remove_dir(dir.path());
}

#[cfg(test)]
mod tests;
