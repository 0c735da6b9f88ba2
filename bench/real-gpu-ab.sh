#!/usr/bin/env bash
# Start latency of two builds side by side on a machine with a real NVIDIA
# GPU and driver (as root): one daemon per build (gpu.enabled, real NVML,
# its own state dir and cgroup base), and `rnx job run --follow [--gpu=1]
# -- true` timed against each, interleaved round by round in ABBA order
# (the second daemon of a pair runs on a machine that the first just
# warmed), each start 50 ms after the last. Prints the median and p90 of
# each row and the B/A ratio of the medians.
#
# Usage: bench/real-gpu-ab.sh A_BIN B_BIN [ROUNDS]   (ROUNDS default 40)
#   A_BIN, B_BIN: directories holding joblet, joblet-shim and rnx.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -e\{0,1\}uo/p' "$0" | sed '$d; /^# shellcheck/d; s/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/.." || exit 1
A="$(realpath "${1:?usage: bench/real-gpu-ab.sh A_BIN B_BIN [ROUNDS]}")"
B="$(realpath "${2:?usage: bench/real-gpu-ab.sh A_BIN B_BIN [ROUNDS]}")"
ROUNDS="${3:-40}"
[ "$(id -u)" = 0 ] || { echo "real-gpu-ab: run as root" >&2; exit 1; }
SCRATCH="$(mktemp -d /tmp/joblet-gpu-ab.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rmdir /sys/fs/cgroup/joblet-ab-a /sys/fs/cgroup/joblet-ab-b /sys/fs/cgroup/*/joblet-ab-a /sys/fs/cgroup/*/joblet-ab-b 2>/dev/null || true
  rm -rf "$SCRATCH"
}
trap cleanup EXIT
for side in a b; do
  bin="$A"; [ "$side" = b ] && bin="$B"
  mkdir -p "$SCRATCH/$side"
  cat >"$SCRATCH/$side/joblet-config.yml" <<YAML
server:
  address: "127.0.0.1:0"
  state_dir: "$SCRATCH/$side/state"
metrics:
  address: "127.0.0.1:0"
rest:
  address: "127.0.0.1:0"
sandbox:
  cgroup_base: joblet-ab-$side
gpu:
  enabled: true
YAML
  "$bin/joblet" server --config "$SCRATCH/$side/joblet-config.yml" >"$SCRATCH/$side/log" 2>&1 &
  PIDS+=($!)
done
for side in a b; do
  for _ in $(seq 1 400); do [ -s "$SCRATCH/$side/state/server.json" ] && break; sleep 0.05; done
  [ -s "$SCRATCH/$side/state/server.json" ] || { tail -20 "$SCRATCH/$side/log"; exit 1; }
done
python3 - "$A/rnx" "$SCRATCH/a/state/rnx-config.yml" "$B/rnx" "$SCRATCH/b/state/rnx-config.yml" "$ROUNDS" <<'PY'
import os, subprocess, sys, time
rnx_a, cfg_a, rnx_b, cfg_b, rounds = sys.argv[1:6]
sides = {"A": (rnx_a, cfg_a), "B": (rnx_b, cfg_b)}
def run(side, gpu):
    rnx, cfg = sides[side]
    args = [rnx, "job", "run", "--follow"] + (["--gpu=1"] if gpu else []) + ["--", "true"]
    t = time.perf_counter_ns()
    r = subprocess.run(args, env=dict(os.environ, RNX_CONFIG=cfg), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dt = (time.perf_counter_ns() - t) / 1e6
    if r.returncode != 0:
        sys.exit(f"{side} {'gpu' if gpu else 'cpu'} failed: {r.stderr.decode()}")
    time.sleep(0.05)
    return dt
times = {}
for gpu in (True, False):          # warm-up
    for side in "AB":
        for _ in range(3):
            run(side, gpu)
for i in range(int(rounds)):
    order = "AB" if i % 2 == 0 else "BA"
    for gpu in (True, False):
        for side in order:
            times.setdefault((side, gpu), []).append(run(side, gpu))
med = {}
for (side, gpu), v in sorted(times.items()):
    v.sort()
    med[(side, gpu)] = v[len(v) // 2]
    print(f"{side} {'--gpu=1' if gpu else 'cpu    '}: n={len(v)} median {v[len(v)//2]:.2f} ms, p90 {v[len(v)*9//10]:.2f} ms")
for gpu in (True, False):
    print(f"B/A {'--gpu=1' if gpu else 'cpu'}: {med[('B', gpu)] / med[('A', gpu)]:.3f}")
PY
