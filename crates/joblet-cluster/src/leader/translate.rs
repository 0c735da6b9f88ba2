//! Between the scheduler's placements (nodes by the leader's numbers) and
//! the records in etcd (nodes by name, each node's part in its own terms).

use joblet_core::UnixMillis;
use joblet_sched::model::{GpuHealth, GpuRef, NodeId, NodeSpec, Placement};

use super::{LeaderCore, NodeState};
use crate::records::{AllocEntry, Assignment, GangRank, JobPhase, NodeAlloc, NodeRecord};

impl LeaderCore {
    /// Registers a node under a new number.
    pub(crate) fn add_node(
        &mut self,
        record: NodeRecord,
        alloc: NodeAlloc,
        alloc_rev: i64,
    ) -> NodeId {
        let id = self.next_id;
        self.next_id += 1;
        let drained = self.drained.contains(&record.name);
        self.names.insert(id, record.name.clone());
        self.nodes.insert(
            record.name.clone(),
            NodeState {
                id,
                record,
                drained,
                alloc,
                alloc_rev,
            },
        );
        id
    }

    /// The scheduler's spec of node `id`.
    pub(crate) fn spec_of(&self, id: NodeId) -> NodeSpec {
        let name = &self.names[&id];
        let mut spec = self.nodes[name].record.spec.clone();
        spec.id = id;
        spec
    }

    /// Tells the scheduler every GPU's health on node `id`, and whether the
    /// node is drained.
    pub(crate) fn apply_health(&mut self, id: NodeId, now: UnixMillis) {
        let name = self.names[&id].clone();
        let n = &self.nodes[&name];
        let drained = n.drained;
        let actions = self.sched.handle(
            joblet_sched::model::Event::NodeDrained { node: id, drained },
            now,
        );
        self.on_actions(actions, now);
        let n = &self.nodes[&name];
        let gpus: Vec<(u32, GpuHealth)> = n
            .record
            .spec
            .gpus
            .iter()
            .map(|g| {
                let h = n
                    .record
                    .health
                    .iter()
                    .find(|(i, _)| *i == g.index)
                    .map(|(_, h)| *h)
                    .unwrap_or(GpuHealth {
                        state: joblet_core::gpu::GpuState::Available,
                        paused: false,
                        temperature_c: None,
                    });
                (g.index, h)
            })
            .collect();
        for (index, health) in gpus {
            let actions = self.sched.handle(
                joblet_sched::model::Event::GpuChanged {
                    node: id,
                    index,
                    health,
                },
                now,
            );
            self.on_actions(actions, now);
        }
    }

    /// The scheduler placed `p`: allocation, assignments and the entry.
    pub(crate) fn place(&mut self, p: Placement, now: UnixMillis) {
        let job = p.job.clone();
        let Some(t) = self.jobs.get(&job) else {
            tracing::error!(%job, "the scheduler placed a job the leader does not track");
            return;
        };
        let attempt = t.entry.attempt();
        let ids: Vec<NodeId> = node_order(&p);
        let names: Vec<String> = ids.iter().map(|id| self.names[id].clone()).collect();
        let world: u32 = p.units.len() as u32;
        let master = names
            .first()
            .map(|n| host_of(&self.nodes[n].record.address));
        let port = self.master_port(&job);
        let mut rank_base = 0;
        for (rank, (id, name)) in ids.iter().zip(&names).enumerate() {
            let units: Vec<(u32, Option<u32>)> = p
                .units
                .iter()
                .filter(|u| u.node == *id)
                .map(|u| (u.index, u.mig))
                .collect();
            let local = Placement {
                gpu_milli: p.gpu_milli,
                job: job.clone(),
                node: 0,
                units: units
                    .iter()
                    .map(|(index, mig)| GpuRef {
                        node: 0,
                        index: *index,
                        mig: *mig,
                    })
                    .collect(),
                memory_mb: p.memory_mb,
                cpu_millis: p.cpu_millis,
                host_memory_mb: p.host_memory_mb,
                sharing: p.sharing,
                class: p.class,
            };
            let gang = (names.len() > 1).then(|| GangRank {
                node_rank: rank as u32,
                nodes: names.len() as u32,
                world_size: world,
                rank_base,
                local_size: units.len() as u32,
                master_addr: master.clone().unwrap_or_default(),
                master_port: port,
            });
            rank_base += units.len() as u32;
            let n = self.nodes.get_mut(name).expect("placed on a known node");
            n.alloc.jobs.insert(
                job.clone(),
                AllocEntry {
                    attempt,
                    units,
                    memory_mb: p.memory_mb,
                    sharing: p.sharing,
                    class: p.class,
                    cpu_millis: p.cpu_millis,
                    host_memory_mb: p.host_memory_mb,
                    gpu_milli: p.gpu_milli,
                },
            );
            self.pending.touch_alloc(name);
            self.pending.put_assign(
                name,
                Assignment {
                    job: job.clone(),
                    attempt,
                    fence: self.fence,
                    placement: local,
                    gang,
                    at: now,
                },
            );
        }
        let fence = self.fence;
        let t = self.jobs.get_mut(&job).expect("tracked");
        t.entry.phase = JobPhase::Assigned {
            attempt,
            nodes: names,
            fence,
            at: now,
        };
        t.reports.clear();
        self.pending.put_job(&job);
        self.stats.placements += 1;
    }

    fn master_port(&self, job: &str) -> u16 {
        // FNV-1a: stable across leaders and builds.
        let mut h: u32 = 0x811c_9dc5;
        for b in job.bytes() {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
        let span = u32::from(self.cfg.master_port_span.max(1));
        self.cfg.master_port_base + (h % span) as u16
    }
}

/// The placement's nodes, the first unit's node first (rank 0), then by
/// first appearance.
fn node_order(p: &Placement) -> Vec<NodeId> {
    let mut ids = Vec::new();
    for u in &p.units {
        if !ids.contains(&u.node) {
            ids.push(u.node);
        }
    }
    if ids.is_empty() {
        ids.push(p.node);
    }
    ids
}

/// `host` of `host:port` (IPv6 brackets kept off).
fn host_of(address: &str) -> String {
    match address.rsplit_once(':') {
        Some((h, _)) => h.trim_start_matches('[').trim_end_matches(']').to_string(),
        None => address.to_string(),
    }
}

/// The scheduler's placement of a job from its entries on each node.
pub(crate) fn placement_of(job: &str, parts: &[(NodeId, &AllocEntry)]) -> Option<Placement> {
    let (first_node, first) = parts.first()?;
    let mut units: Vec<GpuRef> = parts
        .iter()
        .flat_map(|(node, e)| {
            e.units.iter().map(|(index, mig)| GpuRef {
                node: *node,
                index: *index,
                mig: *mig,
            })
        })
        .collect();
    units.sort();
    Some(Placement {
        gpu_milli: first.gpu_milli,
        job: job.to_string(),
        node: units.first().map_or(*first_node, |u| u.node),
        units,
        memory_mb: first.memory_mb,
        cpu_millis: first.cpu_millis,
        host_memory_mb: first.host_memory_mb,
        sharing: first.sharing,
        class: first.class,
    })
}
