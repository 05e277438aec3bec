"""Every attempt of a job: a gang of two tasks fails once and restarts; its
logs are there for each attempt (yard logs --attempt, the API's attempt
parameter), every task's lines come prefixed with [ROLE/INDEX], and
following goes on across the restart with a marker line, in `yard logs -f`
as in `yard submit --follow`."""
import json
import os
import re

from harness import check, check_eq, cluster

# worker/1 crashes in attempt 0 (worker/0 is stopped with it); attempt 1 ends well
RUN = """\
echo "hello from $YARD_ROLE/$YARD_TASK_INDEX attempt $YARD_RESTART_COUNT"
echo "err from $YARD_ROLE/$YARD_TASK_INDEX attempt $YARD_RESTART_COUNT" >&2
if [ "$YARD_RESTART_COUNT" = 0 ]; then
  if [ "$YARD_TASK_INDEX" = 1 ]; then sleep 1; echo "crash in attempt 0"; exit 3; fi
  exec sleep 60
fi
sleep 0.5
echo "done $YARD_ROLE/$YARD_TASK_INDEX"
"""

SPEC = """\
name: twice
command: [/bin/sh, run.sh]
restart: {max: 1}
tasks:
  worker: {replicas: 2, cpus: 0.1}
"""

MARKER = "--- attempt 1 (after: task_failed: worker/1 exited with status 3) ---\n"


def lines(b):
    return b.decode().splitlines()


def write_project(root):
    os.makedirs(root)
    for name, text in (("job.yaml", SPEC), ("run.sh", RUN)):
        with open(os.path.join(root, name), "w") as f:
            f.write(text)


def check_both_attempts(out, err, what):
    """out, err: the followed stdout and stderr of the whole job."""
    o, e = lines(out), lines(err)
    for a in (0, 1):
        for i in (0, 1):
            check(f"[worker/{i}] hello from worker/{i} attempt {a}" in o, f"{what}: attempt {a} of worker/{i}: {o}")
            check(f"[worker/{i}] err from worker/{i} attempt {a}" in e, f"{what}: stderr of worker/{i} attempt {a}: {e}")
    check("[worker/1] crash in attempt 0" in o, f"{what}: the crash line: {o}")
    check("[worker/0] done worker/0" in o and "[worker/1] done worker/1" in o, f"{what}: the end: {o}")
    check(MARKER.rstrip("\n") in e, f"{what}: the marker of attempt 1: {e}")
    m = e.index(MARKER.rstrip("\n"))
    check(all("attempt 0" in x for x in e[:m]) and all("attempt 1" in x for x in e[m + 1:]),
          f"{what}: attempt 0's lines before the marker, attempt 1's after: {e}")
    # stdout has no marker: it is only the tasks' lines
    check(all(re.match(r"\[worker/[01]\] ", x) for x in o), f"{what}: every line prefixed: {o}")


