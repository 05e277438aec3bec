"""Code from git (docs/git.md): `yard submit --git URL@REF` and a spec's
code: {git, ref, path}. The master resolves the ref at submit, fetches it
into its mirror, packs the tree into the same archive an upload makes, and
records the commit in the job's spec. Against a real `git daemon` and
`git http-backend` (gitserve.py): two branches run their own code at their
own SHA, the same SHA is not fetched or packed again, a rerun keeps its
SHA unless --ref, a missing ref is refused naming it, and a token from the
master's config opens a private repository without appearing in any reply,
CLI output or log. A server that accepts and never answers is given up at
the master's git-timeout (504), and does not keep the master from stopping."""
import contextlib
import fcntl
import hashlib
import json
import os
import re
import signal
import socket
import threading
import time

import engines
from gitserve import git, repos
from harness import check, check_eq, cluster, pid_alive, spec, wait_until

SH = "/bin/sh"
JOB = "name: from-git\ncommand: [/bin/sh, run.sh]\ntasks: {worker: {cpus: 0.1}}\n"


def job_file(c):
    """A job.yaml alone in a dir (its code comes from git)."""
    d = os.path.join(c.dir, "proj")
    os.makedirs(d, exist_ok=True)
    p = os.path.join(d, "job.yaml")
    with open(p, "w") as f:
        f.write(JOB)
    return p


def submit_git(c, url, *extra, rc=0):
    r = c.cli("submit", job_file(c), "--git", url, *extra, check_rc=rc)
    return int(r.stdout) if rc == 0 else r


def master_log(c):
    with open(c.master.logpath, errors="replace") as f:
        return f.read()


def packed_lines(c, sha):
    return re.findall(r"git: \S+ \S+ at " + sha + r".*\((cached|packed|fetched, packed)\)", master_log(c))


def test_branches_run_their_own_code_at_their_sha_and_a_sha_is_packed_once():
    with repos() as g, cluster("git") as c:
        g.make("repo", {"alpha": {"run.sh": "echo code-alpha\n", "lib/a.txt": "a\n"},
                        "beta": {"run.sh": "echo code-beta\n"}})
        base = g.serve_daemon()
        url = base + "/repo.git"
        c.start_master()
        c.start_agent("n1", gpus="sim:1")
        alpha, beta = g.sha("repo", "alpha"), g.sha("repo", "beta")
        check(alpha != beta, "two branches, two commits")

        a = submit_git(c, url + "@alpha")
        b = submit_git(c, url + "@beta")
        ja, jb = c.api.wait_job(a), c.api.wait_job(b)
        check_eq((ja["state"], jb["state"]), ("succeeded", "succeeded"), f"the jobs: {ja} {jb}")
        check_eq(c.api.log(a).decode(), "code-alpha\n", "branch alpha's code ran")
        check_eq(c.api.log(b).decode(), "code-beta\n", "branch beta's code ran")
        check_eq(ja["spec"]["code"], {"git": url, "ref": "alpha", "path": None, "sha": alpha},
                 "job a records its repository, ref and commit")
        check_eq(jb["spec"]["code"]["sha"], beta, "job b records beta's commit")
        check(ja["code"].startswith("sha256:") and ja["code"] != jb["code"],
              f"each its own content-addressed archive: {ja['code']} {jb['code']}")
        # the archive is the one agents fetch, as an upload's
        st, data, _ = c.api.request("GET", "/v1/code/" + ja["code"])
        check_eq(st, 200, "GET /v1/code of the packed archive")

        shown = c.cli("show", str(a), check_rc=0).stdout.decode()
        for want in (f"repo         {url}", "ref          alpha", f"sha          {alpha}"):
            check(want in shown, f"yard show prints {want!r}:\n{shown}")

        # the same SHA again: resolved (ls-remote), neither fetched nor packed
        check_eq(packed_lines(c, alpha), ["fetched, packed"], "alpha fetched and packed once")
        a2 = submit_git(c, url + "@alpha")
        ja2 = c.api.wait_job(a2)
        check_eq((ja2["state"], ja2["code"], ja2["spec"]["code"]["sha"]), ("succeeded", ja["code"], alpha),
                 "the same commit, the same archive")
        check_eq(packed_lines(c, alpha), ["fetched, packed", "cached"], "the second time from the cache")

        # the branch moves on: a new submission runs the new commit, a
        # rerun the old one, a rerun with --ref the ref's commit now
        alpha2 = g.commit("repo", "alpha", {"run.sh": "echo code-alpha-2\n"})
        n = submit_git(c, url + "@alpha")
        r1 = int(c.cli("rerun", str(a), check_rc=0).stdout)
        r2 = int(c.cli("rerun", str(a), "--ref", "beta", check_rc=0).stdout)
        jn, j1, j2 = c.api.wait_job(n), c.api.wait_job(r1), c.api.wait_job(r2)
        check_eq((jn["spec"]["code"]["sha"], c.api.log(n).decode()), (alpha2, "code-alpha-2\n"),
                 "a new submission of alpha runs its new commit")
        check_eq((j1["spec"]["code"]["sha"], c.api.log(r1).decode()), (alpha, "code-alpha\n"),
                 "yard rerun runs the commit the job ran")
        check_eq((j2["spec"]["code"]["ref"], j2["spec"]["code"]["sha"], c.api.log(r2).decode()),
                 ("beta", beta, "code-beta\n"), "yard rerun --ref runs that ref's commit")

        # code.path: a subdirectory's tree only
        st, doc = c.api.submit(spec([SH, "-c", "cat a.txt; test ! -e run.sh"],
                                    code={"git": url, "ref": alpha, "path": "lib"}))
        check_eq(st, 201, f"a job with code.path: {doc}")
        jp = c.api.wait_job(doc["id"])
        check_eq((jp["state"], c.api.log(doc["id"]).decode()), ("succeeded", "a\n"), "only lib/ was packed")


