#!/usr/bin/env bash
# /metrics cost for BENCHMARKS.md, on the simulated 8-GPU DGX A100 profile
# (fake NVML; no real GPU on this project's machines):
#  1. CPU used by an idle daemon over BENCH_SECONDS with 8 GPUs sampled at
#     1 Hz: metrics off, metrics on but not scraped, and scraped every
#     second (the difference is the exporter: readings + scrapes);
#  2. the wall time of one scrape (curl's time_total, median of BENCH_RUNS)
#     of that node with 100 running jobs (shared GPUs, each job's process
#     listed with memory on its GPU through the fake NVML's state file);
#     each scrape collects and encodes anew (GPU readings from the
#     monitor's latest sample, the jobs' cgroup counters from the sampler
#     that reads them at the same 1 s period). The first scrape after the
#     jobs started reads their cgroups itself and is reported on its own.
# No dcgm-exporter runs here (it needs DCGM and a real GPU): no peer.
# Run as root on an otherwise idle machine:  bench/metrics.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${BENCH_RUNS:-200}"
SECONDS_IDLE="${BENCH_SECONDS:-60}"
JOBS="${BENCH_JOBS:-100}"
# BENCH_NO_BUILD=1: use the release binaries already built.
if [ -z "${BENCH_NO_BUILD:-}" ]; then
    cargo build --release --locked -p joblet -p joblet-sandbox -p rnx --bins
    cargo build --release --locked -p fake-nvml
fi
BIN="$PWD/target/release"
PROFILE="$PWD/fixtures/nvml-profiles/mock-nvml-config-a100.yaml"
WORK="$(mktemp -d /tmp/joblet-metrics-bench.XXXXXX)"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
TCK=$(getconf CLK_TCK)

median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m}'; }

# Device nodes and the fake NVML's state file, as the e2e harness makes them.
mkdir -p "$WORK/dev"
mknod -m 0666 "$WORK/dev/nvidiactl" c 195 255
mknod -m 0666 "$WORK/dev/nvidia-uvm" c 4000 0
mknod -m 0666 "$WORK/dev/nvidia-uvm-tools" c 4000 1
for i in 0 1 2 3 4 5 6 7; do mknod -m 0666 "$WORK/dev/nvidia$i" c 195 "$i"; done
echo '{}' >"$WORK/nvml-state.json"

gpu_yaml() { # health_interval
    printf 'gpu:\n  enabled: true\n  hwloc: false\n  health_interval: %s\n  sharing: shared\n  simulate: "%s"\n  simulate_state: "%s"\n  dev_dir: "%s"\n' \
        "$1" "$PROFILE" "$WORK/nvml-state.json" "$WORK/dev"
}

start_daemon() { # name, metrics yaml, more yaml -> sets DIR, PID
    DIR="$WORK/$1"; mkdir -p "$DIR"
    printf 'server:\n  address: "127.0.0.1:0"\n  state_dir: "%s/state"\n%s\njobs:\n  max_running: 256\n  cpu_capacity: 512\nsandbox:\n  cgroup_base: joblet-metrics-bench-%s\n  warm_pool: 0\n%s\n' \
        "$DIR" "$2" "$1" "$3" >"$DIR/cfg.yml"
    "$BIN/joblet" server --config "$DIR/cfg.yml" >"$DIR/log" 2>&1 &
    PID=$!
    PIDS+=("$PID")
    for _ in $(seq 400); do [ -s "$DIR/state/server.json" ] && break; sleep 0.05; done
    [ -s "$DIR/state/server.json" ] || { cat "$DIR/log" >&2; exit 1; }
}

metrics_addr() { sed -n 's/.*"metrics": *"\([^"]*\)".*/\1/p' "$DIR/state/server.json"; }

cpu_over() { # pid, seconds, scrape address or "" -> "% of one core"
    local t0 t1 end
    sleep 2   # let start-up settle
    t0=$(awk '{print $14+$15}' "/proc/$1/stat")
    end=$((SECONDS + $2))
    if [ -n "$3" ]; then
        while [ $SECONDS -lt $end ]; do curl -s -o /dev/null "http://$3/metrics"; sleep 1; done
    else
        sleep "$2"
    fi
    t1=$(awk '{print $14+$15}' "/proc/$1/stat")
    awk -v a="$t0" -v b="$t1" -v s="$2" -v t="$TCK" 'BEGIN {printf "%.3f", 100*(b-a)/t/s}'
}

