//! Joblet's OCI side, pure where it can be: the runtime-spec bundle a job
//! runs in under an OCI runtime ([`bundle`]), built from the same settings
//! the native sandbox carries out; the project's seccomp policy as an OCI
//! profile ([`seccomp`]); the command lines of runc, crun and runsc
//! ([`runtime`]); what an installed runsc can do for GPU jobs
//! ([`runsc`]: nvproxy, platforms, supported drivers); and CDI specs
//! ([`cdi`]: generated from the node's GPUs, read from the node's spec
//! directories and applied to bundles).

pub mod bundle;
pub mod cdi;
pub mod runsc;
pub mod runtime;
pub mod seccomp;
