"""Images built from a job's own code (spec `image: {build: {dockerfile,
args}}`, agent/imagebuild.c, docs/images.md) against a real dockerd started
by the test (engines.py), from the project directory `yard submit` uploads:
the build's output is the task's, the image is named by its content (code,
Dockerfile and args), the same content is never built twice, a change to
any of the three builds another, and a build that fails fails the job with
the engine's error and the build's last lines as its reason. From git (a real `git daemon`,
gitserve.py): two branches whose code and Dockerfiles differ run in their
own images, each job recording its branch's commit. With the cluster's
registry (Debian's docker-registry on loopback, registry.py, demanding the
credential the master's registry-credential-file holds) and two nodes,
each with its own dockerd: the node that builds an image pushes it, the
other pulls it instead of building it again, and the password appears in
no reply or log. Without a registry, with the master's store-images: the
node that builds it saves it into the master's chunk store, the other
loads it from there (and builds it when a chunk arrives wrong; the chunks
are corrupted in the master's blobs dir, so that part needs the SQLite
store).

Skipped (harness.Skip, its reason printed) only when dockerd cannot start here."""
import json
import os

import engines
from gitserve import repos
from harness import ROOT, YARD, check, check_eq, cluster, wait_until
from registry import Registry

# a first run builds the rootfs with debootstrap (about a minute)
TIMEOUT = 900

BUILD_DIR = os.path.dirname(os.path.abspath(YARD)) if os.path.isabs(YARD) else os.path.join(ROOT, "build-asan")

DOCKERFILE = """FROM yard-test/base:1
ARG FLAVOUR=plain
COPY train.sh /app/train.sh
RUN echo "flavour $FLAVOUR" > /app/flavour && echo "step ran for $FLAVOUR"
"""

REGISTRY_PASSWORD = "pw-" + "9d1c0e7b4a2f"

BROKEN = """FROM yard-test/base:1
RUN echo "about to fail" && exit 3
"""

