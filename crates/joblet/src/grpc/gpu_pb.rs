//! The service's GPU reports as wire messages. They are built from the
//! discovery types of `joblet-gpu`, which `joblet-proto` does not depend
//! on (`rnx` must not link NVML or hwloc), so this conversion lives here.

use joblet_core::gpu::GpuEntry;
use joblet_gpu::GpuInfo;
use joblet_proto::pb;

use crate::service::GpuStatus;

/// One GPU as the API shows it.
pub fn gpu_pb(info: &GpuInfo, entry: Option<&GpuEntry>) -> pb::Gpu {
    pb::Gpu {
        index: info.index,
        uuid: info.uuid.clone(),
        name: info.name.clone(),
        minor: info.minor,
        pci_bus_id: info.pci_bus_id.clone(),
        memory_total_bytes: info.memory_total_bytes,
        memory_used_bytes: info.memory_used_bytes,
        utilization_pct: info.utilization_gpu_pct,
        temperature_c: info.thermal.current_c,
        slowdown_c: info.thermal.slowdown_c,
        state: entry
            .map(|e| e.state.as_str().to_string())
            .unwrap_or_default(),
        state_cause: entry.map(|e| e.cause.clone()).unwrap_or_default(),
        state_since_unix_ms: entry.map(|e| e.since).unwrap_or_default(),
        placement_paused: entry.and_then(|e| e.paused.clone()).unwrap_or_default(),
        jobs: entry
            .map(|e| e.jobs.iter().cloned().collect())
            .unwrap_or_default(),
        numa_node: info.numa_node,
        local_cpus: info.local_cpus.clone().unwrap_or_default(),
        compute_capability: info
            .compute_capability
            .map(|c| c.to_string())
            .unwrap_or_default(),
        mig_enabled: info.mig.as_ref().is_some_and(|m| m.enabled),
        mig_instances: info
            .mig
            .iter()
            .flat_map(|m| &m.gpu_instances)
            .map(|i| pb::MigInstance {
                gpu_instance_id: i.gpu_instance_id,
                compute_instance_id: i.compute_instance_id,
                profile: i.profile.clone(),
                uuid: i.uuid.clone().unwrap_or_default(),
                memory_total_bytes: i.memory_total_bytes,
            })
            .collect(),
        ecc: Some(pb::GpuEcc {
            enabled: info.ecc.enabled,
            volatile_corrected: info.ecc.volatile_corrected,
            volatile_uncorrected: info.ecc.volatile_uncorrected,
            aggregate_corrected: info.ecc.aggregate_corrected,
            aggregate_uncorrected: info.ecc.aggregate_uncorrected,
            retired_pages: info.ecc.retired_pages,
            retired_pages_pending: info.ecc.retired_pages_pending,
            remapped_rows_uncorrectable: info.ecc.remapped_rows_uncorrectable,
            remapped_rows_pending: info.ecc.remapped_rows_pending,
            remapped_rows_failure: info.ecc.remapped_rows_failure,
        }),
        processes: info
            .processes
            .iter()
            .map(|p| pb::GpuProcess {
                pid: p.pid,
                used_memory_bytes: p.used_memory_bytes,
            })
            .collect(),
        nvlink_peers: info.nvlink_peers.clone(),
        lost: info.lost,
    }
}

/// The whole node.
pub fn status_pb(node: &GpuStatus) -> pb::GpuStatusResponse {
    let inv = &node.inventory;
    pb::GpuStatusResponse {
        node: String::new(),
        backend: inv
            .backends
            .iter()
            .map(|b| match b {
                joblet_gpu::Backend::Nvml => "nvml",
                joblet_gpu::Backend::Procfs => "procfs",
            })
            .collect::<Vec<_>>()
            .join("+"),
        simulated: node.simulated_from.is_some(),
        simulated_from: node
            .simulated_from
            .as_ref()
            .map(|from| from.display().to_string())
            .unwrap_or_default(),
        driver_version: inv.driver_version.clone().unwrap_or_default(),
        cuda_driver_version: inv
            .cuda_driver_version
            .map(|v| v.to_string())
            .unwrap_or_default(),
        cuda_toolkits: inv
            .cuda_toolkits
            .iter()
            .map(|t| pb::CudaToolkit {
                path: t.path.clone(),
                version: t.version.clone(),
            })
            .collect(),
        warnings: inv.warnings.clone(),
        gpus: node.gpus().map(|(g, entry)| gpu_pb(g, entry)).collect(),
        sampled_at_unix_ms: node.sampled_at,
    }
}
