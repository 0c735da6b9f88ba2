//! Where everything lives in etcd, under the cluster's prefix (`/joblet`
//! by default):
//!
//! | key | value | written by |
//! |---|---|---|
//! | `nodes/NAME` | [`NodeRecord`](crate::NodeRecord), on the node's lease | the node |
//! | `drain/NAME` | empty; present = drained | `rnx node drain` |
//! | `leader/…` | the leader's name (etcd's election API) | campaigning nodes |
//! | `jobs/ID` | [`JobEntry`](crate::JobEntry) | the node that took the submission (create), then the leader |
//! | `alloc/NAME` | [`NodeAlloc`](crate::NodeAlloc): what the node's jobs hold | the leader |
//! | `assign/NAME/ID` | [`Assignment`](crate::Assignment): run this | the leader |
//! | `reports/ID/NAME` | [`NodeReport`](crate::NodeReport): running / ended | the node running it |
//! | `stops/ID` | stop request (`"stop"` or `"kill"`) | any node |
//!
//! Every key the leader writes is written in a transaction that compares
//! the leader key's create revision (the fencing token).

/// The key layout of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// `prefix` without a trailing slash (one is dropped), e.g. `/joblet`.
    pub fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.trim_end_matches('/').to_string(),
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn key(&self, parts: &[&str]) -> String {
        let mut k = self.prefix.clone();
        for p in parts {
            k.push('/');
            k.push_str(p);
        }
        k
    }

    /// `nodes/` (with the slash: a range prefix).
    pub fn nodes(&self) -> String {
        self.key(&["nodes", ""])
    }

    pub fn node(&self, name: &str) -> String {
        self.key(&["nodes", name])
    }

    pub fn drains(&self) -> String {
        self.key(&["drain", ""])
    }

    pub fn drain(&self, name: &str) -> String {
        self.key(&["drain", name])
    }

    /// The election's name (etcd's election API keys its candidates under it).
    pub fn election(&self) -> String {
        self.key(&["leader"])
    }

    pub fn jobs(&self) -> String {
        self.key(&["jobs", ""])
    }

    pub fn job(&self, id: &str) -> String {
        self.key(&["jobs", id])
    }

    pub fn allocs(&self) -> String {
        self.key(&["alloc", ""])
    }

    pub fn alloc(&self, node: &str) -> String {
        self.key(&["alloc", node])
    }

    pub fn assigns(&self) -> String {
        self.key(&["assign", ""])
    }

    /// Every assignment of one node.
    pub fn assigns_of(&self, node: &str) -> String {
        self.key(&["assign", node, ""])
    }

    pub fn assign(&self, node: &str, job: &str) -> String {
        self.key(&["assign", node, job])
    }

    pub fn reports(&self) -> String {
        self.key(&["reports", ""])
    }

    pub fn reports_of(&self, job: &str) -> String {
        self.key(&["reports", job, ""])
    }

    pub fn report(&self, job: &str, node: &str) -> String {
        self.key(&["reports", job, node])
    }

    pub fn stops(&self) -> String {
        self.key(&["stops", ""])
    }

    pub fn stop(&self, job: &str) -> String {
        self.key(&["stops", job])
    }

    /// What a key under the prefix is: the inverse of the functions above.
    pub fn parse<'k>(&self, key: &'k str) -> Option<Key<'k>> {
        let rest = key.strip_prefix(&self.prefix)?.strip_prefix('/')?;
        let (kind, rest) = rest.split_once('/').unwrap_or((rest, ""));
        let one = |r: &'k str| (!r.is_empty() && !r.contains('/')).then_some(r);
        let two = |r: &'k str| {
            let (a, b) = r.split_once('/')?;
            (!a.is_empty() && !b.is_empty() && !b.contains('/')).then_some((a, b))
        };
        Some(match kind {
            "nodes" => Key::Node(one(rest)?),
            "drain" => Key::Drain(one(rest)?),
            "leader" => Key::Leader,
            "jobs" => Key::Job(one(rest)?),
            "alloc" => Key::Alloc(one(rest)?),
            "assign" => {
                let (node, job) = two(rest)?;
                Key::Assign { node, job }
            }
            "reports" => {
                let (job, node) = two(rest)?;
                Key::Report { job, node }
            }
            "stops" => Key::Stop(one(rest)?),
            _ => return None,
        })
    }
}

/// A parsed key (see [`Keys::parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key<'k> {
    Node(&'k str),
    Drain(&'k str),
    Leader,
    Job(&'k str),
    Alloc(&'k str),
    Assign { node: &'k str, job: &'k str },
    Report { job: &'k str, node: &'k str },
    Stop(&'k str),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_parses_back() {
        let k = Keys::new("/joblet/");
        assert_eq!(k.node("n1"), "/joblet/nodes/n1");
        assert_eq!(k.parse(&k.node("n1")), Some(Key::Node("n1")));
        assert_eq!(k.parse(&k.drain("n1")), Some(Key::Drain("n1")));
        assert_eq!(k.parse(&k.job("j")), Some(Key::Job("j")));
        assert_eq!(k.parse(&k.alloc("n1")), Some(Key::Alloc("n1")));
        assert_eq!(
            k.parse(&k.assign("n1", "j")),
            Some(Key::Assign {
                node: "n1",
                job: "j"
            })
        );
        assert_eq!(
            k.parse(&k.report("j", "n1")),
            Some(Key::Report {
                job: "j",
                node: "n1"
            })
        );
        assert_eq!(k.parse(&k.stop("j")), Some(Key::Stop("j")));
        assert_eq!(k.parse("/joblet/leader/694d7a"), Some(Key::Leader));
        assert_eq!(k.parse("/other/nodes/n1"), None);
        assert_eq!(k.parse("/joblet/nodes/"), None);
        assert_eq!(k.parse("/joblet/assign/n1"), None);
        assert_eq!(k.parse("/jobletx/nodes/n1"), None);
    }
}
