"""Distributed training across nodes: two agents in two network namespaces
(multinode.py), real jobs from examples/ through their framework launchers.

- pytorch-ddp-digits, one worker per node: >= 95 % test accuracy, identical
  final parameters on both ranks, a stored loss series that decreases;
- the same training through torchrun, 2 processes in one task on one node;
- mpi-allreduce across both nodes (ranks started without ssh);
- the TensorFlow and MXNet contract examples across both nodes;
- a rank that exits with an error: the gang stops, the job names the cause;
- restart: {max: 1} with a worker killed mid-training: the job resumes from
  its checkpoint and succeeds.
"""
import os
import re
import shutil
import signal
import subprocess
import tempfile

from harness import check, check_eq, wait_until
from multinode import multinode

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def submit(c, job_yaml, *sets):
    """`yard submit` (uploads the example's directory); returns the job id."""
    args = ["submit", job_yaml, "--output", "json"]
    for s in sets:
        args += ["--set", s]
    r = c.cli(*args, check_rc=0)
    import json
    return json.loads(r.stdout)["id"]


def logs(c, jid, task, stream="stdout"):
    return c.api.log(jid, task, stream).decode(errors="replace")


def final_lines(text):
    acc = [float(x) for x in re.findall(r"^final test accuracy: ([0-9.]+)$", text, re.M)]
    sha = re.findall(r"^params sha256: ([0-9a-f]{64})$", text, re.M)
    return acc, sha


def nodes_of(job):
    return {f"{t['role']}/{t['index']}": t["node"] for t in job["tasks"] if t["attempt"] == job["attempt"]}


def test_pytorch_ddp_digits_one_worker_per_node():
    with multinode("ddp-digits") as c:
        c.start_master()
        c.start_agents(gpus="sim:1")
        jid = submit(c, os.path.join(EXAMPLES, "pytorch-ddp-digits", "job.yaml"),
                     "tasks.worker.gpus=1", "restart.max=0")
        job = c.api.wait_job(jid, timeout=240)
        out = {t: logs(c, jid, t) for t in ("worker/0", "worker/1")}
        check_eq(job["state"], "succeeded", f"job: {job['reason']} {out}")
        check_eq(sorted(nodes_of(job).values()), ["n1", "n2"], "one worker on each node")
        accs, shas = [], []
        for t, text in out.items():
            acc, sha = final_lines(text)
            check_eq((len(acc), len(sha)), (1, 1), f"{t} prints one result: {text[-500:]!r}")
            accs += acc
            shas += sha
        check(min(accs) >= 0.95, f"test accuracy >= 95 %: {accs}")
        check_eq(shas[0], shas[1], "both ranks end with identical parameters")
        # the loss series the agent parsed from the @yard lines
        _, doc = c.api.json("GET", f"/v1/jobs/{jid}/metrics?task=worker/0&name=loss", expect=200)
        series = doc["series"]
        check_eq(len(series), 1, "one loss series of worker/0")
        pts = series[0]["points"]
        check(len(pts) >= 20, f"a point every few steps: {len(pts)}")
        steps = [p[0] for p in pts]
        check_eq(steps, sorted(steps), "points in step order")
        head = sum(p[1] for p in pts[:5]) / 5
        tail = sum(p[1] for p in pts[-5:]) / 5
        check(tail < head / 2, f"the loss decreases: first {head:.3f}, last {tail:.3f}")
        _, doc = c.api.json("GET", f"/v1/jobs/{jid}/metrics?name=test_acc", expect=200)
        check(doc["series"] and doc["series"][0]["points"][-1][1] >= 0.95, "test_acc series")


def test_pytorch_torchrun_two_processes_in_one_task():
    with multinode("ddp-torchrun") as c:
        c.start_master()
        c.start_agent(0, gpus="sim:2")
        jid = submit(c, os.path.join(EXAMPLES, "pytorch-ddp-digits", "job-torchrun.yaml"))
        job = c.api.wait_job(jid, timeout=240)
        out = logs(c, jid, "worker/0") + logs(c, jid, "worker/0", "stderr")
        check_eq(job["state"], "succeeded", f"job: {job['reason']} {out[-2000:]}")
        acc, sha = final_lines(out)
        check_eq(len(acc), 2, f"torchrun started 2 processes (PET_NPROC_PER_NODE=2): {out[-1500:]!r}")
        check(min(acc) >= 0.95, f"accuracy {acc}")
        check_eq(sha[0], sha[1], "identical parameters on both local ranks")


def test_mpi_allreduce_across_nodes():
    with multinode("mpi") as c:
        c.start_master()
        c.start_agents(gpus="sim:1")
        work = tempfile.mkdtemp(prefix="yard-e2e-mpi-src-")
        try:
            src = os.path.join(work, "mpi-allreduce")
            shutil.copytree(os.path.join(EXAMPLES, "mpi-allreduce"), src,
                            ignore=shutil.ignore_patterns("allreduce"))
            subprocess.run(["make", "-C", src], check=True, capture_output=True)
            jid = submit(c, os.path.join(src, "job.yaml"), "tasks.worker.gpus=1")
            job = c.api.wait_job(jid, timeout=120)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        out = logs(c, jid, "worker/0") + logs(c, jid, "worker/0", "stderr")
        check_eq(job["state"], "succeeded", f"job: {job['reason']} {out[-2000:]}")
        check_eq(sorted(nodes_of(job).values()), ["n1", "n2"], "one rank per node")
        check(re.search(r"allreduce ok: 2 ranks, sum 3\b", out), f"the right sum: {out[-1500:]!r}")
        hosts = set(re.findall(r"^rank \d of 2 on (\S+):", out, re.M))
        check_eq(hosts, {n.hostname for n in c.topo.nodes}, "a rank ran on each node's host")
        # the remote daemon ran inside worker/1's task: its log holds mpi-worker's line
        check("hosting the MPI ranks" in logs(c, jid, "worker/1"), "worker/1 hosted the remote rank")


