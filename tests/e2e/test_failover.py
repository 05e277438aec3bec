"""Standby masters on one PostgreSQL store (docs/faults.md, Losing the
master's machine): two masters and two agents, each in its own network
namespace (ha.py). The leader is SIGKILLed under load, its machine vanishes
(its link cut: connections time out), or it is paused past its lease; the
standby takes over, no task is stopped or restarted, nothing acknowledged is
lost, and the old leader, back, commits nothing.

Also here: a store written by the previous schema version (both backends)
is migrated and every job is still in it."""
import json
import os
import re
import signal
import sqlite3
import subprocess
import time

from ha import ha, health
from harness import ROOT, SubmitLoad, check, check_eq, cluster, spec, store_schema_version, wait_until
from pgserver import PgServer
from test_fence import TICK, lines as tick_lines

# run alone (run.py --jobs): its takeovers and fences are timed against leases of a second or two
SERIAL = True

# a job's log, line by line, long enough to run across a failover
COUNTER = "i=0; while [ $i -lt {n} ]; do i=$((i+1)); echo line $i; sleep {d}; done"
FIXTURES = os.path.join(ROOT, "tests", "e2e", "fixtures")


def expected_counter(n):
    return "".join(f"line {i}\n" for i in range(1, n + 1))


def start_counter(c, name, n, d=0.05):
    st, doc = c.api.submit(spec(["/bin/sh", "-c", COUNTER.format(n=n, d=d)], name=name))
    check_eq(st, 201, f"submit {name}: {doc}")
    jid = doc["id"]
    wait_until(lambda: c.api.log(jid).count(b"\n") >= 5, 60, f"{name} to print its first lines")
    return jid


def check_first_attempt(api, jid, n, what):
    """jid succeeded in one attempt with one task, its log complete."""
    j = api.wait_job(jid, timeout=120)
    check_eq(j["state"], "succeeded", f"state of {what} (reason {j.get('reason')})")
    check_eq(j["attempt"], 0, f"attempt of {what}: still its first")
    check_eq(len(j["tasks"]), 1, f"tasks of {what}: it ran once")
    check_eq(j.get("preemptions", 0), 0, f"preemptions of {what}")
    check_eq(api.log(jid).decode(), expected_counter(n), f"log of {what}, byte for byte")


def test_leader_sigkill_under_submissions():
    with ha("failkill") as c:
        c.start_masters()
        c.start_agents(gpus="sim:2")
        long = start_counter(c, "across", 120)
        total = 200
        with SubmitLoad(c.api, total, clients=8) as load:
            wait_until(lambda: len(load.acked) >= 40, 60, "40 acknowledged submissions")
            c.masters["m1"].kill(signal.SIGKILL)
            killed = time.monotonic()
            c.masters["m1"].p.wait()
            at_kill = len(load.acked)
            wait_until(lambda: len(load.acked) > at_kill, 30, "a submission acknowledged by the new leader")
            took = time.monotonic() - killed
            load.join(120)
        acked = load.acked
        check(at_kill < total, "the leader was killed in the middle of the load")
        check(len(acked) >= total, f"all {total} submissions acknowledged in the end ({len(acked)})")
        check(took < 10, f"the standby took over in {took:.2f} s")
        check_eq(c.leader(), "m2", "the master that leads")
        api = c.master_api("m2")
        load.check_stored(api, "on the new leader")
        for jid in acked:
            j = api.wait_job(jid, timeout=180)
            check_eq(j["state"], "succeeded", f"load job {jid} (reason {j.get('reason')})")
            check_eq(len(j["tasks"]), 1, f"tasks of load job {jid} (it ran once)")
        check_first_attempt(api, long, 120, "the job running across the failover")
        log = c.master_log("m2")
        check("standby -> leader (epoch 2)" in log, f"m2's log says it took over at epoch 2:\n{log[-2000:]}")
        for a in ("a1", "a2"):
            with open(c.agents[a].logpath, errors="replace") as f:
                alog = f.read()
            check("fenc" not in alog, f"agent {a} fenced nothing:\n{alog[-2000:]}")


