"""A throwaway Debian 12 machine for the package test: a debootstrap'd
minbase root (the tarball tests/e2e/engines.py caches in BUILD/test-cache)
unpacked into a temp dir, prepared with commands run in it by
`systemd-nspawn --pipe` (host network: apt reaches Debian's mirror), then
booted with `systemd-nspawn -b` on a private network (its own loopback, so
its services' ports never meet the host's) and driven through `nsenter`
into its namespaces, so that `systemctl` inside talks to its own systemd.

    m = Machine(build_dir)
    m.create()                         # unpack the rootfs
    m.run("apt-get install -y ...")    # before boot: nspawn --pipe, host network
    m.boot()                           # systemd as PID 1 of the machine
    m.sh("systemctl start x")          # after boot: (rc, output) of sh -c, inside
    m.close()                          # poweroff, then remove everything

Several machines on a network of their own (tests/package/ansible_role.py):

    net = Network()
    net.create()                       # a network namespace holding a bridge, net.gateway on it
    a = Machine(build_dir); a.create(hostname="a")
    b = Machine(build_dir); b.create(hostname="b", clone=a)   # a copy of a's root
    a.boot(net, net.addr(2)); b.boot(net, net.addr(3))       # each on its own address
    subprocess.run(net.argv(["ssh", net.addr(2), ...]))      # from the bridge's side
    b.close(); a.close(); net.close()

A Network is a network namespace the test makes, not the host's: the
bridge, the machines' veth ends and whatever runs through net.argv() live
there, so no packet of the machines touches the host's interfaces.

Cgroups: each nspawn runs in cgroups of its own (a child of our own cgroup
in the name=systemd, cgroup2 and cpu, cpuacct, memory, pids and devices
hierarchies), which nspawn makes the machine's cgroup namespace root. On a
cgroup v1 host nspawn mounts the v1 controllers read-only in the machine
(it delegates none to a container), so the agent there could make no task
cgroup; boot() remounts them read-write inside the machine, which hands the
machine only its own subtree, as a runtime that delegates cgroups would.

Everything a Machine makes (its dir, its cgroups, what nspawn keeps of it
in /run/systemd/nspawn), and a Network's namespace, is removed by close():
on the way out of the test, at interpreter exit (atexit, also after
SIGTERM), and, when the process died without either, by sweep(), which
every new Machine and Network runs first. What either makes is written
down in STATE_DIR/ID.json before it is made, so a sweep only removes what a
dead owner left behind.
"""
import atexit
import json
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))

import engines  # noqa: E402  base_rootfs, remove_tree
import harness  # noqa: E402  TestFailure, wait_until
import netns  # noqa: E402  owner liveness, SIGTERM -> atexit

PREFIX = "yard-pkgtest-"
STATE_DIR = "/run/yard-package-test"
NSPAWN_RUN = "/run/systemd/nspawn"
NETNS_RUN = "/run/netns"                 # where `ip netns add` keeps a namespace
# the hierarchies a machine gets cgroups of its own in: nspawn's and systemd's
# own (name=systemd, cgroup2), and those the agent makes task groups in
DELEGATED = ("name=systemd", "", "cpu", "cpuacct", "memory", "pids", "devices")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ENV = {"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb",
       "SYSTEMD_PAGER": "cat", "SYSTEMD_COLORS": "0", "DEBIAN_FRONTEND": "noninteractive"}


# -- cgroups --

def _hierarchies():
    """{key: mount point} of the cgroup hierarchies mounted here: key is the
    v1 controller list as /proc/self/cgroup writes it ("cpu", "memory",
    "name=systemd", "cpu,cpuacct") or "" for the cgroup2 one."""
    out = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            fields, pfields = pre.split(), post.split()
            if len(pfields) < 3 or pfields[0] not in ("cgroup", "cgroup2"):
                continue
            if pfields[0] == "cgroup2":
                out.setdefault("", fields[4])
                continue
            opts = [o for o in pfields[2].split(",")
                    if o not in ("rw", "ro") and (o.startswith("name=") or "=" not in o)]
            known = {"nosuid", "nodev", "noexec", "relatime", "clone_children", "xattr",
                     "noprefix", "cpuset_v2_mode", "favordynmods"}
            ctl = ",".join(sorted(o for o in opts if o not in known))
            out.setdefault(ctl, fields[4])
    return out


def _own_cgroups():
    """{key: our cgroup path in that hierarchy} from /proc/self/cgroup."""
    out = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctl, path = line.rstrip("\n").split(":", 2)
            out[",".join(sorted(ctl.split(","))) if ctl else ""] = path
    return out


