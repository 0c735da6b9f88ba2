//! The simulated cluster: a `NODESxGPUS` spec and DGX-like nodes (two NUMA
//! nodes of GPUs/2 each, one socket per NUMA node, all GPUs of a node in
//! one NVLink group) for the scheduler's model.

use joblet_sched::model::{GpuSpec, NodeCapacity, NodeSpec};

use crate::error::SimError;

/// Parses `NODESxGPUS` (e.g. `64x8`; `X` and `×` work too) into
/// (nodes, GPUs per node), both at least 1.
pub fn parse_cluster(spec: &str) -> Result<(u32, u32), SimError> {
    let bad = |reason: &str| SimError::BadCluster {
        spec: spec.to_string(),
        reason: reason.to_string(),
    };
    let s = spec.trim();
    let (nodes, gpus) = s
        .split_once(['x', 'X', '×'])
        .ok_or_else(|| bad("no `x` between the node count and the GPUs per node"))?;
    let num = |part: &str, what: &str| -> Result<u32, SimError> {
        let n: u32 = part
            .trim()
            .parse()
            .map_err(|_| bad(&format!("`{}` is not a number of {what}", part.trim())))?;
        if n == 0 {
            return Err(bad(&format!("the number of {what} must be at least 1")));
        }
        Ok(n)
    };
    let nodes = num(nodes, "nodes")?;
    let gpus = num(gpus, "GPUs per node")?;
    if u64::from(nodes) * u64::from(gpus) > 10_000_000 {
        return Err(bad("more than 10,000,000 GPUs"));
    }
    Ok((nodes, gpus))
}

/// `nodes` DGX-like nodes of `gpus_per_node` GPUs with `gpu_memory_gb` GiB
/// each. With an even GPU count the first half hangs off NUMA node (and
/// socket) 0, the second half off 1; an odd count is one NUMA node. Each
/// node's GPUs form one NVLink group (group id = node id).
pub fn build_nodes(nodes: u32, gpus_per_node: u32, gpu_memory_gb: u64) -> Vec<NodeSpec> {
    let per_numa = if gpus_per_node >= 2 && gpus_per_node.is_multiple_of(2) {
        gpus_per_node / 2
    } else {
        gpus_per_node.max(1)
    };
    (0..nodes)
        .map(|id| NodeSpec {
            id,
            capacity: NodeCapacity::default(),
            gpus: (0..gpus_per_node)
                .map(|index| {
                    let numa = index / per_numa;
                    GpuSpec {
                        index,
                        uuid: format!("GPU-sim-{id:05}-{index:02}"),
                        memory_mb: gpu_memory_gb.saturating_mul(1024),
                        numa,
                        socket: numa,
                        nvlink_group: Some(id),
                        compute_capability: (8, 0),
                        mig: Vec::new(),
                    }
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs() {
        assert_eq!(parse_cluster("64x8").unwrap(), (64, 8));
        assert_eq!(parse_cluster(" 4X4 ").unwrap(), (4, 4));
        assert_eq!(parse_cluster("2×1").unwrap(), (2, 1));
    }

    #[test]
    fn rejects_bad_specs_with_the_reason() {
        for (spec, needle) in [
            ("64", "no `x`"),
            ("x8", "`` is not a number of nodes"),
            ("0x8", "nodes must be at least 1"),
            ("8x0", "GPUs per node must be at least 1"),
            ("ax8", "`a` is not a number of nodes"),
            ("8x-1", "`-1` is not a number of GPUs per node"),
            ("8x8x8", "`8x8` is not a number of GPUs per node"),
            ("100000x1000", "more than 10,000,000 GPUs"),
        ] {
            let e = parse_cluster(spec).unwrap_err().to_string();
            assert!(e.contains(needle), "{spec}: {e}");
            assert!(e.contains("expected NODESxGPUS"), "{e}");
        }
    }

    #[test]
    fn nodes_are_dgx_like() {
        let nodes = build_nodes(3, 8, 32);
        assert_eq!(nodes.len(), 3);
        let n = &nodes[2];
        assert_eq!(n.id, 2);
        assert_eq!(n.gpus.len(), 8);
        let numas: Vec<u32> = n.gpus.iter().map(|g| g.numa).collect();
        assert_eq!(numas, [0, 0, 0, 0, 1, 1, 1, 1]);
        assert!(n.gpus.iter().all(|g| g.nvlink_group == Some(2)));
        assert!(n
            .gpus
            .iter()
            .all(|g| g.memory_mb == 32 * 1024 && g.mig.is_empty()));
        let idx: Vec<u32> = n.gpus.iter().map(|g| g.index).collect();
        assert_eq!(idx, (0..8).collect::<Vec<_>>());
        let mut uuids: Vec<&str> = nodes
            .iter()
            .flat_map(|n| n.gpus.iter().map(|g| g.uuid.as_str()))
            .collect();
        uuids.sort_unstable();
        uuids.dedup();
        assert_eq!(uuids.len(), 24);
        let odd = build_nodes(1, 3, 16);
        assert!(odd[0].gpus.iter().all(|g| g.numa == 0));
    }
}
