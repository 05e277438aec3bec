"""Control after submit on a real master and agent: hold and release, a
new priority (its owner yes, another user no), rerun from the old spec and
code, and pipelines of jobs that start after others (a spec's `after`)."""
import json
import os
import time

from harness import check, check_eq, cluster, spec, wait_until

SH = "/bin/sh"


def test_hold_keeps_job_queued_until_release():
    with cluster("hold") as c:
        c.start_master()
        # no node yet: the job stays queued while it is held
        _, held = c.api.submit(spec([SH, "-c", "echo held-ran"], name="held"))
        r = c.cli("hold", str(held["id"]), check_rc=0)
        check_eq(r.stdout.decode().strip(), f"{held['id']} held", "yard hold's output")
        st, doc = c.api.json("POST", f"/v1/jobs/{held['id']}/hold")
        check_eq(st, 409, f"holding a held job again: {doc}")
        check("already held by admin" in doc["error"]["message"], f"the conflict names the holder: {doc}")
        c.start_agent("n1", gpus="sim:1")
        # capacity is free: another job runs through while the held one waits
        _, other = c.api.submit(spec([SH, "-c", "true"], name="other"))
        check_eq(c.api.wait_job(other["id"])["state"], "succeeded", "the job that is not held")
        j = c.api.job(held["id"])
        check_eq(j["state"], "queued", "the held job's state while capacity is free")
        check_eq(j["started_at"], None, "the held job never started")
        check_eq(j["reason"]["code"], "held", f"the held job's reason: {j['reason']}")
        check_eq(j["reason"]["message"], "held by admin", "the held job's reason message")
        q = {x["id"]: x for x in c.api.json("GET", "/v1/queue", expect=200)[1]["queue"]}
        check_eq(q[held["id"]]["reason"], {"code": "held", "message": "held by admin"}, "the held job in the queue")
        # the hold is kept in the store: a restarted master still holds it
        c.master.stop()
        c.start_master()  # the agent comes back to it
        _, other2 = c.api.submit(spec([SH, "-c", "true"], name="other2"))
        check_eq(c.api.wait_job(other2["id"])["state"], "succeeded", "a job after the restart")
        j = c.api.job(held["id"])
        check_eq((j["state"], j["reason"]["code"]), ("queued", "held"), "the hold after a master restart")
        r = c.cli("release", str(held["id"]), check_rc=0)
        check_eq(r.stdout.decode().strip(), f"{held['id']} released", "yard release's output")
        check_eq(c.api.wait_job(held["id"])["state"], "succeeded", "the released job runs")
        check_eq(c.api.log(held["id"]), b"held-ran\n", "the released job's output")
        # only a queued job is held; release of one not held is a conflict
        st, doc = c.api.json("POST", f"/v1/jobs/{held['id']}/hold")
        check_eq(st, 409, f"holding a finished job: {doc}")
        check("is succeeded: only a queued job can be held" in doc["error"]["message"],
              f"the conflict names the state: {doc}")
        r = c.cli("release", str(held["id"]), check_rc=None)
        check(r.returncode != 0 and b"is not held" in r.stderr, f"release of a job not held: {r.stderr!r}")


