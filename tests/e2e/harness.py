"""Real processes for end-to-end tests: a `yard master` and N `yard agent`s on
loopback port 0 in a temp dir, started and awaited by their readiness lines
(never by sleeping), with their logs scanned for sanitizer reports at teardown.
"""
import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import ssl
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
YARD = os.environ.get("YARD", os.path.join(ROOT, "build-asan", "yard"))
SANITIZER_PATTERNS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def api_routes():
    """The routes of docs/api.md (which tests/unit/master/test_api_doc.c
    checks against the master's route table): (method, path, permission,
    scope, audited) each."""
    rows = []
    with open(os.path.join(ROOT, "docs", "api.md")) as f:
        for line in f:
            m = re.match(r"\| (GET|POST|PUT|PATCH|DELETE) \| `([^`]+)` \| (\w+) \| (\w+) \| (\w+) \|", line)
            if m:
                rows.append(m.groups())
    return rows


def store_schema_version():
    """The store's schema version this build writes (STORE_SCHEMA_VERSION)."""
    with open(os.path.join(ROOT, "src", "master", "store.h")) as f:
        return int(re.search(r"#define STORE_SCHEMA_VERSION (\d+)", f.read()).group(1))


# Task ports of test agents. Every agent's default range (30000-32000) is the
# same, so two tests running at once (run.py --jobs) gave their first tasks on
# loopback the same port and one rendezvous failed with EADDRINUSE. Each test
# process instead holds a block of its own, below Linux's ephemeral range
# (32768-): a flock on a file per block, held until the process exits.
PORT_BLOCKS = (20000, 32000, 100)  # first port, end, ports per block
_port_block = None


def test_port_block():
    """'LOW-HIGH': this test process's own range of task ports."""
    global _port_block
    if _port_block is None:
        import fcntl
        lockdir = os.path.join(tempfile.gettempdir(), "yard-e2e-ports")
        os.makedirs(lockdir, exist_ok=True)
        first, end, size = PORT_BLOCKS
        for lo in range(first, end, size):
            fd = os.open(os.path.join(lockdir, str(lo)), os.O_CREAT | os.O_RDWR, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            _port_block = (fd, f"{lo}-{lo + size - 1}")  # fd kept open: the lock
            break
        else:
            raise TestFailure(f"every block of task ports in {first}-{end} is held by another test")
    return _port_block[1]


class TestFailure(AssertionError):
    pass


class Skip(Exception):
    """The test cannot run on this machine (its str says why); run.py reports
    it as skipped, not failed. Raised only by engines.EngineUnavailable: a
    container engine or its image cannot be had here."""


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def check_eq(got, want, what):
    if got != want:
        raise TestFailure(f"{what}: expected {want!r}, got {got!r}")


def wait_until(pred, timeout, what, interval=0.02):
    """Polls pred until it returns a true value; fails naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TestFailure(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class Proc:
    """A daemon whose stdout+stderr go to a log file; ready when a line
    matches. user: run as that user (from root; no runuser in between, so
    the pid is the daemon's own)."""

    def __init__(self, name, argv, logpath, env=None, ready=None, timeout=30, user=None):
        self.name = name
        self.argv = argv
        self.logpath = logpath
        self.log = open(logpath, "ab")
        kw = {}
        if user and os.getuid() == 0:
            pw = pwd.getpwnam(user)
            kw = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log,
                                  env=env, start_new_session=True, **kw)
        self.lines = []
        self.ready_match = None
        self._ready = threading.Event()
        self._pattern = re.compile(ready) if ready else None
        self._t = threading.Thread(target=self._pump, daemon=True)
        self._t.start()
        if self._pattern:
            if not self._ready.wait(timeout):
                self.kill()
                raise TestFailure(f"{name} did not print its ready line in {timeout}s; "
                                  f"log {logpath}:\n{self.tail()}")

    def _pump(self):
        for raw in self.p.stdout:
            self.log.write(raw)
            self.log.flush()
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if self._pattern and not self._ready.is_set():
                m = self._pattern.search(line)
                if m:
                    self.ready_match = m
                    self._ready.set()

    def tail(self, n=40):
        try:
            with open(self.logpath, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""

    def alive(self):
        return self.p.poll() is None

    def kill(self, sig=signal.SIGKILL):
        if self.p.poll() is None:
            try:
                os.kill(self.p.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, timeout=20):
        if self.p.poll() is None:
            self.kill(signal.SIGTERM)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
                self.p.wait()
        self._t.join(5)
        self.log.close()


class Api:
    """A tiny JSON client of the master's REST API (urllib, no dependencies).
    An https master is verified with ca_file (a PEM file of its certificate
    or its CA)."""

    def __init__(self, url, token, ca_file=None):
        self.url = url.rstrip("/")
        self.token = token
        self.ssl = ssl.create_default_context(cafile=ca_file) if ca_file else None

    def request(self, method, path, body=None, token=None, raw=None, ctype=None, timeout=60):
        data = None
        headers = {}
        tok = self.token if token is None else token
        if tok:
            headers["Authorization"] = "Bearer " + tok
        if raw is not None:
            data = raw
            headers["Content-Type"] = ctype or "application/octet-stream"
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.ssl) as r:
                return r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers)

    def json(self, method, path, body=None, token=None, expect=None):
        status, data, _ = self.request(method, path, body, token)
        doc = json.loads(data) if data else None
        if expect is not None and status != expect:
            raise TestFailure(f"{method} {path}: expected HTTP {expect}, got {status}: {data[:500]!r}")
        return status, doc

    def job(self, jid):
        return self.json("GET", f"/v1/jobs/{jid}", expect=200)[1]

    def submit(self, spec, code=None, token=None, key=None):
        body = {"spec": spec}
        if code:
            body["code"] = code
        if key:
            body["idempotency_key"] = key
        return self.json("POST", "/v1/jobs", body, token=token)

    def wait_job(self, jid, states=("succeeded", "failed", "cancelled", "stopped_early"), timeout=60):
        return wait_until(lambda: (lambda j: j if j["state"] in states else None)(self.job(jid)),
                          timeout, f"job {jid} to reach {states}")

    def log(self, jid, task="worker/0", stream="stdout"):
        """The whole stored log of one task stream, paging by offset."""
        out = bytearray()
        while True:
            status, data, hdrs = self.request(
                "GET", f"/v1/jobs/{jid}/logs?task={task}&stream={stream}&offset={len(out)}")
            if status != 200:
                raise TestFailure(f"logs of job {jid}: HTTP {status}: {data[:300]!r}")
            if not data:
                return bytes(out)
            out += data