def test_refs_resolve_as_git_does_and_a_missing_one_is_refused_naming_it():
    with repos() as g, cluster("git-ref") as c:
        bare = g.make("repo", {"main": {"run.sh": "echo hi\n"}, "other": {"run.sh": "echo other\n"}})
        # an annotated tag (peeled to its commit), and a tag and a branch of
        # one name (the tag wins, as in git)
        git("tag", "-a", "v1", "-m", "v1", "other", cwd=bare)
        git("tag", "main", "other", cwd=bare)
        url = g.serve_daemon() + "/repo.git"
        c.start_master()
        for ref, want in (("v1", g.sha("repo", "other")), ("refs/heads/main", g.sha("repo", "refs/heads/main")),
                          ("main", g.sha("repo", "refs/tags/main")), ("HEAD", g.sha("repo", "refs/heads/main"))):
            st, doc = c.api.submit(spec([SH, "run.sh"], code={"git": url, "ref": ref}))
            check_eq((st, doc.get("spec", {}).get("code", {}).get("sha")), (201, want), f"ref {ref}: {doc}")
        check(g.sha("repo", "refs/tags/main") != g.sha("repo", "refs/heads/main"), "tag and branch main differ")
        st, doc = c.api.submit(spec([SH, "run.sh"], code={"git": url, "ref": "no-such-branch"}))
        check_eq((st, doc["error"]["field"]), (400, "code.ref"), f"a missing ref: {doc}")
        check("'no-such-branch'" in doc["error"]["message"], f"the message names the ref: {doc}")
        st, doc = c.api.submit(spec([SH, "run.sh"], code={"git": url, "ref": "main", "path": "nope"}))
        check_eq((st, doc["error"]["field"]), (400, "code.path"), f"a missing path: {doc}")
        st, doc = c.api.submit(spec([SH, "run.sh"], code={"git": url, "sha": "0" * 40}))
        check_eq((st, doc["error"]["field"]), (400, "code.sha"), f"an unknown commit: {doc}")
        r = submit_git(c, url + "@nope", rc=2)
        check("code.ref: 'nope' is not a branch, tag or commit" in r.stderr.decode(),
              f"yard submit says which ref: {r.stderr!r}")
        r = submit_git(c, "/srv/repo.git", rc=2)
        check("--git '/srv/repo.git': expected URL[@REF]: a local path is not a repository"
              in r.stderr.decode(), f"a local path is a usage error: {r.stderr!r}")
        st, doc = c.api.json("GET", "/v1/jobs")
        check_eq(len(doc["jobs"]), 4, "no job was made but the four of the refs that resolve")

        # the cache outlives the master: v1's commit, packed before the
        # restart, is neither fetched nor packed after it
        other = g.sha("repo", "other")
        before = packed_lines(c, other)  # v1 and the tag main: one commit, packed once
        check_eq(before, ["fetched, packed", "cached"], "v1's commit packed once")
        c.master.stop()
        c.start_master()
        st, doc = c.api.submit(spec([SH, "run.sh"], code={"git": url, "ref": "v1"}))
        check_eq((st, doc["spec"]["code"]["sha"]), (201, other), f"v1 after a restart: {doc}")
        check_eq(packed_lines(c, other), before + ["cached"], "v1's commit from the cache")