JOB = """name: {name}
command: ["/bin/sh", "/app/train.sh"]
image:
  build:
    {dockerfile}
    args: {{FLAVOUR: {flavour}}}
tasks:
  worker: {{replicas: 1, cpus: 0.1}}
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def job_file(proj, name, flavour="a", dockerfile=None):
    path = os.path.join(proj, f"{name}.yaml")
    df = f"dockerfile: {dockerfile}" if dockerfile else ""
    write(path, JOB.format(name=name, flavour=flavour, dockerfile=df))
    return path


def built_images(eng):
    status, images = eng.api("GET", "/images/json")
    check_eq(status, 200, f"the engine's images: {images}")
    return sorted(t for i in images for t in (i.get("RepoTags") or []) if t.startswith("yard/build:"))


def run_job(c, path):
    jid = c.cli("submit", path, check_rc=0).stdout.decode().strip()
    doc = c.api.wait_job(int(jid), timeout=300)
    return doc, c.api.log(int(jid)).decode(errors="replace")


def images_ls(c):
    """yard images ls, as JSON: {image: entry}."""
    r = c.cli("images", "ls", "--output", "json", check_rc=0)
    return {e["image"]: e for e in json.loads(r.stdout)["images"]}


def two_sites(c, engs, first_command=None):
    """An agent per engine, n1 and n2 (labels site=s1, s2), and one project
    dir with a job pinned to each site: the same code, Dockerfile and args
    (the first's command first_command when given); the jobs' paths."""
    for i, eng in enumerate(engs):
        c.start_agent(f"n{i + 1}", extra=["--runtime", "process,docker", "--docker-socket", eng.socket,
                                           "--label", f"site=s{i + 1}"])
    proj = os.path.join(c.dir, "project")
    os.makedirs(proj)
    write(os.path.join(proj, "Dockerfile"), DOCKERFILE)
    write(os.path.join(proj, "train.sh"), 'echo "code v1"; cat /app/flavour\n')
    paths = []
    for site in ("s1", "s2"):
        paths.append(os.path.join(proj, f"{site}.yaml"))
        text = JOB.format(name=site, flavour="a", dockerfile="").replace(
            "tasks:", f"placement: {{labels: {{site: {site}}}}}\ntasks:")
        if site == "s1" and first_command:
            text = text.replace('command: ["/bin/sh", "/app/train.sh"]', f"command: {first_command}")
        write(paths[-1], text)
    return paths


def phases(doc):
    """The phases in the job's history: [(state, phase, reason's message)]."""
    return [(e["state"], e["phase"], e.get("reason", {}).get("message", ""))
            for e in doc.get("events", []) if "phase" in e]


def test_images_built_from_the_code_once_per_content():
    eng = engines.docker_with_base(BUILD_DIR)
    try:
        with cluster("imagebuild") as c:
            c.start_master()
            c.start_agent("n1", extra=["--runtime", "process,docker", "--docker-socket", eng.socket])
            proj = os.path.join(c.dir, "project")
            os.makedirs(proj)
            write(os.path.join(proj, "Dockerfile"), DOCKERFILE)
            write(os.path.join(proj, "Dockerfile.broken"), BROKEN)
            write(os.path.join(proj, "train.sh"), 'echo "code v1"; cat /app/flavour\n')

            # the first job builds its image, and runs in it
            doc, out = run_job(c, job_file(proj, "a"))
            first_job = doc["id"]
            check_eq(doc["state"], "succeeded", f"the job of flavour a (reason {doc.get('reason')}):\n{out}")
            check("yard: building image yard/build:" in out, f"the build is in the job's log:\n{out}")
            check("step ran for a" in out, f"the build's own output is in the job's log:\n{out}")
            check(out.rstrip().endswith("code v1\nflavour a"), f"the task ran in the built image:\n{out}")
            first = built_images(eng)
            check_eq(len(first), 1, "images built")
            check(first[0] in out, f"the log names the image {first[0]}:\n{out}")
            check_eq(phases(doc), [("starting", "building", f"worker/0: building image {first[0]}")],
                     "the build is a phase of the job's history")

            # the same code, Dockerfile and args: nothing is built
            doc, out = run_job(c, job_file(proj, "a"))
            check_eq(doc["state"], "succeeded", f"the same job again (reason {doc.get('reason')})")
            check(f"yard: image {first[0]} is built already" in out, f"the image was reused:\n{out}")
            check("step ran" not in out and "building image" not in out, f"nothing was built:\n{out}")
            check_eq(built_images(eng), first, "images after the same content again")
            check_eq(c.api.job(first_job)["image_built"]["tag"], first[0], "the first job's image")
            check_eq(phases(doc), [], "no build in the history of a job whose image was built")
            check_eq((doc.get("image_built") or {}).get("how"), "present", f"the job's image: {doc.get('image_built')}")

            # other args: another image
            doc, out = run_job(c, job_file(proj, "b", flavour="b"))
            check_eq(doc["state"], "succeeded", f"the job of flavour b (reason {doc.get('reason')}):\n{out}")
            check(out.rstrip().endswith("code v1\nflavour b"), f"flavour b's image:\n{out}")
            second = built_images(eng)
            check_eq(len(second), 2, "images after other args")

            # other code, the same Dockerfile and args: another image
            write(os.path.join(proj, "train.sh"), 'echo "code v2"; cat /app/flavour\n')
            doc, out = run_job(c, job_file(proj, "a"))
            check_eq(doc["state"], "succeeded", f"the changed code (reason {doc.get('reason')}):\n{out}")
            check("building image" in out and out.rstrip().endswith("code v2\nflavour a"),
                  f"the changed code was built and runs:\n{out}")
            check_eq(len(built_images(eng)), 3, "images after a change to the code")

            # a build that fails fails the job: the engine's error and the
            # build's last lines are its reason, its output is in the log
            doc, out = run_job(c, job_file(proj, "broken", dockerfile="Dockerfile.broken"))
            check_eq(doc["state"], "failed", "the job of the broken Dockerfile")
            reason = (doc.get("reason") or {}).get("message", "")
            check("image_build_failed" in reason and "non-zero code: 3" in reason,
                  f"the reason names the build's failure: {reason}")
            check("about to fail" in reason, f"the reason ends with the build's last lines: {reason}")
            check("about to fail" in out, f"the build's output is in the job's log:\n{out}")
            check_eq(len(built_images(eng)), 3, "a failed build leaves no image")

            # yard images ls: what ran, built once each; the failed build is not there
            listed = images_ls(c)
            check_eq(sorted(listed), built_images(eng), "yard images ls lists what the engine built")
            e = listed[first[0]]
            check_eq((e["jobs"], e["built_by"], e["built_on"], e["git"], e["dockerfile"]),
                     (2, first_job, "n1", None, "Dockerfile"), f"the first image's entry: {e}")
            check(e["size"] > 0 and e["code"].startswith("sha256:"), f"its size and code: {e}")
            table = c.cli("images", check_rc=0).stdout.decode()
            check(first[0] in table and "(uploaded)" in table and f"job {first_job} on n1" in table,
                  f"the table:\n{table}")

            # a Dockerfile the code does not have
            doc, out = run_job(c, job_file(proj, "nofile", dockerfile="docker/Nosuch"))
            check_eq(doc["state"], "failed", "the job of a missing Dockerfile")
            check("has no Dockerfile 'docker/Nosuch'" in (doc.get("reason") or {}).get("message", ""),
                  f"the reason names the missing Dockerfile: {doc.get('reason')}")

            # refused at submit: a path out of the code, and a job without code
            r = c.cli("submit", job_file(proj, "out", dockerfile="../Dockerfile"))
            check(r.returncode != 0 and b"image.build.dockerfile" in r.stderr,
                  f"a Dockerfile outside the code is refused naming the field: {r.stderr!r}")
            status, err = c.api.submit({"name": "nocode", "command": ["/bin/true"],
                                        "image": {"build": {}}, "tasks": {"worker": {"cpus": 0.1}}})
            check_eq(status, 400, f"an image built without code: {err}")
            check_eq(err["error"]["field"], "image.build", f"the field named: {err}")
            check("has none" in err["error"]["message"], f"the reason: {err}")
    finally:
        eng.close()


def shims_of(c):
    """The pids of the shims of cluster c's agents still running."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 3 and argv[1] == b"shim" and argv[3].startswith(c.dir.encode()):
            pids.append(int(pid))
    return pids


