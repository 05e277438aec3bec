"""Unprivileged tasks (yard agent --run-as, docs/protocol.md): with a uid
range, two jobs running at once on one node run as two different non-root
uids; job B cannot read a file job A wrote in its work dir, nor list A's
dir, A's task dir, the dir of task dirs or of checkpoints (B checks this
itself and exits non-zero if it could); both still write their work dirs,
HOME and checkpoint dirs, their logs reach the master, A's checkpoint is
handed over, and an exec inside A (the MPI launcher's and `yard exec`,
its terminal too) runs as A's uid. With one user
(`--run-as nobody`) the task runs as that user. The agent refuses root, a
bad value, and a work dir the tasks' users cannot reach.

The uids (61000-61099) belong to no one on a test machine: the files they
own live in the cluster's temp dir, which the harness removes."""
import json
import os
import pwd
import re
import signal
import subprocess

from harness import YARD, check, check_eq, cluster, spec, wait_until
from ptycli import PtyCli

SH = "/bin/sh"
FIRST, LAST = 61000, 61099

A_SCRIPT = r"""
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G)"
echo "dir=$PWD home=$HOME"
echo secret-of-a > secret.txt || exit 3
echo ckpt-a > "$YARD_CHECKPOINT_DIR/a.ckpt" || exit 4
i=0
while [ ! -e stop ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
[ -e stop ] || { echo "no stop file after 120 s" >&2; exit 2; }
echo "a done"
"""

# $1: A's work dir. Every read of A's must fail; B's own writes must work.
B_SCRIPT = r"""
echo "uid=$(id -u)"
st=0
if cat "$1/secret.txt"; then echo "B READ A's FILE"; st=1; fi
if ls "$1"; then echo "B LISTED A's WORK DIR"; st=1; fi
if ls "$1/.."; then echo "B LISTED A's TASK DIR"; st=1; fi
if ls "$PWD/../.."; then echo "B LISTED THE TASK DIRS"; st=1; fi
if ls "$YARD_CHECKPOINT_DIR/.."; then echo "B LISTED THE CHECKPOINT DIRS"; st=1; fi
echo mine > own.txt && cat own.txt || st=5
echo home > "$HOME/home.txt" || st=6
echo ckpt-b > "$YARD_CHECKPOINT_DIR/b.ckpt" || st=7
exit $st
"""


def field(text, name):
    m = re.search(name + r"=(\S+)", text)
    check(m, f"the task printed {name}=: {text!r}")
    return m.group(1)


