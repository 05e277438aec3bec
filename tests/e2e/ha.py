"""Several masters on one PostgreSQL store, for the failover tests and
bench/failover.py: a netns.Topology whose nodes m1, m2, ... each hold a
master and a1, a2, ... each an agent; the private PostgreSQL (pgserver.py)
listens on the bridge, so that a master whose link is cut loses its store
as a vanished machine would.

    with ha("failover") as c:
        c.start_masters()              # m1 leads (started first), m2 stands by
        c.start_agents()               # agents take --master URL1,URL2
        c.api                          # a client that follows the leader
        c.master_api("m2")             # one that asks m2 alone
        c.cut("m1"); c.mend("m1")      # take m1's link down (timeouts, not refusals) and up

Every master listens on port 7420 of its own node and advertises
http://ADDR:7420. Leaving the `with` stops everything and removes the
server, the namespaces and what the daemons left.
"""
import json
import os
import signal
import subprocess
import urllib.request

from harness import YARD, Api, Proc, wait_until
from multinode import MultinodeCluster, multinode
from pgserver import PgServer

PORT = 7420


class FailoverApi(Api):
    """An Api over several masters: after a refused or timed-out connection,
    or a 503 from a standby, the next call goes to the leader the answer
    named, else to the next URL. Nothing is resent here: callers retry."""

    def __init__(self, urls, token):
        super().__init__(urls[0], token)
        self.urls = list(urls)

    def _next(self):
        self.url = self.urls[(self.urls.index(self.url) + 1) % len(self.urls)]

    def request(self, method, path, body=None, token=None, raw=None, ctype=None, timeout=60):
        try:
            status, data, hdrs = super().request(method, path, body, token, raw, ctype, timeout)
        except OSError:
            self._next()
            raise
        if status == 503:
            leader = hdrs.get("X-Yard-Leader")
            if leader in self.urls:
                self.url = leader
            else:
                self._next()
        return status, data, hdrs


def health(url, timeout=2):
    """GET /healthz of one master, or None when it does not answer."""
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=timeout) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


class HACluster(MultinodeCluster):
    def __init__(self, name, topo, masters, lease=None, master_args=None):
        self.pg = None
        pg = PgServer(listen=topo.gateway)
        store = pg.url.replace("@127.0.0.1:", f"@{topo.gateway}:")
        super().__init__(name, topo, lease=lease, master_args=["--store", store] + list(master_args or []))
        self.pg = pg
        self.master_names = list(masters)
        self.masters = {}
        self.urls = {m: f"http://{topo.node(m).addr}:{PORT}" for m in masters}

    def start_master_on(self, name, wait_ready=True):
        """Starts the master of node `name` (again, after a kill: its data
        dir is kept). Returns its Proc."""
        data = os.path.join(self.dir, "master-" + name)
        argv = [YARD, "master", "--listen", f"{self.topo.node(name).addr}:{PORT}", "--data-dir", data,
                "--advertise-url", self.urls[name]]
        if self.lease:
            argv += ["--lease", str(self.lease)]
        argv += self.master_args
        m = Proc("master-" + name, self.topo.argv(name, argv, cgroups=False),
                 os.path.join(self.dir, f"master-{name}.log"), env=self.env(),
                 ready=r"yard master ready url=(https?://\S+)" if wait_ready else None)
        self.topo.adopt(pid=m.p.pid)
        self.procs.append(m)
        self.masters[name] = m
        return m

    def start_masters(self):
        """The first master leads (it starts alone and takes the lease), the
        others stand by; c.api follows whichever leads."""
        first = self.master_names[0]
        self.start_master_on(first)
        wait_until(lambda: (health(self.urls[first]) or {}).get("role") == "leader", 30,
                   f"{first} to lead")
        self.data_dir = os.path.join(self.dir, "master-" + first)  # its admin and join tokens
        with open(os.path.join(self.data_dir, "admin-token")) as f:
            self.admin_token = f.read().strip()
        for name in self.master_names[1:]:
            self.start_master_on(name)
            wait_until(lambda: (health(self.urls[name]) or {}).get("role") == "standby", 30,
                       f"{name} to stand by")
        self.master = self.masters[first]
        self.url = ",".join(self.urls[m] for m in self.master_names)  # what agents and the CLI take
        self.api = FailoverApi([self.urls[m] for m in self.master_names], self.admin_token)

    def start_agents(self, gpus="sim:1", dev_dir=None, extra=None):
        """One agent in each agent node, given every master's URL."""
        return [self.start_agent(n, gpus=gpus, dev_dir=dev_dir, extra=extra) for n in self.agent_nodes]

    def master_api(self, name):
        return Api(self.urls[name], self.admin_token)

    def leader(self):
        """The name of the master that says it leads, or None."""
        for name in self.master_names:
            h = health(self.urls[name], timeout=1)
            if h and h.get("role") == "leader":
                return name
        return None

    def wait_leader(self, name, timeout=30):
        wait_until(lambda: (health(self.urls[name], timeout=1) or {}).get("role") == "leader", timeout,
                   f"{name} to lead")

    def _veth(self, name):
        return self.topo._veth(self.topo.node(name))

    def cut(self, name):
        """Takes the bridge side of the node's link down: its packets are
        dropped, so connections to and from it time out."""
        subprocess.run(["ip", "link", "set", self._veth(name), "down"], check=True)

    def mend(self, name):
        subprocess.run(["ip", "link", "set", self._veth(name), "up"], check=True)

    def master_log(self, name):
        with open(self.masters[name].logpath, errors="replace") as f:
            return f.read()

    def close(self):
        for name in self.master_names:
            try:
                self.mend(name)
            except subprocess.CalledProcessError:
                pass
        for m in self.masters.values():
            if m.alive():
                m.kill(signal.SIGCONT)
        return super().close()


class ha(multinode):
    """Context manager: a Topology of masters and agents and an HACluster
    on it, closed even when the test fails; sanitizer reports or leftovers
    fail the test."""

    def __init__(self, name, masters=("m1", "m2"), agents=("a1", "a2"), **kw):
        super().__init__(name, names=list(masters) + list(agents), **kw)
        self.masters, self.agents = masters, agents

    def make(self, topo):
        c = HACluster(self.name, topo, self.masters, **self.kw)
        c.agent_nodes = list(self.agents)
        return c
