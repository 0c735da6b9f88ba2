//! The daemon's wall clock, in the core's unit.

use joblet_core::UnixMillis;

/// Now, in milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> UnixMillis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
