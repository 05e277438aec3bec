"""Git servers for the tests of code from git (test_git.py): repositories
made with Debian's git, served by a real `git daemon` (git://) and by
`git http-backend` (smart HTTP) behind a small HTTP server that demands a
token by Basic authentication. Everything lives in a temp dir; close()
stops the servers and removes it, also when a test fails."""
import base64
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import TestFailure, wait_until

GIT = shutil.which("git") or "/usr/bin/git"
ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
       "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example"}


def git(*args, cwd=None):
    if not os.path.exists(GIT):
        raise TestFailure("no git on this machine (Debian's git: make deps)")
    r = subprocess.run([GIT, *args], cwd=cwd, env=ENV, capture_output=True, timeout=60)
    if r.returncode:
        raise TestFailure(f"git {' '.join(args)}: exit {r.returncode}: {r.stderr.decode(errors='replace')}")
    return r.stdout.decode().strip()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class GitRepos:
    """A temp dir of bare repositories (root/NAME.git) and a work tree to
    commit to them from."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="yard-e2e-git-")
        self.daemon = None
        self.http = None

    def make(self, name, branches):
        """A bare repository NAME.git whose branch B holds the files
        branches[B] ({path: text}; a text that starts with '#!' is
        executable), each branch one commit on its own; its HEAD is the first."""
        bare = os.path.join(self.root, name + ".git")
        git("init", "-q", "--bare", bare)
        work = os.path.join(self.root, name + "-work")
        git("init", "-q", work)
        first = None
        for b, files in branches.items():
            git("checkout", "-q", "--orphan", b, cwd=work)
            git("rm", "-rq", "--cached", "--ignore-unmatch", ".", cwd=work)
            for f in os.listdir(work):
                if f != ".git":
                    p = os.path.join(work, f)
                    shutil.rmtree(p) if os.path.isdir(p) else os.unlink(p)
            self._write(work, files)
            git("commit", "-qm", f"{b}", cwd=work)
            git("push", "-q", bare, f"{b}:refs/heads/{b}", cwd=work)
            first = first or b
        git("symbolic-ref", "HEAD", f"refs/heads/{first}", cwd=bare)
        return bare

    def commit(self, name, branch, files):
        """One more commit on branch with files changed; its SHA."""
        work = os.path.join(self.root, name + "-work")
        git("checkout", "-q", branch, cwd=work)
        self._write(work, files)
        git("commit", "-qm", "more", cwd=work)
        git("push", "-q", os.path.join(self.root, name + ".git"), f"{branch}:refs/heads/{branch}", cwd=work)
        return self.sha(name, branch)

    def sha(self, name, ref):
        return git("rev-parse", ref + "^{commit}", cwd=os.path.join(self.root, name + ".git"))

    @staticmethod
    def _write(work, files):
        for path, text in files.items():
            p = os.path.join(work, path)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)
            if text.startswith("#!"):
                os.chmod(p, 0o755)
            git("add", path, cwd=work)

    def serve_daemon(self):
        """`git daemon` on 127.0.0.1 serving every repository; its git:// base URL."""
        port = free_port()
        self.daemon = subprocess.Popen(
            [GIT, "daemon", "--reuseaddr", "--export-all", "--informative-errors",
             f"--base-path={self.root}", "--listen=127.0.0.1", f"--port={port}", self.root],
            env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.root, "daemon.log"), "ab"), start_new_session=True)

        def up():
            if self.daemon.poll() is not None:
                raise TestFailure(f"git daemon exited {self.daemon.returncode} (port {port} taken?)")
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                return True
            except OSError:
                return False
        wait_until(up, 10, "git daemon to listen")
        return f"git://127.0.0.1:{port}"

    def serve_http(self, token, user="x-access-token"):
        """Smart HTTP (git http-backend as a CGI) on 127.0.0.1, answering
        401 to any request without Basic USER:TOKEN; its http:// base URL.
        self.http_log lists (path, authorised) of every request."""
        want = "Basic " + base64.b64encode(f"{user}:{token}".encode()).decode()
        root = self.root
        log = self.http_log = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _body(self):
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    out = b""
                    while True:
                        n = int(self.rfile.readline().split(b";")[0], 16)
                        out += self.rfile.read(n)
                        self.rfile.readline()
                        if n == 0:
                            return out
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _reply(self, status, headers, body):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _serve(self):
                body = self._body()
                ok = self.headers.get("Authorization") == want
                log.append((self.path, ok))
                if not ok:
                    self._reply(401, [("WWW-Authenticate", 'Basic realm="git"')], b"")
                    return
                path, _, query = self.path.partition("?")
                env = dict(ENV, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1", PATH_INFO=path,
                           QUERY_STRING=query, REQUEST_METHOD=self.command, REMOTE_USER=user,
                           REMOTE_ADDR="127.0.0.1", CONTENT_TYPE=self.headers.get("Content-Type", ""),
                           CONTENT_LENGTH=str(len(body)), GATEWAY_INTERFACE="CGI/1.1",
                           SERVER_PROTOCOL="HTTP/1.1")
                if self.headers.get("Content-Encoding"):
                    env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
                if self.headers.get("Git-Protocol"):
                    env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
                r = subprocess.run([GIT, "http-backend"], input=body, env=env, capture_output=True, timeout=60)
                head, _, out = r.stdout.partition(b"\r\n\r\n")
                status, headers = 200, []
                for line in head.decode(errors="replace").split("\r\n"):
                    k, _, v = line.partition(":")
                    if k.lower() == "status":
                        status = int(v.split()[0])
                    elif k:
                        headers.append((k, v.strip()))
                self._reply(status, headers, out)

            do_GET = do_POST = _serve

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    def close(self):
        if self.daemon:
            try:  # the daemon and the children it forked for connections
                os.killpg(self.daemon.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.daemon.wait()
        if self.http:
            self.http.shutdown()
            self.http.server_close()
        shutil.rmtree(self.root, ignore_errors=True)


class repos:
    """Context manager: `with repos() as g:` closes g even when the test fails."""

    def __enter__(self):
        self.g = GitRepos()
        return self.g

    def __exit__(self, *exc):
        self.g.close()
        return False
