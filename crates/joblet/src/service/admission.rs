//! Whether this node takes a job, and the checks of the other requests'
//! plain values: pure functions of the request and the node's settings,
//! so they are tested without a daemon.

use std::collections::BTreeMap;
use std::time::Duration;

use joblet_core::{FieldError, JobRequest, JobSpec, Network, NodeCapabilities, UnixMillis};

use super::ApiError;
use crate::config::Config;

/// What this node admits, from its configuration and what it enforces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// `sandbox.allow_host_network`.
    pub allow_host_network: bool,
    /// `jobs.max_upload_mb` in bytes.
    pub max_upload_bytes: u64,
    /// `filesystem.work_size_mb` in bytes when jobs get a sized `/work`
    /// (sandbox on, not 0): uploads must fit in it.
    pub work_size_bytes: Option<u64>,
    /// What the node can enforce; a job asking for more is refused.
    pub caps: NodeCapabilities,
    /// `jobs.default_timeout`: the node's time limit, which a job's own
    /// timeout can only shorten; `None` = the node sets none.
    pub default_timeout: Option<Duration>,
}

impl Admission {
    pub fn new(cfg: &Config, caps: NodeCapabilities) -> Admission {
        Admission {
            allow_host_network: cfg.sandbox.allow_host_network,
            max_upload_bytes: cfg.jobs.max_upload_mb.saturating_mul(1024 * 1024),
            work_size_bytes: (cfg.sandbox.enabled && cfg.filesystem.work_size_mb > 0)
                .then(|| cfg.filesystem.work_size_mb.saturating_mul(1024 * 1024)),
            caps,
            default_timeout: (!cfg.jobs.default_timeout.is_zero())
                .then_some(cfg.jobs.default_timeout),
        }
    }

    /// A job request checked the same way for every way of submitting it:
    /// its fields, its upload manifest against the node's limits, whether
    /// the node can enforce what it asks and allows its network. Its time
    /// limit is [`effective_timeout`].
    /// Returns the spec and the secret values.
    pub fn accept(
        &self,
        raw: &JobRequest,
    ) -> Result<(JobSpec, BTreeMap<String, String>), ApiError> {
        let (mut spec, secrets) = raw.validate()?;
        let total = joblet_core::upload::check_manifest(&raw.uploads, self.max_upload_bytes)?;
        if let Some(work) = self.work_size_bytes.filter(|&w| total > w) {
            return Err(FieldError::new(
                "uploads",
                format!(
                    "{total} bytes in total do not fit in the job's /work ({work} bytes, filesystem.work_size_mb); upload less, or ask an admin for a larger filesystem.work_size_mb"
                ),
            )
            .into());
        }
        spec.check_supported(&self.caps)?;
        if spec.network == Network::Host && !self.allow_host_network {
            return Err(ApiError::NotAllowed {
                what: "network host: jobs on the host network",
                setting: "sandbox.allow_host_network",
            });
        }
        spec.timeout = effective_timeout(spec.timeout, self.default_timeout);
        Ok((spec, secrets))
    }
}

/// The time limit a job gets: the smaller of its own (`asked`; `None` when
/// it asked for none, or for 0) and the node's `jobs.default_timeout`, so
/// a request can never raise or remove an admin's limit.
pub fn effective_timeout(asked: Option<Duration>, node: Option<Duration>) -> Option<Duration> {
    match (asked, node) {
        (Some(a), Some(n)) => Some(a.min(n)),
        (a, n) => a.or(n),
    }
}

/// A request that carries no file data (RunJob) may not announce uploads.
pub fn no_uploads(raw: &JobRequest) -> Result<(), FieldError> {
    if raw.uploads.is_empty() {
        return Ok(());
    }
    Err(FieldError::new(
        "uploads",
        "RunJob carries no file data: send jobs with uploads through SubmitJob (rnx --upload does)",
    ))
}

/// `grace_seconds` of a stop: `None` = the node's stop grace period.
pub fn grace(secs: Option<i64>) -> Result<Option<Duration>, FieldError> {
    match secs {
        None => Ok(None),
        Some(s) if (0..=24 * 3600).contains(&s) => Ok(Some(Duration::from_secs(s as u64))),
        Some(s) => Err(FieldError::new(
            "grace_seconds",
            format!("invalid value {s}: expected 0 to 86400 seconds"),
        )),
    }
}

/// A list's `limit`: 0 = all.
pub fn list_limit(limit: i64) -> Result<Option<usize>, FieldError> {
    if limit < 0 {
        return Err(FieldError::new(
            "limit",
            format!("invalid value {limit}: expected 0 (all) or a positive number"),
        ));
    }
    Ok((limit > 0).then_some(usize::try_from(limit).unwrap_or(usize::MAX)))
}

/// The audit log's `since_ms`: 0 = all records.
pub fn audit_since(since_ms: i64) -> Result<Option<UnixMillis>, FieldError> {
    if since_ms < 0 {
        return Err(FieldError::new(
            "since_ms",
            format!(
                "invalid value {since_ms}: expected 0 (all records) or a time in Unix milliseconds"
            ),
        ));
    }
    Ok((since_ms > 0).then_some(since_ms))
}

#[cfg(test)]
mod tests;
