#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted $vars are meant for the job's shell
# Real-GPU check: what CI cannot show (it has no NVIDIA driver). Run as root
# on a machine with an NVIDIA GPU and driver; it drives real joblet daemons
# over the real NVML and writes a report of what it saw:
#   1. the machine: driver, GPUs, device nodes and majors, cgroup layout,
#      where the driver libraries are (ld.so cache) and CUDA toolkits;
#   2. `joblet doctor` and `joblet discover --json` against the real NVML;
#   3. an exclusive-mode daemon (gpu.sharing: exclusive):
#      - a 1-GPU job: its /dev, CUDA_VISIBLE_DEVICES, driver files, and
#        `nvidia-smi -L` inside the sandbox;
#      - a CPU job: no NVIDIA nodes, no nvidia-smi, CUDA not available;
#      - CUDA inside the sandbox: a CUDA C program built with nvcc on the host
#        (uploaded), and PyTorch (a matrix product on the GPU) when a python3
#        with torch is found; `--cuda=X.Y` (toolkit bound in, nvcc inside);
#      - `rnx job status --json`, `rnx gpu status`, the release check;
#      - start latency: GPU and CPU `rnx job run --follow -- true`, paced;
#   4. a shared-mode daemon (gpu.sharing: shared): one job over its
#      --gpu-memory quota (killed by the daemon from NVML's per-process
#      memory) beside one under it (untouched), then `rnx audit --json`;
#   5. an MPS daemon (gpu.sharing: mps): a job with a memory limit through
#      the MPS control daemon;
#   6. observability on the real NVML: /metrics while an exclusive job holds
#      memory (dcgm series with its hpc_job) and while two shared jobs do
#      (each job's own per-process memory), the time of a scrape, and the
#      REST API with a viewer token (GPUs, refused drain, OpenAPI document).
# It never changes the GPU's settings (no reset, no MIG, no clocks).
#
# Usage: bench/real-gpu.sh OUT_DIR [--no-mps]   (as root)
#   BIN     (default target/release) joblet, joblet-shim, rnx
#   PYTHON  (default: the first python3 on PATH or /opt/*/.venv that imports torch)
# OUT_DIR/report.md is the report; OUT_DIR/*.log the daemons' logs.
set -uo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -e\{0,1\}uo/p' "$0" | sed '$d; /^# shellcheck/d; s/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/.." || exit 1
OUT="${1:?usage: bench/real-gpu.sh OUT_DIR [--no-mps]}"
MPS=1
[ "${2:-}" = --no-mps ] && MPS=0
BIN="$(realpath "${BIN:-target/release}")"
mkdir -p "$OUT"
OUT="$(realpath "$OUT")"
REPORT="$OUT/report.md"
: >"$REPORT"
[ "$(id -u)" = 0 ] || { echo "real-gpu: run as root" >&2; exit 1; }
[ -e /proc/driver/nvidia/version ] || { echo "real-gpu: no NVIDIA driver here (/proc/driver/nvidia/version)" >&2; exit 1; }

SCRATCH="$(mktemp -d /tmp/joblet-real-gpu.XXXXXX)"
DAEMON=""
stop_daemon() {
  [ -n "$DAEMON" ] || return 0
  kill "$DAEMON" 2>/dev/null
  wait "$DAEMON" 2>/dev/null
  DAEMON=""
}
trap 'stop_daemon; rm -rf "$SCRATCH"' EXIT

# `step TITLE CMD...`: runs CMD, puts it and its output (and exit status)
# into the report.
step() {
  local title="$1"; shift
  printf '\n### %s\n\n```\n$ %s\n' "$title" "$*" >>"$REPORT"
  timeout 120 "$@" >>"$REPORT" 2>&1
  local rc=$?
  printf '[exit %s]\n```\n' "$rc" >>"$REPORT"
  echo "real-gpu: $title: exit $rc" >&2
  return $rc
}
sh_step() { local title="$1"; shift; step "$title" bash -c "$*"; }

