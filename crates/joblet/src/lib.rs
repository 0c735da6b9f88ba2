//! The Joblet node daemon.
//!
//! `joblet server` loads [`config`], takes the [`state_dir`] lock, opens the
//! store, recovers jobs left by a previous daemon ([`engine`]), and serves
//! the gRPC API ([`api`]) over mutual TLS ([`tls`]). Each job runs under its
//! own shim process (crate `joblet-shim`), so the daemon can die or be
//! upgraded without taking jobs down.
//!
//! The decisions live in `joblet-core`; this crate only carries them out.

pub mod clock;
pub mod commands;
pub mod config;
pub mod engine;
pub mod gpu;
pub mod grpc;
pub mod jobenv;
pub mod local;
pub mod outcome;
pub mod sandbox;
pub mod sched_class;
pub mod server;
pub mod service;
pub mod state_dir;
pub mod tls;
pub mod uploads;
