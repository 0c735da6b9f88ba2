//! The runtime operations: list, info, install (from the node's catalog)
//! and build (from a manifest the client sends) with progress, remove
//! (refused while an unfinished job names the runtime) and test (its
//! self-check, run as a job in it).

use std::collections::BTreeMap;
use std::sync::Arc;

use joblet_core::record::JobDetails;
use joblet_core::JobRequest;
use joblet_runtime::{Installed, Manifest};
use joblet_store::Store;
use tokio::sync::mpsc;

use super::{Access, ApiError, Caller, Jobs};
use crate::storage::{runtimes::split, BuildEvent, NodeStorage, RuntimeOpError};

/// A runtime as `rnx runtime list` and `info` show it: installed, or in
/// the node's catalog only.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RuntimeInfo {
    pub name: String,
    pub version: String,
    pub description: String,
    pub installed: bool,
    /// `sha256:…`; empty when not installed.
    pub digest: String,
    pub size_bytes: u64,
    pub files: u64,
    pub installed_at_ms: i64,
    pub cuda: Option<String>,
    pub environment: BTreeMap<String, String>,
    pub self_check: Vec<String>,
    pub debian_packages: Vec<String>,
    /// `name==version`.
    pub python_packages: Vec<String>,
    pub extras: Vec<String>,
    /// Unfinished jobs that run in it.
    pub jobs: Vec<String>,
}

impl RuntimeInfo {
    /// A runtime just installed (no job uses it yet).
    pub fn from_installed(i: Installed) -> RuntimeInfo {
        RuntimeInfo::installed(i, Vec::new())
    }

    fn installed(i: Installed, jobs: Vec<String>) -> RuntimeInfo {
        RuntimeInfo {
            name: i.name,
            version: i.version,
            description: i.description,
            installed: true,
            digest: i.digest,
            size_bytes: i.size_bytes,
            files: i.files,
            installed_at_ms: i64::try_from(i.installed_at)
                .unwrap_or(i64::MAX)
                .saturating_mul(1000),
            cuda: i.cuda,
            environment: i.environment,
            self_check: i.self_check,
            debian_packages: i.debian_packages,
            python_packages: i
                .python_packages
                .into_iter()
                .map(|(n, v)| format!("{n}=={v}"))
                .collect(),
            extras: i.extras,
            jobs,
        }
    }

    /// A catalog manifest not installed: what installing it gives.
    fn available(m: &Manifest) -> RuntimeInfo {
        let mut python_packages: Vec<String> = m
            .python
            .iter()
            .filter_map(|p| m.lock(&p.lock))
            .flat_map(|l| l.packages.iter().map(|(n, v)| format!("{n}=={v}")))
            .collect();
        python_packages.sort();
        RuntimeInfo {
            name: m.name.to_string(),
            version: m.version.to_string(),
            description: m.description.clone(),
            installed: false,
            cuda: m.cuda.as_ref().map(ToString::to_string),
            environment: m
                .environment
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
                .collect(),
            self_check: m.self_check.as_slice().to_vec(),
            debian_packages: m
                .base
                .packages
                .iter()
                .map(|p| p.as_str().to_owned())
                .collect(),
            python_packages,
            extras: m
                .python
                .iter()
                .flat_map(|p| p.extras.keys().map(|n| n.as_str().to_owned()))
                .collect(),
            ..RuntimeInfo::default()
        }
    }
}

/// The runtime operations of one node.
pub struct Runtimes {
    storage: Option<Arc<NodeStorage>>,
    store: Arc<Store>,
    jobs: Arc<Jobs>,
}

fn no_sandbox() -> ApiError {
    ApiError::NodeCannot(
        "runtimes need the job sandbox, and this node runs jobs with sandbox.enabled: false; an admin can turn it on in joblet-config.yml".into(),
    )
}

