//! The node's GPUs: status and health for every caller, drain / offline /
//! online for admins. Reads copy what they report out of the shared GPU
//! state; admin commands go to the pool, and what it decides is persisted.

use std::collections::BTreeMap;
use std::path::PathBuf;

use joblet_core::gpu::{AdminAction, GpuEntry};
use joblet_core::record::GpuEventRecord;
use joblet_core::{FieldError, UnixMillis};
use joblet_gpu::{GpuInfo, NodeInventory};

use super::{store_error, Access, ApiError, Caller};
use crate::gpu::resolve::{gpu_info, resolve_gpu};
use crate::gpu::{GpuNode, SharedGpus};

/// History lines a health report holds.
pub const HISTORY: u32 = 50;

/// The GPU operations of one node.
pub struct Gpus {
    /// `None` when the node runs with `gpu.enabled: false`.
    gpus: Option<SharedGpus>,
    /// The time admin commands are recorded at.
    clock: fn() -> UnixMillis,
}

/// The node's GPUs as discovery and the monitor last saw them, with their
/// states.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuStatus {
    pub inventory: NodeInventory,
    /// Each GPU's state record by UUID (none yet for a GPU just found).
    pub states: BTreeMap<String, GpuEntry>,
    /// Where simulated GPUs come from (`gpu.simulate`); `None` = real ones.
    pub simulated_from: Option<PathBuf>,
    /// When the monitor last sampled them.
    pub sampled_at: UnixMillis,
}

/// One GPU with its state record.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuReport {
    pub info: GpuInfo,
    pub entry: Option<GpuEntry>,
}

/// One GPU and its recent history, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuHealth {
    pub gpu: GpuReport,
    pub history: Vec<GpuEventRecord>,
}

impl GpuStatus {
    /// The GPUs in index order, each with its state record.
    pub fn gpus(&self) -> impl Iterator<Item = (&GpuInfo, Option<&GpuEntry>)> {
        self.inventory
            .gpus
            .iter()
            .map(|g| (g, self.states.get(&g.uuid)))
    }
}

impl Gpus {
    /// `clock` gives the time admin commands are recorded at.
    pub fn new(gpus: Option<SharedGpus>, clock: fn() -> UnixMillis) -> Gpus {
        Gpus { gpus, clock }
    }

    /// Every GPU of the node.
    pub fn status(&self, caller: &Caller) -> Result<GpuStatus, ApiError> {
        caller.check(Access::Read)?;
        let node = self.shared()?.lock();
        Ok(GpuStatus {
            inventory: node.inventory.clone(),
            states: node
                .inventory
                .gpus
                .iter()
                .filter_map(|g| node.pool.get(&g.uuid))
                .map(|e| (e.uuid.clone(), e.clone()))
                .collect(),
            simulated_from: node.simulation.as_ref().map(|s| s.from.clone()),
            sampled_at: node.sampled_at,
        })
    }

    /// The GPU `gpu` names (index, UUID or unique UUID prefix), with its
    /// last [`HISTORY`] events.
    pub fn health(&self, caller: &Caller, gpu: &str) -> Result<GpuHealth, ApiError> {
        caller.check(Access::Read)?;
        let shared = self.shared()?;
        let (report, uuid) = {
            let node = shared.lock();
            let uuid = resolve_gpu(&node, gpu)?;
            (report(&node, &uuid)?, uuid)
        };
        let history = shared
            .store()
            .gpu_history(&uuid, HISTORY)
            .map_err(store_error)?;
        Ok(GpuHealth {
            gpu: report,
            history,
        })
    }

    /// Drains, takes offline or brings online the GPU `gpu` names, as the
    /// caller. `action` is what the transport decoded; a bad one is refused
    /// only after the caller's role and the node's GPU support, so a
    /// viewer hears that it may not, whatever it sent.
    pub fn set_state(
        &self,
        caller: &Caller,
        gpu: &str,
        action: Result<AdminAction, FieldError>,
    ) -> Result<GpuReport, ApiError> {
        caller.check(Access::Admin("change GPU states"))?;
        let shared = self.shared()?;
        let action = action?;
        let now = (self.clock)();
        let mut node = shared.lock();
        let uuid = resolve_gpu(&node, gpu)?;
        let updates = node.pool.admin(&uuid, action, &caller.name, now)?;
        shared.commit(&node, &updates, now);
        report(&node, &uuid)
    }

    fn shared(&self) -> Result<&SharedGpus, ApiError> {
        self.gpus.as_ref().ok_or(ApiError::GpusDisabled)
    }
}

fn report(node: &GpuNode, uuid: &str) -> Result<GpuReport, ApiError> {
    Ok(GpuReport {
        info: gpu_info(node, uuid)?.clone(),
        entry: node.pool.get(uuid).cloned(),
    })
}
