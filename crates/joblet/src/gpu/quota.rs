//! Who uses how much GPU memory. NVML lists each GPU's processes with their
//! memory; a process belongs to the job whose cgroup holds it
//! (`/proc/<pid>/cgroup` names `/<cgroup base>/<job id>`), so attribution
//! needs nothing from the job. Each sample records the job's peak (for the
//! audit log) and ends a shared-mode job that uses more than its quota on
//! any of its GPUs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use joblet_core::gpu::GpuUpdate;
use joblet_core::UnixMillis;
use joblet_store::Store;

use super::GpuNode;

const MIB: u64 = 1024 * 1024;

/// A running GPU job as the monitor sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobUse {
    /// UUIDs of its GPUs.
    pub gpus: Vec<String>,
    /// Per-GPU memory quota (shared and MPS modes); `None` = not enforced.
    pub quota_mb: Option<u64>,
    /// Memory in use on each GPU when it was allocated (release checks
    /// compare against it).
    pub baseline_mb: BTreeMap<String, u64>,
    pub exclusive: bool,
    /// Processes ever seen on its GPUs.
    pub pids: BTreeSet<u32>,
    /// Most memory it held at once, over all its GPUs.
    pub peak_mb: u64,
    /// Already told to end (quota): not told again.
    pub ending: bool,
}

/// The job whose cgroup holds `pid`, read from `<proc_root>/<pid>/cgroup`.
pub fn job_of_pid(proc_root: &Path, pid: u32, base: &str) -> Option<String> {
    let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("cgroup")).ok()?;
    text.lines().find_map(|line| {
        let path = line.splitn(3, ':').nth(2)?;
        let mut parts = path.split('/').skip_while(|p| *p != base);
        parts.next()?;
        parts.next().filter(|id| !id.is_empty()).map(str::to_string)
    })
}

/// Attributes the latest sample's per-process memory to jobs; returns
/// `EndJobs` for jobs over quota (the engine fails them with the reason).
pub fn attribute(node: &mut GpuNode, store: &Store, now: UnixMillis) -> Vec<GpuUpdate> {
    attribute_in(node, store, Path::new("/proc"), now)
}

pub fn attribute_in(
    node: &mut GpuNode,
    store: &Store,
    proc_root: &Path,
    _now: UnixMillis,
) -> Vec<GpuUpdate> {
    let Some(base) = node.cgroup_base.clone() else {
        return Vec::new();
    };
    if node.jobs.is_empty() {
        return Vec::new();
    }
    // (job, uuid) → bytes, and pids per job.
    let mut used: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut seen: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for g in &node.inventory.gpus {
        for p in &g.processes {
            let Some(job) = job_of_pid(proc_root, p.pid, &base) else {
                continue;
            };
            let Some(usage) = node.jobs.get(&job) else {
                continue;
            };
            if !usage.gpus.contains(&g.uuid) {
                tracing::error!(%job, pid = p.pid, gpu = %g.uuid, "a job's process uses a GPU the job does not hold");
            }
            *used.entry((job.clone(), g.uuid.clone())).or_default() +=
                p.used_memory_bytes.unwrap_or(0);
            seen.entry(job).or_default().push(p.pid);
        }
    }
    let mut out = Vec::new();
    for (job, usage) in node.jobs.iter_mut() {
        if let Some(pids) = seen.remove(job) {
            usage.pids.extend(pids);
        }
        let per_gpu: Vec<(&String, u64)> = usage
            .gpus
            .iter()
            .map(|u| {
                let b = used.get(&(job.clone(), u.clone())).copied().unwrap_or(0);
                (u, b.div_ceil(MIB))
            })
            .collect();
        let total: u64 = per_gpu.iter().map(|(_, mb)| mb).sum();
        if total > usage.peak_mb {
            usage.peak_mb = total;
            if let Err(e) = store.audit_peak(job, total) {
                tracing::warn!(%job, error = %e, "cannot record the job's peak GPU memory");
            }
        }
        let Some(quota) = usage.quota_mb else {
            continue;
        };
        if usage.ending {
            continue;
        }
        if let Some((uuid, mb)) = per_gpu.iter().find(|(_, mb)| *mb > quota) {
            usage.ending = true;
            out.push(GpuUpdate::EndJobs {
                uuid: (*uuid).clone(),
                jobs: vec![job.clone()],
                reason: format!("GPU memory quota exceeded: used {mb} MB of {quota} MB on {uuid}"),
                failed: true,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_with(dir: &Path, pid: u32, cgroup: &str) {
        let d = dir.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cgroup"), cgroup).unwrap();
    }

    #[test]
    fn pids_map_to_jobs_through_v1_and_v2_cgroup_lines() {
        let dir = tempfile::tempdir().unwrap();
        proc_with(
            dir.path(),
            10,
            "12:memory:/joblet/0d8f/init\n0::/joblet/0d8f\n",
        );
        proc_with(dir.path(), 11, "0::/joblet-other/abc\n");
        proc_with(dir.path(), 12, "0::/joblet\n");
        assert_eq!(
            job_of_pid(dir.path(), 10, "joblet").as_deref(),
            Some("0d8f")
        );
        assert_eq!(job_of_pid(dir.path(), 11, "joblet"), None);
        assert_eq!(job_of_pid(dir.path(), 12, "joblet"), None);
        assert_eq!(job_of_pid(dir.path(), 99, "joblet"), None);
    }
}
