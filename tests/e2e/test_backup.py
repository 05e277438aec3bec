"""`yard admin backup` and `yard admin restore` (docs/operations.md): a
backup taken while jobs run and write their logs, restored into a new data
dir (SQLite) or a new database (PostgreSQL), gives a master with every job
in the state it had at the backup or a later one consistent with it, every
log's bytes those of the original up to at least what was acknowledged
before the backup began, the dataset's bytes and the old tokens. Then what
is refused, each with a message that names it, touching nothing: a restore
into a data dir a master runs on (and a second master on it), an archive
cut short, a damaged one, one of a newer schema, one over a data dir that
holds a store without --force. And the master's garbage collection waits
while a backup holds its lock."""
import fcntl
import hashlib
import io
import json
import os
import re
import subprocess
import tarfile

from harness import YARD, Api, check, check_eq, cluster, spec, store_schema_version, wait_until
from pgserver import PgServer

# a job printing lines steadily until it is stopped
COUNTER = 'i=0; while :; do i=$((i+1)); echo "{name} line $i"; sleep 0.02; done'
DATA = {"a.txt": b"alpha\n" * 100, "sub/b.bin": os.urandom(3000)}


def admin(c, *args, rc=0):
    """Runs yard admin ARGS; checks its exit status; returns (stdout, stderr)."""
    r = subprocess.run([YARD, "admin", *args], capture_output=True, env=c.env(), timeout=120)
    out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    c.scan_text(err, "yard admin " + args[0])
    check_eq(r.returncode, rc, f"exit status of yard admin {' '.join(args)}; stdout {out!r}, stderr {err!r}")
    return out, err


