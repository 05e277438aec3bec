"""A Trainyard cluster spread over several "nodes" on one machine: the master
in the root network namespace, listening on the bridge address of a
netns.Topology, and one agent inside each node's namespace, advertising the
node's address, with its own work dir and hostname.

    from multinode import multinode

    with multinode("ddp", nodes=2) as c:     # Topology + MultinodeCluster
        c.start_master()                     # listens on c.topo.gateway:0
        c.start_agents(gpus="sim:1")         # agent n1 in node n1, n2 in n2, ...
        _, job = c.api.submit(spec(...))     # everything Cluster offers
        c.api.wait_job(job["id"])
        c.topo.nodes[0].addr                 # a node's address, hostname, namespace

Leaving the `with` stops the daemons, kills what they left, removes their
cgroups, then removes the namespaces, links and /etc/netns dirs; a test that
dies without leaving it is swept by the next Topology (see netns.py).
"""
from harness import Cluster, TestFailure
from netns import Topology, TopologyError  # noqa: F401  (re-exported for tests)


class MultinodeCluster(Cluster):
    """A Cluster whose master listens on the topology's bridge address and
    whose agents run inside the topology's nodes."""

    def __init__(self, name, topo, **kw):
        super().__init__(name, **kw)
        self.topo = topo
        self.host = topo.gateway
        topo.adopt(directory=self.dir)

    def start_master(self):
        m = super().start_master()
        self.topo.adopt(pid=m.p.pid)
        return m

    def start_agent(self, node, gpus="sim:1", dev_dir=None, extra=None, name=None,
                    advertise=True):
        """Starts an agent inside `node` (a netns.Node, its name or index)
        named `name` (default: the node's name), advertising the node's
        address unless advertise is false; extra: more agent arguments (for
        example ["--ports", "30000-32000"]). Waits for its readiness line."""
        n = self.topo.node(node)
        args = (["--advertise-addr", n.addr] if advertise else []) + list(extra or [])
        a = super().start_agent(name or n.name, gpus=gpus, dev_dir=dev_dir, extra=args,
                                wrap=lambda argv: self.topo.argv(n, argv))
        a.node = n
        for base in self.cgroup_bases:
            self.topo.adopt(cgroup=base)
        return a

    def start_agents(self, gpus="sim:1", dev_dir=None, extra=None):
        """One agent in every node; returns them in node order."""
        return [self.start_agent(n, gpus=gpus, dev_dir=dev_dir, extra=extra)
                for n in self.topo.nodes]


class multinode:
    """Context manager: a Topology of `nodes` namespaces and a
    MultinodeCluster on it; closes both even when the test fails, and fails
    the test on sanitizer reports or on anything left behind."""

    def __init__(self, name, nodes=2, names=None, **kw):
        self.name = name
        self.nodes = nodes
        self.names = names
        self.kw = kw
        self.topo = None
        self.c = None

    def make(self, topo):
        """The cluster on topo (a subclass makes another kind)."""
        return MultinodeCluster(self.name, topo, **self.kw)

    def __enter__(self):
        self.topo = Topology(nodes=self.nodes, names=self.names).start()
        try:
            self.c = self.make(self.topo)
        except BaseException:
            self.topo.close()
            raise
        return self.c

    def __exit__(self, et, ev, tb):
        try:
            findings = self.c.close()
        finally:
            errors = self.topo.close()
        if et is None and (findings or errors):
            raise TestFailure("\n".join(findings + [f"topology cleanup: {e}" for e in errors]))
        return False
