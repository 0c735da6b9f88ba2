//! The openb simulation's own account of what every placement takes,
//! kept from the `Start` stream independently of the scheduler: compute
//! share per GPU (a whole GPU is 1000 milli, a fraction its `gpu_milli`),
//! CPU and memory per node. Taking more than a GPU or node has is an
//! error naming where and by how much.

use joblet_sched::model::{NodeSpec, Placement, Sharing};

/// Use per GPU and per node against their capacity.
#[derive(Debug, Clone)]
pub struct Ledger {
    /// Compute share in use per GPU, `[node][index]`.
    gpu_milli: Vec<Vec<u32>>,
    /// (CPU millicores, memory MiB) in use and capacity per node.
    used: Vec<(u64, u64)>,
    cap: Vec<(u64, u64)>,
    allocated_milli: u64,
}

impl Ledger {
    /// Nodes with ids 0..n, in order.
    pub fn new(nodes: &[NodeSpec]) -> Ledger {
        Ledger {
            gpu_milli: nodes.iter().map(|n| vec![0; n.gpus.len()]).collect(),
            used: vec![(0, 0); nodes.len()],
            cap: nodes
                .iter()
                .map(|n| {
                    (
                        n.capacity.cpu_millis.unwrap_or(u64::MAX),
                        n.capacity.memory_mb.unwrap_or(u64::MAX),
                    )
                })
                .collect(),
            allocated_milli: 0,
        }
    }

    /// GPU compute share in use over the cluster, in milli.
    pub fn allocated_milli(&self) -> u64 {
        self.allocated_milli
    }

    /// Gives back what [`Ledger::take`] recorded for `p`.
    pub fn give(&mut self, p: &Placement) {
        let per_unit = per_unit(p);
        if let Some(used) = self.used.get_mut(p.node as usize) {
            used.0 = used.0.saturating_sub(p.cpu_millis);
            used.1 = used.1.saturating_sub(p.host_memory_mb);
        }
        for u in &p.units {
            if let Some(g) = self
                .gpu_milli
                .get_mut(u.node as usize)
                .and_then(|n| n.get_mut(u.index as usize))
            {
                *g = g.saturating_sub(per_unit);
                self.allocated_milli = self.allocated_milli.saturating_sub(u64::from(per_unit));
            }
        }
    }

    /// Records a placement, or says what it oversubscribes.
    pub fn take(&mut self, p: &Placement) -> Result<(), String> {
        let per_unit = per_unit(p);
        let node = p.node as usize;
        let Some(used) = self.used.get_mut(node) else {
            return Err(format!("job {}: node {} does not exist", p.job, p.node));
        };
        used.0 += p.cpu_millis;
        used.1 += p.host_memory_mb;
        let (cpu, mem) = self.cap[node];
        if used.0 > cpu || used.1 > mem {
            return Err(format!(
                "job {}: node {} has {}/{} millicores and {}/{} MiB in use",
                p.job, p.node, used.0, cpu, used.1, mem
            ));
        }
        for u in &p.units {
            if u.node != p.node {
                return Err(format!(
                    "job {}: spans nodes {} and {}",
                    p.job, p.node, u.node
                ));
            }
            let Some(g) = self
                .gpu_milli
                .get_mut(u.node as usize)
                .and_then(|n| n.get_mut(u.index as usize))
            else {
                return Err(format!("job {}: {u} does not exist", p.job));
            };
            *g += per_unit;
            if *g > 1000 {
                return Err(format!("job {}: {u} has {} milli in use", p.job, *g));
            }
            self.allocated_milli += u64::from(per_unit);
        }
        Ok(())
    }
}

/// Compute share a placement takes on each of its GPUs.
fn per_unit(p: &Placement) -> u32 {
    match p.sharing {
        Sharing::Shared if p.gpu_milli > 0 => p.gpu_milli,
        _ => 1000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_sched::model::{GpuRef, NodeCapacity, WorkloadClass};

    #[test]
    fn refuses_what_a_gpu_or_node_lacks() {
        let node = NodeSpec {
            id: 0,
            gpus: crate::openb::trace::node_specs(&[crate::openb::trace::OpenbNode {
                sn: "n".into(),
                cpu_milli: 4_000,
                memory_mib: 100,
                gpus: 1,
                model: "T4".into(),
            }])[0]
                .gpus
                .clone(),
            capacity: NodeCapacity {
                cpu_millis: Some(4_000),
                memory_mb: Some(100),
                max_jobs: None,
            },
        };
        let mut l = Ledger::new(&[node]);
        let p = |job: &str, milli: u32, cpu: u64| Placement {
            job: job.into(),
            node: 0,
            units: vec![GpuRef {
                node: 0,
                index: 0,
                mig: None,
            }],
            memory_mb: 0,
            cpu_millis: cpu,
            host_memory_mb: 0,
            gpu_milli: milli,
            sharing: Sharing::Shared,
            class: WorkloadClass::Interactive,
        };
        l.take(&p("a", 600, 1_000)).unwrap();
        let mut l2 = l.clone();
        assert!(l
            .clone()
            .take(&p("b", 500, 1_000))
            .unwrap_err()
            .contains("1100 milli"));
        l2.take(&p("c", 400, 1_000)).unwrap();
        assert_eq!(l2.allocated_milli(), 1000);
        assert!(l
            .take(&p("d", 100, 5_000))
            .unwrap_err()
            .contains("millicores"));
    }
}
