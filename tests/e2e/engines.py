"""Container engines for end-to-end tests: a private Docker Engine (containerd
+ dockerd) or a private Podman API service, each started here as root with all
of its state in its own temp dir, spoken to over its unix socket with nothing
but the standard library (no docker SDK, no docker CLI).

    with DockerEngine() as eng:                  # or PodmanEngine(); started here
        ref = import_image(eng, base_rootfs(build_dir), "yard-test/base", "a",
                           extra_files={"/etc/yard-image": b"a\\n"})
        status, doc = eng.api("POST", "/containers/create", {"Image": ref, "Cmd": ["true"]})
        # eng.socket for `yard agent --docker-socket`; eng.close() without `with`

An engine never touches another daemon on the machine (the default
/run/docker.sock, or one started by hand elsewhere): its sockets, pidfiles,
data roots, exec roots and configuration files are all under its temp dir,
and it reads no configuration of the host's (/etc/docker/daemon.json,
/etc/containerd/config.toml, /etc/containers/*).

Everything an engine makes is removed by close(): on leaving the `with`, at
interpreter exit (atexit, also after SIGTERM), and, when the process died
without either (SIGKILL, the e2e runner's time limit), by sweep(), which
every new engine runs first. An engine writes down which dir it owns in
STATE_DIR/ID.json before it makes anything, so a sweep only removes what a
dead owner left behind. Removing means: kill every process whose command line
or working dir names the dir, and all their descendants (the daemons,
containerd's shims, conmon, and the containers under them), unmount whatever
is still mounted under the dir (overlays, shm, bind mounts), then delete it.

EngineUnavailable is raised when an engine cannot run on this machine (not
installed, the daemon does not start, no network for debootstrap); run.py
reports a test that raises it as skipped, with the reason.
"""
import atexit
import fcntl
import http.client
import io
import json
import os
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
import urllib.parse

import harness
import netns

STATE_DIR = "/run/yard-e2e-engines"
PREFIX = "yde-"                     # yard docker engine: every temp dir's name
PODMAN_INIT = "/usr/libexec/podman/catatonit"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
SUITE = "bookworm"


class EngineUnavailable(harness.Skip):
    """The engine cannot run here; `reason` says why (for the skip line)."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class EngineError(harness.TestFailure):
    """The engine answered an API request with an unexpected status."""


# -- HTTP over a unix socket --

class _UnixHTTPConnection(http.client.HTTPConnection):
    """http.client's connection, connected to an AF_UNIX socket."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.unix_path)
        except OSError:
            s.close()
            raise
        self.sock = s


