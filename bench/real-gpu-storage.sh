#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted $vars are meant for the job's shell
# Runtimes and volumes on a machine with a real NVIDIA GPU (what CI cannot
# show): a GPU job in a runtime runs CUDA through the driver files the
# daemon injects, and writes into a filesystem volume that a later job
# reads back. Run as root; writes OUT_DIR/report.md.
#
# The runtime: RUNTIME_STORE, a runtime store holding RUNTIME (default
# python-3.11-ml; `rnx runtime install` fills one where Debian and PyPI are
# reachable). Without it, the script makes a stand-in runtime from this
# host's own userland (its /usr, /etc and /opt bound into a tree,
# recorded as runtime `host-userland`), which is enough to show the GPU
# path through a runtime's tree on a machine that cannot download one.
#
# Usage: bench/real-gpu-storage.sh OUT_DIR   (as root)
#   BIN     (default target/release) joblet, joblet-shim, rnx
#   PYTHON  the interpreter with torch, as the job sees it (default: the
#           first python3 with torch on PATH or /opt/*/.venv)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT="${1:?usage: bench/real-gpu-storage.sh OUT_DIR}"
BIN="$(realpath "${BIN:-target/release}")"
# shellcheck source=bench/lib/gpu-report.sh
source bench/lib/gpu-report.sh
gpu_report_begin real-gpu-storage "$OUT" "Runtimes and volumes on a real GPU"
step "GPU" 'nvidia-smi -L; stat -fc %T /sys/fs/cgroup; losetup --version | head -1; command -v mkfs.ext4'

torch_python
# shellcheck source=bench/lib/host-userland.sh
source bench/lib/host-userland.sh
host_userland_runtime "$SCRATCH"
echo "real-gpu-storage: runtime $RUNTIME from $STORE, python $PYTHON" >&2

gpu_daemon joblet-gpustorage
step "whoami and runtimes" "$R whoami; $R runtime list"
step "a 64 MB volume" "$R volume create results --size=64MB && $R volume list"
step "a GPU job in the runtime, writing to the volume" "$R job run --follow --gpu=1 --volume=results --runtime=$RUNTIME -- $PYTHON -c '
import os, sys, torch
print(\"python\", sys.executable, \"torch\", torch.__version__, \"cuda available\", torch.cuda.is_available())
x = torch.randn(4096, 4096, device=\"cuda\", dtype=torch.bfloat16)
y = (x @ x).float().sum().item()
print(\"device\", torch.cuda.get_device_name(0), \"matmul ok\", y == y)
open(\"/volumes/results/out.txt\", \"w\").write(torch.cuda.get_device_name(0))
print(\"visible\", os.environ.get(\"CUDA_VISIBLE_DEVICES\"), \"driver libs\", len(os.listdir(\"/run/nvidia/driver/lib\")))
try:
    open(\"/usr/evil\", \"w\")
except OSError as e:
    print(\"the runtime tree:\", e.strerror)'"
step "a later CPU job reads the volume, read-only" "$R job run --follow --volume=results:ro --runtime=$RUNTIME -- sh -c 'cat /volumes/results/out.txt; echo; touch /volumes/results/x 2>&1; ls /dev | grep -c nvidia'"
step "status" "$R --json job list | head -c 2000; $R volume list; $R gpu status"
step "remove the volume" "$R volume remove results"
echo "real-gpu-storage: report in $REPORT" >&2
