//! Static capacity questions: can a request ever be placed on this cluster
//! as built, and how many free GPUs are stranded for a gang size.

use std::cell::RefCell;
use std::collections::BTreeMap;

use super::host::{could_hold, HostLoad};
use super::node::{Gpu, Node, Unit};
use super::ClusterState;
use crate::model::{JobRequest, Unplaceable};

/// The parts of a request that decide whether it could ever be placed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct CapacityKey {
    gpu_count: u32,
    gpu_memory_mb: u64,
    mig_profile: Option<String>,
    min_compute_capability: Option<(u32, u32)>,
    allow_cross_node: bool,
    allow_cross_numa: bool,
    cpu_millis: u64,
    host_memory_mb: u64,
}

impl CapacityKey {
    fn of(req: &JobRequest) -> CapacityKey {
        CapacityKey {
            gpu_count: req.gpu_count,
            gpu_memory_mb: req.gpu_memory_mb,
            mig_profile: req.mig_profile.clone(),
            min_compute_capability: req.min_compute_capability,
            allow_cross_node: req.allow_cross_node,
            allow_cross_numa: req.allow_cross_numa,
            cpu_millis: req.cpu_millis,
            host_memory_mb: req.host_memory_mb,
        }
    }
}

/// Most request shapes remembered before the memo starts over.
const CAPACITY_MEMO_MAX: usize = 4_096;

/// Remembered answers of [`ClusterState::check_ever_placeable`].
pub(crate) type CapacityMemo = RefCell<BTreeMap<CapacityKey, Result<(), Unplaceable>>>;

/// Whether a unit could ever serve the request, by its static properties.
fn kind_fits(req: &JobRequest, u: &Unit) -> bool {
    req.mig_profile.as_deref() == u.profile.as_deref()
}

fn cc_fits(req: &JobRequest, g: &Gpu) -> bool {
    req.min_compute_capability
        .is_none_or(|need| g.spec.compute_capability >= need)
}

impl ClusterState {
    /// Whether the request could be placed on an empty, healthy cluster:
    /// ignores current use and health. Checks, in order, for a request
    /// with GPUs: MIG profile, compute capability, memory per unit, units
    /// in the cluster, units per node (unless it may span nodes), units per
    /// NUMA node (unless it may span NUMA nodes or nodes); then for every
    /// request: a node that runs jobs at all (`max_jobs` not 0), the
    /// largest such node's CPU, then its memory (each against the largest
    /// node, [`Unplaceable::TooManyCpus`], [`Unplaceable::TooMuchHostMemory`]);
    /// and last whether one node (or, spanning nodes, enough nodes) offers
    /// the GPUs, CPU, memory and a job slot together
    /// ([`Unplaceable::NoNodeOffersAll`]).
    ///
    /// Answers are remembered per request shape until a node is added or
    /// removed: the daemon and the simulator ask on every submission, and
    /// the full scan is O(GPUs).
    pub fn check_ever_placeable(&self, req: &JobRequest) -> Result<(), Unplaceable> {
        let key = CapacityKey::of(req);
        if let Some(known) = self.capacity_memo.borrow().get(&key) {
            return known.clone();
        }
        let answer = self.scan_ever_placeable(req);
        let mut memo = self.capacity_memo.borrow_mut();
        if memo.len() >= CAPACITY_MEMO_MAX {
            // Shapes are few in practice; a flood of distinct memory sizes
            // must not grow the memo without bound.
            memo.clear();
        }
        memo.insert(key, answer.clone());
        answer
    }

    fn scan_ever_placeable(&self, req: &JobRequest) -> Result<(), Unplaceable> {
        if req.gpu_count > 0 {
            self.scan_gpus(req, |_| true)?;
        }
        self.scan_host(req)?;
        let load = HostLoad::of_request(req);
        let holds = |node: &Node| could_hold(&node.capacity, load);
        let together = if req.gpu_count == 0 {
            self.nodes().values().any(holds)
        } else {
            // Where every node could hold it, the GPU scan above answered.
            self.nodes().values().all(holds) || self.scan_gpus(req, holds).is_ok()
        };
        if !together {
            return Err(Unplaceable::NoNodeOffersAll {
                gpus: req.gpu_count,
                cpu_millis: req.cpu_millis,
                memory_mb: req.host_memory_mb,
            });
        }
        Ok(())
    }

    /// A node that runs jobs, the largest CPU, the largest memory.
    fn scan_host(&self, req: &JobRequest) -> Result<(), Unplaceable> {
        let open = || {
            self.nodes()
                .values()
                .filter(|n| n.capacity.max_jobs != Some(0))
                .map(|n| n.capacity)
        };
        if open().next().is_none() {
            return Err(Unplaceable::NoJobSlots);
        }
        // A node that does not track a dimension offers without limit.
        let largest = |dim: fn(&crate::model::NodeCapacity) -> Option<u64>| {
            open()
                .map(|c| dim(&c).unwrap_or(u64::MAX))
                .max()
                .unwrap_or(0)
        };
        let largest_millis = largest(|c| c.cpu_millis);
        if req.cpu_millis > largest_millis {
            return Err(Unplaceable::TooManyCpus {
                asked_millis: req.cpu_millis,
                largest_millis,
            });
        }
        let largest_mb = largest(|c| c.memory_mb);
        if req.host_memory_mb > largest_mb {
            return Err(Unplaceable::TooMuchHostMemory {
                asked_mb: req.host_memory_mb,
                largest_mb,
            });
        }
        Ok(())
    }

