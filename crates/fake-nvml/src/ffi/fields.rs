//! Export of `nvmlDeviceGetFieldValues`.

use std::os::raw::c_int;

use super::{call_initialized, NvmlReturn};
use crate::abi::{self, NvmlDevice, Status};
use crate::queries::fields::{self, FieldValue};
use crate::queries::processes::now_us;

/// Fill each `nvmlFieldValue_t` whose `fieldId` (and `scopeId`) the caller
/// set: value, type, timestamp and a per-field `nvmlReturn`.
///
/// # Safety
/// `values` must be NULL or readable and writable for `values_count` elements.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    device: NvmlDevice,
    values_count: c_int,
    values: *mut abi::FieldValue,
) -> NvmlReturn {
    call_initialized(|| {
        let n = usize::try_from(values_count).map_err(|_| Status::InvalidArgument)?;
        if values.is_null() {
            return Err(Status::InvalidArgument);
        }
        let ids: Vec<_> = (0..n)
            .map(|i| {
                // SAFETY: i < values_count, readable per the contract.
                let v = unsafe { values.add(i).read_unaligned() };
                (v.field_id, v.scope_id)
            })
            .collect();
        let results = fields::field_values(device, &ids)?;
        let timestamp = i64::try_from(now_us()).unwrap_or(i64::MAX);
        for (i, ((field_id, scope_id), result)) in ids.into_iter().zip(results).enumerate() {
            let (value_type, nvml_return, value) = match result {
                Ok(FieldValue::U32(v)) => (
                    abi::NVML_VALUE_TYPE_UNSIGNED_INT,
                    abi::NVML_SUCCESS,
                    uint_value(v),
                ),
                Ok(FieldValue::U64(v)) => (
                    abi::NVML_VALUE_TYPE_UNSIGNED_LONG_LONG,
                    abi::NVML_SUCCESS,
                    abi::Value { ull_val: v },
                ),
                Err(status) => (0, status as NvmlReturn, abi::Value { ull_val: 0 }),
            };
            let out = abi::FieldValue {
                field_id,
                scope_id,
                timestamp,
                latency_usec: 0,
                value_type,
                nvml_return,
                value,
            };
            // SAFETY: i < values_count, writable per the contract.
            unsafe { values.add(i).write_unaligned(out) }
        }
        Ok(())
    })
}

/// A `u32` as the union's `uiVal`, the other bytes zeroed.
fn uint_value(v: u32) -> abi::Value {
    let mut value = abi::Value { ull_val: 0 };
    value.ui_val = v;
    value
}