def push(c, name, files):
    """Pushes a new version of dataset name holding files ({path: bytes})."""
    d = os.path.join(c.dir, f"push-{name}-{len(os.listdir(c.dir))}")
    for path, data in files.items():
        p = os.path.join(d, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    c.cli("data", "push", d, name, check_rc=0)


def dataset_files(api, name, version):
    _, doc = api.json("GET", f"/v1/datasets/{name}/{version}", expect=200)
    files = {}
    for f in doc["manifest"]["files"]:
        data = b""
        for digest in f["chunks"]:
            st, chunk, _ = api.request("GET", f"/v1/blobs/{digest}")
            check_eq(st, 200, f"chunk {digest} of {name}@{version}")
            data += chunk
        files[f["path"]] = data
    return files


def restored_sql(pg, db, query):
    """pg.sql in database db."""
    r = subprocess.run(["psql", pg.socket_url.replace("/yard?", f"/{db}?"), "-v", "ON_ERROR_STOP=1", "-tAc", query],
                       capture_output=True, text=True, timeout=60)
    check_eq(r.returncode, 0, f"psql {query!r}: {r.stderr}")
    return r.stdout.splitlines()


def job_states(api):
    _, doc = api.json("GET", "/v1/jobs?limit=1000", expect=200)
    return {j["id"]: j for j in doc["jobs"]}


def backup_while_running(c):
    """Runs jobs, makes a backup while two of them write their logs; returns
    (the backup's path, the jobs before it, their logs acknowledged before
    it, the user token)."""
    c.start_agent("n1", gpus="sim:2")
    alice = c.user_token("alice", team="vision")
    push(c, "digits", DATA)
    st, done = c.api.submit(spec(["/bin/sh", "-c", "echo finished; echo to stderr >&2"], name="done"))
    check_eq(st, 201, f"submit done: {done}")
    check_eq(c.api.wait_job(done["id"])["state"], "succeeded", "the finished job")
    running = []
    for name in ("count-a", "count-b"):
        st, j = Api(c.url, alice).submit(spec(["/bin/sh", "-c", COUNTER.format(name=name)], name=name))
        check_eq(st, 201, f"submit {name}: {j}")
        running.append(j["id"])
    st, held = c.api.submit(spec(["/bin/true"], name="held", gpus=4, placement={"wait_for_nodes": True}))
    check_eq(st, 201, f"submit held: {held}")
    c.api.json("POST", f"/v1/jobs/{held['id']}/hold", expect=200)
    for jid in running:
        wait_until(lambda: c.api.log(jid).count(b"\n") >= 20, 60, f"job {jid} to print 20 lines")
    before = job_states(c.api)
    acked = {jid: c.api.log(jid) for jid in before}
    path = os.path.join(c.dir, "yard.backup.tar.gz")
    out, _ = admin(c, "backup", path, "--data-dir", c.data_dir, *c.master_args)
    check(re.search(r"wrote '.*' \(.*\) in [\d.]+ s: the \w+ store at schema version \d+ \(.*\) and \d+ files",
                    out), f"the backup's closing line: {out!r}")
    for jid in running:  # still running, still writing
        seen = len(c.api.log(jid))
        wait_until(lambda: len(c.api.log(jid)) > seen + 200, 30, f"job {jid} to write on after the backup")
        check_eq(c.api.job(jid)["state"], "running", f"job {jid} after the backup")
    return path, before, acked, alice


def check_restored(c2, before, acked, final_logs, alice):
    """The restored master c2 against what the original held."""
    after = job_states(c2.api)
    check_eq(sorted(after), sorted(before), "the jobs of the restored master")
    for jid, j in before.items():
        r = after[jid]
        check_eq((r["name"], r["user"]), (j["name"], j["user"]), f"job {jid}")
        if j["state"] == "running":
            # running at the backup: still running, or lost with its node since
            ok = r["state"] == "running" or r["tasks"][0]["state"] == "lost"
            check(ok, f"job {jid}, running at the backup, is {r['state']} (tasks {r['tasks']})")
        else:
            check_eq(r["state"], j["state"], f"the state of job {jid}")
    for jid in before:
        for stream in ("stdout", "stderr"):
            got = c2.api.log(jid, stream=stream)
            orig = final_logs[(jid, stream)]
            if stream == "stdout":
                check(len(got) >= len(acked[jid]),
                      f"job {jid}'s log holds at least the {len(acked[jid])} bytes acknowledged before the"
                      f" backup ({len(got)})")
            check_eq(got, orig[:len(got)], f"job {jid}'s {stream}: the original's first {len(got)} bytes")
    check_eq(dataset_files(c2.api, "digits", 1), DATA, "the dataset's files")
    st, who = c2.api.json("GET", "/v1/whoami", token=alice)
    check_eq((st, who["user"], who["team"]), (200, "alice", "vision"), "alice's token from before the backup")


def final_logs_of(c, before):
    return {(jid, s): c.api.log(jid, stream=s) for jid in before for s in ("stdout", "stderr")}


def test_backup_restore_sqlite_while_jobs_run():
    with cluster("backup") as c, cluster("restored") as c2:
        c.start_master()
        path, before, acked, alice = backup_while_running(c)
        held = next(j for j in before.values() if j["name"] == "held")
        check_eq(held["reason"]["code"], "held", "the held job at the backup")
        final = final_logs_of(c, before)
        c.agents["n1"].stop()
        c.master.stop()
        # the restore reads where the new master keeps its state from that master's config file
        conf = os.path.join(c2.dir, "master.conf")
        with open(conf, "w") as f:
            f.write(f"listen = 127.0.0.1:0\ndata-dir = {c2.data_dir}\nvisibility = team\n")
        out, _ = admin(c, "restore", path, "--config", conf)
        check(re.search(rf"restored '.*' \(made \S+ by yard \S+\) in [\d.]+ s: the sqlite store at schema"
                        rf" version {store_schema_version()} and \d+ files", out), f"the restore's line: {out!r}")
        c2.start_master()
        check_eq(c2.admin_token, c.admin_token, "the admin token file restored")
        check_restored(c2, before, acked, final, alice)
        check_eq(c2.api.job(held["id"])["reason"]["code"], "held", "the held job is still held")


def test_backup_restore_postgres_while_jobs_run():
    with PgServer() as pg, cluster("backuppg", master_args=["--store", pg.url]) as c:
        c.start_master()
        path, before, acked, alice = backup_while_running(c)
        final = final_logs_of(c, before)
        c.agents["n1"].stop()
        c.master.stop()
        with tarfile.open(path) as tar:
            for m in tar.getmembers():
                check(pg.password.encode() not in tar.extractfile(m).read(),
                      f"the backup's member {m.name} does not hold the store's password")
        pg.sql("CREATE DATABASE restored")
        url2 = pg.url.rsplit("/", 1)[0] + "/restored"
        with cluster("restoredpg", master_args=["--store", url2]) as c2:
            out, err = admin(c2, "restore", path, "--data-dir", c2.data_dir, "--store", url2)
            check(pg.password not in out + err, "yard admin restore never prints the password")
            check("the postgres store" in out, f"the restore's line: {out!r}")
            c2.start_master()
            check_restored(c2, before, acked, final, alice)
            # into the same database again: refused, then --force keeps the old tables aside
            c2.master.stop()
            _, err = admin(c2, "restore", path, "--data-dir", c2.data_dir, "--store", url2, rc=1)
            check("holds a yard store already" in err and "--force" in err and pg.password not in err,
                  f"a restore over a store without --force: {err!r}")
            out, _ = admin(c2, "restore", path, "--data-dir", c2.data_dir, "--store", url2, "--force")
            aside = re.search(r"kept in '.*/(before-restore-\w+)'", out)
            check(aside, f"the restore names where the old state went: {out!r}")
            check_eq(restored_sql(pg, "restored", f"SELECT count(*) FROM \"{aside.group(1)}\".jobs"), [str(len(before))],
                     "the old tables, in the schema kept aside")
            c2.start_master()
            check_eq(sorted(job_states(c2.api)), sorted(before), "the jobs after the forced restore")


def rewrite(src, dest, change):
    """Writes the backup src again as dest with change(name, data) -> data
    applied to each member, the trailer made again to match."""
    members = []
    with tarfile.open(src) as tar:
        for m in tar.getmembers():
            members.append((m.name, tar.extractfile(m).read()))
    out = []
    for name, data in members:
        if name == "yard-backup.sums":
            sums = [{"name": n, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for n, d in out]
            data = json.dumps({"format": 1, "members": sums}).encode()
        else:
            data = change(name, data)
        out.append((name, data))
    with tarfile.open(dest, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, data in out:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_refusals():
    with cluster("backupno") as c:
        c.start_master()
        st, j = c.api.submit(spec(["/bin/true"], name="one"))
        check_eq(st, 201, "a job")
        good = os.path.join(c.dir, "good.tar")  # uncompressed: bytes can be changed in place
        with open(os.path.join(c.data_dir, "logs", "a stray file"), "w") as f:
            f.write("not the master's\n")
        _, err = admin(c, "backup", good, "--data-dir", c.data_dir)
        check("a stray file' left out: not a name the master gives its files" in err,
              f"a file of a name a restore would refuse is left out, saying so: {err!r}")
        _, err = admin(c, "backup", good, "--data-dir", c.data_dir, rc=1)
        check(f"'{good}' exists" in err, f"a backup never replaces a file: {err!r}")
        # a data dir a master runs on: no restore, no second master
        for extra in ([], ["--force"]):
            _, err = admin(c, "restore", good, "--data-dir", c.data_dir, *extra, rc=1)
            check(f"--data-dir '{c.data_dir}' is in use" in err, f"a restore into a live data dir: {err!r}")
        r = subprocess.run([YARD, "master", "--listen", "127.0.0.1:0", "--data-dir", c.data_dir],
                           capture_output=True, env=c.env(), timeout=30)
        check(r.returncode == 1 and b"is in use" in r.stderr, f"a second master on the data dir: {r.stderr!r}")
        with open(good, "rb") as f:
            data = f.read()
        new = os.path.join(c.dir, "new")
        cases = []
        # cut short, in the middle of its members
        cut = os.path.join(c.dir, "cut.tar")
        with open(cut, "wb") as f:
            f.write(data[:len(data) // 2])
        cases.append((cut, "cut short"))
        # one byte of the store's snapshot changed
        bad = os.path.join(c.dir, "bad.tar")
        at = data.index(b"SQLite format 3") + 5000
        with open(bad, "wb") as f:
            f.write(data[:at] + bytes([data[at] ^ 0xff]) + data[at + 1:])
        cases.append((bad, "the archive is damaged"))
        # a newer schema than this yard's
        newer = os.path.join(c.dir, "newer.tar.gz")
        rewrite(good, newer, lambda n, d: d.replace(b'"schema_version": %d' % store_schema_version(),
                                                    b'"schema_version": %d' % (store_schema_version() + 1)))
        cases.append((newer, f"schema_version {store_schema_version() + 1} of yard-backup.json is newer than"
                             f" this yard's {store_schema_version()}"))
        # not a backup
        cases.append((c.data_dir + "/admin-token", "not a yard backup"))
        for path, why in cases:
            _, err = admin(c, "restore", path, "--data-dir", new, rc=1)
            check(why in err and os.path.basename(path) in err, f"restoring {os.path.basename(path)}: {why!r} in {err!r}")
            check_eq(sorted(os.listdir(new)), [], f"the new data dir after {os.path.basename(path)} was refused")
        # a data dir that holds a store: refused without --force, kept aside with it
        c.master.stop()
        _, err = admin(c, "restore", good, "--data-dir", c.data_dir, rc=1)
        check("holds a master's state already (state.db" in err and "--force" in err,
              f"a restore over a store: {err!r}")
        out, _ = admin(c, "restore", good, "--data-dir", c.data_dir, "--force")
        aside = re.search(r"kept in '(.*)'", out)
        check(aside and os.path.isfile(os.path.join(aside.group(1), "state.db")),
              f"the old state.db is kept aside: {out!r}")
        check(os.path.isfile(os.path.join(aside.group(1), "admin-token")), "and its token files")
        c.start_master()
        check_eq(c.api.job(j["id"])["name"], "one", "the job after the forced restore")


def test_gc_waits_for_backup():
    """A dataset version deleted while a backup holds DATA/backup.lock keeps
    its chunks until the lock is let go, then loses them."""
    with cluster("backupgc") as c:
        c.start_master()
        push(c, "gone", {"only-v1.txt": b"first version only\n"})
        push(c, "gone", {"v2.txt": b"second version\n"})
        chunk = {ch for f in c.api.json("GET", "/v1/datasets/gone/1", expect=200)[1]["manifest"]["files"]
                 for ch in f["chunks"]}.pop()
        chunk_file = os.path.join(c.data_dir, "blobs", chunk.split(":", 1)[1])
        check(os.path.isfile(chunk_file), f"the chunk of gone@1 is the file {chunk_file}")
        lock = open(os.path.join(c.data_dir, "backup.lock"), "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_SH)  # as yard admin backup holds it
            c.api.json("DELETE", "/v1/datasets/gone/1", expect=200)
            wait_until(lambda: "a backup runs" in open(c.master.logpath, errors="replace").read(), 10,
                       "the master to say it waits for the backup")
            check(os.path.isfile(chunk_file), "the chunk stays while the backup runs")
        finally:
            lock.close()
        wait_until(lambda: not os.path.exists(chunk_file), 10, "the chunk to go once the backup ended")
        check_eq(dataset_files(c.api, "gone", 2), {"v2.txt": b"second version\n"}, "gone@2 keeps its chunk")