def _decode(data, ctype):
    """JSON when the body is JSON, a list of documents when it is a JSON
    stream (progress messages of /images/create), else the bytes."""
    if "json" not in (ctype or "") or not data:
        return data
    text = data.decode(errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        pass
    docs, dec, i = [], json.JSONDecoder(), 0
    try:
        while True:
            while i < len(text) and text[i].isspace():
                i += 1
            if i >= len(text):
                return docs
            doc, i = dec.raw_decode(text, i)
            docs.append(doc)
    except ValueError:
        return data


# -- processes and mounts --

def _procs():
    """{pid: (ppid, cmdline, cwd)} of every process we can read."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(") ", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                cwd = ""
        except (OSError, IndexError, ValueError):
            continue
        out[int(pid)] = (ppid, cmd, cwd)
    return out


def _under(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def kill_tree(root):
    """SIGKILLs every process whose command line names root or whose cwd is
    under it, and all their descendants (a container's processes are children
    of containerd's shim or of conmon), and waits for them to go. Returns the
    pids killed."""
    procs = _procs()
    me = os.getpid()
    mine = {pid for pid, (_, cmd, cwd) in procs.items()
            if pid != me and (root in cmd or _under(cwd, root))}
    children = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(mine)
    while todo:
        for c in children.get(todo.pop(), ()):
            if c not in mine and c != me:
                mine.add(c)
                todo.append(c)
    _forget_shim_sockets([procs[p][1] for p in mine])
    netns._kill_pids(sorted(mine))
    return sorted(mine)


def _forget_shim_sockets(cmdlines):
    """containerd's runc shims listen on /run/containerd/s/HASH whatever the
    daemon's --state (HASH: sha256 of "ADDRESS/NAMESPACE/ID", containerd 1.6);
    a killed shim leaves its socket there, so remove those of the shims we
    kill."""
    import hashlib
    for cmd in cmdlines:
        words = cmd.split()
        if not words or not os.path.basename(words[0]).startswith("containerd-shim"):
            continue
        opt = {words[i]: words[i + 1] for i in range(len(words) - 1) if words[i].startswith("-")}
        if not all(k in opt for k in ("-namespace", "-id", "-address")):
            continue
        key = os.path.join(opt["-address"], opt["-namespace"], opt["-id"])
        _unlink(os.path.join("/run/containerd/s", hashlib.sha256(key.encode()).hexdigest()))


def mounts_under(root):
    """Mount points at or under root, deepest first (from /proc/self/mountinfo)."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mnt = line.split()[4]
            for esc, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
                mnt = mnt.replace(esc, ch)
            if _under(mnt, root):
                found.append(mnt)
    return sorted(set(found), key=lambda m: (-m.count("/"), m))


def unmount_under(root):
    """Lazily unmounts everything mounted at or under root (a mount may sit on
    another, so it goes round until none is left). Returns the mount points
    that would not go."""
    for _ in range(10):
        left = mounts_under(root)
        if not left:
            return []
        for m in left:
            subprocess.run(["umount", "-l", m], capture_output=True)
    return mounts_under(root)


def remove_tree(root):
    """Kills what runs from root, unmounts what is mounted under it, deletes
    it. Deletes nothing while something is still mounted there: a bind mount
    of a host dir would be emptied too. Returns the errors met."""
    kill_tree(root)
    left = unmount_under(root)
    if left:
        return [f"still mounted, '{root}' kept: {' '.join(left)}"]
    shutil.rmtree(root, ignore_errors=True)
    if os.path.exists(root):
        return [f"cannot remove '{root}'"]
    return []


# -- crash leftovers --

def _state_path(eid):
    return os.path.join(STATE_DIR, eid + ".json")


def _read_state(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def sweep():
    """Removes what engines whose owner process is gone left behind: their
    processes, mounts, dirs and cgroups. Live owners' engines are untouched.
    Returns the dirs swept, for a log line."""
    swept = []
    try:
        names = os.listdir(STATE_DIR)
    except FileNotFoundError:
        return swept
    for name in sorted(names):
        path = os.path.join(STATE_DIR, name)
        st = _read_state(path) if name.endswith(".json") else None
        if st is None:
            # a .tmp being written now, or left by an owner that died while
            # writing it: nothing was made before the state file was complete
            if time.time() - _mtime(path) > 60:
                _unlink(path)
            continue
        if netns._owner_alive(st.get("pid"), st.get("start")):
            continue
        errors = _remove_engine(st)
        if not errors:
            _unlink(path)
        swept.append(st.get("dir", name))
    try:
        os.rmdir(STATE_DIR)
    except OSError:
        pass
    return swept


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _remove_engine(st):
    """Removes one engine's leftovers as its state file names them."""
    d = st.get("dir")
    if not d or not os.path.basename(d.rstrip("/")).startswith(PREFIX):
        return []  # never anything but our own temp dirs
    errors = []
    kill_tree(d)
    cgroups = list(st.get("cgroups", []))
    if st.get("kind") == "podman":
        # podman --cgroup-manager=cgroupfs: a container in
        # libpod_parent/libpod-ID, every conmon in libpod_parent/conmon
        cgroups += [f"libpod_parent/libpod-{c}" for c in _podman_container_ids(d)]
    if cgroups:
        harness.remove_cgroups(set(cgroups))
    if st.get("kind") == "podman":
        # shared with any other podman here: removed only when empty
        _rmdir_cgroups("libpod_parent/conmon")
        _rmdir_cgroups("libpod_parent")
    if os.path.exists(d):
        errors += remove_tree(d)
    return errors


def _podman_container_ids(d):
    """Ids of the containers of a podman engine's storage (for their cgroups)."""
    p = os.path.join(d, "root", "overlay-containers")
    if not os.path.isdir(p):
        p = os.path.join(d, "root", "vfs-containers")
    try:
        return [c for c in os.listdir(p) if len(c) == 64]
    except OSError:
        return []


def _rmdir_cgroups(rel):
    """Removes the (empty) cgroup rel in every hierarchy; busy ones stay."""
    base = "/sys/fs/cgroup"
    try:
        roots = [os.path.join(base, c) for c in os.listdir(base)] + [base]
    except OSError:
        return
    for r in roots:
        try:
            os.rmdir(os.path.join(r, rel))
        except OSError:
            pass


# -- engines --

class Engine:
    """What DockerEngine and PodmanEngine share: a temp dir with a state
    file, the API over `socket`, and close(). Made started (the constructor
    returns once the API answers, or raises EngineUnavailable); a context
    manager that closes it on leaving."""

    kind = "engine"

    def __init__(self):
        self.id = None
        self.dir = None
        self.socket = None
        self.procs = []              # (name, Popen, logpath) of the daemons, in start order
        self._closed = True
        self._state = None

    # -- life --

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        errors = self.close()
        if errors and et is None:
            raise harness.TestFailure(f"{self.kind} engine cleanup failed: " + "; ".join(errors))
        return False

    def _start_engine(self):
        """Sweeps dead runs' leftovers, then makes the dir and starts the
        daemons; on any failure removes what it made and raises."""
        if os.geteuid() != 0:
            raise EngineUnavailable(f"{self.kind} engine needs root")
        self._check_installed()
        sweep()
        self.id = secrets.token_hex(4)
        self.dir = os.path.join(_short_tmp(), PREFIX + self.id)
        self._state = {"pid": os.getpid(), "start": netns._proc_start(os.getpid()),
                       "kind": self.kind, "dir": self.dir, "cgroups": self._cgroups()}
        self._save()  # before anything exists: a crash from here on is swept
        self._closed = False
        atexit.register(self.close)
        netns._exit_on_sigterm()
        try:
            os.mkdir(self.dir, 0o711)
            self._start()
        except BaseException:
            self.close()
            raise

    def _save(self):
        tmp = _state_path(self.id) + ".tmp"
        for attempt in range(5):  # a sweep elsewhere may rmdir an empty STATE_DIR
            try:
                os.makedirs(STATE_DIR, exist_ok=True)
                with open(tmp, "w") as f:
                    json.dump(self._state, f)
                os.rename(tmp, _state_path(self.id))
                return
            except FileNotFoundError:
                if attempt == 4:
                    raise

    def _cgroups(self):
        return []

    def _check_installed(self):
        raise NotImplementedError

    def _start(self):
        raise NotImplementedError

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def _spawn(self, name, argv, env=None, preexec_fn=None):
        """Starts a daemon of the engine, its output in DIR/NAME.log."""
        logpath = self.path(name + ".log")
        with open(logpath, "ab") as log:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                 env=env, start_new_session=True, preexec_fn=preexec_fn)
        self.procs.append((name, p, logpath))
        return p

    def log_tail(self, name, n=25):
        """The last n lines of daemon `name`'s log."""
        try:
            with open(self.path(name + ".log"), "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""

    def _wait_ready(self, name, p, ready, timeout):
        """Waits until ready() is true while p runs; EngineUnavailable with
        the log's tail when p exits or time runs out."""
        deadline = time.monotonic() + timeout
        while not ready():
            if p.poll() is not None:
                raise EngineUnavailable(f"{name} exited with status {p.returncode} while starting; "
                                        f"its log ends:\n{self.log_tail(name)}")
            if time.monotonic() > deadline:
                raise EngineUnavailable(f"{name} not ready in {timeout}s; its log ends:\n"
                                        f"{self.log_tail(name)}")
            time.sleep(0.05)

    def _ping(self):
        try:
            status, _ = self.api("GET", "/_ping", timeout=5)
            return status == 200
        except OSError:
            return False

    def close(self):
        """Removes the containers, stops the daemons (SIGTERM, then SIGKILL),
        kills what is left of them, unmounts and deletes the temp dir.
        Idempotent. Returns the errors met (empty when everything is gone)."""
        if self._closed:
            return []
        self._closed = True
        try:
            atexit.unregister(self.close)
        except Exception:
            pass
        errors = []
        if self.socket and self.procs and all(p.poll() is None for _, p, _ in self.procs):
            try:
                for c in list_containers(self):
                    status, doc = self.api("DELETE", f"/containers/{c['Id']}?force=1&v=1", timeout=60)
                    if status not in (200, 204, 404):
                        errors.append(f"removing container {c['Id'][:12]}: HTTP {status}: {str(doc)[:300]}")
            except (OSError, harness.TestFailure, http.client.HTTPException) as e:
                errors.append(f"removing containers: {e}")
        for name, p, _ in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGTERM)
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    errors.append(f"{name} ignored SIGTERM for 30s; killed")
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait()
                except ProcessLookupError:
                    pass
        if errors:  # the logs go with the dir
            for name, _, _ in self.procs:
                errors.append(f"{name} log ends:\n{self.log_tail(name, 10)}")
        errors += _remove_engine(self._state)
        if not errors:
            _unlink(_state_path(self.id))
            try:
                os.rmdir(STATE_DIR)
            except OSError:
                pass
        return errors

    # -- API --

    def api(self, method, path, body=None, raw=None, headers=None, timeout=300):
        """One HTTP request to the engine's API over its unix socket: body is
        sent as JSON, raw (bytes or a binary file) as it is. Returns (status,
        the parsed JSON, a list of documents for a JSON stream, or bytes)."""
        hdrs = dict(headers or {})
        data = None
        if raw is not None:
            data = raw
            hdrs.setdefault("Content-Type", "application/octet-stream")
            if hasattr(raw, "fileno"):
                hdrs.setdefault("Content-Length", str(os.fstat(raw.fileno()).st_size - raw.tell()))
        elif body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        conn = _UnixHTTPConnection(self.socket, timeout)
        try:
            conn.request(method, path, body=data, headers=hdrs)
            r = conn.getresponse()
            payload = r.read()
            return r.status, _decode(payload, r.getheader("Content-Type"))
        finally:
            conn.close()

    def check(self, method, path, body=None, expect=(200, 201, 204), **kw):
        """api(), failing (EngineError) unless the status is one of expect;
        returns the parsed answer."""
        status, doc = self.api(method, path, body, **kw)
        if status not in ((expect,) if isinstance(expect, int) else expect):
            raise EngineError(f"{self.kind} {method} {path}: HTTP {status}: {str(doc)[:800]}")
        return doc


class DockerEngine(Engine):
    """containerd and dockerd of their own: no bridge, no iptables, overlay2.
    `.socket` is dockerd's API socket, `.containerd_socket` containerd's."""

    kind = "docker"

    def __init__(self, ready_timeout=60):
        super().__init__()
        self.ready_timeout = ready_timeout
        self.containerd_socket = None
        self._start_engine()

    def _check_installed(self):
        for tool in ("containerd", "dockerd", "runc"):
            if not shutil.which(tool):
                raise EngineUnavailable(f"'{tool}' not installed (Debian: docker.io containerd runc)")

    def _cgroups(self):
        # dockerd --cgroup-parent: every container's cgroup is under this
        # one, so a sweep finds them by name
        return [PREFIX + self.id]

    def _start(self):
        ctd_root, ctd_state = self.path("ctd-root"), self.path("ctd-state")
        self.containerd_socket = self.path("ctd.sock")
        self.socket = self.path("docker.sock")
        for d in (ctd_root, ctd_state, self.path("data"), self.path("x")):
            os.mkdir(d, 0o711)
        # our own config: the host's /etc/containerd/config.toml is not read
        with open(self.path("containerd.toml"), "w") as f:
            f.write(f'version = 2\nroot = "{ctd_root}"\nstate = "{ctd_state}"\n'
                    'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
                    f'[grpc]\n  address = "{self.containerd_socket}"\n'
                    f'[plugins."io.containerd.internal.v1.opt"]\n  path = "{self.path("ctd-opt")}"\n')
        with open(self.path("daemon.json"), "w") as f:
            f.write("{}\n")
        env = dict(os.environ, TMPDIR=self.dir)
        ctd = self._spawn("containerd", ["containerd", "--config", self.path("containerd.toml"),
                                         "--address", self.containerd_socket,
                                         "--root", ctd_root, "--state", ctd_state], env=env)
        self._wait_ready("containerd", ctd, lambda: _connectable(self.containerd_socket),
                         self.ready_timeout)
        dockerd = self._spawn("dockerd", [
            "dockerd", "--config-file", self.path("daemon.json"),
            "--iptables=false", "--ip6tables=false", "--bridge=none",
            "--storage-driver=overlay2", "--data-root", self.path("data"),
            "--exec-root", self.path("x"), "--pidfile", self.path("docker.pid"),
            "--cgroup-parent", "/" + PREFIX + self.id,
            "-H", "unix://" + self.socket, "--containerd", self.containerd_socket], env=env)
        self._wait_ready("dockerd", dockerd, self._ping, self.ready_timeout)


class PodmanEngine(Engine):
    """`podman system service` of its own, serving Podman's Docker-compatible
    API: root, runroot, tmpdir and network config under the temp dir, runc,
    cgroupfs, file events and file locks, overlay storage (vfs where this
    machine cannot mount overlay), containers on the host network unless
    they ask otherwise. `.storage_driver` says which driver it got."""

    kind = "podman"

    def __init__(self, ready_timeout=60):
        super().__init__()
        self.ready_timeout = ready_timeout
        self.storage_driver = None
        self._start_engine()

    def _check_installed(self):
        for tool in ("podman", "conmon", "runc"):
            if not shutil.which(tool):
                raise EngineUnavailable(f"'{tool}' not installed (Debian: podman conmon runc)")
        # the agent's containers ask for an init (HostConfig.Init); podman
        # 4.3's compat API looks for it only here, whatever containers.conf's
        # init_path says
        if not os.access(PODMAN_INIT, os.X_OK):
            raise EngineUnavailable(f"'{PODMAN_INIT}' not installed (Debian: catatonit)")

    def _start(self):
        root, runroot, tmp = self.path("root"), self.path("run"), self.path("tmp")
        for d in (root, runroot, tmp, self.path("net"), self.path("vol")):
            os.mkdir(d, 0o711)
        self.socket = self.path("podman.sock")
        self.storage_driver = "overlay" if _overlay_works(self.dir) else "vfs"
        runc = shutil.which("runc")
        # CONTAINERS_CONF: only this file is read (not the host's
        # /etc/containers/*, whose libpod.conf asks for crun)
        nofile, nproc = _podman_rlimits()
        with open(self.path("containers.conf"), "w") as f:
            f.write('[containers]\nnetns = "host"\n'
                    f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
                    '[engine]\n'
                    'runtime = "runc"\n'
                    'cgroup_manager = "cgroupfs"\n'
                    'events_logger = "file"\n'
                    f'tmp_dir = "{tmp}"\n'
                    f'volume_path = "{self.path("vol")}"\n'
                    f'image_copy_tmp_dir = "{tmp}"\n'
                    'lock_type = "file"\n'
                    f'[engine.runtimes]\nrunc = ["{runc}"]\n'
                    f'[network]\nnetwork_config_dir = "{self.path("net")}"\n')
        with open(self.path("storage.conf"), "w") as f:
            f.write(f'[storage]\ndriver = "{self.storage_driver}"\n'
                    f'runroot = "{runroot}"\ngraphroot = "{root}"\n')
        env = dict(os.environ, CONTAINERS_CONF=self.path("containers.conf"),
                   CONTAINERS_STORAGE_CONF=self.path("storage.conf"),
                   CONTAINERS_REGISTRIES_CONF=self.path("registries.conf"), TMPDIR=tmp)
        with open(self.path("registries.conf"), "w") as f:
            f.write("unqualified-search-registries = []\n")
        argv = ["podman", "--root", root, "--runroot", runroot, "--tmpdir", tmp,
                "--storage-driver", self.storage_driver, "--cgroup-manager=cgroupfs",
                "--events-backend=file", "--runtime", "runc",
                "--network-config-dir", self.path("net"),
                "system", "service", "--time=0", "unix://" + self.socket]
        p = self._spawn("podman", argv, env=env,
                        preexec_fn=lambda: _set_rlimits(nofile, nproc))
        self._wait_ready("podman", p, self._ping, self.ready_timeout)


def _short_tmp():
    """The temp dir, unless its path is too long for the engines' unix
    sockets under it (108 bytes with the names below it): then /tmp."""
    t = tempfile.gettempdir()
    return t if len(t) <= 40 else "/tmp"


def _podman_rlimits(nofile=20000, nproc=32768):
    """The open files and processes limits of the podman service and of its
    containers: at most ours. Rootful podman gives a container nofile and
    nproc limits of 1048576 unless containers.conf says otherwise, and runc
    cannot set them where root lacks CAP_SYS_RESOURCE (some sandboxes and
    VMs): "error setting rlimit type 7: operation not permitted"."""
    def cap(which, want):
        hard = resource.getrlimit(which)[1]
        return want if hard == resource.RLIM_INFINITY else min(want, hard)
    return cap(resource.RLIMIT_NOFILE, nofile), cap(resource.RLIMIT_NPROC, nproc)


def _set_rlimits(nofile, nproc):
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _connectable(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return True
    except OSError:
        return False
    finally:
        s.close()


def _overlay_works(parent):
    """Whether an overlay filesystem can be mounted with its layers in parent."""
    d = tempfile.mkdtemp(prefix="ovl-", dir=parent)
    try:
        for sub in ("l", "u", "w", "m"):
            os.mkdir(os.path.join(d, sub))
        r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                            f"lowerdir={d}/l,upperdir={d}/u,workdir={d}/w", f"{d}/m"],
                           capture_output=True)
        if r.returncode == 0:
            subprocess.run(["umount", f"{d}/m"], capture_output=True)
        return r.returncode == 0
    finally:
        unmount_under(d)
        shutil.rmtree(d, ignore_errors=True)


# -- images --

def base_rootfs(build_dir, timeout=900):
    """The path of a tarball of a Debian bookworm minbase root filesystem
    (debootstrap), made once and kept in BUILD_DIR/test-cache. Made atomically
    (debootstrap into a temp dir, tar, rename) under a lock, so concurrent
    callers wait for one debootstrap. EngineUnavailable when it cannot be
    made (no debootstrap, no network)."""
    cache = os.path.join(os.path.abspath(build_dir), "test-cache")
    final = os.path.join(cache, f"rootfs-{SUITE}-minbase.tar")
    if os.path.exists(final):
        return final
    if not shutil.which("debootstrap"):
        raise EngineUnavailable("'debootstrap' not installed (Debian: debootstrap)")
    os.makedirs(cache, exist_ok=True)
    with open(os.path.join(cache, f"rootfs-{SUITE}-minbase.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(final):
            return final
        # we hold the lock: a build dir still here is a dead run's
        for name in os.listdir(cache):
            if name.startswith(f"rootfs-{SUITE}-minbase.build-"):
                errors = remove_tree(os.path.join(cache, name))
                if errors:
                    raise harness.TestFailure("; ".join(errors))
        build = os.path.join(cache, f"rootfs-{SUITE}-minbase.build-{os.getpid()}")
        os.mkdir(build)
        try:
            _debootstrap(os.path.join(build, "root"), os.path.join(build, "debootstrap.log"),
                         timeout)
            tmp = os.path.join(build, "rootfs.tar")
            # the container's /dev, /proc and /sys are the engine's own
            r = subprocess.run(["tar", "-C", os.path.join(build, "root"), "--numeric-owner",
                                "--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*",
                                "-cf", tmp, "."], capture_output=True, text=True)
            if r.returncode:
                raise harness.TestFailure(f"tar of the rootfs failed: {r.stderr.strip()[-1000:]}")
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.rename(tmp, final)
        finally:
            errors = remove_tree(build)
            if errors:
                raise harness.TestFailure("; ".join(errors))
    return final


def _debootstrap(target, logpath, timeout):
    argv = ["debootstrap", "--variant=minbase", SUITE, target, DEBIAN_MIRROR]
    with open(logpath, "wb") as log:
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = None
    if rc == 0:
        return
    with open(logpath, "rb") as f:
        tail = b"\n".join(f.read().splitlines()[-15:]).decode(errors="replace")
    detail = os.path.join(target, "debootstrap", "debootstrap.log")
    try:
        with open(detail, "rb") as f:
            tail += "\n" + b"\n".join(f.read().splitlines()[-15:]).decode(errors="replace")
    except OSError:
        pass
    what = f"did not finish in {timeout}s" if rc is None else f"exited with status {rc}"
    raise EngineUnavailable(f"'{' '.join(argv)}' {what} (no network?):\n{tail}")


def _tar_with(tar_path, extra_files, out_dir):
    """A copy of tar_path in out_dir with extra_files {path: bytes} appended
    (and their missing parent dirs); returns its path, which the caller
    removes."""
    fd, out = tempfile.mkstemp(prefix="image-", suffix=".tar", dir=out_dir)
    with os.fdopen(fd, "wb") as dst, open(tar_path, "rb") as src:
        shutil.copyfileobj(src, dst, 1 << 20)
    try:
        with tarfile.open(out, "a", format=tarfile.GNU_FORMAT) as tar:
            have = {n.lstrip("./").rstrip("/") for n in tar.getnames()}
            now = time.time()
            for path, content in sorted(extra_files.items()):
                rel = path.strip("/")
                parts = rel.split("/")
                for i in range(1, len(parts)):
                    d = "/".join(parts[:i])
                    if d not in have:
                        ti = tarfile.TarInfo("./" + d)
                        ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, now
                        tar.addfile(ti)
                        have.add(d)
                ti = tarfile.TarInfo("./" + rel)
                ti.size, ti.mode, ti.mtime = len(content), 0o644, now
                tar.addfile(ti, io.BytesIO(content))
                have.add(rel)
    except BaseException:
        os.unlink(out)
        raise
    return out


def docker_with_base(build_dir):
    """A DockerEngine holding the minbase rootfs as yard-test/base:1, the
    FROM of the images the tests and benchmarks build; closed again when
    the import fails."""
    eng = DockerEngine()
    try:
        import_image(eng, base_rootfs(build_dir), "yard-test/base", "1")
    except BaseException:
        eng.close()
        raise
    return eng


def import_image(engine, tar_path, repo, tag, extra_files=None):
    """Imports the root filesystem tarball tar_path as image REPO:TAG through
    the Engine API (POST /images/create?fromSrc=-), with extra_files
    {path in the image: bytes} added to it first. Works with dockerd and
    podman. Returns "repo:tag"."""
    ref = f"{repo}:{tag}"
    src = tar_path
    if extra_files:
        src = _tar_with(tar_path, extra_files, engine.dir)
    try:
        # the tag inside repo: podman 4.3 ignores the tag parameter
        q = urllib.parse.urlencode({"fromSrc": "-", "repo": ref})
        with open(src, "rb") as f:
            doc = engine.check("POST", "/images/create?" + q, raw=f,
                               headers={"Content-Type": "application/x-tar"}, expect=200)
    finally:
        if src != tar_path:
            os.unlink(src)
    msgs = doc if isinstance(doc, list) else [doc]
    for m in msgs:
        if isinstance(m, dict) and (m.get("error") or m.get("errorDetail")):
            raise EngineError(f"{engine.kind} import of {ref}: {m.get('error') or m.get('errorDetail')}")
    status, _ = engine.api("GET", f"/images/{urllib.parse.quote(ref, safe='')}/json")
    if status == 200:
        return ref
    # an engine that left the import unnamed: tag it by the id it reported
    image_id = _imported_id(msgs)
    if not image_id:
        raise EngineError(f"{engine.kind} import of {ref}: no image by that name and no id in "
                          f"the answer {str(doc)[:500]}")
    engine.check("POST", f"/images/{image_id}/tag?" + urllib.parse.urlencode({"repo": repo, "tag": tag}),
                 expect=(200, 201))
    return ref


def _imported_id(msgs):
    for m in reversed(msgs):
        if not isinstance(m, dict):
            continue
        for k in ("status", "id", "Id", "stream"):
            v = str(m.get(k) or "").strip()
            if v.startswith("sha256:"):
                v = v[len("sha256:"):]
            if len(v) >= 12 and all(c in "0123456789abcdef" for c in v):
                return v
    return None


# -- containers --

def list_containers(engine, label=None):
    """Every container of the engine, stopped ones too; only those with
    label ("key" or "key=value") when given."""
    q = {"all": "1"}
    if label:
        q["filters"] = json.dumps({"label": [label]})
    return engine.check("GET", "/containers/json?" + urllib.parse.urlencode(q), expect=200)


def inspect(engine, cid):
    """GET /containers/{cid}/json; None when there is no such container."""
    status, doc = engine.api("GET", f"/containers/{cid}/json")
    if status == 404:
        return None
    if status != 200:
        raise EngineError(f"{engine.kind} inspect {cid}: HTTP {status}: {str(doc)[:500]}")
    return doc


def logs(engine, cid):
    """(stdout, stderr) bytes of a container without a TTY, from the
    multiplexed stream of GET /containers/{cid}/logs."""
    data = engine.check("GET", f"/containers/{cid}/logs?stdout=1&stderr=1", expect=200)
    if isinstance(data, (dict, list)):
        data = json.dumps(data).encode()
    return demux(data)


def demux(data):
    """Splits Docker's multiplexed stream (8-byte frame headers: stream,
    0, 0, 0, big-endian length) into (stdout, stderr)."""
    out, err = bytearray(), bytearray()
    i = 0
    while i + 8 <= len(data):
        kind, size = data[i], int.from_bytes(data[i + 4:i + 8], "big")
        if kind not in (0, 1, 2) or data[i + 1:i + 4] != b"\0\0\0":
            return bytes(data), b""  # not multiplexed (a TTY): all of it is output
        chunk = data[i + 8:i + 8 + size]
        (err if kind == 2 else out).extend(chunk)
        i += 8 + size
    return bytes(out), bytes(err)
