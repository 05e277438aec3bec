"""`yard exec` over sessions (docs/protocol.md, "Sessions"): a command run in
a running task through master and agent, on a terminal of its own with -t
(driven here from a pseudo-terminal of ours: raw mode, the size, a resize,
^C, the terminal restored after), with stdin (1 MB echoed byte for byte)
and stderr apart without one, the exit status passed through (a code, a
signal, a session cut off), the task's environment, working dir, user and
cgroup seen from inside, over https (into container tasks:
test_containers.py); refusals (another team, a finished job, a bad task, no WebSocket, a cookie
from another site) and the audit entry; the agent SIGKILLed, its node lost,
the job cancelled and the master stopped mid-session;
and a slow reader of 200 MB that does not grow the master's memory."""
import os
import re
import signal
import socket
import subprocess
import time

from harness import YARD, check, check_eq, cluster, spec, wait_until
from ptycli import SH, cli_env, shell_session


def running_job(c, command=None, token=None, name="s", gpus=1):
    """A job whose one task sleeps (or runs command) until cancelled, once running."""
    s = spec(command or [SH, "-c", "sleep 300"], name=name, gpus=gpus)
    st, doc = c.api.submit(s, token=token)
    check_eq(st, 201, f"submit {name}: {doc}")
    jid = doc["id"]
    wait_until(lambda: c.api.job(jid)["state"] == "running", 60, f"job {jid} running")
    return jid


def test_exec_tty_status_stdin_env():
    with cluster("exec") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        # the task notes what it runs with, for the exec to be compared with
        note = ('d="$YARD_CHECKPOINT_DIR"; echo "$YARD_JOB_ID $CUDA_VISIBLE_DEVICES" > "$d/env"; '
                'pwd > "$d/cwd"; id -u > "$d/uid"; grep -v "^0::/$" /proc/self/cgroup | sort > "$d/cg"; '
                'touch "$d/ready"; sleep 300')
        jid = running_job(c, [SH, "-c", note])
        ckpt = os.path.join(c.dir, "agent-n1", "checkpoints", str(jid))
        wait_until(lambda: os.path.exists(os.path.join(ckpt, "ready")), 30, "the task noted its setting")

        shell_session(c, jid)

        # the task's environment, working dir, user and cgroups, from inside
        r = c.cli("exec", str(jid), "--", SH, "-c", 'echo "$YARD_JOB_ID $CUDA_VISIBLE_DEVICES"; pwd; id -u; '
                  'grep -v "^0::/$" /proc/self/cgroup | sort', check_rc=0)
        want = b"".join(open(os.path.join(ckpt, f), "rb").read() for f in ("env", "cwd", "uid", "cg"))
        check_eq(r.stdout, want, "exec sees the task's env, cwd, user and cgroups")
        check(b"/task-" in r.stdout, f"the cgroups are the task's own: {r.stdout!r}")

        # exit statuses: a code, a signal (128+N)
        check_eq(c.cli("exec", str(jid), "--", SH, "-c", "exit 7").returncode, 7, "exit 7")
        r = c.cli("exec", str(jid), "--", SH, "-c", "kill -TERM $$")
        check_eq(r.returncode, 128 + signal.SIGTERM, f"killed by SIGTERM: {r.stderr!r}")
        r = c.cli("exec", str(jid), "--", "no-such-command")
        check_eq(r.returncode, 127, f"a command not found: {r.stderr!r}")
        check(b"'no-such-command' is not an executable in the task's PATH" in r.stderr, f"says why: {r.stderr!r}")

        # stdin (-i) echoed byte for byte, stderr kept apart (no tty)
        data = bytes(range(256)) * 4096  # 1 MiB, every byte value
        r = c.cli("exec", "-i", str(jid), "--", SH, "-c", "cat; echo to-stderr >&2", input=data, check_rc=0)
        check(r.stdout == data, f"1 MiB back byte for byte (got {len(r.stdout)} bytes)")
        check_eq(r.stderr, b"to-stderr\n", "stderr apart")
        # a command that does not read stdin is not stuck behind it
        check_eq(c.cli("exec", "-i", str(jid), "--", SH, "-c", "exit 0", input=data).returncode, 0,
                 "exit without reading stdin")

        # ^C without a terminal: the CLI's SIGINT goes to the command as a signal
        p = subprocess.Popen([YARD, "exec", str(jid), "--", SH, "-c",
                              'trap "echo got-int; exit 5" INT; echo ready; while :; do sleep 0.05; done'],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             env=cli_env(c))
        check_eq(p.stdout.readline(), b"ready\n", "the trap is set")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=15)
        check_eq((p.returncode, out), (5, b"got-int\n"), f"SIGINT carried: {err!r}")

        # -t without a terminal is a usage error
        r = c.cli("exec", "-t", str(jid), "--", "true", input=b"")
        check_eq(r.returncode, 2, "-t without a terminal")
        check(b"-t needs a terminal" in r.stderr, f"says so: {r.stderr!r}")
        # a command longer than a request's head takes is refused before it is sent
        r = c.cli("exec", str(jid), "--", "echo", "x" * 30000)
        check(r.returncode == 1 and b"the command is too long: 30" in r.stderr, f"a long command: {r.stderr!r}")


