"""Elastic capacity from a real Slurm (docs/elastic.md, "Slurm"): munged,
slurmctld and two slurmd started here (slurm.py), a master whose pool gpu
is `--provisioner gpu=slurm:gpu`, and no agent of its own. A job is an
allocation (sbatch, an array task per node) running `yard agent
--ephemeral`, which registers, runs the job and leaves when idle, ending
the allocation (squeue); two jobs get what the scale-up computed; an
allocation cancelled under a running task is a node loss, and the job
restarts on a new allocation; a master killed while sbatch runs recovers
the allocation after its restart."""
import glob
import os
import re
import signal

from harness import YARD, Cluster, check, check_eq, cluster, spec, wait_until
from slurm import SlurmCluster


def master_args(c):
    return ["--provisioner", "gpu=slurm:gpu", "--provisioner-shape", "gpu=gpus=2,cpus=2",
            "--provisioner-idle", "gpu=2s", "--provisioner-cooldown", "1s",
            "--slurm-work-dir", os.path.join(c.dir, "slurm-agents"), "--slurm-yard", YARD,
            "--slurm-agent-arg=--gpus=sim:2", "--slurm-agent-arg=--idle=5m"]


class slurm_cluster:
    """A Slurm of two nodes and a cluster whose master provisions from it;
    both closed on the way out, the ephemeral agents' logs scanned for
    sanitizer reports like the daemons'."""

    def __enter__(self):
        self.s = SlurmCluster(nodes=2)
        self.s.start()
        try:
            self.cm = cluster("slurm", lease=5, env=self.s.env)
            self.c = self.cm.__enter__()
        except BaseException:
            self.s.close()
            raise
        self.c.master_args += master_args(self.c)
        self.c.start_master()
        return self.s, self.c

    def __exit__(self, et, ev, tb):
        try:
            self.s.close()  # cancels what still runs: the agents stop
            for log in glob.glob(os.path.join(self.c.dir, "slurm-agents", "*.log")):
                with open(log, errors="replace") as f:
                    Cluster.scan_text(f.read(), log)
        finally:
            self.cm.__exit__(et, ev, tb)
        return False


def provisioners(c):
    return c.api.json("GET", "/v1/provisioners", expect=200)[1]


def reason(c, jid):
    r = c.api.job(jid).get("reason") or {}
    return f"{r.get('code')}: {r.get('message')}"


def test_slurm_job_runs_and_allocation_ends():
    with slurm_cluster() as (s, c):
        # Slurm has no free node yet: the allocation waits there, and the
        # job says what it waits for
        s.run("scontrol", "update", "nodename=ys1,ys2", "state=drain", "reason=yard-test")
        st, job = c.api.submit(spec(["/bin/sh", "-c", "echo on $YARD_NODE"], gpus=2, pool="gpu"))
        check_eq(st, 201, f"submit: {job}")
        why = wait_until(lambda: (lambda r: r if "(job " in r else None)(reason(c, job["id"])), 20,
                         "the job's provisioning reason with its Slurm job")
        m = re.fullmatch(r"provisioning: 1 node requested from slurm partition gpu \(job (\d+)\)", why)
        check(m, f"the reason: {why!r}")
        sjob = m.group(1)
        req = provisioners(c)["requests"][0]
        check_eq((req["count"], req["external"], [n["id"] for n in req["nodes"]]), (1, sjob, [f"{sjob}_0"]),
                 f"the request: {req}")
        check_eq(s.jobs(name=req["name"]), [(f"{sjob}_0", "PENDING")], "the allocation in squeue")

        s.run("scontrol", "update", "nodename=ys1,ys2", "state=resume")
        done = c.api.wait_job(job["id"], timeout=30)
        check_eq(done["state"], "succeeded", f"the job: {done}")
        node = f"gpu-{sjob}-0"
        check_eq(c.api.log(job["id"]), f"on {node}\n".encode(), "the job ran on the ephemeral node")

        # idle past its pool's idle time: told to leave, it leaves, and
        # that ends the allocation
        wait_until(lambda: not s.jobs(name=req["name"]), 30, "the allocation to end (squeue)")
        wait_until(lambda: not c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"], 10,
                   "the node to end")
        wait_until(lambda: not provisioners(c)["requests"], 10, "the request to close")
        codes = [e["code"] for e in c.api.json("GET", "/v1/audit?limit=100", expect=200)[1]["entries"]
                 if e["method"] == "EVENT"]
        for want in ("provision_requested", "provision_answered", "node_registered", "node_scaled_down",
                     "node_left", "node_released", "provision_closed"):
            check(want in codes, f"audit has {want}: {codes}")
        metrics = c.api.request("GET", "/metrics")[1].decode()
        check('yard_provisioner_actions_total{pool="gpu",action="up",outcome="ok"} 1' in metrics,
              "the up in /metrics")


