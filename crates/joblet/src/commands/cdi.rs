//! `joblet cdi generate`: a CDI spec for this node's GPUs, for container
//! engines that read `/etc/cdi` (podman, containerd, CRI-O, Docker 25+).
//!
//! The GPUs are discovered as `joblet discover` does ([`discover_once`]);
//! the device nodes are the ones GPU jobs get (`gpu.dev_dir`: `/dev`, or
//! a simulated node's directory of `mknod`-made nodes, named as each
//! node's `hostPath`), checked to exist with the driver's numbers; MIG
//! slices get their access capabilities from `gpu.proc_dir`; the driver's
//! libraries and binaries are those of `gpu.driver_capabilities` found
//! through `gpu.ld_cache` and `gpu.driver_bin_dirs`, as for jobs. With
//! simulated GPUs the fake NVML library and its profile are mounted
//! instead, and the spec says it is simulated (a YAML comment, and
//! `JOBLET_GPU_SIMULATED=1` in the container). The spec itself is
//! `joblet_oci::cdi::generate`'s.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use joblet_gpu::exec::{cap_node, find_driver_files, read_ld_cache, DriverCapabilities, MigMinors};
use joblet_gpu::{GpuInfo, NodeInventory};
use joblet_oci::cdi::{
    self, FileMount, Gpu, GpuNode, HostNodes, Kind, MigSlice, Node, NodeKind, NodeStat, Spec,
};

use super::discover_once;
use crate::config::{Config, GpuConfig};
use crate::gpu::edits::{CTL_MINOR, NVIDIA_MAJOR, SIM_DIR};
use crate::gpu::simulate::Simulation;

const GENERATE_HELP: &str = "\
What the file is for: a CDI (Container Device Interface) spec tells a container engine what
`--device nvidia.com/gpu=0` means: which device nodes to create in the container (with the
device-cgroup rules allowing them), which driver libraries and binaries to bind in read-only,
which environment to set. It names each GPU by index (0, 1, ...), by UUID (GPU-...), each MIG
slice as GPU:SLICE (0:1) and by MIG UUID, and `all`, like `nvidia-ctk cdi generate`, without
its nvidia-cdi-hook hooks (libraries are bound under the names the loader looks for instead).

Where to put it: /etc/cdi/ (static) or /var/run/cdi/ (generated at boot; it wins over
/etc/cdi), as a .yaml or .json file. Generate it again after the driver or the GPUs change.

Examples:
  joblet cdi generate --output /etc/cdi/nvidia.yaml
  podman run --rm --device nvidia.com/gpu=0 docker.io/library/ubuntu nvidia-smi -L
  podman run --rm --device nvidia.com/gpu=all ...
  joblet cdi generate --config demo.yml --vendor joblet.example --class gpu --json
                                            # a simulated node: its mknod'ed nodes, fake NVML";

/// `joblet cdi ...`.
#[derive(Debug, Subcommand)]
pub enum CdiCommand {
    /// Write a CDI spec for this node's GPUs (for podman/containerd/CRI-O `--device nvidia.com/gpu=N`).
    #[command(after_help = GENERATE_HELP)]
    Generate(GenerateArgs),
}

/// `joblet cdi generate`'s flags.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// joblet-config.yml: its gpu.* settings say where the GPUs' nodes and driver files are.
    #[arg(long, short, env = "JOBLET_CONFIG")]
    pub config: Option<PathBuf>,
    /// Where to write the spec: a file (replaced atomically) or `-` for stdout (the default).
    #[arg(long, short, value_name = "FILE|-")]
    pub output: Option<PathBuf>,
    /// The kind's vendor, domain-like: devices are named VENDOR/CLASS=NAME.
    #[arg(long, default_value = "nvidia.com")]
    pub vendor: String,
    /// The kind's class.
    #[arg(long, default_value = "gpu")]
    pub class: String,
    /// Write JSON instead of YAML (also chosen for an --output ending in .json).
    #[arg(long)]
    pub json: bool,
}

