#!/usr/bin/env bash
# shellcheck disable=SC2016  # single-quoted $vars are meant for the jobs
# A workflow on a machine with a real NVIDIA GPU (what CI cannot show):
# seed 001's pipeline shape, preprocess on the CPU → train on a GPU →
# evaluate on a GPU, each step a job placed by the scheduler, with PyTorch
# running CUDA in the GPU steps and a tensor handed from training to
# evaluation through the run's shared volume; the CPU step sees no GPU. Run
# as root; writes OUT_DIR/report.md.
#
# The runtime: as bench/real-gpu-storage.sh (RUNTIME_STORE and RUNTIME, or
# a stand-in made from this host's userland); PYTHON is the interpreter
# with torch as the job sees it.
#
# Usage: bench/real-gpu-workflow.sh OUT_DIR   (as root)
#   BIN     (default target/release) joblet, joblet-shim, rnx
#   GPUS    GPUs the training step asks for (default 1)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT="${1:?usage: bench/real-gpu-workflow.sh OUT_DIR}"
BIN="$(realpath "${BIN:-target/release}")"
GPUS="${GPUS:-1}"
STEP_TIMEOUT=180
# shellcheck source=bench/lib/gpu-report.sh
source bench/lib/gpu-report.sh
gpu_report_begin real-gpu-workflow "$OUT" "A workflow on a real GPU"
step "GPU" 'nvidia-smi -L; stat -fc %T /sys/fs/cgroup; command -v mkfs.ext4 losetup'

torch_python
# shellcheck source=bench/lib/host-userland.sh
source bench/lib/host-userland.sh
host_userland_runtime "$SCRATCH"
echo "real-gpu-workflow: runtime $RUNTIME from $STORE, python $PYTHON" >&2

gpu_daemon joblet-gpuworkflow "workflows:
  shared_volume_mb: 256"

WF="$SCRATCH/pipeline"
mkdir -p "$WF"
cat >"$WF/preprocess.py" <<'PY'
import os, torch
print("preprocess: cuda available", torch.cuda.is_available(), "devices", torch.cuda.device_count(),
      "CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"))
torch.manual_seed(7)
x = torch.linspace(0, 10, 4096).unsqueeze(1)
y = 3 * x + 2 + 0.05 * torch.randn_like(x)
torch.save({"x": x, "y": y}, os.path.join(os.environ["JOBLET_WORKFLOW_SHARED"], "data.pt"))
print("preprocess: wrote", x.shape[0], "rows")
PY
cat >"$WF/train.py" <<'PY'
import os, sys, torch
shared = os.environ["JOBLET_WORKFLOW_SHARED"]
d = torch.load(os.path.join(shared, "data.pt"))
dev = torch.device("cuda")
x, y = d["x"].to(dev), d["y"].to(dev)
w = torch.zeros(1, device=dev, requires_grad=True)
b = torch.zeros(1, device=dev, requires_grad=True)
opt = torch.optim.SGD([w, b], lr=0.01)
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 100):
    opt.zero_grad()
    loss = ((x * w + b - y) ** 2).mean()
    loss.backward()
    opt.step()
torch.save({"w": w.detach().cpu(), "b": b.detach().cpu()}, os.path.join(shared, "model.pt"))
print("train:", torch.cuda.get_device_name(0), "x", torch.cuda.device_count(),
      "CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES"),
      f"w={w.item():.3f} b={b.item():.3f} loss={loss.item():.4f}")
PY
cat >"$WF/evaluate.py" <<'PY'
import os, sys, torch
shared = os.environ["JOBLET_WORKFLOW_SHARED"]
d, m = torch.load(os.path.join(shared, "data.pt")), torch.load(os.path.join(shared, "model.pt"))
dev = torch.device("cuda")
mse = ((d["x"].to(dev) * m["w"].to(dev) + m["b"].to(dev) - d["y"].to(dev)) ** 2).mean().item()
print("evaluate:", torch.cuda.get_device_name(0), f"mse={mse:.4f}")
sys.exit(0 if mse < 5 else 1)
PY
cat >"$WF/pipeline.yaml" <<YAML
# seed 001's ml-training-pipeline.yaml, with this machine's runtime and GPUs
jobs:
  data-preprocessing:
    command: "$PYTHON"
    args: ["preprocess.py"]
    runtime: "$RUNTIME"
    resources:
      max_memory: 4096
      max_cpu: 200

  model-training:
    command: "$PYTHON"
    args: ["train.py", "--epochs", "100"]
    runtime: "$RUNTIME"
    requires:
      - data-preprocessing: "COMPLETED"
    resources:
      max_memory: 16384
      gpu_count: $GPUS
      gpu_memory_mb: 8192

  model-evaluation:
    command: "$PYTHON"
    args: ["evaluate.py"]
    runtime: "$RUNTIME"
    requires:
      - model-training: "COMPLETED"
    resources:
      max_memory: 8192
      gpu_count: 1
      gpu_memory_mb: 4096
YAML
step "validate" "cd $WF && $R workflow validate pipeline.yaml"
step "run, following" "cd $WF && time $R workflow run --follow pipeline.yaml"
step "status, detail" "$R workflow status \$($R --json workflow list | $PYTHON -c 'import json,sys; print(json.load(sys.stdin)[0][\"id\"])') --detail"
step "logs" "$R workflow logs \$($R --json workflow list | $PYTHON -c 'import json,sys; print(json.load(sys.stdin)[0][\"id\"])')"
step "jobs, GPUs, audit" "$R job list; $R gpu status; $R audit"
echo "real-gpu-workflow: report in $REPORT" >&2
