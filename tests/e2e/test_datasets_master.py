"""Datasets on the master (docs/datasets.md): yard data push uploads only the
chunks the master lacks (so an interrupted push resumes), versions are made
only when the content changes, a dataset a live job uses cannot be deleted,
names and manifests with traversal are refused naming the field, and team
quotas hold. No agent stages anything here (that is the agent's side)."""
import hashlib
import json
import os
import signal

from harness import check, check_eq, cluster, spec


def push(c, src, name, *extra, rc=0):
    r = c.cli("data", "push", src, name, *extra, "--output", "json", check_rc=rc)
    return json.loads(r.stdout) if rc == 0 else r


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def test_datasets_master():
    with cluster("datasets", master_args=["--data-quota", "tiny=1KiB"]) as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:1")
        src = os.path.join(c.dir, "digits")
        os.makedirs(os.path.join(src, "train"))
        big = os.urandom(9 * 1024 * 1024)  # two chunks
        with open(os.path.join(src, "train", "big.bin"), "wb") as f:
            f.write(big)
        with open(os.path.join(src, "labels.txt"), "w") as f:
            f.write("0 1 2\n")

        # an interrupted push: one chunk already uploaded by hand
        first = big[:8 * 1024 * 1024]
        st, data, _ = c.api.request("PUT", "/v1/blobs/" + sha(first), raw=first)
        check_eq(st, 201, "PUT of a new chunk")
        st, data, _ = c.api.request("PUT", "/v1/blobs/" + sha(first), raw=first)
        check_eq(st, 200, "PUT of a chunk already held")
        st, data, _ = c.api.request("PUT", "/v1/blobs/" + sha(b"x"), raw=b"y")
        check_eq(st, 400, "PUT of a body that does not match its digest")
        check_eq(json.loads(data)["error"]["code"], "digest_mismatch", "error code of a bad chunk")

        v1 = push(c, src, "digits")
        check_eq((v1["version"], v1["created"], v1["files"]), (1, True, 2), "first push")
        check_eq((v1["chunks"], v1["uploaded"]), (3, 2), "the resumed push sends only the missing chunks")
        again = push(c, src, "digits")
        check_eq((again["version"], again["created"], again["uploaded"]), (1, False, 0),
                 "an unchanged push makes no version and uploads nothing")
        with open(os.path.join(src, "labels.txt"), "a") as f:
            f.write("3\n")
        v2 = push(c, src, "digits")
        check_eq((v2["version"], v2["created"], v2["uploaded"]), (2, True, 1),
                 "a changed file makes version 2 and uploads only its chunk")
        st, doc = c.api.json("GET", "/v1/datasets/digits", expect=200)
        check_eq([v["version"] for v in doc["versions"]], [1, 2], "versions listed")
        st, doc = c.api.json("GET", "/v1/datasets/digits/2", expect=200)
        check_eq([f["path"] for f in doc["manifest"]["files"]], ["labels.txt", "train/big.bin"],
                 "the manifest's paths, sorted")
        st, man = c.api.json("GET", "/v1/manifests/" + v2["digest"], expect=200)
        check_eq(man, doc["manifest"], "the manifest by digest")

        # refusals name the field
        for bad in ("..", "a/b", "Up"):
            st, doc = c.api.json("POST", "/v1/datasets", {"name": bad, "manifest": {"files": []}})
            check_eq((st, doc["error"]["field"]), (400, "name"), f"name {bad!r} refused")
        chunk = sha(first)
        for path in ("../etc/passwd", "/abs", "a//b", "a/../../b"):
            m = {"files": [{"path": path, "size": len(first), "mode": 420, "chunks": [chunk]}]}
            st, doc = c.api.json("POST", "/v1/datasets", {"name": "evil", "manifest": m})
            check_eq((st, doc["error"]["field"]), (400, "manifest.files[0].path"),
                     f"manifest path {path!r} refused")
        m = {"files": [{"path": "a", "size": 1, "mode": 420, "chunks": [sha(b"never")]}]}
        st, doc = c.api.json("POST", "/v1/datasets", {"name": "lost", "manifest": m})
        check_eq((st, doc["error"]["code"], doc["error"]["missing"]), (409, "missing_chunks", [sha(b"never")]),
                 "a manifest of chunks the master lacks")
        r = c.cli("data", "push", src, "Bad", check_rc=2)

        # a queued job that uses digits@1 (and one pinned to the latest)
        st, job = c.api.submit(spec(["/bin/true"], gpus=4, placement={"wait_for_nodes": True},
                                    data=[{"source": "yard://digits@1"},
                                          {"source": "yard://digits", "mount": "latest"}]))
        check_eq(st, 201, "a job with data is accepted")
        check_eq([d["source"] for d in job["spec"]["data"]], ["yard://digits@1", "yard://digits@2"],
                 "yard://digits is pinned to the latest version at submit")
        st, doc = c.api.submit(spec(["/bin/true"], data=[{"source": "yard://digits@9"}]))
        check_eq((st, doc["error"]["field"]), (400, "data[0].source"), "a missing version is refused")
        st, doc = c.api.submit(spec(["/bin/true"], data=[{"source": "yard://d", "mount": "../x"}]))
        check_eq((st, doc["error"]["field"]), (400, "data[0].mount"), "a mount with '..' is refused")
        st, doc = c.api.json("DELETE", "/v1/datasets/digits/1")
        check_eq((st, doc["error"]["code"], doc["error"]["jobs"]), (409, "in_use", [job["id"]]),
                 "a version a queued job uses cannot be deleted")
        r = c.cli("data", "rm", "digits", check_rc=1)
        check(str(job["id"]) in r.stderr.decode(), f"yard data rm names the job: {r.stderr!r}")
        c.api.json("POST", f"/v1/jobs/{job['id']}/cancel", expect=200)
        chunks_of = lambda n: {ch for f in c.api.json("GET", f"/v1/datasets/digits/{n}", expect=200)[1]
                               ["manifest"]["files"] for ch in f["chunks"]}
        only_v1 = chunks_of(1) - chunks_of(2)
        check(only_v1, "digits@1 has a chunk digits@2 does not")
        c.cli("data", "rm", "digits@1", check_rc=0)
        for ch in only_v1:
            st, _, _ = c.api.request("GET", "/v1/blobs/" + ch)
            check_eq(st, 404, f"chunk {ch} of digits@1 alone is gone with it")
        # digits@2 still has every chunk it needs; version numbers are not reused
        v3src = os.path.join(c.dir, "one.txt")
        with open(v3src, "w") as f:
            f.write("one\n")
        v3 = push(c, v3src, "digits")
        check_eq(v3["version"], 3, "version numbers are not reused")
        st, doc = c.api.json("GET", "/v1/datasets/digits/2", expect=200)
        for f in doc["manifest"]["files"]:
            for ch in f["chunks"]:
                st, _, _ = c.api.request("GET", "/v1/blobs/" + ch)
                check_eq(st, 200, f"chunk {ch} of digits@2 survives deleting digits@1")
        ls = json.loads(c.cli("data", "ls", "--output", "json", check_rc=0).stdout)
        check_eq([(d["name"], d["latest"], d["versions"]) for d in ls["datasets"]], [("digits", 3, 2)],
                 "yard data ls")

        # quotas: 1 KiB for team tiny
        r = push(c, src, "tinyset", "--team", "tiny", rc=1)
        err = json.loads(r.stdout)["error"]  # --output json: the error is JSON on stdout
        check(err["code"] == "quota_exceeded" and "quota" in err["message"], f"quota refusal: {err}")
        small = push(c, v3src, "tinyset", "--team", "tiny")
        check_eq((small["version"], small["team"]), (1, "tiny"), "a push under the quota")
        # a team's dataset is not another user's to delete
        st, doc = c.api.json("DELETE", "/v1/datasets/tinyset", token=c.user_token("eve"))
        check_eq(st, 403, f"eve (no team) deletes team tiny's dataset: {doc}")
        check("tiny" in doc["error"]["message"], f"the refusal names the team: {doc}")
        c.api.json("GET", "/v1/datasets/tinyset", expect=200)

        # a restart keeps datasets
        c.master.kill(signal.SIGKILL)
        c.master.p.wait()
        c.start_master()
        st, doc = c.api.json("GET", "/v1/datasets/digits", expect=200)
        check_eq([v["version"] for v in doc["versions"]], [2, 3], "datasets after a master restart")
