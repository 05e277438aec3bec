"""The CLI as a user runs it: submit a directory with parameters and a
.yardignore, follow logs, wait, list, show, nodes, JSON output; and `yard up`."""
import http.client
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

from harness import YARD, Proc, agent_cgroup_base, check, check_eq, cluster, wait_until

JOB = """\
name: hello
command: [/bin/sh, run.sh, "{params.greeting}"]
params: {greeting: hi, count: 3}
env: {COLOUR: blue}
tasks:
  worker: {replicas: 2, gpus: 1, cpus: 0.5, memory: 256MiB}
"""

RUN = """\
echo "$1 from $YARD_ROLE/$YARD_TASK_INDEX of job $YARD_JOB_ID ($YARD_JOB_NAME) on $YARD_NODE"
echo "count=$YARD_PARAM_COUNT colour=$COLOUR params=$YARD_PARAMS"
cat data.txt
test -e secret.key && echo "LEAKED secret.key"
test -e build && echo "LEAKED build"
exit 0
"""


def write_project(root):
    os.makedirs(os.path.join(root, "build"))
    files = {"job.yaml": JOB, "run.sh": RUN, "data.txt": "payload\n",
             "secret.key": "x\n", "build/out.o": "x\n", ".yardignore": "# local files\n*.key\nbuild/\n"}
    for name, text in files.items():
        with open(os.path.join(root, name), "w") as f:
            f.write(text)


def test_submit_follow_wait_and_listings():
    with cluster("cli") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        proj = os.path.join(c.dir, "proj")
        write_project(proj)
        r = c.cli("submit", os.path.join(proj, "job.yaml"), "--set", "params.count=7",
                  "--set", "params.greeting=hey", check_rc=0)
        jid = r.stdout.decode().strip()
        check(re.fullmatch(r"\d+", jid), f"submit prints the job id: {r.stdout!r}")
        c.cli("wait", jid, "--timeout", "60", check_rc=0)
        for idx in (0, 1):
            r = c.cli("logs", jid, "--task", f"worker/{idx}", check_rc=0)
            out = r.stdout.decode()
            check(f"hey from worker/{idx} of job {jid} (hello) on n1" in out, f"task {idx} greeting: {out!r}")
            check("count=7 colour=blue" in out, f"params and env of task {idx}: {out!r}")
            check('"greeting":"hey"' in out.replace(" ", ""), f"YARD_PARAMS of task {idx}: {out!r}")
            check("payload" in out, f"code copied into task {idx}: {out!r}")
            check("LEAKED" not in out, f".yardignore honoured for task {idx}: {out!r}")

        r = c.cli("ls", "--output", "json", check_rc=0)
        jobs = json.loads(r.stdout)["jobs"]
        check_eq([j["state"] for j in jobs if str(j["id"]) == jid], ["succeeded"], "ls --output json")
        r = c.cli("ls", check_rc=0)
        check(re.search(rf"^{jid}\s+hello\s", r.stdout.decode(), re.M), f"ls table: {r.stdout!r}")
        # the table reads view=summary: each job's summary agrees with its whole document
        full = {j["id"]: j for j in c.api.json("GET", "/v1/jobs", expect=200)[1]["jobs"]}
        summary = c.api.json("GET", "/v1/jobs?view=summary", expect=200)[1]["jobs"]
        check_eq([j["id"] for j in summary], list(full), "the summary lists the same jobs")
        for j in summary:
            whole = full[j["id"]]
            gpus = sum(t.get("replicas", 1) * t["gpus"] for t in whole["spec"]["tasks"].values())
            check_eq((j["name"], j["user"], j["state"], j["reason"], j["submitted_at"], j["task_count"], j["gpus"],
                      j["interactive"]),
                     (whole["name"], whole["user"], whole["state"], whole["reason"], whole["submitted_at"],
                      len(whole["tasks"]), gpus, False), f"job {j['id']}'s summary")
            check("spec" not in j and "tasks" not in j, f"a summary is not the whole job: {j}")
            check(re.search(rf"^{j['id']}\s+\S+\s+\S+\s+{j['state']}\s+{len(whole['tasks'])}\s+{gpus}\s",
                            r.stdout.decode(), re.M), f"job {j['id']}'s row: {r.stdout!r}")
        st, body = c.api.json("GET", "/v1/jobs?view=brief")
        check(st == 400 and "view: 'brief' is not a view" in body["error"]["message"], f"a bad view: {st} {body}")
        r = c.cli("show", jid, check_rc=0)
        check("worker/1" in r.stdout.decode() and "succeeded" in r.stdout.decode(), f"show: {r.stdout!r}")
        r = c.cli("show", jid, "--output", "json", check_rc=0)
        check_eq(len(json.loads(r.stdout)["tasks"]), 2, "tasks in show --output json")
        r = c.cli("nodes", "--output", "json", check_rc=0)
        nodes = json.loads(r.stdout)["nodes"]
        check_eq([(n["name"], len(n["gpus"])) for n in nodes], [("n1", 2)], "nodes --output json")
        r = c.cli("nodes", check_rc=0)
        check("n1" in r.stdout.decode() and "ready" in r.stdout.decode(), f"nodes table: {r.stdout!r}")

        # a failing job: wait exits 1, submit --follow streams and exits 1
        failing = os.path.join(c.dir, "fail")
        os.makedirs(failing)
        with open(os.path.join(failing, "job.yaml"), "w") as f:
            f.write("command: [/bin/sh, -c, 'for i in 1 2 3; do echo tick $i; sleep 0.2; done; exit 4']\n"
                    "tasks: {worker: {cpus: 0.1}}\n")
        r = c.cli("submit", "--follow", os.path.join(failing, "job.yaml"))
        check_eq(r.returncode, 1, "exit status of submit --follow for a failing job")
        check(b"tick 1\ntick 2\ntick 3\n" in r.stdout, f"followed output: {r.stdout!r}")
        fid = r.stdout.decode().split()[0]
        check_eq(c.cli("wait", fid).returncode, 1, "exit status of wait for a failed job")
        r = c.cli("wait", "424242")
        check_eq(r.returncode, 1, "exit status of wait for an unknown job")
        r = c.cli("submit")
        check_eq(r.returncode, 2, "exit status of submit without a file")
        r = c.cli("ls", "--bogus")
        check_eq(r.returncode, 2, "exit status for an unknown option")


