//! GPU inventory for Joblet.
//!
//! One model ([`model::NodeInventory`]) filled by backends behind the
//! [`GpuInventory`] trait: NVML (nvml-wrapper, `libnvidia-ml.so.1` or the
//! configured library) and procfs/sysfs (`/proc/driver/nvidia`,
//! `/sys/bus/pci`), merged by PCI bus id. Topology comes from hwloc (which
//! honours `HWLOC_XMLFILE`) with a sysfs fallback; CUDA toolkits from their
//! `version.json` / `version.txt`. Every root the code reads is a parameter
//! so tests run against temp dirs and the project's fake `libnvidia-ml.so`.

pub mod model;

pub use model::*;
pub mod inventory;

pub use inventory::{BackendReport, GpuInventory, InventoryError};