def test_run_as_range_keeps_jobs_apart():
    with cluster("runas") as c:
        c.start_master()
        # the tasks' users must reach the agent's work dir (mkdtemp made it 0700)
        work = os.path.join(c.dir, "agent-n1")
        r = subprocess.run([YARD, "agent", "--master", c.url, "--name", "n0", "--work-dir", work,
                            "--run-as", f"{FIRST}-{LAST}",
                            "--join-token-file", os.path.join(c.data_dir, "join-token")],
                           capture_output=True, text=True, timeout=60)
        check(r.returncode != 0 and "--run-as" in r.stderr and "cannot reach" in r.stderr,
              f"an unreachable work dir is refused: exit {r.returncode}, {r.stderr!r}")
        os.chmod(c.dir, 0o711)
        c.start_agent("n1", gpus="sim:2", extra=["--run-as", f"{FIRST}-{LAST}",
                                                  "--advertise-addr", "127.0.0.1"])
        api = c.api

        _, a = api.submit(spec([SH, "-c", A_SCRIPT], name="a"))
        wait_until(lambda: "dir=" in api.log(a["id"]).decode(), 60, "job A running")
        out_a = api.log(a["id"]).decode()
        uid_a, adir = int(field(out_a, "uid")), field(out_a, "dir")
        check(FIRST <= uid_a <= LAST, f"A runs as a uid of the range: {uid_a}")
        check_eq(field(out_a, "gid"), str(uid_a), "A's gid is its uid")
        check_eq(field(out_a, "groups"), str(uid_a), "A has no supplementary groups")
        check_eq(field(out_a, "home"), adir, "A's HOME is its work dir")
        st = os.stat(adir)
        check_eq((st.st_uid, st.st_mode & 0o777), (uid_a, 0o700), "A's work dir is its own, 0700")

        _, b = api.submit(spec([SH, "-c", B_SCRIPT, "sh", adir], name="b"))
        jb = api.wait_job(b["id"], timeout=60)
        out_b = api.log(b["id"]).decode()
        err_b = api.log(b["id"], stream="stderr").decode()
        check_eq(jb["state"], "succeeded", f"B could read nothing of A's and wrote its own: "
                                           f"stdout {out_b!r} stderr {err_b!r}")
        uid_b = int(field(out_b, "uid"))
        check(FIRST <= uid_b <= LAST and uid_b != uid_a, f"B runs as another uid of the range: {uid_b} vs {uid_a}")
        check(err_b.count("Permission denied") >= 5,
              f"each of B's five attempts on A's files was denied: {err_b!r}")
        check("mine" in out_b, f"B wrote and read its own work dir: {out_b!r}")

        # an exec inside A runs as A's user
        st, ex = api.json("POST", f"/v1/jobs/{a['id']}/exec",
                          {"host": "127.0.0.1", "argv": [SH, "-c", "echo exec-uid=$(id -u)"]}, expect=201)
        st, res = api.json("GET", f"/v1/jobs/{a['id']}/exec/{ex['id']}?wait=20", expect=200)
        check_eq((res["state"], res["exit_code"]), ("exited", 0), f"the exec in A: {res}")
        wait_until(lambda: "exec-uid=" in api.log(a["id"]).decode(), 20, "the exec's output")
        check_eq(int(field(api.log(a["id"]).decode(), "exec-uid")), uid_a, "the exec's uid")
        # and so does `yard exec`, in A's work dir, its terminal A's user's
        r = c.cli("exec", str(a["id"]), "--", SH, "-c", "echo uid=$(id -u) groups=$(id -G); cat secret.txt",
                  check_rc=0)
        check_eq(r.stdout.decode(), f"uid={uid_a} groups={uid_a}\nsecret-of-a\n", "yard exec as A's user")
        cli = PtyCli(c, ["exec", "-t", str(a["id"]), "--", SH, "-c", 'echo "tty-owner=$(stat -c %u "$(tty)")"'])
        try:
            check_eq(int(cli.expect(rb"tty-owner=(\d+)").group(1)), uid_a, "yard exec -t: the terminal is A's")
            check_eq(cli.wait(), 0, "yard exec -t's status")
        finally:
            cli.close()

        # A ends; its logs and checkpoint are handed over as always
        with open(os.path.join(adir, "stop"), "w"):
            pass
        ja = api.wait_job(a["id"], timeout=60)
        check_eq(ja["state"], "succeeded", f"A: {api.log(a['id'], stream='stderr')!r}")
        check("a done" in api.log(a["id"]).decode(), "A's last line reached the master")
        check(ja.get("checkpoint"), f"A's checkpoint was handed to the master: {ja.get('checkpoint')}")
        ckpt = os.path.join(work, "checkpoints", str(a["id"]))
        with open(os.path.join(ckpt, "a.ckpt")) as f:
            check_eq(f.read(), "ckpt-a\n", "A's checkpoint file")
        st = os.stat(ckpt)
        check_eq((st.st_uid, st.st_mode & 0o777), (0, 0o700),
                 "A's checkpoint dir is root's again once A's uid is given back")
        for d, mode in (("tasks", 0o711), ("checkpoints", 0o711)):
            check_eq(os.stat(os.path.join(work, d)).st_mode & 0o777, mode, f"WORK/{d}'s mode")

        # the uid given back is taken again by the next job, and B's file is not its
        _, c3 = api.submit(spec([SH, "-c", "echo uid=$(id -u); ls -a; touch mine"], name="c"))
        j3 = api.wait_job(c3["id"], timeout=60)
        check_eq(j3["state"], "succeeded", f"job C: {api.log(c3['id'], stream='stderr')!r}")
        uid_c = int(field(api.log(c3["id"]).decode(), "uid"))
        check(FIRST <= uid_c <= LAST, f"C runs as a uid of the range: {uid_c}")


