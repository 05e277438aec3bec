"""Several "nodes" on one machine for end-to-end tests: a Linux bridge in the
root network namespace holding a private /24, and N network namespaces joined
to it by veth pairs, each with its own address, interface name, hostname and
/etc/hosts.

    with Topology(nodes=2) as topo:
        topo.gateway                 # "10.213.X.1", on the bridge, root namespace
        a, b = topo.nodes            # Node(name="n1", ns=..., addr="10.213.X.2", hostname=..., ifname="eth0")
        subprocess.run(topo.argv(a, ["hostname"]))   # runs inside node a

Everything a Topology makes is named with PREFIX and its own short id and is
removed by close(): on leaving the `with`, at interpreter exit (atexit, also
after SIGTERM), and, when the process died without either (SIGKILL, a crash),
by sweep(), which every new Topology runs first and which removes what a dead
owner left behind. What an owner made is written down in STATE_DIR/ID.json
before it is made, so a sweep never touches a live run's objects (another
engineer's, or a concurrent test's) and never anything without our prefix.

Processes run inside a node through `ip netns exec`, which gives them the
node's network namespace and bind-mounts /etc/netns/NS/{hosts,hostname} over
/etc; `unshare --uts` gives them the node's hostname. `ip netns exec` also
remounts /sys for the namespace, which hides the cgroup hierarchies under
/sys/fs/cgroup; the wrapper mounts them again (the same hierarchies, in the
command's private mount namespace only) so an agent inside a node has cgroups
exactly as on a real machine.
"""
import atexit
import json
import os
import random
import secrets
import shlex
import shutil
import signal
import subprocess
import time

PREFIX = "ytnn"                     # yard test network namespace
STATE_DIR = "/run/ytnn-e2e"
NETNS_ETC = "/etc/netns"
IFNAME = "eth0"                     # the interface name inside every node


class TopologyError(RuntimeError):
    """The topology could not be built (no root, no veth/bridge support, ...)."""


class Node:
    """One namespace: `name` is what tests call it (and the agent name by
    default), `ns` the network namespace, `addr` its IPv4 address on the
    bridge, `hostname` the name processes inside see, `ifname` its interface."""

    def __init__(self, index, name, ns, addr, hostname, ifname=IFNAME):
        self.index = index
        self.name = name
        self.ns = ns
        self.addr = addr
        self.hostname = hostname
        self.ifname = ifname

    def __repr__(self):
        return f"Node({self.name}, ns={self.ns}, addr={self.addr}, hostname={self.hostname})"


