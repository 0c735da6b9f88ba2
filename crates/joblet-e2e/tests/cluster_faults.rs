//! Cluster mode under faults (issue 32), on the dev cluster of
//! `cluster_common`: the scheduler leader killed and SIGSTOPped, etcd's
//! leader killed, and a random fault loop (`CLUSTER_FAULT_SECS`, default
//! 60; `bench/cluster-faults.sh` runs it longer). Every test replays etcd's
//! whole history: no GPU held by two jobs at one revision, every job ended
//! once.

mod cluster_common;

use std::time::{Duration, Instant};

use cluster_common::*;
use joblet_e2e::cluster::{wait_until, DevCluster};
use serde_json::Value;

/// Waits for a leader other than `old` (asked through `via`); returns it
/// and the seconds since `t0`, which must be within the lease TTL (3 s)
/// plus a few seconds.
fn new_leader(c: &DevCluster, via: &str, old: &str, t0: Instant) -> (String, f64) {
    let mut new = String::new();
    wait_until(
        Duration::from_secs(30),
        "a new leader",
        || match leader(c, via) {
            Some(l) if l != old => {
                new = l;
                true
            }
            _ => false,
        },
        || c.status(),
    );
    let took = t0.elapsed().as_secs_f64();
    assert!(took < 3.0 + 7.0, "{new} led only after {took} s");
    (new, took)
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
    let (new, took) = new_leader(&c, &via, &old, t0);
    eprintln!("scheduler leader kill -9: {new} leads after {took:.2} s");
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
    let (new, took) = new_leader(&c, &via, &old, t0);
    eprintln!("scheduler leader SIGSTOP: {new} leads after {took:.2} s");
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