class Cluster:
    """One master and any number of agents in a temp dir; everything it starts
    is stopped, and every cgroup/dir it made removed, by close()."""

    def __init__(self, name, lease=None, master_args=None, env=None):
        self.dir = tempfile.mkdtemp(prefix=f"yard-e2e-{name}-")
        self.extra_env = dict(env or {})  # more environment of every daemon (SLURM_CONF)
        self.name = name
        self.procs = []
        self.agents = {}
        self.cgroup_bases = set()
        self.master = None
        self.lease = lease
        self.master_args = list(master_args or [])
        self.data_dir = os.path.join(self.dir, "master")
        self.host = "127.0.0.1"  # the master's listen address
        self.port = 0
        # An https master: the pin it printed, and the CA file that tests'
        # own requests trust (default: the certificate --tls-self-signed made)
        self.pin = None
        self.ca_file = None
        # YARD_E2E_STORE=postgres: every master of the run on a private
        # PostgreSQL (pgserver.py) instead of SQLite, removed by close()
        self.pg = None
        if os.environ.get("YARD_E2E_STORE") == "postgres" and "--store" not in self.master_args:
            from pgserver import PgServer
            self.pg = PgServer()
            self.master_args += ["--store", self.pg.url]

    def env(self, extra=None):
        e = dict(os.environ)
        e.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        e.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        e.update(self.extra_env)
        if extra:
            e.update(extra)
        return e

    def start_master(self):
        listen = f"{self.host}:{self.port}"
        argv = [YARD, "master", "--listen", listen, "--data-dir", self.data_dir]
        if self.lease:
            argv += ["--lease", str(self.lease)]
        argv += self.master_args
        m = Proc("master", argv, os.path.join(self.dir, "master.log"), env=self.env(),
                 ready=r"yard master ready url=(https?://\S+)(?: pin=(\S+))?")
        self.procs.append(m)
        self.master = m
        self.url = m.ready_match.group(1)
        self.pin = m.ready_match.group(2)
        self.port = int(self.url.rsplit(":", 1)[1])
        with open(os.path.join(self.data_dir, "admin-token")) as f:
            self.admin_token = f.read().strip()
        ca = None
        if self.url.startswith("https://"):
            ca = self.ca_file or os.path.join(self.data_dir, "tls", "cert.pem")
        self.api = Api(self.url, self.admin_token, ca)
        return m

    def trust_args(self):
        """How agents trust an https master by default: its pin."""
        return ["--pin", self.pin] if self.pin else []

    def start_agent(self, name, gpus="sim:2", dev_dir=None, extra=None, wrap=None, trust=None,
                    ready=True):
        """Starts agent `name` and waits for its readiness line (unless not
        ready); extra: more arguments; wrap: a function of the argv that
        returns the command to run instead (to start it inside a namespace,
        say); trust: how it verifies an https master (default: the pin)."""
        work = os.path.join(self.dir, "agent-" + name)
        argv = [YARD, "agent", "--master", self.url, "--name", name, "--work-dir", work,
                "--gpus", gpus, "--join-token-file", os.path.join(self.data_dir, "join-token")]
        if dev_dir:
            argv += ["--dev-dir", dev_dir]
        argv += self.trust_args() if trust is None else trust
        argv += extra or []
        if "--ports" not in argv:
            argv += ["--ports", test_port_block()]
        if wrap:
            argv = wrap(argv)
        a = Proc("agent-" + name, argv, os.path.join(self.dir, f"agent-{name}.log"),
                 env=self.env(), ready=r"yard agent ready name=" + re.escape(name) if ready else None)
        self.procs.append(a)
        self.agents[name] = a
        self.cgroup_bases.add(agent_cgroup_base(name, work))
        return a

    def cli(self, *args, token=None, check_rc=None, input=None, timeout=120, env=None):
        e = self.env({"YARD_MASTER": self.url, "YARD_TOKEN": token or self.admin_token,
                      "HOME": self.dir})
        if self.pin:
            e["YARD_PIN"] = self.pin
        if env:
            e.update(env)
        r = subprocess.run([YARD, *args], capture_output=True, env=e, input=input,
                           timeout=timeout)
        if check_rc is not None and r.returncode != check_rc:
            raise TestFailure(f"yard {' '.join(args)}: exit {r.returncode}, expected {check_rc}\n"
                              f"stdout: {r.stdout[-2000:]!r}\nstderr: {r.stderr[-2000:]!r}")
        self.scan_text(r.stderr.decode(errors="replace"), "yard " + args[0])
        return r

    def user_token(self, user, admin=False, team=None):
        body = {"user": user, "admin": admin, **({"team": team} if team else {})}
        status, doc = self.api.json("POST", "/v1/tokens", body, expect=201)
        return doc["token"]

    @staticmethod
    def scan_text(text, what):
        for pat in SANITIZER_PATTERNS:
            if pat in text:
                i = text.index(pat)
                raise TestFailure(f"sanitizer report in {what}:\n{text[max(0, i - 200):i + 3000]}")

    def close(self):
        """Stops everything; returns sanitizer findings (a list of strings)."""
        for p in reversed(self.procs):
            p.stop()
        findings = []
        for p in self.procs:
            try:
                with open(p.logpath, errors="replace") as f:
                    self.scan_text(f.read(), p.logpath)
            except TestFailure as e:
                findings.append(str(e))
        kill_task_leftovers(self.dir)
        remove_cgroups(self.cgroup_bases)
        if self.pg:
            self.pg.close()
        if not findings and not os.environ.get("YARD_E2E_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)
        return findings


def kill_task_leftovers(root):
    """Kills any process whose cwd or command line is under root (tasks, shims)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if cwd.startswith(root) or root in cmd:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def agent_cgroup_base(name, work_dir):
    """The agent's cgroup subtree, as src/agent/agent.c names it."""
    digest = hashlib.sha256(os.path.realpath(work_dir).encode()).hexdigest()[:8]
    return os.path.join("yard", f"{name}-{digest}")


def remove_cgroups(bases):
    """Removes the given yard/NAME-HASH cgroup subtrees from every hierarchy,
    deepest first, killing what is left in them."""
    base = "/sys/fs/cgroup"
    if not os.path.isdir(base):
        return
    roots = [os.path.join(base, c) for c in os.listdir(base)] + [base]
    for r in roots:
        for rel in bases:
            top = os.path.join(r, rel)
            if not os.path.isdir(top):
                continue
            for dirpath, dirnames, _ in sorted(os.walk(top), key=lambda t: -len(t[0])):
                procs = os.path.join(dirpath, "cgroup.procs")
                try:
                    with open(procs) as f:
                        for pid in f.read().split():
                            try:
                                os.kill(int(pid), signal.SIGKILL)
                            except ProcessLookupError:
                                pass
                except OSError:
                    pass
                for _ in range(50):
                    try:
                        os.rmdir(dirpath)
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.02)
        try:
            os.rmdir(os.path.join(r, "yard"))  # only if no other agent uses it
        except OSError:
            pass


