//! The workflow file as serde reads it, before the checks that span jobs.
//! Unknown keys are refused everywhere (`deny_unknown_fields`).

use serde::Deserialize;

use super::values::{Backoff, GpuAmount, Ordered, RawRequirement, Retries, SizeMb, Span, Whole};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWorkflow {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Defaults every job inherits, field by field.
    #[serde(default)]
    pub resources: Option<RawResources>,
    /// The default `retries` of every job.
    #[serde(default)]
    pub retries: Option<Retries>,
    /// The default `retry_backoff` of every job.
    #[serde(default)]
    pub retry_backoff: Option<Backoff>,
    pub jobs: Ordered<RawJob>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawJob {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub runtime: Option<String>,
    #[serde(default)]
    pub requires: Vec<RawRequirement>,
    #[serde(default)]
    pub resources: Option<RawResources>,
    #[serde(default)]
    pub uploads: Vec<String>,
    #[serde(default)]
    pub volumes: Vec<String>,
    #[serde(default)]
    pub network: Option<String>,
    #[serde(default)]
    pub environment: Ordered<String>,
    #[serde(default)]
    pub secret_environment: Ordered<String>,
    #[serde(default)]
    pub timeout: Option<Span>,
    #[serde(default)]
    pub retries: Option<Retries>,
    #[serde(default)]
    pub retry_backoff: Option<Backoff>,
    #[serde(default)]
    pub executor: Option<String>,
    #[serde(default)]
    pub devices: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawResources {
    #[serde(default)]
    pub max_cpu: Option<Whole>,
    #[serde(default)]
    pub max_memory: Option<SizeMb>,
    #[serde(default)]
    pub max_iobps: Option<Whole>,
    /// The same limit as `max_iobps`, under the name some files use.
    #[serde(default)]
    pub max_io_bps: Option<Whole>,
    #[serde(default)]
    pub cpu_cores: Option<String>,
    #[serde(default)]
    pub gpu_count: Option<GpuAmount>,
    #[serde(default)]
    pub gpu_memory_mb: Option<SizeMb>,
}