    /// The GPU checks, over the nodes `keep` admits.
    fn scan_gpus(&self, req: &JobRequest, keep: impl Fn(&Node) -> bool) -> Result<(), Unplaceable> {
        let n = req.gpu_count;
        let keep = &keep;
        let units = || {
            self.nodes()
                .values()
                .filter(|node| keep(node))
                .flat_map(|node| {
                    node.gpus.iter().flat_map(move |g| {
                        g.units
                            .iter()
                            .filter(|u| kind_fits(req, u))
                            .map(move |u| (node.id, g, u))
                    })
                })
        };
        if let Some(p) = &req.mig_profile {
            if units().next().is_none() {
                return Err(Unplaceable::NoSuchMigProfile(p.clone()));
            }
        }
        if let Some(need) = req.min_compute_capability {
            let best = units().map(|(_, g, _)| g.spec.compute_capability).max();
            if let Some(best) = best.filter(|b| *b < need) {
                return Err(Unplaceable::ComputeCapability { need, best });
            }
        }
        let largest_mb = units()
            .filter(|(_, g, _)| cc_fits(req, g))
            .map(|(_, _, u)| u.memory_mb)
            .max();
        if let Some(largest_mb) = largest_mb.filter(|m| *m < req.gpu_memory_mb) {
            return Err(Unplaceable::TooMuchMemory {
                asked_mb: req.gpu_memory_mb,
                largest_mb,
            });
        }
        let mut per_node: BTreeMap<u32, u32> = BTreeMap::new();
        let mut per_numa: BTreeMap<(u32, u32), u32> = BTreeMap::new();
        let mut total = 0;
        for (node, g, u) in units() {
            if cc_fits(req, g) && u.memory_mb >= req.gpu_memory_mb {
                total += 1;
                *per_node.entry(node).or_default() += 1;
                *per_numa.entry((node, g.spec.numa)).or_default() += 1;
            }
        }
        if total < n {
            return Err(Unplaceable::LargerThanCluster { asked: n, total });
        }
        if !req.allow_cross_node {
            let largest = per_node.values().copied().max().unwrap_or(0);
            if largest < n {
                return Err(Unplaceable::LargerThanNode { asked: n, largest });
            }
            if !req.allow_cross_numa {
                let largest = per_numa.values().copied().max().unwrap_or(0);
                if largest < n {
                    return Err(Unplaceable::LargerThanNuma { asked: n, largest });
                }
            }
        }
        Ok(())
    }

    /// Free whole GPUs that a gang of `smallest_waiting_gang` whole GPUs
    /// cannot use where they are: on each node, when such a gang fits the
    /// hardware of one NUMA node, the free GPUs of NUMA nodes with fewer
    /// than that many free; otherwise, when it fits the node, the node's
    /// free GPUs if fewer than that many; a gang larger than the node must
    /// span nodes anyway and strands nothing there. MIG slices are not
    /// counted (a whole-GPU gang cannot use them). 0 for a gang of 0.
    pub fn fragmentation(&self, smallest_waiting_gang: u32) -> u32 {
        let n = smallest_waiting_gang;
        if n == 0 {
            return 0;
        }
        let mut stranded = 0;
        for node in self.nodes().values() {
            let numa = node.domains.iter().filter(|d| d.numa_level);
            let numa_cap = numa.clone().map(|d| d.whole).max().unwrap_or(0);
            if n <= numa_cap {
                stranded += numa.filter(|d| d.free < n).map(|d| d.free).sum::<u32>();
            } else {
                let whole = node.gpus.iter().filter(|g| g.is_whole()).count() as u32;
                if n <= whole && node.free_whole < n {
                    stranded += node.free_whole;
                }
            }
        }
        stranded
    }
}

#[cfg(test)]
mod memo_tests {
    use crate::cluster::ClusterState;
    use crate::model::{GpuSpec, JobRequest, NodeSpec, Sharing, Unplaceable, WorkloadClass};

    fn node(id: u32, gpus: u32) -> NodeSpec {
        NodeSpec {
            id,
            gpus: (0..gpus)
                .map(|index| GpuSpec {
                    index,
                    uuid: format!("GPU-{id}-{index}"),
                    memory_mb: 16_384,
                    numa: 0,
                    socket: 0,
                    nvlink_group: None,
                    compute_capability: (8, 0),
                    mig: Vec::new(),
                })
                .collect(),
            capacity: Default::default(),
        }
    }

    fn req(n: u32) -> JobRequest {
        JobRequest {
            gpu_milli: 0,
            job: "j".into(),
            owner: "o".into(),
            queue: "q".into(),
            gpu_count: n,
            gpu_memory_mb: 0,
            sharing: Sharing::Exclusive,
            mig_profile: None,
            min_compute_capability: None,
            class: WorkloadClass::Training,
            priority: 0,
            allow_cross_numa: true,
            allow_cross_node: true,
            preemptible: false,
            time_limit_ms: None,
            checkpoint_interval_ms: None,
            cpu_millis: 0,
            host_memory_mb: 0,
        }
    }

    #[test]
    fn remembered_answers_follow_node_changes() {
        let mut c = ClusterState::new(vec![node(0, 4)]);
        let too_big = Unplaceable::LargerThanCluster { asked: 6, total: 4 };
        assert_eq!(c.check_ever_placeable(&req(6)), Err(too_big.clone()));
        assert_eq!(c.check_ever_placeable(&req(6)), Err(too_big), "remembered");
        c.add_node(node(1, 4));
        assert_eq!(c.check_ever_placeable(&req(6)), Ok(()), "a new node counts");
        c.remove_node(1);
        assert!(
            c.check_ever_placeable(&req(6)).is_err(),
            "a removed one too"
        );
    }
}
