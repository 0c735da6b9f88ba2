//! Per-job GPU use from per-process readings (pure): each process NVML
//! lists on a GPU (compute and graphics lists, a process in both counted
//! once) is charged to the job that owns its pid. Which job owns a pid is
//! the caller's question (the monitor's quota attribution answers it, see
//! `crate::gpu::quota`).

use std::collections::BTreeMap;

use super::snapshot::{GpuSample, JobGpuUse};

/// Every pid NVML lists on `gpu`, with its memory (bytes, when known).
pub fn gpu_pids(gpu: &GpuSample) -> BTreeMap<u32, Option<u64>> {
    let mut pids: BTreeMap<u32, Option<u64>> = BTreeMap::new();
    let graphics = gpu.readings.iter().flat_map(|r| &r.graphics_processes);
    for p in gpu.info.processes.iter().chain(graphics) {
        let e = pids.entry(p.pid).or_default();
        // Listed as compute and graphics ("C+G"): the same allocation.
        *e = match (*e, p.used_memory_bytes) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    pids
}

/// Each job's use of each GPU its processes are on; `job_of` names the job
/// owning a pid (`None`: not a job's process).
pub fn by_job(
    gpus: &[GpuSample],
    mut job_of: impl FnMut(u32) -> Option<String>,
) -> BTreeMap<String, Vec<JobGpuUse>> {
    let mut out: BTreeMap<String, Vec<JobGpuUse>> = BTreeMap::new();
    for gpu in gpus {
        let util: Option<BTreeMap<u32, u32>> = gpu.readings.as_ref().map(|r| {
            r.process_utilization
                .iter()
                .map(|u| (u.pid, u.sm_pct))
                .collect()
        });
        let mut here: BTreeMap<String, JobGpuUse> = BTreeMap::new();
        for (pid, memory) in gpu_pids(gpu) {
            let Some(job) = job_of(pid) else {
                continue;
            };
            let u = here.entry(job).or_insert_with(|| JobGpuUse {
                index: gpu.info.index,
                uuid: gpu.info.uuid.clone(),
                sm_pct: util.as_ref().map(|_| 0),
                ..JobGpuUse::default()
            });
            u.memory_bytes += memory.unwrap_or(0);
            u.processes += 1;
            if let (Some(total), Some(util)) = (u.sm_pct.as_mut(), util.as_ref()) {
                *total += util.get(&pid).copied().unwrap_or(0);
            }
        }
        for (job, u) in here {
            out.entry(job).or_default().push(u);
        }
    }
    out
}
