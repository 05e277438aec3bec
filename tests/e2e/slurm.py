"""A real Slurm for end-to-end tests: munged with a key made here, slurmctld
and N slurmd on this host (each its own NodeName and Port, `slurmd -N
NAME`), all in a temp dir, as root, with a slurm.conf written here
(proctrack/pgid, task/none: no cgroup plugin, no systemd), from Debian's
slurm-wlm and munge.

    with SlurmCluster(nodes=2) as s:
        s.env                        # {"SLURM_CONF": ...}: what clients (sbatch, squeue) need
        s.run("squeue", "-h")        # a client, checked
        s.jobs(name="x")             # [(id, state)] of squeue --array

Everything it starts is stopped by close() (on leaving the `with`, at
interpreter exit, and after SIGTERM); what a test killed without either
leaves is swept by sweep(), which every new SlurmCluster runs first, from
the state file it writes before starting anything (its owner's pid, the
daemons' pids, its dir). A machine without slurm-wlm or munge fails the
test with the packages to install: nothing is skipped.
"""
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

STATE_DIR = "/run/yslurm-e2e"
TOOLS = ("munged", "slurmctld", "slurmd", "sbatch", "scancel", "squeue", "sinfo")


class SlurmError(RuntimeError):
    pass


def _proc_start(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(") ", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _kill(pids):
    for pid, start in pids:
        if start is not None and _proc_start(pid) == start:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def sweep():
    """Stops the daemons of SlurmClusters whose owner is gone and removes
    their dirs; returns their ids."""
    swept = []
    if not os.path.isdir(STATE_DIR):
        return swept
    for fn in os.listdir(STATE_DIR):
        path = os.path.join(STATE_DIR, fn)
        try:
            with open(path) as f:
                st = json.load(f)
        except (OSError, ValueError):
            continue
        if st.get("start") is not None and _proc_start(st.get("pid")) == st.get("start"):
            continue
        _kill([tuple(p) for p in st.get("pids", [])])
        if st.get("dir"):
            shutil.rmtree(st["dir"], ignore_errors=True)
        try:
            os.unlink(path)
        except OSError:
            pass
        swept.append(fn.split(".")[0])
    try:
        os.rmdir(STATE_DIR)
    except OSError:
        pass
    return swept


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmCluster:
    def __init__(self, nodes=2, partition="gpu", cpus=2, dir=None, kill_wait=3):
        self.names = [f"ys{i + 1}" for i in range(nodes)]
        self.partition = partition
        self.cpus = cpus
        self.kill_wait = kill_wait
        self.parent = dir
        self.procs = []
        self._closed = True

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, et, ev, tb):
        self.close()
        return False

    def _save(self):
        os.makedirs(STATE_DIR, exist_ok=True)
        tmp = self.state + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"pid": os.getpid(), "start": _proc_start(os.getpid()), "dir": self.dir,
                       "pids": [[p.pid, _proc_start(p.pid)] for p, _ in self.procs]}, f)
        os.rename(tmp, self.state)

    def start(self):
        missing = [t for t in TOOLS if not shutil.which(t)]
        if missing:
            raise SlurmError(f"{', '.join(missing)} not found: install Debian's slurm-wlm and munge "
                             "(make deps)")
        if os.geteuid() != 0:
            raise SlurmError("the Slurm test runs slurmctld and slurmd as root")
        sweep()
        self.dir = tempfile.mkdtemp(prefix="yard-slurm-", dir=self.parent)
        os.chmod(self.dir, 0o755)
        self.id = os.path.basename(self.dir)
        self.state = os.path.join(STATE_DIR, self.id + ".json")
        self._closed = False
        atexit.register(self.close)
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(SystemExit(128 + s)))
        self._save()
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _daemon(self, name, argv):
        log = open(os.path.join(self.dir, name + ".out"), "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.env_all(),
                             start_new_session=True)
        self.procs.append((p, log))
        self._save()
        return p

    def _start(self):
        d = self.dir
        mdir = os.path.join(d, "munge")
        os.makedirs(mdir, mode=0o700)
        key = os.path.join(mdir, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        self.munge_socket = os.path.join(mdir, "socket")
        self._daemon("munged", ["munged", "-F", "--force", f"--socket={self.munge_socket}",
                                f"--key-file={key}", f"--pid-file={mdir}/pid",
                                f"--log-file={mdir}/log", f"--seed-file={mdir}/seed"])
        self._wait(lambda: os.path.exists(self.munge_socket), 10, "munged's socket")
        for sub in ("state", "log"):
            os.makedirs(os.path.join(d, sub))
        for n in self.names:
            os.makedirs(os.path.join(d, "spool", n))
        ctld, dport = _free_port(), _free_port()
        nodes = "".join(f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={_free_port()} "
                        f"CPUs={self.cpus} RealMemory=1000 State=UNKNOWN\n" for n in self.names)
        conf = f"""ClusterName={self.id.replace('-', '')[-30:].lower()}
SlurmctldHost=localhost
SlurmctldPort={ctld}
SlurmdPort={dport}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
KillWait={self.kill_wait}
InactiveLimit=0
MinJobAge=2
SlurmctldTimeout=30
SlurmdTimeout=30
{nodes}PartitionName={self.partition} Nodes={','.join(self.names)} Default=YES MaxTime=INFINITE State=UP
"""
        self.conf = os.path.join(d, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        self.env = {"SLURM_CONF": self.conf}
        self._daemon("slurmctld", ["slurmctld", "-D", "-f", self.conf])
        for n in self.names:
            self._daemon("slurmd-" + n, ["slurmd", "-D", "-N", n, "-f", self.conf])

        def idle():
            r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True,
                               env=self.env_all())
            states = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
            return all(states.get(n) == "idle" for n in self.names)
        self._wait(idle, 30, "every slurmd idle in sinfo")

    def _wait(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while not pred():
            for p, _ in self.procs:
                if p.poll() is not None:
                    raise SlurmError(f"{p.args[0]} exited ({p.returncode}) while waiting for {what}:\n"
                                     + self.logs())
            if time.monotonic() > deadline:
                raise SlurmError(f"timed out after {timeout}s waiting for {what}:\n" + self.logs())
            time.sleep(0.05)

    def logs(self, n=20):
        out = []
        for root, _, files in os.walk(self.dir):
            for fn in files:
                if fn.endswith((".log", ".out")) and "spool" not in root:
                    try:
                        with open(os.path.join(root, fn), errors="replace") as f:
                            out.append(f"--- {fn}\n" + "".join(f.readlines()[-n:]))
                    except OSError:
                        pass
        return "\n".join(out)

    def env_all(self, extra=None):
        e = dict(os.environ)
        if getattr(self, "conf", None):
            e["SLURM_CONF"] = self.conf
        e.update(extra or {})
        return e

    def run(self, *argv, check=True):
        r = subprocess.run(list(argv), capture_output=True, text=True, env=self.env_all(), timeout=60)
        if check and r.returncode:
            raise SlurmError(f"{' '.join(argv)}: exit {r.returncode}: {r.stderr.strip()}")
        return r.stdout

    def jobs(self, name=None):
        """[(job id as squeue --array says it, state)] of the jobs (named name)."""
        argv = ["squeue", "--noheader", "--array", "--format=%i %T"]
        if name:
            argv.append(f"--name={name}")
        return [tuple(line.split()) for line in self.run(*argv).splitlines() if line.strip()]

    def close(self):
        if self._closed:
            return
        self._closed = True
        try:
            atexit.unregister(self.close)
        except Exception:
            pass
        # what still runs in it is cancelled first (slurmd would leave it running)
        if getattr(self, "conf", None) and all(p.poll() is None for p, _ in self.procs):
            try:
                self.run("scancel", f"--partition={self.partition}", check=False)
                deadline = time.monotonic() + self.kill_wait + 10
                while self.jobs() and time.monotonic() < deadline:
                    time.sleep(0.1)
            except (OSError, subprocess.SubprocessError, SlurmError):
                pass
        # then slurmd (they stop what runs on them), the controller, munged last
        for p, log in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            log.close()
        import harness  # what the steps left: their processes name or sit in our dir
        harness.kill_task_leftovers(self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)
        try:
            os.unlink(self.state)
            os.rmdir(STATE_DIR)
        except OSError:
            pass
