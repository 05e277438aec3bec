"""Each worker of the hello job estimates pi from its own share of samples."""
import argparse
import json
import os
import random

ap = argparse.ArgumentParser()
ap.add_argument("--samples", type=int, default=100000)
args = ap.parse_args()

role, index = os.environ["YARD_ROLE"], int(os.environ["YARD_TASK_INDEX"])
print(f"{role}/{index} of job {os.environ['YARD_JOB_ID']} on {os.environ['YARD_NODE']}, "
      f"GPUs [{os.environ['CUDA_VISIBLE_DEVICES']}], params {json.loads(os.environ['YARD_PARAMS'])}",
      flush=True)
rng = random.Random(index)
inside = 0
for i in range(1, args.samples + 1):
    x, y = rng.random(), rng.random()
    inside += x * x + y * y <= 1.0
    if i % (args.samples // 4) == 0:
        print(f"{role}/{index}: {i} samples, pi ~ {4 * inside / i:.5f}", flush=True)
