"""Several nodes on one machine: agents in network namespaces joined by a
bridge, each with its own address and hostname (netns.py, multinode.py).
The base of the multi-node suite: a gang whose tasks land on different nodes
and reach each other, and PyTorch DDP (gloo) across the namespaces by hand."""
import json
import os
import shutil
import subprocess
import sys
import time

from harness import check, check_eq, spec
from multinode import multinode
from netns import Topology

TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch (CPU, gloo)
PEER_PORT = 23456

# Prints who and where it is, listens on its own address, connects to every
# other node's, then accepts one connection from each: both directions work.
PEERS = r"""
import json, os, socket, sys, time
addrs = json.loads(sys.argv[1]); port = int(sys.argv[2]); deadline = time.time() + 60
me = os.environ["YARD_NODE"]; host = socket.gethostname()
print("hostname=" + host, flush=True)
print("node=" + me, flush=True)
print("resolves=" + socket.gethostbyname(host), flush=True)
with open("/proc/self/cgroup") as f:
    print("memcg=" + [l.split(":")[2] for l in f.read().split() if ":memory:" in l or l.startswith("0::")][0], flush=True)
srv = socket.create_server((addrs[me], port))
srv.settimeout(1)
for node, addr in sorted(addrs.items()):
    if node == me:
        continue
    while True:
        try:
            with socket.create_connection((addr, port), timeout=1) as s:
                s.sendall(me.encode())
            print(f"reached={node}@{addr}", flush=True)
            break
        except OSError as e:
            if time.time() > deadline:
                print(f"unreachable={node}@{addr}: {e}", flush=True)
                sys.exit(1)
            time.sleep(0.1)
heard = set()
while len(heard) < len(addrs) - 1 and time.time() < deadline:
    try:
        conn, peer = srv.accept()
    except socket.timeout:
        continue
    with conn:
        conn.settimeout(5)
        heard.add(conn.recv(64).decode())
        print(f"heard={sorted(heard)[-1]}@{peer[0]}", flush=True)
sys.exit(0 if len(heard) == len(addrs) - 1 else 2)
"""


def test_gang_across_namespaces():
    with multinode("mn-gang", nodes=2) as c:
        c.start_master()
        c.start_agents(gpus="sim:1")
        addrs = {n.name: n.addr for n in c.topo.nodes}
        nodes = c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"]
        check_eq(sorted((n["name"], n["addr"]) for n in nodes), sorted(addrs.items()),
                 "nodes and the addresses they advertise")
        _, job = c.api.submit(spec(["python3", "-c", PEERS, json.dumps(addrs), str(PEER_PORT)],
                                   name="peers", replicas=2, gpus=1, framework="command"))
        j = c.api.wait_job(job["id"], timeout=120)
        logs = {t["index"]: c.api.log(job["id"], task=f"worker/{t['index']}").decode()
                for t in j["tasks"]}
        check_eq(j["state"], "succeeded", f"state of the 2-node job; logs {logs}; "
                 f"stderr {[c.api.log(job['id'], task=f'worker/{i}', stream='stderr') for i in logs]}")
        seen = {}
        for t in j["tasks"]:
            out = dict(l.split("=", 1) for l in logs[t["index"]].split("\n") if "=" in l)
            node = c.topo.node(t["node"])
            check_eq(out.get("node"), t["node"], f"YARD_NODE of worker/{t['index']}")
            check_eq(out.get("hostname"), node.hostname, f"hostname of worker/{t['index']}")
            check_eq(out.get("resolves"), node.addr,
                     f"worker/{t['index']}'s hostname in its /etc/hosts")
            other = [n for n in c.topo.nodes if n.name != t["node"]][0]
            check_eq(out.get("reached"), f"{other.name}@{other.addr}",
                     f"worker/{t['index']} connecting to the other node")
            check_eq(out.get("heard"), f"{other.name}@{other.addr}",
                     f"worker/{t['index']} accepting from the other node")
            # the agent inside a namespace still has cgroups (netns.py remounts them)
            check(out.get("memcg", "").startswith(f"/yard/{t['node']}-"),
                  f"worker/{t['index']} in its agent's memory cgroup: {out.get('memcg')}")
            seen[t["node"]] = out["hostname"]
        check_eq(sorted(seen), sorted(addrs), "the nodes the two workers ran on")
        check(len(set(seen.values())) == 2, f"two different hostnames: {seen}")


