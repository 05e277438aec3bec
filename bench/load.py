#!/usr/bin/env python3
"""Master under read load while jobs are submitted, in one run:

  wrk (Debian's) with --connections connections (default 1,000) and 2
  threads, --duration seconds each, against GET /v1/jobs?limit=50 and then
  GET /v1/queue (each --runs times), with an admin token; meanwhile 10
  client threads submit jobs (POST /v1/jobs, each waiting for its 201) as
  fast as they can. The cluster has --jobs jobs queued beforehand (no agent:
  they all wait, so the queue is long and every pass of the scheduler sees
  them).

Each run has a master of its own, so that what one run submitted does not
lengthen the next one's queue. Prints, per endpoint and run: requests/s;
the error rate (socket errors, timeouts and non-2xx answers over all
requests; target 0); latency p50/p99 and max (target p99 < 100 ms) from
wrk's own histogram; the master's CPU (per cent of one core over the run,
and microseconds per answered request, reads and submissions together: the
figure that moves least with what else the machine runs); the submitters'
rate and errors; the master's RSS after the run and its peak; and whether
every acknowledged submission is there: each job a 201 acknowledged must be
listed with its name while the master runs, and again after it is killed
(SIGKILL) and restarted. The load average is printed at the start and the
end: on a shared machine the latency and rate figures move with it.

The master runs with --rate-limit 0: every request here carries one token,
and the point is the master's capacity, not its per-token limit (with the
default limit, wrk would measure how fast 429s are sent; --rate-limit
RATE[:BURST] runs it with a limit, the 429s counted as errors).

Run by hand as root; asserts nothing but exits 1 when an acknowledged
submission is missing.

usage: bench/load.py [--yard build/yard] [--connections 1000] [--duration 10] [--jobs 2000]
                     [--runs 1] [--rate-limit 0]
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

SUBMITTERS = 10


def cpu_s(pid):
    """User + system CPU seconds process pid has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def submitter(url, token, stop, stats, lock, acked, k):
    i = 0
    while not stop.is_set():
        name = f"load-{k}-{i}"
        body = json.dumps({"spec": {"name": name, "command": ["/bin/true"],
                                    "tasks": {"worker": {"gpus": 0, "cpus": 0.1}},
                                    "placement": {"wait_for_nodes": True}}}).encode()
        req = urllib.request.Request(url + "/v1/jobs", data=body, method="POST",
                                     headers={"Authorization": "Bearer " + token,
                                              "Content-Type": "application/json"})
        jid = None
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                if r.status == 201:
                    jid = json.load(r)["id"]
        except Exception:
            pass
        with lock:
            if jid is None:
                stats["err"] += 1
            else:
                stats["ok"] += 1
                acked[jid] = name
        i += 1


def measure(c, path, args, lua, acked):
    """One wrk run against path with the submitters going; returns its row."""
    pid = c.master.p.pid
    stop, lock = threading.Event(), threading.Lock()
    stats = {"ok": 0, "err": 0}
    th = [threading.Thread(target=submitter, args=(c.url, c.admin_token, stop, stats, lock, acked, k))
          for k in range(SUBMITTERS)]
    cpu0 = cpu_s(pid)
    t0 = time.monotonic()
    for t in th:
        t.start()
    r = subprocess.run(["wrk", "-t2", f"-c{args.connections}", f"-d{args.duration}s", "--timeout", "10s",
                        "-s", lua, c.url + path], capture_output=True, text=True,
                       env=dict(os.environ, YARD_TOKEN=c.admin_token))
    stop.set()
    for t in th:
        t.join()
    dt = time.monotonic() - t0
    cpu = cpu_s(pid) - cpu0
    m = re.search(r"RESULT (.*)", r.stdout)
    if not m:
        raise SystemExit(f"wrk: {r.stdout}\n{r.stderr}")
    res = {k: float(v) for k, v in (kv.split("=") for kv in m.group(1).split())}
    errors = res["non2xx"] + res["connect"] + res["read"] + res["write"] + res["timeout"]
    answered = res["requests"] + stats["ok"] + stats["err"]
    return {"path": path, "rps": res["requests"] / dt, "err": errors / max(res["requests"], 1),
            "p50": res["p50"], "p99": res["p99"], "max": res["max"], "cpu_pct": 100 * cpu / dt,
            "cpu_us": 1e6 * cpu / max(answered, 1), "sub_rps": stats["ok"] / dt,
            "sub_err": stats["err"]}


def missing_acked(c, acked):
    """The acknowledged submissions the master does not list (id -> name)."""
    status, doc = c.api.json("GET", f"/v1/jobs?limit={len(acked) + 100000}")
    if status != 200:
        raise SystemExit(f"GET /v1/jobs: HTTP {status}")
    have = {j["id"]: j["name"] for j in doc["jobs"]}
    return {jid: name for jid, name in acked.items() if have.get(jid) != name}


def run_one(harness, path, args, lua):
    """A fresh master with args.jobs jobs queued, one measurement against path,
    then the acknowledged submissions checked, live and after SIGKILL and a
    restart; returns the row."""
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
        acked = {}
        rss0 = rss_mib(pid)
        row = measure(c, path, args, lua, acked)
        row.update(rss0=rss0, rss1=rss_mib(pid), peak=peak_rss_mib(pid), acked=len(acked),
                   lost_live=len(missing_acked(c, acked)))
        c.master.kill()
        c.master.p.wait()
        c.start_master()
        row["lost_restart"] = len(missing_acked(c, acked))
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--rate-limit", default="0", help="the master's --rate-limit (default 0: off)")
    args = ap.parse_args()
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness

    load0 = os.getloadavg()[0]
    print(f"each run: a fresh master with {args.jobs} jobs queued (no nodes); wrk {args.connections} "
          f"connections x {args.duration} s; {SUBMITTERS} submitters; "
          f"load average {load0:.1f} on {os.cpu_count()} CPUs; "
          + ("rate limit off (--rate-limit 0: one token, capacity measured)" if args.rate_limit == "0"
             else f"--rate-limit {args.rate_limit}: the token's 429s count as errors"), flush=True)
    lua = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)
    lua.write(WRK_LUA)
    lua.close()
    try:
        rows = [run_one(harness, path, args, lua.name)
                for path in ("/v1/jobs?limit=50", "/v1/queue") for _ in range(args.runs)]
    finally:
        os.unlink(lua.name)
    load1 = os.getloadavg()[0]

    print()
    print(f"{'endpoint':20}{'req/s':>8}{'errors':>8}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"
          f"{'CPU %':>7}{'CPU us/req':>11}{'submits/s':>10}{'submit err':>11}"
          f"{'RSS MiB':>9}{'peak MiB':>9}{'acked':>7}{'lost':>6}")
    for w in rows:
        print(f"{w['path']:20}{w['rps']:8.0f}{w['err']:8.2%}{w['p50']:9.1f}{w['p99']:9.1f}{w['max']:9.1f}"
              f"{w['cpu_pct']:7.0f}{w['cpu_us']:11.0f}{w['sub_rps']:10.1f}{w['sub_err']:11d}"
              f"{w['rss1']:9.1f}{w['peak']:9.1f}{w['acked']:7d}{w['lost_live'] + w['lost_restart']:6d}")
    print("RSS: after the run (it was "
          + ", ".join(f"{w['rss0']:.1f}" for w in rows) + " MiB before); peak: VmHWM; "
          "acked: submissions answered 201; lost: of those, not listed while running "
          "or after SIGKILL and a restart")
    print(f"load average: {load0:.1f} at the start, {load1:.1f} at the end")
    if any(w["lost_live"] or w["lost_restart"] for w in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
