"""Config files (yard master --config FILE, yard agent --config FILE) and
reloads: a master and an agent started from files alone run a job; a flag
wins over its key; a bad file is refused naming the file, the line and the
reason; a reload (SIGHUP, or POST /v1/admin/reload) applies the reloadable
keys that changed (policies, teams and quotas, rate limits, visibility),
names those that need a restart, and changes nothing when the file is bad.
Every key of both tables is unit-tested (tests/unit/master/test_master_conf.c,
tests/unit/agent/test_agent_conf.c)."""
import os
import re
import signal
import socket
import subprocess

from harness import YARD, Proc, check, check_eq, cluster, spec, wait_until

HOLD = ["/bin/sh", "-c", "echo started; sleep 300"]


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def start_master_from(c, conf_path, extra=()):
    """A master started with --config (and extra flags), as c's master."""
    m = Proc("master", [YARD, "master", "--config", conf_path, *extra], os.path.join(c.dir, "master.log"),
             env=c.env(), ready=r"yard master ready url=(\S+)")
    c.procs.append(m)
    c.master = m
    c.url = m.ready_match.group(1)
    with open(os.path.join(c.data_dir, "admin-token")) as f:
        c.admin_token = f.read().strip()
    from harness import Api
    c.api = Api(c.url, c.admin_token)
    return m


def reload_api(c, token=None):
    st, data, _ = c.api.request("POST", "/v1/admin/reload", token=token)
    return st, data


def test_daemons_run_from_their_files():
    with cluster("config-files") as c:
        mconf = os.path.join(c.dir, "master.conf")
        write(mconf, f"""# a master configured by its file alone
listen = 127.0.0.1:0
data-dir = {c.data_dir}

policy = fifo
policy = gpu=las
team = vision=2:4
rate-limit = 1:1
visibility = team
""")
        # the flag wins over the file's key: no limit, though the file has 1:1
        start_master_from(c, mconf, ["--rate-limit", "0"])
        codes = [c.api.request("GET", "/v1/jobs")[0] for _ in range(20)]
        check_eq(codes, [200] * 20, "--rate-limit 0 on the command line wins over 'rate-limit = 1:1'")

        work = os.path.join(c.dir, "agent-w")
        aconf = os.path.join(c.dir, "agent.conf")
        write(aconf, f"""master = {c.url}
work-dir = {work}
gpus = sim:2
pool = gpu
label = rack=r1
label = fabric=ib
join-token-file = {os.path.join(c.data_dir, "join-token")}
""")
        host = socket.gethostname()
        a = Proc("agent", [YARD, "agent", "--config", aconf], os.path.join(c.dir, "agent.log"), env=c.env(),
                 ready=r"yard agent ready name=(\S+)")
        c.procs.append(a)
        from harness import agent_cgroup_base
        c.cgroup_bases.add(agent_cgroup_base(a.ready_match.group(1), work))
        check_eq(a.ready_match.group(1), host, "an agent without a name is named for its host")
        st, doc = c.api.json("GET", "/v1/nodes", expect=200)
        node = [n for n in doc["nodes"] if n["name"] == host]
        check(node, f"the node joined: {doc}")
        check_eq(node[0]["pool"], "gpu", "the node's pool from the file")
        check_eq(node[0]["labels"], {"rack": "r1", "fabric": "ib"}, "both labels of the repeated key")
        jid = c.api.submit(spec(["/bin/echo", "from a file"], gpus=1, pool="gpu",
                                placement={"labels": {"fabric": "ib"}}))[1]["id"]
        check_eq(c.api.wait_job(jid)["state"], "succeeded", "a job on the agent of the file")
        check_eq(c.api.log(jid).strip(), b"from a file", "its log")


def refused(argv, what):
    r = subprocess.run([YARD, *argv], capture_output=True, text=True, timeout=30)
    check_eq(r.returncode, 2, f"{what}: exit status (stderr {r.stderr!r})")
    return r.stderr


