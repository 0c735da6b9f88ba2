//! `/api/v1/volumes` and `/api/v1/runtimes`: the node's volumes (create,
//! list, inspect, share, remove) and runtimes (list, inspect, test,
//! remove). Installing and building runtimes stream progress and upload
//! files: they stay with `rnx runtime install` / `build` over gRPC.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::auth::Authed;
use super::error::{Errors, RestError};
use super::input::{JsonBody, PathArg, QueryArgs};
use super::jobs::{job_view, JobView};
use super::RestState;
use crate::service::{RuntimeInfo, VolumeInfo};

/// A volume.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VolumeView {
    pub name: String,
    /// `filesystem` or `memory`.
    pub kind: String,
    pub size_bytes: u64,
    pub used_bytes: Option<u64>,
    pub owner: String,
    pub shared: bool,
    pub created_ms: i64,
    /// `mounted`, or why not.
    pub status: String,
    /// Unfinished jobs that mount it.
    pub jobs: Vec<String>,
}

fn volume_view(v: VolumeInfo) -> VolumeView {
    let r = v.state.record;
    VolumeView {
        name: r.name,
        kind: r.kind,
        size_bytes: r.size_bytes,
        used_bytes: v.state.usage.map(|u| u.used_bytes),
        owner: r.owner,
        shared: r.shared,
        created_ms: r.created_ms,
        status: v.state.status,
        jobs: v.jobs,
    }
}

/// A volume to create.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateVolumeBody {
    pub name: String,
    /// Capacity in bytes.
    pub size_bytes: i64,
    /// `filesystem` (default: an ext4 image that survives reboots) or `memory` (a tmpfs).
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Every caller's jobs may mount it (default: only its owner's).
    #[serde(default)]
    pub shared: bool,
}

#[utoipa::path(post, path = "/api/v1/volumes", tag = "volumes", request_body = CreateVolumeBody,
    responses((status = 201, description = "The new volume", body = VolumeView), Errors))]
pub async fn create_volume(
    State(s): State<RestState>,
    Authed(who): Authed,
    JsonBody(b): JsonBody<CreateVolumeBody>,
) -> Result<(StatusCode, Json<VolumeView>), RestError> {
    let v = s
        .volumes
        .create(
            &who,
            &b.name,
            b.size_bytes,
            b.kind.as_deref().unwrap_or(""),
            b.shared,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(volume_view(v))))
}

#[utoipa::path(get, path = "/api/v1/volumes", tag = "volumes",
    responses((status = 200, description = "Every volume, by name", body = Vec<VolumeView>), Errors))]
pub async fn list_volumes(
    State(s): State<RestState>,
    Authed(who): Authed,
) -> Result<Json<Vec<VolumeView>>, RestError> {
    Ok(Json(
        s.volumes.list(&who)?.into_iter().map(volume_view).collect(),
    ))
}

#[utoipa::path(get, path = "/api/v1/volumes/{name}", tag = "volumes",
    params(("name" = String, Path, description = "Volume name")),
    responses((status = 200, description = "The volume", body = VolumeView), Errors))]
pub async fn get_volume(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(name): PathArg<String>,
) -> Result<Json<VolumeView>, RestError> {
    Ok(Json(volume_view(s.volumes.get(&who, &name)?)))
}

/// `DELETE /api/v1/volumes/{name}`'s parameters.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RemoveVolumeQuery {
    /// Kill the jobs that mount it first; needed for another caller's volume.
    #[serde(default)]
    pub force: Option<bool>,
}

#[utoipa::path(delete, path = "/api/v1/volumes/{name}", tag = "volumes",
    params(("name" = String, Path, description = "Volume name"), RemoveVolumeQuery),
    responses((status = 200, description = "The volume, removed", body = VolumeView), Errors))]
pub async fn remove_volume(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(name): PathArg<String>,
    QueryArgs(q): QueryArgs<RemoveVolumeQuery>,
) -> Result<Json<VolumeView>, RestError> {
    let v = s
        .volumes
        .remove(&who, &name, q.force.unwrap_or(false))
        .await?;
    Ok(Json(volume_view(v)))
}

