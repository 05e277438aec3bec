"""The docker runtime (src/agent/runtime_docker.c, shim_docker.c) against a
real dockerd, and against Podman's Docker-compatible service, each started
by the test with its own data root and socket (engines.py), `yard exec`
(-t, -i, the exit status) into a container task of each. The images are
made from a debootstrap minbase rootfs cached under the build dir.

Skipped (harness.Skip, its reason printed) only when the engine cannot
start here."""
import os
import signal
import tempfile
import time

import engines
from harness import ROOT, YARD, check, check_eq, cluster, spec, wait_until
from ptycli import exec_in_container

# a first run builds the rootfs with debootstrap (about a minute)
TIMEOUT = 900

BUILD_DIR = os.path.dirname(os.path.abspath(YARD)) if os.path.isabs(YARD) else os.path.join(ROOT, "build-asan")


def image_spec(image, command, name="c", gpus=0, memory=None, **extra):
    s = spec(command, name=name, gpus=gpus, memory=memory, **extra)
    s["image"] = image
    return s


def make_dev_dir(n):
    d = tempfile.mkdtemp(prefix="yard-dev-")
    for i in range(n):
        os.mknod(f"{d}/nvidia{i}", 0o666 | 0o020000, os.makedev(195, i))
    os.mknod(f"{d}/nvidiactl", 0o666 | 0o020000, os.makedev(195, 255))
    return d


def start_engine(kind):
    """The engine and two images that differ in /etc/yard-image. An engine
    that cannot start here raises engines.EngineUnavailable, a harness.Skip:
    the runner prints its reason and counts the test as skipped."""
    eng = engines.DockerEngine() if kind == "docker" else engines.PodmanEngine()
    try:
        tar = engines.base_rootfs(BUILD_DIR)
        a = engines.import_image(eng, tar, "yard-test/a", "1", extra_files={"etc/yard-image": b"image-a\n"})
        b = engines.import_image(eng, tar, "yard-test/b", "1", extra_files={"etc/yard-image": b"image-b\n"})
    except BaseException:
        eng.close()
        raise
    return eng, a, b


def submit(c, s):
    status, doc = c.api.submit(s)
    check_eq(status, 201, f"submit {s['name']}: {doc}")
    return doc["id"]


def containers_of(eng, job_id):
    return engines.list_containers(eng, label=f"yard.job={job_id}")


def expected_stdout():
    return b"first line\n" + b"x" * 100000 + b"\n" + bytes(range(256)) + b"\r\nno newline at the end"


