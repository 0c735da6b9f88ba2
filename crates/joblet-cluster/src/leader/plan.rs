//! Changes waiting for a plan, and how a plan is cut from them: one etcd
//! transaction of at most `max_txn_ops` compares and as many operations.
//!
//! Changes are bundled by job: a job's entry, its assignments, reports and
//! stop request, and the allocation records of the nodes it touches go in
//! one transaction, so a node is never assigned a job whose allocation or
//! entry is not written with it. An allocation record may run ahead of the
//! entries (it always holds the leader's current view of the node): a new
//! leader frees what no assigned entry claims.

use std::collections::{BTreeMap, BTreeSet};

use super::LeaderCore;
use crate::records::{encode, Assignment, JobEntry};

/// One compare of a plan: the key's mod revision must be `rev` (0: the
/// key must not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compare {
    ModRevision { key: String, rev: i64 },
}

/// One operation of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Put { key: String, value: Vec<u8> },
    Delete { key: String },
}

/// One fenced transaction (the shell adds the leader key's compare).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub id: u64,
    pub compares: Vec<Compare>,
    pub ops: Vec<Op>,
    /// Jobs this plan places (their entries say assigned).
    pub placed: Vec<String>,
}

/// A key the plan in flight writes whose revision the core tracks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Written {
    Alloc(String),
    Job(String),
}

/// Changes not yet in a plan.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pending {
    /// Tracked jobs whose entry must be written (its current value).
    job_puts: BTreeSet<String>,
    /// Jobs that ended: their last entry and the revision to compare.
    ended: BTreeMap<String, (JobEntry, i64)>,
    /// (job, node) → assignment.
    assign_puts: BTreeMap<(String, String), Assignment>,
    /// (job, node).
    assign_deletes: BTreeSet<(String, String)>,
    /// (job, node).
    report_deletes: BTreeSet<(String, String)>,
    stop_puts: BTreeSet<String>,
    stop_deletes: BTreeSet<String>,
    /// Nodes whose allocation record must be written (its current value).
    allocs: BTreeSet<String>,
    /// Nodes gone: their record goes (revision to compare).
    alloc_deletes: BTreeMap<String, i64>,
    pub in_flight_keys: Vec<Written>,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.job_puts.is_empty()
            && self.ended.is_empty()
            && self.assign_puts.is_empty()
            && self.assign_deletes.is_empty()
            && self.report_deletes.is_empty()
            && self.stop_puts.is_empty()
            && self.stop_deletes.is_empty()
            && self.allocs.is_empty()
            && self.alloc_deletes.is_empty()
    }

    pub fn put_job(&mut self, job: &str) {
        self.job_puts.insert(job.to_string());
    }

    pub fn put_ended(&mut self, job: &str, entry: JobEntry, rev: i64) {
        self.job_puts.remove(job);
        self.ended.insert(job.to_string(), (entry, rev));
    }

    pub fn put_assign(&mut self, node: &str, a: Assignment) {
        let k = (a.job.clone(), node.to_string());
        self.assign_deletes.remove(&k);
        self.assign_puts.insert(k, a);
    }

    pub fn delete_assign(&mut self, node: &str, job: &str) {
        let k = (job.to_string(), node.to_string());
        self.assign_puts.remove(&k);
        self.assign_deletes.insert(k);
    }

    pub fn delete_report(&mut self, job: &str, node: &str) {
        self.report_deletes
            .insert((job.to_string(), node.to_string()));
    }

    pub fn put_stop(&mut self, job: &str) {
        self.stop_deletes.remove(job);
        self.stop_puts.insert(job.to_string());
    }

    pub fn delete_stop(&mut self, job: &str) {
        self.stop_puts.remove(job);
        self.stop_deletes.insert(job.to_string());
    }

    pub fn touch_alloc(&mut self, node: &str) {
        self.allocs.insert(node.to_string());
    }

    pub fn delete_alloc(&mut self, node: &str, rev: i64) {
        self.allocs.remove(node);
        self.alloc_deletes.insert(node.to_string(), rev);
    }

    /// A node comes back before its record's delete was planned: the
    /// delete is dropped; the revision to compare is returned.
    pub fn undelete_alloc(&mut self, node: &str) -> Option<i64> {
        self.alloc_deletes.remove(node)
    }

    /// Every job some pending change is about.
    fn jobs(&self) -> BTreeSet<String> {
        let mut j: BTreeSet<String> = self.job_puts.iter().cloned().collect();
        j.extend(self.ended.keys().cloned());
        j.extend(self.assign_puts.keys().map(|(j, _)| j.clone()));
        j.extend(self.assign_deletes.iter().map(|(j, _)| j.clone()));
        j.extend(self.report_deletes.iter().map(|(j, _)| j.clone()));
        j.extend(self.stop_puts.iter().cloned());
        j.extend(self.stop_deletes.iter().cloned());
        j
    }
}

/// A plan being cut.
struct Cut {
    max: usize,
    compares: Vec<Compare>,
    ops: Vec<Op>,
    allocs: BTreeSet<String>,
}

impl Cut {
    fn fits(&self, compares: usize, ops: usize) -> bool {
        self.ops.is_empty()
            || (self.compares.len() + compares <= self.max && self.ops.len() + ops <= self.max)
    }
}

