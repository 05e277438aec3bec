#!/usr/bin/env python3
"""Gang start latency of a 2-node PyTorch job, yard beside torchrun by hand,
on the same two network namespaces (tests/e2e/netns.py) of this machine.

The event measured is the same on both sides: from submission until every
rank has completed torch.distributed.init_process_group("gloo") and taken a
wall-clock timestamp (bench/gang_start_rank.py, the same script on both
sides; init_process_group returns only once every rank has joined).

  yard      submission = the POST /v1/jobs of a `framework: pytorch` job with
            2 workers of 1 GPU each on two `--gpus sim:1` agents (one per
            namespace), command [/usr/bin/python3, gang_start_rank.py]; the
            pytorch launcher provides MASTER_ADDR, MASTER_PORT, WORLD_SIZE,
            RANK, GLOO_SOCKET_IFNAME. Also prints the yard-internal part from
            the job document: submitted_at -> started_at (placed) ->
            running_at (every task running).
  torchrun  submission = the moment both `torch.distributed.run` processes
            are spawned, one per namespace (through `ip netns exec`, whose
            cost is printed too), GLOO_SOCKET_IFNAME=eth0, static rendezvous
            at node 1's address (--master_addr/--master_port).

Each side prints p50, p90, min and max over --runs runs (interleaved, so both
see the same machine), and where the time went in each rank: process start
(t_exec), torch imported (t_import), process group up (t_init), all as the
latest rank's time after submission. A run gets --timeout seconds; a yard
side that cannot run a pytorch job (no launcher yet) is reported once, with
the server's reason, and skipped. Run by hand as root; prints numbers and
asserts nothing.

Until the pytorch launcher lands, --yard-framework command runs the yard side
as a `framework: command` job whose shell sets that environment by hand (RANK
from YARD_TASK_INDEX, MASTER_ADDR the node of rank 0): the same event, with
yard's placement and start path, minus the launcher.

usage: bench/gang_start.py [--yard build/yard] [--runs 20] [--timeout 60]
                           [--agent-args "--ports 30000-32000"]
                           [--yard-framework pytorch|command] [yard|torchrun ...]
"""
import argparse
import io
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tarfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from benchlib import RunFailed, pct  # noqa: E402
HERE = os.path.dirname(os.path.abspath(__file__))
RANK_SCRIPT = os.path.join(HERE, "gang_start_rank.py")
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch (CPU, gloo)
PHASES = ("t_exec", "t_import", "t_init")


def stats(values):
    if not values:
        return "no runs"
    return (f"p50 {pct(values, 50):7.3f} s  p90 {pct(values, 90):7.3f} s  "
            f"min {min(values):7.3f} s  max {max(values):7.3f} s  ({len(values)} runs)")


def parse_ranks(text):
    """{rank: {"host": ..., "t_exec": float, ...}} from gang_start lines."""
    ranks = {}
    for line in text.splitlines():
        if "gang_start " not in line:
            continue
        kv = dict(w.split("=", 1) for w in line.split("gang_start ", 1)[1].split() if "=" in w)
        ranks[int(kv["rank"])] = {"host": kv["host"], **{k: float(kv[k]) for k in PHASES}}
    return ranks


class Side:
    """The samples of one side: per run, each phase's latest rank minus t0."""

    def __init__(self, name):
        self.name = name
        self.samples = {k: [] for k in PHASES}
        self.extra = {}
        self.failures = []
        self.disabled = None

    def add(self, t0, ranks, want=2):
        if sorted(ranks) != list(range(want)):
            raise RunFailed(f"ranks reported: {sorted(ranks)}, expected 0..{want - 1}")
        for k in PHASES:
            self.samples[k].append(max(r[k] for r in ranks.values()) - t0)

    def add_extra(self, name, value):
        self.extra.setdefault(name, []).append(value)

    def report(self):
        print(f"\n{self.name}:")
        if self.disabled:
            print(f"  not measured: {self.disabled}")
        if self.samples["t_init"]:
            print(f"  gang start (submit -> all ranks past init_process_group): {stats(self.samples['t_init'])}")
            print(f"    of which: submit -> last rank's process started      {stats(self.samples['t_exec'])}")
            print(f"              submit -> last rank has imported torch     {stats(self.samples['t_import'])}")
        for name, values in self.extra.items():
            print(f"  {name}: {stats(values)}")
        for f in self.failures[:5]:
            print(f"  failed run: {f}")
        if len(self.failures) > 5:
            print(f"  ... and {len(self.failures) - 5} more failed runs")