def _delegated_dirs(name):
    """The cgroup dirs a machine named `name` runs in: a child of ours in each
    hierarchy whose controllers include one of DELEGATED. On a cgroup v2
    host, the one cgroup2 dir."""
    hier, own = _hierarchies(), _own_cgroups()
    dirs = []
    for key, mnt in sorted(hier.items()):
        if key not in own:
            continue
        wanted = key == "" or any(c in DELEGATED for c in key.split(","))
        if wanted:
            dirs.append(os.path.join(mnt, own[key].lstrip("/"), name))
    return dirs


def _cgroup_pids(top):
    pids = set()
    for dirpath, _, _ in os.walk(top):
        try:
            with open(os.path.join(dirpath, "cgroup.procs")) as f:
                pids.update(int(p) for p in f.read().split())
        except (OSError, ValueError):
            pass
    return pids


def remove_cgroups(dirs):
    """Kills every process in the cgroup trees `dirs` and removes them,
    deepest first. Returns the dirs that would not go."""
    left = []
    for top in dirs:
        if not os.path.isdir(top):
            continue
        for _ in range(3):
            pids = _cgroup_pids(top)
            if not pids:
                break
            netns._kill_pids(sorted(pids))
        for dirpath, _, _ in sorted(os.walk(top), key=lambda t: -len(t[0])):
            for _ in range(100):
                try:
                    os.rmdir(dirpath)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        if os.path.isdir(top):
            left.append(top)
    return left


# -- crash leftovers --

def _state_path(mid):
    return os.path.join(STATE_DIR, mid + ".json")


def _remove_netns(name):
    """Removes a Network's namespace: kills what still runs in it (an ssh
    connection kept open, a killed machine's nspawn), then deletes it and
    the bridge and veth ends in it. Returns the errors met."""
    if not name.startswith(PREFIX):
        return [f"not ours, not removed: network namespace {name!r}"]
    if not os.path.exists(os.path.join(NETNS_RUN, name)):
        return []
    r = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
    netns._kill_pids(sorted(int(p) for p in r.stdout.split() if p.isdigit()))
    for _ in range(50):
        r = subprocess.run(["ip", "netns", "del", name], capture_output=True, text=True)
        if r.returncode == 0 or not os.path.exists(os.path.join(NETNS_RUN, name)):
            return []
        time.sleep(0.05)  # busy: a process was still leaving
    return [f"ip netns del {name}: {r.stderr.strip()}"]


def _remove(st):
    """Removes one machine's or network's leftovers as its state names
    them: a machine's processes (all in its cgroups, or named by its dir),
    its dir, its cgroups and nspawn's runtime dir of it; a network's
    namespace."""
    if "netns" in st:
        return _remove_netns(st["netns"])
    errors = []
    d = st.get("dir", "")
    if not os.path.basename(d.rstrip("/")).startswith(PREFIX):
        return [f"not ours, not removed: {d!r}"]
    cgroups = [c for c in st.get("cgroups", []) if os.path.basename(c).startswith(PREFIX)]
    for c in cgroups:
        netns._kill_pids(sorted(_cgroup_pids(c)))
    if os.path.exists(d):
        errors += engines.remove_tree(d)
    left = remove_cgroups(cgroups)
    if left:
        errors.append("cgroups that would not go: " + " ".join(left))
    machine = st.get("machine", "")
    if machine.startswith(PREFIX):
        for sub in ("propagate", "unix-export"):
            shutil.rmtree(os.path.join(NSPAWN_RUN, sub, machine), ignore_errors=True)
    # the lock a killed nspawn leaves on the root dir (inode-DEV:INO)
    lock = st.get("lock", "")
    if lock.startswith(os.path.join(NSPAWN_RUN, "locks", "inode-")):
        try:
            os.unlink(lock)
        except FileNotFoundError:
            pass
    for sub in ("propagate", "locks", ""):  # nspawn's own dirs, once no one uses them
        try:
            os.rmdir(os.path.join(NSPAWN_RUN, sub))
        except OSError:
            pass
    return errors


def sweep():
    """Removes what machines and networks whose owner process is gone left
    behind. Returns the dirs and namespaces swept."""
    swept = []
    try:
        names = os.listdir(STATE_DIR)
    except FileNotFoundError:
        return swept
    for name in sorted(names):
        path = os.path.join(STATE_DIR, name)
        try:
            with open(path) as f:
                st = json.load(f)
        except (OSError, ValueError):
            continue
        if netns._owner_alive(st.get("pid"), st.get("start")):
            continue
        if not _remove(st):
            os.unlink(path)
        swept.append(st.get("dir") or st.get("netns") or name)
    try:
        os.rmdir(STATE_DIR)
    except OSError:
        pass
    return swept


