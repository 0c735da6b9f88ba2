//! Jobs under an OCI runtime (runc, crun, runsc) instead of the native
//! sandbox, driven by the same shim: the runner writes the job's bundle
//! from its sandbox settings ([`convert`], `joblet_oci::bundle`), has the
//! runtime create and start the container in one `run --detach` (the
//! container's init becomes the shim's child when the runtime's process
//! exits: the shim is a child subreaper), and hands the shim the init as
//! the job's leader. The init leads its own session and process group, so stop,
//! kill, timeouts and the fencing deadline reach it as they reach any
//! job; its exit is the job's end, logs are the same pipes, and the job
//! outlives a daemon restart with its shim. After the job the cgroup says
//! whether memory ran out, and `delete --force` removes what is left.
//!
//! Anything that fails before the container runs undoes itself (the
//! container is deleted) and the job does not start.

mod convert;
pub mod hook;
mod hybrid;
pub mod init;

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use joblet_oci::runtime::{Cli, Runtime};
use joblet_shim::{RunnerError, ShimSpec};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::cgroup::{JobCgroup, Layout};
use crate::runner::JobSandbox;

/// The OCI part of a job's sandbox settings: which runtime runs it and
/// where its bundle goes.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct OciSettings {
    /// The executor's name, as the job asked (for messages).
    pub executor: String,
    pub runtime: Runtime,
    /// The bundle's directory (`config.json`, `rootfs/`, the pid file and
    /// the runtime's log); made by the runner.
    pub bundle: PathBuf,
    /// CDI edits for the job's `--device`s, merged, applied to the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdi: Option<joblet_oci::cdi::ContainerEdits>,
}

/// A container the runner started, until its cleanup.
pub(crate) struct OciActive {
    runtime: Runtime,
    id: String,
    bundle: PathBuf,
    hide_unified: Option<PathBuf>,
    cgroup: Option<JobCgroup>,
    /// Where joblet's pid 1 tells the job's end (runc and crun), until the
    /// shim takes it.
    pub(crate) end: Option<OwnedFd>,
}

fn isolation(executor: &str, what: &str, e: impl std::fmt::Display) -> RunnerError {
    RunnerError::Isolation(format!("executor {executor}: {what}: {e}"))
}

/// The container id of job `job_id`: unique on the node, and the same
/// after a daemon restart.
pub fn container_id(job_id: &str) -> String {
    format!("joblet-{job_id}")
}

/// Where `/sys` and the cgroup mounts are read (the real host's).
const SYSFS: &str = "/sys";
const MOUNTINFO: &str = "/proc/self/mountinfo";

/// crun refuses a hybrid host (cgroup v1 controllers beside a cgroup2
/// mount); it runs with the cgroup2 mount out of its sight, on v1 alone.
fn hide_unified(cli: Cli, layout: Option<&Layout>) -> Option<PathBuf> {
    let layout = layout?;
    (cli == Cli::Crun && matches!(layout, Layout::Hybrid { .. }))
        .then(|| layout.unified_root().map(Path::to_path_buf))
        .flatten()
}

/// Whether the host limits memory plus swap in the hierarchy the memory
/// controller is on: v1's `memsw` files, or cgroup2's `memory.swap.max`
/// (the root has no memory files: joblet's base has it when the kernel
/// accounts swap; before the base exists, any child of the root does).
fn swap_accounting(layout: Option<&Layout>, base: &str) -> bool {
    let Some(layout) = layout else { return false };
    match layout.v1_mount(crate::cgroup::Controller::Memory) {
        Some(v1) => v1.join("memory.memsw.limit_in_bytes").exists(),
        None => layout.unified_root().is_some_and(|root| {
            let in_base = root.join(base);
            if in_base.is_dir() {
                return in_base.join("memory.swap.max").exists();
            }
            fs::read_dir(root).ok().is_some_and(|mut d| {
                d.any(|e| e.is_ok_and(|e| e.path().join("memory.swap.max").exists()))
            })
        }),
    }
}

impl OciActive {
    fn log(&self) -> PathBuf {
        self.bundle.join("runtime.log")
    }

    /// Runs the runtime with `args`; its standard streams as given.
    fn run(
        &self,
        args: Vec<std::ffi::OsString>,
        stdout: Stdio,
        stderr: Stdio,
    ) -> io::Result<ExitStatus> {
        self.run_with(args, stdout, stderr, None)
    }

