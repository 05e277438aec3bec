#!/usr/bin/env python3
"""The HTTP proxy and `yard port-forward` (docs/protocol.md, "Proxy" and
"Sessions") through a master and an agent on loopback, beside the same
server reached directly:

  request     a small GET through the proxy, one after another (each a
              session of its own: the agent learns of it from its work
              poll, dials the master, connects to the port): p50/p99 over
              --requests, beside the same GET straight to the server
  download    GET of --mib MiB through the proxy, MB/s, beside straight
  forward     --mib MiB each way at once through `yard port-forward` to an
              echo server in the task, MB/s a way, beside straight

Prints numbers; asserts nothing.

usage: bench/proxy.py [--yard build/yard] [--requests 300] [--mib 256]
"""
import argparse
import http.client
import os
import re
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from benchlib import pct  # noqa: E402


def get(host, port, target, token=None):
    """One GET on a connection of its own: the bytes of its body, seconds."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(host, port, timeout=120)
    conn.request("GET", target, headers={"Authorization": f"Bearer {token}"} if token else {})
    r = conn.getresponse()
    n = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        n += len(b)
    if r.status != 200:
        raise RuntimeError(f"GET {target}: {r.status}")
    conn.close()
    return n, time.monotonic() - t0


def echo_both_ways(port, mib):
    """mib MiB sent and read back at once on one connection: seconds."""
    block = os.urandom(1 << 20)
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        def send():
            for _ in range(mib):
                s.sendall(block)
            s.shutdown(socket.SHUT_WR)
        th = threading.Thread(target=send)
        th.start()
        got = 0
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            got += len(b)
        th.join()
    if got != mib << 20:
        raise RuntimeError(f"echo: {got} bytes of {mib << 20}")
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--mib", type=int, default=256)
    args = ap.parse_args()
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness as h
    from test_proxy import ECHO, UPSTREAM, server_job

    with h.cluster("bench-proxy") as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        jid, port = server_job(c, UPSTREAM)
        base = f"/v1/jobs/{jid}/proxy/worker/0/{port}"

        direct = [get("127.0.0.1", port, "/small")[1] * 1000 for _ in range(args.requests)]
        proxied = [get("127.0.0.1", c.port, base + "/small", c.admin_token)[1] * 1000
                   for _ in range(args.requests)]
        print(f"request: a small GET, {args.requests} one after another: through the proxy p50 "
              f"{pct(proxied, 50):.2f} ms, p99 {pct(proxied, 99):.2f} ms; straight p50 "
              f"{pct(direct, 50):.2f} ms, p99 {pct(direct, 99):.2f} ms", flush=True)

        n = args.mib << 20
        _, straight = get("127.0.0.1", port, f"/big?n={n}")
        _, through = get("127.0.0.1", c.port, base + f"/big?n={n}", c.admin_token)
        print(f"download of {args.mib} MiB: through the proxy {n / 1e6 / through:.0f} MB/s, "
              f"straight {n / 1e6 / straight:.0f} MB/s", flush=True)

        ejid, eport = server_job(c, ECHO, name="echo")
        env = c.env({"YARD_MASTER": c.url, "YARD_TOKEN": c.admin_token, "HOME": c.dir})
        p = subprocess.Popen([args.yard, "port-forward", str(ejid), f":{eport}"], stdout=subprocess.PIPE,
                             env=env)
        try:
            local = int(re.search(rb"127\.0\.0\.1:(\d+)", p.stdout.readline()).group(1))
            straight = echo_both_ways(eport, args.mib)
            through = echo_both_ways(local, args.mib)
        finally:
            p.terminate()
            p.wait()
        mb = (args.mib << 20) / 1e6
        print(f"forward of {args.mib} MiB each way at once: through yard port-forward "
              f"{mb / through:.0f} MB/s a way, straight {mb / straight:.0f} MB/s", flush=True)


if __name__ == "__main__":
    main()
