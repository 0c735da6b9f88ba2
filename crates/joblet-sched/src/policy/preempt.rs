//! Preemption: making room for a waiting job that does not fit by stopping
//! preemptible running jobs of a lower class (priority, minus the LAS queue
//! under LAS).
//!
//! Victims must be preemptible, not already stopping, past their first
//! checkpoint of the run and running for at least
//! [`super::las::MIN_RUN_MS`] (see [`super::cost`]), worth it under
//! Gittins ([`Scheduler::exchange_pays`]), and hold only GPUs that still take new jobs and are not
//! held for another job's victims (freeing a GPU that takes none would not
//! help). CPU-only jobs may be victims too: they free CPU, memory and a job
//! slot. The plan frees enough room **on one node**: nodes are tried in order
//! of the victim units they hold; on each, victims are taken lowest priority
//! first, then least work lost (GPUs × run time since the last checkpoint),
//! then most attained service first (a CPU-only victim only while the
//! node lacks a job slot, or CPU or memory that the victim frees, for the
//! waiting job), until placement succeeds; the node needing the fewest
//! preemptions wins. A job that may span nodes falls back to freeing room
//! across nodes in the same victim order. Each trial releases the victims in
//! the cluster state, asks placement, and re-allocates them; trials are
//! capped ([`MAX_TRIALS`] placements and the [`MAX_VICTIMS`] lowest-priority
//! candidates per search), one search runs per pass, a job whose search
//! failed is not searched again for [`PREEMPT_RETRY_MS`], and after any
//! failed search none runs for [`SEARCH_GAP_MS`] (so a crowd of jobs that
//! cannot preempt anything costs one search a second, at the price of up to a
//! second's delay per failing job ahead of one that could). Victims get
//! `Preempt`, keep their units, CPU, memory and job slot until their
//! `Exited`, and are then requeued with their attained service; the waiting
//! job searches no more while they stop.

use joblet_core::UnixMillis;

use crate::cluster::HostLoad;
use crate::model::{Action, JobKey, JobRequest, NodeId, Placement, Policy, Sharing};
use crate::place::place_with;
use crate::queue::QKey;
use crate::scheduler::{ByJob, Scheduler};

/// A job whose preemption search failed waits this long before the next.
pub const PREEMPT_RETRY_MS: i64 = 5_000;
/// After a failed search (for any job), no search for this long.
pub const SEARCH_GAP_MS: i64 = 1_000;
/// Most placement trials of one search.
pub const MAX_TRIALS: usize = 16;
/// Most victims one search considers (the lowest-priority ones).
pub const MAX_VICTIMS: usize = 256;

/// What a preemption search did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Search {
    /// Not searched (victims already stopping, or retry time not reached).
    Skipped,
    Failed,
    Issued,
}

struct Victim {
    job: JobKey,
    priority: i32,
    attained: u64,
    /// Work a preemption now would lose, unit·ms.
    lost: u64,
    /// Units held on each node, by node id.
    per_node: Vec<(NodeId, u32)>,
    /// What it charges each of those nodes.
    host: HostLoad,
}

/// (node, units held there) for each node the placement charges, by node
/// id (a CPU-only placement: its node, 0 units).
fn units_per_node(p: &Placement) -> Vec<(NodeId, u32)> {
    p.nodes()
        .map(|n| (n, p.units.iter().filter(|u| u.node == n).count() as u32))
        .collect()
}

impl Scheduler {
    /// Whether any preemption search may run now.
    pub(crate) fn may_search(&self, now: UnixMillis) -> bool {
        !self.preemptible.is_empty() && now >= self.search_gap_until
    }

    /// Searches for victims for the waiting job and preempts them.
    pub(crate) fn preempt_for(&mut self, key: QKey, now: UnixMillis) -> Search {
        let Some(w) = self.queue.get(key) else {
            return Search::Skipped;
        };
        if w.awaiting_victims > 0 || w.preempt_retry_at > now {
            return Search::Skipped;
        }
        if !self.may_search(now) {
            return Search::Skipped;
        }
        let req = w.req.clone();
        let Some(class) = self.waiting_class(key) else {
            return Search::Skipped;
        };
        let victims = self.victims_below(class, &req, now);
        let plan = if victims.is_empty() {
            None
        } else {
            self.plan_on_one_node(&req, &victims, now).or_else(|| {
                req.allow_cross_node
                    .then(|| self.plan_across_nodes(&req, &victims, now))
                    .flatten()
            })
        };
        let Some(plan) = plan else {
            if let Some(w) = self.queue.get_mut(key) {
                w.preempt_retry_at = now.saturating_add(PREEMPT_RETRY_MS);
            }
            self.search_gap_until = now.saturating_add(SEARCH_GAP_MS);
            return Search::Failed;
        };
        let reason = format!("preempted for job {}", req.job);
        for &vi in &plan {
            let job = &victims[vi].job;
            self.mark_stopping(job, now, Some(req.job.clone()));
            self.actions.push(Action::Preempt {
                job: job.clone(),
                reason: reason.clone(),
            });
        }
        if let Some(w) = self.queue.get_mut(key) {
            w.awaiting_victims = u32::try_from(plan.len()).unwrap_or(u32::MAX);
        }
        self.res_version += 1;
        Search::Issued
    }

