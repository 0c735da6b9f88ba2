//! The Joblet node daemon.
//!
//! `joblet server` loads [`config`], takes the [`state_dir`] lock, opens the
//! store, recovers jobs left by a previous daemon ([`engine`]), and serves
//! the gRPC API ([`api`]) over mutual TLS ([`tls`]). Each job runs under its
//! own shim process (crate `joblet-shim`), so the daemon can die or be
//! upgraded without taking jobs down.
//!
//! The decisions live in `joblet-engine` (what happens to every job, with
//! `joblet-sched` placing them), `joblet-core` (specs, states, the GPU
//! health policy); this crate carries them out: [`engine`] is the loop
//! around the engine core, [`agent`] runs placed jobs on this node, [`gpu`]
//! keeps the node's GPUs.

pub mod agent;
pub mod api;
pub mod audit_api;
pub mod certcmd;
pub mod clock;
pub mod config;
pub mod engine;
pub mod gpu;
pub mod jobenv;
pub mod local;
pub mod logs;
pub mod outcome;
pub mod sandbox;
pub mod sched_class;
pub mod server;
pub mod state_dir;
pub mod tls;
pub mod uploads;

use joblet_core::PrefixError;
use joblet_proto::ApiError;
use joblet_store::StoreError;

/// The store's errors in API terms: bad or unknown ids are the caller's
/// problem, everything else is the node's.
pub fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::JobRef(p) => ApiError::JobRef(p),
        StoreError::NotFound(id) => ApiError::JobRef(PrefixError::NotFound(id.to_string())),
        StoreError::NotFinished { id, state } => ApiError::WrongState {
            id: id.to_string(),
            state,
            hint: "stop it first with `rnx job stop`",
        },
        StoreError::Transition { id, source } => ApiError::Transition {
            id: id.to_string(),
            source,
        },
        other => ApiError::Internal(other.to_string()),
    }
}
