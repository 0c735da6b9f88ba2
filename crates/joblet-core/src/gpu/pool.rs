//! The node's GPUs and the health policy: observations from the monitor
//! and admin commands in, state transitions (each with its cause) out.
//!
//! Policy (issue 4, seed 002 §6):
//! - application XIDs (see [`classify_xid`]) are noted, the GPU stays;
//!   any other XID, a double-bit ECC event, a rising volatile uncorrectable
//!   ECC count, a pending page retirement / row remapping, a failed row
//!   remapping, or a lost GPU degrade it, and jobs on it are to be failed;
//! - at or above its slowdown temperature a GPU takes no new jobs until it
//!   cools [`THERMAL_HYSTERESIS_C`] below it (a pause, not a state);
//! - drain: jobs on it finish, none start; offline: out of service (with
//!   jobs on it only when forced, which stops them); online: back.

use super::state::GpuState;
use super::xid::{classify_xid, XidClass};
use crate::UnixMillis;
use std::collections::{BTreeMap, BTreeSet};

/// A GPU resumes placements this many degrees below its slowdown
/// threshold, so it does not flap around the threshold.
pub const THERMAL_HYSTERESIS_C: u32 = 5;

/// Slowdown temperature assumed when the driver does not report one
/// (seed 002: "Temperature > 85°C: pause scheduling").
pub const DEFAULT_SLOWDOWN_C: u32 = 85;

/// One GPU's health and allocation record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuEntry {
    pub uuid: String,
    pub index: u32,
    pub state: GpuState,
    /// Why it is in `state`.
    pub cause: String,
    pub since: UnixMillis,
    /// Set while placements are paused for temperature: the reason.
    pub paused: Option<String>,
    /// Jobs holding this GPU.
    pub jobs: BTreeSet<String>,
    /// Volatile uncorrectable ECC count already accounted for.
    pub uncorrected_seen: u64,
}

/// What the monitor observed about one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    Xid(u64),
    SingleBitEcc,
    DoubleBitEcc,
    /// The driver's event wait failed: nothing is known about the GPU.
    WaitFailed(String),
    Sample(GpuObservation),
}

/// A polled sample of the health-relevant fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuObservation {
    pub temperature_c: Option<u32>,
    pub slowdown_c: Option<u32>,
    pub volatile_uncorrected: Option<u64>,
    pub retired_pages_pending: Option<bool>,
    pub remapped_rows_pending: Option<bool>,
    pub remapped_rows_failure: Option<bool>,
    pub lost: bool,
}

/// What an admin asks of a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminAction {
    Drain,
    Offline { force: bool },
    Online,
}

/// Everything the daemon must persist, log or act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuUpdate {
    Transition {
        uuid: String,
        index: u32,
        from: GpuState,
        to: GpuState,
        cause: String,
    },
    Paused {
        uuid: String,
        index: u32,
        cause: String,
    },
    Resumed {
        uuid: String,
        index: u32,
        cause: String,
    },
    /// Worth an operator's attention, no state change.
    Noted {
        uuid: String,
        index: u32,
        message: String,
    },
    /// These jobs must end (FAILED for a device fault, STOPPED for an admin
    /// offline) with `reason`.
    EndJobs {
        uuid: String,
        jobs: Vec<String>,
        reason: String,
        failed: bool,
    },
}

impl GpuUpdate {
    /// The GPU it is about.
    pub fn uuid(&self) -> &str {
        match self {
            GpuUpdate::Transition { uuid, .. }
            | GpuUpdate::Paused { uuid, .. }
            | GpuUpdate::Resumed { uuid, .. }
            | GpuUpdate::Noted { uuid, .. }
            | GpuUpdate::EndJobs { uuid, .. } => uuid,
        }
    }
}

/// An admin command that does not apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    #[error("no GPU with UUID {0}")]
    UnknownGpu(String),
    #[error("GPU {index} is already {state}")]
    AlreadyThere { index: u32, state: GpuState },
    #[error("GPU {index} is {state}: only a healthy GPU can be drained (take it offline instead)")]
    NotDrainable { index: u32, state: GpuState },
    #[error("GPU {index} is {state}: wait for the reset to finish")]
    Resetting { index: u32, state: GpuState },
    #[error("GPU {index} is {state} and its jobs are still ending ({}): try again when they are gone", jobs.join(", "))]
    StillHeld {
        index: u32,
        state: GpuState,
        jobs: Vec<String>,
    },
    #[error("GPU {index} has running jobs ({}): drain it to let them finish, or use --force to stop them", jobs.join(", "))]
    Busy { index: u32, jobs: Vec<String> },
}

