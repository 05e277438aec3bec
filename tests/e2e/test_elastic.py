"""Elastic capacity through the command provisioner (docs/elastic.md): the
master's pool gpu is `--provisioner gpu=command:provision_netns.py`, a
script that starts `yard agent --ephemeral` in network namespaces as a
cloud script starts VMs. The pool scales up to its maximum and no
further; scales down idle nodes only, never one that runs a task; gives
up a node that never registers; and a master killed while the script
runs, started again, neither leaks a node nor asks twice."""
import fcntl
import glob
import json
import os
import re
import signal
import time

from harness import YARD, Cluster, check, check_eq, spec, wait_until
from multinode import multinode

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "provision_netns.py")


class elastic:
    """A topology of `machines` namespaces, none with an agent, and a master
    whose pool gpu the script fills from them; what the script started is
    stopped with the topology, its agents' logs scanned like the daemons'."""

    def __init__(self, machines=3, mode="normal", args=(), cooldown="1s"):
        self.mn = multinode("elastic", nodes=machines, lease=5)
        self.mode = mode
        self.args = list(args)
        self.cooldown = cooldown

    def __enter__(self):
        c = self.mn.__enter__()
        try:
            self.state = os.path.join(c.dir, "provision.json")
            with open(self.state, "w") as f:
                json.dump({"yard": YARD, "dir": c.dir, "gpus": {"gpu": "sim:1", "cpu": "none"},
                           "mode": self.mode, "nodes": {},
                           "free": [{"ns": n.ns, "addr": n.addr, "hostname": n.hostname}
                                    for n in c.topo.nodes]}, f)
            c.extra_env["YARD_TEST_PROVISION"] = self.state
            c.master_args += ["--provisioner", f"gpu=command:{SCRIPT}", "--provisioner-shape",
                              "gpu=gpus=1,cpus=1", "--provisioner-cooldown", self.cooldown, *self.args]
            c.start_master()
        except BaseException as e:
            self.mn.__exit__(type(e), e, None)
            raise
        self.c = c
        return self

    def set_mode(self, mode):
        # under the script's lock, and the file replaced whole as the script
        # replaces it: a call under way (a down the test has just seen in
        # calls.log) read the file before and would write the old mode back
        with open(self.state + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with open(self.state) as f:
                st = json.load(f)
            st["mode"] = mode
            with open(self.state + ".tmp", "w") as f:
                json.dump(st, f)
            os.rename(self.state + ".tmp", self.state)

    def calls(self):
        try:
            with open(os.path.join(self.c.dir, "calls.log")) as f:
                return [line.split() for line in f.read().splitlines()]
        except FileNotFoundError:
            return []

    def agents_alive(self):
        with open(self.state) as f:
            st = json.load(f)
        return sorted(name for name, n in st["nodes"].items() if n.get("pid") and os.path.exists(f"/proc/{n['pid']}"))

    def __exit__(self, et, ev, tb):
        findings = []
        for log in glob.glob(os.path.join(self.c.dir, "agent-*.log")):
            try:
                with open(log, errors="replace") as f:
                    Cluster.scan_text(f.read(), log)
            except AssertionError as e:
                findings.append(str(e))
        self.mn.__exit__(et, ev, tb)
        if findings and et is None:
            raise AssertionError("\n".join(findings))
        return False


def provisioners(c):
    return c.api.json("GET", "/v1/provisioners", expect=200)[1]


def reason(c, jid):
    r = c.api.job(jid).get("reason") or {}
    return f"{r.get('code')}: {r.get('message')}"


def nodes(c):
    return {n["name"]: n for n in c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"]}


def test_command_scale_up_to_max_and_down_idle_only():
    with elastic(machines=3, args=["--provisioner-max", "gpu=2", "--provisioner-idle", "gpu=1s"]) as e:
        c = e.c
        flag, flag1 = os.path.join(c.dir, "release-long"), os.path.join(c.dir, "release-short1")
        long_cmd = f'while [ ! -e {flag} ]; do sleep 0.1; done; echo long done'
        short1_cmd = f'while [ ! -e {flag1} ]; do sleep 0.1; done; echo short1'
        def submit(name, cmd):
            st, job = c.api.submit(spec(["/bin/sh", "-c", cmd], name=name, gpus=1, cpus=1, pool="gpu"))
            check_eq(st, 201, f"submit {name}: {job}")
            return job["id"]
        short1, long_ = submit("short1", short1_cmd), submit("long", long_cmd)
        wait_until(lambda: all(c.api.job(j)["state"] == "running" for j in (short1, long_)), 30,
                   "the first two jobs to run on two new nodes")
        # a third whole-node job, the pool at its maximum of two: no more
        short2 = submit("short2", "echo short2")
        seen = []
        try:
            why = wait_until(lambda: (lambda r: r if "maximum" in r else seen.append(r))(reason(c, short2)), 20,
                             "the third job's reason")
        except AssertionError:
            raise AssertionError(f"the third job's reason never said the pool is at its maximum: {sorted(set(seen))}")
        check(re.search(r"pool 'gpu' may not ask for more nodes now: it has 2 nodes of its maximum of 2", why),
              f"the third job's reason: {why!r}")
        ups = [x for x in e.calls() if x[0] == "up"]
        check_eq(sum(int(x[2]) for x in ups), 2, f"nodes asked for: {ups}")
        pc = provisioners(c)["pools"][0]["nodes"]
        check_eq((pc["pending"] + pc["ready"] + pc["requesting"]), 2, f"the pool's nodes: {pc}")
        out = c.cli("provisioners", check_rc=0).stdout.decode()
        check(re.search(rf"gpu +command:{re.escape(SCRIPT)} +0 +2 ", out) and "gpu-1-0 ready" in out,
              f"yard provisioners: {out!r}")

        # short1 ends: short2 takes its node; then that node is idle past 2s
        # and goes, while the long job's node stays, its task untouched
        with open(flag1, "w"):
            pass
        check_eq(c.api.wait_job(short1, timeout=30)["state"], "succeeded", "short1")
        check_eq(c.api.wait_job(short2, timeout=30)["state"], "succeeded", "short2")
        long_node = wait_until(lambda: (lambda j: j["tasks"][0]["node"] if j["state"] == "running" else None)(
            c.api.job(long_)), 30, "the long job to run")
        idle_node = [n for n in (c.api.job(short2)["tasks"][0]["node"],) if n != long_node][0]
        wait_until(lambda: ["down", idle_node] in e.calls(), 30, f"the idle node {idle_node} to be released")
        wait_until(lambda: idle_node not in nodes(c), 10, "the idle node to end")
        wait_until(lambda: e.agents_alive() == [long_node], 10, "only the busy node's agent to run")
        time.sleep(2)  # longer than the idle time: the busy node is kept all the same
        n = nodes(c)[long_node]
        check_eq((n["state"], n["drained"], n["provisioned"]["state"]), ("ready", False, "ready"),
                 f"the busy node: {n}")
        j = c.api.job(long_)
        check_eq((j["state"], j["attempt"], j["tasks"][0]["state"]), ("running", 0, "running"),
                 f"the long job was never stopped: {j}")
        with open(flag, "w"):
            pass
        j = c.api.wait_job(long_, timeout=30)
        check_eq((j["state"], j["attempt"]), ("succeeded", 0), f"the long job: {j}")
        wait_until(lambda: ["down", long_node] in e.calls(), 30, "the long job's node to be released once idle")
        wait_until(lambda: not nodes(c) and not provisioners(c)["requests"], 15, "every node to end")
        wait_until(lambda: not e.agents_alive(), 10, "every agent to stop")
        downs = [x[1] for x in e.calls() if x[0] == "down"]
        check_eq(sorted(downs), sorted({idle_node, long_node}), f"each node released once: {downs}")


def test_command_node_never_registers_is_given_up():
    # (a cooldown of 3 s: the test says the next machine comes up before it ends)
    with elastic(machines=1, mode="ghost", args=["--provisioner-register-timeout", "2s"], cooldown="3s") as e:
        c = e.c
        st, job = c.api.submit(spec(["/bin/sh", "-c", "echo ok"], gpus=1, cpus=1, pool="gpu"))
        check_eq(st, 201, f"submit: {job}")
        why = wait_until(lambda: (lambda r: r if "(node" in r else None)(reason(c, job["id"])), 20,
                         "the provisioning reason")
        check(re.fullmatch(rf"provisioning: 1 node requested from command {re.escape(SCRIPT)} \(node gpu-1-0\)", why),
              f"the reason: {why!r}")
        # it never registers: given up after 2 s, and the script told
        wait_until(lambda: ["down", "gpu-1-0"] in e.calls(), 20, "the node to be given up")
        e.set_mode("normal")
        def audit_of(path):
            return [x["code"] for x in c.api.json("GET", "/v1/audit?limit=50", expect=200)[1]["entries"]
                    if x["path"] == path]
        wait_until(lambda: {"node_given_up", "node_released"} <= set(audit_of("/v1/nodes/gpu-1-0")), 10,
                   "the give-up and the release in the audit log")
        # a machine that does come up then: the next request, after the
        # cooldown, runs the job
        ups = [x for x in e.calls() if x[0] == "up"]
        check_eq(ups, [["up", "gpu", "1"]], "no second request during the cooldown")
        done = c.api.wait_job(job["id"], timeout=30)
        check_eq(done["state"], "succeeded", f"the job: {done}")
        check(done["tasks"][0]["node"] != "gpu-1-0", "it ran on the second request's node")
        metrics = c.api.request("GET", "/metrics")[1].decode()
        check('yard_provisioner_actions_total{pool="gpu",action="give_up",outcome="ok"} 1' in metrics,
              "the give-up in /metrics")


def test_command_master_killed_mid_scale_up():
    with elastic(machines=2, mode="slow", args=["--provisioner-idle", "gpu=2s"]) as e:
        c = e.c
        st, job = c.api.submit(spec(["/bin/sh", "-c", "echo ran on $YARD_NODE"], gpus=1, cpus=1, pool="gpu"))
        check_eq(st, 201, f"submit: {job}")
        # the script has started the agent and takes its time to answer:
        # the master dies now, before it hears the node's name
        wait_until(lambda: ["slow"] in e.calls(), 20, "the script's up under way")
        c.master.kill(signal.SIGKILL)
        c.master.p.wait()
        e.set_mode("normal")
        c.start_master()
        # (on a PostgreSQL store the killed master's lease must lapse first)
        wait_until(lambda: c.api.json("GET", "/healthz")[1].get("role") == "leader", 10, "the master to lead")
        done = c.api.wait_job(job["id"], timeout=30)
        check_eq(done["state"], "succeeded", f"the job after the restart: {done}")
        check_eq(c.api.log(job["id"]), b"ran on gpu-1-0\n", "it ran on the node of the interrupted request")
        # the restarted master took the node the script made as the
        # interrupted request's own
        req = wait_until(lambda: (lambda r: r[0] if r and [n["name"] for n in r[0]["nodes"]] == ["gpu-1-0"]
                                  else None)(provisioners(c)["requests"]), 10, "the request to name its node")
        check_eq((req["id"], req["why"], req["state"]), (1, "demand", "open"), f"the request: {req}")
        check_eq([x for x in e.calls() if x[0] == "up"], [["up", "gpu", "1"]], "asked once, not twice")
        codes = [x["code"] for x in c.api.json("GET", "/v1/audit?limit=50", expect=200)[1]["entries"]
                 if x["method"] == "EVENT"]
        check("provision_recovered" in codes and "node_registered" in codes, f"the audit: {codes}")
        # and nothing leaked: idle, it is released like any other
        wait_until(lambda: ["down", "gpu-1-0"] in e.calls(), 30, "the node to be released once idle")
        wait_until(lambda: not nodes(c) and not provisioners(c)["requests"], 15, "every node to end")
        wait_until(lambda: not e.agents_alive(), 10, "every agent to stop")


def test_command_hybrid_pools():
    """The seeds' hybrid cluster: GPU machines and cloud CPU machines, each
    a provisioned pool; a job's parameter server (no GPU) runs on the CPU
    pool while its workers run on the GPU pool (tasks.ps.pool)."""
    args = ["--provisioner", f"cpu=command:{SCRIPT}", "--provisioner-shape", "cpu=cpus=1",
            "--provisioner-idle", "gpu=1s", "--provisioner-idle", "cpu=1s"]
    with elastic(machines=3, args=args) as e:
        c = e.c
        job = {"name": "hybrid", "command": ["/bin/sh", "-c", "echo $YARD_ROLE on $YARD_NODE"], "pool": "gpu",
               "tasks": {"ps": {"gpus": 0, "cpus": 0.5, "pool": "cpu"}, "worker": {"replicas": 2, "gpus": 1, "cpus": 1}}}
        st, doc = c.api.submit(job)
        check_eq(st, 201, f"submit: {doc}")
        done = c.api.wait_job(doc["id"], timeout=40)
        check_eq(done["state"], "succeeded", f"the job: {done}")
        ups = sorted(tuple(x) for x in e.calls() if x[0] == "up")
        check_eq(sum(int(n) for _, p, n in ups if p == "cpu"), 1, f"one CPU machine: {ups}")
        check_eq(sum(int(n) for _, p, n in ups if p == "gpu"), 2, f"two GPU machines: {ups}")
        where = {f"{t['role']}/{t['index']}": t["node"] for t in done["tasks"]}
        check(where["ps/0"].startswith("cpu-"), f"the ps on a CPU node: {where}")
        check(where["worker/0"].startswith("gpu-") and where["worker/1"].startswith("gpu-") and
              where["worker/0"] != where["worker/1"], f"the workers on two GPU nodes: {where}")
        check_eq(c.api.log(doc["id"], task="ps/0"), f"ps on {where['ps/0']}\n".encode(), "the ps's output")
        wait_until(lambda: not nodes(c) and not provisioners(c)["requests"], 20, "every node to end")
        wait_until(lambda: not e.agents_alive(), 10, "every agent to stop")


def test_provisioner_settings_reload():
    """The provisioner options are keys of master.conf, and a reload applies
    them: a new pool, a new maximum; a bad bound changes nothing."""
    from harness import Api, Proc, cluster
    with cluster("elastic-reload") as c:
        conf = os.path.join(c.dir, "master.conf")
        base = f"listen = 127.0.0.1:0\ndata-dir = {c.data_dir}\nprovisioner = gpu=command:{SCRIPT}\n"
        with open(conf, "w") as f:
            f.write(base + "provisioner-max = gpu=1\n")
        m = Proc("master", [YARD, "master", "--config", conf], os.path.join(c.dir, "master.log"), env=c.env(),
                 ready=r"yard master ready url=(\S+)")
        c.procs.append(m)
        c.master = m
        with open(os.path.join(c.data_dir, "admin-token")) as f:
            c.api = Api(m.ready_match.group(1), f.read().strip())
        pools = lambda: {p["pool"]: p for p in provisioners(c)["pools"]}
        check_eq((list(pools()), pools()["gpu"]["max"]), (["gpu"], 1), "the pool from the file")
        with open(conf, "w") as f:
            f.write(base + f"provisioner = cpu=command:{SCRIPT}\nprovisioner-max = gpu=3\n"
                    "provisioner-idle = cpu=90s\n")
        st, doc = c.api.json("POST", "/v1/admin/reload")
        check_eq(st, 200, f"the reload: {doc}")
        check_eq(sorted(doc["applied"]), ["provisioner", "provisioner-idle", "provisioner-max"], f"applied: {doc}")
        p = pools()
        check_eq((sorted(p), p["gpu"]["max"], p["cpu"]["idle_ms"]), (["cpu", "gpu"], 3, 90000), f"after: {p}")
        with open(conf, "w") as f:
            f.write(base + "provisioner-max = gpu=3\nprovisioner-min = gpu=5\n")
        st, doc = c.api.json("POST", "/v1/admin/reload")
        check_eq(st, 409, f"a minimum above the maximum: {doc}")
        check("--provisioner-min of pool 'gpu' (5) is above its --provisioner-max (3)" in doc["error"]["message"],
              f"the refusal: {doc}")
        check_eq(sorted(pools()), ["cpu", "gpu"], "a refused reload changes nothing")


def test_ephemeral_agent_leaves_when_idle():
    """An ephemeral agent with no task for its --idle leaves on its own (a
    master that never tells it to: here, a pool without a provisioner):
    it says so, exits 0, and the master ends its node at once."""
    from harness import cluster
    with cluster("ephemeral-idle") as c:
        c.start_master()
        a = c.start_agent("e1", gpus="sim:1", extra=["--ephemeral", "--idle", "1s"])
        n = c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"][0]
        check_eq((n["name"], n["ephemeral"], n["provisioned"]), ("e1", True, None), f"the node: {n}")
        wait_until(lambda: a.p.poll() is not None, 15, "the idle agent to exit")
        check_eq(a.p.returncode, 0, "its exit status")
        check_eq(c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"], [], "its node ended at once")
        check("node 'e1' left (idle for 1 s)" in a.tail(), f"the agent's log: {a.tail()}")
        # an ephemeral agent's options are checked together
        r = c.cli("agent", "--master", c.url, "--work-dir", os.path.join(c.dir, "x"), "--idle", "1s", check_rc=2)
        check("idle '1s' needs ephemeral" in r.stderr.decode(), f"--idle alone: {r.stderr!r}")
