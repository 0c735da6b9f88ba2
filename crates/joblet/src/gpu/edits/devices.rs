//! The device part of a job's GPU edits: the host nodes bound into its
//! `/dev` and the device rules allowing exactly those (`nvidiactl`,
//! `nvidia-uvm`, `nvidia-uvm-tools` when profiling, each GPU's
//! `nvidiaN`, each MIG slice's access capabilities), and the MPS pipe and
//! log directories and shared-memory tmpfs of an MPS job. Every node is checked against the
//! driver's numbers; anything missing fails the start with a
//! [`DeviceError`].

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use joblet_core::JobSpec;
use joblet_gpu::exec::{cap_node, JobGpu, MigMinors, MigRef, MpsSettings};
use joblet_sandbox::devices::{Access, DeviceRule};
use joblet_sandbox::init::Bind;

use super::super::mps::{self, JOB_LOG_DIR, JOB_PIPE_DIR};
use super::super::settings::GpuSettings;
use super::{DeviceError, GpuEdits, CTL_MINOR, NVIDIA_MAJOR};

/// A host device node: its `(major, minor)`, checked to be a character
/// device (and, when `want` is given, to have those numbers).
pub(super) fn node_numbers(
    path: &Path,
    want: Option<(u32, u32)>,
) -> Result<(u32, u32), DeviceError> {
    let meta = std::fs::metadata(path).map_err(|source| DeviceError::Unusable {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.file_type().is_char_device() {
        return Err(DeviceError::NotCharDevice {
            path: path.to_path_buf(),
        });
    }
    let rdev = meta.rdev();
    let got = (
        nix::sys::stat::major(rdev) as u32,
        nix::sys::stat::minor(rdev) as u32,
    );
    if let Some(w) = want {
        if got != w {
            return Err(DeviceError::OtherNumbers {
                path: path.to_path_buf(),
                found: got,
                driver: w,
            });
        }
    }
    Ok(got)
}

/// Binds the host node `dev_dir/name` into the job's `/dev` and allows it,
/// after checking it is `want` (the driver's numbers; `None` for
/// simulated GPUs, whose nodes are made by hand).
fn add_node(
    settings: &GpuSettings,
    out: &mut GpuEdits,
    name: String,
    want: Option<(u32, u32)>,
) -> Result<(), DeviceError> {
    let host = settings.dev_dir.join(&name);
    let (major, minor) = node_numbers(&host, want)?;
    out.rules.push(DeviceRule::char(major, minor, Access::RW));
    out.devices.push(Bind {
        source: host,
        target: Path::new("/dev").join(name),
        writable: false,
    });
    Ok(())
}

/// `nvidia-uvm`'s `(major, minor)` on a real driver; `None` simulated.
fn uvm_numbers(settings: &GpuSettings) -> Result<Option<(u32, u32)>, DeviceError> {
    if settings.simulation.is_some() {
        return Ok(None);
    }
    settings
        .majors
        .nvidia_uvm
        .map(|major| Some((major, 0)))
        .ok_or(DeviceError::NoUvm)
}

/// The control nodes every GPU job gets, `nvidiactl` and `nvidia-uvm`,
/// with the rules allowing them (the first of a job's nodes: a GPU-ready
/// warm sandbox binds them ahead).
pub(super) fn control_nodes(settings: &GpuSettings, out: &mut GpuEdits) -> Result<(), DeviceError> {
    let real = settings.simulation.is_none();
    let nvidia = settings.majors.nvidia.unwrap_or(NVIDIA_MAJOR);
    add_node(
        settings,
        out,
        "nvidiactl".into(),
        real.then_some((nvidia, CTL_MINOR)),
    )?;
    add_node(settings, out, "nvidia-uvm".into(), uvm_numbers(settings)?)
}

/// The device nodes of a job's GPUs (and MIG slices), with the rules
/// allowing exactly them; `profiling` adds `nvidia-uvm-tools`. They follow
/// the [`control_nodes`].
pub(super) fn devices(
    settings: &GpuSettings,
    gpus: &[JobGpu],
    profiling: bool,
    out: &mut GpuEdits,
) -> Result<(), DeviceError> {
    let real = settings.simulation.is_none();
    let nvidia = settings.majors.nvidia.unwrap_or(NVIDIA_MAJOR);
    let mut add = |name: String, want: Option<(u32, u32)>| add_node(settings, out, name, want);
    if profiling {
        // Profilers (CUPTI, Nsight) need the UVM tools node, minor 1.
        let uvm = uvm_numbers(settings)?;
        add("nvidia-uvm-tools".into(), uvm.map(|(major, _)| (major, 1)))?;
    }
    // Two slices of one GPU share its node.
    let minors: std::collections::BTreeSet<u32> = gpus.iter().map(|g| g.minor).collect();
    for minor in minors {
        add(format!("nvidia{minor}"), real.then_some((nvidia, minor)))?;
    }
    let slices: Vec<(u32, &MigRef)> = gpus
        .iter()
        .filter_map(|g| g.mig.as_ref().map(|m| (g.minor, m)))
        .collect();
    if !slices.is_empty() {
        let major = settings
            .majors
            .nvidia_caps
            .ok_or_else(|| DeviceError::NoCapsMajor {
                proc_dir: settings.proc_dir.clone(),
            })?;
        let minors = MigMinors::read(&settings.proc_dir)?;
        for (gpu_minor, m) in slices {
            for cap in minors.slice(gpu_minor, m.gpu_instance_id, m.compute_instance_id)? {
                let name = cap_node(Path::new(""), cap);
                add(name.display().to_string(), Some((major, cap)))?;
            }
        }
    }
    Ok(())
}

/// An MPS job's part: its GPU's pipe and log directories bound in, its
/// GPU's shared-memory tmpfs as its `/dev/shm` (where MPS clients and the
/// server exchange memory), and the settings for its environment. `None` unless the node runs MPS and
/// the job is a shared one (it has a memory quota) on one visible GPU.
pub(super) fn mps_part(
    settings: &GpuSettings,
    spec: &JobSpec,
    visible: &[JobGpu],
    quota_mb: Option<u64>,
    out: &mut GpuEdits,
) -> Result<Option<MpsSettings>, DeviceError> {
    let (Some(client), Some(_)) = (&settings.mps, quota_mb) else {
        return Ok(None);
    };
    let g = match visible {
        [] => return Ok(None),
        [g] if g.mig.is_none() => g,
        _ => {
            return Err(DeviceError::MpsGpus {
                count: visible.len(),
            })
        }
    };
    let active_thread_percentage = client
        .thread_percentage(
            spec.env
                .get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
                .map(String::as_str),
        )
        .map_err(DeviceError::ThreadPercentage)?;
    // A share of the GPU (`--gpu=0.25`) caps its SMs at that share too.
    let share = spec
        .resources
        .gpu_milli
        .map(|m| m.div_ceil(10).clamp(1, 100));
    let active_thread_percentage = match (active_thread_percentage, share) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let host = mps::dirs(&client.root, &g.uuid);
    out.dev_shm = Some(host.shm);
    for (source, target) in [(host.pipe, JOB_PIPE_DIR), (host.log, JOB_LOG_DIR)] {
        out.binds.push(Bind {
            source,
            target: PathBuf::from(target),
            writable: false,
        });
    }
    Ok(Some(MpsSettings {
        pipe_dir: PathBuf::from(JOB_PIPE_DIR),
        log_dir: PathBuf::from(JOB_LOG_DIR),
        active_thread_percentage,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::mps::MpsClient;
    use joblet_gpu::exec::DriverCapabilities;
    use joblet_gpu::DeviceMajors;
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    use std::sync::Arc;
    use std::time::Duration;

    const UVM: u32 = 4000;
    const CAPS: u32 = 4001;

    /// A real-driver node (numbers checked) in a temp dir: `dev/` with
    /// nvidiactl, nvidia-uvm(-tools), nvidia0..1 and caps 30..33, `proc/`
    /// with the caps' minors (GPU minor 1, instances 3 and 4, CI 0).
    fn node() -> (tempfile::TempDir, GpuSettings) {
        let tmp = tempfile::tempdir().unwrap();
        let dev = tmp.path().join("dev");
        std::fs::create_dir_all(dev.join("nvidia-caps")).unwrap();
        let mut nodes = vec![
            ("nvidiactl".to_string(), NVIDIA_MAJOR, CTL_MINOR),
            ("nvidia-uvm".into(), UVM, 0),
            ("nvidia-uvm-tools".into(), UVM, 1),
            ("nvidia0".into(), NVIDIA_MAJOR, 0),
            ("nvidia1".into(), NVIDIA_MAJOR, 1),
        ];
        nodes.extend((30..34).map(|m| (format!("nvidia-caps/nvidia-cap{m}"), CAPS, m)));
        for (name, major, minor) in nodes {
            mknod(
                &dev.join(name),
                SFlag::S_IFCHR,
                Mode::from_bits_truncate(0o600),
                makedev(major.into(), minor.into()),
            )
            .unwrap();
        }
        let proc = tmp.path().join("proc");
        std::fs::create_dir_all(proc.join("driver/nvidia-caps")).unwrap();
        std::fs::write(
            proc.join("driver/nvidia-caps/mig-minors"),
            "config 1\nmonitor 2\ngpu1/gi3/access 30\ngpu1/gi3/ci0/access 31\ngpu1/gi4/access 32\ngpu1/gi4/ci0/access 33\n",
        )
        .unwrap();
        let settings = GpuSettings {
            sharing: joblet_gpu::exec::SharingMode::Exclusive,
            scrub: crate::config::ScrubPolicy::Verify,
            scrub_timeout: Duration::from_secs(1),
            can_verify: false,
            default_gpu_time: None,
            caps: DriverCapabilities::default(),
            dev_dir: dev,
            ld_cache: Vec::new(),
            ld_cache_path: PathBuf::from("/etc/ld.so.cache"),
            bin_dirs: Vec::new(),
            driver_files_found: Default::default(),
            toolkits: Vec::new(),
            driver_max: None,
            majors: DeviceMajors {
                nvidia: Some(NVIDIA_MAJOR),
                nvidia_uvm: Some(UVM),
                nvidia_caps: Some(CAPS),
            },
            proc_dir: proc,
            mps: None,
            simulation: None,
            simulate_state: None,
        };
        (tmp, settings)
    }

    fn gpu(minor: u32, gi: Option<u32>) -> JobGpu {
        JobGpu {
            index: minor,
            uuid: match gi {
                Some(gi) => format!("MIG-{gi}"),
                None => format!("GPU-{minor}"),
            },
            minor,
            bus_id: format!("0000:{:02x}:00.0", minor + 1),
            memory_mb: 40960,
            mig: gi.map(|gi| MigRef {
                parent_uuid: format!("GPU-{minor}"),
                gpu_instance_id: gi,
                compute_instance_id: 0,
            }),
        }
    }

    /// `(job path, major:minor)` of every node given, sorted.
    fn given(out: &GpuEdits) -> Vec<(String, (u32, u32))> {
        assert_eq!(out.devices.len(), out.rules.len());
        let mut v: Vec<_> = out
            .devices
            .iter()
            .zip(&out.rules)
            .map(|(b, r)| {
                assert_eq!(r.access, Access::RW);
                (
                    b.target.display().to_string(),
                    (r.major.unwrap(), r.minor.unwrap()),
                )
            })
            .collect();
        v.sort();
        v
    }

    /// A GPU job's nodes, as `gpu_job` puts them together.
    fn job_nodes(
        s: &GpuSettings,
        gpus: &[JobGpu],
        profiling: bool,
        out: &mut GpuEdits,
    ) -> Result<(), DeviceError> {
        control_nodes(s, out)?;
        devices(s, gpus, profiling, out)
    }

    fn names(v: &[(String, (u32, u32))]) -> Vec<&str> {
        v.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn uvm_tools_only_when_profiling() {
        let (_tmp, s) = node();
        let mut plain = GpuEdits::default();
        job_nodes(&s, &[gpu(0, None)], false, &mut plain).unwrap();
        assert_eq!(
            names(&given(&plain)),
            ["/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl"]
        );
        let mut prof = GpuEdits::default();
        job_nodes(&s, &[gpu(0, None)], true, &mut prof).unwrap();
        let g = given(&prof);
        assert_eq!(
            names(&g),
            [
                "/dev/nvidia-uvm",
                "/dev/nvidia-uvm-tools",
                "/dev/nvidia0",
                "/dev/nvidiactl"
            ]
        );
        assert_eq!(g[1].1, (UVM, 1));
    }

    #[test]
    fn a_mig_slice_gets_its_parent_and_exactly_its_two_caps() {
        let (_tmp, mut s) = node();
        let mut out = GpuEdits::default();
        job_nodes(&s, &[gpu(1, Some(4))], false, &mut out).unwrap();
        assert_eq!(
            given(&out),
            [
                ("/dev/nvidia-caps/nvidia-cap32".to_string(), (CAPS, 32)),
                ("/dev/nvidia-caps/nvidia-cap33".to_string(), (CAPS, 33)),
                ("/dev/nvidia-uvm".to_string(), (UVM, 0)),
                ("/dev/nvidia1".to_string(), (NVIDIA_MAJOR, 1)),
                ("/dev/nvidiactl".to_string(), (NVIDIA_MAJOR, CTL_MINOR)),
            ]
        );
        // Two slices of one GPU: its node once, four caps.
        let mut two = GpuEdits::default();
        job_nodes(&s, &[gpu(1, Some(3)), gpu(1, Some(4))], false, &mut two).unwrap();
        let n = given(&two);
        assert_eq!(n.iter().filter(|(p, _)| p == "/dev/nvidia1").count(), 1);
        assert_eq!(
            n.iter().filter(|(p, _)| p.contains("nvidia-cap")).count(),
            4
        );
        // An instance the driver does not list, no caps major, a cap node
        // with other numbers: refused.
        let e = job_nodes(&s, &[gpu(1, Some(5))], false, &mut GpuEdits::default()).unwrap_err();
        assert!(e.to_string().contains("no `gpu1/gi5/access` line"), "{e}");
        std::fs::remove_file(s.dev_dir.join("nvidia-caps/nvidia-cap33")).unwrap();
        mknod(
            &s.dev_dir.join("nvidia-caps/nvidia-cap33"),
            SFlag::S_IFCHR,
            Mode::from_bits_truncate(0o600),
            makedev(CAPS.into(), 99),
        )
        .unwrap();
        let e = job_nodes(&s, &[gpu(1, Some(4))], false, &mut GpuEdits::default()).unwrap_err();
        assert!(e.to_string().contains("refusing"), "{e}");
        s.majors.nvidia_caps = None;
        let e = job_nodes(&s, &[gpu(1, Some(3))], false, &mut GpuEdits::default()).unwrap_err();
        assert!(e.to_string().contains("no nvidia-caps line"), "{e}");
    }

    #[test]
    fn an_mps_job_gets_its_gpus_pipe_and_log_dirs_and_shm() {
        let (tmp, mut s) = node();
        let spec = |env: &[(&str, &str)]| {
            let mut spec = joblet_core::JobRequest {
                command: "x".into(),
                gpu_count: 1,
                gpu_memory_mb: 1024,
                ..Default::default()
            }
            .validate()
            .unwrap()
            .0;
            spec.env = env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            spec
        };
        let g = [gpu(0, None)];
        let mut out = GpuEdits::default();
        // Not an MPS node: nothing.
        assert_eq!(
            mps_part(&s, &spec(&[]), &g, Some(1024), &mut out).unwrap(),
            None
        );
        let root = tmp.path().join("mps");
        s.mps = Some(MpsClient {
            root: root.clone(),
            active_thread_percentage: Some(50),
        });
        // Exclusive (no quota) or no visible GPU: nothing.
        assert_eq!(mps_part(&s, &spec(&[]), &g, None, &mut out).unwrap(), None);
        assert_eq!(
            mps_part(&s, &spec(&[]), &[], Some(1024), &mut out).unwrap(),
            None
        );
        assert!(out.binds.is_empty());
        assert_eq!(out.dev_shm, None);
        let m = mps_part(
            &s,
            &spec(&[("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "20")]),
            &g,
            Some(1024),
            &mut out,
        )
        .unwrap()
        .unwrap();
        assert_eq!(m.pipe_dir, Path::new(JOB_PIPE_DIR));
        assert_eq!(m.log_dir, Path::new(JOB_LOG_DIR));
        assert_eq!(m.active_thread_percentage, Some(20));
        // A quarter of the GPU: 25 % of its SMs, under the node's 50 %;
        // the job's own lower value still wins.
        let mut quarter = spec(&[]);
        quarter.resources.gpu_milli = Some(250);
        let q = mps_part(&s, &quarter, &g, Some(1024), &mut GpuEdits::default())
            .unwrap()
            .unwrap();
        assert_eq!(q.active_thread_percentage, Some(25));
        quarter
            .env
            .insert("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE".into(), "10".into());
        let q = mps_part(&s, &quarter, &g, Some(1024), &mut GpuEdits::default())
            .unwrap()
            .unwrap();
        assert_eq!(q.active_thread_percentage, Some(10));
        let binds: Vec<(PathBuf, PathBuf)> = out
            .binds
            .iter()
            .map(|b| (b.source.clone(), b.target.clone()))
            .collect();
        assert_eq!(
            binds,
            [
                (root.join("GPU-0/pipe"), PathBuf::from(JOB_PIPE_DIR)),
                (root.join("GPU-0/log"), PathBuf::from(JOB_LOG_DIR)),
            ]
        );
        assert_eq!(out.dev_shm, Some(root.join("GPU-0/shm")));
        let e = mps_part(
            &s,
            &spec(&[]),
            &[gpu(0, None), gpu(1, None)],
            Some(1),
            &mut out,
        )
        .unwrap_err();
        assert!(e.to_string().contains("--gpu=1"), "{e}");
        let e = mps_part(
            &s,
            &spec(&[("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "0")]),
            &g,
            Some(1),
            &mut out,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
            "{e}"
        );
    }

    #[test]
    fn device_nodes_must_be_char_devices_with_the_expected_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("nvidia0");
        std::fs::write(&file, "").unwrap();
        let e = node_numbers(&file, None).unwrap_err();
        assert!(e.to_string().contains("not a character device"), "{e}");
        let e = node_numbers(&dir.path().join("nvidia9"), None).unwrap_err();
        assert!(e.to_string().contains("not usable"), "{e}");
        // /dev/null is 1:3.
        assert_eq!(node_numbers(Path::new("/dev/null"), None).unwrap(), (1, 3));
        let e = node_numbers(Path::new("/dev/null"), Some((195, 0))).unwrap_err();
        assert!(e.to_string().contains("refusing"), "{e}");
    }

    /// Driver files are looked up once per set of capabilities: a second
    /// job gets the same list even after the files changed on disk (as
    /// the loader cache they come from is read once, at start-up).
    #[test]
    fn driver_files_are_found_once_per_set_of_capabilities() {
        let (tmp, mut s) = node();
        let lib = tmp.path().join("lib64");
        std::fs::create_dir_all(&lib).unwrap();
        for base in ["libnvidia-ml.so", "libcuda.so"] {
            std::fs::write(lib.join(format!("{base}.1")), b"").unwrap();
            s.ld_cache.push(joblet_gpu::exec::LdCacheEntry {
                soname: format!("{base}.1"),
                path: lib.join(format!("{base}.1")),
                flags: joblet_gpu::exec::ld_cache::HOST_LIB64_FLAGS.unwrap(),
            });
        }
        let default = DriverCapabilities::default();
        let first = s.driver_files(&default);
        assert_eq!(first.libraries.len(), 2, "{first:?}");
        std::fs::remove_file(lib.join("libcuda.so.1")).unwrap();
        assert!(Arc::ptr_eq(&first, &s.driver_files(&default)));
        // Another set is looked up on its own (libcuda is gone by now).
        let utility = DriverCapabilities::parse("utility").unwrap();
        assert_eq!(s.driver_files(&utility).libraries.len(), 1);
        assert!(s
            .driver_files(&DriverCapabilities::parse("compute").unwrap())
            .missing
            .contains(&"libcuda.so.1".to_string()));
    }
}