stop_daemon() { kill "$PID"; wait "$PID" 2>/dev/null || true; }

echo "machine: $(nproc) cores, kernel $(uname -r), $(date -u +%F), commit $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
start_daemon off 'metrics:
  enabled: false' "$(gpu_yaml 1s)"
off=$(cpu_over "$PID" "$SECONDS_IDLE" ""); stop_daemon
start_daemon idle 'metrics:
  address: "127.0.0.1:0"' "$(gpu_yaml 1s)"
idle=$(cpu_over "$PID" "$SECONDS_IDLE" ""); stop_daemon
start_daemon scraped 'metrics:
  address: "127.0.0.1:0"' "$(gpu_yaml 1s)"
scraped=$(cpu_over "$PID" "$SECONDS_IDLE" "$(metrics_addr)"); stop_daemon
echo
echo "| idle daemon, 8 simulated GPUs sampled at 1 Hz, over ${SECONDS_IDLE} s | CPU, % of one core |"
echo "|---|---|"
echo "| metrics off (monitor only) | $off |"
echo "| metrics on (monitor + exporter readings), not scraped | $idle |"
echo "| metrics on, scraped every second | $scraped |"

# 100 running jobs on shared GPUs, each one's process listed on its GPU.
start_daemon jobs 'metrics:
  address: "127.0.0.1:0"' "$(gpu_yaml 1s)"
RNX=("$BIN/rnx" --config "$DIR/state/rnx-config.yml")
ids=()
for _ in $(seq "$JOBS"); do
    ids+=("$("${RNX[@]}" job run --gpu=1 --gpu-memory=256MB -- sleep 3600)")
done
for _ in $(seq 600); do
    running=$("${RNX[@]}" --json job list | grep -o '"RUNNING"' | wc -l || true)
    [ "$running" -ge "$JOBS" ] && break
    sleep 0.2
done
# Each job's GPU (from its status) and pid (its job.pid record).
declare -A procs=()
for id in "${ids[@]}"; do
    idx=$("${RNX[@]}" --json job status "$id" | tr -d ' \n' | sed -n 's/.*"indices":\[\([0-9]*\).*/\1/p' || true)
    pid=$(sed -n 's/.*"pid": *\([0-9]*\).*/\1/p' "$DIR/state/jobs/$id/job.pid" 2>/dev/null || true)
    if [ -n "$idx" ] && [ -n "$pid" ]; then
        procs[$idx]+="${procs[$idx]:+,}{\"pid\": $pid, \"used_memory_bytes\": 104857600}"
    fi
done
state="{\"gpus\": {"
for g in 0 1 2 3 4 5 6 7; do
    [ "$g" -gt 0 ] && state+=","
    state+="\"$g\": {\"processes\": [${procs[$g]:-}]}"
done
state+="}}"
echo "$state" >"$WORK/nvml-state.tmp" && mv "$WORK/nvml-state.tmp" "$WORK/nvml-state.json"
sleep 3   # a few monitor samples attribute the pids
addr=$(metrics_addr)
first=$(curl -s -o "$WORK/first.txt" -w '%{time_total}' "http://$addr/metrics" | awk '{printf "%.2f", $1*1000}')
series=$(grep -c '^joblet_job_gpu_memory_bytes{' "$WORK/first.txt" || true)
sleep 1.5   # steady state: the sampler reads the jobs the first scrape showed
ms=$(for _ in $(seq "$RUNS"); do curl -s -o /dev/null -w '%{time_total}\n' "http://$addr/metrics"; done | awk '{print $1*1000}' | median)
bytes=$(curl -s "http://$addr/metrics" | wc -c)
echo
echo "| scrape of 8 simulated GPUs with $JOBS running jobs ($series jobs with per-process GPU memory), $bytes bytes | median ms (curl time_total, $RUNS scrapes) |"
echo "|---|---|"
echo "| \`GET /metrics\` | $ms |"
echo "| the first scrape after the jobs started (reads their cgroups itself) | $first (one scrape) |"
for id in "${ids[@]}"; do "${RNX[@]}" job kill "$id" >/dev/null 2>&1 || true; done
stop_daemon
