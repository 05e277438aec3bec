"""Push hooks (POST /v1/hooks/git, master/githook.c, docs/git.md "Push
hooks"): a bare repository served by a real `git daemon` (gitserve.py) with
the example post-receive hook (examples/git-hooks/post-receive) installed,
a master with a git-hook-secret-file, one node with a real dockerd
(engines.py). A push to `main` prebuilds the image of a build-only template,
so that a job submitted later on that commit builds nothing; a push to
`feature/*` runs a template at the pushed commit; a branch no template names
runs nothing; the same push delivered again runs nothing again. Unsigned or
wrongly signed pushes get 401 and run nothing, and the secret appears in no
reply, CLI output or daemon log.

Skipped (harness.Skip, its reason printed) only when dockerd cannot start here."""
import hashlib
import hmac
import json
import os
import shutil

import engines
from gitserve import git, repos
from harness import ROOT, YARD, check, check_eq, cluster, wait_until

# a first run builds the rootfs with debootstrap (about a minute)
TIMEOUT = 900

BUILD_DIR = os.path.dirname(os.path.abspath(YARD)) if os.path.isabs(YARD) else os.path.join(ROOT, "build-asan")
HOOK = os.path.join(ROOT, "examples", "git-hooks", "post-receive")
SECRET = "hook-secret-" + "5f0c1e2d3b4a69788796a5b4c3d2e1f0"

