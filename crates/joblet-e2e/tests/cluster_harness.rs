//! The cluster harness itself (`scripts/dev-cluster.sh` through
//! `joblet_e2e::cluster::DevCluster`): 3 etcd members and joblet nodes with
//! simulated GPUs, each in a network namespace of its own; faults; a
//! teardown that leaves nothing. Cluster behaviour (scheduling across
//! nodes) is the cluster tests' business, not this file's.
//!
//! The two tests run in parallel on purpose: two clusters on one machine
//! at once, same subnet, separate hubs.

use std::process::Output;
use std::time::{Duration, Instant};

use joblet_e2e::cluster::{wait_until, ClusterOptions, DevCluster, EtcdChange};
use serde_json::Value;

fn text(out: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout).trim_end(),
        String::from_utf8_lossy(&out.stderr).trim_end()
    )
}

/// `etcdctl endpoint health` (every member) from `name`'s namespace.
fn etcd_healthy_from(c: &DevCluster, name: &str) -> bool {
    c.etcdctl_in(name, &["endpoint", "health"]).status.success()
}

/// `rnx --json whoami` from `from`'s namespace and identity against `to`.
fn whoami_to(c: &DevCluster, from: &str, to: &str) -> Result<Value, String> {
    let out = c.rnx_to(from, to, &["--json", "whoami"]);
    if !out.status.success() {
        return Err(text(&out));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("bad JSON ({e}): {}", text(&out)))
}

/// The answer came from `node`'s daemon over TCP: the endpoint is its
/// address, and the state disk it reports is its state dir.
fn assert_answered_by(c: &DevCluster, who: &Value, node: &str) {
    assert_eq!(who["address"], c.address(node).as_str(), "{who}");
    assert_eq!(
        who["state_disk"]["path"],
        c.state_dir(node).display().to_string().as_str(),
        "{who}"
    );
    assert_eq!(who["role"], "admin", "{who}");
}

fn assert_nothing_left(c: &DevCluster) {
    let left = c.leftovers();
    assert!(
        left.is_empty(),
        "cluster {} left behind:\n{}",
        c.tag(),
        left.join("\n")
    );
}

