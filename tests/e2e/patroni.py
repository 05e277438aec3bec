"""A PostgreSQL with no single server for end-to-end tests: a private etcd
(one member, on loopback) and two Patroni nodes, each managing a
PostgreSQL 15 of its own in a temp dir, as the unprivileged user
`postgres`, on loopback at free ports. Patroni runs them in synchronous
mode: a COMMIT is acknowledged only once the synchronous replica has the
WAL, and Patroni promotes only that replica, so a failover loses nothing
acknowledged. Database and user "yard" (password authentication) are for
the masters, through a URL that names both servers:

    with PatroniCluster() as pg:
        pg.url          # postgres://yard:PW@127.0.0.1:P1,127.0.0.1:P2/yard?target_session_attrs=read-write
        pg.primary()    # the name of the node that leads ("n1" or "n2")
        pg.kill_node("n1")   # SIGKILL its Patroni and every process of its PostgreSQL
        pg.wait_primary(exclude="n1")

The timings are a test's (ttl 10 s, loop_wait 1 s, retry_timeout 5 s: a
promotion within about 10 s of the primary's loss); docs/faults.md says
what a site would use. Leaving the `with` (or the interpreter, atexit)
kills everything it started and removes its dir; sweep() removes those of
tests that were SIGKILLed (run.py calls it after a failure).
"""
import atexit
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from harness import Proc, TestFailure, kill_task_leftovers, pid_alive, wait_until

