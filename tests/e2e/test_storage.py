"""The master's data dir fills up (a small tmpfs): submissions fail with 507
and a clear error, nothing stored before is lost or corrupted, and service
comes back when space does. A read-only data dir is refused at start."""
import contextlib
import os
import signal
import subprocess

from harness import check, check_eq, cluster, spec


@contextlib.contextmanager
def tmpfs_cluster(name, size):
    """A cluster whose master's data dir is a tmpfs of size; the daemons are
    stopped before it is unmounted, also when the test fails."""
    with cluster(name) as c:
        os.makedirs(c.data_dir)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "yard-e2e", c.data_dir], check=True)
        try:
            yield c
        finally:
            for p in c.procs:
                p.stop()
            subprocess.run(["umount", "-l", c.data_dir])


def test_disk_full_then_recovered():
    with tmpfs_cluster("diskfull", "8m") as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        before = []
        for k in range(5):
            status, job = c.api.submit(spec(["/bin/echo", f"job {k}"], name=f"before-{k}"))
            check_eq(status, 201, f"submission {k} with space left")
            before.append(job["id"])
        for jid in before:
            check_eq(c.api.wait_job(jid)["state"], "succeeded", f"state of job {jid}")
        # fill the disk; keep submitting until the store cannot grow
        filler = os.path.join(c.data_dir, "filler")
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
        codes = []
        for k in range(200):
            status, doc = c.api.submit(spec(["/bin/true"], name=f"full-{k}", env={"PAD": "x" * 3000}))
            codes.append(status)
            if status != 201:
                break
        check_eq(codes[-1], 507, f"HTTP status once the disk is full (after {len(codes)} tries)")
        check_eq(doc["error"]["code"], "insufficient_storage", "error code on a full disk")
        check("full" in doc["error"]["message"], f"the message on a full disk says why: {doc}")
        accepted = [s for s in codes if s == 201]
        # more refusals hurt nothing: the store lists exactly what was acknowledged
        for k in range(5):
            check_eq(c.api.submit(spec(["/bin/true"], name=f"refused-{k}"))[0], 507, "still full")
        names = sorted(j["name"] for j in c.api.json("GET", "/v1/jobs?limit=1000", expect=200)[1]["jobs"])
        check_eq(names, sorted([f"before-{k}" for k in range(5)] + [f"full-{k}" for k in range(len(accepted))]),
                 "the jobs while the disk is full")
        # what was stored before is intact, and reads still work
        for jid in before:
            j = c.api.job(jid)
            check_eq(j["state"], "succeeded", f"job {jid} after the disk filled")
            check_eq(c.api.log(jid).decode(), f"job {before.index(jid)}\n", f"log of job {jid}")
        os.unlink(filler)
        status, job = c.api.submit(spec(["/bin/echo", "after"], name="after"))
        check_eq(status, 201, "a submission once space is back")
        check_eq(c.api.wait_job(job["id"])["state"], "succeeded", "the job submitted after recovery")
        # a restart after a SIGKILL reads back exactly what was acknowledged
        c.master.kill(signal.SIGKILL)
        c.master.p.wait()
        c.start_master()
        names = sorted(j["name"] for j in c.api.json("GET", "/v1/jobs?limit=1000", expect=200)[1]["jobs"])
        want = sorted([f"before-{k}" for k in range(5)] + [f"full-{k}" for k in range(len(accepted))] + ["after"])
        check_eq(names, want, "jobs in the store after a restart")


def test_readonly_data_dir():
    """A master started on a read-only data dir (a filesystem remounted
    read-only after an error) refuses to start, naming the flag, the dir and
    the cause; once the dir is writable it starts with everything stored."""
    with tmpfs_cluster("readonly", "32m") as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        status, first = c.api.submit(spec(["/bin/echo", "first"], name="first"))
        check_eq(status, 201, "a submission on a writable data dir")
        check_eq(c.api.wait_job(first["id"])["state"], "succeeded", "the first job")
        c.master.stop()
        subprocess.run(["mount", "-o", "remount,ro", c.data_dir], check=True)
        r = subprocess.run([c.master.argv[0], "master", "--listen", "127.0.0.1:0", "--data-dir", c.data_dir],
                           capture_output=True, text=True, timeout=30, env=c.env())
        check(r.returncode != 0, f"a master on a read-only data dir exits non-zero ({r.returncode})")
        check(f"--data-dir '{c.data_dir}': Read-only file system" in r.stderr,
              f"the master says which dir is read-only: {r.stderr!r}")
        subprocess.run(["mount", "-o", "remount,rw", c.data_dir], check=True)
        c.start_master()
        check_eq(c.api.job(first["id"])["state"], "succeeded", "the job stored before, after the remount")
        check_eq(c.api.log(first["id"]).decode(), "first\n", "its log")