def test_docker_images_devices_limits_logs():
    eng, img_a, img_b = start_engine("docker")
    dev = make_dev_dir(4)
    try:
        with cluster("containers") as c:
            c.start_master()
            c.start_agent("n1", gpus="sim:4", dev_dir=dev,
                          extra=["--runtime", "process,docker", "--docker-socket", eng.socket])
            node = c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"][0]
            check("docker" in node.get("runtimes", []), f"the node advertises docker: {node}")

            # two images at once on one agent: each sees its own filesystem
            # and only the device nodes of its own GPU
            probe = ("cat /etc/yard-image; ls /dev | grep nvidia | tr '\\n' ' '; echo; "
                     "echo CUDA=$CUDA_VISIBLE_DEVICES GPUS=$YARD_GPUS; "
                     "while [ ! -e $YARD_CHECKPOINT_DIR/go ]; do sleep 0.05; done")
            ja = submit(c, image_spec(img_a, ["/bin/bash", "-c", probe], name="a", gpus=1))
            jb = submit(c, image_spec(img_b, ["/bin/bash", "-c", probe], name="b", gpus=1))
            for j in (ja, jb):
                wait_until(lambda j=j: c.api.job(j)["state"] == "running", 60, f"job {j} runs")
            wait_until(lambda: len(containers_of(eng, ja)) == 1 and len(containers_of(eng, jb)) == 1,
                       30, "one container per job, both at once")
            for j in (ja, jb):  # the checkpoint dir is shared with the host
                open(os.path.join(c.dir, "agent-n1", "checkpoints", str(j), "go"), "w").close()
            outs = {}
            for j, want in ((ja, "image-a"), (jb, "image-b")):
                doc = c.api.wait_job(j, timeout=60)
                check_eq(doc["state"], "succeeded", f"job {j}")
                out = c.api.log(j).decode()
                lines = out.splitlines()
                check_eq(lines[0], want, f"job {j} sees its image's filesystem")
                gpus = c.api.job(j)["tasks"][0]["gpus"]
                check_eq(len(gpus), 1, "one GPU")
                check_eq(lines[1].split(), sorted([f"nvidia{gpus[0]}", "nvidiactl"]),
                         f"job {j} sees only its own device nodes")
                check(f"CUDA=0 GPUS={gpus[0]}" in out, f"CUDA numbers the container's GPUs from 0: {out!r}")
                outs[j] = gpus[0]
            check(outs[ja] != outs[jb], "two jobs, two GPUs")
            check_eq(containers_of(eng, ja) + containers_of(eng, jb), [], "containers removed when done")

            # logs byte for byte, stdout and stderr apart (minbase has no
            # python: bash's printf writes every byte value)
            script = ("printf 'first line\\n'; head -c 100000 /dev/zero | tr '\\0' x; printf '\\n'; "
                      "for i in $(seq 0 255); do printf \"\\\\$(printf %03o $i)\"; done; "
                      "printf '\\r\\nno newline at the end'; echo to stderr >&2")
            jl = submit(c, image_spec(img_a, ["/bin/bash", "-c", script], name="bytes"))
            check_eq(c.api.wait_job(jl, timeout=60)["state"], "succeeded", "bytes job")
            check_eq(c.api.log(jl), expected_stdout(), "stdout byte for byte")
            check_eq(c.api.log(jl, stream="stderr"), b"to stderr\n", "stderr apart")

            # the memory limit holds, and its breach is an OOM kill
            jm = submit(c, image_spec(img_a, ["/bin/bash", "-c",
                                                 "echo start; x=$(head -c 400000000 /dev/zero | tr '\\0' x); echo survived"],
                                         name="oom", memory="64MiB"))
            doc = c.api.wait_job(jm, timeout=120)
            check_eq(doc["state"], "failed", "the OOM job fails")
            check("oom_killed" in str(doc), f"OOM reported: {doc}")
            check(b"survived" not in c.api.log(jm), "the limit held")

            # an exit code passes through
            je = submit(c, image_spec(img_b, ["/bin/bash", "-c", "exit 7"], name="exit7"))
            doc = c.api.wait_job(je, timeout=60)
            check_eq(doc["state"], "failed", "exit 7 fails the job")
            check("exited with status 7" in str(doc), f"exit status named: {doc.get('reason')}")

            # a missing image is a clear failure, not a hang
            jn = submit(c, image_spec("yard-test/nosuch:1", ["/bin/true"], name="noimage"))
            doc = c.api.wait_job(jn, timeout=120)
            check_eq(doc["state"], "failed", "missing image fails")
            check("image_not_found" in str(doc) or "image_pull_failed" in str(doc),
                  f"the reason names the image problem: {doc.get('reason')}")
            check("yard-test/nosuch:1" in str(doc), "the reason names the image")
    finally:
        eng.close()
        for f in os.listdir(dev):
            os.unlink(os.path.join(dev, f))
        os.rmdir(dev)


