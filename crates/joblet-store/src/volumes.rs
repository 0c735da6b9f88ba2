//! Named volumes (`rnx volume create NAME`): which exist on this node, what backs them,
//! how large they are and who owns them (schema step 5).
//!
//! The store keeps the record only. The host side (the ext4 image or the tmpfs, and its
//! mount) belongs to the daemon (`joblet-volume`), which re-attaches every recorded volume
//! on start.

use std::path::Path;

use joblet_core::UnixMillis;
use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::{Deserialize, Serialize};

use crate::{SqlContext, Store, StoreError};

/// The kinds a volume may have: the names `joblet_volume::VolumeKind` writes.
pub const VOLUME_KINDS: [&str; 2] = ["filesystem", "memory"];

const COLUMNS: &str = "name, kind, size_bytes, owner, shared, created_ms";

/// A named volume as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeRecord {
    /// Unique on the node; what `rnx volume` and a job's `--volume` name it by, and where
    /// jobs see it (`/volumes/NAME`).
    pub name: String,
    /// What backs it, one of [`VOLUME_KINDS`]: `filesystem` (an ext4 image on the node's
    /// disk; its content survives restarts and reboots) or `memory` (a tmpfs; emptied by a
    /// reboot).
    pub kind: String,
    /// Its capacity in bytes, as requested at creation; never 0.
    pub size_bytes: u64,
    /// The user who created it.
    pub owner: String,
    /// Whether its owner has shared it (`set_volume_shared`); what sharing allows is the
    /// daemon's rule, the store only keeps the flag. `false` for a new volume unless the
    /// record says otherwise.
    pub shared: bool,
    /// When it was created (Unix milliseconds).
    pub created_ms: UnixMillis,
}

fn bad(name: &str, what: impl Into<String>) -> StoreError {
    StoreError::Volume {
        name: name.to_owned(),
        what: what.into(),
    }
}

/// A `volumes` row before its size and kind are checked.
struct RawVolume {
    name: String,
    kind: String,
    size_bytes: i64,
    owner: String,
    shared: bool,
    created_ms: i64,
}

impl RawVolume {
    /// Reads the columns in [`COLUMNS`] order.
    fn from_row(r: &Row<'_>) -> rusqlite::Result<RawVolume> {
        Ok(RawVolume {
            name: r.get(0)?,
            kind: r.get(1)?,
            size_bytes: r.get(2)?,
            owner: r.get(3)?,
            shared: r.get(4)?,
            created_ms: r.get(5)?,
        })
    }

    fn into_record(self) -> Result<VolumeRecord, StoreError> {
        let size_bytes = u64::try_from(self.size_bytes).map_err(|_| {
            bad(
                &self.name,
                format!(
                    "stored size {} is negative; the row is corrupt",
                    self.size_bytes
                ),
            )
        })?;
        if !VOLUME_KINDS.contains(&self.kind.as_str()) {
            return Err(bad(
                &self.name,
                format!("stored kind {:?} is unknown; the row is corrupt", self.kind),
            ));
        }
        Ok(VolumeRecord {
            name: self.name,
            kind: self.kind,
            size_bytes,
            owner: self.owner,
            shared: self.shared,
            created_ms: self.created_ms,
        })
    }
}

/// Volume `name`'s record on `conn`, if any.
fn read(conn: &Connection, path: &Path, name: &str) -> Result<Option<VolumeRecord>, StoreError> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM volumes WHERE name = ?1"))
        .and_then(|mut stmt| stmt.query_row([name], RawVolume::from_row).optional())
        .during(path, || format!("read volume {name}"))?
        .map(RawVolume::into_record)
        .transpose()
}

impl Store {
    /// Records a new volume. A name already recorded is refused
    /// ([`StoreError::VolumeExists`]), as are an unknown kind and a size of 0 or one past
    /// 63 bits.
    pub fn insert_volume(&self, rec: &VolumeRecord) -> Result<(), StoreError> {
        let name = rec.name.as_str();
        if !VOLUME_KINDS.contains(&rec.kind.as_str()) {
            return Err(bad(
                name,
                format!(
                    "unknown kind {:?}; expected one of {}",
                    rec.kind,
                    VOLUME_KINDS.join(", ")
                ),
            ));
        }
        let size = i64::try_from(rec.size_bytes)
            .ok()
            .filter(|&s| s > 0)
            .ok_or_else(|| {
                bad(
                    name,
                    format!(
                        "size {} bytes is out of range; expected 1 to {}",
                        rec.size_bytes,
                        i64::MAX
                    ),
                )
            })?;
        // One statement: a concurrent insert of the same name cannot slip in between a
        // check and the insert.
        let inserted = self
            .lock()
            .prepare_cached(
                "INSERT INTO volumes (name, kind, size_bytes, owner, shared, created_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (name) DO NOTHING",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    name,
                    rec.kind,
                    size,
                    rec.owner,
                    rec.shared,
                    rec.created_ms
                ])
            })
            .during(&self.path, || format!("record volume {name}"))?;
        if inserted == 0 {
            return Err(StoreError::VolumeExists(name.to_owned()));
        }
        tracing::debug!(volume = name, kind = %rec.kind, size_bytes = rec.size_bytes, owner = %rec.owner, "recorded volume");
        Ok(())
    }

    /// The volume named `name`, if any.
    pub fn volume(&self, name: &str) -> Result<Option<VolumeRecord>, StoreError> {
        read(&self.lock(), &self.path, name)
    }

    /// Every volume, by name.
    pub fn list_volumes(&self) -> Result<Vec<VolumeRecord>, StoreError> {
        let path = &self.path;
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM volumes ORDER BY name"))
            .during(path, || "list volumes".into())?;
        let rows = stmt
            .query_map([], RawVolume::from_row)
            .during(path, || "list volumes".into())?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row.during(path, || "list volumes".into())?.into_record()?);
        }
        Ok(out)
    }

    /// Deletes volume `name`'s record; true if there was one.
    pub fn delete_volume(&self, name: &str) -> Result<bool, StoreError> {
        let n = self
            .lock()
            .prepare_cached("DELETE FROM volumes WHERE name = ?1")
            .and_then(|mut stmt| stmt.execute([name]))
            .during(&self.path, || format!("delete volume {name}"))?;
        if n > 0 {
            tracing::debug!(volume = name, "deleted volume record");
        }
        Ok(n > 0)
    }

    /// Sets whether volume `name` is shared. [`StoreError::VolumeNotFound`] if there is no
    /// such volume.
    pub fn set_volume_shared(&self, name: &str, shared: bool) -> Result<(), StoreError> {
        let n = self
            .lock()
            .prepare_cached("UPDATE volumes SET shared = ?2 WHERE name = ?1")
            .and_then(|mut stmt| stmt.execute(params![name, shared]))
            .during(&self.path, || format!("update volume {name}"))?;
        if n == 0 {
            return Err(StoreError::VolumeNotFound(name.to_owned()));
        }
        Ok(())
    }
}
