"""The visibility rule (docs/security.md), route by route: every route of
docs/api.md (which tests/unit/master/test_api_doc.c checks against the
master's route table, permission and scope included) is called by every
identity: the job's owner, a member of its team, another user, an admin,
another node's agent, the job's own token, a revoked token and an expired
token. What each should get is worked out from the route's permission and
scope by the rule below (perm_admits, scope_admits), not from a hand-made
list; a route added to the table is checked the moment it is documented.

Also: what others see of a job (its document without command, params,
code or checkpoint), and that nobody submits to a team, or uses a dataset,
that their token does not give them."""
import json
import os
import re
import time

from harness import api_routes, check, check_eq, cluster, wait_until

# the roles each permission admits (src/master/auth.c's auth_allows)
PERM_ROLES = {
    "public": {"none", "admin", "user", "agent", "join", "job"},
    "read": {"admin", "user", "agent"},
    "user": {"admin", "user"},
    "admin": {"admin"},
    "agent": {"agent"},
    "join": {"join", "admin"},
    "job": {"admin", "user", "job"},
    # no token needed, none used: the body's signature is checked (this
    # master has no git-hook-secret-file: 404 whoever calls)
    "hook": {"none", "admin", "user", "agent", "join", "job"},
}

# identity -> (role, relation to the job, dataset and token the paths name)
IDENTITIES = {
    "owner": "user",     # alice, team vision: the job's, the dataset's, the token's
    "member": "user",    # carol, team vision
    "other": "user",     # bob, team nlp
    "admin": "admin",
    "agent": "agent",    # n2's agent: no task of the job runs there
    "job": "job",        # the job's own token, from its task's environment
    "revoked": "user",   # dave's token, revoked
    "expired": "user",   # erin's token, expired
}


def scope_admits(scope, who):
    """Whether the rule lets `who` past a route's scope (the permission
    having admitted it). The job, dataset and token named are alice's."""
    if who == "admin" or scope == "cluster":
        return True
    return {
        "job": who in ("owner", "member", "job"),
        "dataset": who in ("owner", "member"),
        "code": who in ("owner", "member"),
        "manifest": who in ("owner", "member"),
        "node": False,   # the paths name n1; the agent identity is n2's
        "task": False,   # the task runs on n1
        "token": who == "owner",
        "experiment": who in ("owner", "member"),
        "template": who in ("owner", "member"),
    }[scope]


def expected(perm, scope, who):
    """(status that must come, or None: anything but 401/403/5xx)."""
    role = IDENTITIES[who]
    if who in ("revoked", "expired"):
        return 200 if perm == "public" else None if perm == "hook" else 401
    if role not in PERM_ROLES[perm]:
        return 403
    if not scope_admits(scope, who):
        return 404 if scope in ("token", "experiment", "template") else 403
    return None


def last_in_order(row):
    """Routes whose allowed calls change what the others see go last:
    a drain, then the cancel of the job."""
    method, path = row[0], row[1]
    return (path.endswith("/cancel"), path.endswith("/drain"))


