"""Idle GPUs (docs/api.md, "GPU utilisation"): agents sample each GPU
(simulated GPUs read WORK/sim-gpu-util, which the test writes) every 5 s;
the master keeps a series per job, shows it in the job's document and
`yard show`, and under --idle-gpu-timeout flags a running job whose GPUs
stay under --idle-gpu-threshold: a reason, a metric and an audit entry,
cleared when its GPUs are busy again; --idle-gpu-action stop stops it."""
import os
import re
import subprocess

from harness import YARD, check, check_eq, cluster, spec, wait_until

SH = "/bin/sh"


def set_util(c, node, values):
    path = os.path.join(c.dir, f"agent-{node}", "sim-gpu-util")
    with open(path + ".tmp", "w") as f:
        f.write(" ".join(str(v) for v in values) + "\n")
    os.replace(path + ".tmp", path)


def gauge(c, name, **labels):
    _, text, _ = c.api.request("GET", "/metrics")
    want = name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "} "
    for line in text.decode().splitlines():
        if line.startswith(want):
            return float(line[len(want):])
    return None


def test_idle_gpus_flagged_shown_and_cleared():
    with cluster("gpuidle", master_args=["--idle-gpu-timeout", "6s", "--idle-gpu-threshold", "10"]) as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:4")
        set_util(c, "n1", [90, 90, 90, 90])
        _, a = c.api.submit(spec([SH, "-c", "sleep 120"], name="holds", gpus=2))
        j = wait_until(lambda: (lambda x: x if x["gpu_util"] and x["gpu_util"]["last"] == 90 else None)(
            c.api.job(a["id"])), 30, "the job's first utilisation sample")
        check_eq((j["gpu_util"]["mean"], j["gpu_util"]["flagged"], j["gpu_util"]["idle_since"]), (90, False, None),
                 f"a busy job: {j['gpu_util']}")
        check_eq(gauge(c, "yard_gpus_busy", pool="default", team=""), 1.8, "two GPUs at 90% are 1.8 busy GPUs")
        mine = j["tasks"][0]["gpus"]
        set_util(c, "n1", [0 if g in mine else 90 for g in range(4)])
        j = wait_until(lambda: (lambda x: x if x["reason"] and x["reason"]["code"] == "gpus_idle" else None)(
            c.api.job(a["id"])), 40, "the job flagged once its GPUs were idle for 6 s")
        check_eq(j["state"], "running", "flagged, not stopped")
        check(re.fullmatch(r"its 2 GPUs were under 10% for 0m\d\ds \(mean 0\.0%\)", j["reason"]["message"]),
              f"the reason says what was measured: {j['reason']}")
        check(j["gpu_util"]["flagged"] and j["gpu_util"]["idle_since"], f"the series says so: {j['gpu_util']}")
        check_eq([p[1] for p in j["gpu_util"]["points"]][:1], [90], "the series starts busy")
        check_eq(j["gpu_util"]["points"][-1][1], 0, "and ends idle")
        check_eq(gauge(c, "yard_jobs_gpus_idle", pool="default", team=""), 1, "the metric counts it")
        _, audit = c.api.json("GET", "/v1/audit?limit=100", expect=200)
        ev = [e for e in audit["entries"] if e["method"] == "EVENT"]
        check_eq([(e["role"], e["user"], e["path"], e["code"]) for e in ev],
                 [("master", None, f"/v1/jobs/{a['id']}", "gpus_idle")], "the audit log's entry")
        out = c.cli("show", str(a["id"]), check_rc=0).stdout.decode()
        check(re.search(r"^gpu util +0% now, mean \d+%", out, re.M) and re.search(r"^idle \(flag\) ", out, re.M),
              f"yard show shows the utilisation and the flag:\n{out}")
        # busy again: the flag goes
        set_util(c, "n1", [90, 90, 90, 90])
        j = wait_until(lambda: (lambda x: x if not x["gpu_util"]["flagged"] else None)(c.api.job(a["id"])), 30,
                       "the flag cleared once the GPUs are busy again")
        check_eq((j["reason"], j["gpu_util"]["idle_since"]), (None, None), f"no reason left: {j['reason']}")
        check_eq(gauge(c, "yard_jobs_gpus_idle", pool="default", team=""), 0, "the metric counts it no more")
        c.api.json("POST", f"/v1/jobs/{a['id']}/cancel", expect=200)


def test_idle_gpu_policy_stops_the_job_and_bad_flags_are_refused():
    with cluster("gpuidlestop", master_args=["--idle-gpu-timeout", "5s", "--idle-gpu-action", "stop"]) as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        set_util(c, "n1", [0, 0])
        _, a = c.api.submit(spec([SH, "-c", "sleep 120"], name="idle", gpus=1))
        j = c.api.wait_job(a["id"], timeout=60)
        check_eq((j["state"], j["reason"]["code"]), ("cancelled", "gpus_idle"), f"stopped by the policy: {j}")
        check(j["reason"]["message"].endswith("; stopped by the idle GPU policy"), f"the reason: {j['reason']}")
        # a job without GPUs is never judged
        _, b = c.api.submit(spec([SH, "-c", "sleep 8"], name="cpu"))
        check_eq(c.api.wait_job(b["id"], timeout=60)["state"], "succeeded", "a CPU job runs on")
    for args, msg in ((["--idle-gpu-threshold", "0"], b"--idle-gpu-threshold '0': expected a percentage"),
                      (["--idle-gpu-action", "kill"], b"--idle-gpu-action 'kill': expected flag or stop"),
                      (["--idle-gpu-timeout", "soon"], b"--idle-gpu-timeout 'soon': expected a duration")):
        r = subprocess.run([YARD, "master", "--data-dir", "/nonexistent/yard-gpuidle", *args],
                           capture_output=True, timeout=30)
        check(r.returncode != 0 and msg in r.stderr, f"yard master {args}: {r.returncode} {r.stderr!r}")
