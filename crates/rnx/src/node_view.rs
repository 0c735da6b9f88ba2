//! What rnx shows about a cluster's nodes: serde views built from the
//! wire's `ListNodesResponse` and `Node` (the `--json` contract of
//! `rnx node …`) and their text forms (the `list` table with its footer,
//! the line after a drain or undrain).

use std::collections::BTreeMap;
use std::io::{self, Write};

use joblet_core::UnixMillis;
use joblet_proto::pb;
use serde::Serialize;

use crate::printer::human_bytes;
use crate::table;
use crate::view::rfc3339_millis;

/// `rnx node list`: the nodes and who answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeListView {
    /// False for a node on its own (no `cluster:` in its config): then
    /// `nodes` holds just that node.
    pub cluster: bool,
    /// The node that answered (the one rnx is connected to).
    pub answered_by: String,
    pub nodes: Vec<NodeView>,
}

/// One node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeView {
    pub name: String,
    /// Where its API listens (`host:port`).
    pub address: String,
    /// `ready` (new jobs may go to it), `drained` (its jobs keep running,
    /// no new ones come) or `lost` (registered no more, yet jobs are
    /// recorded on it).
    pub state: String,
    /// It leads the cluster's scheduler now.
    pub leader: bool,
    /// It may lead the scheduler (`cluster.scheduler`).
    pub scheduler: bool,
    pub gpus_total: u32,
    pub gpus_free: u32,
    /// Jobs placed on it now.
    pub jobs: u32,
    /// Millicores it offers jobs; `null` = not tracked.
    pub cpu_millis: Option<u64>,
    /// MiB of memory it offers jobs; `null` = not tracked.
    pub memory_mb: Option<u64>,
    /// `cluster.labels` of its config.
    pub labels: BTreeMap<String, String>,
    pub started: Option<String>,
    pub started_unix_ms: Option<UnixMillis>,
    /// Its GPUs' models, e.g. `NVIDIA A100-SXM4-40GB`.
    pub gpu_models: Vec<String>,
}

impl From<&pb::Node> for NodeView {
    fn from(n: &pb::Node) -> Self {
        let started = (n.started_unix_ms > 0).then_some(n.started_unix_ms);
        NodeView {
            name: n.name.clone(),
            address: n.address.clone(),
            state: if n.state.is_empty() {
                "unknown".to_owned()
            } else {
                n.state.clone()
            },
            leader: n.leader,
            scheduler: n.scheduler,
            gpus_total: n.gpus_total,
            gpus_free: n.gpus_free,
            jobs: n.jobs,
            cpu_millis: (n.cpu_millis > 0).then_some(n.cpu_millis),
            memory_mb: (n.memory_mb > 0).then_some(n.memory_mb),
            labels: n
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            started: started.map(rfc3339_millis),
            started_unix_ms: started,
            gpu_models: n.gpu_models.clone(),
        }
    }
}

impl From<&pb::ListNodesResponse> for NodeListView {
    fn from(r: &pb::ListNodesResponse) -> Self {
        NodeListView {
            cluster: r.cluster,
            answered_by: r.answered_by.clone(),
            nodes: r.nodes.iter().map(NodeView::from).collect(),
        }
    }
}

/// `64 cores`, `1 core`, `1.5 cores` from millicores.
fn cores(millis: u64) -> String {
    let whole = millis / 1000;
    let frac = millis % 1000;
    let n = if frac == 0 {
        whole.to_string()
    } else {
        let f = format!("{frac:03}");
        format!("{whole}.{}", f.trim_end_matches('0'))
    };
    let word = if millis == 1000 { "core" } else { "cores" };
    format!("{n} {word}")
}

fn labels(l: &BTreeMap<String, String>) -> String {
    if l.is_empty() {
        return "-".to_owned();
    }
    l.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

const LIST_HEAD: [&str; 9] = [
    "NAME", "STATE", "LEADER", "GPUS", "JOBS", "CPU", "MEMORY", "ADDRESS", "LABELS",
];

/// The human `rnx node list`: the table, then who answered (and, on a node
/// on its own, that there is no cluster).
pub fn write_list(o: &mut dyn Write, list: &NodeListView) -> io::Result<()> {
    let rows: Vec<Vec<String>> = list
        .nodes
        .iter()
        .map(|n| {
            vec![
                n.name.clone(),
                n.state.clone(),
                if n.leader { "*" } else { "-" }.to_owned(),
                format!("{}/{}", n.gpus_free, n.gpus_total),
                n.jobs.to_string(),
                n.cpu_millis.map_or_else(|| "-".to_owned(), cores),
                n.memory_mb
                    .map_or_else(|| "-".to_owned(), |mb| human_bytes(mb << 20)),
                if n.address.is_empty() {
                    "-".to_owned()
                } else {
                    n.address.clone()
                },
                labels(&n.labels),
            ]
        })
        .collect();
    table::write(o, &LIST_HEAD, &rows)?;
    let by = if list.answered_by.is_empty() {
        "the node connected to"
    } else {
        &list.answered_by
    };
    if list.cluster {
        writeln!(o, "answered by {by}")
    } else {
        writeln!(
            o,
            "answered by {by}, which is not in a cluster: it runs its jobs on its own \
             (cluster mode: `cluster:` in joblet-config.yml)"
        )
    }
}

/// The line `rnx node drain|undrain` prints: the node's new state and what
/// it means.
pub fn change_line(n: &NodeView) -> String {
    let name = &n.name;
    match n.state.as_str() {
        "drained" => format!(
            "node {name} is drained: no new jobs are placed on it; {} (`rnx node undrain {name}` to resume)",
            match n.jobs {
                0 => "it runs none now".to_owned(),
                1 => "the 1 job on it keeps running".to_owned(),
                k => format!("the {k} jobs on it keep running"),
            }
        ),
        "ready" => format!("node {name} is ready: new jobs may be placed on it"),
        "lost" => format!(
            "node {name} is lost: it no longer answers the cluster; its jobs are placed again elsewhere if their restart policy says so"
        ),
        other => format!("node {name} is {other}"),
    }
}

#[cfg(test)]
mod tests;
