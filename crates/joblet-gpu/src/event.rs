//! Health events a GPU event source (the NVML event set) reports.
//!
//! Classification (which XIDs are the job's fault, what degrades a GPU)
//! is the health monitor's business, not the source's: an event carries
//! only what the driver said.

use serde::{Deserialize, Serialize};

/// One event from a GPU event source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuEvent {
    /// Normalised PCI bus id of the GPU (see [`crate::normalize_bus_id`]);
    /// empty for [`GpuEventKind::WaitFailed`], which concerns every GPU.
    pub pci_bus_id: String,
    /// `GPU-...` UUID, when known.
    pub uuid: Option<String>,
    pub kind: GpuEventKind,
    /// MIG GPU instance the event concerns; `None` = the whole GPU.
    pub gpu_instance_id: Option<u32>,
    /// MIG compute instance the event concerns; `None` = the whole GPU.
    pub compute_instance_id: Option<u32>,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuEventKind {
    /// An XID critical error with its number (e.g. 79 = fallen off the bus).
    Xid(u64),
    /// A single-bit (corrected) ECC error.
    SingleBitEcc,
    /// A double-bit (uncorrected) ECC error.
    DoubleBitEcc,
    /// Waiting for events failed with something other than a timeout.
    /// The source can no longer vouch for any GPU (the Kubernetes device
    /// plugin marks every device unhealthy on this).
    WaitFailed(String),
}

impl GpuEvent {
    /// The event for a failed wait: it concerns every GPU of the node.
    pub fn wait_failed(reason: impl Into<String>) -> GpuEvent {
        GpuEvent {
            pci_bus_id: String::new(),
            uuid: None,
            kind: GpuEventKind::WaitFailed(reason.into()),
            gpu_instance_id: None,
            compute_instance_id: None,
        }
    }
}
