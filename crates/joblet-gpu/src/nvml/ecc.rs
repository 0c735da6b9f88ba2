//! ECC mode, error counters, retired pages and remapped rows of one GPU.

use super::ffi;
use super::query::Answers;
use crate::model::Ecc;
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError, RetirementCause};
use nvml_wrapper::{Device, Nvml};

/// Read everything ECC-related NVML knows about `device`.
pub(crate) fn read_ecc(nvml: &Nvml, device: &Device<'_>, answers: &mut Answers) -> Ecc {
    let enabled = answers
        .get("nvmlDeviceGetEccMode", || device.is_ecc_enabled())
        .map(|m| m.currently_enabled);
    let mut total =
        |call, kind, counter| answers.get(call, || device.total_ecc_errors(kind, counter));
    let volatile_corrected = total(
        "nvmlDeviceGetTotalEccErrors(corrected, volatile)",
        MemoryError::Corrected,
        EccCounter::Volatile,
    );
    let volatile_uncorrected = total(
        "nvmlDeviceGetTotalEccErrors(uncorrected, volatile)",
        MemoryError::Uncorrected,
        EccCounter::Volatile,
    );
    let aggregate_corrected = total(
        "nvmlDeviceGetTotalEccErrors(corrected, aggregate)",
        MemoryError::Corrected,
        EccCounter::Aggregate,
    );
    let aggregate_uncorrected = total(
        "nvmlDeviceGetTotalEccErrors(uncorrected, aggregate)",
        MemoryError::Uncorrected,
        EccCounter::Aggregate,
    );
    let single = answers.get("nvmlDeviceGetRetiredPages_v2(single-bit)", || {
        device.retired_pages(RetirementCause::MultipleSingleBitEccErrors)
    });
    let double = answers.get("nvmlDeviceGetRetiredPages_v2(double-bit)", || {
        device.retired_pages(RetirementCause::DoubleBitEccError)
    });
    // Only a sum of both causes is a count; half of it would be a guess.
    let retired_pages = match (single, double) {
        (Some(s), Some(d)) => Some(s.len() as u64 + d.len() as u64),
        _ => None,
    };
    let retired_pages_pending = answers.get("nvmlDeviceGetRetiredPagesPendingStatus", || {
        device.are_pages_pending_retired()
    });
    let remapped = answers.get("nvmlDeviceGetRemappedRows", || {
        ffi::remapped_rows(nvml, device)
    });
    Ecc {
        enabled,
        volatile_corrected,
        volatile_uncorrected,
        aggregate_corrected,
        aggregate_uncorrected,
        retired_pages,
        retired_pages_pending,
        remapped_rows_uncorrectable: remapped.map(|r| u64::from(r.uncorrectable)),
        remapped_rows_pending: remapped.map(|r| r.pending),
        remapped_rows_failure: remapped.map(|r| r.failure),
    }
}