def _ip(*args, check=True, ns=None):
    argv = ["ip"] + (["-n", ns] if ns else []) + list(args)
    r = subprocess.run(argv, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise TopologyError(f"'{' '.join(argv)}' failed: {r.stderr.strip() or r.returncode}")
    return r


def _proc_start(pid):
    """The start time of pid in clock ticks since boot (tells a reused pid apart)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(") ", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _owner_alive(pid, start):
    return pid is not None and _proc_start(pid) == start


def _kill_pids(pids, timeout=10):
    """SIGKILLs pids and waits until they are gone (reaped or zombies of others)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().rsplit(") ", 1)[1][0] == "Z":
                        break
            except OSError:
                break
            time.sleep(0.02)


def _ns_pids(ns):
    r = _ip("netns", "pids", ns, check=False)
    return [int(p) for p in r.stdout.split() if p.isdigit()] if r.returncode == 0 else []


def _cgroup_remount_script():
    """Shell commands that mount again, inside `ip netns exec`'s fresh /sys,
    every filesystem the root namespace has at or under /sys/fs/cgroup."""
    cmds = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            root, mnt = fields[3], fields[4].replace("\\040", " ")
            if not (mnt == "/sys/fs/cgroup" or mnt.startswith("/sys/fs/cgroup/")) or root != "/":
                continue
            fstype, opts = rfields[0], [o for o in rfields[2].split(",") if o not in ("rw", "ro")]
            q = shlex.quote(mnt)
            if fstype == "tmpfs":
                cmds.append(f"mount -t tmpfs -o mode=755 tmpfs {q}")
            elif fstype == "cgroup":
                # the controllers and name= select the same hierarchy again
                opts = [o for o in opts if not o.startswith("release_agent=")]
                cmds.append(f"mkdir -p {q} && mount -t cgroup -o {shlex.quote(','.join(opts))} cgroup {q}")
            elif fstype == "cgroup2":
                cmds.append(f"mkdir -p {q} && mount -t cgroup2 cgroup2 {q}")
    return "; ".join(cmds)


def _used_subnets():
    """Third octets of 10.213.X.0/24 already in use in the root namespace."""
    used = set()
    out = _ip("-4", "-o", "addr", "show", check=False).stdout + _ip("-4", "route", "show", check=False).stdout
    for word in out.split():
        if word.startswith("10.213."):
            parts = word.split("/")[0].split(".")
            if len(parts) == 4 and parts[2].isdigit():
                used.add(int(parts[2]))
    return used


def _our_objects():
    """Every namespace, link and /etc/netns dir named with PREFIX, by owner id."""
    objs = {}
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(PREFIX + "-"):
            objs.setdefault(name.split("-")[1], {"ns": [], "links": [], "etc": []})["ns"].append(name)
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":", 2)
        if len(parts) < 3:
            continue
        name = parts[1].strip().split("@")[0]
        if name.startswith(PREFIX) and len(name) > len(PREFIX) + 4:
            objs.setdefault(name[len(PREFIX):len(PREFIX) + 4], {"ns": [], "links": [], "etc": []})["links"].append(name)
    if os.path.isdir(NETNS_ETC):
        for name in os.listdir(NETNS_ETC):
            if name.startswith(PREFIX + "-"):
                objs.setdefault(name.split("-")[1], {"ns": [], "links": [], "etc": []})["etc"].append(name)
    return objs


def _remove(ns=(), links=(), etc=(), pids=(), cgroups=(), dirs=()):
    """Removes the given objects, killing every process in the namespaces
    first; missing objects are fine. Returns the errors met (strings)."""
    errors = []
    procs = [p for n in ns for p in _ns_pids(n)]
    procs += [pid for pid, start in pids if _owner_alive(pid, start)]
    _kill_pids(procs)
    if dirs:
        import harness  # only when a cluster registered its dirs
        for d in dirs:
            harness.kill_task_leftovers(d)
    if cgroups:
        import harness
        harness.remove_cgroups(set(cgroups))
    for name in links:
        r = _ip("link", "del", name, check=False)
        if r.returncode and "Cannot find device" not in r.stderr and "does not exist" not in r.stderr:
            errors.append(f"ip link del {name}: {r.stderr.strip()}")
    for name in ns:
        for _ in range(50):
            r = _ip("netns", "del", name, check=False)
            if r.returncode == 0 or "No such file" in r.stderr:
                break
            time.sleep(0.05)  # busy: a process was still leaving
        else:
            errors.append(f"ip netns del {name}: {r.stderr.strip()}")
    for name in etc:
        shutil.rmtree(os.path.join(NETNS_ETC, name), ignore_errors=True)
    for d in (NETNS_ETC, STATE_DIR):
        try:
            os.rmdir(d)  # only if empty: nobody else uses it now
        except OSError:
            pass
    return errors


def _read_state(tid):
    """(owner alive?, state dict) for topology tid; ({}) when it has no state file."""
    try:
        with open(os.path.join(STATE_DIR, tid + ".json")) as f:
            st = json.load(f)
    except (OSError, ValueError):
        return False, {}
    return _owner_alive(st.get("pid"), st.get("start")), st


def sweep():
    """Removes what earlier Topologies whose owner process is gone left behind
    (the state file says who owns what). Live owners' objects are untouched.
    Returns the ids swept, for a log line."""
    if not shutil.which("ip"):
        return []
    swept = []
    ids = set(_our_objects())
    if os.path.isdir(STATE_DIR):
        ids |= {fn.split(".")[0] for fn in os.listdir(STATE_DIR)}
    for tid in sorted(ids):
        # read after listing: a topology writes its state before making
        # anything, so an object seen above whose state is not here yet
        # cannot belong to a live owner
        alive, st = _read_state(tid)
        if alive:
            continue
        o = _our_objects().get(tid, {"ns": [], "links": [], "etc": []})
        _remove(ns=o["ns"], links=o["links"], etc=o["etc"],
                pids=[tuple(p) for p in st.get("pids", [])],
                cgroups=st.get("cgroups", []), dirs=st.get("dirs", []))
        for suffix in (".json", ".json.tmp"):
            try:
                os.unlink(os.path.join(STATE_DIR, tid + suffix))
            except OSError:
                pass
        swept.append(tid)
    try:
        os.rmdir(STATE_DIR)
    except OSError:
        pass
    return swept