/// An allocation call that does not apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    #[error("no GPU with UUID {0}")]
    UnknownGpu(String),
    #[error("GPU {index} is {state} and takes no new jobs")]
    NotPlaceable { index: u32, state: GpuState },
    #[error("GPU {index} does not hold job {job}")]
    NotHeld { index: u32, job: String },
}

/// The node's GPUs by UUID.
#[derive(Debug, Clone, Default)]
pub struct GpuPool {
    gpus: BTreeMap<String, GpuEntry>,
}

impl GpuPool {
    pub fn new() -> GpuPool {
        GpuPool::default()
    }

    /// Rebuilds the pool from persisted entries (states survive restarts:
    /// an offline GPU stays offline).
    pub fn restore(entries: impl IntoIterator<Item = GpuEntry>) -> GpuPool {
        GpuPool {
            gpus: entries.into_iter().map(|e| (e.uuid.clone(), e)).collect(),
        }
    }

    pub fn get(&self, uuid: &str) -> Option<&GpuEntry> {
        self.gpus.get(uuid)
    }

    /// Entries by index.
    pub fn entries(&self) -> Vec<&GpuEntry> {
        let mut all: Vec<_> = self.gpus.values().collect();
        all.sort_by_key(|e| e.index);
        all
    }

    /// Whether a new job may be placed on this GPU now.
    pub fn placeable(&self, uuid: &str) -> bool {
        self.gpus
            .get(uuid)
            .is_some_and(|e| e.state.accepts_new_jobs() && e.paused.is_none())
    }

    /// Matches the pool to what discovery reports (uuid, index): new GPUs
    /// join AVAILABLE; known ones keep their state (and take the new
    /// index); GPUs the driver no longer reports are degraded.
    pub fn sync(&mut self, present: &[(String, u32)], now: UnixMillis) -> Vec<GpuUpdate> {
        let mut out = Vec::new();
        for (uuid, index) in present {
            match self.gpus.get_mut(uuid) {
                Some(e) => e.index = *index,
                None => {
                    self.gpus.insert(
                        uuid.clone(),
                        GpuEntry {
                            uuid: uuid.clone(),
                            index: *index,
                            state: GpuState::Available,
                            cause: "discovered".into(),
                            since: now,
                            paused: None,
                            jobs: BTreeSet::new(),
                            uncorrected_seen: 0,
                        },
                    );
                    out.push(GpuUpdate::Noted {
                        uuid: uuid.clone(),
                        index: *index,
                        message: "discovered, AVAILABLE".into(),
                    });
                }
            }
        }
        let gone: Vec<String> = self
            .gpus
            .keys()
            .filter(|u| !present.iter().any(|(p, _)| p == *u))
            .cloned()
            .collect();
        for uuid in gone {
            out.extend(self.fail(&uuid, "no longer reported by the driver".into(), now));
        }
        out
    }

    /// Applies one observation of one GPU.
    pub fn observe(&mut self, uuid: &str, what: Observed, now: UnixMillis) -> Vec<GpuUpdate> {
        let Some(e) = self.gpus.get(uuid) else {
            return Vec::new();
        };
        let index = e.index;
        match what {
            Observed::Xid(xid) => match classify_xid(xid) {
                (XidClass::Application, name) => vec![GpuUpdate::Noted {
                    uuid: uuid.into(),
                    index,
                    message: format!(
                        "XID {xid} ({name}): an application error, the GPU stays in service"
                    ),
                }],
                (XidClass::Device, name) => self.fail(uuid, format!("XID {xid} ({name})"), now),
            },
            Observed::SingleBitEcc => vec![GpuUpdate::Noted {
                uuid: uuid.into(),
                index,
                message: "single-bit ECC error (corrected)".into(),
            }],
            Observed::DoubleBitEcc => self.fail(uuid, "double-bit ECC error".into(), now),
            Observed::WaitFailed(why) => {
                self.fail(uuid, format!("GPU event monitoring failed: {why}"), now)
            }
            Observed::Sample(s) => self.sample(uuid, s, now),
        }
    }