def test_exec_refusals_audit_and_tokens():
    with cluster("exec-refuse") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        alice = c.user_token("alice", team="vision")
        bob = c.user_token("bob", team="nlp")
        carol = c.user_token("carol", team="vision")
        jid = running_job(c, token=alice)
        other = running_job(c, token=alice, name="other")

        # the visibility rule: another team may not; the job's team may
        r = c.cli("exec", str(jid), "--", "true", token=bob)
        check_eq(r.returncode, 1, f"bob is refused: {r.stderr!r}")
        check(b"may not see" in r.stderr, f"the visibility rule's words: {r.stderr!r}")
        check_eq(c.cli("exec", str(jid), "--", "true", token=carol).returncode, 0, "carol (same team)")

        # the job's own token may exec into its job, not another
        tok = c.cli("exec", str(jid), "--", SH, "-c", "printf %s \"$YARD_JOB_TOKEN\"", token=alice,
                    check_rc=0).stdout.decode()
        check(tok.startswith("yard_t_"), f"a job token: {tok!r}")
        check_eq(c.cli("exec", str(jid), "--", "true", token=tok).returncode, 0, "its own job's token")
        r = c.cli("exec", str(other), "--", "true", token=tok)
        check_eq(r.returncode, 1, f"another job's token: {r.stderr!r}")

        # bad requests name what is wrong
        r = c.cli("exec", "--task", "worker", str(jid), "--", "true", token=alice)
        check(r.returncode == 1 and b"task 'worker': expected ROLE/INDEX" in r.stderr, f"a bad task: {r.stderr!r}")
        r = c.cli("exec", "--task", "worker/5", str(jid), "--", "true", token=alice)
        check(r.returncode == 1 and b"has no such task" in r.stderr, f"no such task: {r.stderr!r}")
        st, body, _ = c.api.request("GET", f"/v1/jobs/{jid}/exec?cmd=true&task=worker")
        check_eq(st, 400, f"a bad task is a 400: {body!r}")
        st, body, _ = c.api.request("GET", f"/v1/jobs/{jid}/exec?cmd=true")
        check_eq(st, 400, "no WebSocket handshake")
        check(b"Upgrade: websocket" in body, f"says what is missing: {body!r}")

        # a finished job
        c.cli("cancel", str(other), check_rc=0)
        c.api.wait_job(other, states=("cancelled",))
        r = c.cli("exec", str(other), "--", "true", token=alice)
        check(r.returncode == 1 and b"is cancelled, not running" in r.stderr, f"a finished job: {r.stderr!r}")
        st, body, _ = c.api.request("GET", f"/v1/jobs/{other}/exec?cmd=true", token=alice)
        check_eq(st, 400, "a GET without the handshake is refused before the job's state")

        # a browser's cookie is taken from the master's own pages only
        check_eq(ws_handshake(c, f"/v1/jobs/{jid}/exec?cmd=true", cookie=alice, origin=c.url), 101,
                 "the cookie from the master's origin")
        check_eq(ws_handshake(c, f"/v1/jobs/{jid}/exec?cmd=true", cookie=alice, origin="http://evil.example"),
                 403, "the cookie from another site")
        check_eq(ws_handshake(c, f"/v1/jobs/{jid}/exec?cmd=true", cookie=alice,
                              protocol="other.v1"), 400, "a subprotocol it does not speak")
        check_eq(ws_handshake(c, f"/v1/jobs/{jid}/exec?cmd=echo&cmd=%FF", cookie=alice), 400,
                 "an argument that is not UTF-8")

        # every session start is audited, with its kind and task; refusals too
        st, doc = c.api.json("GET", "/v1/audit?limit=1000", expect=200)
        mine = [e for e in doc["entries"] if e["path"].startswith(f"/v1/jobs/{jid}/exec")]
        ok = [e for e in mine if e["status"] == 101 and e["user"] == "carol"]
        check(ok and ok[0]["path"] == f"/v1/jobs/{jid}/exec?task=worker/0" and ok[0]["method"] == "GET",
              f"carol's exec audited with its task: {mine}")
        check(any(e["user"] == "bob" and e["status"] == 403 and e["code"] == "forbidden" for e in mine),
              f"bob's refusal audited: {mine}")


