"""A private PostgreSQL 15 for end-to-end tests and benchmarks, made by
tests/pg/pgtmp.sh: initdb into a temp dir as an unprivileged user, a server
on a unix socket there and on 127.0.0.1 at a free port (password
authentication), database "yard". `with PgServer() as pg:` stops it and
removes its dir even when the test fails; sweep() removes those of tests
that were killed (run.py calls it after a failure)."""
import os
import shutil
import subprocess
import tempfile

from harness import ROOT, TestFailure

PGTMP = os.path.join(ROOT, "tests", "pg", "pgtmp.sh")
PREFIX = "yard-pg-e2e-"  # pgtmp.sh run's dirs are yard-pg-XXXXXX; sweep() takes both


def _pgtmp(*args, check=True, env=None):
    r = subprocess.run([PGTMP, *args], capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, **env) if env else None)
    if check and r.returncode:
        raise TestFailure(f"pgtmp.sh {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


class PgServer:
    """listen: more addresses than 127.0.0.1 to listen on (a bridge's, so
    that network namespaces reach the server through it)."""

    def __init__(self, listen=None):
        self.dir = tempfile.mkdtemp(prefix=PREFIX)
        with open(os.path.join(self.dir, "owner"), "w") as f:
            f.write(str(os.getpid()))
        try:
            # url: postgres://yard:PASSWORD@127.0.0.1:PORT/yard
            self.url = _pgtmp("init", self.dir, env=({"PGTMP_LISTEN": listen} if listen else None)).stdout.strip()
        except BaseException:
            self.close()
            raise
        with open(os.path.join(self.dir, "socket-url")) as f:
            self.socket_url = f.read().strip()
        self.password = self.url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]

    def stop(self):
        """Stops the server (fast shutdown: open transactions are rolled back)."""
        _pgtmp("stop", self.dir)

    def start(self):
        """Starts it again, on the same port and socket."""
        _pgtmp("start", self.dir)

    def sql(self, query):
        """The rows of one query as a list of '|'-joined strings (psql -tA)."""
        r = subprocess.run(["psql", self.socket_url, "-v", "ON_ERROR_STOP=1", "-tAc", query],
                           capture_output=True, text=True, timeout=60)
        if r.returncode:
            raise TestFailure(f"psql {query!r}: {r.stderr.strip()}")
        return r.stdout.splitlines()

    def close(self):
        if os.path.isdir(self.dir):
            _pgtmp("destroy", self.dir, check=False)
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        self.close()
        return False


def sweep():
    """Destroys the servers of dead test processes; returns their dirs."""
    swept = []
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        d = os.path.join(tmp, name)
        if not name.startswith("yard-pg-") or not os.path.isfile(os.path.join(d, "owner")):
            continue
        try:
            with open(os.path.join(d, "owner")) as f:
                os.kill(int(f.read().strip()), 0)
            continue  # its owner lives
        except (OSError, ValueError):
            pass
        _pgtmp("destroy", d, check=False)
        shutil.rmtree(d, ignore_errors=True)
        swept.append(d)
    return swept
