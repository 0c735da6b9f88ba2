//! GPU sharing and partitioning end to end through the daemon on simulated
//! GPUs: `nvidia-uvm-tools` only for `--gpu-profiling`; MIG slices as
//! allocation units (the A100 `nvidia-smi -q -x` capture, whose one GPU is
//! split into four 1g.20gb slices) with the parent node and exactly the
//! slice's two access-capability nodes, read from a fake procfs; and MPS
//! control daemons per shared GPU, run through a fake control program
//! that records how it is called and leaves a marker in its `/dev/shm`,
//! which MPS jobs (and only they) see in theirs. Needs root.

mod gpu_common;
mod sandbox_common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use gpu_common::*;
use sandbox_common::*;

/// `rnx job run ARGS` that must be refused; returns its stderr.
fn refused(node: &GpuNode, args: &[&str]) -> String {
    let mut all = vec!["job", "run"];
    all.extend_from_slice(args);
    let out = node.rnx(&all);
    assert!(!out.status.success(), "{args:?} was accepted");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn uvm_tools_only_for_gpu_profiling_and_no_mig_on_a_node_without_it() {
    let node = start_gpu("");
    let tools = node.dev.join("nvidia-uvm-tools");
    let script = gated("ls /dev; cat /dev/nvidia-uvm-tools 2>&1; true");
    let plain = node.run(&["--gpu=1", "--", "sh", "-c", &script]);
    let prof = node.run(&["--gpu=1", "--gpu-profiling", "--", "sh", "-c", &script]);
    let st_plain = wait_state(&node, &plain, "RUNNING");
    let st_prof = wait_state(&node, &prof, "RUNNING");
    // `job status` shows the flag.
    assert_eq!(st_plain["gpu_profiling"], false, "{st_plain}");
    assert_eq!(st_prof["gpu_profiling"], true, "{st_prof}");
    let human = node.rnx_ok(&["job", "status", &prof]);
    assert!(human.contains("GPU Profiling: enabled\n"), "{human}");
    let human = node.rnx_ok(&["job", "status", &plain]);
    assert!(!human.contains("GPU Profiling"), "{human}");
    for (kind, dir) in job_cgroups(&node, &plain) {
        assert_eq!(
            open_in_cgroup(&node, &dir, &tools),
            "EPERM",
            "{kind}: plain job"
        );
        let uvm = node.dev.join("nvidia-uvm");
        assert_eq!(open_in_cgroup(&node, &dir, &uvm), "ENXIO", "{kind}: uvm");
    }
    for (kind, dir) in job_cgroups(&node, &prof) {
        assert_eq!(
            open_in_cgroup(&node, &dir, &tools),
            "ENXIO",
            "{kind}: profiling job"
        );
    }
    for id in [&plain, &prof] {
        std::fs::write(work_file(&node, id, "gate"), "").unwrap();
    }
    let out = |id: &str| {
        let st = node.wait_done(id, T);
        assert_eq!(st["state"], "COMPLETED", "{st}");
        node.rnx_ok(&["job", "log", id])
    };
    let plain_out = out(&plain);
    assert!(
        !plain_out.lines().any(|l| l == "nvidia-uvm-tools"),
        "{plain_out}"
    );
    assert!(
        plain_out.contains("/dev/nvidia-uvm-tools: No such file or directory"),
        "{plain_out}"
    );
    let prof_out = out(&prof);
    assert!(
        prof_out.lines().any(|l| l == "nvidia-uvm-tools"),
        "{prof_out}"
    );
    assert!(
        prof_out.contains("/dev/nvidia-uvm-tools: No such device or address"),
        "{prof_out}"
    );

    let err = refused(&node, &["--gpu=1", "--mig=1g.10gb", "--", "true"]);
    assert!(
        err.contains("No GPUs available: the job asks for MIG slices (--mig=1g.10gb) but no GPU on this node has MIG slices; run it without --mig"),
        "{err}"
    );
}

/// The A100 capture's GPU: device minor 1, MIG instances 3 to 6 (CI 0).
const MIG_GPU_MINOR: u32 = 1;
const MIG_INSTANCES: [u32; 4] = [3, 4, 5, 6];

/// The capability minors the fake driver gives instance `gi`: GI, CI.
fn caps_of(gi: u32) -> [u32; 2] {
    [gi * 10, gi * 10 + 1]
}

/// A node serving the MIG capture, with a procfs of its own listing the
/// `nvidia-caps` major and the capability minors, and their nodes.
fn start_mig() -> GpuNode {
    start_gpu_with(
        &joblet_e2e::fixture("nvidia-smi-xml/a100-sxm4-v12.xml"),
        |side| {
            let proc = side.join("proc");
            std::fs::create_dir_all(proc.join("driver/nvidia-caps")).unwrap();
            std::fs::write(
                proc.join("devices"),
                format!("Character devices:\n  1 mem\n195 nvidia-frontend\n{UVM_MAJOR} nvidia-uvm\n{CAPS_MAJOR} nvidia-caps\n\nBlock devices:\n  8 sd\n"),
            )
            .unwrap();
            let mut minors = String::from("config 1\nmonitor 2\n");
            let dev = side.join("dev");
            make_node(&dev, "nvidia-caps/nvidia-cap1", CAPS_MAJOR, 1);
            make_node(&dev, "nvidia-caps/nvidia-cap2", CAPS_MAJOR, 2);
            for gi in MIG_INSTANCES {
                let [g, c] = caps_of(gi);
                minors.push_str(&format!(
                    "gpu{MIG_GPU_MINOR}/gi{gi}/access {g}\ngpu{MIG_GPU_MINOR}/gi{gi}/ci0/access {c}\n"
                ));
                for m in [g, c] {
                    make_node(
                        &dev,
                        &format!("nvidia-caps/nvidia-cap{m}"),
                        CAPS_MAJOR,
                        m.into(),
                    );
                }
            }
            std::fs::write(proc.join("driver/nvidia-caps/mig-minors"), minors).unwrap();
            format!("  proc_dir: \"{}\"\n", proc.display())
        },
    )
}

#[test]
fn a_mig_job_gets_its_slice_and_nothing_else() {
    let node = start_mig();
    let gpu = &node.rnx_json(&["gpu", "status", "--all"])["gpus"][0];
    let instance_of = |uuid: &str| -> u32 {
        gpu["mig_instances"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["uuid"] == uuid)
            .unwrap_or_else(|| panic!("{uuid} is not a MIG instance of {gpu}"))["gpu_instance_id"]
            .as_u64()
            .unwrap() as u32
    };
    let script = gated(
        "ls /dev /dev/nvidia-caps; for n in /dev/nvidia* /dev/nvidia-caps/*; do cat $n 2>&1; done; echo CVD=$CUDA_VISIBLE_DEVICES; echo NVD=$NVIDIA_VISIBLE_DEVICES",
    );
    let a = node.run(&["--gpu=1", "--mig=1g.20gb", "--", "sh", "-c", &script]);
    let b = node.run(&["--gpu=1", "--mig=1G.20GB", "--", "sh", "-c", &gated("true")]);
    let st_a = wait_state(&node, &a, "RUNNING");
    let st_b = wait_state(&node, &b, "RUNNING");
    let uuid_a = st_a["gpus"]["uuids"][0].as_str().unwrap().to_string();
    let uuid_b = st_b["gpus"]["uuids"][0].as_str().unwrap().to_string();
    assert!(uuid_a.starts_with("MIG-"), "{st_a}");
    assert_ne!(uuid_a, uuid_b, "two jobs, two slices");
    assert_eq!(st_a["gpus"]["sharing"], "mig", "{st_a}");
    assert_eq!(st_a["gpus"]["indices"], json!([0]), "{st_a}");
    let human = node.rnx_ok(&["job", "status", &a]);
    assert!(
        human.contains("GPUs: [0] (1 MIG slice allocated)"),
        "{human}"
    );
    // The profile as asked for, in its canonical spelling.
    assert!(human.contains("MIG Profile: 1g.20gb\n"), "{human}");
    assert_eq!(st_a["mig_profile"], "1g.20gb", "{st_a}");
    assert_eq!(st_b["mig_profile"], "1g.20gb", "{st_b}");
    assert_eq!(st_a["gpu_profiling"], false, "{st_a}");
    let (gi_a, gi_b) = (instance_of(&uuid_a), instance_of(&uuid_b));
    let own = caps_of(gi_a);
    let other = caps_of(gi_b);

    // Each device-filter path alone: its parent node and its two caps
    // open through to the absent driver; another slice's caps, the
    // administrative caps and another GPU's node are denied.
    for (kind, dir) in job_cgroups(&node, &a) {
        let open = |name: &str| open_in_cgroup(&node, &dir, &node.dev.join(name));
        assert_eq!(open(&format!("nvidia{MIG_GPU_MINOR}")), "ENXIO", "{kind}");
        for m in own {
            assert_eq!(
                open(&format!("nvidia-caps/nvidia-cap{m}")),
                "ENXIO",
                "{kind}: own cap {m}"
            );
        }
        for m in other.into_iter().chain([1, 2]) {
            assert_eq!(
                open(&format!("nvidia-caps/nvidia-cap{m}")),
                "EPERM",
                "{kind}: cap {m}"
            );
        }
        assert_eq!(open("nvidia0"), "EPERM", "{kind}: another GPU's node");
    }

    for id in [&a, &b] {
        std::fs::write(work_file(&node, id, "gate"), "").unwrap();
    }
    let st = node.wait_done(&a, T);
    assert_eq!(st["state"], "COMPLETED", "{st}");
    let out = node.rnx_ok(&["job", "log", &a]);
    // `ls` prints each directory as a `DIR:` line, its entries, a blank.
    let listed = |header: &str| -> Vec<String> {
        assert!(out.lines().any(|l| l == header), "no {header} in {out}");
        out.lines()
            .skip_while(|l| *l != header)
            .skip(1)
            .take_while(|l| !l.is_empty() && !l.contains(':'))
            .map(str::to_string)
            .collect()
    };
    let mut nodes: Vec<String> = listed("/dev:")
        .into_iter()
        .filter(|l| l.starts_with("nvidia"))
        .collect();
    nodes.sort();
    let mut want = vec![
        "nvidia-caps".to_string(),
        "nvidia-uvm".into(),
        format!("nvidia{MIG_GPU_MINOR}"),
        "nvidiactl".into(),
    ];
    want.sort();
    assert_eq!(nodes, want, "{out}");
    let mut caps = listed("/dev/nvidia-caps:");
    caps.sort();
    let mut want_caps: Vec<String> = own.iter().map(|m| format!("nvidia-cap{m}")).collect();
    want_caps.sort();
    assert_eq!(caps, want_caps, "{out}");
    for m in own {
        assert!(
            out.contains(&format!(
                "/dev/nvidia-caps/nvidia-cap{m}: No such device or address"
            )),
            "{out}"
        );
    }
    assert!(!out.contains("Operation not permitted"), "{out}");
    assert!(out.contains(&format!("CVD={uuid_a}\n")), "{out}");
    assert!(out.contains(&format!("NVD={uuid_a}\n")), "{out}");
    node.wait_done(&b, T);
    let rec = audit_of(&node, &a);
    assert_eq!(rec["sharing"], "mig", "{rec}");
    assert_eq!(rec["gpu_uuids"], json!([uuid_a]), "{rec}");

    // What cannot be placed here, with what the node has.
    for (args, want) in [
        (&["--gpu=1", "--", "true"][..], "every GPU on this node is split into MIG slices (1g.20gb (4 slices)); ask for slices with --mig=PROFILE"),
        (&["--gpu=1", "--mig=3g.40gb", "--", "true"][..], "no MIG slice of profile 3g.40gb; it has 1g.20gb (4 slices)"),
        (&["--gpu=5", "--mig=1g.20gb", "--", "true"][..], "asks for 5 MIG slices of profile 1g.20gb but this node has 4; ask for at most 4"),
    ] {
        let err = refused(&node, args);
        assert!(err.contains("No GPUs available: ") && err.contains(want), "{args:?}: {err}");
    }
    // Four slices at once, then the fifth waits.
    let gate4: Vec<String> = (0..4)
        .map(|_| node.run(&["--gpu=1", "--mig=1g.20gb", "--", "sh", "-c", &gated("true")]))
        .collect();
    for id in &gate4 {
        wait_state(&node, id, "RUNNING");
    }
    let fifth = node.run(&["--gpu=1", "--mig=1g.20gb", "--", "true"]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(node.status(&fifth)["state"], "QUEUED");
    std::fs::write(work_file(&node, &gate4[0], "gate"), "").unwrap();
    let st = node.wait_done(&fifth, T);
    assert_eq!(st["state"], "COMPLETED", "{st}");
    for id in &gate4[1..] {
        std::fs::write(work_file(&node, id, "gate"), "").unwrap();
        node.wait_done(id, T);
    }
}

/// A control program standing in for `nvidia-cuda-mps-control`: records
/// `start CVD PIPE LOG` for `-d` (and makes the pipe dir's `control` and
/// writes `control CVD` to [`marker`] in its `/dev/shm`), `cmd CVD PIPE
/// <stdin line>` otherwise, in `<side>/calls`; `-d` fails while
/// `<side>/fail` exists.
fn fake_control(side: &Path) -> String {
    let p = side.join("mps-control");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nif [ \"$1\" = -d ]; then\n  if [ -e '{s}/fail' ]; then echo 'fake MPS: no such GPU' >&2; exit 2; fi\n  echo \"start $CUDA_VISIBLE_DEVICES $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY\" >> '{s}/calls'\n  touch \"$CUDA_MPS_PIPE_DIRECTORY/control\"\n  echo \"control $CUDA_VISIBLE_DEVICES\" > '/dev/shm/{m}'\nelse\n  read cmd\n  echo \"cmd $CUDA_VISIBLE_DEVICES $CUDA_MPS_PIPE_DIRECTORY $cmd\" >> '{s}/calls'\nfi\n",
            s = side.display(),
            m = marker(side),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!(
        "  sharing: mps\n  mps_control: \"{}\"\n  mps_dir: \"{}\"\n  mps_active_thread_percentage: 50\n",
        p.display(),
        side.join("mps").display()
    )
}

/// The name of the fake control daemon's `/dev/shm` marker, unique to the
/// test (without its own namespace it would land in the host's).
fn marker(side: &Path) -> String {
    format!(
        "joblet-mps-marker-{}",
        side.file_name().unwrap().to_str().unwrap()
    )
}

/// Whether `path` is the root of a mount (another device than its parent).
fn is_mount_point(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(path), std::fs::metadata(path.join(".."))) {
        (Ok(p), Ok(parent)) => p.dev() != parent.dev(),
        _ => false,
    }
}

/// Detaches, when dropped, whatever is still mounted under the test's
/// side dir (the daemon's MPS tmpfs after a failed test) and removes a
/// marker the fake control daemon left in the host's `/dev/shm`. Declare
/// it after the node: it must run before the side dir is removed.
struct SideMounts(std::path::PathBuf);

impl Drop for SideMounts {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(Path::new("/dev/shm").join(marker(&self.0)));
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut points: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split(' ').nth(4))
            .filter(|p| Path::new(p).starts_with(&self.0))
            .collect();
        points.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for p in points {
            let _ = nix::mount::umount2(p, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

fn calls(node: &GpuNode) -> Vec<String> {
    std::fs::read_to_string(node.side.join("calls"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn wait_calls(node: &GpuNode, what: &str, pred: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = Instant::now() + T;
    loop {
        let c = calls(node);
        if pred(&c) {
            return c;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {c:?}\n{}",
            node.daemon_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for `shm` to be unmounted: the daemon unmounts a GPU's tmpfs
/// right after its `quit` returns, so just after the fake recorded the call
/// it may still be there.
fn wait_unmounted(shm: &Path) {
    let deadline = Instant::now() + T;
    while is_mount_point(shm) {
        assert!(Instant::now() < deadline, "{} still mounted", shm.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Takes every GPU but 0 offline, so shared jobs meet on GPU 0; returns
/// its UUID.
fn only_gpu_0(node: &GpuNode) -> String {
    for i in 1..8 {
        node.rnx_ok(&["gpu", "offline", "--gpu-id", &i.to_string()]);
    }
    node.rnx_json(&["gpu", "status", "--all"])["gpus"][0]["uuid"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn one_mps_control_daemon_per_gpu_started_once_stopped_when_idle_and_taken_over_after_a_restart() {
    let mut node = start_gpu_with(
        &joblet_e2e::fixture("nvml-profiles/mock-nvml-config-a100.yaml"),
        fake_control,
    );
    let _mounts = SideMounts(node.side.clone());
    let uuid = only_gpu_0(&node);
    let pipe = node.side.join("mps").join(&uuid).join("pipe");
    let log = node.side.join("mps").join(&uuid).join("log");
    let shm = node.side.join("mps").join(&uuid).join("shm");
    let marker = marker(&node.side);
    let script = gated(&format!(
        "ls $CUDA_MPS_PIPE_DIRECTORY; env | grep ^CUDA_MPS_ | sort; cat /dev/shm/{marker}; echo job > /dev/shm/from-job-$$"
    ));
    let a = node.run(&[
        "--gpu=1",
        "--gpu-memory=1GB",
        "-e",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=20",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let b = node.run(&["--gpu=1", "--gpu-memory=2GB", "--", "sh", "-c", &script]);
    wait_state(&node, &a, "RUNNING");
    wait_state(&node, &b, "RUNNING");
    // Started once for the GPU, with its own dirs, then given the node's
    // thread share as its default.
    assert_eq!(
        calls(&node),
        [
            format!("start {uuid} {} {}", pipe.display(), log.display()),
            format!(
                "cmd {uuid} {} set_default_active_thread_percentage 50",
                pipe.display()
            ),
        ]
    );
    // The control daemon wrote its /dev/shm: the GPU's tmpfs, not the
    // host's.
    assert!(is_mount_point(&shm), "no tmpfs at {}", shm.display());
    assert_eq!(
        std::fs::read_to_string(shm.join(&marker)).unwrap(),
        format!("control {uuid}\n")
    );
    assert!(
        !Path::new("/dev/shm").join(&marker).exists(),
        "the control daemon wrote the host's /dev/shm"
    );
    std::fs::write(work_file(&node, &a, "gate"), "").unwrap();
    let st = node.wait_done(&a, T);
    assert_eq!(st["state"], "COMPLETED", "{st}");
    let out = node.rnx_ok(&["job", "log", &a]);
    for line in [
        "control",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=20",
        "CUDA_MPS_LOG_DIRECTORY=/run/nvidia/mps/log",
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1024M",
        "CUDA_MPS_PIPE_DIRECTORY=/run/nvidia/mps/pipe",
    ] {
        assert!(out.lines().any(|l| l == line), "{line} not in:\n{out}");
    }
    // The job's /dev/shm is the control daemon's: it read the marker, and
    // what it wrote is in the GPU's tmpfs.
    assert!(
        out.lines().any(|l| l == format!("control {uuid}")),
        "the MPS job does not see the control daemon's /dev/shm:\n{out}"
    );
    let from_job: Vec<String> = std::fs::read_dir(&shm)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("from-job-"))
        .collect();
    assert_eq!(from_job.len(), 1, "{from_job:?}");
    // B still uses the daemon: no quit.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(calls(&node).len(), 2, "{:?}", calls(&node));
    std::fs::write(work_file(&node, &b, "gate"), "").unwrap();
    node.wait_done(&b, T);
    let out = node.rnx_ok(&["job", "log", &b]);
    assert!(
        out.lines()
            .any(|l| l == "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l == "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2048M"),
        "{out}"
    );
    let c = wait_calls(&node, "quit on idle", |c| c.len() >= 3);
    assert_eq!(c[2], format!("cmd {uuid} {} quit", pipe.display()));
    // The tmpfs went with its control daemon.
    wait_unmounted(&shm);

    // An exclusive job on an MPS node is no MPS client: no MPS variables,
    // and a private /dev/shm.
    let c_job = node.run(&[
        "--gpu=1",
        "--gpu-memory=1GB",
        "--",
        "sh",
        "-c",
        &gated("true"),
    ]);
    wait_state(&node, &c_job, "RUNNING");
    wait_calls(&node, "a second start", |c| c.len() == 5);
    // GPU 0 is shared now: the exclusive job gets GPU 1.
    node.rnx_ok(&["gpu", "online", "--gpu-id", "1"]);
    let excl_script =
        format!("env | grep ^CUDA_MPS_ ; cat /dev/shm/{marker} 2>/dev/null || echo NO-MARKER");
    let excl = run_job(&node, &["--gpu=1", "--", "sh", "-c", &excl_script]);
    assert_eq!(excl.status["state"], "COMPLETED", "{}", excl.status);
    assert!(!excl.stdout.contains("CUDA_MPS_"), "{}", excl.stdout);
    assert_eq!(excl.stdout.trim(), "NO-MARKER", "{}", excl.stdout);
    assert!(shm.join(&marker).exists(), "the MPS tmpfs is up meanwhile");
    assert_eq!(calls(&node).len(), 5);

    // The new MPS job started it again. The daemon stops with that job
    // running: the job keeps running, and so do its control daemon and
    // tmpfs; the restarted daemon takes them over instead of starting a
    // second control daemon the job could not reach.
    assert!(calls(&node)[3].starts_with(&format!("start {uuid} ")));
    node.node.node.stop_daemon();
    assert_eq!(calls(&node).len(), 5, "{:?}", calls(&node));
    assert!(is_mount_point(&shm), "the running job's tmpfs stays");
    node.node.node.restart().unwrap();
    wait_state(&node, &c_job, "RUNNING");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        calls(&node).len(),
        5,
        "taken over, not restarted: {:?}",
        calls(&node)
    );
    assert!(shm.join(&marker).exists(), "the same tmpfs as before");
    std::fs::write(work_file(&node, &c_job, "gate"), "").unwrap();
    let st = node.wait_done(&c_job, T);
    assert_eq!(st["state"], "COMPLETED", "{st}");
    // Its last job gone, the taken-over control daemon is stopped.
    let c = wait_calls(&node, "quit after the restart", |c| c.len() >= 6);
    assert_eq!(c[5], format!("cmd {uuid} {} quit", pipe.display()));
    wait_unmounted(&shm);
}

#[test]
fn an_mps_job_whose_control_daemon_cannot_start_fails_and_frees_its_gpu() {
    let node = start_gpu_with(
        &joblet_e2e::fixture("nvml-profiles/mock-nvml-config-a100.yaml"),
        fake_control,
    );
    let _mounts = SideMounts(node.side.clone());
    let uuid = only_gpu_0(&node);
    std::fs::write(node.side.join("fail"), "").unwrap();
    let id = node.run(&["--gpu=1", "--gpu-memory=1GB", "--", "true"]);
    let st = node.wait_done(&id, T);
    assert_eq!(st["state"], "FAILED", "{st}");
    let reason = st["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("MPS control daemon for GPU 0 (GPU-")
            && reason.contains("fake MPS: no such GPU"),
        "{st}"
    );
    assert!(calls(&node).is_empty());
    let shm = node.side.join("mps").join(&uuid).join("shm");
    assert!(!is_mount_point(&shm), "a failed start left its tmpfs");
    std::fs::remove_file(node.side.join("fail")).unwrap();
    // Its GPU came back: the next job gets it and the daemon starts.
    let done = run_job(&node, &["--gpu=1", "--gpu-memory=1GB", "--", "true"]);
    assert_eq!(done.status["state"], "COMPLETED", "{}", done.status);
    assert!(calls(&node)[0].starts_with("start "), "{:?}", calls(&node));

    for (args, want) in [
        (&["--gpu=2", "--gpu-memory=1GB", "--", "true"][..], "with gpu.sharing: mps a job with --gpu-memory is an MPS client of one GPU's control daemon"),
        (&["--gpu=1", "--gpu-memory=1GB", "-e", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=0", "--", "true"][..], "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
    ] {
        let err = refused(&node, args);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let v: Value = node.rnx_json(&["job", "list"]);
    assert_eq!(
        v.as_array().map(Vec::len),
        Some(2),
        "refused jobs are not recorded: {v}"
    );
}
