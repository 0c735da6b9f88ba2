//! Fragmentation gradient descent (FGD; Weng et al., "Beware of
//! Fragmentation", USENIX ATC '23): the measure of a node's GPU
//! fragmentation with respect to the workload, which
//! `scored.rs` minimises the growth of.
//!
//! A node's state, for this measure, is the free compute share of each of
//! its whole GPUs (`free_g` in milli: 1000 minus what its holders account;
//! 0 for a GPU that takes no new jobs or is held exclusively; MIG GPUs are
//! left out), whether it takes a job (not drained, a free job slot) and
//! its CPU and host memory room. For one task shape `m` of the workload
//! ([`super::workload::Shape`]: `k` GPUs of per-GPU share `d`, CPU, host
//! memory) the node's fragment `F(m)`, in milli of GPU, is:
//! - if `m` cannot run on the node at all (no job slot, not enough CPU or
//!   memory room, for `d` < 1000 no GPU with `free_g >= d`, for whole GPUs
//!   fewer than `k` GPUs with `free_g == 1000`): every free share,
//!   `Σ free_g`;
//! - otherwise the free share of the GPUs that cannot serve `m`: `Σ free_g`
//!   over GPUs with `free_g < d` (whole GPUs: `d` = 1000, so partly used
//!   GPUs); 0 for CPU-only shapes (`k` = 0).
//!
//! The node's fragmentation is `Σ_m w_m · F(m) / Σ_m w_m` with `w_m` the
//! shape's weight in the workload ([`super::workload::Workload`]); when
//! the workload is empty, the request's own shape is the whole mix. FGD
//! places a request where the fragmentation of the node it lands on grows
//! least (the gradient; see `scored.rs` for ties). Only compute
//! shares are measured: GPU memory and workload classes limit which GPUs
//! are eligible, not the measure.

use super::workload::{Class, Shape};
use crate::cluster::node::Node;
use crate::cluster::Room;
use crate::model::GPU_MILLI_WHOLE;

/// What the measure reads of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeView {
    /// Free compute share (milli) of each GPU, by position (0 for MIG
    /// GPUs).
    pub free: Vec<u32>,
    pub room: Room,
    /// Not drained and a job slot free.
    pub open: bool,
}

impl NodeView {
    pub fn of(node: &Node) -> NodeView {
        let free = node
            .gpus
            .iter()
            .map(|g| match g.units.first() {
                Some(u) if g.is_whole() && g.placeable() && !u.exclusive_held() => u.free_milli(),
                _ => 0,
            })
            .collect();
        NodeView {
            free,
            room: node.room(),
            open: node.has_slot(),
        }
    }
}

/// `Σ_m w_m · F(m)` of the view (divide by the total weight for the
/// average; placement compares sums over the same workload).
pub(crate) fn weighted(classes: &[Class], v: &NodeView) -> u128 {
    let total: u64 = v.free.iter().map(|f| u64::from(*f)).sum();
    if total == 0 {
        return 0;
    }
    let mut sum: u128 = 0;
    for c in classes {
        let (gpu_fits, frag) = gpu_fragment(c.gpu_count, c.gpu_milli, &v.free);
        for &(cpu, mem, w) in &c.hosts {
            let fits = gpu_fits
                && v.open
                && v.room.cpu_millis.is_none_or(|r| cpu <= r)
                && v.room.memory_mb.is_none_or(|r| mem <= r);
            let f = if fits { frag } else { total };
            sum += u128::from(w) * u128::from(f);
        }
    }
    sum
}

/// The classes of a single shape (the measure for an empty workload).
pub(crate) fn classes_of(s: Shape) -> Vec<Class> {
    vec![Class {
        gpu_count: s.gpu_count,
        gpu_milli: s.gpu_milli,
        hosts: vec![(s.cpu_millis, s.memory_mb, 1)],
    }]
}

/// For `k` GPUs of share `d`: whether the GPUs could serve it, and the
/// free share of the GPUs that cannot (when they could).
fn gpu_fragment(k: u32, d: u32, free: &[u32]) -> (bool, u64) {
    if k == 0 {
        return (true, 0);
    }
    let need = d.min(GPU_MILLI_WHOLE);
    let mut serving = 0u32;
    let mut frag = 0u64;
    for &f in free {
        if f >= need {
            serving += 1;
        } else {
            frag += u64::from(f);
        }
    }
    let fits = if need < GPU_MILLI_WHOLE {
        serving >= 1
    } else {
        serving >= k
    };
    (fits, frag)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(free: &[u32], cpu: Option<u64>) -> NodeView {
        NodeView {
            free: free.to_vec(),
            room: Room {
                cpu_millis: cpu,
                memory_mb: None,
                jobs: None,
            },
            open: true,
        }
    }

    fn class(k: u32, d: u32, cpu: u64, w: u64) -> Class {
        Class {
            gpu_count: k,
            gpu_milli: d,
            hosts: vec![(cpu, 0, w)],
        }
    }

    #[test]
    fn fragment_per_case() {
        // Half a GPU wanted: the GPU with 300 free is a fragment.
        let half = [class(1, 500, 0, 1)];
        assert_eq!(weighted(&half, &view(&[1000, 300], None)), 300);
        // No GPU can take it: everything free is a fragment.
        assert_eq!(weighted(&half, &view(&[400, 300], None)), 700);
        // Not enough CPU: everything free is a fragment.
        let cpu = [class(1, 500, 8_000, 1)];
        assert_eq!(weighted(&cpu, &view(&[1000, 300], Some(4_000))), 1300);
        // Two whole GPUs wanted: partly used GPUs are fragments; with
        // one free GPU only, everything is.
        let two = [class(2, 1000, 0, 1)];
        assert_eq!(weighted(&two, &view(&[1000, 1000, 200], None)), 200);
        assert_eq!(weighted(&two, &view(&[1000, 0, 200], None)), 1200);
        // CPU-only: nothing, unless it does not fit.
        let cpu_only = [class(0, 0, 2_000, 1)];
        assert_eq!(weighted(&cpu_only, &view(&[1000, 200], None)), 0);
        assert_eq!(weighted(&cpu_only, &view(&[1000, 200], Some(1_000))), 1200);
        // Weighted sum over shapes.
        let mix = [class(1, 500, 0, 3), class(2, 1000, 0, 1)];
        assert_eq!(weighted(&mix, &view(&[1000, 300], None)), 3 * 300 + 1300);
        // A closed node: all of it.
        let mut closed = view(&[1000, 300], None);
        closed.open = false;
        assert_eq!(weighted(&half, &closed), 1300);
    }
}