    fn sample(&mut self, uuid: &str, s: GpuObservation, now: UnixMillis) -> Vec<GpuUpdate> {
        let mut out = Vec::new();
        let Some(e) = self.gpus.get_mut(uuid) else {
            return out;
        };
        let index = e.index;
        // Thermal pause, with hysteresis.
        if let Some(t) = s.temperature_c {
            let limit = s.slowdown_c.unwrap_or(DEFAULT_SLOWDOWN_C);
            if e.paused.is_none() && t >= limit {
                let cause = format!("{t} °C is at or above the slowdown threshold {limit} °C");
                e.paused = Some(cause.clone());
                out.push(GpuUpdate::Paused {
                    uuid: uuid.into(),
                    index,
                    cause: format!("placements paused: {cause}"),
                });
            } else if e.paused.is_some() && t + THERMAL_HYSTERESIS_C <= limit {
                e.paused = None;
                out.push(GpuUpdate::Resumed {
                    uuid: uuid.into(),
                    index,
                    cause: format!("placements resumed: cooled to {t} °C (slowdown {limit} °C)"),
                });
            }
        }
        let mut faults = Vec::new();
        if s.lost {
            faults.push("GPU is lost (fell off the bus)".to_string());
        }
        if let Some(n) = s.volatile_uncorrected {
            if n > e.uncorrected_seen {
                faults.push(format!(
                    "uncorrectable ECC errors: {n} (was {})",
                    e.uncorrected_seen
                ));
                e.uncorrected_seen = n;
            }
        }
        if s.remapped_rows_failure == Some(true) {
            faults.push("row remapping failed: replace the GPU".into());
        }
        if s.remapped_rows_pending == Some(true) {
            faults.push("row remapping pending: reset the GPU".into());
        }
        if s.retired_pages_pending == Some(true) {
            faults.push("page retirement pending: reset the GPU".into());
        }
        if !faults.is_empty() {
            out.extend(self.fail(uuid, faults.join("; "), now));
        }
        out
    }

    /// What a restarted daemon must still end: the jobs a failed
    /// (DEGRADED) GPU still lists, with the reason they were first given
    /// (the daemon that gave it may have died before they ended). A GPU
    /// forced OFFLINE lets go of its jobs at once, and a DRAINING one keeps
    /// them running: neither is here.
    pub fn endings(&self) -> Vec<GpuUpdate> {
        self.gpus
            .values()
            .filter(|e| e.state == GpuState::Degraded && !e.jobs.is_empty())
            .map(|e| GpuUpdate::EndJobs {
                uuid: e.uuid.clone(),
                jobs: e.jobs.iter().cloned().collect(),
                reason: format!("GPU {} ({}) failed: {}", e.index, e.uuid, e.cause),
                failed: true,
            })
            .collect()
    }

    /// Takes a GPU out of service because it did not come back clean
    /// after a job (release check): DEGRADED with `why`, and any job still
    /// on it (a shared GPU) fails.
    pub fn quarantine(&mut self, uuid: &str, why: &str, now: UnixMillis) -> Vec<GpuUpdate> {
        self.fail(uuid, format!("quarantined: {why}"), now)
    }

    /// A device fault: degrade a healthy GPU and fail its jobs.
    fn fail(&mut self, uuid: &str, cause: String, now: UnixMillis) -> Vec<GpuUpdate> {
        let Some(e) = self.gpus.get_mut(uuid) else {
            return Vec::new();
        };
        if !e.state.is_healthy() {
            return vec![GpuUpdate::Noted {
                uuid: uuid.into(),
                index: e.index,
                message: format!("{cause} (already {})", e.state),
            }];
        }
        let mut out = vec![Self::set(e, GpuState::Degraded, cause.clone(), now)];
        if !e.jobs.is_empty() {
            out.push(GpuUpdate::EndJobs {
                uuid: uuid.into(),
                jobs: e.jobs.iter().cloned().collect(),
                reason: format!("GPU {} ({uuid}) failed: {cause}", e.index),
                failed: true,
            });
        }
        out
    }

