//! Building a runtime from its manifest into a [`RuntimeStore`].
//!
//! 1. **Base**: `mmdebstrap --mode=root` builds the Debian root in a staging directory of
//!    the store, inside a private mount namespace.
//! 2. **Python** (if the manifest has a `python` section): `uv pip install
//!    --require-hashes` installs the locked wheels (and the extras asked for) into the
//!    root's `/usr/local/lib/python3.X/dist-packages`; console scripts go to
//!    `/usr/local/bin`; the root's own Python byte-compiles them.
//! 3. **Ingest**: the root becomes a content-addressed tree ([`crate::store`]), and the
//!    index record is written last.
//!
//! The store's lock is held throughout, so a second build of the same runtime waits, then
//! finds it installed. A build whose inputs (suite, variant, packages, architecture, lock
//! contents, extras chosen) match an installed tree reuses it without running any tool
//! (unless [`BuildOptions::rebuild`]).

mod debian;
mod inputs;
mod python;
mod tool;

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::manifest::{Manifest, Name, RelPath};
use crate::store::{Installed, RuntimeStore, StoreError, StoreLock};

/// How to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildOptions {
    /// Names of the manifest's `python.extras` to install as well.
    pub extras: Vec<String>,
    /// Build again even if the same inputs were built, and replace an installed record of
    /// the same name and version.
    pub rebuild: bool,
    /// The tools, by path or by name on `PATH`.
    pub mmdebstrap: PathBuf,
    pub uv: PathBuf,
    pub unshare: PathBuf,
    pub chroot: PathBuf,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            extras: Vec::new(),
            rebuild: false,
            mmdebstrap: PathBuf::from("mmdebstrap"),
            uv: PathBuf::from("uv"),
            unshare: PathBuf::from("unshare"),
            chroot: PathBuf::from("chroot"),
        }
    }
}

/// Where a build is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for another install or removal to finish.
    Wait,
    /// mmdebstrap is building the Debian root.
    Base,
    /// uv is installing Python packages (then compiling them).
    Python,
    /// The root is being stored.
    Ingest,
    /// Installed.
    Done,
}

/// A progress report. `total` is 0 when unknown; `message` is a tool's output line or a
/// sentence saying what happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub phase: Phase,
    pub done: u64,
    pub total: u64,
    pub message: String,
}

/// Why a build failed. The text says what to do.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("{tool} not found ({}): {hint}", program.display())]
    ToolMissing {
        tool: &'static str,
        program: PathBuf,
        hint: &'static str,
    },

    #[error("cannot run {tool} ({}): {source}", program.display())]
    Spawn {
        tool: &'static str,
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{tool} failed ({status}); its last output:\n{tail}")]
    ToolFailed {
        tool: &'static str,
        status: ExitStatus,
        tail: String,
    },

    #[error(
        "building a runtime needs root (mmdebstrap --mode=root, chroot, and owners of the \
         tree's files): run it as root"
    )]
    NotRoot,

    #[error("build cancelled")]
    Cancelled,

    #[error(
        "runtime {name}: the base has no /usr/bin/python3 -> python3.X link, but the \
         manifest has a `python` section: add `python3` to base.packages"
    )]
    NoPython { name: String },

    #[error(
        "runtime {name}: cannot tell the base's glibc version (no libc6 in its dpkg status), \
         which the Python wheels must match"
    )]
    NoGlibc { name: String },

    #[error("runtime {name} has no extra `{extra}`; its extras: {available}")]
    UnknownExtra {
        name: String,
        extra: String,
        available: String,
    },

    #[error(
        "{name}@{version} is already installed from other inputs (tree {digest}): raise \
         `version` in the manifest, remove the installed one, or rebuild"
    )]
    VersionConflict {
        name: String,
        version: String,
        digest: String,
    },

    #[error(
        "lock file {} differs from the one the manifest was checked with: load the manifest \
         again from the same files",
        path.display()
    )]
    LockChanged { path: PathBuf },

    #[error("wheel directory {} (python.find_links) does not exist on this node", path.display())]
    NoWheelDir { path: PathBuf },

    #[error("unsupported architecture {arch}: runtimes build for x86_64 and aarch64")]
    Architecture { arch: String },

    #[error("cannot {op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Builds `manifest` (its files — lock files, wheel directory — under `files_dir`) into