def test_priority_update_owner_and_team_admin_yes_others_no():
    with cluster("prio") as c:
        c.start_master()
        alice, bob = c.user_token("alice"), c.user_token("bob")
        st, job = c.api.submit(spec([SH, "-c", "true"], name="p"), token=alice)
        check_eq(st, 201, f"alice submits: {job}")
        check_eq(job["priority"], "normal", "the priority at submit")
        r = c.cli("update", str(job["id"]), "--priority", "high", "--output", "json",
                  token=alice, check_rc=0)
        check_eq(json.loads(r.stdout)["priority"], "high", "the priority after the owner's update")
        check_eq(c.api.job(job["id"])["priority"], "high", "the job's priority as listed")
        st, doc = c.api.json("POST", f"/v1/jobs/{job['id']}", {"priority": "low"}, token=bob)
        check_eq(st, 403, f"bob changes alice's job: {doc}")
        check_eq(c.api.job(job["id"])["priority"], "high", "the priority after bob's refusal")
        st, doc = c.api.json("POST", f"/v1/jobs/{job['id']}", {"priority": "urgent"}, token=alice)
        check_eq(st, 400, f"a bad priority: {doc}")
        check("priority" in doc["error"]["message"] and "urgent" in doc["error"]["message"],
              f"the error names field and value: {doc}")
        r = c.cli("update", str(job["id"]), "--priority", "urgent", token=alice, check_rc=None)
        check(r.returncode != 0 and b"urgent" in r.stderr, f"yard update with a bad priority: {r.stderr!r}")
        # a team's job: a member may see it but not change its priority; the team's admin may
        def token(user, **extra):
            return c.api.json("POST", "/v1/tokens", {"user": user, "team": "vision", **extra}, expect=201)[1]
        erin, carol = token("erin")["token"], token("carol")["token"]
        lead = token("dave", team_admin=True)
        check(lead["team_admin"], f"the team admin's token says so: {lead}")
        _, tj = c.api.submit(spec([SH, "-c", "true"], name="team-job"), token=erin)
        st, doc = c.api.json("POST", f"/v1/jobs/{tj['id']}", {"priority": "high"}, token=carol)
        check_eq(st, 403, f"a team member changes a teammate's priority: {doc}")
        check("an admin of team 'vision'" in doc["error"]["message"], f"the refusal says who may: {doc}")
        st, doc = c.api.json("GET", f"/v1/jobs/{tj['id']}/logs?task=worker/0", token=carol)
        check(st == 200, f"while she may see its logs: {st} {doc}")
        r = c.cli("update", str(tj["id"]), "--priority", "high", "--output", "json", token=lead["token"],
                  check_rc=0)
        check_eq(json.loads(r.stdout)["priority"], "high", "the team admin changes it")
        st, doc = c.api.json("POST", "/v1/tokens", {"user": "x", "team_admin": True})
        check_eq((st, doc["error"].get("field")), (400, "team_admin"), f"a team admin of no team: {doc}")
        r = c.cli("token", "ls", check_rc=0)
        check(any("dave" in ln and "team-admin" in ln for ln in r.stdout.decode().splitlines()),
              f"yard token ls marks the team admin: {r.stdout!r}")
        # and the scheduler sees it: a low job queued behind... the job now runs
        c.start_agent("n1", gpus="sim:1")
        check_eq(c.api.wait_job(job["id"])["state"], "succeeded", "the updated job runs")


RUN = "echo \"count=$YARD_PARAM_COUNT\"; cat data.txt\n"
JOB = """\
name: rerun-me
command: ["/bin/sh", "run.sh"]
params:
  count: 1
tasks:
  worker: {cpus: 0.1}
"""


def test_rerun_same_spec_and_code_and_set():
    with cluster("rerun") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:1")
        proj = os.path.join(c.dir, "proj")
        os.makedirs(proj)
        for name, text in {"job.yaml": JOB, "run.sh": RUN, "data.txt": "payload\n"}.items():
            with open(os.path.join(proj, name), "w") as f:
                f.write(text)
        first = c.cli("submit", os.path.join(proj, "job.yaml"), check_rc=0).stdout.decode().strip()
        check_eq(c.api.wait_job(first)["state"], "succeeded", "the first job")
        # the project changes on disk: a rerun still runs the old code
        with open(os.path.join(proj, "data.txt"), "w") as f:
            f.write("changed\n")
        again = c.cli("rerun", first, check_rc=0).stdout.decode().strip()
        check(again.isdigit() and again != first, f"rerun prints a new job id: {again!r}")
        a, b = c.api.wait_job(first), c.api.wait_job(again)
        check_eq(b["state"], "succeeded", "the rerun job")
        check_eq(b["code"], a["code"], "the rerun's code digest")
        check_eq(b["spec"], a["spec"], "the rerun's spec")
        check_eq(c.api.log(again), b"count=1\npayload\n", "the rerun's output (old code)")
        third = c.cli("rerun", first, "--set", "params.count=5", check_rc=0).stdout.decode().strip()
        t = c.api.wait_job(third)
        check_eq(t["state"], "succeeded", "the rerun with --set")
        check_eq(t["spec"]["params"]["count"], 5, "the field --set changed")
        check_eq(c.api.log(third), b"count=5\npayload\n", "the output of the rerun with --set")
        r = c.cli("rerun", first, "--set", "params", check_rc=2)
        check(b"PATH=VALUE" in r.stderr, f"a --set that is not PATH=VALUE: {r.stderr!r}")


