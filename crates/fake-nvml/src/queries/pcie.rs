//! PCIe link generation and width, throughput (KB/s) and the replay counter.

use std::os::raw::c_uint;

use super::{available, with_gpu, Handle};
use crate::abi::{self, Status};
use crate::model::Pcie;

fn field(h: Handle, function: &str, f: impl FnOnce(&Pcie) -> Option<u32>) -> Result<u32, Status> {
    with_gpu(h, function, |d| available(f(&d.gpu.pcie)))
}

pub fn link_gen_current(h: Handle) -> Result<u32, Status> {
    field(h, "nvmlDeviceGetCurrPcieLinkGeneration", |p| p.gen_current)
}

pub fn link_gen_max(h: Handle) -> Result<u32, Status> {
    field(h, "nvmlDeviceGetMaxPcieLinkGeneration", |p| p.gen_max)
}

pub fn link_width_current(h: Handle) -> Result<u32, Status> {
    field(h, "nvmlDeviceGetCurrPcieLinkWidth", |p| p.width_current)
}

pub fn link_width_max(h: Handle) -> Result<u32, Status> {
    field(h, "nvmlDeviceGetMaxPcieLinkWidth", |p| p.width_max)
}

/// `nvmlDeviceGetPcieReplayCounter`, with the state file's `pcie_replay_counter`.
pub fn replay_counter(h: Handle) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetPcieReplayCounter", |d| {
        available(
            d.overrides
                .and_then(|o| o.pcie_replay_counter)
                .or(d.gpu.pcie.replay_counter),
        )
    })
}

/// `nvmlDeviceGetPcieThroughput` in KB/s.
pub fn throughput_kbps(h: Handle, counter: c_uint) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetPcieThroughput", |d| match counter {
        abi::NVML_PCIE_UTIL_TX_BYTES => available(d.gpu.pcie.tx_kbps),
        abi::NVML_PCIE_UTIL_RX_BYTES => available(d.gpu.pcie.rx_kbps),
        _ => Err(Status::InvalidArgument),
    })
}
