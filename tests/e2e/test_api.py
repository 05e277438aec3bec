"""Spec validation through the CLI and the API, admission (a job no state of
the cluster could run is refused), and authentication and ownership: errors
name the field, the value and the reason; nothing is stored for a rejected
job; 401 without a token, 403 for another user's cancel."""
import json
import os

from harness import check, check_eq, cluster, spec, wait_until

BAD_SPECS = [
    # (yaml text, field, words the message must contain)
    ("command: [/bin/true]\ntasks:\n  worker: {gpus: two}\n", "tasks.worker.gpus", ["two"]),
    ("command: [/bin/true]\ntasks:\n  worker: {gpu: 1}\n", "tasks.worker.gpu", ["unknown"]),
    ("command: [/bin/true]\ntasks:\n  worker: {cpus: -1}\n", "tasks.worker.cpus", ["-1"]),
    ("command: [/bin/true]\ntasks:\n  worker: {memory: lots}\n", "tasks.worker.memory", ["lots"]),
    ("name: Bad Name!\ncommand: [/bin/true]\ntasks: {worker: {}}\n", "name", ["Bad Name!"]),
    ("command: /bin/true\ntasks: {worker: {}}\n", "command", []),
    ("command: [/bin/true]\ntasks: {worker: {replicas: 0}}\n", "tasks.worker.replicas", ["0"]),
    ("command: [/bin/true]\ntasks: {worker: {gpus: 64}}\n", "tasks.worker.gpus", ["64"]),
    ("command: [/bin/true]\ntasks: {worker: {}}\ncolour: blue\n", "colour", ["unknown"]),
    ("image: Ubuntu:22.04\ncommand: [/bin/true]\ntasks: {worker: {}}\n", "image",
     ["\"Ubuntu:22.04\" is not a valid image reference", "lowercase"]),
]


def job_count(api):
    return len(api.json("GET", "/v1/jobs?limit=100000", expect=200)[1]["jobs"])


def test_invalid_specs_cli_and_api():
    with cluster("invalid") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        before = job_count(c.api)
        for k, (text, field, words) in enumerate(BAD_SPECS):
            path = os.path.join(c.dir, f"bad{k}", "job.yaml")
            os.makedirs(os.path.dirname(path))
            with open(path, "w") as f:
                f.write(text)
            r = c.cli("submit", path)
            err = r.stderr.decode()
            check_eq(r.returncode, 2, f"exit status of 'yard submit' for bad spec {k} ({err.strip()})")
            check(field + ":" in err, f"CLI error for bad spec {k} names '{field}': {err!r}")
            for w in words:
                check(w in err, f"CLI error for bad spec {k} says {w!r}: {err!r}")
        # the same through the API: 400 with the JSON error document
        status, doc = c.api.submit(spec(["/bin/true"], gpus="two"))
        check_eq(status, 400, "HTTP status for an invalid spec")
        check_eq(doc["error"]["code"], "invalid_spec", "error code for an invalid spec")
        check_eq(doc["error"]["field"], "tasks.worker.gpus", "error field for an invalid spec")
        check('"two"' in doc["error"]["message"], f"message quotes the value: {doc}")
        # bigger than every node the cluster has: refused unless told to wait
        status, doc = c.api.submit(spec(["/bin/true"], gpus=8))
        check_eq(status, 400, "HTTP status for a task bigger than every node")
        check_eq(doc["error"]["field"], "tasks.worker.gpus", "field for a task bigger than every node")
        status, doc = c.api.submit(spec(["/bin/true"], gpus=8, placement={"wait_for_nodes": True}))
        check_eq(status, 201, "a too-big task is accepted with wait_for_nodes")
        check_eq(job_count(c.api), before + 1, "jobs stored: only the accepted one")
        status, q = c.api.json("GET", "/v1/queue", expect=200)
        entry = [e for e in q["queue"] if e["id"] == doc["id"]]
        check_eq(len(entry), 1, "the waiting job is in the queue")
        check(entry[0]["reason"]["code"] and entry[0]["reason"]["message"], f"queue reason: {entry}")
        # malformed bodies
        status, data, _ = c.api.request("POST", "/v1/jobs", raw=b"{not json", ctype="application/json")
        check_eq(status, 400, "HTTP status for a malformed JSON body")
        check_eq(json.loads(data)["error"]["code"], "bad_request", "error code for malformed JSON")


