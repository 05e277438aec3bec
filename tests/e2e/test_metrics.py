"""Training metrics end to end: tasks print `@yard {json}` lines and framework
log lines; the agent parses them and ships the points; the master stores them
and serves GET /v1/jobs/{id}/metrics; `yard metrics` shows them. Floods of
100,000 points arrive complete, also across agent crashes."""
import json
import os
import signal

from harness import check, check_eq, cluster, wait_until

PY = "python3"  # from the task's PATH; no torch needed

# Scripts travel in the environment: a command's "{x}" and "}}" are placeholders.
RUN_SCRIPT = ["/bin/sh", "-c", 'exec python3 -c "$SCRIPT"']

N = 100000

# Prints N points of "loss" (step i, value 1/(i+1)), even steps on stdout and
# odd ones on stderr (all on stdout with SPLIT=0), with chatter and launcher
# prefixes in between. With GATES set, it stops before each listed step until
# TASKDIR/gateK exists.
FLOOD = r"""
import os, sys, time
n = int(os.environ["N"])
gates = [int(g) for g in os.environ.get("GATES", "").split(",") if g]
gate_dir = os.path.dirname(os.environ["YARD_DATA_DIR"].rstrip("/"))
out = sys.stdout
err = sys.stderr if os.environ.get("SPLIT", "1") == "1" else sys.stdout
for i in range(n):
    if gates and i == gates[0]:
        out.flush(); err.flush()
        k = len(os.environ["GATES"].split(",")) - len(gates) + 1
        while not os.path.exists(os.path.join(gate_dir, "gate%d" % k)):
            time.sleep(0.01)
        gates.pop(0)
    line = '@yard {"step": %d, "loss": %r}\n' % (i, 1.0 / (i + 1))
    if i % 1000 == 7:
        line = "[default0]:" + line
    (out if i % 2 == 0 else err).write(line)
    if i % 5000 == 0:
        out.write("epoch %d: not a metric line, but {\"step\": 1} looks like one\n" % i)
out.flush()
"""


def flood_spec(name, gates="", split=True):
    return {"name": name, "command": RUN_SCRIPT,
            "env": {"SCRIPT": FLOOD, "N": str(N), "GATES": gates, "SPLIT": "1" if split else "0"},
            "tasks": {"worker": {"replicas": 1, "gpus": 0, "cpus": 0.5}}}


def metrics(api, jid, query=""):
    status, doc = api.json("GET", f"/v1/jobs/{jid}/metrics{query}", expect=200)
    return doc


def point_count(api, jid):
    return sum(len(s["points"]) for s in metrics(api, jid, "?name=loss")["series"])


def check_flood(api, jid):
    doc = metrics(api, jid)
    check_eq(doc["job"], jid, "job of the metrics document")
    check_eq([(s["task"], s["name"]) for s in doc["series"]], [("worker/0", "loss")],
             "series of the flood job")
    pts = doc["series"][0]["points"]
    steps = [p[0] for p in pts]
    if len(pts) != N or steps != list(range(N)):
        dup = len(steps) - len(set(steps))
        missing = sorted(set(range(N)) - set(steps))[:10]
        raise AssertionError(f"flood: {len(pts)} points, {dup} duplicated steps, "
                             f"missing steps start {missing}")
    bad = [p for p in pts if p[1] != 1.0 / (p[0] + 1)]
    check_eq(bad[:5], [], "points whose value is not 1/(step+1)")
    check(all(isinstance(p[2], int) and p[2] > 1.7e15 for p in pts), "every point has a time")


def test_metrics_flood_arrives_complete():
    with cluster("metrics-flood") as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        _, job = c.api.submit(flood_spec("flood"))
        j = c.api.wait_job(job["id"], timeout=240)
        check_eq(j["state"], "succeeded", "state of the flood job")
        # the job succeeded only once every point was acknowledged: no waiting here
        check_flood(c.api, job["id"])