def test_pipeline_runs_in_order():
    with cluster("pipe") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        _, a = c.api.submit(spec([SH, "-c", "sleep 1"], name="a"))
        _, b = c.api.submit(spec([SH, "-c", "sleep 0.5"], name="b", after=[a["id"]]))
        _, cc = c.api.submit(spec([SH, "-c", "true"], name="c", after=[b["id"]]))
        j = c.api.job(b["id"])
        if j["state"] == "queued":
            check_eq(j["reason"]["code"], "dependency", f"b's reason while a runs: {j['reason']}")
            check_eq(j["reason"]["message"], f"waits for job {a['id']} to succeed", "b's reason message")
        ja, jb, jc = (c.api.wait_job(x["id"]) for x in (a, b, cc))
        for x in (ja, jb, jc):
            check_eq(x["state"], "succeeded", f"pipeline step {x['name']}")
        check(ja["finished_at"] <= jb["started_at"], f"b starts after a ended: {ja['finished_at']} {jb['started_at']}")
        check(jb["finished_at"] <= jc["started_at"], f"c starts after b ended: {jb['finished_at']} {jc['started_at']}")


def test_pipeline_first_step_fails():
    with cluster("pipefail") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        _, a = c.api.submit(spec([SH, "-c", "sleep 0.5; exit 1"], name="a"))
        _, b = c.api.submit(spec([SH, "-c", "true"], name="b", after=[a["id"]]))
        _, cc = c.api.submit(spec([SH, "-c", "true"], name="c", after=[b["id"]]))
        # d runs whatever a's outcome
        _, d = c.api.submit(spec([SH, "-c", "true"], name="d", after={"any": [a["id"]]}))
        check_eq(c.api.wait_job(a["id"])["state"], "failed", "the first step")
        jb, jc = c.api.wait_job(b["id"]), c.api.wait_job(cc["id"])
        for x, dep in ((jb, a["id"]), (jc, b["id"])):
            check_eq(x["state"], "failed", f"step {x['name']} after a failed one")
            check_eq(x["reason"]["code"], "dependency", f"step {x['name']}'s reason code")
            check_eq(x["reason"]["message"], f"dependency job {dep} failed", f"step {x['name']}'s reason")
            check_eq(x["started_at"], None, f"step {x['name']} never started")
            check(all(t["state"] != "running" and t.get("started_at") is None for t in x["tasks"]),
                  f"step {x['name']}'s tasks never ran: {x['tasks']}")
        check_eq(c.api.wait_job(d["id"])["state"], "succeeded", "the after-any step")


def test_pipeline_step_reads_the_outputs_of_the_one_before():
    # a step reads what the step before left, pinned once that one ends
    produce = 'sleep 1; echo "epoch 3" > "$YARD_OUTPUT_DIR/model.txt"'
    consume = 'set -e; test "$(cat "$YARD_DATA_DIR/prev/worker-0/model.txt")" = "epoch 3"'
    with cluster("pipedata") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        _, a = c.api.submit(spec([SH, "-c", produce], name="train"))
        src = f"yard-job://{a['id']}/outputs"
        st, doc = c.api.submit(spec([SH, "-c", consume], name="early", data=[{"source": src, "mount": "prev"}]))
        check_eq(st, 400, f"reading a running job's outputs without after: {doc}")
        check(doc["error"].get("field") == "data[0].source" and "after" in doc["error"]["message"],
              f"the error names the field and says to list it in after: {doc}")
        st, b = c.api.submit(spec([SH, "-c", consume], name="eval", after=[a["id"]],
                                  data=[{"source": src, "mount": "prev"}]))
        check_eq(st, 201, f"the step after, reading its outputs: {b}")
        jb = c.api.wait_job(b["id"])
        check_eq(jb["state"], "succeeded", f"the step read the outputs of the one before: {jb}")
        check(jb["data"][0].get("digest"), f"its data was pinned when train ended: {jb['data']}")
        # a step whose predecessor left nothing fails with that reason
        _, e = c.api.submit(spec([SH, "-c", "sleep 0.5"], name="empty"))
        _, f = c.api.submit(spec([SH, "-c", "true"], name="reader", after=[e["id"]],
                                 data=[{"source": f"yard-job://{e['id']}/outputs"}]))
        jf = c.api.wait_job(f["id"])
        check_eq((jf["state"], jf["reason"]["code"]), ("failed", "dependency"), f"reader of nothing: {jf}")
        check_eq(jf["reason"]["message"], f"data[0]: job {e['id']} left no outputs", "its reason")
        st, doc = c.api.submit(spec([SH, "-c", "true"], name="late", data=[{"source": f"yard-job://{e['id']}/outputs"}]))
        check_eq(st, 400, f"reading a final job that left nothing: {doc}")
        check(f"job {e['id']} left no outputs" in doc["error"]["message"], f"the reason: {doc}")


