//! `/api/v1/gpus/{gpu}/history` and `/api/v1/history/…`: what the node
//! remembers over time, for the web console's charts (the service layer's
//! [`crate::service::History`]): a GPU's readings over the last hour, day
//! or week, GPU-hours by owner or by day, queue waits by day and failures
//! by kind of reason. Any role may read them.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Authed;
use super::error::{Errors, RestError};
use super::input::{PathArg, QueryArgs};
use super::RestState;
use crate::service::{
    FailureGroup, GpuHistory, GpuHoursRow, GroupBy, QueueWaitDay, Window, DEFAULT_DAYS,
};
use joblet_core::FieldError;

/// `GET /api/v1/gpus/{gpu}/history`'s parameters.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct GpuHistoryQuery {
    /// `1h` (1-second points, the default), `1d` (1-minute points) or `7d`
    /// (15-minute points).
    #[serde(default)]
    #[param(pattern = "^(1h|1d|7d)$")]
    pub window: Option<String>,
}

/// The means over one step from `at_ms`; absent where no sample had the
/// reading.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GpuHistoryPoint {
    pub at_ms: i64,
    pub utilization_pct: Option<f64>,
    pub memory_used_mb: Option<f64>,
    pub temperature_c: Option<f64>,
    pub power_w: Option<f64>,
}

/// One GPU's readings over a window, oldest first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GpuHistoryView {
    pub index: u32,
    pub uuid: String,
    /// `1h`, `1d` or `7d`.
    pub window: String,
    /// Each point is the mean over this many milliseconds.
    pub step_ms: i64,
    pub memory_total_mb: Option<u64>,
    pub points: Vec<GpuHistoryPoint>,
}

fn gpu_history_view(h: GpuHistory) -> GpuHistoryView {
    GpuHistoryView {
        index: h.index,
        uuid: h.uuid,
        window: h.window.as_str().to_owned(),
        step_ms: h.step_ms,
        memory_total_mb: h.memory_total_mb,
        points: h
            .points
            .into_iter()
            .map(|p| GpuHistoryPoint {
                at_ms: p.at_ms,
                utilization_pct: p.utilization_pct,
                memory_used_mb: p.memory_used_mb,
                temperature_c: p.temperature_c,
                power_w: p.power_w,
            })
            .collect(),
    }
}

#[utoipa::path(get, path = "/api/v1/gpus/{gpu}/history", tag = "history",
    params(("gpu" = String, Path, description = "GPU index, UUID or unique UUID prefix"), GpuHistoryQuery),
    responses((status = 200, description = "The GPU's readings over the window", body = GpuHistoryView), Errors))]
pub async fn gpu(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(gpu): PathArg<String>,
    QueryArgs(q): QueryArgs<GpuHistoryQuery>,
) -> Result<Json<GpuHistoryView>, RestError> {
    let window = Window::parse("window", q.window.as_deref().unwrap_or("1h"))?;
    Ok(Json(gpu_history_view(s.history.gpu(&who, &gpu, window)?)))
}

/// `GET /api/v1/history/gpu-hours`'s parameters.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct GpuHoursQuery {
    /// `owner` (the default) or `day` (UTC calendar days).
    #[serde(default)]
    #[param(pattern = "^(owner|day)$")]
    pub by: Option<String>,
    /// Look back this many days, 1 to 90 (default 7).
    #[serde(default)]
    #[param(minimum = 1, maximum = 90)]
    pub days: Option<i64>,
}

/// `days` parameter: look back this many days.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DaysQuery {
    /// Look back this many days, 1 to 90 (default 7).
    #[serde(default)]
    #[param(minimum = 1, maximum = 90)]
    pub days: Option<i64>,
}

/// GPU-hours of one owner or one day.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GpuHoursView {
    /// The owner, or the day (`YYYY-MM-DD`, UTC).
    pub key: String,
    /// GPUs (a MIG slice counts as one) × hours held within the window.
    pub gpu_hours: f64,
    /// Allocations that held GPUs in the window.
    pub allocations: u32,
}

/// Queue waits (submission to start) of the jobs that started on one day.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct QueueWaitView {
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    pub jobs: u32,
    pub gpu_jobs: u32,
    pub mean_ms: i64,
    pub p50_ms: i64,
    pub p95_ms: i64,
    pub max_ms: i64,
}

