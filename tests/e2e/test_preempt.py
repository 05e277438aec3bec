"""Preemption for priority with a real master and agent: a high-priority job
that does not fit takes the GPUs of a low-priority one, which gets SIGTERM,
its grace period to checkpoint, SIGKILL, and then resumes from its
checkpoint once the GPUs are free again. Non-preemptible jobs are never
victims."""
import sys
import time

from harness import check, check_eq, cluster, spec, wait_until

PY = sys.executable

# Counts to 40 in steps of 0.1 s, keeping its progress in YARD_CHECKPOINT_DIR
# and saying so on its output (@yard {"checkpoint": STEP}: the master then
# knows how little work a preemption costs). On SIGTERM it saves its progress and then (with IGNORE_TERM) keeps running,
# so that only the SIGKILL after the grace period ends it.
COUNTER = r"""
import os, signal, sys, time
path = os.path.join(os.environ["YARD_CHECKPOINT_DIR"], "step")
step = int(open(path).read()) if os.path.exists(path) else 0
def save():
    with open(path + ".tmp", "w") as f:
        f.write(str(step))
    os.replace(path + ".tmp", path)
    print('@yard {"checkpoint": %d}' % step, flush=True)
def on_term(sig, frame):
    save()
    print(f"SIGTERM at step {step}: checkpointed", flush=True)
    if not os.environ.get("IGNORE_TERM"):
        sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
# said only once SIGTERM is handled: the test preempts as soon as it reads this
print(f"attempt {os.environ['YARD_RESTART_COUNT']} starts at step {step}", flush=True)
while step < 40:
    time.sleep(0.1)
    step += 1
    save()
print("done", flush=True)
"""


def low_job(**extra):
    extra.setdefault("priority", "low")
    return spec([PY, "-c", COUNTER], name="low", gpus=2, **extra)


def high_preempts_low(policy):
    with cluster("preempt-" + policy, master_args=["--policy", policy]) as c:
        c.start_master()
        c.start_agent("a", gpus="sim:2")
        st, low = c.api.submit(low_job(env={"IGNORE_TERM": "1"}, preemption={"grace": "2s"}))
        check_eq(st, 201, "submit low")
        wait_until(lambda: "starts at step 0" in c.api.log(low["id"]).decode(), 30, "low running")
        wait_until(lambda: c.api.job(low["id"])["state"] == "running", 30, "low running")
        st, high = c.api.submit(spec([PY, "-c", "print('high ran')"], name="high", gpus=2,
                                     priority="high"))
        check_eq(st, 201, "submit high")
        done = c.api.wait_job(high["id"], timeout=60)
        check_eq(done["state"], "succeeded", "the high-priority job ran")
        j = c.api.job(low["id"])
        check_eq(j["preemptions"], 1, "the low job was preempted once")
        first = [t for t in j["tasks"] if t["attempt"] == 0][0]
        check_eq(first["state"], "killed", "its first attempt was stopped")
        check_eq(first["signal"], 9, "SIGKILL after the grace period (the task ignored SIGTERM)")
        low_done = c.api.wait_job(low["id"], timeout=90)
        check_eq(low_done["state"], "succeeded", f"the low job resumed and finished: {low_done['reason']}")
        check_eq(low_done["attempt"], 1, "one more attempt, not counted against restart.max")
        out = c.api.log(low["id"]).decode()
        resumed = [int(line.split()[-1]) for line in out.splitlines() if line.startswith("attempt 1 starts at step")]
        check(resumed and resumed[0] > 0, f"it resumed from its checkpoint: {out!r}")


def test_high_priority_preempts_low_under_the_default_policy():
    high_preempts_low("glas")  # the policy plan chooses the victims


def test_high_priority_preempts_low_under_fifo():
    high_preempts_low("fifo")  # fifo never preempts for order: placement chooses the victims


