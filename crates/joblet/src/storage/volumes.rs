//! The node's volumes: their records in the store and their mounts on the
//! host (`joblet_volume`), kept together. A create mounts first and records
//! after (a create the daemon dies in leaves a mount with no record, which
//! the next start removes); a remove unmounts first and forgets after. At
//! start every recorded volume is attached again (after a reboot, or a
//! detach), and what no record names is cleaned away.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use joblet_core::UnixMillis;
use joblet_store::{Store, StoreError, VolumeRecord};
use joblet_volume::{Attach, Tools, Usage, VolumeError, VolumeHost, VolumeKind};

/// Why a volume operation failed (boxed: the errors are large, the
/// results common).
#[derive(Debug, thiserror::Error)]
pub enum VolumeOpError {
    #[error(transparent)]
    Host(Box<VolumeError>),
    #[error(transparent)]
    Store(Box<StoreError>),
    #[error("volume {0} was made, but could not be recorded ({1}); it was removed again")]
    NotRecorded(String, Box<StoreError>),
}

impl From<VolumeError> for VolumeOpError {
    fn from(e: VolumeError) -> Self {
        VolumeOpError::Host(Box::new(e))
    }
}

impl From<StoreError> for VolumeOpError {
    fn from(e: StoreError) -> Self {
        VolumeOpError::Store(Box::new(e))
    }
}

/// The node's volumes.
pub struct NodeVolumes {
    host: VolumeHost,
    store: Arc<Store>,
    /// One change at a time (the host side must not see two calls for one
    /// name at once).
    changes: Mutex<()>,
}

/// A volume's record with how it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeState {
    pub record: VolumeRecord,
    /// What it holds; `None` when it is not mounted.
    pub usage: Option<Usage>,
    /// `mounted`, or why not.
    pub status: String,
}

impl NodeVolumes {
    /// Volumes under `dir`, their root directories owned by the jobs'
    /// user `uid:gid`.
    pub fn new(dir: PathBuf, uid: u32, gid: u32, store: Arc<Store>) -> NodeVolumes {
        NodeVolumes {
            host: VolumeHost::new(dir, uid, gid, Tools::find()),
            store,
            changes: Mutex::new(()),
        }
    }

