"""A master on PostgreSQL (--store): it runs jobs, keeps them across its own
restart, and carries on when the PostgreSQL server restarts under it, losing
nothing it acknowledged; another master on the same database, on a data dir
of its own, serves what the first one kept (logs, code, dataset chunks). Each test starts its own private server
(pgserver.py); without PostgreSQL installed they fail, saying so."""
import hashlib
import io
import os
import shutil
import tarfile
import time

from harness import SubmitLoad, check, check_eq, cluster, spec, store_schema_version, wait_until
from pgserver import PgServer

COUNTER = "i=0; while [ $i -lt {n} ]; do i=$((i+1)); echo line $i; sleep {d}; done"


def master_log(c):
    with open(c.master.logpath, errors="replace") as f:
        return f.read()


def test_master_on_postgres_runs_jobs_and_restarts():
    with PgServer() as pg, cluster("pgstore", master_args=["--store", pg.url]) as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        check(not os.path.exists(os.path.join(c.data_dir, "state.db")),
              "a master on --store keeps no state.db in its data dir")
        _, long = c.api.submit(spec(["/bin/sh", "-c", COUNTER.format(n=60, d=0.05)], name="long"))
        ids = {}
        for i in range(10):
            _, j = c.api.submit(spec(["/bin/sh", "-c", f"echo hello {i}"], name=f"short-{i}"))
            ids[j["id"]] = i
        for jid, i in ids.items():
            j = c.api.wait_job(jid, timeout=60)
            check_eq(j["state"], "succeeded", f"job {jid}")
            check_eq(c.api.log(jid).decode(), f"hello {i}\n", f"log of job {jid}")
        wait_until(lambda: c.api.job(long["id"])["state"] == "running", 30, "the long job running")
        check_eq(pg.sql("SELECT count(*) FROM jobs"), [str(len(ids) + 1)], "job rows in PostgreSQL")
        check_eq(pg.sql("SELECT version FROM schema_version"), [str(store_schema_version())], "the schema version")
        # the logs are rows of the store, not files of the data dir
        for jid, i in ids.items():
            tid = c.api.job(jid)["tasks"][0]["id"]
            check_eq(pg.sql(f"SELECT rtrim(convert_from(string_agg(data, ''::bytea ORDER BY off), 'UTF8'), E'\\n')"
                            f" FROM blobs WHERE name = 'logs/{tid}.stdout'"), [f"hello {i}"],
                     f"the log of job {jid} in PostgreSQL")
        logs_dir = os.path.join(c.data_dir, "logs")
        check_eq(os.listdir(logs_dir) if os.path.isdir(logs_dir) else [], [], "log files in the data dir")

        c.master.stop()
        c.start_master()
        for jid, i in ids.items():
            j = c.api.job(jid)
            check_eq((j["name"], j["state"]), (f"short-{i}", "succeeded"), f"job {jid} after the restart")
            check_eq(c.api.log(jid).decode(), f"hello {i}\n", f"log of job {jid} after the restart")
        j = c.api.wait_job(long["id"], timeout=60)
        check_eq(j["state"], "succeeded", "the job that ran across the master's restart")
        check_eq(c.api.log(long["id"]).decode(), "".join(f"line {i}\n" for i in range(1, 61)),
                 "its log")
        log = master_log(c)
        check(pg.password not in log, "the master's log never shows the store's password")


