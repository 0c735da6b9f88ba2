//! `/api/v1/gpus` and `/api/v1/audit`: the node's GPUs (status, one GPU's
//! health, drain / offline / online) and the GPU audit log.

use axum::extract::State;
use axum::Json;
use joblet_core::gpu::{AdminAction, GpuEntry};
use joblet_core::FieldError;
use joblet_gpu::GpuInfo;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Authed;
use super::error::{Errors, RestError};
use super::input::{JsonBody, PathArg, QueryArgs};
use super::RestState;
use crate::service::{AuditQuery, GpuStatus};

/// One GPU.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GpuView {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    pub pci_bus_id: String,
    pub memory_total_bytes: Option<u64>,
    pub memory_used_bytes: Option<u64>,
    pub utilization_pct: Option<u32>,
    pub temperature_c: Option<u32>,
    /// `healthy`, `degraded`, `draining`, `offline`, ... (absent: not tracked).
    pub state: Option<String>,
    pub state_cause: Option<String>,
    pub state_since_ms: Option<i64>,
    /// Why new jobs are not placed on it, when they are not.
    pub placement_paused: Option<String>,
    /// Jobs holding it.
    pub jobs: Vec<String>,
    pub mig_enabled: bool,
    /// It fell off the bus.
    pub lost: bool,
}

/// The node's GPUs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GpuStatusView {
    /// `nvml`, `procfs` or both (`nvml+procfs`).
    pub backend: String,
    /// Simulated GPUs (from a profile), not real ones.
    pub simulated: bool,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub warnings: Vec<String>,
    pub gpus: Vec<GpuView>,
    pub sampled_at_ms: i64,
}

/// One GPU's state history.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GpuEventView {
    pub at_ms: i64,
    /// `transition`, `paused`, `resumed`, `noted` or `end_jobs`.
    pub kind: String,
    pub from: Option<String>,
    pub to: Option<String>,
    pub message: String,
}

/// One GPU with its history.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GpuHealthView {
    pub gpu: GpuView,
    pub history: Vec<GpuEventView>,
}

fn gpu_view(info: &GpuInfo, entry: Option<&GpuEntry>) -> GpuView {
    GpuView {
        index: info.index,
        uuid: info.uuid.clone(),
        name: info.name.clone(),
        pci_bus_id: info.pci_bus_id.clone(),
        memory_total_bytes: info.memory_total_bytes,
        memory_used_bytes: info.memory_used_bytes,
        utilization_pct: info.utilization_gpu_pct,
        temperature_c: info.thermal.current_c,
        state: entry.map(|e| e.state.as_str().to_owned()),
        state_cause: entry.map(|e| e.cause.clone()),
        state_since_ms: entry.map(|e| e.since),
        placement_paused: entry.and_then(|e| e.paused.clone()),
        jobs: entry
            .map(|e| e.jobs.iter().cloned().collect())
            .unwrap_or_default(),
        mig_enabled: info.mig.as_ref().is_some_and(|m| m.enabled),
        lost: info.lost,
    }
}

fn status_view(s: &GpuStatus) -> GpuStatusView {
    let inv = &s.inventory;
    GpuStatusView {
        backend: inv
            .backends
            .iter()
            .map(|b| match b {
                joblet_gpu::Backend::Nvml => "nvml",
                joblet_gpu::Backend::Procfs => "procfs",
            })
            .collect::<Vec<_>>()
            .join("+"),
        simulated: s.simulated_from.is_some(),
        driver_version: inv.driver_version.clone(),
        cuda_driver_version: inv.cuda_driver_version.map(|v| v.to_string()),
        warnings: inv.warnings.clone(),
        gpus: s.gpus().map(|(g, e)| gpu_view(g, e)).collect(),
        sampled_at_ms: s.sampled_at,
    }
}

#[utoipa::path(get, path = "/api/v1/gpus", tag = "gpus",
    responses((status = 200, description = "This node's GPUs", body = GpuStatusView), Errors))]
pub async fn status(
    State(s): State<RestState>,
    Authed(who): Authed,
) -> Result<Json<GpuStatusView>, RestError> {
    Ok(Json(status_view(&s.gpus.status(&who)?)))
}

#[utoipa::path(get, path = "/api/v1/gpus/{gpu}", tag = "gpus",
    params(("gpu" = String, Path, description = "GPU index, UUID or unique UUID prefix")),
    responses((status = 200, description = "The GPU and its state history", body = GpuHealthView), Errors))]
