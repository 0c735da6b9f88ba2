//! Conversions between the wire types ([`crate::pb`]) and the domain types
//! of [`joblet_core`], one module per area: job requests and uploads
//! ([`request`]), job states and transitions ([`state`]), job records as
//! status and list report them ([`job`]), log events ([`logs`]), the GPU
//! audit log ([`audit`]), GPU history and admin actions ([`gpu`]) and a
//! node's executors as WhoAmI reports them ([`executor`]).
//!
//! Domain → wire never fails. Wire → domain fails with a
//! [`joblet_core::FieldError`] naming the wire field where a value has no
//! domain meaning (an unknown state number, a negative size); where the
//! wire leaves a value out (0 or `""` for "none"), it comes back as `None`.

pub mod audit;
pub mod executor;
pub mod gpu;
pub mod job;
pub mod logs;
pub mod request;
pub mod state;

/// `v` as an `i64`, `i64::MAX` where it does not fit (wire numbers are
/// signed; domain sizes and durations are not).
fn saturating_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// `Some(v)` unless `v` is the wire's "none" (0).
fn nonzero<T: Default + PartialEq>(v: T) -> Option<T> {
    (v != T::default()).then_some(v)
}

/// `Some(s)` unless `s` is empty.
fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}
