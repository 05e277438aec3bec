#!/usr/bin/env python3
"""Runs the end-to-end tests: every test_* function of every test_*.py here,
each in its own process with a time limit, so a crash or hang is reported and
the run goes on. Prints one line per test and a closing 'N passed, N failed'
(and ', N skipped' when a test raised harness.Skip: a container engine that
cannot run on this machine, with the reason on its SKIP line).

The limit is --timeout seconds, or more for a module that sets TIMEOUT = S
(one whose first run builds something slow, like a debootstrap'd rootfs).

--jobs N (default $YARD_E2E_JOBS, else 1) runs up to N tests at once: most
tests wait on daemons far more than they compute, and each has its own
ports, dirs, cgroups and namespaces. A module that sets SERIAL = True (one
that times what it measures, or loads the machine: container engines,
browsers, real training) runs its tests alone, nothing beside them.

With YARD_E2E_STORE=postgres every cluster's master keeps its state in a
private PostgreSQL of its own (harness.Cluster, pgserver.py) instead of
SQLite.

usage: run.py [--yard PATH] [-k SUBSTRING] [--timeout S] [--jobs N]
"""
import argparse
import importlib.util
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP_RC = 77  # a test's process exits with this when the test raised harness.Skip


def discover(pattern):
    tests = []
    for fn in sorted(os.listdir(HERE)):
        if not (fn.startswith("test_") and fn.endswith(".py")):
            continue
        spec = importlib.util.spec_from_file_location(fn[:-3], os.path.join(HERE, fn))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        for name in dir(mod):
            if name.startswith("test_") and callable(getattr(mod, name)):
                tid = f"{fn[:-3]}.{name}"
                if not pattern or pattern in tid:
                    tests.append((fn, name, getattr(mod, name).__code__.co_firstlineno,
                                  getattr(mod, "TIMEOUT", 0), bool(getattr(mod, "SERIAL", False))))
    tests.sort(key=lambda t: (t[0], t[2]))
    return [(fn, name, timeout, serial) for fn, name, _, timeout, serial in tests]


def run_one(fn, name):
    sys.path.insert(0, HERE)
    spec = importlib.util.spec_from_file_location(fn[:-3], os.path.join(HERE, fn))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import harness
    try:
        getattr(mod, name)()
    except harness.Skip as e:
        print(f"SKIP: {e}", flush=True)
        sys.exit(SKIP_RC)


def sweep_leftovers():
    """A test killed at its time limit cleans nothing up: remove what it left
    in network namespaces (netns.py), container engines (engines.py),
    PostgreSQL servers (pgserver.py), Patroni clusters (patroni.py) and
    Slurm clusters (slurm.py); only what belongs to dead owners."""
    sys.path.insert(0, HERE)
    import netns
    swept = netns.sweep()
    if swept:
        print(f"swept network namespaces of dead test topologies {' '.join(swept)}", flush=True)
    import engines
    swept = engines.sweep()
    if swept:
        print(f"swept container engines of dead tests {' '.join(swept)}", flush=True)
    import pgserver
    swept = pgserver.sweep()
    if swept:
        print(f"swept PostgreSQL servers of dead tests {' '.join(swept)}", flush=True)
    import patroni
    swept = patroni.sweep()
    if swept:
        print(f"swept Patroni clusters of dead tests {' '.join(swept)}", flush=True)
    import slurm
    swept = slurm.sweep()
    if swept:
        print(f"swept Slurm clusters of dead tests {' '.join(swept)}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard")
    ap.add_argument("-k", default="")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--one")
    ap.add_argument("--jobs", type=int, default=0)
    args = ap.parse_args()
    if args.yard:
        os.environ["YARD"] = os.path.abspath(args.yard)
    if args.one:
        fn, name = args.one.split(":")
        run_one(fn, name)
        return 0
    if os.geteuid() != 0:
        print("e2e tests need root (cgroups, device nodes, namespaces)", file=sys.stderr)
        return 2
    jobs = max(1, args.jobs if args.jobs else int(os.environ.get("YARD_E2E_JOBS", "1")))
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failures = []
    lock = threading.Condition()
    state = {"running": 0, "exclusive": False}
    queue = list(discover(args.k))

    def run_test(fn, name, timeout):
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--one", f"{fn}:{name}"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            out += f"\nTIMEOUT after {timeout}s\n".encode()
            rc = -1
        dt = time.monotonic() - t0
        tid = f"{fn[:-3]}.{name}"
        with lock:
            if rc == 0:
                counts["passed"] += 1
                print(f"PASS {tid} ({dt:.1f}s)", flush=True)
            elif rc == SKIP_RC:
                counts["skipped"] += 1
                text = out.decode(errors="replace")
                reason = text[text.rfind("SKIP: ") + 6:].strip() if "SKIP: " in text else text.strip()
                print(f"SKIP {tid} ({dt:.1f}s): {reason[-2000:]}", flush=True)
            else:
                counts["failed"] += 1
                failures.append(tid)
                print(f"FAIL {tid} ({dt:.1f}s)\n" + out.decode(errors="replace")[-6000:], flush=True)
                # what dead tests left (a live one's is its own)
                sweep_leftovers()

    def worker():
        while True:
            with lock:
                while True:
                    if not queue:
                        return
                    fn, name, mod_timeout, serial = queue[0]
                    # a serial test runs alone; nothing starts beside it
                    if not state["exclusive"] and (not serial or state["running"] == 0):
                        break
                    lock.wait()
                queue.pop(0)
                state["running"] += 1
                state["exclusive"] = serial
            try:
                run_test(fn, name, max(args.timeout, mod_timeout))
            finally:
                with lock:
                    state["running"] -= 1
                    if serial:
                        state["exclusive"] = False
                    lock.notify_all()

    threads = [threading.Thread(target=worker) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    passed, failed, skipped = counts["passed"], counts["failed"], counts["skipped"]
    if failures:
        print("failed: " + " ".join(failures))
    print(f"e2e: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
