#!/usr/bin/env python3
"""Training metrics under a flood. A task prints N `@yard {"step": i, "loss": x}`
lines as fast as it can; the bench prints

  - the lines/s the task achieved under yard (its output goes to files that the
    agent parses beside it), against the same program outside yard writing to
    /dev/null and to a plain file;
  - the seconds from the task's end until every point is stored: the job turns
    final only once the agent has all its points acknowledged, so the master's
    finished_at minus the task's own end time bounds it from above;
  - the points the master holds (they must be N).

Then the same at a steady 10,000 lines/s for a few seconds, with the lag at the
end. Each flood runs --repeat times; the medians are printed. Nothing here
asserts on time.

usage: bench/metrics_flood.py [--yard build/yard] [--lines N] [--repeat R] [--paced-seconds S]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

# Prints N points (all on stdout), then on stderr one line: "done LINES SECONDS END".
# RATE > 0 paces the lines at RATE a second, in bursts of RATE/100.
FLOOD = r"""
import os, sys, time
n, rate = int(os.environ["N"]), float(os.environ.get("RATE", "0"))
w = sys.stdout.write
t0 = time.time()
if rate > 0:
    burst = max(1, int(rate / 100))
    for b in range(0, n, burst):
        for i in range(b, min(n, b + burst)):
            w('@yard {"step": %d, "loss": %r}\n' % (i, 1.0 / (i + 1)))
        sys.stdout.flush()
        ahead = t0 + (b + burst) / rate - time.time()
        if ahead > 0:
            time.sleep(ahead)
else:
    for i in range(n):
        w('@yard {"step": %d, "loss": %r}\n' % (i, 1.0 / (i + 1)))
sys.stdout.flush()
t1 = time.time()
sys.stderr.write("done %d %.6f %.6f\n" % (n, t1 - t0, t1))
"""


# The PATH a task gets (src/agent/shim.c), so that both run the same python3,
# and nothing else of ours (PYTHONUNBUFFERED would make every line a write).
TASK_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/tmp"}


def outside(n, sink):
    """The flood outside yard with stdout to sink; returns its lines/s."""
    with open(sink, "wb") as out:
        r = subprocess.run(["python3", "-c", FLOOD], env=dict(TASK_ENV, N=str(n)),
                           stdout=out, stderr=subprocess.PIPE, check=True)
    _, lines, secs, _ = r.stderr.decode().split()
    return int(lines) / float(secs)


def under_yard(h, c, n, rate=0):
    spec = {"name": "flood", "command": ["/bin/sh", "-c", 'exec python3 -c "$SCRIPT"'],
            "env": {"SCRIPT": FLOOD, "N": str(n), "RATE": str(rate)},
            "tasks": {"worker": {"replicas": 1, "gpus": 0, "cpus": 1}}}
    status, job = c.api.submit(spec)
    assert status == 201, job
    j = c.api.wait_job(job["id"], timeout=1800)
    assert j["state"] == "succeeded", j
    done = c.api.log(job["id"], stream="stderr").decode().split()
    lines, secs, end = int(done[1]), float(done[2]), float(done[3])
    _, doc = c.api.json("GET", f"/v1/jobs/{job['id']}/metrics?name=loss", expect=200)
    points = sum(len(s["points"]) for s in doc["series"])
    return lines / secs, j["finished_at"] / 1e6 - end, points


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--lines", type=int, default=500000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--paced-seconds", type=int, default=10)
    args = ap.parse_args()
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness as h
    h.YARD = os.environ["YARD"]
    n, med = args.lines, statistics.median

    null_rate = med(outside(n, "/dev/null") for _ in range(args.repeat))
    with tempfile.NamedTemporaryFile(prefix="yard-flood-") as f:
        file_rate = med(outside(n, f.name) for _ in range(args.repeat))
    with h.cluster("bench-metrics") as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        runs = [under_yard(h, c, n) for _ in range(args.repeat)]
        rate, lag, points = med(r[0] for r in runs), med(r[1] for r in runs), min(r[2] for r in runs)
        print(f"flood of {n} @yard lines (median of {args.repeat}): {rate:,.0f} lines/s under yard, "
              f"{null_rate:,.0f} lines/s to /dev/null and {file_rate:,.0f} lines/s to a file outside yard "
              f"({100.0 * rate / null_rate:.0f}% of /dev/null)")
        print(f"  every point stored {lag:.2f} s after the task ended; the master holds "
              f"{points} points (fewest of the runs)")
        if args.paced_seconds:
            pn = 10000 * args.paced_seconds
            rate, lag, points = under_yard(h, c, pn, rate=10000)
            print(f"steady 10,000 lines/s for {args.paced_seconds} s: the task achieved {rate:,.0f} lines/s; "
                  f"every point stored {lag:.2f} s after it ended; the master holds {points} of {pn}")


if __name__ == "__main__":
    main()
