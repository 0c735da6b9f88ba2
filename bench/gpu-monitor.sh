#!/usr/bin/env bash
# GPU discovery and health-monitor cost for BENCHMARKS.md, on the simulated
# 8-GPU DGX A100 profile (fake NVML; no real GPU on this project's machines):
#  1. `joblet discover` wall time (median of BENCH_RUNS), with and without hwloc;
#  2. CPU used by an idle daemon over BENCH_SECONDS, sampling every GPU at
#     1 Hz, against the same daemon with GPU support off (the difference is
#     the monitor: sampling + the NVML event thread).
# Run as root on an otherwise idle machine:  bench/gpu-monitor.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${BENCH_RUNS:-50}"
SECONDS_IDLE="${BENCH_SECONDS:-60}"
cargo build --release --locked -p joblet -p joblet-sandbox --bins
cargo build --release --locked -p fake-nvml
BIN="$PWD/target/release"
PROFILE="$PWD/fixtures/nvml-profiles/mock-nvml-config-a100.yaml"
WORK="$(mktemp -d /tmp/joblet-gpu-bench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
TCK=$(getconf CLK_TCK)

median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m}'; }

discover_ms() { # config file -> median ms
    for _ in $(seq "$RUNS"); do
        "$BIN/joblet" discover --config "$1" --json | awk -F': ' '/"elapsed_us"/ {gsub(",","",$2); print $2/1000}'
    done | median
}

printf 'gpu:\n  simulate: "%s"\n  hwloc: false\n' "$PROFILE" >"$WORK/nohwloc.yml"
printf 'gpu:\n  simulate: "%s"\n  hwloc: true\n' "$PROFILE" >"$WORK/hwloc.yml"
echo "machine: $(nproc) cores, kernel $(uname -r), $(date -u +%F); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| discovery of 8 simulated A100s (\`joblet discover\`, in-process timer) | median ms |"
echo "|---|---|"
echo "| NVML + CUDA scan, sysfs topology (\`gpu.hwloc: false\`) | $(discover_ms "$WORK/nohwloc.yml") |"
echo "| NVML + CUDA scan, hwloc topology | $(discover_ms "$WORK/hwloc.yml") |"

daemon_cpu() { # name, gpu yaml -> "% of one core"
    local dir="$WORK/$1"; mkdir -p "$dir"
    printf 'server:\n  address: "127.0.0.1:0"\n  state_dir: "%s/state"\nmetrics:\n  address: "127.0.0.1:0"\nrest:\n  address: "127.0.0.1:0"\n%s\n' "$dir" "$2" >"$dir/cfg.yml"
    "$BIN/joblet" server --config "$dir/cfg.yml" >"$dir/log" 2>&1 &
    local pid=$!
    for _ in $(seq 200); do [ -s "$dir/state/server.json" ] && break; sleep 0.05; done
    sleep 2   # let start-up settle
    local t0 t1
    t0=$(awk '{print $14+$15}' "/proc/$pid/stat")
    sleep "$SECONDS_IDLE"
    t1=$(awk '{print $14+$15}' "/proc/$pid/stat")
    kill "$pid"; wait "$pid" 2>/dev/null || true
    awk -v a="$t0" -v b="$t1" -v s="$SECONDS_IDLE" -v t="$TCK" 'BEGIN {printf "%.3f", 100*(b-a)/t/s}'
}

off=$(daemon_cpu off "gpu:
  enabled: false")
events=$(daemon_cpu events "gpu:
  enabled: true
  hwloc: false
  health_interval: 0
  simulate: \"$PROFILE\"")
on=$(daemon_cpu on "gpu:
  enabled: true
  hwloc: false
  health_interval: 1s
  simulate: \"$PROFILE\"")
echo
echo "| idle daemon over ${SECONDS_IDLE} s | CPU, % of one core |"
echo "|---|---|"
echo "| GPU support off | $off |"
echo "| 8 simulated GPUs, NVML event thread only (\`health_interval: 0\`) | $events |"
echo "| 8 simulated GPUs, events + sampling at 1 Hz | $on |"
