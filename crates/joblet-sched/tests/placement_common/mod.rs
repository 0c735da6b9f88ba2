//! Builders shared by the placement tests: nodes, GPUs, requests, health.
#![allow(dead_code)]

use joblet_core::gpu::GpuState;
use joblet_sched::model::{
    GpuHealth, GpuSpec, JobRequest, MigSlice, NodeSpec, Sharing, WorkloadClass,
};

pub const MB: u64 = 81_920;

/// A GPU: index, NUMA (= socket), NVLink group.
pub fn gpu(index: u32, numa: u32, nvlink: Option<u32>) -> GpuSpec {
    GpuSpec {
        index,
        uuid: format!("GPU-{index}"),
        memory_mb: MB,
        numa,
        socket: numa,
        nvlink_group: nvlink,
        compute_capability: (8, 0),
        mig: Vec::new(),
    }
}

pub fn mig(mut g: GpuSpec, slices: &[(u32, &str, u64)]) -> GpuSpec {
    g.mig = slices
        .iter()
        .map(|(id, p, mb)| MigSlice {
            id: *id,
            profile: p.to_string(),
            memory_mb: *mb,
        })
        .collect();
    g
}

/// DGX-like: 2 NUMA × `per_numa` GPUs, all in one NVLink group.
pub fn dgx(id: u32, per_numa: u32) -> NodeSpec {
    NodeSpec {
        id,
        capacity: Default::default(),
        gpus: (0..per_numa * 2)
            .map(|i| gpu(i, i / per_numa, Some(0)))
            .collect(),
    }
}

/// Like `dgx` but PCIe only (no NVLink).
pub fn pcie(id: u32, per_numa: u32) -> NodeSpec {
    NodeSpec {
        id,
        capacity: Default::default(),
        gpus: (0..per_numa * 2)
            .map(|i| gpu(i, i / per_numa, None))
            .collect(),
    }
}

pub fn req(job: &str, n: u32) -> JobRequest {
    JobRequest {
        gpu_milli: 0,
        job: job.to_string(),
        owner: "alice".to_string(),
        queue: "default".to_string(),
        gpu_count: n,
        gpu_memory_mb: 0,
        sharing: Sharing::Exclusive,
        mig_profile: None,
        min_compute_capability: None,
        class: WorkloadClass::Training,
        priority: 0,
        allow_cross_numa: false,
        allow_cross_node: false,
        preemptible: false,
        time_limit_ms: None,
        checkpoint_interval_ms: None,
        cpu_millis: 0,
        host_memory_mb: 0,
    }
}

pub fn shared(job: &str, n: u32, mb: u64, class: WorkloadClass) -> JobRequest {
    JobRequest {
        sharing: Sharing::Shared,
        gpu_memory_mb: mb,
        class,
        ..req(job, n)
    }
}

pub fn health(state: GpuState, paused: bool, temp: Option<u32>) -> GpuHealth {
    GpuHealth {
        state,
        paused,
        temperature_c: temp,
    }
}
