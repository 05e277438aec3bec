#!/usr/bin/env python3
"""The default policy against the peer on every per-VC Philly replay.

Generates the replays (traces/philly/replay/make_replays.py, into a temp
dir unless --replays is given), runs `yard sim --scheme count` (the peer's scheme) on each replay and cluster
of `make_replays.py --list` (the default policy, or the policy and flags of
--flags), and prints the table of docs/scheduler.md ("Per-VC replays"):
the peer's dlas-gpu and srtf average JCT
(traces/philly/replay/peer_results_philly_vcs.csv), ours, and the ratios.
Exit status 1 if any row misses the bar (below dlas-gpu, within 1.15x of
srtf) or lacks peer rows. tests/unit/sched/test_philly_vcs.c checks 16
rows (all but vc6214e9's); this checks all of them.

usage: bench/philly_vcs.py [--yard build/yard] [--flags "--policy las --age 0"]
                           [--replays DIR] [--only VC,...]

One run at a time (vc6214e9 on 5x8 takes minutes); run it under `nice`.
"""
import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPLAY = os.path.join(ROOT, "traces", "philly", "replay")
PEER = os.path.join(REPLAY, "peer_results_philly_vcs.csv")
BAR_SRTF = 1.15


def sim(yard, trace, cluster, flags):
    # the peer's cost model: GPUs counted, not placed
    out = subprocess.run([yard, "sim", "--scheme", "count", "--trace", trace, "--cluster", cluster]
                         + flags,
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"avg JCT\s+([\d.]+)", out).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--flags", default="", help="yard sim flags (default: the default policy)")
    ap.add_argument("--replays", help="folder of make_replays.py --out (default: generated)")
    ap.add_argument("--only", help="comma-separated VCs")
    args = ap.parse_args()

    with open(PEER, newline="") as f:
        peer = {(r["trace"], r["cluster"], r["policy"]): r for r in csv.DictReader(f)}
    listing = subprocess.run([sys.executable, os.path.join(REPLAY, "make_replays.py"), "--list"],
                             check=True, capture_output=True, text=True).stdout
    rows = list(csv.DictReader(listing.splitlines()))
    tmp = None
    replays = args.replays
    if not replays:
        tmp = tempfile.TemporaryDirectory()
        replays = tmp.name
        subprocess.run([sys.executable, os.path.join(REPLAY, "make_replays.py"), "--out", replays],
                       check=True)
    only = set(args.only.split(",")) if args.only else None
    missed = 0
    print("| replay | cluster | jobs | held out | peer dlas-gpu | peer srtf | yard | "
          "/ dlas-gpu | / srtf | bar |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if only and r["vc"] not in only:
            continue
        d = peer.get((r["trace"], r["cluster"], "dlas-gpu"))
        s = peer.get((r["trace"], r["cluster"], "shortest"))
        if not d or not s:
            print("| %s | %s | %s | %s | no peer rows | | | | | missing |"
                  % (r["trace"], r["cluster"], r["jobs"], r["held_out"]))
            missed += 1
            continue
        ours = sim(args.yard, os.path.join(replays, r["trace"]), r["cluster"], args.flags.split())
        dl, sr = float(d["avg_jct_s"]), float(s["avg_jct_s"])
        ok = ours < dl and ours <= BAR_SRTF * sr
        missed += not ok
        print("| %s | %s | %s | %s | %s | %s | %s | %.3f | %.3f | %s |"
              % (r["trace"].replace("_tiresias.csv", ""), r["cluster"], format(int(r["jobs"]), ","),
                 "**yes**" if r["held_out"] == "yes" else "no", format(dl, ",.1f"),
                 format(sr, ",.1f"), format(ours, ",.1f"), ours / dl, ours / sr,
                 "meets" if ok else "misses"), flush=True)
    if tmp:
        tmp.cleanup()
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
