#!/usr/bin/env python3
"""Blobs on each store, side by side in one run (docs/design-notes.md, "Logs
and archives in the store"): a master on SQLite (blobs are files under its
data dir: DATA/logs, DATA/code) and one on a private PostgreSQL (--store;
tests/pg/pgtmp.sh; blobs are rows of the table blobs). For each it prints

  - log append throughput from one node: one connection POSTs a task's
    stdout in chunks, each at the offset the last one ended, as an agent
    ships it (POST /v1/tasks/{id}/log; a 200 means the chunk is durable),
    with 1 MiB chunks (the agent's LOG_CHUNK, a busy task) and 64 KiB ones;
  - log read throughput: the same bytes read back with GET .../logs?offset=;
  - code archive upload and download throughput (POST /v1/code, GET
    /v1/code/{digest}; incompressible bytes, as a tar.gz is);
  - the bytes the store takes on disk per GiB of blobs held: for PostgreSQL
    pg_total_relation_size('blobs') (table, TOAST, index), for SQLite the
    files' allocated blocks (du), for text logs and for archives apart.

The master's node is one registered through the API (no agent runs): the
bench is the agent. A fresh master and store per store and run; the runs
alternate so that what else the machine does falls on both. Nothing here
asserts on time.

usage: bench/blobs.py [--yard build/yard] [--runs N] [--log-mib N] [--code-mib N]
                      [--archives N] [--stores sqlite,postgres] [--pg-storage default|lz4|external]
"""
import argparse
import hashlib
import http.client
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

MIB = 1 << 20


class Conn:
    """One keep-alive HTTP connection with a bearer token, as an agent keeps."""

    def __init__(self, url, token):
        host, port = url.split("//", 1)[1].rsplit(":", 1)
        self.c = http.client.HTTPConnection(host, int(port), timeout=120)
        self.token = token

    def req(self, method, path, body=None, ctype="application/octet-stream"):
        hdrs = {"Authorization": "Bearer " + self.token}
        if body is not None:
            hdrs["Content-Type"] = ctype
        self.c.request(method, path, body=body, headers=hdrs)
        r = self.c.getresponse()
        return r.status, r.read(), r

    def json(self, method, path, doc=None):
        st, data, _ = self.req(method, path, json.dumps(doc).encode() if doc is not None else None,
                               "application/json")
        return st, json.loads(data) if data else None


def log_text(n):
    """n bytes of training-log-like text (what logs hold: it compresses)."""
    out, i = [], 0
    size = 0
    while size < n:
        line = (f"epoch {i // 1000} step {i} loss {1.0 / (i + 1):.6f} acc {i % 97 / 97:.4f} "
                f"lr 0.000{i % 7}5 throughput {1000 + i % 313} samples/s\n")
        out.append(line)
        size += len(line)
        i += 1
    return "".join(out).encode()[:n]


def placed_task(c, admin):
    """Registers node b1 (the bench plays its agent), submits a one-task job
    and waits until the task is placed on b1: (agent connection, job id,
    task id)."""
    join = open(os.path.join(c.data_dir, "join-token")).read().strip()
    st, reg = Conn(c.url, join).json("POST", "/v1/agents", {
        "name": "b1", "addr": "127.0.0.1", "cpus": 8, "memory": 16 << 30, "gpus": []})
    if st != 200:
        raise SystemExit(f"cannot register node b1: {st} {reg}")
    st, job = admin.json("POST", "/v1/jobs", {"spec": {
        "name": "blobs", "command": ["/bin/true"],
        "tasks": {"worker": {"cpus": 0.1, "memory": "64MiB"}}}})
    if st != 201:
        raise SystemExit(f"cannot submit: {st} {job}")
    for _ in range(500):
        _, j = admin.json("GET", f"/v1/jobs/{job['id']}")
        t = j["tasks"][0] if j.get("tasks") else None
        if t and t.get("node") == "b1":
            return Conn(c.url, reg["token"]), job["id"], t["id"]
        time.sleep(0.02)
    raise SystemExit(f"the job was not placed on b1: {j}")


def append_log(agent, task, stream, data, chunk):
    """Ships data as chunks at their offsets; seconds taken."""
    t0 = time.monotonic()
    for off in range(0, len(data), chunk):
        st, body, _ = agent.req("POST", f"/v1/tasks/{task}/log?stream={stream}&offset={off}",
                                data[off:off + chunk])
        if st != 200:
            raise SystemExit(f"log append at {off}: {st} {body[:200]!r}")
    return time.monotonic() - t0


def read_log(admin, jid, stream, size):
    """Reads a stream back by offset; (seconds, bytes)."""
    got = bytearray()
    t0 = time.monotonic()
    while len(got) < size:
        st, body, _ = admin.req("GET", f"/v1/jobs/{jid}/logs?task=worker/0&stream={stream}"
                                       f"&offset={len(got)}")
        if st != 200 or not body:
            raise SystemExit(f"log read at {len(got)}: {st} {body[:200]!r}")
        got += body
    return time.monotonic() - t0, bytes(got)


def pg_bytes(pg, where="true"):
    """What the table blobs takes on disk, and the blob bytes it holds."""
    pg.sql("CHECKPOINT")
    size = int(pg.sql("SELECT pg_total_relation_size('blobs')")[0])
    held = int(pg.sql(f"SELECT coalesce(sum(length(data)), 0) FROM blobs WHERE {where}")[0])
    return size, held


def du(path):
    """Allocated bytes of the files under path (du -s -B1)."""
    r = subprocess.run(["du", "-s", "-B1", path], capture_output=True, text=True)
    return int(r.stdout.split()[0]) if r.returncode == 0 else 0


