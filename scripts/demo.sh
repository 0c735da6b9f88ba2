#!/usr/bin/env bash
# The project's main job (README "Two commands"): builds joblet and rnx,
# starts a local node with embedded defaults in a throw-away state dir, runs
# a few jobs through the real mTLS API (one shows its sandbox from inside),
# shows status/list/logs and the node's GPUs, a /metrics scrape and a
# sign-in link to the web console (on a terminal it waits for Enter, so the
# console can be opened), and stops the node. Run as root (the sandbox
# needs it).
#
# GPUs: with an NVIDIA driver present the node uses the real GPUs; without
# one (as on most development machines) it SIMULATES the 8-GPU DGX A100 of
# NVIDIA's mock-NVML profile through the project's fake libnvidia-ml.so, and
# says so in every GPU listing.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "demo.sh: run as root (the job sandbox needs namespaces and cgroups)" >&2; exit 1; }

./scripts/setup.sh
cargo build --release --locked --bins
cargo build --release --locked -p fake-nvml   # target/release/libnvidia_ml.so, for simulated GPUs
BIN="$PWD/target/release"
if [ -e /proc/driver/nvidia/version ]; then
    GPU_YAML="gpu:
  enabled: true"
    GPU_KIND="real"
fi
STATE="$(mktemp -d /tmp/joblet-demo.XXXXXX)"
if [ ! -e /proc/driver/nvidia/version ]; then
    # No driver: simulated GPUs, with stand-in device nodes (mknod, no driver
    # behind them: a job's allowed GPU opens with ENXIO, any other is EPERM).
    DEV="$STATE/dev"
    mkdir -p "$DEV"
    mknod -m 666 "$DEV/nvidiactl" c 195 255
    mknod -m 666 "$DEV/nvidia-uvm" c 4000 0
    for n in 0 1 2 3 4 5 6 7; do mknod -m 666 "$DEV/nvidia$n" c 195 "$n"; done
    GPU_YAML="gpu:
  enabled: true
  simulate: \"$PWD/fixtures/nvml-profiles/mock-nvml-config-a100.yaml\"   # no NVIDIA driver here: simulated GPUs
  dev_dir: \"$DEV\"                # stand-in device nodes for the simulated GPUs"
    GPU_KIND="SIMULATED (no NVIDIA driver on this machine)"
fi
CONFIG="$STATE/joblet-config.yml"
# Seed 001's pipeline trains with max_cpu: 800 (8 CPUs); a smaller machine
# has the scheduler share 16 out (max_cpu stays each job's cpu.max ceiling).
CPU_CAPACITY=0
[ "$(nproc)" -ge 8 ] || CPU_CAPACITY=16
cat >"$CONFIG" <<YAML
server:
  address: "127.0.0.1:0"        # any free port; the daemon writes the real one into rnx-config.yml
  state_dir: "$STATE/state"
metrics:
  address: "127.0.0.1:0"
rest:
  address: "127.0.0.1:0"
jobs:
  max_running: 4
  cpu_capacity: $CPU_CAPACITY             # 0 = this machine's CPUs
runtimes:
  dir: /var/tmp/joblet-demo-runtimes   # kept between demos: the first one builds python-3.11 (about a minute)
$GPU_YAML
YAML

"$BIN/joblet" server --config "$CONFIG" >"$STATE/joblet.log" 2>&1 &
DAEMON=$!
# The demo's volumes go with it: unmounted (their loop devices detach
# themselves) once the daemon is gone.
cleanup() {
  kill "$DAEMON" 2>/dev/null || true
  wait "$DAEMON" 2>/dev/null || true
  findmnt -rno TARGET | grep "^$STATE/state/volumes/" | while read -r m; do umount "$m" || true; done
}
trap cleanup EXIT
for _ in $(seq 1 300); do [ -s "$STATE/state/server.json" ] && break; sleep 0.05; done
[ -s "$STATE/state/server.json" ] || { cat "$STATE/joblet.log"; exit 1; }
export RNX_CONFIG="$STATE/state/rnx-config.yml"
rnx() { "$BIN/rnx" "$@"; }
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

say rnx whoami;                                   rnx whoami
say rnx job run --follow -- sh -c 'echo hello from job \$JOBLET_JOB_ID; uname -sr'
rnx job run --follow -- sh -c 'echo hello from job $JOBLET_JOB_ID; uname -sr'
say "rnx job run -f --max-memory=64 --max-cpu=50 -- sh -c '<what does the sandbox let me see?>'"
rnx job run -f --max-memory=64 --max-cpu=50 -- sh -c '
  echo "I am: $(id)   on host $(hostname)   my pid: $$"
  echo "processes I can see: $(ls /proc | grep -c "^[0-9]")"
  echo "/ holds: $(ls / | tr "\n" " ")"
  echo "/dev holds: $(ls /dev | tr "\n" " ")"
  grep -E "^(CapEff|NoNewPrivs|Seccomp):" /proc/self/status | tr "\n" " "; echo
  touch /usr/evil 2>&1 || true
  echo "network interfaces: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | tr "\n" " ")"'