impl CdiCommand {
    /// The config file the command names.
    pub fn config(&self) -> Option<&PathBuf> {
        match self {
            CdiCommand::Generate(args) => args.config.as_ref(),
        }
    }
}

/// Runs `cmd` with the loaded config.
pub fn run(cfg: &Config, cmd: &CdiCommand) -> anyhow::Result<()> {
    match cmd {
        CdiCommand::Generate(args) => generate(cfg, args),
    }
}

/// Where a simulated node's fake NVML library appears in the container:
/// where a Debian or Ubuntu image's loader finds the real one.
fn sim_lib_dir() -> PathBuf {
    PathBuf::from(format!("/usr/lib/{}-linux-gnu", std::env::consts::ARCH))
}

fn generate(cfg: &Config, args: &GenerateArgs) -> anyhow::Result<()> {
    let kind = Kind::new(&args.vendor, &args.class).context("--vendor/--class")?;
    let found = discover_once(cfg)?;
    let input = node_input(
        &cfg.gpu,
        &found.inventory,
        found.sim.as_ref(),
        kind,
        &HostNodes,
    )?;
    let spec = cdi::generate(&input);
    // What we write must be what we (and any CDI reader) accept.
    cdi::validate(&spec, Path::new("(generated spec)"))?;
    let stdout = args.output.as_deref().is_none_or(|p| p == Path::new("-"));
    let json = args.json
        || args
            .output
            .as_deref()
            .is_some_and(|p| p.extension().is_some_and(|e| e == "json"));
    let text = if json {
        spec.to_json()?
    } else {
        format!(
            "{}{}",
            yaml_header(&spec, &cfg.gpu, found.sim.as_ref()),
            spec.to_yaml()?
        )
    };
    match args.output.as_deref().filter(|_| !stdout) {
        None => std::io::stdout()
            .write_all(text.as_bytes())
            .context("writing the spec to stdout")?,
        Some(path) => {
            write_atomically(path, text.as_bytes())?;
            println!("{}", summary(path, &spec, found.sim.as_ref()));
        }
    }
    Ok(())
}

/// What the YAML form starts with: where it came from, where it goes,
/// and whether the GPUs are simulated.
fn yaml_header(spec: &Spec, gpu: &GpuConfig, sim: Option<&Simulation>) -> String {
    let mut h = format!(
        "# CDI spec for this node's GPUs, written by `joblet cdi generate` (kind {}).\n\
         # Put it in /etc/cdi/ or /var/run/cdi/; then e.g. `podman run --device {}=0 ...`.\n",
        spec.kind, spec.kind
    );
    if let Some(sim) = sim {
        h.push_str(&format!(
            "# SIMULATED GPUs (fake NVML serving {}): the device nodes are mknod-made nodes in {}\n\
             # with no driver behind them (opening one gives ENXIO); JOBLET_GPU_SIMULATED=1 is set.\n",
            sim.from.display(),
            gpu.dev_dir.display()
        ));
    }
    h.push_str("---\n");
    h
}

/// The line printed after writing a file.
fn summary(path: &Path, spec: &Spec, sim: Option<&Simulation>) -> String {
    let names: Vec<&str> = spec.devices.iter().map(|d| d.name.as_str()).collect();
    format!(
        "wrote {} (cdiVersion {}, kind {}, {} devices: {}){}",
        path.display(),
        spec.cdi_version,
        spec.kind,
        names.len(),
        names.join(", "),
        if sim.is_some() {
            "; SIMULATED GPUs"
        } else {
            ""
        }
    )
}