def test_run_as_uid_held_across_agent_restart():
    """A task still running when its agent is SIGKILLed keeps its uid: the
    restarted agent holds it again (from the task's shim.json) and gives the
    next job another one."""
    hold = "echo uid=$(id -u); while [ ! -e stop ]; do sleep 0.1; done; echo stopped"
    with cluster("runas-restart") as c:
        c.start_master()
        os.chmod(c.dir, 0o711)
        extra = ["--run-as", f"{FIRST}-{LAST}"]
        a = c.start_agent("n1", gpus="sim:1", extra=extra)
        _, ja = c.api.submit(spec([SH, "-c", hold], name="a"))
        wait_until(lambda: "uid=" in c.api.log(ja["id"]).decode(), 60, "job A running")
        uid_a = int(field(c.api.log(ja["id"]).decode(), "uid"))
        a.kill(signal.SIGKILL)
        a.p.wait()
        c.start_agent("n1", gpus="sim:1", extra=extra)
        _, jb = c.api.submit(spec([SH, "-c", "echo uid=$(id -u)"], name="b"))
        check_eq(c.api.wait_job(jb["id"], timeout=60)["state"], "succeeded", "job B")
        uid_b = int(field(c.api.log(jb["id"]).decode(), "uid"))
        check(FIRST <= uid_b <= LAST and uid_b != uid_a,
              f"B gets another uid than A's, which A still holds: {uid_b} vs {uid_a}")
        task = c.api.job(ja["id"])["tasks"][0]["id"]
        adir = os.path.join(c.dir, "agent-n1", "tasks", str(task))
        with open(os.path.join(adir, "code", "stop"), "w"):
            pass
        check_eq(c.api.wait_job(ja["id"], timeout=60)["state"], "succeeded", "job A after the restart")
        # the agent gives the dir back to root when A ends, and removes it
        # once the master has acknowledged the end: either may be seen here
        try:
            st = os.stat(adir)
        except FileNotFoundError:
            st = None
        if st:
            check_eq((st.st_uid, st.st_gid), (0, 0), "A's task dir is root's again")


def test_run_as_restart_reads_its_checkpoint():
    """A job restarted on the same node: its checkpoint dir, taken back by
    root when the first attempt's uid was given back, is the new attempt's
    again, and it reads and rewrites what the first one wrote."""
    script = ('echo "attempt $YARD_RESTART_COUNT uid=$(id -u) found=$(cat $YARD_CHECKPOINT_DIR/state 2>&1)"; '
              'mkdir -p $YARD_CHECKPOINT_DIR/sub && echo "from-$YARD_RESTART_COUNT" > $YARD_CHECKPOINT_DIR/state && '
              'echo x > $YARD_CHECKPOINT_DIR/sub/f || exit 9; [ "$YARD_RESTART_COUNT" != 0 ] || exit 3')
    with cluster("runas-ckpt") as c:
        c.start_master()
        os.chmod(c.dir, 0o711)
        c.start_agent("n1", gpus="sim:1", extra=["--run-as", f"{FIRST}-{LAST}"])
        _, j = c.api.submit(spec([SH, "-c", script], name="ck", restart={"max": 1}))
        done = c.api.wait_job(j["id"], timeout=60)
        out = c.api.log(j["id"]).decode()
        check_eq((done["state"], done["attempt"]), ("succeeded", 1), f"the restarted job: {out!r} "
                                                                     f"{c.api.log(j['id'], stream='stderr')!r}")
        # (the log is the last attempt's)
        check("attempt 1 uid=" in out and "found=from-0" in out,
              f"attempt 1 read attempt 0's checkpoint: {out!r}")
        for uid in re.findall(r"uid=(\d+)", out):
            check(FIRST <= int(uid) <= LAST, f"each attempt runs as a uid of the range: {out!r}")


def test_run_as_reads_staged_data():
    """A dataset staged into the node's cache is readable by a task of a
    --run-as range, and read-only to it."""
    with cluster("runas-data") as c:
        c.start_master()
        os.chmod(c.dir, 0o711)
        src = os.path.join(c.dir, "ds")
        os.makedirs(os.path.join(src, "sub"))
        with open(os.path.join(src, "sub", "x.txt"), "w") as f:
            f.write("staged bytes\n")
        c.cli("data", "push", src, "small", check_rc=0)
        c.start_agent("n1", gpus="sim:1", extra=["--run-as", f"{FIRST}-{LAST}"])
        script = ('echo uid=$(id -u); cat "$YARD_DATA_DIR/d/sub/x.txt" || exit 4; '
                  'if echo no > "$YARD_DATA_DIR/d/sub/x.txt"; then echo "WROTE THE DATASET"; exit 5; fi; '
                  'if touch "$YARD_DATA_DIR/d/new"; then echo "ADDED TO THE DATASET"; exit 6; fi')
        _, j = c.api.submit(spec([SH, "-c", script], name="data",
                                 data=[{"source": "yard://small", "mount": "d"}]))
        doc = c.api.wait_job(j["id"], timeout=60)
        out = c.api.log(j["id"]).decode()
        err = c.api.log(j["id"], stream="stderr").decode()
        check_eq(doc["state"], "succeeded", f"the task read the data and could not change it: {out!r} {err!r}")
        check("staged bytes" in out, f"the dataset's bytes: {out!r}")
        check(FIRST <= int(field(out, "uid")) <= LAST, f"as a uid of the range: {out!r}")
        check(err.count("Permission denied") + err.count("Read-only") >= 2, f"both writes refused: {err!r}")


