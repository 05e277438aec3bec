"""The web app end to end: the master's static files (a fixture dir of this
test's own), and the built app in a real browser (tests/browser/ui.test.mjs,
playwright-core driving Debian's chromium) against a real master and agent.

The browser test needs the app built next to the binary (`make asan` copies
web/dist to build-asan/web): without `<dir of YARD>/web/index.html` it fails,
saying so. Screenshots, one per page, go to $YARD_ARTIFACTS/web, or else
test-artifacts/web next to the binary.
"""
import http.client
import json
import os
import re
import subprocess

from harness import ROOT, YARD, TestFailure, check, check_eq, cluster, spec, wait_until

TIMEOUT = 600
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "webfixture")
BROWSER = os.path.join(ROOT, "tests", "browser")
UI_TEST = os.path.join(BROWSER, "ui.test.mjs")
DIGITS = os.path.join(ROOT, "examples", "pytorch-ddp-digits")


def artifacts_dir(name):
    base = os.environ.get("YARD_ARTIFACTS") or os.path.join(
        os.path.dirname(os.path.abspath(YARD)), "test-artifacts")
    d = os.path.join(base, name)
    os.makedirs(d, exist_ok=True)
    return d


def raw_get(url, target, method="GET", headers=None):
    """One request with the target sent as is (no client-side normalising)."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


def read(path):
    with open(path, "rb") as f:
        return f.read()


CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")


def check_web_headers(h, what):
    """The headers every answer of the web app carries."""
    check_eq(h.get("content-security-policy"), CSP, f"Content-Security-Policy of {what}")
    check_eq(h.get("referrer-policy"), "no-referrer", f"Referrer-Policy of {what}")
    check_eq(h.get("x-content-type-options"), "nosniff", f"X-Content-Type-Options of {what}")


def test_static_files():
    with cluster("web-static", master_args=["--web-dir", FIXTURE]) as c:
        c.start_master()
        index = read(os.path.join(FIXTURE, "index.html"))
        # index.html at / and by name, no token, never cached without asking
        for target in ("/", "/index.html", "/?token=abc"):
            status, body, h = raw_get(c.url, target)
            check_eq(status, 200, f"status of {target}")
            check_eq(body, index, f"body of {target}")
            check_eq(h["content-type"], "text/html; charset=utf-8", f"type of {target}")
            check_eq(h["cache-control"], "no-cache", f"caching of {target}")
            check_web_headers(h, target)
        # hashed assets: their types, cached for long
        for target, ctype in (("/assets/app-abc123.js", "text/javascript; charset=utf-8"),
                              ("/assets/app-abc123.css", "text/css; charset=utf-8")):
            status, body, h = raw_get(c.url, target)
            check_eq(status, 200, f"status of {target}")
            check_eq(body, read(FIXTURE + target), f"body of {target}")
            check_eq(h["content-type"], ctype, f"type of {target}")
            check("immutable" in h["cache-control"] and "max-age=31536000" in h["cache-control"],
                  f"caching of {target}: {h['cache-control']}")
            check_web_headers(h, target)
        status, _, h = raw_get(c.url, "/logo.svg")
        check_eq((status, h["content-type"]), (200, "image/svg+xml"), "an svg at the top")
        check_web_headers(h, "/logo.svg")
        # HEAD: the headers and length, no body
        status, body, h = raw_get(c.url, "/assets/app-abc123.js", method="HEAD")
        check_eq((status, body), (200, b""), "HEAD of an asset")
        check_eq(h["content-length"], str(len(read(FIXTURE + "/assets/app-abc123.js"))),
                 "Content-Length of a HEAD")
        # the app's routes and directories get index.html (no listing)
        for target in ("/jobs/12", "/cluster", "/assets", "/no/such/thing.txt"):
            status, body, h = raw_get(c.url, target)
            check_eq((status, body), (200, index), f"fallback to index.html for {target}")
            check_web_headers(h, target)
        # a missing asset is a 404, not HTML where a script was wanted; nor
        # is there a listing of the assets
        for target in ("/assets/missing-123.js", "/assets/"):
            status, body, _ = raw_get(c.url, target)
            check_eq(status, 404, f"status of {target}")
            check(b"app-abc123" not in body, f"{target} lists the assets")
        # traversal, plain and encoded, and NUL: refused, never resolved
        for target in ("/../etc/passwd", "/%2e%2e/etc/passwd", "/%2E%2E/%2E%2E/etc/passwd",
                       "/assets/../../x", "/assets/%2e%2e/%2e%2e/etc/passwd",
                       "/assets%2f..%2f..%2fetc%2fpasswd", "/index.html%00.png", "/..%5c..%5cx"):
            status, body, _ = raw_get(c.url, target)
            check_eq(status, 400, f"status of {target}")
            check(b"root:" not in body, f"{target} served /etc/passwd")
        # only GET and HEAD
        status, _, _ = raw_get(c.url, "/index.html", method="POST")
        check(status in (404, 405), f"POST of a static path: {status}")
        # every /v1 route keeps its auth; unknown /v1 paths stay API 404s
        for target in ("/v1/jobs", "/v1/nodes", "/v1/queue", "/v1/whoami"):
            status, body, h = raw_get(c.url, target)
            check_eq(status, 401, f"{target} without a token")
            check_eq(h["content-type"], "application/json", f"type of {target} without a token")
            check_eq(h.get("x-content-type-options"), "nosniff", f"nosniff on the API's {target}")
        status, body, _ = raw_get(c.url, "/v1/no-such-route")
        check_eq((status, json.loads(body)["error"]["code"]), (404, "not_found"), "unknown /v1 path")
        status, _, h = raw_get(c.url, "/v1/jobs", headers={"Authorization": "Bearer " + c.admin_token})
        check_eq(status, 200, "/v1/jobs with a token")
        check_eq(h.get("x-content-type-options"), "nosniff", "nosniff on an API answer")
        status, _, h = raw_get(c.url, "/healthz")
        check_eq((status, h.get("x-content-type-options")), (200, "nosniff"), "nosniff on /healthz")
        # a token in the query is never a credential (the app signs in with /#token=T)
        status, _, _ = raw_get(c.url, "/v1/jobs?token=" + c.admin_token)
        check_eq(status, 401, "/v1/jobs with the token in the query")
        # a bad token does not matter to static files
        status, body, _ = raw_get(c.url, "/index.html", headers={"Authorization": "Bearer nope"})
        check_eq((status, body), (200, index), "index.html with a bad token")


def test_static_without_web_dir():
    with cluster("web-none", master_args=["--web-dir", os.path.join(HERE, "no-such-dir")]) as c:
        c.start_master()
        for target in ("/", "/jobs/3"):
            status, body, h = raw_get(c.url, target)
            check_eq(status, 200, f"status of {target} without the UI")
            check(b"not built" in body, f"{target} says the UI is not built: {body[:200]!r}")
            check(h["content-type"].startswith("text/html"), f"type of {target}: {h['content-type']}")
            check_web_headers(h, f"{target} without the UI")


def run_ui(cfg, timeout):
    """Runs ui.test.mjs with cfg; fails with its output unless it exits 0."""
    check(os.path.exists(os.path.join(BROWSER, "node_modules", "playwright-core")),
          "tests/browser/node_modules is missing: run `make browser` (npm ci in tests/browser)")
    check(os.path.exists(os.environ.get("CHROMIUM", "/usr/bin/chromium")),
          "no /usr/bin/chromium: run `make deps` (or apt-get install chromium)")
    path = os.path.join(cfg["artifacts"], "config.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    r = subprocess.run(["node", UI_TEST, path], capture_output=True, text=True, timeout=timeout)
    out = r.stdout + r.stderr
    check(r.returncode == 0, f"ui.test.mjs ({cfg['mode']}) exited {r.returncode}:\n{out[-6000:]}")
    return out


def test_browser_harness_on_fixture():
    """The browser harness itself, on this test's placeholder page: chromium
    starts, the page and its module script load, screenshots are written."""
    art = artifacts_dir("web-fixture")
    for f in os.listdir(art):
        os.unlink(os.path.join(art, f))
    with cluster("web-fixture", master_args=["--web-dir", FIXTURE]) as c:
        c.start_master()
        run_ui({"url": c.url, "token": c.admin_token, "artifacts": art, "mode": "fixture"}, 120)
    shots = sorted(f for f in os.listdir(art) if f.endswith(".png"))
    check_eq(shots, ["01-fixture.png", "02-fixture-fallback.png"], "screenshots of the fixture")
    for s in shots:
        check(os.path.getsize(os.path.join(art, s)) > 1000, f"screenshot {s} is empty")


def ui_flow(name, web, art):
    """The app flow of ui.test.mjs against the app in `web`, on a real master
    and agent: a running job to cancel and a job that cannot start are made
    here; what the browser did is then checked through the API."""
    for f in os.listdir(art):
        os.unlink(os.path.join(art, f))
    with cluster(name, master_args=["--web-dir", web]) as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        with open(os.path.join(c.dir, "agent-n1", "sim-gpu-util"), "w") as f:
            f.write("40 40\n")  # what the simulated GPUs say they do
        api = c.api
        # a long job to cancel from its page, and one that cannot start
        status, victim = api.submit(spec(["/bin/sleep", "1000"], name="ui-sleeper", gpus=1))
        check_eq(status, 201, f"submit of the sleeper: {victim}")
        status, queued = api.submit(spec(["/bin/true"], name="ui-too-big", gpus=8,
                                         placement={"wait_for_nodes": True}))
        check_eq(status, 201, f"submit of the too-big job: {queued}")
        api.wait_job(victim["id"], states=("running",), timeout=60)
        _, q = api.json("GET", "/v1/queue", expect=200)
        entry = [e for e in q["queue"] if e["id"] == queued["id"]]
        check_eq(len(entry), 1, "the too-big job is queued")
        epochs = 3
        try:
            run_ui({"url": c.url, "token": c.admin_token, "artifacts": art, "mode": "app",
                    "node": "n1", "cancel_job": victim["id"], "queued_job": queued["id"],
                    "queued_reason": entry[0]["reason"]["message"], "example_dir": DIGITS,
                    "epochs": epochs}, TIMEOUT - 60)
        except TestFailure as e:
            raise TestFailure(f"{e}\n{submitted_job_story(api, art)}") from None
        # what the browser did, seen through the API
        check_eq(api.job(victim["id"])["state"], "cancelled", "state of the job cancelled in the UI")
        states = [e["state"] for e in api.job(victim["id"])["events"]]
        check_eq((states[0], states[-1]), ("queued", "cancelled"), f"the cancelled job's history: {states}")
        check("running" in states, f"it ran before: {states}")
        with open(os.path.join(art, "result.json")) as f:
            submitted = json.load(f)["submitted"]
        j = api.job(submitted)
        check_eq(j["state"], "succeeded", "state of the job submitted in the UI")
        check_eq(str(j["spec"]["params"]["epochs"]), str(epochs), "params.epochs set in the form")
        check(j["code"], f"the job submitted in the UI has its code uploaded: {j}")
        _, m = api.json("GET", f"/v1/jobs/{submitted}/metrics?name=loss", expect=200)
        check(m["series"] and m["series"][0]["points"], f"loss metrics of the UI's job: {m}")
    shots = [f for f in os.listdir(art) if f.endswith(".png")]
    for page in ("cluster", "queue", "jobs", "submit", f"job-{victim['id']}", f"job-{submitted}"):
        check(any(page in s for s in shots), f"no screenshot of the {page} page: {shots}")


def submitted_job_story(api, art):
    """What became of the job the browser submitted, when the browser test
    failed: its state, reason and the end of every task's logs."""
    try:
        with open(os.path.join(art, "result.json")) as f:
            jid = json.load(f)["submitted"]
    except (OSError, ValueError, KeyError):
        return "(the browser submitted no job)"
    j = api.job(jid)
    out = [f"job {jid}: {j['state']}, reason {j.get('reason')}"]
    for t in j.get("tasks", []):
        tname = f"{t.get('role', 'worker')}/{t.get('index', 0)}"
        for stream in ("stdout", "stderr"):
            text = api.log(jid, tname, stream).decode(errors="replace")
            out.append(f"--- {tname} {stream} (last 3000 characters)\n{text[-3000:]}")
    return "\n".join(out)