def test_what_a_stopped_gang_leaves_is_read_once_it_has_stopped():
    # worker/0 fails at once: the job is final while worker/1, stopped,
    # takes 3 s to write its model. What the job left is read only once
    # worker/1 has handed it in: by a reader submitted meanwhile (with
    # after.any, and without after at all), and by yard download.
    run = ('if [ "$YARD_TASK_INDEX" = 0 ]; then sleep 0.5; exit 3; fi; '
           'trap \'sleep 3; echo last > "$YARD_OUTPUT_DIR/model.txt"; exit 0\' TERM; '
           'while :; do sleep 0.1; done')
    read = 'set -e; test "$(cat "$YARD_DATA_DIR/prev/worker-1/model.txt")" = last'
    with cluster("settle") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        _, a = c.api.submit(spec([SH, "-c", run], name="gang", replicas=2))
        ja = c.api.wait_job(a["id"])
        check_eq(ja["state"], "failed", f"the gang whose worker/0 failed: {ja}")
        states = {f"{t['role']}/{t['index']}": t["state"] for t in ja["tasks"]}
        check_eq(states["worker/1"], "stopping", f"worker/1 still stopping as the job ends: {ja['tasks']}")
        src = [{"source": f"yard-job://{a['id']}/outputs", "mount": "prev"}]
        st, b = c.api.submit(spec([SH, "-c", read], name="any", after={"any": [a["id"]]}, data=src))
        check_eq(st, 201, f"a reader after any end: {b}")
        st, d = c.api.submit(spec([SH, "-c", read], name="late", data=src))
        check_eq(st, 201, f"a reader of a final job still stopping, without after: {d}")
        jd = c.api.job(d["id"])
        check_eq((jd["state"], jd["data"][0].get("digest")), ("queued", None),
                 f"the reader waits, its data not pinned yet: {jd}")
        r = c.cli("download", str(a["id"]), os.path.join(c.dir, "out"), check_rc=0)
        check(b"waiting for 1 stopping task" in r.stderr, f"yard download says what it waits for: {r.stderr!r}")
        with open(os.path.join(c.dir, "out", "worker-1", "model.txt")) as f:
            check_eq(f.read(), "last\n", "yard download has what worker/1 wrote as it stopped")
        for x in (b, d):
            jx = c.api.wait_job(x["id"])
            check_eq(jx["state"], "succeeded", f"reader {x['id']} read what worker/1 left: {jx}")


def test_after_unknown_or_invisible_job_refused():
    with cluster("afterbad") as c:
        c.start_master()
        st, doc = c.api.submit(spec([SH, "-c", "true"], name="x", after=[9999]))
        check_eq(st, 400, f"after an unknown job: {doc}")
        check("after[0]" in doc["error"]["message"] and "9999" in doc["error"]["message"],
              f"the error names the field and the id: {doc}")
        alice, bob = c.user_token("alice"), c.user_token("bob")
        _, mine = c.api.submit(spec([SH, "-c", "true"], name="m"), token=alice)
        st, doc = c.api.submit(spec([SH, "-c", "true"], name="y", after=[mine["id"]]), token=bob)
        check_eq(st, 400, f"after a job bob may not see: {doc}")
        check(str(mine["id"]) in doc["error"]["message"], f"the error names the id: {doc}")
        st, doc = c.api.submit(spec([SH, "-c", "true"], name="z", after=[mine["id"]]), token=alice)
        check_eq(st, 201, f"after one's own job: {doc}")


def test_cancel_and_wait_take_many_ids():
    with cluster("many") as c:
        c.start_master()
        # no node: both stay queued until cancelled
        ids = [str(c.api.submit(spec([SH, "-c", "true"], name=f"q{i}"))[1]["id"]) for i in range(2)]
        r = c.cli("cancel", *ids, check_rc=0)
        check_eq(r.stdout.decode().splitlines(), [f"{i} cancelled" for i in ids], "yard cancel of two jobs")
        for i in ids:
            check_eq(c.api.job(i)["state"], "cancelled", f"job {i} after yard cancel")
        r = c.cli("wait", *ids, check_rc=1)
        check_eq(r.stdout.decode().splitlines(), [f"{i} cancelled" for i in ids], "yard wait of two cancelled jobs")
        c.start_agent("n1", gpus="sim:1")
        ok = [str(c.api.submit(spec([SH, "-c", "true"], name=f"ok{i}"))[1]["id"]) for i in range(2)]
        r = c.cli("wait", *ok, "--timeout", "60", check_rc=0)
        check_eq(r.stdout.decode().splitlines(), [f"{i} succeeded" for i in ok], "yard wait of two good jobs")
        r = c.cli("cancel", ok[0], "x", check_rc=2)
        check(b"'x' is not a job id" in r.stderr, f"a bad id among many: {r.stderr!r}")
