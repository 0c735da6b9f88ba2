//! Cluster mode end to end (issue 32): 3 etcd members and 3 joblet nodes
//! on simulated 8-GPU A100s, each in a network namespace of its own
//! (`scripts/dev-cluster.sh`, through [`DevCluster`]). Every test ends by
//! replaying etcd's whole history through `joblet_cluster::history`: no
//! GPU was ever held by two jobs at one revision, every job's entry ended
//! at most once and never changed after, and (once everything is over)
//! every accepted job ended.

use std::time::{Duration, Instant};

use joblet_cluster::history::{Change, History};
use joblet_cluster::Keys;
use joblet_e2e::cluster::{wait_until, ClusterOptions, DevCluster};
use serde_json::Value;

fn up(nodes: usize) -> DevCluster {
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
fn check_history(c: &DevCluster, all_ended: bool) {
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

fn jobs(c: &DevCluster, via: &str) -> Vec<Value> {
    c.rnx_json(via, &["job", "list"])
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn job(c: &DevCluster, via: &str, id: &str) -> Value {
    c.rnx_json(via, &["job", "status", id])
}

fn nodes_of(j: &Value) -> Vec<String> {
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
fn leader(c: &DevCluster, via: &str) -> Option<String> {
    let v = c.rnx_json(via, &["node", "list"]);
    v["nodes"]
        .as_array()?
        .iter()
        .find(|n| n["leader"] == true)
        .and_then(|n| n["name"].as_str().map(str::to_owned))
}

/// Numbers of 19 digits (`date +%s%N`) a job printed, in order, from the
/// output log of run `run` on `node` (read on the host: one clock).
fn stamps(c: &DevCluster, node: &str, run: &str) -> Vec<u128> {
    let log = c.state_dir(node).join("jobs").join(run).join("output.log");
    let bytes = std::fs::read(&log).unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .split(|ch: char| !ch.is_ascii_digit())
        .filter(|s| s.len() == 19)
        .filter_map(|s| s.parse().ok())
        .collect()
}

const TICKER: &str = "while true; do date +%s%N; sleep 0.05; done";

#[test]
fn a_gpu_job_runs_on_another_node_and_its_log_streams_back_through_the_node_asked() {
    let c = up(3);
    // n1 takes no jobs: the job must run elsewhere.
    c.rnx_ok("n1", &["node", "drain", "n1"]);
    let out = c.rnx_ok(
        "n1",
        &[
            "job",
            "run",
            "--gpu=2",
            "--follow",
            "--",
            "sh",
            "-c",
            "echo hello from $JOBLET_NODE attempt $JOBLET_ATTEMPT gpus $CUDA_VISIBLE_DEVICES",
        ],
    );
    assert!(out.contains("hello from n"), "{out}");
    assert!(
        !out.contains("hello from n1"),
        "ran on the drained node: {out}"
    );
    assert!(out.contains("attempt 1"), "{out}");
    let list = jobs(&c, "n1");
    assert_eq!(list.len(), 1);
    let ran_on = nodes_of(&list[0]);
    assert_eq!(ran_on.len(), 1);
    assert_ne!(ran_on[0], "n1");
    assert_eq!(list[0]["state"], "COMPLETED");
    // Its status comes from the node that ran it: its GPUs.
    let id = list[0]["id"].as_str().unwrap().to_string();
    let st = job(&c, "n1", &id);
    assert_eq!(
        st["gpus"]["indices"].as_array().map(Vec::len),
        Some(2),
        "{st}"
    );
    // The log, asked of a third node.
    let third = ["n2", "n3"].into_iter().find(|n| *n != ran_on[0]).unwrap();
    let log = c.rnx_ok(third, &["job", "log", &id]);
    assert!(log.contains(&format!("hello from {}", ran_on[0])), "{log}");
    // Every node in `node list`, and another node's GPUs through n1.
    let nodes = c.rnx_json("n1", &["node", "list"]);
    let names: Vec<&str> = nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["name"].as_str())
        .collect();
    assert_eq!(names, ["n1", "n2", "n3"]);
    assert!(nodes["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["gpus_total"] == 8));
    let gpus = c.rnx_json("n1", &["gpu", "status", "--on", "n3"]);
    assert_eq!(gpus["node"], "n3", "{gpus}");
    assert_eq!(gpus["gpus"].as_array().map(Vec::len), Some(8));
    check_history(&c, true);
    // Deleted through n1: gone from the cluster and from the node that ran it.
    c.rnx_ok("n1", &["job", "delete", &id]);
    assert!(jobs(&c, "n1").is_empty());
    let run_dir = c.state_dir(&ran_on[0]).join("jobs").join(&id);
    wait_until(
        Duration::from_secs(10),
        "the run's files deleted on its node",
        || !run_dir.exists(),
        || c.status(),
    );
}

/// Kills (or cuts off) the node running a restartable job; returns the
/// seconds from the fault until its next attempt runs elsewhere, and
/// checks that the two attempts never ran at once (on one host clock).
fn lose_node(c: &DevCluster, how: &str) -> f64 {
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

#[test]
fn a_killed_node_s_job_runs_again_elsewhere_within_30_s_and_never_twice_at_once() {
    let c = up(3);
    let took = lose_node(&c, "kill");
    eprintln!("node kill -9: next attempt running after {took:.2} s");
    assert!(took < 30.0, "{took} s");
    check_history(&c, true);
}

#[test]
fn a_partitioned_node_kills_its_job_before_the_next_attempt_starts_elsewhere() {
    let c = up(3);
    let took = lose_node(&c, "partition");
    eprintln!("node partition: next attempt running after {took:.2} s");
    assert!(took < 30.0, "{took} s");
    check_history(&c, true);
}

#[test]
fn a_new_scheduler_leads_after_the_leader_is_killed_and_no_job_is_lost() {
    let c = up(3);
    let old = leader(&c, "n1").expect("a leader");
    let via = c.node_names().into_iter().find(|n| *n != old).unwrap();
    // A job before, and one while nobody leads.
    let before = c
        .rnx_ok(&via, &["job", "run", "--gpu=1", "--", "sleep", "1"])
        .trim()
        .to_string();
    c.kill(&old);
    c.kill_shims(&old);
    let t0 = Instant::now();
    let during = c
        .rnx_ok(&via, &["job", "run", "--gpu=1", "--", "true"])
        .trim()
        .to_string();
    let mut new = String::new();
    wait_until(
        Duration::from_secs(30),
        "a new leader",
        || match leader(&c, &via) {
            Some(l) if l != old => {
                new = l;
                true
            }
            _ => false,
        },
        || c.status(),
    );
    let took = t0.elapsed().as_secs_f64();
    eprintln!("scheduler leader kill -9: {new} leads after {took:.2} s");
    // Lease TTL (3 s) plus a few seconds.
    assert!(took < 3.0 + 7.0, "{took} s");
    for id in [&before, &during] {
        wait_until(
            Duration::from_secs(60),
            "every job's end",
            || {
                let j = job(&c, &via, id);
                j["state"]
                    .as_str()
                    .is_some_and(|s| s != "QUEUED" && s != "RUNNING")
            },
            || c.status(),
        );
    }
    // The job submitted while nobody led ran.
    assert_eq!(job(&c, &via, &during)["state"], "COMPLETED");
    check_history(&c, true);
}

#[test]
fn a_twelve_gpu_gang_runs_on_two_8_gpu_nodes_with_consistent_ranks() {
    let c = up(3);
    let id = c
        .rnx_ok(
            "n1",
            &[
                "job", "run", "--gpu=12", "--",
                "sh", "-c",
                "echo RANK=$RANK WORLD_SIZE=$WORLD_SIZE NODE_RANK=$NODE_RANK NNODES=$NNODES NPROC_PER_NODE=$NPROC_PER_NODE MASTER=$MASTER_ADDR:$MASTER_PORT GPUS=$CUDA_VISIBLE_DEVICES",
            ],
        )
        .trim()
        .to_string();
    wait_until(
        Duration::from_secs(60),
        "the gang's end",
        || job(&c, "n1", &id)["state"] == "COMPLETED",
        || c.status(),
    );
    let j = job(&c, "n1", &id);
    let nodes = nodes_of(&j);
    assert_eq!(nodes.len(), 2, "{j}");
    let mut lines = Vec::new();
    for n in &nodes {
        let log = std::fs::read(c.state_dir(n).join("jobs").join(&id).join("output.log")).unwrap();
        let text = String::from_utf8_lossy(&log).to_string();
        let line = text
            .lines()
            .find(|l| l.contains("RANK="))
            .map(|l| l[l.find("RANK=").unwrap()..].to_string());
        lines.push(line.unwrap_or_else(|| panic!("no ranks in {n}'s part: {text}")));
    }
    let field = |l: &str, k: &str| {
        l.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(field(&lines[0], "WORLD_SIZE"), "2");
    assert_eq!(field(&lines[1], "WORLD_SIZE"), "2");
    let mut ranks = [field(&lines[0], "RANK"), field(&lines[1], "RANK")];
    ranks.sort();
    assert_eq!(ranks, ["0", "1"]);
    assert_eq!(field(&lines[0], "MASTER"), field(&lines[1], "MASTER"));
    let procs: u32 = lines
        .iter()
        .map(|l| field(l, "NPROC_PER_NODE").parse::<u32>().unwrap())
        .sum();
    assert_eq!(procs, 12, "{lines:?}");
    check_history(&c, true);
}

/// The fence (leader key create revision) of every placement in etcd's
/// history, by the revision it was written at.
fn placements_by_fence(c: &DevCluster) -> Vec<(i64, i64)> {
    c.etcd_history("/joblet/jobs/")
        .expect("etcd history")
        .into_iter()
        .filter_map(|e| {
            let v: Value = serde_json::from_slice(e.value.as_deref()?).ok()?;
            let p = &v["phase"];
            (p["phase"] == "assigned").then(|| (e.revision, p["fence"].as_i64().unwrap_or(0)))
        })
        .collect()
}

fn fence_now(c: &DevCluster) -> i64 {
    // The leader key: the one election key alive, its create revision.
    let out = c.etcdctl(&["get", "/joblet/leader/", "--prefix", "-w", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("etcdctl json");
    v["kvs"]
        .as_array()
        .and_then(|k| {
            k.iter()
                .map(|kv| kv["create_revision"].as_i64().unwrap_or(0))
                .min()
        })
        .unwrap_or(0)
}

#[test]
fn a_paused_scheduler_leader_is_replaced_and_its_writes_after_resuming_all_fail() {
    let c = up(3);
    let old = leader(&c, "n1").expect("a leader");
    let old_fence = fence_now(&c);
    let via = c.node_names().into_iter().find(|n| *n != old).unwrap();
    c.pause(&old);
    let t0 = Instant::now();
    // Submitted while the old leader is frozen: its watch will deliver this
    // when it wakes, and it will try to place it under its old fence.
    let during = c
        .rnx_ok(&via, &["job", "run", "--gpu=1", "--", "true"])
        .trim()
        .to_string();
    let mut new = String::new();
    wait_until(
        Duration::from_secs(30),
        "a new leader",
        || match leader(&c, &via) {
            Some(l) if l != old => {
                new = l;
                true
            }
            _ => false,
        },
        || c.status(),
    );
    let took = t0.elapsed().as_secs_f64();
    eprintln!("scheduler leader SIGSTOP: {new} leads after {took:.2} s");
    assert!(took < 3.0 + 7.0, "{took} s");
    wait_until(
        Duration::from_secs(30),
        "the job submitted meanwhile ran",
        || job(&c, &via, &during)["state"] == "COMPLETED",
        || c.status(),
    );
    // Frozen for 15 s in all, then resumed: it wakes as a deposed leader.
    std::thread::sleep(Duration::from_secs(15).saturating_sub(t0.elapsed()));
    let resumed_at = c.etcd_revision().expect("revision");
    c.resume(&old);
    let more = c
        .rnx_ok(&via, &["job", "run", "--gpu=1", "--", "true"])
        .trim()
        .to_string();
    wait_until(
        Duration::from_secs(30),
        "a job after the resume ran",
        || job(&c, &via, &more)["state"] == "COMPLETED",
        || c.status(),
    );
    std::thread::sleep(Duration::from_secs(2));
    // Nothing was placed under the old fence once it was resumed.
    for (rev, fence) in placements_by_fence(&c) {
        if rev > resumed_at {
            assert_ne!(
                fence, old_fence,
                "a placement at revision {rev} under the deposed leader's fence"
            );
        }
    }
    let log = c.daemon_log(&old);
    assert!(
        log.contains("no longer leading the cluster's scheduler"),
        "{}",
        c.log_tail(&old, 30)
    );
    check_history(&c, true);
}

/// The etcd member that leads etcd's own Raft group.
fn etcd_leader(c: &DevCluster) -> String {
    let out = c.etcdctl(&["endpoint", "status", "-w", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("etcdctl json");
    let members = c.etcd_members();
    let eps = c.etcd_endpoints();
    for s in v.as_array().expect("statuses") {
        let st = &s["Status"];
        if st["leader"].is_number() && st["leader"] == st["header"]["member_id"] {
            let ep = s["Endpoint"].as_str().unwrap_or("");
            if let Some(i) = eps.iter().position(|e| e == ep) {
                return members[i].clone();
            }
        }
    }
    panic!("no etcd leader in {v}");
}

#[test]
fn the_cluster_keeps_placing_jobs_when_the_etcd_leader_is_killed() {
    let c = up(3);
    let e = etcd_leader(&c);
    let before = c
        .rnx_ok(
            "n1",
            &[
                "job",
                "run",
                "--gpu=1",
                "--restart=on-node-failure",
                "--",
                "sleep",
                "2",
            ],
        )
        .trim()
        .to_string();
    c.kill(&e);
    let t0 = Instant::now();
    // A submission may meet the election: retried as a user would.
    let mut during = String::new();
    wait_until(
        Duration::from_secs(30),
        "a submission accepted",
        || {
            let out = c.rnx("n2", &["job", "run", "--gpu=1", "--", "true"]);
            if out.status.success() {
                during = String::from_utf8_lossy(&out.stdout).trim().to_string();
            }
            out.status.success()
        },
        || c.status(),
    );
    wait_until(
        Duration::from_secs(30),
        "the job submitted after the kill ran",
        || job(&c, "n2", &during)["state"] == "COMPLETED",
        || c.status(),
    );
    eprintln!(
        "etcd leader {e} kill -9: a job placed and run {:.2} s later",
        t0.elapsed().as_secs_f64()
    );
    assert!(leader(&c, "n2").is_some());
    wait_until(
        Duration::from_secs(60),
        "the first job's end",
        || {
            job(&c, "n2", &before)["state"]
                .as_str()
                .is_some_and(|s| s != "RUNNING" && s != "QUEUED")
        },
        || c.status(),
    );
    c.restart(&e);
    check_history(&c, true);
}

/// A small deterministic generator (xorshift), seeded per run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Random faults every few seconds (a node daemon killed with its shims
/// and restarted, a node paused and resumed, a node partitioned and
/// healed, an etcd member killed and restarted) while jobs are submitted
/// through the nodes still up; then everything heals and every job must
/// end, with the invariants holding over the whole history. Bounded by
/// `CLUSTER_FAULT_SECS` (default 60; longer runs: bench/cluster-faults.sh).
#[test]
fn a_random_fault_loop_never_gives_a_gpu_twice_and_every_job_ends_once() {
    let secs: u64 = std::env::var("CLUSTER_FAULT_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let seed: u64 = std::env::var("CLUSTER_FAULT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    eprintln!("fault loop: {secs} s, seed {seed} (CLUSTER_FAULT_SEED={seed} repeats it)");
    let mut rng = Rng(seed);
    let c = up(3);
    let nodes = c.node_names();
    let members = c.etcd_members();
    let end = Instant::now() + Duration::from_secs(secs);
    let mut submitted = Vec::new();
    let mut faults = Vec::new();
    // (what, name) undone before the next fault.
    let mut undo: Option<(&str, String)> = None;
    while Instant::now() < end {
        if let Some((what, name)) = undo.take() {
            match what {
                "restart" => c.restart(&name),
                "resume" => c.resume(&name),
                "heal" => c.heal(&name),
                _ => unreachable!(),
            }
        }
        let victim = nodes[rng.below(nodes.len() as u64) as usize].clone();
        let fault = match rng.below(5) {
            0 => {
                c.kill(&victim);
                c.kill_shims(&victim);
                undo = Some(("restart", victim.clone()));
                "kill"
            }
            1 => {
                c.pause(&victim);
                undo = Some(("resume", victim.clone()));
                "pause"
            }
            2 => {
                c.partition(&victim);
                undo = Some(("heal", victim.clone()));
                "partition"
            }
            3 => {
                let m = members[rng.below(members.len() as u64) as usize].clone();
                c.kill(&m);
                undo = Some(("restart", m.clone()));
                faults.push(format!("kill {m}"));
                "etcd"
            }
            _ => "none",
        };
        if fault != "etcd" {
            faults.push(format!("{fault} {victim}"));
        }
        // A few jobs through nodes that are up, while the fault lasts.
        let pause = Duration::from_millis(1_500 + rng.below(2_500));
        let until = Instant::now() + pause;
        while Instant::now() < until {
            let via = nodes.iter().find(|n| **n != victim).unwrap();
            let gpus = 1 + rng.below(4);
            let sleep = format!("0.{}", rng.below(9) + 1);
            let out = c.rnx(
                via,
                &[
                    "job",
                    "run",
                    &format!("--gpu={gpus}"),
                    "--restart=on-node-failure",
                    "--",
                    "sleep",
                    &sleep,
                ],
            );
            if out.status.success() {
                submitted.push((
                    via.clone(),
                    String::from_utf8_lossy(&out.stdout).trim().to_string(),
                ));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    if let Some((what, name)) = undo.take() {
        match what {
            "restart" => c.restart(&name),
            "resume" => c.resume(&name),
            "heal" => c.heal(&name),
            _ => unreachable!(),
        }
    }
    eprintln!("faults: {faults:?}; {} jobs accepted", submitted.len());
    // Every node is back in the cluster (a cut-off node registers again
    // once its lease expired).
    wait_until(
        Duration::from_secs(60),
        "every node ready again",
        || {
            let v = c.rnx_json("n1", &["node", "list"]);
            v["nodes"]
                .as_array()
                .is_some_and(|a| a.len() == nodes.len() && a.iter().all(|n| n["state"] == "ready"))
        },
        || c.status(),
    );
    assert!(!submitted.is_empty(), "no job was accepted");
    // Every accepted job ends (they may run again after a lost node).
    wait_until(
        Duration::from_secs(180),
        "every accepted job's end",
        || {
            let list = jobs(&c, "n1");
            submitted.iter().all(|(_, id)| {
                list.iter().any(|j| {
                    j["id"] == id.as_str()
                        && j["state"]
                            .as_str()
                            .is_some_and(|s| s != "RUNNING" && s != "QUEUED")
                })
            })
        },
        || c.status(),
    );
    check_history(&c, true);
}

/// Milliseconds from spawning `rnx job run --follow -- true` through `via`
/// to its exit, `n` times.
fn start_to_exit_ms(c: &DevCluster, via: &str, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            c.rnx_ok(via, &["job", "run", "--follow", "--", "true"]);
            t.elapsed().as_secs_f64() * 1_000.0
        })
        .collect()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// The recovery distribution and the remote start (bench/cluster-recovery.sh):
/// `CLUSTER_TRIALS` (default 10) node kills and as many partitions, each
/// timed from the fault until the job's next attempt runs elsewhere; and
/// `rnx job run --follow -- true` through n1 placed on n1 itself and on
/// another node. Prints one JSON line (`CLUSTER_BENCH {...}`).
#[test]
#[ignore = "a benchmark: bench/cluster-recovery.sh runs it"]
fn cluster_recovery_and_remote_start_benchmark() {
    let trials: usize = std::env::var("CLUSTER_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let c = up(3);
    let mut kill = Vec::new();
    let mut partition = Vec::new();
    for i in 0..trials {
        let t = lose_node(&c, "kill");
        c.restart("n3");
        kill.push(t);
        let p = lose_node(&c, "partition");
        partition.push(p);
        eprintln!("trial {}: kill {t:.2} s, partition {p:.2} s", i + 1);
        wait_until(
            Duration::from_secs(30),
            "n3 ready again",
            || {
                let v = c.rnx_json("n1", &["node", "list"]);
                v["nodes"]
                    .as_array()
                    .is_some_and(|a| a.len() == 3 && a.iter().all(|n| n["state"] == "ready"))
            },
            || c.status(),
        );
    }
    // Starts: through n1, placed on n1 (the others drained), then on n2.
    for n in ["n2", "n3"] {
        c.rnx_ok("n1", &["node", "drain", n]);
    }
    let _ = start_to_exit_ms(&c, "n1", 3);
    let mut local = start_to_exit_ms(&c, "n1", 20);
    c.rnx_ok("n1", &["node", "drain", "n1"]);
    c.rnx_ok("n1", &["node", "undrain", "n2"]);
    let _ = start_to_exit_ms(&c, "n1", 3);
    let mut remote = start_to_exit_ms(&c, "n1", 20);
    check_history(&c, true);
    drop(c);
    // The same start on a single node (no cluster), in the same run.
    let single = joblet_e2e::Node::start().expect("single node");
    let time = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|_| {
                let t = Instant::now();
                single.run(&["--follow", "--", "true"]);
                t.elapsed().as_secs_f64() * 1_000.0
            })
            .collect()
    };
    let _ = time(3);
    let mut alone = time(20);
    println!(
        "CLUSTER_BENCH {}",
        serde_json::json!({
            "start_single_node_ms_median": median(&mut alone),
            "trials": trials,
            "kill_s": kill,
            "partition_s": partition,
            "start_local_ms_median": median(&mut local),
            "start_remote_ms_median": median(&mut remote),
            "start_local_ms": local,
            "start_remote_ms": remote,
        })
    );
    assert!(kill.iter().chain(&partition).all(|t| *t < 30.0));
}

#[test]
fn a_gpu_taken_offline_on_a_node_gets_no_new_cluster_job() {
    let c = up(3);
    c.rnx_ok("n1", &["node", "drain", "n1"]);
    c.rnx_ok("n1", &["node", "drain", "n3"]);
    // n2 keeps GPUs 6 and 7 only.
    for g in 0..6 {
        c.rnx_ok("n2", &["gpu", "offline", "--gpu-id", &g.to_string()]);
    }
    // The leader hears of it through n2's record, put again within a
    // second of a change.
    std::thread::sleep(Duration::from_millis(2_500));
    let id = c
        .rnx_ok("n1", &["job", "run", "--gpu=2", "--", "true"])
        .trim()
        .to_string();
    wait_until(
        Duration::from_secs(30),
        "the job's end",
        || {
            job(&c, "n1", &id)["state"]
                .as_str()
                .is_some_and(|s| s != "QUEUED" && s != "RUNNING")
        },
        || c.status(),
    );
    let st = job(&c, "n1", &id);
    assert_eq!(st["state"], "COMPLETED", "{st}");
    assert_eq!(st["gpus"]["indices"], serde_json::json!([6, 7]), "{st}");
    // A third GPU cannot be had: the job waits rather than land on one.
    let id = c
        .rnx_ok("n1", &["job", "run", "--gpu=3", "--", "true"])
        .trim()
        .to_string();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(job(&c, "n1", &id)["state"], "QUEUED");
    c.rnx_ok("n2", &["gpu", "online", "--gpu-id", "0"]);
    wait_until(
        Duration::from_secs(30),
        "the 3-GPU job ran once GPU 0 came back",
        || job(&c, "n1", &id)["state"] == "COMPLETED",
        || c.status(),
    );
    check_history(&c, true);
}