def test_a_cancel_during_a_build_stops_the_build():
    """A job cancelled while its image builds (a step that would take ten
    minutes) ends cancelled at once: the shim, asked to stop, drops its
    build request and the engine abandons the build; no image is left."""
    eng = engines.docker_with_base(BUILD_DIR)
    try:
        with cluster("imagebuild-cancel") as c:
            c.start_master()
            c.start_agent("n1", extra=["--runtime", "process,docker", "--docker-socket", eng.socket])
            proj = os.path.join(c.dir, "proj")
            os.makedirs(proj)
            write(os.path.join(proj, "Dockerfile"), "FROM yard-test/base:1\nRUN echo slow-step-began && sleep 600\n")
            write(os.path.join(proj, "train.sh"), "echo never\n")
            jid = int(c.cli("submit", job_file(proj, "slow"), check_rc=0).stdout)
            wait_until(lambda: "slow-step-began" in c.api.log(jid).decode(errors="replace"), 120,
                       "the build's slow step to begin")
            check(shims_of(c), "the task's shim builds")
            c.cli("cancel", str(jid), check_rc=0)
            doc = c.api.wait_job(jid, timeout=60)
            out = c.api.log(jid).decode(errors="replace")
            check_eq(doc["state"], "cancelled", f"the cancelled job (reason {doc.get('reason')}):\n{out}")
            # the shim ends with its build (the step alone would take 600 s)
            wait_until(lambda: not shims_of(c), 30, "the shim to stop building and end")
            check_eq(built_images(eng), [], "no image from the abandoned build")
    finally:
        eng.close()