#[test]
fn three_nodes_share_a_ca_and_a_network_one_is_partitioned_and_healed() {
    let t0 = Instant::now();
    let mut c = DevCluster::up(3, ClusterOptions::default()).expect("cluster up");
    eprintln!(
        "3 etcd + 3 nodes up in {:.1}s ({})",
        t0.elapsed().as_secs_f64(),
        c.dir().display()
    );
    let nodes = c.node_names();
    assert_eq!(nodes, ["n1", "n2", "n3"]);
    assert_eq!(c.etcd_members(), ["e1", "e2", "e3"]);

    // Every namespace exists; every member runs.
    for name in c.etcd_members().iter().chain(&nodes) {
        assert!(
            std::path::Path::new("/run/netns")
                .join(c.netns(name))
                .exists(),
            "no namespace for {name}"
        );
        assert!(
            c.pid(name).is_some(),
            "{name} is not running:\n{}",
            c.status()
        );
    }

    // etcd is healthy as seen from each node's namespace.
    for n in &nodes {
        let out = c.etcdctl_in(n, &["endpoint", "health"]);
        assert!(out.status.success(), "etcd from {n}: {}", text(&out));
        let healthy = String::from_utf8_lossy(&out.stdout)
            .lines()
            .chain(String::from_utf8_lossy(&out.stderr).lines())
            .filter(|l| l.contains("is healthy"))
            .count();
        assert_eq!(healthy, 3, "etcd from {n}: {}", text(&out));
    }

    // One CA: n1 made it, the others were given it before their first start.
    let ca = |n: &str| std::fs::read(c.state_dir(n).join("pki/ca.crt")).expect("ca.crt");
    for n in &nodes {
        assert_eq!(ca(n), ca("n1"), "{n} has another CA");
        let admin = std::fs::read(c.state_dir(n).join("pki/admin.crt")).unwrap();
        if n != "n1" {
            let n1_admin = std::fs::read(c.state_dir("n1").join("pki/admin.crt")).unwrap();
            assert_ne!(admin, n1_admin, "{n} should issue its own admin cert");
        }
    }

    // Each daemon answers in its own namespace, at its own address, over
    // TCP and mutual TLS (the rnx config names no local socket)…
    for n in &nodes {
        let cfg = std::fs::read_to_string(c.rnx_config(n)).unwrap();
        assert!(!cfg.contains("socket:"), "{n}'s rnx config: {cfg}");
        let who = c.rnx_json(n, &["whoami"]);
        assert_answered_by(&c, &who, n);
    }
    // …and to another node's identity: n1's admin cert is accepted by n2,
    // n2's server cert verifies against n1's copy of the CA, and the
    // namespaces reach each other through the hub.
    for (from, to) in [("n1", "n2"), ("n2", "n3"), ("n3", "n1")] {
        let who = whoami_to(&c, from, to).unwrap_or_else(|e| panic!("{from} -> {to}: {e}"));
        assert_answered_by(&c, &who, to);
    }

    // Partition n2: it can reach neither etcd nor the other nodes, and they
    // cannot reach it; the others still reach etcd and each other.
    c.partition("n2");
    assert!(c.status().contains("partitioned"), "{}", c.status());
    let out = c.etcdctl_in("n2", &["endpoint", "health"]);
    assert!(
        !out.status.success(),
        "n2 reaches etcd while partitioned: {}",
        text(&out)
    );
    for n in ["n1", "n3"] {
        assert!(
            etcd_healthy_from(&c, n),
            "{n} cannot reach etcd while n2 is partitioned"
        );
    }
    let out = c.rnx_to("n1", "n2", &["whoami"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "n1 -> n2 while n2 is partitioned should be 'cannot connect': {}",
        text(&out)
    );
    let who = whoami_to(&c, "n3", "n1").expect("n3 -> n1 during n2's partition");
    assert_answered_by(&c, &who, "n1");
    // n2's daemon itself is alive and answers inside its namespace.
    assert!(c.pid("n2").is_some());
    let who = c.rnx_json("n2", &["whoami"]);
    assert_answered_by(&c, &who, "n2");

    // Heal: n2 reaches etcd and is reached again.
    c.heal("n2");
    wait_until(
        Duration::from_secs(20),
        "n2 to reach etcd after heal",
        || etcd_healthy_from(&c, "n2"),
        || c.status(),
    );
    let who = whoami_to(&c, "n1", "n2").expect("n1 -> n2 after heal");
    assert_answered_by(&c, &who, "n2");
    assert!(!c.status().contains("partitioned"), "{}", c.status());

    // etcd's history as the cluster tests read it.
    let before = c.etcd_revision().unwrap();
    for args in [
        &["put", "/harness-probe/a", "1"][..],
        &["put", "/harness-probe/b", ""],
        &["put", "/harness-probe/a", "2"],
        &["del", "/harness-probe/a"],
    ] {
        let out = c.etcdctl(args);
        assert!(out.status.success(), "etcdctl {args:?}: {}", text(&out));
    }
    let history = c.etcd_history("/harness-probe/").unwrap();
    let r = |i: i64| before + i;
    assert_eq!(
        history,
        vec![
            EtcdChange {
                revision: r(1),
                key: "/harness-probe/a".into(),
                value: Some(b"1".to_vec())
            },
            EtcdChange {
                revision: r(2),
                key: "/harness-probe/b".into(),
                value: Some(Vec::new())
            },
            EtcdChange {
                revision: r(3),
                key: "/harness-probe/a".into(),
                value: Some(b"2".to_vec())
            },
            EtcdChange {
                revision: r(4),
                key: "/harness-probe/a".into(),
                value: None
            },
        ],
        "history from revision {before}"
    );
    // The whole history is in revision order and ends at the current revision.
    let all = c.etcd_history("").unwrap();
    assert!(all.windows(2).all(|w| w[0].revision <= w[1].revision));
    assert_eq!(all.last().map(|e| e.revision), Some(r(4)));

    // Teardown leaves no namespace, process or cgroup; down is idempotent.
    let t1 = Instant::now();
    c.down().expect("down");
    eprintln!("down in {:.1}s", t1.elapsed().as_secs_f64());
    assert_nothing_left(&c);
    c.down().expect("a second down");
}

#[test]
fn kill_pause_and_restart_nodes_and_etcd_members() {
    let opts = ClusterOptions {
        gpus: None,
        ..ClusterOptions::default()
    };
    let mut c = DevCluster::up(2, opts).expect("cluster up");
    assert_eq!(c.node_names(), ["n1", "n2"]);

    // A node's daemon: kill -9, then restart with the same state dir.
    let old = c.pid("n2").expect("n2 runs");
    c.kill("n2");
    assert_eq!(c.pid("n2"), None, "{}", c.status());
    let out = c.rnx_to("n1", "n2", &["whoami"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    c.restart("n2");
    let new = c.pid("n2").expect("n2 runs again");
    assert_ne!(old, new);
    assert_answered_by(&c, &whoami_to(&c, "n1", "n2").unwrap(), "n2");
    assert!(
        c.daemon_log("n2").matches("=== ").count() >= 2,
        "both starts are in n2's log"
    );

    // A paused daemon does not answer; resumed, it does.
    c.pause("n1");
    let out = c.rnx_to("n2", "n1", &["whoami"]);
    assert!(!out.status.success(), "a paused daemon answered");
    c.resume("n1");
    assert_answered_by(&c, &whoami_to(&c, "n2", "n1").unwrap(), "n1");

    // An etcd member: killed, the other two keep a quorum; restarted from
    // its data dir, it rejoins.
    c.kill("e1");
    assert_eq!(c.pid("e1"), None);
    // (A write may fail while the two elect a new leader, if e1 led.)
    wait_until(
        Duration::from_secs(15),
        "a write with e1 down (two members keep a quorum)",
        || {
            c.etcdctl_in("n1", &["put", "/harness-probe/quorum", "2"])
                .status
                .success()
        },
        || format!("{}\n{}", c.status(), c.log_tail("e2", 20)),
    );
    c.restart("e1");
    let out = c
        .in_netns("hub", "etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints=http://{}:2379", c.ip("e1")))
        .args(["get", "/harness-probe/quorum", "--print-value-only"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "2");

    // A paused member is unhealthy until resumed.
    c.pause("e2");
    let e2 = |c: &DevCluster| {
        c.in_netns("hub", "etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints=http://{}:2379", c.ip("e2")))
            .args([
                "--dial-timeout=1s",
                "--command-timeout=2s",
                "endpoint",
                "health",
            ])
            .output()
            .unwrap()
            .status
            .success()
    };
    assert!(!e2(&c), "a paused member is healthy");
    c.resume("e2");
    wait_until(
        Duration::from_secs(20),
        "e2 healthy after SIGCONT",
        || e2(&c),
        || c.log_tail("e2", 20),
    );

    // A killed daemon, its shims killed too; down cleans up after both.
    c.kill("n1");
    c.kill_shims("n1");
    c.down().expect("down");
    assert_nothing_left(&c);
}