/// Failed jobs with one kind of reason.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct FailureView {
    /// The reason without its particulars, or `exit code N`.
    pub reason: String,
    pub jobs: u32,
    /// When the latest of them ended (Unix ms).
    pub last_ms: i64,
    /// That latest one's full reason.
    pub example: String,
}

/// The `days` parameter, checked by the service.
fn days(d: Option<i64>) -> Result<u32, FieldError> {
    match d {
        None => Ok(DEFAULT_DAYS),
        Some(n) => u32::try_from(n).map_err(|_| {
            FieldError::new(
                "days",
                format!("{n} is out of range: look back 1 to 90 days"),
            )
        }),
    }
}

fn group_by(by: Option<&str>) -> Result<GroupBy, FieldError> {
    match by.unwrap_or("owner") {
        "owner" => Ok(GroupBy::Owner),
        "day" => Ok(GroupBy::Day),
        other => Err(FieldError::new(
            "by",
            format!(
                "{:?} is not a grouping: expected owner or day",
                joblet_core::text::clip(other)
            ),
        )),
    }
}

#[utoipa::path(get, path = "/api/v1/history/gpu-hours", tag = "history", params(GpuHoursQuery),
    responses((status = 200, description = "GPU-hours by owner (most first) or by day (in order)", body = Vec<GpuHoursView>), Errors))]
pub async fn gpu_hours(
    State(s): State<RestState>,
    Authed(who): Authed,
    QueryArgs(q): QueryArgs<GpuHoursQuery>,
) -> Result<Json<Vec<GpuHoursView>>, RestError> {
    let by = group_by(q.by.as_deref())?;
    let rows = s.history.gpu_hours(&who, by, days(q.days)?)?;
    Ok(Json(
        rows.into_iter()
            .map(|r: GpuHoursRow| GpuHoursView {
                key: r.key,
                gpu_hours: r.gpu_hours,
                allocations: r.allocations,
            })
            .collect(),
    ))
}

#[utoipa::path(get, path = "/api/v1/history/queue-wait", tag = "history", params(DaysQuery),
    responses((status = 200, description = "Queue waits by the day jobs started, in order", body = Vec<QueueWaitView>), Errors))]
pub async fn queue_wait(
    State(s): State<RestState>,
    Authed(who): Authed,
    QueryArgs(q): QueryArgs<DaysQuery>,
) -> Result<Json<Vec<QueueWaitView>>, RestError> {
    let rows = s.history.queue_wait(&who, days(q.days)?)?;
    Ok(Json(
        rows.into_iter()
            .map(|d: QueueWaitDay| QueueWaitView {
                day: d.day,
                jobs: d.jobs,
                gpu_jobs: d.gpu_jobs,
                mean_ms: d.mean_ms,
                p50_ms: d.p50_ms,
                p95_ms: d.p95_ms,
                max_ms: d.max_ms,
            })
            .collect(),
    ))
}

#[utoipa::path(get, path = "/api/v1/history/failures", tag = "history", params(DaysQuery),
    responses((status = 200, description = "Failed jobs by kind of reason, most frequent first", body = Vec<FailureView>), Errors))]
pub async fn failures(
    State(s): State<RestState>,
    Authed(who): Authed,
    QueryArgs(q): QueryArgs<DaysQuery>,
) -> Result<Json<Vec<FailureView>>, RestError> {
    let rows = s.history.failures(&who, days(q.days)?)?;
    Ok(Json(
        rows.into_iter()
            .map(|f: FailureGroup| FailureView {
                reason: f.reason,
                jobs: f.jobs,
                last_ms: f.last_ms,
                example: f.example,
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_checked_and_name_themselves() {
        assert_eq!(group_by(None), Ok(GroupBy::Owner));
        assert_eq!(group_by(Some("day")), Ok(GroupBy::Day));
        assert_eq!(group_by(Some("week")).unwrap_err().field, "by");
        assert_eq!(days(None), Ok(DEFAULT_DAYS));
        assert_eq!(days(Some(30)), Ok(30));
        assert_eq!(days(Some(-1)).unwrap_err().field, "days");
    }
}
