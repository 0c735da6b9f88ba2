//! `nvmlDeviceGetFieldValues`: the `NVML_FI_DEV_*` fields exporters read (dcgm-exporter's defaults and the DCGM profile fields NVML serves).
//!
//! Each field is answered by the same query as the matching NVML function,
//! so state-file overrides apply alike. A field id outside the list, or a
//! value the description lacks, gets `NVML_ERROR_NOT_SUPPORTED` in that
//! field's `nvmlReturn`; the call itself succeeds.

use std::os::raw::c_uint;

use super::{available, pcie, power, with_gpu, Handle};
use crate::abi::{self, field, Status};

/// A field's value with its `nvmlValueType_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValue {
    U32(u32),
    U64(u64),
}

/// `NVML_FI_DEV_MEMORY_TEMP`: the state file's `memory_temperature_c`, else the description's.
pub fn memory_temperature(h: Handle) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetFieldValues", |d| {
        available(
            d.overrides
                .and_then(|o| o.memory_temperature_c)
                .or(d.gpu.memory_temperature_c),
        )
    })
}

fn nvlink_count(h: Handle) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetFieldValues", |d| {
        let links = available(d.gpu.nvlink.as_ref())?;
        u32::try_from(links.len()).map_err(|_| Status::Unknown)
    })
}

/// Answer every `(field id, scope id)`; the outer error is for the device
/// itself (bad handle, lost GPU), the inner ones per field.
pub fn field_values(
    h: Handle,
    ids: &[(c_uint, c_uint)],
) -> Result<Vec<Result<FieldValue, Status>>, Status> {
    with_gpu(h, "nvmlDeviceGetFieldValues", |_| Ok(()))?;
    Ok(ids.iter().map(|&(id, scope)| one(h, id, scope)).collect())
}

fn one(h: Handle, id: c_uint, scope: c_uint) -> Result<FieldValue, Status> {
    use super::{ecc_mode, remapped_rows, retired_pages, retired_pages_pending, total_ecc_errors};
    use FieldValue::{U32, U64};
    let ecc = |error_type, counter| total_ecc_errors(h, error_type, counter).map(U64);
    let retired = |cause| retired_pages(h, cause).map(|p| U64(p.len() as u64));
    let gpu_scope = |f: fn(Handle) -> Result<u32, Status>| {
        if scope == abi::NVML_POWER_SCOPE_GPU {
            f(h).map(U32)
        } else {
            Err(Status::NotSupported)
        }
    };
    match id {
        field::ECC_CURRENT => ecc_mode(h).map(|(c, _)| U32(c.into())),
        field::ECC_PENDING => ecc_mode(h).map(|(_, p)| U32(p.into())),
        field::ECC_SBE_VOL_TOTAL => ecc(
            abi::NVML_MEMORY_ERROR_TYPE_CORRECTED,
            abi::NVML_VOLATILE_ECC,
        ),
        field::ECC_DBE_VOL_TOTAL => ecc(
            abi::NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            abi::NVML_VOLATILE_ECC,
        ),
        field::ECC_SBE_AGG_TOTAL => ecc(
            abi::NVML_MEMORY_ERROR_TYPE_CORRECTED,
            abi::NVML_AGGREGATE_ECC,
        ),
        field::ECC_DBE_AGG_TOTAL => ecc(
            abi::NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            abi::NVML_AGGREGATE_ECC,
        ),
        field::RETIRED_SBE => {
            retired(abi::NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        }
        field::RETIRED_DBE => retired(abi::NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
        field::RETIRED_PENDING => retired_pages_pending(h).map(|p| U32(p.into())),
        field::MEMORY_TEMP => memory_temperature(h).map(U32),
        field::TOTAL_ENERGY_CONSUMPTION => power::total_energy_mj(h).map(U64),
        field::ENERGY if scope == abi::NVML_POWER_SCOPE_GPU => power::total_energy_mj(h).map(U64),
        field::NVLINK_LINK_COUNT => nvlink_count(h).map(U32),
        field::PCIE_REPLAY_COUNTER => pcie::replay_counter(h).map(|v| U64(v.into())),
        field::REMAPPED_COR => remapped_rows(h).map(|r| U32(r.0)),
        field::REMAPPED_UNC => remapped_rows(h).map(|r| U32(r.1)),
        field::REMAPPED_PENDING => remapped_rows(h).map(|r| U32(r.2.into())),
        field::REMAPPED_FAILURE => remapped_rows(h).map(|r| U32(r.3.into())),
        field::POWER_AVERAGE | field::POWER_INSTANT => gpu_scope(power::usage_mw),
        field::POWER_MIN_LIMIT => gpu_scope(|h| power::limit_constraints_mw(h).map(|c| c.0)),
        field::POWER_MAX_LIMIT => gpu_scope(|h| power::limit_constraints_mw(h).map(|c| c.1)),
        field::POWER_DEFAULT_LIMIT => gpu_scope(power::default_limit_mw),
        field::POWER_CURRENT_LIMIT => gpu_scope(power::enforced_limit_mw),
        field::POWER_REQUESTED_LIMIT => gpu_scope(power::management_limit_mw),
        _ => Err(Status::NotSupported),
    }
}