# ---- 1. the machine ----------------------------------------------------
printf '# Real-GPU check\n\n%s, %s\n' "$(date -u +%FT%TZ)" "$(uname -srm)" >>"$REPORT"
sh_step "driver" 'cat /proc/driver/nvidia/version; nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,memory.used,compute_mode,mig.mode.current --format=csv'
sh_step "device nodes and majors" 'ls -l /dev/nvidia* /dev/nvidia-caps 2>&1; grep -i nvidia /proc/devices; cat /proc/driver/nvidia/params | head -20'
sh_step "cgroups" 'stat -fc %T /sys/fs/cgroup; cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null; cat /proc/self/cgroup'
sh_step "driver files in the ld.so cache" 'ldconfig -p | grep -E "libnvidia-ml|libcuda\.|libnvidia-ptxjit" ; command -v nvidia-smi nvidia-cuda-mps-control; ls /usr/local/nvidia 2>/dev/null'
sh_step "CUDA toolkits" 'ls -d /usr/local/cuda* /opt/cuda* 2>&1; command -v nvcc && nvcc --version | tail -2'

PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for p in "$(command -v python3)" /opt/*/.venv/bin/python3; do
    [ -x "$p" ] && "$p" -c 'import torch' 2>/dev/null && { PYTHON="$p"; break; }
  done
fi
echo "real-gpu: python with torch: ${PYTHON:-none}" >&2

# ---- 2. doctor and discover -------------------------------------------
BASE_YAML='gpu:
  enabled: true
  health_interval: 1s'
write_config() { # DIR SHARING EXTRA_MOUNTS
  local dir="$1" sharing="$2"
  mkdir -p "$dir"
  cat >"$dir/joblet-config.yml" <<YAML
server:
  address: "127.0.0.1:0"
  state_dir: "$dir/state"
metrics:
  address: "127.0.0.1:0"
rest:
  address: "127.0.0.1:0"
jobs:
  max_running: 8
filesystem:
  allowed_mounts: [/bin, /sbin, /lib, /lib32, /lib64, /libx32, /usr, /etc, /opt]
sandbox:
  cgroup_base: joblet-realgpu
$BASE_YAML
  sharing: $sharing
YAML
}
write_config "$SCRATCH/doctor" exclusive
step "joblet doctor" "$BIN/joblet" doctor --config "$SCRATCH/doctor/joblet-config.yml"
step "joblet discover --json" "$BIN/joblet" discover --config "$SCRATCH/doctor/joblet-config.yml" --json

start_daemon() { # NAME SHARING
  local dir="$SCRATCH/$1"
  write_config "$dir" "$2"
  "$BIN/joblet" server --config "$dir/joblet-config.yml" >"$OUT/$1.log" 2>&1 &
  DAEMON=$!
  for _ in $(seq 1 400); do [ -s "$dir/state/server.json" ] && break; sleep 0.05; done
  if [ ! -s "$dir/state/server.json" ]; then
    printf '\n### daemon %s did not start\n\n```\n%s\n```\n' "$1" "$(tail -40 "$OUT/$1.log")" >>"$REPORT"
    stop_daemon
    return 1
  fi
  export RNX_CONFIG="$dir/state/rnx-config.yml"
}
# `listener NAME KEY`: the address a running daemon bound (server.json).
listener() { sed -n 's/.*"'"$2"'": *"\([^"]*\)".*/\1/p' "$SCRATCH/$1/state/server.json"; }
# `scrape NAME`: the lines of interest of one /metrics scrape.
scrape() {
  curl -fsS "http://$(listener "$1" metrics)/metrics" | grep -E '^(DCGM_FI_DEV_(FB_USED|FB_FREE|FB_RESERVED|GPU_UTIL|MEM_COPY_UTIL|GPU_TEMP|MEMORY_TEMP|POWER_USAGE|TOTAL_ENERGY_CONSUMPTION|SM_CLOCK|MEM_CLOCK|PCIE_REPLAY_COUNTER|XID_ERRORS|CORRECTABLE_REMAPPED_ROWS|UNCORRECTABLE_REMAPPED_ROWS|ROW_REMAP_FAILURE)|joblet_job_gpu_|joblet_gpu_state|joblet_jobs)'
}
export -f listener scrape
export SCRATCH
mkdir -p "$SCRATCH/bin"
ln -s "$BIN/rnx" "$SCRATCH/bin/rnx"
export PATH="$SCRATCH/bin:$PATH"