    /// Eligible victims of a class below `class`, in preference order: the
    /// [`MAX_VICTIMS`] lowest-priority ones at most, past their first
    /// checkpoint of the run, worth preempting for the waiting job
    /// `req` (see [`Scheduler::exchange_pays`]).
    fn victims_below(&mut self, class: i64, req: &JobRequest, now: UnixMillis) -> Vec<Victim> {
        // class = priority − level, so a victim's priority is below
        // class + the highest level.
        let mut bound = class.saturating_add(self.max_level());
        // The waiting job's order key and expected remaining run time
        // (Gittins).
        let (level, base, attained) = self
            .queue
            .key_of(&req.job)
            .and_then(|k| self.queue.get(k))
            .map_or((0, now, 0), |w| (w.level, w.enqueued, w.attained_gpu_ms));
        let waiter = (req.priority, level, base);
        let waiter_size = if self.config.policy == Policy::Gittins {
            let a = i64::try_from(self.aging_ms()).unwrap_or(i64::MAX);
            if a > 0 {
                // A victim of higher priority may come after the waiting
                // job if it was submitted enough later.
                bound = bound.saturating_add(now.saturating_sub(base) / a + 1);
            }
            Some((self.sizes.slot(&req.queue), req.gpu_count, attained))
        } else {
            None
        };
        // Closed GPUs (health) and GPUs held for another job's victims
        // take no new jobs: freeing them cannot help, and a trial could
        // not put the victim back on them.
        let screen = !self.closed.is_empty() || !self.claims.is_empty();
        let mut out = Vec::new();
        for (ByJob { n: priority, job }, c) in &self.preemptible {
            if i64::from(*priority) >= bound || out.len() >= MAX_VICTIMS {
                break;
            }
            // Judged from the index entry first (no lookup): the job's run
            // time and its class now.
            if now < c.guard_until {
                continue;
            }
            let attained = c.attained_at(now);
            let level = self.level_of(c.slot, c.gpus, attained);
            let below = self
                .comes_after(c, *priority, level, waiter)
                .unwrap_or_else(|| i64::from(*priority) - i64::from(level) < class);
            if !below || !self.exchange_pays(c, waiter_size, now) {
                continue;
            }
            let Some(r) = self.running.get(job) else {
                continue;
            };
            if r.stopping {
                continue;
            }
            let Some(p) = &r.placement else {
                continue;
            };
            if screen
                && p.units.iter().any(|u| {
                    let gpu = (u.node, u.index);
                    self.closed.contains(&gpu) || self.claims.contains_key(&gpu)
                })
            {
                continue;
            }
            out.push(Victim {
                job: job.clone(),
                priority: r.req.priority,
                attained,
                lost: c.lost_ms(now).saturating_mul(u64::from(c.gpus.max(1))),
                per_node: units_per_node(p),
                host: HostLoad::of(p),
            });
        }
        out.sort_by(|a, b| {
            (a.priority, a.lost, std::cmp::Reverse(a.attained), &a.job).cmp(&(
                b.priority,
                b.lost,
                std::cmp::Reverse(b.attained),
                &b.job,
            ))
        });
        out
    }