def test_metrics_flood_survives_agent_sigkill():
    with cluster("metrics-kill") as c:
        c.start_master()
        agent = c.start_agent("n1", gpus="none")
        # stops after 50,000 and 75,000 points until the test opens each gate
        _, job = c.api.submit(flood_spec("flood-kill", gates="50000,75000"))
        jid = job["id"]
        task = wait_until(lambda: (lambda t: t if t["state"] == "running" else None)(c.api.job(jid)["tasks"][0]),
                          60, "the flood task running")
        tdir = os.path.join(c.dir, "agent-n1", "tasks", str(task["id"]))

        # 1. SIGKILL while the first half is being shipped; restart at once
        wait_until(lambda: point_count(c.api, jid) >= 5000, 120, "the first points at the master",
                   interval=0.05)
        agent.kill(signal.SIGKILL)
        agent.p.wait()
        agent = c.start_agent("n1", gpus="none")
        open(os.path.join(tdir, "gate1"), "w").close()

        # 2. SIGKILL again, and lose the agent's cursors as a power loss may:
        #    the master's offsets must keep every point single
        wait_until(lambda: point_count(c.api, jid) >= 60000, 120, "60,000 points at the master",
                   interval=0.05)
        agent.kill(signal.SIGKILL)
        agent.p.wait()
        check(os.path.exists(os.path.join(tdir, "metrics.json")), "the agent keeps its cursors in the task dir")
        os.unlink(os.path.join(tdir, "metrics.json"))
        # the rest is written while no agent runs
        open(os.path.join(tdir, "gate2"), "w").close()
        wait_until(lambda: os.path.exists(os.path.join(tdir, "exit.json")), 120,
                   "the task to finish while the agent is down")
        c.start_agent("n1", gpus="none")
        j = c.api.wait_job(jid, timeout=240)
        check_eq(j["state"], "succeeded", "state of the flood job whose agent was killed")
        check_flood(c.api, jid)


def test_metrics_backlog_holds_the_final_status():
    """A task that prints 100,000 points on one stream and ends while its agent
    is down: the restarted agent needs several rounds to ship them, and the
    job must not turn final before the last one is acknowledged."""
    with cluster("metrics-backlog") as c:
        c.start_master()
        agent = c.start_agent("n1", gpus="none")
        _, job = c.api.submit(flood_spec("backlog", gates="0", split=False))
        jid = job["id"]
        task = wait_until(lambda: (lambda t: t if t["state"] == "running" else None)(c.api.job(jid)["tasks"][0]),
                          60, "the task running")
        tdir = os.path.join(c.dir, "agent-n1", "tasks", str(task["id"]))
        agent.kill(signal.SIGKILL)
        agent.p.wait()
        open(os.path.join(tdir, "gate1"), "w").close()
        wait_until(lambda: os.path.exists(os.path.join(tdir, "exit.json")), 120,
                   "the task to finish while the agent is down")
        c.start_agent("n1", gpus="none")
        j = c.api.wait_job(jid, timeout=240)
        check_eq(j["state"], "succeeded", "state of the job")
        check_flood(c.api, jid)


CAFFE = r"""
import sys
log = sys.stderr.write
p = "I0412 10:15:%02d.000001  1234 "
lines = [
    "solver.cpp:330] Iteration 0, Testing net (#0)",
    "solver.cpp:397]     Test net output #0: accuracy = 0.1",
    "solver.cpp:397]     Test net output #1: loss = 2.3 (* 1 = 2.3 loss)",
    "solver.cpp:218] Iteration 0 (0 iter/s, 0.1s/100 iters), loss = 2.31",
    "solver.cpp:237]     Train net output #0: loss = 2.31 (* 1 = 2.31 loss)",
    "sgd_solver.cpp:105] Iteration 0, lr = 0.01",
    "solver.cpp:218] Iteration 100 (120.5 iter/s, 0.83s/100 iters), loss = 0.35",
    "solver.cpp:237]     Train net output #0: loss = 0.35 (* 1 = 0.35 loss)",
    "sgd_solver.cpp:105] Iteration 100, lr = 0.0093",
    "solver.cpp:330] Iteration 200, Testing net (#0)",
    "solver.cpp:397]     Test net output #0: accuracy = 0.98",
    "solver.cpp:397]     Test net output #1: loss = 0.06 (* 1 = 0.06 loss)",
    "solver.cpp:218] Iteration 200 (118 iter/s, 0.85s/100 iters), loss = 0.2",
    "sgd_solver.cpp:105] Iteration 200, lr = 0.0087",
    "solver.cpp:464] Snapshotting to binary proto file lenet_iter_200.caffemodel",
    "solver.cpp:310] Optimization Done.",
]
for k, l in enumerate(lines):
    log(p % k + l + "\n")
"""

