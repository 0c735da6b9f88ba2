//! Cluster mode's pure parts (issue 32): what the nodes of a cluster keep
//! in etcd, and how the scheduler leader decides. No IO, no clock, no
//! async runtime: the daemon's `cluster` module is the shell that talks to
//! etcd and carries the decisions out.
//!
//! - [`keys`]: the key layout under the cluster's prefix.
//! - [`records`]: the values kept there (a node's inventory, a job's
//!   cluster-wide entry, a node's allocation record, an assignment, a
//!   node's report of a job).
//! - [`leader`]: the leader's core, `LeaderCore::handle(input, now) ->
//!   outputs`: the one `joblet-sched` scheduler over every node, fed what
//!   etcd says, returning *plans*, each one fenced etcd transaction.
//! - [`history`]: the checker the tests run over etcd's history (no GPU
//!   held twice at one revision, every job ends once).
//! - [`fence`]: when a node cut off from etcd must have killed its jobs.
//!
//! Etcd holds only the small cluster-wide state; a job's log, history and
//! runtime data stay in the SQLite store of the node that ran it.

pub mod fence;
pub mod history;
pub mod keys;
pub mod leader;
pub mod records;

pub use keys::Keys;
pub use records::{
    AllocEntry, Assignment, GangRank, JobEntry, JobPhase, NodeAlloc, NodeRecord, NodeReport,
    ReportState, RestartPolicy,
};