/// Whether a volume is shared.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShareBody {
    pub shared: bool,
}

#[utoipa::path(put, path = "/api/v1/volumes/{name}/shared", tag = "volumes",
    params(("name" = String, Path, description = "Volume name")), request_body = ShareBody,
    responses((status = 200, description = "The volume", body = VolumeView), Errors))]
pub async fn share_volume(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(name): PathArg<String>,
    JsonBody(b): JsonBody<ShareBody>,
) -> Result<Json<VolumeView>, RestError> {
    Ok(Json(volume_view(
        s.volumes.set_shared(&who, &name, b.shared)?,
    )))
}

/// A runtime.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RuntimeView {
    pub name: String,
    pub version: String,
    pub description: String,
    pub installed: bool,
    pub digest: String,
    pub size_bytes: u64,
    pub files: u64,
    pub installed_at_ms: i64,
    pub cuda: Option<String>,
    pub environment: BTreeMap<String, String>,
    pub debian_packages: Vec<String>,
    pub python_packages: Vec<String>,
    /// Unfinished jobs that use it.
    pub jobs: Vec<String>,
}

fn runtime_view(r: RuntimeInfo) -> RuntimeView {
    RuntimeView {
        name: r.name,
        version: r.version,
        description: r.description,
        installed: r.installed,
        digest: r.digest,
        size_bytes: r.size_bytes,
        files: r.files,
        installed_at_ms: r.installed_at_ms,
        cuda: r.cuda,
        environment: r.environment,
        debian_packages: r.debian_packages,
        python_packages: r.python_packages,
        jobs: r.jobs,
    }
}

/// `GET /api/v1/runtimes`'s parameters.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RuntimeListQuery {
    /// Also the catalog's runtimes that are not installed.
    #[serde(default)]
    pub available: Option<bool>,
}

#[utoipa::path(get, path = "/api/v1/runtimes", tag = "runtimes", params(RuntimeListQuery),
    responses((status = 200, description = "Runtimes", body = Vec<RuntimeView>), Errors))]
pub async fn list_runtimes(
    State(s): State<RestState>,
    Authed(who): Authed,
    QueryArgs(q): QueryArgs<RuntimeListQuery>,
) -> Result<Json<Vec<RuntimeView>>, RestError> {
    let list = s.runtimes.list(&who, q.available.unwrap_or(false))?;
    Ok(Json(list.into_iter().map(runtime_view).collect()))
}

#[utoipa::path(get, path = "/api/v1/runtimes/{name}", tag = "runtimes",
    params(("name" = String, Path, description = "NAME or NAME@VERSION")),
    responses((status = 200, description = "The runtime", body = RuntimeView), Errors))]
pub async fn get_runtime(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(name): PathArg<String>,
) -> Result<Json<RuntimeView>, RestError> {
    Ok(Json(runtime_view(s.runtimes.get(&who, &name)?)))
}

#[utoipa::path(delete, path = "/api/v1/runtimes/{name}", tag = "runtimes",
    params(("name" = String, Path, description = "NAME or NAME@VERSION")),
    responses((status = 200, description = "The runtime, removed", body = RuntimeView), Errors))]
pub async fn remove_runtime(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(name): PathArg<String>,
) -> Result<Json<RuntimeView>, RestError> {
    Ok(Json(runtime_view(s.runtimes.remove(&who, &name).await?)))
}

#[utoipa::path(post, path = "/api/v1/runtimes/{name}/test", tag = "runtimes",
    params(("name" = String, Path, description = "NAME or NAME@VERSION")),
    responses((status = 201, description = "The runtime's self-check job", body = JobView), Errors))]
pub async fn test_runtime(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(name): PathArg<String>,
) -> Result<(StatusCode, Json<JobView>), RestError> {
    let job = s.runtimes.test(&who, &name).await?;
    Ok((StatusCode::CREATED, Json(job_view(job))))
}
