//! Fractional GPUs end to end (`rnx job run --gpu=0.5`) on simulated GPUs
//! (fake NVML serving the 8-GPU A100 profile): on a node whose GPUs are
//! shared, shares fill each GPU to exactly one whole and never more, each
//! share reserves its part of the GPU's memory, and a whole-GPU job waits
//! for a GPU no share holds; on a node that gives jobs whole GPUs, a share
//! is refused naming the setting. Needs root.

mod gpu_common;
mod sandbox_common;

use std::collections::BTreeMap;
use std::time::Duration;

use gpu_common::*;
use sandbox_common::*;

/// The simulated A100's memory (40 GiB), in MiB.
const A100_MB: u64 = 40 * 1024;

#[test]
fn half_gpus_fill_every_gpu_twice_and_never_more() {
    let node = start_gpu("  sharing: shared\n");
    let halves: Vec<String> = (0..16)
        .map(|_| node.run(&["--gpu=0.5", "--", "sleep", "60"]))
        .collect();
    for h in &halves {
        wait_state(&node, h, "RUNNING");
    }
    let mut per_gpu: BTreeMap<u64, u32> = BTreeMap::new();
    for h in &halves {
        let g = gpus_of(&node, h);
        assert_eq!(g.len(), 1, "a share is on one GPU: {g:?}");
        *per_gpu.entry(g[0]).or_default() += 1;
    }
    assert_eq!(per_gpu.len(), 8, "{per_gpu:?}");
    assert!(per_gpu.values().all(|&n| n == 2), "{per_gpu:?}");

    // The share and its memory, as `rnx job status` shows them.
    let st = node.status(&halves[0]);
    assert_eq!(st["resources"]["gpu_milli"], 500, "{st}");
    assert_eq!(st["gpus"]["sharing"], "shared", "{st}");
    assert_eq!(st["gpus"]["memory_mb_per_gpu"], A100_MB / 2, "{st}");
    let text = node.rnx_ok(&["job", "status", &halves[0]]);
    assert!(
        text.contains("GPU Share: 50% of one GPU (--gpu=0.5)"),
        "{text}"
    );

    // Every GPU is full: one more half, and a whole GPU, wait.
    let extra = node.run(&["--gpu=0.5", "--", "true"]);
    let whole = node.run(&["--gpu=1", "--", "true"]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(node.status(&extra)["state"], "QUEUED");
    assert_eq!(node.status(&whole)["state"], "QUEUED");

    // A half ends: the waiting half takes its place, the whole GPU still
    // waits (the other half holds that GPU).
    node.rnx_ok(&["job", "stop", &halves[0]]);
    node.wait_done(&halves[0], T);
    let done = node.wait_done(&extra, T);
    assert_eq!(done["state"], "COMPLETED", "{done}");
    assert_eq!(node.status(&whole)["state"], "QUEUED");

    // Both halves of one GPU end: the whole-GPU job runs there.
    let mut by_gpu: BTreeMap<u64, Vec<&String>> = BTreeMap::new();
    for h in &halves[1..] {
        by_gpu.entry(gpus_of(&node, h)[0]).or_default().push(h);
    }
    let pair = by_gpu
        .values()
        .find(|jobs| jobs.len() == 2)
        .expect("a GPU held by two running halves");
    for h in pair {
        node.rnx_ok(&["job", "stop", h]);
    }
    let done = node.wait_done(&whole, T);
    assert_eq!(done["state"], "COMPLETED", "{done}");
    for h in &halves[1..] {
        let _ = node.rnx(&["job", "stop", h]);
    }
    for h in &halves[1..] {
        node.wait_done(h, T);
    }
}

#[test]
fn shares_of_different_sizes_never_sum_past_one_gpu() {
    let node = start_gpu("  sharing: shared\n");
    // 8 × 0.7 take one GPU each; the 0.3s then fill the rest of them,
    // and a ninth 0.7 finds no GPU with 700 thousandths left.
    let big: Vec<String> = (0..8)
        .map(|_| node.run(&["--gpu=0.7", "--", "sleep", "60"]))
        .collect();
    for b in &big {
        wait_state(&node, b, "RUNNING");
    }
    let small: Vec<String> = (0..8)
        .map(|_| node.run(&["--gpu=0.3", "--", "sleep", "60"]))
        .collect();
    for s in &small {
        wait_state(&node, s, "RUNNING");
    }
    let mut milli: BTreeMap<u64, u64> = BTreeMap::new();
    for (jobs, share) in [(&big, 700), (&small, 300)] {
        for j in jobs {
            *milli.entry(gpus_of(&node, j)[0]).or_default() += share;
        }
    }
    assert!(milli.values().all(|&m| m == 1000), "{milli:?}");
    let ninth = node.run(&["--gpu=0.7", "--", "true"]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(node.status(&ninth)["state"], "QUEUED");
    node.rnx_ok(&["job", "stop", &big[0]]);
    let done = node.wait_done(&ninth, T);
    assert_eq!(done["state"], "COMPLETED", "{done}");
    for j in big.iter().chain(&small) {
        let _ = node.rnx(&["job", "stop", j]);
    }
    for j in big.iter().chain(&small) {
        node.wait_done(j, T);
    }
}

#[test]
fn a_gpu_share_on_a_node_with_exclusive_gpus_is_refused_naming_the_setting() {
    let node = start_gpu("");
    let out = node.rnx(&["job", "run", "--gpu=0.5", "--", "true"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--gpu"), "{err}");
    assert!(err.contains("gpu.sharing: exclusive"), "{err}");
    let list = node.rnx_ok(&["job", "list", "--json"]);
    assert!(
        !list.contains("\"id\""),
        "nothing is recorded for a refused job: {list}"
    );
}