def test_leader_machine_vanishes():
    with ha("failcut") as c:
        c.start_masters()
        c.start_agents(gpus="sim:1")
        long = start_counter(c, "across", 600)
        c.cut("m1")
        cut = time.monotonic()
        c.wait_leader("m2", timeout=20)
        took = time.monotonic() - cut
        # agents come to m2 and the job goes on, in its first attempt
        api = c.master_api("m2")
        seen = api.log(long).count(b"\n")
        wait_until(lambda: api.log(long).count(b"\n") >= seen + 20, 30, "the job's log growing at m2")
        j = api.job(long)
        check_eq((j["state"], j["attempt"]), ("running", 0), f"the job after the cut ({j.get('reason')}, {j['tasks']})")
        st, nodes = api.json("GET", "/v1/nodes")
        check_eq(sorted((n["name"], n["state"]) for n in nodes["nodes"]), [("a1", "ready"), ("a2", "ready")],
                 "nodes at the new leader")
        c.mend("m1")
        wait_until(lambda: (health(c.urls["m1"]) or {}).get("role") == "standby", 60,
                   "the old leader to stand by once its link is back")
        h = health(c.urls["m1"])
        check_eq(h["leader"], c.urls["m2"], "the leader the old one names")
        log = c.master_log("m1")
        check("stepping down" in log or "standby" in log.split("standby -> leader (epoch 1)")[-1],
              f"m1's log says it stepped down:\n{log[-3000:]}")
        check_eq(c.pg.sql("SELECT epoch, url FROM leader"), [f"2|{c.urls['m2']}"], "the lease in the store")
        check_first_attempt(api, long, 600, "the job running across the cut")
        check(took < 10, f"the standby took over {took:.2f} s after the cut")


def test_paused_leader_cannot_commit():
    with ha("failstop") as c:
        c.start_masters()
        c.start_agents(gpus="sim:1")
        m1 = c.masters["m1"]
        m1.kill(signal.SIGSTOP)
        try:
            c.wait_leader("m2", timeout=20)
            st, doc = c.master_api("m2").submit(spec(["/bin/true"], name="while-paused", cpus=0.01))
            check_eq(st, 201, f"a submission to the new leader: {doc}")
        finally:
            m1.kill(signal.SIGCONT)
        # the first thing the old leader is asked is refused, never acknowledged
        old = c.master_api("m1")
        st, doc = old.submit(spec(["/bin/true"], name="to-the-old-leader", cpus=0.01))
        check_eq((st, doc["error"]["code"]), (503, "not_leader"), f"the old leader's answer: {doc}")
        wait_until(lambda: (health(c.urls["m1"]) or {}).get("role") == "standby", 20, "m1 to stand by")
        log = c.master_log("m1")
        check(re.search(r"stepping down: .*the lease of epoch 1 was taken by another master", log),
              f"m1's own commit was refused by the fencing epoch:\n{log[-3000:]}")
        check_eq(c.pg.sql("SELECT count(*) FROM jobs WHERE doc::json->>'name' = 'to-the-old-leader'"), ["0"],
                 "jobs the old leader stored")
        check_eq(c.pg.sql("SELECT count(*) FROM jobs WHERE doc::json->>'name' = 'while-paused'"), ["1"],
                 "jobs the new leader stored")
        # and it names the leader, so a client given the old leader's URL reaches the new one
        wait_until(lambda: (health(c.urls["m1"]) or {}).get("leader") == c.urls["m2"], 10,
                   "m1 to name the leader")
        st, doc = old.json("GET", "/v1/jobs")
        check_eq((st, doc["error"].get("leader")), (503, c.urls["m2"]), f"not_leader names the leader: {doc}")


def start_upgraded(c, token_fixture):
    """Starts c's master on the version-1 store put in place, with the admin
    token of the master that wrote it, and checks the upgrade."""
    with open(os.path.join(FIXTURES, token_fixture)) as f, \
            open(os.path.join(c.data_dir, "admin-token"), "w") as out:
        out.write(f.read())
    c.start_master()
    with open(c.master.logpath, errors="replace") as f:
        check_upgraded(c, f.read())