impl LeaderCore {
    /// Cuts the next plan from the pending changes; what does not fit
    /// stays pending.
    pub(crate) fn build_plan(&mut self, id: u64) -> super::Plan {
        let keys = self.cfg.keys.clone();
        let mut cut = Cut {
            max: self.cfg.max_txn_ops.max(4),
            compares: Vec::new(),
            ops: Vec::new(),
            allocs: BTreeSet::new(),
        };
        let mut written = Vec::new();
        let mut placed = Vec::new();
        // Records of nodes that are gone.
        let deletes: Vec<(String, i64)> = std::mem::take(&mut self.pending.alloc_deletes)
            .into_iter()
            .collect();
        for (node, rev) in deletes {
            if !cut.fits(1, 1) {
                self.pending.alloc_deletes.insert(node, rev);
                continue;
            }
            let key = keys.alloc(&node);
            cut.compares.push(Compare::ModRevision {
                key: key.clone(),
                rev,
            });
            cut.ops.push(Op::Delete { key });
        }
        // Job by job.
        for job in self.pending.jobs() {
            let p = &self.pending;
            let assign_puts: Vec<(String, String)> = p
                .assign_puts
                .range((job.clone(), String::new())..)
                .take_while(|((j, _), _)| *j == job)
                .map(|(k, _)| k.clone())
                .collect();
            let assign_dels: Vec<(String, String)> = p
                .assign_deletes
                .range((job.clone(), String::new())..)
                .take_while(|(j, _)| *j == job)
                .cloned()
                .collect();
            let report_dels: Vec<(String, String)> = p
                .report_deletes
                .range((job.clone(), String::new())..)
                .take_while(|(j, _)| *j == job)
                .cloned()
                .collect();
            let nodes: BTreeSet<String> = assign_puts
                .iter()
                .chain(&assign_dels)
                .map(|(_, n)| n.clone())
                .filter(|n| p.allocs.contains(n) && !cut.allocs.contains(n))
                .collect();
            let entry = p.job_puts.contains(&job) || p.ended.contains_key(&job);
            let stop = p.stop_puts.contains(&job) || p.stop_deletes.contains(&job);
            let compares = usize::from(entry) + nodes.len();
            let ops = usize::from(entry)
                + usize::from(stop)
                + nodes.len()
                + assign_puts.len()
                + assign_dels.len()
                + report_dels.len();
            if !cut.fits(compares, ops) {
                break;
            }
            for node in nodes {
                self.cut_alloc(&mut cut, &node, &mut written);
            }
            let p = &mut self.pending;
            if p.job_puts.remove(&job) {
                if let Some(t) = self.jobs.get(&job) {
                    let key = keys.job(&job);
                    cut.compares.push(Compare::ModRevision {
                        key: key.clone(),
                        rev: t.rev,
                    });
                    cut.ops.push(Op::Put {
                        key,
                        value: encode(&t.entry),
                    });
                    written.push(Written::Job(job.clone()));
                }
            }
            if let Some((entry, rev)) = p.ended.remove(&job) {
                let key = keys.job(&job);
                cut.compares.push(Compare::ModRevision {
                    key: key.clone(),
                    rev,
                });
                cut.ops.push(Op::Put {
                    key,
                    value: encode(&entry),
                });
            }
            for k in assign_puts {
                let a = p.assign_puts.remove(&k).expect("listed");
                cut.ops.push(Op::Put {
                    key: keys.assign(&k.1, &k.0),
                    value: encode(&a),
                });
                if !placed.contains(&k.0) {
                    placed.push(k.0.clone());
                }
            }
            for k in assign_dels {
                p.assign_deletes.remove(&k);
                cut.ops.push(Op::Delete {
                    key: keys.assign(&k.1, &k.0),
                });
            }
            for k in report_dels {
                p.report_deletes.remove(&k);
                cut.ops.push(Op::Delete {
                    key: keys.report(&k.0, &k.1),
                });
            }
            if p.stop_puts.remove(&job) {
                cut.ops.push(Op::Put {
                    key: keys.stop(&job),
                    value: b"kill".to_vec(),
                });
            } else if p.stop_deletes.remove(&job) {
                cut.ops.push(Op::Delete {
                    key: keys.stop(&job),
                });
            }
        }
        // Allocation records changed without a job bundle above.
        let rest: Vec<String> = self
            .pending
            .allocs
            .iter()
            .filter(|n| !cut.allocs.contains(*n))
            .cloned()
            .collect();
        for node in rest {
            if !cut.fits(1, 1) {
                break;
            }
            self.cut_alloc(&mut cut, &node, &mut written);
        }
        self.pending.in_flight_keys = written;
        super::Plan {
            id,
            compares: cut.compares,
            ops: cut.ops,
            placed,
        }
    }

    fn cut_alloc(&mut self, cut: &mut Cut, node: &str, written: &mut Vec<Written>) {
        self.pending.allocs.remove(node);
        cut.allocs.insert(node.to_string());
        let Some(n) = self.nodes.get(node) else {
            return;
        };
        let key = self.cfg.keys.alloc(node);
        cut.compares.push(Compare::ModRevision {
            key: key.clone(),
            rev: n.alloc_rev,
        });
        cut.ops.push(Op::Put {
            key,
            value: encode(&n.alloc),
        });
        written.push(Written::Alloc(node.to_string()));
    }
}
