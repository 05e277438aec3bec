#!/usr/bin/env python3
"""The Ansible role's test (make ansible-test): contrib/ansible/site.yml, run
by Debian's ansible-playbook, installs the .deb that `make deb` built on
three debootstrap'd Debian 12 machines, one master and two agents, each
booted with systemd-nspawn and reached over ssh on its own address of a
private network (a network namespace and a bridge of this test's own: no
packet leaves it). Then, from the master, both agents are joined with the
pool and labels the inventory gave them and a job of two tasks, one on
each, succeeds with its logs read back; a second run changes nothing; a
changed reloadable key reloads the master (same pid), a changed key that
needs a restart restarts it; bad variables stop the role before it touches
a host, naming the variable. Each step prints what it did and how long it
took; the first failure stops the run with its reason (the playbook's
output, the services' journals). The machines and the network are removed
at the end, also on a failure (and by the next run after a SIGKILL).

Ansible's connection is ssh (openssh-server in the machines, a key made
for the run, host keys checked), as the role's users will run it: the
chroot connection would run modules on the machines' root dirs from the
host's mount namespace, where `systemctl` finds no booted systemd, and
Debian's community.general has no nsenter connection.

The machines are prepared before they boot, with the host's network: apt
installs what an Ansible host has (python3, python3-apt, sudo and sshd,
with a user `deploy` who may sudo) and downloads, into apt's cache, the
packages the .deb depends on and recommends (and openssl, for the master's
pin). Booted, they reach nothing but each other, so the role's `apt deb=`
installs those from apt's cache where a real host would fetch them from its
mirror.

Not part of make test (a minute or so; apt reaches Debian's mirror while
preparing); .ci/run runs it after make package-test.

usage: ansible_role.py --deb build/trainyard_VERSION_ARCH.deb [--build build]
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from machine import ENV, Machine, Network, harness  # noqa: E402

check, check_eq, TestFailure = harness.check, harness.check_eq, harness.TestFailure

ROLE_DIR = os.path.join(REPO, "contrib", "ansible")
SITE = os.path.join(ROLE_DIR, "site.yml")
USER = "deploy"                    # the machines' ssh user, who may sudo
DATA = "/var/lib/yard/master"
POOL = "train"
# each host's inventory name (and host name, and so its node's name) and its labels
MASTER = "yard-master-1"
AGENTS = {"yard-agent-1": {"zone": "test", "rack": "1"},
          "yard-agent-2": {"zone": "test", "rack": "2"}}
# what the inventory gives the master: a reloadable key or two
MASTER_OPTIONS = {"policy": "fifo", "rate-limit": "100:1000"}
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)"
                   r"\s+skipped=(\d+)\s+rescued=(\d+)\s+ignored=(\d+)", re.M)


class Run:
    def __init__(self, deb, build):
        self.deb = os.path.abspath(deb)
        self.build = build
        self.t0 = time.monotonic()
        self.steps = 0
        self.net = Network(log=self.say)
        self.machines = {}      # inventory name -> Machine
        self.ctl = None         # the controller's dir: key, known_hosts, inventory, logs
        self.runs = 0
        self.last_log = None
        self.pin = None

    def say(self, msg):
        print(f"ansible-test: {msg}", flush=True)

    def step(self, what, fn):
        self.say(f"{what} ...")
        t = time.monotonic()
        note = fn()
        self.steps += 1
        self.say(f"{what}: ok ({time.monotonic() - t:.1f}s){' ' + note if note else ''}")

    @property
    def master(self):
        return self.machines[MASTER]

    # -- on the host --

    def tools(self):
        for tool in ("ansible-playbook", "ansible-lint", "ssh", "ssh-keygen"):
            if not shutil.which(tool):
                raise TestFailure(f"'{tool}' is not installed (Debian's ansible, ansible-lint and "
                                  "openssh-client; make ansible-test installs them)")
        r = subprocess.run(["ansible-playbook", "--version"], capture_output=True, text=True)
        version = r.stdout.splitlines()[0] if r.stdout else "?"
        with tempfile.TemporaryDirectory(prefix="yard-ansible-syntax-") as d:
            open(os.path.join(d, "ansible.cfg"), "w").close()
            r = subprocess.run(["ansible-playbook", "--syntax-check", "-i", "localhost,", SITE],
                               capture_output=True, text=True, env=self.ansible_env(d), cwd=d)
            check(r.returncode == 0, f"ansible-playbook --syntax-check {SITE}: exit {r.returncode}:\n"
                                     f"{r.stdout[-2000:]}{r.stderr[-2000:]}")
            # the production profile, warnings as errors; nothing fetched
            r = subprocess.run(["ansible-lint", "--offline", "--strict", "--nocolor", "--profile", "production",
                                SITE], capture_output=True, text=True, env=self.ansible_env(d), cwd=ROLE_DIR)
            lint = (r.stdout + r.stderr).strip()
            check(r.returncode == 0, f"ansible-lint {SITE}: exit {r.returncode}:\n{lint[-4000:]}")
        return f"({version}; {lint.splitlines()[-1] if lint else 'ansible-lint: no output'})"

    def network(self):
        self.net.create()
        return f"(namespace {self.net.ns}, bridge {self.net.bridge} {self.net.gateway}/24)"

    def prepare(self):
        """The first machine, prepared as an Ansible host; the two others
        are copies of it."""
        m = Machine(self.build, log=self.say)
        self.machines[MASTER] = m
        m.create(hostname=MASTER)
        self.ctl = os.path.join(m.dir, "ansible")
        os.makedirs(self.ctl, 0o700)
        key = os.path.join(self.ctl, "id_ed25519")
        r = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "yard-ansible-test", "-f", key],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"ssh-keygen: {r.stderr}")
        with open(key + ".pub") as f:
            pub = f.read().strip()
        deb = os.path.basename(self.deb)
        shutil.copyfile(self.deb, os.path.join(m.root, "root", deb))
        # what an Ansible host has; the .deb's dependencies (and openssl)
        # into apt's cache only: the role installs them
        m.run("{ apt-get update -qq && apt-get install -y -qq --no-install-recommends "
              "systemd-sysv python3 python3-apt openssh-server sudo"
              f" && apt-get install -y -qq --download-only /root/{shlex.quote(deb)} openssl"
              "; } >/var/log/yard-ansible-apt.log 2>&1 || { tail -30 /var/log/yard-ansible-apt.log; exit 1; }\n"
              f"rm /root/{shlex.quote(deb)}\n"
              f"useradd --create-home --shell /bin/bash {USER}\n"
              f"echo '{USER} ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/{USER} && chmod 0440 /etc/sudoers.d/{USER}\n"
              f"install -d -m 0700 -o {USER} -g {USER} /home/{USER}/.ssh\n"
              f"echo {shlex.quote(pub)} > /home/{USER}/.ssh/authorized_keys\n"
              f"chown {USER}:{USER} /home/{USER}/.ssh/authorized_keys\n")
        for t in ("apt-daily.timer", "apt-daily-upgrade.timer"):
            os.symlink("/dev/null", os.path.join(m.root, "etc/systemd/system", t))
        cached = [f for f in os.listdir(os.path.join(m.root, "var/cache/apt/archives")) if f.endswith(".deb")]
        check(any(f.startswith("libmicrohttpd") for f in cached),
              f"apt cached none of the package's dependencies: {cached}")
        for name in AGENTS:
            c = Machine(self.build, log=self.say)
            self.machines[name] = c
            c.create(hostname=name, clone=m)
            # a host key of its own: the copy has the first machine's
            for f in os.listdir(os.path.join(c.root, "etc/ssh")):
                if f.startswith("ssh_host_"):
                    os.unlink(os.path.join(c.root, "etc/ssh", f))
            r = subprocess.run(["ssh-keygen", "-A", "-f", c.root], capture_output=True, text=True)
            check(r.returncode == 0, f"ssh-keygen -A -f {c.root}: {r.stderr}")
        return f"({len(cached)} packages in apt's cache; {len(AGENTS)} copies)"

    def boot(self):
        for i, m in enumerate(self.machines.values()):
            m.boot_start(self.net, self.net.addr(2 + i))
        states = [m.boot_wait() for m in self.machines.values()]
        with open(os.path.join(self.ctl, "known_hosts"), "w") as f:
            for m in self.machines.values():
                with open(os.path.join(m.root, "etc/ssh/ssh_host_ed25519_key.pub")) as k:
                    f.write(f"{m.addr} {' '.join(k.read().split()[:2])}\n")
        for name, m in self.machines.items():
            r = subprocess.run(self.net.argv(["ssh"] + self.ssh_opts() + [f"{USER}@{m.addr}", "sudo", "-n",
                                                                          "cat", "/etc/hostname"]),
                               capture_output=True, text=True, timeout=60, env=ENV)
            check(r.returncode == 0 and r.stdout.strip() == name,
                  f"ssh {USER}@{m.addr} sudo cat /etc/hostname: exit {r.returncode}: {r.stdout!r} {r.stderr!r}")
        return f"(systemd says {', '.join(states)}; ssh and sudo work on {len(self.machines)})"

    # -- ansible --

    def ssh_opts(self):
        return ["-F", "/dev/null", "-i", os.path.join(self.ctl, "id_ed25519"), "-o", "IdentitiesOnly=yes",
                "-o", f"UserKnownHostsFile={os.path.join(self.ctl, 'known_hosts')}",
                "-o", "StrictHostKeyChecking=yes", "-o", "HostKeyAlgorithms=ssh-ed25519",
                "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]

    def ansible_env(self, ctl):
        """ansible-playbook's environment: its config file ctl/ansible.cfg,
        its home ctl (~/.ansible)."""
        return dict(ENV, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", HOME=ctl,
                    ANSIBLE_CONFIG=os.path.join(ctl, "ansible.cfg"))

    def write_inventory(self):
        inv = {"all": {
            "vars": {"ansible_user": USER, "trainyard_deb": self.deb},
            "children": {
                "yard_masters": {"hosts": {MASTER: {"ansible_host": self.master.addr,
                                                    "trainyard_master_options": MASTER_OPTIONS}}},
                "yard_agents": {
                    "vars": {"trainyard_agent_gpus": "sim:1", "trainyard_agent_pool": POOL},
                    "hosts": {name: {"ansible_host": self.machines[name].addr, "trainyard_agent_labels": labels}
                              for name, labels in AGENTS.items()}}}}}
        with open(os.path.join(self.ctl, "inventory.yml"), "w") as f:
            json.dump(inv, f, indent=1)  # JSON is YAML
        opts = " ".join(self.ssh_opts()[2:] + ["-o", "ControlMaster=auto", "-o", "ControlPersist=60s"])
        with open(os.path.join(self.ctl, "ansible.cfg"), "w") as f:
            f.write("[defaults]\n"
                    f"inventory = {os.path.join(self.ctl, 'inventory.yml')}\n"
                    f"private_key_file = {os.path.join(self.ctl, 'id_ed25519')}\n"
                    f"local_tmp = {os.path.join(self.ctl, 'tmp')}\n"
                    "interpreter_python = /usr/bin/python3\n"
                    "retry_files_enabled = False\n"
                    "forks = 5\n"
                    "[ssh_connection]\n"
                    f"ssh_args = {opts}\n"
                    f"control_path_dir = {os.path.join(self.ctl, 'cp')}\n"
                    "pipelining = True\n")

    def playbook(self, *extra, ok=True, timeout=600):
        """Runs site.yml (in the network's namespace, where the machines
        are reached); returns (exit status, {host: recap counts}, output).
        ok: fail unless it exits 0 with no host failed or unreachable."""
        self.runs += 1
        log = os.path.join(self.ctl, f"run-{self.runs}.log")
        self.last_log = log
        argv = ["ansible-playbook", SITE, *extra]
        with open(log, "w") as f:
            try:
                r = subprocess.run(self.net.argv(argv), stdin=subprocess.DEVNULL, stdout=f,
                                   stderr=subprocess.STDOUT, timeout=timeout, cwd=self.ctl,
                                   env=self.ansible_env(self.ctl))
            except subprocess.TimeoutExpired:
                raise TestFailure(f"ansible-playbook did not finish in {timeout}s:\n{self.log_tail()}") from None
        with open(log) as f:
            out = f.read()
        recap = {m.group(1): dict(zip(("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored"),
                                      map(int, m.groups()[1:])))
                 for m in RECAP.finditer(out)}
        if ok:
            bad = {h: c for h, c in recap.items() if c["failed"] or c["unreachable"]}
            check(r.returncode == 0 and not bad and set(recap) == set(self.machines),
                  f"ansible-playbook {' '.join(extra)}: exit {r.returncode}, recap {recap} (its output below)")
        return r.returncode, recap, out

    def log_tail(self, n=60, width=800):
        """The last n lines of the last playbook's output, each cut to width."""
        try:
            with open(self.last_log) as f:
                return "\n".join(ln if len(ln) <= width else ln[:width] + " [...]"
                                 for ln in f.read().splitlines()[-n:])
        except (OSError, TypeError):
            return ""

    def extra_vars(self, name, data):
        path = os.path.join(self.ctl, name)
        with open(path, "w") as f:
            json.dump(data, f)
        return ["-e", "@" + path]

    # -- in the machines --

    def unit(self, m, unit, *props):
        rc, out = m.sh(f"systemctl show {unit} " + " ".join(f"-p {p}" for p in props))
        return dict(ln.split("=", 1) for ln in out.splitlines() if "=" in ln)

    def journal(self, m, unit):
        return m.sh(f"journalctl -u {unit} -o cat --no-pager", check=False)[1]

    def cli(self, cmd, check_rc=True, timeout=120):
        """The yard CLI on the master's machine, as its admin, over https
        with the pin its journal shows."""
        env = f"export YARD_MASTER=https://127.0.0.1:7420 YARD_PIN={self.pin} YARD_TOKEN=$(cat {DATA}/admin-token)"
        return self.master.sh(f"{env} && {cmd}", check=check_rc, timeout=timeout)

    def nodes(self):
        rc, out = self.cli("yard nodes --output json")
        return {n["name"]: n for n in json.loads(out)["nodes"]}

    # -- the steps --

    def first_run(self):
        self.write_inventory()
        rc, recap, out = self.playbook()
        for host, c in recap.items():
            check(c["changed"] > 0, f"the first run changed nothing on {host}: {c}")
        return "(" + "; ".join(f"{h}: changed={c['changed']}" for h, c in sorted(recap.items())) + ")"

    def services(self):
        m = self.master
        pat = re.compile(r"yard master ready url=https://\S+ pin=(sha256//\S+)")
        found = pat.findall(self.journal(m, "yard-master"))
        check(found, f"the master's journal has no https ready line:\n{self.journal(m, 'yard-master')[-2000:]}")
        self.pin = found[-1]
        u = self.unit(m, "yard-master", "ActiveState", "UnitFileState")
        check_eq((u["ActiveState"], u["UnitFileState"]), ("active", "enabled"), "yard-master on the master")
        rc, conf = m.sh("stat -c '%U:%G %a' /etc/yard/master.conf && cat /etc/yard/master.conf")
        check(conf.startswith("root:yard 640\n"), f"/etc/yard/master.conf's owner and mode: {conf[:40]!r}")
        for line in ("listen = 0.0.0.0:7420", "tls-self-signed = true", "policy = fifo", "rate-limit = 100:1000"):
            check(line in conf.splitlines(), f"/etc/yard/master.conf lacks {line!r}:\n{conf}")
        rc, token = m.sh(f"cat {DATA}/join-token")
        for name in AGENTS:
            a = self.machines[name]
            u = self.unit(a, "yard-master", "ActiveState", "UnitFileState")
            check_eq((u["ActiveState"], u["UnitFileState"]), ("inactive", "disabled"), f"yard-master on {name}")
            # held back at install (policy-rc.d): it never ran, so it made no tokens
            check(not os.path.exists(a.root + f"{DATA}/admin-token"),
                  f"yard-master ran on {name}: it left {DATA}/admin-token")
            u = self.unit(a, "yard-agent", "ActiveState", "UnitFileState", "NRestarts")
            check_eq((u["ActiveState"], u["UnitFileState"], u["NRestarts"]), ("active", "enabled", "0"),
                     f"yard-agent's state, unit file state and restarts on failure on {name}")
            rc, st = a.sh("stat -c '%U %a' /etc/yard/join-token && cat /etc/yard/join-token")
            check_eq(st.split("\n", 1)[0], "root 600", f"/etc/yard/join-token's owner and mode on {name}")
            check_eq(st.split("\n", 1)[1], token, f"/etc/yard/join-token on {name} beside the master's")
            rc, conf = a.sh("cat /etc/yard/agent.conf")
            for line in (f"master = https://{m.addr}:7420", f"pin = {self.pin}", f"pool = {POOL}", "gpus = sim:1"):
                check(line in conf.splitlines(), f"/etc/yard/agent.conf on {name} lacks {line!r}:\n{conf}")
        return f"(master serves https, pin {self.pin[:16]}...; no master on the agents)"

    def joined(self):
        nodes = harness.wait_until(lambda: (lambda n: n if all(n.get(a, {}).get("state") == "ready"
                                                               for a in AGENTS) else None)(self.nodes()),
                                   30, "both agents ready in `yard nodes`")
        check_eq(sorted(nodes), sorted(AGENTS), "the master's nodes")
        for name, labels in AGENTS.items():
            n = nodes[name]
            check_eq(n.get("pool"), POOL, f"node {name}'s pool")
            check_eq(n.get("labels"), labels, f"node {name}'s labels")
            check_eq(n.get("addr"), self.machines[name].addr, f"node {name}'s address")
            check_eq(len(n.get("gpus", [])), 1, f"node {name}'s GPUs (gpus = sim:1)")
        return "(" + ", ".join(f"{k} {v['addr']}" for k, v in sorted(nodes.items())) + ")"

    def job(self):
        spec = {"name": "ansible-two", "pool": POOL,
                "command": ["/bin/sh", "-c", 'echo "task $YARD_TASK_INDEX of $YARD_JOB_NAME on $YARD_NODE"'],
                "tasks": {"worker": {"replicas": 2, "gpus": 1}},  # one GPU per node: one task on each
                "placement": {"labels": {"zone": "test"}}}
        self.master.sh(f"mkdir -p /root/job && cat > /root/job/job.yaml <<'EOF'\n{json.dumps(spec)}\nEOF")
        rc, out = self.cli("cd /root/job && yard submit job.yaml")
        m = re.search(r"\d+", out)
        check(m, f"yard submit printed no job id: {out!r}")
        jid = m.group(0)
        rc, out = self.cli(f"yard wait {jid} --timeout 120", check_rc=False, timeout=150)
        rc2, show = self.cli(f"yard show {jid} --output json")
        job = json.loads(show)
        check(rc == 0 and job["state"] == "succeeded", f"job {jid}: yard wait exit {rc}: {out}\n{show[:3000]}")
        rc, logs = self.cli(f"yard logs {jid} --prefix")
        seen = set()
        for i in range(2):
            found = re.findall(rf"task {i} of ansible-two on (\S+)", logs)
            check(len(found) == 1, f"job {jid}'s log has not one line of task {i}: {logs!r}")
            seen.add(found[0])
        check_eq(seen, set(AGENTS), f"the nodes job {jid}'s two tasks ran on")
        return f"(job {jid} succeeded, worker/0 and worker/1 on {' and '.join(sorted(seen))}, logs read back)"

    def idempotent(self):
        rc, recap, out = self.playbook()
        changed = {h: c["changed"] for h, c in recap.items() if c["changed"]}
        check(not changed, f"the second run changed something: {changed}:\n"
                           + "\n".join(ln for ln in out.splitlines() if ln.startswith("changed:"))[-3000:])
        return f"(changed=0 on {len(recap)} hosts)"

    def reloadable_keys(self):
        """The role's list of reloadable keys is the master's: what
        `yard master --help` marks [reloadable]."""
        rc, helptext = self.master.sh("yard master --help")
        product, key = set(), None
        for line in helptext.splitlines():
            m = re.match(r"^\s+--([a-z0-9-]+)", line)
            if m:
                key = m.group(1)
            if key and "reloadable" in line and "[" in line:
                product.add(key)
        with open(os.path.join(ROLE_DIR, "roles/trainyard/vars/main.yml")) as f:
            text = f.read()
        m = re.search(r"^trainyard_master_reloadable_keys:\n((?:  - \S+\n)+)", text, re.M)
        check(m, "no trainyard_master_reloadable_keys list in the role's vars/main.yml")
        role = {ln.split("- ", 1)[1] for ln in m.group(1).splitlines()}
        check(product, "yard master --help marks no key [reloadable]")
        check_eq(sorted(role), sorted(product), "the role's reloadable keys beside yard master --help's")
        return f"({len(role)} keys)"

    def master_pid(self):
        u = self.unit(self.master, "yard-master", "MainPID", "ActiveState")
        check_eq(u["ActiveState"], "active", "yard-master's state")
        return u["MainPID"]

    def check_only_master_changed(self, recap, what):
        check(recap[MASTER]["changed"] > 0, f"{what}: nothing changed on the master: {recap[MASTER]}")
        for name in AGENTS:
            check_eq(recap[name]["changed"], 0, f"{what}: changes on {name}")

    def reload(self):
        before = self.master_pid()
        reloads = self.journal(self.master, "yard-master").count("reloaded '/etc/yard/master.conf'")
        opts = dict(MASTER_OPTIONS, team=["vision=2:16", "nlp=1:8"])
        rc, recap, out = self.playbook(*self.extra_vars("reload.json", {"trainyard_master_options": opts}))
        self.check_only_master_changed(recap, "adding teams")
        check_eq(task_results(out, "RUNNING HANDLER [trainyard : Reload yard-master]").get(MASTER), "changed",
                 "the reload handler on the master")
        check(task_results(out, "RUNNING HANDLER [trainyard : Restart yard-master]").get(MASTER)
              in (None, "skipping"), "the restart handler ran on a reloadable change")
        journal = self.journal(self.master, "yard-master")
        lines = [ln for ln in journal.splitlines() if "reloaded '/etc/yard/master.conf'" in ln]
        check(len(lines) == reloads + 1 and "applied team" in lines[-1],
              f"the master's journal has no new reload that applied team: {lines}")
        u = self.unit(self.master, "yard-master", "MainPID", "NRestarts")
        check_eq((u["MainPID"], u["NRestarts"]), (before, "0"), "yard-master's pid and restarts after a reload")
        return f"(pid {before} {lines[-1].split(': ', 1)[-1]})"

    def restart(self):
        before = self.master_pid()
        opts = dict(MASTER_OPTIONS, team=["vision=2:16", "nlp=1:8"], lease="20s")
        rc, recap, out = self.playbook(*self.extra_vars("restart.json", {"trainyard_master_options": opts}))
        self.check_only_master_changed(recap, "a lease")
        check(task_results(out, "RUNNING HANDLER [trainyard : Reload yard-master]").get(MASTER)
              in (None, "skipping"), "the reload handler ran on a change of lease")
        check_eq(task_results(out, "RUNNING HANDLER [trainyard : Restart yard-master]").get(MASTER), "changed",
                 "the restart handler on the master")
        after = self.master_pid()
        check(after != before, f"yard-master's pid {before} did not change over a change of lease")
        rc, conf = self.master.sh("cat /etc/yard/master.conf")
        check("lease = 20s" in conf.splitlines(), f"/etc/yard/master.conf lacks the lease:\n{conf}")
        # the role waited for both agents to be ready again; so do we
        nodes = self.nodes()
        check(all(nodes.get(a, {}).get("state") == "ready" for a in AGENTS),
              f"the agents are not ready on the restarted master: {nodes}")
        return f"(pid {before} -> {after}; both agents ready again)"

    def bad_variables(self):
        """Bad variables stop the run in the checks, before any host
        changed, with the variable, its value and the reason."""
        cases = [
            ({"trainyard_master_options": {"listen": "0.0.0.0:1"}},
             "trainyard_master_options.listen: \"0.0.0.0:1\": the role writes 'listen' itself"),
            ({"trainyard_agent_options": {"label": "x=y"}},
             "trainyard_agent_options.label: \"x=y\": the role writes 'label' itself"),
            ({"trainyard_master_options": {"team": "a=1\nlisten = 0.0.0.0:1"}},
             "trainyard_master_options.team: \"a=1\\nlisten = 0.0.0.0:1\": expected a key"),
            ({"trainyard_agent_labels": {"rack": "1=2"}},
             'trainyard_agent_labels: {"rack": "1=2"} / trainyard_agent_pool'),
            ({"trainyard_deb": "/nonexistent/trainyard.deb"},
             "trainyard_deb: '/nonexistent/trainyard.deb': expected the absolute path"),
        ]
        for i, (data, want) in enumerate(cases):
            rc, recap, out = self.playbook(*self.extra_vars(f"bad-{i}.json", data), ok=False)
            check(rc != 0, f"the role took {data}:\n{self.log_tail()}")
            msgs = [json.loads(f'"{m}"') for m in re.findall(r'"msg": "((?:[^"\\]|\\.)*)"', out)]
            check(any(want in m for m in msgs), f"no message of the role on {data} has {want!r}: {msgs}")
            changed = {h: c["changed"] for h, c in recap.items() if c["changed"]}
            check(not changed, f"the role changed hosts before refusing {data}: {changed}")
            check("TASK [trainyard : Make the package's dir]" not in out,
                  f"the role went on past its checks on some hosts after refusing {data}:\n{self.log_tail()}")
        return f"({len(cases)} refused, nothing changed)"

    def diagnose(self):
        """After a failure: the playbook's output, the services' journals."""
        if self.last_log:
            self.say(f"the last ansible-playbook's output ({self.last_log}):\n{self.log_tail(80)}")
        for name, m in self.machines.items():
            if m.init_pid:
                rc, out = m.sh("journalctl -u yard-master -u yard-agent -o short-monotonic --no-pager | tail -25",
                               check=False)
                self.say(f"{name}'s journal:\n{out}")

    def main(self):
        failed = None
        try:
            self.step("ansible-playbook --syntax-check, ansible-lint", self.tools)
            self.step("a network of our own (namespace, bridge)", self.network)
            self.step("three Debian 12 machines, prepared as Ansible hosts", self.prepare)
            self.step("boot them (systemd-nspawn -b), ssh in", self.boot)
            self.step("ansible-playbook site.yml", self.first_run)
            self.step("the services, their files", self.services)
            self.step("both agents joined with their pool and labels", self.joined)
            self.step("a job of two tasks, one on each agent", self.job)
            self.step("a second run changes nothing", self.idempotent)
            self.step("the role's reloadable keys are the master's", self.reloadable_keys)
            self.step("a reloadable change reloads the master", self.reload)
            self.step("a change that needs a restart restarts it", self.restart)
            self.step("bad variables are refused", self.bad_variables)
        except (TestFailure, AssertionError) as e:
            failed = e
            self.say(f"FAILED: {e}")
            self.diagnose()
        t = time.monotonic()
        errors = []
        for m in self.machines.values():
            m.poweroff_start()
        for m in self.machines.values():
            errors += m.close()
        errors += self.net.close()
        self.say(f"power off and clean up: {'ok' if not errors else 'FAILED'} ({time.monotonic() - t:.1f}s)")
        for e in errors:
            self.say(f"cleanup: {e}")
        ok = failed is None and not errors
        self.say(f"{self.steps} steps passed{'' if ok else ', FAILED'} in {time.monotonic() - self.t0:.1f}s")
        return 0 if ok else 1


def task_results(out, title):
    """{host: ok|changed|skipping|failed|fatal} of the task or handler whose
    header line in ansible-playbook's output starts with title (its last
    run when it ran more than once)."""
    results = {}
    for section in re.split(r"^(?=TASK \[|RUNNING HANDLER \[|PLAY RECAP)", out, flags=re.M):
        if section.startswith(title):
            results = {}
            for m in re.finditer(r"^(ok|changed|skipping|failed|fatal): \[([^\]]+)\]", section, re.M):
                results[m.group(2).split(" -> ")[0]] = m.group(1)
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--deb", required=True)
    ap.add_argument("--build", default="build")
    args = ap.parse_args()
    if not os.path.isfile(args.deb):
        print(f"ansible-test: no package '{args.deb}' (make deb builds it)", file=sys.stderr)
        return 2
    return Run(args.deb, args.build).main()


if __name__ == "__main__":
    sys.exit(main())
