//! `rnx node …`, `rnx gpu status --on` and the cluster columns of `rnx job`
//! against the fake node: a fake NodeService answering ListNodes with three
//! nodes and echoing DrainNode, and a fake GpuService that answers for the
//! node it is asked about.

use joblet_proto::pb::node_service_server::{NodeService, NodeServiceServer};
use joblet_proto::{GpuService, GpuServiceServer};

use super::*;

const T0: i64 = 1_735_787_045_000;

/// What the fake NodeService and GpuService saw.
#[derive(Default)]
pub(super) struct FakeCluster {
    /// Answer as a node in a cluster: ListNodes, and jobs with their nodes.
    pub(super) on: bool,
    drains: Mutex<Vec<pb::DrainNodeRequest>>,
    gpu_requests: Mutex<Vec<pb::GpuStatusRequest>>,
}

/// The NodeService and GpuService of `fake`, for the server.
pub(super) fn services(fake: &Arc<Fake>) -> (NodeServiceServer<Fake>, GpuServiceServer<Fake>) {
    (
        NodeServiceServer::from_arc(fake.clone()),
        GpuServiceServer::from_arc(fake.clone()),
    )
}

/// `job` as a cluster reports it (placed on n2, second attempt) when the
/// fake is in a cluster; as is otherwise.
pub(super) fn placed(fake: &Fake, mut job: pb::Job) -> pb::Job {
    if fake.cluster.on {
        job.nodes = vec!["n2".into()];
        job.attempt = 2;
        job.restart = "on-node-failure".into();
    }
    job
}

fn node(name: &str, state: &str) -> pb::Node {
    let i = name.trim_start_matches('n');
    pb::Node {
        name: name.into(),
        address: format!("10.0.0.{i}:50051"),
        state: state.into(),
        leader: name == "n1",
        scheduler: name != "n3",
        gpus_total: 8,
        gpus_free: if state == "ready" { 8 } else { 0 },
        jobs: u32::from(name == "n2") * 3,
        cpu_millis: 64_000,
        memory_mb: 512 * 1024,
        labels: [("rack".to_owned(), format!("r{i}"))].into(),
        started_unix_ms: T0,
        gpu_models: vec!["NVIDIA A100-SXM4-40GB".into()],
    }
}

#[tonic::async_trait]
impl NodeService for Fake {
    async fn list_nodes(
        &self,
        _: Request<pb::ListNodesRequest>,
    ) -> Result<Response<pb::ListNodesResponse>, Status> {
        let nodes = if self.cluster.on {
            vec![node("n1", "ready"), node("n2", "ready"), node("n3", "lost")]
        } else {
            vec![node("n1", "ready")]
        };
        Ok(Response::new(pb::ListNodesResponse {
            cluster: self.cluster.on,
            nodes,
            answered_by: "n1".into(),
        }))
    }

    async fn drain_node(
        &self,
        r: Request<pb::DrainNodeRequest>,
    ) -> Result<Response<pb::Node>, Status> {
        let r = r.into_inner();
        self.cluster.drains.lock().unwrap().push(r.clone());
        if !["n1", "n2", "n3"].contains(&r.name.as_str()) {
            return Err(Status::not_found(format!(
                "no node {:?} in the cluster (see `rnx node list`)",
                r.name
            )));
        }
        let state = if r.drain { "drained" } else { "ready" };
        Ok(Response::new(node(&r.name, state)))
    }
}

#[tonic::async_trait]
impl GpuService for Fake {
    async fn get_gpu_status(
        &self,
        r: Request<pb::GpuStatusRequest>,
    ) -> Result<Response<pb::GpuStatusResponse>, Status> {
        let r = r.into_inner();
        self.cluster.gpu_requests.lock().unwrap().push(r.clone());
        Ok(Response::new(pb::GpuStatusResponse {
            node: match (self.cluster.on, r.node.is_empty()) {
                (false, _) => String::new(),
                (true, true) => "n1".into(),
                (true, false) => r.node,
            },
            backend: "nvml".into(),
            driver_version: "550.54".into(),
            cuda_driver_version: "12.4".into(),
            ..Default::default()
        }))
    }

    async fn get_gpu_health(
        &self,
        _: Request<pb::GpuRef>,
    ) -> Result<Response<pb::GpuHealth>, Status> {
        Err(Status::unimplemented("not in the fake"))
    }

    async fn set_gpu_state(
        &self,
        _: Request<pb::SetGpuStateRequest>,
    ) -> Result<Response<pb::Gpu>, Status> {
        Err(Status::unimplemented("not in the fake"))
    }
}