/// `store` and returns the installed record. See the module documentation for the steps;
/// `progress` is called from this thread; setting `cancel` stops the build (the running
/// tool's process group is killed) with [`BuildError::Cancelled`], leaving nothing
/// installed.
pub fn build(
    manifest: &Manifest,
    files_dir: &Path,
    store: &RuntimeStore,
    opts: &BuildOptions,
    progress: &mut dyn FnMut(Progress),
    cancel: &AtomicBool,
) -> Result<Installed, BuildError> {
    let name = manifest.name.to_string();
    let version = manifest.version.to_string();
    let _span = tracing::info_span!("runtime_build", runtime = %name, version = %version).entered();
    let extras = chosen_extras(manifest, &opts.extras)?;
    for (_, rel) in &extras {
        check_lock(manifest, files_dir, rel)?;
    }
    if let Some(python) = &manifest.python {
        check_lock(manifest, files_dir, &python.lock)?;
    }
    let arch = std::env::consts::ARCH;
    let extra_names: Vec<&str> = extras.iter().map(|(n, _)| n.as_str()).collect();
    let inputs = inputs::digest(manifest, &extra_names, arch);

    let mut report = |phase: Phase, done: u64, total: u64, message: &str| {
        progress(Progress {
            phase,
            done,
            total,
            message: message.to_string(),
        })
    };
    let lock = match store.try_lock()? {
        Some(lock) => lock,
        None => {
            report(
                Phase::Wait,
                0,
                0,
                "waiting for another runtime install or removal to finish",
            );
            store.lock_unless(cancel)?.ok_or(BuildError::Cancelled)?
        }
    };

    let existing = store.resolve(&name, Some(&version))?;
    if let Some(existing) = &existing {
        // Same inputs but the tree gone (removed by hand): built again below.
        let same_inputs = existing.inputs_digest == inputs;
        if same_inputs && existing.root.is_dir() && !opts.rebuild {
            report(
                Phase::Done,
                1,
                1,
                &format!("{name}@{version} is already installed"),
            );
            return Ok(existing.clone());
        }
        if !same_inputs && !opts.rebuild {
            return Err(BuildError::VersionConflict {
                name,
                version,
                digest: existing.digest.clone(),
            });
        }
    }

    let reuse = if opts.rebuild {
        None
    } else {
        store.find_by_inputs(&inputs)?
    };
    let (digest, size_bytes, files, debian_packages) = match reuse {
        Some(same) => {
            report(
                Phase::Ingest,
                1,
                1,
                &format!(
                    "reusing the tree of {}@{} (same inputs)",
                    same.name, same.version
                ),
            );
            (
                same.digest,
                same.size_bytes,
                same.files,
                same.debian_packages,
            )
        }
        None => {
            let built = build_tree(
                manifest,
                files_dir,
                store,
                &lock,
                opts,
                &extras,
                &mut report,
                cancel,
            )?;
            (built.0.digest, built.0.size_bytes, built.0.files, built.1)
        }
    };

    let mut python_packages: Vec<(String, String)> = Vec::new();
    if let Some(python) = &manifest.python {
        let rels = std::iter::once(&python.lock).chain(extras.iter().map(|(_, rel)| *rel));
        for lock_file in rels.filter_map(|rel| manifest.lock(rel)) {
            for pin in &lock_file.packages {
                if !python_packages.iter().any(|(n, _)| *n == pin.0) {
                    python_packages.push(pin.clone());
                }
            }
        }
        python_packages.sort();
    }
    let mut record = Installed {
        name: name.clone(),
        version: version.clone(),
        description: manifest.description.clone(),
        digest,
        root: PathBuf::new(),
        size_bytes,
        files,
        installed_at: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        environment: manifest
            .environment
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        cuda: manifest.cuda.map(|c| c.to_string()),
        self_check: manifest.self_check.as_slice().to_vec(),
        python_packages,
        debian_packages,
        extras: extra_names.iter().map(|s| s.to_string()).collect(),
        inputs_digest: inputs,
    };
    store.commit(&lock, &record)?;
    if existing.is_some_and(|old| old.digest != record.digest) {
        store.collect(&lock)?;
    }
    record.root = store.tree_path(&record.digest);
    tracing::info!(digest = %record.digest, size_bytes = record.size_bytes, files = record.files, "runtime installed");
    report(
        Phase::Done,
        1,
        1,
        &format!("{name}@{version} installed ({})", record.digest),
    );
    Ok(record)
}

/// The extras asked for, checked against the manifest, in the manifest's order.
fn chosen_extras<'m>(
    manifest: &'m Manifest,
    wanted: &[String],
) -> Result<Vec<(&'m Name, &'m RelPath)>, BuildError> {
    let available = manifest.python.as_ref().map(|p| &p.extras);
    for extra in wanted {
        if !available.is_some_and(|a| a.keys().any(|k| k.as_str() == extra)) {
            let names: Vec<&str> = available
                .into_iter()
                .flat_map(|a| a.keys().map(|k| k.as_str()))
                .collect();
            return Err(BuildError::UnknownExtra {
                name: manifest.name.to_string(),
                extra: extra.clone(),
                available: if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                },
            });
        }
    }
    Ok(available
        .into_iter()
        .flatten()
        .filter(|(k, _)| wanted.iter().any(|w| w == k.as_str()))
        .collect())
}

/// The lock file in `files_dir` must be the one the manifest was checked with.
fn check_lock(manifest: &Manifest, files_dir: &Path, rel: &RelPath) -> Result<(), BuildError> {
    let path = files_dir.join(rel.as_path());
    let bytes = std::fs::read(&path).map_err(|source| BuildError::Io {
        op: "read",
        path: path.clone(),
        source,
    })?;
    let hash = crate::lock::Lock::parse(&bytes).map(|l| l.sha256).ok();
    if hash.as_deref() != manifest.lock(rel).map(|l| l.sha256.as_str()) {
        return Err(BuildError::LockChanged { path });
    }
    Ok(())
}

