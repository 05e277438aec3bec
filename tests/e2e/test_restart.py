"""Crashes: an agent SIGKILLed mid-job and a master SIGKILLed under a
submission load. Tasks keep running, logs stay complete, nothing
acknowledged is lost."""
import os
import re
import signal
import time

from harness import SubmitLoad, check, check_eq, cluster, pid_alive, spec, wait_until

COUNTER = "echo pid=$$; i=0; while [ $i -lt {n} ]; do i=$((i+1)); echo line $i; sleep {d}; done"


def expected_counter(n):
    return "".join(f"line {i}\n" for i in range(1, n + 1))


def task_pid(api, jid):
    first = wait_until(lambda: api.log(jid).split(b"\n", 1)[0] if b"\n" in api.log(jid) else None,
                       30, f"job {jid} to print its pid")
    return int(first.decode().split("=")[1])


def test_agent_sigkill_and_restart():
    with cluster("agentkill") as c:
        c.start_master()
        a = c.start_agent("n1", gpus="sim:1")
        _, job = c.api.submit(spec(["/bin/sh", "-c", COUNTER.format(n=80, d=0.05)], name="survivor"))
        jid = job["id"]
        # one that ends, with a status and output of its own, while no agent watches
        _, short = c.api.submit(spec(["/bin/sh", "-c", "go=$YARD_DATA_DIR/../go; while [ ! -e $go ]; do sleep 0.05; done; "
                                      "sleep 0.1; read x < $go; echo done $x; exit 7"],
                                     name="short"))
        pid = task_pid(c.api, jid)
        wait_until(lambda: c.api.log(jid).count(b"\n") >= 10, 30, "ten lines at the master")
        wait_until(lambda: c.api.job(short["id"])["state"] == "running", 30, "the short job running")
        a.kill(signal.SIGKILL)
        a.p.wait()
        short_dir = os.path.join(c.dir, "agent-n1", "tasks", str(c.api.job(short["id"])["tasks"][0]["id"]))
        with open(os.path.join(short_dir, "go"), "w") as f:
            f.write("meanwhile\n")
        wait_until(lambda: os.path.exists(os.path.join(short_dir, "exit.json")), 30,
                   "the short task to end while the agent is down")
        check(pid_alive(pid), "the task survives the agent's SIGKILL")
        # markers of long-finished tasks are pruned at start, recent ones kept
        fin = os.path.join(c.dir, "agent-n1", "finished")
        os.makedirs(fin, exist_ok=True)
        for name, age in (("999999", 8 * 86400), ("999998", 3600)):
            open(os.path.join(fin, name), "w").close()
            os.utime(os.path.join(fin, name), (time.time() - age, time.time() - age))
        c.start_agent("n1", gpus="sim:1")
        wait_until(lambda: not os.path.exists(os.path.join(fin, "999999")), 10,
                   "the week-old finished marker to be pruned")
        j = c.api.wait_job(short["id"], timeout=60)
        check(os.path.exists(os.path.join(fin, "999998")), "a recent finished marker is kept")
        check_eq((j["state"], j["exit_code"]), ("failed", 7), "what finished while the agent was down")
        check_eq(c.api.log(short["id"]).decode(), "done meanwhile\n", "its log")
        j = c.api.wait_job(jid, timeout=60)
        check_eq(j["state"], "succeeded", "state of the job whose agent was killed")
        check_eq(c.api.log(jid).decode(), f"pid={pid}\n" + expected_counter(80),
                 "log of the job whose agent was killed")


def test_master_sigkill_under_submissions():
    with cluster("masterkill") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        c.start_agent("n2", gpus="sim:2")
        _, long = c.api.submit(spec(["/bin/sh", "-c", COUNTER.format(n=100, d=0.05)], name="long"))
        pid = task_pid(c.api, long["id"])

        total = 200
        with SubmitLoad(c.api, total, clients=8) as load:
            wait_until(lambda: len(load.acked) >= 60, 60, "60 acknowledged submissions")
            c.master.kill(signal.SIGKILL)
            c.master.p.wait()
            killed_at = len(load.acked)
            check(pid_alive(pid), "the running task survives the master's SIGKILL")
            c.start_master()
            load.join(120)
        acked = load.acked
        check(killed_at < total, "the master was killed in the middle of the load")
        check(len(acked) >= total, f"all {total} submissions acknowledged in the end ({len(acked)})")
        for jid, name in acked.items():
            status, j = c.api.json("GET", f"/v1/jobs/{jid}")
            check_eq(status, 200, f"acknowledged job {jid} ({name}) after the restart")
            check_eq(j["name"], name, f"name of acknowledged job {jid}")
        for jid in acked:
            j = c.api.wait_job(jid, timeout=120)
            check_eq(j["state"], "succeeded", f"state of load job {jid} (reason {j['reason']}, tasks {j['tasks']})")
            check_eq(len(j["tasks"]), 1, f"tasks of load job {jid} (it ran once)")
        j = c.api.wait_job(long["id"], timeout=60)
        check_eq(j["state"], "succeeded", "state of the job running across the master restart")
        # the restarted master names each stored node as its agent comes back
        with open(c.master.logpath, errors="replace") as f:
            log = f.read()
        for n in ("n1", "n2"):
            check(re.search(rf"node {n} is back after \d+ ms", log), f"the master's log says {n} is back")
        check_eq(c.api.log(long["id"]).decode(), f"pid={pid}\n" + expected_counter(100),
                 "log of the job running across the master restart")