def test_slurm_two_jobs_two_nodes():
    with slurm_cluster() as (s, c):
        s.run("scontrol", "update", "nodename=ys1,ys2", "state=drain", "reason=yard-test")
        # each holds its node until both run: they need two nodes at once
        flag = os.path.join(c.dir, "both-ran")
        cmd = f'echo on $YARD_NODE; while [ ! -e {flag} ]; do sleep 0.1; done'
        ids = []
        for k in range(2):
            st, job = c.api.submit(spec(["/bin/sh", "-c", cmd], name=f"j{k}", gpus=2, pool="gpu"))
            check_eq(st, 201, f"submit: {job}")
            ids.append(job["id"])
        # what the scale-up computed: 2 nodes for 2 whole-node jobs, and
        # each request is a Slurm job of as many array tasks as it asked for
        reqs = wait_until(lambda: (lambda r: r if sum(q["count"] for q in r) == 2 and
                                   all(q["external"] for q in r) else None)(provisioners(c)["requests"]),
                          20, "requests for 2 nodes, answered")
        for q in reqs:
            tasks = sorted(j for j, _ in s.jobs(name=q["name"]))
            check_eq(tasks, sorted(f"{q['external']}_{i}" for i in range(q["count"])),
                     f"the allocation of request {q['id']}")
        s.run("scontrol", "update", "nodename=ys1,ys2", "state=resume")
        running = wait_until(lambda: (lambda js: js if all(j["state"] == "running" for j in js) else None)(
            [c.api.job(jid) for jid in ids]), 40, "both jobs to run")
        nodes = {j["tasks"][0]["node"] for j in running}
        check_eq(len(nodes), 2, f"one node each: {nodes}")
        with open(flag, "w"):
            pass
        for jid in ids:
            j = c.api.wait_job(jid, timeout=30)
            check_eq(j["state"], "succeeded", f"job {jid}: {j}")
        asked = [e for e in c.api.json("GET", "/v1/audit?limit=200", expect=200)[1]["entries"]
                 if e["code"] == "provision_requested"]
        check_eq(sorted(e["path"] for e in asked),
                 sorted(f"/v1/provisioners/gpu/requests/{q['id']}" for q in reqs), "no node more was asked for")
        for q in reqs:
            wait_until(lambda: not s.jobs(name=q["name"]), 30, f"request {q['id']}'s allocation to end")


def test_slurm_scancel_is_a_node_loss():
    with slurm_cluster() as (s, c):
        cmd = 'if [ "$YARD_RESTART_COUNT" = 0 ]; then echo first; sleep 60; fi; echo "done on $YARD_NODE"'
        st, job = c.api.submit(spec(["/bin/sh", "-c", cmd], gpus=2, pool="gpu", restart={"max": 1}))
        check_eq(st, 201, f"submit: {job}")
        j = wait_until(lambda: (lambda j: j if j["state"] == "running" else None)(c.api.job(job["id"])), 30,
                       "the job to run")
        first = j["tasks"][0]["node"]
        n = [x for x in c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"] if x["name"] == first][0]
        alloc = n["provisioned"]["id"]
        check_eq((n["slurm_job"], n["ephemeral"]), (alloc, True), f"the node shows its Slurm job: {n}")
        out = c.cli("nodes", check_rc=0).stdout.decode()
        check(f"slurm job {alloc}" in out, f"yard nodes shows the Slurm job: {out!r}")
        s.run("scancel", alloc)
        done = c.api.wait_job(job["id"], timeout=40)
        check_eq((done["state"], done["attempt"]), ("succeeded", 1), f"the job restarted: {done}")
        second = done["tasks"][-1]["node"]
        check(second != first, f"it ran again on a new allocation: {first} then {second}")
        lost = [t for t in done["tasks"] if t["attempt"] == 0][0]
        check_eq((lost["state"], (lost.get("reason") or {}).get("code")), ("lost", "node_lost"),
                 f"the first attempt's task: {lost}")
        check(c.api.log(job["id"], task="worker/0").endswith(f"done on {second}\n".encode()),
              "the second attempt's output")


def test_slurm_master_killed_while_sbatch_runs():
    """A master killed while sbatch runs (an sbatch made slow by a wrapper
    first in the master's PATH, which then runs the real one): the restarted
    master finds the allocation by its name (squeue) and takes it as the
    request's, asking Slurm nothing twice."""
    with slurm_cluster() as (s, c):
        wrap = os.path.join(c.dir, "bin")
        os.makedirs(wrap)
        log = os.path.join(c.dir, "sbatch.log")
        with open(os.path.join(wrap, "sbatch"), "w") as f:
            f.write(f'#!/bin/sh\necho "$*" >> {log}\nsleep 3\nexec /usr/bin/sbatch "$@"\n')
        os.chmod(os.path.join(wrap, "sbatch"), 0o755)
        c.master.stop()
        c.extra_env["PATH"] = wrap + ":" + os.environ["PATH"]
        c.start_master()
        st, job = c.api.submit(spec(["/bin/sh", "-c", "echo ran on $YARD_NODE"], gpus=2, pool="gpu"))
        check_eq(st, 201, f"submit: {job}")
        wait_until(lambda: os.path.exists(log), 20, "sbatch to be run")
        c.master.kill(signal.SIGKILL)
        c.master.p.wait()
        c.start_master()
        wait_until(lambda: c.api.json("GET", "/healthz")[1].get("role") == "leader", 10, "the master to lead")
        done = c.api.wait_job(job["id"], timeout=40)
        check_eq(done["state"], "succeeded", f"the job: {done}")
        with open(log) as f:
            calls = f.read().splitlines()
        check_eq(len(calls), 1, f"sbatch ran once: {calls}")
        codes = [e["code"] for e in c.api.json("GET", "/v1/audit?limit=100", expect=200)[1]["entries"]
                 if e["method"] == "EVENT"]
        check("provision_recovered" in codes, f"the request was recovered: {codes}")
        node = done["tasks"][0]["node"]
        check(re.fullmatch(r"gpu-\d+-0", node), f"it ran on the recovered allocation's node: {node}")