type Report<'a> = dyn FnMut(Phase, u64, u64, &str) + 'a;

/// Runs the tools in a staging directory and ingests the result; returns the tree and the
/// root's Debian packages.
#[allow(clippy::too_many_arguments)]
fn build_tree(
    manifest: &Manifest,
    files_dir: &Path,
    store: &RuntimeStore,
    lock: &StoreLock,
    opts: &BuildOptions,
    extras: &[(&Name, &RelPath)],
    report: &mut Report<'_>,
    cancel: &AtomicBool,
) -> Result<(crate::store::Tree, Vec<String>), BuildError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(BuildError::NotRoot);
    }
    let name = manifest.name.to_string();
    let unshare = tool::locate(tool::UNSHARE, &opts.unshare)?;
    let mmdebstrap = tool::locate(tool::MMDEBSTRAP, &opts.mmdebstrap)?;
    let python_tools = match &manifest.python {
        Some(_) => Some((
            tool::locate(tool::UV, &opts.uv)?,
            tool::locate(tool::CHROOT, &opts.chroot)?,
        )),
        None => None,
    };

    let staging = store.staging(lock)?;
    let rootfs = staging.rootfs();
    report(
        Phase::Base,
        0,
        0,
        &format!(
            "mmdebstrap {} ({})",
            manifest.base.suite,
            manifest.base.variant.as_str()
        ),
    );
    let mut lines = 0;
    tool::run(
        tool::MMDEBSTRAP,
        debian::mmdebstrap_command(&unshare, &mmdebstrap, &manifest.base, &rootfs),
        cancel,
        &mut |line| {
            lines += 1;
            report(Phase::Base, lines, 0, line);
        },
    )?;
    let debian_packages = debian::installed_packages(&rootfs)?;

    if let (Some(python), Some((uv, chroot))) = (&manifest.python, python_tools) {
        let (py_version, dist) =
            debian::python_of(&rootfs).ok_or(BuildError::NoPython { name: name.clone() })?;
        let glibc = debian::glibc_version(&debian_packages)
            .ok_or(BuildError::NoGlibc { name: name.clone() })?;
        let platform = python::platform(std::env::consts::ARCH, glibc)?;
        let mut locks = vec![files_dir.join(python.lock.as_path())];
        locks.extend(extras.iter().map(|(_, rel)| files_dir.join(rel.as_path())));
        let total: u64 = std::iter::once(&python.lock)
            .chain(extras.iter().map(|(_, rel)| *rel))
            .filter_map(|rel| manifest.lock(rel))
            .map(|l| l.packages.len() as u64)
            .sum();
        if total > 0 {
            let find_links = python.find_links.as_ref().map(|f| f.resolve(files_dir));
            if let Some(dir) = &find_links {
                if !dir.is_dir() {
                    return Err(BuildError::NoWheelDir { path: dir.clone() });
                }
            }
            let target = rootfs.join(&dist);
            let cache = store.uv_cache();
            report(
                Phase::Python,
                0,
                total,
                &format!("uv: {total} packages for Python {py_version} ({platform})"),
            );
            let mut installed = 0;
            tool::run(
                tool::UV,
                python::UvInstall {
                    uv: &uv,
                    target: &target,
                    python_version: &py_version,
                    platform: &platform,
                    cache: &cache,
                    locks: &locks,
                    find_links: find_links.as_deref(),
                }
                .command(),
                cancel,
                &mut |line| {
                    if line.trim_start().starts_with("+ ") {
                        installed += 1;
                    }
                    report(Phase::Python, installed, total, line);
                },
            )?;
            python::install_scripts(&rootfs, &target)?;
            report(Phase::Python, installed, total, "compiling Python bytecode");
            tool::run(
                tool::CHROOT,
                python::compileall_command(&chroot, &rootfs, &dist),
                cancel,
                &mut |line| report(Phase::Python, installed, total, line),
            )
            .or_else(|e| match e {
                // compileall exits 1 when some file does not compile (test data, files for
                // other Python versions); those stay uncompiled, as pip leaves them.
                BuildError::ToolFailed { status, .. } if status.code() == Some(1) => {
                    tracing::warn!("some Python files did not byte-compile");
                    Ok(())
                }
                other => Err(other),
            })?;
        }
    }
    if cancel.load(Ordering::Relaxed) {
        return Err(BuildError::Cancelled);
    }

    report(Phase::Ingest, 0, 0, "storing the runtime's files");
    let tree = store
        .ingest(
            lock,
            &staging,
            &mut |done, total| report(Phase::Ingest, done, total, "storing the runtime's files"),
            cancel,
        )
        .map_err(|e| match e {
            StoreError::Cancelled => BuildError::Cancelled,
            other => BuildError::Store(other),
        })?;
    Ok((tree, debian_packages))
}