def ws_handshake(c, path, cookie=None, origin=None, protocol="yard.exec.v1"):
    """The HTTP status a WebSocket handshake gets (a raw socket, as a
    browser would send it: the token as the cookie yard_token)."""
    host = f"127.0.0.1:{c.port}"
    req = (f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
           f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           f"Sec-WebSocket-Protocol: {protocol}\r\n")
    if cookie:
        req += f"Cookie: theme=dark; yard_token={cookie}\r\n"
    if origin:
        req += f"Origin: {origin}\r\n"
    with socket.create_connection(("127.0.0.1", c.port), timeout=10) as s:
        s.sendall((req + "\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
    m = re.match(rb"HTTP/1\.1 (\d+)", head)
    check(m, f"an HTTP answer: {head[:200]!r}")
    if m.group(1) == b"101":
        check(b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head, f"the accept key: {head!r}")
        check(b"Sec-WebSocket-Protocol: yard.exec.v1" in head, f"the subprotocol: {head!r}")
    return int(m.group(1))


def test_exec_agent_killed_mid_session():
    with cluster("exec-lost") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        jid = running_job(c)
        p = subprocess.Popen([YARD, "exec", str(jid), "--", SH, "-c", "echo started; sleep 60"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             env=cli_env(c))
        check_eq(p.stdout.readline(), b"started\n", "the session runs")
        t0 = time.monotonic()
        c.agents["n1"].kill(signal.SIGKILL)
        out, err = p.communicate(timeout=15)
        took = time.monotonic() - t0
        check_eq(p.returncode, 1, f"cut off: {err!r}")
        check(b"the agent of node 'n1' went away" in err, f"the CLI says why: {err!r}")
        check(took < 5, f"within a few seconds ({took:.1f} s)")


def test_exec_node_lost_before_its_agent_dials():
    with cluster("exec-lost-node", lease="2s") as c:
        c.start_master()
        agent = c.start_agent("n1", gpus="sim:2")
        jid = running_job(c)
        agent.kill(signal.SIGSTOP)  # alive, but it neither dials nor renews its lease
        try:
            t0 = time.monotonic()
            r = c.cli("exec", str(jid), "--", "true", timeout=30)
            took = time.monotonic() - t0
        finally:
            agent.kill(signal.SIGKILL)
        check_eq(r.returncode, 1, f"cut off: {r.stderr!r}")
        check(b"yard exec: node 'n1' was lost" in r.stderr, f"the CLI says why: {r.stderr!r}")
        check(took < 10, f"once the lease lapsed ({took:.1f} s), not at the 15 s dial deadline")


def test_exec_job_cancelled_mid_session():
    with cluster("exec-cancel") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        jid = running_job(c)
        p = subprocess.Popen([YARD, "exec", str(jid), "--", SH, "-c", "echo started; exec sleep 60"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             env=cli_env(c))
        check_eq(p.stdout.readline(), b"started\n", "the session runs")
        t0 = time.monotonic()
        c.cli("cancel", str(jid), check_rc=0)
        out, err = p.communicate(timeout=20)
        took = time.monotonic() - t0
        # what ran in the task ends with it: its agent kills it, and says how
        check_eq(p.returncode, 128 + signal.SIGKILL, f"killed with its task: {err!r}")
        check(took < 8, f"as the task ended ({took:.1f} s)")


def test_exec_master_stopped_mid_session():
    with cluster("exec-mstop") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        jid = running_job(c)
        p = subprocess.Popen([YARD, "exec", str(jid), "--", SH, "-c", "echo started; sleep 60"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             env=cli_env(c))
        check_eq(p.stdout.readline(), b"started\n", "the session runs")
        c.master.stop()
        out, err = p.communicate(timeout=15)
        check_eq(p.returncode, 1, f"cut off: stdout {out!r} stderr {err!r}")
        check(b"yard exec: the master stopped" in err, f"the CLI says why: {err!r}")


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def test_exec_slow_reader_bounded_master_memory():
    # an ASan build keeps what is freed in a quarantine (256 MiB by default)
    # before it reuses it, and GnuTLS frees a buffer a record: not what is
    # measured here (the release build's growth is the same with or without)
    os.environ["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
                                  + ":quarantine_size_mb=1")
    # over https: the master reads and writes TLS itself there (sessions.c)
    with cluster("exec-slow", master_args=["--tls-self-signed"]) as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        jid = running_job(c)
        big = os.path.join(c.dir, "big")
        size = 200 << 20
        with open(big, "wb") as f:
            f.truncate(size)  # sparse: 200 MB of zeros, read fast
        master = c.master.p.pid
        before = rss_kb(master)
        p = subprocess.Popen([YARD, "exec", str(jid), "--", "cat", big], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=cli_env(c))
        got = len(p.stdout.read(1 << 20))
        # a reader that stops: the master's memory must not follow what the
        # task can write (samples over two seconds of not reading)
        peak = before
        for _ in range(20):
            peak = max(peak, rss_kb(master))
            time.sleep(0.1)
        while True:
            chunk = p.stdout.read(1 << 20)
            if not chunk:
                break
            got += len(chunk)
        check_eq(p.wait(timeout=60), 0, f"cat's status: {p.stderr.read()!r}")
        check_eq(got, size, "every byte came")
        check(peak - before < 4096, f"the master's RSS grew {peak - before} KiB under a stalled reader")


def test_exec_over_https():
    with cluster("exec-tls", master_args=["--tls-self-signed"]) as c:
        c.start_master()
        check(c.url.startswith("https://"), f"an https master: {c.url}")
        c.start_agent("n1", gpus="sim:2")
        jid = running_job(c)
        shell_session(c, jid)
        data = os.urandom(300000)
        r = c.cli("exec", "-i", str(jid), "--", "cat", input=data, check_rc=0)
        check(r.stdout == data, "stdin echoed over https byte for byte")
