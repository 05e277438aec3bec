"""Start estimates in GET /v1/queue and `yard queue` (docs/scheduler.md,
"Start estimates"): with the cluster full, a waiting job is told when it
would start if the running jobs ran to their timeouts; behind a job without
a timeout it is told that nobody knows, and why."""
import sys

from harness import check, check_eq, cluster, spec, wait_until

PY = sys.executable
HOLD = [PY, "-c", "import time; time.sleep(300)"]


def queue(c):
    _, q = c.api.json("GET", "/v1/queue", expect=200)
    return {e["id"]: e for e in q["queue"]}


def test_estimate_from_the_running_jobs_timeout():
    with cluster("estimate-timeout") as c:
        c.start_master()
        c.start_agent("a", gpus="sim:2")
        _, first = c.api.submit(spec(HOLD, name="first", gpus=2, timeout="60s",
                                     preemption={"preemptible": False}))
        wait_until(lambda: c.api.job(first["id"])["state"] == "running", 30, "first running")
        started = c.api.job(first["id"])["started_at"]
        _, second = c.api.submit(spec(HOLD, name="second", gpus=2, timeout="30s"))
        _, third = c.api.submit(spec(HOLD, name="third", gpus=1))
        wait_until(lambda: queue(c).get(third["id"], {}).get("position") == 2, 30, "both queued")
        q = queue(c)
        e2, e3 = q[second["id"]], q[third["id"]]
        check(isinstance(e2["start_estimate"], int),
              f"the job behind a job with a timeout has an estimate: {e2}")
        check(abs(e2["start_estimate"] - (started + 60_000_000)) <= 2_000_000,
              f"about the first job's start + 60 s ({started + 60_000_000}): {e2}")
        check_eq(e2["start_estimate_reason"], None, "no reason with an estimate")
        # the third needs the GPUs the second takes for its 30 s
        check(isinstance(e3["start_estimate"], int), f"the third has one too: {e3}")
        check_eq(e3["start_estimate"] - e2["start_estimate"], 30_000_000,
                 "it starts when the second's timeout would end it")
        out = c.cli("queue", check_rc=0).stdout.decode()
        lines = out.splitlines()
        check("START" in lines[0], f"yard queue has a START column: {out}")
        row = [line for line in lines[1:] if line.split()[1] == str(second["id"])][0]
        check(" in " in row and ("s " in row or "m " in row), f"START says in how long: {out}")
        js = c.cli("queue", "--output", "json", check_rc=0).stdout.decode()
        check('"start_estimate"' in js, f"--output json has the field: {js}")
        for j in (first, second, third):
            c.api.json("POST", f"/v1/jobs/{j['id']}/cancel")


def test_unknown_behind_a_job_without_timeout():
    with cluster("estimate-unknown") as c:
        c.start_master()
        c.start_agent("a", gpus="sim:2")
        _, hold = c.api.submit(spec(HOLD, name="forever", gpus=2,
                                    preemption={"preemptible": False}))
        wait_until(lambda: c.api.job(hold["id"])["state"] == "running", 30, "holder running")
        _, w1 = c.api.submit(spec(HOLD, name="w1", gpus=1, timeout="10s"))
        _, w2 = c.api.submit(spec(HOLD, name="w2", gpus=1, timeout="10s"))
        wait_until(lambda: queue(c).get(w2["id"], {}).get("position") == 2, 30, "both queued")
        q = queue(c)
        check_eq(q[w1["id"]]["start_estimate"], None, "no estimate behind a job with no timeout")
        check_eq(q[w1["id"]]["start_estimate_reason"],
                 f"no_timeout: job {hold['id']} holds the GPUs it needs and has no timeout",
                 "and why, naming the job")
        check_eq(q[w2["id"]]["start_estimate"], None, "nor for the job behind it")
        check_eq(q[w2["id"]]["start_estimate_reason"],
                 f"behind: job {w1['id']}, ahead of it, has no start estimate", "why")
        out = c.cli("queue", check_rc=0).stdout.decode()
        rows = [line for line in out.splitlines()[1:] if line.strip()]
        check(len(rows) == 2 and all(" unknown " in r for r in rows), f"START says unknown: {out}")
        for j in (hold, w1, w2):
            c.api.json("POST", f"/v1/jobs/{j['id']}/cancel")