def test_lease_expiry_marks_node_lost_and_restarts_elsewhere():
    with cluster("lease", lease="2s") as c:
        c.start_master()
        a1 = c.start_agent("n1", gpus="sim:1")
        # one job that may restart, one that may not; both land on n1 (n2 is not up yet)
        _, again = c.api.submit(spec(["/bin/sh", "-c", "echo attempt $YARD_RESTART_COUNT on $YARD_NODE; "
                                      "[ $YARD_RESTART_COUNT = 1 ] || sleep 600"],
                                     name="again", cpus=0.5, restart={"max": 1}))
        _, once = c.api.submit(spec(["/bin/sleep", "600"], name="once", cpus=0.5))
        for jid in (again["id"], once["id"]):
            wait_until(lambda: c.api.job(jid)["state"] == "running", 30, f"job {jid} running on n1")
        a1.kill(signal.SIGSTOP)  # silent, as a hung or cut-off node is
        try:
            wait_until(lambda: [n["state"] for n in c.api.json("GET", "/v1/nodes")[1]["nodes"]] == ["lost"],
                       15, "n1 to be marked lost after its 2 s lease")
            j = c.api.wait_job(once["id"], timeout=15)
            check_eq(j["state"], "failed", "state of the job without restarts on the lost node")
            check_eq(j["reason"]["code"], "node_lost", "reason of the job on the lost node")
            check_eq(j["tasks"][-1]["state"], "lost", "its task")
            c.start_agent("n2", gpus="sim:1")
            j = c.api.wait_job(again["id"], timeout=30)
            check_eq(j["state"], "succeeded", "state of the restartable job")
            check_eq(j["attempt"], 1, "attempt of the restarted job")
            last = [t for t in j["tasks"] if t["attempt"] == 1]
            check_eq([t["node"] for t in last], ["n2"], "node of the restarted attempt")
            check_eq(c.api.log(again["id"]).decode(), "attempt 1 on n2\n", "log of the restarted attempt")
        finally:
            a1.kill(signal.SIGCONT)


def test_master_reboot_loses_unsynced_log():
    """The master acknowledges a log chunk once it is written, and syncs a
    task's log when it records the task's end. A machine that goes down in
    between comes back holding less than it acknowledged (here: the master
    is SIGKILLed and its log file cut short, as a reboot leaves a file whose
    last pages had not reached the disk). The agent, which keeps its copy
    until the end is recorded, is told what the master holds when it
    reports the end, and ships the rest again: the stored log is whole."""
    with cluster("loglost") as c:
        c.start_master()
        agent = c.start_agent("n1", gpus="none")
        _, job = c.api.submit(spec(["/bin/sh", "-c", "go=$YARD_DATA_DIR/../go; "
                                    + COUNTER.format(n=200, d=0) + "; "
                                    "while [ ! -e $go ]; do sleep 0.05; done"],
                                   name="loglost", cpus=0.5))
        jid = job["id"]
        pid = task_pid(c.api, jid)
        want = f"pid={pid}\n" + expected_counter(200)
        wait_until(lambda: c.api.log(jid).decode() == want, 30, "the whole log at the master")
        tid = c.api.job(jid)["tasks"][0]["id"]
        c.master.kill(signal.SIGKILL)
        c.master.p.wait()
        stored = os.path.join(c.data_dir, "logs", f"{tid}.stdout")
        with open(stored, "r+b") as f:
            f.truncate(100)
        c.start_master()
        open(os.path.join(c.dir, "agent-n1", "tasks", str(tid), "go"), "w").close()
        j = c.api.wait_job(jid, timeout=60)
        check_eq(j["state"], "succeeded", "state of the job whose log the master lost in part")
        check_eq(c.api.log(jid).decode(), want, "its log, shipped again")
        with open(agent.logpath, errors="replace") as f:
            log = f.read()
        check(f"the master lost logs of task {tid}" in log, "the agent says it ships them again")
