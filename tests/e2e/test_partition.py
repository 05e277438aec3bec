"""Partitions and fencing: an agent in a network namespace is cut off from
the master (its veth link set down) for longer than its lease. It stops its
tasks before the lease ends (on_disconnect: stop, the default); the master
declares the node lost and restarts the job on the other node; when the link
is back nothing runs twice. A job with on_disconnect: keep runs on through
the partition and is not started elsewhere.

Each task appends "start NODE T" and, on SIGTERM, "stop NODE T" (wall-clock
seconds) to a file of its job's: the intervals of a job's runs must not
overlap."""
import os
import subprocess
import time

from harness import check, check_eq, spec, wait_until
from multinode import multinode

# run alone (run.py --jobs): it times a partition against the agents' leases
SERIAL = True

LEASE_S = 3

RUN = r"""
f="$1"; echo "start $YARD_NODE $(date +%s.%N)" >> "$f"
trap 'echo "stop $YARD_NODE $(date +%s.%N)" >> "$f"; exit 0' TERM
while :; do sleep 0.1; done
"""


def intervals(path):
    """[node, start, stop or None] of each run the tasks wrote into path
    (none yet: the file is made by a task's first line)."""
    order = []
    if not os.path.exists(path):
        return order
    with open(path) as f:
        for line in f:
            what, node, t = line.split()
            if what == "start":
                order.append([node, float(t), None])
            else:
                for r in reversed(order):
                    if r[0] == node and r[2] is None:
                        r[2] = float(t)
                        break
    return order


def link(c, node, state):
    subprocess.run(["ip", "link", "set", c.topo._veth(c.topo.node(node)), state], check=True)


def submit(c, name, mark, keep=False):
    s = spec(["/bin/bash", "-c", RUN, "run", mark], name=name, gpus=1, restart={"max": 2})
    if keep:
        s["on_disconnect"] = "keep"
    st, doc = c.api.submit(s)
    check_eq(st, 201, f"submit {name}: {doc}")
    j = doc["id"]
    wait_until(lambda: c.api.job(j)["state"] == "running", 30, f"job {name} runs")
    node = c.api.job(j)["tasks"][-1]["node"]
    # running is the process started, not its first line written (a loaded machine)
    wait_until(lambda: any(r[0] == node for r in intervals(mark)), 30, f"job {name}'s task writes its start")
    return j, node


def test_partition_fences_and_restarts_elsewhere():
    with multinode("partition", nodes=2, lease=f"{LEASE_S}s") as c:
        c.start_master()
        c.start_agents(gpus="sim:1")

        # on_disconnect: stop (the default)
        mark = os.path.join(c.dir, "stop.runs")
        j, cut = submit(c, "stop", mark)
        link(c, cut, "down")
        try:
            wait_until(lambda: any(r[0] == cut and r[2] for r in intervals(mark)), LEASE_S * 2,
                       "the cut-off node stops its task before its lease ends")
            wait_until(lambda: any(r[0] != cut for r in intervals(mark)), LEASE_S * 5,
                       "the master starts the job on the other node")
            time.sleep(LEASE_S)  # partitioned for longer than the lease
        finally:
            link(c, cut, "up")
        time.sleep(LEASE_S)  # healed: the cut-off node reconciles
        runs = intervals(mark)
        check_eq([r[0] for r in runs], [cut, next(r[0] for r in runs if r[0] != cut)],
                 f"one run on the cut-off node, then one elsewhere: {runs}")
        check(runs[0][2] is not None and runs[1][1] >= runs[0][2],
              f"the second run started after the first stopped: {runs}")
        check(runs[1][2] is None, f"the second run goes on: {runs}")
        doc = c.api.job(j)
        check_eq((doc["state"], doc["attempt"]), ("running", 1), "the job runs its second attempt")
        c.cli("cancel", str(j), check_rc=0)
        c.api.wait_job(j)

        # on_disconnect: keep: it runs on through the partition, and the
        # master waits for the node instead of starting it elsewhere
        mark = os.path.join(c.dir, "keep.runs")
        j, cut = submit(c, "keep", mark, keep=True)
        link(c, cut, "down")
        try:
            time.sleep(LEASE_S * 2.5)
            check_eq([r[0] for r in intervals(mark)], [cut], "only the first run, on the cut-off node")
            check(intervals(mark)[0][2] is None, "which still runs")
        finally:
            link(c, cut, "up")
        time.sleep(LEASE_S)
        runs = intervals(mark)
        check_eq(len(runs), 1, f"the keep job ran once: {runs}")
        check(runs[0][2] is None, f"and runs on after the partition: {runs}")
        doc = c.api.job(j)
        check_eq((doc["state"], doc["attempt"]), ("running", 0), "the keep job was never restarted")