ALLREDUCE = r"""
import os, socket, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"rank={rank} world={dist.get_world_size()} host={socket.gethostname()} sum={t.item():g}", flush=True)
dist.destroy_process_group()
"""


def test_ddp_by_hand_across_namespaces():
    """The topology carries PyTorch DDP: two gloo ranks, one per namespace,
    started by hand (no yard), all-reduce 1 + 2."""
    if not os.path.exists(TORCH_PYTHON):
        raise AssertionError(f"{TORCH_PYTHON} (Debian python3-torch) is missing")
    with Topology(nodes=2) as topo:
        a = topo.nodes[0]
        procs = []
        try:
            for rank, n in enumerate(topo.nodes):
                env = dict(os.environ, MASTER_ADDR=a.addr, MASTER_PORT="29511", WORLD_SIZE="2",
                           RANK=str(rank), GLOO_SOCKET_IFNAME=n.ifname)
                procs.append(topo.popen(n, [TORCH_PYTHON, "-c", ALLREDUCE], env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE))
            outs = []
            deadline = time.monotonic() + 120
            for p in procs:
                try:
                    out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise AssertionError("gloo ranks did not finish in 120 s (no route between "
                                         "the namespaces?)")
                outs.append((p.returncode, out.decode(), err.decode()))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for rank, (rc, out, err) in enumerate(outs):
            check_eq(rc, 0, f"exit status of rank {rank}; stderr {err[-2000:]}")
            got = dict(kv.split("=", 1) for kv in out.split())
            n = topo.nodes[rank]
            check_eq(got, {"rank": str(rank), "world": "2", "host": n.hostname, "sum": "3"},
                     f"what rank {rank} printed")


# A test process that builds a 2-node cluster, starts a job, prints what it
# made and dies by SIGKILL: no finally, no atexit runs.
CRASH = r"""
import json, os, signal, sys, time
sys.path.insert(0, sys.argv[1])
from harness import spec, wait_until
from multinode import multinode
m = multinode("mn-crash", nodes=2)
c = m.__enter__()
c.start_master()
c.start_agents(gpus="sim:1")
_, job = c.api.submit(spec(["sh", "-c", "echo $$; exec sleep 1000"], name="orphan", replicas=2, gpus=1))
wait_until(lambda: all(c.api.log(job["id"], task=f"worker/{i}").strip() for i in range(2)), 60, "tasks")
tasks = [int(c.api.log(job["id"], task=f"worker/{i}")) for i in range(2)]
print(json.dumps({"id": c.topo.id, "ns": [n.ns for n in c.topo.nodes], "links": c.topo._state["links"],
                  "pids": [c.master.p.pid] + [a.p.pid for a in c.agents.values()] + tasks,
                  "cgroups": sorted(c.cgroup_bases), "dir": c.dir}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_sweep_after_crash():
    """A test killed mid-run leaves a master, agents, tasks, namespaces,
    links and cgroups; the next sweep removes them all (and nothing else)."""
    import netns
    from harness import pid_alive, wait_until
    here = os.path.dirname(os.path.abspath(__file__))
    r = subprocess.run([sys.executable, "-c", CRASH, here], capture_output=True, timeout=180)
    check_eq(r.returncode, -9, f"the crashing test's status; stderr {r.stderr[-3000:]!r}")
    made = json.loads(r.stdout.decode().strip().splitlines()[-1])
    check(all(pid_alive(p) for p in made["pids"]), f"master, agents and tasks outlive the test: {made}")
    netns_list = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    check(all(ns in netns_list for ns in made["ns"]), f"namespaces left behind: {netns_list}")
    swept = netns.sweep()
    check(made["id"] in swept, f"sweep names the dead topology {made['id']}: {swept}")
    wait_until(lambda: not any(pid_alive(p) for p in made["pids"]), 10, "every process to be gone")
    netns_list = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    check(not any(ns in netns_list for ns in made["ns"]), f"namespaces after the sweep: {netns_list}")
    check(not any(l in links for l in made["links"]), f"links after the sweep: {links}")
    check(not any(os.path.exists(os.path.join(netns.NETNS_ETC, ns)) for ns in made["ns"]),
          "/etc/netns dirs after the sweep")
    left = [cg for cg in made["cgroups"] for h in os.listdir("/sys/fs/cgroup")
            if os.path.isdir(os.path.join("/sys/fs/cgroup", h, cg))]
    check(not left, f"cgroups after the sweep: {left}")
    shutil.rmtree(made["dir"], ignore_errors=True)
