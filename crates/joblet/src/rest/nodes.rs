//! `/api/v1/nodes` and `/api/v1/whoami`: the cluster's nodes (this node
//! alone outside a cluster), drain / undrain, and who the caller is.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::auth::Authed;
use super::error::{Errors, RestError};
use super::input::{JsonBody, PathArg};
use super::RestState;
use crate::cluster::NodeView;

/// A node.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NodeItem {
    pub name: String,
    pub address: String,
    /// `ready`, `drained` or `lost`.
    pub state: String,
    pub leader: bool,
    pub scheduler: bool,
    pub gpus_total: u32,
    pub gpus_free: u32,
    pub jobs: u32,
    pub cpu_millis: u64,
    pub memory_mb: u64,
    pub labels: BTreeMap<String, String>,
    pub started_ms: i64,
    pub gpu_models: Vec<String>,
}

/// The cluster's nodes.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct NodeListView {
    /// False on a single node.
    pub cluster: bool,
    pub nodes: Vec<NodeItem>,
    pub answered_by: String,
}

fn item(n: NodeView) -> NodeItem {
    NodeItem {
        name: n.name,
        address: n.address,
        state: n.state.to_owned(),
        leader: n.leader,
        scheduler: n.scheduler,
        gpus_total: n.gpus_total,
        gpus_free: n.gpus_free,
        jobs: n.jobs,
        cpu_millis: n.cpu_millis,
        memory_mb: n.memory_mb,
        labels: n.labels,
        started_ms: n.started_ms,
        gpu_models: n.gpu_models,
    }
}

#[utoipa::path(get, path = "/api/v1/nodes", tag = "nodes",
    responses((status = 200, description = "The nodes", body = NodeListView), Errors))]
pub async fn list(
    State(s): State<RestState>,
    Authed(who): Authed,
) -> Result<Json<NodeListView>, RestError> {
    let l = s.nodes.list(&who).await?;
    Ok(Json(NodeListView {
        cluster: l.cluster,
        nodes: l.nodes.into_iter().map(item).collect(),
        answered_by: l.answered_by,
    }))
}

/// Drain (`true`) or undrain (`false`) a node.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DrainBody {
    pub drain: bool,
}

#[utoipa::path(put, path = "/api/v1/nodes/{name}/drain", tag = "nodes",
    params(("name" = String, Path, description = "Node name")), request_body = DrainBody,
    responses((status = 200, description = "The node", body = NodeItem), Errors))]
pub async fn drain(
    State(s): State<RestState>,
    Authed(who): Authed,
    PathArg(name): PathArg<String>,
    JsonBody(b): JsonBody<DrainBody>,
) -> Result<Json<NodeItem>, RestError> {
    Ok(Json(item(s.nodes.drain(&who, &name, b.drain).await?)))
}

/// Who the caller is, what the node enforces and what runs its jobs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WhoAmIView {
    pub name: String,
    /// `admin` or `viewer`.
    pub role: String,
    pub node_version: String,
    /// Features this node enforces (`timeout`, `env`, `gpu`, ...).
    pub supported: Vec<String>,
    pub state_disk_free_bytes: Option<u64>,
    pub state_disk_total_bytes: Option<u64>,
    /// What can run jobs on the node (a job's `executor`), every one.
    pub executors: Vec<ExecutorView>,
    /// The executor of a job that names none.
    pub default_executor: String,
}

/// One executor of the node.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ExecutorView {
    /// What a job's `executor` names.
    pub name: String,
    /// `native`, `runc`, `crun` or `runsc`.
    pub kind: String,
    /// The runtime's binary; absent for `native`.
    pub binary: Option<String>,
    /// The runtime's version; absent when not known.
    pub version: Option<String>,
    /// What it can do for a job: `gpu`, `cdi`, `oom-events`,
    /// `checkpoint-restore`, `join-netns`, `device-cgroup`.
    pub capabilities: Vec<String>,
    /// Why it cannot run GPU jobs; absent when it can.
    pub gpu_unavailable: Option<String>,
    /// Whether the caller may run jobs on it.
    pub allowed: bool,
}

#[utoipa::path(get, path = "/api/v1/whoami", tag = "session",
    responses((status = 200, description = "The caller", body = WhoAmIView), Errors))]
pub async fn whoami(State(s): State<RestState>, Authed(who): Authed) -> Json<WhoAmIView> {
    let me = s.jobs.whoami(&who);
    Json(WhoAmIView {
        name: me.name,
        role: me.role.to_string(),
        node_version: me.node_version.to_owned(),
        supported: me.supported.into_iter().map(str::to_owned).collect(),
        state_disk_free_bytes: me.state_disk.as_ref().map(|(_, s)| s.free),
        state_disk_total_bytes: me.state_disk.as_ref().map(|(_, s)| s.total),
        executors: me
            .executors
            .into_iter()
            .map(|e| ExecutorView {
                capabilities: e.info.caps.names().into_iter().map(str::to_owned).collect(),
                name: e.info.name,
                kind: e.info.kind.as_str().to_owned(),
                binary: e.info.binary,
                version: e.info.version,
                gpu_unavailable: e.info.gpu_unavailable,
                allowed: e.allowed,
            })
            .collect(),
        default_executor: me.default_executor,
    })
}
