"""The checkpoint dir as a checkpoint signal: a task that writes a file into
$YARD_CHECKPOINT_DIR, without any `@yard {"checkpoint": N}` line, has
checkpointed at the file's mtime (src/agent/ckptwatch.h); the master's
preemption reason says so. The next attempt, resumed on another node from
that checkpoint (restored into the dir before it starts), has not
checkpointed until it writes something itself."""
import datetime
import os
import re

from harness import check, check_eq, cluster, spec, wait_until

# Writes its checkpoint as a temp name renamed when complete, unless the
# dir already holds one (a resumed attempt), then works on.
TASK = ('D="$YARD_CHECKPOINT_DIR"; '
        '[ -e "$D/step/ck" ] || { mkdir -p "$D/step" && sleep 1 && printf 1 > "$D/step/ck.tmp" && '
        'mv "$D/step/ck.tmp" "$D/step/ck"; }; sleep 300')


def preempt_reasons(job):
    return [e["reason"]["message"] for e in job.get("events", [])
            if (e.get("reason") or {}).get("code") == "preempted"]


def utc(mtime):
    return datetime.datetime.fromtimestamp(int(mtime), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def task_nodes(job):
    """The nodes of the job's tasks of its current attempt."""
    return [t["node"] for t in job["tasks"] if t["attempt"] == job["attempt"]]


def test_dir_change_is_a_checkpoint_and_a_restore_is_not():
    with cluster("ckptdir") as c:
        c.start_master()
        c.start_agent("a", gpus="sim:8")
        st, low = c.api.submit(spec(["/bin/sh", "-c", TASK], name="low", gpus=8, priority="low"))
        check_eq(st, 201, "submit low")
        jid = low["id"]
        ck_a = os.path.join(c.dir, "agent-a", "checkpoints", str(jid), "step", "ck")
        wait_until(lambda: os.path.exists(ck_a), 30, "low wrote its checkpoint on a")
        # settled for 1 s, seen by a walk (once a second), reported: give it 4 s
        wait_until(lambda: c.api.job(jid)["attained_gpu_seconds"] >= 8 * 6, 30, "low ran 6 s")
        check_eq(c.api.job(jid)["state"], "running", "low runs")
        # the job document shows it, to the microsecond the agent saw
        at = c.api.job(jid)["checkpoint_at"]
        check(at is not None and int(at // 1000000) == int(os.stat(ck_a).st_mtime),
              f"checkpoint_at {at} is the file's mtime {os.stat(ck_a).st_mtime}")
        st, high = c.api.submit(spec(["/bin/sh", "-c", "sleep 300"], name="high", gpus=8, priority="high"))
        check_eq(st, 201, "submit high")
        wait_until(lambda: preempt_reasons(c.api.job(jid)), 30, "low's preemption noted")
        msg = preempt_reasons(c.api.job(jid))[0]
        check(re.fullmatch(rf"preempted by job {high['id']} of priority high; resumes from its "
                           rf"checkpoint of {re.escape(utc(os.stat(ck_a).st_mtime))}, \d+ s of work lost",
                           msg), f"the checkpoint is the file's mtime: {msg}")
        wait_until(lambda: c.api.job(high["id"])["state"] == "running", 30, "high running on a")

        # the next attempt goes to b, which restores the checkpoint into its dir
        c.start_agent("b", gpus="sim:8")
        wait_until(lambda: c.api.job(jid)["state"] == "running", 60, "low resumed")
        j = c.api.job(jid)
        check_eq(j["attempt"], 1, "low's second attempt")
        check_eq(task_nodes(j), ["b"], "low's second attempt runs on b")
        ck_b = os.path.join(c.dir, "agent-b", "checkpoints", str(jid), "step", "ck")
        check(os.path.exists(ck_b), "b restored low's checkpoint")
        # restored after the attempt was placed: a watcher that took any
        # file's mtime would call it a checkpoint of this attempt
        check(os.stat(ck_b).st_mtime > os.stat(ck_a).st_mtime,
              "the restored file is newer than the original (else this test proves nothing)")
        c.api.json("POST", f"/v1/jobs/{high['id']}/cancel", expect=200)
        c.api.json("POST", "/v1/nodes/a/drain", expect=200)
        base = c.api.job(jid)["attained_gpu_seconds"]
        wait_until(lambda: c.api.job(jid)["attained_gpu_seconds"] >= base + 8 * 4, 30,
                   "low's second attempt ran 4 s")
        st, high2 = c.api.submit(spec(["/bin/sh", "-c", "sleep 1"], name="high2", gpus=8, priority="high"))
        check_eq(st, 201, "submit high2")
        wait_until(lambda: len(preempt_reasons(c.api.job(jid))) >= 2, 30, "low's second preemption noted")
        msg = preempt_reasons(c.api.job(jid))[1]
        check(re.fullmatch(rf"preempted by job {high2['id']} of priority high; "
                           r"lost \d+ s of work: no checkpoint since it started", msg),
              f"the restored checkpoint is not a new one: {msg}")
        for j in (jid, high2["id"]):
            c.api.json("POST", f"/v1/jobs/{j}/cancel")
