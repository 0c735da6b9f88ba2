//! `/metrics` end to end: a real Prometheus server (Debian `prometheus`,
//! installed by scripts/setup.sh) scrapes a simulated 8-GPU node every
//! second, and the PromQL of NVIDIA's dcgm-exporter Grafana dashboard
//! (12239) sees every GPU; `hpc_job` attributes a running job's memory;
//! on a shared GPU each job's own series shows its own processes' memory;
//! `promtool check metrics` finds nothing in the `joblet_*` series; HTTPS
//! with the node's certificate; and a metrics listener that cannot bind
//! keeps the node from starting. Needs root (sandboxed GPU jobs).

mod gpu_common;
mod sandbox_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use gpu_common::*;
use joblet_e2e::{free_port, Node, NodeOptions};

const MIB: u64 = 1024 * 1024;

/// The panels of dashboard 12239 as published on grafana.com (Grafana
/// 6.7, `$instance` and `$gpu` variables), each with the number of series
/// it must return on an 8-GPU node whose GPUs each hold at most one job.
const DASHBOARD_12239: &[(&str, &str, usize)] = &[
    (
        "GPU Temperature",
        r#"DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"}"#,
        8,
    ),
    (
        "GPU Avg. Temp",
        r#"avg(DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"})"#,
        1,
    ),
    (
        "GPU Power Usage",
        r#"DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"}"#,
        8,
    ),
    (
        "GPU Power Total",
        r#"sum(DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"})"#,
        1,
    ),
    (
        "GPU SM Clocks",
        r#"DCGM_FI_DEV_SM_CLOCK{instance=~"$instance", gpu=~"$gpu"} * 1000000"#,
        8,
    ),
    (
        "GPU Utilization",
        r#"DCGM_FI_DEV_GPU_UTIL{instance=~"$instance", gpu=~"$gpu"}"#,
        8,
    ),
    (
        "GPU Framebuffer Mem Used",
        r#"DCGM_FI_DEV_FB_USED{instance=~"$instance", gpu=~"$gpu"}"#,
        8,
    ),
];

/// The same panels in the dashboard's current revision in NVIDIA's
/// repository (grafana/dcgm-exporter-dashboard.json: `$Hostname`).
const DASHBOARD_CURRENT: &[(&str, &str, usize)] = &[
    (
        "GPU Temperature",
        r#"max(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, uuid)"#,
        8,
    ),
    (
        "GPU Avg. Temp",
        r#"avg(DCGM_FI_DEV_GPU_TEMP{Hostname=~"$Hostname", gpu=~"$gpu"})"#,
        1,
    ),
    (
        "GPU Power Total",
        r#"sum(max(DCGM_FI_DEV_POWER_USAGE{Hostname=~"$Hostname", gpu=~"$gpu"}) by (gpu))"#,
        1,
    ),
    (
        "GPU SM Clocks",
        r#"max(DCGM_FI_DEV_SM_CLOCK{Hostname=~"$Hostname", gpu=~"$gpu"} * 1000000) by (Hostname, UUID, gpu)"#,
        8,
    ),
    (
        "GPU Framebuffer Mem Used",
        r#"max(DCGM_FI_DEV_FB_USED{Hostname=~"$Hostname", gpu=~"$gpu"}) by (Hostname, gpu, GPU_I_ID, GPU_I_PROFILE)"#,
        8,
    ),
];

