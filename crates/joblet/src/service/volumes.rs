//! The volume operations: create, list, inspect, remove (refused while an
//! unfinished job mounts the volume; `force` kills those jobs first, and
//! is needed for another caller's volume) and share.

use std::sync::Arc;
use std::time::Duration;

use joblet_core::{FieldError, JobId, UnixMillis};
use joblet_store::{Store, StoreError};
use joblet_volume::{VolumeError, VolumeKind};

use super::{Access, ApiError, Caller, Jobs};
use crate::storage::{NodeStorage, VolumeOpError, VolumeState};

/// A volume as `rnx volume list` and `inspect` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeInfo {
    pub state: VolumeState,
    /// Unfinished jobs that mount it.
    pub jobs: Vec<String>,
}

/// The volume operations of one node.
pub struct Volumes {
    storage: Option<Arc<NodeStorage>>,
    store: Arc<Store>,
    jobs: Arc<Jobs>,
    now: fn() -> UnixMillis,
}

fn no_sandbox() -> ApiError {
    ApiError::NodeCannot(
        "volumes need the job sandbox, and this node runs jobs with sandbox.enabled: false; an admin can turn it on in joblet-config.yml".into(),
    )
}

fn op_error(e: VolumeOpError) -> ApiError {
    match e {
        VolumeOpError::Store(e) => match *e {
            StoreError::VolumeExists(n) => exists(&n),
            StoreError::VolumeNotFound(n) => not_found(&n),
            other => ApiError::NodeCannot(other.to_string()),
        },
        VolumeOpError::Host(e) => match *e {
            VolumeError::AlreadyExists { name, .. } => exists(&name),
            e @ VolumeError::InvalidName { .. } => FieldError::new("name", e.to_string()).into(),
            e @ VolumeError::InvalidSize { .. } => {
                FieldError::new("size_bytes", e.to_string()).into()
            }
            e @ VolumeError::InUse { .. } => ApiError::InUse(e.to_string()),
            other => ApiError::NodeCannot(other.to_string()),
        },
        other => ApiError::NodeCannot(other.to_string()),
    }
}

fn exists(name: &str) -> ApiError {
    ApiError::AlreadyExists(format!(
        "a volume named {name} already exists on this node (`rnx volume list`); pick another name, or remove it first"
    ))
}

fn not_found(name: &str) -> ApiError {
    ApiError::NotFound(format!(
        "volume {name} does not exist on this node (`rnx volume list`); create it with `rnx volume create {name} --size=1GB`"
    ))
}

impl Volumes {
    pub fn new(
        storage: Option<Arc<NodeStorage>>,
        store: Arc<Store>,
        jobs: Arc<Jobs>,
        now: fn() -> UnixMillis,
    ) -> Volumes {
        Volumes {
            storage,
            store,
            jobs,
            now,
        }
    }

    fn storage(&self) -> Result<&Arc<NodeStorage>, ApiError> {
        self.storage.as_ref().ok_or_else(no_sandbox)
    }

    /// Unfinished jobs that mount `name`.
    fn users(&self, name: &str) -> Result<Vec<JobId>, ApiError> {
        Ok(self
            .store
            .unfinished()
            .map_err(super::store_error)?
            .into_iter()
            .filter(|r| r.spec.volumes.iter().any(|v| v.name == name))
            .map(|r| r.id)
            .collect())
    }

    fn info(&self, state: VolumeState) -> Result<VolumeInfo, ApiError> {
        let jobs = self.users(&state.record.name)?;
        Ok(VolumeInfo {
            state,
            jobs: jobs.iter().map(ToString::to_string).collect(),
        })
    }

    /// Makes a volume of `size_bytes` and `kind` (`filesystem`, the
    /// default, or `memory`) owned by the caller.
    pub async fn create(
        &self,
        caller: &Caller,
        name: &str,
        size_bytes: i64,
        kind: &str,
        shared: bool,
    ) -> Result<VolumeInfo, ApiError> {
        caller.check(Access::Admin("create volumes"))?;
        let storage = self.storage()?.clone();
        let kind = match kind.trim() {
            "" => VolumeKind::Filesystem,
            k => k.parse::<VolumeKind>().map_err(|_| {
                FieldError::new(
                    "type",
                    format!(
                        "unknown volume type {:?}: expected filesystem (an ext4 image, kept across reboots; the default) or memory (a tmpfs, emptied by a reboot)",
                        joblet_core::text::clip(k)
                    ),
                )
            })?,
        };
        let size = u64::try_from(size_bytes)
            .ok()
            .filter(|&s| s > 0)
            .ok_or_else(|| {
                FieldError::new(
                    "size_bytes",
                    format!("must be a positive number of bytes (got {size_bytes}); rnx takes sizes like --size=1GB or --size=512MB"),
                )
            })?;
        joblet_volume::validate_name(name).map_err(|e| FieldError::new("name", e.to_string()))?;
        joblet_volume::validate_size(kind, size)
            .map_err(|e| FieldError::new("size_bytes", e.to_string()))?;
        let (owner, now) = (caller.name.clone(), (self.now)());
        let name = name.to_owned();
        let made = {
            let storage = storage.clone();
            tokio::task::spawn_blocking(move || {
                storage
                    .volumes
                    .create(&name, kind, size, &owner, shared, now)
            })
            .await
            .map_err(|e| ApiError::Internal(format!("volume create task: {e}")))?
        };
        let rec = made.map_err(op_error)?;
        tracing::info!(volume = %rec.name, kind = %rec.kind, size_bytes = rec.size_bytes, owner = %rec.owner, "volume created");
        self.info(storage.volumes.state(rec))
    }