PREFIX = "yard-patroni-e2e-"
PGBIN = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")
PATRONI = "/usr/bin/patroni"
ETCD = "/usr/bin/etcd"
USER = "postgres"  # initdb and postgres refuse root
NODES = ("n1", "n2")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url, timeout=2):
    """The JSON answer of a GET, or None when nothing (or no JSON) came back.
    Patroni's health endpoints answer 503 with a body: that counts too."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            return json.loads(e.read())
        except ValueError:
            return None
    except (OSError, ValueError):
        return None


def check_installed():
    """Fails, naming the package, when something the cluster needs is missing."""
    for path, pkg in ((PATRONI, "patroni"), (ETCD, "etcd-server"), (os.path.join(PGBIN, "postgres"), "postgresql")):
        if not os.access(path, os.X_OK):
            raise TestFailure(f"no '{path}': the Patroni test needs Debian's {pkg} (make deps installs it)")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        raise TestFailure(f"user '{USER}' does not exist: PostgreSQL cannot run as root")


class PatroniCluster:
    def __init__(self, ttl=10, loop_wait=1, retry_timeout=5):
        check_installed()
        self.dir = tempfile.mkdtemp(prefix=PREFIX)
        with open(os.path.join(self.dir, "owner"), "w") as f:
            f.write(str(os.getpid()))
        self.etcd = None
        self.patroni = {}  # node name -> harness.Proc
        self.closed = False
        atexit.register(self.close)
        self.timings = {"ttl": ttl, "loop_wait": loop_wait, "retry_timeout": retry_timeout}
        self.password = secrets.token_hex(12)
        self.ports = {n: free_port() for n in NODES}  # PostgreSQL
        self.rest = {n: free_port() for n in NODES}  # Patroni's REST API
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        hosts = ",".join(f"127.0.0.1:{self.ports[n]}" for n in NODES)
        self.url = f"postgres://yard:{self.password}@{hosts}/yard?target_session_attrs=read-write"

    # ---- start ----

    def _start(self):
        pw = pwd.getpwnam(USER)
        os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        self._start_etcd()
        for n in NODES:
            d = self.node_dir(n)
            os.makedirs(os.path.join(d, "sock"))
            for p in (d, os.path.join(d, "sock")):
                os.chown(p, pw.pw_uid, pw.pw_gid)
                os.chmod(p, 0o700)
            with open(os.path.join(d, "patroni.yml"), "w") as f:
                json.dump(self._config(n), f, indent=1)  # YAML is a superset of JSON
        # n1 bootstraps the cluster (initdb), then n2 joins (pg_basebackup)
        self._start_patroni("n1")
        wait_until(lambda: self._role("n1") == ("leader", "running"), 90,
                   "Patroni n1 to bootstrap and lead", interval=0.2)
        self._start_patroni("n2")
        wait_until(self._synced, 90, "Patroni n2 to stream as the synchronous replica", interval=0.2)
        leader = self.primary()
        self.psql(leader, f"CREATE ROLE yard LOGIN PASSWORD '{self.password}'", db="postgres")
        self.psql(leader, "CREATE DATABASE yard OWNER yard", db="postgres")

    def _start_etcd(self):
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        argv = [ETCD, "--name", "e1", "--data-dir", os.path.join(self.dir, "etcd"),
                "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
                "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                "--initial-cluster", f"e1={peer_url}", "--initial-cluster-state", "new",
                "--initial-cluster-token", os.path.basename(self.dir)]
        self.etcd = Proc("etcd", argv, os.path.join(self.dir, "etcd.log"), env={"PATH": "/usr/bin:/bin"})
        try:
            wait_until(lambda: (_get_json(self.etcd_url + "/health") or {}).get("health") == "true"
                       or self.etcd.p.poll() is not None, 30, "etcd to be healthy", interval=0.1)
        except TestFailure:
            raise TestFailure(f"etcd is not healthy in 30 s; log:\n{self.etcd.tail()}")
        if self.etcd.p.poll() is not None:
            raise TestFailure(f"etcd exited ({self.etcd.p.returncode}); log:\n{self.etcd.tail()}")

    def _config(self, n):
        d = self.node_dir(n)
        local = "127.0.0.1/32"
        return {
            "scope": os.path.basename(self.dir),
            "name": n,
            "log": {"level": "INFO"},
            "restapi": {"listen": f"127.0.0.1:{self.rest[n]}", "connect_address": f"127.0.0.1:{self.rest[n]}"},
            "etcd3": {"host": self.etcd_url.split("://", 1)[1]},
            "watchdog": {"mode": "off"},
            "bootstrap": {
                "dcs": dict(self.timings, **{
                    # a COMMIT waits for the replica, and only the
                    # synchronous replica may be promoted; not strict, so
                    # that the survivor of two accepts commits alone
                    "synchronous_mode": True,
                    "synchronous_mode_strict": False,
                    "maximum_lag_on_failover": 0,
                    "postgresql": {
                        "use_pg_rewind": False,
                        "use_slots": True,
                        "parameters": {"max_connections": 50, "wal_keep_size": "128MB",
                                       "synchronous_commit": "on"},
                    },
                }),
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}, {"auth-host": "scram-sha-256"},
                           {"auth-local": "trust"}],
            },
            "postgresql": {
                "listen": f"127.0.0.1:{self.ports[n]}",
                "connect_address": f"127.0.0.1:{self.ports[n]}",
                "data_dir": os.path.join(d, "data"),
                "bin_dir": PGBIN,
                "pgpass": os.path.join(d, "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": self.password},
                    "replication": {"username": "replicator", "password": self.password},
                },
                "parameters": {"unix_socket_directories": os.path.join(d, "sock"), "shared_buffers": "16MB"},
                "pg_hba": ["local all all trust",
                           f"host replication replicator {local} scram-sha-256",
                           f"host all all {local} scram-sha-256"],
            },
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False, "nosync": False},
        }

    def _start_patroni(self, n):
        d = self.node_dir(n)
        env = {"PATH": "/usr/bin:/bin", "HOME": d, "LANG": "C.UTF-8"}
        self.patroni[n] = Proc("patroni-" + n, [PATRONI, os.path.join(d, "patroni.yml")],
                               os.path.join(d, "patroni.log"), user=USER, env=env)

    # ---- state ----

    def node_dir(self, n):
        return os.path.join(self.dir, n)

    def cluster(self, via=None):
        """Patroni's GET /cluster from the first node that answers (or `via`
        alone): {"members": [{"name", "role", "state", ...}]}, or None."""
        for n in ([via] if via else NODES):
            if n in self.patroni and self.patroni[n].p.poll() is None:
                doc = _get_json(f"http://127.0.0.1:{self.rest[n]}/cluster", timeout=1)
                if doc:
                    return doc
        return None

    def _role(self, n):
        for m in (self.cluster() or {}).get("members", []):
            if m.get("name") == n:
                return m.get("role"), m.get("state")
        return None

    def _synced(self):
        for n, p in self.patroni.items():
            if p.p.poll() is not None:
                raise TestFailure(f"Patroni {n} exited ({p.p.returncode}); log:\n{p.tail()}")
        roles = {m["name"]: (m.get("role"), m.get("state")) for m in (self.cluster() or {}).get("members", [])}
        return (any(r == ("leader", "running") for r in roles.values()) and
                any(r[0] == "sync_standby" and r[1] in ("running", "streaming") for r in roles.values()))

    def primary(self, via=None):
        """The name of the node Patroni says leads, running, or None."""
        for m in (self.cluster(via) or {}).get("members", []):
            if m.get("role") == "leader" and m.get("state") == "running":
                return m["name"]
        return None

    def wait_primary(self, exclude=None, timeout=60):
        """Waits for a running leader other than `exclude`; returns its name."""
        return wait_until(lambda: (lambda p: p if p and p != exclude else None)(self.primary()), timeout,
                          f"Patroni to promote a node other than {exclude}", interval=0.1)

    def psql(self, n, query, db="yard"):
        """The rows of one query on node n's server (its unix socket, as the
        superuser) as a list of '|'-joined strings."""
        conn = f"host={os.path.join(self.node_dir(n), 'sock')} port={self.ports[n]} user=postgres dbname={db}"
        r = subprocess.run(["psql", conn, "-v", "ON_ERROR_STOP=1", "-tAc", query],
                           capture_output=True, text=True, timeout=60)
        if r.returncode:
            raise TestFailure(f"psql on {n} {query!r}: {r.stderr.strip()}")
        return r.stdout.splitlines()

    def postmaster_pid(self, n):
        try:
            with open(os.path.join(self.node_dir(n), "data", "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    # ---- faults ----

    def kill_node(self, n):
        """The loss of node n's machine: SIGKILL its Patroni (so that nothing
        restarts its server), its postmaster and every backend of it."""
        pm = self.postmaster_pid(n)
        self.patroni[n].kill()
        if pm:
            try:
                os.kill(pm, signal.SIGKILL)
            except ProcessLookupError:
                pass
        kill_task_leftovers(self.node_dir(n))  # backends: their cwd is the data dir
        self.patroni[n].p.wait()
        deadline = time.monotonic() + 10
        while pm and pid_alive(pm) and time.monotonic() < deadline:
            time.sleep(0.01)

    # ---- cleanup ----

    def close(self):
        """Kills everything (Patroni first, so that nothing is restarted),
        removes the shared memory of the servers and the dir."""
        if self.closed:
            return
        self.closed = True
        for p in self.patroni.values():
            p.kill()
            p.p.wait()
        for n in NODES:
            _kill_server(self.node_dir(n))
        if self.etcd:
            self.etcd.kill()
            self.etcd.p.wait()
        kill_task_leftovers(self.dir)
        for p in list(self.patroni.values()) + ([self.etcd] if self.etcd else []):
            p.stop()  # the log, once the pump has read the last of it
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        self.close()
        return False


def _kill_server(node_dir):
    """Stops the PostgreSQL of a node dir (immediate: nothing of a test's
    server needs saving), else SIGKILLs it; then removes its System V
    shared memory segment, which a SIGKILLed postmaster leaves behind."""
    data = os.path.join(node_dir, "data")
    pidfile = os.path.join(data, "postmaster.pid")
    try:
        with open(pidfile) as f:
            lines = f.read().splitlines()
    except OSError:
        return
    try:
        pm = int(lines[0])
    except (IndexError, ValueError):
        pm = None
    if pm and pid_alive(pm):
        try:
            os.kill(pm, signal.SIGQUIT)  # immediate shutdown
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 10
        while pid_alive(pm) and time.monotonic() < deadline:
            time.sleep(0.02)
    kill_task_leftovers(node_dir)
    if pm and not pid_alive(pm) and len(lines) >= 7 and len(lines[6].split()) == 2:
        # line 7: "KEY ID" of the segment; gone already after a clean stop
        subprocess.run(["ipcrm", "-m", lines[6].split()[1]], capture_output=True)


def sweep():
    """Removes the clusters of dead test processes; returns their dirs."""
    swept = []
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        d = os.path.join(tmp, name)
        if not name.startswith(PREFIX) or not os.path.isfile(os.path.join(d, "owner")):
            continue
        try:
            with open(os.path.join(d, "owner")) as f:
                os.kill(int(f.read().strip()), 0)
            continue  # its owner lives
        except (OSError, ValueError):
            pass
        kill_task_leftovers(d)  # Patroni and etcd: their config and data dir are in their argv
        for n in NODES:
            _kill_server(os.path.join(d, n))
        shutil.rmtree(d, ignore_errors=True)
        swept.append(d)
    return swept
