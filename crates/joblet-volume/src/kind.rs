//! What backs a volume.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What backs a volume (`rnx volume create --type=filesystem|memory`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VolumeKind {
    /// An ext4 filesystem in an image file on the node's disk, mounted through a loop device:
    /// its space is reserved at creation and its content survives restarts and reboots.
    Filesystem,
    /// A tmpfs: in memory, its content lost when it is unmounted or the node reboots. The
    /// kernel charges a tmpfs page to the memory cgroup of the process that wrote it, so
    /// what a job writes counts against that job's memory limit.
    Memory,
}

impl VolumeKind {
    /// Both kinds.
    pub const ALL: [VolumeKind; 2] = [VolumeKind::Filesystem, VolumeKind::Memory];

    /// `filesystem` or `memory`: the name the CLI and the store use.
    pub fn as_str(self) -> &'static str {
        match self {
            VolumeKind::Filesystem => "filesystem",
            VolumeKind::Memory => "memory",
        }
    }
}

impl fmt::Display for VolumeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind name that is neither `filesystem` nor `memory`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown volume type {0:?}; expected filesystem or memory")]
pub struct UnknownKind(pub String);

impl FromStr for VolumeKind {
    type Err = UnknownKind;

    fn from_str(s: &str) -> Result<VolumeKind, UnknownKind> {
        VolumeKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownKind(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_refused() {
        for k in VolumeKind::ALL {
            assert_eq!(k.as_str().parse::<VolumeKind>(), Ok(k));
            assert_eq!(k.to_string(), k.as_str());
        }
        assert_eq!(
            "Memory".parse::<VolumeKind>().unwrap_err().to_string(),
            "unknown volume type \"Memory\"; expected filesystem or memory"
        );
        assert!("".parse::<VolumeKind>().is_err());
    }
}
