"""A job's outputs (docs/api.md, "Outputs"): each task's $YARD_OUTPUT_DIR is
handed to the master's chunk store when the task ends (only the chunks it
lacks are sent), kept per task and per attempt, listed by `yard outputs`
and fetched byte-exact by `yard download`, as is the job's checkpoint;
those who may not see the job whole get 403."""
import hashlib
import json
import os
import random
import re
import signal

from harness import check, check_eq, cluster, spec, wait_until

BIG = 200 << 20  # bytes of worker/0's big file
SEED = 17

# worker/0 writes a 200 MB deterministic file and small files; every task
# writes its role/index/attempt; attempt 0 writes a checkpoint and fails,
# attempt 1 (started from that checkpoint) succeeds.
TASK = r'''
import os, random, sys, time
out = os.environ["YARD_OUTPUT_DIR"]
idx = os.environ["YARD_TASK_INDEX"]
att = os.environ.get("YARD_RESTART_COUNT", "0")
ck = os.path.join(os.environ["YARD_CHECKPOINT_DIR"], "model.ckpt")
os.makedirs(os.path.join(out, "sub"), exist_ok=True)
with open(os.path.join(out, "who.txt"), "w") as f:
    f.write("worker/%s attempt %s\n" % (idx, att))
with open(os.path.join(out, "sub", "small.bin"), "wb") as f:
    f.write(bytes(range(256)) * 3)
if idx == "0":
    rng = random.Random(SEED_)
    with open(os.path.join(out, "big.bin"), "wb") as f:
        left = BIG_
        while left:
            n = min(left, 8 << 20)
            f.write(rng.randbytes(n))
            left -= n
ckd = os.environ["YARD_CHECKPOINT_DIR"]
done = os.path.join(ckd, "done-" + att)
if idx == "0":
    if att == "0":
        with open(ck + ".tmp", "w") as f:
            f.write("weights of attempt 0\n")
        os.rename(ck + ".tmp", ck)
    open(done, "w").close()
else:
    # the job's tasks share the node's checkpoint dir: worker/1 ends once
    # worker/0 has written everything, so that no task is stopped early
    while not os.path.exists(done):
        time.sleep(0.05)
if att == "0":
    sys.exit(3)
if not os.path.exists(ck):
    sys.exit(9)
'''.replace("SEED_", str(SEED)).replace("BIG_", str(BIG))


def sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def big_digest():
    rng = random.Random(SEED)
    h = hashlib.sha256()
    left = BIG
    while left:
        n = min(left, 8 << 20)
        h.update(rng.randbytes(n))
        left -= n
    return h.hexdigest()


