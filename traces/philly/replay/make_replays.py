#!/usr/bin/env python3
"""Write Philly replays in the Tiresias simulator's input format.

From ../philly_jobs_normalized.csv, one replay per virtual cluster (VC) with
at least 500 jobs, every job of that VC, submit times counted from its first
job: vc<VC>_tiresias.csv, columns job_id, num_gpu, submit_time, iterations
(= duration), model_name (resnet50), duration, interval, orig_row, as in
vc11cb48_oct-nov_tiresias.csv (README.md). Deterministic: the same input
gives the same bytes.

Usage:
  make_replays.py --out DIR            every replay, into DIR
  make_replays.py --out DIR --vcs 11cb48,6214e9
                                       only those VCs' replays
  make_replays.py --list               the replays and their clusters, as CSV
  make_replays.py --vc 11cb48 --from 2017-10-01 --to 2017-11-30 --out DIR
                                       one VC between two dates (inclusive);
                                       this rebuilds vc11cb48_oct-nov_tiresias.csv

The clusters of each replay (--list) are nodes of 8 GPUs: the smallest
count that holds both the VC's biggest job and its average demand (its
GPU-seconds over the span of its submissions), and twice that. Held out of
tuning: every third VC in name order (the 3rd, 6th and 9th), chosen before
any policy was run on these replays. Python 3 standard library only.
"""

import argparse
import csv
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_INPUT = os.path.join(HERE, "..", "philly_jobs_normalized.csv")
MIN_JOBS = 500
GPUS_PER_NODE = 8
HEADER = ["job_id", "num_gpu", "submit_time", "iterations", "model_name", "duration",
          "interval", "orig_row"]


def read_jobs(path):
    """The rows of the normalized file, in its (submit) order."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def by_vc(rows):
    vcs = {}
    for r in rows:
        vcs.setdefault(r["vc"], []).append(r)
    return vcs


def clusters(jobs):
    """The node counts (of 8 GPUs) a VC's replay is run at."""
    submits = [int(r["submit_time"]) for r in jobs]
    work = sum(int(r["num_gpus"]) * int(r["duration"]) for r in jobs)
    span = max(submits) - min(submits) + 1
    biggest = max(int(r["num_gpus"]) for r in jobs)
    base = max(math.ceil(biggest / GPUS_PER_NODE), math.ceil(work / span / GPUS_PER_NODE))
    return [base, 2 * base]


def replays(rows):
    """(vc, jobs, held_out) of every VC with at least MIN_JOBS jobs, by name."""
    vcs = sorted((vc, jobs) for vc, jobs in by_vc(rows).items() if len(jobs) >= MIN_JOBS)
    return [(vc, jobs, i % 3 == 2) for i, (vc, jobs) in enumerate(vcs)]


def write_replay(path, jobs):
    first = int(jobs[0]["submit_time"])
    submits = [int(r["submit_time"]) - first for r in jobs]
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(HEADER)
        for i, r in enumerate(jobs):
            interval = submits[i + 1] - submits[i] if i + 1 < len(jobs) else 0
            w.writerow([i, r["num_gpus"], submits[i], r["duration"], "resnet50", r["duration"],
                        interval, r["orig_row"]])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--input", default=DEFAULT_INPUT, help="philly_jobs_normalized.csv")
    ap.add_argument("--out", help="directory to write the replays into")
    ap.add_argument("--list", action="store_true", help="print the replays and clusters")
    ap.add_argument("--vc", help="only this VC (any job count)")
    ap.add_argument("--vcs", help="with --out: only these of the replays, comma-separated")
    ap.add_argument("--from", dest="date_from", help="first submit day, YYYY-MM-DD")
    ap.add_argument("--to", dest="date_to", help="last submit day, YYYY-MM-DD")
    args = ap.parse_args()
    if not args.out and not args.list:
        ap.error("give --out DIR or --list")
    rows = read_jobs(args.input)

    if args.vc:
        jobs = [r for r in rows if r["vc"] == args.vc
                and (not args.date_from or r["timestamp"][:10] >= args.date_from)
                and (not args.date_to or r["timestamp"][:10] <= args.date_to)]
        if not jobs:
            sys.exit("make_replays.py: no jobs of vc '%s' in that range" % args.vc)
        name = "vc%s_tiresias.csv" % args.vc
        if args.date_from or args.date_to:
            name = "vc%s_%s_%s_tiresias.csv" % (args.vc, args.date_from or "", args.date_to or "")
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            write_replay(os.path.join(args.out, name), jobs)
        return

    todo = replays(rows)
    if args.list:
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(["trace", "vc", "jobs", "cluster", "gpus", "held_out"])
        for vc, jobs, held in todo:
            for n in clusters(jobs):
                w.writerow(["vc%s_tiresias.csv" % vc, vc, len(jobs),
                            "%dx%d" % (n, GPUS_PER_NODE), n * GPUS_PER_NODE,
                            "yes" if held else "no"])
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        want = set(args.vcs.split(",")) if args.vcs else None
        for vc, jobs, _ in todo:
            if want is not None and vc not in want:
                continue
            write_replay(os.path.join(args.out, "vc%s_tiresias.csv" % vc), jobs)


if __name__ == "__main__":
    main()
