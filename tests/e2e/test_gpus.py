"""GPU isolation: no two concurrent tasks share a GPU, CUDA_VISIBLE_DEVICES
matches the master's placement, and a task can open only its own
/dev/nvidiaN (dummy device nodes made by the test)."""
import os
import tempfile
import time

from harness import check, check_eq, cluster, spec, wait_until

PROBE = r"""
import errno, os, sys, time
dev = sys.argv[1]; n = int(sys.argv[2]); barrier = sys.argv[3]
print("visible=" + os.environ["CUDA_VISIBLE_DEVICES"], flush=True)
for i in range(n):
    try:
        os.close(os.open(f"{dev}/nvidia{i}", os.O_RDWR))
        res = "opened"
    except OSError as e:
        res = errno.errorcode.get(e.errno, str(e.errno))
    print(f"nvidia{i}={res}", flush=True)
deadline = time.time() + 60
while not os.path.exists(barrier) and time.time() < deadline:
    time.sleep(0.02)
"""


def make_dev_dir(n):
    d = tempfile.mkdtemp(prefix="yard-dev-")
    for i in range(n):
        os.mknod(f"{d}/nvidia{i}", 0o666 | 0o020000, os.makedev(195, i))
    os.mknod(f"{d}/nvidiactl", 0o666 | 0o020000, os.makedev(195, 255))
    return d


def test_device_isolation():
    dev = make_dev_dir(4)
    barrier = os.path.join(dev, "go")
    try:
        with cluster("gpus") as c:
            c.start_master()
            c.start_agent("n1", gpus="sim:4", dev_dir=dev)
            ids = []
            for k in range(4):
                _, j = c.api.submit(spec(["python3", "-c", PROBE, dev, "4", barrier],
                                         name=f"probe{k}", gpus=1))
                ids.append(j["id"])
            # all four hold a GPU at the same time
            wait_until(lambda: all(c.api.job(i)["state"] == "running" for i in ids), 60,
                       "four 1-GPU jobs running at once")
            wait_until(lambda: all(c.api.log(i).count(b"\n") >= 5 for i in ids), 60,
                       "every probe to report")
            held = []
            for i in ids:
                j = c.api.job(i)
                gpus = j["tasks"][0]["gpus"]
                check_eq(len(gpus), 1, f"GPUs of job {i}")
                held.append(gpus[0])
                lines = dict(l.split("=", 1) for l in c.api.log(i).decode().split())
                check_eq(lines["visible"], str(gpus[0]), f"CUDA_VISIBLE_DEVICES of job {i}")
                for g in range(4):
                    # a dummy node has no driver: an allowed open fails with ENXIO
                    want = "ENXIO" if g == gpus[0] else "EPERM"
                    check_eq(lines[f"nvidia{g}"], want, f"job {i} (GPU {gpus[0]}) opening nvidia{g}")
            check_eq(sorted(held), [0, 1, 2, 3], "GPUs held by four concurrent jobs")
            open(barrier, "w").close()
            for i in ids:
                check_eq(c.api.wait_job(i)["state"], "succeeded", f"state of probe job {i}")
    finally:
        for f in os.listdir(dev):
            os.unlink(os.path.join(dev, f))
        os.rmdir(dev)


def test_no_gpu_shared_over_time():
    with cluster("share") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        c.start_agent("n2", gpus="sim:1")
        ids = []
        for k in range(9):
            g = 2 if k % 3 == 0 else 1
            cmd = "date +%s.%N; echo $CUDA_VISIBLE_DEVICES; sleep 0.3; date +%s.%N"
            _, j = c.api.submit(spec(["/bin/sh", "-c", cmd],
                                     name=f"s{k}", gpus=g))
            ids.append(j["id"])
        spans = []
        for i in ids:
            j = c.api.wait_job(i, timeout=90)
            check_eq(j["state"], "succeeded", f"state of job {i}")
            t = j["tasks"][0]
            start, visible, end = c.api.log(i).decode().split()
            check_eq(visible, ",".join(map(str, t["gpus"])), f"CUDA_VISIBLE_DEVICES of job {i}")
            for g in t["gpus"]:
                # the task's own clock: when it really ran
                spans.append((t["node"], g, float(start), float(end), i))
        for a in spans:
            for b in spans:
                if a[4] < b[4] and a[0] == b[0] and a[1] == b[1]:
                    overlap = a[2] < b[3] and b[2] < a[3]
                    check(not overlap, f"jobs {a[4]} and {b[4]} held {a[0]} GPU {a[1]} at the same time")


