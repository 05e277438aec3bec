"""Jobs end to end on a real master and two real agents: success, failure,
multi-GPU, a 200 MB log, cancel of a whole process tree, OOM; job listings
that follow every change."""
import hashlib
import os
import time

from harness import check, check_eq, cluster, pid_alive, spec, wait_until

SH = "/bin/sh"


def test_job_mix():
    with cluster("mix") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        c.start_agent("n2", gpus="sim:2")
        api = c.api

        _, ok = api.submit(spec([SH, "-c", "echo hello; echo oops >&2"], name="ok"))
        _, bad = api.submit(spec([SH, "-c", "echo failing; exit 3"], name="bad"))
        _, two = api.submit(spec([SH, "-c", "echo gpus=$CUDA_VISIBLE_DEVICES"], name="two", gpus=2))
        # 200 MB of random bytes on stderr; the task prints their sha256 on stdout
        _, big = api.submit(spec([SH, "-c", "head -c 209715200 /dev/urandom | tee /dev/stderr | sha256sum"],
                                 name="big", cpus=1))

        j = api.wait_job(ok["id"])
        check_eq(j["state"], "succeeded", "state of the succeeding job")
        check_eq(j["exit_code"], 0, "exit code of the succeeding job")
        check_eq(api.log(ok["id"]), b"hello\n", "stdout of the succeeding job")
        check_eq(api.log(ok["id"], stream="stderr"), b"oops\n", "stderr of the succeeding job")

        j = api.wait_job(bad["id"])
        check_eq(j["state"], "failed", "state of the job that exits 3")
        check_eq(j["exit_code"], 3, "exit code of the job that exits 3")
        check(j["reason"] and "3" in j["reason"]["message"] and "worker/0" in j["reason"]["message"],
              f"failure reason names the task and status: {j['reason']}")
        check_eq(api.log(bad["id"]), b"failing\n", "stdout of the failing job")

        j = api.wait_job(two["id"])
        check_eq(j["state"], "succeeded", "state of the 2-GPU job")
        t = j["tasks"][0]
        check_eq(len(t["gpus"]), 2, "GPUs held by the 2-GPU task")
        want = "gpus=" + ",".join(str(g) for g in t["gpus"]) + "\n"
        check_eq(api.log(two["id"]).decode(), want, "CUDA_VISIBLE_DEVICES of the 2-GPU task")

        j = api.wait_job(big["id"], timeout=240)
        check_eq(j["state"], "succeeded", "state of the 200 MB job")
        err = api.log(big["id"], stream="stderr")
        check_eq(len(err), 209715200, "bytes of the 200 MB log at the master")
        out = api.log(big["id"]).decode().split()[0]
        check_eq(hashlib.sha256(err).hexdigest(), out, "sha256 of the 200 MB log")


def test_cancel_kills_whole_tree():
    with cluster("cancel") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:1")
        # a child in the task's group, and one that escapes it with setsid
        script = "sleep 1000 & echo $!; setsid sleep 1001 & sleep 0.2; pgrep -n -f 'sleep 1001'; echo $$; wait"
        _, job = c.api.submit(spec([SH, "-c", script], name="victim"))
        jid = job["id"]
        lines = wait_until(lambda: (lambda b: b.split() if len(b.split()) >= 3 else None)(c.api.log(jid)),
                           30, "the task to print its pids")
        pids = [int(x) for x in lines[:3]]
        check(all(pid_alive(p) for p in pids), f"all of {pids} alive before cancel")
        r = c.cli("cancel", str(jid), check_rc=0)
        j = c.api.wait_job(jid, states=("cancelled",), timeout=10)
        check_eq(j["state"], "cancelled", "job state after cancel")
        wait_until(lambda: not any(pid_alive(p) for p in pids), 30,
                   f"every process of the task tree {pids} to be gone")
        j = wait_until(lambda: (lambda j: j if all(t["state"] == "killed" for t in j["tasks"]) else None)(c.api.job(jid)),
                       30, "the task to be reported killed")
        nodes = c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"]
        check(all(g.get("job") is None for n in nodes for g in n["gpus"]), "GPUs released after cancel")
        check(b"cancelled" in r.stdout, f"cancel prints the new state: {r.stdout!r}")