def test_web_ui():
    """The built web app: sign in, cluster, queue reason, jobs, cancel, and
    the digits example submitted through the form to success."""
    web = os.path.join(os.path.dirname(os.path.abspath(YARD)), "web")
    check(os.path.isfile(os.path.join(web, "index.html")),
          f"the web app is not built: no {web}/index.html (`make asan` builds web/ and copies "
          f"web/dist there)")
    ui_flow("web-ui", web, artifacts_dir("web"))


def test_web_experiments():
    """The experiments page in a real browser: two trials of a grid sweep
    compared in one chart labelled by the param that differs, and the
    comparison's URL opening the same view."""
    web = os.path.join(os.path.dirname(os.path.abspath(YARD)), "web")
    check(os.path.isfile(os.path.join(web, "index.html")), f"the web app is not built: no {web}/index.html")
    art = artifacts_dir("web-experiments")
    for f in os.listdir(art):
        os.unlink(os.path.join(art, f))
    with cluster("web-exp", master_args=["--web-dir", web]) as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        cmd = ('echo {params.lr} > "$YARD_OUTPUT_DIR/lr.txt"; for i in 1 2 3 4; do echo "@yard {\\"step\\": $i, '
               '\\"acc\\": $(awk "BEGIN{print {params.lr}*$i}")}"; done')
        s = spec(["/bin/sh", "-c", cmd], name="webexp")
        s["sweep"] = {"method": "grid", "params": {"lr": [0.1, 0.2]}, "max_parallel": 2,
                      "objective": {"metric": "acc", "mode": "max"}}
        _, e = c.api.json("POST", "/v1/experiments", {"spec": s}, expect=201)
        done = wait_until(lambda: (lambda x: x if x["state"] != "running" else None)(
            c.api.json("GET", f"/v1/experiments/{e['id']}", expect=200)[1]), 60, "the sweep to end")
        check_eq(done["counts"], {"succeeded": 2}, f"the sweep's trials: {done}")
        check_eq(sorted(t["best"] for t in done["trials"]), [0.4, 0.8], "the trials' objective")
        # a template that ran on a new version of its dataset
        d = os.path.join(c.dir, "rows")
        os.makedirs(d)
        for rows in ("1\n", "1\n2\n"):
            with open(os.path.join(d, "rows.txt"), "w") as f:
                f.write(rows)
            c.cli("data", "push", d, "rows", check_rc=0)
            if rows == "1\n":
                tspec = spec(["/bin/sh", "-c", "cat $YARD_DATA_DIR/rows/rows.txt"], name="t",
                             data=[{"source": "yard://rows"}])
                c.api.json("POST", "/v1/templates", {"name": "recount", "on_dataset": "rows", "spec": tspec},
                           expect=201)
        _, tdoc = c.api.json("GET", "/v1/templates/recount", expect=200)
        check_eq([(r["version"], "job" in r) for r in tdoc["runs"]], [(2, True)], f"the template's runs: {tdoc}")
        _, queued = c.api.submit(spec(["/bin/true"], name="waits", gpus=8, placement={"wait_for_nodes": True}))
        run_ui({"url": c.url, "token": c.admin_token, "artifacts": art, "mode": "experiments",
                "experiment": e["id"], "trial_job": done["trials"][0]["job"],
                "trial_lr": str(done["trials"][0]["params"]["lr"]), "queued_job": queued["id"],
                "template": "recount", "template_job": tdoc["runs"][0]["job"]}, 180)
        j = c.api.job(queued["id"])
        check(not j["reason"] or j["reason"]["code"] != "held",
              f"the job released in the UI is no longer held: {j['reason']}")
        events = [ev for ev in c.api.json("GET", "/v1/audit?limit=50", expect=200)[1]["entries"]
                  if ev["path"] in (f"/v1/jobs/{queued['id']}/hold", f"/v1/jobs/{queued['id']}/release")]
        check_eq(sorted(ev["path"].rsplit("/", 1)[1] for ev in events), ["hold", "release"],
                 "the UI held and released it (the audit log)")
    shots = [f for f in os.listdir(art) if f.endswith(".png")]
    for page in ("experiments", "compare", "reopened", "usage-by-pool", "held"):
        check(any(page in x for x in shots), f"no screenshot of {page}: {shots}")


