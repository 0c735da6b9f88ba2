//! Node topology (NUMA nodes, packages, which GPU sits on which node):
//! hwloc when enabled, sysfs otherwise or when hwloc fails.

pub mod cpulist;
pub mod hwloc;
pub mod sysfs;
pub mod xml_compat;

use crate::inventory::InventoryError;
use crate::model::Topology;
use std::path::PathBuf;

/// How to discover the topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyOptions {
    /// Root of sysfs (`/sys`) for the sysfs path.
    pub sys_root: PathBuf,
    /// Ask hwloc first.
    pub hwloc: bool,
    /// Load this hwloc XML instead of probing the machine (else
    /// `HWLOC_XMLFILE`, as hwloc itself does).
    pub hwloc_xml: Option<PathBuf>,
}

/// The node's topology.
///
/// With `hwloc`, hwloc is asked first: from `hwloc_xml`, else from the
/// XML named by `HWLOC_XMLFILE`, else by probing this machine. If probing
/// fails, sysfs is read instead with a warning. An XML that cannot be
/// loaded is an error, not a fallback: the caller asked for a simulated
/// node, and this machine's sysfs would describe a different one.
pub fn discover_topology(opts: &TopologyOptions) -> Result<Topology, InventoryError> {
    if !opts.hwloc {
        return sysfs::sysfs_topology(&opts.sys_root);
    }
    let xml = opts.hwloc_xml.clone().or_else(hwloc::xml_from_env);
    match hwloc::hwloc_topology(xml.as_deref()) {
        Ok(topology) => Ok(topology),
        Err(err) if xml.is_some() => Err(err),
        Err(err) => {
            tracing::warn!(error = %err, sys_root = %opts.sys_root.display(), "hwloc failed; reading the topology from sysfs");
            sysfs::sysfs_topology(&opts.sys_root)
        }
    }
}
