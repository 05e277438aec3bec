#!/usr/bin/env python3
"""Run the Tiresias simulator (the peer) on the replays of make_replays.py.

  run_peer.py --peer DIR --replays DIR --out results.csv [--python PY]
              [--policies dlas-gpu,shortest,fifo] [--only VC,...] [--logs DIR]

DIR of --peer is the peer's simulator/ folder (github.com/SymbioticLab/Tiresias
at 959f9b0, ported to Python 3 as README.md says); --replays holds the
files make_replays.py --out wrote. For every replay and cluster of
`make_replays.py --list` (nodes of 8 GPUs, one switch) and every policy, it
runs `PY run_sim.py --cluster_spec=SPEC --scheme=count --trace_file=T
--schedule=P --log_path=L` (one run at a time) and appends a row to --out
computed from the peer's job.csv: jobs, mean and median JCT, mean
pending_time, makespan (last end_time, the first submit being 0) and the
sum of its preempt column. Rows already in --out are not run again.
Python 3 standard library only; nothing of the peer is copied here.
"""

import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIELDS = ["trace", "vc", "cluster", "gpus", "held_out", "policy", "jobs", "avg_jct_s",
          "median_jct_s", "avg_queue_s", "makespan_s", "preemptions", "peer_seconds"]


def replay_list():
    out = subprocess.run([sys.executable, os.path.join(HERE, "make_replays.py"), "--list"],
                         check=True, capture_output=True, text=True).stdout
    return list(csv.DictReader(out.splitlines()))


def summarise(job_csv):
    with open(job_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    jct = [float(r["JCT"]) for r in rows]
    return {
        "jobs": len(rows),
        "avg_jct_s": "%.1f" % (sum(jct) / len(jct)),
        "median_jct_s": "%.1f" % statistics.median(jct),
        "avg_queue_s": "%.1f" % (sum(float(r["pending_time"]) for r in rows) / len(rows)),
        "makespan_s": "%d" % max(float(r["end_time"]) for r in rows),
        "preemptions": sum(int(r["preempt"]) for r in rows),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer", required=True, help="the peer's simulator/ folder")
    ap.add_argument("--replays", required=True, help="folder of make_replays.py --out")
    ap.add_argument("--out", required=True, help="results CSV (appended)")
    ap.add_argument("--python", default=sys.executable, help="the Python that runs the peer")
    ap.add_argument("--policies", default="dlas-gpu,shortest,fifo")
    ap.add_argument("--only", help="comma-separated VCs")
    ap.add_argument("--logs", default="peer-logs", help="folder for the peer's logs")
    args = ap.parse_args()

    done = set()
    if os.path.exists(args.out):
        with open(args.out, newline="") as f:
            done = {(r["trace"], r["cluster"], r["policy"]) for r in csv.DictReader(f)}
    else:
        with open(args.out, "w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerow(FIELDS)
    only = set(args.only.split(",")) if args.only else None
    for rp in replay_list():
        if only and rp["vc"] not in only:
            continue
        nodes = int(rp["cluster"].split("x")[0])
        spec = os.path.abspath(os.path.join(args.logs, "n%dg8.csv" % nodes))
        os.makedirs(args.logs, exist_ok=True)
        with open(spec, "w") as f:
            f.write("num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n")
            f.write("1,%d,8,128,256\n" % nodes)
        for pol in args.policies.split(","):
            if (rp["trace"], rp["cluster"], pol) in done:
                continue
            log = os.path.abspath(os.path.join(args.logs, "%s-%s-%s" % (rp["vc"], rp["cluster"], pol)))
            cmd = [args.python, "run_sim.py", "--cluster_spec=" + spec, "--scheme=count",
                   "--trace_file=" + os.path.abspath(os.path.join(args.replays, rp["trace"])),
                   "--schedule=" + pol, "--log_path=" + log]
            t0 = time.time()
            with open(log + ".out", "w") as so:
                subprocess.run(cmd, cwd=args.peer, check=True, stdout=so, stderr=subprocess.STDOUT)
            row = {k: rp[k] for k in ("trace", "vc", "cluster", "gpus", "held_out")}
            row["policy"] = pol
            row.update(summarise(os.path.join(log, "job.csv")))
            row["peer_seconds"] = "%.0f" % (time.time() - t0)
            with open(args.out, "a", newline="") as f:
                csv.DictWriter(f, FIELDS, lineterminator="\n").writerow(row)
            print("%s %s %s avg %s (%s s)" % (rp["vc"], rp["cluster"], pol, row["avg_jct_s"],
                                             row["peer_seconds"]), flush=True)


if __name__ == "__main__":
    main()
