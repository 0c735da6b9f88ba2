"""Seed 001's pipeline, step 2 (2 GPUs): fit y = a*x + b to the dataset
the preprocessing left in the shared volume, and leave the model there.

Plain Python, so it runs in any runtime; the GPUs the job was given are in
CUDA_VISIBLE_DEVICES, as a CUDA program (PyTorch, JAX) would see them.
"""

import argparse
import json
import os

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=10)
args = parser.parse_args()

shared = os.environ["JOBLET_WORKFLOW_SHARED"]
gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
try:
    import torch  # in python-3.11-ml; the fit below stays plain Python

    print(f"train: torch {torch.__version__}, CUDA available: {torch.cuda.is_available()}, "
          f"devices: {torch.cuda.device_count()}")
except ImportError:
    print("train: no torch in this runtime")
with open(os.path.join(shared, "dataset.json")) as f:
    rows = json.load(f)

a, b, rate = 0.0, 0.0, 0.01
for _ in range(args.epochs):
    ga = sum((a * x + b - y) * x for x, y in rows) * 2 / len(rows)
    gb = sum((a * x + b - y) for x, y in rows) * 2 / len(rows)
    a, b = a - rate * ga, b - rate * gb

with open(os.path.join(shared, "model.json"), "w") as f:
    json.dump({"a": a, "b": b, "epochs": args.epochs, "gpus": gpus}, f)
print(f"train: {len(rows)} rows, {args.epochs} epochs on {len(gpus)} GPUs {gpus}: a={a:.3f} b={b:.3f}")
