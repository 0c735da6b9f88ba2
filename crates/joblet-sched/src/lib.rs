//! Joblet's GPU scheduler core (issue 5): a pure, deterministic,
//! single-threaded state machine, `Scheduler::handle(event, now) ->
//! actions`, shared by the daemon and the trace simulator.
//!
//! - [`model`]: the cluster (nodes, GPUs, NUMA, NVLink, MIG), job requests,
//!   placements, events and actions, configuration.
//! - [`cluster`]: the cluster's live allocation state (who holds what on
//!   which GPU) with the indexes placement needs to be fast.
//! - [`place`]: gang placement of one request on the cluster state by a
//!   strategy (pack, spread, best-fit, topology), exclusive or shared, MIG.
//! - [`queue`], [`policy`], [`scheduler`]: what waits, in which order, who
//!   may be preempted, quotas and rate limits, and the event loop.
//!
//! No IO, no clock, no randomness, no async: time is the `now` argument.
//! Must not depend on tokio, nix, std::fs or NVML.

pub mod cluster;
pub mod limits;
pub mod model;
pub mod place;
pub mod policy;
pub mod queue;
pub mod scheduler;
