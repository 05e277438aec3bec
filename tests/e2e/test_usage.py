"""Accounting (docs/api.md, "Usage"): each task's GPU-seconds, CPU-seconds
and peak memory, recorded as it ends, reported by GET /v1/usage and
`yard usage` by user, team and pool, over a window and per step; checked
against GPU-seconds worked out by hand from the jobs' own task records,
kept across a master restart, shown only to those who see the jobs whole,
and bad parameters refused by name."""
import csv
import io
import json
import time

from harness import check, check_eq, cluster, spec, wait_until

SH = "/bin/sh"
PY = "/usr/bin/python3"
# about a second of CPU and 64 MiB held at once
BURN = ("import time\nb = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
        "t = time.process_time()\nwhile time.process_time() - t < 1.0: pass\n")


def by_hand(jobs, key):
    """{group: GPU-seconds} from the task records: GPUs x (finished - started)."""
    out = {}
    for j in jobs:
        for t in j["tasks"]:
            if t["started_at"]:
                k = key(j)
                out[k] = out.get(k, 0.0) + len(t["gpus"]) * (t["finished_at"] - t["started_at"]) / 1e6
    return out


def usage(c, token=None, **q):
    qs = "&".join(f"{k}={v}" for k, v in q.items())
    return c.api.json("GET", "/v1/usage" + (f"?{qs}" if qs else ""), token=token)


