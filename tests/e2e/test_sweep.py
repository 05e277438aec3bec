"""Sweeps on a real master and agent (docs/experiments.md): a grid that
never has more than max_parallel trials live, ASHA stopping the trials that
do worse (their outputs kept), `yard exp show` sorted by the objective, a
master restart in the middle, cancel and wait by experiment, and refusals
that name the field."""
import json
import os
import threading
import time

from harness import check, check_eq, cluster, spec, wait_until

SH = "/bin/sh"
LIVE = ("queued", "starting", "running")
FINAL = ("succeeded", "failed", "cancelled", "stopped_early")


def sweep_spec(command, sweep, name="sw", **extra):
    s = spec([SH, "-c", command], name=name, **extra)
    s["sweep"] = sweep
    return s


def asha_spec(command, name, **early_stop):
    """The grid of q the ASHA tests share, one trial at a time, acc ranked
    with ASHA on the epoch (rungs at 1, 3, ...: 1 in 3 goes on)."""
    stop = {"method": "asha", "resource": "epoch", "min_resource": 1, "reduction_factor": 3}
    stop.update(early_stop)
    return sweep_spec(command, {"method": "grid", "params": {"q": [0.5, 0.9, 0.1, 0.2, 0.95, 0.05]},
                                "max_parallel": 1, "objective": {"metric": "acc", "mode": "max"},
                                "early_stop": stop}, name=name)


def submit_exp(c, s, token=None, expect=201):
    st, doc = c.api.json("POST", "/v1/experiments", {"spec": s}, token=token)
    check_eq(st, expect, f"POST /v1/experiments: {doc}")
    return doc


def exp(c, eid, token=None):
    return c.api.json("GET", f"/v1/experiments/{eid}", token=token, expect=200)[1]


def wait_exp(c, eid, timeout=120):
    return wait_until(lambda: (lambda e: e if e["state"] != "running" else None)(exp(c, eid)),
                      timeout, f"experiment {eid} to end")


class LiveWatch:
    """Polls the experiment's trials' jobs while it runs and keeps the most
    that were live (queued, starting or running) at once."""

    def __init__(self, c, eid):
        self.c, self.eid, self.most, self.stop = c, eid, 0, threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            st, jobs = self.c.api.json("GET", "/v1/jobs?limit=100")
            if st == 200:
                live = [j for j in jobs["jobs"] if j.get("experiment") == self.eid and j["state"] in LIVE]
                self.most = max(self.most, len(live))
            time.sleep(0.02)

    def done(self):
        self.stop.set()
        self.t.join()
        return self.most