# (spec changes, field, words the message must contain) on a cluster of 8 + 4
# sim GPUs: each job here is refused at submit, and accepted with wait_for_nodes
INFEASIBLE = [
    (dict(replicas=4, gpus=8), "tasks.worker.replicas",
     ["4 x 8 GPUs = 32 GPUs, but the cluster has 12 GPUs on 2 nodes"]),
    (dict(replicas=3, gpus=4, placement={"max_nodes": 1}), "placement.max_nodes",
     ["3 tasks of 4 GPUs", "at most 1 node"]),
    (dict(gpus=1, placement={"gpu_model": "H100"}), "placement.gpu_model", ["'H100'"]),
    (dict(gpus=1, placement={"labels": {"net": "ib"}}), "placement.labels", []),
    (dict(gpus=1, pool="batch"), "pool", ["'batch'"]),
    (dict(image="debian:bookworm"), "image", ["container runtime"]),
]


def test_admission_refuses_what_cannot_run():
    with cluster("admission") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:8")
        c.start_agent("n2", gpus="sim:4")
        before = job_count(c.api)
        for k, (extra, field, words) in enumerate(INFEASIBLE):
            kw = dict(extra)
            status, doc = c.api.submit(spec(["/bin/true"], **kw))
            what = f"infeasible job {k} ({extra})"
            check_eq((status, doc.get("error", {}).get("code"), doc.get("error", {}).get("field")),
                     (400, "invalid_spec", field), f"{what}: {doc}")
            msg = doc["error"]["message"]
            check(msg.startswith(field + ": ") and
                  msg.endswith("(set placement.wait_for_nodes: true to queue anyway)"),
                  f"{what}: the message names the field and the way out: {msg!r}")
            for w in words:
                check(w in msg, f"{what} says {w!r}: {msg!r}")
        check_eq(job_count(c.api), before, "nothing stored for a refused job")
        # the CLI: exit 2, the field and what the cluster has
        path = os.path.join(c.dir, "big", "job.yaml")
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            f.write("command: [/bin/true]\ntasks: {worker: {replicas: 4, gpus: 8, cpus: 0.1}}\n")
        r = c.cli("submit", path)
        err = r.stderr.decode()
        check_eq(r.returncode, 2, f"yard submit of a job too big for the cluster: {err!r}")
        check("tasks.worker.replicas: 4 x 8 GPUs = 32 GPUs, but the cluster has 12 GPUs on 2 nodes" in err,
              f"the CLI says why: {err!r}")
        # what fits the cluster is accepted (8 + 4: one task on each)
        status, doc = c.api.submit({"name": "fits", "command": ["/bin/true"],
                                    "tasks": {"big": {"gpus": 8, "cpus": 0.1}, "small": {"gpus": 4, "cpus": 0.1}}})
        check_eq(status, 201, f"a gang of 8 + 4 on 8 + 4: {doc}")
        check_eq(c.api.wait_job(doc["id"])["state"], "succeeded", "it runs")
        # wait_for_nodes: accepted, and it waits with the same reason
        status, doc = c.api.submit(spec(["/bin/true"], replicas=4, gpus=8, placement={"wait_for_nodes": True}))
        check_eq(status, 201, f"4 x 8 with wait_for_nodes: {doc}")
        reason = wait_until(lambda: (lambda q: q[0]["reason"] if q and q[0]["reason"] else None)(
            [e for e in c.api.json("GET", "/v1/queue", expect=200)[1]["queue"] if e["id"] == doc["id"]]),
            10, "its queue reason")
        check_eq(reason, {"code": "infeasible", "message": "tasks.worker.replicas: 4 x 8 GPUs = 32 GPUs, "
                          "but the cluster has 12 GPUs on 2 nodes"}, "the reason of a job that can never run")


def test_admission_without_nodes_waits():
    with cluster("admission-empty") as c:
        c.start_master()
        status, doc = c.api.submit(spec(["/bin/true"], replicas=4, gpus=8))
        check_eq(status, 201, f"with no nodes at all a job is accepted, as before: {doc}")
        check_eq(c.api.job(doc["id"])["state"], "queued", "and waits")