def test_every_route_every_identity():
    rows = sorted(api_routes(), key=last_in_order)
    check(len(rows) >= 35, f"docs/api.md lists the routes ({len(rows)} found)")
    with cluster("visibility") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        api = c.api
        join = open(os.path.join(c.data_dir, "join-token")).read().strip()

        def token(user, team=None, **extra):
            body = dict({"user": user}, **({"team": team} if team else {}), **extra)
            st, doc = api.json("POST", "/v1/tokens", body, expect=201)
            return doc

        alice, carol, bob = token("alice", "vision"), token("carol", "vision"), token("bob", "nlp")
        alice2 = token("alice", "vision")  # the token the token routes name
        dave, erin = token("dave", "vision"), token("erin", "vision", expires=1)
        st, reg = api.json("POST", "/v1/agents", {"name": "n2", "addr": "127.0.0.2", "cpus": 1, "gpus": []},
                           token=join)
        check_eq(st, 200, f"node n2 registers: {reg}")

        # alice's dataset and job (code and data through the CLI, as a user does)
        src = os.path.join(c.dir, "digits")
        os.makedirs(src)
        with open(os.path.join(src, "a.txt"), "w") as f:
            f.write("one\n")
        c.cli("data", "push", src, "digits", token=alice["token"], check_rc=0)
        proj = os.path.join(c.dir, "proj")
        os.makedirs(proj)
        with open(os.path.join(proj, "job.yaml"), "w") as f:
            f.write("name: secret\ncommand: [/bin/sh, -c, 'echo token=$YARD_JOB_TOKEN; sleep 600']\n"
                    "params: {lr: 0.5}\ntasks: {worker: {gpus: 1, cpus: 0.1, memory: 64MiB}}\n"
                    "data: [{source: 'yard://digits', mount: d}]\n")
        r = c.cli("submit", os.path.join(proj, "job.yaml"), "--output", "json", token=alice["token"],
                  check_rc=0)
        jid = json.loads(r.stdout)["id"]
        api.wait_job(jid, states=("running",), timeout=60)
        log = wait_until(lambda: (lambda t: t if b"token=" in t else None)(
            api.log(jid)), 30, "the task to print its job token")
        job_tok = re.search(rb"token=(\S+)", log).group(1).decode()
        job = api.job(jid)
        check(job["code"] and job["team"] == "vision", f"alice's job has code and team vision: {job}")
        task_id = job["tasks"][0]["id"]
        # alice's experiment: a sweep of one trial that sleeps
        sw = {"name": "sweep", "command": ["/bin/sleep", "{params.s}"], "params": {"s": 600},
              "tasks": {"worker": {"cpus": 0.1}},
              "sweep": {"method": "grid", "params": {"s": [600]},
                        "objective": {"metric": "loss", "mode": "min"}}}
        st, exp = api.json("POST", "/v1/experiments", {"spec": sw}, token=alice["token"])
        check_eq(st, 201, f"alice's experiment: {exp}")
        # alice's template on her dataset
        st, tpl = api.json("POST", "/v1/templates", {"name": "retrain", "on_dataset": "digits", "spec": {
            "name": "r", "command": ["/bin/true"], "tasks": {"worker": {"cpus": 0.1}},
            "data": [{"source": "yard://digits"}]}}, token=alice["token"])
        check_eq(st, 201, f"alice's template: {tpl}")
        st, ds = api.json("GET", "/v1/datasets/digits", expect=200)
        st, ver = api.json("GET", "/v1/datasets/digits/1", expect=200)
        st, rev = api.json("DELETE", f"/v1/tokens/{dave['id']}", expect=200)
        time.sleep(1.2)  # erin's token expires

        tokens = {"owner": alice["token"], "member": carol["token"], "other": bob["token"],
                  "admin": c.admin_token, "agent": reg["token"], "job": job_tok,
                  "revoked": dave["token"], "expired": erin["token"]}
        chunk = ver["manifest"]["files"][0]["chunks"][0]

        def fill(path):
            names = {"id": str(jid), "name": "digits", "n": "1", "eid": "1", "sid": "0123456789abcdef",
                     "path": "worker/9/8888/x"}
            if path.startswith("/v1/nodes/") or path.startswith("/v1/agents/"):
                names["name"] = names["id"] = "n1"
            elif path.startswith("/v1/tasks/"):
                names["id"] = str(task_id)
            elif path.startswith("/v1/tokens/"):
                names["id"] = alice2["id"]
            elif path.startswith("/v1/experiments/"):
                names["id"] = str(exp["id"])
            elif path.startswith("/v1/templates/"):
                names["name"] = "retrain"
            digest = {"/v1/code/": job["code"], "/v1/blobs/": chunk,
                      "/v1/manifests/": ver["digest"]}
            for prefix, d in digest.items():
                if path.startswith(prefix):
                    names["digest"] = d
            return re.sub(r"\{(\w+)\}", lambda m: names[m.group(1)], path)

        sent = 0
        for method, pattern, perm, scope, _audited in rows:
            path = fill(pattern)
            body = b"{}" if method in ("POST", "PUT") else None
            # the allowed after the refused, the admin last: a cancel that
            # goes through leaves nothing for the others to be refused
            order = sorted(IDENTITIES, key=lambda w: (expected(perm, scope, w) is None, w == "admin"))
            for who in order:
                want = expected(perm, scope, who)
                st, data, _ = api.request(method, path, token=tokens[who], raw=body,
                                          ctype="application/json")
                sent += 1
                what = f"{method} {pattern} ({perm}, {scope}) as {who}: {st} {data[:300]!r}"
                check(st < 500, what)
                if want is None:
                    check(st not in (401, 403), "allowed: " + what)
                elif want < 400:
                    check_eq(st, want, what)
                else:
                    check_eq(st, want, what)
                    err = json.loads(data)["error"]
                    check(err["code"] and err["message"], f"an error document: {what}")
                    if who in ("revoked", "expired"):
                        check(("revoked" if who == "revoked" else "expired") in err["message"],
                              f"the 401 says why: {what}")
        print(f"{len(rows)} routes x {len(IDENTITIES)} identities: {sent} requests, each as the rule says")