def test_grid_keeps_max_parallel_and_sorts_by_objective():
    with cluster("grid") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:8")
        # score = a * 10 + b: the best is a=3, b=2
        cmd = ('echo "a=$YARD_PARAM_A b={params.b}"; sleep 0.6; '
               'echo "@yard {\\"step\\": 1, \\"score\\": $(( $YARD_PARAM_A * 10 + {params.b} ))}"')
        s = sweep_spec(cmd, {"method": "grid", "params": {"a": [1, 2, 3], "b": [1, 2]},
                             "max_parallel": 2, "objective": {"metric": "score", "mode": "max"}},
                       name="grid")
        e = submit_exp(c, s)
        eid = e["id"]
        check_eq((e["trials_total"], e["max_parallel"], e["method"], e["params"]), (6, 2, "grid", ["a", "b"]),
                 "the experiment as submitted")
        watch = LiveWatch(c, eid)
        done = wait_exp(c, eid)
        most = watch.done()
        check_eq(done["state"], "completed", f"the experiment's end: {done}")
        check(most <= 2, f"at most max_parallel=2 trials live at once, saw {most}")
        check_eq(most, 2, "the sweep used both of its slots")
        trials = done["trials"]
        check_eq(len(trials), 6, "every grid point is a trial")
        check_eq(sorted((t["params"]["a"], t["params"]["b"]) for t in trials),
                 [(a, b) for a in (1, 2, 3) for b in (1, 2)], "the trials cover the grid")
        check_eq(done["counts"], {"succeeded": 6}, "the trials' states")
        for t in trials:
            want = t["params"]["a"] * 10 + t["params"]["b"]
            check_eq((t["last"], t["best"], t["step"]), (want, want, 1), f"trial {t['trial']}'s objective")
            j = c.api.job(t["job"])
            check_eq((j["experiment"], j["trial"], j["name"]), (eid, t["trial"], f"grid-t{t['trial']}"),
                     "the trial's job")
            check_eq(c.api.log(t["job"]).split(b"\n")[0],
                     f"a={t['params']['a']} b={t['params']['b']}".encode(), "the params reached the trial")
        check_eq([t["best"] for t in trials], sorted((t["best"] for t in trials), reverse=True),
                 "trials sorted by the objective, best first (mode max)")
        check_eq(done["best"]["value"], 32, "the experiment's best")
        # yard exp show: the same order as a table, and as JSON
        r = c.cli("exp", "show", str(eid), check_rc=0)
        lines = r.stdout.decode().splitlines()
        check(lines[0].startswith(f"experiment {eid} grid (admin): completed, grid 6 trials, 2 at a time"),
              f"the header of yard exp show: {lines[0]!r}")
        head = lines[1].split()
        check_eq(head, ["TRIAL", "JOB", "STATE", "a", "b", "LAST", "BEST", "STEP"], "the table's columns")
        rows = [ln.split() for ln in lines[2:]]
        check_eq([int(r[head.index("BEST")]) for r in rows], [32, 31, 22, 21, 12, 11],
                 "yard exp show sorted by the objective")
        r = c.cli("exp", "show", str(eid), "--output", "json", check_rc=0)
        check_eq([t["best"] for t in json.loads(r.stdout)["trials"]], [32, 31, 22, 21, 12, 11],
                 "yard exp show --output json")
        r = c.cli("exp", "ls", check_rc=0)
        row = r.stdout.decode().splitlines()[1].split()
        check_eq(row[:7], [str(eid), "grid", "admin", "completed", "grid", "6/6", "max"], "yard exp ls")
        # yard wait --experiment: done, and it succeeded
        r = c.cli("wait", "--experiment", str(eid), check_rc=0)
        check_eq(r.stdout.decode().strip(), f"experiment {eid} completed", "yard wait --experiment")


def test_asha_stops_the_trials_that_do_worse():
    with cluster("asha") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:4")
        # acc = q * epoch / 10 over 9 epochs; one trial at a time, so that the
        # rungs see the trials in grid order: 0.5 and 0.9 go on, 0.1, 0.2 and
        # 0.05 are below the cutoff of rung 1 (1 in 3 goes on), 0.95 goes on
        cmd = ('echo kept > "$YARD_OUTPUT_DIR/note.txt"; '
               'for e in 1 2 3 4 5 6 7 8 9; do '
               'echo "@yard {\\"step\\": $e, \\"epoch\\": $e, \\"acc\\": $(awk "BEGIN{print {params.q}*$e/10}")}"; '
               'sleep 0.5; done; echo finished')
        s = asha_spec(cmd, "asha", max_resource=10)
        eid = submit_exp(c, s)["id"]
        done = wait_exp(c, eid, timeout=180)
        check_eq(done["state"], "completed", f"the experiment's end: {done}")
        by_q = {t["params"]["q"]: t for t in done["trials"]}
        stopped = sorted(q for q, t in by_q.items() if t["state"] == "stopped_early")
        check_eq(stopped, [0.05, 0.1, 0.2], f"the trials ASHA stopped: {done['trials']}")
        check_eq(sorted(q for q, t in by_q.items() if t["state"] == "succeeded"), [0.5, 0.9, 0.95],
                 "the trials that went on")
        for q in stopped:
            t = by_q[q]
            check("asha: acc" in t["reason"] and "below the cutoff" in t["reason"], f"the stop's reason: {t}")
            j = c.api.job(t["job"])
            check_eq(j["reason"]["code"], "stopped_early", f"the stopped job's reason: {j['reason']}")
            check(b"finished" not in c.api.log(t["job"]), f"trial q={q} was stopped before its end")
            check(t["step"] < 9, f"trial q={q} stopped before epoch 9: {t}")
            dest = os.path.join(c.dir, f"out-{q}")
            c.cli("download", str(t["job"]), dest, check_rc=0)
            found = [os.path.join(d, f) for d, _, fs in os.walk(dest) for f in fs if f == "note.txt"]
            check(len(found) == 1 and open(found[0]).read() == "kept\n",
                  f"a stopped trial's outputs are kept: {found}")
        for q in (0.5, 0.9, 0.95):
            check_eq(by_q[q]["step"], 9, f"trial q={q} ran every epoch")
        check_eq([t["params"]["q"] for t in done["trials"]][:3], [0.95, 0.9, 0.5], "sorted by the best acc")
        check_eq(done["counts"], {"succeeded": 3, "stopped_early": 3}, "the counts")
        r = c.cli("wait", "--experiment", str(eid), check_rc=0)
        check_eq(r.stdout.decode().strip(), f"experiment {eid} completed",
                 "stopped trials do not fail yard wait --experiment")