def test_a_token_from_the_config_opens_a_private_repo_and_is_never_shown():
    token = "tok-3f9a1c7e5b2d4e6f8a0b1c2d"
    with repos() as g:
        g.make("private", {"main": {"run.sh": "echo private-code\n"}})
        g.make("other", {"main": {"run.sh": "echo other\n"}})
        base = g.serve_http(token)
        tdir = os.path.join(g.root, "secrets")
        os.makedirs(tdir)
        with open(os.path.join(tdir, "good"), "w") as f:
            f.write(token + "\n")
        with open(os.path.join(tdir, "bad"), "w") as f:
            f.write("wrong-token\n")
        args = ["--git-credential", f"{base}/private.git=token-file:{tdir}/good",
                "--git-credential", f"{base}/other.git=token-file:{tdir}/bad"]
        with cluster("git-cred", master_args=args) as c:
            c.start_master()
            replies = []
            request = c.api.request

            def recording(*a, **kw):  # every API reply this test gets
                r = request(*a, **kw)
                replies.append(r[1].decode(errors="replace") + json.dumps(r[2]))
                return r
            c.api.request = recording
            c.start_agent("n1", gpus="sim:1")

            jid = submit_git(c, base + "/private.git@main")
            j = c.api.wait_job(jid)
            check_eq((j["state"], c.api.log(jid).decode()), ("succeeded", "private-code\n"),
                     "the job ran the private repository's code")
            check(any(ok for _, ok in g.http_log) and any(not ok for _, ok in g.http_log),
                  f"the server asked for the token and got it: {g.http_log}")

            # no credential for the URL: refused, and said so
            st, doc = c.api.submit(spec([SH, "run.sh"], code={"git": base + "/private2.git"}))
            check_eq((st, doc["error"]["field"]), (502, "code.git"), f"no credential: {doc}")
            check("asks for credentials and the master has none for it" in doc["error"]["message"],
                  f"the reason: {doc}")
            # a credential the server refuses: said so too
            st, doc = c.api.submit(spec([SH, "run.sh"], code={"git": base + "/other.git"}))
            check_eq(st, 502, f"a refused credential: {doc}")
            check("refused the master's credential" in doc["error"]["message"], f"the reason: {doc}")

            outputs = [c.cli("show", str(jid), check_rc=0).stdout.decode(),
                       c.cli("show", "--output", "json", str(jid), check_rc=0).stdout.decode(),
                       c.cli("submit", job_file(c), "--git", base + "/private2.git", check_rc=1).stderr.decode()]
            _, audit = c.api.json("GET", "/v1/audit", expect=200)
            posts = sorted(e["status"] for e in audit["entries"]
                           if e["method"] == "POST" and e["path"] == "/v1/jobs")
            check_eq(posts, [201, 502, 502, 502], f"the audit log has each submission from git: {audit}")
            c.api.json("GET", "/v1/jobs", expect=200)
            c.api.request("GET", "/metrics")
            logs = []
            for p in c.procs:
                with open(p.logpath, errors="replace") as f:
                    logs.append((p.logpath, f.read()))
            check(len(replies) >= 6 and len(logs) == 2, f"the scan has {len(replies)} replies and "
                  f"{len(logs)} logs to look at")
            for i, text in enumerate(replies + outputs):
                check(token not in text, f"the token is in reply or output {i}: {text[:300]}")
            for path, text in logs:
                check(token not in text, f"the token is in {path}")
            check("git: " in logs[0][1], "the master's log has its git lines (the scan saw them)")


@contextlib.contextmanager
def silent_server():
    """A TCP server on 127.0.0.1 that accepts connections, reads nothing and
    never answers (a git server hung after its accept); yields (port, the
    list of accepted connections). Closed on exit."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.1)
    conns, done = [], threading.Event()

    def accept():
        while not done.is_set():
            try:
                conns.append(srv.accept()[0])
            except (socket.timeout, OSError):
                pass
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1], conns
    finally:
        done.set()
        t.join(5)
        for conn in conns:
            conn.close()
        srv.close()


def git_workers(master_pid):
    """The pids of the master's children that run `yard git-worker`."""
    return [pid for pid, (ppid, cmd, _) in engines._procs().items()
            if ppid == master_pid and "git-worker" in cmd.split()]


