#!/usr/bin/env python3
"""Elastic pools (docs/elastic.md), measured on this machine:

1. Submit to running when the pool has no node: a 1-GPU job on a pool
   whose provisioner must first make its node, through the command
   provisioner (a script that starts an ephemeral agent here: what is
   measured beyond the master is an agent's start) and through a real
   Slurm (munged, slurmctld and two slurmd here, tests/e2e/slurm.py: an
   sbatch'd allocation whose batch script starts the agent); beside it the
   same command through `srun` directly (launch to the command running).
   Each run starts from an empty pool (the last run's node scaled down).
   Broken down from the audit log: submit, the provisioner asked (request
   stored), its answer, the node registered, the job running.

2. Scale-down: a command-provisioned pool of 8 idle nodes (made by 8 jobs
   that ended) down to its minimum: how long from the moment the idle time
   has passed to the pool at its minimum, and how many actions it took
   (drains, leaves, releases: the audit log's entries, the script's downs).

Run by hand as root (make bench does not: it starts Slurm daemons);
asserts nothing, prints the numbers.

usage: bench/provision.py [--yard build/yard] [--runs 5] [--idle 2] [--nodes 8] [--min 2] [--skip-slurm]
"""
import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from benchlib import RunFailed, pct  # noqa: E402

SCRIPT = """#!/bin/sh
# the bench's command provisioner: ephemeral agents on this machine
echo "$(date +%s.%N) $*" >> "{dir}/calls.log"
case "$1" in
up)
  i=0
  while [ $i -lt "$3" ]; do
    name="$2-$YARD_REQUEST-$i"
    setsid "{yard}" agent --ephemeral --master "$YARD_MASTER" --name "$name" --pool "$2" \\
      --work-dir "{dir}/agent-$name" --gpus sim:1 --join-token-file "$YARD_JOIN_TOKEN_FILE" \\
      >> "{dir}/agent-$name.log" 2>&1 < /dev/null &
    echo $! > "{dir}/agent-$name.pid"
    echo "$name"
    i=$((i+1))
  done ;;
down)
  [ -f "{dir}/agent-$2.pid" ] && kill "$(cat "{dir}/agent-$2.pid")" 2>/dev/null
  rm -f "{dir}/agent-$2.pid"
  exit 0 ;;
esac
"""


def write_script(c, yard):
    path = os.path.join(c.dir, "provision.sh")
    with open(path, "w") as f:
        f.write(SCRIPT.format(dir=c.dir, yard=yard))
    os.chmod(path, 0o755)
    return path


def audit_times(c, since_us):
    """{code: [time_us, ...]} of the master's own audit entries since since_us."""
    out = {}
    doc = c.api.json("GET", "/v1/audit?limit=10000", expect=200)[1]
    for e in doc["entries"]:
        if e["method"] == "EVENT" and e["time"] >= since_us:
            out.setdefault(e["code"], []).append(e["time"])
    return out


def one_job(harness, c, name):
    """Submits a 1-GPU job to the empty pool gpu; returns the phases (s)."""
    t0_us = int(time.time() * 1e6)
    t0 = time.monotonic()
    st, job = c.api.submit(harness.spec(["/bin/sh", "-c", "echo ran"], name=name, gpus=1, pool="gpu"))
    if st != 201:
        raise RunFailed(f"submit: {st} {job}")
    harness.wait_until(lambda: c.api.job(job["id"])["state"] in ("running", "succeeded"), 120,
                       "the job to run")
    running = time.monotonic() - t0
    done = c.api.wait_job(job["id"], timeout=60)
    if done["state"] != "succeeded":
        raise RunFailed(f"the job: {done}")
    a = audit_times(c, t0_us)
    first = lambda code: (min(a[code]) - t0_us) / 1e6 if code in a else float("nan")
    phases = {"asked": first("provision_requested"), "answered": first("provision_answered"),
              "registered": first("node_registered"), "running": running}
    # the next run starts from an empty pool
    harness.wait_until(lambda: not c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"], 60,
                       "the pool to be empty again")
    return phases


def report(what, runs):
    if not runs:
        print(f"{what}: no run completed")
        return
    keys = list(runs[0])
    cells = "  ".join(f"{k} p50 {pct([r[k] for r in runs], 50):.2f}s" for k in keys)
    print(f"{what} ({len(runs)} runs): {cells}", flush=True)