def test_non_preemptible_and_equal_priority_are_never_victims():
    with cluster("preempt-no") as c:
        c.start_master()
        c.start_agent("a", gpus="sim:4")
        st, keep = c.api.submit(low_job(preemption={"preemptible": False}))
        st, same = c.api.submit(spec([PY, "-c", COUNTER], name="same", gpus=2, priority="high"))
        wait_until(lambda: all(c.api.job(x["id"])["state"] == "running" for x in (keep, same)), 30,
                   "both running")
        st, high = c.api.submit(spec([PY, "-c", "print('high ran')"], name="high", gpus=2,
                                     priority="high"))
        wait_until(lambda: c.api.job(high["id"]).get("queue_position") == 1, 30, "high waits first in line")
        j = c.api.job(high["id"])
        check_eq(j["state"], "queued", "nothing was preempted for it")
        check_eq(j["reason"]["code"], "insufficient_gpus", "it waits for GPUs")
        for x in (keep, same):
            check_eq(c.api.job(x["id"])["preemptions"], 0, f"job {x['id']} kept its GPUs")
        # once a holder ends, the high job runs
        done = c.api.wait_job(high["id"], timeout=90)
        check_eq(done["state"], "succeeded", "high ran after a job finished")


def test_queue_shows_order_jobs_ahead_and_why():
    with cluster("queue-ahead") as c:
        c.start_master()
        c.start_agent("a", gpus="sim:1")
        hold = [PY, "-c", "import time; time.sleep(120)"]
        st, first = c.api.submit(spec(hold, name="holder", gpus=1))
        wait_until(lambda: c.api.job(first["id"])["state"] == "running", 30, "holder running")
        ids = [c.api.submit(spec(hold, name=f"w{i}", gpus=1))[1]["id"] for i in range(3)]
        _, q = c.api.json("GET", "/v1/queue", expect=200)
        check_eq([e["id"] for e in q["queue"]], ids, "waiting jobs in order")
        check_eq([e["position"] for e in q["queue"]], [1, 2, 3], "positions")
        check_eq([e["ahead"] for e in q["queue"]], [[], ids[:1], ids[:2]], "the jobs ahead of each")
        check_eq([e["ahead_count"] for e in q["queue"]], [0, 1, 2], "how many are ahead")
        for e in q["queue"]:
            check_eq(e["reason"]["code"], "insufficient_gpus", "a machine-readable reason")
            check("GPU" in e["reason"]["message"], f"and a sentence: {e['reason']}")
        check_eq(c.api.job(ids[2])["ahead"], [ids[1], ids[0]], "one job: the jobs ahead, nearest first")
        out = c.cli("queue", check_rc=0).stdout.decode()
        check("AHEAD" in out.splitlines()[0], f"yard queue has an AHEAD column: {out}")
        out = c.cli("show", str(ids[2]), check_rc=0).stdout.decode()
        check(f"ahead        {ids[1]} {ids[0]}" in out, f"yard show lists the jobs ahead: {out}")
        for j in [first["id"]] + ids:
            c.api.json("POST", f"/v1/jobs/{j}/cancel")


def test_las_demotes_a_long_job_for_a_new_one():
    """Least attained service in the live master: with a first level of 4
    GPU-seconds, a 2-GPU job that has run 2 s gives way to a newcomer of the
    same priority, and resumes after it. It checkpoints every 0.1 s, so the
    preemption costs it little; --preempt-min-run 0 lets it happen before
    the default two minutes of running are up."""
    with cluster("preempt-las", master_args=["--policy", "las", "--thresholds", "4,1000",
                                             "--preempt-min-run", "0"]) as c:
        c.start_master()
        c.start_agent("a", gpus="sim:2")
        st, old = c.api.submit(low_job(priority="normal", preemption={"grace": "5s"}))
        wait_until(lambda: c.api.job(old["id"])["attained_gpu_seconds"] >= 6, 30, "the first job past 4 GPU-s")
        st, new = c.api.submit(spec([PY, "-c", "print('new ran')"], name="new", gpus=2))
        done = c.api.wait_job(new["id"], timeout=60)
        check_eq(done["state"], "succeeded", "the newcomer ran")
        j = c.api.job(old["id"])
        check_eq(j["preemptions"], 1, "the long job gave way once")
        low_done = c.api.wait_job(old["id"], timeout=90)
        check_eq(low_done["state"], "succeeded", "and resumed to the end")
        out = c.api.log(old["id"]).decode()
        check("attempt 1 starts at step 0" not in out, f"it resumed from its checkpoint: {out!r}")


