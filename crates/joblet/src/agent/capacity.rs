//! What this node offers to jobs: its CPUs (those the daemon may run on,
//! or `jobs.cpu_capacity`), its memory (`MemTotal`), and
//! `jobs.max_running` job slots. The
//! scheduler never places more declared CPU (`--max-cpu`, `--cpu-cores`)
//! or memory (`--max-memory`) than that; a job that declares none takes
//! only a slot.

use std::path::Path;

use joblet_sched::model::NodeCapacity;

/// The node's capacity, read under `proc` (`/proc`); a dimension that
/// cannot be read is not tracked (logged). `cpu_capacity`: the CPUs to
/// share out instead of those the daemon may run on (0: those).
pub fn detect(proc: &Path, max_jobs: usize, cpu_capacity: u32) -> NodeCapacity {
    let cpus = if cpu_capacity > 0 {
        Some(u64::from(cpu_capacity))
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get() as u64)
            .map_err(|e| tracing::warn!(error = %e, "cannot count this node's CPUs: CPU requests are not tracked"))
            .ok()
    };
    let meminfo = proc.join("meminfo");
    let memory_mb = match std::fs::read_to_string(&meminfo) {
        Ok(text) => mem_total_mb(&text),
        Err(e) => {
            tracing::warn!(path = %meminfo.display(), error = %e, "cannot read this node's memory: memory requests are not tracked");
            None
        }
    };
    NodeCapacity {
        cpu_millis: cpus.map(|n| n * 1000),
        memory_mb,
        max_jobs: Some(u32::try_from(max_jobs).unwrap_or(u32::MAX)),
    }
}

/// `MemTotal` of a `/proc/meminfo`, in MiB.
fn mem_total_mb(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_comes_from_meminfo_and_slots_from_max_running() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("meminfo"),
            "MemTotal:       24600828 kB\nMemFree:        22000000 kB\n",
        )
        .unwrap();
        let c = detect(dir.path(), 64, 0);
        assert_eq!(c.memory_mb, Some(24_024));
        assert_eq!(c.max_jobs, Some(64));
        assert!(c.cpu_millis.unwrap() >= 1000);
        // Unreadable: not tracked, never zero.
        let c = detect(&dir.path().join("missing"), 1, 0);
        assert_eq!(c.memory_mb, None);
        // jobs.cpu_capacity stands for the CPUs.
        assert_eq!(detect(dir.path(), 1, 16).cpu_millis, Some(16_000));
        assert_eq!(mem_total_mb("MemFree: 1 kB\n"), None);
    }
}
