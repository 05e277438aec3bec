#!/usr/bin/env python3
"""Trainyard core benchmarks. Each starts its own master and agents on
loopback in a temp dir and prints numbers (targets beside them); nothing here
asserts on time.

  latency     submit->running on an idle local agent, p50/p99 over 200 jobs,
              from the master's own timestamps (submitted_at, running_at)
  throughput  durable submissions/s through the HTTP API, 8 concurrent clients,
              over plain http and over TLS (--tls-self-signed, clients by pin)
  rss         agent RSS when idle; master RSS with 10,000 finished jobs
              (while running, and after a restart that loads them from the store)
  sched       one scheduling pass, 10,000 nodes x 8 GPUs and 100,000 queued jobs
              (bench/sched.c; build with -Dbuildtype=release for real numbers)

usage: bench/run.py [--yard build/yard] [latency|throughput|rss|sched ...]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from benchlib import pct, rss_mib  # noqa: E402


def bench_latency(h):
    with h.cluster("bench-latency") as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        lat, placed = [], []
        for i in range(200):
            status, job = c.api.submit(h.spec(["/bin/true"], name=f"lat{i}", cpus=0.1))
            assert status == 201, job
            j = c.api.wait_job(job["id"], timeout=30)
            if j["state"] != "succeeded" or not j.get("running_at"):
                print(f"latency: job {job['id']} ended {j['state']} without running_at", file=sys.stderr)
                continue
            lat.append((j["running_at"] - j["submitted_at"]) / 1000.0)
            placed.append((j["started_at"] - j["submitted_at"]) / 1000.0)
        print(f"latency submit->running over {len(lat)} jobs: p50 {pct(lat, 50):.2f} ms "
              f"(target <= 10), p99 {pct(lat, 99):.2f} ms (target <= 50), "
              f"mean {statistics.mean(lat):.2f} ms, max {max(lat):.2f} ms; of which "
              f"submit->placed p50 {pct(placed, 50):.2f} ms, placed->running p50 "
              f"{pct([a - b for a, b in zip(lat, placed)], 50):.2f} ms")


def bench_throughput(h, yard):
    tool = os.path.join(os.path.dirname(yard), "bench", "submit_throughput")
    # one token submits as fast as it can: a capacity test, so no rate limit
    with h.cluster("bench-throughput", master_args=["--rate-limit", "0"]) as c:
        c.start_master()
        r = subprocess.run([tool, c.url, c.admin_token, "8", "20000"], capture_output=True, text=True)
        print(r.stdout.strip() + "   (target >= 2000 jobs/s; master started with --rate-limit 0)")
        if r.returncode:
            print(r.stderr, file=sys.stderr)
        print(f"master RSS with 20,000 queued jobs: {rss_mib(c.master.p.pid):.1f} MiB")
    with h.cluster("bench-throughput-tls", master_args=["--tls-self-signed", "--rate-limit", "0"]) as c:
        c.start_master()
        r = subprocess.run([tool, c.url, c.admin_token, "8", "20000", c.pin], capture_output=True,
                           text=True)
        print(r.stdout.strip() + "   over TLS (keep-alive: one handshake per client; "
              "master started with --rate-limit 0)")
        if r.returncode:
            print(r.stderr, file=sys.stderr)


def bench_sched(yard):
    tool = os.path.join(os.path.dirname(yard), "bench", "sched")
    subprocess.run([tool], check=True)


def bench_rss(h):
    # 10,000 submissions from one token as fast as 8 threads go: the default
    # rate limit would answer 429 to most of them
    with h.cluster("bench-rss", master_args=["--rate-limit", "0"]) as c:
        c.start_master()
        print("rss: master started with --rate-limit 0")
        a = c.start_agent("n1", gpus="sim:8")
        time.sleep(2)
        print(f"agent RSS idle: {rss_mib(a.p.pid):.1f} MiB (target <= 10)")
        n = 10000
        ids, failed = [], []
        lock = threading.Lock()

        def submit(k):
            try:
                for i in range(k, n, 8):
                    status, job = c.api.submit(h.spec(["/bin/true"], name=f"rss{i}", cpus=0.01))
                    if status != 201:
                        raise RuntimeError(f"submit answered {status}: {job}")
                    with lock:
                        ids.append(job["id"])
            except Exception as e:  # the wait below must not wait for jobs never made
                with lock:
                    failed.append(f"submitter {k}: {e}")

        t0 = time.monotonic()
        threads = [threading.Thread(target=submit, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failed:
            raise RuntimeError(f"rss: {len(ids)} of {n} jobs submitted; " + "; ".join(failed))
        n = len(ids)

        def done():  # from /metrics, so the wait itself costs the master nothing
            _, text, _ = c.api.request("GET", "/metrics")
            m = re.search(rb'yard_jobs\{state="succeeded"\} (\d+)', text)
            return int(m.group(1)) if m else 0
        while done() < n and time.monotonic() - t0 < 1800:
            time.sleep(2)
        finished = done()
        print(f"ran {finished} jobs to completion in {time.monotonic() - t0:.0f} s "
              f"({finished / (time.monotonic() - t0):.0f} jobs/s through one agent)")
        print(f"master RSS with {finished} finished jobs: {rss_mib(c.master.p.pid):.1f} MiB (target <= 64)")
        t1 = time.monotonic()
        status, data, _ = c.api.request("GET", "/v1/jobs?limit=100000")
        print(f"listing all {finished} jobs: {len(data) / 2**20:.1f} MiB of JSON in {time.monotonic() - t1:.2f} s; "
              f"master RSS right after: {rss_mib(c.master.p.pid):.1f} MiB")
        time.sleep(1.5)
        print(f"master RSS 1.5 s later: {rss_mib(c.master.p.pid):.1f} MiB")
        c.master.stop()
        c.start_master()
        c.api.json("GET", "/v1/jobs?limit=10")
        print(f"master RSS after a restart that loaded them: {rss_mib(c.master.p.pid):.1f} MiB (target <= 64)")
        print(f"agent RSS after running them: {rss_mib(a.p.pid):.1f} MiB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("which", nargs="*", default=["latency", "throughput", "rss"])
    args = ap.parse_args()
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness as h
    h.YARD = os.environ["YARD"]
    for w in args.which:
        {"latency": lambda: bench_latency(h), "throughput": lambda: bench_throughput(h, args.yard),
         "rss": lambda: bench_rss(h), "sched": lambda: bench_sched(args.yard)}[w]()


if __name__ == "__main__":
    main()
