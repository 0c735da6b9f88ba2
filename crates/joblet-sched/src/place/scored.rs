//! Placement by scoring every (node, choice of units) on one node:
//! `Fgd` for every request without a MIG profile, and `BestFit` for
//! shared requests (fractions of a GPU, memory sharing).
//!
//! Candidates: every node with a free job slot, room for the request's CPU
//! and memory, and enough eligible units ([`super::Demand::room_after`]).
//! On a node, a CPU-only request has one choice; a one-GPU request may take
//! any eligible unit (`Fgd` scores one GPU per distinct free compute
//! share, the tightest fit of each; `BestFit` takes the tightest fit); a
//! gang takes the units [`super::select::units`] picks from the node's
//! best-tier domain that holds it (one NUMA node unless it may cross).
//!
//! Scores, smallest wins:
//! - `Fgd`: the growth of the node's fragmentation ([`super::fgd`]), then
//!   the node's free compute share after placing (the fuller node), then
//!   its CPU room after, then the tightest unit fit;
//! - `BestFit`: the node's free compute share after placing (sum over its
//!   GPUs), then the chosen units' leftover (compute, then memory), then
//!   the node's CPU room after.
//!
//! Remaining ties go to the lowest node id, then the lowest GPU position.

use super::fgd::{self, NodeView};
use super::select::{eval, units, NodeEval};
use super::workload::{Class, Workload};
use super::Demand;
use crate::cluster::node::Node;
use crate::cluster::ClusterState;
use crate::model::{NodeId, Strategy};

/// (primary, secondary, tertiary, quaternary, node, first GPU position).
type Score = (i128, u64, u64, u64, NodeId, usize);

/// Units picked on one node: (GPU position, unit position).
type Choice = Vec<(usize, usize)>;

/// The node and units (none for CPU-only requests) with the best score,
/// or None when no single node can take the request now.
pub(crate) fn best<'s>(
    state: &'s ClusterState,
    d: &Demand,
    workload: &Workload,
) -> Option<(&'s Node, Choice)> {
    let own;
    let classes: &[Class] = if workload.total() == 0 {
        own = fgd::classes_of(d.shape);
        &own
    } else {
        workload.classes()
    };
    let mut best: Option<(Score, &Node, Choice)> = None;
    for node in state.nodes().values() {
        if !d.host_fits(node) || (d.n > 0 && node.open_units < d.n) {
            continue;
        }
        let ev = eval(node, d);
        if ev.total < d.n {
            continue;
        }
        let choices = choices(node, &ev, d);
        if choices.is_empty() {
            continue;
        }
        let view = NodeView::of(node);
        let before = match d.strategy {
            Strategy::Fgd => fgd::weighted(classes, &view),
            _ => 0,
        };
        for choice in choices {
            let s = score(node, &ev, d, classes, &view, before, &choice);
            if best.as_ref().is_none_or(|(b, ..)| s < *b) {
                best = Some((s, node, choice));
            }
        }
    }
    best.map(|(_, node, choice)| (node, choice))
}

/// The choices of units on a node worth scoring.
fn choices(node: &Node, ev: &NodeEval, d: &Demand) -> Vec<Choice> {
    match d.n {
        0 => vec![Vec::new()],
        1 => {
            // Tightest fit first, then the lowest position.
            let mut c: Vec<_> = ev.cands.iter().collect();
            c.sort_by_key(|c| (c.after, c.pos, c.unit));
            if d.strategy != Strategy::Fgd {
                return c
                    .first()
                    .map(|c| vec![(c.pos, c.unit)])
                    .into_iter()
                    .collect();
            }
            // One per distinct free compute share: the measure sees only it.
            let mut seen: Vec<u32> = Vec::new();
            let mut out = Vec::new();
            for c in c {
                let free = node.gpus[c.pos].units[c.unit].free_milli();
                if !seen.contains(&free) {
                    seen.push(free);
                    out.push(vec![(c.pos, c.unit)]);
                }
            }
            out
        }
        n => {
            let dom = node
                .domains
                .iter()
                .enumerate()
                .filter(|(_, dom)| dom.single_numa || d.cross_numa)
                .filter(|(_, dom)| ev.in_domain(dom) >= n)
                .min_by_key(|(i, dom)| (dom.tier, ev.in_domain(dom), dom.temp, *i))
                .map(|(i, _)| i);
            match dom {
                Some(dom) => vec![units(node, ev, dom, n, d)],
                None => Vec::new(),
            }
        }
    }
}

fn score(
    node: &Node,
    ev: &NodeEval,
    d: &Demand,
    classes: &[Class],
    view: &NodeView,
    before: u128,
    choice: &Choice,
) -> Score {
    let mut after = view.clone();
    for (pos, _) in choice {
        if let Some(f) = after.free.get_mut(*pos) {
            *f = f.saturating_sub(d.milli);
        }
    }
    after.room.take(d.host);
    after.open = view.open && after.room.jobs.is_none_or(|j| j > 0);
    let free_after: u64 = after.free.iter().map(|f| u64::from(*f)).sum();
    let cpu_after = after.room.cpu_millis.unwrap_or(u64::MAX);
    let fit: u64 = choice
        .iter()
        .filter_map(|(pos, unit)| {
            ev.cands
                .iter()
                .find(|c| c.pos == *pos && c.unit == *unit)
                .map(|c| c.after)
        })
        .fold(0, u64::saturating_add);
    let first = choice.first().map_or(0, |(pos, _)| *pos);
    match d.strategy {
        Strategy::Fgd => {
            let grown = fgd::weighted(classes, &after) as i128 - before as i128;
            (grown, free_after, cpu_after, fit, node.id, first)
        }
        _ => (i128::from(free_after), fit, cpu_after, 0, node.id, first),
    }
}