# -- the machine --

class Machine:
    def __init__(self, build_dir, log=print):
        self.build_dir = build_dir
        self.log = log
        self.id = None
        self.dir = None        # PREFIX + id, under /var/tmp: root/ and the logs
        self.root = None       # the machine's root dir
        self.name = None       # its machine name (and host name)
        self.cgroups = []
        self.nspawn = None     # the booting nspawn (Popen)
        self.init_pid = None   # the machine's PID 1, as the host sees it
        self.addr = None       # its address on a Network
        self._network = self._addr = None
        self._powering_off = False
        self.boot_log = None
        self._closed = True
        self._state = None

    def create(self, hostname="yard-pkgtest", clone=None):
        """Sweeps dead runs' leftovers, then unpacks the cached debootstrap'd
        rootfs (making it first when it is not cached: a minute or two), or,
        with clone, copies the root of that Machine (created, not booted):
        what was installed in it is in this one too. hostname: the
        machine's /etc/hostname."""
        if os.geteuid() != 0:
            raise harness.TestFailure("the package test needs root (debootstrap, systemd-nspawn, cgroups)")
        for tool in ("systemd-nspawn", "nsenter", "tar"):
            if not shutil.which(tool):
                raise harness.TestFailure(f"'{tool}' is not installed (systemd-nspawn: Debian's "
                                          "systemd-container; make package-test installs it)")
        swept = sweep()
        if swept:
            self.log(f"swept the leftovers of dead package tests: {' '.join(swept)}")
        tarball = None
        if clone is None:
            try:
                tarball = engines.base_rootfs(self.build_dir)
            except engines.EngineUnavailable as e:
                raise harness.TestFailure(f"no Debian 12 rootfs to install into: {e.reason}") from None
        elif clone.nspawn is not None or not clone.root:
            raise harness.TestFailure("a machine can only be cloned when created and not booted")
        self.id = secrets.token_hex(4)
        self.name = PREFIX + self.id
        self.dir = os.path.join("/var/tmp", self.name)
        self.root = os.path.join(self.dir, "root")
        self.cgroups = _delegated_dirs(self.name)
        self._state = {"pid": os.getpid(), "start": netns._proc_start(os.getpid()),
                       "dir": self.dir, "machine": self.name, "cgroups": self.cgroups}
        self._save()  # before anything exists: a crash from here on is swept
        self._closed = False
        atexit.register(self.close)
        netns._exit_on_sigterm()
        os.makedirs(self.root, 0o755)
        st = os.stat(self.root)
        self._state["lock"] = os.path.join(NSPAWN_RUN, "locks", f"inode-{st.st_dev}:{st.st_ino}")
        self._save()
        for c in self.cgroups:
            os.mkdir(c)
        if tarball:
            argv, what = ["tar", "-C", self.root, "--numeric-owner", "-xf", tarball], f"unpacking {tarball}"
        else:
            argv, what = ["cp", "-a", "--reflink=auto", clone.root + "/.", self.root], f"copying {clone.root}"
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode:
            raise harness.TestFailure(f"{what}: {r.stderr.strip()[-1000:]}")
        with open(os.path.join(self.root, "etc", "hostname"), "w") as f:
            f.write(hostname + "\n")
        # an empty machine-id: systemd makes one of its own at each boot, so
        # clones are told apart (journal, DHCP, D-Bus)
        with open(os.path.join(self.root, "etc", "machine-id"), "w"):
            pass
        shutil.copyfile("/etc/resolv.conf", os.path.join(self.root, "etc", "resolv.conf"))

    def _save(self):
        os.makedirs(STATE_DIR, exist_ok=True)
        with open(_state_path(self.id) + ".tmp", "w") as f:
            json.dump(self._state, f)
        os.rename(_state_path(self.id) + ".tmp", _state_path(self.id))

    def _in_cgroups(self, argv):
        """argv started by a shell that first moves itself into our cgroups."""
        moves = "; ".join(f"echo $$ > {shlex.quote(os.path.join(c, 'cgroup.procs'))}"
                          for c in self.cgroups)
        return ["/bin/sh", "-c", f"{moves}; exec \"$@\"" if moves else 'exec "$@"', "sh"] + argv

    def _nspawn(self, *opts, network=None):
        argv = ["systemd-nspawn", "--quiet", "--register=no", "--keep-unit",
                f"--machine={self.name}", "-D", self.root, *opts]
        return self._in_cgroups(network.argv(argv) if network else argv)

    def run(self, script, timeout=600):
        """Runs sh -c script in the (not booted) machine, with the host's
        network; fails with its output unless it exits 0. Returns its
        stdout (stderr has nspawn's own messages too)."""
        argv = self._nspawn("--pipe", "--setenv=DEBIAN_FRONTEND=noninteractive", "--",
                            "/bin/sh", "-c", script)
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=timeout, env=ENV)
        except subprocess.TimeoutExpired:
            raise harness.TestFailure(f"'{script}' did not finish in {timeout}s in the machine") from None
        if r.returncode:
            raise harness.TestFailure(f"'{script}' exited with {r.returncode} in the machine:\n"
                                      f"{(r.stdout + r.stderr)[-4000:]}")
        return r.stdout

    def boot(self, network=None, addr=None, timeout=120):
        """Boots the machine (systemd-nspawn -b) and waits until its systemd
        has finished starting up. Fails with the boot log when it does not
        boot. Without a network its network is its own loopback; with one
        (a Network), its interface host0 is a port of the network's bridge
        and has the address addr (/24)."""
        self.boot_start(network, addr)
        return self.boot_wait(timeout)

    def boot_start(self, network=None, addr=None):
        """Starts booting; boot_wait() waits for it. Several machines boot
        at once this way."""
        if network and not addr:
            raise harness.TestFailure("a machine on a network needs its address")
        self._network, self._addr = network, addr
        self.boot_log = os.path.join(self.dir, "boot.log")
        log = open(self.boot_log, "wb")
        opts = [f"--network-bridge={network.bridge}"] if network else ["--private-network"]
        self.nspawn = subprocess.Popen(self._nspawn(*opts, "--boot", network=network), stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                       env=ENV)
        log.close()

    def boot_wait(self, timeout=120):
        """The rest of boot(): waits until the machine booted, then gives
        it its address on the network."""

        def init():
            if self.nspawn.poll() is not None:
                raise harness.TestFailure(f"systemd-nspawn -b exited with {self.nspawn.returncode}:\n"
                                          f"{self.boot_tail()}")
            for pid in _children(self.nspawn.pid):
                if _comm(pid) == "systemd":
                    return pid
            return None
        self.init_pid = harness.wait_until(init, 30, "the machine's systemd to start")
        if self._network:
            # nspawn made host0 before it started init; the host's ip sets it up
            addr = self._addr
            r = subprocess.run(["nsenter", f"--target={self.init_pid}", "--net", "--", "/bin/sh", "-c",
                                f"ip addr add {addr}/24 dev host0 && ip link set host0 up"],
                               capture_output=True, text=True, env=ENV)
            if r.returncode:
                raise harness.TestFailure(f"giving the machine's host0 the address {addr}: "
                                          f"{r.stderr.strip()}")
            self.addr = addr
        # `is-system-running --wait` returns once the boot is done (running or degraded)
        deadline = time.monotonic() + timeout
        while True:
            rc, out = self.sh("systemctl is-system-running --wait", timeout=timeout, check=False)
            state = out.strip().splitlines()[-1] if out.strip() else ""
            if state in ("running", "degraded"):
                break
            if time.monotonic() > deadline:
                raise harness.TestFailure(f"the machine did not finish booting in {timeout}s "
                                          f"(state {state!r}); boot log:\n{self.boot_tail()}")
            init()  # still there?
            time.sleep(0.2)
        self._delegate_v1_controllers()
        return state

    def _delegate_v1_controllers(self):
        """Remounts read-write, inside the machine, the v1 controller
        hierarchies nspawn mounted read-only (only the machine's own subtree
        of each is visible there)."""
        rc, out = self.sh("awk '$3 == \"cgroup\" { print $2 }' /proc/self/mounts", check=True)
        for mnt in out.split():
            if os.path.basename(mnt) in ("cpu", "cpuacct", "cpu,cpuacct", "memory", "pids", "devices"):
                self.sh(f"mount -o remount,bind,rw {shlex.quote(mnt)}", check=True)

    def sh(self, script, timeout=120, check=True, user=None):
        """Runs sh -c script inside the booted machine (all its namespaces);
        returns (exit status, stdout and stderr together). check: fail
        unless it exits 0."""
        argv = ["nsenter", f"--target={self.init_pid}", "--all", "--"]
        if user:
            argv += ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
        argv += ["/bin/sh", "-c", script]
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=timeout, env=ENV)
        except subprocess.TimeoutExpired:
            raise harness.TestFailure(f"'{script}' did not finish in {timeout}s in the machine") from None
        if check and r.returncode:
            raise harness.TestFailure(f"'{script}' exited with {r.returncode} in the machine:\n"
                                      f"{r.stdout[-4000:]}")
        return r.returncode, r.stdout

    def boot_tail(self, n=40):
        try:
            with open(self.boot_log, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
        except (OSError, TypeError):
            return ""

    def poweroff_start(self):
        """Starts an orderly shutdown (SIGTERM to nspawn: the machine's
        systemd powers off); close() waits for it. Several machines power
        off at once this way."""
        if self.nspawn and self.nspawn.poll() is None and not self._powering_off:
            self.nspawn.send_signal(signal.SIGTERM)
            self._powering_off = True

    def poweroff(self, timeout=60):
        """Shuts the machine down the orderly way (SIGTERM to nspawn: the
        machine's systemd powers off) and waits; True when it did in time."""
        if not self.nspawn or self.nspawn.poll() is not None:
            return True
        self.poweroff_start()
        try:
            self.nspawn.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def close(self):
        """Powers the machine off (killing it when it will not go) and
        removes all it made. Returns the errors met (empty: all gone)."""
        if self._closed:
            return []
        self._closed = True
        errors = []
        if not self.poweroff():
            errors.append(f"the machine did not power off in 60s; killed. Boot log:\n{self.boot_tail(15)}")
        errors += _remove(self._state)
        if not errors:
            try:
                os.unlink(_state_path(self.id))
                os.rmdir(STATE_DIR)
            except OSError:
                pass
        if self.nspawn and self.nspawn.poll() is None:
            self.nspawn.kill()
        if self.nspawn:
            self.nspawn.wait()
        return errors


# -- a network between machines --

class Network:
    """A private /24 between machines: a network namespace of our own (not
    the host's) holding a bridge with gateway (.1) on it. Machines booted on
    it get a veth port of the bridge each (boot(network, addr)); argv()
    runs a command in the namespace, where it reaches every machine."""

    SUBNET = "10.231.0"    # inside our own namespace: it meets no host route
    bridge = "br0"

    def __init__(self, log=print):
        self.log = log
        self.id = None
        self.ns = None
        self.gateway = f"{self.SUBNET}.1"
        self._closed = True
        self._state = None

    def addr(self, i):
        """The i-th address of the subnet (2..254; 1 is the gateway's)."""
        return f"{self.SUBNET}.{i}"

    def create(self):
        if os.geteuid() != 0:
            raise harness.TestFailure("a test network needs root (network namespaces, a bridge)")
        for tool in ("ip", "nsenter"):
            if not shutil.which(tool):
                raise harness.TestFailure(f"'{tool}' is not installed (Debian: iproute2, util-linux)")
        swept = sweep()
        if swept:
            self.log(f"swept the leftovers of dead package tests: {' '.join(swept)}")
        self.id = secrets.token_hex(4)
        self.ns = PREFIX + "net-" + self.id
        self._state = {"pid": os.getpid(), "start": netns._proc_start(os.getpid()), "netns": self.ns}
        os.makedirs(STATE_DIR, exist_ok=True)
        with open(_state_path(self.id) + ".tmp", "w") as f:
            json.dump(self._state, f)
        os.rename(_state_path(self.id) + ".tmp", _state_path(self.id))
        self._closed = False
        atexit.register(self.close)
        netns._exit_on_sigterm()
        for argv in (["ip", "netns", "add", self.ns],
                     ["ip", "-n", self.ns, "link", "set", "lo", "up"],
                     ["ip", "-n", self.ns, "link", "add", self.bridge, "type", "bridge"],
                     ["ip", "-n", self.ns, "addr", "add", f"{self.gateway}/24", "dev", self.bridge],
                     ["ip", "-n", self.ns, "link", "set", self.bridge, "up"]):
            r = subprocess.run(argv, capture_output=True, text=True, env=ENV)
            if r.returncode:
                raise harness.TestFailure(f"'{' '.join(argv)}': {r.stderr.strip()}")

    def argv(self, argv):
        """argv run in the network's namespace (and the host's otherwise)."""
        return ["nsenter", f"--net={os.path.join(NETNS_RUN, self.ns)}", "--"] + list(argv)

    def close(self):
        """Removes the namespace, killing what still runs in it: close the
        machines on it first. Returns the errors met."""
        if self._closed:
            return []
        self._closed = True
        errors = _remove_netns(self.ns)
        if not errors:
            try:
                os.unlink(_state_path(self.id))
                os.rmdir(STATE_DIR)
            except OSError:
                pass
        return errors


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except (OSError, ValueError):
        return []


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""