def test_policies_per_pool_and_fair_quotas():
    """fifo in pool 'strict' (a later job never passes the head), glas in the
    default pool (it does), and fair's team quotas."""
    hold = [PY, "-c", "import time; time.sleep(120)"]
    with cluster("pool-policies", master_args=["--policy", "glas", "--policy", "strict=fifo"]) as c:
        c.start_master()
        c.start_agent("a", gpus="sim:2")
        c.start_agent("s", gpus="sim:2", extra=["--pool", "strict"])
        started = {}
        for pool in ("default", "strict"):
            extra = {} if pool == "default" else {"pool": pool}
            a = c.api.submit(spec(hold, name="a", gpus=1, **extra))[1]["id"]
            wait_until(lambda: c.api.job(a)["state"] == "running", 30, f"a runs in {pool}")
            b = c.api.submit(spec(hold, name="b", gpus=2, **extra))[1]["id"]
            cc = c.api.submit(spec(hold, name="c", gpus=1, **extra))[1]["id"]
            wait_until(lambda: c.api.job(b).get("queue_position"), 30, f"b waits in {pool}")
            started[pool] = (a, b, cc)
        # glas: c fits in the free GPU and starts; fifo: c waits behind b
        wait_until(lambda: c.api.job(started["default"][2])["state"] == "running", 30, "c runs under glas")
        j = c.api.job(started["strict"][2])
        wait_until(lambda: c.api.job(started["strict"][2]).get("reason", {}) and
                   c.api.job(started["strict"][2])["reason"]["code"] == "behind_head", 30, "c held by fifo")
        j = c.api.job(started["strict"][2])
        check_eq(j["state"], "queued", "fifo keeps c behind the head job b")
        check("head of the queue" in j["reason"]["message"], f"and says so: {j['reason']}")
        for ids in started.values():
            for x in ids:
                c.api.json("POST", f"/v1/jobs/{x}/cancel")
    with cluster("fair-quota", master_args=["--policy", "fair", "--team", "vision=1:1"]) as c:
        c.start_master()
        c.start_agent("a", gpus="sim:2")
        v1 = c.api.submit(spec(hold, name="v1", gpus=1, team="vision"))[1]["id"]
        wait_until(lambda: c.api.job(v1)["state"] == "running", 30, "v1 runs")
        v2 = c.api.submit(spec(hold, name="v2", gpus=1, team="vision"))[1]["id"]
        wait_until(lambda: (c.api.job(v2).get("reason") or {}).get("code") == "team_quota", 30,
                   "v2 waits for its team's quota, though a GPU is free")
        check("quota of 1 GPUs" in c.api.job(v2)["reason"]["message"], "the reason names the quota")
        s1 = c.api.submit(spec(hold, name="s1", gpus=1, team="speech"))[1]["id"]
        wait_until(lambda: c.api.job(s1)["state"] == "running", 30, "another team takes the free GPU")
        c.api.json("POST", f"/v1/jobs/{s1}/cancel", expect=200)
        time.sleep(1.5)  # a full plan runs at least every second
        check_eq(c.api.job(v2)["state"], "queued", "a free GPU does not lift the quota")
        c.api.json("POST", f"/v1/jobs/{v1}/cancel", expect=200)
        wait_until(lambda: c.api.job(v2)["state"] == "running", 30, "v2 runs once v1 is done")
        c.api.json("POST", f"/v1/jobs/{v2}/cancel")
