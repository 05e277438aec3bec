#!/usr/bin/env python3
"""The Debian package's test (make package-test): the .deb that `make deb`
built is checked with lintian, installed with apt into a freshly
debootstrap'd Debian 12, and that machine is booted with systemd-nspawn;
there the master and the agent come up as the package's services, the agent
joins, a job runs and its log is read back, the agent restarts under a
running task without killing it, the master reloads a changed key, serves
https with a self-signed certificate the agent pins, and the package is
removed and purged. Each step prints what it did and how long it took; the
first failure stops the run with its reason (and the services' journal).
The machine and all it made are removed at the end, also on a failure.

Not part of make test (it needs Debian's mirror; half a minute once the
debootstrap'd root is cached, a minute more the first time); .ci/run runs
it after make test.

usage: run.py --deb build/trainyard_VERSION_ARCH.deb [--build build]
"""
import argparse
import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from machine import Machine, harness  # noqa: E402

check, check_eq, TestFailure = harness.check, harness.check_eq, harness.TestFailure

PACKAGE = "trainyard"
MASTER_URL = "http://127.0.0.1:7420"           # /etc/yard/agent.conf's, inside the machine
DATA = "/var/lib/yard/master"
CLI_ENV = f"YARD_MASTER={MASTER_URL} YARD_TOKEN=$(cat {DATA}/admin-token)"
# what the package installs: (path, executable)
FILES = [
    ("/usr/bin/yard", True),
    ("/usr/bin/yard-core", True),
    ("/usr/bin/yard-agent", True),
    ("/usr/bin/yard-shim", True),
    ("/usr/share/yard/web/index.html", False),
    ("/lib/systemd/system/yard-master.service", False),
    ("/lib/systemd/system/yard-agent.service", False),
    ("/etc/yard/master.conf", False),
    ("/etc/yard/agent.conf", False),
    ("/usr/lib/sysusers.d/trainyard.conf", False),
    ("/usr/share/doc/trainyard/copyright", False),
]
CONFFILES = {"/etc/yard/master.conf", "/etc/yard/agent.conf"}
# each man page and the --help it must show verbatim
MAN_PAGES = [
    ("/usr/share/man/man1/yard.1.gz", "yard --help"),
    ("/usr/share/man/man8/yard-master.8.gz", "yard master --help"),
    ("/usr/share/man/man8/yard-agent.8.gz", "yard agent --help"),
    ("/usr/share/man/man8/yard-shim.8.gz", "yard-shim --help"),
]
# the highest `systemd-analyze security` exposure the master's sandbox may have
# (0: fully locked down, 10: not at all; yard-master.service scores 1.3)
MASTER_MAX_EXPOSURE = 2.0


def dlopened_sonames():
    """The shared objects the sources load with dlopen (each a *_SONAME
    define beside its table of functions, src/base/dynlib.h)."""
    found = set()
    for root, _, files in os.walk(os.path.join(HERE, "..", "..", "src")):
        for name in files:
            if name.endswith((".c", ".h")):
                with open(os.path.join(root, name)) as f:
                    found.update(re.findall(r'^#define \w+_SONAME "([^"]+)"', f.read(), re.M))
    check(len(found) >= 4, f"found only {sorted(found)} among the sources' dlopen'ed libraries")
    return sorted(found)