def test_bad_files_are_refused_by_file_line_and_reason(tmp="/tmp"):
    with cluster("config-bad") as c:
        path = os.path.join(c.dir, "bad.conf")
        cases = [
            ("data-dir = /tmp/x\nlisten = 127.0.0.1:0\nlistne = 127.0.0.1:1\n",
             ["line 3", "unknown key 'listne'"]),
            ("data-dir = /tmp/x\n\n# fine\nlease = soon\n", ["line 4", "lease 'soon'", "expected a duration"]),
            ("data-dir = /tmp/x\nlisten = 127.0.0.1:0\nlisten = 127.0.0.1:1\n",
             ["line 3", "key 'listen' is set on line 2 already"]),
            ("data-dir = /tmp/x\njust words\n", ["line 2", "expected 'key = value'"]),
            ("data-dir = /tmp/x\npolicy = gpu=fastest\n", ["line 2", "policy 'gpu=fastest'", "expected [POOL=]"]),
            ("data-dir = /tmp/x\nteam = vision\n", ["line 2", "team 'vision'", "TEAM=WEIGHT"]),
            ("data-dir = /tmp/x\ntls-self-signed = maybe\n", ["line 2", "expected true or false"]),
            ("data-dir = /tmp/x\nconfig = /etc/other.conf\n", ["line 2", "cannot name another"]),
            ("listen = 127.0.0.1:0\n", ["--data-dir is needed", "data-dir = ..."]),
            ("data-dir = /tmp/x\nrate-limit = \xff\n", ["line 2", "expected text"]),
        ]
        for text, parts in cases:
            with open(path, "wb") as f:
                f.write(text.encode("latin-1"))
            err = refused(["master", "--config", path], f"master file {text!r}")
            for p in parts:
                check(p in err, f"the refusal of {text!r} says {p!r}: {err!r}")
            if "line" in parts[0]:
                check(f"'{path}'" in err, f"and names the file: {err!r}")
        err = refused(["master", "--config", os.path.join(c.dir, "missing.conf")], "a missing file")
        check("cannot read config file" in err and "No such file" in err, err)
        write(path, "master = http://127.0.0.1:1\nwork-dir = /tmp/w\nports = 80-90\n")
        err = refused(["agent", "--config", path], "agent ports")
        check("line 3: ports '80-90'" in err and "1024-65535" in err, err)
        write(path, "master = ftp://x\nwork-dir = /tmp/w\n")
        err = refused(["agent", "--config", path], "agent master")
        check("line 1: master 'ftp://x'" in err, err)
        err = refused(["master", "--data-dir", "/tmp/x", "--lease", "forever"], "a bad flag")
        check("--lease 'forever'" in err, f"a flag's error names the flag: {err!r}")


