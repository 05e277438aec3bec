"""A store written by an earlier schema (version 4, and version 5, the
previous one) is upgraded by today's master, and everything in it is
found: every job (id, name, state, user), every token (each authenticates
with its role, the revoked one does not), every dataset version (its
files' bytes read back through the API), the finished jobs' logs, the
experiment and (version 5) the template; and it goes on working (a held job
released runs, a new job reads a dataset).

The fixtures, tests/e2e/fixtures/store_v{4,5}_{sqlite,pg}.tar.gz, are data
dirs (and a pg_dump) that the yard of commit 7a5fba9^ (version 4) and of
commit 07c598f (version 5) wrote through their CLI and API
(fixtures/make_store_v4.py, make_store_v5.py, fixtures/README.md). What is
expected here is what was made there: the fixture's inputs."""
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import tarfile

from harness import ROOT, Api, check, check_eq, cluster, spec, store_schema_version, wait_until
from pgserver import PgServer

FIXTURES = os.path.join(ROOT, "tests", "e2e", "fixtures")

# (id, name, state, user) of every job the old master made
JOBS = [
    (1, "waits", "queued", "alice"),
    (2, "ok", "succeeded", "alice"),
    (3, "bad", "failed", "alice"),
    (4, "stop", "cancelled", "bob"),
    (5, "reader", "succeeded", "bob"),
    (6, "sweep-t0", "succeeded", "carol"),
    (7, "sweep-t1", "succeeded", "carol"),
]
# the logs of the finished jobs: (stdout, stderr)
LOGS = {
    2: (b"hello from code\nline two\n", b""),
    3: (b"oops\n", b"bad news\n"),
    4: (b"started\n", b""),
    5: (b"alpha one\n", b""),
    6: (b'@yard {"step": 1, "acc": 0.25}\n', b""),
    7: (b'@yard {"step": 1, "acc": 0.5}\n', b""),
}
# the datasets pushed: name -> versions, each {path: bytes}
DATASETS = {
    "digits": [
        {"a.txt": b"alpha one\n", "sub/b.bin": bytes(range(256)) * 4},
        {"a.txt": b"alpha two\n", "sub/b.bin": bytes(range(256)) * 4, "c.txt": b"gamma\n"},
    ],
    "notes": [{"readme.md": b"# notes\nkept across the upgrade\n"}],
}
# each token's holder: (user, role, team, team_admin); mallory's was revoked
TOKENS = {
    "admin": ("admin", "admin", None, False),
    "alice": ("alice", "user", "vision", False),
    "bob": ("bob", "user", "vision", True),
    "carol": ("carol", "admin", None, False),
}


def unpack(kind, data_dir, version=4):
    """Unpacks fixture kind of version into data_dir; returns (its tokens, its store.sql or None)."""
    path = os.path.join(FIXTURES, f"store_v{version}_{kind}.tar.gz")
    check(os.path.isfile(path), f"the fixture {path} is missing (see tests/e2e/fixtures/README.md)")
    tokens, sql = None, None
    with tarfile.open(path) as tar:
        for m in tar.getmembers():
            if not m.isfile():
                continue
            data = tar.extractfile(m).read()
            if m.name == "tokens.json":
                tokens = json.loads(data)
            elif m.name == "store.sql":
                sql = data
            elif m.name.startswith("data/"):
                dest = os.path.join(data_dir, m.name[5:])
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(dest, "wb") as f:
                    f.write(data)
    check(tokens is not None, f"{path} holds tokens.json")
    return tokens, sql


def dataset_files(api, name, version):
    """{path: bytes} of a dataset version, read back chunk by chunk."""
    _, doc = api.json("GET", f"/v1/datasets/{name}/{version}", expect=200)
    files = {}
    for f in doc["manifest"]["files"]:
        data = b""
        for digest in f["chunks"]:
            st, chunk, _ = api.request("GET", f"/v1/blobs/{digest}")
            check_eq(st, 200, f"chunk {digest} of {name}@{version}")
            check_eq("sha256:" + hashlib.sha256(chunk).hexdigest(), digest, f"the bytes of chunk {digest}")
            data += chunk
        files[f["path"]] = data
    return files