class Recorder:
    """A plain HTTP proxy in front of a master that records each request's
    method, path and status: what the CLI sent, seen from outside it."""

    def __init__(self, target):
        host, port = target[len("http://"):].split(":")
        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                conn = http.client.HTTPConnection(host, int(port), timeout=60)
                conn.request(self.command, self.path, body,
                             {k: v for k, v in self.headers.items() if k.lower() != "connection"})
                r = conn.getresponse()
                data = r.read()
                seen.append((self.command, self.path.split("?")[0], r.status))
                self.send_response(r.status)
                for k, v in r.getheaders():
                    if k.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = forward

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def take(self):
        got, self.seen[:] = list(self.seen), []
        return got

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_submit_code_cache():
    """A directory submitted again unchanged is neither packed nor uploaded:
    the job names the digest the master has; a change, one the master lost,
    or a directory changed too recently to vouch for uploads it again."""
    with cluster("cli-codecache") as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        proj = os.path.join(c.dir, "proj")
        os.makedirs(proj)
        with open(os.path.join(proj, "job.yaml"), "w") as f:
            f.write("command: [/bin/sh, run.sh]\ntasks: {worker: {cpus: 0.1}}\n")
        with open(os.path.join(proj, "run.sh"), "w") as f:
            f.write("echo version one\n")
        spec = os.path.join(proj, "job.yaml")
        rec = Recorder(c.url)
        try:
            env = {"YARD_MASTER": rec.url}

            def submit():
                r = c.cli("submit", spec, "--output", "json", env=env, check_rc=0)
                return json.loads(r.stdout), rec.take()

            # just written: uploaded, and not remembered (timestamps are coarse)
            job, sent = submit()
            check_eq(sent, [("POST", "/v1/code", 201), ("POST", "/v1/jobs", 201)], "a fresh directory")
            digest = job["code"]
            job, sent = submit()
            check_eq(sent, [("POST", "/v1/code", 201), ("POST", "/v1/jobs", 201)],
                     "a directory changed under a second ago is uploaded again")
            time.sleep(1.2)
            job, sent = submit()
            check_eq(sent, [("POST", "/v1/code", 201), ("POST", "/v1/jobs", 201)], "settled: uploaded once more")
            job, sent = submit()
            check_eq(sent, [("POST", "/v1/jobs", 201)], "unchanged since: nothing uploaded")
            check_eq(job["code"], digest, "the job names the code the master has")
            c.cli("wait", str(job["id"]), "--timeout", "60", check_rc=0)
            check("version one" in c.cli("logs", str(job["id"]), check_rc=0).stdout.decode(), "the job ran that code")

            # the master lost it: the refusal is taken back by an upload
            blobs = [os.path.join(d, n) for d, _, names in os.walk(c.data_dir) for n in names
                     if n == digest[len("sha256:"):] + ".tar.gz"]
            check_eq(len(blobs), 1, f"the code's blob in the master's store: {blobs}")
            os.unlink(blobs[0])
            job, sent = submit()
            check_eq(sent, [("POST", "/v1/jobs", 400), ("POST", "/v1/code", 201), ("POST", "/v1/jobs", 201)],
                     "a digest the master lost")
            check_eq(job["code"], digest, "the same code again")
            check(os.path.exists(blobs[0]), "the master has it again")

            # a change of the same size: the fingerprint sees it
            time.sleep(1.2)
            with open(os.path.join(proj, "run.sh"), "w") as f:
                f.write("echo version two\n")
            job, sent = submit()
            check_eq(sent, [("POST", "/v1/code", 201), ("POST", "/v1/jobs", 201)], "a changed file")
            check(job["code"] != digest, "new code, a new digest")
            c.cli("wait", str(job["id"]), "--timeout", "60", check_rc=0)
            check("version two" in c.cli("logs", str(job["id"]), check_rc=0).stdout.decode(),
                  "the job ran the new code")
        finally:
            rec.close()


