"""Framework launchers end to end on loopback: the environment each task
really gets, ports that never collide, who decides a job's success, execs
inside tasks and their permissions, and a checkpoint that moves with a
restarted job from one node to another. (Real multi-node training runs in
test_multinode.py, across network namespaces.)"""
import json
import os
import subprocess
import sys

from harness import YARD, check, check_eq, cluster, spec, wait_until

PY = sys.executable

# Prints the task's environment as one JSON line.
ENV_DUMP = [PY, "-c", "import json, os; print(json.dumps(dict(os.environ)))"]


def task_env(c, jid, task):
    """The environment task printed. A job that succeeded may still have
    tasks stopping (mxnet's server, once its workers decided), whose output
    the agent ships as they end: wait for the line."""
    def printed():
        for line in c.api.log(jid, task).decode().splitlines():
            if line.startswith("{"):
                return json.loads(line)
        return None
    return wait_until(printed, 15, f"{task} to have printed its environment")


def test_pytorch_environment_across_two_nodes():
    with cluster("launch-pt") as c:
        c.start_master()
        c.start_agent("a", gpus="sim:1", extra=["--advertise-addr", "127.0.0.1", "--ports", "31000-31009"])
        c.start_agent("b", gpus="sim:2", extra=["--advertise-addr", "127.0.0.1", "--ports", "31100-31109"])
        st, job = c.api.submit(spec(ENV_DUMP, name="pt", replicas=3, gpus=1, framework="pytorch"))
        check_eq(st, 201, "submit")
        done = c.api.wait_job(job["id"])
        check_eq(done["state"], "succeeded", "job state")
        tasks = {t["index"]: t for t in done["tasks"]}
        envs = {i: task_env(c, job["id"], f"worker/{i}") for i in tasks}
        rank0 = tasks[0]
        for i, t in tasks.items():
            e = envs[i]
            lo = 31000 if t["node"] == "a" else 31100
            check(lo <= t["port"] <= lo + 9, f"worker/{i} port {t['port']} outside its node's range")
            check_eq(e["MASTER_ADDR"], "127.0.0.1", "MASTER_ADDR")
            check_eq(e["MASTER_PORT"], str(rank0["port"]), "MASTER_PORT is rank 0's port")
            check_eq(e["WORLD_SIZE"], "3", "WORLD_SIZE")
            check_eq(e["RANK"], str(i), "RANK")
            same = sorted(k for k, o in tasks.items() if o["node"] == t["node"])
            check_eq(e["LOCAL_RANK"], str(same.index(i)), f"LOCAL_RANK of worker/{i}")
            check_eq(e["LOCAL_WORLD_SIZE"], str(len(same)), f"LOCAL_WORLD_SIZE of worker/{i}")
            check_eq(e["NODE_RANK"], "0" if t["node"] == rank0["node"] else "1", "NODE_RANK")
            check_eq(e["PET_NNODES"], "3", "PET_NNODES")
            check_eq(e["PET_NODE_RANK"], str(i), "PET_NODE_RANK")
            check_eq(e["PET_MASTER_ADDR"], "127.0.0.1", "PET_MASTER_ADDR")
            check_eq(e["PET_MASTER_PORT"], str(rank0["port"]), "PET_MASTER_PORT")
            check_eq(e["PET_NPROC_PER_NODE"], "1", "PET_NPROC_PER_NODE")
            check_eq(e["GLOO_SOCKET_IFNAME"], "lo", "GLOO_SOCKET_IFNAME names the address's interface")
            check_eq(e["NCCL_SOCKET_IFNAME"], "lo", "NCCL_SOCKET_IFNAME")
            check_eq(e["CUDA_VISIBLE_DEVICES"], ",".join(map(str, t["gpus"])), "CUDA_VISIBLE_DEVICES")
            check_eq(e["YARD_MASTER"], c.url, "YARD_MASTER")
        nodes = {n["name"]: n for n in c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"]}
        check_eq(nodes["a"]["iface"], "lo", "the node reports its interface")
        check_eq(nodes["b"]["ports"], [31100, 31109], "the node reports its port range")


def test_ports_never_collide_on_a_node():
    with cluster("launch-ports") as c:
        c.start_master()
        c.start_agent("a", gpus="sim:4", extra=["--ports", "31200-31203"])
        hold = [PY, "-c", "import time; time.sleep(60)"]
        ids = []
        for i in range(4):
            st, job = c.api.submit(spec(hold, name=f"p{i}", gpus=1, framework="jax"))
            check_eq(st, 201, "submit")
            ids.append(job["id"])
        wait_until(lambda: all(c.api.job(j)["state"] == "running" for j in ids), 30, "4 jobs running")
        ports = [c.api.job(j)["tasks"][0]["port"] for j in ids]
        check_eq(sorted(ports), [31200, 31201, 31202, 31203], "four jobs, four distinct ports")
        # a port is free again once its task has stopped
        c.api.json("POST", f"/v1/jobs/{ids[1]}/cancel", expect=200)
        c.api.wait_job(ids[1])
        wait_until(lambda: c.api.job(ids[1])["tasks"][0]["state"] == "killed", 30, "task stopped")
        st, job = c.api.submit(spec(ENV_DUMP, name="again", gpus=1, framework="jax"))
        done = c.api.wait_job(job["id"])
        check_eq(done["tasks"][0]["port"], ports[1], "the freed port is reused")
        e = task_env(c, job["id"], "worker/0")
        check_eq(e["JAX_COORDINATOR_ADDRESS"], f"127.0.0.1:{ports[1]}", "JAX_COORDINATOR_ADDRESS")
        check_eq(e["JAX_NUM_PROCESSES"], "1", "JAX_NUM_PROCESSES")
        check_eq(e["JAX_PROCESS_ID"], "0", "JAX_PROCESS_ID")
        for j in ids:
            c.api.json("POST", f"/v1/jobs/{j}/cancel")


def test_tensorflow_chief_decides_and_ps_is_stopped():
    with cluster("launch-tf") as c:
        c.start_master()
        c.start_agent("a", gpus="none")
        dump_then = lambda code: [PY, "-c", "import json, os, time; print(json.dumps(dict(os.environ)), flush=True); " + code]
        s = {"name": "tf", "framework": "tensorflow", "command": dump_then("time.sleep(300)"),
             "tasks": {"chief": {"cpus": 0.1, "command": dump_then("time.sleep(1)")},
                       "worker": {"replicas": 2, "cpus": 0.1}, "ps": {"cpus": 0.1}}}
        st, job = c.api.submit(s)
        check_eq(st, 201, "submit")
        done = c.api.wait_job(job["id"], timeout=60)
        check_eq(done["state"], "succeeded", "the chief's success is the job's")
        states = {f"{t['role']}/{t['index']}": t["state"] for t in done["tasks"]}
        check_eq(states["chief/0"], "succeeded", "chief")
        wait_until(lambda: all(t["state"] == "killed" for t in c.api.job(job["id"])["tasks"]
                               if t["role"] != "chief"), 30, "workers and ps stopped")
        tasks = {f"{t['role']}/{t['index']}": t for t in done["tasks"]}
        addr = lambda k: f"127.0.0.1:{tasks[k]['port']}"
        want_cluster = {"chief": [addr("chief/0")], "worker": [addr("worker/0"), addr("worker/1")],
                        "ps": [addr("ps/0")]}
        for k in tasks:
            tf = json.loads(task_env(c, job["id"], k)["TF_CONFIG"])
            check_eq(tf["cluster"], want_cluster, f"TF_CONFIG cluster of {k}")
            role, index = k.split("/")
            check_eq(tf["task"], {"type": role, "index": int(index)}, f"TF_CONFIG task of {k}")
        check_eq(len(set(t["port"] for t in tasks.values())), 4, "every task its own port")


def test_mxnet_environment_and_workers_decide():
    with cluster("launch-mx") as c:
        c.start_master()
        c.start_agent("a", gpus="none")
        # the workers end (and so the job) only once the scheduler and the
        # server have printed: they are stopped then, and may not have
        # printed yet otherwise
        up = os.path.join(c.dir, "up")
        os.makedirs(up)
        sleep = [PY, "-c", "import json, os, sys, time; print(json.dumps(dict(os.environ)), flush=True); "
                 f"open(os.path.join({up!r}, os.environ['DMLC_ROLE']), 'w').close(); time.sleep(300)"]
        worker = [PY, "-c", "import json, os, time\n"
                  f"while not all(os.path.exists(os.path.join({up!r}, r)) for r in ('scheduler', 'server')):\n"
                  "    time.sleep(0.05)\n"
                  "print(json.dumps(dict(os.environ)))"]
        s = {"name": "mx", "framework": "mxnet", "command": worker,
             "tasks": {"scheduler": {"cpus": 0.1, "command": sleep}, "server": {"cpus": 0.1, "command": sleep},
                       "worker": {"replicas": 2, "cpus": 0.1}}}
        st, job = c.api.submit(s)
        check_eq(st, 201, "submit")
        done = c.api.wait_job(job["id"], timeout=60)
        check_eq(done["state"], "succeeded", "all workers done: the job is")
        sched = next(t for t in done["tasks"] if t["role"] == "scheduler")
        for t in done["tasks"]:
            k = f"{t['role']}/{t['index']}"
            e = task_env(c, job["id"], k)
            check_eq(e["DMLC_ROLE"], t["role"], f"DMLC_ROLE of {k}")
            check_eq(e["DMLC_PS_ROOT_URI"], "127.0.0.1", "DMLC_PS_ROOT_URI")
            check_eq(e["DMLC_PS_ROOT_PORT"], str(sched["port"]), "DMLC_PS_ROOT_PORT")
            check_eq(e["DMLC_NUM_SERVER"], "1", "DMLC_NUM_SERVER")
            check_eq(e["DMLC_NUM_WORKER"], "2", "DMLC_NUM_WORKER")
            if t["role"] == "worker":
                check_eq(e["DMLC_WORKER_ID"], str(t["index"]), "DMLC_WORKER_ID")
            else:
                check("DMLC_WORKER_ID" not in e, f"{k} has no DMLC_WORKER_ID")


def test_caffe_expands_gpus_and_specs_are_checked_per_framework():
    with cluster("launch-caffe") as c:
        c.start_master()
        c.start_agent("a", gpus="sim:4")
        st, job = c.api.submit(spec(["echo", "-gpu", "{gpus}", "x{gpus}y"], gpus=2, framework="caffe"))
        check_eq(st, 201, "submit")
        done = c.api.wait_job(job["id"])
        # the task sees its GPUs as devices 0..N-1 (CUDA_VISIBLE_DEVICES)
        check_eq(c.api.log(job["id"]).decode(), "-gpu 0,1 x0,1y\n", "caffe's {gpus}")
        bad = [
            (spec(["x", "{gpus}"], gpus=0, framework="caffe"), "tasks.worker.gpus"),
            (spec(["x"], replicas=2, framework="caffe"), "tasks.worker.replicas"),
            ({"framework": "tensorflow", "command": ["x"], "tasks": {"boss": {}}}, "tasks.boss"),
            ({"framework": "tensorflow", "command": ["x"], "tasks": {"chief": {"replicas": 2}}},
             "tasks.chief.replicas"),
            ({"framework": "mxnet", "command": ["x"], "tasks": {"worker": {}}}, "tasks.scheduler"),
            ({"framework": "mxnet", "command": ["x"], "tasks": {"scheduler": {}}}, "tasks.worker"),
            ({"framework": "mpi", "command": ["x"], "tasks": {"a": {}, "b": {}}}, "tasks"),
            ({"framework": "theano", "command": ["x"], "tasks": {"worker": {}}}, "framework"),
        ]
        for s, field in bad:
            st, doc = c.api.submit(s)
            check_eq(st, 400, f"{s} refused")
            check_eq(doc["error"]["field"], field, f"the field named for {s}")
            check(doc["error"]["message"].startswith(field + ":"), f"message names {field}: {doc}")
        check_eq(len(c.api.json("GET", "/v1/jobs", expect=200)[1]["jobs"]), 1, "nothing refused was stored")


def test_exec_inside_a_task_and_who_may():
    with cluster("launch-exec") as c:
        c.start_master()
        c.start_agent("a", gpus="sim:2", extra=["--advertise-addr", "127.0.0.1"])
        c.start_agent("b", gpus="sim:2", extra=["--advertise-addr", "127.0.0.2"])
        hold = [PY, "-c", "import json, os, time; print(json.dumps(dict(os.environ)), flush=True); time.sleep(120)"]
        alice, bob = c.user_token("alice"), c.user_token("bob")
        st, job = c.api.submit(spec(hold, replicas=2, gpus=2, framework="pytorch"), token=alice)
        jid = job["id"]
        wait_until(lambda: c.api.job(jid)["state"] == "running", 30, "job running")
        wait_until(lambda: c.api.log(jid, "worker/0") and c.api.log(jid, "worker/1"), 30, "both tasks' output")
        token = task_env(c, jid, "worker/0")["YARD_JOB_TOKEN"]
        other = c.api.submit(spec(hold, gpus=0), token=bob)[1]["id"]
        wait_until(lambda: c.api.job(other)["state"] == "running", 30, "bob's job running")
        body = {"host": "127.0.0.2", "argv": ["/bin/sh", "-c", "echo exec on $YARD_NODE gpus $CUDA_VISIBLE_DEVICES; exit 7"]}
        path = f"/v1/jobs/{jid}/exec"
        check_eq(c.api.json("POST", path, body, token=bob)[0], 403, "another user may not exec")
        check_eq(c.api.json("POST", f"/v1/jobs/{other}/exec", body, token=token)[0], 403,
                 "a job token acts for its own job only")
        check_eq(c.api.json("POST", path, body, token=token[:-4] + "0000")[0], 401, "a forged job token")
        check_eq(c.api.json("GET", "/v1/jobs", token=token)[0], 403, "a job token reads nothing else")
        st, doc = c.api.json("POST", path, {"host": "10.1.1.1", "argv": ["true"]}, token=token)
        check_eq((st, doc["error"]["field"]), (404, "host"), "a host the job is not on")
        st, doc = c.api.json("POST", path, {"host": "b", "argv": []}, token=token)
        check_eq((st, doc["error"]["field"]), (400, "argv"), "an empty argv")
        st, ex = c.api.json("POST", path, body, token=token, expect=201)
        check_eq(ex["node"], "b", "the exec lands on the node that holds the address")
        check_eq(ex["task_name"], "worker/1", "in the job's task there")
        st, res = c.api.json("GET", f"{path}/{ex['id']}?wait=20", token=token, expect=200)
        check_eq((res["state"], res["exit_code"]), ("exited", 7), "the exec's exit status")
        out = c.api.log(jid, "worker/1").decode()
        gpus = ",".join(map(str, c.api.job(jid)["tasks"][1]["gpus"]))
        check(f"exec on b gpus {gpus}" in out, f"the exec wrote to the task's log with its GPUs: {out!r}")
        # the mpi helper says the same, as mpirun's remote launch agent
        env = dict(os.environ, YARD_MASTER=c.url, YARD_JOB_ID=str(jid), YARD_JOB_TOKEN=token)
        r = subprocess.run([YARD, "mpi-rsh", "-x", "127.0.0.2", "exit", "5"], env=env, capture_output=True)
        check_eq(r.returncode, 5, f"mpi-rsh passes the exit status on: {r.stderr!r}")
        c.api.json("POST", f"/v1/jobs/{jid}/cancel", token=alice, expect=200)
        c.api.wait_job(jid)
        check_eq(c.api.json("POST", path, body, token=token)[0], 401, "a job token dies with its job")
        check_eq(c.api.json("POST", path, body, token=c.admin_token)[0], 409, "no exec in an ended job")
        c.api.json("POST", f"/v1/jobs/{other}/cancel", token=bob)


CKPT = r"""
import os, sys
d, rank, attempt = os.environ["YARD_CHECKPOINT_DIR"], int(os.environ["RANK"]), int(os.environ["YARD_RESTART_COUNT"])
path = os.path.join(d, "state")
seen = open(path).read() if os.path.exists(path) else "none"
print(f"rank {rank} attempt {attempt} on {os.environ['YARD_NODE']} found {seen}", flush=True)
if rank == 0:
    with open(path, "w") as f:
        f.write(f"written-by-attempt-{attempt}-on-{os.environ['YARD_NODE']}")
if attempt == 0 and rank == 1:
    import time
    time.sleep(1)  # rank 0 has written its checkpoint by then
    sys.exit(3)
"""


def test_checkpoint_moves_with_a_restart_to_another_node():
    with cluster("launch-ckpt") as c:
        c.start_master()
        c.start_agent("a", gpus="sim:1")
        c.start_agent("b", gpus="sim:1")
        s = spec([PY, "-c", CKPT], replicas=2, gpus=1, framework="pytorch", restart={"max": 1})
        st, job = c.api.submit(s)
        done = c.api.wait_job(job["id"], timeout=60)
        check_eq(done["state"], "succeeded", f"the restarted job: {done['reason']}")
        check_eq(done["attempt"], 1, "one restart")
        first = {t["index"]: t["node"] for t in done["tasks"] if t["attempt"] == 0}
        out = c.api.log(job["id"], "worker/0").decode() + c.api.log(job["id"], "worker/1").decode()
        want = f"written-by-attempt-0-on-{first[0]}"
        for rank in (0, 1):
            check(f"rank {rank} attempt 1" in out and f"found {want}" in out.split(f"rank {rank} attempt 1")[1].split("\n")[0],
                  f"rank {rank} of the restart read rank 0's checkpoint on its own node: {out!r}")
        check(done["checkpoint"] and done["checkpoint"].startswith("sha256:"), "the job names its checkpoint")
        # it is a manifest of chunks in the master's store, readable by its users
        st, man = c.api.json("GET", f"/v1/manifests/{done['checkpoint']}")
        check_eq(st, 200, f"the checkpoint's manifest: {man}")
        check(man["files"] and all(f["chunks"] or not f["size"] for f in man["files"]),
              f"the checkpoint's files, in chunks: {man}")


def test_caffe_log_replay_becomes_metrics():
    """examples/caffe/job-replay.yaml prints a Caffe training log: the agent's
    parser turns Caffe's own lines into series, with no @yard line at all."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with cluster("launch-caffe-log") as c:
        c.start_master()
        c.start_agent("a", gpus="none")
        r = c.cli("submit", os.path.join(root, "examples", "caffe", "job-replay.yaml"), "--output", "json",
                  check_rc=0)
        jid = json.loads(r.stdout)["id"]
        check_eq(c.api.wait_job(jid)["state"], "succeeded", "the replay job")
        _, doc = c.api.json("GET", f"/v1/jobs/{jid}/metrics", expect=200)
        series = {s["name"]: s["points"] for s in doc["series"]}
        check("@yard" not in c.api.log(jid, "trainer/0").decode(), "the log has no @yard line")
        for name in ("loss", "lr", "test/accuracy"):
            check(name in series, f"series {name} from Caffe's lines: {sorted(series)}")
        loss = series["loss"]
        check_eq([p[0] for p in loss], sorted(p[0] for p in loss), "loss by iteration")
        check(loss[-1][1] < loss[0][1], f"the loss falls: {loss[0][1]} -> {loss[-1][1]}")
        check(series["test/accuracy"][-1][1] > 0.9, "the final test accuracy")
        r = c.cli("metrics", str(jid), check_rc=0)
        check("test/accuracy" in r.stdout.decode(), "yard metrics lists the Caffe series")
