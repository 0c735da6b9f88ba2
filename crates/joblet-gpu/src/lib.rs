//! GPU inventory for Joblet.
//!
//! One model ([`model::NodeInventory`]) filled by backends behind the
//! [`GpuInventory`] trait: NVML ([`nvml`], nvml-wrapper, `libnvidia-ml.so.1`
//! or the configured library) and procfs/sysfs ([`procfs`],
//! `/proc/driver/nvidia`, `/sys/bus/pci`), merged by PCI bus id ([`merge`]).
//! Topology comes from hwloc (which honours `HWLOC_XMLFILE`) with a sysfs
//! fallback ([`topology`]); CUDA toolkits from their `version.json` /
//! `version.txt` ([`cuda`]); device majors from `/proc/devices` ([`majors`]).
//! [`discover`] puts them together; [`nvml::events`] is the health-event
//! source ([`event`]). [`exec`] decides what a GPU job gets when it runs:
//! driver capabilities, driver files via the ld.so cache, the visible
//! GPUs within its allocation, its environment; [`cuda::select_toolkit`]
//! picks its CUDA toolkit.
//!
//! Every root the code reads is a parameter so tests run against temp dirs
//! and the project's fake `libnvidia-ml.so`. This crate reports facts only:
//! what a fact means for a GPU's state is `joblet_core::gpu`'s business. It
//! must not depend on the daemon, the store or any async runtime.

pub mod cuda;
pub mod discover;
pub mod event;
pub mod exec;
pub mod inventory;
pub mod majors;
pub mod merge;
pub mod model;
pub mod nvml;
pub mod procfs;
pub mod topology;

pub use event::{GpuEvent, GpuEventKind};
pub use exec::{
    DriverCapabilities, DriverCapability, DriverFiles, DriverLib, ExecError, GpuEnv, GpuEnvInput,
    JobGpu, LdCacheEntry, MpsSettings, SharingMode, VisibleRequest,
};
pub use inventory::{BackendReport, GpuInventory, InventoryError};
pub use model::*;
