//! NUMA topology and GPU locality read straight from sysfs, for machines
//! without hwloc (and for the procfs backend's per-GPU locality).

use super::cpulist::{parse_cpulist, parse_cpumask, CpuSet};
use crate::inventory::InventoryError;
use crate::model::{normalize_bus_id, GpuLocality, NumaNode, Package, Topology};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// PCI vendor id of NVIDIA.
pub const NVIDIA_VENDOR: u32 = 0x10de;
/// PCI class codes (base class + subclass) of GPUs: VGA controller and
/// 3D controller.
pub const GPU_CLASSES: [u32; 2] = [0x0300, 0x0302];

/// Where a PCI device sits, from `<sys>/bus/pci/devices/<bdf>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PciLocality {
    /// `numa_node`; `None` when missing or `-1` (no NUMA affinity).
    pub numa_node: Option<u32>,
    /// `local_cpulist`, else `local_cpus` (hex mask); `None` when missing
    /// or empty.
    pub local_cpus: Option<CpuSet>,
}

/// Read a file that may legitimately be absent.
fn read_optional(path: &Path) -> Result<Option<String>, InventoryError> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(InventoryError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn parse_error(path: &Path, reason: impl std::fmt::Display) -> InventoryError {
    InventoryError::Parse {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// Parse a cpulist file, naming the file on error.
pub fn parse_cpulist_file(text: &str, path: &Path) -> Result<CpuSet, InventoryError> {
    parse_cpulist(text).map_err(|e| parse_error(path, e))
}

/// Parse a `numa_node` file: a decimal node number, or `-1` for none.
pub fn parse_numa_node(text: &str, path: &Path) -> Result<Option<u32>, InventoryError> {
    let value: i64 = text
        .trim()
        .parse()
        .map_err(|_| parse_error(path, format!("`{}` is not a NUMA node number", text.trim())))?;
    match value {
        -1 => Ok(None),
        v => u32::try_from(v)
            .map(Some)
            .map_err(|_| parse_error(path, format!("NUMA node {v} is out of range"))),
    }
}

/// Parse a hex id file (`vendor` `0x10de`, `class` `0x030200`).
pub fn parse_hex_id(text: &str, path: &Path) -> Result<u32, InventoryError> {
    let t = text.trim();
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    if digits.is_empty() || digits.len() > 8 {
        return Err(parse_error(
            path,
            format!("`{t}` is not a hex id like `0x10de`"),
        ));
    }
    u32::from_str_radix(digits, 16)
        .map_err(|_| parse_error(path, format!("`{t}` is not a hex id like `0x10de`")))
}

/// `MemTotal` of a `node*/meminfo` file (`Node 0 MemTotal:  129839104 kB`),
/// in bytes; `None` when the file has no such line.
pub fn parse_node_meminfo(text: &str, path: &Path) -> Result<Option<u64>, InventoryError> {
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        if !key.trim_end().ends_with("MemTotal") {
            continue;
        }
        let mut words = value.split_whitespace();
        let bad = || {
            parse_error(
                path,
                format!("`{}`: expected `MemTotal: <n> kB`", line.trim()),
            )
        };
        let kib: u64 = words.next().ok_or_else(bad)?.parse().map_err(|_| bad())?;
        if words.next() != Some("kB") || words.next().is_some() {
            return Err(bad());
        }
        return kib.checked_mul(1024).map(Some).ok_or_else(bad);
    }
    Ok(None)
}

/// Locality of one PCI device (`bus_id` normalised).
pub fn read_pci_locality(sys_root: &Path, bus_id: &str) -> Result<PciLocality, InventoryError> {
    let dir = sys_root.join("bus/pci/devices").join(bus_id);
    let numa_path = dir.join("numa_node");
    let numa_node = match read_optional(&numa_path)? {
        Some(text) => parse_numa_node(&text, &numa_path)?,
        None => None,
    };
    let list_path = dir.join("local_cpulist");
    let mask_path = dir.join("local_cpus");
    let local_cpus = if let Some(text) = read_optional(&list_path)? {
        Some(parse_cpulist_file(&text, &list_path)?)
    } else if let Some(text) = read_optional(&mask_path)? {
        Some(parse_cpumask(&text).map_err(|e| parse_error(&mask_path, e))?)
    } else {
        None
    };
    Ok(PciLocality {
        numa_node,
        local_cpus: local_cpus.filter(|c| !c.is_empty()),
    })
}

/// Entries of `dir` named `<prefix><number>`, sorted by number; an absent
/// directory has none.
fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<(u32, PathBuf)>, InventoryError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(InventoryError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| InventoryError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name();
        let number = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u32>().ok());
        if let Some(number) = number {
            out.push((number, entry.path()));
        }
    }
    out.sort_by_key(|(n, _)| *n);
    Ok(out)
}

/// `<sys>/devices/system/cpu/online`, if the file exists.
fn read_online_cpus(sys_root: &Path) -> Result<Option<CpuSet>, InventoryError> {
    let path = sys_root.join("devices/system/cpu/online");
    match read_optional(&path)? {
        Some(text) => parse_cpulist_file(&text, &path).map(Some),
        None => Ok(None),
    }
}

