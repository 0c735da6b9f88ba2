//! The node as `joblet-sched` sees it: each GPU's memory, NUMA node,
//! NVLink group and compute capability, and for a GPU with MIG enabled its
//! MIG slices (GPU instances) as the allocation units in its place; plus
//! the scheduler's settings from `gpu.*`.

use std::collections::BTreeMap;

use joblet_gpu::GpuInfo;
use joblet_sched::model::{GpuSpec, MigSlice, Quota, SchedConfig, Strategy};

use crate::config::GpuConfig;

/// The node's one scheduler node id.
pub const NODE: u32 = 0;

pub fn mib(bytes: Option<u64>) -> u64 {
    bytes.unwrap_or(0) / (1024 * 1024)
}

/// How a GPU is given out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Partition {
    /// Whole (MIG off or not supported).
    Whole,
    /// MIG on: slice by slice, never whole.
    Slices(Vec<MigSlice>),
    /// MIG on but no slice can be given out: not at all (CUDA cannot use
    /// a MIG-enabled GPU whole).
    Unusable(String),
}

/// A GPU's allocation units. A MIG slice is one GPU instance (its first
/// compute instance, as `nvidia-smi mig -cgi … -C` creates them); an
/// instance without a known profile or UUID cannot be asked for or
/// addressed, so it is left out.
pub fn partition(g: &GpuInfo) -> Partition {
    let Some(m) = g.mig.as_ref().filter(|m| m.enabled) else {
        return Partition::Whole;
    };
    let mut slices: Vec<MigSlice> = Vec::new();
    for i in &m.gpu_instances {
        if i.profile.is_empty()
            || i.uuid.is_none()
            || slices.iter().any(|s| s.id == i.gpu_instance_id)
        {
            continue;
        }
        slices.push(MigSlice {
            id: i.gpu_instance_id,
            profile: i.profile.clone(),
            memory_mb: mib(i.memory_total_bytes),
        });
    }
    if slices.is_empty() {
        Partition::Unusable(format!(
            "MIG is enabled but none of its {} MIG instances has a known profile and UUID; create GPU and compute instances (`nvidia-smi mig -cgi <profiles> -C`) or disable MIG",
            m.gpu_instances.len()
        ))
    } else {
        Partition::Slices(slices)
    }
}

/// The scheduler's view of one GPU.
fn gpu_spec(g: &GpuInfo, nvlink_group: Option<u32>, mig: Vec<MigSlice>) -> GpuSpec {
    let numa = g.numa_node.unwrap_or(0);
    GpuSpec {
        index: g.index,
        uuid: g.uuid.clone(),
        memory_mb: mib(g.memory_total_bytes),
        numa,
        socket: numa,
        nvlink_group,
        compute_capability: g
            .compute_capability
            .map(|c| (c.major, c.minor))
            .unwrap_or((0, 0)),
        mig,
    }
}

