//! `joblet cdi generate` as users run it, for the simulated 8-GPU A100
//! node (its device nodes are `mknod`-made `c 195 N` nodes in a temp
//! dir): the spec passes the CDI project's own JSON schema (vendored in
//! `crates/joblet-oci/tests/data/cdi-schema`, checked with Python's
//! `jsonschema` from `scripts/pytools.sh`), and Debian's podman, given the
//! spec in `/var/run/cdi`, puts exactly the asked-for GPU's node in a
//! container, where opening it gives ENXIO (allowed, no driver behind it).
//!
//! Each test uses a spec file and a kind of its own
//! (`joblet-test-<pid>-<n>.example/gpu`), removed when it ends, so tests
//! run in parallel with each other and with anything else in
//! `/var/run/cdi`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use joblet_e2e::{joblet_bin, SimulatedGpus};
use serde_json::Value;

/// The simulated A100 node and a config naming it.
struct SimNode {
    gpus: SimulatedGpus,
    _dir: tempfile::TempDir,
    config: PathBuf,
}

fn sim_node() -> SimNode {
    let gpus = SimulatedGpus::a100();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("joblet-config.yml");
    std::fs::write(&config, gpus.config("")).unwrap();
    SimNode {
        gpus,
        _dir: dir,
        config,
    }
}

fn cdi_generate(node: &SimNode, args: &[&str]) -> Output {
    Command::new(joblet_bin())
        .args(["cdi", "generate", "--config"])
        .arg(&node.config)
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A kind no other test (or process) uses.
fn unique_vendor() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "joblet-test-{}-{}.example",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    )
}

fn pytools_python() -> PathBuf {
    let venv = std::env::var_os("JOBLET_PYTOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/local/lib/joblet-pytools"));
    let python = venv.join("bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run scripts/setup.sh (it installs the test tools, jsonschema among them, with scripts/pytools.sh)",
        python.display()
    );
    python
}

/// Validates each file (JSON by name, else YAML) against the vendored
/// schema; prints `FILE: valid` or each error, exits 1 if any is invalid.
const VALIDATE: &str = r#"
import json, pathlib, sys
import jsonschema, referencing, yaml
from referencing.jsonschema import DRAFT7
d = pathlib.Path(sys.argv[1])
schema = json.loads((d / "schema.json").read_text())
defs = json.loads((d / "defs.json").read_text())
registry = referencing.Registry().with_resource("defs.json", DRAFT7.create_resource(defs))
validator = jsonschema.Draft7Validator(schema, registry=registry)
bad = 0
for f in sys.argv[2:]:
    text = pathlib.Path(f).read_text()
    doc = json.loads(text) if f.endswith(".json") else yaml.safe_load(text)
    errors = list(validator.iter_errors(doc))
    # The schema leaves the spec's shared edits unchecked (no property
    # for them): they have the devices' type, so check them as that.
    if isinstance(doc, dict) and "containerEdits" in doc:
        edits = validator.evolve(schema={"$ref": "defs.json#/definitions/containerEdits"})
        errors += list(edits.iter_errors(doc["containerEdits"]))
    for e in errors:
        print(f"{f}: {list(e.absolute_path)}: {e.message}")
    if errors:
        bad += 1
    else:
        print(f"{f}: valid")
sys.exit(1 if bad else 0)
"#;

fn validate(files: &[&Path]) -> Output {
    let schema_dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../joblet-oci/tests/data/cdi-schema");
    Command::new(pytools_python())
        .arg("-c")
        .arg(VALIDATE)
        .arg(schema_dir)
        .args(files)
        .output()
        .unwrap()
}

