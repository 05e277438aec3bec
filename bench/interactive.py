#!/usr/bin/env python3
"""Exec sessions (docs/protocol.md, "Sessions") through a master and an agent
on loopback, measured with the real CLI:

  keystroke   round trip of one byte: written to `yard exec -it ID -- sh -c
              'stty raw -echo; cat'` on a pseudo-terminal of ours, through
              the CLI, the master, the agent and the task's terminal to cat,
              and back; p50/p99 over --keys bytes (target: p50 under 5 ms)
  throughput  `yard exec ID -- cat FILE` (FILE --mib MiB of random bytes,
              in the page cache) read to the end, MB/s, beside `cat FILE`
              run here into a pipe the same way (target: at least 100 MB/s)

Both over plain http, and with --tls over https (--tls-self-signed, the CLI
and the agent trusting its pin). Prints numbers; asserts nothing.

usage: bench/interactive.py [--yard build/yard] [--keys 500] [--mib 512] [--tls]
"""
import argparse
import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from benchlib import pct  # noqa: E402


def cli_env(c):
    e = c.env({"YARD_MASTER": c.url, "YARD_TOKEN": c.admin_token, "HOME": c.dir})
    if c.pin:
        e["YARD_PIN"] = c.pin
    return e


def read_until(fd, want, timeout=10):
    """Reads fd until the bytes read end with want; the time it came."""
    got = b""
    deadline = time.monotonic() + timeout
    while not got.endswith(want):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise RuntimeError(f"waited {timeout}s for {want!r}; got {got[-200:]!r}")
        got += os.read(fd, 4096)
    return time.monotonic()


def keystrokes(h, c, jid, n):
    master, slave = os.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))

    def ctty():
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen([h.YARD, "exec", "-it", str(jid), "--", "sh", "-c",
                          "stty raw -echo; echo ready; exec cat"],
                         stdin=slave, stdout=slave, stderr=slave, env=cli_env(c),
                         start_new_session=True, preexec_fn=ctty)
    try:
        read_until(master, b"ready\n")  # raw: no CR added
        rtt = []
        for i in range(n):
            b = bytes([ord("a") + i % 26])
            t0 = time.monotonic()
            os.write(master, b)
            rtt.append((read_until(master, b) - t0) * 1000)
        return rtt
    finally:
        p.kill()
        p.wait()
        os.close(master)
        os.close(slave)


def drain(argv, env=None):
    """Runs argv with its stdout into a pipe read here to the end: bytes, s."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    n = 0
    while True:
        b = p.stdout.read1(1 << 20)
        if not b:
            break
        n += len(b)
    rc = p.wait()
    if rc:
        raise RuntimeError(f"{argv[:3]}... exited {rc}")
    return n, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--keys", type=int, default=500)
    ap.add_argument("--mib", type=int, default=512)
    ap.add_argument("--tls", action="store_true")
    args = ap.parse_args()
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness as h

    with h.cluster("bench-interactive", master_args=["--tls-self-signed"] if args.tls else []) as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        st, doc = c.api.submit(h.spec(["sleep", "3600"], name="bench"))
        jid = doc["id"]
        h.wait_until(lambda: c.api.job(jid)["state"] == "running", 60, "the job runs")
        scheme = "https" if args.tls else "http"

        rtt = keystrokes(h, c, jid, args.keys)
        print(f"keystroke round trip over {scheme}, {len(rtt)} bytes: p50 {pct(rtt, 50):.2f} ms "
              f"(target < 5), p99 {pct(rtt, 99):.2f} ms, max {max(rtt):.2f} ms", flush=True)

        path = os.path.join(c.dir, "big")
        with open(path, "wb") as f:
            for _ in range(args.mib):
                f.write(os.urandom(1 << 20))
        drain(["cat", path])  # into the page cache
        n, local = drain(["cat", path])
        n2, remote = drain([h.YARD, "exec", str(jid), "--", "cat", path], env=cli_env(c))
        if n2 != n:
            print(f"throughput: yard exec gave {n2} bytes of {n}", file=sys.stderr)
        mb = n / 1e6
        print(f"throughput of cat {args.mib} MiB over {scheme}: yard exec {mb / remote:.0f} MB/s "
              f"(target >= 100), locally {mb / local:.0f} MB/s", flush=True)


if __name__ == "__main__":
    main()
