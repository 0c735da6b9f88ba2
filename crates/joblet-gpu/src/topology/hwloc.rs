//! NUMA topology and GPU locality from hwloc (hwlocality, safe API only),
//! from this machine or from a topology XML (`lstopo file.xml`).
//!
//! `HWLOC_XMLFILE` is honoured as hwloc itself does (but read here, so
//! that a newer-format capture can be rewritten first and the source is
//! named); a real machine's capture can drive a simulated node. hwloc
//! still reads `HWLOC_FSROOT` itself.

use super::cpulist::CpuSet;
use super::sysfs::{GPU_CLASSES, NVIDIA_VENDOR};
use super::xml_compat::{downgrade_v3_to_v2, xml_format_major};
use crate::inventory::InventoryError;
use crate::model::{normalize_bus_id, GpuLocality, NumaNode, Package, Topology};
use hwlocality::bitmap::{Bitmap, SpecializedBitmapRef};
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::TypeFilter;
use std::path::{Path, PathBuf};

/// Environment variable hwloc reads a topology XML from.
pub const HWLOC_XMLFILE_ENV: &str = "HWLOC_XMLFILE";

/// The XML hwloc would load on its own: `HWLOC_XMLFILE` when set and
/// not empty.
pub fn xml_from_env() -> Option<PathBuf> {
    std::env::var_os(HWLOC_XMLFILE_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Build a topology with hwloc, keeping every PCI device (the default
/// filter drops them, and with them the GPUs). `xml` (else
/// `HWLOC_XMLFILE`): load this topology XML instead of probing the
/// machine; hwloc 3.x XML is rewritten as 2.x when the hwloc library here
/// is 2.x.
pub fn hwloc_topology(xml: Option<&Path>) -> Result<Topology, InventoryError> {
    let xml = xml.map(Path::to_path_buf).or_else(xml_from_env);
    let xml = xml.as_deref();
    let fail = |reason: String| InventoryError::Hwloc { reason };
    let mut builder = hwlocality::Topology::builder();
    if let Some(path) = xml {
        let text = load_xml(path)?;
        builder = builder
            .from_xml(&text)
            .map_err(|e| fail(format!("hwloc rejects the XML {}: {e}", path.display())))?;
    }
    let topology = builder
        .with_type_filter(ObjectType::PCIDevice, TypeFilter::KeepAll)
        .map_err(|e| fail(format!("cannot keep PCI devices: {e}")))?
        .build()
        .map_err(|e| match xml {
            Some(path) => fail(format!(
                "cannot load the topology XML {}: {e} (set HWLOC_XML_VERBOSE=1 to see why)",
                path.display()
            )),
            None => fail(format!("cannot build the topology of this machine: {e}")),
        })?;

    let source = match xml {
        Some(path) => format!("hwloc-xml:{}", path.display()),
        None => "hwloc".to_string(),
    };

    let mut numa_nodes: Vec<NumaNode> = topology
        .objects_with_type(ObjectType::NUMANode)
        .map(|node| NumaNode {
            os_index: os_index(node),
            cpus: node
                .cpuset()
                .map(|c| cpulist(c.as_bitmap_ref()))
                .unwrap_or_default(),
            memory_bytes: match node.attributes() {
                Some(ObjectAttributes::NUMANode(attr)) => attr.local_memory().map(|m| m.get()),
                _ => None,
            },
        })
        .collect();

    let mut packages: Vec<Package> = topology
        .objects_with_type(ObjectType::Package)
        .map(|package| Package {
            os_index: os_index(package),
            numa_nodes: package
                .nodeset()
                .map(|n| indices(n.as_bitmap_ref()))
                .unwrap_or_default(),
        })
        .collect();

    // hwloc lists objects in logical (tree) order; report them by number
    // as sysfs does.
    numa_nodes.sort_by_key(|n| n.os_index);
    packages.sort_by_key(|p| p.os_index);

    let mut gpu_numa: Vec<GpuLocality> = topology
        .pci_devices()
        .filter_map(|dev| gpu_locality(dev, &numa_nodes))
        .collect();
    gpu_numa.sort_by(|a, b| a.pci_bus_id.cmp(&b.pci_bus_id));

    Ok(Topology {
        source,
        numa_nodes,
        packages,
        gpu_numa,
    })
}

/// An NVIDIA GPU's bus id and the locality of its nearest non-I/O
/// ancestor; `None` for any other PCI device.
fn gpu_locality(dev: &TopologyObject, numa_nodes: &[NumaNode]) -> Option<GpuLocality> {
    let Some(ObjectAttributes::PCIDevice(pci)) = dev.attributes() else {
        return None;
    };
    if u32::from(pci.vendor_id()) != NVIDIA_VENDOR
        || !GPU_CLASSES.contains(&u32::from(pci.class_id()))
    {
        return None;
    }
    let pci_bus_id = normalize_bus_id(&format!(
        "{:x}:{:02x}:{:02x}.{:x}",
        pci.domain(),
        pci.bus_id(),
        pci.bus_device(),
        pci.function()
    ))?;
    let parent = dev.first_non_io_ancestor();
    let local_cpus = parent
        .and_then(|p| p.cpuset())
        .map(|c| cpulist(c.as_bitmap_ref()))
        .filter(|c| !c.is_empty());
    let nodes = parent
        .and_then(|p| p.nodeset())
        .map(|n| indices(n.as_bitmap_ref()))
        .unwrap_or_default();
    Some(GpuLocality {
        pci_bus_id,
        numa_node: pick_node(&nodes, numa_nodes),
        local_cpus,
    })
}

/// The NUMA node of a device whose locality holds `nodes`: the only one,
/// or else the only one of them with CPUs (memory-only nodes such as GPU
/// memory exposed as NUMA are not where the device's CPUs are).
fn pick_node(nodes: &[u32], numa_nodes: &[NumaNode]) -> Option<u32> {
    if let [only] = nodes {
        return Some(*only);
    }
    let mut with_cpus = nodes.iter().filter(|n| {
        numa_nodes
            .iter()
            .any(|node| node.os_index == **n && !node.cpus.is_empty())
    });
    match (with_cpus.next(), with_cpus.next()) {
        (Some(node), None) => Some(*node),
        _ => None,
    }
}

/// Read a topology XML, rewritten for this hwloc when it is a newer
/// format than the library reads.
fn load_xml(path: &Path) -> Result<String, InventoryError> {
    let bytes = std::fs::read(path).map_err(|source| InventoryError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|_| InventoryError::Parse {
        path: path.to_path_buf(),
        reason: "not UTF-8; is this an hwloc topology XML?".to_string(),
    })?;
    let not_topology = |e: super::xml_compat::XmlCompatError| InventoryError::Parse {
        path: path.to_path_buf(),
        reason: format!("{e}; export one with `lstopo --of xml FILE`"),
    };
    let file_major = xml_format_major(&text).map_err(not_topology)?;
    let library_major = hwlocality::hwloc_api_version() >> 16;
    match file_major {
        Some(major) if major >= 3 && library_major < 3 => {
            tracing::debug!(path = %path.display(), "rewriting hwloc 3.x XML for hwloc 2.x");
            downgrade_v3_to_v2(&text).map_err(not_topology)
        }
        _ => Ok(text),
    }
}

fn os_index(obj: &TopologyObject) -> u32 {
    obj.os_index()
        .or(Some(obj.logical_index()))
        .and_then(|i| u32::try_from(i).ok())
        .unwrap_or(u32::MAX)
}

/// Set members of a finite bitmap (object cpusets and nodesets are).
fn indices(set: &Bitmap) -> Vec<u32> {
    if set.last_set().is_none() {
        // Empty or infinite: neither names concrete CPUs or nodes.
        return Vec::new();
    }
    set.iter_set()
        .filter_map(|i| u32::try_from(usize::from(i)).ok())
        .collect()
}

fn cpulist(set: &Bitmap) -> String {
    CpuSet::from_cpus(indices(set)).to_string()
}
