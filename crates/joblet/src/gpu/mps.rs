//! One MPS control daemon per shared GPU (`gpu.sharing: mps`).
//!
//! When the first MPS job lands on a GPU the daemon runs
//! `nvidia-cuda-mps-control -d` for it, with `CUDA_VISIBLE_DEVICES=<GPU
//! UUID>` and its own `CUDA_MPS_PIPE_DIRECTORY` / `CUDA_MPS_LOG_DIRECTORY`
//! under `gpu.mps_dir/<GPU UUID>/`; with `gpu.mps_active_thread_percentage`
//! it then sends `set_default_active_thread_percentage N`, so a job can
//! only lower its share. When the GPU's last MPS job is released it sends
//! `quit` (`echo quit | nvidia-cuda-mps-control` with the same
//! environment). A control daemon that cannot be started fails the job
//! that needed it: it never runs outside MPS.
//!
//! Jobs outlive the node daemon, and so do the control daemons and tmpfs
//! they use: at shutdown nothing is stopped. The next daemon takes over
//! the ones its reattached jobs use ([`MpsDaemons::adopt`]), so their CUDA
//! processes keep reaching the same server, and stops the others once
//! recovery is done ([`MpsDaemons::finish_recovery`]).
//!
//! Clients and server talk through POSIX shared memory in `/dev/shm`:
//! each GPU gets a tmpfs (`gpu.mps_shm_size_mb`) at
//! `gpu.mps_dir/<GPU UUID>/shm`, mounted before its control daemon starts
//! and unmounted when it quits; the control daemon runs in a private
//! mount namespace with that tmpfs on its `/dev/shm`, and each MPS job
//! gets it as its `/dev/shm` ([`shm`]).
//!
//! The jobs get the pipe and log directories bound in at [`JOB_PIPE_DIR`]
//! and [`JOB_LOG_DIR`] ([`super::edits`]). MPS serves one Linux user at a
//! time per control daemon; every sandboxed job runs as `jobs.user`, so
//! all of a node's MPS jobs share it.
//!
//! Commands run synchronously on the engine's loop, each bounded by
//! [`COMMAND_TIMEOUT`]; their output goes to `control.out` beside the
//! pipe and log directories.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::GpuConfig;

pub mod shm;

/// The control program's name in the driver's binary directories.
pub const CONTROL_PROGRAM: &str = "nvidia-cuda-mps-control";
/// Where an MPS job finds its GPU's pipe and log directories.
pub const JOB_PIPE_DIR: &str = "/run/nvidia/mps/pipe";
pub const JOB_LOG_DIR: &str = "/run/nvidia/mps/log";
/// How long one control command may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// Output of the control commands, per GPU.
const OUTPUT: &str = "control.out";

/// The host directories of one GPU's control daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpsDirs {
    pub pipe: PathBuf,
    pub log: PathBuf,
    /// The shared-memory tmpfs: the control daemon's and its jobs'
    /// `/dev/shm` ([`shm`]).
    pub shm: PathBuf,
}

/// `<root>/<uuid>/{pipe,log,shm}`.
pub fn dirs(root: &Path, uuid: &str) -> MpsDirs {
    let gpu = root.join(uuid);
    MpsDirs {
        pipe: gpu.join("pipe"),
        log: gpu.join("log"),
        shm: gpu.join("shm"),
    }
}

/// What an MPS job's sandbox needs (fixed at start-up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpsClient {
    /// `gpu.mps_dir`.
    pub root: PathBuf,
    /// `gpu.mps_active_thread_percentage`.
    pub active_thread_percentage: Option<u32>,
}

impl MpsClient {
    /// The job's `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`: its own (from its
    /// environment) capped by the node's; either alone; or none. A job's
    /// value that is not 1 to 100 is refused.
    pub fn thread_percentage(
        &self,
        job: Option<&str>,
    ) -> Result<Option<u32>, InvalidThreadPercentage> {
        let job = match job {
            None => None,
            Some(v) => Some(
                v.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|p| (1..=100).contains(p))
                    .ok_or_else(|| InvalidThreadPercentage {
                        value: v.to_string(),
                    })?,
            ),
        };
        Ok(match (job, self.active_thread_percentage) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }
}

/// A job's `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` that is not 1 to 100 (the
/// caller names the variable).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid value {value:?}: expected a whole number from 1 to 100 (percent of the GPU's SMs)"
)]
pub struct InvalidThreadPercentage {
    /// The job's value, as given.
    pub value: String,
}