    /// [`NodeVolumes::new`] with another host (tests).
    pub fn with_host(host: VolumeHost, store: Arc<Store>) -> NodeVolumes {
        NodeVolumes {
            host,
            store,
            changes: Mutex::new(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.changes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// At start: attaches every recorded volume (logging what it did, and
    /// what it could not: such a volume shows why in `rnx volume list`,
    /// and jobs naming it fail to start), then removes the volume
    /// directories no record names (a create the daemon died in).
    pub fn attach_all(&self) {
        let _g = self.lock();
        let records = match self.store.list_volumes() {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the volume records; no volume attached");
                return;
            }
        };
        for r in &records {
            let Some(kind) = kind_of(r) else { continue };
            match self.host.attach(&r.name, kind, r.size_bytes) {
                Ok(Attach::AlreadyMounted) => {}
                Ok(Attach::Mounted { loop_device }) => {
                    tracing::info!(volume = %r.name, loop_device = %loop_device.display(), "volume attached again")
                }
                Ok(Attach::RecreatedEmpty) => {
                    tracing::warn!(volume = %r.name, "memory volume recreated empty (its content went with the last unmount, a reboot)")
                }
                Err(e) => tracing::error!(volume = %r.name, error = %e, "cannot attach volume"),
            }
        }
        let known: std::collections::BTreeSet<&str> =
            records.iter().map(|r| r.name.as_str()).collect();
        let Ok(entries) = std::fs::read_dir(self.host.root()) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if known.contains(name.as_str()) || joblet_volume::validate_name(&name).is_err() {
                continue;
            }
            match self.host.remove(&name) {
                Ok(()) => {
                    tracing::warn!(volume = %name, "removed a volume no record names (a create interrupted by the daemon's end)")
                }
                Err(e) => {
                    tracing::error!(volume = %name, error = %e, "cannot remove a volume no record names")
                }
            }
        }
    }

    /// Makes and records a volume.
    pub fn create(
        &self,
        name: &str,
        kind: VolumeKind,
        size_bytes: u64,
        owner: &str,
        shared: bool,
        now: UnixMillis,
    ) -> Result<VolumeRecord, VolumeOpError> {
        let _g = self.lock();
        if let Some(r) = self.store.volume(name)? {
            return Err(StoreError::VolumeExists(r.name).into());
        }
        self.host.create(name, kind, size_bytes)?;
        let rec = VolumeRecord {
            name: name.to_owned(),
            kind: kind.as_str().to_owned(),
            size_bytes,
            owner: owner.to_owned(),
            shared,
            created_ms: now,
        };
        if let Err(e) = self.store.insert_volume(&rec) {
            if let Err(undo) = self.host.remove(name) {
                tracing::error!(volume = name, error = %undo, "cannot remove a volume that could not be recorded");
            }
            return Err(VolumeOpError::NotRecorded(name.to_owned(), Box::new(e)));
        }
        Ok(rec)
    }

    /// Unmounts and forgets a volume (the caller checked that no job
    /// uses it).
    pub fn remove(&self, name: &str) -> Result<VolumeRecord, VolumeOpError> {
        let _g = self.lock();
        let rec = self
            .store
            .volume(name)?
            .ok_or_else(|| StoreError::VolumeNotFound(name.to_owned()))?;
        match self.host.remove(name) {
            Ok(()) | Err(VolumeError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        self.store.delete_volume(name)?;
        Ok(rec)
    }

    pub fn set_shared(&self, name: &str, shared: bool) -> Result<VolumeRecord, VolumeOpError> {
        let _g = self.lock();
        self.store.set_volume_shared(name, shared)?;
        self.store
            .volume(name)?
            .ok_or_else(|| StoreError::VolumeNotFound(name.to_owned()).into())
    }

    pub fn record(&self, name: &str) -> Result<Option<VolumeRecord>, VolumeOpError> {
        Ok(self.store.volume(name)?)
    }

    pub fn list(&self) -> Result<Vec<VolumeRecord>, VolumeOpError> {
        Ok(self.store.list_volumes()?)
    }

    /// `rec` with its usage and mount status now.
    pub fn state(&self, rec: VolumeRecord) -> VolumeState {
        let (usage, status) = match kind_of(&rec)
            .ok_or_else(|| format!("unknown kind {:?}", rec.kind))
            .and_then(|k| {
                self.host
                    .mounted_data_dir(&rec.name, k)
                    .map_err(|e| e.to_string())
            })
            .and_then(|_| self.host.usage(&rec.name).map_err(|e| e.to_string()))
        {
            Ok(u) => (Some(u), "mounted".to_owned()),
            Err(why) => (None, why),
        };
        VolumeState {
            record: rec,
            usage,
            status,
        }
    }

    /// The directory a job binds for volume `name`: recorded and mounted
    /// as recorded, or why not.
    pub fn job_dir(&self, name: &str) -> Result<PathBuf, String> {
        let rec = self
            .store
            .volume(name)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "it does not exist on this node (`rnx volume list`)".to_owned())?;
        let kind = kind_of(&rec).ok_or_else(|| format!("unknown kind {:?}", rec.kind))?;
        self.host
            .mounted_data_dir(name, kind)
            .map_err(|e| e.to_string())
    }
}

fn kind_of(r: &VolumeRecord) -> Option<VolumeKind> {
    match r.kind.parse::<VolumeKind>() {
        Ok(k) => Some(k),
        Err(e) => {
            tracing::error!(volume = %r.name, error = %e, "volume record of an unknown kind");
            None
        }
    }
}