def test_usage_by_user_team_and_pool_against_the_task_records():
    with cluster("usage") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:4")
        alice = c.user_token("alice", team="vision")
        bob = c.user_token("bob", team="nlp")
        ids = [c.api.submit(spec([SH, "-c", "sleep 1"], name="two", gpus=2), token=alice)[1]["id"],
               c.api.submit(spec([SH, "-c", "sleep 0.5"], name="gang", gpus=1, replicas=2), token=alice)[1]["id"],
               c.api.submit(spec([PY, "-c", BURN], name="burn", gpus=1, memory="512MiB"), token=bob)[1]["id"]]
        jobs = [c.api.wait_job(i) for i in ids]
        check_eq([j["state"] for j in jobs], ["succeeded"] * 3, f"the jobs: {jobs}")
        want = by_hand(jobs, lambda j: j["user"])
        check(want["alice"] > 2.9 and want["bob"] > 0.9, f"GPU-seconds by hand: {want}")
        st, doc = usage(c)
        check_eq(st, 200, f"GET /v1/usage: {doc}")
        check_eq(doc["by"], "user", "grouped by user unless asked")
        got = {r["key"]: r for r in doc["rows"]}
        check_eq(sorted(got), ["alice", "bob"], f"the rows: {doc['rows']}")
        for u in ("alice", "bob"):
            check(abs(got[u]["gpu_seconds"] - want[u]) < 1e-3,
                  f"{u}'s GPU-seconds: {got[u]['gpu_seconds']} against {want[u]} by hand")
        check_eq((got["alice"]["jobs"], got["alice"]["tasks"], got["bob"]["jobs"], got["bob"]["tasks"]),
                 (2, 3, 1, 1), "jobs and tasks counted")
        check_eq([r["key"] for r in doc["rows"]], sorted(want, key=lambda k: -want[k]), "most GPU-seconds first")
        burn = jobs[2]["tasks"][0]["usage"]
        check(burn["cpu_seconds"] is not None and 0.9 <= burn["cpu_seconds"] < 10,
              f"the burning task's CPU-seconds, from its cgroup: {burn}")
        check(burn["memory_peak"] is not None and burn["memory_peak"] >= 64 << 20,
              f"its peak memory, from its cgroup: {burn}")
        check_eq((round(got["bob"]["cpu_seconds"], 6), got["bob"]["memory_peak"]),
                 (round(burn["cpu_seconds"], 6), burn["memory_peak"]), "bob's row is his one task's")
        st, doc = usage(c, by="team")
        teams = {r["key"]: r["gpu_seconds"] for r in doc["rows"]}
        want_t = by_hand(jobs, lambda j: j["team"] or "")
        check(teams.keys() == want_t.keys() and all(abs(teams[k] - want_t[k]) < 1e-3 for k in teams),
              f"by team: {teams} against {want_t}")
        st, doc = usage(c, by="pool")
        check_eq([r["key"] for r in doc["rows"]], ["default"], "one pool")
        check(abs(doc["rows"][0]["gpu_seconds"] - sum(want.values())) < 1e-3, f"the pool's total: {doc}")
        # per step: the steps add up to the window's total
        st, doc = usage(c, since="10m", step="1m")
        check_eq((st, len(doc["buckets"]), doc["step"]), (200, 10, 60), f"ten steps of a minute: {doc}")
        per = sum(v for b in doc["buckets"] for k, v in b["gpu_seconds"].items() if k == "alice")
        check(abs(per - want["alice"]) < 1e-3, f"alice's steps add up: {per} against {want['alice']}")
        # windows and steps longer than the epoch are all of it
        st, doc = usage(c, since="99999999999d", step="99999999999d")
        check_eq((st, [r["key"] for r in doc["rows"]], len(doc["buckets"]), doc["since"]),
                 (200, ["alice", "bob"] if want["alice"] >= want["bob"] else ["bob", "alice"], 1, 0),
                 f"a window of all time: {doc}")
        # a window that ends before the jobs ran holds nothing of them
        time.sleep(1.5)
        st, doc = usage(c, since="1s")
        check_eq((st, doc["rows"]), (200, []), "nothing ran in the last second")
        # others see only their own
        st, doc = usage(c, token=bob)
        check_eq([r["key"] for r in doc["rows"]], ["bob"], f"bob sees his own usage only: {doc}")
        # the CLI: text, JSON and CSV
        r = c.cli("usage", "--output", "csv", check_rc=0)
        rows = list(csv.reader(io.StringIO(r.stdout.decode())))
        check_eq(rows[0], ["USER", "JOBS", "TASKS", "GPU_HOURS", "CPU_HOURS", "PEAK_MEMORY"], "the CSV header")
        check_eq([(x[0], x[3]) for x in rows[1:]], [(u, f"{want[u] / 3600:.3f}") for u in sorted(want, key=lambda k: -want[k])],
                 "GPU-hours in the CSV")
        r = c.cli("usage", "--by", "team", "--output", "json", check_rc=0)
        check_eq([x["key"] for x in json.loads(r.stdout)["rows"]], sorted(want_t, key=lambda k: -want_t[k]),
                 "yard usage --by team --output json")
        r = c.cli("usage", "--since", "10m", "--step", "5m", check_rc=0)
        check(r.stdout.decode().splitlines()[0].split() == ["START", "USER", "GPU_HOURS"], f"steps: {r.stdout!r}")
        # bad parameters, by name
        for q, field in (({"by": "node"}, "by"), ({"since": "soon"}, "since"), ({"step": "0"}, "step"),
                         ({"since": "30d", "step": "1m"}, "step")):
            st, doc = usage(c, **q)
            check_eq(st, 400, f"{q}: {doc}")
            check(doc["error"]["message"].startswith(field + ":"), f"{q}: the error names {field}: {doc}")
        r = c.cli("usage", "--by", "node", check_rc=2)
        check(b"--by: 'node'" in r.stderr, f"the CLI refuses --by node: {r.stderr!r}")
        r = c.cli("usage", "--output", "xml", check_rc=2)
        check(b"json, csv or text" in r.stderr, f"an unknown format: {r.stderr!r}")
        # what was recorded survives a restart of the master
        c.master.stop()
        c.start_master()
        st, doc = usage(c)
        got2 = {r["key"]: r for r in doc["rows"]}
        check_eq({k: (round(v["gpu_seconds"], 6), round(v["cpu_seconds"], 6), v["memory_peak"])
                  for k, v in got2.items()},
                 {k: (round(v["gpu_seconds"], 6), round(v["cpu_seconds"], 6), v["memory_peak"])
                  for k, v in got.items()}, "the same usage after a master restart")
