"""Debian's docker-registry (the CNCF distribution registry) on loopback,
with its storage under a temp dir, for the cluster's registry of images
built from jobs' code. Docker reaches a registry on 127.0.0.0/8 over plain
http without any configuration (it is an insecure registry by default), so
the test declares nothing else.

    with Registry() as reg:
        reg.addr          # "127.0.0.1:PORT", for yard master --registry
        reg.tags("yard/build")
"""
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


class Registry:
    def __init__(self):
        if not os.path.exists(BINARY):
            raise TestFailure(f"{BINARY} is missing: make deps installs Debian's docker-registry")
        self.dir = tempfile.mkdtemp(prefix="yard-registry-")
        self.addr = f"127.0.0.1:{free_port()}"
        conf = os.path.join(self.dir, "config.yml")
        with open(conf, "w") as f:
            f.write("version: 0.1\nlog: {level: warn}\n"
                    f"storage: {{filesystem: {{rootdirectory: {self.dir}/data}}, delete: {{enabled: true}}}}\n"
                    f"http: {{addr: {self.addr}}}\n")
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
            with urllib.request.urlopen(f"http://{self.addr}/v2/", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def tags(self, repo):
        """The tags of repo in the registry ([] when it has none)."""
        try:
            with urllib.request.urlopen(f"http://{self.addr}/v2/{repo}/tags/list", timeout=10) as r:
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