def test_logs_of_every_attempt():
    with cluster("attempts") as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        proj = os.path.join(c.dir, "proj")
        write_project(proj)
        jid = c.cli("submit", os.path.join(proj, "job.yaml"), check_rc=0).stdout.decode().strip()

        # followed live from the first attempt: on through the restart until the job ends
        r = c.cli("logs", "-f", "--attempt", "0", jid, check_rc=0, timeout=90)
        check_both_attempts(r.stdout, r.stderr, "logs -f --attempt 0")
        job = c.api.job(jid)
        check_eq((job["state"], job["attempt"]), ("succeeded", 1), "the job after its restart")
        check_eq(sorted((t["attempt"], t["role"], t["index"]) for t in job["tasks"]),
                 [(0, "worker", 0), (0, "worker", 1), (1, "worker", 0), (1, "worker", 1)],
                 "the job document lists the tasks of each attempt")

        # the first attempt, every task: the crash line is there
        r = c.cli("logs", jid, "--attempt", "0", check_rc=0)
        check_eq(sorted(lines(r.stdout)), ["[worker/0] hello from worker/0 attempt 0",
                                           "[worker/1] crash in attempt 0",
                                           "[worker/1] hello from worker/1 attempt 0"],
                 "logs --attempt 0")
        check_eq(sorted(lines(r.stderr)), ["[worker/0] err from worker/0 attempt 0",
                                           "[worker/1] err from worker/1 attempt 0"],
                 "logs --attempt 0, stderr")
        # the latest by default, every task
        r = c.cli("logs", jid, "--stream", "stdout", check_rc=0)
        check_eq(sorted(lines(r.stdout)), ["[worker/0] done worker/0", "[worker/0] hello from worker/0 attempt 1",
                                           "[worker/1] done worker/1", "[worker/1] hello from worker/1 attempt 1"],
                 "logs of the latest attempt")
        check_eq(r.stderr, b"", "logs --stream stdout writes no stderr")
        # one task: the bytes as stored, unless --prefix
        r = c.cli("logs", jid, "--attempt", "0", "--task", "worker/1", "--stream", "stdout", check_rc=0)
        check_eq(r.stdout, b"hello from worker/1 attempt 0\ncrash in attempt 0\n", "one task of attempt 0")
        r = c.cli("logs", jid, "--attempt", "0", "--task", "worker/1", "--stream", "stdout", "--prefix",
                  check_rc=0)
        check_eq(r.stdout, b"[worker/1] hello from worker/1 attempt 0\n[worker/1] crash in attempt 0\n",
                 "one task with --prefix")
        # as JSON: each task of the attempt
        r = c.cli("logs", jid, "--attempt", "0", "--output", "json", check_rc=0)
        doc = json.loads(r.stdout)
        check_eq((doc["attempt"], [t["task"] for t in doc["tasks"]]), (0, ["worker/0", "worker/1"]),
                 "logs --output json: the tasks of attempt 0")
        check_eq(doc["tasks"][1]["stdout"], "hello from worker/1 attempt 0\ncrash in attempt 0\n",
                 "logs --output json: worker/1's stdout")
        # attempts that are not there, and ones that are no number
        r = c.cli("logs", jid, "--attempt", "2")
        check_eq(r.returncode, 1, "exit status of logs --attempt 2")
        check(b"--attempt 2: job " + jid.encode() + b" has attempts 0 to 1" in r.stderr, f"its message: {r.stderr!r}")
        r = c.cli("logs", jid, "--attempt", "x")
        check_eq(r.returncode, 2, "exit status of logs --attempt x")

        # the API: attempt=N, the latest by default, 400 naming the parameter and value
        status, data, hdrs = c.api.request("GET", f"/v1/jobs/{jid}/logs?task=worker/1&attempt=0")
        check_eq((status, data), (200, b"hello from worker/1 attempt 0\ncrash in attempt 0\n"), "GET logs?attempt=0")
        check_eq(hdrs.get("X-Yard-Attempt"), "0", "X-Yard-Attempt of attempt 0")
        status, data, hdrs = c.api.request("GET", f"/v1/jobs/{jid}/logs?task=worker/1")
        check_eq((status, data), (200, b"hello from worker/1 attempt 1\ndone worker/1\n"), "GET logs, the latest")
        check_eq(hdrs.get("X-Yard-Attempt"), "1", "X-Yard-Attempt of the latest")
        for bad in ("2", "-1", "x" * 300):
            status, doc = c.api.json("GET", f"/v1/jobs/{jid}/logs?attempt={bad}")
            check_eq(status, 400, f"GET logs?attempt={bad[:10]}")
            msg = doc["error"]["message"]
            check(msg.startswith(f"attempt: expected an attempt of job {jid} from 0 to 1, got '"),
                  f"the message names the parameter: {msg!r}")
            check(len(msg) < 200 and bad[:64] in msg, f"the message quotes the value, bounded: {msg!r}")

        # submit --follow goes on across the restart too, and exits 0 once it succeeds
        r = c.cli("submit", "--follow", os.path.join(proj, "job.yaml"), check_rc=0, timeout=90)
        out = r.stdout.split(b"\n", 1)
        check(re.fullmatch(rb"\d+", out[0]), f"submit --follow prints the id first: {r.stdout!r}")
        check_both_attempts(out[1], r.stderr, "submit --follow")
