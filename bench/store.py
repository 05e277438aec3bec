#!/usr/bin/env python3
"""Durable submit throughput on each store, in the same run: 8 clients POST
/v1/jobs in a loop (bench/submit_throughput.c; a 201 means the job is
committed) to a master on SQLite (DATA/state.db: WAL, synchronous=FULL) and
to one on PostgreSQL (--store; a private server from tests/pg/pgtmp.sh,
fsync on, synchronous_commit on: a COMMIT returns once its WAL is flushed).
A fresh master and store per run; the runs alternate between the stores so
that what else the machine does falls on both. Prints jobs/s, the clients'
latencies and, for PostgreSQL, how many submissions one commit carried
(group commit). Nothing here asserts on time.

usage: bench/store.py [--yard build/yard] [--runs N] [--jobs N] [--clients N]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))


def one_run(h, tool, store, clients, jobs):
    """One measured run on store ("sqlite" or "postgres"): the tool's
    key=value numbers, plus commits for PostgreSQL."""
    pg = None
    args = ["--rate-limit", "0"]  # a capacity test: one token submits as fast as it can
    if store == "postgres":
        from pgserver import PgServer
        pg = PgServer()
        args += ["--store", pg.url]
    try:
        with h.cluster(f"bench-store-{store}", master_args=args) as c:
            c.start_master()
            before = pg_commits(pg) if pg else 0
            r = subprocess.run([tool, c.url, c.admin_token, str(clients), str(jobs)],
                               capture_output=True, text=True)
            if r.returncode:
                print(r.stderr, file=sys.stderr)
            nums = dict(re.findall(r"(\w+)=([\d.]+)", r.stdout))
            if pg:
                nums["commits"] = pg_commits(pg) - before
            return nums
    finally:
        if pg:
            pg.close()


def pg_commits(pg):
    """Transactions committed in the database so far (pg_stat_database)."""
    pg.sql("SELECT pg_stat_clear_snapshot()")
    return int(pg.sql("SELECT xact_commit FROM pg_stat_database WHERE datname = 'yard'")[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--clients", type=int, default=8)
    args = ap.parse_args()
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness as h
    h.YARD = os.environ["YARD"]
    tool = os.path.join(os.path.dirname(os.path.abspath(args.yard)), "bench", "submit_throughput")
    results = {"sqlite": [], "postgres": []}
    for i in range(args.runs):
        for store in results:
            n = one_run(h, tool, store, args.clients, args.jobs)
            results[store].append(n)
            extra = ""
            if "commits" in n and n["commits"]:
                extra = f", {n['commits']} commits ({float(n['ok']) / n['commits']:.1f} jobs a commit)"
            print(f"run {i + 1} {store:8}: {float(n.get('jobs_per_s', 0)):7.0f} jobs/s, errors "
                  f"{n.get('errors', '?')}, p50 {n.get('latency_p50_ms', '?')} ms, p99 "
                  f"{n.get('latency_p99_ms', '?')} ms{extra}", flush=True)
    for store, runs in results.items():
        rates = [float(n.get("jobs_per_s", 0)) for n in runs]
        print(f"{store:8}: durable submissions with {args.clients} clients, {args.jobs} jobs a run: "
              f"median {statistics.median(rates):.0f} jobs/s (runs: "
              f"{', '.join(f'{r:.0f}' for r in rates)})")
    # a shared machine's disk moves both stores' numbers a lot from run to
    # run; the ratio of the runs side by side moves less
    ratios = [float(p.get("jobs_per_s", 0)) / float(q["jobs_per_s"])
              for p, q in zip(results["postgres"], results["sqlite"]) if float(q.get("jobs_per_s", 0))]
    if ratios:
        print(f"postgres / sqlite, run by run: median {statistics.median(ratios):.2f} "
              f"(runs: {', '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