/// NUMA nodes from `<sys>/devices/system/node/node*`, their CPUs limited
/// to the online ones (some kernels list offline SMT threads too); with
/// no node directories, one node 0 holding every online CPU.
fn read_numa_nodes(sys_root: &Path) -> Result<Vec<(NumaNode, CpuSet)>, InventoryError> {
    let online = read_online_cpus(sys_root)?;
    let mut nodes = Vec::new();
    for (os_index, dir) in numbered_entries(&sys_root.join("devices/system/node"), "node")? {
        let cpulist_path = dir.join("cpulist");
        let text = std::fs::read(&cpulist_path).map_err(|source| InventoryError::Read {
            path: cpulist_path.clone(),
            source,
        })?;
        let mut cpus = parse_cpulist_file(&String::from_utf8_lossy(&text), &cpulist_path)?;
        if let Some(online) = &online {
            cpus = cpus.intersection(online);
        }
        let meminfo_path = dir.join("meminfo");
        let memory_bytes = match read_optional(&meminfo_path)? {
            Some(text) => parse_node_meminfo(&text, &meminfo_path)?,
            None => None,
        };
        nodes.push((
            NumaNode {
                os_index,
                cpus: cpus.to_string(),
                memory_bytes,
            },
            cpus,
        ));
    }
    if nodes.is_empty() {
        let cpus = online.ok_or_else(|| InventoryError::Read {
            path: sys_root.join("devices/system/cpu/online"),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        })?;
        nodes.push((
            NumaNode {
                os_index: 0,
                cpus: cpus.to_string(),
                memory_bytes: None,
            },
            cpus,
        ));
    }
    Ok(nodes)
}

/// Packages from each CPU's `topology/physical_package_id`, with the NUMA
/// nodes whose CPUs they hold. CPU-less (memory-only) nodes belong to no
/// package here.
fn read_packages(
    sys_root: &Path,
    nodes: &[(NumaNode, CpuSet)],
) -> Result<Vec<Package>, InventoryError> {
    let mut package_cpus: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (cpu, dir) in numbered_entries(&sys_root.join("devices/system/cpu"), "cpu")? {
        let path = dir.join("topology/physical_package_id");
        let Some(text) = read_optional(&path)? else {
            continue; // offline CPU: no topology directory
        };
        let id: i64 = text
            .trim()
            .parse()
            .map_err(|_| parse_error(&path, format!("`{}` is not a package id", text.trim())))?;
        // -1: the architecture does not say.
        if let Ok(id) = u32::try_from(id) {
            package_cpus.entry(id).or_default().push(cpu);
        }
    }
    Ok(package_cpus
        .into_iter()
        .map(|(os_index, cpus)| {
            let cpus = CpuSet::from_cpus(cpus);
            Package {
                os_index,
                numa_nodes: nodes
                    .iter()
                    .filter(|(_, node_cpus)| node_cpus.intersects(&cpus))
                    .map(|(node, _)| node.os_index)
                    .collect(),
            }
        })
        .collect())
}

/// The NUMA node a device with these local CPUs sits on, when sysfs does
/// not say: the one node whose CPUs contain them all (as hwloc places I/O
/// devices by locality).
fn node_by_cpus(nodes: &[(NumaNode, CpuSet)], local: &CpuSet) -> Option<u32> {
    let mut holders = nodes
        .iter()
        .filter(|(_, cpus)| !local.is_empty() && cpus.is_superset(local));
    match (holders.next(), holders.next()) {
        (Some((node, _)), None) => Some(node.os_index),
        _ => None,
    }
}

/// NVIDIA GPUs (vendor 0x10de, class VGA or 3D) under
/// `<sys>/bus/pci/devices`. A device without a readable `vendor` file is
/// not claimed as NVIDIA.
fn read_gpu_localities(
    sys_root: &Path,
    nodes: &[(NumaNode, CpuSet)],
) -> Result<Vec<GpuLocality>, InventoryError> {
    let dir = sys_root.join("bus/pci/devices");
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(InventoryError::Read { path: dir, source }),
    };
    let mut gpus = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| InventoryError::Read {
            path: dir.clone(),
            source,
        })?;
        let Some(bus_id) = entry.file_name().to_str().and_then(normalize_bus_id) else {
            continue;
        };
        let dev = entry.path();
        let vendor_path = dev.join("vendor");
        let Some(vendor) = read_optional(&vendor_path)? else {
            continue;
        };
        if parse_hex_id(&vendor, &vendor_path)? != NVIDIA_VENDOR {
            continue;
        }
        let class_path = dev.join("class");
        let Some(class) = read_optional(&class_path)? else {
            continue;
        };
        if !GPU_CLASSES.contains(&(parse_hex_id(&class, &class_path)? >> 8)) {
            continue;
        }
        let locality = read_pci_locality(sys_root, &bus_id)?;
        let numa_node = locality.numa_node.or_else(|| {
            locality
                .local_cpus
                .as_ref()
                .and_then(|cpus| node_by_cpus(nodes, cpus))
        });
        gpus.push(GpuLocality {
            pci_bus_id: bus_id,
            numa_node,
            local_cpus: locality.local_cpus.map(|c| c.to_string()),
        });
    }
    gpus.sort_by(|a, b| a.pci_bus_id.cmp(&b.pci_bus_id));
    Ok(gpus)
}

/// The node's topology from sysfs alone (source `sysfs`).
pub fn sysfs_topology(sys_root: &Path) -> Result<Topology, InventoryError> {
    let nodes = read_numa_nodes(sys_root)?;
    let packages = read_packages(sys_root, &nodes)?;
    let gpu_numa = read_gpu_localities(sys_root, &nodes)?;
    Ok(Topology {
        source: "sysfs".to_string(),
        numa_nodes: nodes.into_iter().map(|(node, _)| node).collect(),
        packages,
        gpu_numa,
    })
}