def test_reload_applies_what_it_can_and_names_the_rest():
    with cluster("config-reload") as c:
        mconf = os.path.join(c.dir, "master.conf")
        base = f"listen = 127.0.0.1:0\ndata-dir = {c.data_dir}\n"
        write(mconf, base + "policy = fair\nteam = vision=1:1\nvisibility = team\nrate-limit = 1000\n")
        m = start_master_from(c, mconf, ["--lease", "30s"])
        c.start_agent("a", gpus="sim:2")
        alice = c.user_token("alice", team="vision")
        bob = c.user_token("bob", team="speech")
        v1 = c.api.submit(spec(HOLD, name="v1", gpus=1, team="vision"), token=alice)[1]["id"]
        wait_until(lambda: c.api.job(v1)["state"] == "running", 30, "v1 runs")
        v2 = c.api.submit(spec(HOLD, name="v2", gpus=1, team="vision"), token=alice)[1]["id"]
        wait_until(lambda: (c.api.job(v2).get("reason") or {}).get("code") == "team_quota", 30,
                   "v2 waits for its team's quota of 1 GPU")
        st, _, _ = c.api.request("GET", f"/v1/jobs/{v1}/logs?task=worker/0", token=bob)
        check(st in (403, 404), f"bob (another team) may not read alice's logs under team visibility: {st}")

        # a bad file: refused with its line, nothing changes
        write(mconf, base + "policy = fair\nteam = vision=1:2\nvisibility = everyone\nrate-limit = 1000\n")
        st, data = reload_api(c)
        check_eq(st, 400, f"a reload of a bad file: {data!r}")
        check(f"'{mconf}' line 5: visibility 'everyone'" in data.decode(), data)
        check_eq(c.api.job(v2)["state"], "queued", "the good team line of the bad file was not applied")
        # only admins reload
        st, data = reload_api(c, token=alice)
        check_eq(st, 403, f"a user's reload: {data!r}")

        # a good file through the API: quota, visibility and the limit are applied; the listen
        # address and the lease (a flag) are not
        write(mconf, "listen = 127.0.0.1:1\n" + f"data-dir = {c.data_dir}\n" +
              "policy = fair\nteam = vision=1:2\nvisibility = open\nrate-limit = 3:3\nlease = 5s\n")
        st, data = reload_api(c)
        check_eq(st, 200, f"the reload: {data!r}")
        import json
        doc = json.loads(data)
        check_eq(doc["file"], mconf, "the file it read")
        check_eq(sorted(doc["applied"]), ["rate-limit", "team", "visibility"], f"applied: {doc}")
        check_eq(doc["restart"], ["listen"], f"what needs a restart: {doc}")
        check_eq(doc["overridden"], ["lease"], f"what a flag overrides: {doc}")
        # (polls at 2 a second: the new limit is 3 a second for every token)
        wait_until(lambda: c.api.job(v2).get("state") == "running", 30, "v2 runs under the new quota of 2",
                   interval=0.5)
        wait_until(lambda: c.api.request("GET", f"/v1/jobs/{v1}/logs?task=worker/0", token=bob)[0] == 200,
                   10, "bob reads alice's logs under open visibility", interval=0.5)
        codes = [c.api.request("GET", "/v1/whoami", token=bob)[0] for _ in range(8)]
        check(codes.count(429) >= 3, f"the new limit of 3:3 holds for bob: {codes}")

        # yard admin reload: the same through the CLI (no change now); a user may not
        r = c.cli("admin", "reload", check_rc=0)
        out = r.stdout.decode()
        check(f"reloaded {mconf}" in out and "nothing to apply" in out and
              "needs a restart to change: listen" in out, f"yard admin reload: {out!r}")
        r = c.cli("admin", "reload", token=alice, check_rc=1)
        check("forbidden" in r.stderr.decode() or "admin" in r.stderr.decode(), f"a user's reload: {r.stderr!r}")

        # SIGHUP: the same, from the file; the master says what it did
        write(mconf, base + "policy = fair\nteam = vision=1:2\nvisibility = team\nrate-limit = 0\n")
        m.kill(signal.SIGHUP)
        wait_until(lambda: sum("reloaded" in l for l in open(m.logpath, errors="replace")) == 3, 10,
                   "the master logs the third reload")
        log = open(m.logpath, errors="replace").read()
        check(re.search(r"reloaded '.*master\.conf': applied rate-limit, visibility", log), log[-2000:])
        wait_until(lambda: c.api.request("GET", f"/v1/jobs/{v1}/logs?task=worker/0", token=bob)[0] in (403, 404),
                   10, "team visibility again after SIGHUP", interval=0.5)
        codes = [c.api.request("GET", "/v1/whoami", token=bob)[0] for _ in range(8)]
        check_eq(codes, [200] * 8, "no limit after SIGHUP")
        st, doc = c.api.json("GET", "/v1/audit?limit=50", expect=200)
        paths = [(e["method"], e["path"]) for e in doc["entries"]]
        check(("POST", "/v1/admin/reload") in paths and ("EVENT", "/v1/admin/reload") in paths,
              f"both reloads are in the audit log: {paths}")
        for j in (v1, v2):
            c.api.json("POST", f"/v1/jobs/{j}/cancel")


def test_reload_without_a_file():
    with cluster("config-none") as c:
        c.start_master()
        st, data = reload_api(c)
        check_eq(st, 409, f"a master started without --config: {data!r}")
        check("without --config" in data.decode(), data)
        c.master.kill(signal.SIGHUP)
        wait_until(lambda: "reload refused" in open(c.master.logpath, errors="replace").read(), 10,
                   "SIGHUP without a file is refused, and the master goes on")
        check_eq(c.api.request("GET", "/healthz")[0], 200, "it still serves")