def test_a_server_that_never_answers_is_given_up_at_the_git_timeout_and_the_master_still_stops():
    with silent_server() as (port, conns), cluster("git-hang", master_args=["--git-timeout", "2s"]) as c:
        url = f"http://127.0.0.1:{port}/hung.git"
        body = {"spec": spec([SH, "run.sh"], code={"git": url, "ref": "main"})}
        c.start_master()
        t0 = time.monotonic()
        st, data, _ = c.api.request("POST", "/v1/jobs", body, timeout=30)
        took = time.monotonic() - t0
        doc = json.loads(data)
        check_eq((st, doc["error"]["field"]), (504, "code.git"), f"a server that never answers: {doc}")
        msg = doc["error"]["message"]
        check(f"'{url}'" in msg and "within 2s" in msg and "git-timeout" in msg,
              f"the message names the URL and the timeout: {msg}")
        check(1.5 < took < 10, f"answered at the timeout, after {took:.1f}s")
        check(len(conns) >= 1, "the server was reached (the worker hung on it, not elsewhere)")
        check_eq(git_workers(c.master.p.pid), [], "no git-worker is left after the timeout")
        st, doc = c.api.json("GET", "/v1/jobs")
        check_eq(doc["jobs"], [], "no job was made")

        # from the config file, a long timeout: the master asked to stop
        # with a submission in flight kills its git-worker and exits
        c.master.stop()
        conf = os.path.join(c.dir, "master.conf")
        with open(conf, "w") as f:
            f.write("git-timeout = 10m\n")
        c.master_args = ["--config", conf]
        c.start_master()
        reached = len(conns)
        answer = {}

        def submit():
            try:
                st, data, _ = c.api.request("POST", "/v1/jobs", body, timeout=30)
                answer["reply"] = (st, data)
            except OSError as e:  # the master went before it answered
                answer["error"] = e
        t = threading.Thread(target=submit, daemon=True)
        t.start()
        workers = wait_until(lambda: len(conns) > reached and git_workers(c.master.p.pid), 10,
                             "a git-worker hung on the server")
        t0 = time.monotonic()
        os.kill(c.master.p.pid, signal.SIGTERM)
        try:
            rc = c.master.p.wait(10)
        except Exception:
            rc = None
        took = time.monotonic() - t0
        check(rc is not None and took < 5, f"the master exits on SIGTERM with a git-worker hung "
              f"(rc {rc} after {took:.1f}s)")
        t.join(30)
        if "reply" in answer:
            st, data = answer["reply"]
            check(st == 503 and b"the master is" in data, f"the held submission: 503, the master stops: {st} {data!r}")
        else:
            check("error" in answer, "the submission was answered or its connection closed")
        for pid in workers:
            check(not pid_alive(pid), f"git-worker {pid} is gone with the master")


def test_submissions_of_one_repository_at_once_share_its_mirror_safely():
    with repos() as g, cluster("git-many", master_args=["--git-timeout", "3s"]) as c:
        branches = [f"b{i}" for i in range(4)]
        g.make("repo", {b: {"run.sh": f"echo {b}\n"} for b in branches})
        url = g.serve_daemon() + "/repo.git"
        c.start_master()
        replies = {}

        def submit(b):
            replies[b] = c.api.submit(spec([SH, "run.sh"], code={"git": url, "ref": b}))
        threads = [threading.Thread(target=submit, args=(b,), daemon=True) for b in branches]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for b in branches:
            st, doc = replies.get(b, (None, None))
            check_eq((st, (doc or {}).get("spec", {}).get("code", {}).get("sha")), (201, g.sha("repo", b)),
                     f"branch {b}, submitted with the others at once: {doc}")
        check_eq(git_workers(c.master.p.pid), [], "no git-worker is left")
        mirrors = os.path.join(c.data_dir, "git", "mirrors")
        locks = [f for f in os.listdir(mirrors) if f.endswith(".lock")]
        check_eq(locks, [hashlib.sha256(url.encode()).hexdigest()[:32] + ".lock"],
                 "one mirror, one lock file")

        # the lock is a flock: held elsewhere, a fetch into the mirror waits
        # for it (here until the git-timeout), and goes on once it is free
        new = g.commit("repo", "b0", {"run.sh": "echo b0-2\n"})
        with open(os.path.join(mirrors, locks[0])) as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            st, doc = c.api.submit(spec([SH, "run.sh"], code={"git": url, "ref": "b0"}))
            check_eq(st, 504, f"the mirror locked by another: the submission waits for it: {doc}")
        st, doc = c.api.submit(spec([SH, "run.sh"], code={"git": url, "ref": "b0"}))
        check_eq((st, doc.get("spec", {}).get("code", {}).get("sha")), (201, new), f"the lock free: {doc}")
