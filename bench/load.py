#!/usr/bin/env python3
"""Master under read load while jobs are submitted, in one run:

  wrk (Debian's) with --connections connections (default 1,000) and 2
  threads, --duration seconds each, against GET /v1/jobs?limit=50 and then
  GET /v1/queue, with an admin token; meanwhile 10 client threads submit
  jobs (POST /v1/jobs, each waiting for its 201) as fast as they can. The
  cluster has --jobs jobs queued beforehand (no agent: they all wait, so the
  queue is long and every pass of the scheduler sees them).

Prints, per endpoint: requests/s, the error rate (socket errors, timeouts
and non-2xx answers over all requests; target 0), latency p50/p99 (target
p99 < 100 ms) from wrk's own histogram; the submitters' rate and errors; and
the master's RSS before and after (from /proc). Run by hand as root;
asserts nothing.

The master runs with --rate-limit 0: every request here carries one token,
and the point is the master's capacity, not its per-token limit (with the
default limit, wrk would measure how fast 429s are sent; --rate-limit
RATE[:BURST] runs it with a limit, the 429s counted as errors).

usage: bench/load.py [--yard build/yard] [--connections 1000] [--duration 10] [--jobs 2000]
                     [--rate-limit 0]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from benchlib import rss_mib  # noqa: E402

WRK_LUA = r"""
wrk.headers["Authorization"] = "Bearer " .. os.getenv("YARD_TOKEN")
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT requests=%d non2xx=%d connect=%d read=%d write=%d timeout=%d p50=%.3f p99=%.3f max=%.3f\n",
    summary.requests, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
"""


def submitter(url, token, stop, stats, lock, k):
    i = 0
    while not stop.is_set():
        body = json.dumps({"spec": {"name": f"load-{k}-{i}", "command": ["/bin/true"],
                                    "tasks": {"worker": {"gpus": 0, "cpus": 0.1}},
                                    "placement": {"wait_for_nodes": True}}}).encode()
        req = urllib.request.Request(url + "/v1/jobs", data=body, method="POST",
                                     headers={"Authorization": "Bearer " + token,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                ok = r.status == 201
        except Exception:
            ok = False
        with lock:
            stats["ok" if ok else "err"] += 1
        i += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--rate-limit", default="0", help="the master's --rate-limit (default 0: off)")
    args = ap.parse_args()
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness

    with harness.cluster("bench-load", master_args=["--rate-limit", args.rate_limit]) as c:
        c.start_master()
        pid = c.master.p.pid
        for i in range(args.jobs):
            st = 429
            while st == 429:  # only with --rate-limit: wait for the bucket
                st, _ = c.api.submit({"name": f"pre-{i}", "command": ["/bin/true"],
                                      "tasks": {"worker": {"gpus": 0, "cpus": 0.1}},
                                      "placement": {"wait_for_nodes": True}})
                if st == 429:
                    time.sleep(0.05)
            if st != 201:
                raise SystemExit(f"pre-submit {i}: HTTP {st}")
        rss0 = rss_mib(pid)
        print(f"master: {args.jobs} jobs queued (no nodes), RSS {rss0:.1f} MiB; "
              f"wrk {args.connections} connections x {args.duration} s per endpoint, 10 submitters; "
              + ("rate limit off (--rate-limit 0: one token, capacity measured)" if args.rate_limit == "0"
                 else f"--rate-limit {args.rate_limit}: the token's 429s count as errors"),
              flush=True)
        lua = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
        lua.write(WRK_LUA)
        lua.close()
        env = dict(os.environ, YARD_TOKEN=c.admin_token)
        rows = []
        for path in ("/v1/jobs?limit=50", "/v1/queue"):
            stop, lock = threading.Event(), threading.Lock()
            stats = {"ok": 0, "err": 0}
            th = [threading.Thread(target=submitter, args=(c.url, c.admin_token, stop, stats, lock, k))
                  for k in range(10)]
            for t in th:
                t.start()
            t0 = time.monotonic()
            r = subprocess.run(["wrk", "-t2", f"-c{args.connections}", f"-d{args.duration}s", "--timeout", "10s",
                                "-s", lua.name, c.url + path], capture_output=True, text=True, env=env)
            dt = time.monotonic() - t0
            stop.set()
            for t in th:
                t.join()
            m = re.search(r"RESULT (.*)", r.stdout)
            if not m:
                raise SystemExit(f"wrk: {r.stdout}\n{r.stderr}")
            res = {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split())}
            errors = res["non2xx"] + res["connect"] + res["read"] + res["write"] + res["timeout"]
            rows.append((path, res, errors, stats, dt))
        os.unlink(lua.name)
        rss1 = rss_mib(pid)

    print()
    print(f"{'endpoint':22}{'req/s':>10}{'errors':>10}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}"
          f"{'submits/s':>11}{'submit errors':>15}")
    for path, res, errors, stats, dt in rows:
        print(f"{path:22}{res['requests'] / dt:10.0f}{errors / max(res['requests'], 1):10.2%}"
              f"{res['p50']:10.1f}{res['p99']:10.1f}{res['max']:10.1f}{stats['ok'] / dt:11.0f}{stats['err']:15d}")
    print(f"master RSS: {rss0:.1f} MiB before, {rss1:.1f} MiB after")


if __name__ == "__main__":
    main()