def kill_ns_leftovers(topo, words):
    """SIGKILLs processes inside the topology's namespaces whose command line
    holds one of words (a run that timed out); the agents are left alone."""
    import netns
    for n in topo.nodes:
        for pid in netns._ns_pids(n.ns):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().decode(errors="replace")
            except OSError:
                continue
            if any(w in cmd for w in words):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def torchrun_once(topo, side, run, timeout):
    a = topo.nodes[0]
    port = 29600 + run % 200
    procs = []
    t0 = time.time()
    for k, n in enumerate(topo.nodes):
        env = dict(os.environ, GLOO_SOCKET_IFNAME=n.ifname, GANG_START_TIMEOUT=str(timeout))
        # torchrun 1.13 on Python 3.11 crashes on "--redirects 0" (its default)
        # and on "--tee 0": Std.from_str("0") returns None there, since
        # iterating an IntFlag skips its zero member. "1:0" sets local rank 1,
        # which does not exist, and leaves rank 0 at Std.NONE: what "0" means,
        # no redirection, the rank's output straight on torchrun's.
        argv = [TORCH_PYTHON, "-m", "torch.distributed.run", "--redirects", "1:0", "--tee", "1:0",
                "--nnodes", str(len(topo.nodes)), "--node_rank", str(k), "--nproc_per_node", "1",
                "--master_addr", a.addr, "--master_port", str(port), RANK_SCRIPT]
        procs.append(topo.popen(n, argv, cgroups=False, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True))
    outs = []
    try:
        deadline = time.monotonic() + timeout
        for p in procs:
            out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            outs.append((p.returncode, out.decode(errors="replace"), err.decode(errors="replace")))
    except subprocess.TimeoutExpired:
        raise RunFailed(f"no result in {timeout} s")
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        kill_ns_leftovers(topo, ("gang_start_rank.py", "torch.distributed.run"))
    for rc, out, err in outs:
        if rc != 0:
            raise RunFailed(f"torchrun exit {rc}: {err.strip()[-1500:]}")
    side.add(t0, parse_ranks("".join(o for _, o, _ in outs)), want=len(topo.nodes))