/// NVLink groups: GPUs linked directly or through others share a group
/// (named by the smallest index in it); unlinked GPUs have none.
fn nvlink_groups(gpus: &[GpuInfo]) -> Vec<Option<u32>> {
    let pos = |bus: &str| {
        gpus.iter().position(|g| {
            joblet_gpu::model::normalize_bus_id(&g.pci_bus_id)
                == joblet_gpu::model::normalize_bus_id(bus)
        })
    };
    let mut parent: Vec<usize> = (0..gpus.len()).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    for (i, g) in gpus.iter().enumerate() {
        for peer in &g.nvlink_peers {
            if let Some(j) = pos(peer) {
                let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    (0..gpus.len())
        .map(|i| {
            if gpus[i].nvlink_peers.is_empty() {
                None
            } else {
                let r = root(&mut parent, i);
                Some(gpus[r].index)
            }
        })
        .collect()
}

/// The node's GPUs as the scheduler sees them; GPUs that cannot be given
/// out ([`Partition::Unusable`]) are left out.
pub fn gpu_specs(gpus: &[GpuInfo]) -> Vec<GpuSpec> {
    let groups = nvlink_groups(gpus);
    gpus.iter()
        .zip(groups)
        .filter_map(|(g, grp)| match partition(g) {
            Partition::Whole => Some(gpu_spec(g, grp, Vec::new())),
            Partition::Slices(s) => Some(gpu_spec(g, grp, s)),
            Partition::Unusable(_) => None,
        })
        .collect()
}

/// What the node offers, for submission messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Offer {
    pub whole: u32,
    /// MIG profile → slices of it.
    pub slices: BTreeMap<String, u32>,
}

impl Offer {
    pub fn of_gpus(gpus: &[GpuSpec]) -> Offer {
        let mut o = Offer::default();
        for g in gpus {
            if g.mig.is_empty() {
                o.whole += 1;
            }
            for s in &g.mig {
                *o.slices.entry(s.profile.clone()).or_default() += 1;
            }
        }
        o
    }

    /// `1g.10gb (4 slices), 3g.40gb (1 slice)`.
    pub fn slice_list(&self) -> String {
        let items: Vec<String> = self
            .slices
            .iter()
            .map(|(p, n)| format!("{p} ({n} slice{})", if *n == 1 { "" } else { "s" }))
            .collect();
        items.join(", ")
    }
}

/// Scheduler settings from `gpu.*`.
pub fn sched_config(cfg: &GpuConfig) -> SchedConfig {
    SchedConfig {
        policy: cfg.policy,
        // Shared GPUs (fractions, memory quotas) by fragmentation
        // gradient descent; exclusive ones by topology.
        shared_strategy: Some(Strategy::Fgd),
        owner_quotas: cfg
            .owner_max_gpus
            .iter()
            .map(|(o, n)| (o.clone(), Quota { max_gpus: *n }))
            .collect(),
        owner_rate: cfg.owner_rate,
        ..SchedConfig::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_gpu::model::{MigGpuInstance, MigInfo};

    /// `(GPU instance, compute instance, profile, UUID)`.
    type Instance<'a> = (u32, u32, &'a str, Option<&'a str>);

    fn gpu(index: u32, mig: Option<Vec<Instance>>) -> GpuInfo {
        GpuInfo {
            index,
            uuid: format!("GPU-{index}"),
            minor: index,
            pci_bus_id: format!("0000:{:02x}:00.0", index + 1),
            memory_total_bytes: Some(40 << 30),
            mig: mig.map(|instances| MigInfo {
                enabled: true,
                pending: true,
                gpu_instances: instances
                    .into_iter()
                    .map(|(gi, ci, profile, uuid)| MigGpuInstance {
                        gpu_instance_id: gi,
                        compute_instance_id: ci,
                        profile: profile.into(),
                        uuid: uuid.map(str::to_string),
                        memory_total_bytes: Some(10 << 30),
                        ..MigGpuInstance::default()
                    })
                    .collect(),
            }),
            ..GpuInfo::default()
        }
    }

    #[test]
    fn mig_gpus_are_given_out_slice_by_slice() {
        let gpus = [
            gpu(0, None),
            gpu(
                1,
                Some(vec![
                    (3, 0, "1g.10gb", Some("MIG-a")),
                    (3, 1, "1g.10gb", Some("MIG-a1")),
                    (5, 0, "2g.20gb", Some("MIG-b")),
                    (6, 0, "", Some("MIG-c")),
                    (7, 0, "1g.10gb", None),
                ]),
            ),
            gpu(2, Some(vec![(1, 0, "", None)])),
            // MIG supported but off: whole.
            GpuInfo {
                mig: Some(MigInfo::default()),
                ..gpu(3, None)
            },
        ];
        let specs = gpu_specs(&gpus);
        let indices: Vec<u32> = specs.iter().map(|g| g.index).collect();
        assert_eq!(indices, [0, 1, 3], "the unusable MIG GPU is left out");
        assert_eq!(
            specs[1].mig,
            [
                MigSlice {
                    id: 3,
                    profile: "1g.10gb".into(),
                    memory_mb: 10240
                },
                MigSlice {
                    id: 5,
                    profile: "2g.20gb".into(),
                    memory_mb: 10240
                },
            ]
        );
        assert!(specs[0].mig.is_empty() && specs[2].mig.is_empty());
        let Partition::Unusable(why) = partition(&gpus[2]) else {
            panic!()
        };
        assert!(why.contains("nvidia-smi mig -cgi"), "{why}");
        let offer = Offer::of_gpus(&specs);
        assert_eq!(offer.whole, 2);
        assert_eq!(offer.slice_list(), "1g.10gb (1 slice), 2g.20gb (1 slice)");
    }
}