/// `bytes` into `path` through a temporary file beside it, so a reader
/// (a container engine scanning /etc/cdi) never sees half a spec.
fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let write = || -> std::io::Result<()> {
        let mut tmp = tempfile::Builder::new()
            .prefix(".joblet-cdi-")
            .tempfile_in(dir)?;
        tmp.write_all(bytes)?;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
        tmp.as_file().sync_all()?;
        tmp.persist(path).map_err(|e| e.error)?;
        Ok(())
    };
    write().with_context(|| format!("writing {}", path.display()))
}

/// The generator's input from the inventory and the node's settings;
/// every host node is looked at through `nodes`.
fn node_input(
    gpu: &GpuConfig,
    inv: &NodeInventory,
    sim: Option<&Simulation>,
    kind: Kind,
    nodes: &dyn NodeStat,
) -> anyhow::Result<GpuNode> {
    if inv.gpus.is_empty() {
        bail!(
            "no GPUs found, so no CDI spec to write (`joblet discover` shows what discovery sees{})",
            if inv.warnings.is_empty() {
                String::new()
            } else {
                format!(": {}", inv.warnings.join("; "))
            }
        );
    }
    let real = sim.is_none();
    let majors = &inv.device_majors;
    let nvidia = majors.nvidia.unwrap_or(NVIDIA_MAJOR);
    let dev = |name: &str, want: Option<(u32, u32)>| -> anyhow::Result<Node> {
        let host = gpu.dev_dir.join(name);
        check_node(nodes, &host, want)?;
        Ok(Node {
            path: Path::new("/dev").join(name),
            host_path: host,
        })
    };
    let mut control = vec![dev("nvidiactl", real.then_some((nvidia, CTL_MINOR)))?];
    let optional = [
        ("nvidia-uvm", majors.nvidia_uvm.map(|m| (m, 0))),
        ("nvidia-uvm-tools", majors.nvidia_uvm.map(|m| (m, 1))),
        ("nvidia-modeset", Some((nvidia, 254))),
    ];
    for (name, want) in optional {
        match nodes.stat(&gpu.dev_dir.join(name)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            _ => control.push(dev(name, want.filter(|_| real))?),
        }
    }
    let mut minors: Option<MigMinors> = None;
    let mut gpus = Vec::new();
    for g in &inv.gpus {
        let node = dev(
            &format!("nvidia{}", g.minor),
            real.then_some((nvidia, g.minor)),
        )?;
        let mig = mig_slices(gpu, g, &mut minors, majors.nvidia_caps, real, nodes)?;
        gpus.push(Gpu {
            index: g.index,
            uuid: g.uuid.clone(),
            node,
            mig,
        });
    }
    gpus.sort_by_key(|g| g.index);
    let (files, env) = match sim {
        Some(sim) => sim_files(gpu, sim),
        None => (driver_files(gpu)?, Vec::new()),
    };
    Ok(GpuNode {
        kind,
        gpus,
        control_nodes: control,
        files,
        env,
    })
}

/// The MIG slices of `g`, each with its two access capability nodes.
fn mig_slices(
    gpu: &GpuConfig,
    g: &GpuInfo,
    minors: &mut Option<MigMinors>,
    caps_major: Option<u32>,
    real: bool,
    nodes: &dyn NodeStat,
) -> anyhow::Result<Vec<MigSlice>> {
    let Some(mig) = g.mig.as_ref().filter(|m| m.enabled) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (j, inst) in mig.gpu_instances.iter().enumerate() {
        if minors.is_none() {
            *minors = Some(MigMinors::read(&gpu.proc_dir).context("gpu.proc_dir")?);
        }
        let Some(m) = minors.as_ref() else {
            continue;
        };
        let mut caps = Vec::new();
        for cap in m.slice(g.minor, inst.gpu_instance_id, inst.compute_instance_id)? {
            let host = cap_node(&gpu.dev_dir, cap);
            let want = match (real, caps_major) {
                (false, _) => None,
                (true, Some(major)) => Some((major, cap)),
                (true, None) => bail!(
                    "GPU {} has MIG slices but {}/devices has no nvidia-caps line: the driver offers no MIG access capabilities",
                    g.index,
                    gpu.proc_dir.display()
                ),
            };
            check_node(nodes, &host, want)?;
            caps.push(Node {
                path: cap_node(Path::new("/dev"), cap),
                host_path: host,
            });
        }
        out.push(MigSlice {
            index: j as u32,
            uuid: inst.uuid.clone(),
            caps,
        });
    }
    Ok(out)
}