def test_web_notebook_and_terminal():
    """yard notebook's server through the proxy in a real browser: its page
    opened through the master, a new notebook's cell run (print(6*7) shows
    42); a terminal (xterm.js) in its task; the same URL with another
    user's token is 403."""
    web = os.path.join(os.path.dirname(os.path.abspath(YARD)), "web")
    check(os.path.isfile(os.path.join(web, "index.html")), f"the web app is not built: no {web}/index.html")
    check(os.path.exists("/usr/bin/jupyter-notebook"),
          "no /usr/bin/jupyter-notebook: run `make deps` (Debian's jupyter-notebook)")
    art = artifacts_dir("web-interactive")
    for f in os.listdir(art):
        os.unlink(os.path.join(art, f))
    with cluster("web-nb", master_args=["--web-dir", web]) as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        alice = c.user_token("alice", team="vision")
        bob = c.user_token("bob", team="nlp")
        r = c.cli("notebook", "--gpus", "1", token=alice, check_rc=0, timeout=180)
        url = r.stdout.decode().strip()
        m = re.fullmatch(re.escape(c.url) + r"(/v1/jobs/(\d+)/proxy/notebook/0/(\d+)/)\?token=([0-9a-f]{32})", url)
        check(m, f"yard notebook printed {url!r}; stderr {r.stderr!r}")
        path, jid = m.group(1), int(m.group(2))
        target = f"{path}?token={m.group(4)}"
        # an interactive job: its idle timeout frees the GPU of a forgotten notebook
        j = c.api.job(jid)
        check("interactive" in j["spec"] and "idle_since" in j, f"the notebook's job is interactive: {j}")

        # the notebook is its owner's (and her team's): another user's token
        # is refused by the master, by header and by cookie alike
        st, body, _ = c.api.request("GET", target, token=bob)
        check_eq(st, 403, f"bob's token on the notebook's URL: {body[:300]!r}")
        check(b"may not see" in body, f"the visibility rule's words: {body!r}")
        status, body, _ = raw_get(c.url, target, headers={"Cookie": f"yard_token={bob}"})
        check_eq(status, 403, f"bob's cookie: {body[:300]!r}")
        status, body, _ = raw_get(c.url, target)
        check_eq(status, 401, f"no token at all: {body[:300]!r}")
        st, body, _ = c.api.request("GET", target, token=alice)
        check(st == 200 and b"<title>" in body, f"alice's token: {st} {body[:300]!r}")

        run_ui({"url": c.url, "token": alice, "artifacts": art, "mode": "interactive",
                "notebook_job": jid, "notebook_path": target}, 300)

        # what the browser did, seen through the audit log: alice's terminal
        # (an exec into the notebook's task) and the kernel's WebSocket
        _, doc = c.api.json("GET", "/v1/audit?limit=1000", expect=200)
        mine = [e for e in doc["entries"] if e["user"] == "alice" and e["status"] == 101]
        check([e for e in mine if e["path"] == f"/v1/jobs/{jid}/exec?task=notebook/0"],
              f"the terminal's exec is audited: {mine}")
        check([e for e in mine if e["path"].startswith(path + "api/kernels/") and "channels" in e["path"]],
              f"the kernel's WebSocket through the proxy is audited: {mine}")
    shots = [f for f in os.listdir(art) if f.endswith(".png")]
    for name in ("notebook-job", "notebook-tree", "notebook-cell", "terminal"):
        check(any(name in s for s in shots), f"no screenshot of {name}: {shots}")