def spec(command, name="t", replicas=1, gpus=0, cpus=0.1, memory=None, **extra):
    role = {"replicas": replicas, "gpus": gpus, "cpus": cpus}
    if memory:
        role["memory"] = memory
    s = {"name": name, "command": command, "tasks": {"worker": role}}
    s.update(extra)
    return s


class SubmitLoad:
    """`clients` threads submitting /bin/true jobs until `total` of them are
    acknowledged (201), each through whatever the master is going through: a
    refused connection, a timeout or a 5xx is tried again with the same
    idempotency_key (the job's name), so that a submission whose reply was
    lost is answered (200) with the job it made rather than making a second;
    any other answer fails (the thread stops, so the count falls short).
    acked: job id -> name. As a context manager it starts on entry and stops
    the threads on exit; join() waits for them to reach the total."""

    def __init__(self, api, total, clients):
        self.api, self.total = api, total
        self.acked = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._submitter, args=(k,)) for k in range(clients)]

    def _submitter(self, k):
        n = 0
        while not self.stop.is_set():
            with self.lock:
                if len(self.acked) >= self.total:
                    return
            name = f"load-{k}-{n}"
            try:
                status, doc = self.api.submit(spec(["/bin/true"], name=name, cpus=0.01), key=name)
            except OSError:
                time.sleep(0.05)  # the master is down: try again
                continue
            if status in (200, 201):
                with self.lock:
                    self.acked[doc["id"]] = name
                n += 1
            elif status >= 500:
                time.sleep(0.05)
            else:
                raise TestFailure(f"submission answered HTTP {status}: {doc}")

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def join(self, timeout):
        for t in self.threads:
            t.join(timeout)

    def __exit__(self, *exc):
        self.stop.set()
        return False

    def check_stored(self, api, what="afterwards"):
        """Every acknowledged job is stored by api's master with its name,
        and no name is stored twice (each was sent with its key)."""
        st, doc = api.json("GET", "/v1/jobs?limit=100000")
        check_eq(st, 200, f"the job list {what}")
        names = [j["name"] for j in doc["jobs"]]
        for jid, name in self.acked.items():
            status, j = api.json("GET", f"/v1/jobs/{jid}")
            check_eq(status, 200, f"acknowledged job {jid} ({name}) {what}")
            check_eq(j["name"], name, f"name of acknowledged job {jid}")
        dups = sorted(n for n in set(names) if names.count(n) > 1)
        check(not dups, f"submissions stored more than once {what}: {dups[:10]}")


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


class cluster:
    """Context manager: `with cluster("name") as c:` closes c even when the
    test fails, and fails the test on sanitizer reports in any daemon log."""

    def __init__(self, name, **kw):
        self.c = Cluster(name, **kw)

    def __enter__(self):
        return self.c

    def __exit__(self, et, ev, tb):
        findings = self.c.close()
        if findings and et is None:
            raise TestFailure("\n".join(findings))
        return False