/// A host node must be a character device, with `want`'s numbers when
/// given (a real driver's; simulated nodes are made by hand).
fn check_node(nodes: &dyn NodeStat, host: &Path, want: Option<(u32, u32)>) -> anyhow::Result<()> {
    let info = nodes.stat(host).with_context(|| {
        format!(
            "device node {} (gpu.dev_dir): a CDI spec naming it would not start a container",
            host.display()
        )
    })?;
    if info.kind != NodeKind::Char {
        bail!(
            "{} (gpu.dev_dir) is not a character device node",
            host.display()
        );
    }
    if let Some((major, minor)) = want {
        if (info.major, info.minor) != (major, minor) {
            bail!(
                "{} is {}:{}, but the driver's node is {major}:{minor}; refusing to name it in a CDI spec",
                host.display(),
                info.major,
                info.minor
            );
        }
    }
    Ok(())
}

/// The driver's libraries (under the names the loader looks for, in the
/// directory the host's loader cache has them in) and binaries (at their
/// host paths) for `gpu.driver_capabilities`.
fn driver_files(gpu: &GpuConfig) -> anyhow::Result<Vec<FileMount>> {
    let caps =
        DriverCapabilities::parse(&gpu.driver_capabilities).context("gpu.driver_capabilities")?;
    let cache = read_ld_cache(&gpu.ld_cache)
        .with_context(|| format!("gpu.ld_cache: {}", gpu.ld_cache.display()))?;
    let found = find_driver_files(&caps, &cache, &gpu.driver_bin_dirs);
    if !found.missing.is_empty() {
        bail!(
            "the driver libraries {} (for NVIDIA_DRIVER_CAPABILITIES {}) are not in {}: is the driver installed?",
            found.missing.join(", "),
            gpu.driver_capabilities,
            gpu.ld_cache.display()
        );
    }
    let mut files = Vec::new();
    for lib in &found.libraries {
        let dir = lib.path.parent().unwrap_or(Path::new("/"));
        for name in &lib.names {
            files.push(FileMount {
                host_path: lib.path.clone(),
                container_path: dir.join(name),
            });
        }
    }
    for bin in &found.binaries {
        files.push(FileMount {
            host_path: bin.clone(),
            container_path: bin.clone(),
        });
    }
    Ok(files)
}

/// A simulated node's files and environment: the fake NVML library as
/// `libnvidia-ml.so.1`, and the profile (and fault file) it serves.
fn sim_files(gpu: &GpuConfig, sim: &Simulation) -> (Vec<FileMount>, Vec<String>) {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let lib = canon(&sim.library);
    let mut files: Vec<FileMount> = ["libnvidia-ml.so.1", "libnvidia-ml.so"]
        .iter()
        .map(|name| FileMount {
            host_path: lib.clone(),
            container_path: sim_lib_dir().join(name),
        })
        .collect();
    let profile_name = sim
        .from
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("profile"));
    let profile = Path::new(SIM_DIR).join(profile_name);
    files.push(FileMount {
        host_path: canon(&sim.from),
        container_path: profile.clone(),
    });
    let mut env = vec![
        "JOBLET_GPU_SIMULATED=1".to_string(),
        format!("MOCK_NVML_CONFIG={}", profile.display()),
    ];
    if let Some(state) = gpu.simulate_state.as_ref().filter(|p| p.is_file()) {
        let target = Path::new(SIM_DIR).join("state.json");
        files.push(FileMount {
            host_path: canon(state),
            container_path: target.clone(),
        });
        env.push(format!("MOCK_NVML_STATE={}", target.display()));
    }
    (files, env)
}