DOCKERFILE = "FROM yard-test/base:1\nRUN echo image-main > /etc/which\nCOPY run.sh /run.sh\n"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def signed(body, secret=SECRET):
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post_hook(c, body, headers):
    """POST /v1/hooks/git with no token: (status, reply)."""
    import urllib.error
    import urllib.request
    req = urllib.request.Request(c.url + "/v1/hooks/git", data=body, method="POST",
                                 headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def jobs_named(c, prefix):
    jobs = c.api.json("GET", "/v1/jobs?limit=1000", expect=200)[1]["jobs"]
    return [j for j in jobs if j["name"].startswith(prefix)]


def push(g, name, branch, files):
    """Commits files to branch and pushes it to the bare repository, whose
    post-receive hook tells the master: (sha, what the hook printed)."""
    work = os.path.join(g.root, name + "-work")
    try:
        git("checkout", "-q", branch, cwd=work)
    except Exception:
        git("checkout", "-q", "-b", branch, cwd=work)
    g._write(work, files)
    git("commit", "-qm", f"to {branch}", cwd=work)
    import subprocess
    from gitserve import ENV, GIT
    r = subprocess.run([GIT, "push", os.path.join(g.root, name + ".git"), f"{branch}:refs/heads/{branch}"],
                       cwd=work, env=ENV, capture_output=True, timeout=60)
    check_eq(r.returncode, 0, f"git push {branch}: {r.stderr!r}")
    return g.sha(name, branch), r.stderr.decode(errors="replace")


def test_pushes_prebuild_and_run_templates_signed_only():
    eng = engines.docker_with_base(BUILD_DIR)
    try:
        with repos() as g, cluster("githook") as c:
            secret_file = os.path.join(c.dir, "hook-secret")
            write(secret_file, SECRET + "\n")
            os.chmod(secret_file, 0o600)
            c.master_args += ["--git-hook-secret-file", secret_file]
            bare = g.make("models", {"main": {"Dockerfile": DOCKERFILE, "run.sh": "echo main-v1; cat /etc/which\n"},
                                     "feature/a": {"run.sh": "#!/bin/sh\necho feature-a-v1\n"}})
            url = g.serve_daemon() + "/models.git"
            shutil.copy(HOOK, os.path.join(bare, "hooks", "post-receive"))
            c.start_master()
            c.start_agent("n1", extra=["--runtime", "process,docker", "--docker-socket", eng.socket])
            for k, v in (("yard.master", c.url), ("yard.url", url), ("yard.secretFile", secret_file)):
                git("config", k, v, cwd=bare)
            proj = os.path.join(c.dir, "proj")
            os.makedirs(proj)
            image_job = os.path.join(proj, "image.yaml")
            write(image_job, "name: trains\ncommand: [/bin/sh, /run.sh]\nimage: {build: {}}\n"
                             "tasks: {worker: {cpus: 0.1}}\n")
            plain_job = os.path.join(proj, "plain.yaml")
            write(plain_job, "name: tries\ncommand: [/bin/sh, run.sh]\ntasks: {worker: {cpus: 0.1}}\n")

            # templates: refusals first, each naming its field
            r = c.cli("template", "create", "bad", plain_job, "--on-git", "main", "--git", url, "--build-only")
            check(r.returncode != 0 and b"image.build" in r.stderr,
                  f"build-only without an image build is refused naming image.build: {r.stderr!r}")
            r = c.cli("template", "create", "bad", plain_job, "--on-git", "main")
            check(r.returncode != 0 and b"code.git" in r.stderr,
                  f"a template on git without a repository is refused naming code.git: {r.stderr!r}")
            st, doc = c.api.json("POST", "/v1/templates", {"name": "bad", "spec": {"name": "x", "command": ["true"],
                                 "code": {"git": url}}, "on_git": {"branches": ["has space"]}})
            check_eq((st, doc["error"].get("field")), (400, "on_git.branches"), f"a bad glob: {doc}")
            c.cli("template", "create", "prebuild", image_job, "--on-git", "main", "--git", url, "--build-only",
                  check_rc=0)
            c.cli("template", "create", "tries", plain_job, "--on-git", "feature/*", "--git", url, check_rc=0)
            ls = c.cli("template", "ls", check_rc=0).stdout.decode()
            check("git main (build only)" in ls and "git feature/*" in ls, f"yard template ls: {ls}")

            # unsigned and wrongly signed pushes: 401, nothing runs
            body = json.dumps({"ref": "refs/heads/main", "after": g.sha("models", "main"),
                               "repository": {"clone_url": url}}).encode()
            replies = []
            for headers, why in (({}, "unsigned"), ({"X-Hub-Signature-256": signed(body, "another-secret-0123456")},
                                                   "signed with another secret"),
                                 ({"X-Hub-Signature-256": signed(body + b" ")}, "the body changed"),
                                 ({"X-Gitea-Signature": "00" * 32}, "a Gitea signature that does not match")):
                st, reply = post_hook(c, body, {"X-GitHub-Event": "push", **headers})
                replies.append(reply)
                check_eq(st, 401, f"{why}: {reply}")
            check_eq(jobs_named(c, "prebuild"), [], "a refused push ran nothing")

            # a push to main prebuilds: the hook's job builds the image
            sha, said = push(g, "models", "main", {"run.sh": "echo main-v2; cat /etc/which\n"})
            check(f"template prebuild builds its image at {sha[:7]}: job prebuild-build-{sha[:7]}" in said,
                  f"the hook's output on the push: {said}")
            build = wait_until(lambda: jobs_named(c, "prebuild-build-"), 60, "the prebuild job")[0]
            doc = c.api.wait_job(build["id"], timeout=300)
            out = c.api.log(build["id"], task="build/0").decode(errors="replace")
            check_eq(doc["state"], "succeeded", f"the prebuild (reason {doc.get('reason')}):\n{out}")
            check_eq((doc["spec"]["code"]["sha"], doc["spec"]["code"]["ref"]), (sha, "main"), "the pushed commit")
            check("yard: building image" in out, f"the prebuild built the image:\n{out}")
            # the commit's job finds it built
            jid = int(c.cli("submit", image_job, "--git", f"{url}@main", check_rc=0).stdout)
            doc = c.api.wait_job(jid, timeout=300)
            out = c.api.log(jid).decode(errors="replace")
            check_eq(doc["state"], "succeeded", f"the job on main (reason {doc.get('reason')}):\n{out}")
            check("is built already" in out and "building image" not in out,
                  f"the job on the pushed commit built nothing:\n{out}")
            check("main-v2" in out, f"the job ran the pushed code:\n{out}")

            # the same push again (a server retrying its delivery): nothing new
            again = json.dumps({"ref": "refs/heads/main", "after": sha, "repository": {"clone_url": url}}).encode()
            st, reply = post_hook(c, again, {"X-GitHub-Event": "push", "X-Hub-Signature-256": signed(again)})
            replies.append(reply)
            check_eq(st, 202, f"a delivery again: {reply}")
            check("ran commit" in json.loads(reply)["runs"][0].get("skipped", ""), f"skipped: {reply}")
            check_eq(len(jobs_named(c, "prebuild-build-")), 1, "one prebuild per commit")

            # a push to feature/* runs that template at the pushed commit
            fsha, said = push(g, "models", "feature/a", {"run.sh": "#!/bin/sh\necho feature-a-v2\n"})
            run = wait_until(lambda: jobs_named(c, "tries-"), 60, "the template's run")[0]
            check_eq(run["name"], f"tries-{fsha[:7]}", "the run is named by its commit")
            doc = c.api.wait_job(run["id"], timeout=120)
            out = c.api.log(run["id"]).decode(errors="replace")
            check_eq(doc["state"], "succeeded", f"the run (reason {doc.get('reason')}):\n{out}")
            check_eq(out.strip(), "feature-a-v2", "the run ran the pushed code")
            check_eq((doc["spec"]["code"]["sha"], doc["spec"]["params"]["commit"],
                      doc["spec"]["params"]["template"]), (fsha, fsha, "tries"), "the run's commit and template")
            shown = c.cli("template", "show", "tries", check_rc=0).stdout.decode()
            check(f"feature/a@{fsha[:7]}: job {run['id']}" in shown, f"yard template show: {shown}")

            # a branch no template names runs nothing; a deleted branch neither
            before = len(c.api.json("GET", "/v1/jobs?limit=1000", expect=200)[1]["jobs"])
            _, said = push(g, "models", "docs", {"README": "docs\n"})
            check("template" not in said, f"a push to docs runs nothing: {said}")
            gone = json.dumps({"ref": "refs/heads/feature/a", "after": "0" * 40,
                               "repository": {"clone_url": url}}).encode()
            st, reply = post_hook(c, gone, {"X-Gitea-Event": "push", "X-Gitea-Signature": signed(gone)[7:]})
            check_eq((st, json.loads(reply)["runs"]), (202, []), f"a deleted branch: {reply}")
            st, reply = post_hook(c, b"{}", {"X-GitHub-Event": "ping", "X-Hub-Signature-256": signed(b"{}")})
            check_eq(st, 200, f"a ping: {reply}")
            bad = json.dumps({"ref": "refs/heads/main", "after": "not-a-sha", "repository": {"clone_url": url}})
            st, reply = post_hook(c, bad.encode(), {"X-Hub-Signature-256": signed(bad.encode())})
            check_eq((st, json.loads(reply)["error"].get("field")), (400, "after"), f"a bad commit is named: {reply}")
            check_eq(len(c.api.json("GET", "/v1/jobs?limit=1000", expect=200)[1]["jobs"]), before,
                     "no job from the docs push, the deleted branch, the ping or the bad body")

            # the secret is in no reply, CLI output, audit entry or log
            for tpl in ("prebuild", "tries"):
                replies.append(c.cli("template", "show", tpl, "--output", "json", check_rc=0).stdout.decode())
            replies.append(json.dumps(c.api.json("GET", "/v1/audit?limit=1000", expect=200)[1]))
            for jid in [j["id"] for j in c.api.json("GET", "/v1/jobs?limit=1000", expect=200)[1]["jobs"]]:
                replies.append(json.dumps(c.api.job(jid)))
            for name in os.listdir(c.dir):
                if name.endswith(".log"):
                    with open(os.path.join(c.dir, name), errors="replace") as f:
                        replies.append(f.read())
            check(len(replies) > 10, "replies and logs were scanned")
            for text in replies:
                check(SECRET not in text, f"the secret leaked: {text[:300]}")
    finally:
        eng.close()


def test_a_master_without_a_secret_takes_no_pushes():
    with cluster("githook-off") as c:
        c.start_master()
        body = b'{"ref": "refs/heads/main"}'
        st, reply = post_hook(c, body, {"X-Hub-Signature-256": signed(body)})
        check_eq(st, 404, f"no git-hook-secret-file: {reply}")
        check("git-hook-secret-file" in reply, f"the reply says why: {reply}")
        short = os.path.join(c.dir, "short")
        write(short, "tooshort\n")
        r = c.cli("master", "--data-dir", os.path.join(c.dir, "other"), "--git-hook-secret-file", short,
                  "--listen", "127.0.0.1:0")
        err = r.stderr.decode()
        check(r.returncode != 0 and "git-hook-secret-file" in err and "8 bytes" in err and "tooshort" not in err,
              f"a short secret is refused, naming the option, never echoed: {err}")