say 'ID=$(rnx job run -e NAME=demo -s TOKEN=s3cret -- sh -c "sleep 1; echo \$NAME done")'
ID=$(rnx job run -e NAME=demo -s TOKEN=s3cret -- sh -c 'sleep 1; echo $NAME done')
echo "$ID"
say rnx job log -f "${ID:0:8}";                   rnx job log -f "${ID:0:8}"
say rnx job status --detail "${ID:0:8}";          rnx job status --detail "${ID:0:8}"
printf '\nGPUs on this node: %s\n' "$GPU_KIND"
say rnx gpu status;                               rnx gpu status
say rnx gpu drain --gpu-id 3;                     rnx gpu drain --gpu-id 3
say rnx gpu health --gpu-id 3;                    rnx gpu health --gpu-id 3
say rnx gpu online --gpu-id 3;                    rnx gpu online --gpu-id 3
printf '\nA GPU job on the %s GPUs: placed, isolated (only its device nodes exist, and only they open), NVML and CUDA_VISIBLE_DEVICES right inside it\n' "$GPU_KIND"
say "rnx job run --follow --gpu=2 --gpu-memory=8GB -- sh -c '<what GPUs do I have?>'"
GPU_ID=$(rnx job run --gpu=2 --gpu-memory=8GB -- sh -c '
  echo "GPU nodes in my /dev: $(ls /dev | grep nvidia | tr "\n" " ")"
  echo "CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES  NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES  CUDA_DEVICE_ORDER=$CUDA_DEVICE_ORDER"
  echo "driver libraries: $(ls /run/nvidia/driver/lib | tr "\n" " ")"
  for n in /dev/nvidia[0-9]*; do cat "$n" 2>&1 | sed "s/^/open: /"; done')
rnx job log -f "${GPU_ID:0:8}"
say rnx job status "${GPU_ID:0:8}";               rnx job status "${GPU_ID:0:8}"
say rnx job run --gpu=9 -- true
if rnx job run --gpu=9 -- true; then echo "unexpected: a 9-GPU job accepted on an 8-GPU node"; exit 1; fi
sleep 2   # the release check waits for a GPU reading taken after the job ended
say rnx audit;                                    rnx audit
printf '\nA volume: an ext4 image of 64 MB that outlives jobs (writes past its size get ENOSPC)\n'
say rnx volume create data-lake --size=64MB;     rnx volume create data-lake --size=64MB
say "rnx job run -f --volume=data-lake -- sh -c 'date > /volumes/data-lake/stamp'"
rnx job run -f --volume=data-lake -- sh -c 'date > /volumes/data-lake/stamp; echo wrote /volumes/data-lake/stamp'
say "rnx job run -f --volume=data-lake:ro -- sh -c 'cat /volumes/data-lake/stamp; touch /volumes/data-lake/x'"
rnx job run -f --volume=data-lake:ro -- sh -c 'cat /volumes/data-lake/stamp; touch /volumes/data-lake/x' || true
say rnx volume list;                              rnx volume list
printf '\nA runtime: Debian bookworm with Python 3.11, built on this node (mmdebstrap + uv), the job'"'"'s root instead of the host'"'"'s\n'
say rnx runtime install python-3.11;              rnx runtime install python-3.11
say "rnx job run -f --gpu=1 --volume=data-lake --runtime=python-3.11 python -c '<where am I?>'"
rnx job run -f --gpu=1 --volume=data-lake --runtime=python-3.11 python -c '
import os, sys, platform
print("python", sys.version.split()[0], "from", sys.executable, "on", open("/etc/debian_version").read().strip())
print("GPUs:", os.environ.get("CUDA_VISIBLE_DEVICES"), " volume:", open("/volumes/data-lake/stamp").read().strip())
try:
    open("/usr/evil", "w")
except OSError as e:
    print("writing the runtime:", e.strerror)'
say rnx runtime list;                             rnx runtime list
printf '\nA workflow: seed 001'"'"'s ml-training-pipeline.yaml (preprocess on the CPU, train on 2 GPUs, evaluate on 1), here in python-3.11 (the file names python-3.11-ml, a 5.8 GiB build: `rnx runtime install python-3.11-ml` runs it as it is)\n'
mkdir -p "$STATE/pipeline"
cp examples/ml-training-pipeline/*.py "$STATE/pipeline/"
sed 's/"python-3.11-ml"/"python-3.11"/' examples/ml-training-pipeline/ml-training-pipeline.yaml >"$STATE/pipeline/ml-training-pipeline.yaml"
say rnx workflow run --follow ml-training-pipeline.yaml
(cd "$STATE/pipeline" && rnx workflow run --follow ml-training-pipeline.yaml)
WF=$(rnx --json workflow list | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"][:8])')
say rnx workflow logs "$WF";                      rnx workflow logs "$WF"
say rnx job list;                                 rnx job list
printf '\nObservability: this node'"'"'s Prometheus /metrics (NVIDIA dcgm-exporter'"'"'s series, with the job holding each GPU) and its web console\n'
METRICS=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metrics"])' "$STATE/state/server.json")
say "curl -s http://$METRICS/metrics | grep -E '^(DCGM_FI_DEV_GPU_TEMP|joblet_jobs)' | sed 4q"
curl -s "http://$METRICS/metrics" | grep -E '^(DCGM_FI_DEV_GPU_TEMP|joblet_jobs)' | sed -n 1,4p
say rnx console;                                  rnx console
if [ -t 0 ]; then
  read -r -p $'\nThe link above opens the web console (one use, 5 minutes) while this node runs; press Enter to stop the node. ' _ || true
fi
printf '\nDemo done. Daemon log: %s/joblet.log, state: %s\n' "$STATE" "$STATE/state"