_sigterm_installed = False


def _sigterm_exit(signum, frame):
    raise SystemExit(128 + signum)


def _exit_on_sigterm():
    """Makes SIGTERM run atexit handlers (raise SystemExit) when nobody else
    handles it, so a terminated test still removes its topology."""
    global _sigterm_installed
    if _sigterm_installed:
        return
    try:
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _sigterm_exit)
            _sigterm_installed = True
    except ValueError:  # not the main thread
        pass


class Topology:
    """A bridge with the root namespace at .1 and `nodes` namespaces at .2,
    .3, ...; a context manager. Node names are n1..nN unless `names` says."""

    def __init__(self, nodes=2, names=None):
        self.names = list(names) if names else [f"n{i + 1}" for i in range(nodes)]
        self.nodes = []
        self.id = None
        self.subnet = None
        self.gateway = None
        self.bridge = None
        self._state = None
        self._closed = True
        self._remount = None

    # -- building --

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, et, ev, tb):
        errors = self.close()
        if errors and et is None:
            raise TopologyError("cleanup failed: " + "; ".join(errors))
        return False

    def _check_host(self):
        if os.geteuid() != 0:
            raise TopologyError("network namespaces need root")
        for tool in ("ip", "unshare", "sh", "mount"):
            if not shutil.which(tool):
                raise TopologyError(f"'{tool}' not found (iproute2 / util-linux)")

    def _save(self):
        tmp = os.path.join(STATE_DIR, self.id + ".json.tmp")
        for attempt in range(5):  # another run may rmdir an empty STATE_DIR meanwhile
            try:
                os.makedirs(STATE_DIR, exist_ok=True)
                with open(tmp, "w") as f:
                    json.dump(self._state, f)
                os.rename(tmp, os.path.join(STATE_DIR, self.id + ".json"))
                return
            except FileNotFoundError:
                if attempt == 4:
                    raise

    def start(self):
        self._check_host()
        sweep()
        taken = set(_our_objects())
        self.id = secrets.token_hex(2)
        while self.id in taken or os.path.exists(os.path.join(STATE_DIR, self.id + ".json")):
            self.id = secrets.token_hex(2)
        used = _used_subnets()
        free = [x for x in range(1, 255) if x not in used]
        if not free:
            raise TopologyError("every 10.213.X.0/24 is in use")
        x = random.choice(free)
        self.subnet = f"10.213.{x}.0/24"
        self.gateway = f"10.213.{x}.1"
        self.bridge = f"{PREFIX}{self.id}br"
        self.nodes = [Node(i + 1, name, f"{PREFIX}-{self.id}-{name}", f"10.213.{x}.{i + 2}",
                           f"{PREFIX}{self.id}-{name}") for i, name in enumerate(self.names)]
        links = [self.bridge] + [self._veth(n) for n in self.nodes]
        self._state = {"pid": os.getpid(), "start": _proc_start(os.getpid()), "subnet": self.subnet,
                       "ns": [n.ns for n in self.nodes], "links": links,
                       "etc": [n.ns for n in self.nodes], "pids": [], "cgroups": [], "dirs": []}
        self._save()  # before anything exists: a crash from here on is swept
        self._closed = False
        atexit.register(self.close)
        _exit_on_sigterm()
        try:
            self._build(x)
        except BaseException:
            self.close()
            raise
        self._remount = _cgroup_remount_script()
        return self

    def _veth(self, node):
        return f"{PREFIX}{self.id}v{node.index}"

    def _build(self, x):
        r = _ip("link", "add", self.bridge, "type", "bridge", check=False)
        if r.returncode:
            raise TopologyError(f"cannot create bridge '{self.bridge}' (kernel without bridge "
                                f"support, CONFIG_BRIDGE?): {r.stderr.strip()}")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        hosts = "127.0.0.1\tlocalhost\n" + f"{self.gateway}\t{PREFIX}{self.id}-gw\n" + \
            "".join(f"{n.addr}\t{n.hostname}\n" for n in self.nodes)
        for n in self.nodes:
            _ip("netns", "add", n.ns)
            etc = os.path.join(NETNS_ETC, n.ns)
            os.makedirs(etc, exist_ok=True)
            with open(os.path.join(etc, "hosts"), "w") as f:
                f.write(hosts)
            with open(os.path.join(etc, "hostname"), "w") as f:
                f.write(n.hostname + "\n")
            peer = f"{PREFIX}{self.id}p{n.index}"
            r = _ip("link", "add", self._veth(n), "type", "veth", "peer", "name", peer,
                    "netns", n.ns, check=False)
            if r.returncode:
                raise TopologyError(f"cannot create veth pair '{self._veth(n)}' (kernel without "
                                    f"veth support, CONFIG_VETH?): {r.stderr.strip()}")
            _ip("link", "set", self._veth(n), "master", self.bridge)
            _ip("link", "set", self._veth(n), "up")
            _ip("link", "set", peer, "name", n.ifname, ns=n.ns)
            _ip("addr", "add", f"{n.addr}/24", "dev", n.ifname, ns=n.ns)
            _ip("link", "set", n.ifname, "up", ns=n.ns)
            _ip("link", "set", "lo", "up", ns=n.ns)

    # -- using --

    def node(self, which):
        """A Node by name, index (0-based) or itself."""
        if isinstance(which, Node):
            return which
        if isinstance(which, int):
            return self.nodes[which]
        for n in self.nodes:
            if n.name == which:
                return n
        raise KeyError(which)

    def argv(self, node, argv, cgroups=True):
        """argv run inside node: its network namespace, /etc/hosts and
        hostname, and (unless cgroups is false: saves a dozen mounts) the
        host's cgroup hierarchies. The exec chain keeps one pid, so the
        returned command's pid is argv's own (signals reach it)."""
        n = self.node(node)
        script = "set -e; " + (self._remount + "; " if self._remount and cgroups else "") + \
            'hostname "$0"; exec "$@"'
        return ["ip", "netns", "exec", n.ns, "unshare", "--uts", "sh", "-c", script,
                n.hostname, *argv]

    def run(self, node, argv, cgroups=True, **kw):
        """subprocess.run of argv inside node."""
        return subprocess.run(self.argv(node, argv, cgroups), **kw)

    def popen(self, node, argv, cgroups=True, **kw):
        """subprocess.Popen of argv inside node."""
        return subprocess.Popen(self.argv(node, argv, cgroups), **kw)

    def adopt(self, pid=None, cgroup=None, directory=None):
        """Records something made for this topology outside its namespaces (a
        master's pid, an agent's cgroup subtree, a cluster's temp dir) so a
        sweep after a crash removes it too."""
        if self._closed:
            return
        if pid is not None:
            self._state["pids"].append([pid, _proc_start(pid)])
        if cgroup is not None and cgroup not in self._state["cgroups"]:
            self._state["cgroups"].append(cgroup)
        if directory is not None and directory not in self._state["dirs"]:
            self._state["dirs"].append(directory)
        self._save()

    # -- cleaning up --

    def close(self):
        """Kills every process inside the nodes and removes the namespaces,
        links, /etc/netns dirs and the state file. Idempotent. Returns the
        errors met (a list of strings; empty when everything is gone)."""
        if self._closed:
            return []
        self._closed = True
        try:
            atexit.unregister(self.close)
        except Exception:
            pass
        st = self._state
        errors = _remove(ns=st["ns"], links=st["links"], etc=st["etc"],
                         pids=[tuple(p) for p in st["pids"]], cgroups=st["cgroups"], dirs=[])
        left = _our_objects().get(self.id)
        if left and any(left.values()):
            errors.append(f"left behind: {left}")
        if not errors:
            try:
                os.unlink(os.path.join(STATE_DIR, self.id + ".json"))
                os.rmdir(STATE_DIR)
            except OSError:
                pass
        return errors
