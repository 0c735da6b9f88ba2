//! The node's sandbox settings, resolved once at start-up, and what they
//! mean for one job (the [`JobSandbox`] the shim's runner carries out).

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::fcntl::{Flock, FlockArg};

use joblet_core::{JobId, JobSpec, NodeCapabilities};
use joblet_sandbox::cgroup::{self, Layout, Limits, Support};
use joblet_sandbox::devices::DeviceRules;
use joblet_sandbox::init::{InitConfig, NetMode};
use joblet_sandbox::JobSandbox;

use crate::config::Config;
use crate::gpu::edits::GpuEdits;

/// Where the daemon locks its cgroup base (`cgroup-<base>.lock`): two
/// daemons on one host must never share a base, or one's start-up cleanup
/// would remove the other's job cgroups while they are being set up.
pub const CGROUP_LOCK_DIR: &str = "/run/joblet";

/// Where a job's volumes appear: `/volumes/NAME`.
pub const VOLUMES_DIR: &str = "/volumes";

/// The top-level paths of a runtime's tree bound into its jobs (those the
/// tree has), read-only: the programs, libraries and configuration; the
/// sandbox provides `/dev`, `/proc`, `/tmp`, `/work` and `/run` itself.
pub const RUNTIME_ENTRIES: [&str; 10] = [
    "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/etc", "/opt", "/var",
];

/// What a job mounts besides the node's own tree: its runtime's tree in
/// place of the host's programs, and its volumes.
#[derive(Debug, Clone, Default)]
pub struct JobMounts {
    /// The runtime's tree on the host (`--runtime`); `None`: the host's
    /// `filesystem.allowed_mounts`.
    pub runtime: Option<PathBuf>,
    /// Each volume's host directory, bound at `/volumes/NAME`.
    pub volumes: Vec<joblet_sandbox::init::Bind>,
}

/// The entries of [`RUNTIME_ENTRIES`] that `tree` has (as a directory or
/// a symlink), in that order.
pub fn runtime_entries(tree: &Path) -> Vec<PathBuf> {
    RUNTIME_ENTRIES
        .iter()
        .map(PathBuf::from)
        .filter(|p| std::fs::symlink_metadata(tree.join(p.strip_prefix("/").unwrap_or(p))).is_ok())
        .collect()
}

/// What every job on this node gets.
#[derive(Debug, Clone)]
pub struct NodeSandbox {
    pub cgroup_base: String,
    /// Held for the daemon's life (see [`CGROUP_LOCK_DIR`]).
    _base_lock: Arc<Flock<File>>,
    /// Where that lock lives (removed at a clean stop with nothing left).
    base_lock_path: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub allow_root: bool,
    pub ro_mounts: Vec<PathBuf>,
    pub tmp_size_mb: u64,
    /// `filesystem.work_size_mb`: 0 = the host work dir bound at `/work`.
    pub work_size_mb: u64,
    pub pids_max: u64,
    pub seccomp: bool,
    /// `sandbox.seccomp_allow`.
    pub seccomp_allow: Vec<joblet_sandbox::init::SyscallGroup>,
    pub support: Support,
    layout: Layout,
}