def test_gpus_placement_pools_labels_islands():
    """Agents' --pool and --label and their GPU islands reach the master; jobs
    go to their pool and labels; a job's GPUs stay in one island and small
    jobs fill the smallest block that fits."""
    with cluster("place") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:8", extra=["--label", "net=ib"])
        c.start_agent("n2", gpus="sim:8:SIM-H100", extra=["--pool", "batch", "--label", "net=eth"])
        nodes = {n["name"]: n for n in c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"]}
        check_eq((nodes["n1"]["pool"], nodes["n1"]["labels"]), ("default", {"net": "ib"}), "n1 pool and labels")
        check_eq((nodes["n2"]["pool"], nodes["n2"]["labels"]), ("batch", {"net": "eth"}), "n2 pool and labels")
        check_eq([g["island"] for g in nodes["n1"]["gpus"]], [0, 0, 0, 0, 4, 4, 4, 4], "n1 GPU islands")
        r = c.cli("nodes", check_rc=0).stdout.decode()
        check("batch" in r and "net=eth" in r, f"nodes table shows pool and labels: {r!r}")

        # refused at submit: no node could ever hold them
        for extra, field in (({"pool": "nowhere"}, "pool"),
                             ({"placement": {"labels": {"net": "eth"}}}, "placement.labels"),
                             ({"placement": {"gpu_memory": "100GiB"}}, "placement.gpu_memory")):
            status, doc = c.api.submit(spec(["/bin/true"], gpus=1, **extra))
            check_eq((status, doc["error"]["field"]), (400, field), f"submit with {extra}")

        hold = ["/bin/sh", "-c", "echo $CUDA_VISIBLE_DEVICES; sleep 60"]
        _, batch = c.api.submit(spec(hold, name="b", gpus=4, pool="batch"))
        _, small = c.api.submit(spec(hold, name="s", gpus=2, placement={"labels": {"net": "ib"}}))
        running = lambda i: c.api.job(i)["state"] == "running"
        wait_until(lambda: running(batch["id"]) and running(small["id"]), 60, "two jobs running")
        _, big = c.api.submit(spec(hold, name="g", gpus=4))
        wait_until(lambda: running(big["id"]), 60, "the 4-GPU job running")
        _, small2 = c.api.submit(spec(hold, name="s2", gpus=2))
        wait_until(lambda: running(small2["id"]), 60, "the second 2-GPU job running")
        t = {k: c.api.job(j["id"])["tasks"][0] for k, j in
             (("batch", batch), ("small", small), ("big", big), ("small2", small2))}
        check_eq(t["batch"]["node"], "n2", "node of the batch-pool job")
        check_eq(len({g // 4 for g in t["batch"]["gpus"]}), 1, "the batch job's GPUs in one island")
        check_eq(t["small"]["node"], "n1", "node of the net=ib job")
        check_eq((t["big"]["node"], sorted(t["big"]["gpus"])), ("n1", [4, 5, 6, 7]),
                 "the 4-GPU job takes the whole free island")
        check_eq((t["small2"]["node"], sorted(t["small2"]["gpus"] + t["small"]["gpus"])),
                 ("n1", [0, 1, 2, 3]), "the 2-GPU jobs share the other island")
        for j in (batch, small, big, small2):
            c.api.json("POST", f"/v1/jobs/{j['id']}/cancel", expect=200)
        for j in (batch, small, big, small2):
            c.api.wait_job(j["id"])
        # what the agents reported survives a master restart (read from the store)
        for a in ("n1", "n2"):
            c.agents[a].stop()
        c.master.stop()
        c.start_master()
        nodes = {n["name"]: n for n in c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"]}
        check_eq((nodes["n2"]["pool"], nodes["n2"]["labels"]), ("batch", {"net": "eth"}),
                 "n2 pool and labels after a master restart")
        check_eq([g["island"] for g in nodes["n1"]["gpus"]], [0, 0, 0, 0, 4, 4, 4, 4],
                 "n1 GPU islands after a master restart")


def test_gpu_utilisation_in_nodes():
    """An agent with NVML (the fake one: GPU i is i*10 % busy) reports each
    GPU's utilisation; GET /v1/nodes shows it; simulated GPUs show null."""
    from harness import YARD
    lib = os.path.join(os.path.dirname(os.path.abspath(YARD)), "tests", "fakenvml", "libfakenvml.so")
    check(os.path.exists(lib), f"no fake NVML at {lib}")
    os.environ["YARD_NVML_LIBRARY"] = lib
    os.environ["FAKE_NVML_GPUS"] = "3"
    with cluster("gpu-util") as c:
        c.start_master()
        c.start_agent("nv", gpus="auto")
        c.start_agent("sim", gpus="sim:2")

        def nodes():
            _, doc = c.api.json("GET", "/v1/nodes", expect=200)
            return {n["name"]: n for n in doc["nodes"]}

        nv = wait_until(lambda: (lambda n: n if n.get("nv") and n["nv"]["gpus"][2]["util"] is not None
                                 else None)(nodes()), 30, "utilisation of the NVML node's GPUs")["nv"]
        check_eq([g["util"] for g in nv["gpus"]], [0, 10, 20], "utilisation of the fake NVML's GPUs")
        check_eq([g["util"] for g in nodes()["sim"]["gpus"]], [None, None], "utilisation of simulated GPUs")