#[cfg(test)]
mod tests {
    use super::*;
    use joblet_gpu::model::{MigGpuInstance, MigInfo};
    use joblet_gpu::DeviceMajors;
    use joblet_oci::cdi::NodeInfo;
    use std::collections::BTreeMap;

    /// Host nodes by path.
    struct Fake(BTreeMap<PathBuf, NodeInfo>);

    impl NodeStat for Fake {
        fn stat(&self, path: &Path) -> std::io::Result<NodeInfo> {
            self.0
                .get(path)
                .copied()
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        }
    }

    fn char_node(major: u32, minor: u32) -> NodeInfo {
        NodeInfo {
            kind: NodeKind::Char,
            major,
            minor,
        }
    }

    fn gpu_info(index: u32, minor: u32) -> GpuInfo {
        GpuInfo {
            index,
            uuid: format!("GPU-{index}"),
            minor,
            ..GpuInfo::default()
        }
    }

    #[test]
    fn real_nodes_must_have_the_drivers_numbers_and_mig_gets_caps() {
        let tmp = tempfile::tempdir().unwrap();
        let dev = tmp.path().join("dev");
        let proc = tmp.path().join("proc");
        std::fs::create_dir_all(proc.join("driver/nvidia-caps")).unwrap();
        std::fs::write(
            proc.join("driver/nvidia-caps/mig-minors"),
            "gpu1/gi3/access 30\ngpu1/gi3/ci0/access 31\n",
        )
        .unwrap();
        let cfg = GpuConfig {
            dev_dir: dev.clone(),
            proc_dir: proc,
            // No loader cache: a real node's driver files cannot be found.
            ld_cache: tmp.path().join("no-ld.so.cache"),
            ..GpuConfig::default()
        };
        let mut fake = Fake(BTreeMap::from([
            (dev.join("nvidiactl"), char_node(195, 255)),
            (dev.join("nvidia-uvm"), char_node(510, 0)),
            (dev.join("nvidia0"), char_node(195, 0)),
            (dev.join("nvidia1"), char_node(195, 1)),
            (dev.join("nvidia-caps/nvidia-cap30"), char_node(511, 30)),
            (dev.join("nvidia-caps/nvidia-cap31"), char_node(511, 31)),
        ]));
        let mut inv = NodeInventory {
            device_majors: DeviceMajors {
                nvidia: Some(195),
                nvidia_uvm: Some(510),
                nvidia_caps: Some(511),
            },
            gpus: vec![gpu_info(1, 1), gpu_info(0, 0)],
            ..NodeInventory::default()
        };
        inv.gpus[0].mig = Some(MigInfo {
            enabled: true,
            pending: true,
            gpu_instances: vec![MigGpuInstance {
                gpu_instance_id: 3,
                compute_instance_id: 0,
                profile: "1g.5gb".into(),
                uuid: Some("MIG-x".into()),
                memory_total_bytes: None,
                memory_used_bytes: None,
                multiprocessors: None,
            }],
        });
        let kind: Kind = "nvidia.com/gpu".parse().unwrap();
        // Every node has the driver's numbers, so a real node gets as far
        // as its driver files (and there is no loader cache here).
        let err = format!(
            "{:#}",
            node_input(&cfg, &inv, None, kind.clone(), &fake).unwrap_err()
        );
        assert!(
            err.contains("gpu.ld_cache") && err.contains("no-ld.so.cache"),
            "{err}"
        );
        let sim = Simulation {
            from: tmp.path().join("a100.yaml"),
            library: tmp.path().join("libnvidia_ml.so"),
        };
        let input = node_input(&cfg, &inv, Some(&sim), kind.clone(), &fake).unwrap();
        assert_eq!(
            input.gpus.iter().map(|g| g.index).collect::<Vec<_>>(),
            [0, 1]
        );
        let slice = &input.gpus[1].mig[0];
        assert_eq!(slice.uuid.as_deref(), Some("MIG-x"));
        assert_eq!(
            slice.caps[0].path,
            Path::new("/dev/nvidia-caps/nvidia-cap30")
        );
        assert_eq!(
            slice.caps[1].host_path,
            dev.join("nvidia-caps/nvidia-cap31")
        );
        let control: Vec<&Path> = input
            .control_nodes
            .iter()
            .map(|n| n.path.as_path())
            .collect();
        assert_eq!(
            control,
            [Path::new("/dev/nvidiactl"), Path::new("/dev/nvidia-uvm")]
        );
        let spec = cdi::generate(&input);
        let names: Vec<&str> = spec.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["0", "GPU-0", "1", "GPU-1", "1:0", "MIG-x", "all"]);

