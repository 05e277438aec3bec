"""Data staging (docs/datasets.md) against a real S3-compatible store: s3rver
(tests/e2e/s3, `make s3rver`) on loopback, a real master and agent. A job's
s3:// data is staged into the node cache and seen, verified, by its command;
a second job with the same data transfers nothing; a small --cache-size
evicts the least recently used entry; an unreachable store fails the job
with a staging_failed reason.

Keys that would escape an entry (`../`) cannot be stored in s3rver (it
normalises them), so that refusal is tested in tests/unit/agent/test_stage.c
against a fake store.

yard:// data goes the whole way: `yard data push` to the master, staged by
two agents from the master's chunk store, verified by the tasks."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

from harness import Proc, Skip, check, check_eq, cluster, spec, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
S3RVER = os.path.join(HERE, "s3", "node_modules", ".bin", "s3rver")
BUCKET = "bkt"


class S3rver:
    """s3rver on 127.0.0.1, port 0, a temp dir; objects put with curl's SigV4."""

    def __init__(self, root):
        if not os.access(S3RVER, os.X_OK):
            raise Skip("s3rver is not installed (make s3rver)")
        self.dir = os.path.join(root, "s3rver")
        os.makedirs(self.dir)
        # s3rver 3.7 makes its continuation tokens with a cipher that Node 20's
        # OpenSSL 3 keeps in the legacy provider: without it, a listing of more
        # than 1,000 keys answers 500
        env = dict(os.environ, NODE_OPTIONS="--openssl-legacy-provider")
        self.proc = Proc("s3rver", [S3RVER, "-d", self.dir, "-a", "127.0.0.1", "-p", "0",
                                    "--configure-bucket", BUCKET],
                         os.path.join(root, "s3rver.log"), env=env,
                         ready=r"listening on 127\.0\.0\.1:(\d+)")
        self.url = "http://127.0.0.1:" + self.proc.ready_match.group(1)

    def put(self, key, body):
        with tempfile.NamedTemporaryFile() as f:
            f.write(body)
            f.flush()
            subprocess.run(["curl", "-sSf", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "S3RVER:S3RVER",
                            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-T", f.name,
                            f"{self.url}/{BUCKET}/{key}"], check=True, capture_output=True)

    def put_many(self, objects):
        """Many objects through one curl process, 8 at a time."""
        with tempfile.TemporaryDirectory() as d:
            cfg = os.path.join(d, "curlrc")
            with open(cfg, "w") as f:
                for i, (key, body) in enumerate(objects.items()):
                    path = os.path.join(d, str(i))
                    with open(path, "wb") as o:
                        o.write(body)
                    f.write(f'upload-file = "{path}"\nurl = "{self.url}/{BUCKET}/{key}"\n')
            subprocess.run(["curl", "-sSf", "--no-progress-meter", "--parallel", "--parallel-max", "8",
                            "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "S3RVER:S3RVER",
                            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-o", "/dev/null", "-K", cfg],
                           check=True, capture_output=True)

    def stop(self):
        self.proc.stop()


def s3_args(c, endpoint, extra=()):
    creds = os.path.join(c.dir, "s3-credentials")
    with open(creds, "w") as f:
        f.write("AWS_ACCESS_KEY_ID=S3RVER\nAWS_SECRET_ACCESS_KEY=S3RVER\n")
    return ["--s3-endpoint", endpoint, "--s3-region", "us-east-1", "--s3-credentials", creds, *extra]


def submit_data_job(c, name, source, command):
    status, job = c.api.submit(spec(command, name=name, data=[{"source": source, "mount": "raw"}]))
    check_eq(status, 201, f"submission of {name}: {job}")
    return job["id"]


def agent_log(c, name="n1"):
    with open(os.path.join(c.dir, f"agent-{name}.log")) as f:
        return f.read()


OBJECTS = {"pre/a.txt": b"alpha\n", "pre/d/b.txt": b"beta\n" * 100}
SUMS_CMD = ["/bin/sh", "-c", 'cd "$YARD_DATA_DIR/raw" && sha256sum a.txt d/b.txt']


def expected_sums():
    return "".join(f"{hashlib.sha256(OBJECTS['pre/' + k]).hexdigest()}  {k}\n" for k in ("a.txt", "d/b.txt"))


def mapped(pid, soname):
    """Whether process pid has the shared object soname mapped (maps names
    the file the soname links to: libcurl.so.4.8.0)."""
    with open(f"/proc/{pid}/maps") as f:
        return any(os.path.basename(line.split()[-1]).startswith(soname) for line in f if "/" in line)


def test_s3_staged_verified_and_cached():
    with cluster("staging-s3") as c:
        s3 = S3rver(c.dir)
        try:
            for k, v in OBJECTS.items():
                s3.put(k, v)
            c.start_master()
            agent = c.start_agent("n1", gpus="none", extra=s3_args(c, s3.url))
            # `yard agent` is yard-agent, which loads libcurl and libxml2 at
            # their first use (src/agent_prog.c): a registered agent has neither
            pid = agent.p.pid
            check(os.readlink(f"/proc/{pid}/exe").endswith("/yard-agent"), "yard agent runs yard-agent")
            for so in ("libcurl.so.4", "libxml2.so.2"):
                check(not mapped(pid, so), f"an agent that has staged nothing maps {so}")
            j1 = submit_data_job(c, "first", "s3://bkt/pre", SUMS_CMD)
            check_eq(c.api.wait_job(j1)["state"], "succeeded", "the first job")
            for so in ("libcurl.so.4", "libxml2.so.2"):
                check(mapped(pid, so), f"the agent staged from S3 without loading {so}")
            check_eq(c.api.log(j1).decode(), expected_sums(), "the staged objects' content, as the task sees it")
            check(re.search(r"staged 1 entries, \d+ bytes of data, [1-9]\d* bytes transferred", agent_log(c)),
                  "the first staging transferred the objects")
            # the same data again: a cache hit
            j2 = submit_data_job(c, "second", "s3://bkt/pre", SUMS_CMD)
            check_eq(c.api.wait_job(j2)["state"], "succeeded", "the second job")
            check_eq(c.api.log(j2).decode(), expected_sums(), "the second job's view of the data")
            check(re.search(r"staged 1 entries, \d+ bytes of data, 0 bytes transferred", agent_log(c)),
                  "the second staging transferred nothing")
            cache = os.path.join(c.dir, "agent-n1", "cache")
            entries = [e for e in os.listdir(cache) if e.startswith("s3-")]
            check_eq(len(entries), 1, f"cache entries {os.listdir(cache)}")
            for root, _, files in os.walk(os.path.join(cache, entries[0])):
                for fn in files:
                    check_eq(os.stat(os.path.join(root, fn)).st_mode & 0o222, 0, f"{fn} is read-only")
        finally:
            s3.stop()


def test_s3_eviction_under_a_small_cache():
    with cluster("staging-evict") as c:
        s3 = S3rver(c.dir)
        try:
            s3.put("one/x.bin", b"1" * 600)
            s3.put("two/x.bin", b"2" * 600)
            c.start_master()
            c.start_agent("n1", gpus="none", extra=s3_args(c, s3.url, ["--cache-size", "1000"]))
            cmd = ["/bin/sh", "-c", 'wc -c < "$YARD_DATA_DIR/raw/x.bin"']
            for prefix in ("one", "two"):
                j = submit_data_job(c, prefix, f"s3://bkt/{prefix}", cmd)
                check_eq(c.api.wait_job(j)["state"], "succeeded", f"the job on {prefix}")
                check_eq(c.api.log(j).decode().strip(), "600", f"the size of {prefix}/x.bin")
            cache = os.path.join(c.dir, "agent-n1", "cache")
            wait_until(lambda: len([e for e in os.listdir(cache) if e.startswith("s3-")]) == 1, 10,
                       "one entry left under a 1000-byte cache")
            check("cache: evicting s3-" in agent_log(c), "the eviction is logged")
            with open(os.path.join(cache, "index.json")) as f:
                check_eq(len(json.load(f)["entries"]), 1, "entries in index.json")
        finally:
            s3.stop()


def test_unreachable_store_fails_the_job():
    with cluster("staging-down") as c:
        c.start_master()
        c.start_agent("n1", gpus="none", extra=s3_args(c, "http://127.0.0.1:1"))
        j = submit_data_job(c, "down", "s3://bkt/pre", ["/bin/true"])
        job = c.api.wait_job(j)
        check_eq(job["state"], "failed", "a job whose store cannot be reached")
        text = json.dumps(job)
        check("staging_failed: data[0] (s3://bkt/pre): cannot reach" in text, f"the reason: {text}")


def test_yard_push_versions_and_staging_on_two_agents():
    """A dataset pushed with the CLI (a file of three chunks among others), a
    new version after a change, a job of two workers that can only run on
    two nodes, each staging the version it names from the master and seeing
    exactly the pushed bytes; then a second job on the same nodes transfers
    nothing."""
    with cluster("staging-yard") as c:
        c.start_master()
        src = os.path.join(c.dir, "ds")
        os.makedirs(os.path.join(src, "sub"))
        big = os.urandom(1 << 20) * 20  # 20 MiB: three 8 MiB chunks
        files = {"big.bin": big, "small.txt": b"v1\n", "sub/x.txt": b"x" * 1000}
        for k, v in files.items():
            with open(os.path.join(src, k), "wb") as f:
                f.write(v)
        r = c.cli("data", "push", src, "digits", "--output", "json", check_rc=0)
        v1 = json.loads(r.stdout)
        check_eq((v1["version"], v1["created"]), (1, True), f"first push: {v1}")
        r = c.cli("data", "push", src, "digits", "--output", "json", check_rc=0)
        check_eq((json.loads(r.stdout)["version"], json.loads(r.stdout)["created"]), (1, False),
                 "an unchanged push makes no version")
        with open(os.path.join(src, "small.txt"), "wb") as f:
            f.write(b"v2\n")
        files["small.txt"] = b"v2\n"
        r = c.cli("data", "push", src, "digits", "--output", "json", check_rc=0)
        v2 = json.loads(r.stdout)
        check_eq((v2["version"], v2["created"], v2["uploaded"]), (2, True, 1),
                 f"a changed file makes version 2 and uploads only its chunk: {v2}")

        for n in ("n1", "n2"):
            c.start_agent(n, gpus="sim:1")
        cmd = ["/bin/sh", "-c", 'cd "$YARD_DATA_DIR/raw" && sha256sum big.bin small.txt sub/x.txt']
        want = "".join(f"{hashlib.sha256(files[k]).hexdigest()}  {k}\n" for k in ("big.bin", "small.txt", "sub/x.txt"))
        jobs = []
        for name in ("first", "second"):
            status, job = c.api.submit(spec(cmd, name=name, replicas=2, gpus=1,
                                            data=[{"source": "yard://digits@2", "mount": "raw"}]))
            check_eq(status, 201, f"submit {name}: {job}")
            doc = c.api.wait_job(job["id"], timeout=120)
            check_eq(doc["state"], "succeeded", f"job {name}: {doc.get('reason')}")
            check_eq(sorted(t["node"] for t in doc["tasks"]), ["n1", "n2"], "one worker per node")
            for i in range(2):
                check_eq(c.api.log(job["id"], task=f"worker/{i}").decode(), want,
                         f"{name} worker/{i} sees the pushed bytes of version 2")
            jobs.append(job["id"])
        for n in ("n1", "n2"):
            log = agent_log(c, n)
            transferred = [int(x) for x in re.findall(r"staged 1 entries, \d+ bytes of data, (\d+) bytes transferred", log)]
            check_eq(len(transferred), 2, f"{n} staged twice: {transferred}")
            check(transferred[0] >= len(big), f"{n}: the first staging fetched the data ({transferred[0]})")
            check_eq(transferred[1], 0, f"{n}: the second job on the node transferred nothing")
        # once no job that names it is left, a version can be deleted
        status, doc = c.api.json("DELETE", "/v1/datasets/digits/2")
        check_eq(status, 200, f"delete of an unused version: {doc}")


def test_s3_listing_of_many_pages():
    """2,500 objects: ListObjectsV2 answers 1,000 keys a page, so the staging
    must follow continuation tokens; every object arrives, exactly."""
    with cluster("staging-s3-pages") as c:
        s3 = S3rver(c.dir)
        try:
            objects = {f"many/d{i % 10}/o{i:04d}": f"object {i}\n".encode() for i in range(2500)}
            s3.put_many(objects)
            c.start_master()
            c.start_agent("n1", gpus="none", extra=s3_args(c, s3.url))
            cmd = ["/bin/sh", "-c", 'cd "$YARD_DATA_DIR/raw" && find . -type f | wc -l && cat d*/o* | sha256sum']
            j = submit_data_job(c, "pages", "s3://bkt/many", cmd)
            check_eq(c.api.wait_job(j, timeout=120)["state"], "succeeded", "the job over 3 pages of objects")
            want = b"".join(objects[k] for k in sorted(objects, key=lambda k: k[len("many/"):]))
            count, digest = c.api.log(j).decode().split("\n")[:2]
            check_eq(count.strip(), "2500", "every object staged")
            check_eq(digest.split()[0], hashlib.sha256(want).hexdigest(), "their bytes, exactly")
        finally:
            s3.stop()