def test_web_job_page_shows_repo_ref_and_sha():
    """A job whose code came from git (docs/git.md): its page in a real
    browser shows the repository, the ref and the commit it ran."""
    from gitserve import repos
    web = os.path.join(os.path.dirname(os.path.abspath(YARD)), "web")
    check(os.path.isfile(os.path.join(web, "index.html")), f"the web app is not built: no {web}/index.html")
    art = artifacts_dir("web-git")
    for f in os.listdir(art):
        os.unlink(os.path.join(art, f))
    with repos() as g, cluster("web-git", master_args=["--web-dir", web]) as c:
        g.make("repo", {"feature/x": {"run.sh": "echo hi\n"}})
        url = g.serve_daemon() + "/repo.git"
        c.start_master()
        status, job = c.api.submit(spec(["/bin/sh", "run.sh"], code={"git": url, "ref": "feature/x"}))
        check_eq(status, 201, f"submit of a job from git: {job}")
        sha = g.sha("repo", "feature/x")
        check_eq(job["spec"]["code"]["sha"], sha, "the commit recorded")
        run_ui({"url": c.url, "token": c.admin_token, "artifacts": art, "mode": "git",
                "git_job": job["id"], "git_repo": url, "git_ref": "feature/x", "git_sha": sha}, 120)
