#!/usr/bin/env python3
"""Takeover time of a standby master: two masters on one PostgreSQL store and
two agents, each in its own network namespace (tests/e2e/ha.py), a job
running on the agents and clients submitting all along. The leader is
SIGKILLed, the standby takes over, and the killed master is started again (it
stands by); ten times, the two masters taking turns. A kill's takeover time
runs from the SIGKILL to the first submission the new leader acknowledges;
printed with the lease settings, then p50 and max, beside the anchors:
Kubernetes' default lease (15 s) and Slurm's SlurmctldTimeout (120 s).

At the end the running job must still be in its first attempt with its
whole log: a failover that a task noticed is reported, not timed.

Then, unless --takeover-only, the store's two other numbers, each beside its
peer in one run: durable submit throughput with 8 clients on PostgreSQL and
on SQLite (bench/store.py --runs 1), and log (and archive) throughput into
the shared store from one node beside writing local files (bench/blobs.py
--runs 1). Nothing here asserts on time.

usage: bench/failover.py [--yard build/yard] [--kills N] [--clients N]
                         [--leader-lease D] [--leader-renew D] [--takeover-only]
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

COUNTER = "i=0; while [ $i -lt {n} ]; do i=$((i+1)); echo line $i; sleep 0.1; done"


class Submitter:
    """Clients submitting /bin/true jobs through a FailoverApi each; acks
    holds (monotonic time, URL of the master that answered 201)."""

    def __init__(self, make_api, clients, spec):
        self.acks = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.spec = spec
        self.threads = [threading.Thread(target=self._run, args=(make_api(),), daemon=True)
                        for _ in range(clients)]
        for t in self.threads:
            t.start()

    def _run(self, api):
        while not self.stop.is_set():
            url = api.url
            try:
                st, _ = api.submit(self.spec(["/bin/true"], name="bench", cpus=0.01))
            except OSError:
                time.sleep(0.01)
                continue
            if st == 201:
                with self.lock:
                    self.acks.append((time.monotonic(), url))
            else:
                time.sleep(0.01)

    def first_ack_after(self, t, url):
        with self.lock:
            return next((a for a, u in self.acks if a > t and u == url), None)

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(10)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--leader-lease", default=None, help="yard master --leader-lease (default: its own)")
    ap.add_argument("--leader-renew", default=None)
    ap.add_argument("--takeover-only", action="store_true", help="skip bench/store.py and bench/blobs.py")
    args = ap.parse_args()
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness as h
    h.YARD = os.environ["YARD"]
    import ha
    ha.YARD = h.YARD

    extra = []
    if args.leader_lease:
        extra += ["--leader-lease", args.leader_lease]
    if args.leader_renew:
        extra += ["--leader-renew", args.leader_renew]
    n_lines = 100000
    times = []
    with ha.ha("bench-failover", master_args=["--rate-limit", "0"] + extra) as c:
        c.start_masters()
        c.start_agents(gpus="sim:2")
        st, doc = c.api.submit(h.spec(["/bin/sh", "-c", COUNTER.format(n=n_lines)], name="across"))
        if st != 201:
            sys.exit(f"cannot submit the long job: {st} {doc}")
        long = doc["id"]
        h.wait_until(lambda: c.api.job(long)["state"] == "running", 60, "the long job to run")
        load = Submitter(lambda: ha.FailoverApi([c.urls[m] for m in c.master_names], c.admin_token),
                         args.clients, h.spec)
        try:
            for k in range(args.kills):
                leader = c.leader()
                if not leader:
                    h.wait_until(c.leader, 30, "a leader")
                    leader = c.leader()
                other = next(m for m in c.master_names if m != leader)
                time.sleep(1.0)  # a steady load first
                c.masters[leader].kill(signal.SIGKILL)
                killed = time.monotonic()
                c.masters[leader].p.wait()
                first = h.wait_until(lambda: load.first_ack_after(killed, c.urls[other]), 60,
                                     f"a submission acknowledged by {other}")
                times.append(first - killed)
                print(f"kill {k + 1}: {leader} -> {other}: first acknowledged submission after "
                      f"{times[-1]:.3f} s", flush=True)
                c.start_master_on(leader)
                h.wait_until(lambda: (ha.health(c.urls[leader]) or {}).get("role") == "standby", 60,
                             f"{leader} to stand by again")
        finally:
            load.close()
        j = c.api.job(long)
        noticed = j["attempt"] != 0 or len(j["tasks"]) != 1 or j["state"] != "running"
        print(f"the job running across {len(times)} failovers: state {j['state']}, attempt {j['attempt']}, "
              f"{len(j['tasks'])} task(s){' -- A TASK NOTICED' if noticed else ', undisturbed'}")
        print(f"submissions acknowledged: {len(load.acks)}")
    lease = args.leader_lease or "1500ms (default)"
    renew = args.leader_renew or "250ms (default)"
    print(f"takeover over {len(times)} leader kills, --leader-lease {lease}, --leader-renew {renew}: "
          f"p50 {statistics.median(times):.3f} s, max {max(times):.3f} s, min {min(times):.3f} s")
    print("anchors: Kubernetes' default lease 15 s (leader election); Slurm's SlurmctldTimeout 120 s")
    if args.takeover_only:
        return
    for script in ("store.py", "blobs.py"):
        print(f"--- bench/{script} --runs 1", flush=True)
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", script), "--yard", args.yard,
                        "--runs", "1"], check=False)


if __name__ == "__main__":
    main()