fn op_error(e: RuntimeOpError) -> ApiError {
    match e {
        RuntimeOpError::Manifest(m) => ApiError::InvalidField(joblet_core::FieldError::new(
            "files[\"runtime.yml\"]",
            m.to_string(),
        )),
        e @ (RuntimeOpError::NotInCatalog { .. } | RuntimeOpError::WrongVersion { .. }) => {
            ApiError::NotFound(e.to_string())
        }
        RuntimeOpError::Store(joblet_runtime::StoreError::NotInstalled { name, version }) => {
            let r = version.map(|v| format!("{name}@{v}")).unwrap_or(name);
            ApiError::NotFound(format!(
                "runtime {r} is not installed on this node (`rnx runtime list`)"
            ))
        }
        other => ApiError::NodeCannot(other.to_string()),
    }
}

impl Runtimes {
    pub fn new(storage: Option<Arc<NodeStorage>>, store: Arc<Store>, jobs: Arc<Jobs>) -> Runtimes {
        Runtimes {
            storage,
            store,
            jobs,
        }
    }

    fn storage(&self) -> Result<&NodeStorage, ApiError> {
        self.storage.as_deref().ok_or_else(no_sandbox)
    }

    /// Unfinished jobs naming `name@version`.
    fn users(&self, name: &str, version: &str) -> Result<Vec<String>, ApiError> {
        let pinned = format!("{name}@{version}");
        Ok(self
            .store
            .unfinished()
            .map_err(super::store_error)?
            .into_iter()
            .filter(|r| r.spec.runtime.as_deref() == Some(pinned.as_str()))
            .map(|r| r.id.to_string())
            .collect())
    }

    fn info(&self, i: Installed) -> Result<RuntimeInfo, ApiError> {
        let jobs = self.users(&i.name, &i.version)?;
        Ok(RuntimeInfo::installed(i, jobs))
    }

    /// Installed runtimes by name then version, and with `available` the
    /// catalog's that are not.
    pub fn list(&self, caller: &Caller, available: bool) -> Result<Vec<RuntimeInfo>, ApiError> {
        caller.check(Access::Read)?;
        let storage = self.storage()?;
        let installed = storage.runtimes.list().map_err(|e| op_error(e.into()))?;
        let mut out = Vec::new();
        for i in installed {
            out.push(self.info(i)?);
        }
        if available {
            for m in storage.runtimes.catalog() {
                let same =
                    |r: &RuntimeInfo| r.name == m.name.as_str() && r.version == m.version.as_str();
                if !out.iter().any(same) {
                    out.push(RuntimeInfo::available(&m));
                }
            }
        }
        out.sort_by(|a, b| {
            a.name
                .cmp(&b.name)
                .then_with(|| joblet_runtime::version::compare(&a.version, &b.version))
        });
        Ok(out)
    }

    /// One runtime: installed, or else the catalog's.
    pub fn get(&self, caller: &Caller, reference: &str) -> Result<RuntimeInfo, ApiError> {
        caller.check(Access::Read)?;
        let storage = self.storage()?;
        check_reference(reference)?;
        if let Some(i) = storage
            .runtimes
            .resolve(reference)
            .map_err(|e| op_error(e.into()))?
        {
            return self.info(i);
        }
        let files = storage.runtimes.catalog_files(reference).map_err(|e| match e {
            RuntimeOpError::NotInCatalog { .. } => ApiError::NotFound(format!(
                "runtime {reference} is neither installed nor in this node's catalog (`rnx runtime list --all`)"
            )),
            other => op_error(other),
        })?;
        let m = Manifest::from_files(&files).map_err(|e| op_error(e.into()))?;
        Ok(RuntimeInfo::available(&m))
    }

    /// Builds a catalog runtime; see [`NodeStorage`]'s build.
    pub fn install(
        &self,
        caller: &Caller,
        reference: &str,
        extras: Vec<String>,
        rebuild: bool,
    ) -> Result<mpsc::Receiver<BuildEvent>, ApiError> {
        caller.check(Access::Admin("install runtimes"))?;
        check_reference(reference)?;
        let storage = self.storage()?;
        let files = storage
            .runtimes
            .catalog_files(reference)
            .map_err(op_error)?;
        storage
            .runtimes
            .build(files, extras, rebuild)
            .map_err(op_error)
    }

