//! The free-capacity index: every topology domain with free whole GPUs on
//! a node with a free job slot, ordered by (free, node's free, temperature,
//! node, domain), per tier and per NUMA / node level, so the common
//! placement is a few range lookups instead of a scan of every node.

use std::collections::BTreeSet;

use super::node::{Node, TIERS};
use crate::model::NodeId;

/// A domain's place in the index; the derived order is pack order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Key {
    pub free: u32,
    pub node_free: u32,
    pub temp: u32,
    pub node: NodeId,
    pub dom: u32,
}

impl Key {
    /// The smallest key with at least `free` free GPUs.
    pub fn at_least(free: u32) -> Key {
        Key {
            free,
            node_free: 0,
            temp: 0,
            node: 0,
            dom: 0,
        }
    }
}

/// Domains with at least one free whole GPU, on nodes with a free job slot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DomainIndex {
    pub tiers: [BTreeSet<Key>; TIERS],
    /// Domains that are exactly one NUMA node.
    pub numa_level: BTreeSet<Key>,
    /// Whole-node domains.
    pub node_level: BTreeSet<Key>,
}

impl DomainIndex {
    fn keys(node: &Node) -> impl Iterator<Item = (usize, Key, bool, bool)> + '_ {
        let open = node.has_slot();
        node.domains
            .iter()
            .enumerate()
            .filter(move |(_, d)| open && d.free > 0)
            .map(move |(i, d)| {
                let key = Key {
                    free: d.free,
                    node_free: node.free_whole,
                    temp: d.temp,
                    node: node.id,
                    dom: i as u32,
                };
                (usize::from(d.tier), key, d.numa_level, d.node_level)
            })
    }

    /// Adds the node's domains as its counts are now.
    pub fn insert(&mut self, node: &Node) {
        for (tier, key, numa, whole) in Self::keys(node) {
            self.tiers[tier].insert(key);
            if numa {
                self.numa_level.insert(key);
            }
            if whole {
                self.node_level.insert(key);
            }
        }
    }

    /// Removes the node's domains; its counts must be those it was
    /// inserted with.
    pub fn remove(&mut self, node: &Node) {
        for (tier, key, numa, whole) in Self::keys(node) {
            self.tiers[tier].remove(&key);
            if numa {
                self.numa_level.remove(&key);
            }
            if whole {
                self.node_level.remove(&key);
            }
        }
    }
}