class Run:
    def __init__(self, deb, build):
        self.deb = os.path.abspath(deb)
        self.build = build
        self.m = Machine(build, log=self.say)
        self.t0 = time.monotonic()
        self.steps = 0

    def say(self, msg):
        print(f"package-test: {msg}", flush=True)

    def step(self, what, fn):
        self.say(f"{what} ...")
        t = time.monotonic()
        note = fn()
        self.steps += 1
        self.say(f"{what}: ok ({time.monotonic() - t:.1f}s){' ' + note if note else ''}")

    # -- on the host --

    def lintian(self):
        if not shutil.which("lintian"):
            raise TestFailure("'lintian' is not installed (make package-test installs it)")
        r = subprocess.run(["lintian", "--pedantic", "--display-info",
                            "--fail-on", "error,warning,info,pedantic", self.deb],
                           capture_output=True, text=True)
        tags = [ln for ln in r.stdout.splitlines() if re.match(r"^[EWIP]: ", ln)]
        check(r.returncode == 0 and not tags,
              f"lintian {self.deb}: exit {r.returncode}, tags not overridden:\n" + "\n".join(tags)
              + r.stderr[-2000:])
        over = subprocess.run(["lintian", "--pedantic", "--display-info", "--show-overrides", self.deb],
                              capture_output=True, text=True).stdout
        return f"(no tag; overridden: {len([ln for ln in over.splitlines() if ln.startswith('O: ')])})"

    # -- the machine, not booted --

    def rootfs(self):
        self.m.create()
        return f"({self.m.root})"

    def systemd(self):
        # systemd-sysv: systemd as /sbin/init, to boot with; the apt timers
        # are masked so that no apt run in the machine holds dpkg's lock
        self.m.run("{ apt-get update -qq && apt-get install -y -qq --no-install-recommends systemd-sysv; }"
                   " >/var/log/yard-pkgtest-apt.log 2>&1 || { tail -30 /var/log/yard-pkgtest-apt.log; exit 1; }")
        for t in ("apt-daily.timer", "apt-daily-upgrade.timer"):
            os.symlink("/dev/null", os.path.join(self.m.root, "etc/systemd/system", t))

    def install(self):
        name = os.path.basename(self.deb)
        shutil.copyfile(self.deb, os.path.join(self.m.root, "root", name))
        out = self.m.run(f"cd /root && apt-get install -y --no-install-recommends ./{shlex.quote(name)} 2>&1")
        m = re.search(r"(\d+) newly installed", out)
        check(m, f"apt-get printed no 'newly installed' count:\n{out[-2000:]}")
        status = self.m.run(f"dpkg-query -W -f='${{Status}} ${{Version}}' {PACKAGE}")
        check(status.startswith("install ok installed "), f"{PACKAGE} is not installed: {status!r}")
        self.version = status.split()[-1]
        return f"({PACKAGE} {self.version}; apt installed {m.group(1)} packages with it)"

    def contents(self):
        for path, exe in FILES:
            full = self.m.root + path
            check(os.path.isfile(full), f"the package did not install {path}")
            if exe:
                check(os.access(full, os.X_OK), f"{path} is not executable")
        conf = self.m.run(f"dpkg-query -W -f='${{Conffiles}}' {PACKAGE}")
        check_eq({ln.split()[0] for ln in conf.splitlines() if ln.strip()}, CONFFILES, "the package's conffiles")
        ldd = self.m.run("ldd /usr/bin/yard /usr/bin/yard-core /usr/bin/yard-agent /usr/bin/yard-shim")
        check("not found" not in ldd, f"a library the binaries need is missing:\n{ldd}")
        # the libraries loaded at their first use (dlopen), which ldd cannot
        # see: the package's Depends must have brought each
        cache = self.m.run("ldconfig -p")
        for soname in dlopened_sonames():
            check(f"{soname} " in cache, f"{soname}, which the binaries load at first use, is not installed")
        out = self.m.run("yard --version").strip()
        check_eq(out, f"yard {self.version}", "yard --version beside the package's version")
        check_eq(self.m.run("yard-shim --version").strip(), f"yard-shim {self.version}", "yard-shim --version")
        for page, cmd in MAN_PAGES:
            with gzip.open(self.m.root + page, "rt") as f:
                text = f.read()
            m = re.search(r"^\.nf\n(.*?)^\.fi$", text, re.M | re.S)
            check(m, f"{page} has no .nf block of `{cmd}`")
            shown = m.group(1).replace("\\-", "-").replace("\\&", "").replace("\\e", "\\")
            check_eq(shown.rstrip("\n"), self.m.run(cmd).rstrip("\n"), f"{page} beside `{cmd}`")
        for unit in ("yard-master.service", "yard-agent.service"):
            link = os.path.join(self.m.root, "etc/systemd/system/multi-user.target.wants", unit)
            check(os.path.islink(link), f"{unit} is not enabled (no {link})")
        return f"({len(FILES)} files, {len(CONFFILES)} conffiles, {len(MAN_PAGES)} man pages as --help)"

    def user(self):
        pw = self.m.run("getent passwd yard").strip().split(":")
        check(len(pw) == 7, f"no user yard: {pw}")
        check(int(pw[2]) < 1000, f"yard is not a system user: uid {pw[2]}")
        check_eq(pw[6], "/usr/sbin/nologin", "the yard user's shell")
        gr = self.m.run("getent group yard").strip().split(":")
        check_eq(gr[2], pw[3], "the yard group's gid beside the yard user's")
        self.yard_uid = int(pw[2])
        return f"(uid {pw[2]}, home {pw[5]})"

    # -- the booted machine --

    def boot(self):
        state = self.m.boot()
        rc, failed = self.m.sh("systemctl list-units --failed --plain --no-legend", check=False)
        check("yard-" not in failed, f"a yard unit failed at boot:\n{failed}")
        units = [ln.split()[0] for ln in failed.splitlines() if ln.strip()]
        return f"(systemd says {state}{'; failed: ' + ' '.join(units) if units else ''})"

    def verify(self):
        rc, out = self.m.sh("systemd-analyze verify --man=no yard-master.service yard-agent.service", check=False)
        check(rc == 0 and not out.strip(), f"systemd-analyze verify: exit {rc}:\n{out}")
        rc, out = self.m.sh("systemd-analyze security --no-pager yard-master.service", check=False)
        m = re.search(r"Overall exposure level for yard-master.service: ([\d.]+)", out)
        check(m, f"systemd-analyze security printed no exposure level:\n{out[-2000:]}")
        check(float(m.group(1)) <= MASTER_MAX_EXPOSURE,
              f"yard-master.service's exposure is {m.group(1)}, above {MASTER_MAX_EXPOSURE}:\n{out[-3000:]}")
        return f"(yard-master exposure {m.group(1)} of 10)"

    def unit(self, unit, *props):
        rc, out = self.m.sh(f"systemctl show {unit} " + " ".join(f"-p {p}" for p in props))
        return dict(ln.split("=", 1) for ln in out.splitlines() if "=" in ln)

    def journal(self, unit):
        return self.m.sh(f"journalctl -u {unit} -o cat --no-pager", check=False)[1]

    def master(self):
        # /etc/yard/master.conf's listen: loopback only
        harness.wait_until(lambda: f"yard master ready url={MASTER_URL}" in self.journal("yard-master"), 30,
                           "yard-master.service's ready line in the journal")
        u = self.unit("yard-master", "ActiveState", "MainPID", "NRestarts")
        check_eq(u["ActiveState"], "active", "yard-master's state")
        check_eq(u["NRestarts"], "0", "yard-master's restarts")
        rc, status = self.m.sh(f"cat /proc/{u['MainPID']}/status")
        uid = re.search(r"^Uid:\s+(\d+)", status, re.M).group(1)
        check_eq(int(uid), self.yard_uid, "the uid yard master runs as")
        for tok in ("admin-token", "join-token"):
            rc, st = self.m.sh(f"stat -c '%U %a' {DATA}/{tok}")
            check_eq(st.strip(), "yard 600", f"{DATA}/{tok}'s owner and mode")
        self.check_web_app(7420, "/etc/yard/master.conf's web-dir")
        return f"(pid {u['MainPID']}, uid {uid}; GET / is the packaged web app)"

    def check_web_app(self, port, why):
        """GET / on the master at port is /usr/share/yard/web/index.html
        (bash's /dev/tcp: minbase has no curl)."""
        rc, page = self.m.sh(f"bash -c \"exec 3<>/dev/tcp/127.0.0.1/{port} && "
                             "printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3\"", check=False)
        with open(self.m.root + "/usr/share/yard/web/index.html") as f:
            index = f.read()
        check(page.startswith("HTTP/1.") and " 200 " in page.splitlines()[0] and page.endswith(index),
              f"GET / of the master on port {port} ({why}) is not /usr/share/yard/web/index.html: "
              f"{page[:600]!r}")

    def default_web_dir(self):
        """A master started without --web-dir (as `yard up` is) finds the
        packaged web app: there is no web/ beside /usr/bin/yard."""
        self.m.sh("systemd-run --unit=yard-nowebdir --property=DynamicUser=yes --property=StateDirectory=nowebdir "
                  "/usr/bin/yard master --listen 127.0.0.1:7421 --data-dir /var/lib/nowebdir")
        try:
            harness.wait_until(lambda: "yard master ready url=" in self.journal("yard-nowebdir"), 30,
                               "the master without --web-dir to be ready")
            self.check_web_app(7421, "no --web-dir")
        finally:
            self.m.sh("systemctl stop yard-nowebdir", check=False)

    def agent_waits(self):
        u = self.unit("yard-agent", "ActiveState", "ConditionResult", "NRestarts", "UnitFileState")
        check_eq(u["UnitFileState"], "enabled", "yard-agent's unit file state")
        check_eq(u["ActiveState"], "inactive", "yard-agent's state without a join token")
        check_eq(u["ConditionResult"], "no", "yard-agent's condition (ConditionPathExists=/etc/yard/join-token)")
        check_eq(u["NRestarts"], "0", "yard-agent's restarts without a join token")

    def nodes(self):
        rc, out = self.m.sh(f"{CLI_ENV} yard nodes --output json")
        return json.loads(out)["nodes"]

    def join(self):
        self.m.sh(f"install -m 0600 {DATA}/join-token /etc/yard/join-token && systemctl start yard-agent")
        harness.wait_until(lambda: "yard agent ready name=" in self.journal("yard-agent"), 30,
                           "yard-agent.service's ready line in the journal")
        nodes = harness.wait_until(lambda: [n for n in self.nodes() if n.get("state") == "ready"], 30,
                                   "a ready node in `yard nodes`")
        check_eq(len(nodes), 1, "ready nodes")
        return f"(node {nodes[0]['name']})"

    def submit(self, name, command):
        spec = {"name": name, "command": command, "tasks": {"worker": {"replicas": 1}}}
        self.m.sh(f"mkdir -p /root/{name} && cat > /root/{name}/job.yaml <<'EOF'\n{json.dumps(spec)}\nEOF")
        rc, out = self.m.sh(f"cd /root/{name} && {CLI_ENV} yard submit job.yaml")
        m = re.search(r"\d+", out)
        check(m, f"yard submit printed no job id: {out!r}")
        return m.group(0)

    def show(self, jid):
        rc, out = self.m.sh(f"{CLI_ENV} yard show {jid} --output json")
        return json.loads(out)

    def job(self):
        line = "hello from the packaged agent"
        jid = self.submit("pkg-hello", ["/bin/echo", line])
        rc, out = self.m.sh(f"{CLI_ENV} yard wait {jid} --timeout 120", timeout=150, check=False)
        check(rc == 0, f"yard wait {jid}: exit {rc}: {out}\n{json.dumps(self.show(jid))[:2000]}")
        check_eq(self.show(jid)["state"], "succeeded", f"job {jid}'s state")
        rc, logs = self.m.sh(f"{CLI_ENV} yard logs {jid}")
        check(line in logs, f"job {jid}'s log lacks {line!r}: {logs!r}")
        return f"(job {jid} succeeded, its log read back)"

    def task_pids(self, argv):
        """Pids (in the machine) of the processes whose argv is argv."""
        want = "\0".join(argv) + "\0"
        rc, out = self.m.sh("for f in /proc/[0-9]*/cmdline; do printf '%s ' \"${f%/cmdline}\"; "
                            "od -An -c \"$f\" | tr -d ' \\n'; echo; done", check=False)
        enc = "".join("\\0" if c == "\0" else c for c in want)
        return [ln.split()[0].split("/")[-1] for ln in out.splitlines()
                if len(ln.split()) == 2 and ln.split()[1] == enc]

    def agent_restart(self):
        argv = ["/bin/sleep", "3601"]
        jid = self.submit("pkg-sleep", argv)
        harness.wait_until(lambda: self.show(jid)["state"] == "running", 60, f"job {jid} to run")
        pids = harness.wait_until(lambda: self.task_pids(argv), 30, f"job {jid}'s task process")
        before = self.unit("yard-agent", "MainPID")["MainPID"]
        ready = self.journal("yard-agent").count("yard agent ready name=")
        self.m.sh("systemctl restart yard-agent")
        harness.wait_until(lambda: self.journal("yard-agent").count("yard agent ready name=") > ready, 30,
                           "the restarted agent's ready line")
        after = self.unit("yard-agent", "MainPID", "ActiveState")
        check(after["MainPID"] != before, f"yard-agent's pid {before} did not change over a restart")
        check_eq(self.task_pids(argv), pids, f"job {jid}'s task processes after the agent's restart")
        check_eq(self.show(jid)["state"], "running", f"job {jid}'s state after the agent's restart")
        self.m.sh(f"{CLI_ENV} yard cancel {jid}")
        harness.wait_until(lambda: self.show(jid)["state"] == "cancelled", 30, f"job {jid} to be cancelled")
        harness.wait_until(lambda: not self.task_pids(argv), 30, f"job {jid}'s task to be gone")
        return f"(task pid {pids[0]} of job {jid} outlived agent pid {before})"

    def reload(self):
        """A reloadable key changed in /etc/yard/master.conf is applied by
        `systemctl reload` (SIGHUP) without a restart."""
        before = self.unit("yard-master", "MainPID")["MainPID"]
        self.m.sh("echo 'rate-limit = 100:1000' >> /etc/yard/master.conf && systemctl reload yard-master")
        want = "yard master: reloaded '/etc/yard/master.conf': applied rate-limit"
        harness.wait_until(lambda: want in self.journal("yard-master"), 30, f"{want!r} in the journal")
        u = self.unit("yard-master", "MainPID", "ActiveState", "NRestarts")
        check_eq((u["ActiveState"], u["MainPID"], u["NRestarts"]), ("active", before, "0"),
                 "yard-master's state, pid and restarts after a reload")
        check(self.nodes(), "the reloaded master lists no node")
        return f"(pid {before} applied rate-limit)"

    def tls(self):
        """README's recipe for a cluster, on one machine: the master on every
        address with a self-signed certificate (made in its state dir under
        the unit's sandbox), the agent trusting it by the pin the journal
        shows."""
        self.m.sh("sed -i 's/^listen = .*/listen = 0.0.0.0:7420/; s/^#tls-self-signed = true/tls-self-signed = true/'"
                  " /etc/yard/master.conf && systemctl restart yard-master")
        pat = re.compile(r"yard master ready url=https://\S+ pin=(sha256//\S+)")
        pin = harness.wait_until(lambda: pat.search(self.journal("yard-master")), 30,
                                 "the https master's ready line with its pin").group(1)
        check_eq(self.unit("yard-master", "NRestarts")["NRestarts"], "0", "yard-master's restarts")
        ready = self.journal("yard-agent").count("yard agent ready name=")
        self.m.sh(f"sed -i 's|^master = .*|master = https://127.0.0.1:7420|; s|^#pin = .*|pin = {pin}|'"
                  " /etc/yard/agent.conf && systemctl restart yard-agent")
        harness.wait_until(lambda: self.journal("yard-agent").count("yard agent ready name=") > ready, 30,
                           "the agent's ready line over https")
        return f"({pin[:20]}...)"

    def remove(self):
        self.m.sh("apt-get remove -y trainyard >/tmp/remove.log 2>&1 || { cat /tmp/remove.log; exit 1; }")
        for unit in ("yard-master", "yard-agent"):
            rc, out = self.m.sh(f"systemctl is-active {unit}", check=False)
            check_eq(out.strip(), "inactive", f"{unit} after apt-get remove")
        check(not os.path.exists(self.m.root + "/usr/bin/yard"), "/usr/bin/yard is still there after remove")
        check(os.path.isfile(self.m.root + "/etc/yard/master.conf"), "remove took the conffiles")
        self.m.sh("dpkg --purge trainyard >/tmp/purge.log 2>&1 || { cat /tmp/purge.log; exit 1; }")
        for conf in CONFFILES:
            check(not os.path.exists(self.m.root + conf), f"{conf} is still there after purge")
        check(not os.path.exists(self.m.root + "/etc/systemd/system/multi-user.target.wants/yard-master.service"),
              "yard-master.service is still enabled after purge")

    def main(self):
        failed = None
        try:
            self.step("lintian", self.lintian)
            self.step("debootstrap'd Debian 12", self.rootfs)
            self.step("systemd into it (apt)", self.systemd)
            self.step(f"apt-get install ./{os.path.basename(self.deb)}", self.install)
            self.step("the package's files, conffiles, man pages", self.contents)
            self.step("the yard system user", self.user)
            self.step("boot (systemd-nspawn -b)", self.boot)
            self.step("systemd-analyze verify, security", self.verify)
            self.step("yard-master.service up as yard", self.master)
            self.step("a master without --web-dir finds the web app", self.default_web_dir)
            self.step("yard-agent.service waits for its join token", self.agent_waits)
            self.step("the agent joins", self.join)
            self.step("a job runs, its log is read back", self.job)
            self.step("an agent restart keeps a running task", self.agent_restart)
            self.step("systemctl reload yard-master", self.reload)
            self.step("https: tls-self-signed, the agent pinning it", self.tls)
            self.step("apt-get remove, dpkg --purge", self.remove)
        except (TestFailure, AssertionError) as e:
            failed = e
            self.say(f"FAILED: {e}")
            if self.m.init_pid:
                rc, out = self.m.sh("journalctl -u yard-master -u yard-agent -o short-monotonic --no-pager "
                                    "| tail -60", check=False)
                self.say(f"the services' journal:\n{out}")
        t = time.monotonic()
        errors = self.m.close()
        self.say(f"power off and clean up: {'ok' if not errors else 'FAILED'} ({time.monotonic() - t:.1f}s)")
        for e in errors:
            self.say(f"cleanup: {e}")
        ok = failed is None and not errors
        self.say(f"{self.steps} steps passed{'' if ok else ', FAILED'} in {time.monotonic() - self.t0:.1f}s")
        return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deb", required=True)
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    if not os.path.isfile(args.deb):
        print(f"package-test: no package '{args.deb}' (make deb builds it)", file=sys.stderr)
        return 2
    return Run(args.deb, args.build).main()


if __name__ == "__main__":
    sys.exit(main())