def test_oom_killed():
    with cluster("oom") as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        hog = ["/bin/sh", "-c", "exec python3 -c 'b = bytearray(512 * 1024 * 1024); print(len(b))'"]
        _, job = c.api.submit(spec(hog, name="hog", memory="64MiB"))
        j = c.api.wait_job(job["id"], timeout=60)
        check_eq(j["state"], "failed", "state of the job over its memory limit")
        check(j["reason"] is not None, "a failed job has a reason")
        check_eq(j["reason"]["code"], "oom_killed", "reason code of the job over its memory limit")
        check_eq(j["tasks"][0]["reason"]["code"] if j["tasks"][0]["reason"] else None, "oom_killed",
                 "task reason code")
        # the message names the limit that was hit and where it came from
        check_eq(j["reason"]["message"], "worker/0 ran out of memory: the task's limit of "
                 "64.0 MiB (tasks.worker.memory) was reached", "message of an OOM kill")


def test_timeout_and_drain():
    with cluster("timeout") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:1")
        _, job = c.api.submit(spec(["/bin/sh", "-c", "echo $$; exec sleep 600"], name="slow", timeout="1s"))
        j = c.api.wait_job(job["id"], timeout=30)
        check_eq(j["state"], "failed", "state of a job past its timeout")
        check_eq(j["reason"]["code"], "timeout", "reason of a job past its timeout")
        pid = int(c.api.log(job["id"]).split()[0])
        wait_until(lambda: not pid_alive(pid), 30, "the timed-out task to be killed")
        # a drained node gets no new work; the job waits and says why
        status, node = c.api.json("POST", "/v1/nodes/n1/drain", expect=200)
        check_eq((node["state"], node["drained"]), ("ready", True), "liveness and drain of a drained node")
        _, job = c.api.submit(spec(["/bin/true"], name="waits"))
        q = wait_until(lambda: [e for e in c.api.json("GET", "/v1/queue")[1]["queue"] if e["id"] == job["id"]],
                       10, "the job in the queue")
        check_eq(q[0]["position"], 1, "queue position of the waiting job")
        check(q[0]["reason"] and q[0]["reason"]["message"], f"queue reason of the waiting job: {q}")
        check_eq(c.api.job(job["id"])["state"], "queued", "state of a job with only a drained node")
        r = c.cli("queue", check_rc=0)
        check(str(job["id"]) in r.stdout.decode(), f"yard queue lists the job: {r.stdout!r}")


def listing(api, query=""):
    return api.json("GET", "/v1/jobs" + query, expect=200)[1]["jobs"]


def listed(api, jid, query=""):
    return next((j for j in listing(api, query) if j["id"] == jid), None)


def alone(api, jid):
    """GET /v1/jobs/{id} less what only the one-job document has."""
    d = api.job(jid)
    del d["ahead"], d["events"], d["gpu_util"]
    return d


