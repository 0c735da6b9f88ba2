//! The node's runtimes: the content-addressed store (`joblet_runtime`),
//! the catalog of manifests built into the daemon, and builds run off the
//! async workers with their progress sent back as they go.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use joblet_runtime::{
    catalog, BuildError, BuildOptions, Installed, Manifest, ManifestError, Progress, RuntimeStore,
    StoreError,
};
use tokio::sync::mpsc;

/// Why a runtime operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeOpError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error("cannot stage the manifest's files in {path}: {source}")]
    Stage {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no runtime {name} in this node's catalog; `rnx runtime list --all` shows the catalog, and `rnx runtime build DIR` builds one from your own manifest")]
    NotInCatalog { name: String },
    #[error("the catalog has {name}@{has}, not @{asked}; install {name}@{has}, or build the version you want from its manifest (`rnx runtime build`)")]
    WrongVersion {
        name: String,
        has: String,
        asked: String,
    },
}

/// One event of a build.
#[derive(Debug)]
pub enum BuildEvent {
    Progress(Progress),
    Done(Box<Result<Installed, RuntimeOpError>>),
}

/// The node's runtimes.
pub struct NodeRuntimes {
    store: Arc<RuntimeStore>,
    /// The tool paths builds use.
    tools: BuildOptions,
}

impl NodeRuntimes {
    /// Opens (creating) the store at `dir`; clears what an interrupted
    /// build left there.
    pub fn open(dir: PathBuf) -> Result<NodeRuntimes, StoreError> {
        Ok(NodeRuntimes {
            store: Arc::new(RuntimeStore::open(&dir)?),
            tools: BuildOptions::default(),
        })
    }

    pub fn list(&self) -> Result<Vec<Installed>, StoreError> {
        self.store.list()
    }

    /// `name` or `name@version`: the installed one (the newest without a
    /// version).
    pub fn resolve(&self, reference: &str) -> Result<Option<Installed>, StoreError> {
        let (name, version) = split(reference);
        self.store.resolve(name, version)
    }

    pub fn remove(&self, reference: &str) -> Result<Installed, StoreError> {
        let (name, version) = split(reference);
        self.store.remove(name, version)
    }

    /// The catalog's manifests (those that parse; a broken one is logged).
    pub fn catalog(&self) -> Vec<Manifest> {
        catalog::list()
            .iter()
            .filter_map(|e| match e.manifest() {
                Ok(m) => Some(m),
                Err(err) => {
                    tracing::error!(runtime = e.name, error = %err, "catalog manifest does not parse");
                    None
                }
            })
            .collect()
    }

    /// The catalog's files for `reference` (`name` or `name@version`).
    pub fn catalog_files(
        &self,
        reference: &str,
    ) -> Result<BTreeMap<String, Vec<u8>>, RuntimeOpError> {
        let (name, version) = split(reference);
        let entry = catalog::get(name).ok_or_else(|| RuntimeOpError::NotInCatalog {
            name: name.to_owned(),
        })?;
        let files = entry.files();
        if let Some(asked) = version {
            let m = Manifest::from_files(&files)?;
            if m.version.as_str() != asked {
                return Err(RuntimeOpError::WrongVersion {
                    name: name.to_owned(),
                    has: m.version.to_string(),
                    asked: asked.to_owned(),
                });
            }
        }
        Ok(files)
    }

    /// Builds the manifest in `files` and installs it, off the async
    /// workers. Events come on the returned channel, the last one
    /// [`BuildEvent::Done`]; dropping the receiver cancels the build (the
    /// running tool is killed, nothing is installed).
    pub fn build(
        &self,
        files: BTreeMap<String, Vec<u8>>,
        extras: Vec<String>,
        rebuild: bool,
    ) -> Result<mpsc::Receiver<BuildEvent>, RuntimeOpError> {
        let manifest = Manifest::from_files(&files)?;
        let staging = tempfile::Builder::new()
            .prefix(".manifest-")
            .tempdir_in(self.store.root())
            .map_err(|source| RuntimeOpError::Stage {
                path: self.store.root().to_owned(),
                source,
            })?;
        joblet_runtime::manifest::write_files(&files, staging.path()).map_err(|source| {
            RuntimeOpError::Stage {
                path: staging.path().to_owned(),
                source,
            }
        })?;
        let (tx, rx) = mpsc::channel(256);
        let store = self.store.clone();
        let opts = BuildOptions {
            extras,
            rebuild,
            ..self.tools.clone()
        };
        tokio::task::spawn_blocking(move || {
            let cancel = AtomicBool::new(false);
            let mut progress = |p: Progress| {
                // A full channel drops a progress line; a closed one
                // (the client went away) cancels.
                if let Err(mpsc::error::TrySendError::Closed(_)) =
                    tx.try_send(BuildEvent::Progress(p))
                {
                    cancel.store(true, Ordering::SeqCst);
                }
            };
            let done = joblet_runtime::build(
                &manifest,
                staging.path(),
                &store,
                &opts,
                &mut progress,
                &cancel,
            )
            .map_err(RuntimeOpError::from);
            match &done {
                Ok(i) => {
                    tracing::info!(runtime = %i.name, version = %i.version, digest = %i.digest, "runtime installed")
                }
                Err(e) => {
                    tracing::warn!(runtime = %manifest.name, error = %e, "runtime build failed")
                }
            }
            drop(staging);
            let _ = tx.blocking_send(BuildEvent::Done(Box::new(done)));
        });
        Ok(rx)
    }
}

/// `name@version` → (`name`, `Some(version)`).
pub fn split(reference: &str) -> (&str, Option<&str>) {
    match reference.split_once('@') {
        Some((n, v)) => (n, Some(v)),
        None => (reference, None),
    }
}