# A CUDA C program, built on the host, run inside the sandbox (uploaded).
VADD=""
if command -v nvcc >/dev/null; then
  cat >"$SCRATCH/vadd.cu" <<'CU'
#include <cstdio>
__global__ void add(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
int main() {
  int n = 1 << 20, dev = -1, count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) { printf("cudaGetDeviceCount: %s\n", cudaGetErrorString(e)); return 1; }
  cudaDeviceProp p; cudaGetDevice(&dev); cudaGetDeviceProperties(&p, dev);
  float *a, *b, *c;
  cudaMallocManaged(&a, n * 4); cudaMallocManaged(&b, n * 4); cudaMallocManaged(&c, n * 4);
  for (int i = 0; i < n; i++) { a[i] = i; b[i] = 2 * i; }
  add<<<(n + 255) / 256, 256>>>(a, b, c, n);
  e = cudaDeviceSynchronize();
  if (e != cudaSuccess) { printf("kernel: %s\n", cudaGetErrorString(e)); return 1; }
  int bad = 0;
  for (int i = 0; i < n; i++) bad += c[i] != 3.0f * i;
  printf("devices %d, device %d: %s (sm_%d%d), pci %04x:%02x:%02x.0; vector add of %d: %d wrong\n",
         count, dev, p.name, p.major, p.minor, p.pciDomainID, p.pciBusID, p.pciDeviceID, n, bad);
  return bad != 0;
}
CU
  if nvcc -O2 -o "$SCRATCH/vadd" "$SCRATCH/vadd.cu" >"$SCRATCH/nvcc.log" 2>&1; then
    VADD="$SCRATCH/vadd"
  else
    printf '\n### nvcc failed\n\n```\n%s\n```\n' "$(cat "$SCRATCH/nvcc.log")" >>"$REPORT"
  fi
fi
TORCH_MM='import torch, os
print("cuda available:", torch.cuda.is_available(), "devices:", torch.cuda.device_count(), "CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"))
if torch.cuda.is_available():
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    print(torch.cuda.get_device_name(0), "8192^3 bf16 product, checksum", float((x @ x).float().abs().mean()))'

