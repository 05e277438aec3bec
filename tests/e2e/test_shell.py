"""Interactive jobs (docs/architecture.md, "Interactive jobs"): tmux drives
`yard shell` as a user would. The shell's GPUs and terminal, a resize seen
by `stty size`, ^C to a sleep and the prompt back, a detach (~.) that
keeps the job, `yard attach` that comes back to the terminal as it was (the
replay) and shares it with a second attacher, a closed terminal that
detaches too, and the idle timeout that cancels the job and frees its GPU
once nobody is attached; `yard ls` marks it. Then the shell's exit status
as yard shell's, the refusals (a batch job has no terminal; another team's
user may not attach), and a job that waits in the queue, said why, and ^C
cancels it."""
import os
import re
import shutil
import subprocess
import time

from harness import YARD, check, check_eq, cluster, spec, wait_until
from ptycli import cli_env

IDLE_S = 5  # the master's --interactive-idle-timeout here: seconds, so the test sees it


class Tmux:
    """A tmux server of the test's own (its socket in the cluster's dir),
    killed by close(): every pane's process gets its SIGHUP."""

    def __init__(self, c):
        self.c = c
        self.sock = os.path.join(c.dir, "tmux.sock")
        if not shutil.which("tmux"):
            raise AssertionError("tmux is not installed (make deps installs it): the shell tests drive yard with it")

    def run(self, *args, check_rc=True):
        r = subprocess.run(["tmux", "-S", self.sock, *args], capture_output=True, timeout=30)
        if check_rc and r.returncode:
            raise AssertionError(f"tmux {' '.join(args)}: exit {r.returncode}: {r.stderr!r}")
        return r

    def start(self, name, args, cols=100, rows=30, token=None):
        """Runs `yard ARGS` in a new session `name` of cols x rows; once it
        ends the pane says 'yard-exit=N' and stays."""
        env = cli_env(self.c, token)
        envs = []
        for k in ("YARD_MASTER", "YARD_TOKEN", "YARD_PIN", "HOME", "ASAN_OPTIONS", "UBSAN_OPTIONS"):
            if k in env:
                envs += ["-e", f"{k}={env[k]}"]
        cmd = " ".join([YARD, *args]) + '; echo "yard-exit=$?"; sleep 600'
        self.run("new-session", "-d", "-s", name, "-x", str(cols), "-y", str(rows), *envs, cmd)

    def screen(self, name):
        """Everything the pane showed (its history too), wrapped lines joined,
        without the empty rows below the cursor."""
        text = self.run("capture-pane", "-p", "-J", "-S", "-", "-t", name).stdout.decode(errors="replace")
        return text.rstrip("\n")

    def expect(self, name, pattern, timeout=20, after=0):
        """The first match of pattern in the pane's text from offset after."""
        rx = re.compile(pattern, re.M)
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen(name)
            m = rx.search(text, after)
            if m:
                return m
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {pattern!r} in tmux '{name}'; it shows:\n{text[-3000:]}")
            time.sleep(0.05)

    def keys(self, name, *keys):
        self.run("send-keys", "-t", name, *keys)

    def type(self, name, text):
        """text typed literally, then Enter."""
        self.run("send-keys", "-t", name, "-l", text)
        self.run("send-keys", "-t", name, "Enter")

    def kill_session(self, name):
        self.run("kill-session", "-t", name)

    def close(self):
        for name in ("shell", "again", "second", "exit", "queued"):
            r = self.run("has-session", "-t", name, check_rc=False) if os.path.exists(self.sock) else None
            if r is not None and r.returncode == 0:
                self.c.scan_text(self.screen(name), f"the yard in tmux '{name}'")
        self.run("kill-server", check_rc=False)


PROMPT = r"[#$] $"


def job_of(c, pattern_text):
    m = re.search(r"job (\d+)", pattern_text)
    check(m, f"a job id in {pattern_text!r}")
    return int(m.group(1))


