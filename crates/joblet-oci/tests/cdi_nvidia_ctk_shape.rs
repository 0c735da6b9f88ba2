//! Our generated CDI spec against what `nvidia-ctk cdi generate` writes
//! (its own test's expected spec, `fixtures/cdi/`): for the node that
//! test describes (one GPU, `nvidiactl`, two driver libraries under a
//! driver root), the same top-level keys, version, device names and
//! nodes, and shared env / device nodes / mounts in the same shape. The
//! one difference, on purpose and documented in `cdi::generate`: no
//! `nvidia-cdi-hook` hooks (and so no `NVIDIA_CTK_LIBCUDA_DIR`, which
//! only those hooks read).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use joblet_oci::cdi::{self, FileMount, Format, Gpu, GpuNode, Node, Spec};
use serde_json::Value;

const DRIVER_ROOT: &str = "/driver-root";

fn fixture() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/cdi/nvidia-container-toolkit__generate_test-default-expected.EXTRACTED.yaml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fixture with its Go template's driver root filled in, read with
/// our own parser and checked with our own rules.
fn nvidia_ctk() -> Spec {
    let text = fixture().replace("{{ .driverRoot }}", DRIVER_ROOT);
    let spec = Spec::parse(text.as_bytes(), Format::Yaml, Path::new("fixture.yaml")).unwrap();
    cdi::validate(&spec, Path::new("fixture.yaml")).unwrap();
    spec
}

/// The same node as our generator's input: the fixture's kind, GPU 0,
/// `nvidiactl`, and its two libraries mounted where nvidia-ctk mounts
/// them.
fn ours() -> Spec {
    let root = Path::new(DRIVER_ROOT);
    let node = |name: &str| Node {
        path: Path::new("/dev").join(name),
        host_path: root.join("dev").join(name),
    };
    let lib = |rel: &str| FileMount {
        host_path: root.join(rel),
        container_path: PathBuf::from("/").join(rel),
    };
    cdi::generate(&GpuNode {
        kind: "example.com/device".parse().unwrap(),
        gpus: vec![Gpu {
            index: 0,
            uuid: "GPU-6d1c5ba2-49a2-4b4e-9d2c-58e0e1a8b3a1".into(),
            node: node("nvidia0"),
            mig: Vec::new(),
        }],
        control_nodes: vec![node("nvidiactl")],
        files: vec![
            lib("lib/x86_64-linux-gnu/libcuda.so.999.88.77"),
            lib("lib/x86_64-linux-gnu/vdpau/libvdpau_nvidia.so.999.88.77"),
        ],
        env: Vec::new(),
    })
}

fn json(spec: &Spec) -> Value {
    serde_json::from_str(&spec.to_json().unwrap()).unwrap()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn top_level_keys_version_and_kind_match() {
    let (theirs, ours) = (json(&nvidia_ctk()), json(&ours()));
    assert_eq!(keys(&theirs), keys(&ours));
    assert_eq!(
        keys(&ours),
        BTreeSet::from(["cdiVersion", "kind", "devices", "containerEdits"].map(String::from))
    );
    // Both need 0.5.0 (hostPath, names starting with a digit) and no more.
    assert_eq!(theirs["cdiVersion"], "0.5.0");
    assert_eq!(ours["cdiVersion"], theirs["cdiVersion"]);
    assert_eq!(ours["kind"], theirs["kind"]);
}

#[test]
fn every_nvidia_ctk_device_is_ours_with_the_same_nodes() {
    let (theirs, ours) = (nvidia_ctk(), ours());
    for d in &theirs.devices {
        let mine = ours
            .devices
            .iter()
            .find(|m| m.name == d.name)
            .unwrap_or_else(|| panic!("no device `{}` in ours", d.name));
        assert_eq!(mine.container_edits, d.container_edits, "{}", d.name);
    }
    // Ours also names the GPU by UUID (nvidia-ctk's default names both
    // ways; its test asked for index names only), and "all" comes last.
    let names: Vec<&str> = ours.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        ["0", "GPU-6d1c5ba2-49a2-4b4e-9d2c-58e0e1a8b3a1", "all"]
    );
    // Device nodes carry exactly path and hostPath in both.
    let (tj, oj) = (json(&theirs), json(&ours));
    let node_keys = |v: &Value| keys(&v["devices"][0]["containerEdits"]["deviceNodes"][0]);
    assert_eq!(node_keys(&tj), node_keys(&oj));
    assert_eq!(
        node_keys(&oj),
        BTreeSet::from(["path".to_string(), "hostPath".to_string()])
    );
}

#[test]
fn shared_edits_match_except_the_hooks() {
    let (theirs, ours) = (nvidia_ctk(), ours());
    let (t, o) = (&theirs.container_edits, &ours.container_edits);
    assert_eq!(o.device_nodes, t.device_nodes);
    assert_eq!(o.mounts, t.mounts);
    assert!(o.env.contains(&"NVIDIA_VISIBLE_DEVICES=void".to_string()));
    // The documented difference: nvidia-ctk's hooks all run
    // nvidia-cdi-hook, and its one other variable is for them.
    assert!(o.hooks.is_empty());
    assert!(!t.hooks.is_empty());
    assert!(t.hooks.iter().all(
        |h| h.path == Path::new("/usr/bin/nvidia-cdi-hook") && h.hook_name == "createContainer"
    ));
    let extra: Vec<&String> = t.env.iter().filter(|e| !o.env.contains(e)).collect();
    assert_eq!(extra, ["NVIDIA_CTK_LIBCUDA_DIR=/lib/x86_64-linux-gnu"]);
    // Without the hooks the shared edits have the same keys.
    let (tj, oj) = (json(&theirs), json(&ours));
    let mut their_keys = keys(&tj["containerEdits"]);
    their_keys.remove("hooks");
    assert_eq!(their_keys, keys(&oj["containerEdits"]));
    assert_eq!(
        keys(&tj["containerEdits"]["mounts"][0]),
        keys(&oj["containerEdits"]["mounts"][0])
    );
}