def test_branches_of_a_repository_build_and_run_their_own_images():
    eng = engines.docker_with_base(BUILD_DIR)
    try:
        with repos() as g, cluster("imagebuild-git") as c:
            g.make("repo", {
                "alpha": {"Dockerfile": "FROM yard-test/base:1\nRUN echo image-alpha > /etc/which\n"
                                        "COPY run.sh /run.sh\n",
                          "run.sh": "echo code-alpha; cat /etc/which\n"},
                "beta": {"Dockerfile": "FROM yard-test/base:1\nARG WHO\nRUN echo image-$WHO > /etc/which\n"
                                       "COPY run.sh /run.sh\n",
                         "run.sh": "echo code-beta; cat /etc/which\n"}})
            url = g.serve_daemon() + "/repo.git"
            c.start_master()
            c.start_agent("n1", extra=["--runtime", "process,docker", "--docker-socket", eng.socket])
            proj = os.path.join(c.dir, "proj")
            os.makedirs(proj)
            path = os.path.join(proj, "job.yaml")
            write(path, "name: from-git\ncommand: [/bin/sh, /run.sh]\nimage: {build: {args: {WHO: beta}}}\n"
                        "tasks: {worker: {cpus: 0.1}}\n")
            for branch in ("alpha", "beta"):
                jid = int(c.cli("submit", path, "--git", f"{url}@{branch}", check_rc=0).stdout)
                doc = c.api.wait_job(jid, timeout=300)
                out = c.api.log(jid).decode(errors="replace")
                check_eq(doc["state"], "succeeded", f"the job of {branch} (reason {doc.get('reason')}):\n{out}")
                check_eq(doc["spec"]["code"]["sha"], g.sha("repo", branch), f"the commit of {branch}'s job")
                check(out.rstrip().endswith(f"code-{branch}\nimage-{branch}"),
                      f"{branch}'s code in {branch}'s image:\n{out}")
                check("yard: building image" in out, f"{branch}'s image was built:\n{out}")
            check_eq(len(built_images(eng)), 2, "one image per branch")
            listed = images_ls(c)
            check_eq(sorted((e["git"], e["sha"]) for e in listed.values()),
                     sorted((url, g.sha("repo", b)) for b in ("alpha", "beta")),
                     f"yard images ls: each branch's repository and commit: {listed}")
    finally:
        eng.close()


def test_an_image_built_on_one_node_is_pulled_from_the_registry_by_another():
    engs = []
    try:
        for _ in range(2):
            engs.append(engines.docker_with_base(BUILD_DIR))
        with Registry(auth=("yard-push", REGISTRY_PASSWORD)) as reg, cluster("imagebuild-registry") as c:
            check_eq(reg.status(), 401, "the registry demands its credential")
            cred = os.path.join(c.dir, "registry-credential")
            write(cred, f"yard-push:{REGISTRY_PASSWORD}\n")
            c.master_args += ["--registry", reg.addr, "--registry-credential-file", cred]
            c.start_master()
            paths = two_sites(c, engs)

            doc, out = run_job(c, paths[0])
            check_eq(doc["state"], "succeeded", f"the job on n1 (reason {doc.get('reason')}):\n{out}")
            check_eq(doc["tasks"][0]["node"], "n1", "the first job's node")
            check_eq(built_images(engs[0]), [], "no unqualified image: built images are named under the registry")
            check(f"yard: building image {reg.addr}/yard/build:" in out, f"built under the registry's name:\n{out}")
            check(f"yard: pushed image {reg.addr}/yard/build:" in out, f"pushed to the registry:\n{out}")
            pushed = reg.tags("yard/build")
            check_eq(len(pushed), 1, f"tags in the registry: {pushed}")

            doc, out = run_job(c, paths[1])
            check_eq(doc["state"], "succeeded", f"the job on n2 (reason {doc.get('reason')}):\n{out}")
            check_eq(doc["tasks"][0]["node"], "n2", "the second job's node")
            check(f"yard: pulled image {reg.addr}/yard/build:{pushed[0]} from the cluster's registry" in out,
                  f"n2 pulled the image n1 built:\n{out}")
            check("building image" not in out and "step ran" not in out, f"n2 built nothing:\n{out}")
            check(out.rstrip().endswith("code v1\nflavour a"), f"n2 ran in the pulled image:\n{out}")
            check_eq(reg.tags("yard/build"), pushed, "tags in the registry after the pull")
            check_eq(doc["image_built"]["how"], "pulled", f"the second job's image: {doc['image_built']}")
            e = images_ls(c)[f"{reg.addr}/yard/build:{pushed[0]}"]
            check_eq((e["jobs"], e["built_on"]), (2, "n1"), f"one image, built on n1, used twice: {e}")
            # the registry's password: in no reply, job log or daemon log
            seen = [out, json.dumps(images_ls(c)), json.dumps(c.api.json("GET", "/v1/audit?limit=500", expect=200)[1])]
            seen += [json.dumps(c.api.job(j["id"])) for j in c.api.json("GET", "/v1/jobs", expect=200)[1]["jobs"]]
            for name in os.listdir(c.dir):
                if name.endswith(".log"):
                    with open(os.path.join(c.dir, name), errors="replace") as f:
                        seen.append(f.read())
            check(len(seen) > 5 and all(REGISTRY_PASSWORD not in t for t in seen),
                  "the registry's password appears in no reply or log")
    finally:
        for eng in engs:
            eng.close()


