//! Shared by the cluster end-to-end tests (`cluster.rs`, `cluster_faults.rs`):
//! a dev cluster brought up and waited for, the invariants checked over
//! etcd's whole history, jobs and the leader read through `rnx`, a job's
//! ticks read from its output on the host, and a node lost under a
//! running job. Each test binary uses a subset.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use joblet_cluster::history::{Change, History};
use joblet_cluster::Keys;
use joblet_e2e::cluster::{wait_until, ClusterOptions, DevCluster};
use serde_json::Value;

pub fn up(nodes: usize) -> DevCluster {
    let c = DevCluster::up(nodes, ClusterOptions::default()).expect("cluster up");
    // Every node registered, a leader elected.
    wait_until(
        Duration::from_secs(30),
        "every node registered and a scheduler leader",
        || {
            let out = c.rnx("n1", &["--json", "node", "list"]);
            let Ok(v) = serde_json::from_slice::<Value>(&out.stdout) else {
                return false;
            };
            let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
            nodes.len() == c.node_names().len()
                && nodes.iter().all(|n| n["state"] == "ready")
                && nodes.iter().any(|n| n["leader"] == true)
        },
        || c.status(),
    );
    c
}

/// The invariants over etcd's whole history; `all_ended`: every accepted
/// job must have ended by now.
pub fn check_history(c: &DevCluster, all_ended: bool) {
    let changes: Vec<Change> = c
        .etcd_history("/joblet/")
        .expect("etcd history")
        .into_iter()
        .map(|e| Change {
            revision: e.revision,
            key: e.key,
            value: e.value,
        })
        .collect();
    let mut h = History::new(Keys::new("/joblet"));
    h.replay(&changes);
    assert!(
        h.violations.is_empty(),
        "invariants broken: {:?}",
        h.violations
    );
    if all_ended {
        assert_eq!(
            h.unfinished(),
            Vec::<String>::new(),
            "jobs that never ended"
        );
    }
    assert!(
        h.ended() > 0,
        "the history saw no job end: {} changes",
        changes.len()
    );
}

pub fn jobs(c: &DevCluster, via: &str) -> Vec<Value> {
    c.rnx_json(via, &["job", "list"])
        .as_array()
        .cloned()
        .unwrap_or_default()
}

pub fn job(c: &DevCluster, via: &str, id: &str) -> Value {
    c.rnx_json(via, &["job", "status", id])
}

pub fn nodes_of(j: &Value) -> Vec<String> {
    j["nodes"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The leader's name, from `rnx node list`.
pub fn leader(c: &DevCluster, via: &str) -> Option<String> {
    let v = c.rnx_json(via, &["node", "list"]);
    v["nodes"]
        .as_array()?
        .iter()
        .find(|n| n["leader"] == true)
        .and_then(|n| n["name"].as_str().map(str::to_owned))
}

/// One scrape of `node`'s `/metrics` (its listener is on loopback in the
/// node's network namespace: fetched with `curl` there).
pub fn metrics_of(c: &DevCluster, node: &str) -> String {
    let server: Value = serde_json::from_str(
        &std::fs::read_to_string(c.state_dir(node).join("server.json")).unwrap(),
    )
    .unwrap();
    let address = server["metrics"].as_str().expect("metrics in server.json");
    let out = c
        .in_netns(node, "curl")
        .args(["-fsS", &format!("http://{address}/metrics")])
        .output()
        .expect("curl (scripts/setup.sh installs it)");
    assert!(out.status.success(), "curl {node}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Numbers of 19 digits (`date +%s%N`) a job printed, in order, from the
/// output log of run `run` on `node` (read on the host: one clock).
pub fn stamps(c: &DevCluster, node: &str, run: &str) -> Vec<u128> {
    let log = c.state_dir(node).join("jobs").join(run).join("output.log");
    let bytes = std::fs::read(&log).unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .split(|ch: char| !ch.is_ascii_digit())
        .filter(|s| s.len() == 19)
        .filter_map(|s| s.parse().ok())
        .collect()
}

pub const TICKER: &str = "while true; do date +%s%N; sleep 0.05; done";

/// Kills (or cuts off) the node running a restartable job; returns the
/// seconds from the fault until its next attempt runs elsewhere, and
/// checks that the two attempts never ran at once (on one host clock).
pub fn lose_node(c: &DevCluster, how: &str) -> f64 {
    // Placed on n3: the others are drained meanwhile.
    c.rnx_ok("n1", &["node", "drain", "n1"]);
    c.rnx_ok("n1", &["node", "drain", "n2"]);
    let id = c
        .rnx_ok(
            "n1",
            &[
                "job",
                "run",
                "--gpu=2",
                "--restart=on-node-failure",
                "--",
                "sh",
                "-c",
                TICKER,
            ],
        )
        .trim()
        .to_string();
    wait_until(
        Duration::from_secs(30),
        "the job running on n3",
        || {
            let j = job(c, "n1", &id);
            j["state"] == "RUNNING" && nodes_of(&j) == ["n3"] && !stamps(c, "n3", &id).is_empty()
        },
        || c.status(),
    );
    c.rnx_ok("n1", &["node", "undrain", "n1"]);
    c.rnx_ok("n1", &["node", "undrain", "n2"]);
    let t0 = Instant::now();
    match how {
        "kill" => {
            c.kill("n3");
            c.kill_shims("n3");
        }
        "partition" => c.partition("n3"),
        other => panic!("{other}"),
    }
    let mut second = String::new();
    wait_until(
        Duration::from_secs(60),
        "the job's next attempt running elsewhere",
        || {
            let j = job(c, "n1", &id);
            let ok = j["state"] == "RUNNING"
                && j["attempt"] == 2
                && nodes_of(&j).first().is_some_and(|n| n != "n3");
            if ok {
                second = nodes_of(&j)[0].clone();
            }
            ok
        },
        || c.status(),
    );
    let took = t0.elapsed().as_secs_f64();
    let run2 = joblet_cluster::records::run_id(&id, 2);
    wait_until(
        Duration::from_secs(10),
        "the new attempt's first output",
        || !stamps(c, &second, &run2).is_empty(),
        || c.status(),
    );
    // No overlap: the old attempt's last tick is before the new one's first.
    let old = stamps(c, "n3", &id);
    let new = stamps(c, &second, &run2);
    let (old_last, new_first) = (*old.last().expect("old attempt ticked"), new[0]);
    assert!(
        old_last < new_first,
        "attempts overlapped: the old one ticked at {old_last}, {} ms after the new one's first tick {new_first}",
        (old_last - new_first) / 1_000_000
    );
    if how == "partition" {
        // The cut-off node's run was killed by fencing, not left running.
        std::thread::sleep(Duration::from_millis(500));
        let ticks = stamps(c, "n3", &id).len();
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(
            stamps(c, "n3", &id).len(),
            ticks,
            "the old attempt still runs on the cut-off node"
        );
        c.heal("n3");
    }
    c.rnx_ok("n1", &["job", "kill", &id]);
    wait_until(
        Duration::from_secs(30),
        "the job's end",
        || job(c, "n1", &id)["state"] != "RUNNING",
        || c.status(),
    );
    took
}

/// Milliseconds from spawning `rnx job run --follow -- true` through `via`
/// to its exit, `n` times.
pub fn start_to_exit_ms(c: &DevCluster, via: &str, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            c.rnx_ok(via, &["job", "run", "--follow", "--", "true"]);
            t.elapsed().as_secs_f64() * 1_000.0
        })
        .collect()
}

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}
