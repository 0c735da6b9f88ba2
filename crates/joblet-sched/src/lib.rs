//! Joblet's scheduler core (issue 5): a pure, deterministic,
//! single-threaded state machine, `Scheduler::handle(event, now) ->
//! actions`, shared by the daemon and the trace simulator. One scheduler
//! places every job, CPU-only and GPU: GPU units, and each node's CPU,
//! memory and job slots.
//!
//! - [`model`]: the cluster (nodes, GPUs, NUMA, NVLink, MIG, each node's
//!   CPU, memory and job-slot capacity), job requests, placements, events
//!   and actions, configuration.
//! - [`cluster`]: the cluster's live allocation state (who holds what on
//!   which GPU, what each node's jobs use of its CPU, memory and slots)
//!   with the indexes placement needs to be fast.
//! - [`place`]: placement of one request on the cluster state by a
//!   strategy (pack, spread, best-fit, topology, fgd): GPU gangs, exclusive
//!   or shared, fractions of a GPU (`gpu_milli`), MIG; CPU-only jobs on one
//!   node.
//! - [`queue`], [`policy`], [`scheduler`]: what waits, in which order, who
//!   may be preempted (and what a preemption costs), quotas and rate
//!   limits, and the event loop.
//! - [`sizes`]: job sizes learned from completed jobs, with their Gittins
//!   indexes (the Gittins policy's model).
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
pub mod sizes;
