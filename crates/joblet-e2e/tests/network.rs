//! Networking: every job gets its own network namespace with only loopback,
//! unless it asks for `--network=host` on a node that allows it.

use joblet_e2e::{Node, NodeOptions};

/// Interface names the job sees, from /proc/net/dev.
fn interfaces(node: &Node, extra: &[&str]) -> Result<Vec<String>, String> {
    let mut args = vec!["job", "run", "-f"];
    args.extend_from_slice(extra);
    args.extend(["--", "sh", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1"]);
    let out = node.rnx(&args);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect())
}

fn host_interfaces() -> Vec<String> {
    let text = std::fs::read_to_string("/proc/net/dev").unwrap();
    text.lines()
        .skip(2)
        .filter_map(|l| l.split(':').next())
        .map(|s| s.trim().to_owned())
        .collect()
}

#[test]
fn jobs_get_loopback_only_and_host_network_needs_the_admin() {
    let node = Node::start().unwrap();
    assert_eq!(interfaces(&node, &[]).unwrap(), ["lo"]);
    assert_eq!(interfaces(&node, &["--network=none"]).unwrap(), ["lo"]);
    let refused = interfaces(&node, &["--network=host"]).unwrap_err();
    assert!(
        refused.contains("not allowed on this node")
            && refused.contains("sandbox.allow_host_network"),
        "{refused}"
    );

    let open = Node::start_with(NodeOptions {
        extra_config: "sandbox:\n  allow_host_network: true\n".into(),
        ..Default::default()
    })
    .unwrap();
    let mut seen = interfaces(&open, &["--network=host"]).unwrap();
    let mut host = host_interfaces();
    seen.sort();
    host.sort();
    assert_eq!(seen, host);
    let list = open.rnx_json(&["job", "list"]);
    let id = list[0]["id"].as_str().unwrap();
    assert_eq!(open.status(id)["network"], "host");
}