# ---- 3. exclusive ------------------------------------------------------
printf '\n## Exclusive mode (gpu.sharing: exclusive)\n' >>"$REPORT"
if start_daemon exclusive exclusive; then
  step "rnx gpu status" rnx gpu status
  sh_step "1-GPU job: its /dev, env, driver files, nvidia-smi inside" \
    'rnx job run -f --gpu=1 -- sh -c '"'"'ls -l /dev | grep -i nvidia; env | grep -E "^(CUDA|NVIDIA)_|^LD_LIBRARY_PATH|^PATH" | sort; ls /run/nvidia/driver/* | head -30; nvidia-smi -L; nvidia-smi --query-gpu=index,uuid,memory.used --format=csv'"'"''
  sh_step "CPU job: no GPU" \
    'rnx job run -f -- sh -c '"'"'ls -l /dev | grep -ci nvidia; command -v nvidia-smi || echo "no nvidia-smi"; ls /run/nvidia 2>&1'"'"''
  if [ -n "$VADD" ]; then
    sh_step "CUDA C program (nvcc on the host) in a 1-GPU job" "rnx job run -f --gpu=1 --upload=$VADD -- /work/vadd"
    sh_step "the same CUDA C program in a CPU job (expected to fail: no GPU)" "rnx job run -f --upload=$VADD -- /work/vadd"
  fi
  if [ -n "$PYTHON" ]; then
    sh_step "PyTorch in a 1-GPU job" "rnx job run -f --gpu=1 --gpu-memory=16GB -- $PYTHON -c '$TORCH_MM'"
    sh_step "PyTorch in a CPU job" "rnx job run -f -- $PYTHON -c '$TORCH_MM'"
  fi
  if [ -n "$PYTHON" ]; then
    ID=$(rnx job run --gpu=1 -- "$PYTHON" -c 'import torch, time; x = torch.empty(3 * 2**30, dtype=torch.uint8, device="cuda"); torch.cuda.synchronize(); time.sleep(6)')
    sleep 4
    sh_step "/metrics while job $ID holds 3 GiB (exclusive): its GPU's series carry hpc_job" scrape exclusive
    for _ in $(seq 1 120); do rnx job status "$ID" 2>/dev/null | grep -qE 'COMPLETED|FAILED' && break; sleep 0.5; done
    step "exclusive job holding 3 GiB for 4 s: its peak GPU memory" rnx job status "$ID"
  fi
  CUDA_VER="$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')"
  if [ -n "$CUDA_VER" ]; then
    sh_step "--cuda=$CUDA_VER: the toolkit inside" "rnx job run -f --gpu=1 --cuda=$CUDA_VER -- sh -c 'command -v nvcc; nvcc --version | tail -1; echo \$LD_LIBRARY_PATH'"
  fi
  sh_step "--cuda=99.0: refused" "rnx job run -f --gpu=1 --cuda=99.0 -- true"
  sh_step "more GPUs than the node has: refused" "rnx job run -f --gpu=9 -- true"
  ID=$(rnx job run --gpu=1 -- nvidia-smi -L)
  for _ in $(seq 1 50); do rnx job status "$ID" 2>/dev/null | grep -qE 'COMPLETED|FAILED' && break; sleep 0.2; done
  step "rnx job status of a GPU job" rnx job status "$ID"
  step "rnx --json job status of it" rnx --json job status "$ID"
  # Start latency on the real GPU: paced, the median of 30 of each.
  sh_step "start latency: rnx job run -f [--gpu=1] -- true, 30 each, paced 50 ms" '
    t() { local s e; s=$(date +%s%N); rnx job run -f "$@" -- true >/dev/null 2>&1 || echo FAIL; e=$(date +%s%N); echo $(( (e - s) / 1000 )); }
    for i in 1 2 3; do t --gpu=1 >/dev/null; t >/dev/null; done
    for i in $(seq 1 30); do echo "gpu $(t --gpu=1)"; sleep 0.05; echo "cpu $(t)"; sleep 0.05; done >/tmp/rg-times
    for k in gpu cpu; do grep "^$k " /tmp/rg-times | cut -d" " -f2 | sort -n | awk -v k=$k "{a[NR]=\$1} END {print k\": n=\"NR\" median \"a[int(NR/2)+1]/1000\" ms, p90 \"a[int(NR*0.9)]/1000\" ms, min \"a[1]/1000\" ms\"}"; done'
  step "rnx gpu status after the jobs (released, clean)" rnx gpu status
  sh_step "rnx audit" "rnx audit | head -12"
  # ---- 6. the REST API on the real node: a viewer token.
  REST="$(listener exclusive rest)"
  CA="$SCRATCH/exclusive/state/pki/ca.crt"
  TOKEN=$(rnx --json token create --name realgpu-viewer --role viewer | sed -n 's/.*"secret": *"\([^"]*\)".*/\1/p')
  sh_step "REST: GET /api/v1/gpus with a viewer token" "curl -sS --cacert $CA -H 'Authorization: Bearer $TOKEN' https://$REST/api/v1/gpus | head -c 1500; echo"
  sh_step "REST: a viewer's drain is refused (403)" "curl -sS -w ' [HTTP %{http_code}]' --cacert $CA -H 'Authorization: Bearer $TOKEN' -H 'Content-Type: application/json' -d '{\"action\":\"drain\"}' https://$REST/api/v1/gpus/0/state; echo"
  sh_step "REST: the OpenAPI document (paths)" "curl -sS --cacert $CA https://$REST/api/v1/openapi.json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d[\"openapi\"], len(d[\"paths\"]), \"paths\")'"
  sh_step "/metrics: the time of one scrape, 20 scrapes (ms)" 'for i in $(seq 1 20); do curl -s -o /dev/null -w "%{time_total}\n" "http://'"$(listener exclusive metrics)"'/metrics"; done | sort -n | awk "{a[NR]=\$1*1000} END {print \"median\", a[int(NR/2)+1], \"ms, max\", a[NR], \"ms\"}"'
  stop_daemon