class RunWatch:
    """Polls the experiment's trials' jobs and keeps the most that were
    starting or running at once (a paused trial is queued, held)."""

    def __init__(self, c, eid):
        self.c, self.eid, self.most, self.held, self.stop = c, eid, 0, set(), threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            st, jobs = self.c.api.json("GET", "/v1/jobs?limit=100")
            if st == 200:
                mine = [j for j in jobs["jobs"] if j.get("experiment") == self.eid]
                self.most = max(self.most, len([j for j in mine if j["state"] in ("starting", "running")]))
                for j in mine:
                    r = j.get("reason") or {}
                    if j["state"] == "queued" and r.get("code") == "held":
                        self.held.add((j["id"], r.get("message", "")))
            time.sleep(0.02)

    def done(self):
        self.stop.set()
        self.t.join()
        return self.most


def test_asha_promotion_pauses_and_resumes_from_the_checkpoint():
    with cluster("ashap") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:4")
        # acc = q * epoch / 10 over 9 epochs, the epoch checkpointed; rungs at
        # epochs 1 and 3, 1 in 3 promoted. One trial at a time: 0.5, 0.9 and
        # 0.1 pause at rung 1, then 0.9 (best of 3) is promoted and pauses at
        # rung 3; 0.2 pauses at rung 1; 0.95 is the best of 5 there and goes
        # on at once to pause at rung 3; 0.05 pauses at rung 1. With no trial
        # left to start and none finished, 0.95 (best at rung 3) resumes and
        # runs to the end; the paused ones end stopped_early.
        cmd = ('ck="$YARD_CHECKPOINT_DIR/epoch"; e=0; if [ -f "$ck" ]; then e=$(cat "$ck"); fi; '
               'echo "resumed at epoch $e"; '
               'while [ $e -lt 9 ]; do e=$((e+1)); echo $e > "$ck.tmp"; mv "$ck.tmp" "$ck"; '
               'echo "@yard {\\"step\\": $e, \\"epoch\\": $e, \\"acc\\": $(awk "BEGIN{print {params.q}*$e/10}")}"; '
               'sleep 0.3; done; echo finished')
        s = asha_spec(cmd, "ashap", max_resource=9, pause=True)
        eid = submit_exp(c, s)["id"]
        w = RunWatch(c, eid)
        done = wait_exp(c, eid, timeout=240)
        most = w.done()
        check_eq(done["state"], "completed", f"the experiment's end: {done}")
        check(most <= 1, f"at most max_parallel trials ran at once, paused ones aside: {most}")
        by_q = {t["params"]["q"]: t for t in done["trials"]}
        check_eq(sorted(q for q, t in by_q.items() if t["state"] == "succeeded"), [0.95],
                 f"the one trial that ran to the end: {done['trials']}")
        check_eq(sorted(q for q, t in by_q.items() if t["state"] == "stopped_early"),
                 [0.05, 0.1, 0.2, 0.5, 0.9], "the paused trials end stopped_early")
        best = c.api.job(by_q[0.95]["job"])
        log = c.api.log(best["id"]).decode()
        check(best["attempt"] >= 1 and "finished" in log, f"0.95 was paused and resumed to its end: {best}")
        first = c.cli("logs", str(best["id"]), "--attempt", "0", check_rc=0).stdout.decode()
        check("resumed at epoch 0" in first and "finished" not in first, f"its first attempt: {first}")
        resumed = [int(x.split()[-1]) for x in log.splitlines() if x.startswith("resumed at epoch")]
        check(resumed and resumed[0] >= 3,
              f"its last attempt resumed from the checkpoint of epoch 3 or later: {resumed}")
        check_eq(by_q[0.95]["step"], 9, "it reached epoch 9")
        second = c.api.job(by_q[0.9]["job"])
        check(second["attempt"] >= 1, f"0.9 was promoted from rung 1 once: {second}")
        check(by_q[0.9]["step"] >= 3, f"and ran to rung 3: {by_q[0.9]}")
        for q in (0.5, 0.1, 0.2, 0.05):
            t = by_q[q]
            check_eq(c.api.job(t["job"])["attempt"], 1, f"q={q} paused once, never resumed")
            check("ranks" in t["reason"] and "paused until it is promoted" in t["reason"],
                  f"q={q}'s reason: {t}")
        check(any(msg.startswith("held by asha: acc") for _, msg in w.held),
              f"a paused trial waits, held, saying why: {w.held}")
        check_eq([t["params"]["q"] for t in done["trials"]][0], 0.95, "sorted by the best acc")


