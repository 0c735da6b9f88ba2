//! `rnx node …` as people and scripts read it.

use super::*;

const T0: i64 = 1_735_787_045_000; // 2025-01-02T03:04:05Z

fn node(name: &str, state: &str, gpus: (u32, u32), jobs: u32) -> pb::Node {
    pb::Node {
        name: name.into(),
        address: format!("10.0.0.{}:50051", name.trim_start_matches("gpu-0")),
        state: state.into(),
        leader: false,
        scheduler: true,
        gpus_free: gpus.0,
        gpus_total: gpus.1,
        jobs,
        cpu_millis: 64_000,
        memory_mb: 512 * 1024,
        labels: [("rack".to_owned(), "r3".to_owned())].into(),
        started_unix_ms: T0,
        gpu_models: vec!["NVIDIA A100-SXM4-40GB".into()],
    }
}

/// Three nodes: the leader, a drained one, a lost one without readings.
fn cluster() -> pb::ListNodesResponse {
    pb::ListNodesResponse {
        cluster: true,
        answered_by: "gpu-01".into(),
        nodes: vec![
            pb::Node {
                leader: true,
                labels: [
                    ("rack".to_owned(), "r3".to_owned()),
                    ("zone".to_owned(), "a".to_owned()),
                ]
                .into(),
                ..node("gpu-01", "ready", (6, 8), 2)
            },
            pb::Node {
                cpu_millis: 1_500,
                memory_mb: 3_072,
                ..node("gpu-02", "drained", (0, 8), 3)
            },
            pb::Node {
                scheduler: false,
                cpu_millis: 0,
                memory_mb: 0,
                labels: Default::default(),
                started_unix_ms: 0,
                gpu_models: vec![],
                ..node("gpu-03", "lost", (0, 0), 1)
            },
        ],
    }
}

fn single() -> pb::ListNodesResponse {
    pb::ListNodesResponse {
        cluster: false,
        answered_by: "default".into(),
        nodes: vec![pb::Node {
            address: "127.0.0.1:50051".into(),
            labels: Default::default(),
            ..node("default", "ready", (8, 8), 0)
        }],
    }
}

fn text(f: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> String {
    let mut buf = Vec::new();
    f(&mut buf).unwrap();
    String::from_utf8(buf).unwrap()
}

#[test]
fn list_table() {
    let list = NodeListView::from(&cluster());
    insta::assert_snapshot!(text(|o| write_list(o, &list)));
}

#[test]
fn a_node_on_its_own_says_so() {
    let list = NodeListView::from(&single());
    let s = text(|o| write_list(o, &list));
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 3, "{s}");
    assert_eq!(
        lines[1],
        "default  ready  -       8/8   0     64 cores  512.0 GiB  127.0.0.1:50051  -"
    );
    assert_eq!(
        lines[2],
        "answered by default, which is not in a cluster: it runs its jobs on its own (cluster mode: `cluster:` in joblet-config.yml)"
    );
}

#[test]
fn json_view() {
    let list = NodeListView::from(&cluster());
    insta::assert_snapshot!(serde_json::to_string_pretty(&list).unwrap());
    let v = serde_json::to_value(&list).unwrap();
    assert_eq!(v["cluster"], true);
    assert_eq!(v["answered_by"], "gpu-01");
    assert_eq!(v["nodes"][2]["cpu_millis"], serde_json::Value::Null);
    assert_eq!(v["nodes"][2]["started"], serde_json::Value::Null);
    let single = serde_json::to_value(NodeListView::from(&single())).unwrap();
    assert_eq!(single["cluster"], false);
    assert_eq!(single["nodes"].as_array().unwrap().len(), 1);
}

#[test]
fn cores_and_labels() {
    assert_eq!(cores(1_000), "1 core");
    assert_eq!(cores(64_000), "64 cores");
    assert_eq!(cores(1_500), "1.5 cores");
    assert_eq!(cores(250), "0.25 cores");
    assert_eq!(labels(&BTreeMap::new()), "-");
}

#[test]
fn change_lines() {
    let mut n = NodeView::from(&node("gpu-02", "drained", (0, 8), 3));
    assert_eq!(
        change_line(&n),
        "node gpu-02 is drained: no new jobs are placed on it; the 3 jobs on it keep running (`rnx node undrain gpu-02` to resume)"
    );
    n.jobs = 0;
    assert_eq!(
        change_line(&n),
        "node gpu-02 is drained: no new jobs are placed on it; it runs none now (`rnx node undrain gpu-02` to resume)"
    );
    n.state = "ready".into();
    assert_eq!(
        change_line(&n),
        "node gpu-02 is ready: new jobs may be placed on it"
    );
    n.state = "lost".into();
    assert!(change_line(&n).starts_with("node gpu-02 is lost: "));
    let blank = NodeView::from(&pb::Node {
        name: "x".into(),
        ..Default::default()
    });
    assert_eq!(change_line(&blank), "node x is unknown");
}