pub async fn health(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(gpu): PathArg<String>,
) -> Result<Json<GpuHealthView>, RestError> {
    let h = s.gpus.health(&who, &gpu)?;
    Ok(Json(GpuHealthView {
        gpu: gpu_view(&h.gpu.info, h.gpu.entry.as_ref()),
        history: h
            .history
            .into_iter()
            .map(|e| GpuEventView {
                at_ms: e.at_ms,
                kind: e.kind,
                from: e.from.map(|s| s.as_str().to_owned()),
                to: e.to.map(|s| s.as_str().to_owned()),
                message: e.message,
            })
            .collect(),
    }))
}

/// What to do with a GPU.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GpuStateBody {
    /// `drain` (no new jobs; running ones finish), `offline` (refused when
    /// jobs hold it, unless `force`) or `online`.
    pub action: String,
    #[serde(default)]
    pub force: bool,
}

/// The service's action for a body.
pub fn admin_action(b: &GpuStateBody) -> Result<AdminAction, FieldError> {
    match b.action.as_str() {
        "drain" => Ok(AdminAction::Drain),
        "offline" => Ok(AdminAction::Offline { force: b.force }),
        "online" => Ok(AdminAction::Online),
        other => Err(FieldError::new(
            "action",
            format!(
                "{:?} is not a GPU action; expected drain, offline or online",
                joblet_core::text::clip(other)
            ),
        )),
    }
}

#[utoipa::path(post, path = "/api/v1/gpus/{gpu}/state", tag = "gpus",
    params(("gpu" = String, Path, description = "GPU index, UUID or unique UUID prefix")),
    request_body = GpuStateBody,
    responses((status = 200, description = "The GPU in its new state", body = GpuView), Errors))]
pub async fn set_state(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(gpu): PathArg<String>,
    JsonBody(body): JsonBody<GpuStateBody>,
) -> Result<Json<GpuView>, RestError> {
    let g = s.gpus.set_state(&who, &gpu, admin_action(&body))?;
    Ok(Json(gpu_view(&g.info, g.entry.as_ref())))
}

/// `GET /api/v1/audit`'s parameters.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditParams {
    /// Only records of allocations that started at or after this (Unix ms).
    #[serde(default)]
    #[param(minimum = 0)]
    pub since_ms: Option<i64>,
    /// Only this owner's.
    #[serde(default)]
    pub owner: Option<String>,
}

/// One GPU allocation.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AuditView {
    pub job_id: String,
    pub owner: String,
    pub gpu_uuids: Vec<String>,
    pub gpu_indices: Vec<u32>,
    pub memory_mb_per_gpu: Option<u64>,
    pub sharing: String,
    pub start_ms: i64,
    pub end_ms: Option<i64>,
    pub peak_memory_mb: Option<u64>,
    pub ended: Option<String>,
    pub reason: Option<String>,
}

#[utoipa::path(get, path = "/api/v1/audit", tag = "gpus", params(AuditParams),
    responses((status = 200, description = "GPU allocations, oldest first", body = Vec<AuditView>), Errors))]
pub async fn audit(
    State(s): State<RestState>,
    Authed(who): Authed,
    QueryArgs(q): QueryArgs<AuditParams>,
) -> Result<Json<Vec<AuditView>>, RestError> {
    let query = AuditQuery {
        since_ms: q.since_ms.unwrap_or(0),
        owner: q.owner.unwrap_or_default(),
    };
    let records = s.audit.list(&who, &query)?;
    Ok(Json(
        records
            .into_iter()
            .map(|r| AuditView {
                job_id: r.job_id,
                owner: r.owner,
                gpu_uuids: r.gpu_uuids,
                gpu_indices: r.gpu_indices,
                memory_mb_per_gpu: r.memory_mb_per_gpu,
                sharing: r.sharing,
                start_ms: r.start_ms,
                end_ms: r.end_ms,
                peak_memory_mb: r.peak_memory_mb,
                ended: r.ended,
                reason: r.reason,
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_actions_parse_and_a_bad_one_names_the_field() {
        let b = |action: &str, force| GpuStateBody {
            action: action.into(),
            force,
        };
        assert_eq!(admin_action(&b("drain", false)), Ok(AdminAction::Drain));
        assert_eq!(
            admin_action(&b("offline", true)),
            Ok(AdminAction::Offline { force: true })
        );
        assert_eq!(admin_action(&b("online", false)), Ok(AdminAction::Online));
        assert_eq!(
            admin_action(&b("reboot", false)).unwrap_err().field,
            "action"
        );
    }
}