def test_auth_and_ownership():
    with cluster("auth") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:1")
        alice = c.user_token("alice")
        bob = c.user_token("bob")
        status, _, _ = c.api.request("GET", "/healthz", token="")
        check_eq(status, 200, "healthz without a token")
        for path in ("/v1/jobs", "/v1/nodes", "/v1/queue"):
            status, data, _ = c.api.request("GET", path, token="")
            check_eq(status, 401, f"GET {path} without a token")
            check_eq(json.loads(data)["error"]["code"], "unauthorized", f"error code of GET {path}")
            status, _, _ = c.api.request("GET", path, token="yard_u_" + "0" * 64)
            check_eq(status, 401, f"GET {path} with an unknown token")
        status, _ = c.api.submit(spec(["/bin/true"]), token="")
        check_eq(status, 401, "submission without a token")
        # only an admin makes tokens; a join token is not a user token
        status, _ = c.api.json("POST", "/v1/tokens", {"user": "mallory", "admin": True}, token=alice)
        check_eq(status, 403, "a user creating a token")
        with open(os.path.join(c.data_dir, "join-token")) as f:
            join = f.read().strip()
        status, _ = c.api.json("GET", "/v1/jobs", token=join)
        check_eq(status, 403, "listing jobs with the join token")

        status, job = c.api.submit(spec(["/bin/sleep", "600"], name="alices"), token=alice)
        check_eq(status, 201, "alice's submission")
        check_eq(job["user"], "alice", "owner of alice's job")
        status, doc = c.api.json("POST", f"/v1/jobs/{job['id']}/cancel", token=bob)
        check_eq(status, 403, "bob cancelling alice's job")
        check_eq(doc["error"]["code"], "forbidden", "error code of bob's cancel")
        r = c.cli("cancel", str(job["id"]), token=bob)
        check_eq(r.returncode, 1, "exit status of bob's 'yard cancel'")
        check_eq(c.api.job(job["id"])["state"] in ("queued", "starting", "running"), True,
                 "alice's job untouched by bob")
        status, doc = c.api.json("POST", f"/v1/jobs/{job['id']}/cancel", token=alice)
        check_eq(status, 200, "alice cancelling her own job")
        check_eq(doc["state"], "cancelled", "state after alice's cancel")
        status, job2 = c.api.submit(spec(["/bin/sleep", "600"], name="bobs"), token=bob)
        status, doc = c.api.json("POST", f"/v1/jobs/{job2['id']}/cancel")
        check_eq(status, 200, "an admin cancelling bob's job")
        status, doc = c.api.json("POST", f"/v1/jobs/{job2['id']}/cancel")
        check_eq(status, 409, "cancelling a job that is already cancelled")
        status, _ = c.api.json("GET", "/v1/jobs/999999")
        check_eq(status, 404, "an unknown job")


def test_job_long_poll():
    """GET /v1/jobs/{id}?state=S&wait=W is held while the job is in state S
    (what yard submit --follow and yard wait wait on), answers at once when
    it is not, and refuses a state or wait it cannot take, naming the field."""
    import threading
    import time
    with cluster("jobpoll") as c:
        c.start_master()
        # no nodes: the job waits, queued
        status, job = c.api.submit(spec(["/bin/true"]))
        check_eq(status, 201, "submit")
        jid = job["id"]
        t0 = time.monotonic()
        doc = c.api.json("GET", f"/v1/jobs/{jid}?state=queued&wait=1", expect=200)[1]
        held = time.monotonic() - t0
        check_eq(doc["state"], "queued", "the state after a wait that ran out")
        check(held >= 0.9, f"a poll on the state the job is in is held for its wait: {held:.3f} s")
        # in another state: answered at once, with the whole document
        doc = c.api.json("GET", f"/v1/jobs/{jid}?state=running&wait=30", expect=200)[1]
        check_eq(doc["state"], "queued", "a poll on another state answers with the job")
        check("events" in doc and "tasks" in doc, f"the one-job document: {sorted(doc)}")
        # a held poll ends when the state changes (here: a cancel)
        got = {}

        def poll():
            got["doc"] = c.api.json("GET", f"/v1/jobs/{jid}?state=queued&wait=30", expect=200)[1]
            got["at"] = time.monotonic()
        th = threading.Thread(target=poll)
        th.start()
        c.api.json("POST", f"/v1/jobs/{jid}/cancel", expect=200)
        cancelled_at = time.monotonic()
        th.join(40)
        check(not th.is_alive(), "the held poll was answered")
        check_eq(got["doc"]["state"], "cancelled", "the state the held poll answers with")
        check(got["at"] - cancelled_at < 20, "answered on the change, not at the end of its wait")
        for q, field in [("state=sleeping&wait=1", "state"), ("state=queued&wait=31", "wait"),
                         ("state=queued&wait=soon", "wait")]:
            status, doc = c.api.json("GET", f"/v1/jobs/{jid}?{q}")
            check_eq(status, 400, f"status for ?{q}")
            check_eq(doc["error"]["field"], field, f"field for ?{q}")
            value = q.split("&")[0 if field == "state" else 1].split("=")[1]
            check(value in doc["error"]["message"], f"the message quotes {value!r}: {doc}")
