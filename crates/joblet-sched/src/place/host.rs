//! CPU-only requests: which node with a free job slot and room for the
//! request's CPU and memory, by strategy (see [`super`]).

use std::cmp::Reverse;

use super::Demand;
use crate::cluster::{ClusterState, Room};
use crate::model::{NodeId, Strategy};

/// Room left per dimension after placing, an untracked one as unlimited:
/// (CPU, memory, job slots).
fn left_after(room: Room, d: &Demand) -> (u64, u64, u64) {
    let after = |r: Option<u64>, asked: u64| r.map_or(u64::MAX, |r| r.saturating_sub(asked));
    (
        after(room.cpu_millis, d.host.cpu_millis),
        after(room.memory_mb, d.host.memory_mb),
        after(room.jobs.map(u64::from), u64::from(d.host.jobs)),
    )
}

/// The node a CPU-only request goes to, or None when no node has room.
pub(crate) fn best_node(state: &ClusterState, d: &Demand) -> Option<NodeId> {
    let nodes = state.nodes().values().filter(|n| d.host_fits(n));
    let best = if d.strategy == Strategy::Spread {
        nodes.min_by_key(|n| (Reverse(left_after(n.room(), d)), n.used.jobs, n.id))
    } else {
        nodes.min_by_key(|n| (left_after(n.room(), d), Reverse(n.used.jobs), n.id))
    };
    best.map(|n| n.id)
}
