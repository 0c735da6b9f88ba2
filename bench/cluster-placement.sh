#!/usr/bin/env bash
# Placements per second through etcd: a 3-member etcd (Debian's etcd, on
# loopback ports of a scratch dir), 100 simulated nodes of 8 GPUs
# registered under a fresh prefix, the real scheduler leader (the daemon's
# cluster::leader on joblet_cluster's core), and BENCH_JOBS job entries
# submitted as fast as etcd takes them (100 per transaction). Measured:
# first submission to last assignment, every placement a fenced
# transaction that writes the allocation, the assignment and the job's
# entry (batched, up to etcd's 128 operations per transaction). Each node
# runs at most 64 jobs at once (a daemon's default jobs.max_running), so
# 6,000 jobs fit 100 nodes; a second scenario places 1-GPU jobs on every
# GPU (800). The goal: at least 2,000 placements/s, 4x the sustained
# 500 jobs/s Slurm documents for slurmctld (its high-throughput guide).
#
# Usage: bench/cluster-placement.sh [--no-build]
#   BENCH_ROUNDS (default 5)  runs per scenario (median reported)
#   BENCH_JOBS   (default 6000) CPU-only jobs per run
# Prints markdown on stdout, progress on stderr; removes its etcd on exit.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BUILD=1
for a in "$@"; do
  case "$a" in
    --no-build) BUILD=0 ;;
    *) echo "usage: bench/cluster-placement.sh [--no-build]" >&2; exit 2 ;;
  esac
done
ROUNDS="${BENCH_ROUNDS:-5}"
JOBS="${BENCH_JOBS:-6000}"
command -v etcd >/dev/null || { echo "etcd not found: scripts/setup.sh installs it (Debian etcd-server)" >&2; exit 1; }
if [ "$BUILD" = 1 ]; then
  cargo build --release -q -p joblet --bin joblet-cluster-bench
fi
BIN="$ROOT/target/release/joblet-cluster-bench"
DIR="$(mktemp -d "${TMPDIR:-/tmp}/joblet-bench-cluster.XXXXXX")"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
# Free loopback ports: 3 client + 3 peer.
read -r -a PORTS <<<"$(python3 -c 'import socket
s=[socket.socket() for _ in range(6)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')"
CLUSTER=""
for i in 1 2 3; do
  CLUSTER+="${CLUSTER:+,}e$i=http://127.0.0.1:${PORTS[$((i + 2))]}"
done
ENDPOINTS=""
for i in 1 2 3; do
  c=${PORTS[$((i - 1))]}; p=${PORTS[$((i + 2))]}
  etcd --name "e$i" --data-dir "$DIR/e$i" \
    --listen-client-urls "http://127.0.0.1:$c" --advertise-client-urls "http://127.0.0.1:$c" \
    --listen-peer-urls "http://127.0.0.1:$p" --initial-advertise-peer-urls "http://127.0.0.1:$p" \
    --initial-cluster "$CLUSTER" --initial-cluster-state new --initial-cluster-token bench \
    --auto-compaction-mode periodic --auto-compaction-retention 1m >"$DIR/e$i.log" 2>&1 &
  PIDS+=("$!")
  ENDPOINTS+="${ENDPOINTS:+,}http://127.0.0.1:$c"
done
for _ in $(seq 100); do
  ETCDCTL_API=3 etcdctl --endpoints="$ENDPOINTS" endpoint health >/dev/null 2>&1 && break
  sleep 0.1
done
median() { python3 -c 'import sys,statistics; v=[float(x) for x in sys.argv[1:]]; print(f"{statistics.median(v):.0f} (min {min(v):.0f}, max {max(v):.0f})")' "$@"; }
run() {
  local label="$1"; shift
  local rates=() per=()
  for r in $(seq "$ROUNDS"); do
    out="$("$BIN" --etcd "$ENDPOINTS" --nodes 100 "$@")"
    echo "  $label run $r: $out" >&2
    rates+=("$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["placements_per_s"])' "$out")")
    per+=("$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["jobs_per_plan"])' "$out")")
  done
  echo "| $label | $(median "${rates[@]}") | $(median "${per[@]}") |"
}
echo "## Cluster placements through etcd ($(date -u +%F), commit $(git rev-parse --short HEAD), etcd $(etcd --version | awk '/etcd Version/ {print $3}'), 3 members on loopback, $(nproc) cores)"
echo
echo "| scenario | placements/s, median of $ROUNDS | jobs per transaction |"
echo "|---|---|---|"
run "$JOBS CPU-only jobs on 100 nodes" --jobs "$JOBS" --gpus-per-job 0
run "800 1-GPU jobs on 100 x 8 GPUs" --jobs 800 --gpus-per-job 1