def upload_rank_script(api):
    """POSTs a tar.gz holding gang_start_rank.py as job code; returns its digest."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(RANK_SCRIPT, arcname="gang_start_rank.py")
    status, data, _ = api.request("POST", "/v1/code", raw=buf.getvalue(), ctype="application/gzip")
    if status != 201:
        raise RunFailed(f"POST /v1/code: HTTP {status}: {data[:300]!r}")
    import json
    return json.loads(data)["digest"]


def by_hand_env_command(topo, run):
    """A `framework: command` stand-in for the pytorch launcher (2 nodes
    only): a shell that sets what the launcher will (RANK from the task
    index; MASTER_ADDR the address of the node running rank 0, which with
    one task per node is this node for rank 0 and the other for rank 1) and
    execs the same rank script."""
    a, b = topo.nodes
    script = (f'case "$YARD_NODE" in {a.name}) me={a.addr} other={b.addr};; '
              f'{b.name}) me={b.addr} other={a.addr};; esac; '
              'if [ "$YARD_TASK_INDEX" = 0 ]; then MASTER_ADDR=$me; else MASTER_ADDR=$other; fi; '
              f'export MASTER_ADDR MASTER_PORT={29800 + run % 200} WORLD_SIZE=2 '
              f'RANK=$YARD_TASK_INDEX GLOO_SOCKET_IFNAME={a.ifname}; '
              f'exec {TORCH_PYTHON} gang_start_rank.py')
    return ["/bin/sh", "-c", script]


def yard_once(c, side, run, timeout, code, cpus, framework):
    api = c.api
    if framework == "pytorch":
        command = [TORCH_PYTHON, "gang_start_rank.py"]
    else:
        command = by_hand_env_command(c.topo, run)
    spec = {"name": f"gang{run}", "framework": framework, "command": command,
            "env": {"GANG_START_TIMEOUT": str(timeout)},
            "tasks": {"worker": {"replicas": len(c.topo.nodes), "gpus": 1, "cpus": cpus}}}
    t0 = time.time()
    status, job = api.submit(spec, code=code)
    if status != 201:
        err = (job or {}).get("error", {})
        side.disabled = f"POST /v1/jobs answered HTTP {status} {err.get('code')}: {err.get('message')}"
        raise RunFailed(side.disabled)
    jid = job["id"]
    try:
        j = api.wait_job(jid, timeout=timeout)
    except AssertionError:
        j = api.job(jid)
        api.json("POST", f"/v1/jobs/{jid}/cancel")
        api.wait_job(jid, timeout=30)
        raise RunFailed(f"job {jid} not finished in {timeout} s: state {j['state']}, tasks "
                        f"{[(t['node'], t['state']) for t in j['tasks']]}, reason {j.get('reason')}")
    out = "".join(api.log(jid, task=f"worker/{t['index']}").decode(errors="replace")
                  for t in j["tasks"])
    if j["state"] != "succeeded":
        errs = " | ".join(f"worker/{t['index']}@{t['node']}: " +
                          api.log(jid, task=f"worker/{t['index']}", stream="stderr")
                          .decode(errors="replace").strip()[-600:] for t in j["tasks"])
        raise RunFailed(f"job {jid} {j['state']}: {j.get('reason')}; {errs}")
    nodes = {t["node"] for t in j["tasks"]}
    if len(nodes) != len(c.topo.nodes):
        raise RunFailed(f"job {jid} ran on {sorted(nodes)}, not one task per node")
    side.add(t0, parse_ranks(out), want=len(c.topo.nodes))
    us = 1e6
    side.add_extra("yard-internal submitted_at -> started_at (placed)      ",
                   (j["started_at"] - j["submitted_at"]) / us)
    side.add_extra("yard-internal submitted_at -> running_at (all running) ",
                   (j["running_at"] - j["submitted_at"]) / us)
    side.add_extra("client POST sent -> submitted_at                       ",
                   j["submitted_at"] / us - t0)


def wrapper_cost(topo, n=5):
    """The time `ip netns exec ... unshare --uts sh -c` adds to a start."""
    times = []
    for _ in range(n):
        t = time.time()
        topo.run(topo.nodes[0], ["/bin/true"], cgroups=False, check=True)
        times.append(time.time() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--timeout", type=int, default=60, help="seconds per run")
    ap.add_argument("--agent-args", default="", help="more yard agent arguments (one string)")
    ap.add_argument("--cpus", type=float, default=float(os.cpu_count()),
                    help="cpus of each yard task (default: the machine's, so no quota slows it)")
    ap.add_argument("--yard-framework", choices=("pytorch", "command"), default="pytorch",
                    help="command: run the yard side as a `framework: command` job whose shell "
                    "sets the pytorch environment by hand (works before the pytorch launcher)")
    ap.add_argument("which", nargs="*", default=["yard", "torchrun"])
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("gang_start needs root (network namespaces, cgroups)", file=sys.stderr)
        return 2
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness as h
    h.YARD = os.environ["YARD"]
    from multinode import multinode

    sides = {w: Side(w if w != "yard" or args.yard_framework == "pytorch" else
                     "yard (framework: command, pytorch environment set by hand in sh)")
             for w in args.which}
    with multinode("bench-gang", nodes=2) as c:
        print(f"2 nodes: {', '.join(f'{n.name}={n.addr} ({n.hostname})' for n in c.topo.nodes)}; "
              f"master {c.topo.gateway}; {args.runs} runs of each side, interleaved")
        code = None
        if "yard" in sides:
            c.start_master()
            c.start_agents(gpus="sim:1", extra=shlex.split(args.agent_args))
            code = upload_rank_script(c.api)
        if "torchrun" in sides:
            print(f"ip netns exec + unshare wrapper per start: {wrapper_cost(c.topo) * 1000:.1f} ms "
                  f"(inside the torchrun numbers, not in yard's)")
        for run in range(args.runs):
            line = []
            for name, side in sides.items():
                if side.disabled:
                    continue
                try:
                    if name == "yard":
                        yard_once(c, side, run, args.timeout, code, args.cpus, args.yard_framework)
                    else:
                        torchrun_once(c.topo, side, run, args.timeout)
                    line.append(f"{name} {side.samples['t_init'][-1]:.3f} s")
                except RunFailed as e:
                    side.failures.append(f"run {run}: {e}")
                    line.append(f"{name} failed")
                    if not side.samples["t_init"]:
                        side.disabled = side.disabled or f"the first run failed: {e}"
                        print(f"{name}: the first run failed; side skipped: {e}", file=sys.stderr)
            print(f"run {run + 1}/{args.runs}: " + "  ".join(line), flush=True)
        for side in sides.values():
            side.report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
