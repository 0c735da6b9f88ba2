//! Ends and releases the store could not commit because the state disk is
//! full. The engine has already acted on them (the core moved on, log
//! followers heard the end); what is missing is the record, which is
//! retried every tick until the store takes it. The first failure gives up
//! the state disk's reserve ([`crate::disk`]), so usually the retry right
//! after it succeeds.

use joblet_core::{JobId, JobState, UnixMillis};
use joblet_engine::Final;
use joblet_store::{AuditEnd, StoreError, TransitionExtra};

use super::Engine;
use crate::agent::NodeAgent;

/// A record the store still owes.
#[derive(Debug, Clone)]
pub(super) enum Unsaved {
    /// A job's final state (and with `release`, the end of its
    /// allocation).
    End {
        job: JobId,
        fin: Final,
        at: UnixMillis,
        release: bool,
    },
    /// A GPU release: the ledger entry and the closed audit record.
    Release {
        job: JobId,
        state: String,
        reason: String,
        end_ms: UnixMillis,
    },
}

impl Unsaved {
    fn save(&self, store: &joblet_store::Store, now: UnixMillis) -> Result<(), StoreError> {
        match self {
            Unsaved::End {
                job,
                fin,
                at,
                release,
            } => {
                let extra = TransitionExtra {
                    reason: Some(fin.reason.clone()),
                    exit_code: fin.exit_code,
                    ..Default::default()
                };
                store
                    .record_end(job, fin.state, *at, extra, *release)
                    .map(drop)
            }
            Unsaved::Release {
                job,
                state,
                reason,
                end_ms,
            } => store
                .record_release(
                    job.as_str(),
                    &[],
                    &[],
                    AuditEnd {
                        end_ms: *end_ms,
                        ended: state,
                        reason,
                    },
                    now,
                )
                .map(drop),
        }
    }
}

impl<A: NodeAgent> Engine<A> {
    /// Commits `record` now, giving the state disk's reserve up if that is
    /// what it takes; keeps it for later when even that fails.
    pub(super) fn save(&mut self, record: Unsaved) {
        let now = super::now_ms();
        let first = match record.save(&self.store, now) {
            Ok(()) => return,
            Err(e) => e,
        };
        if first.is_disk_full() && self.disk.release_reserve() {
            match record.save(&self.store, now) {
                Ok(()) => return,
                Err(e) => {
                    tracing::error!(error = %e, ?record, "cannot record a job's end even with the state disk's reserve given up; retrying every second")
                }
            }
        } else {
            tracing::error!(error = %first, ?record, "cannot record a job's end; retrying every second");
        }
        self.unsaved.push(record);
    }

    /// Retries what the store still owes, oldest first; once it is all
    /// saved, the state disk's reserve is made again when there is room.
    pub(super) fn save_unsaved(&mut self) {
        let now = super::now_ms();
        let mut left = Vec::new();
        for record in std::mem::take(&mut self.unsaved) {
            if left.is_empty() {
                match record.save(&self.store, now) {
                    Ok(()) => {
                        tracing::info!(
                            ?record,
                            "a job's end, kept while the state disk was full, is recorded"
                        );
                        continue;
                    }
                    Err(e) => tracing::debug!(error = %e, "the state disk is still full"),
                }
            }
            left.push(record);
        }
        self.unsaved = left;
        if self.unsaved.is_empty() {
            self.disk.ensure_reserve();
        }
    }

    /// The final state of a job whose end is not recorded yet.
    pub(super) fn unsaved_end(&self, id: &JobId) -> Option<JobState> {
        self.unsaved.iter().find_map(|r| match r {
            Unsaved::End { job, fin, .. } if job == id => Some(fin.state),
            _ => None,
        })
    }
}
