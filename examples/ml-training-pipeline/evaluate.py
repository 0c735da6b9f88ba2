"""Seed 001's pipeline, step 3 (1 GPU): score the model the training left
in the shared volume; fail the job if it is no good."""

import json
import os
import sys

shared = os.environ["JOBLET_WORKFLOW_SHARED"]
gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
with open(os.path.join(shared, "model.json")) as f:
    model = json.load(f)
with open(os.path.join(shared, "dataset.json")) as f:
    rows = json.load(f)
mse = sum((model["a"] * x + model["b"] - y) ** 2 for x, y in rows) / len(rows)
print(f"evaluate: on {len(gpus)} GPU {gpus}: mse={mse:.4f} (trained on {len(model['gpus'])} GPUs)")
sys.exit(0 if mse < 1.0 else 1)
