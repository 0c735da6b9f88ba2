"""Seed 001's pipeline, step 1 (CPU): make a small dataset and hand it on.

Each job of a workflow starts with its own copy of the files uploaded with
the workflow in /work; what a job leaves for the jobs after it goes to the
run's shared volume, at $JOBLET_WORKFLOW_SHARED.
"""

import json
import os
import random

shared = os.environ["JOBLET_WORKFLOW_SHARED"]
random.seed(7)
rows = []
for i in range(1000):
    x = i / 100
    rows.append([x, 3.0 * x + 2.0 + random.uniform(-0.1, 0.1)])
with open(os.path.join(shared, "dataset.json"), "w") as f:
    json.dump(rows, f)
print(f"preprocess: wrote {len(rows)} rows to {shared}/dataset.json")