/// The control program is neither configured (`gpu.mps_control`) nor in
/// any directory searched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the MPS control program {CONTROL_PROGRAM} was not found in {}; install the NVIDIA driver's MPS binaries or set gpu.mps_control", self.searched_in())]
pub struct ControlNotFound {
    /// `gpu.driver_bin_dirs`, then `$PATH`'s directories.
    pub searched: Vec<PathBuf>,
}

impl ControlNotFound {
    /// Where it was looked for, in words: `gpu.driver_bin_dirs and PATH
    /// (<dir>:<dir>...)`.
    pub fn searched_in(&self) -> String {
        let list: Vec<String> = self
            .searched
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        format!("gpu.driver_bin_dirs and PATH ({})", list.join(":"))
    }
}

/// Why a GPU's control daemon could not be started (the job needing it
/// fails with this).
#[derive(Debug, thiserror::Error)]
pub enum MpsError {
    #[error(transparent)]
    NotFound(#[from] ControlNotFound),
    #[error("cannot prepare the MPS directory {}: {source}", path.display())]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot run {}: {source}; check gpu.mps_control", program.display())]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot mount the MPS shared-memory tmpfs on {}: {source}; the daemon must run as root to share /dev/shm between MPS jobs and their control daemon", path.display())]
    Shm {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start {} with {} as its /dev/shm: {source}; check gpu.mps_control, and that the daemon runs as root and the host has a /dev/shm directory (the control daemon runs in a private mount namespace with that tmpfs bound there)", program.display(), shm.display())]
    Namespace {
        program: PathBuf,
        shm: PathBuf,
        source: std::io::Error,
    },
    #[error("`{} {what}` failed ({status}){}; see {}", program.display(), tail(output), log.display())]
    Failed {
        program: PathBuf,
        what: String,
        status: String,
        output: String,
        log: PathBuf,
    },
    #[error("`{} {what}` did not finish within {}s and was killed; see {}", program.display(), COMMAND_TIMEOUT.as_secs(), log.display())]
    Timeout {
        program: PathBuf,
        what: String,
        log: PathBuf,
    },
}

fn tail(output: &str) -> String {
    let t = output.trim();
    if t.is_empty() {
        String::new()
    } else {
        let start = t.char_indices().rev().nth(400).map(|(i, _)| i).unwrap_or(0);
        format!(": {}", &t[start..])
    }
}

/// Finds the control program: `gpu.mps_control`, else the first
/// [`CONTROL_PROGRAM`] file in `bin_dirs`, then in `path` (`$PATH`).
pub fn find_control(
    configured: Option<&Path>,
    bin_dirs: &[PathBuf],
    path: Option<&OsStr>,
) -> Result<PathBuf, ControlNotFound> {
    if let Some(p) = configured {
        return Ok(p.to_path_buf());
    }
    let mut searched: Vec<PathBuf> = bin_dirs.to_vec();
    if let Some(path) = path {
        searched.extend(std::env::split_paths(path));
    }
    searched
        .iter()
        .map(|d| d.join(CONTROL_PROGRAM))
        .find(|p| p.is_file())
        .ok_or(ControlNotFound { searched })
}

/// The node's control daemons and the jobs using each.
#[derive(Debug)]
pub struct MpsDaemons {
    /// The program, or where it was looked for.
    control: Result<PathBuf, ControlNotFound>,
    root: PathBuf,
    default_thread_percentage: Option<u32>,
    /// `gpu.mps_shm_size_mb`.
    shm_size_mb: u64,
    /// GPU UUID → the jobs using its control daemon.
    running: BTreeMap<String, BTreeSet<String>>,
    /// GPUs whose tmpfs an earlier daemon left mounted (with its control
    /// daemon) for jobs that outlived it; until recovery is done.
    left: BTreeSet<String>,
}

impl MpsDaemons {
    pub fn new(cfg: &GpuConfig) -> MpsDaemons {
        let control = find_control(
            cfg.mps_control.as_deref(),
            &cfg.driver_bin_dirs,
            std::env::var_os("PATH").as_deref(),
        );
        match &control {
            Ok(p) => {
                tracing::info!(control = %p.display(), dir = %cfg.mps_dir.display(), "MPS sharing: one control daemon per shared GPU")
            }
            Err(e) => {
                tracing::warn!(searched = %e.searched_in(), "gpu.sharing is mps but {CONTROL_PROGRAM} was not found: MPS jobs will fail until it is installed or gpu.mps_control is set")
            }
        }
        let longest = dirs(&cfg.mps_dir, "GPU-00000000-0000-0000-0000-000000000000")
            .pipe
            .join("control_privileged");
        if longest.as_os_str().len() > 100 {
            tracing::warn!(dir = %cfg.mps_dir.display(), "gpu.mps_dir is long: MPS's sockets under it may exceed the 108-byte limit of Unix socket paths; choose a shorter directory");
        }
        let left: BTreeSet<String> = shm::mounted(&cfg.mps_dir).into_iter().collect();
        if !left.is_empty() {
            tracing::info!(gpus = ?left, "MPS control daemons of an earlier run found; kept for the jobs that are reattached");
        }
        MpsDaemons {
            control,
            root: cfg.mps_dir.clone(),
            default_thread_percentage: cfg.mps_active_thread_percentage,
            shm_size_mb: cfg.mps_shm_size_mb,
            running: BTreeMap::new(),
            left,
        }
    }

    /// A job reattached after a daemon restart uses GPU `uuid` through
    /// MPS: the control daemon and tmpfs the earlier daemon left running
    /// for it are taken over (the job's `/dev/shm` is that tmpfs). Without
    /// them (the host rebooted them away, say) a new control daemon starts;
    /// the job's processes still holding the old `/dev/shm` cannot reach it.
    pub fn adopt(&mut self, job: &str, uuid: &str) -> Result<(), MpsError> {
        if self.left.remove(uuid) {
            tracing::info!(gpu = %uuid, %job, "MPS control daemon of the earlier run taken over");
            self.running
                .entry(uuid.to_string())
                .or_default()
                .insert(job.to_string());
            return Ok(());
        }
        self.acquire(job, uuid)
    }

    /// Recovery is done: the control daemons an earlier run left whose jobs
    /// are gone are stopped and their tmpfs unmounted.
    pub fn finish_recovery(&mut self) {
        for uuid in std::mem::take(&mut self.left) {
            tracing::info!(gpu = %uuid, "stopping an MPS control daemon no reattached job uses");
            self.quit(&uuid);
        }
    }

    /// GPUs whose control daemon runs, with their jobs.
    pub fn running(&self) -> &BTreeMap<String, BTreeSet<String>> {
        &self.running
    }

    /// `job` uses GPU `uuid` through MPS: starts the GPU's control daemon
    /// if it is the first. Nothing is recorded when it fails.
    pub fn acquire(&mut self, job: &str, uuid: &str) -> Result<(), MpsError> {
        if let Some(jobs) = self.running.get_mut(uuid) {
            jobs.insert(job.to_string());
            return Ok(());
        }
        self.start(uuid)?;
        self.running
            .entry(uuid.to_string())
            .or_default()
            .insert(job.to_string());
        Ok(())
    }

    /// `job` no longer uses MPS: GPUs left without MPS jobs get their
    /// control daemon stopped.
    pub fn release(&mut self, job: &str) {
        let idle: Vec<String> = self
            .running
            .iter_mut()
            .filter_map(|(uuid, jobs)| (jobs.remove(job) && jobs.is_empty()).then(|| uuid.clone()))
            .collect();
        for uuid in idle {
            self.running.remove(&uuid);
            self.quit(&uuid);
        }
    }

    fn program(&self) -> Result<&Path, MpsError> {
        self.control
            .as_deref()
            .map_err(|e| MpsError::NotFound(e.clone()))
    }

    fn start(&self, uuid: &str) -> Result<(), MpsError> {
        let program = self.program()?.to_path_buf();
        let d = dirs(&self.root, uuid);
        for dir in [&d.pipe, &d.log] {
            std::fs::create_dir_all(dir)
                .and_then(|()| {
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
                })
                .map_err(|source| MpsError::Dir {
                    path: dir.clone(),
                    source,
                })?;
        }
        shm::mount(&d.shm, self.shm_size_mb).map_err(|source| MpsError::Shm {
            path: d.shm.clone(),
            source,
        })?;
        if let Err(e) = self.run(&program, uuid, Some("-d"), None) {
            self.unmount_shm(uuid);
            return Err(e);
        }
        tracing::info!(gpu = %uuid, pipe = %d.pipe.display(), shm = %d.shm.display(), "MPS control daemon started");
        if let Some(pct) = self.default_thread_percentage {
            let cmd = format!("set_default_active_thread_percentage {pct}");
            if let Err(e) = self.run(&program, uuid, None, Some(&cmd)) {
                // Without the cap the node's setting would not hold.
                self.quit(uuid);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Stops GPU `uuid`'s control daemon, then unmounts its tmpfs (also
    /// when `quit` failed: no mount outlives the daemon's use of it).
    fn quit(&self, uuid: &str) {
        if let Ok(program) = self.program() {
            match self.run(program, uuid, None, Some("quit")) {
                Ok(()) => tracing::info!(gpu = %uuid, "MPS control daemon stopped"),
                Err(e) => {
                    tracing::error!(gpu = %uuid, error = %e, "cannot stop the MPS control daemon")
                }
            }
        }
        self.unmount_shm(uuid);
    }

    fn unmount_shm(&self, uuid: &str) {
        let path = dirs(&self.root, uuid).shm;
        if let Err(e) = shm::unmount(&path) {
            tracing::error!(gpu = %uuid, dir = %path.display(), error = %e, "cannot unmount the MPS shared-memory tmpfs");
        }
    }

    /// Runs the control program for GPU `uuid` with `arg` or with
    /// `command` on its stdin; output appended to the GPU's
    /// `control.out`.
    fn run(
        &self,
        program: &Path,
        uuid: &str,
        arg: Option<&str>,
        command: Option<&str>,
    ) -> Result<(), MpsError> {
        let d = dirs(&self.root, uuid);
        let out_path = self.root.join(uuid).join(OUTPUT);
        let what = arg.or(command).unwrap_or_default().to_string();
        let dir_err = |source| MpsError::Dir {
            path: out_path.clone(),
            source,
        };
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&out_path)
            .map_err(dir_err)?;
        let start = out.seek(SeekFrom::End(0)).map_err(dir_err)?;
        let mut cmd = Command::new(program);
        // Not the daemon's SCHED_BATCH: MPS serves the jobs' CUDA calls.
        crate::sched_class::normal_in_child(&mut cmd);
        // The daemon itself (`-d`) gets the GPU's tmpfs as its /dev/shm;
        // commands only talk to it over the pipe directory.
        let in_namespace = arg == Some("-d");
        if in_namespace {
            shm::bind_on_dev_shm(&mut cmd, &d.shm).map_err(|e| MpsError::Namespace {
                program: program.to_path_buf(),
                shm: d.shm.clone(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
            })?;
        }
        cmd.args(arg)
            .env("CUDA_VISIBLE_DEVICES", uuid)
            .env("CUDA_MPS_PIPE_DIRECTORY", &d.pipe)
            .env("CUDA_MPS_LOG_DIRECTORY", &d.log)
            .stdin(if command.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(out.try_clone().map_err(dir_err)?)
            .stderr(out.try_clone().map_err(dir_err)?);
        let mut child = cmd.spawn().map_err(|source| {
            let program = program.to_path_buf();
            if in_namespace {
                MpsError::Namespace {
                    program,
                    shm: d.shm.clone(),
                    source,
                }
            } else {
                MpsError::Spawn { program, source }
            }
        })?;
        if let (Some(text), Some(mut stdin)) = (command, child.stdin.take()) {
            // A program that exits without reading is judged by its status.
            let _ = stdin.write_all(format!("{text}\n").as_bytes());
        }
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(MpsError::Timeout {
                        program: program.to_path_buf(),
                        what,
                        log: out_path,
                    });
                }
            }
        };
        if status.success() {
            return Ok(());
        }
        let mut output = String::new();
        if out.seek(SeekFrom::Start(start)).is_ok() {
            let _ = out.read_to_string(&mut output);
        }
        Err(MpsError::Failed {
            program: program.to_path_buf(),
            what,
            status: status.to_string(),
            output,
            log: out_path,
        })
    }
}

impl Drop for MpsDaemons {
    /// Daemon shutdown: the jobs keep running under their shims, and so do
    /// the control daemons they use; the next daemon takes them over.
    fn drop(&mut self) {
        for (uuid, jobs) in &self.running {
            tracing::info!(gpu = %uuid, jobs = jobs.len(), "MPS control daemon left running for its jobs");
        }
    }
}

#[cfg(test)]
mod tests;