    /// [`Self::run`], with `fd3` as the runtime's descriptor 3 (which
    /// `--preserve-fds 1` hands to the container's init).
    fn run_with(
        &self,
        args: Vec<std::ffi::OsString>,
        stdout: Stdio,
        stderr: Stdio,
        fd3: Option<&OwnedFd>,
    ) -> io::Result<ExitStatus> {
        let mut cmd = Command::new(&self.runtime.binary);
        if let Some(fd) = fd3 {
            crate::init::sys_inherit_fds(&mut cmd, [(std::os::fd::AsRawFd::as_raw_fd(fd), 3)]);
        }
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            );
        if let Some(unified) = &self.hide_unified {
            hybrid::without_mount(&mut cmd, unified)?;
        }
        cmd.status()
    }

    /// What the runtime said last, for an error message.
    fn said(&self) -> String {
        fs::read_to_string(self.log())
            .ok()
            .and_then(|l| joblet_oci::runtime::last_error(&l))
            .map(|m| format!(": {m}"))
            .unwrap_or_default()
    }

    /// `delete --force`; true once the runtime's state of the container
    /// is gone.
    fn delete(&self) -> bool {
        let args = self.runtime.delete(&self.id, &self.log());
        match self.run(args, Stdio::null(), Stdio::null()) {
            Ok(st) if st.success() => true,
            // The shim's reaper may reap the runtime's process first (it
            // reaps every child once the job has ended): the state
            // directory says whether the delete happened.
            Ok(_) | Err(_) if !self.runtime.state_dir(&self.id).exists() => true,
            Ok(st) => {
                tracing::error!(container = %self.id, status = %st, said = %self.said(), "the runtime could not delete the container");
                false
            }
            Err(e) => {
                tracing::error!(container = %self.id, error = %e, "cannot run the runtime to delete the container");
                false
            }
        }
    }

    /// Why the job died, when its cgroup knows better than its exit status.
    pub(crate) fn death_reason(&self) -> Option<String> {
        match self.cgroup.as_ref()?.death_reason() {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read why the job ended from its cgroup");
                None
            }
        }
    }

    /// After the job: the container, its cgroup and the bundle's root go.
    pub(crate) fn cleanup(self) {
        if self.delete() {
            if let Err(e) = fs::remove_dir_all(self.bundle.join("rootfs")) {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::warn!(bundle = %self.bundle.display(), error = %e, "cannot remove the bundle's root");
                }
            }
        }
    }
}

/// Reaps this process's exited children until dropped: on a failed start,
/// the container's processes, orphaned to the shim, while the runtime
/// deletes the container (it waits for them to be gone).
struct Reaping {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reaping {
    fn start() -> Reaping {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("oci-reap".into())
            .spawn(move || {
                use nix::sys::wait::{waitpid, WaitPidFlag};
                while !flag.load(Ordering::Relaxed) {
                    match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                        Ok(nix::sys::wait::WaitStatus::StillAlive) | Err(_) => {
                            std::thread::sleep(std::time::Duration::from_millis(10))
                        }
                        Ok(_) => {}
                    }
                }
            })
            .ok();
        Reaping { stop, thread }
    }
}

impl Drop for Reaping {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Writes `bytes` to `path`, readable by root only (the spec holds the
/// job's environment, secrets included).
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut f = fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)?;
    // Not synced: the bundle is of use only while this shim runs (a crash
    // leaves a job the daemon reports lost, and its container deleted).
    f.write_all(bytes)
}