def test_what_others_see_and_submit():
    with cluster("visibility-docs") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        api = c.api

        def token(user, team=None):
            body = {"user": user, **({"team": team} if team else {})}
            return api.json("POST", "/v1/tokens", body, expect=201)[1]["token"]

        alice, carol, bob = token("alice", "vision"), token("carol", "vision"), token("bob", "nlp")
        src = os.path.join(c.dir, "digits")
        os.makedirs(src)
        with open(os.path.join(src, "a.txt"), "w") as f:
            f.write("one\n")
        c.cli("data", "push", src, "digits", token=alice, check_rc=0)
        sp = {"name": "mine", "command": ["/bin/echo", "{params.secret}"], "params": {"secret": "s3cr3t"},
              "tasks": {"worker": {"cpus": 0.1}}, "data": [{"source": "yard://digits", "mount": "d"}]}
        st, doc = api.submit(sp, token=alice)
        check_eq(st, 201, f"alice submits: {doc}")
        jid = doc["id"]
        api.wait_job(jid)

        def job_as(tok):
            st, d = api.json("GET", f"/v1/jobs/{jid}", token=tok, expect=200)
            return d

        for who, tok in (("alice", alice), ("carol", carol), ("admin", c.admin_token)):
            d = job_as(tok)
            check(d["spec"]["params"] == {"secret": "s3cr3t"} and "redacted" not in d,
                  f"{who} sees job {jid} whole: {d}")
        d = job_as(bob)
        check("s3cr3t" not in json.dumps(d), f"bob's view holds no param or command: {d}")
        check(d.get("redacted") is True and "params" not in d["spec"] and "command" not in d["spec"]
              and "code" not in d and "data" not in d["spec"], f"bob's view is redacted: {d}")
        check_eq((d["name"], d["user"], d["team"], d["state"]), ("mine", "alice", "vision", "succeeded"),
                 "bob still sees whose it is and how it went")
        check_eq(d["spec"]["tasks"], job_as(alice)["spec"]["tasks"], "bob sees what it holds")
        # listings too, and the kept listing is not shared across viewers
        for _ in range(2):
            st, lst = api.json("GET", "/v1/jobs", token=bob, expect=200)
            check("s3cr3t" not in json.dumps(lst), f"bob's listing holds no param: {lst}")
            st, lst = api.json("GET", "/v1/jobs", token=carol, expect=200)
            check("s3cr3t" in json.dumps(lst), f"carol's listing has the job whole: {lst}")

        # submissions: only to a team the token names
        st, doc = api.submit(dict(sp, name="x", team="nlp", data=[]), token=alice)
        check_eq(st, 403, f"alice submits to team nlp: {doc}")
        check(doc["error"]["field"] == "team" and "'nlp'" in doc["error"]["message"]
              and "'vision'" in doc["error"]["message"], f"the refusal names both teams: {doc}")
        st, doc = api.submit(dict(sp, name="x", team="vision", data=[]), token=alice)
        check_eq(st, 201, f"alice submits to her own team: {doc}")
        st, doc = api.submit(dict(sp, name="x", team="vision", data=[]), token=c.admin_token)
        check_eq(st, 201, f"an admin submits to any team: {doc}")
        # datasets: another team's is not used, nor added to
        st, doc = api.submit(dict(sp, name="x"), token=bob)
        check_eq(st, 403, f"bob's job mounts vision's dataset: {doc}")
        check_eq(doc["error"]["field"], "data[0].source", f"the refusal names the field: {doc}")
        r = c.cli("data", "push", src, "digits", token=bob)
        check(r.returncode == 1 and b"team 'vision'" in r.stderr, f"bob pushes a version of digits: {r}")
        check_eq(len(api.json("GET", "/v1/datasets/digits", expect=200)[1]["versions"]), 1,
                 "digits still has one version")