# --pg-storage: how PostgreSQL keeps the column data, set after the master
# made the table (a measurement knob: the schema keeps the default)
PG_STORAGE = {
    "default": None,  # EXTENDED: TOAST, compressed with default_toast_compression (pglz)
    "lz4": "ALTER TABLE blobs ALTER COLUMN data SET COMPRESSION lz4",
    "external": "ALTER TABLE blobs ALTER COLUMN data SET STORAGE EXTERNAL",  # TOAST, not compressed
}


def one_run(h, store, log_mib, code_mib, archives, pg_storage="default"):
    pg = None
    args = ["--rate-limit", "0"]
    if store == "postgres":
        from pgserver import PgServer
        pg = PgServer()
        args += ["--store", pg.url]
    res = {}
    try:
        with h.cluster(f"bench-blobs-{store}", lease="10m", master_args=args) as c:
            c.start_master()
            if pg and PG_STORAGE[pg_storage]:
                pg.sql(PG_STORAGE[pg_storage])
            admin = Conn(c.url, c.admin_token)
            agent, jid, task = placed_task(c, admin)
            data = log_text(log_mib * MIB)
            # stdout in 1 MiB chunks, stderr in 64 KiB ones
            secs = append_log(agent, task, "stdout", data, MIB)
            res["log_append_1m"] = len(data) / MIB / secs
            small = data[:max(MIB, len(data) // 4)]
            secs = append_log(agent, task, "stderr", small, 64 * 1024)
            res["log_append_64k"] = len(small) / MIB / secs
            secs, back = read_log(admin, jid, "stdout", len(data))
            if back != data:
                raise SystemExit("the log read back differs from what was sent")
            res["log_read"] = len(data) / MIB / secs
            if pg:
                res["disk_log"], held = pg_bytes(pg)
            else:
                res["disk_log"], held = du(os.path.join(c.data_dir, "logs")), len(data) + len(small)
            res["held_log"] = held
            # archives: incompressible, distinct
            up = down = 0.0
            digests = []
            for k in range(archives):
                blob = os.urandom(code_mib * MIB)
                t0 = time.monotonic()
                st, body, _ = admin.req("POST", "/v1/code", blob, "application/gzip")
                up += time.monotonic() - t0
                if st != 201:
                    raise SystemExit(f"code upload: {st} {body[:200]!r}")
                d = json.loads(body)["digest"]
                if d != "sha256:" + hashlib.sha256(blob).hexdigest():
                    raise SystemExit(f"code upload: digest {d} is not the content's")
                digests.append(d)
                t0 = time.monotonic()
                st, got, _ = admin.req("GET", f"/v1/code/{d}")
                down += time.monotonic() - t0
                if st != 200 or got != blob:
                    raise SystemExit(f"code download: {st}, {len(got)} bytes of {len(blob)}")
            res["code_up"] = archives * code_mib / up
            res["code_down"] = archives * code_mib / down
            if pg:
                total, held_all = pg_bytes(pg)
                res["disk_code"] = total - res["disk_log"]
                res["held_code"] = held_all - res["held_log"]
            else:
                res["disk_code"] = du(os.path.join(c.data_dir, "code"))
                res["held_code"] = archives * code_mib * MIB
    finally:
        if pg:
            pg.close()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--log-mib", type=int, default=64)
    ap.add_argument("--code-mib", type=int, default=32)
    ap.add_argument("--archives", type=int, default=4)
    ap.add_argument("--stores", default="sqlite,postgres",
                    help="which stores, comma-separated (sqlite alone: a master before blobs)")
    ap.add_argument("--pg-storage", default="default", choices=sorted(PG_STORAGE))
    args = ap.parse_args()
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness as h
    h.YARD = os.environ["YARD"]
    results = {s: [] for s in args.stores.split(",")}
    for i in range(args.runs):
        for store in results:
            r = one_run(h, store, args.log_mib, args.code_mib, args.archives, args.pg_storage)
            results[store].append(r)
            print(f"run {i + 1} {store:8}: log append {r['log_append_1m']:6.1f} MB/s (1 MiB chunks), "
                  f"{r['log_append_64k']:6.1f} MB/s (64 KiB), log read {r['log_read']:6.1f} MB/s, "
                  f"code up {r['code_up']:6.1f} MB/s, down {r['code_down']:6.1f} MB/s", flush=True)
    print()
    print(f"medians of {args.runs} runs ({args.log_mib} MiB of log text, {args.archives} archives "
          f"of {args.code_mib} MiB; MB/s is MiB/s)")
    print(f"{'':34}" + "".join(f"{s:>12}" for s in results))
    rows = [("log append, 1 MiB chunks (MB/s)", "log_append_1m"),
            ("log append, 64 KiB chunks (MB/s)", "log_append_64k"),
            ("log read by offset (MB/s)", "log_read"),
            ("code upload (MB/s)", "code_up"),
            ("code download (MB/s)", "code_down")]
    for label, key in rows:
        vals = [statistics.median(r[key] for r in results[s]) for s in results]
        print(f"{label:34}" + "".join(f"{v:12.1f}" for v in vals))
    for label, disk, held in (("on disk per GiB of log text (MiB)", "disk_log", "held_log"),
                              ("on disk per GiB of archives (MiB)", "disk_code", "held_code")):
        vals = [statistics.median(r[disk] / r[held] * 1024 for r in results[s]) for s in results]
        print(f"{label:34}" + "".join(f"{v:12.0f}" for v in vals))


if __name__ == "__main__":
    main()