MXNET = r"""
import logging
logging.basicConfig(level=logging.INFO)
for l in ["Epoch[0] Batch [100]\tSpeed: 1234.56 samples/sec\taccuracy=0.912",
          "Epoch[0] Batch [200]\tSpeed: 1300.00 samples/sec\taccuracy=0.95",
          "Epoch[0] Train-accuracy=0.95",
          "Epoch[0] Time cost=3.2",
          "Epoch[0] Validation-accuracy=0.97",
          "Epoch[1] Batch [100]\tSpeed: 1250.00 samples/sec\taccuracy=0.97",
          "Epoch[1] Train-accuracy=0.98",
          "Epoch[1] Validation-accuracy=0.985"]:
    logging.info(l)
"""

KERAS = r"""
import sys
w = sys.stdout.write
w("Epoch 1/2\n")
w("   1/1875 [..............................] - ETA: 5:00 - loss: 2.3000 - accuracy: 0.1000")
w("\r 900/1875 [=============>................] - ETA: 1s - loss: 0.5000 - accuracy: 0.8500")
w("\r1875/1875 [==============================] - 3s 1ms/step - loss: 0.2950 - accuracy: 0.9145"
  " - val_loss: 0.1000 - val_accuracy: 0.9700\n")
w("Epoch 2/2\n")
# the last line has no newline: it counts once the task has ended
w("1875/1875 [==============================] - 3s 1ms/step - loss: 0.1000 - accuracy: 0.9700"
  " - val_loss: 0.0800 - val_accuracy: 0.9750")
"""


def frameworks_spec():
    role = lambda script: {"replicas": 1, "gpus": 0, "cpus": 0.1,
                           "command": ["/bin/sh", "-c", f'exec python3 -c "${script}"']}
    return {"name": "frameworks", "command": ["/bin/false"],
            "env": {"CAFFE": CAFFE, "MXNET": MXNET, "KERAS": KERAS},
            "tasks": {"caffe": role("CAFFE"), "mxnet": role("MXNET"), "keras": role("KERAS")}}


WANT_FRAMEWORKS = {
    ("caffe/0", "loss"): [(0, 2.31), (100, 0.35), (200, 0.2)],
    ("caffe/0", "lr"): [(0, 0.01), (100, 0.0093), (200, 0.0087)],
    ("caffe/0", "test/accuracy"): [(0, 0.1), (200, 0.98)],
    ("caffe/0", "test/loss"): [(0, 2.3), (200, 0.06)],
    ("mxnet/0", "accuracy"): [(100, 0.912), (200, 0.95), (300, 0.97)],
    ("mxnet/0", "samples_per_sec"): [(100, 1234.56), (200, 1300.0), (300, 1250.0)],
    ("mxnet/0", "time_cost"): [(0, 3.2)],
    ("mxnet/0", "train/accuracy"): [(0, 0.95), (1, 0.98)],
    ("mxnet/0", "validation/accuracy"): [(0, 0.97), (1, 0.985)],
    ("keras/0", "accuracy"): [(0, 0.9145), (1, 0.97)],
    ("keras/0", "loss"): [(0, 0.295), (1, 0.1)],
    ("keras/0", "val_accuracy"): [(0, 0.97), (1, 0.975)],
    ("keras/0", "val_loss"): [(0, 0.1), (1, 0.08)],
}