fn in_cluster() -> Fake {
    Fake {
        cluster: FakeCluster {
            on: true,
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn node_list_drain_and_json() {
    let node = start(in_cluster()).await;
    let out = node.rnx(&["node", "list"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "NAME  STATE  LEADER  GPUS  JOBS  CPU       MEMORY     ADDRESS         LABELS\n\
         n1    ready  *       8/8   0     64 cores  512.0 GiB  10.0.0.1:50051  rack=r1\n\
         n2    ready  -       8/8   3     64 cores  512.0 GiB  10.0.0.2:50051  rack=r2\n\
         n3    lost   -       0/8   0     64 cores  512.0 GiB  10.0.0.3:50051  rack=r3\n\
         answered by n1\n"
    );

    let out = node.rnx(&["node", "drain", "n2"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "node n2 is drained: no new jobs are placed on it; the 3 jobs on it keep running (`rnx node undrain n2` to resume)\n"
    );
    let out = node.rnx(&["--json", "node", "undrain", "n2"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["name"].as_str(), v["state"].as_str()),
        (Some("n2"), Some("ready"))
    );
    assert_eq!(
        *node.fake.cluster.drains.lock().unwrap(),
        [
            pb::DrainNodeRequest {
                name: "n2".into(),
                drain: true,
            },
            pb::DrainNodeRequest {
                name: "n2".into(),
                drain: false,
            },
        ]
    );

    let out = node.rnx(&["node", "list", "--json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["cluster"], true);
    assert_eq!(v["answered_by"], "n1");
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    assert_eq!(nodes[0]["leader"], true);
    assert_eq!(nodes[2]["state"], "lost");
    assert_eq!(nodes[2]["scheduler"], false);
    assert_eq!(nodes[1]["labels"], serde_json::json!({"rack": "r2"}));
    assert_eq!(nodes[1]["cpu_millis"], 64_000);
    assert_eq!(nodes[1]["gpu_models"][0], "NVIDIA A100-SXM4-40GB");
    assert_eq!(nodes[1]["started"], "2025-01-02T03:04:05.000Z");
}

#[tokio::test(flavor = "multi_thread")]
async fn node_refusals_and_a_node_on_its_own() {
    let node = start(in_cluster()).await;
    let out = node.rnx(&["node", "drain", "n9"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        text(&out.stderr),
        "rnx: error: no node \"n9\" in the cluster (see `rnx node list`)\n"
    );
    // A malformed name never reaches the node.
    let out = node.rnx(&["node", "drain", "n1/x"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(node.fake.cluster.drains.lock().unwrap().len(), 1);

    let alone = start(Fake::default()).await;
    let out = alone.rnx(&["node", "list"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert_eq!(s.lines().count(), 3, "{s}");
    assert!(s.contains("\nn1    ready  *  "), "{s}");
    assert!(
        s.ends_with("answered by n1, which is not in a cluster: it runs its jobs on its own (cluster mode: `cluster:` in joblet-config.yml)\n"),
        "{s}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn gpu_status_on_another_node() {
    let node = start(in_cluster()).await;
    let out = node.rnx(&["gpu", "status", "--on", "n2"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "Node: n2\nDriver 550.54 · CUDA 12.4 · via nvml\nno GPUs on this node\n"
    );
    let out = node
        .rnx(&[
            "--json",
            "gpu",
            "watch",
            "--on",
            "n3",
            "--count",
            "2",
            "--interval",
            "100ms",
        ])
        .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let frames: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames.len(), 2);
    assert_eq!(frames[1]["node"], "n3");
    let out = node.rnx(&["gpu", "status"]).await;
    assert!(text(&out.stdout).starts_with("Node: n1\n"));
    let asked: Vec<String> = node
        .fake
        .cluster
        .gpu_requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.node.clone())
        .collect();
    assert_eq!(asked, ["n2", "n3", "n3", ""]);

    // A node on its own: no Node line, and the request names none.
    let alone = start(Fake::default()).await;
    let out = alone.rnx(&["gpu", "status"]).await;
    assert!(
        text(&out.stdout).starts_with("Driver 550.54"),
        "{}",
        text(&out.stdout)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn jobs_show_their_node_and_attempt_in_a_cluster() {
    let node = start(in_cluster()).await;
    let out = node.rnx(&["job", "list"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    let lines: Vec<&str> = s.lines().collect();
    assert!(
        lines[0].ends_with("  CREATED               NODE  COMMAND"),
        "{s}"
    );
    assert!(lines[1].ends_with("  n2    python train.py"), "{s}");

    let out = node.rnx(&["job", "status", "abc1"]).await;
    let s = text(&out.stdout);
    assert!(
        s.contains("Owner: admin\nNode: n2\nAttempt: 2 (placed again after its node was lost)\nRestart: on-node-failure\n"),
        "{s}"
    );
    let out = node.rnx(&["--json", "job", "status", "abc1"]).await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["nodes"], serde_json::json!(["n2"]));
    assert_eq!(v["attempt"], 2);
    assert_eq!(v["restart"], "on-node-failure");

    // A node on its own: the list keeps its columns, the JSON its nulls.
    let alone = start(Fake::default()).await;
    let out = alone.rnx(&["job", "list"]).await;
    let s = text(&out.stdout);
    assert!(!s.contains("NODE"), "{s}");
    let out = alone.rnx(&["--json", "job", "list"]).await;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["nodes"], serde_json::Value::Null);
    assert_eq!(v[0]["attempt"], serde_json::Value::Null);
}