def bench_command(harness, yard, runs, idle):
    out = []
    with harness.cluster("bench-provision") as c:
        script = write_script(c, yard)
        c.master_args += ["--provisioner", f"gpu=command:{script}", "--provisioner-shape", "gpu=gpus=1",
                          "--provisioner-idle", f"gpu={idle}s", "--provisioner-cooldown", "1s"]
        c.start_master()
        for i in range(runs):
            try:
                out.append(one_job(harness, c, f"cmd-{i}"))
            except (RunFailed, harness.TestFailure) as e:
                print(f"command run {i} failed: {e}", flush=True)
    report("command provisioner, submit to", out)


def bench_slurm(harness, yard, runs, idle):
    import slurm
    out, srun = [], []
    with slurm.SlurmCluster(nodes=2) as s:
        with harness.cluster("bench-provision-slurm", env=s.env) as c:
            c.master_args += ["--provisioner", "gpu=slurm:gpu", "--provisioner-shape", "gpu=gpus=1",
                              "--provisioner-idle", f"gpu={idle}s", "--provisioner-cooldown", "1s",
                              "--slurm-work-dir", os.path.join(c.dir, "slurm-agents"), "--slurm-yard", yard,
                              "--slurm-agent-arg=--gpus=sim:1"]
            c.start_master()
            for i in range(runs):
                try:
                    out.append(one_job(harness, c, f"slurm-{i}"))
                except (RunFailed, harness.TestFailure) as e:
                    print(f"slurm run {i} failed: {e}", flush=True)
            # the same command through srun directly: launch to running, to done
            for i in range(runs):
                stamp = os.path.join(c.dir, f"srun-{i}")
                t0 = time.time()
                r = subprocess.run(["srun", "-p", "gpu", "-N1", "--exclusive", "/bin/sh", "-c",
                                    f"date +%s.%N > {stamp}; echo ran"], capture_output=True, text=True,
                                   env=s.env_all(), timeout=120)
                done = time.time() - t0
                if r.returncode or not os.path.exists(stamp):
                    print(f"srun run {i} failed: {r.stderr.strip()}", flush=True)
                    continue
                with open(stamp) as f:
                    srun.append({"running": float(f.read()) - t0, "done": done})
    report("slurm provisioner, submit to", out)
    report("srun directly, launch to", srun)


def bench_scale_down(harness, yard, nodes, minimum, idle):
    with harness.cluster("bench-scale-down") as c:
        script = write_script(c, yard)
        c.master_args += ["--provisioner", f"gpu=command:{script}", "--provisioner-shape", "gpu=gpus=1",
                          "--provisioner-idle", f"gpu={idle}s", "--provisioner-cooldown", "1s",
                          "--provisioner-min", f"gpu={minimum}", "--provisioner-max", f"gpu={nodes}",
                          "--provisioner-max-pending", str(nodes)]
        c.start_master()
        ids = [c.api.submit(harness.spec(["/bin/sh", "-c", "sleep 1"], name=f"fill-{i}", gpus=1,
                                         pool="gpu"))[1]["id"] for i in range(nodes)]
        for j in ids:
            if c.api.wait_job(j, timeout=120)["state"] != "succeeded":
                print("scale-down: a job to fill the pool failed", flush=True)
                return
        ended = max(c.api.job(j)["finished_at"] for j in ids) / 1e6
        ready = lambda: len([n for n in c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"]])
        if ready() != nodes:
            print(f"scale-down: the pool has {ready()} nodes, not {nodes}", flush=True)
        t_idle = ended + idle  # the earliest any of them may go
        harness.wait_until(lambda: ready() == minimum and
                           sum(c.api.json("GET", "/v1/provisioners", expect=200)[1]["pools"][0]["nodes"].values())
                           == minimum, 120, "the pool at its minimum")
        took = time.time() - t_idle
        a = audit_times(c, int(t_idle * 1e6) - 1000000)
        actions = {k: len(v) for k, v in a.items() if k.startswith("node_")}
        with open(os.path.join(c.dir, "calls.log")) as f:
            downs = sum(1 for line in f if re.search(r" down ", line))
        print(f"scale-down {nodes} idle nodes -> {minimum} (idle time {idle}s): {took:.2f}s after the idle "
              f"time passed; {sum(actions.values())} audited actions {actions}; {downs} script downs",
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--idle", type=int, default=2)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--min", type=int, default=2)
    ap.add_argument("--skip-slurm", action="store_true")
    args = ap.parse_args()
    yard = os.path.abspath(args.yard)
    os.environ["YARD"] = yard
    import harness
    harness.YARD = yard
    bench_command(harness, yard, args.runs, args.idle)
    if not args.skip_slurm:
        bench_slurm(harness, yard, args.runs, args.idle)
    bench_scale_down(harness, yard, args.nodes, args.min, args.idle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