def test_listing_follows_every_change():
    """The master keeps each job's listed document, and the last listing, as
    text until a job changes: a listing right after a change shows it (log
    bytes, state, queue position), and attained GPU time, which only the
    clock changes, goes on growing."""
    with cluster("listing") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:1")
        api = c.api
        trigger = os.path.join(c.dir, "trigger")
        script = f"echo one; while [ ! -e {trigger} ]; do sleep 0.05; done; echo two; sleep 1000"
        _, logger = api.submit(spec([SH, "-c", script], name="logger"))
        _, holder = api.submit(spec([SH, "-c", "sleep 1000"], name="holder", gpus=1))
        wait_until(lambda: alone(api, holder["id"])["state"] == "running", 30, "the GPU holder to run")
        _, w1 = api.submit(spec([SH, "-c", "true"], name="w1", gpus=1))
        _, w2 = api.submit(spec([SH, "-c", "true"], name="w2", gpus=1))
        wait_until(lambda: (listed(api, logger["id"]) or {}).get("tasks", [{}])[0]
                   .get("log_size", {}).get("stdout") == 4, 30, "the first line in the listing")

        # the same listing twice (the second one kept), and as the one-job documents say
        for jid in (logger["id"], w1["id"], w2["id"]):
            alone(api, jid)  # fresh queue positions
        first = listing(api)
        check_eq(listing(api), first, "a listing asked twice")
        for jid in (logger["id"], w1["id"], w2["id"]):
            check_eq(listed(api, jid), alone(api, jid), f"job {jid} listed and alone")
        check_eq([j["queue_position"] for j in listing(api, "?state=queued")], [2, 1],
                 "queue positions of the waiting jobs, newest first")

        # new log bytes
        with open(trigger, "w"):
            pass
        wait_until(lambda: alone(api, logger["id"])["tasks"][0]["log_size"]["stdout"] == 8, 30,
                   "the second line")
        check_eq(listed(api, logger["id"])["tasks"][0]["log_size"]["stdout"], 8,
                 "stdout bytes listed right after the one-job document showed 8")

        # a state change, and the queue position it frees
        api.json("POST", f"/v1/jobs/{w1['id']}/cancel", expect=200)
        check_eq(listed(api, w1["id"])["state"], "cancelled", "state listed right after the cancel")
        check_eq(alone(api, w2["id"])["queue_position"], 1, "w2's position once w1 is gone")
        check_eq(listed(api, w2["id"]), alone(api, w2["id"]), "w2 listed and alone after the cancel")
        check_eq([j["id"] for j in listing(api, "?state=queued")], [w2["id"]], "the queued jobs listed")
        check_eq([j["id"] for j in listing(api, "?limit=1&user=admin")], [w2["id"]], "the newest job")

        # the clock alone moves attained GPU time
        a = listed(api, holder["id"])["attained_gpu_seconds"]
        wait_until(lambda: listed(api, holder["id"])["attained_gpu_seconds"] > a, 10,
                   f"the holder's attained GPU seconds to grow past {a} in the listing")


def test_submission_sent_again_makes_one_job():
    """A submission with an idempotency_key sent again (its reply was lost)
    answers the job it made, also after a restart of the master; the same
    key with another spec is refused; another user's key is their own."""
    with cluster("idem") as c:
        c.start_master()
        s = spec(["/bin/true"], name="once", cpus=0.01)
        st, first = c.api.submit(s, key="run-42")
        check_eq(st, 201, f"the first submission: {first}")
        st, again = c.api.submit(s, key="run-42")
        check_eq((st, again["id"]), (200, first["id"]), "the same submission sent again")
        st, doc = c.api.submit(spec(["/bin/false"], name="once", cpus=0.01), key="run-42")
        check_eq((st, doc["error"]["code"], doc["error"]["field"]), (409, "conflict", "idempotency_key"),
                 f"the key with another spec: {doc}")
        check(f"job {first['id']}" in doc["error"]["message"], f"the refusal names the job: {doc}")
        for bad in ("", "x" * 129, "a b", "é", 7):
            st, doc = c.api.json("POST", "/v1/jobs", {"spec": s, "idempotency_key": bad})
            check_eq((st, doc["error"]["field"]), (400, "idempotency_key"), f"key {bad!r}: {doc}")
            check("é" not in doc["error"]["message"], "the refusal does not echo the key")
        bob = c.user_token("bob")
        st, other = c.api.submit(s, key="run-42", token=bob)
        check_eq(st, 201, f"bob's own run-42: {other}")
        check(other["id"] != first["id"], "bob's run-42 is a job of its own")
        c.master.stop()
        c.start_master()
        st, again = c.api.submit(s, key="run-42")
        check_eq((st, again["id"]), (200, first["id"]), "sent again after the master restarted")
        st, doc = c.api.json("GET", "/v1/jobs")
        check_eq(sorted(j["name"] for j in doc["jobs"]), ["once", "once"], "jobs stored")
