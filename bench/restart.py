#!/usr/bin/env python3
"""How fast a restarted master reconciles with its agents, in one run:

  --agents agents (sim GPUs, 2 each) on this machine; on every GPU a job:
  half of them long (they run through the restart), half short (they end
  while the master is down, so only their agents know); and as many jobs
  again queued behind them, which can start once the short ones are known
  to have ended. The master is SIGKILLed, stays down --down seconds (long
  enough for the agents' back-off to reach its maximum), and starts again on
  the same data dir.

Measured from the new master's start (its ready line): when each agent is
back (the master's "node N is back after T ms" lines), and when the master's
view is reconciled: every short job succeeded, every long job still running
in its first attempt, every queued job running. Prints, per run, the last
agent back, reconciled, and the difference (target: reconciled within 2 s
of the last agent back; negative when the agents that matter were back
first). Run by hand as root; asserts nothing.

usage: bench/restart.py [--yard build/yard] [--agents 8] [--down 12] [--runs 3]
"""
import argparse
import os
import re
import signal
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from benchlib import RunFailed  # noqa: E402


def one_run(harness, agents, down):
    with harness.cluster("bench-restart") as c:
        c.start_master()
        for i in range(agents):
            c.start_agent(f"n{i}", gpus="sim:2")
        gpus = 2 * agents
        # the short ones end about half-way through the master's absence
        longs = [c.api.submit(harness.spec(["sleep", "3600"], name=f"long-{i}", gpus=1))[1]["id"]
                 for i in range(gpus // 2)]
        shorts = [c.api.submit(harness.spec(["sleep", str(down / 2)], name=f"short-{i}", gpus=1))[1]["id"]
                  for i in range(gpus - gpus // 2)]
        jobs = lambda: {j["id"]: j for j in c.api.json("GET", "/v1/jobs?limit=1000")[1]["jobs"]}
        harness.wait_until(lambda: all(jobs()[j]["state"] == "running" for j in longs + shorts), 60,
                           "every GPU busy")
        queued = [c.api.submit(harness.spec(["sleep", "3600"], name=f"queued-{i}", gpus=1))[1]["id"]
                  for i in range(len(shorts))]
        attempts = {j: jobs()[j].get("attempt") for j in longs}
        c.master.kill(signal.SIGKILL)
        c.master.p.wait()
        time.sleep(down)
        with open(c.master.logpath, "rb") as f:
            f.seek(0, 2)
            log_from = f.tell()
        c.start_master()
        t0 = time.monotonic()
        reconciled, backs = None, []
        while time.monotonic() - t0 < 60 and (reconciled is None or len(backs) < agents):
            with open(c.master.logpath, "rb") as f:
                f.seek(log_from)
                backs = [int(m.group(1)) for m in re.finditer(rb"node \S+ is back after (\d+) ms", f.read())]
            try:
                js = jobs()
            except OSError:
                time.sleep(0.02)
                continue
            if (reconciled is None and all(js[j]["state"] == "succeeded" for j in shorts)
                    and all(js[j]["state"] == "running" and js[j].get("attempt") == attempts[j] for j in longs)
                    and all(js[j]["state"] == "running" for j in queued)):
                reconciled = (time.monotonic() - t0) * 1000
            time.sleep(0.02)
        if reconciled is None:
            raise RunFailed(f"not reconciled in 60 s; {len(backs)} of {agents} agents back")
        if len(backs) < agents:
            raise RunFailed(f"reconciled, but only {len(backs)} of {agents} agents back in 60 s")
        return max(backs), reconciled


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--agents", type=int, default=8)
    ap.add_argument("--down", type=float, default=12)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness

    print(f"{args.agents} agents x 2 sim GPUs; master down {args.down:g} s per run; "
          "times in ms after the new master's start")
    print(f"{'run':>4}{'last agent back':>18}{'reconciled':>13}{'after last back':>18}")
    for k in range(args.runs):
        try:
            last, done = one_run(harness, args.agents, args.down)
        except RunFailed as e:
            print(f"{k + 1:4}  failed: {e}")
            continue
        print(f"{k + 1:4}{last:18.0f}{done:13.0f}{done - last:18.0f}", flush=True)


if __name__ == "__main__":
    main()
