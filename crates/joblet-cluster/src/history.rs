//! The invariants the cluster tests check by replaying etcd's history
//! (every revision, from a watch started at revision 1):
//!
//! - no GPU unit held by two jobs at one revision where either holds it
//!   exclusively, and never more memory reserved on a shared GPU than it
//!   has (as its node registered it);
//! - every job's entry reaches an end at most once and never changes
//!   after it; [`History::unfinished`] lists the accepted jobs that have
//!   not ended (none, once a test has waited for everything).

use std::collections::{BTreeMap, BTreeSet};

use joblet_sched::model::Sharing;

use crate::keys::{Key, Keys};
use crate::records::{decode, JobEntry, JobPhase, NodeAlloc, NodeRecord};

/// A unit's holder: job, sharing, MiB reserved.
type Holder<'a> = (&'a str, Sharing, u64);

/// One change at one revision (`value` `None`: deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub revision: i64,
    pub key: String,
    pub value: Option<Vec<u8>>,
}

/// A broken invariant, with the revision it was seen at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub revision: i64,
    pub what: String,
}

/// The replayed state.
#[derive(Debug, Default)]
pub struct History {
    keys: Option<Keys>,
    allocs: BTreeMap<String, NodeAlloc>,
    /// (node, index) → memory in MiB, as last registered.
    gpu_memory: BTreeMap<(String, u32), u64>,
    jobs: BTreeMap<String, JobEntry>,
    ended: BTreeSet<String>,
    pub violations: Vec<Violation>,
    revision: i64,
    dirty: BTreeSet<String>,
}

impl History {
    pub fn new(keys: Keys) -> History {
        History {
            keys: Some(keys),
            ..Default::default()
        }
    }

    /// Replays `changes` (in revision order) and checks after each
    /// revision.
    pub fn replay(&mut self, changes: &[Change]) {
        for c in changes {
            if c.revision != self.revision {
                self.check();
                self.revision = c.revision;
            }
            self.apply(c);
        }
        self.check();
    }

    fn apply(&mut self, c: &Change) {
        let keys = self.keys.as_ref().expect("keys");
        let Some(key) = keys.parse(&c.key) else {
            return;
        };
        let bad = |what: String| Violation {
            revision: c.revision,
            what,
        };
        match (key, &c.value) {
            (Key::Alloc(node), Some(v)) => match decode::<NodeAlloc>("allocation", &c.key, v) {
                Ok(a) => {
                    self.allocs.insert(node.to_string(), a);
                    self.dirty.insert(node.to_string());
                }
                Err(e) => self.violations.push(bad(e.to_string())),
            },
            (Key::Alloc(node), None) => {
                self.allocs.remove(node);
            }
            (Key::Node(node), Some(v)) => {
                if let Ok(rec) = decode::<NodeRecord>("node record", &c.key, v) {
                    for g in &rec.spec.gpus {
                        self.gpu_memory
                            .insert((node.to_string(), g.index), g.memory_mb);
                    }
                }
            }
            (Key::Job(id), Some(v)) => {
                let entry = match decode::<JobEntry>("job entry", &c.key, v) {
                    Ok(e) => e,
                    Err(e) => {
                        self.violations.push(bad(e.to_string()));
                        return;
                    }
                };
                if self.ended.contains(id) {
                    if self.jobs.get(id) != Some(&entry) {
                        self.violations
                            .push(bad(format!("job {id} changed after it ended")));
                    }
                    return;
                }
                if matches!(entry.phase, JobPhase::Ended { .. }) {
                    self.ended.insert(id.to_string());
                }
                self.jobs.insert(id.to_string(), entry);
            }
            _ => {}
        }
    }

    /// Checks the allocation records changed at this revision.
    fn check(&mut self) {
        for node in std::mem::take(&mut self.dirty) {
            let Some(alloc) = self.allocs.get(&node) else {
                continue;
            };
            // (index, mig) → holders (job, sharing, memory).
            let mut held: BTreeMap<(u32, Option<u32>), Vec<Holder<'_>>> = BTreeMap::new();
            for (job, e) in &alloc.jobs {
                for u in &e.units {
                    held.entry(*u)
                        .or_default()
                        .push((job.as_str(), e.sharing, e.memory_mb));
                }
            }
            for ((index, mig), holders) in held {
                let unit = match mig {
                    Some(m) => format!("{node} GPU {index} MIG {m}"),
                    None => format!("{node} GPU {index}"),
                };
                if holders.len() > 1 && holders.iter().any(|h| h.1 == Sharing::Exclusive) {
                    let jobs: Vec<&str> = holders.iter().map(|h| h.0).collect();
                    self.violations.push(Violation {
                        revision: self.revision,
                        what: format!("{unit} held by {} jobs at once: {jobs:?}", jobs.len()),
                    });
                }
                let reserved: u64 = holders.iter().map(|h| h.2).sum();
                if mig.is_none() && holders.len() > 1 {
                    if let Some(mem) = self.gpu_memory.get(&(node.clone(), index)) {
                        if reserved > *mem {
                            self.violations.push(Violation {
                                revision: self.revision,
                                what: format!("{unit}: {reserved} MiB reserved of {mem} MiB"),
                            });
                        }
                    }
                }
            }
        }
    }

    /// Jobs accepted (an entry was written) that have not ended.
    pub fn unfinished(&self) -> Vec<String> {
        self.jobs
            .keys()
            .filter(|j| !self.ended.contains(*j))
            .cloned()
            .collect()
    }

    /// Jobs that ended.
    pub fn ended(&self) -> usize {
        self.ended.len()
    }

    /// A job's last entry.
    pub fn job(&self, id: &str) -> Option<&JobEntry> {
        self.jobs.get(id)
    }
}