def test_tensorflow_and_mxnet_contracts_across_nodes():
    with multinode("contracts") as c:
        c.start_master()
        c.start_agents(gpus="sim:2")
        tf = submit(c, os.path.join(EXAMPLES, "tensorflow-tf-config", "job.yaml"),
                    *[f"tasks.{r}.gpus=1" for r in ("chief", "worker", "ps")])
        job = c.api.wait_job(tf, timeout=180)
        check_eq(job["state"], "succeeded", f"tensorflow job: {job['reason']}")
        check_eq(sorted(set(nodes_of(job).values())), ["n1", "n2"], "spread over both nodes")
        for t in nodes_of(job):
            text = logs(c, tf, t)
            check(re.search(r"tf_config ok: task \w+:\d reached 3 peers, reached by 3 peers", text),
                  f"{t} checked TF_CONFIG and reached its peers: {text[-800:]!r}")
        mx = submit(c, os.path.join(EXAMPLES, "mxnet-dmlc", "job.yaml"),
                    *[f"tasks.{r}.gpus=1" for r in ("scheduler", "server", "worker")])
        job = c.api.wait_job(mx, timeout=180)
        check_eq(job["state"], "succeeded", f"mxnet job: {job['reason']}")
        check_eq(sorted(set(nodes_of(job).values())), ["n1", "n2"], "spread over both nodes")
        for t in nodes_of(job):
            text = logs(c, mx, t)
            check("dmlc ok:" in text, f"{t} checked DMLC_* and reached the scheduler: {text[-800:]!r}")


def test_a_failing_rank_stops_the_gang_and_is_named():
    with multinode("gang-fail") as c:
        c.start_master()
        c.start_agents(gpus="sim:1")
        jid = submit(c, os.path.join(EXAMPLES, "pytorch-ddp-digits", "job.yaml"),
                     "tasks.worker.gpus=1", "restart.max=0", "params.fail_rank=1",
                     "params.fail_epoch=1", "params.epochs=20")
        job = c.api.wait_job(jid, timeout=180)
        check_eq(job["state"], "failed", "the job fails")
        check_eq(job["reason"]["code"], "task_failed", "reason code")
        check("worker/1 exited with status 3" in job["reason"]["message"],
              f"the reason names the task: {job['reason']}")
        check_eq(job["exit_code"], 3, "the job's exit code is the task's")
        wait_until(lambda: {t["state"] for t in c.api.job(jid)["tasks"]} == {"failed", "killed"}, 30,
                   "rank 0 stopped")
        states = {f"{t['role']}/{t['index']}": t["state"] for t in c.api.job(jid)["tasks"]}
        check_eq(states, {"worker/0": "killed", "worker/1": "failed"}, "rank 0 stopped, rank 1 failed")


def test_killed_worker_resumes_from_checkpoint():
    with multinode("resume") as c:
        c.start_master()
        agents = c.start_agents(gpus="sim:1")
        jid = submit(c, os.path.join(EXAMPLES, "pytorch-ddp-digits", "job.yaml"),
                     "tasks.worker.gpus=1", "restart.max=1", "params.epoch_sleep=1")
        # wait until rank 0 has checkpointed at least two epochs, then kill rank 1's process
        wait_until(lambda: len(re.findall(r"test_acc", logs(c, jid, "worker/0"))) >= 2, 180,
                   "two epochs done")
        job = c.api.job(jid)
        victim = next(t for t in job["tasks"] if t["index"] == 1)
        work = os.path.join(c.dir, "agent-" + victim["node"], "tasks", str(victim["id"]))
        import json
        with open(os.path.join(work, "task.pid")) as f:
            pid = json.load(f)["pid"]
        os.kill(pid, signal.SIGKILL)
        job = c.api.wait_job(jid, timeout=300)
        check_eq(job["state"], "succeeded", f"the restarted job: {job['reason']}")
        check_eq(job["attempt"], 1, "one gang restart")
        first = [t for t in job["tasks"] if t["attempt"] == 0]
        check(any(t["index"] == 1 and t["state"] == "failed" and t["reason"]["code"] == "signal"
                  for t in first), f"the killed worker failed by signal: {first}")
        out = logs(c, jid, "worker/0") + logs(c, jid, "worker/1")
        m = re.findall(r"^resumed from epoch (\d+)$", out, re.M)
        check(len(m) == 2 and int(m[0]) >= 1, f"both ranks resumed from the checkpoint: {m}")
        acc, sha = final_lines(out)
        check(len(acc) == 2 and min(acc) >= 0.95, f"finished at >= 95 %: {acc}")
        check_eq(sha[0], sha[1], "identical parameters after the restart")
        check(job["checkpoint"], "the job names its checkpoint")