/// Starts `job` under its OCI runtime; returns the container's init (the
/// shim's child by then) and what cleans it up. `shim`: this binary (the
/// loopback hook).
pub(crate) fn start(
    job: &JobSandbox,
    oci: &OciSettings,
    spec: &ShimSpec,
    (stdout, stderr): (OwnedFd, OwnedFd),
    shim: &Path,
) -> Result<(Pid, OciActive), RunnerError> {
    let name = &oci.executor;
    let t0 = std::time::Instant::now();
    let layout = Layout::detect(Path::new(MOUNTINFO))
        .map_err(|e| tracing::warn!(error = %e, "cannot read the cgroup layout"))
        .ok();
    let bundle = &oci.bundle;
    let rootfs = bundle.join("rootfs");
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(bundle)
        .map_err(|e| {
            isolation(
                name,
                &format!("creating the bundle {}", bundle.display()),
                e,
            )
        })?;
    fs::DirBuilder::new()
        .mode(0o755)
        .create(&rootfs)
        .or_else(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => Ok(()),
            _ => Err(e),
        })
        .map_err(|e| isolation(name, "creating the bundle's root", e))?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&oci.runtime.root)
        .map_err(|e| isolation(name, "creating the runtime's state directory", e))?;
    let input = convert::bundle_input(
        job,
        spec,
        &rootfs,
        Path::new(SYSFS),
        swap_accounting(layout.as_ref(), &job.cgroup_base),
        (oci.runtime.cli != Cli::Runsc).then_some(shim),
    )
    .map_err(|e| isolation(name, "the job's bundle", e))?;
    let mut config =
        joblet_oci::bundle::build(&input).map_err(|e| isolation(name, "the job's bundle", e))?;
    if let Some(edits) = &oci.cdi {
        joblet_oci::cdi::apply(edits, &mut config, &joblet_oci::cdi::HostNodes)
            .map_err(|e| isolation(name, "applying CDI devices", e))?;
    }
    let json = serde_json::to_vec_pretty(&config)
        .map_err(|e| isolation(name, "writing the job's bundle", e))?;
    let config_path = bundle.join("config.json");
    write_private(&config_path, &json)
        .map_err(|e| isolation(name, &format!("writing {}", config_path.display()), e))?;

    let id = container_id(&spec.job_id);
    let active = OciActive {
        runtime: oci.runtime.clone(),
        id: id.clone(),
        bundle: bundle.clone(),
        hide_unified: hide_unified(oci.runtime.cli, layout.as_ref()),
        cgroup: None,
        end: None,
    };
    let pid_file = bundle.join("init.pid");
    let _ = fs::remove_file(&pid_file);
    // Joblet's pid 1 (runc, crun) tells the job's end on fd 3.
    let with_init = oci.runtime.cli != Cli::Runsc;
    let (end, status_w) = if with_init {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| isolation(name, "creating the job's status pipe", e))?;
        (Some(r), Some(w))
    } else {
        (None, None)
    };
    // Created and started in one call: one runtime process on the job's
    // start, not two.
    let created = active.run_with(
        oci.runtime
            .run_detached(&id, bundle, &pid_file, &active.log(), u32::from(with_init)),
        Stdio::from(stdout),
        Stdio::from(stderr),
        status_w.as_ref(),
    );
    // The container's init holds the write end now.
    drop(status_w);
    // Once the container runs (or failed), the runtime has read the spec
    // for good (it keeps its own copy in its state directory, on /run):
    // the environment's values, secrets among them, leave the disk. What
    // stays, for whoever wants to see the bundle the job ran in, is the
    // spec with its variables' names only.
    let forget_config = || {
        let mut redacted = config.clone();
        if let Some(p) = redacted.process_mut().as_mut() {
            if let Some(env) = p.env_mut().as_mut() {
                for v in env.iter_mut() {
                    let name = v.split('=').next().unwrap_or_default().to_string();
                    *v = format!("{name}=");
                }
            }
        }
        let written = serde_json::to_vec_pretty(&redacted)
            .map_err(io::Error::other)
            .and_then(|json| write_private(&config_path.with_extension("tmp"), &json))
            .and_then(|()| fs::rename(config_path.with_extension("tmp"), &config_path));
        if let Err(e) = written {
            tracing::warn!(path = %config_path.display(), error = %e, "cannot replace the bundle's config.json by its redacted copy");
            if let Err(e) = fs::remove_file(&config_path) {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::error!(path = %config_path.display(), error = %e, "cannot remove the bundle's config.json");
                }
            }
        }
    };
    let fail = |active: &OciActive, what: &str, detail: String| {
        let said = active.said();
        forget_config();
        // The container's processes are this process's children by now
        // (runsc's sandbox and gofer too), and the runtime waits for them
        // to be gone: they are reaped while it deletes the container.
        let reaping = Reaping::start();
        active.delete();
        drop(reaping);
        RunnerError::Isolation(format!(
            "executor {name}: {} {what} failed{detail}{said}",
            active.runtime.binary.display()
        ))
    };
    match created {
        Ok(st) if st.success() => {}
        Ok(st) => return Err(fail(&active, "run --detach", format!(" ({st})"))),
        Err(e) => return Err(fail(&active, "run --detach", format!(": {e}"))),
    }
    let pid = match fs::read_to_string(&pid_file)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
    {
        Some(pid) if pid > 0 => pid,
        _ => {
            return Err(fail(
                &active,
                "run --detach",
                format!(": no pid in {}", pid_file.display()),
            ))
        }
    };
    forget_config();
    let cgroup = layout
        .as_ref()
        .and_then(|l| JobCgroup::open(l, &job.cgroup_base, &job.cgroup_name).ok());
    tracing::info!(
        job = %spec.job_id,
        executor = %name,
        container = %id,
        pid,
        elapsed_us = t0.elapsed().as_micros() as u64,
        "job started under an OCI runtime"
    );
    Ok((
        Pid::from_raw(pid),
        OciActive {
            cgroup,
            end,
            ..active
        },
    ))
}
