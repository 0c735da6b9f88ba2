//! Inside one node: which units are eligible, and which of them a gang
//! takes from a chosen domain.

use std::cmp::Reverse;

use super::Demand;
use crate::cluster::node::{Domain, Node};
use crate::model::Strategy;

/// One eligible unit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cand {
    pub pos: usize,
    pub unit: usize,
    pub after: u64,
}

/// A node's eligible units for a demand.
#[derive(Debug, Clone)]
pub(crate) struct NodeEval {
    /// Eligible units per GPU position.
    pub cnt: Vec<u32>,
    pub cands: Vec<Cand>,
    pub total: u32,
}

impl NodeEval {
    pub fn in_domain(&self, d: &Domain) -> u32 {
        d.gpus.iter().map(|p| self.cnt[*p]).sum()
    }
}

/// Eligible units per GPU position into `cnt` (cleared first); returns the
/// node's total. The scan's cheap pass: no candidate list.
pub(crate) fn count_into(node: &Node, d: &Demand, cnt: &mut Vec<u32>) -> u32 {
    cnt.clear();
    let mut total = 0;
    for g in &node.gpus {
        let c = g
            .units
            .iter()
            .filter(|u| d.room_after(g, u).is_some())
            .count() as u32;
        cnt.push(c);
        total += c;
    }
    total
}

pub(crate) fn eval(node: &Node, d: &Demand) -> NodeEval {
    let mut cnt = vec![0; node.gpus.len()];
    let mut cands = Vec::new();
    for (pos, g) in node.gpus.iter().enumerate() {
        for (unit, u) in g.units.iter().enumerate() {
            if let Some(after) = d.room_after(g, u) {
                cnt[pos] += 1;
                cands.push(Cand { pos, unit, after });
            }
        }
    }
    let total = cands.len() as u32;
    NodeEval { cnt, cands, total }
}

fn subset(inner: &[usize], outer: &[usize]) -> bool {
    inner.iter().all(|p| outer.binary_search(p).is_ok())
}

/// `n` units (GPU position, unit position) from domain `dom`, which must
/// hold at least `n` eligible ones: from its best-tier sub-domain that
/// fits (pack order, `Spread`: emptiest), NUMA node with most eligible
/// first, then memory fit, temperature, GPU index, MIG id.
pub(crate) fn units(
    node: &Node,
    ev: &NodeEval,
    dom: usize,
    n: u32,
    d: &Demand,
) -> Vec<(usize, usize)> {
    let spread = d.strategy == Strategy::Spread;
    let Some(outer) = node.domains.get(dom) else {
        return Vec::new();
    };
    let inner = node
        .domains
        .iter()
        .enumerate()
        .filter(|(_, sd)| (sd.single_numa || d.cross_numa) && subset(&sd.gpus, &outer.gpus))
        .map(|(i, sd)| (i, sd, i64::from(ev.in_domain(sd))))
        .filter(|(_, _, f)| *f >= i64::from(n))
        .min_by_key(|(i, sd, f)| (sd.tier, if spread { -f } else { *f }, sd.temp, *i))
        .map_or(outer, |(_, sd, _)| sd);
    let mut picks: Vec<&Cand> = ev
        .cands
        .iter()
        .filter(|c| inner.gpus.binary_search(&c.pos).is_ok())
        .collect();
    // Eligible units per NUMA node inside the sub-domain (few NUMA nodes).
    let mut per_numa: Vec<(u32, u32)> = Vec::new();
    for c in &picks {
        let numa = node.gpus[c.pos].spec.numa;
        match per_numa.iter_mut().find(|(m, _)| *m == numa) {
            Some((_, k)) => *k += 1,
            None => per_numa.push((numa, 1)),
        }
    }
    picks.sort_by_key(|c| {
        let g = &node.gpus[c.pos];
        let numa = g.spec.numa;
        let fit = if spread { u64::MAX - c.after } else { c.after };
        (
            Reverse(
                per_numa
                    .iter()
                    .find(|(m, _)| *m == numa)
                    .map_or(0, |(_, k)| *k),
            ),
            numa,
            fit,
            g.temp(),
            g.spec.index,
            g.units[c.unit].mig,
        )
    });
    picks
        .into_iter()
        .take(n as usize)
        .map(|c| (c.pos, c.unit))
        .collect()
}