def test_outputs_per_task_and_attempt_and_checkpoint():
    with cluster("outputs") as c:
        c.start_master()
        c.start_agent("a", gpus="sim:2")
        alice = c.user_token("alice")
        st, job = c.api.submit(spec(["/usr/bin/python3", "-c", TASK], name="outs", replicas=2,
                                    restart={"max": 1}), token=alice)
        check_eq(st, 201, f"submit: {job}")
        jid = job["id"]
        j = c.api.wait_job(jid, timeout=300)
        check_eq(j["state"], "succeeded", "the job succeeded on its second attempt")
        check_eq(j["attempt"], 1, "the job restarted once")

        def all_in():
            st, doc = c.api.json("GET", f"/v1/jobs/{jid}/outputs", token=alice)
            check_eq(st, 200, f"outputs listing: {doc}")
            return doc if len([t for t in doc["tasks"] if t["outputs"]]) == 4 else None
        doc = wait_until(all_in, 120, "the outputs of 2 tasks x 2 attempts")
        check_eq(sorted((t["role"], t["index"], t["attempt"]) for t in doc["tasks"]),
                 [("worker", 0, 0), ("worker", 0, 1), ("worker", 1, 0), ("worker", 1, 1)],
                 "one entry per task and attempt")
        check(doc["checkpoint"], f"the job has a checkpoint: {doc}")

        # deduplicated as datasets are: worker/0's second attempt wrote the
        # same 200 MB file and sent none of its chunks again
        big_chunks = -(-BIG // (8 << 20))
        by_task = {(t["index"], t["attempt"]): t["task"] for t in doc["tasks"]}

        def handed(index, attempt):
            pat = (rf"handed in the outputs of task {by_task[(index, attempt)]}: (\d+) files, (\d+) bytes, "
                   rf"uploaded (\d+) of (\d+) chunks")
            m = wait_until(lambda: re.search(pat, open(os.path.join(c.dir, "agent-a.log")).read()), 30,
                           f"the agent says what it handed in for worker/{index} attempt {attempt}")
            return [int(x) for x in m.groups()]
        first, second = handed(0, 0), handed(0, 1)
        check_eq(first[3], big_chunks + 2, f"worker/0's outputs in chunks: {first}")
        check(first[2] >= big_chunks, f"attempt 0 sent the big file's chunks: {first}")
        check_eq(second[3], big_chunks + 2, f"attempt 1's outputs in chunks: {second}")
        check_eq(second[2], 1, f"attempt 1 sent only its who.txt, not the 200 MB again: {second}")

        # the CLI's listing, as text and JSON, filtered
        r = c.cli("outputs", str(jid), token=alice, check_rc=0)
        text = r.stdout.decode()
        rows = [ln.split() for ln in text.splitlines() if ln.startswith("worker/")]
        files = {(x[0], x[1], x[3]): int(x[4]) for x in rows}
        check_eq(len(rows), 10, f"yard outputs: a row per file of each task and attempt: {text}")
        check_eq(files.get(("worker/0", "1", "big.bin")), BIG, f"worker/0's big file and its size: {text}")
        check_eq(files.get(("worker/1", "0", "sub/small.bin")), 768, f"a file in a subdir: {text}")
        check_eq(files.get(("worker/1", "0", "who.txt")), len("worker/1 attempt 0\n"), f"who.txt: {text}")
        check(("worker/1", "1", "big.bin") not in files, f"only what each task wrote: {text}")
        check(all(t["files_count"] == len(t["files"]) for t in doc["tasks"]),
              f"the API lists every file of each archive: {doc['tasks']}")
        r = c.cli("outputs", str(jid), "--task", "worker/1", "--attempt", "0", "--output", "json",
                  token=alice, check_rc=0)
        one = json.loads(r.stdout)
        check_eq([(t["role"], t["index"], t["attempt"]) for t in one["tasks"]], [("worker", 1, 0)],
                 "yard outputs --task worker/1 --attempt 0")
        r = c.cli("outputs", str(jid), "--task", "worker", token=alice, check_rc=1)
        check(b"ROLE/INDEX" in r.stderr, f"a bad --task is refused by name: {r.stderr!r}")

        # every task's latest attempt, byte-exact
        dest = os.path.join(c.dir, "dl")
        c.cli("download", str(jid), dest, token=alice, check_rc=0, timeout=300)
        check_eq(sha_file(os.path.join(dest, "worker-0", "big.bin")), big_digest(),
                 "worker/0's 200 MB file, downloaded")
        for i in (0, 1):
            with open(os.path.join(dest, f"worker-{i}", "who.txt")) as f:
                check_eq(f.read(), f"worker/{i} attempt 1\n", f"worker/{i}'s latest attempt")
            with open(os.path.join(dest, f"worker-{i}", "sub", "small.bin"), "rb") as f:
                check_eq(f.read(), bytes(range(256)) * 3, f"worker/{i}'s small file")
        check(not os.path.exists(os.path.join(dest, "worker-1", "big.bin")), "worker/1 wrote no big file")

        # one task's first attempt, into the dir itself
        d0 = os.path.join(c.dir, "dl-a0")
        c.cli("download", str(jid), "--task", "worker/1", "--attempt", "0", d0, token=alice, check_rc=0)
        with open(os.path.join(d0, "who.txt")) as f:
            check_eq(f.read(), "worker/1 attempt 0\n", "worker/1's first attempt")

        # the checkpoint
        dc = os.path.join(c.dir, "dl-ck")
        c.cli("download", str(jid), "--checkpoint", dc, token=alice, check_rc=0)
        with open(os.path.join(dc, "model.ckpt")) as f:
            check_eq(f.read(), "weights of attempt 0\n", "the job's checkpoint")

        # a later job reads them as data: pushed as a dataset version, of
        # the chunks the store holds already
        r = c.cli("data", "push", "--from-job", str(jid), "--task", "worker/0", "outs", token=alice,
                  check_rc=0, timeout=300)
        check(f"uploaded 0 of {big_chunks + 2} chunks".encode() in r.stdout,
              f"--from-job sends no bytes again: {r.stdout!r}")
        reader = ('set -e; test "$(cat "$YARD_DATA_DIR/m/who.txt")" = "worker/0 attempt 1"; '
                  'sha256sum "$YARD_DATA_DIR/m/big.bin"')
        st, rj = c.api.submit(spec(["/bin/sh", "-c", reader], name="reader",
                                   data=[{"source": "yard://outs", "mount": "m"}]), token=alice)
        check_eq(st, 201, f"submit the reader: {rj}")
        rjob = c.api.wait_job(rj["id"], timeout=300)
        check_eq(rjob["state"], "succeeded", "the reader found worker/0's outputs")
        want = big_digest()
        wait_until(lambda: want in c.api.log(rj["id"]).decode(), 30, "the reader read the 200 MB file whole")

        # ... or straight from the job: every task's latest outputs and the checkpoint
        reader = ('set -e; d="$YARD_DATA_DIR"; for i in 0 1; do '
                  'test "$(cat "$d/prev/worker-$i/who.txt")" = "worker/$i attempt 1"; done; '
                  'test "$(cat "$d/ck/model.ckpt")" = "weights of attempt 0"; '
                  'test ! -e "$d/prev/worker-1/big.bin"; '
                  'test "$(stat -L -c %a "$d/prev/worker-0/who.txt")" = 444; '  # the cache entry is sealed
                  'sha256sum "$d/prev/worker-0/big.bin"')
        st, rj = c.api.submit(spec(["/bin/sh", "-c", reader], name="reader2",
                                   data=[{"source": f"yard-job://{jid}/outputs", "mount": "prev"},
                                         {"source": f"yard-job://{jid}/checkpoint", "mount": "ck"}]),
                              token=alice)
        check_eq(st, 201, f"submit the yard-job:// reader: {rj}")
        rjob = c.api.wait_job(rj["id"], timeout=300)
        check_eq(rjob["state"], "succeeded", f"the reader found the job's outputs and checkpoint: {rjob}")
        wait_until(lambda: want in c.api.log(rj["id"]).decode(), 30,
                   "the yard-job:// reader read the 200 MB file whole")
        st, shown = c.api.json("GET", f"/v1/jobs/{rj['id']}", token=alice)
        pinned = [d for d in shown.get("data", []) if d["kind"] == "job" and d["mount"] == "prev"]
        check(pinned and pinned[0].get("digest"), f"the reader's data is pinned to a manifest: {shown.get('data')}")
        # ... one manifest of each task's latest outputs under ROLE-INDEX/
        merged = []
        for t in doc["tasks"]:
            if t["attempt"] == 1:
                _, part = c.api.json("GET", f"/v1/manifests/{t['outputs']}", token=alice, expect=200)
                merged += [dict(f, path=f"worker-{t['index']}/{f['path']}") for f in part["files"]]
        text = json.dumps({"files": sorted(merged, key=lambda f: f["path"].encode())}, sort_keys=True,
                          separators=(",", ":"))
        check_eq(pinned[0]["digest"], "sha256:" + hashlib.sha256(text.encode()).hexdigest(),
                 "the pinned manifest is the latest attempts' outputs under worker-0/ and worker-1/")
        check_eq(c.api.request("GET", f"/v1/manifests/{pinned[0]['digest']}", token=alice)[0], 404,
                 "the reader is final: nothing holds its manifest now")

        # someone who may not see the job whole
        eve = c.user_token("eve")
        st, err = c.api.submit(spec(["true"], name="eve-reader",
                                    data=[{"source": f"yard-job://{jid}/outputs"}]), token=eve)
        check_eq(st, 400, f"eve reads alice's job's outputs as data: {err}")
        check(err["error"].get("field") == "data[0].source" and f"no job {jid}" in err["error"]["message"],
              f"refused as if there were no such job: {err}")
        st, _ = c.api.json("GET", f"/v1/jobs/{jid}/outputs", token=eve)
        check_eq(st, 403, "eve lists alice's job's outputs")
        digest = [t for t in doc["tasks"] if t["attempt"] == 1 and t["index"] == 0][0]["outputs"]
        st, _, _ = c.api.request("GET", f"/v1/manifests/{digest}", token=eve)
        check_eq(st, 403, "eve reads the manifest of alice's job's outputs")
        st, _, _ = c.api.request("GET", f"/v1/manifests/{digest}", token=alice)
        check_eq(st, 200, "alice reads it")
        r = c.cli("download", str(jid), os.path.join(c.dir, "dl-eve"), token=eve, check_rc=1)
        check(b"may not" in r.stderr, f"yard download as eve: {r.stderr!r}")


def test_run_as_outputs_are_the_tasks_and_read_as_it():
    """Under --run-as, YARD_OUTPUT_DIR is the task's user's, and the agent
    reads it as that user: a file the task made unreadable stops the
    upload."""
    first = 61000
    with cluster("outputs-runas") as c:
        c.start_master()
        os.chmod(c.dir, 0o711)
        c.start_agent("n1", gpus="sim:1", extra=["--run-as", f"{first}-{first + 9}"])
        _, ok = c.api.submit(spec(["/bin/sh", "-c", 'id -u > "$YARD_OUTPUT_DIR/uid"'], name="ok"))
        check_eq(c.api.wait_job(ok["id"], timeout=60)["state"], "succeeded", "the task wrote its outputs")
        wait_until(lambda: c.api.json("GET", f"/v1/jobs/{ok['id']}/outputs")[1]["tasks"][0]["outputs"], 60,
                   "the outputs handed in")
        dest = os.path.join(c.dir, "dl")
        c.cli("download", str(ok["id"]), "--task", "worker/0", dest, check_rc=0)
        with open(os.path.join(dest, "uid")) as f:
            uid = int(f.read())
        check(first <= uid <= first + 9, f"the task ran as a uid of the range: {uid}")
        _, bad = c.api.submit(spec(["/bin/sh", "-c", 'echo x > "$YARD_OUTPUT_DIR/h"; chmod 000 "$YARD_OUTPUT_DIR/h"'],
                                   name="hidden"))
        check_eq(c.api.wait_job(bad["id"], timeout=60)["state"], "succeeded", "the hiding task")
        log_path = os.path.join(c.dir, "agent-n1.log")
        wait_until(lambda: re.search(rf"cannot hand the outputs of task \d+ to the master: .*Permission denied",
                                     open(log_path).read()), 30, "the agent says why it handed nothing in")
        check_eq(c.api.json("GET", f"/v1/jobs/{bad['id']}/outputs")[1]["tasks"][0]["outputs"], None,
                 "outputs holding a file its task cannot read are not handed in")


def test_outputs_retention_frees_final_jobs_only():
    """--outputs-retention frees the outputs of a job final that long, its
    manifest and chunks gone from the store; a live job keeps its earlier
    attempt's, and chunks a queued job reads stay until it ends."""
    with cluster("outputs-keep", master_args=["--outputs-retention", "3s"]) as c:
        c.start_master()
        c.start_agent("a", gpus="sim:1")
        _, done = c.api.submit(spec(["/bin/sh", "-c", 'echo kept > "$YARD_OUTPUT_DIR/f"'], name="done"))
        # attempt 0 leaves outputs and fails; attempt 1 runs on
        live_cmd = ('if [ "$YARD_RESTART_COUNT" = 0 ]; then echo a0 > "$YARD_OUTPUT_DIR/f"; exit 1; fi; '
                    'sleep 300')
        _, live = c.api.submit(spec(["/bin/sh", "-c", live_cmd], name="live", restart={"max": 1}))
        check_eq(c.api.wait_job(done["id"], timeout=60)["state"], "succeeded", "the short job")
        # outputs that a job yet to run reads as data wait for it
        _, read = c.api.submit(spec(["/bin/sh", "-c", 'echo read > "$YARD_OUTPUT_DIR/f"'], name="read"))
        check_eq(c.api.wait_job(read["id"], timeout=60)["state"], "succeeded", "the job to be read")
        _, reader = c.api.submit(spec(["/bin/sh", "-c", 'test "$(cat "$YARD_DATA_DIR/in/worker-0/f")" = read'],
                                      name="reader",
                                      after={"any": [live["id"]]},
                                      data=[{"source": f"yard-job://{read['id']}/outputs", "mount": "in"}]))

        def outs(jid):
            return [t["outputs"] for t in c.api.json("GET", f"/v1/jobs/{jid}/outputs", expect=200)[1]["tasks"]]
        digest = wait_until(lambda: outs(done["id"])[0], 60, "the short job's outputs")
        st, man = c.api.json("GET", f"/v1/manifests/{digest}")
        check_eq(st, 200, f"the outputs' manifest is served before it expires: {man}")
        chunk = man["files"][0]["chunks"][0]
        check_eq(c.api.request("GET", f"/v1/blobs/{chunk}")[0], 200, "its chunk is held")
        read_digest = wait_until(lambda: outs(read["id"])[0], 60, "the read job's outputs")
        read_chunk = c.api.json("GET", f"/v1/manifests/{read_digest}", expect=200)[1]["files"][0]["chunks"][0]
        wait_until(lambda: outs(live["id"])[0], 60, "the live job's first attempt's outputs")
        wait_until(lambda: c.api.job(live["id"])["state"] == "running" and c.api.job(live["id"])["attempt"] == 1,
                   60, "the live job's second attempt runs")
        wait_until(lambda: outs(done["id"]) == [None], 30, "the short job's outputs freed")
        check_eq(c.api.request("GET", f"/v1/manifests/{digest}")[0], 404, "the freed manifest left the store")
        check_eq(c.api.request("GET", f"/v1/blobs/{chunk}")[0], 404, "so did its chunk")
        check(outs(live["id"])[0], "the live job keeps its first attempt's outputs past the retention")
        wait_until(lambda: outs(read["id"]) == [None], 30, "the read job's outputs freed")
        check_eq(c.api.request("GET", f"/v1/blobs/{read_chunk}")[0], 200,
                 "the chunks that a queued job reads stay past the retention")
        c.api.json("POST", f"/v1/jobs/{live['id']}/cancel", expect=200)
        check_eq(c.api.wait_job(reader["id"], timeout=60)["state"], "succeeded",
                 "the reader read them once it could run")
        wait_until(lambda: c.api.request("GET", f"/v1/blobs/{read_chunk}")[0] == 404, 30,
                   "the chunks it read freed once the reader ended")



def test_an_agent_killed_mid_upload_sends_the_rest_when_it_starts_again():
    """The task's end is reported only once its outputs are in: an agent
    SIGKILLed while it sends them starts again, sends only the chunks the
    master still lacks, and the job's outputs arrive whole."""
    with cluster("outputs-resume") as c:
        c.start_master()
        a = c.start_agent("a", gpus="sim:1")
        write = ('import os, random\n'
                 'rng = random.Random(%d)\n'
                 'with open(os.path.join(os.environ["YARD_OUTPUT_DIR"], "big.bin"), "wb") as f:\n'
                 '    for _ in range(%d): f.write(rng.randbytes(8 << 20))\n' % (SEED, BIG >> 23))
        _, job = c.api.submit(spec(["/usr/bin/python3", "-c", write], name="resume"))
        rng = random.Random(SEED)
        chunks = ["sha256:" + hashlib.sha256(rng.randbytes(8 << 20)).hexdigest() for _ in range(BIG >> 23)]

        def missing():
            return c.api.json("POST", "/v1/blobs/missing", {"digests": chunks}, expect=200)[1]["missing"]
        wait_until(lambda: len(missing()) < len(chunks), 120, "the agent to start sending the file's chunks")
        a.kill(signal.SIGSTOP)
        sent = len(chunks) - len(missing())
        check(sent < len(chunks), f"the agent was stopped mid-upload: {sent} of {len(chunks)} chunks in")
        a.kill(signal.SIGKILL)
        a.p.wait()
        check_eq(c.api.json("GET", f"/v1/jobs/{job['id']}/outputs", expect=200)[1]["tasks"][0]["outputs"], None,
                 "no outputs were handed in")
        check(not c.api.job(job["id"])["state"] == "succeeded", "the task's end waits for its outputs")
        c.start_agent("a", gpus="sim:1")
        check_eq(c.api.wait_job(job["id"], timeout=120)["state"], "succeeded", "the job, once its agent is back")
        tid = c.api.job(job["id"])["tasks"][0]["id"]
        m = wait_until(lambda: re.search(rf"handed in the outputs of task {tid}: 1 files, {BIG} bytes, "
                                         r"uploaded (\d+) of (\d+) chunks", open(os.path.join(c.dir, "agent-a.log")).read()),
                       30, "the restarted agent to hand them in")
        check_eq(int(m.group(2)), len(chunks), f"the file's chunks: {m.group(0)}")
        check(int(m.group(1)) <= len(chunks) - sent, f"only the chunks still missing were sent: {m.group(0)}, "
              f"{sent} were in before the kill")
        dest = os.path.join(c.dir, "dl")
        c.cli("download", str(job["id"]), "--task", "worker/0", dest, check_rc=0, timeout=300)
        check_eq(sha_file(os.path.join(dest, "big.bin")), big_digest(), "the 200 MB file, whole")
