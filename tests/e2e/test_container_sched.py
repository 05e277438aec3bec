"""Jobs with an image on the master's side: on a cluster where no node has a
container runtime they are refused at submit, or with wait_for_nodes wait
with reason infeasible; while the runtime's nodes are busy or gone they wait
with no_container_runtime; they go only to a node
that registered the docker runtime, and its assignment names the image; bad
image references are refused at submit; what an agent said of its runtimes
and engine survives a master restart.

The docker node here is a registration made by the test (POST /v1/agents with
the join token), not a running agent: the master's side needs no Docker."""
import json
import os

from harness import check, check_eq, cluster, spec, wait_until

IMAGE = "debian:bookworm"


def queue_entry(api, jid):
    return [e for e in api.json("GET", "/v1/queue", expect=200)[1]["queue"] if e["id"] == jid]


def nodes_by_name(api):
    return {n["name"]: n for n in api.json("GET", "/v1/nodes", expect=200)[1]["nodes"]}


def join_token(c):
    with open(os.path.join(c.data_dir, "join-token")) as f:
        return f.read().strip()


def test_image_job_waits_without_container_runtime():
    with cluster("ctr-wait") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:1")
        api = c.api
        n1 = nodes_by_name(api)["n1"]
        check_eq((n1["runtimes"], n1["engine"]), (["process"], None), "a process agent's runtimes")

        status, doc = api.submit(spec(["/bin/true"], name="img", image=IMAGE))
        check_eq((status, doc["error"]["code"], doc["error"]["field"]), (400, "invalid_spec", "image"),
                 f"an image job on a process-only cluster is refused: {doc}")
        want = (f"image: '{IMAGE}' needs a node with a container runtime, but none of the 1 node "
                "in pool 'default' has one")
        check_eq(doc["error"]["message"], want + " (set placement.wait_for_nodes: true to queue anyway)",
                 "the refusal's message")
        status, job = api.submit(spec(["/bin/true"], name="img", image=IMAGE,
                                      placement={"wait_for_nodes": True}))
        check_eq(status, 201, f"submitting it with wait_for_nodes: {job}")
        check_eq(job["spec"]["image"], IMAGE, "the image in the stored spec")
        q = wait_until(lambda: (lambda e: e if e and e[0]["reason"] and
                                e[0]["reason"]["code"] == "infeasible" else None)(
                                    queue_entry(api, job["id"])), 10, "the reason infeasible")
        check_eq(q[0]["reason"]["message"], want, "the reason's message")
        r = c.cli("show", str(job["id"]), check_rc=0).stdout.decode()
        check(f"infeasible: image: '{IMAGE}' needs a node with a container runtime" in r,
              f"yard show gives the reason: {r!r}")
        check(f"image        {IMAGE}" in r, f"yard show names the image: {r!r}")

        # a job without an image is not held up by it
        _, plain = api.submit(spec(["/bin/true"], name="plain"))
        check_eq(api.wait_job(plain["id"])["state"], "succeeded", "the process job beside it")
        check_eq(api.job(job["id"])["state"], "queued", "the image job still waits")

        # bad references are refused at submit, naming the field
        for ref, words in (("Ubuntu:22.04", "repository names must be lowercase"),
                           ("debian:", "the tag must be"),
                           ("debian@sha256:abc", "the digest must be sha256:"),
                           ("a" * 256, "longer than 255 characters")):
            status, doc = api.submit(spec(["/bin/true"], image=ref))
            check_eq(status, 400, f"HTTP status for image {ref!r}")
            err = doc["error"]
            check_eq((err["code"], err["field"]), ("invalid_spec", "image"), f"error for image {ref!r}")
            check(err["message"].startswith("image: \"") and words in err["message"],
                  f"message for image {ref!r}: {err['message']!r}")
        status, doc = api.submit(spec(["/bin/true"], image=5))
        check_eq((status, doc["error"]["field"]), (400, "image"), "an image that is not a string")
        # mpi's ranks run yard's own helpers, which no image has
        for fw in ("mpi", "horovod"):
            status, doc = api.submit(spec(["/bin/true"], framework=fw, image=IMAGE))
            check_eq((status, doc["error"]["field"]), (400, "image"), f"framework {fw} with an image")
            check(f"framework {fw} cannot run in an image" in doc["error"]["message"],
                  f"the reason for {fw}: {doc['error']['message']!r}")


