//! The Joblet node daemon.
//!
//! `joblet server` ([`server`]) loads [`config`], takes the [`state_dir`]
//! lock, opens the store, recovers jobs left by a previous daemon
//! ([`engine`]), and serves the gRPC API over mutual TLS ([`tls`]) and, for
//! root on the node, a local socket ([`local`]). Each job runs under its
//! own shim process (crate `joblet-shim`), so the daemon can die or be
//! upgraded without taking jobs down.
//!
//! A request passes three layers:
//! - [`grpc`]: tonic handlers that take the caller from the connection,
//!   convert the request into domain values (`joblet-proto`), call the
//!   service and convert the answer back; [`grpc::status`] turns errors
//!   into gRPC statuses.
//! - [`service`]: every operation, transport-neutral: the caller's role is
//!   checked, the request validated and admitted ([`service::Admission`],
//!   against the facts [`node_facts`] reads once at start-up),
//!   reads go to the store and changes to the engine's handle; errors are
//!   [`service::ApiError`].
//! - [`engine`]: the loop around `joblet-engine`'s pure core, which decides
//!   what happens to every job (with `joblet-sched` placing them); it
//!   carries the core's effects out through the store and the node agent
//!   ([`agent`]), which runs placed jobs on this node.
//!
//! [`workflow`] drives workflow runs: a task around `joblet-workflow`'s
//! pure core that submits each job attempt through the job service.
//!
//! [`gpu`] holds the node's GPU state (discovery, monitor, allocation on the
//! node, GPU sandbox edits); [`executor`] the executors it offers (the
//! native sandbox, OCI runtimes); [`storage`] its runtimes and volumes;
//! [`commands`] the one-shot `joblet discover`,
//! `doctor` and `cert issue`. Neither imports up into the service, the gRPC
//! layer or the engine; time comes from [`clock`].

pub mod agent;
pub mod clock;
pub mod cluster;
pub mod commands;
pub mod config;
pub mod console;
pub mod disk;
pub mod engine;
pub mod executor;
pub mod gpu;
pub mod grpc;
pub mod jobenv;
pub mod local;
pub mod metrics;
pub mod node_facts;
pub mod outcome;
pub mod rest;
pub mod sandbox;
pub mod sched_class;
pub mod server;
pub mod service;
pub mod state_dir;
pub mod storage;
pub mod tls;
pub mod uploads;
pub mod workflow;
