"""GET /metrics as Prometheus takes it (docs/api.md, "Prometheus"): the
exposition passes `promtool check metrics` and counts what the cluster
holds (GPUs by pool and team, the queue, waits, nodes, scheduler and store
timings); a real Prometheus scrapes a test master and evaluates the shipped
alerts (contrib/prometheus/yard-rules.yml), one of which goes pending when a
node is lost; and every metric the rules and the Grafana dashboard name is
one the master serves."""
import json
import os
import re
import socket
import subprocess
import time
import urllib.parse
import urllib.request

from harness import ROOT, Proc, check, check_eq, cluster, spec, wait_until

SH = "/bin/sh"
RULES = os.path.join(ROOT, "contrib", "prometheus", "yard-rules.yml")
DASHBOARD = os.path.join(ROOT, "contrib", "grafana", "yard-dashboard.json")


def scrape(c):
    st, text, hdrs = c.api.request("GET", "/metrics")
    check_eq(st, 200, "GET /metrics")
    check(hdrs.get("Content-Type", "").startswith("text/plain; version=0.0.4"), f"its type: {hdrs}")
    return text.decode()


def samples(text):
    """{(name, frozenset(labels)): value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)', line)
        check(m, f"a sample line: {line!r}")
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(s, name, **labels):
    key = (name, frozenset(labels.items()))
    check(key in s, f"{name}{labels} in /metrics: {sorted(k for k in s if k[0] == name)}")
    return s[key]


def promtool(*args, input=None):
    return subprocess.run(["promtool", *args], input=input, capture_output=True, timeout=60)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prom_query(url, q):
    with urllib.request.urlopen(f"{url}/api/v1/query?query={urllib.parse.quote(q)}", timeout=10) as r:
        return json.load(r)["data"]["result"]


def prom_get(url, path):
    with urllib.request.urlopen(url + path, timeout=10) as r:
        return json.load(r)["data"]


def test_metrics_count_the_cluster_and_pass_promtool():
    with cluster("prom", lease="2s") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:4")
        c.start_agent("n2", gpus="sim:2", extra=["--pool", "big"])
        _, a = c.api.submit(spec([SH, "-c", "sleep 60"], name="holds2", gpus=2))
        wait_until(lambda: c.api.job(a["id"])["state"] == "running", 30, "job a running")
        # 4 GPUs in pool default, 2 of them held: b waits for them
        _, b = c.api.submit(spec([SH, "-c", "true"], name="waits", gpus=4))
        wait_until(lambda: c.api.job(b["id"])["queue_position"], 30, "job b queued with a position")
        _, h = c.api.submit(spec([SH, "-c", "true"], name="held", gpus=4))
        c.cli("hold", str(h["id"]), check_rc=0)
        text = scrape(c)
        r = promtool("check", "metrics", input=text.encode())
        check_eq((r.returncode, r.stdout + r.stderr), (0, b""), "promtool check metrics on /metrics")
        s = samples(text)
        check_eq(value(s, "yard_gpus", pool="default", state="ready"), 4, "the default pool's GPUs")
        check_eq(value(s, "yard_gpus", pool="big", state="ready"), 2, "pool big's GPUs")
        check_eq(value(s, "yard_gpus_allocated", pool="default", team=""), 2, "GPUs held by job a")
        check_eq(value(s, "yard_gpus_allocated", pool="big", team=""), 0, "nothing held in pool big")
        check_eq(value(s, "yard_jobs_queued", pool="big", team=""), 0, "nothing waits in pool big")
        check_eq(value(s, "yard_jobs_queued", pool="default", team=""), 1,
                 "b waits for resources; the held job is not counted")
        check_eq(value(s, "yard_jobs", state="queued"), 2, "both are queued")
        check_eq(value(s, "yard_job_wait_seconds_count", pool="default", team=""), 1, "one job placed so far")
        check_eq(value(s, "yard_job_wait_seconds_bucket", pool="default", team="", le="+Inf"), 1,
                 "the +Inf bucket counts it")
        check_eq(value(s, "yard_nodes", state="ready"), 2, "two ready nodes")
        for n, pool in (("n1", "default"), ("n2", "big")):
            seen = value(s, "yard_node_last_seen_timestamp_seconds", node=n, pool=pool)
            check(abs(time.time() - seen) < 30, f"node {n} last seen {time.time() - seen:.1f} s ago")
        check(value(s, "yard_scheduler_pass_duration_seconds_count") >= 1, "scheduling passes timed")
        check(value(s, "yard_scheduler_passes_total") >= value(s, "yard_scheduler_pass_duration_seconds_count"),
              "every timed pass is counted")
        check(value(s, "yard_store_commit_duration_seconds_count") >= 1, "store commits timed")
        check_eq(value(s, "yard_build_info", version="0.1.0"), 1, "the build's version")
        check("yard_gpus_total" not in text, "no gauge named like a counter")
        c.cli("cancel", str(a["id"]), check_rc=0)
        wait_until(lambda: samples(scrape(c)).get(("yard_job_wait_seconds_count",
                                                   frozenset({("pool", "default"), ("team", "")}))) == 2,
                   30, "job b placed once a's GPUs are free: a second wait observed")


def test_shipped_rules_and_dashboard_name_what_the_master_serves():
    r = promtool("check", "rules", RULES)
    check_eq(r.returncode, 0, f"promtool check rules: {r.stdout + r.stderr!r}")
    check(b"SUCCESS: 7 rules found" in r.stdout, f"promtool's verdict: {r.stdout!r}")
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    with open(RULES) as f:
        exprs += re.findall(r"expr: (?:>\n)?((?:.+\n)+?)(?=\s+for:)", f.read())
    check(len(exprs) >= 14, f"the dashboard's and rules' expressions: {len(exprs)}")
    names = {n for e in exprs for n in re.findall(r"\b(yard_[a-z_]+)", e)}
    with cluster("promnames") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:1")
        _, a = c.api.submit(spec([SH, "-c", "sleep 30"], name="x", gpus=1))
        wait_until(lambda: c.api.job(a["id"])["state"] == "running", 30, "a job running")
        served = {k[0] for k in samples(scrape(c))}
    families = served | {re.sub(r"_(bucket|sum|count)$", "", n) for n in served}
    check_eq(sorted(names - served), [], "metrics the rules and the dashboard name that the master does not serve")
    check(names & families, f"names found: {names}")


def test_prometheus_scrapes_the_master_and_evaluates_the_alerts():
    # a lease of 4 s: with 2 s an agent whose master answered nothing for
    # 1.5 s on a loaded machine was fenced, and the job's GPU was free
    with cluster("promscrape", lease="4s") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        c.start_agent("n2", gpus="sim:2")
        _, a = c.api.submit(spec([SH, "-c", "sleep 60"], name="holds1", gpus=1))
        wait_until(lambda: c.api.job(a["id"])["state"] == "running", 30, "job a running")
        token = os.path.join(c.dir, "prom-token")
        with open(token, "w") as f:
            f.write(c.admin_token)
        port = free_port()
        conf = os.path.join(c.dir, "prometheus.yml")
        with open(conf, "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["{RULES}"]
scrape_configs:
  - job_name: yard-master
    authorization:
      credentials_file: {token}
    static_configs:
      - targets: ["127.0.0.1:{c.port}"]
""")
        check_eq(promtool("check", "config", conf).returncode, 0, "promtool check config")
        url = f"http://127.0.0.1:{port}"
        # it logs to stderr: into the pipe where Proc looks for its ready line
        p = Proc("prometheus", [SH, "-c", f'exec prometheus --config.file="{conf}" '
                                f'--storage.tsdb.path="{c.dir}/tsdb" --web.listen-address=127.0.0.1:{port} 2>&1'],
                 os.path.join(c.dir, "prometheus.log"), env=c.env(), ready=r"Server is ready to receive")
        c.procs.append(p)
        got = wait_until(lambda: prom_query(url, 'yard_gpus_allocated{job="yard-master"}'), 30,
                         "Prometheus to have scraped the master")
        if [x["value"][1] for x in got] != ["1"]:
            # a scrape between a lost task and its restart shows 0: the next
            # one must show the job's GPU again, and the job says what it went
            # through (a clean-clone run saw 0 once, with a lease of 2 s)
            time.sleep(2)
            again = prom_query(url, 'yard_gpus_allocated{job="yard-master"}')
            j = c.api.job(a["id"])
            check_eq([x["value"][1] for x in again], ["1"],
                     f"the allocated GPUs as Prometheus has them ({got}, then): {again}; job a: "
                     f"{j['state']}, {[(e['state'], e.get('reason')) for e in j['events']]}")
        up = prom_query(url, 'up{job="yard-master"}')
        check_eq([x["value"][1] for x in up], ["1"], f"the scrape is up: {up}")
        groups = wait_until(lambda: (lambda g: g if g and all(r.get("lastEvaluation", "").startswith("20")
                                                               and not r["lastEvaluation"].startswith("0001")
                                                               for r in g[0]["rules"]) else None)(
            prom_get(url, "/api/v1/rules")["groups"]), 30, "every rule evaluated once")
        check_eq(sorted((r["name"], r["health"]) for r in groups[0]["rules"]),
                 sorted((n, "ok") for n in ("YardMasterDown", "YardNodeLost", "YardJobsWaitLong",
                                            "YardQueuedWhileGPUsFree", "YardJobsGPUsIdle", "YardSchedulerSlow",
                                            "YardStoreCommitSlow")),
                 "every shipped rule evaluates without error")
        check_eq(prom_get(url, "/api/v1/alerts")["alerts"], [], "nothing alerts on a healthy cluster")
        c.agents["n2"].kill()
        alerts = wait_until(lambda: [x for x in prom_get(url, "/api/v1/alerts")["alerts"]
                                     if x["labels"]["alertname"] == "YardNodeLost"], 30,
                            "YardNodeLost once n2's lease ran out")
        check_eq(alerts[0]["state"], "pending", f"pending for its 5 minutes: {alerts}")
