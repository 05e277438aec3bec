"""Issue 15, "Work thrown away": under the default policy (glas) two equal
8-GPU gangs without checkpoints on 8 GPUs used to preempt each other over and
over, restarting from nothing, and 1-GPU jobs preempted them too. With the
master's defaults (--preempt-min-run 2m, --preempt-max-lost 10m) a running
job that has not checkpointed is preempted only by a higher priority, so
each job runs once; and a preemption's reason says its real cause and the
work it cost."""
import re

from harness import check, check_eq, cluster, spec, wait_until

SH = "/bin/sh"


def gang(name, seconds, **extra):
    # two 4-GPU workers: a gang of 8 GPUs, no checkpoint
    return spec([SH, "-c", f"sleep {seconds}"], name=name, replicas=2, gpus=4, **extra)


def preempt_reasons(job):
    return [e["reason"]["message"] for e in job.get("events", [])
            if (e.get("reason") or {}).get("code") == "preempted"]


def test_equal_jobs_without_checkpoints_run_once():
    with cluster("thrash") as c:
        c.start_master()
        c.start_agent("a", gpus="sim:8")
        # 12 s at 8 GPUs is 96 GPU-s: past glas's first level (64), where the
        # old master handed the GPUs to the other gang
        st, a = c.api.submit(gang("a", 12))
        check_eq(st, 201, "submit a")
        wait_until(lambda: c.api.job(a["id"])["state"] == "running", 30, "a running")
        st, b = c.api.submit(gang("b", 12))
        check_eq(st, 201, "submit b")
        small = [c.api.submit(spec([SH, "-c", "sleep 2"], name=f"s{i}", gpus=1))[1] for i in range(3)]
        ids = [a["id"], b["id"]] + [s["id"] for s in small]
        # while a runs past 64 GPU-s, the others wait, and say why truly
        wait_until(lambda: c.api.job(a["id"])["attained_gpu_seconds"] >= 80, 30, "a past its first level")
        for jid in ids[1:]:
            j = c.api.job(jid)
            check_eq(j["state"], "queued", f"job {jid} waits while a runs")
            check_eq(j["reason"]["code"], "insufficient_gpus", f"job {jid} waits for GPUs: {j['reason']}")
        check_eq(c.api.job(a["id"])["preemptions"], 0, "a keeps its GPUs")
        for jid in ids:
            done = c.api.wait_job(jid, timeout=120)
            check_eq(done["state"], "succeeded", f"job {jid} ran to the end: {done['reason']}")
            j = c.api.job(jid)
            check_eq(j["attempt"], 0, f"job {jid} ran once")
            check_eq(j["preemptions"], 0, f"job {jid} was never preempted")
            check_eq(preempt_reasons(j), [], f"job {jid} has no preemption in its history")


def test_preemption_reasons_are_true():
    """A higher priority still preempts an unprotected job; the reason names
    the priority and the work lost, with and without a checkpoint."""
    with cluster("thrash-reasons") as c:
        c.start_master()
        c.start_agent("a", gpus="sim:8")
        # no checkpoint
        st, low = c.api.submit(gang("low", 60, priority="low"))
        wait_until(lambda: c.api.job(low["id"])["state"] == "running", 30, "low running")
        wait_until(lambda: c.api.job(low["id"])["attained_gpu_seconds"] >= 16, 30, "low ran 2 s")
        st, high = c.api.submit(gang("high", 1, priority="high"))
        check_eq(c.api.wait_job(high["id"], timeout=60)["state"], "succeeded", "high ran")
        wait_until(lambda: preempt_reasons(c.api.job(low["id"])), 30, "low's preemption noted")
        msg = preempt_reasons(c.api.job(low["id"]))[0]
        check(re.fullmatch(rf"preempted by job {high['id']} of priority high; "
                           r"lost \d+ s of work: no checkpoint since it started", msg), msg)
        lost = int(re.search(r"lost (\d+) s", msg).group(1))
        check(1 <= lost <= 30, f"it ran about that long (2 s, whole seconds down): {msg}")
        c.api.json("POST", f"/v1/jobs/{low['id']}/cancel", expect=200)
        # a checkpoint (the task says so on its output), then more work
        ck = "echo '@yard {\"checkpoint\": 1}'; sleep 60"
        st, low2 = c.api.submit(spec([SH, "-c", ck], name="low2", gpus=8, priority="low"))
        wait_until(lambda: c.api.job(low2["id"])["state"] == "running", 30, "low2 running")
        wait_until(lambda: c.api.job(low2["id"])["attained_gpu_seconds"] >= 24, 30, "low2 ran 3 s")
        st, high2 = c.api.submit(gang("high2", 1, priority="high"))
        check_eq(c.api.wait_job(high2["id"], timeout=60)["state"], "succeeded", "high2 ran")
        wait_until(lambda: preempt_reasons(c.api.job(low2["id"])), 30, "low2's preemption noted")
        msg = preempt_reasons(c.api.job(low2["id"]))[0]
        check(re.fullmatch(rf"preempted by job {high2['id']} of priority high; resumes from its "
                           r"checkpoint of \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, \d+ s of work lost", msg), msg)
        c.api.json("POST", f"/v1/jobs/{low2['id']}/cancel", expect=200)