    pub fn list(&self, caller: &Caller) -> Result<Vec<VolumeInfo>, ApiError> {
        caller.check(Access::Read)?;
        let storage = self.storage()?;
        let records = storage.volumes.list().map_err(op_error)?;
        records
            .into_iter()
            .map(|r| self.info(storage.volumes.state(r)))
            .collect()
    }

    pub fn get(&self, caller: &Caller, name: &str) -> Result<VolumeInfo, ApiError> {
        caller.check(Access::Read)?;
        let storage = self.storage()?;
        let rec = storage
            .volumes
            .record(name)
            .map_err(op_error)?
            .ok_or_else(|| not_found(name))?;
        self.info(storage.volumes.state(rec))
    }

    /// Removes a volume. Refused while unfinished jobs mount it, unless
    /// `force`: then they are killed, and the removal waits for them to
    /// end. Another caller's volume needs `force` too.
    pub async fn remove(
        &self,
        caller: &Caller,
        name: &str,
        force: bool,
    ) -> Result<VolumeInfo, ApiError> {
        caller.check(Access::Admin("remove volumes"))?;
        let storage = self.storage()?.clone();
        let rec = storage
            .volumes
            .record(name)
            .map_err(op_error)?
            .ok_or_else(|| not_found(name))?;
        if rec.owner != caller.name && !force {
            return Err(ApiError::InUse(format!(
                "volume {name} belongs to {}; remove it with --force to remove another user's volume",
                rec.owner
            )));
        }
        let _gate = storage.gate.write().await;
        let users = self.users(name)?;
        if !users.is_empty() {
            if !force {
                let ids: Vec<String> = users.iter().map(ToString::to_string).collect();
                return Err(ApiError::InUse(format!(
                    "volume {name} is mounted by {} unfinished job(s): {}; remove it once they end, or with --force, which kills them first",
                    ids.len(),
                    ids.join(", ")
                )));
            }
            self.kill_and_wait(caller, name, &users).await?;
        }
        let state = storage.volumes.state(rec);
        let removed = {
            let storage = storage.clone();
            let name = name.to_owned();
            tokio::task::spawn_blocking(move || storage.volumes.remove(&name))
                .await
                .map_err(|e| ApiError::Internal(format!("volume remove task: {e}")))?
        };
        removed.map_err(op_error)?;
        tracing::info!(volume = name, force, "volume removed");
        Ok(VolumeInfo {
            state,
            jobs: Vec::new(),
        })
    }

    /// Kills `users` and waits (up to a minute) until none is unfinished.
    async fn kill_and_wait(
        &self,
        caller: &Caller,
        name: &str,
        users: &[JobId],
    ) -> Result<(), ApiError> {
        for id in users {
            match self.jobs.kill(caller, id.as_str()).await {
                Ok(_) | Err(ApiError::WrongState { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let left = self.users(name)?;
            if left.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                let ids: Vec<String> = left.iter().map(ToString::to_string).collect();
                return Err(ApiError::InUse(format!(
                    "volume {name}: jobs {} were killed but have not ended after a minute; try again",
                    ids.join(", ")
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Lets every caller's jobs mount the volume, or only its owner's (any
    /// admin may).
    pub fn set_shared(
        &self,
        caller: &Caller,
        name: &str,
        shared: bool,
    ) -> Result<VolumeInfo, ApiError> {
        caller.check(Access::Admin("share volumes"))?;
        let storage = self.storage()?;
        storage
            .volumes
            .record(name)
            .map_err(op_error)?
            .ok_or_else(|| not_found(name))?;
        let rec = storage.volumes.set_shared(name, shared).map_err(op_error)?;
        self.info(storage.volumes.state(rec))
    }
}