    /// Applies an admin command.
    pub fn admin(
        &mut self,
        uuid: &str,
        action: AdminAction,
        who: &str,
        now: UnixMillis,
    ) -> Result<Vec<GpuUpdate>, AdminError> {
        let e = self
            .gpus
            .get_mut(uuid)
            .ok_or_else(|| AdminError::UnknownGpu(uuid.into()))?;
        let (index, state) = (e.index, e.state);
        match action {
            AdminAction::Drain => match state {
                GpuState::Draining => Err(AdminError::AlreadyThere { index, state }),
                s if s.accepts_new_jobs() => Ok(vec![Self::set(
                    e,
                    GpuState::Draining,
                    format!("drained by {who}"),
                    now,
                )]),
                GpuState::Resetting => Err(AdminError::Resetting { index, state }),
                _ => Err(AdminError::NotDrainable { index, state }),
            },
            AdminAction::Offline { force } => {
                if state == GpuState::Offline {
                    return Err(AdminError::AlreadyThere { index, state });
                }
                if !e.jobs.is_empty() && !force {
                    return Err(AdminError::Busy {
                        index,
                        jobs: e.jobs.iter().cloned().collect(),
                    });
                }
                let jobs: Vec<String> = std::mem::take(&mut e.jobs).into_iter().collect();
                let mut out = vec![Self::set(
                    e,
                    GpuState::Offline,
                    format!("taken offline by {who}"),
                    now,
                )];
                if !jobs.is_empty() {
                    out.push(GpuUpdate::EndJobs {
                        uuid: uuid.into(),
                        reason: format!("GPU {index} ({uuid}) was taken offline by {who}"),
                        jobs,
                        failed: false,
                    });
                }
                Ok(out)
            }
            AdminAction::Online => {
                if state.accepts_new_jobs() {
                    return Err(AdminError::AlreadyThere { index, state });
                }
                if state == GpuState::Resetting {
                    return Err(AdminError::Resetting { index, state });
                }
                let to = match (e.jobs.is_empty(), state) {
                    (true, _) => GpuState::Available,
                    (false, GpuState::Draining) => GpuState::InUse,
                    (false, _) => {
                        return Err(AdminError::StillHeld {
                            index,
                            state,
                            jobs: e.jobs.iter().cloned().collect(),
                        })
                    }
                };
                Ok(vec![Self::set(
                    e,
                    to,
                    format!("brought online by {who}"),
                    now,
                )])
            }
        }
    }

    /// Reserves a GPU for a job (the scheduler has chosen it).
    pub fn allocate(
        &mut self,
        uuid: &str,
        job: &str,
        now: UnixMillis,
    ) -> Result<Vec<GpuUpdate>, AllocError> {
        let placeable = self.placeable(uuid);
        let e = self
            .gpus
            .get_mut(uuid)
            .ok_or_else(|| AllocError::UnknownGpu(uuid.into()))?;
        if !placeable {
            return Err(AllocError::NotPlaceable {
                index: e.index,
                state: e.state,
            });
        }
        e.jobs.insert(job.to_string());
        Ok(match e.state {
            GpuState::Available => vec![Self::set(
                e,
                GpuState::Allocated,
                format!("allocated to job {job}"),
                now,
            )],
            _ => Vec::new(),
        })
    }

    /// The job holding this GPU has started.
    pub fn start(
        &mut self,
        uuid: &str,
        job: &str,
        now: UnixMillis,
    ) -> Result<Vec<GpuUpdate>, AllocError> {
        let e = self.held(uuid, job)?;
        Ok(match e.state {
            GpuState::Allocated => vec![Self::set(
                e,
                GpuState::InUse,
                format!("job {job} started"),
                now,
            )],
            _ => Vec::new(),
        })
    }

    /// The job no longer holds this GPU.
    pub fn release(
        &mut self,
        uuid: &str,
        job: &str,
        now: UnixMillis,
    ) -> Result<Vec<GpuUpdate>, AllocError> {
        let e = self.held(uuid, job)?;
        e.jobs.remove(job);
        Ok(match e.state {
            GpuState::Allocated | GpuState::InUse if e.jobs.is_empty() => vec![Self::set(
                e,
                GpuState::Available,
                format!("released by job {job}"),
                now,
            )],
            _ => Vec::new(),
        })
    }

    fn held(&mut self, uuid: &str, job: &str) -> Result<&mut GpuEntry, AllocError> {
        let e = self
            .gpus
            .get_mut(uuid)
            .ok_or_else(|| AllocError::UnknownGpu(uuid.into()))?;
        if !e.jobs.contains(job) {
            return Err(AllocError::NotHeld {
                index: e.index,
                job: job.into(),
            });
        }
        Ok(e)
    }

    /// Moves `e` to `to` along an edge the state machine has. Callers only
    /// ask for edges they checked; an impossible one is a bug, and the entry
    /// is left as it was and the update says so.
    fn set(e: &mut GpuEntry, to: GpuState, cause: String, now: UnixMillis) -> GpuUpdate {
        let from = e.state;
        match from.transition(to) {
            Ok(to) => {
                e.state = to;
                e.cause = cause.clone();
                e.since = now;
                if to == GpuState::Available || to == GpuState::InUse {
                    // Coming back into service: what was seen is accounted for.
                    e.paused = e.paused.take().filter(|_| from.is_healthy());
                }
                GpuUpdate::Transition {
                    uuid: e.uuid.clone(),
                    index: e.index,
                    from,
                    to,
                    cause,
                }
            }
            Err(err) => GpuUpdate::Noted {
                uuid: e.uuid.clone(),
                index: e.index,
                message: format!("{err} ({cause}): ignored"),
            },
        }
    }
}

#[cfg(test)]
mod tests;
