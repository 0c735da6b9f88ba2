//! NVML event sets fed by the state file's append-only `events` list.

use std::os::raw::{c_uint, c_void};
use std::time::{Duration, Instant};

use crate::abi::{self, Status};
use crate::diag;
use crate::handles::{decode_event_set, encode_device, encode_event_set, Target};
use crate::queries::supported_events_of;
use crate::runtime::{self, EventSetState, Runtime};
use crate::state::{EventKind, InjectedEvent};

/// How often a waiting caller re-reads the state file.
/// (The real driver blocks in the kernel; this polling is the fake's own
/// cost, kept low so a simulated node idles cheaply.)
const POLL: Duration = Duration::from_millis(50);

/// A new event set sees only events injected after it was created, like
/// the real driver (which reports events as they happen, never history):
/// a daemon that restarts must not be told about last week's XID again.
pub fn create() -> Result<*mut c_void, Status> {
    runtime::with(|rt| {
        let id = rt.next_event_set;
        rt.next_event_set = rt.next_event_set.checked_add(1).ok_or(Status::Unknown)?;
        rt.refresh_state();
        let cursor = rt.state().events.len();
        rt.event_sets.insert(
            id,
            EventSetState {
                cursor,
                ..EventSetState::default()
            },
        );
        Ok(encode_event_set(id))
    })
}

pub fn free(set: *mut c_void) -> Result<(), Status> {
    runtime::with(|rt| {
        let id = decode_event_set(set).ok_or(Status::InvalidArgument)?;
        rt.event_sets
            .remove(&id)
            .map(|_| ())
            .ok_or(Status::InvalidArgument)
    })
}

pub fn register(device: *mut c_void, mask: u64, set: *mut c_void) -> Result<(), Status> {
    const F: &str = "nvmlDeviceRegisterEvents";
    runtime::with(|rt| {
        let id = decode_event_set(set).ok_or(Status::InvalidArgument)?;
        if !rt.event_sets.contains_key(&id) {
            return Err(Status::InvalidArgument);
        }
        let d = rt.resolve(device)?;
        d.whole_gpu(F)?;
        let supported = supported_events_of(d.gpu);
        if mask & !supported != 0 {
            diag::unmodelled(
                F,
                &format!(
                    "event types {:#x} on GPU {} (only XID and, with ECC enabled, ECC events are simulated)",
                    mask & !supported,
                    d.index
                ),
            );
            return Err(Status::NotSupported);
        }
        let pos = d.pos;
        let entry = rt.event_sets.get_mut(&id).ok_or(Status::InvalidArgument)?;
        *entry.registered.entry(pos).or_insert(0) |= mask;
        Ok(())
    })
}

fn type_bit(kind: EventKind) -> u64 {
    match kind {
        EventKind::Xid => abi::EVENT_XID_CRITICAL,
        EventKind::SingleBitEcc => abi::EVENT_SINGLE_BIT_ECC,
        EventKind::DoubleBitEcc => abi::EVENT_DOUBLE_BIT_ECC,
    }
}

/// The next injected event for set `id`, advancing its cursor past
/// everything looked at.
fn next_event(rt: &mut Runtime, id: u32) -> Result<Option<abi::EventData>, Status> {
    rt.refresh_state();
    let events: &[InjectedEvent] = &rt.state().events;
    let set = rt.event_sets.get(&id).ok_or(Status::InvalidArgument)?;
    let mut cursor = set.cursor;
    let mut found = None;
    while cursor < events.len() {
        let e = &events[cursor];
        cursor += 1;
        let pos = e.gpu as usize;
        let bit = type_bit(e.kind);
        if set.registered.get(&pos).is_some_and(|m| m & bit != 0) {
            found = Some(abi::EventData {
                device: encode_device(Target::Gpu { pos }),
                event_type: bit,
                event_data: if e.kind == EventKind::Xid {
                    e.data.unwrap_or(0)
                } else {
                    0
                },
                gpu_instance_id: e.gpu_instance_id.unwrap_or(abi::WHOLE_GPU_INSTANCE),
                compute_instance_id: e.compute_instance_id.unwrap_or(abi::WHOLE_GPU_INSTANCE),
            });
            break;
        }
    }
    if let Some(set) = rt.event_sets.get_mut(&id) {
        set.cursor = cursor;
    }
    Ok(found)
}

/// `nvmlEventSetWait_v2`: deliver the next event, polling the state file
/// until `timeout_ms` has passed.
pub fn wait(set: *mut c_void, timeout_ms: c_uint) -> Result<abi::EventData, Status> {
    let deadline = Instant::now() + Duration::from_millis(u64::from(timeout_ms));
    loop {
        let found = runtime::with(|rt| {
            let id = decode_event_set(set).ok_or(Status::InvalidArgument)?;
            next_event(rt, id)
        })?;
        if let Some(event) = found {
            return Ok(event);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Status::Timeout);
        }
        std::thread::sleep(POLL.min(deadline - now));
    }
}
