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