def test_image_job_goes_to_docker_node():
    with cluster("ctr-place") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:1")
        api = c.api
        join = join_token(c)
        _, job = api.submit(spec(["/bin/true"], name="img", gpus=1, image=IMAGE,
                                 placement={"wait_for_nodes": True}))
        wait_until(lambda: (lambda e: e and e[0]["reason"] and
                            e[0]["reason"]["code"] == "infeasible")(
                                queue_entry(api, job["id"])), 10, "the reason infeasible")

        # registrations that say something wrong about runtimes are refused
        base = {"name": "d1", "addr": "127.0.0.1", "cpus": 2, "memory": 8 << 30,
                "gpus": [{"index": 0, "model": "SIM-A100", "memory": 80 << 30}]}
        for extra, field in (({"runtimes": ["process", "kata"]}, "runtimes"),
                             ({"runtimes": "docker"}, "runtimes"),
                             ({"runtimes": []}, "runtimes"),
                             ({"engine": 20}, "engine"),
                             ({"engine": "x" * 129}, "engine")):
            status, doc = api.json("POST", "/v1/agents", dict(base, **extra), token=join)
            check_eq((status, doc["error"]["field"]), (400, field), f"registration with {extra}")
        check("d1" not in nodes_by_name(api), "nothing registered by a refused registration")

        status, reg = api.json("POST", "/v1/agents",
                               dict(base, runtimes=["process", "docker"], engine="Docker 20.10.24"),
                               token=join)
        check_eq(status, 200, f"registering a docker node: {reg}")
        d1 = nodes_by_name(api)["d1"]
        check_eq((d1["runtimes"], d1["engine"]), (["process", "docker"], "Docker 20.10.24"),
                 "the docker node's runtimes and engine")
        j = wait_until(lambda: (lambda j: j if j["state"] != "queued" else None)(api.job(job["id"])),
                       10, "the image job to be placed")
        check_eq(j["tasks"][0]["node"], "d1", "the image job's node (n1 has a free GPU too)")
        status, work = api.json("GET", f"/v1/agents/{reg['id']}/work?rev=0&wait=0", token=reg["token"])
        check_eq(status, 200, "the docker node's work")
        tasks = [t for t in work["tasks"] if t["job"] == job["id"]]
        check_eq(len(tasks), 1, f"the image job's task in the docker node's work: {work}")
        check_eq(tasks[0]["image"], IMAGE, "the image in the task's assignment")
        check_eq(tasks[0]["argv"], ["/bin/true"], "the task's argv")

        r = c.cli("nodes", check_rc=0).stdout.decode().splitlines()
        check("RUNTIMES" in r[0], f"yard nodes has a RUNTIMES column: {r[0]!r}")
        rows = {line.split()[0]: line.split() for line in r[1:]}
        check("process,docker" in rows["d1"], f"yard nodes row of d1: {rows['d1']}")
        check("process" in rows["n1"] and "process,docker" not in rows["n1"],
              f"yard nodes row of n1: {rows['n1']}")
        r = json.loads(c.cli("nodes", "--output", "json", check_rc=0).stdout)
        check_eq({n["name"]: n["runtimes"] for n in r["nodes"]},
                 {"n1": ["process"], "d1": ["process", "docker"]}, "yard nodes --output json")

        # what the agents said survives a master restart (read from the store)
        c.agents["n1"].stop()
        c.master.stop()
        c.start_master()
        nodes = nodes_by_name(c.api)
        check_eq((nodes["d1"]["runtimes"], nodes["d1"]["engine"]),
                 (["process", "docker"], "Docker 20.10.24"), "d1 after a master restart")
        check_eq((nodes["n1"]["runtimes"], nodes["n1"]["engine"]), (["process"], None),
                 "n1 after a master restart")
        check_eq(c.api.job(job["id"])["spec"]["image"], IMAGE, "the job's image after a restart")
