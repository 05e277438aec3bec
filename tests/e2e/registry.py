"""Debian's docker-registry (the CNCF distribution registry) on loopback,
with its storage under a temp dir, for the cluster's registry of images
built from jobs' code. Docker reaches a registry on 127.0.0.0/8 over plain
http without any configuration (it is an insecure registry by default), so
the test declares nothing else.

    with Registry() as reg:
        reg.addr          # "127.0.0.1:PORT", for yard master --registry
        reg.tags("yard/build")

Registry(auth=(USER, PASSWORD)) demands that user by HTTP Basic (its
htpasswd file made by Debian's htpasswd, apache2-utils, bcrypt as the
registry requires); reg.status() is what /v2/ answers without it.
"""
import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import urllib.error
import urllib.request

from gitserve import free_port
from harness import TestFailure, wait_until

BINARY = "/usr/bin/docker-registry"
HTPASSWD = "/usr/bin/htpasswd"


class Registry:
    def __init__(self, auth=None):
        if not os.path.exists(BINARY):
            raise TestFailure(f"{BINARY} is missing: make deps installs Debian's docker-registry")
        if auth and not os.path.exists(HTPASSWD):
            raise TestFailure(f"{HTPASSWD} is missing: make deps installs Debian's apache2-utils")
        self.dir = tempfile.mkdtemp(prefix="yard-registry-")
        self.addr = f"127.0.0.1:{free_port()}"
        self.auth = auth
        conf = os.path.join(self.dir, "config.yml")
        auth_conf = ""
        if auth:
            users = os.path.join(self.dir, "htpasswd")
            with open(users, "wb") as f:
                f.write(subprocess.run([HTPASSWD, "-Bbn", auth[0], auth[1]], check=True,
                                       capture_output=True).stdout)
            auth_conf = f"auth: {{htpasswd: {{realm: yard-test, path: {users}}}}}\n"
        with open(conf, "w") as f:
            f.write("version: 0.1\nlog: {level: warn}\n"
                    f"storage: {{filesystem: {{rootdirectory: {self.dir}/data}}, delete: {{enabled: true}}}}\n"
                    f"http: {{addr: {self.addr}}}\n" + auth_conf)
        self.log = os.path.join(self.dir, "registry.log")
        self.proc = subprocess.Popen([BINARY, "serve", conf], stdin=subprocess.DEVNULL,
                                     stdout=open(self.log, "ab"), stderr=subprocess.STDOUT,
                                     start_new_session=True)
        try:
            wait_until(self._up, 20, "docker-registry to answer")
        except BaseException:
            self.close()
            raise

    def _up(self):
        if self.proc.poll() is not None:
            with open(self.log, errors="replace") as f:
                raise TestFailure(f"docker-registry exited {self.proc.returncode}: {f.read()[-2000:]}")
        try:
            return self.status(timeout=1) in (200, 401)
        except OSError:
            return False

    def _open(self, path, authorised=True, timeout=10):
        req = urllib.request.Request(f"http://{self.addr}{path}")
        if self.auth and authorised:
            req.add_header("Authorization", "Basic " + base64.b64encode(":".join(self.auth).encode()).decode())
        return urllib.request.urlopen(req, timeout=timeout)

    def status(self, timeout=10):
        """What GET /v2/ answers to a client without credentials."""
        try:
            with self._open("/v2/", authorised=False, timeout=timeout) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def tags(self, repo):
        """The tags of repo in the registry ([] when it has none)."""
        try:
            with self._open(f"/v2/{repo}/tags/list") as r:
                return sorted(json.load(r).get("tags") or [])
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return []
            raise

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