def test_logs_follow_live():
    with cluster("follow") as c:
        c.start_master()
        c.start_agent("n1", gpus="none")
        _, job = c.api.submit({"name": "slow", "command": ["/bin/sh", "-c",
                               "for i in 1 2 3 4 5; do echo out $i; echo err $i >&2; sleep 0.3; done"],
                               "tasks": {"worker": {"cpus": 0.1}}})
        r = c.cli("logs", "-f", str(job["id"]), check_rc=0, timeout=60)
        check_eq(r.stdout.decode(), "".join(f"out {i}\n" for i in range(1, 6)), "followed stdout")
        check_eq(r.stderr.decode(), "".join(f"err {i}\n" for i in range(1, 6)), "followed stderr")
        # the same as JSON; bytes that are not UTF-8 become U+FFFD there, and only there
        _, raw = c.api.submit({"name": "raw", "command": ["/usr/bin/printf", "caf\\303\\251 \\377\\n"],
                               "tasks": {"worker": {"cpus": 0.1}}})
        c.api.wait_job(raw["id"])
        r = c.cli("logs", str(raw["id"]), check_rc=0)
        check_eq(r.stdout, b"caf\xc3\xa9 \xff\n", "plain logs are the bytes as written")
        r = c.cli("logs", str(raw["id"]), "--output", "json", check_rc=0)
        doc = json.loads(r.stdout)
        check_eq((doc["job"], doc["stdout"], doc["stderr"]), (raw["id"], "caf\u00e9 \ufffd\n", ""),
                 "logs --output json")
        check_eq(c.cli("logs", "-f", str(raw["id"]), "--output", "json").returncode, 2,
                 "exit status of logs -f --output json")

        # a reader that goes away ends yard logs by SIGPIPE, as `yard logs -f | head` expects:
        # every task's stream has its own thread and its own requests
        _, chatty = c.api.submit({"name": "chatty", "command": ["/bin/sh", "-c",
                                  "i=0; while [ $i -lt 20000 ]; do echo tick $i; i=$((i+1)); done"],
                                  "tasks": {"worker": {"replicas": 2, "cpus": 0.1}}})
        c.api.wait_job(chatty["id"])
        p = subprocess.Popen([YARD, "logs", "-f", str(chatty["id"])], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE,
                             env=c.env({"YARD_MASTER": c.url, "YARD_TOKEN": c.admin_token, "HOME": c.dir}))
        try:
            check(b"tick" in p.stdout.readline(), "the follow prints")
            p.stdout.close()
            rc = p.wait(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        err = p.stderr.read().decode()
        p.stderr.close()
        check_eq((rc, err), (-signal.SIGPIPE, ""), "yard logs -f after its reader went away")


SET_JOB = """\
name: sets
command: [/bin/echo, "{params.tag}"]
params: {tag: x}
tasks:
  worker: {gpus: 0, cpus: 0.1, memory: 64MiB}
"""


def test_submit_set_paths_and_values():
    """--set paths are checked like the file's fields (a new role is the typo
    case), and quoted values stay strings, as the job's stored spec shows."""
    with cluster("set") as c:
        c.start_master()
        proj = os.path.join(c.dir, "proj")
        os.makedirs(proj)
        spec = os.path.join(proj, "job.yaml")
        with open(spec, "w") as f:
            f.write(SET_JOB)

        r = c.cli("submit", spec, "--set", "tasks.wrker.gpus=1")
        check_eq(r.returncode, 2, f"exit status of a --set of a role not in the file: {r.stderr!r}")
        check_eq(r.stderr.decode(), "yard: invalid spec: tasks.wrker: no role 'wrker' in the spec "
                 "(roles: worker); did you mean 'worker'?\n", "the refusal names path, roles, suggestion")
        for assignment, want in (("tasks.worker.gpu=1", "tasks.worker.gpu: unknown field (did you mean 'gpus'?)"),
                                 ("placment.max_nodes=2", "placment: unknown field (did you mean 'placement'?)")):
            r = c.cli("submit", spec, "--set", assignment)
            check_eq(r.returncode, 2, f"exit status of --set {assignment}")
            check_eq(r.stderr.decode(), f"yard: invalid spec: {want}\n", f"error of --set {assignment}")
        r = c.cli("submit", spec, "--set", "tasks")
        check_eq(r.returncode, 2, "exit status of a --set that is not PATH=VALUE")
        check(b"expected PATH=VALUE" in r.stderr, f"usage error: {r.stderr!r}")
        check_eq(c.api.json("GET", "/v1/jobs", expect=200)[1]["jobs"], [], "nothing was submitted")

        def stored_tag(*sets):
            args = [a for s in sets for a in ("--set", s)]
            r = c.cli("submit", spec, *args, check_rc=0)
            jid = r.stdout.decode().strip()
            job = c.api.json("GET", f"/v1/jobs/{jid}", expect=200)[1]
            return job["spec"]["params"]["tag"]

        check_eq(stored_tag('params.tag="007"'), "007", "a double-quoted value stays a string")
        check_eq(stored_tag("params.tag='007'"), "007", "a single-quoted value stays a string")
        check_eq(stored_tag("params.tag=007"), 7, "an unquoted 007 is typed as in YAML: the integer 7")
        check_eq(stored_tag("params.tag=v2"), "v2", "an unquoted word is a string")
        check_eq(stored_tag("params.tag=true"), True, "an unquoted true is a bool")


def test_json_errors():
    """With --output json, errors are {"error": {code, message, field}} on
    stdout; the exit statuses stay 1 (the server or the operation) and 2
    (usage, invalid spec)."""
    with cluster("jsonerr") as c:
        c.start_master()
        spec = os.path.join(c.dir, "job.yaml")
        with open(spec, "w") as f:
            f.write(SET_JOB)

        def err(*args, rc):
            r = c.cli(*args, "--output", "json")
            check_eq(r.returncode, rc, f"exit status of yard {' '.join(args)}: {r.stderr!r}")
            check_eq(r.stderr, b"", f"nothing on stderr for yard {' '.join(args)}")
            doc = json.loads(r.stdout)
            check_eq(sorted(doc), ["error"], f"the document of yard {' '.join(args)}")
            check_eq(sorted(doc["error"]), ["code", "field", "message"], "the error's members")
            return doc["error"]

        e = err("submit", spec, "--set", "tasks.wrker.gpus=1", rc=2)
        check_eq((e["code"], e["field"]), ("invalid_spec", "tasks.wrker"), "invalid spec from --set")
        check("did you mean 'worker'?" in e["message"], f"message: {e['message']!r}")
        e = err("submit", spec, "--set", "tasks.worker.gpus=two", rc=2)
        check_eq((e["code"], e["field"]), ("invalid_spec", "tasks.worker.gpus"), "invalid value")
        check_eq(e["message"], 'tasks.worker.gpus: expected an integer >= 0, got "two"', "value error")
        e = err("ls", "--bogus", rc=2)
        check_eq((e["code"], e["field"], e["message"]), ("usage", None, "unknown option '--bogus'"),
                 "an unknown option")
        e = err("submit", rc=2)
        check_eq((e["code"], e["message"]), ("usage", "expected one spec file"), "a missing argument")
        e = err("show", "424242", rc=1)
        check_eq((e["code"], e["field"]), ("not_found", None), "an unknown job")
        e = err("ls", "--token", "not-a-token", rc=1)
        check_eq(e["code"], "unauthorized", "a refused token")
        # success is the server's JSON, exit 0
        r = c.cli("ls", "--output", "json", check_rc=0)
        check("jobs" in json.loads(r.stdout), f"ls --output json: {r.stdout!r}")


def test_yard_up():
    with cluster("up") as c:
        home = os.path.join(c.dir, "home")
        os.makedirs(home)
        env = c.env({"HOME": home})
        up = Proc("up", [YARD, "up", "--listen", "127.0.0.1:0"], os.path.join(c.dir, "up.log"),
                  env=env, ready=r"yard agent ready name=")
        c.procs.append(up)
        c.cgroup_bases.add(agent_cgroup_base(socket.gethostname(), os.path.join(home, ".local", "share", "yard", "agent")))
        url = wait_until(lambda: next((re.search(r"url=(\S+)", l).group(1) for l in up.lines
                                       if "yard master ready" in l), None), 10, "the master's url")
        data = os.path.join(home, ".local", "share", "yard")
        check(os.path.exists(os.path.join(data, "admin-token")), "yard up keeps its data in ~/.local/share/yard")
        with open(os.path.join(data, "admin-token")) as f:
            token = f.read().strip()
        proj = os.path.join(c.dir, "p")
        os.makedirs(proj)
        with open(os.path.join(proj, "job.yaml"), "w") as f:
            f.write("command: [/bin/echo, up and running]\ntasks: {worker: {cpus: 0.1}}\n")
        e = dict(env, YARD_MASTER=url, YARD_TOKEN=token)
        r = subprocess.run([YARD, "submit", "--follow", os.path.join(proj, "job.yaml")],
                           capture_output=True, env=e, timeout=60)
        check_eq(r.returncode, 0, f"submit --follow under yard up ({r.stderr!r})")
        check(b"up and running\n" in r.stdout, f"output under yard up: {r.stdout!r}")
        # its master dies with its agent, so its shims do not fence (heartbeat.h)
        with open(os.path.join(proj, "shim.yaml"), "w") as f:
            f.write("command: [/bin/cat, ../shim.json]\ntasks: {worker: {cpus: 0.1}}\n")
        r = subprocess.run([YARD, "submit", "--follow", os.path.join(proj, "shim.yaml")],
                           capture_output=True, env=e, timeout=60)
        check(b'"cwd"' in r.stdout and b'"heartbeat"' not in r.stdout,
              f"no heartbeat in a yard up task's shim.json: {r.stdout!r}")
        # the web UI's sign-in URL (on stderr): the token in the fragment, never the query
        with open(up.logpath, errors="replace") as f:
            log = f.read()
        check(f"yard up: the web UI: {url}/#token={token}\n" in log, f"yard up prints the sign-in URL: {log[-2000:]!r}")
        check("?token=" not in log, f"no ?token= URL: {log[-2000:]!r}")
