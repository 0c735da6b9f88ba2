//! Gangs that may span nodes and fit on no single node: the nodes with
//! the most eligible units first (fewest nodes), then the coolest (hottest
//! GPU), then the lowest id. Only nodes with a free job slot and room for
//! the request's CPU and memory take part. Fast-path requests walk the
//! node-level index; others scan every node.

use std::cmp::Reverse;

use super::select::{eval, units};
use super::Demand;
use crate::cluster::index::Key;
use crate::cluster::node::Node;
use crate::cluster::ClusterState;

/// (node, GPU position, unit position) for the whole gang, or None when
/// the cluster has fewer eligible units than asked.
pub(crate) fn units_across<'s>(
    state: &'s ClusterState,
    d: &Demand,
) -> Option<Vec<(&'s Node, usize, usize)>> {
    let order = if d.fast_path(state) {
        from_index(state, d.n)?
    } else {
        by_scan(state, d)?
    };
    let mut left = d.n;
    let mut out = Vec::with_capacity(d.n as usize);
    for node in order {
        let ev = eval(node, d);
        let take = left.min(ev.total);
        let dom = node.domains.iter().position(|dom| dom.node_level)?;
        let picked = units(node, &ev, dom, take, d);
        left -= picked.len() as u32;
        out.extend(picked.into_iter().map(|(pos, unit)| (node, pos, unit)));
        if left == 0 {
            return Some(out);
        }
    }
    None
}

/// Nodes in order until their free whole GPUs cover `n`.
pub(super) fn from_index(state: &ClusterState, n: u32) -> Option<Vec<&Node>> {
    if state.free_whole() < n {
        return None;
    }
    let set = &state.index().node_level;
    let mut out = Vec::new();
    let mut have = 0;
    let mut upper: Option<Key> = None;
    while have < n {
        let last = match upper {
            None => set.iter().next_back(),
            Some(u) => set.range(..u).next_back(),
        }?;
        let group = Key {
            free: last.free,
            node_free: last.node_free,
            temp: 0,
            node: 0,
            dom: 0,
        };
        for k in set.range(group..=*last) {
            out.push(state.nodes().get(&k.node)?);
            have += k.free;
            if have >= n {
                break;
            }
        }
        upper = Some(group);
    }
    Some(out)
}

pub(super) fn by_scan<'s>(state: &'s ClusterState, d: &Demand) -> Option<Vec<&'s Node>> {
    let mut nodes: Vec<(&Node, u32, u32)> = state
        .nodes()
        .values()
        .filter(|node| d.host_fits(node))
        .filter_map(|node| {
            let total = eval(node, d).total;
            let temp = node.domains.iter().find(|dom| dom.node_level)?.temp;
            (total > 0).then_some((node, total, temp))
        })
        .collect();
    let total: u64 = nodes.iter().map(|(_, t, _)| u64::from(*t)).sum();
    if total < u64::from(d.n) {
        return None;
    }
    nodes.sort_by_key(|(node, total, temp)| (Reverse(*total), *temp, node.id));
    Some(nodes.into_iter().map(|(node, ..)| node).collect())
}
