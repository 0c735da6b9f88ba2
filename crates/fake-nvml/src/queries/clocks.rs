//! Clocks in MHz: current (with state-file overrides), maximum, application targets and defaults, customer boost.

use std::os::raw::c_uint;

use super::{available, with_gpu, Handle};
use crate::abi::{self, Status};
use crate::diag;
use crate::model::ClockSet;

/// `nvmlDeviceGetClock(type, id)`; the other clock functions are this
/// with a fixed id.
pub fn clock(h: Handle, clock_type: c_uint, id: c_uint, function: &str) -> Result<u32, Status> {
    with_gpu(h, function, |d| {
        let c = &d.gpu.clocks;
        let ov = d.overrides;
        let set = match id {
            abi::NVML_CLOCK_ID_CURRENT => {
                let mut cur = c.current;
                if let Some(o) = ov {
                    cur.graphics = o.graphics_clock_mhz.or(cur.graphics);
                    cur.sm = o.sm_clock_mhz.or(cur.sm);
                    cur.memory = o.mem_clock_mhz.or(cur.memory);
                }
                cur
            }
            abi::NVML_CLOCK_ID_APP_CLOCK_TARGET => applications(c.applications),
            abi::NVML_CLOCK_ID_APP_CLOCK_DEFAULT => applications(c.default_applications),
            abi::NVML_CLOCK_ID_CUSTOMER_BOOST_MAX => c.customer_boost_max,
            other => {
                diag::unmodelled(function, &format!("clock id {other}"));
                return Err(Status::InvalidArgument);
            }
        };
        available(pick(&set, clock_type)?)
    })
}

/// Application clocks exist for graphics and memory; NVML reports the SM
/// application clock as the graphics one.
fn applications(set: ClockSet) -> ClockSet {
    ClockSet {
        sm: set.sm.or(set.graphics),
        ..set
    }
}

fn pick(set: &ClockSet, clock_type: c_uint) -> Result<Option<u32>, Status> {
    match clock_type {
        abi::NVML_CLOCK_GRAPHICS => Ok(set.graphics),
        abi::NVML_CLOCK_SM => Ok(set.sm),
        abi::NVML_CLOCK_MEM => Ok(set.memory),
        abi::NVML_CLOCK_VIDEO => Ok(set.video),
        _ => Err(Status::InvalidArgument),
    }
}

pub fn max_clock(h: Handle, clock_type: c_uint) -> Result<u32, Status> {
    with_gpu(h, "nvmlDeviceGetMaxClockInfo", |d| {
        available(pick(&d.gpu.clocks.max, clock_type)?)
    })
}