fi

# ---- 4. shared: quotas enforced from NVML's per-process memory ---------
printf '\n## Shared mode (gpu.sharing: shared): memory quota\n' >>"$REPORT"
if [ -n "$PYTHON" ] && start_daemon shared shared; then
  HOG='import torch, time
x = torch.empty(int(ARG * 2**30), dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("holding", ARG, "GiB", flush=True)
time.sleep(20)
print("done")'
  OVER=$(rnx job run --gpu=1 --gpu-memory=2GB -- "$PYTHON" -c "${HOG//ARG/6}")
  UNDER=$(rnx job run --gpu=1 --gpu-memory=8GB -- "$PYTHON" -c "${HOG//ARG/1}")
  echo "over: $OVER under: $UNDER" >&2
  sleep 8
  step "both jobs on the one GPU, seen by the daemon" rnx gpu status
  sh_step "/metrics meanwhile: each job's own GPU memory (joblet_job_gpu_memory_bytes), FB_USED per job" scrape shared
  sh_step "nvidia-smi on the host meanwhile" 'nvidia-smi --query-compute-apps=pid,used_memory --format=csv'
  for _ in $(seq 1 60); do
    rnx job status "$UNDER" 2>/dev/null | grep -qE 'COMPLETED|FAILED|STOPPED' && break
    sleep 1
  done
  step "over its 2 GB quota (6 GiB): killed" rnx job status "$OVER"
  step "under its 8 GB quota (1 GiB): untouched" rnx job status "$UNDER"
  step "its log" rnx job log "$UNDER"
  step "rnx gpu status after (released, clean)" rnx gpu status
  sh_step "rnx audit --json (parsed)" 'rnx audit --json | python3 -c "import json,sys; d=json.load(sys.stdin); print(len(d), \"records; the last:\"); print(json.dumps(d[-1]))"'
  stop_daemon
fi

# ---- 5. MPS ------------------------------------------------------------
if [ "$MPS" = 1 ] && [ -n "$PYTHON" ] && command -v nvidia-cuda-mps-control >/dev/null; then
  printf '\n## MPS (gpu.sharing: mps)\n' >>"$REPORT"
  if start_daemon mps mps; then
    sh_step "MPS job with a 4 GB limit: env, and an allocation past it" "rnx job run -f --gpu=1 --gpu-memory=4GB -- $PYTHON -c '
import os, torch
print({k: v for k, v in os.environ.items() if k.startswith(\"CUDA_MPS\")})
x = torch.empty(2 * 2**30, dtype=torch.uint8, device=\"cuda\"); print(\"2 GiB: ok\", flush=True)
try:
    y = torch.empty(6 * 2**30, dtype=torch.uint8, device=\"cuda\"); print(\"6 GiB more: allocated (limit NOT enforced)\")
except RuntimeError as e:
    print(\"6 GiB more: refused:\", str(e).splitlines()[0])'"
    sh_step "MPS daemons while none run" 'sleep 2; pgrep -a nvidia-cuda-mps || echo "no MPS daemon left"'
    stop_daemon
  fi
fi
sh_step "left over" 'ls /sys/fs/cgroup/joblet-realgpu; ps -eo pid,ppid,stat,comm | grep -E "joblet|nvidia" || echo "no joblet process"; nvidia-smi --query-gpu=memory.used --format=csv'
rmdir /sys/fs/cgroup/joblet-realgpu /sys/fs/cgroup/*/joblet-realgpu 2>/dev/null
echo "real-gpu: report in $REPORT" >&2
