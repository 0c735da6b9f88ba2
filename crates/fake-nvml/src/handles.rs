//! Opaque handle values: device/MIG handles and event-set handles are tagged integers, never dereferenced.
//!
//! A handle names a GPU by its position in the description, so it stays
//! valid across re-initialisation and never points at freed memory; the
//! tag rejects foreign or stale pointer values.

use std::os::raw::c_void;

const DEVICE_TAG: usize = 0x7e57_0000_0000;
const EVENT_SET_TAG: usize = 0x7e58_0000_0000;
const TAG_MASK: usize = 0xffff_0000_0000;

/// What a device handle names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A whole GPU at this position of `Node::gpus`.
    Gpu { pos: usize },
    /// MIG device in slot `index` of the GPU at `pos`.
    Mig { pos: usize, index: u32 },
}

impl Target {
    pub fn pos(self) -> usize {
        match self {
            Target::Gpu { pos } | Target::Mig { pos, .. } => pos,
        }
    }
}

/// Largest GPU position a handle can carry.
const MAX_POS: usize = 0xff_fffe;

pub fn encode_device(target: Target) -> *mut c_void {
    let (pos, slot) = match target {
        Target::Gpu { pos } => (pos, 0usize),
        Target::Mig { pos, index } => (pos, (index as usize & 0xff) + 1),
    };
    let value = DEVICE_TAG | ((pos.min(MAX_POS) + 1) << 8) | slot;
    std::ptr::without_provenance_mut(value)
}

pub fn decode_device(handle: *mut c_void) -> Option<Target> {
    let value = handle.addr();
    if value & TAG_MASK != DEVICE_TAG {
        return None;
    }
    let pos = ((value & !TAG_MASK) >> 8).checked_sub(1)?;
    match value & 0xff {
        0 => Some(Target::Gpu { pos }),
        slot => Some(Target::Mig {
            pos,
            index: (slot - 1) as u32,
        }),
    }
}

pub fn encode_event_set(id: u32) -> *mut c_void {
    std::ptr::without_provenance_mut(EVENT_SET_TAG | id as usize)
}

pub fn decode_event_set(handle: *mut c_void) -> Option<u32> {
    let value = handle.addr();
    if value & TAG_MASK != EVENT_SET_TAG {
        return None;
    }
    u32::try_from(value & !TAG_MASK).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_reject_foreign_values() {
        for t in [
            Target::Gpu { pos: 0 },
            Target::Gpu { pos: 7 },
            Target::Mig { pos: 3, index: 0 },
            Target::Mig { pos: 3, index: 6 },
        ] {
            assert_eq!(decode_device(encode_device(t)), Some(t));
        }
        assert_eq!(decode_device(std::ptr::null_mut()), None);
        assert_eq!(decode_device(encode_event_set(1)), None);
        assert_eq!(decode_event_set(encode_event_set(42)), Some(42));
        assert_eq!(
            decode_event_set(encode_device(Target::Gpu { pos: 0 })),
            None
        );
        let mut x = 0u8;
        assert_eq!(decode_device((&raw mut x).cast()), None);
    }
}