def test_metrics_framework_lines_and_cli():
    with cluster("metrics-frameworks") as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        _, job = c.api.submit(frameworks_spec())
        jid = job["id"]
        j = c.api.wait_job(jid, timeout=120)
        check_eq(j["state"], "succeeded", f"state of the framework job ({j['reason']})")
        doc = metrics(c.api, jid)
        got = {(s["task"], s["name"]): [(p[0], p[1]) for p in s["points"]] for s in doc["series"]}
        check_eq(got, WANT_FRAMEWORKS, "series parsed from Caffe, MXNet and Keras output")
        order = [(s["task"], s["name"]) for s in doc["series"]]
        check_eq(order, sorted(WANT_FRAMEWORKS, key=lambda k: (["caffe/0", "mxnet/0", "keras/0"].index(k[0]), k[1])),
                 "series ordered by task (spec order) then name")

        # filters
        one = metrics(c.api, jid, "?task=mxnet/0&name=accuracy")["series"]
        check_eq([(s["task"], s["name"], len(s["points"])) for s in one], [("mxnet/0", "accuracy", 3)],
                 "series for ?task=mxnet/0&name=accuracy")
        status, _ = c.api.json("GET", f"/v1/jobs/{jid}/metrics?task=nope/0")
        check_eq(status, 404, "HTTP status for a task the job does not have")
        status, _ = c.api.json("GET", f"/v1/jobs/{jid}/metrics?task=caffe")
        check_eq(status, 400, "HTTP status for a task without an index")
        status, _ = c.api.json("GET", "/v1/jobs/999/metrics")
        check_eq(status, 404, "HTTP status for a job that does not exist")

        # yard metrics: a row per series with its last point and a sparkline
        out = c.cli("metrics", str(jid), check_rc=0).stdout.decode()
        lines = out.splitlines()
        check(lines and lines[0].split()[:4] == ["TASK", "NAME", "POINTS", "LAST"], f"header: {out}")
        check_eq(len(lines), 1 + len(WANT_FRAMEWORKS), f"rows of yard metrics:\n{out}")
        row = next(l for l in lines if l.split()[:2] == ["caffe/0", "loss"])
        check_eq(row.split()[2:5], ["3", "200", "0.2"], f"caffe loss row: {row!r}")
        spark = row.split()[5]
        check_eq(spark, "\u2588\u2581\u2581", f"sparkline of 2.31, 0.35, 0.2: {row!r}")
        flat = next(l for l in lines if l.split()[:2] == ["mxnet/0", "time_cost"])
        check_eq(flat.split()[5], "\u2584", f"sparkline of a single point: {flat!r}")
        r = c.cli("metrics", str(jid), "--output", "json", check_rc=0)
        check_eq(json.loads(r.stdout), doc, "yard metrics --output json is the API document")
        out = c.cli("metrics", str(jid), "--task", "keras/0", "--name", "val_loss", check_rc=0).stdout.decode()
        check_eq([l.split()[:5] for l in out.splitlines()[1:]], [["keras/0", "val_loss", "2", "1", "0.08"]],
                 f"yard metrics --task keras/0 --name val_loss:\n{out}")
        c.cli("metrics", check_rc=2)
        c.cli("metrics", str(jid), "--task", "caffe", check_rc=2)
        c.cli("metrics", "999", check_rc=1)


def test_metrics_cli_sparkline_of_a_flood():
    """yard metrics over 100,000 points: one row, a 30-character sparkline of a
    falling curve."""
    with cluster("metrics-cli") as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        spec = flood_spec("flood-cli")
        spec["env"]["N"] = "20000"
        _, job = c.api.submit(spec)
        j = c.api.wait_job(job["id"], timeout=120)
        check_eq(j["state"], "succeeded", "state of the job")
        out = c.cli("metrics", str(job["id"]), check_rc=0).stdout.decode().splitlines()
        check_eq(len(out), 2, f"one series: {out}")
        cols = out[1].split()
        check_eq(cols[:5], ["worker/0", "loss", "20000", "19999", "5e-05"], f"the row: {out[1]!r}")
        check_eq(len(cols[5]), 30, f"sparkline width: {cols[5]!r}")
        check_eq(cols[5][0], "\u2588", "the sparkline starts high")
        check(set(cols[5][1:]) <= set("\u2581\u2582"), f"and falls: {cols[5]!r}")
