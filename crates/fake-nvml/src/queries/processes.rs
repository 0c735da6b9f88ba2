//! Process lists (compute, graphics, MPS), per-process utilisation samples and process names.

use std::path::Path;

use super::{available, with_device, with_gpu, Handle};
use crate::abi::{self, Status};
use crate::model::Process;
use crate::runtime::Resolved;
use crate::state::ProcessOverride;

/// Which NVML process list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Compute,
    Graphics,
    Mps,
}

/// One listed process with what the state file may add.
#[derive(Debug, Clone, Copy)]
pub struct Listed {
    pub info: abi::ProcessInfo,
    pub sm_util: Option<u32>,
    pub mem_util: Option<u32>,
}

fn from_override(p: &ProcessOverride) -> Listed {
    Listed {
        info: abi::ProcessInfo {
            pid: p.pid,
            used_gpu_memory: p.used_memory_bytes.unwrap_or(abi::VALUE_NOT_AVAILABLE_U64),
            gpu_instance_id: abi::WHOLE_GPU_INSTANCE,
            compute_instance_id: abi::WHOLE_GPU_INSTANCE,
        },
        sm_util: p.sm_util_pct,
        mem_util: p.mem_util_pct,
    }
}

fn from_model(p: &Process) -> Listed {
    let whole = |id: Option<u32>| id.unwrap_or(abi::WHOLE_GPU_INSTANCE);
    Listed {
        info: abi::ProcessInfo {
            pid: p.pid,
            used_gpu_memory: p.used_memory.unwrap_or(abi::VALUE_NOT_AVAILABLE_U64),
            gpu_instance_id: whole(p.gpu_instance_id),
            compute_instance_id: whole(p.compute_instance_id),
        },
        sm_util: None,
        mem_util: None,
    }
}

/// The list of `kind`: the state file's if it has one, else the
/// description's; on a MIG handle only those in that instance.
fn list_of(d: &Resolved<'_>, kind: Kind) -> Vec<Listed> {
    let ov = d.overrides.and_then(|o| match kind {
        Kind::Compute => o.processes.as_ref(),
        Kind::Graphics => o.graphics_processes.as_ref(),
        Kind::Mps => o.mps_processes.as_ref(),
    });
    let all: Vec<Listed> = match ov {
        Some(list) => list.iter().map(from_override).collect(),
        None => match kind {
            Kind::Compute => &d.gpu.processes,
            Kind::Graphics => &d.gpu.graphics_processes,
            Kind::Mps => &d.gpu.mps_processes,
        }
        .iter()
        .map(from_model)
        .collect(),
    };
    match d.mig {
        None => all,
        Some(m) => all
            .into_iter()
            .filter(|p| {
                p.info.gpu_instance_id == m.gpu_instance_id
                    && p.info.compute_instance_id == m.compute_instance_id
            })
            .collect(),
    }
}

pub fn processes(h: Handle, kind: Kind) -> Result<Vec<abi::ProcessInfo>, Status> {
    with_device(h, |d| {
        Ok(list_of(d, kind).into_iter().map(|p| p.info).collect())
    })
}

/// Now as NVML timestamps it: microseconds since the Unix epoch.
pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// `nvmlDeviceGetProcessUtilization`: one sample, taken now, for every
/// listed process (any kind, each pid once) the state file gives
/// `sm_util_pct` or `mem_util_pct`; only samples newer than
/// `last_seen_us`. None: `NVML_ERROR_NOT_FOUND`, as the driver says when
/// it has no sample.
pub fn utilization_samples(
    h: Handle,
    last_seen_us: u64,
) -> Result<Vec<abi::ProcessUtilizationSample>, Status> {
    with_gpu(h, "nvmlDeviceGetProcessUtilization", |d| {
        let now = now_us();
        let mut out: Vec<abi::ProcessUtilizationSample> = Vec::new();
        if now > last_seen_us {
            for p in [Kind::Compute, Kind::Graphics, Kind::Mps]
                .into_iter()
                .flat_map(|k| list_of(d, k))
            {
                if p.sm_util.is_none() && p.mem_util.is_none() {
                    continue;
                }
                if out.iter().any(|s| s.pid == p.info.pid) {
                    continue;
                }
                out.push(abi::ProcessUtilizationSample {
                    pid: p.info.pid,
                    time_stamp: now,
                    sm_util: p.sm_util.unwrap_or(0),
                    mem_util: p.mem_util.unwrap_or(0),
                    enc_util: 0,
                    dec_util: 0,
                });
            }
        }
        if out.is_empty() {
            return Err(Status::NotFound);
        }
        Ok(out)
    })
}

/// `nvmlSystemGetProcessName`: like the driver, the name comes from the
/// operating system (`<proc>/<pid>/cmdline`'s first word, else `comm`).
pub fn process_name(proc_root: &Path, pid: u32) -> Result<String, Status> {
    let dir = proc_root.join(pid.to_string());
    if let Ok(cmdline) = std::fs::read(dir.join("cmdline")) {
        let first = cmdline.split(|b| *b == 0).next().unwrap_or(&[]);
        if !first.is_empty() {
            return Ok(String::from_utf8_lossy(first).into_owned());
        }
    }
    let comm = std::fs::read_to_string(dir.join("comm")).map_err(|_| Status::NotFound)?;
    available(Some(comm.trim_end().to_string()).filter(|c| !c.is_empty()))
        .map_err(|_| Status::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_names_come_from_proc() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("42");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("cmdline"), b"/usr/bin/python3\0train.py\0").unwrap();
        std::fs::write(p.join("comm"), "python3\n").unwrap();
        assert_eq!(process_name(dir.path(), 42).unwrap(), "/usr/bin/python3");
        std::fs::write(p.join("cmdline"), b"").unwrap();
        assert_eq!(process_name(dir.path(), 42).unwrap(), "python3");
        assert_eq!(process_name(dir.path(), 43), Err(Status::NotFound));
    }
}