#[derive(Debug, thiserror::Error)]
pub enum SandboxSetupError {
    #[error("sandbox.enabled: the job sandbox needs root (namespaces, cgroups, device filters); run joblet as root, or set sandbox.enabled: false to run jobs unisolated")]
    NotRoot,
    #[error("jobs.user: {0}")]
    User(crate::config::UserError),
    #[error("cgroups: {0}")]
    Cgroup(#[from] joblet_sandbox::cgroup::CgroupError),
    #[error("sandbox.cgroup_base {base:?} is in use by another joblet daemon on this host (lock {lock}); give each daemon its own cgroup_base")]
    BaseInUse { base: String, lock: PathBuf },
    #[error("cannot lock the cgroup base: {path}: {source}")]
    BaseLock {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Takes `<lock_dir>/cgroup-<base>.lock` for the daemon's life.
pub fn lock_cgroup_base(lock_dir: &Path, base: &str) -> Result<Flock<File>, SandboxSetupError> {
    let lock_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SandboxSetupError::BaseLock { path, source }
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(lock_dir)
        .map_err(lock_err(lock_dir))?;
    // The base is a checked single directory name (config), so it is a
    // safe file name.
    let path = lock_dir.join(format!("cgroup-{base}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(lock_err(&path))?;
    // flock: tied to this open file, released when the daemon dies.
    Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|_| SandboxSetupError::BaseInUse {
        base: base.to_string(),
        lock: path,
    })
}

impl NodeSandbox {
    /// Checks that this node can sandbox jobs as configured and takes the
    /// cgroup base for this daemon.
    pub fn prepare(cfg: &Config) -> Result<NodeSandbox, SandboxSetupError> {
        if !nix::unistd::geteuid().is_root() {
            return Err(SandboxSetupError::NotRoot);
        }
        // Checked with the rest of the config before start-up (the same
        // function); resolved again here, where it is used.
        let (uid, gid) = crate::config::jobs_user(&cfg.jobs).map_err(SandboxSetupError::User)?;
        let layout = Layout::detect(Path::new("/proc/self/mountinfo"))?;
        let support = layout.support()?;
        let base_lock = lock_cgroup_base(Path::new(CGROUP_LOCK_DIR), &cfg.sandbox.cgroup_base)?;
        let ro_mounts = cfg
            .filesystem
            .allowed_mounts
            .iter()
            .filter(|p| p.exists())
            .cloned()
            .collect();
        Ok(NodeSandbox {
            cgroup_base: cfg.sandbox.cgroup_base.clone(),
            _base_lock: Arc::new(base_lock),
            base_lock_path: Path::new(CGROUP_LOCK_DIR)
                .join(format!("cgroup-{}.lock", cfg.sandbox.cgroup_base)),
            uid,
            gid,
            allow_root: cfg.jobs.allow_root,
            ro_mounts,
            tmp_size_mb: cfg.filesystem.tmp_size_mb,
            work_size_mb: cfg.filesystem.work_size_mb,
            pids_max: cfg.jobs.pids_max,
            seccomp: cfg.sandbox.seccomp,
            seccomp_allow: cfg.sandbox.seccomp_allow.clone(),
            support,
            layout,
        })
    }

    /// Removes the empty job cgroups an earlier daemon left behind, except
    /// those of the jobs in `keep` (the jobs this daemon tracks); reports
    /// the ones that still hold processes. Never fails the daemon: a
    /// cgroup that cannot be read is logged and left.
    pub fn sweep_stale(&self, keep: &std::collections::BTreeSet<String>) {
        match cgroup::cleanup_stale(&self.layout, &self.cgroup_base, &|name| keep.contains(name)) {
            Ok(busy) => {
                for dir in busy {
                    tracing::warn!(cgroup = %dir.display(), "a job cgroup from an earlier run still holds processes; left alone");
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot sweep the job cgroups an earlier run left")
            }
        }
    }

    /// The daemon stops cleanly: the cgroup base directories it made go,
    /// and the base's lock file with them. Jobs that keep running under
    /// their shims keep theirs (a busy directory cannot be removed), and
    /// then the lock file stays too.
    pub fn close(&self) {
        let mut left = 0;
        for dir in self.layout.dirs_for(&self.cgroup_base) {
            match std::fs::remove_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::info!(dir = %dir.display(), error = %e, "cgroup base kept (jobs still run in it)");
                    left += 1;
                }
            }
        }
        if left == 0 {
            if let Err(e) = std::fs::remove_file(&self.base_lock_path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %self.base_lock_path.display(), error = %e, "cannot remove the cgroup base's lock file");
                }
            }
        }
    }

    /// Kills whatever is left of a job whose shim is gone (it would otherwise
    /// run on outside any supervision) and removes its cgroups.
    pub fn destroy_job_cgroup(
        &self,
        id: &JobId,
    ) -> Result<(), joblet_sandbox::cgroup::CgroupError> {
        cgroup::JobCgroup::open(&self.layout, &self.cgroup_base, id.as_str())?.destroy()
    }

    /// The limits this node's cgroups can enforce (GPUs, runtimes and volumes
    /// land with their own capabilities).
    pub fn capabilities(&self) -> NodeCapabilities {
        NodeCapabilities {
            cpu_limit: self.support.cpu_limit,
            cpu_pinning: self.support.cpu_pinning,
            memory_limit: self.support.memory_limit,
            io_limit: self.support.io_limit,
            // Device control is always there with the sandbox; whether the
            // node has GPUs is the server's to add.
            ..NodeCapabilities::default()
        }
    }

    /// The sandbox for one job whose host working directory is `workdir`;
    /// `gpu`: its GPU devices, driver files and masks
    /// ([`crate::gpu::edits`]).
    /// `mounts`: its runtime and volumes.
    pub fn job(
        &self,
        id: &JobId,
        spec: &JobSpec,
        workdir: &Path,
        gpu: GpuEdits,
        mounts: JobMounts,
    ) -> JobSandbox {
        let r = &spec.resources;
        let limits = Limits {
            cpu_percent: r.max_cpu_percent,
            cpuset: r.cpu_cores.clone(),
            memory_mb: r.max_memory_mb,
            io_bps: r.max_iobps,
            io_path: r.max_iobps.map(|_| workdir.to_owned()),
            pids_max: self.pids_max,
        };
        let net = match spec.network {
            joblet_core::Network::None => NetMode::None,
            joblet_core::Network::Host => NetMode::Host,
        };
        let mut sandbox = self.sandbox(id, workdir, gpu, limits, net);
        if let Some(tree) = mounts.runtime {
            sandbox.init.ro_mounts = runtime_entries(&tree);
            sandbox.init.root = Some(tree);
        }
        sandbox.init.binds.extend(mounts.volumes);
        sandbox
    }

    /// The sandbox a warm shim builds ahead of the job `id` (see
    /// `joblet_sandbox::runner`): a CPU job's with the node's defaults and
    /// its own network namespace; `gpu` is what a CPU job gets on this node
    /// ([`crate::gpu::edits::cpu_job`]). The job's own settings replace it
    /// when it starts; a job it cannot serve gets a fresh sandbox.
    pub fn warm(&self, id: &JobId, workdir: &Path, gpu: GpuEdits) -> JobSandbox {
        let limits = Limits {
            pids_max: self.pids_max,
            ..Limits::default()
        };
        self.sandbox(id, workdir, gpu, limits, NetMode::None)
    }

    /// What a process run inside job `id` (`rnx job exec`) runs with:
    /// the node's user, root policy and seccomp filter, as every job of
    /// the node (the exec checks them against the job's process).
    pub fn exec_init(&self, id: &JobId, workdir: &Path) -> InitConfig {
        self.warm(id, workdir, GpuEdits::default()).init
    }

    fn sandbox(
        &self,
        id: &JobId,
        workdir: &Path,
        gpu: GpuEdits,
        limits: Limits,
        net: NetMode,
    ) -> JobSandbox {
        let mut devices = DeviceRules::minimal();
        for rule in gpu.rules {
            devices.allow(rule);
        }
        JobSandbox {
            cgroup_base: self.cgroup_base.clone(),
            cgroup_name: id.to_string(),
            limits,
            devices,
            init: InitConfig {
                // Filled from the shim spec by the runner.
                command: String::new(),
                args: Vec::new(),
                env: Default::default(),
                hostname: format!("job-{}", id.short()),
                uid: self.uid,
                gid: self.gid,
                allow_root: self.allow_root,
                ro_mounts: self.ro_mounts.clone(),
                root: None,
                extra_devices: Vec::new(),
                work_dir: workdir.to_owned(),
                work_size_mb: self.work_size_mb,
                tmp_size_mb: self.tmp_size_mb,
                net,
                seccomp: self.seccomp,
                seccomp_allow: self.seccomp_allow.clone(),
                binds: gpu.binds,
                masks: gpu.masks,
                device_binds: gpu.devices,
                dev_shm: gpu.dev_shm,
                warm: false,
                stdin: None,
            },
            oci: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_daemon_per_cgroup_base() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock_cgroup_base(dir.path(), "joblet").unwrap();
        let err = lock_cgroup_base(dir.path(), "joblet")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"joblet\" is in use by another joblet daemon")
                && err.contains("its own cgroup_base"),
            "{err}"
        );
        // Another base is independent; a released lock can be taken again.
        let _other = lock_cgroup_base(dir.path(), "joblet-2").unwrap();
        drop(first);
        lock_cgroup_base(dir.path(), "joblet").unwrap();
    }
}