def check_upgraded(c, tokens, version=4):
    with open(c.master.logpath, errors="replace") as f:
        log = f.read()
    check(re.search(rf"schema upgraded from version {version} to {store_schema_version()}", log),
          f"the master's log says it upgraded the store:\n{log[-2000:]}")
    api = c.api
    _, doc = api.json("GET", "/v1/jobs?limit=1000", expect=200)
    check_eq(sorted((j["id"], j["name"], j["state"], j["user"]) for j in doc["jobs"]), JOBS, "every job")
    # a job's reason is the scheduler's: its first pass may come a moment after the start
    held = wait_until(lambda: (api.job(1).get("reason") or {}).get("code"), 10, "job 1's reason")
    check_eq(held, "held", "job 1 is still held")
    for jid, (out, err) in LOGS.items():
        check_eq((api.log(jid, stream="stdout"), api.log(jid, stream="stderr")), (out, err), f"the logs of job {jid}")
    # tokens: each authenticates as its holder, the revoked one does not
    _, listed = api.json("GET", "/v1/tokens", expect=200)
    by_id = {t["id"]: t for t in listed["tokens"]}
    for name, (user, role, team, team_admin) in TOKENS.items():
        st, who = api.json("GET", "/v1/whoami", token=tokens[name]["token"])
        check_eq((st, who["user"], who["role"], who["team"]), (200, user, role, team), f"{name}'s token")
        if "id" in tokens[name]:
            t = by_id.get(tokens[name]["id"])
            check(t is not None, f"{name}'s token {tokens[name]['id']} is listed: {sorted(by_id)}")
            check_eq((t["user"], t["team_admin"], t["revoked_at"]), (user, team_admin, None), f"{name}'s token")
    st, doc = api.json("GET", "/v1/whoami", token=tokens["mallory"]["token"])
    check_eq(st, 401, f"the revoked token of mallory: {doc}")
    check(by_id[tokens["mallory"]["id"]]["revoked_at"], "mallory's token is listed revoked")
    # a team admin's right survives: bob changes the priority of alice's job
    st, doc = api.json("POST", "/v1/jobs/1", {"priority": "high"}, token=tokens["bob"]["token"])
    check_eq(st, 200, f"bob (vision's team admin) reprioritises alice's job: {doc}")
    # datasets: every version, every file's bytes
    _, doc = api.json("GET", "/v1/datasets", expect=200)
    check_eq(sorted(d["name"] for d in doc["datasets"]), sorted(DATASETS), "the datasets")
    for name, versions in DATASETS.items():
        _, ds = api.json("GET", f"/v1/datasets/{name}", expect=200)
        check_eq([v["version"] for v in ds["versions"]], list(range(1, len(versions) + 1)), f"versions of {name}")
        for n, files in enumerate(versions, 1):
            check_eq(dataset_files(api, name, n), files, f"the files of {name}@{n}")
    # the experiment and its trials
    _, e = api.json("GET", "/v1/experiments/1", expect=200)
    check_eq((e["name"], e["state"], e["trials_total"], sorted(t["job"] for t in e["trials"])),
             ("sweep", "completed", 2, [6, 7]), "the experiment")
    check_eq(e["best"]["job"], 7, "its best trial")
    # version 5's template, alice's: still hers, and still runs on digits
    alice = Api(c.url, tokens["alice"]["token"])
    if version >= 5:
        st, t = alice.json("GET", "/v1/templates/retrain")
        check_eq((st, t.get("on_dataset"), t.get("user"), t.get("runs")), (200, "digits", "alice", []),
                 f"the template: {t}")
    # and it works on: the held job released runs, a new job reads digits@2
    c.start_agent("n1", gpus="sim:2")
    alice.json("POST", "/v1/jobs/1/release", expect=200)
    st, doc = alice.submit(spec(["/bin/sh", "-c", 'cat "$YARD_DATA_DIR/d/c.txt"'], name="after",
                                data=[{"source": "yard://digits@2", "mount": "d"}]))
    check_eq(st, 201, f"a job submitted after the upgrade: {doc}")
    for jid, out in ((1, b"never\n"), (doc["id"], b"gamma\n")):
        check_eq(api.wait_job(jid, timeout=60)["state"], "succeeded", f"job {jid} after the upgrade")
        check_eq(api.log(jid), out, f"the log of job {jid}")


def upgrade_sqlite(version):
    with cluster(f"upgrade{version}") as c:
        os.makedirs(c.data_dir)
        tokens, _ = unpack("sqlite", c.data_dir, version)
        db = sqlite3.connect(os.path.join(c.data_dir, "state.db"))
        check_eq(db.execute("SELECT version FROM schema_version").fetchall(), [(version,)], "the fixture's schema")
        db.close()
        c.start_master()
        db = sqlite3.connect(os.path.join(c.data_dir, "state.db"))
        check_eq(db.execute("SELECT version FROM schema_version").fetchall(), [(store_schema_version(),)],
                 "the schema version after the upgrade")
        db.close()
        check_upgraded(c, tokens, version)


def upgrade_postgres(version):
    with PgServer() as pg, cluster(f"upgrade{version}pg", master_args=["--store", pg.url]) as c:
        os.makedirs(c.data_dir)
        tokens, sql = unpack("pg", c.data_dir, version)
        check(sql is not None, "the PostgreSQL fixture holds store.sql")
        r = subprocess.run(["psql", pg.socket_url, "-q", "-v", "ON_ERROR_STOP=1"], input=sql,
                           capture_output=True)
        check_eq(r.returncode, 0, f"psql of the fixture: {r.stderr.decode(errors='replace')}")
        check_eq(pg.sql("SELECT version FROM schema_version"), [str(version)], "the fixture's schema")
        c.start_master()
        check_eq(pg.sql("SELECT version FROM schema_version"), [str(store_schema_version())],
                 "the schema version after the upgrade")
        check_upgraded(c, tokens, version)


def test_upgrade_sqlite_store_from_version_4():
    upgrade_sqlite(4)


def test_upgrade_postgres_store_from_version_4():
    upgrade_postgres(4)


def test_upgrade_sqlite_store_from_version_5():
    upgrade_sqlite(5)


def test_upgrade_postgres_store_from_version_5():
    upgrade_postgres(5)