def test_docker_cancel_and_agent_restart():
    eng, img_a, _ = start_engine("docker")
    try:
        with cluster("containers-restart") as c:
            c.start_master()
            extra = ["--runtime", "process,docker", "--docker-socket", eng.socket]
            c.start_agent("n1", gpus="sim:2", extra=extra)

            # a dataset is bound read-only into the container at the task's data dir
            ds = os.path.join(c.dir, "ds")
            os.makedirs(os.path.join(ds, "sub"))
            with open(os.path.join(ds, "sub", "hello.txt"), "w") as f:
                f.write("staged into a container\n")
            c.cli("data", "push", ds, "hello", check_rc=0)
            s = image_spec(img_a, ["/bin/bash", "-c", 'cat "$YARD_DATA_DIR/d/sub/hello.txt"; '
                                   'touch "$YARD_DATA_DIR/d/sub/x" 2>/dev/null && echo writable || echo read-only'],
                           name="data")
            s["data"] = [{"source": "yard://hello@1", "mount": "d"}]
            jd = submit(c, s)
            doc = c.api.wait_job(jd, timeout=60)
            check_eq(doc["state"], "succeeded", f"the container job with data: {doc.get('reason')}")
            check_eq(c.api.log(jd), b"staged into a container\nread-only\n", "the data, read-only, in the container")

            # a container task's YARD_OUTPUT_DIR is handed in as a process task's is
            jo = submit(c, image_spec(img_a, ["/bin/bash", "-c", 'mkdir -p "$YARD_OUTPUT_DIR/m" && '
                                              'echo weights > "$YARD_OUTPUT_DIR/m/model.txt"'], name="outs"))
            check_eq(c.api.wait_job(jo, timeout=60)["state"], "succeeded", "the container job with outputs")
            dest = os.path.join(c.dir, "outs-dl")
            wait_until(lambda: c.api.json("GET", f"/v1/jobs/{jo}/outputs")[1]["tasks"][0]["outputs"], 30,
                       "the container task's outputs listed")
            c.cli("download", str(jo), "--task", "worker/0", dest, check_rc=0)
            with open(os.path.join(dest, "m", "model.txt")) as f:
                check_eq(f.read(), "weights\n", "what the container wrote in its outputs, downloaded")

            # yard exec into the running container (ptycli.py), then cancel
            # stops the container and removes it
            jc = submit(c, image_spec(img_a, ["/bin/bash", "-c", "echo up; sleep 300"], name="cancel"))
            wait_until(lambda: b"up" in c.api.log(jc), 60, "the container runs")
            check_eq(len(containers_of(eng, jc)), 1, "one container")
            exec_in_container(c, jc, b"image-a\n")
            c.cli("cancel", str(jc), check_rc=0)
            check_eq(c.api.wait_job(jc, timeout=60)["state"], "cancelled", "cancelled")
            wait_until(lambda: containers_of(eng, jc) == [], 30, "the cancelled job's container is removed")

            # the agent and the task's shim die; the container goes on; the
            # restarted agent adopts it and no line is lost or repeated
            n = 60
            jr = submit(c, image_spec(img_a, ["/bin/bash", "-c",
                                                 f"for i in $(seq 1 {n}); do echo line $i; sleep 0.1; done"],
                                         name="adopt"))
            wait_until(lambda: b"line 5\n" in c.api.log(jr), 60, "the container writes")
            cid = containers_of(eng, jr)[0]["Id"]
            task_id = c.api.job(jr)["tasks"][0]["id"]
            shim_pid = int(open(os.path.join(c.dir, "agent-n1", "tasks", str(task_id), "shim.pid")).read())
            c.agents["n1"].kill(signal.SIGKILL)
            c.agents["n1"].p.wait(10)  # dead before its shim dies, or it would see the shim go
            os.kill(shim_pid, signal.SIGKILL)
            time.sleep(0.5)
            check_eq([x["Id"] for x in containers_of(eng, jr)], [cid], "the container outlives agent and shim")
            c.start_agent("n1", gpus="sim:2", extra=extra)
            doc = c.api.wait_job(jr, timeout=60)
            check_eq(doc["state"], "succeeded", f"the adopted container's job succeeds: {doc.get('reason')}")
            want = "".join(f"line {i}\n" for i in range(1, n + 1)).encode()
            check_eq(c.api.log(jr), want, "every line once, in order")
            wait_until(lambda: containers_of(eng, jr) == [], 30, "the adopted container is removed")
    finally:
        eng.close()


def test_podman_same_code_path():
    eng, img_a, img_b = start_engine("podman")
    try:
        with cluster("containers-podman") as c:
            c.start_master()
            c.start_agent("n1", gpus="sim:2",
                          extra=["--runtime", "process,docker", "--docker-socket", eng.socket])
            node = c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"][0]
            check("Podman" in (node.get("engine") or ""), f"the agent names Podman as its engine: {node}")
            ja = submit(c, image_spec(img_a, ["/bin/bash", "-c", "cat /etc/yard-image; printf 'tail'; exit 3"],
                                         name="pa"))
            jb = submit(c, image_spec(img_b, ["/bin/bash", "-c", "cat /etc/yard-image"], name="pb"))
            doc = c.api.wait_job(ja, timeout=120)
            check_eq(doc["state"], "failed", "exit 3 fails")
            check("exited with status 3" in str(doc), f"exit status named: {doc.get('reason')}")
            check_eq(c.api.log(ja), b"image-a\ntail", "podman: the image's filesystem, the bytes exactly")
            check_eq(c.api.wait_job(jb, timeout=120)["state"], "succeeded", "second image")
            check_eq(c.api.log(jb), b"image-b\n", "podman: the second image")
            # yard exec through Podman's exec API (ptycli.py)
            js = submit(c, image_spec(img_b, ["/bin/bash", "-c", "echo up; sleep 300"], name="pexec"))
            wait_until(lambda: b"up" in c.api.log(js), 120, "podman: the container runs")
            exec_in_container(c, js, b"image-b\n")
            c.cli("cancel", str(js), check_rc=0)
            check_eq(c.api.wait_job(js, timeout=60)["state"], "cancelled", "podman: cancelled")
            wait_until(lambda: containers_of(eng, ja) + containers_of(eng, jb) + containers_of(eng, js) == [], 30,
                       "podman: containers removed")
    finally:
        eng.close()