#[test]
fn the_spec_for_a_simulated_a100_node_passes_the_cdi_schema() {
    let node = sim_node();
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("gpu.json");
    std::fs::write(&json_path, ok(&cdi_generate(&node, &["--json"]))).unwrap();
    let yaml_path = dir.path().join("gpu.yaml");
    let said = ok(&cdi_generate(
        &node,
        &["--output", yaml_path.to_str().unwrap()],
    ));
    assert!(
        said.contains("wrote") && said.contains("SIMULATED"),
        "{said}"
    );
    let out = validate(&[&json_path, &yaml_path]);
    assert!(out.status.success(), "{out:?}");
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(report.matches(": valid").count(), 2, "{report}");

    // The YAML and the JSON say the same; the YAML says it is simulated.
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let yaml = std::fs::read_to_string(&yaml_path).unwrap();
    assert!(yaml.starts_with("# CDI spec"), "{yaml}");
    assert!(yaml.contains("# SIMULATED GPUs"), "{yaml}");
    let from_yaml: Value = serde_norway::from_str(&yaml).unwrap();
    assert_eq!(from_yaml, spec);

    // The lowest version its fields need: podman 4.3.1 skips 0.6.0.
    assert_eq!(spec["cdiVersion"], "0.5.0");
    assert_eq!(spec["kind"], "nvidia.com/gpu");
    assert!(spec.get("annotations").is_none());
    let devices = spec["devices"].as_array().unwrap();
    let names: Vec<&str> = devices
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    let mut want: Vec<String> = Vec::new();
    for i in 0..8 {
        want.push(i.to_string());
        want.push(format!("GPU-12345678-1234-1234-1234-12345678000{i}"));
    }
    want.push("all".into());
    assert_eq!(names, want);
    // Each GPU's node is the simulation's mknod-made one.
    for (i, d) in devices.iter().take(16).enumerate() {
        let nodes = d["containerEdits"]["deviceNodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 1, "{d}");
        let n = i / 2;
        assert_eq!(nodes[0]["path"], format!("/dev/nvidia{n}"));
        assert_eq!(
            nodes[0]["hostPath"],
            node.gpus
                .dev
                .join(format!("nvidia{n}"))
                .display()
                .to_string()
        );
    }
    assert_eq!(
        devices[16]["containerEdits"]["deviceNodes"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
    let shared = &spec["containerEdits"];
    let control: Vec<&str> = shared["deviceNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        control,
        ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    );
    let env: Vec<&str> = shared["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(env.contains(&"NVIDIA_VISIBLE_DEVICES=void"), "{env:?}");
    assert!(env.contains(&"JOBLET_GPU_SIMULATED=1"), "{env:?}");
    assert!(shared.get("hooks").is_none(), "{shared}");
    for m in shared["mounts"].as_array().unwrap() {
        assert_eq!(
            m["options"],
            serde_json::json!(["ro", "nosuid", "nodev", "rbind", "rprivate"])
        );
    }

    // The validator does reject what the schema forbids, in a device's
    // edits and in the shared ones.
    let mut broken = spec.clone();
    broken.as_object_mut().unwrap().remove("kind");
    broken["devices"][0]["containerEdits"]["deviceNodes"][0]["uid"] = Value::from(-1);
    broken["containerEdits"]["mounts"][0]["options"] = Value::from("ro");
    let broken_path = dir.path().join("broken.json");
    std::fs::write(&broken_path, broken.to_string()).unwrap();
    let out = validate(&[&broken_path]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "'kind' is a required property",
        "['devices', 0, 'containerEdits', 'deviceNodes', 0, 'uid']: -1 is less than the minimum of 0",
        "['mounts', 0, 'options']: 'ro' is not of type 'array'",
    ] {
        assert!(report.contains(needle), "{needle}: {report}");
    }
}

#[test]
fn bad_names_and_unwritable_outputs_are_refused_clearly() {
    let node = sim_node();
    let out = cdi_generate(&node, &["--vendor", "1nvidia.com"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("vendor `1nvidia.com` should start with a letter")
            && err.contains("expected vendor.com/class"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/gpu.yaml");
    let out = cdi_generate(&node, &["--output", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&missing.display().to_string()), "{err}");
    // `--output -` is stdout.
    assert!(ok(&cdi_generate(&node, &["--output", "-"])).contains("cdiVersion: 0.5.0"));

    let help = Command::new(joblet_bin())
        .args(["cdi", "generate", "--help"])
        .output()
        .unwrap();
    let help = ok(&help);
    for needle in [
        "/etc/cdi",
        "podman run",
        "--device nvidia.com/gpu=0",
        "nvidia-ctk",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
}

/// A spec file in `/var/run/cdi`, removed (with the directory, if this
/// made it and it is empty) on drop.
struct SpecFile {
    path: PathBuf,
    made_dir: Option<PathBuf>,
}

impl SpecFile {
    fn new(vendor: &str) -> SpecFile {
        let dir = PathBuf::from("/var/run/cdi");
        let made_dir = (!dir.exists()).then(|| dir.clone());
        std::fs::create_dir_all(&dir).unwrap();
        SpecFile {
            path: dir.join(format!("{vendor}.yaml")),
            made_dir,
        }
    }
}

impl Drop for SpecFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Some(dir) = &self.made_dir {
            // Fails, as it should, when another test's spec is still there.
            let _ = std::fs::remove_dir(dir);
        }
    }
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// Whether an ELF executable asks for a program interpreter (is
/// dynamically linked): a `PT_INTERP` program header.
fn has_interpreter(elf: &[u8]) -> bool {
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return true;
    };
    (0..usize::from(phnum)).any(|i| {
        let at = phoff as usize + i * usize::from(phentsize);
        elf.get(at..at + 4) == Some(&3u32.to_le_bytes()[..])
    })
}

/// A root filesystem with a static busybox as `/bin/sh`.
fn busybox_root() -> tempfile::TempDir {
    let busybox = Path::new("/bin/busybox");
    let elf = std::fs::read(busybox).unwrap_or_default();
    assert!(
        elf.starts_with(b"\x7fELF\x02") && !has_interpreter(&elf),
        "{} is missing or not a static 64-bit binary: run scripts/setup.sh (it installs Debian's busybox-static)",
        busybox.display()
    );
    let root = tempfile::Builder::new()
        .prefix("joblet-e2e-cdi-root-")
        .tempdir()
        .unwrap();
    let bin = root.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::copy(busybox, bin.join("busybox")).unwrap();
    std::os::unix::fs::symlink("busybox", bin.join("sh")).unwrap();
    root
}

/// Hybrid cgroups (a cgroup2 hierarchy at `/sys/fs/cgroup/unified`):
/// crun refuses them, so podman must use runc.
fn hybrid_cgroups() -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some("/sys/fs/cgroup/unified"))
}

#[test]
fn podman_gives_a_container_exactly_the_gpu_it_asks_for() {
    let Some(podman) = on_path("podman") else {
        eprintln!(
            "SKIPPED podman_gives_a_container_exactly_the_gpu_it_asks_for: podman is not installed (scripts/setup.sh installs Debian's podman)"
        );
        return;
    };
    let node = sim_node();
    let vendor = unique_vendor();
    let spec = SpecFile::new(&vendor);
    ok(&cdi_generate(
        &node,
        &[
            "--vendor",
            &vendor,
            "--class",
            "gpu",
            "--output",
            spec.path.to_str().unwrap(),
        ],
    ));
    let root = busybox_root();
    let script = "ls -l /dev; cat /dev/nvidia0 2>&1; cat /dev/nvidiactl 2>&1; \
                  echo \"env NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES JOBLET_GPU_SIMULATED=$JOBLET_GPU_SIMULATED\"";
    let mut cmd = Command::new(podman);
    cmd.args(["run", "--rm", "--network=none"]);
    if hybrid_cgroups() {
        assert!(
            on_path("runc").is_some(),
            "podman's crun refuses hybrid cgroups and runc is not installed"
        );
        cmd.args(["--runtime", "runc"]);
    }
    // Limits well under this shell's hard ones: podman's defaults are
    // above them, and the runtime may not raise a limit.
    cmd.args([
        "--ulimit",
        "nofile=1024:1024",
        "--ulimit",
        "nproc=1024:1024",
    ])
    .arg("--device")
    .arg(format!("{vendor}/gpu=0"))
    .arg("--rootfs")
    .arg(root.path())
    .args(["/bin/sh", "-c", script]);
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{out:?}\n(the spec: {})",
        std::fs::read_to_string(&spec.path).unwrap_or_default()
    );
    // The node is there (195:0) and allowed: no driver behind it, ENXIO.
    assert!(
        stdout.contains("can't open '/dev/nvidia0': No such device or address"),
        "{stdout}"
    );
    let nvidia0 = stdout
        .lines()
        .find(|l| l.ends_with(" nvidia0"))
        .unwrap_or_else(|| panic!("no /dev/nvidia0: {stdout}"));
    assert!(
        nvidia0.starts_with('c') && nvidia0.contains("195,   0"),
        "{nvidia0}"
    );
    // The shared control node came too.
    assert!(
        stdout.contains("can't open '/dev/nvidiactl': No such device or address"),
        "{stdout}"
    );
    // No other GPU's node.
    let gpu_nodes: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|name| {
            name.strip_prefix("nvidia")
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        })
        .collect();
    assert_eq!(gpu_nodes, ["nvidia0"], "{stdout}");
    assert!(
        stdout.contains("env NVIDIA_VISIBLE_DEVICES=void JOBLET_GPU_SIMULATED=1"),
        "{stdout}"
    );
}
