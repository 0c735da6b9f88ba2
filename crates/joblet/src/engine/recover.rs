//! What a restarted daemon finds, gathered for the core's first event: the
//! unfinished jobs (a RUNNING job's shim probed by the node agent), the
//! finished jobs the allocation ledger still names, the ledger itself and
//! the GPUs' health. Before any of it, the agent waits for what the dead
//! daemon left running for jobs that have not started; after it, the
//! agent cleans up what belongs to no job the engine tracks.

use std::collections::BTreeSet;

use joblet_core::{JobId, JobState};
use joblet_engine::{Event, Final, RecoveredJob, Recovery, ShimFact, Submission};
use joblet_store::StoreError;

use super::Engine;
use crate::agent::NodeAgent;

impl<A: NodeAgent> Engine<A> {
    pub(super) async fn recover(&mut self) -> Result<(), StoreError> {
        let now = super::now_ms();
        let unfinished = self.store.unfinished()?;
        let ledger = self.store.allocations()?;
        let not_started: Vec<JobId> = unfinished
            .iter()
            .filter(|r| r.state != JobState::Running)
            .map(|r| r.id.clone())
            .collect();
        self.agent.settle(&not_started).await;
        let mut jobs = Vec::new();
        let mut seen = BTreeSet::new();
        let (mut alive, mut ended, mut lost, mut requeued) = (0, 0, 0, 0);
        for rec in unfinished {
            let shim = if rec.state == JobState::Running {
                self.agent.probe(&rec.id)
            } else {
                ShimFact::NotStarted
            };
            match &shim {
                ShimFact::Alive => alive += 1,
                ShimFact::Exited(_) => ended += 1,
                ShimFact::Gone | ShimFact::Vanished => lost += 1,
                ShimFact::NeverStarted => requeued += 1,
                ShimFact::NotStarted => {}
            }
            if shim == ShimFact::Alive {
                if let Some((req, p, _)) = ledger.iter().find(|(_, p, _)| p.job == rec.id.as_str())
                {
                    self.agent.adopt(&rec.id, p, req);
                }
            }
            seen.insert(rec.id.to_string());
            jobs.push(RecoveredJob {
                submission: Submission::of(rec.id.clone(), &rec.owner, &rec.spec, &self.cfg.rules),
                state: rec.state,
                submitted_at: rec.created_ms,
                ended: None,
                shim,
            });
        }
        // Finished jobs whose allocation outlived their end (the daemon died
        // between the two): released now.
        for (_, p, _) in &ledger {
            if seen.contains(&p.job) {
                continue;
            }
            let Ok(id) = JobId::parse(&p.job) else {
                continue;
            };
            if let Some(rec) = self.store.get(&id)? {
                let fin = Final {
                    state: rec.state,
                    exit_code: rec.exit_code,
                    reason: rec.reason.clone(),
                };
                jobs.push(RecoveredJob {
                    submission: Submission::of(id, &rec.owner, &rec.spec, &self.cfg.rules),
                    state: rec.state,
                    submitted_at: rec.created_ms,
                    ended: Some((fin, rec.ended_ms.unwrap_or(now))),
                    shim: ShimFact::NotStarted,
                });
            }
        }
        let queued = not_started.len();
        let recovery = Recovery {
            jobs,
            ledger,
            gpus: self.agent.gpu_health(),
        };
        self.drive(Event::Recovered(Box::new(recovery)));
        let keep: BTreeSet<String> = self.core.jobs().map(|(id, _)| id.to_string()).collect();
        self.agent.recovered(&keep, super::now_ms());
        tracing::info!(
            reattached = alive,
            finished_while_down = ended,
            lost,
            never_started = requeued,
            queued,
            "recovered jobs"
        );
        Ok(())
    }
}