    /// Fewest victims on one node that make the job placeable.
    fn plan_on_one_node(
        &mut self,
        req: &JobRequest,
        victims: &[Victim],
        now: UnixMillis,
    ) -> Option<Vec<usize>> {
        // (node, victim) pairs by node, each node's victims in preference
        // order (a stable sort of the preference-ordered pairs).
        let mut pairs: Vec<(NodeId, usize, u32)> = victims
            .iter()
            .enumerate()
            .flat_map(|(i, v)| v.per_node.iter().map(move |&(n, units)| (n, i, units)))
            .collect();
        pairs.sort_by_key(|&(n, ..)| n);
        // (units held by victims, node, its slice of `pairs`).
        let mut nodes: Vec<(u32, NodeId, std::ops::Range<usize>)> = Vec::new();
        let mut from = 0;
        while from < pairs.len() {
            let node = pairs[from].0;
            let to = from + pairs[from..].iter().take_while(|p| p.0 == node).count();
            let units = pairs[from..to].iter().map(|p| p.2).sum();
            nodes.push((units, node, from..to));
            from = to;
        }
        nodes.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut best: Option<Vec<usize>> = None;
        let mut trials = 0;
        for (_, _, range) in nodes {
            if trials >= MAX_TRIALS || best.as_ref().is_some_and(|b| b.len() == 1) {
                break;
            }
            let list = &pairs[range];
            let limit = best.as_ref().map_or(list.len(), |b| b.len() - 1);
            let mut released = Vec::new();
            let mut chosen = Vec::new();
            for &(node, vi, units) in list {
                if chosen.len() >= limit {
                    break;
                }
                if units == 0 && !self.host_helps(node, req, victims[vi].host) {
                    continue;
                }
                if let Some(p) = self.cluster.release(&victims[vi].job) {
                    released.push(p);
                }
                chosen.push(vi);
                if self.could_fit(req) {
                    trials += 1;
                    if place_with(
                        &self.cluster,
                        req,
                        self.config.strategy_for(req),
                        &self.workload,
                    )
                    .is_some()
                    {
                        best = Some(chosen.clone());
                        break;
                    }
                }
                if trials >= MAX_TRIALS {
                    break;
                }
            }
            self.undo_trial(released, now);
        }
        best
    }

    /// Victims in preference order, across nodes, until the job fits.
    fn plan_across_nodes(
        &mut self,
        req: &JobRequest,
        victims: &[Victim],
        now: UnixMillis,
    ) -> Option<Vec<usize>> {
        let mut released = Vec::new();
        let mut plan = None;
        let mut trials = 0;
        let mut chosen = Vec::new();
        for (vi, victim) in victims.iter().enumerate() {
            let useless = victim
                .per_node
                .iter()
                .all(|&(node, units)| units == 0 && !self.host_helps(node, req, victim.host));
            if useless {
                continue;
            }
            if let Some(p) = self.cluster.release(&victim.job) {
                released.push(p);
            }
            chosen.push(vi);
            if self.could_fit(req) {
                trials += 1;
                if place_with(
                    &self.cluster,
                    req,
                    self.config.strategy_for(req),
                    &self.workload,
                )
                .is_some()
                {
                    plan = Some(chosen);
                    break;
                }
                if trials >= MAX_TRIALS {
                    break;
                }
            }
        }
        self.undo_trial(released, now);
        plan
    }

    /// Whether freeing `freed` on the node gives the request something it
    /// lacks there now (a job slot, or CPU or memory it asks for): else a
    /// victim holding no unit there would be stopped for nothing.
    fn host_helps(&self, node: NodeId, req: &JobRequest, freed: HostLoad) -> bool {
        let Some(room) = self.cluster.nodes().get(&node).map(|n| n.room()) else {
            return false;
        };
        let lacks = |left: Option<u64>, asked: u64| asked > 0 && left.is_some_and(|l| l < asked);
        lacks(room.jobs.map(u64::from), 1)
            || (freed.cpu_millis > 0 && lacks(room.cpu_millis, req.cpu_millis))
            || (freed.memory_mb > 0 && lacks(room.memory_mb, req.host_memory_mb))
    }

    /// Cheap necessary condition before asking placement.
    fn could_fit(&self, req: &JobRequest) -> bool {
        req.sharing == Sharing::Shared || req.gpu_count <= self.cluster.free_units()
    }

    /// Puts trial-released victims back. Their units were valid a moment
    /// ago and only open GPUs are trialled, so this cannot fail unless the
    /// cluster state is inconsistent; if it does, the job is stopped
    /// (`Preempt` with an "internal" reason) rather than left unaccounted.
    fn undo_trial(&mut self, released: Vec<Placement>, now: UnixMillis) {
        for p in released.into_iter().rev() {
            let job = p.job.clone();
            if let Err(e) = self.cluster.allocate(p) {
                self.unhold(&job, now);
                self.mark_stopping(&job, now, None);
                self.capacity_changed();
                self.actions.push(Action::Preempt {
                    job,
                    reason: format!(
                        "internal: could not restore the allocation after a preemption trial: {e}"
                    ),
                });
            }
        }
    }
}
