#!/usr/bin/env bash
# Node loss, recovered: on a dev cluster (scripts/dev-cluster.sh: 3 etcd
# members and 3 simulated-GPU nodes, each in a network namespace of its
# own, lease TTL 3 s), a 2-GPU job with --restart=on-node-failure runs on
# n3; n3 is then lost, alternately by kill -9 of its daemon and shims and
# by a network partition, BENCH_TRIALS times each. Timed: from the fault
# until the job's next attempt is RUNNING on another node (seen through
# `rnx job status` polled every 100 ms). Every trial also checks that the
# old attempt's last output came before the new one's first (one host
# clock). The goal: under 30 s (seed 002); Slurm marks a node DOWN after
# SlurmdTimeout (300 s by default), Kubernetes evicts after 300 s.
# Beside it: `rnx job run --follow -- true` through n1, placed on n1 and on
# another node, and on a single node without a cluster (spawn to exit,
# median of 20), release binaries.
#
# Usage: bench/cluster-recovery.sh [--no-build]   (as root)
#   BENCH_TRIALS (default 10)
# Prints markdown on stdout, progress on stderr.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BUILD=1
for a in "$@"; do
  case "$a" in
    --no-build) BUILD=0 ;;
    *) echo "usage: bench/cluster-recovery.sh [--no-build]" >&2; exit 2 ;;
  esac
done
TRIALS="${BENCH_TRIALS:-10}"
if [ "$BUILD" = 1 ]; then
  cargo build --release -q -p joblet -p joblet-sandbox -p rnx -p fake-nvml
  cargo test -q -p joblet-e2e --test cluster --no-run
fi
OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT
JOBLET_E2E_BIN="$ROOT/target/release" CLUSTER_TRIALS="$TRIALS" \
  cargo test -q -p joblet-e2e --test cluster -- --ignored --exact \
  cluster_recovery_and_remote_start_benchmark --nocapture --test-threads=1 | tee "$OUT" >&2
python3 - "$OUT" "$TRIALS" <<'PY'
import json, statistics, subprocess, sys, datetime
line = next(l for l in open(sys.argv[1]) if l.startswith("CLUSTER_BENCH "))
r = json.loads(line.split(" ", 1)[1])
def dist(v):
    v = sorted(v)
    p90 = v[min(len(v) - 1, int(round(0.9 * (len(v) - 1))))]
    return f"{statistics.median(v):.2f} s (min {v[0]:.2f}, p90 {p90:.2f}, max {v[-1]:.2f})"
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
print(f"## Node loss recovered ({datetime.date.today()}, commit {commit}, lease TTL 3 s, {sys.argv[2]} trials each)")
print()
print("| fault | fault to next attempt RUNNING elsewhere |")
print("|---|---|")
print(f"| kill -9 of the node's daemon and shims | {dist(r['kill_s'])} |")
print(f"| network partition of the node | {dist(r['partition_s'])} |")
print()
print(f"Every trial: the old attempt's last output before the new one's first. Raw: kill {r['kill_s']}, partition {r['partition_s']}.")
print()
print("| `rnx job run --follow -- true` through n1 | median of 20 |")
print("|---|---|")
print(f"| placed on n1 itself | {r['start_local_ms_median']:.1f} ms |")
print(f"| placed on another node (log streamed back through n1) | {r['start_remote_ms_median']:.1f} ms |")
print(f"| a single node, no cluster (same run) | {r['start_single_node_ms_median']:.1f} ms |")
PY