def test_agent_that_reaches_only_the_standby_fences():
    """An agent cut off from the leader but not from the standby gets only
    not_leader answers: they are no contact, so it fences its task by its
    two thirds of the lease, before the leader declares its node lost and
    starts the job on the other agent; the two attempts never overlap."""
    lease = 6.0
    with ha("failhalf", lease=f"{lease:g}s") as c:
        c.start_masters()
        c.start_agents(gpus="sim:1")
        mark = os.path.join(c.dir, "half.lines")
        st, doc = c.api.submit(spec(["/bin/sh", "-c", TICK, "tick", mark], name="half", gpus=1,
                                    restart={"max": 1}))
        check_eq(st, 201, f"submit: {doc}")
        jid = doc["id"]
        wait_until(lambda: len(tick_lines(mark)) >= 3, 60, "the job to write its lines")
        node = c.api.job(jid)["tasks"][0]["node"]
        other = next(a for a in c.agent_nodes if a != node)
        leader_addr = c.topo.node("m1").addr
        # inside the agent's namespace only: the leader is unreachable, the standby is not
        r = subprocess.run(c.topo.argv(node, ["ip", "route", "add", "unreachable", leader_addr + "/32"],
                                       cgroups=False), capture_output=True, text=True)
        check_eq(r.returncode, 0, f"route to the leader cut in {node}: {r.stderr}")
        cut = time.time()
        wait_until(lambda: any(a == 1 for a, _, _ in tick_lines(mark)), lease * 4,
                   "the job's second attempt to write its lines")
        time.sleep(1)  # both attempts would be writing now if the first one still ran
        runs = tick_lines(mark)
        first = [x for x in runs if x[0] == 0]
        second = [x for x in runs if x[0] == 1]
        check_eq(sorted({(a, n) for a, n, _ in runs}), [(0, node), (1, other)],
                 f"the first attempt on {node}, the second on {other}: {runs[-5:]}")
        check(first[-1][2] < second[0][2] and runs == first + second,
              f"the attempts never overlap: first ends {first[-1][2] - cut:.2f} s after the cut, "
              f"second starts {second[0][2] - cut:.2f} s after")
        check(first[-1][2] - cut < lease * 5 / 6 + 1,
              f"the fenced attempt stopped {first[-1][2] - cut:.2f} s after the cut")
        # the master saw the node lost; on the node the task was stopped (the
        # agent fenced it: it had no answer from the leader)
        task = c.api.job(jid)["tasks"][0]
        check_eq((task["state"], task["reason"]["code"]), ("lost", "node_lost"), f"the first task: {task}")
        with open(os.path.join(c.dir, f"agent-{node}", "tasks", str(task["id"]), "exit.json")) as f:
            ex = json.load(f)
        # by the agent (SIGTERM) or by its shim, whichever counted first
        check(ex["signal"] == 15 or "no answer from the master" in ex["reason"],
              f"the first attempt was stopped on its node (fenced): {ex}")


def check_upgraded(c, log):
    check(re.search(rf"schema upgraded from version 1 to {store_schema_version()}", log),
          f"the master's log says it upgraded the store:\n{log[-2000:]}")
    st, doc = c.api.json("GET", "/v1/jobs")
    check_eq(st, 200, f"the jobs of the upgraded store: {doc}")
    check_eq(sorted((j["id"], j["name"], j["state"]) for j in doc["jobs"]),
             [(1, "fx-1", "queued"), (2, "fx-2", "cancelled"), (3, "fx-3", "queued")],
             "the jobs of a version-1 store after its upgrade")


def test_store_upgrade_from_version_1():
    # PostgreSQL: a dump of a store a version-1 master wrote
    with PgServer() as pg, cluster("upgradepg", master_args=["--store", pg.url]) as c:
        r = subprocess.run(["psql", pg.socket_url, "-q", "-v", "ON_ERROR_STOP=1", "-f",
                            os.path.join(FIXTURES, "store_v1_pg.sql")], capture_output=True, text=True)
        check_eq(r.returncode, 0, f"psql of the fixture: {r.stderr}")
        os.makedirs(c.data_dir)
        start_upgraded(c, "store_v1_pg.admin-token")
        check_eq(pg.sql("SELECT version FROM schema_version"), [str(store_schema_version())], "the schema version")
    # SQLite: its state.db
    with cluster("upgradesqlite") as c:
        os.makedirs(c.data_dir)
        db = sqlite3.connect(os.path.join(c.data_dir, "state.db"))
        with open(os.path.join(FIXTURES, "store_v1_sqlite.sql")) as f:
            db.executescript(f.read())
        db.close()
        start_upgraded(c, "store_v1_sqlite.admin-token")
