#!/usr/bin/env python3
"""A full grid against ASHA over the same space, on the same cluster and in
the same run: examples/pytorch-ddp-digits/sweep.yaml (12 trials: 6 learning
rates x 2 batch sizes, 27 epochs each, 2 at a time), sweep-asha.yaml (the
same grid, in the same order, with ASHA's stopping form stopping a trial at
epoch 3 or 12 unless it is in the best quarter of those its rung saw before
it) and sweep-asha-pause.yaml (ASHA's promotion form: such a trial is paused
and resumed from its checkpoint if it is promoted later). Prints,
for each, the best test accuracy and its params, the trials stopped early,
the CPU-seconds the trials held (cpus x the time each task ran, what the
cluster gave them) and the wall time. The target: ASHA within 0.5 points of
the grid's best for at most half of its compute. With --runs N the order
reverses in even runs (grid first in odd ones). Nothing here asserts on time.

usage: bench/sweep.py [--yard build/yard] [--runs N]
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
EXAMPLE = os.path.join(ROOT, "examples", "pytorch-ddp-digits")


def held_cpu_s(c, e):
    """CPU-seconds the experiment's trials held: cpus x (end - start) of
    every task of every attempt."""
    total = 0.0
    for t in e["trials"]:
        job = c.api.job(t["job"])
        cpus = sum(r["cpus"] * r["replicas"] for r in job["spec"]["tasks"].values())
        per_task = cpus / max(1, sum(r["replicas"] for r in job["spec"]["tasks"].values()))
        for task in job["tasks"]:
            if task.get("started_at") and task.get("finished_at"):
                total += per_task * (task["finished_at"] - task["started_at"]) / 1e6
    return total


def run_one(c, name):
    t0 = time.monotonic()
    r = c.cli("submit", os.path.join(EXAMPLE, name), check_rc=0)
    eid = int(r.stdout.decode().strip())
    r = c.cli("wait", "--experiment", str(eid), "--timeout", "30m", check_rc=None, timeout=1900)
    wall = time.monotonic() - t0
    e = c.api.json("GET", f"/v1/experiments/{eid}", expect=200)[1]
    if e["state"] != "completed" or e["counts"].get("failed") or e["counts"].get("succeeded", 0) < 1:
        raise RuntimeError(f"{name}: experiment {eid} {e['state']}, counts {e['counts']}: {r.stderr!r}")
    best = e["trials"][0]
    print(c.cli("exp", "show", str(eid), check_rc=0).stdout.decode(), flush=True)
    return {"best": best["best"], "params": best["params"], "cpu_s": held_cpu_s(c, e), "wall_s": wall,
            "stopped": e["counts"].get("stopped_early", 0), "trials": len(e["trials"])}


def show(kind, n):
    p = ", ".join(f"{k}={v}" for k, v in n["params"].items())
    print(f"{kind:5}: best test_acc {n['best']:.4f} ({p}); {n['trials']} trials, "
          f"{n['stopped']} stopped early; {n['cpu_s']:7.1f} CPU-s held; {n['wall_s']:6.1f} s wall",
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness as h
    h.YARD = os.environ["YARD"]
    with h.cluster("bench-sweep") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        kinds = [("grid", "sweep.yaml"), ("asha", "sweep-asha.yaml"), ("pause", "sweep-asha-pause.yaml")]
        for i in range(args.runs):
            order = kinds[::-1] if i % 2 else kinds
            res = {kind: run_one(c, f) for kind, f in order}
            print(f"run {i + 1}:")
            for kind, _ in kinds:
                show(kind, res[kind])
            g = res["grid"]
            for kind, _ in kinds[1:]:
                a = res[kind]
                print(f"{kind} - grid: {100 * (a['best'] - g['best']):+.2f} points of test accuracy; "
                      f"{kind} / grid compute: {a['cpu_s'] / g['cpu_s']:.2f} "
                      f"(target: within 0.5 points, at most 0.50)", flush=True)


if __name__ == "__main__":
    main()