    /// Builds a runtime from the client's manifest and its files.
    pub fn build(
        &self,
        caller: &Caller,
        files: BTreeMap<String, Vec<u8>>,
        extras: Vec<String>,
        rebuild: bool,
    ) -> Result<mpsc::Receiver<BuildEvent>, ApiError> {
        caller.check(Access::Admin("build runtimes"))?;
        let storage = self.storage()?;
        if !files.contains_key("runtime.yml") {
            return Err(joblet_core::FieldError::new(
                "files",
                "must hold runtime.yml (the manifest) and the files it names, by path relative to it",
            )
            .into());
        }
        storage
            .runtimes
            .build(files, extras, rebuild)
            .map_err(op_error)
    }

    /// Removes an installed runtime no unfinished job names.
    pub async fn remove(&self, caller: &Caller, reference: &str) -> Result<RuntimeInfo, ApiError> {
        caller.check(Access::Admin("remove runtimes"))?;
        check_reference(reference)?;
        let storage = self.storage()?;
        let _gate = storage.gate.write().await;
        let Some(i) = storage
            .runtimes
            .resolve(reference)
            .map_err(|e| op_error(e.into()))?
        else {
            return Err(ApiError::NotFound(format!(
                "runtime {reference} is not installed on this node (`rnx runtime list`)"
            )));
        };
        let jobs = self.users(&i.name, &i.version)?;
        if !jobs.is_empty() {
            return Err(ApiError::InUse(format!(
                "runtime {}@{} is used by {} unfinished job(s): {}; remove it once they end (or stop them with `rnx job stop`)",
                i.name,
                i.version,
                jobs.len(),
                jobs.join(", ")
            )));
        }
        let pinned = format!("{}@{}", i.name, i.version);
        // Deleting a large tree takes a while (minutes for the ML
        // runtime's 38k files on a disk mounted with `discard`): off the
        // async workers, with the gate held until its record is gone.
        let store = self.storage.clone().ok_or_else(no_sandbox)?;
        let removed = tokio::task::spawn_blocking(move || store.runtimes.remove(&pinned))
            .await
            .map_err(|e| ApiError::Internal(format!("runtime remove task: {e}")))?
            .map_err(|e| op_error(e.into()))?;
        tracing::info!(runtime = %removed.name, version = %removed.version, digest = %removed.digest, "runtime removed");
        Ok(RuntimeInfo::installed(removed, Vec::new()))
    }

    /// Runs the runtime's self-check as a job in it.
    pub async fn test(&self, caller: &Caller, reference: &str) -> Result<JobDetails, ApiError> {
        caller.check(Access::Admin("run jobs"))?;
        check_reference(reference)?;
        let storage = self.storage()?;
        let Some(i) = storage
            .runtimes
            .resolve(reference)
            .map_err(|e| op_error(e.into()))?
        else {
            return Err(ApiError::NotFound(format!(
                "runtime {reference} is not installed on this node: install it with `rnx runtime install {reference}`"
            )));
        };
        let Some((command, args)) = i.self_check.split_first() else {
            return Err(ApiError::NodeCannot(format!(
                "runtime {}@{} has no self_check in its manifest",
                i.name, i.version
            )));
        };
        let req = JobRequest {
            command: command.clone(),
            args: args.to_vec(),
            runtime: format!("{}@{}", i.name, i.version),
            ..JobRequest::default()
        };
        self.jobs.run(caller, req).await
    }
}

/// `name` or `name@version`, as the job field's rule has it.
fn check_reference(reference: &str) -> Result<(), ApiError> {
    if joblet_core::split_runtime_ref(reference).is_none() {
        return Err(joblet_core::FieldError::new(
            "name",
            format!(
                "invalid runtime {:?}: expected NAME or NAME@VERSION, like python-3.11-ml or python-3.11-ml@1.0",
                joblet_core::text::clip(reference)
            ),
        )
        .into());
    }
    let _ = split(reference);
    Ok(())
}
