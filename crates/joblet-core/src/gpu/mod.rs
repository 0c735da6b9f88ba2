//! GPUs as the core sees them: the GPU state machine ([`state`]), what an
//! XID means ([`xid`]) and the health policy that turns what the monitor
//! observed into state transitions ([`pool`]). Pure: the daemon feeds
//! observations and admin commands in and persists the transitions that
//! come out.

pub mod pool;
pub mod state;
pub mod xid;

pub use pool::{
    AdminAction, AdminError, AllocError, GpuEntry, GpuObservation, GpuPool, GpuUpdate, Observed,
};
pub use state::{GpuState, GpuTransitionError, UnknownGpuState};
pub use xid::{classify_xid, XidClass};