def test_an_image_built_on_one_node_is_loaded_from_the_masters_store_by_another():
    """No registry, the master's store-images: n1 builds the image and
    saves it into the master's chunk store; n2 loads it (docker load) and
    builds nothing; a chunk that arrives wrong is said, and n2 builds."""
    engs = []
    try:
        for _ in range(2):
            engs.append(engines.docker_with_base(BUILD_DIR))
        with cluster("imagebuild-store", master_args=["--store-images"]) as c:
            c.start_master()
            # the first runs on while its node hands the image in
            paths = two_sites(c, engs, first_command='["/bin/sh", "-c", "sh /app/train.sh; sleep 8"]')

            doc, out = run_job(c, paths[0])
            check_eq(doc["state"], "succeeded", f"the job on n1 (reason {doc.get('reason')}):\n{out}")
            check_eq(doc["tasks"][0]["node"], "n1", "the first job's node")
            tag = built_images(engs[0])
            check_eq(len(tag), 1, "images built on n1")
            tag = tag[0]
            check(f"yard: building image {tag}" in out, f"n1 built it:\n{out}")
            check(f"yard: saved image {tag} for the master's store" in out, f"n1 saved it:\n{out}")
            check(f"yard: stored image {tag} in the master's store" in out, f"n1's agent handed it in:\n{out}")
            check_eq(doc["image_built"]["how"], "built", f"the first job's image: {doc['image_built']}")
            check_eq(doc["image_built"]["stored"], True, f"the master keeps it: {doc['image_built']}")
            check_eq(built_images(engs[1]), [], "n2's engine before the second job")

            doc, out = run_job(c, paths[1])
            check_eq(doc["state"], "succeeded", f"the job on n2 (reason {doc.get('reason')}):\n{out}")
            check_eq(doc["tasks"][0]["node"], "n2", "the second job's node")
            check(f"yard: loaded image {tag} from the master's store" in out, f"n2 loaded the image n1 built:\n{out}")
            check("building image" not in out and "step ran" not in out, f"n2 built nothing:\n{out}")
            check(out.rstrip().endswith("code v1\nflavour a"), f"n2 ran in the loaded image:\n{out}")
            check_eq(doc["image_built"]["how"], "loaded", f"the second job's image: {doc['image_built']}")
            check_eq(phases(doc), [], "no build in the history of the job that loaded its image")
            check_eq(built_images(engs[1]), [tag], "n2's engine holds the image loaded")
            e = images_ls(c)[tag]
            check_eq((e["jobs"], e["built_on"], e["stored"]), (2, "n1", True),
                     f"one image, built on n1, kept in the store, used twice: {e}")

            # a chunk that arrives wrong: said, and n2 builds the image itself
            status, _ = engs[1].api("DELETE", f"/images/{tag}")
            check_eq(status, 200, "the image removed from n2's engine")
            blobs = os.path.join(c.data_dir, "blobs")
            big = [os.path.join(blobs, n) for n in os.listdir(blobs)
                   if os.path.getsize(os.path.join(blobs, n)) > 1 << 20]
            check(big, f"the image's chunks are files of the master's store: {os.listdir(blobs)}")
            for p in big:
                with open(p, "r+b") as f:
                    b = f.read(1)
                    f.seek(0)
                    f.write(bytes([b[0] ^ 0xff]))
            doc, out = run_job(c, paths[1])
            check_eq(doc["state"], "succeeded", f"the job on n2 again (reason {doc.get('reason')}):\n{out}")
            check(f"yard: cannot take image {tag} from the master's store (it is built here): cannot fetch "
                  f"it: " in out and "checksum" in out, f"the failed check is said:\n{out}")
            check(f"yard: building image {tag}" in out, f"n2 built it instead:\n{out}")
            check_eq(doc["image_built"]["how"], "built", f"the third job's image: {doc['image_built']}")
    finally:
        for eng in engs:
            eng.close()
