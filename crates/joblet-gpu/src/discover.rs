//! One-shot discovery of a node's GPUs, as `joblet discover` and the
//! daemon's start run it: NVML first, procfs/sysfs as fallback and gap
//! filler, then topology, device majors and CUDA toolkits.
//!
//! Discovery does not decide whether a node without GPUs is an error:
//! when no backend works it returns an inventory with zero GPUs and the
//! reasons in `warnings`, and the daemon applies `gpu.enabled` /
//! `gpu.required`.

use crate::cuda::{find_toolkits, DEFAULT_CUDA_PATHS};
use crate::inventory::{BackendReport, GpuInventory, InventoryError};
use crate::majors::read_device_majors;
use crate::merge::merge_labeled;
use crate::model::{normalize_bus_id, Backend, GpuInfo, NodeInventory, Topology};
use crate::nvml::NvmlInventory;
use crate::procfs::ProcfsInventory;
use crate::topology::{discover_topology, TopologyOptions};
use std::path::PathBuf;

/// Where discovery looks. Every root is a parameter so a test (or a
/// simulated node) can point it at a temp dir or the fake NVML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveryOptions {
    /// `gpu.nvml_library`; `None` = `libnvidia-ml.so.1` through `ld.so`.
    pub nvml_library: Option<PathBuf>,
    /// Try NVML at all.
    pub use_nvml: bool,
    /// Try the procfs/sysfs backend at all (off for a simulated node, whose
    /// GPUs must not be mixed with a real driver's).
    pub use_procfs: bool,
    /// Root of procfs (`/proc`).
    pub proc_root: PathBuf,
    /// Root of sysfs (`/sys`).
    pub sys_root: PathBuf,
    /// `gpu.cuda_paths`.
    pub cuda_paths: Vec<PathBuf>,
    /// Ask hwloc for the topology (sysfs otherwise or when hwloc fails).
    pub hwloc: bool,
    /// An hwloc XML to load instead of probing (a simulated node).
    pub hwloc_xml: Option<PathBuf>,
}

impl Default for DiscoveryOptions {
    /// The real host: `/proc`, `/sys`, seed 001's CUDA paths, hwloc on.
    fn default() -> DiscoveryOptions {
        DiscoveryOptions {
            nvml_library: None,
            use_nvml: true,
            use_procfs: true,
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
            cuda_paths: DEFAULT_CUDA_PATHS.iter().map(PathBuf::from).collect(),
            hwloc: true,
            hwloc_xml: None,
        }
    }
}

/// Discover the node. Never fails for lack of GPUs or backends (see the
/// module docs); fails only when an explicitly configured `hwloc_xml`
/// cannot be loaded, since the caller asked for a node that is not there.
pub fn discover(opts: &DiscoveryOptions) -> Result<NodeInventory, InventoryError> {
    discover_keeping_nvml(opts).map(|(inventory, _)| inventory)
}

/// [`discover`], also handing back the open NVML (when it worked) so the
/// daemon can poll it and start the event thread without loading it again.
pub fn discover_keeping_nvml(
    opts: &DiscoveryOptions,
) -> Result<(NodeInventory, Option<NvmlInventory>), InventoryError> {
    let mut warnings = Vec::new();
    let (nvml, nvml_report) = nvml_backend(opts, &mut warnings);
    let procfs_report = procfs_backend(opts, nvml_report.is_some(), &mut warnings);

    let mut inventory = combine(nvml_report, procfs_report, &mut warnings);
    inventory.topology = topology(opts, &mut warnings)?;
    if let Some(topology) = &inventory.topology {
        fill_locality(&mut inventory.gpus, topology);
    }
    match read_device_majors(&opts.proc_root) {
        Ok(majors) => inventory.device_majors = majors,
        Err(e) if inventory.gpus.is_empty() => {
            tracing::debug!(error = %e, "no device majors (and no GPUs)");
        }
        Err(e) => warn(&mut warnings, format!("device majors unknown: {e}")),
    }
    let (toolkits, cuda_warnings) = find_toolkits(&opts.cuda_paths);
    inventory.cuda_toolkits = toolkits;
    for w in cuda_warnings {
        warn(&mut warnings, w);
    }
    inventory.warnings = warnings;
    Ok((inventory, nvml))
}

fn warn(warnings: &mut Vec<String>, message: String) {
    tracing::warn!("{message}");
    warnings.push(message);
}

/// Open NVML and read it; failures become warnings.
fn nvml_backend(
    opts: &DiscoveryOptions,
    warnings: &mut Vec<String>,
) -> (Option<NvmlInventory>, Option<BackendReport>) {
    if !opts.use_nvml {
        tracing::debug!("NVML disabled by configuration");
        return (None, None);
    }
    let nvml = match NvmlInventory::open(opts.nvml_library.as_deref()) {
        Ok(nvml) => nvml,
        Err(e) => {
            warn(
                warnings,
                format!("{e}; using the procfs/sysfs backend only"),
            );
            return (None, None);
        }
    };
    match nvml.discover() {
        Ok(report) => (Some(nvml), Some(report)),
        Err(e) => {
            warn(
                warnings,
                format!("{e}; using the procfs/sysfs backend only"),
            );
            (Some(nvml), None)
        }
    }
}