/// `GET path` over plain HTTP/1.0; the body of a 200 answer.
fn http_get(address: &str, path: &str) -> String {
    let mut s = TcpStream::connect(address).unwrap_or_else(|e| panic!("{address}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(
        head.starts_with("HTTP/1.") && head.contains(" 200 "),
        "{head}\n{body}"
    );
    body.to_owned()
}

fn scrape(node: &Node) -> String {
    http_get(
        &node
            .metrics_address()
            .expect("server.json names the metrics address"),
        "/metrics",
    )
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A Prometheus server of its own (temp config and storage), scraping
/// `target` every second; killed on drop.
struct Prometheus {
    child: Child,
    address: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: &str) -> Prometheus {
        assert!(
            Path::new("/usr/bin/prometheus").exists(),
            "/usr/bin/prometheus is missing: run scripts/setup.sh (Debian package prometheus)"
        );
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: joblet\n    static_configs:\n      - targets: [\"{target}\"]\n"
            ),
        )
        .unwrap();
        let address = format!("127.0.0.1:{}", free_port());
        let child = Command::new("/usr/bin/prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={address}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("log")).unwrap())
            .spawn()
            .unwrap();
        Prometheus {
            child,
            address,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("log")).unwrap_or_default()
    }

    /// An instant query's result vector (empty while Prometheus is not up).
    fn query(&self, promql: &str) -> Vec<Value> {
        let path = format!("/api/v1/query?query={}", url_encode(promql));
        let Ok(mut s) = TcpStream::connect(&self.address) else {
            return Vec::new();
        };
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(s, "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.address).unwrap();
        let mut text = String::new();
        if s.read_to_string(&mut text).is_err() {
            return Vec::new();
        }
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
        let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// Polls `promql` until `ok` accepts its result (30 s at most).
    fn wait(&self, promql: &str, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = self.query(promql);
            if ok(&r) {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus never answered {promql} as expected; last: {r:?}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sample_value(r: &Value) -> f64 {
    r["value"][1].as_str().unwrap().parse().unwrap()
}

#[test]
fn prometheus_scrapes_the_node_and_dcgm_dashboard_queries_see_each_gpu_and_each_jobs_memory() {
    let node = start_gpu("");
    let id = node.run(&["--gpu=1", "--", "sleep", "120"]);
    wait_state(&node, &id, "RUNNING");
    let g = gpus_of(&node, &id)[0];
    inject(
        &node.state,
        json!({"gpus": {g.to_string(): {"memory_used_bytes": 5000 * MIB}}}),
    );
    let target = node
        .metrics_address()
        .expect("metrics address in server.json");
    let prom = Prometheus::start(&target);
    prom.wait("count(DCGM_FI_DEV_GPU_TEMP)", |r| {
        r.len() == 1 && sample_value(&r[0]) == 8.0
    });
    let instance = regex_quote(&target);
    for (panel, expr, want) in DASHBOARD_12239 {
        let q = expr.replace("$instance", &instance).replace("$gpu", ".*");
        let r = prom.wait(&q, |r| r.len() == *want);
        if *want == 8 {
            let mut gpus: Vec<u64> = r
                .iter()
                .map(|s| s["metric"]["gpu"].as_str().unwrap().parse().unwrap())
                .collect();
            gpus.sort_unstable();
            assert_eq!(gpus, (0..8).collect::<Vec<_>>(), "{panel}: {r:?}");
        }
    }
    for (panel, expr, want) in DASHBOARD_CURRENT {
        let q = expr.replace("$Hostname", ".+").replace("$gpu", ".*");
        let r = prom.wait(&q, |r| r.len() == *want);
        assert!(
            r.iter().all(|s| sample_value(s).is_finite()),
            "{panel}: {r:?}"
        );
    }
    // The job's GPU memory, attributed by hpc_job from joblet's own
    // allocation (no prolog files).
    let r = prom.wait("sum by (hpc_job) (DCGM_FI_DEV_FB_USED)", |r| {
        r.iter()
            .any(|s| s["metric"]["hpc_job"] == id.as_str() && sample_value(s) == 5000.0)
    });
    assert_eq!(r.len(), 2, "the job's GPU and the GPUs no job holds: {r:?}");
    let owner = prom.wait(&format!("DCGM_FI_DEV_FB_USED{{hpc_job=\"{id}\"}}"), |r| {
        r.len() == 1
    });
    assert_eq!(owner[0]["metric"]["gpu"], g.to_string(), "{owner:?}");
    assert!(
        owner[0]["metric"]["owner"]
            .as_str()
            .is_some_and(|o| !o.is_empty()),
        "{owner:?}"
    );

    // promtool lints the whole scrape: dcgm's own conventions are flagged
    // (so the check ran), joblet's series are clean.
    let body = scrape(&node);
    let mut lint = Command::new("/usr/bin/promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    lint.stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = lint.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        report.contains("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
        "promtool should flag dcgm's counter without _total: {report}"
    );
    let ours: Vec<&str> = report.lines().filter(|l| l.contains("joblet_")).collect();
    assert!(ours.is_empty(), "promtool on joblet_* series: {ours:?}");
    assert!(body.contains("joblet_job_starts_total"), "{body}");
    node.rnx_ok(&["job", "stop", &id]);
}

/// Prometheus regex for exactly `s`.
fn regex_quote(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = ".+*?()[]{}|^$\\".contains(c);
            special.then_some('\\').into_iter().chain(Some(c))
        })
        .collect::<String>()
        .replace('\\', "\\\\")
}

#[test]
fn on_a_shared_gpu_each_jobs_memory_series_shows_its_own_processes() {
    let node = start_gpu("  sharing: shared\n");
    // Only GPU 0 takes jobs, so both share it.
    for i in 1..8 {
        node.rnx_ok(&["gpu", "offline", "--gpu-id", &i.to_string()]);
    }
    let a = node.run(&["--gpu=1", "--gpu-memory=4GB", "--", "sleep", "120"]);
    let b = node.run(&["--gpu=1", "--gpu-memory=4GB", "--", "sleep", "120"]);
    wait_state(&node, &a, "RUNNING");
    wait_state(&node, &b, "RUNNING");
    assert_eq!((gpus_of(&node, &a), gpus_of(&node, &b)), (vec![0], vec![0]));
    let (pa, pb) = (job_pid(&node, &a), job_pid(&node, &b));
    inject(
        &node.state,
        json!({"gpus": {"0": {
            "memory_used_bytes": 4000 * MIB,
            "processes": [
                {"pid": pa, "used_memory_bytes": 1000 * MIB},
                {"pid": pb, "used_memory_bytes": 3000 * MIB},
            ],
        }}}),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let body = scrape(&node);
        let mine = |job: &str| {
            body.lines()
                .find(|l| {
                    l.starts_with("joblet_job_gpu_memory_bytes{")
                        && l.contains(&format!("job_id=\"{job}\""))
                })
                .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        };
        if mine(&a) == Some(1000 * MIB) && mine(&b) == Some(3000 * MIB) {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "each job's memory never showed: a={:?} b={:?}\n{body}",
            mine(&a),
            mine(&b)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // dcgm-exporter's view of the shared GPU: the device's whole memory,
    // once per job holding it.
    let fb: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("DCGM_FI_DEV_FB_USED{gpu=\"0\""))
        .collect();
    assert_eq!(fb.len(), 2, "{fb:?}");
    for job in [&a, &b] {
        assert!(
            fb.iter()
                .any(|l| l.contains(&format!("hpc_job=\"{job}\"")) && l.ends_with(" 4000")),
            "{fb:?}"
        );
    }
    for job in [&a, &b] {
        node.rnx_ok(&["job", "stop", job]);
    }
}

#[test]
fn https_metrics_use_the_nodes_certificate() {
    let node = Node::start_with(NodeOptions {
        extra_config: "metrics:\n  address: \"127.0.0.1:0\"\n  tls: true\n".into(),
        ..NodeOptions::default()
    })
    .unwrap();
    let address = node.metrics_address().unwrap();
    let ca = node.state_dir().join("pki").join("ca.crt");
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--cacert"])
        .arg(&ca)
        .arg(format!("https://{address}/metrics"))
        .output()
        .expect("curl");
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(body.contains("# TYPE joblet_jobs gauge"), "{body}");
    // Plain HTTP is not served there.
    let plain = Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "5"])
        .arg(format!("http://{address}/metrics"))
        .output()
        .unwrap();
    assert!(!plain.status.success());
}

#[test]
fn a_bad_metrics_address_or_a_taken_port_keeps_the_node_from_starting() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let err = Node::start_with(NodeOptions {
        extra_config: format!("metrics:\n  address: \"127.0.0.1:{port}\"\n"),
        ..NodeOptions::default()
    })
    .err()
    .expect("a node whose metrics port is taken must not start")
    .to_string();
    assert!(
        err.contains(&format!(
            "cannot listen on 127.0.0.1:{port} (metrics.address)"
        )),
        "{err}"
    );
    let err = Node::start_with(NodeOptions {
        extra_config: "metrics:\n  address: \"localhost:9400\"\n".into(),
        ..NodeOptions::default()
    })
    .err()
    .expect("a bad metrics.address must not start")
    .to_string();
    assert!(
        err.contains("metrics.address") && err.contains("IP:PORT"),
        "{err}"
    );
    drop(taken);
}
