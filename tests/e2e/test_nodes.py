"""Node lifecycle through the CLI: an admin's drain (with its reason) is kept
through a lease lapse (the agent SIGKILLed, a short --lease), the agent's
restart and a master restart, and no job is placed on the drained node
meanwhile (a job waits with a reason naming the drain); `yard nodes resume`
lets it run there. `yard nodes rm` removes a lost node for good and refuses a
live one."""
import json
import signal
import time

from harness import check, check_eq, cluster, spec, wait_until

LEASE = "2s"


def node(c, name):
    nodes = {n["name"]: n for n in c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"]}
    return nodes.get(name)


def row(c, name):
    """The `yard nodes` row of name, as its columns."""
    for line in c.cli("nodes", check_rc=0).stdout.decode().splitlines()[1:]:
        if line.split()[0] == name:
            return line
    return None


def queue_reason(c, jid):
    q = c.api.json("GET", "/v1/queue", expect=200)[1]["queue"]
    e = [x for x in q if x["id"] == jid]
    return e[0]["reason"] if e and e[0]["reason"] else None


def stays_queued(c, jid, seconds):
    """The job is still queued after several plans (each heartbeat of a node
    that changed state asks for one): a negative check needs some time."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        check_eq(c.api.job(jid)["state"], "queued", f"job {jid} waits")
        time.sleep(0.1)


def test_drain_survives_lapse_and_restarts():
    with cluster("nodes-drain", lease=LEASE) as c:
        c.start_master()
        agent = c.start_agent("n1", gpus="sim:1")
        r = c.cli("nodes", "drain", "n1", "--reason", "disk swap", check_rc=0)
        check("drained node n1: disk swap" in r.stdout.decode(), f"drain's answer: {r.stdout!r}")
        n = node(c, "n1")
        check_eq((n["state"], n["drained"], n["drain"]["reason"], n["drain"]["by"]),
                 ("ready", True, "disk swap", "admin"), f"the drained node: {n}")
        line = row(c, "n1")
        check(" ready " in line and line.rstrip().endswith("drained: disk swap"),
              f"yard nodes shows liveness and drain apart: {line!r}")

        # the lease lapses: lost, still drained
        agent.kill(signal.SIGKILL)
        agent.p.wait()
        wait_until(lambda: node(c, "n1")["state"] == "lost", 20, "n1 to be lost")
        n = node(c, "n1")
        check_eq((n["drained"], n["drain"]["reason"]), (True, "disk swap"), f"drained while lost: {n}")

        # a job submitted meanwhile is accepted (the node counts) and waits, naming the drain
        st, job = c.api.submit(spec(["/bin/sh", "-c", "echo on $YARD_NODE"], name="after", gpus=1))
        check_eq(st, 201, f"a job for the drained node's GPU is accepted: {job}")
        jid = job["id"]
        reason = wait_until(lambda: queue_reason(c, jid), 10, "the job's reason")
        check("node 'n1' is drained (disk swap)" in reason["message"], f"the reason names the drain: {reason}")

        # the agent comes back: ready, still drained, nothing placed
        c.start_agent("n1", gpus="sim:1")
        wait_until(lambda: node(c, "n1")["state"] == "ready", 20, "n1 back")
        check_eq(node(c, "n1")["drained"], True, "drained after the agent's restart")
        stays_queued(c, jid, 1.5)
        r = c.cli("queue", check_rc=0).stdout.decode()
        check("drained (disk swap)" in r, f"yard queue gives the reason: {r!r}")

        # a master restart keeps the drain (it is stored with the node)
        c.master.stop()
        c.start_master()
        n = node(c, "n1")
        check_eq((n["drained"], n["drain"]["reason"], n["drain"]["by"]), (True, "disk swap", "admin"),
                 f"the drain after a master restart: {n}")
        wait_until(lambda: node(c, "n1")["state"] == "ready", 20, "n1 back at the new master")
        stays_queued(c, jid, 1.5)

        # resume: the job runs there
        r = c.cli("nodes", "resume", "n1", check_rc=0)
        check_eq(r.stdout.decode(), "resumed node n1\n", "resume's answer")
        j = c.api.wait_job(jid, timeout=60)
        check_eq((j["state"], j["tasks"][-1]["node"]), ("succeeded", "n1"), "the job ran on n1")
        check_eq(c.api.log(jid), b"on n1\n", "its output")
        n = node(c, "n1")
        check_eq((n["drained"], n["drain"]), (False, None), f"resumed: {n}")
        check(row(c, "n1").rstrip().endswith(" -"), f"yard nodes after resume: {row(c, 'n1')!r}")

        # refusals say why
        r = c.cli("nodes", "resume", "n1", check_rc=1)
        check("node 'n1' is not drained" in r.stderr.decode(), f"a second resume: {r.stderr!r}")
        r = c.cli("nodes", "drain", "nosuch", check_rc=1)
        check("no node 'nosuch'" in r.stderr.decode(), f"drain of an unknown node: {r.stderr!r}")
        st, doc = c.api.json("POST", "/v1/nodes/n1/drain", {"reason": "a\nb"})
        check_eq((st, doc["error"]["field"]), (400, "reason"), f"a reason on two lines: {doc}")
        st, doc = c.api.json("POST", "/v1/nodes/n1/drain", token=c.user_token("alice"))
        check_eq(st, 403, "a user may not drain")
        r = c.cli("nodes", "drain", "n1", "--output", "json", check_rc=0)
        check_eq(json.loads(r.stdout)["drain"]["reason"], None, "a drain without a reason")


def test_rm_lost_node_only():
    with cluster("nodes-rm", lease=LEASE) as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:1")
        a2 = c.start_agent("n2", gpus="sim:2")
        r = c.cli("nodes", "rm", "n1", check_rc=1)
        err = r.stderr.decode()
        check("node 'n1' is ready" in err and "only a lost node can be removed" in err,
              f"rm of a live node is refused, saying why: {err!r}")
        check(node(c, "n1") is not None, "n1 is still there")

        a2.kill(signal.SIGKILL)
        a2.p.wait()
        wait_until(lambda: node(c, "n2")["state"] == "lost", 20, "n2 to be lost")
        # a lost node counts for admission until it is removed
        st, doc = c.api.submit(spec(["/bin/true"], gpus=2, placement={"wait_for_nodes": False}))
        check_eq(st, 201, f"a 2-GPU job while the 2-GPU node is lost: {doc}")
        c.api.json("POST", f"/v1/jobs/{doc['id']}/cancel", expect=200)
        r = c.cli("nodes", "rm", "n2", check_rc=0)
        check_eq(r.stdout.decode(), "removed node n2\n", "rm's answer")
        check(node(c, "n2") is None, "n2 is gone")
        st, doc = c.api.submit(spec(["/bin/true"], gpus=2))
        check_eq((st, doc["error"]["field"]), (400, "tasks.worker.gpus"),
                 f"a removed node no longer counts: {doc}")
        r = c.cli("nodes", "rm", "n2", check_rc=1)
        check("no node 'n2'" in r.stderr.decode(), f"rm again: {r.stderr!r}")

        # removal is durable, and the name may join again
        c.master.stop()
        c.start_master()
        check(node(c, "n2") is None, "n2 is still gone after a master restart")
        c.start_agent("n2", gpus="sim:2")
        n = wait_until(lambda: node(c, "n2"), 20, "n2 to join again")
        check_eq((n["state"], n["drained"], len(n["gpus"])), ("ready", False, 2), f"n2 joined anew: {n}")