def test_a_paused_trial_released_by_hand_goes_on_and_is_judged_again():
    with cluster("ashar") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:4")
        # q 0.5 (fast) pauses at rung 1, alone there; released by hand it goes
        # on and is judged again: alone at rung 3, it pauses there too. (q 0.9,
        # slow, comes and goes meanwhile; how the sweep ends is not the point.)
        cmd = ('ck="$YARD_CHECKPOINT_DIR/epoch"; e=0; if [ -f "$ck" ]; then e=$(cat "$ck"); fi; '
               'p=0.3; if [ {params.q} = 0.9 ]; then p=3; fi; '
               'while [ $e -lt 9 ]; do e=$((e+1)); echo $e > "$ck.tmp"; mv "$ck.tmp" "$ck"; '
               'echo "@yard {\\"step\\": $e, \\"epoch\\": $e, \\"acc\\": $(awk "BEGIN{print {params.q}*$e/10}")}"; '
               'sleep $p; done')
        s = sweep_spec(cmd, {"method": "grid", "params": {"q": [0.5, 0.9]}, "max_parallel": 1,
                             "objective": {"metric": "acc", "mode": "max"},
                             "early_stop": {"method": "asha", "resource": "epoch", "min_resource": 1,
                                            "max_resource": 9, "reduction_factor": 3, "pause": True}},
                       name="ashar")
        eid = submit_exp(c, s)["id"]
        first = wait_until(lambda: (lambda t: t["job"] if t and (t.get("reason") or "").startswith("asha") else None)(
            next((t for t in exp(c, eid)["trials"] if t["params"]["q"] == 0.5), None)), 60, "0.5 paused at rung 1")
        check_eq(c.api.job(first)["reason"]["code"], "held", "the paused trial is held")
        c.cli("release", str(first), check_rc=0)
        done = wait_exp(c, eid, timeout=120)
        check_eq(done["state"], "completed", f"the experiment ends: {done}")
        j = c.api.job(first)
        pauses = [e["reason"]["message"] for e in j["events"]
                  if e.get("reason", {}).get("code") == "preempted"]
        check(len(pauses) >= 2 and "at epoch 1 " in pauses[0] and "at epoch 3 " in pauses[1],
              f"released by hand, 0.5 went on and was paused again at rung 3: {pauses}")