def targz(files):
    """A tar.gz of {path: bytes}, as a job's code upload."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def test_another_data_dir_serves_what_the_first_kept():
    """Everything a master keeps is reachable by whichever master uses the
    database: a master started on a fresh data dir (another machine taking
    over, holding only the token files) serves the first one's task logs,
    code archive and dataset chunk, and runs a new job from that code."""
    with PgServer() as pg, cluster("pgtakeover", master_args=["--store", pg.url]) as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        code = targz({"hello.txt": b"hi from the code\n"})
        st, body, _ = c.api.request("POST", "/v1/code", raw=code, ctype="application/gzip")
        check_eq(st, 201, f"code upload: {body[:200]!r}")
        digest = "sha256:" + hashlib.sha256(code).hexdigest()
        _, job = c.api.submit(spec(["/bin/cat", "hello.txt"], name="first"), code=digest)
        check_eq(c.api.wait_job(job["id"])["state"], "succeeded", "the job run from the code")
        check_eq(c.api.log(job["id"]), b"hi from the code\n", "its log on the first master")
        chunk = b"a dataset chunk\n" * 1000
        cdig = "sha256:" + hashlib.sha256(chunk).hexdigest()
        st, body, _ = c.api.request("PUT", "/v1/blobs/" + cdig, raw=chunk)
        check_eq(st, 201, f"chunk upload: {body[:200]!r}")

        c.master.stop()
        first_dir, c.data_dir = c.data_dir, os.path.join(c.dir, "master-b")
        os.makedirs(c.data_dir)
        for f in ("admin-token", "join-token"):
            shutil.copy(os.path.join(first_dir, f), c.data_dir)
        shutil.rmtree(first_dir)
        c.start_master()
        check_eq(c.api.log(job["id"]), b"hi from the code\n", "the log, from the second master")
        st, got, _ = c.api.request("GET", f"/v1/code/{digest}")
        check_eq((st, got == code), (200, True), "the code archive, from the second master")
        st, got, _ = c.api.request("GET", "/v1/blobs/" + cdig)
        check_eq((st, got == chunk), (200, True), "the dataset chunk, from the second master")
        _, again = c.api.submit(spec(["/bin/cat", "hello.txt"], name="again"), code=digest)
        check_eq(c.api.wait_job(again["id"], timeout=60)["state"], "succeeded",
                 "a job of the same code on the second master")
        check_eq(c.api.log(again["id"]), b"hi from the code\n", "its log")
        for sub in ("logs", "code", "blobs"):
            d = os.path.join(c.data_dir, sub)
            left = [n for n in os.listdir(d) if not n.startswith("upload.")] if os.path.isdir(d) else []
            check_eq(left, [], f"files in the second master's {sub}/")


def test_postgres_restart_under_a_running_master():
    with PgServer() as pg, cluster("pgrestart", master_args=["--store", pg.url, "--rate-limit", "0"]) as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        _, long = c.api.submit(spec(["/bin/sh", "-c", COUNTER.format(n=80, d=0.05)], name="long"))
        wait_until(lambda: c.api.job(long["id"])["state"] == "running", 30, "the long job running")

        total = 120
        with SubmitLoad(c.api, total, clients=4) as load:
            wait_until(lambda: len(load.acked) >= 30, 60, "30 acknowledged submissions")
            pg.stop()
            stopped_at = len(load.acked)
            wait_until(lambda: "commit failed" in master_log(c), 30, "a failed commit at the master")
            pg.start()
            load.join(120)
        acked = load.acked
        check(stopped_at < total, "PostgreSQL was restarted in the middle of the load")
        check(len(acked) >= total, f"all {total} submissions acknowledged in the end ({len(acked)})")
        check(c.master.alive(), "the master carried on")
        log = master_log(c)
        check("connected again" in log, "the master connected to PostgreSQL again")
        check(pg.password not in log, "the master's log never shows the store's password")
        for jid, name in acked.items():
            status, j = c.api.json("GET", f"/v1/jobs/{jid}")
            check_eq(status, 200, f"acknowledged job {jid} ({name})")
            check_eq(j["name"], name, f"name of acknowledged job {jid}")
        stored = set(int(k) for k in pg.sql("SELECT k FROM jobs"))
        missing = [jid for jid in acked if jid not in stored]
        check(not missing, f"every acknowledged job is in PostgreSQL (missing: {missing[:10]})")
        j = c.api.wait_job(long["id"], timeout=60)
        check_eq(j["state"], "succeeded", "the job that ran across PostgreSQL's restart")
        for jid in acked:
            c.api.wait_job(jid, timeout=120)

        # and a master started afresh on the store finds every one of them
        c.master.stop()
        c.start_master()
        for jid, name in acked.items():
            j = c.api.job(jid)
            check_eq((j["name"], j["state"]), (name, "succeeded"), f"job {jid} after a master restart")


def test_master_stops_when_postgres_stays_away():
    """A master that cannot read its store again within --store-retry (8 s
    here; a minute by default) of a failed commit stops (exit 1) rather than
    serve a model it does not have; started again once PostgreSQL is back,
    it has every acknowledged job."""
    with PgServer() as pg, cluster("pgaway", master_args=["--store", pg.url, "--store-retry", "8s"]) as c:
        c.start_master()
        acked = {}
        for i in range(5):
            _, j = c.api.submit(spec(["/bin/true"], name=f"before-{i}", cpus=0.01))
            acked[j["id"]] = f"before-{i}"
        pg.stop()
        t0 = time.monotonic()
        try:
            status, doc = c.api.submit(spec(["/bin/true"], name="during", cpus=0.01))
            check(status >= 500, f"a submission while PostgreSQL is down fails (HTTP {status}: {doc})")
        except OSError:
            pass  # the master stopped before it answered
        wait_until(lambda: not c.master.alive(), 120, "the master to stop")
        check_eq(c.master.p.wait(), 1, "the master's exit status")
        check(time.monotonic() - t0 >= 7.5, "the master tried for its --store-retry of 8 s before it stopped")
        log = master_log(c)
        check("cannot reload the store, stopping" in log, f"the master says why it stops:\n{log[-2000:]}")
        pg.start()
        c.start_master()
        for jid, name in acked.items():
            check_eq(c.api.job(jid)["name"], name, f"acknowledged job {jid} after PostgreSQL came back")
        names = [j["name"] for j in c.api.json("GET", "/v1/jobs?limit=100", expect=200)[1]["jobs"]]
        check("during" not in names, f"the failed submission is not stored ({names})")
