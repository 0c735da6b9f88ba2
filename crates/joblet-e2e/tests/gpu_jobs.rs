//! GPU jobs end to end through the daemon on simulated GPUs (fake NVML
//! serving the 8-GPU A100 profile) with `mknod`-made device nodes: exactly
//! the job's GPUs inside the sandbox (both device-filter paths), NVML in
//! the job seeing only them, memory quotas, gangs, XIDs, release checks
//! and the audit log. Needs root.

mod gpu_common;
mod sandbox_common;

use std::time::Duration;

use serde_json::{json, Value};

use gpu_common::*;
use sandbox_common::*;

#[test]
fn a_two_gpu_job_gets_exactly_its_nodes_and_nvml_sees_only_them() {
    let node = start_gpu("");
    let list = node.probe.0.path().join("nvml-list");
    let script = format!(
        "ls /dev; for n in /dev/nvidia*; do cat $n 2>&1; done; echo CVD=$CUDA_VISIBLE_DEVICES; echo UUIDS=$JOBLET_GPU_UUIDS; {}",
        list.display()
    );
    let done = run_job(&node, &["--gpu=2", "--", "sh", "-c", &script]);
    let out = &done.stdout;
    assert_eq!(
        done.status["state"], "COMPLETED",
        "{}\n{out}\n{}",
        done.status, done.stderr
    );
    let held = &done.status["gpus"];
    let indices: Vec<u64> = held["indices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(indices.len(), 2, "{}", done.status);
    // Exactly its two GPU nodes (named by minor; the A100 profile's minors
    // equal the indices), the control node and uvm: nothing else.
    let nodes: Vec<&str> = out.lines().filter(|l| l.starts_with("nvidia")).collect();
    let mut want: Vec<String> = indices.iter().map(|i| format!("nvidia{i}")).collect();
    want.extend(["nvidia-uvm".to_string(), "nvidiactl".to_string()]);
    want.sort();
    let mut got: Vec<String> = nodes.iter().map(|s| s.to_string()).collect();
    got.sort();
    assert_eq!(got, want, "{out}");
    // Opening each: the device filter lets it through to the (absent) driver.
    for i in &indices {
        assert!(
            out.contains(&format!("/dev/nvidia{i}: No such device or address")),
            "{out}"
        );
    }
    assert!(!out.contains("Operation not permitted"), "{out}");
    assert!(out.contains("CVD=0,1"), "{out}");
    // NVML inside the job: the simulated driver library, showing only the
    // job's GPUs, in the order CUDA_VISIBLE_DEVICES numbers them.
    let nvml: Value =
        serde_json::from_str(out.lines().last().unwrap()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(nvml["count"], 2, "{nvml}");
    let uuids: Vec<&str> = held["uuids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let seen: Vec<&str> = nvml["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["uuid"].as_str().unwrap())
        .collect();
    assert_eq!(seen, uuids, "{nvml}");
    assert!(out.contains(&format!("UUIDS={}", uuids.join(","))), "{out}");

    // A CPU job: no GPU nodes, no GPU environment.
    let cpu = run_job(&node, &["--", "sh", "-c", "ls /dev; env"]);
    assert_eq!(cpu.status["state"], "COMPLETED", "{}", cpu.status);
    assert!(!cpu.stdout.contains("nvidia"), "{}", cpu.stdout);
    assert!(
        !cpu.stdout.contains("CUDA_VISIBLE_DEVICES"),
        "{}",
        cpu.stdout
    );

    let rec = audit_of(&node, &done.id);
    assert_eq!(rec["ended"], "COMPLETED", "{rec}");
    assert_eq!(rec["gpu_uuids"].as_array().unwrap().len(), 2, "{rec}");
}

/// A host process joined to only one of the job's device-control paths
/// (the v1 devices cgroup, or the cgroup2 dir with the eBPF filter) gets
/// ENXIO on the job's GPU and EPERM on another GPU's node: each path alone
/// enforces the job's GPUs.
#[test]
fn each_device_filter_path_alone_allows_only_the_jobs_gpu() {
    let node = start_gpu("");
    let script = "while [ ! -e gate ]; do sleep 0.05; done";
    let id = node.run(&["--gpu=1", "--", "sh", "-c", script]);
    wait_state(&node, &id, "RUNNING");
    let mine = gpus_of(&node, &id);
    assert_eq!(mine.len(), 1);
    let other = (mine[0] + 1) % 8;
    for (path_kind, dir) in job_cgroups(&node, &id) {
        let probe = |n: u64| open_in_cgroup(&node, &dir, &node.dev.join(format!("nvidia{n}")));
        assert_eq!(probe(mine[0]), "ENXIO", "{path_kind}: the job's GPU");
        assert_eq!(probe(other), "EPERM", "{path_kind}: another GPU");
    }
    std::fs::write(work_file(&node, &id, "gate"), "").unwrap();
    let st = node.wait_done(&id, T);
    assert_eq!(st["state"], "COMPLETED", "{st}");
}

#[test]
fn a_shared_job_over_its_memory_quota_is_killed_and_one_under_it_is_not() {
    let node = start_gpu("  sharing: shared\n");
    let over = node.run(&["--gpu=1", "--gpu-memory=1GB", "--", "sleep", "60"]);
    let under = node.run(&["--gpu=1", "--gpu-memory=1GB", "--", "sleep", "60"]);
    wait_state(&node, &over, "RUNNING");
    wait_state(&node, &under, "RUNNING");
    let (g_over, g_under) = (gpus_of(&node, &over)[0], gpus_of(&node, &under)[0]);
    let (p_over, p_under) = (job_pid(&node, &over), job_pid(&node, &under));
    let mut gpus = serde_json::Map::new();
    let mut add = |g: u64, pid: i32, mb: u64| {
        let e = gpus
            .entry(g.to_string())
            .or_insert_with(|| json!({"processes": []}));
        e["processes"]
            .as_array_mut()
            .unwrap()
            .push(json!({"pid": pid, "used_memory_bytes": mb << 20}));
    };
    add(g_over, p_over, 2048);
    add(g_under, p_under, 512);
    inject(&node.state, json!({ "gpus": gpus }));
    let st = wait_state(&node, &over, "FAILED");
    let reason = st["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("GPU memory quota exceeded: used 2048 MB of 1024 MB on GPU-"),
        "{st}"
    );
    // One more monitor period: the job under its quota keeps running.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(node.status(&under)["state"], "RUNNING");
    inject(&node.state, json!({}));
    node.rnx_ok(&["job", "stop", &under]);
    node.wait_done(&under, T);
    let rec = audit_of(&node, &over);
    assert_eq!(rec["ended"], "FAILED", "{rec}");
    assert!(rec["peak_memory_mb"].as_u64().unwrap() >= 2048, "{rec}");
    assert!(
        rec["reason"].as_str().unwrap().contains("quota exceeded"),
        "{rec}"
    );
}

#[test]
fn a_gang_waits_whole_and_an_xid_79_fails_its_job_and_takes_the_gpu_out() {
    let node = start_gpu("");
    let sleepers: Vec<String> = (0..5)
        .map(|_| node.run(&["--gpu=1", "--", "sleep", "60"]))
        .collect();
    for s in &sleepers {
        wait_state(&node, s, "RUNNING");
    }
    let gang = node.run(&["--gpu=4", "--", "true"]);
    std::thread::sleep(Duration::from_millis(500));
    let st = node.status(&gang);
    assert_eq!(
        st["state"], "QUEUED",
        "3 free GPUs: the 4-GPU gang waits: {st}"
    );
    assert!(gpus_of(&node, &gang).is_empty(), "never half-started");

    // XID 79 (fallen off the bus) on the first sleeper's GPU.
    let victim = &sleepers[0];
    let g = gpus_of(&node, victim)[0];
    inject(
        &node.state,
        json!({"events": [{"gpu": g, "type": "xid", "data": 79}]}),
    );
    let st = wait_state(&node, victim, "FAILED");
    assert!(st["reason"].as_str().unwrap().contains("XID 79"), "{st}");
    // Out of the pool, and released once its job is gone.
    let gs = wait_for(&node, "the GPU degraded and released", || {
        let s = gpu_state(&node, g);
        (s["state"] == "DEGRADED" && s["jobs"].as_array().is_none_or(|j| j.is_empty())).then_some(s)
    });
    assert!(
        gs["state_cause"].as_str().unwrap().contains("XID 79"),
        "{gs}"
    );
    // 3 healthy GPUs free: the gang still waits.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(node.status(&gang)["state"], "QUEUED");
    // One more finishes: 4 healthy free, the gang runs, all at once.
    node.rnx_ok(&["job", "stop", &sleepers[1]]);
    let st = node.wait_done(&gang, T);
    assert_eq!(st["state"], "COMPLETED", "{st}");
    assert_eq!(st["gpus"]["indices"].as_array().unwrap().len(), 4, "{st}");
    assert!(
        !st["gpus"]["indices"]
            .as_array()
            .unwrap()
            .contains(&json!(g)),
        "{st}"
    );
    for s in &sleepers[2..] {
        node.rnx_ok(&["job", "stop", s]);
    }
    let rec = audit_of(&node, victim);
    assert!(rec["reason"].as_str().unwrap().contains("XID 79"), "{rec}");
    audit_of(&node, &gang);
}

/// Runs a one-GPU job whose GPU keeps 4 GiB of memory in use after it
/// (a leaked context, injected while it runs); returns the job's id and
/// the GPU's index once the job has COMPLETED.
fn leave_a_gpu_dirty(node: &GpuNode) -> (String, u64) {
    let id = node.run(&[
        "--gpu=1",
        "--",
        "sh",
        "-c",
        "while [ ! -e gate ]; do sleep 0.05; done",
    ]);
    wait_state(node, &id, "RUNNING");
    let g = gpus_of(node, &id)[0];
    inject(
        &node.state,
        json!({"gpus": {g.to_string(): {"memory_used_bytes": 4096u64 << 20}}}),
    );
    std::thread::sleep(Duration::from_millis(400));
    std::fs::write(
        node.state_dir()
            .join("jobs")
            .join(&id)
            .join("work")
            .join("gate"),
        "",
    )
    .unwrap();
    let st = node.wait_done(&id, T);
    assert_eq!(st["state"], "COMPLETED", "{st}");
    (id, g)
}

#[test]
fn release_quarantines_a_gpu_whose_memory_stays_used() {
    let node = start_gpu("");
    let (id, g) = leave_a_gpu_dirty(&node);
    let gs = wait_for(&node, "the GPU quarantined", || {
        let s = gpu_state(&node, g);
        (s["state"] == "DEGRADED").then_some(s)
    });
    let health = node.rnx_json(&["gpu", "health", "--gpu-id", &g.to_string()]);
    assert!(
        health
            .to_string()
            .contains("quarantined: 4096 MiB of memory still in use"),
        "{gs}\n{health}"
    );
    // Nothing is placed on it afterwards.
    let next = run_job(&node, &["--gpu=1", "--", "true"]);
    assert_eq!(next.status["state"], "COMPLETED");
    assert!(!next.status["gpus"]["indices"]
        .as_array()
        .unwrap()
        .contains(&json!(g)));
    let rec = audit_of(&node, &id);
    assert_eq!(rec["ended"], "COMPLETED", "{rec}");
    // The audit log is also JSON lines next to the database.
    let lines = std::fs::read_to_string(node.state_dir().join("gpu-audit.jsonl")).unwrap();
    assert!(
        lines
            .lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "{lines}"
    );
    assert!(lines.contains(&id), "{lines}");
}

/// A node with `gpu.scrub_policy: reset` whose only `nvidia-smi` (in its
/// `gpu.driver_bin_dirs`) is a script standing in for the driver's: it
/// appends its arguments to `<side>/smi.log`, then runs `then` (shell;
/// `$STATE` is the fake NVML's injection file).
fn start_resetting(then: &str) -> GpuNode {
    use std::os::unix::fs::PermissionsExt;
    let then = then.to_owned();
    start_gpu_with(
        &joblet_e2e::fixture("nvml-profiles/mock-nvml-config-a100.yaml"),
        move |side| {
            let bin = side.join("bin");
            std::fs::create_dir(&bin).unwrap();
            let smi = bin.join("nvidia-smi");
            std::fs::write(
                &smi,
                format!(
                    "#!/bin/sh\nSTATE='{}'\necho \"$@\" >> '{}'\n{then}\n",
                    side.join("nvml-state.json").display(),
                    side.join("smi.log").display(),
                ),
            )
            .unwrap();
            std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
            format!(
                "  scrub_policy: reset\n  driver_bin_dirs: [\"{}\"]\n",
                bin.display()
            )
        },
    )
}

/// The reset the daemon asked of `nvidia-smi`, once it has: the script's
/// log must name the GPU's PCI bus id.
fn wait_for_reset_of(node: &GpuNode, g: u64) {
    let bus = gpu_state(node, g)["pci_bus_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let log = node.side.join("smi.log");
    wait_for(node, "nvidia-smi --gpu-reset", || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|l| !l.is_empty())
            .map(Value::from)
    });
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(calls.trim(), format!("--gpu-reset -i {bus}"), "{calls}");
}

/// `scrub_policy: reset`: a GPU left dirty is reset (`nvidia-smi
/// --gpu-reset -i <bus id>`), and when the reset cleans it (the stand-in
/// clears the injected memory use) it goes back to the pool.
#[test]
fn reset_policy_resets_a_dirty_gpu_and_returns_it_when_the_reset_cleans_it() {
    let node =
        start_resetting("printf '{\"gpus\": {}}' > \"$STATE.tmp\" && mv \"$STATE.tmp\" \"$STATE\"");
    let (id, g) = leave_a_gpu_dirty(&node);
    wait_for_reset_of(&node, g);
    let gs = wait_for(&node, "the GPU back in the pool", || {
        let s = gpu_state(&node, g);
        (s["state"] == "AVAILABLE").then_some(s)
    });
    let health = node.rnx_json(&["gpu", "health", "--gpu-id", &g.to_string()]);
    assert!(
        !health.to_string().contains("quarantined"),
        "{gs}\n{health}"
    );
    // Placed again: a job asking for every GPU gets this one too.
    let next = run_job(&node, &["--gpu=8", "--", "true"]);
    assert_eq!(next.status["state"], "COMPLETED", "{}", next.status);
    assert!(next.status["gpus"]["indices"]
        .as_array()
        .unwrap()
        .contains(&json!(g)));
    assert_eq!(audit_of(&node, &id)["ended"], "COMPLETED");
}

/// `scrub_policy: reset`: a reset that fails leaves the GPU quarantined
/// (DEGRADED), with the reason and the reset's own error.
#[test]
fn reset_policy_quarantines_a_gpu_whose_reset_fails() {
    let node =
        start_resetting("echo 'Unable to reset this GPU: in use by another client' >&2; exit 3");
    let (_, g) = leave_a_gpu_dirty(&node);
    wait_for_reset_of(&node, g);
    let gs = wait_for(&node, "the GPU quarantined", || {
        let s = gpu_state(&node, g);
        (s["state"] == "DEGRADED").then_some(s)
    });
    let health = node
        .rnx_json(&["gpu", "health", "--gpu-id", &g.to_string()])
        .to_string();
    for part in [
        "quarantined: 4096 MiB of memory still in use",
        "reset failed",
        "in use by another client",
    ] {
        assert!(health.contains(part), "{part}: {gs}\n{health}");
    }
    let next = run_job(&node, &["--gpu=1", "--", "true"]);
    assert!(!next.status["gpus"]["indices"]
        .as_array()
        .unwrap()
        .contains(&json!(g)));
}

/// `scrub_policy: reset`: a reset that succeeds but leaves the memory in
/// use (the stand-in changes nothing) quarantines the GPU too, saying so.
#[test]
fn reset_policy_quarantines_a_gpu_that_stays_dirty_after_its_reset() {
    let node = start_resetting("exit 0");
    let (_, g) = leave_a_gpu_dirty(&node);
    wait_for_reset_of(&node, g);
    let gs = wait_for(&node, "the GPU quarantined", || {
        let s = gpu_state(&node, g);
        (s["state"] == "DEGRADED").then_some(s)
    });
    let health = node
        .rnx_json(&["gpu", "health", "--gpu-id", &g.to_string()])
        .to_string();
    for part in [
        "quarantined: 4096 MiB of memory still in use",
        "still after a GPU reset",
    ] {
        assert!(health.contains(part), "{part}: {gs}\n{health}");
    }
}

/// Allocations survive a daemon crash: a job still running is reattached
/// and keeps its GPU (nothing else is placed on it); a job that ended while
/// the daemon was down has its GPU released, exactly once, at restart.
#[test]
fn allocations_survive_a_daemon_crash_and_are_released_once() {
    let mut node = start_gpu("");
    let gated = "while [ ! -e gate ]; do sleep 0.05; done";
    let stays = node.run(&["--gpu=4", "--", "sh", "-c", gated]);
    let ends = node.run(&["--gpu=4", "--", "sh", "-c", gated]);
    wait_state(&node, &stays, "RUNNING");
    wait_state(&node, &ends, "RUNNING");
    let held_stays = gpus_of(&node, &stays);
    let gate = |id: &str| {
        node.state_dir()
            .join("jobs")
            .join(id)
            .join("work")
            .join("gate")
    };
    let gate_ends = gate(&ends);
    let gate_stays = gate(&stays);

    node.node.node.kill_daemon();
    std::fs::write(&gate_ends, "").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    node.node.node.restart().unwrap();

    let st = node.wait_done(&ends, T);
    assert_eq!(
        st["state"], "COMPLETED",
        "finished while the daemon was down: {st}"
    );
    assert_eq!(node.status(&stays)["state"], "RUNNING");
    assert_eq!(
        gpus_of(&node, &stays),
        held_stays,
        "the reattached job keeps its GPUs"
    );
    // The released GPUs take a new 4-GPU job; the reattached job's do not.
    let next = node.run(&["--gpu=4", "--", "true"]);
    let st = node.wait_done(&next, T);
    assert_eq!(st["state"], "COMPLETED", "{st}");
    for i in st["gpus"]["indices"].as_array().unwrap() {
        assert!(!held_stays.contains(&i.as_u64().unwrap()), "{st}");
    }
    std::fs::write(&gate_stays, "").unwrap();
    node.wait_done(&stays, T);
    audit_of(&node, &stays);
    let records = audit(&node);
    for id in [&stays, &ends, &next] {
        let n = records.iter().filter(|r| &r["job_id"] == id).count();
        assert_eq!(n, 1, "one audit record for {id}: {records:?}");
        let r = records.iter().find(|r| &r["job_id"] == id).unwrap();
        assert_eq!(r["ended"], "COMPLETED", "{r}");
    }
}

/// Seed 001's three GPU errors, each at submission with what to do, and
/// nothing recorded for the refused job.
#[test]
fn impossible_gpu_requests_get_seed_001s_errors() {
    let node = start_gpu("");
    for (args, want, hint) in [
        (&["--gpu=9", "--", "true"][..], "No GPUs available: the job asks for 9 GPUs but this node has 8", "ask for at most 8"),
        (&["--gpu=1", "--gpu-memory=90GB", "--", "true"][..], "Insufficient GPU memory: the job asks for 92160 MB per GPU but the largest GPU on this node has 40960 MB", "lower --gpu-memory"),
        (&["--gpu=1", "--cuda=12.2", "--", "true"][..], "CUDA libraries not accessible: CUDA 12.2 is not installed on this node", "gpu.cuda_paths"),
    ] {
        let mut all = vec!["job", "run"];
        all.extend_from_slice(args);
        let out = node.rnx(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(err.contains(want) && err.contains(hint), "{args:?}: {err}");
    }
    let list = node.rnx_json(&["job", "list"]);
    assert_eq!(list.as_array().map(Vec::len), Some(0), "{list}");
}

/// The usual CUDA layout, `/usr/local/cuda` a symlink to `cuda-X.Y` inside
/// a tree every job sees read-only, as a real H100 machine had it (and
/// with no `version.json`: the version comes from `include/cuda.h`): the
/// toolkit is mounted at the path the link resolves to (a bind cannot land
/// on the job's copy of the symlink) and the job's `CUDA_HOME` and `PATH`
/// name that path, with or without `--cuda`.
#[test]
fn a_cuda_toolkit_behind_a_symlink_is_mounted_at_its_real_path() {
    use std::os::unix::fs::PermissionsExt;
    // Like /usr/local: a tree every job gets read-only.
    let local = tempfile::Builder::new()
        .prefix("joblet-e2e-cuda-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let real = local.path().join("cuda-12.4");
    std::fs::create_dir_all(real.join("bin")).unwrap();
    std::fs::create_dir_all(real.join("include")).unwrap();
    std::fs::write(real.join("include/cuda.h"), "#define CUDA_VERSION 12040\n").unwrap();
    let nvcc = real.join("bin/nvcc");
    std::fs::write(
        &nvcc,
        "#!/bin/sh\necho 'Cuda compilation tools, release 12.4'\n",
    )
    .unwrap();
    for p in [
        local.path(),
        &real,
        &real.join("bin"),
        &real.join("include"),
        &nvcc,
    ] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let link = local.path().join("cuda");
    std::os::unix::fs::symlink("cuda-12.4", &link).unwrap();
    let node = start_gpu_mounting(
        &joblet_e2e::fixture("nvml-profiles/mock-nvml-config-a100.yaml"),
        |_| format!("  cuda_paths: [\"{}\"]\n", link.display()),
        &[local.path()],
    );
    let real = std::fs::canonicalize(&real).unwrap();
    for cuda in [&["--cuda=12.4"][..], &[]] {
        let mut args = vec!["job", "run", "--follow", "--gpu=1"];
        args.extend_from_slice(cuda);
        args.extend(["--", "sh", "-c", "echo $CUDA_HOME; command -v nvcc; nvcc"]);
        let out = node.rnx_ok(&args);
        assert_eq!(
            out,
            format!(
                "{0}\n{0}/bin/nvcc\nCuda compilation tools, release 12.4\n",
                real.display()
            ),
            "{cuda:?}"
        );
    }
}

/// A GPU allocation is saved whole (ledger entry, pool records, audit
/// record) or its job does not start: with the audit table refusing new
/// records, an 8-GPU job fails before it runs, holds no allocation, and
/// its GPUs take the next job.
#[test]
fn a_job_whose_allocation_cannot_be_saved_whole_never_runs() {
    let node = start_gpu("");
    let db = rusqlite::Connection::open(node.state_dir().join("joblet.db")).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    db.execute_batch(
        "CREATE TRIGGER e2e_refuse_audit BEFORE INSERT ON gpu_audit \
         BEGIN SELECT RAISE(ABORT, 'audit log refused by the test'); END;",
    )
    .unwrap();
    let refused = node.run(&["--gpu=8", "--", "sh", "-c", "touch ran"]);
    let st = node.wait_done(&refused, T);
    assert_eq!(st["state"], "FAILED", "{st}");
    let reason = st["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("cannot record the GPU allocation")
            && reason.contains("audit log refused by the test"),
        "{st}"
    );
    let work = node.state_dir().join("jobs").join(&refused).join("work");
    assert!(!work.join("ran").exists(), "the job ran");
    let held: i64 = db
        .query_row("SELECT count(*) FROM gpu_allocations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(held, 0, "the ledger kept the refused allocation");

    db.execute_batch("DROP TRIGGER e2e_refuse_audit").unwrap();
    let next = node.run(&["--gpu=8", "--", "true"]);
    let st = node.wait_done(&next, T);
    assert_eq!(
        st["state"], "COMPLETED",
        "the GPUs were not given back: {st}"
    );
    assert!(audit(&node).iter().all(|r| r["job_id"] != refused.as_str()));
}