def test_run_as_checkpoint_read_as_the_task():
    """The agent reads a --run-as task's checkpoint as the task's user, so
    it hands in nothing the task could not read itself: a file the task made
    unreadable (mode 000) stops the upload, where root would have read it."""
    with cluster("runas-pack") as c:
        c.start_master()
        os.chmod(c.dir, 0o711)
        c.start_agent("n1", gpus="sim:1", extra=["--run-as", f"{FIRST}-{LAST}"])
        _, ok = c.api.submit(spec([SH, "-c", "echo fine > $YARD_CHECKPOINT_DIR/state"], name="ok"))
        doc = c.api.wait_job(ok["id"], timeout=60)
        check(doc["state"] == "succeeded" and doc["checkpoint"], f"a readable checkpoint is handed over: {doc}")
        _, bad = c.api.submit(spec([SH, "-c", "echo x > $YARD_CHECKPOINT_DIR/hidden; "
                                              "chmod 000 $YARD_CHECKPOINT_DIR/hidden"], name="hidden"))
        doc = c.api.wait_job(bad["id"], timeout=60)
        check_eq((doc["state"], doc["checkpoint"]), ("succeeded", None),
                 "a checkpoint holding a file its task cannot read is not handed in")
        with open(os.path.join(c.dir, "agent-n1.log")) as f:
            log = f.read()
        check(re.search(rf"cannot hand the checkpoint of job {bad['id']} to the master: .*hidden': Permission denied",
                        log),
              f"the agent says why: {log[-2000:]!r}")


def test_run_as_one_user_and_refusals():
    nobody = pwd.getpwnam("nobody")
    with cluster("runas-one") as c:
        c.start_master()
        os.chmod(c.dir, 0o711)
        c.start_agent("n1", gpus="sim:1", extra=["--run-as", "nobody"])
        _, j = c.api.submit(spec([SH, "-c", "echo uid=$(id -u) gid=$(id -g); echo x > f; cat f"], name="n"))
        jj = c.api.wait_job(j["id"], timeout=60)
        out = c.api.log(j["id"]).decode()
        check_eq(jj["state"], "succeeded", f"the task as nobody: {out!r} "
                                           f"{c.api.log(j['id'], stream='stderr')!r}")
        check_eq((int(field(out, "uid")), int(field(out, "gid"))), (nobody.pw_uid, nobody.pw_gid),
                 "the task's uid and gid are nobody's")
        check("x\n" in out, f"it wrote its work dir: {out!r}")

        for bad, why in (("root", "root"), ("0", "root"), ("0-100", "root"), ("200-100", "ends before"),
                         ("no-such-user-yard", "no such user")):
            r = subprocess.run([YARD, "agent", "--master", c.url, "--name", "bad", "--work-dir",
                                os.path.join(c.dir, "bad"), "--run-as", bad], capture_output=True,
                               text=True, timeout=30)
            check(r.returncode == 2 and f"--run-as '{bad}'" in r.stderr and why in r.stderr,
                  f"--run-as {bad} refused: exit {r.returncode}, {r.stderr!r}")


def test_run_as_container_user():
    """A container task on an agent with --run-as runs as the task's uid:gid
    (the container's User) and writes its bind-mounted work and checkpoint
    dirs. Skipped only when dockerd cannot start here (engines.py)."""
    import engines
    from test_containers import BUILD_DIR, image_spec

    eng = engines.DockerEngine()
    try:
        img = engines.import_image(eng, engines.base_rootfs(BUILD_DIR), "yard-test/runas", "1")
        with cluster("runas-docker") as c:
            c.start_master()
            os.chmod(c.dir, 0o711)
            c.start_agent("n1", gpus="sim:1", extra=["--runtime", "process,docker", "--docker-socket",
                                                      eng.socket, "--run-as", f"{FIRST}-{LAST}"])
            script = ("echo uid=$(id -u) gid=$(id -g); echo w > $PWD/w.txt && cat w.txt; "
                      "echo c > $YARD_CHECKPOINT_DIR/c.ckpt && echo ckpt-ok")
            _, j = c.api.submit(image_spec(img, ["/bin/sh", "-c", script], name="ctr"))
            doc = c.api.wait_job(j["id"], timeout=120)
            out = c.api.log(j["id"]).decode()
            check_eq(doc["state"], "succeeded", f"the container task: {out!r} "
                                                f"{c.api.log(j['id'], stream='stderr')!r}")
            uid = int(field(out, "uid"))
            check(FIRST <= uid <= LAST, f"the container runs as a uid of the range: {uid}")
            check_eq(field(out, "gid"), str(uid), "and its gid")
            check("w\n" in out and "ckpt-ok" in out, f"it wrote its work and checkpoint dirs: {out!r}")
    finally:
        eng.close()
