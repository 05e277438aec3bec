#!/usr/bin/env python3
"""One task's stdout, --size bytes (1 GiB), from the task to the master's
store, beside its peer in the same run: the same command writing the same
bytes to a local file on the same disk, then fsync'ing it (coreutils sync
FILE), which is what the master's store does with a log before it
acknowledges it.

The task is `yes LINE | head -c SIZE` under a local agent (process
runtime); the master and the agent keep their files in one temp dir on the
same disk as the peer's file. Timed from the master's running_at of the
task: when the task's own copy (WORK/tasks/ID/stdout, the shim's file) holds
every byte, when the master holds every byte (its log_size.stdout, read
from GET /v1/jobs/ID every 20 ms; written, maybe not yet on the disk), and
when the master recorded the task's end (its finished_at), which it does
only once the log is synced: the figure set beside the peer's, which syncs
too. Then the stored log is checked byte for byte against the bytes the
command makes (sha256).

Each run is printed; --runs 3 by default. Run by hand; prints numbers,
asserts nothing about time (it fails only when a byte is wrong).

usage: bench/logs.py [--yard build/yard] [--size 1GiB] [--runs 3]
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from benchlib import RunFailed  # noqa: E402

LINE = "yard log line 0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def parse_size(s):
    m = re.fullmatch(r"(\d+)(KiB|MiB|GiB)?", s)
    if not m:
        raise SystemExit(f"--size {s!r}: expected N, NKiB, NMiB or NGiB")
    return int(m.group(1)) * {None: 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)]


def command(size):
    return ["/bin/sh", "-c", f"yes '{LINE}' | head -c {size}"]


def expected_sha256(size):
    p = subprocess.Popen(command(size), stdout=subprocess.PIPE)
    h = hashlib.sha256()
    for chunk in iter(lambda: p.stdout.read(1 << 20), b""):
        h.update(chunk)
    p.wait()
    return h.hexdigest()


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def peer(dirpath, size):
    """The same bytes to a local file on the same disk, synced: seconds."""
    path = os.path.join(dirpath, "peer.out")
    t0 = time.monotonic()
    with open(path, "wb") as f:
        subprocess.run(command(size), stdout=f, check=True)
    subprocess.run(["sync", path], check=True)
    secs = time.monotonic() - t0
    os.unlink(path)
    return secs


def trainyard(h, size, want):
    with h.cluster("bench-logs") as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        status, job = c.api.submit(h.spec(command(size), name="logs", cpus=1))
        if status != 201:
            raise RunFailed(f"submit answered {status}: {job}")
        jid = job["id"]
        task_dir = None
        t_task = t_master = t_durable = None
        deadline = time.monotonic() + 600
        running_mono = None
        while time.monotonic() < deadline:
            j = c.api.json("GET", f"/v1/jobs/{jid}")[1]
            now_mono, now_wall = time.monotonic(), time.time()
            if j.get("running_at") and running_mono is None:
                # the master's running_at on this process's monotonic clock
                running_mono = now_mono - (now_wall - j["running_at"] / 1e6)
            if j["state"] in ("failed", "cancelled"):
                raise RunFailed(f"job {jid} {j['state']}: {j.get('reason')}")
            t = j["tasks"][0] if j.get("tasks") else None
            if t and task_dir is None:
                task_dir = os.path.join(c.dir, "agent-n1", "tasks", str(t["id"]))
            if task_dir and t_task is None:
                try:
                    if os.path.getsize(os.path.join(task_dir, "stdout")) >= size:
                        t_task = now_mono
                except OSError:
                    pass
            if t and t["log_size"]["stdout"] >= size and t_master is None:
                t_master = now_mono
            if j["state"] == "succeeded":
                t_durable = (j["finished_at"] - j["running_at"]) / 1e6
                break
            time.sleep(0.02)
        if t_master is None or running_mono is None or t_durable is None:
            raise RunFailed(f"the master did not hold {size} bytes of job {jid} in 600 s")
        stored = os.path.join(c.data_dir, "logs", f"{j['tasks'][0]['id']}.stdout")
        got = file_sha256(stored)
        if got != want or os.path.getsize(stored) != size:
            raise RunFailed(f"the stored log is not the task's bytes: sha256 {got}, want {want}")
        return (t_task - running_mono if t_task else float("nan"), t_master - running_mono,
                t_durable)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--size", default="1GiB")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    size = parse_size(args.size)
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness as h
    h.YARD = os.environ["YARD"]
    want = expected_sha256(size)
    mb = size / 1e6
    print(f"one task's stdout, {size} bytes of `yes` lines; peer: the same bytes to a file on the "
          f"same disk ({tempfile.gettempdir()}), then sync FILE")
    print(f"{'run':>4}{'peer MB/s':>11}{'task copy s':>13}{'master s':>10}{'synced s':>10}"
          f"{'synced MB/s':>13}{'ratio':>7}")
    for k in range(args.runs):
        with tempfile.TemporaryDirectory() as d:
            p = peer(d, size)
        try:
            t_task, t_master, t_durable = trainyard(h, size, want)
        except RunFailed as e:
            print(f"{k + 1:4}  failed: {e}")
            continue
        print(f"{k + 1:4}{mb / p:11.0f}{t_task:13.2f}{t_master:10.2f}{t_durable:10.2f}"
              f"{mb / t_durable:13.0f}{p / t_durable:7.2f}", flush=True)


if __name__ == "__main__":
    main()