def test_restart_cancel_visibility_and_refusals():
    with cluster("expctl") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:4")
        alice, bob = c.user_token("alice"), c.user_token("bob")
        # a random sweep of 5, one at a time, each trial 30 s: cancelled after a restart
        cmd = 'echo "@yard {\\"step\\": 1, \\"loss\\": {params.lr}}"; sleep 30'
        s = sweep_spec(cmd, {"method": "random", "trials": 5, "max_parallel": 1, "seed": 7,
                             "params": {"lr": {"log_uniform": [0.001, 0.1]}, "layers": {"int": [2, 6]}},
                             "objective": {"metric": "loss", "mode": "min"}}, name="rnd")
        e = submit_exp(c, s, token=alice)
        eid = e["id"]
        t0 = e["trials"][0]
        check(0.001 <= t0["params"]["lr"] <= 0.1 and t0["params"]["layers"] in range(2, 7),
              f"a random trial's params within their domains: {t0}")
        wait_until(lambda: exp(c, eid)["trials"][0]["last"] is not None, 30, "the first trial's point")
        # bob may not see alice's experiment; the listing leaves it out
        st, doc = c.api.json("GET", f"/v1/experiments/{eid}", token=bob)
        check_eq(st, 404, f"bob reads alice's experiment: {doc}")
        st, doc = c.api.json("POST", f"/v1/experiments/{eid}/cancel", token=bob)
        check_eq(st, 404, f"bob cancels alice's experiment: {doc}")
        check_eq(c.api.json("GET", "/v1/experiments", token=bob, expect=200)[1]["experiments"], [],
                 "bob's listing")
        # a master restart keeps the experiment, its trial and the point read back
        before = exp(c, eid, token=alice)
        c.master.stop()
        c.start_master()
        after = exp(c, eid, token=alice)
        check_eq(after["trials"], before["trials"], "the trials after a master restart")
        check_eq(after["state"], "running", "still running after the restart")
        # cancel: its live trial is cancelled and no more trials are made
        r = c.cli("cancel", "--experiment", str(eid), token=alice, check_rc=0)
        check_eq(r.stdout.decode().strip(), f"experiment {eid} cancelled", "yard cancel --experiment")
        done = exp(c, eid, token=alice)
        check_eq(len(done["trials"]), 1, "no trial is made after the cancel")
        check_eq(c.api.wait_job(done["trials"][0]["job"])["state"], "cancelled", "the live trial")
        time.sleep(0.5)
        check_eq(len(exp(c, eid)["trials"]), 1, "still one trial a moment later")
        r = c.cli("wait", "--experiment", str(eid), token=alice, check_rc=None)
        check(r.returncode == 1 and b"cancelled" in r.stdout, f"yard wait on a cancelled experiment: {r}")
        st, doc = c.api.json("POST", f"/v1/experiments/{eid}/cancel", token=alice)
        check_eq(st, 409, f"cancelling twice: {doc}")
        # refusals name the field, the value and the reason, and make nothing
        n_before = len(c.api.json("GET", "/v1/jobs", expect=200)[1]["jobs"])
        bad = [
            ({"method": "grid", "params": {"lr": {"uniform": [0, 1]}}, "objective": {"metric": "x", "mode": "max"}},
             "sweep.params.lr", "grid tries every value"),
            ({"method": "random", "params": {"lr": [1, 2]}, "objective": {"metric": "x", "mode": "max"}},
             "sweep.trials", "required for method: random"),
            ({"method": "grid", "params": {"lr": [1]}, "objective": {"metric": "x", "mode": "best"}},
             "sweep.objective.mode", "\"best\""),
            ({"method": "grid", "params": {"lr": [1]}, "objective": {"metric": "x", "mode": "max"},
              "early_stop": {"method": "hyperband"}}, "sweep.early_stop.method", "\"hyperband\""),
            ({"method": "grid", "params": {"lr": [1]}, "objective": {"metric": "x", "mode": "max"},
              "max_paralel": 2}, "sweep.max_paralel", "max_parallel"),
        ]
        for sw, field, words in bad:
            st, doc = c.api.json("POST", "/v1/experiments", {"spec": sweep_spec("true", sw)})
            check_eq(st, 400, f"a bad sweep {sw}: {doc}")
            check_eq(doc["error"]["field"], field, f"the field of {doc}")
            check(words in doc["error"]["message"], f"{words!r} in {doc['error']['message']!r}")
        st, doc = c.api.json("POST", "/v1/jobs", {"spec": sweep_spec("true", bad[0][0] | {"params": {"a": [1]}})})
        check_eq((st, doc["error"]["field"]), (400, "sweep"), f"a sweep sent to POST /v1/jobs: {doc}")
        st, doc = c.api.json("POST", "/v1/experiments", {"spec": spec([SH, "-c", "true"])})
        check_eq((st, doc["error"]["field"]), (400, "sweep"), f"an experiment without a sweep: {doc}")
        check_eq(len(c.api.json("GET", "/v1/jobs", expect=200)[1]["jobs"]), n_before, "refusals made no job")
        # yard submit of a sweep file: an experiment, its id on stdout
        path = os.path.join(c.dir, "sweep.yaml")
        with open(path, "w") as f:
            f.write("name: filesweep\ncommand: [/bin/sh, -c, 'echo \"@yard {\\\"step\\\": 1, \\\"v\\\": {params.k}}\"']\n"
                    "tasks: {worker: {replicas: 1, gpus: 0, cpus: 0.1}}\n"
                    "sweep: {method: grid, params: {k: [3, 1, 2]}, max_parallel: 3,\n"
                    "        objective: {metric: v, mode: min}}\n")
        r = c.cli("submit", path, token=alice, check_rc=0)
        fid = int(r.stdout.decode().strip())
        check(b"3 trials (grid), 3 at a time" in r.stderr, f"yard submit's note: {r.stderr!r}")
        done = wait_exp(c, fid)
        check_eq([t["best"] for t in done["trials"]], [1, 2, 3], "mode min: the lowest first")
        r = c.cli("submit", path, "--follow", token=alice, check_rc=2)
        check(b"yard exp show" in r.stderr, f"--follow of a sweep: {r.stderr!r}")