        // With a real driver, numbers are checked.
        fake.0.insert(dev.join("nvidia1"), char_node(195, 7));
        let err = node_input(&cfg, &inv, None, kind.clone(), &fake)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is 195:7, but the driver's node is 195:1"),
            "{err}"
        );
        // A missing node fails whether simulated or not.
        fake.0.remove(&dev.join("nvidia0"));
        let err = format!(
            "{:#}",
            node_input(&cfg, &inv, Some(&sim), kind, &fake).unwrap_err()
        );
        assert!(
            err.contains(&dev.join("nvidia0").display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn no_gpus_is_an_error_that_points_at_discover() {
        let kind: Kind = "nvidia.com/gpu".parse().unwrap();
        let err = node_input(
            &GpuConfig::default(),
            &NodeInventory::default(),
            None,
            kind,
            &Fake(BTreeMap::new()),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("no GPUs found") && err.contains("joblet discover"),
            "{err}"
        );
    }

    #[test]
    fn simulated_nodes_mount_the_fake_library_and_say_so() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state.json");
        std::fs::write(&state, "{}").unwrap();
        let cfg = GpuConfig {
            simulate_state: Some(state.clone()),
            ..GpuConfig::default()
        };
        let sim = Simulation {
            from: tmp.path().join("a100.yaml"),
            library: tmp.path().join("libnvidia_ml.so"),
        };
        let (files, env) = sim_files(&cfg, &sim);
        let targets: Vec<String> = files
            .iter()
            .map(|f| f.container_path.display().to_string())
            .collect();
        let lib = sim_lib_dir();
        assert_eq!(
            targets,
            [
                lib.join("libnvidia-ml.so.1").display().to_string(),
                lib.join("libnvidia-ml.so").display().to_string(),
                format!("{SIM_DIR}/a100.yaml"),
                format!("{SIM_DIR}/state.json"),
            ]
        );
        assert_eq!(
            env,
            [
                "JOBLET_GPU_SIMULATED=1".to_string(),
                format!("MOCK_NVML_CONFIG={SIM_DIR}/a100.yaml"),
                format!("MOCK_NVML_STATE={SIM_DIR}/state.json"),
            ]
        );
        let spec = Spec {
            kind: "nvidia.com/gpu".into(),
            ..Spec::default()
        };
        let h = yaml_header(&spec, &cfg, Some(&sim));
        assert!(h.contains("SIMULATED GPUs") && h.ends_with("---\n"), "{h}");
        assert!(!yaml_header(&spec, &cfg, None).contains("SIMULATED"));
    }

    #[test]
    fn files_are_replaced_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("nvidia.yaml");
        std::fs::write(&path, "old").unwrap();
        write_atomically(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o644);
        // Only the spec is left in the directory.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
        let err = format!(
            "{:#}",
            write_atomically(&tmp.path().join("none/x.yaml"), b"x").unwrap_err()
        );
        assert!(err.contains("none/x.yaml"), "{err}");
    }
}
