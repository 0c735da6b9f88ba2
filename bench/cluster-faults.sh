#!/usr/bin/env bash
# The cluster's random fault loop, run longer than CI's 60 s: on a dev
# cluster (3 etcd members, 3 simulated-GPU nodes in network namespaces,
# lease TTL 3 s), a fault every 1.5–4 s (a node daemon killed with its shims
# and restarted, a node paused and resumed, a node partitioned and healed,
# an etcd member killed and restarted, or none) while 1–4-GPU jobs with
# --restart=on-node-failure are submitted through the nodes still up; then
# everything heals, every accepted job must end, and etcd's whole history
# is replayed: no GPU held by two jobs at one revision, every job ended
# exactly once (crates/joblet-e2e/tests/cluster_faults.rs).
#
# Usage: bench/cluster-faults.sh [SECONDS] [SEED]   (as root; default 600 s, a new seed)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
SECS="${1:-600}"
export CLUSTER_FAULT_SECS="$SECS"
[ $# -ge 2 ] && export CLUSTER_FAULT_SEED="$2"
cargo build -q --workspace
cargo test -q -p joblet-e2e --test cluster_faults -- --exact \
  a_random_fault_loop_never_gives_a_gpu_twice_and_every_job_ends_once --nocapture --test-threads=1