/// Read procfs; with NVML working, a missing driver tree is normal (a
/// simulated node) and only logged.
fn procfs_backend(
    opts: &DiscoveryOptions,
    nvml_worked: bool,
    warnings: &mut Vec<String>,
) -> Option<BackendReport> {
    if !opts.use_procfs {
        return None;
    }
    let procfs = ProcfsInventory::new(opts.proc_root.clone(), opts.sys_root.clone());
    match procfs.discover() {
        Ok(report) => Some(report),
        Err(e @ InventoryError::NoDriver { .. }) if nvml_worked => {
            tracing::debug!(error = %e, "procfs backend absent; NVML answers alone");
            None
        }
        Err(e) if nvml_worked => {
            warn(
                warnings,
                format!("procfs backend failed ({e}); NVML answers alone"),
            );
            None
        }
        Err(e) => {
            warn(warnings, format!("procfs backend failed: {e}"));
            None
        }
    }
}

/// Merge what the backends said into a node inventory (no topology yet).
fn combine(
    nvml: Option<BackendReport>,
    procfs: Option<BackendReport>,
    warnings: &mut Vec<String>,
) -> NodeInventory {
    let mut inventory = NodeInventory::default();
    match (nvml, procfs) {
        (Some(nvml), Some(procfs)) => {
            inventory.backends = vec![Backend::Nvml, Backend::Procfs];
            if let (Some(a), Some(b)) = (&nvml.driver_version, &procfs.driver_version) {
                if a != b {
                    warn(
                        warnings,
                        format!("driver version {a} (NVML) differs from {b} (procfs): a library/kernel module mismatch?"),
                    );
                }
            }
            inventory.driver_version = nvml
                .driver_version
                .clone()
                .or(procfs.driver_version.clone());
            inventory.nvml_version = nvml.nvml_version.clone();
            inventory.cuda_driver_version = nvml.cuda_driver_version;
            let (gpus, merged_warnings) = merge_labeled(nvml, procfs, ("NVML", "procfs"));
            inventory.gpus = gpus;
            warnings.extend(merged_warnings);
        }
        (Some(one), None) => adopt(&mut inventory, Backend::Nvml, one, warnings),
        (None, Some(one)) => adopt(&mut inventory, Backend::Procfs, one, warnings),
        (None, None) => {
            warn(
                warnings,
                "no GPU backend works: no GPUs reported (CPU-only unless gpu.required)".to_string(),
            );
        }
    }
    inventory
}

/// The inventory of a node where only `backend` answered.
fn adopt(
    inventory: &mut NodeInventory,
    backend: Backend,
    report: BackendReport,
    warnings: &mut Vec<String>,
) {
    inventory.backends = vec![backend];
    inventory.driver_version = report.driver_version;
    inventory.nvml_version = report.nvml_version;
    inventory.cuda_driver_version = report.cuda_driver_version;
    inventory.gpus = report.gpus;
    warnings.extend(report.warnings);
}

/// The topology; an explicit `hwloc_xml` that fails is an error, any
/// other failure a warning.
fn topology(
    opts: &DiscoveryOptions,
    warnings: &mut Vec<String>,
) -> Result<Option<Topology>, InventoryError> {
    let topo_opts = TopologyOptions {
        sys_root: opts.sys_root.clone(),
        hwloc: opts.hwloc,
        hwloc_xml: opts.hwloc_xml.clone(),
    };
    match discover_topology(&topo_opts) {
        Ok(topology) => Ok(Some(topology)),
        Err(e) if opts.hwloc && opts.hwloc_xml.is_some() => Err(e),
        Err(e) => {
            warn(warnings, format!("topology unknown: {e}"));
            Ok(None)
        }
    }
}

/// Give each GPU the NUMA node and local CPUs the topology knows for its
/// bus id, where the backends left them empty.
fn fill_locality(gpus: &mut [GpuInfo], topology: &Topology) {
    for gpu in gpus {
        let Some(bus) = normalize_bus_id(&gpu.pci_bus_id) else {
            continue;
        };
        let Some(place) = topology
            .gpu_numa
            .iter()
            .find(|l| normalize_bus_id(&l.pci_bus_id).as_deref() == Some(bus.as_str()))
        else {
            continue;
        };
        if gpu.numa_node.is_none() {
            gpu.numa_node = place.numa_node;
        }
        if gpu.local_cpus.is_none() {
            gpu.local_cpus = place.local_cpus.clone();
        }
    }
}