def test_shell_tmux():
    with cluster("shell", master_args=["--interactive-idle-timeout", f"{IDLE_S}s"]) as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        t = Tmux(c)
        try:
            t.start("shell", ["shell", "--gpus", "1"])
            t.expect("shell", PROMPT)
            jid = job_of(c, t.screen("shell"))
            job = c.api.job(jid)
            check_eq((job["state"], job["sessions"], job["spec"]["interactive"]),
                     ("running", 1, {"idle_timeout": None}), "an interactive job, one session attached")
            gpus = job["tasks"][0]["gpus"]
            check_eq(len(gpus), 1, f"the shell holds one GPU: {job['tasks'][0]}")

            # its GPU and its terminal
            t.type("shell", "echo gpu=$CUDA_VISIBLE_DEVICES; tty")
            m = t.expect("shell", r"^gpu=(\S*)\n(/dev/pts/\d+)$")
            check_eq(m.group(1), str(gpus[0]), "CUDA_VISIBLE_DEVICES is the task's GPU")
            # a resize of the window reaches the task's terminal
            t.type("shell", "stty size")
            t.expect("shell", r"^30 100$")
            t.run("resize-window", "-t", "shell", "-x", "120", "-y", "40")

            def resized():
                mark = len(t.screen("shell"))
                t.type("shell", "stty size")
                return t.expect("shell", r"^(\d+ \d+)$", after=mark).group(1) == "40 120"
            wait_until(resized, 20, "stty size says 40 120 after the resize", interval=0.1)
            # ^C to a sleep in the foreground: the prompt comes back
            t.type("shell", "sh -c 'echo ar''med; exec sleep 60'")
            t.expect("shell", r"^armed$")
            t.keys("shell", "C-c")
            t.type("shell", "echo after=$?")
            t.expect("shell", r"^after=130$")

            # ~. after Enter detaches: yard shell exits 0, the job runs on
            t.keys("shell", "Enter")
            t.run("send-keys", "-t", "shell", "-l", "~.")
            t.expect("shell", rf"detached from job {jid}")
            t.expect("shell", r"^yard-exit=0$")
            job = c.api.job(jid)
            check_eq((job["state"], job["sessions"]), ("running", 0), "detached: the job runs, nobody attached")
            check(job["idle_since"], f"its idle clock runs: {job['idle_since']}")

            # yard attach comes back to the terminal as it was (replayed), and
            # a second attacher shares it
            t.start("again", ["attach", str(jid)])
            t.expect("again", r"^after=130$")  # the replay of what it showed
            t.type("again", "echo back-$((6*7))")
            t.expect("again", r"^back-42$")
            t.start("second", ["attach", str(jid)], cols=90, rows=25)
            t.expect("second", r"^back-42$")
            t.type("again", "echo shared-$((2*3))")
            t.expect("second", r"^shared-6$")
            wait_until(lambda: c.api.job(jid)["sessions"] == 2, 10, "two sessions attached")
            t.run("send-keys", "-t", "again", "Enter")
            t.run("send-keys", "-t", "again", "-l", "~.")
            t.expect("again", r"^yard-exit=0$")
            # a closed terminal detaches too (SIGHUP)
            t.kill_session("second")
            wait_until(lambda: c.api.job(jid).get("sessions") == 0, 10, "nobody attached after the terminal closed: "
                       f"{c.api.job(jid)}")
            check_eq(c.api.job(jid)["state"], "running", "the job runs on without its attachers")

            r = c.cli("ls", check_rc=0)
            check(re.search(rf"^{jid}\s+shell \(interactive\)\s+admin\s+running\s", r.stdout.decode(), re.M),
                  f"yard ls marks the interactive job: {r.stdout!r}")

            # nobody attached for the idle timeout: cancelled, its GPU freed
            detached = time.monotonic()
            job = c.api.wait_job(jid, timeout=IDLE_S + 30)
            waited = time.monotonic() - detached
            check_eq((job["state"], job["reason"]),
                     ("cancelled", {"code": "idle_timeout", "message": f"no session attached for {IDLE_S}s"}),
                     "the idle timeout ends the job")
            check(waited >= IDLE_S - 1, f"not before its idle timeout ({waited:.1f}s)")
            wait_until(lambda: c.api.json("GET", "/v1/nodes")[1]["nodes"][0]["free"]["gpus"] == 2, 30,
                       "the shell's GPU is free again")
            check(any(e["code"] == "idle_timeout" for e in c.api.json("GET", "/v1/audit")[1]["entries"]
                      if e.get("code")), "the audit log has the cancellation")
        finally:
            t.close()


def test_shell_exit_status_queue_and_refusals():
    with cluster("shell-exit") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:1")
        t = Tmux(c)
        try:
            # the shell's exit status is yard shell's; the job ends with it
            t.start("exit", ["shell", "--idle-timeout", "1h"])
            t.expect("exit", PROMPT)
            jid = job_of(c, t.screen("exit"))
            check_eq(c.api.job(jid)["spec"]["interactive"], {"idle_timeout": 3600}, "--idle-timeout in the spec")
            t.type("exit", "exit 7")
            t.expect("exit", r"^yard-exit=7$")
            job = c.api.wait_job(jid)
            check_eq((job["state"], job["exit_code"]), ("failed", 7), "the job ended with the shell")

            # a batch job has no terminal to attach to
            st, doc = c.api.submit(spec(["/bin/sh", "-c", "sleep 300"], name="batch", gpus=1))
            check_eq(st, 201, f"submit: {doc}")
            batch = doc["id"]
            wait_until(lambda: c.api.job(batch)["state"] == "running", 60, "the batch job runs")
            t.start("again", ["attach", str(batch)])
            t.expect("again", rf"job {batch} is not interactive")
            t.expect("again", r"^yard-exit=1$")

            # a shell that waits says why; ^C cancels its job
            t.start("queued", ["shell", "--gpus", "1"])
            m = t.expect("queued", r"job (\d+) queued.*insufficient_gpus")
            queued = int(m.group(1))
            check_eq(c.api.job(queued)["state"], "queued", "the shell's job waits for the GPU")
            t.keys("queued", "C-c")
            t.expect("queued", rf"cancelled job {queued}")
            t.expect("queued", r"^yard-exit=130$")
            check_eq(c.api.job(queued)["state"], "cancelled", "^C cancelled the waiting job")

            # without a terminal: usage errors
            for args in (["attach", str(batch)], ["shell"]):
                r = c.cli(*args, input=b"")
                check_eq(r.returncode, 2, f"yard {args[0]} without a terminal: {r.stderr!r}")
                check(b"needs a terminal" in r.stderr, f"says so: {r.stderr!r}")
            r = c.cli("shell", "--gpus", "two")
            check(r.returncode == 2 and b"--gpus 'two': expected a number of GPUs" in r.stderr,
                  f"a bad --gpus: {r.stderr!r}")

            # another team's user may not attach (the visibility rule), nor exec
            alice = c.user_token("alice", team="vision")
            bob = c.user_token("bob", team="nlp")
            t.start("second", ["shell"], token=alice)
            t.expect("second", PROMPT)
            mine = job_of(c, t.screen("second"))
            t.start("shell", ["attach", str(mine)], token=bob)
            t.expect("shell", r"may not see")
            t.expect("shell", r"^yard-exit=1$")
            check_eq(c.api.job(mine)["sessions"], 1, "bob's refusal opened no session")
        finally:
            t.close()
