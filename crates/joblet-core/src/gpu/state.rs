//! The GPU state machine (seed 002, plus DRAINING):
//!
//! ```text
//!             allocate          start
//! AVAILABLE ──────────▶ ALLOCATED ──────▶ IN_USE
//!     ▲  ▲                  │ release        │ release
//!     │  └──────────────────┴────────────────┘
//!     │                                      │ xid needing reset
//!     │ reset ok                             ▼
//!     └──────────────────────────────── RESETTING ──▶ DEGRADED (reset failed)
//!
//! health failure: AVAILABLE | ALLOCATED | IN_USE | DRAINING ──▶ DEGRADED
//! admin drain:    AVAILABLE | ALLOCATED | IN_USE ──▶ DRAINING (jobs finish, none start)
//! admin offline:  any ──▶ OFFLINE          admin online: DEGRADED | DRAINING | OFFLINE ──▶ AVAILABLE (DRAINING with jobs ──▶ IN_USE)
//! ```
//! Only AVAILABLE (and, for shared placement, ALLOCATED / IN_USE) GPUs may
//! receive new jobs; see [`GpuState::accepts_new_jobs`].

use std::fmt;
use std::str::FromStr;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum GpuState {
    Available,
    Allocated,
    InUse,
    Degraded,
    Resetting,
    Offline,
    Draining,
}

/// An edge the GPU state machine does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("GPU cannot go from {from} to {to}")]
pub struct GpuTransitionError {
    pub from: GpuState,
    pub to: GpuState,
}

impl GpuState {
    pub const ALL: [GpuState; 7] = [
        GpuState::Available,
        GpuState::Allocated,
        GpuState::InUse,
        GpuState::Degraded,
        GpuState::Resetting,
        GpuState::Offline,
        GpuState::Draining,
    ];

    /// Whether the machine has an edge from `self` to `to`.
    pub fn can_go_to(self, to: GpuState) -> bool {
        use GpuState::*;
        matches!(
            (self, to),
            (Available, Allocated | Degraded | Draining | Offline)
                | (Allocated, InUse | Available | Degraded | Draining | Offline)
                | (InUse, Available | Resetting | Degraded | Draining | Offline)
                | (Resetting, Available | Degraded | Offline)
                | (Degraded, Available | Offline)
                | (Draining, Available | InUse | Degraded | Offline)
                | (Offline, Available)
        )
    }

    /// Returns `to` if the edge exists.
    pub fn transition(self, to: GpuState) -> Result<GpuState, GpuTransitionError> {
        if self.can_go_to(to) {
            Ok(to)
        } else {
            Err(GpuTransitionError { from: self, to })
        }
    }

    /// Whether a scheduler may place a new job here (health permitting:
    /// a thermally paused GPU takes none either, see the pool).
    pub fn accepts_new_jobs(self) -> bool {
        matches!(
            self,
            GpuState::Available | GpuState::Allocated | GpuState::InUse
        )
    }

    /// Whether the GPU is healthy (jobs on it may keep running).
    pub fn is_healthy(self) -> bool {
        matches!(
            self,
            GpuState::Available | GpuState::Allocated | GpuState::InUse | GpuState::Draining
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GpuState::Available => "AVAILABLE",
            GpuState::Allocated => "ALLOCATED",
            GpuState::InUse => "IN_USE",
            GpuState::Degraded => "DEGRADED",
            GpuState::Resetting => "RESETTING",
            GpuState::Offline => "OFFLINE",
            GpuState::Draining => "DRAINING",
        }
    }
}

impl fmt::Display for GpuState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A GPU state name that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown GPU state {0:?}: expected one of AVAILABLE, ALLOCATED, IN_USE, DEGRADED, RESETTING, OFFLINE, DRAINING")]
pub struct UnknownGpuState(pub String);

impl FromStr for GpuState {
    type Err = UnknownGpuState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GpuState::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownGpuState(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for st in GpuState::ALL {
            assert_eq!(st.as_str().parse::<GpuState>(), Ok(st));
            assert_eq!(st.as_str().to_lowercase().parse::<GpuState>(), Ok(st));
        }
        assert!("BROKEN".parse::<GpuState>().is_err());
    }

    #[test]
    fn seed_002_edges_exist_and_offline_only_comes_back_online() {
        use GpuState::*;
        for (a, b) in [
            (Available, Allocated),
            (Allocated, InUse),
            (InUse, Available),
            (Allocated, Degraded),
            (InUse, Resetting),
            (Resetting, Available),
            (Degraded, Offline),
        ] {
            assert!(a.can_go_to(b), "{a} -> {b}");
        }
        for to in GpuState::ALL {
            assert_eq!(Offline.can_go_to(to), to == Available, "OFFLINE -> {to}");
            assert!(!to.can_go_to(to), "{to} -> itself is not a transition");
        }
        assert_eq!(
            Degraded.transition(InUse),
            Err(GpuTransitionError {
                from: Degraded,
                to: InUse
            })
        );
    }

    #[test]
    fn only_healthy_undrained_gpus_take_new_jobs() {
        use GpuState::*;
        let takers: Vec<_> = GpuState::ALL
            .into_iter()
            .filter(|s| s.accepts_new_jobs())
            .collect();
        assert_eq!(takers, vec![Available, Allocated, InUse]);
    }
}
