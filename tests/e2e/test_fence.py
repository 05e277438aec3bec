"""Fencing without the agent: a task's shim stops it when its agent has been
gone for two thirds of the master's lease (docs/faults.md), before the master
can start the job elsewhere; an agent back in time re-adopts its task, which
goes on undisturbed.

Each task appends "ATTEMPT NODE T" (T: wall-clock seconds) to a file of its
job's every 0.2 s: one job's attempts must never overlap in it. The same
for a container task, whose shim is the container shim."""
import json
import os
import signal
import time

import engines
from harness import check, check_eq, cluster, pid_alive, spec, wait_until
from test_containers import image_spec, start_engine

# run alone (run.py --jobs): its fences are timed against a lease of a few seconds
SERIAL = True

# the container test's first run on a machine builds its rootfs (about a minute)
TIMEOUT = 900

TICK = r"""
f="${1:-$YARD_CHECKPOINT_DIR/lines}"
while :; do echo "$YARD_RESTART_COUNT $YARD_NODE $(date +%s.%N)" >> "$f"; sleep 0.2; done
"""


def lines(path):
    """[(attempt, node, t)] of the complete lines of path, in order."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if line.endswith("\n") and len(parts) == 3:
                    out.append((int(parts[0]), parts[1], float(parts[2])))
    except FileNotFoundError:
        pass
    return out


def submit(c, name, mark, **extra):
    st, doc = c.api.submit(spec(["/bin/sh", "-c", TICK, "tick", mark], name=name, **extra))
    check_eq(st, 201, f"submit {name}: {doc}")
    j = doc["id"]
    wait_until(lambda: c.api.job(j)["state"] == "running", 30, f"job {name} runs")
    wait_until(lambda: len(lines(mark)) >= 3, 30, f"job {name} writes its lines")
    return j


def node_state(c, name):
    return next(n["state"] for n in c.api.json("GET", "/v1/nodes")[1]["nodes"] if n["name"] == name)


def max_gap(ls):
    return max((b[2] - a[2] for a, b in zip(ls, ls[1:])), default=0.0)


def check_fenced_exit(task_dir):
    with open(os.path.join(task_dir, "exit.json")) as f:
        ex = json.load(f)
    check(ex["reason"].startswith("stopped: its agent was gone for ") and
          "(fenced by its shim;" in ex["reason"], f"the exit record says why: {ex}")
    check_eq((ex["exit_code"], ex["signal"]), (None, None),
             f"a fenced task has no exit status (it did not succeed): {ex}")
    return ex


def test_shim_fences_when_its_agent_dies():
    lease = 3.0
    with cluster("fence", lease=f"{lease:g}s") as c:
        c.start_master()
        a1 = c.start_agent("a1", gpus="sim:1")
        stop_mark = os.path.join(c.dir, "stop.lines")
        keep_mark = os.path.join(c.dir, "keep.lines")
        j = submit(c, "stop", stop_mark, gpus=1, restart={"max": 2})
        k = submit(c, "keep", keep_mark, on_disconnect="keep")
        task = c.api.job(j)["tasks"][0]["id"]

        a1.kill(signal.SIGKILL)
        killed_at = time.time()
        a1.p.wait()
        c.start_agent("a2", gpus="sim:1")
        wait_until(lambda: node_state(c, "a1") == "lost", lease * 3, "a1 to be declared lost")
        lost_at = time.time()
        wait_until(lambda: any(a == 1 for a, _, _ in lines(stop_mark)), 30,
                   "the second attempt to write its lines")
        time.sleep(1)  # both attempts would be writing now if the first one still ran

        runs = lines(stop_mark)
        first = [r for r in runs if r[0] == 0]
        second = [r for r in runs if r[0] == 1]
        check_eq(sorted({(a, n) for a, n, _ in runs}), [(0, "a1"), (1, "a2")],
                 f"the first attempt on a1, the second on a2, nothing else: {runs}")
        check(first[-1][2] < second[0][2],
              f"the first attempt's last line ({first[-1][2]:.3f}) is before the second's first "
              f"({second[0][2]:.3f})")
        check_eq(runs, first + second, "the two attempts' lines never interleave")
        stopped_after = first[-1][2] - killed_at
        check(stopped_after < lease * 5 / 6 + 0.5,
              f"the first attempt stopped {stopped_after:.2f} s after its agent died, "
              f"within two thirds of the {lease:g} s lease and the fence's grace")
        print(f"agent SIGKILLed at 0: task stopped after {stopped_after:.2f} s, a1 lost after "
              f"{lost_at - killed_at:.2f} s (lease {lease:g} s), second attempt's first line after "
              f"{second[0][2] - killed_at:.2f} s")

        check_fenced_exit(os.path.join(c.dir, "agent-a1", "tasks", str(task)))
        check_eq(c.api.job(j)["attempt"], 1, "the job runs its second attempt")

        # on_disconnect: keep: still running on a1, through and past the lease
        check_eq(c.api.job(k)["state"], "running", "the keep job is not restarted")
        check_eq([(a, n) for a, n, _ in lines(keep_mark)][-1], (0, "a1"), "the keep job's only attempt")
        wait_until(lambda: lines(keep_mark)[-1][2] > killed_at + lease * 1.5, 10,
                   "the keep job to go on writing past the lease")
        check(max_gap(lines(keep_mark)) < 1.0, "the keep job's lines are continuous")


def test_agent_back_in_time_keeps_its_task():
    lease = 6.0  # the shim would fence 4 s after the agent's last answer
    with cluster("fence-back", lease=f"{lease:g}s") as c:
        c.start_master()
        a1 = c.start_agent("a1", gpus="sim:1")
        mark = os.path.join(c.dir, "back.lines")
        j = submit(c, "back", mark, gpus=1, restart={"max": 2})
        task = c.api.job(j)["tasks"][0]["id"]
        task_dir = os.path.join(c.dir, "agent-a1", "tasks", str(task))
        with open(os.path.join(task_dir, "task.pid")) as f:
            pid = json.load(f)["pid"]

        a1.kill(signal.SIGKILL)
        killed_at = time.time()
        a1.p.wait()
        c.start_agent("a1", gpus="sim:1")
        back_after = time.time() - killed_at
        check(back_after < lease * 2 / 3 - 1,
              f"the agent was back {back_after:.2f} s after its SIGKILL, in time to stop the countdown")
        # past the moment the shim would have fenced had the agent not come back
        time.sleep(lease)

        check(pid_alive(pid), "the task still runs")
        check(not os.path.exists(os.path.join(task_dir, "exit.json")), "and has no exit record")
        doc = c.api.job(j)
        check_eq((doc["state"], doc["attempt"]), ("running", 0), "the job still runs its first attempt")
        check_eq(doc["tasks"][-1]["state"], "running", "its task, re-adopted")
        runs = lines(mark)
        check_eq({(a, n) for a, n, _ in runs}, {(0, "a1")}, "one attempt only, on a1")
        check(max_gap(runs) < 1.0, f"its lines are continuous (largest gap {max_gap(runs):.2f} s)")
        check(time.time() - runs[-1][2] < 1.0, "and it is still writing them")
        print(f"agent back {back_after:.2f} s after its SIGKILL; the task ran on "
              f"({runs[-1][2] - killed_at:.2f} s after the kill, largest gap {max_gap(runs):.2f} s)")


def test_container_shim_fences_when_its_agent_dies():
    lease = 3.0
    eng, img, _ = start_engine("docker")
    try:
        with cluster("fence-docker", lease=f"{lease:g}s") as c:
            c.start_master()
            a1 = c.start_agent("a1", gpus="sim:1",
                               extra=["--runtime", "process,docker", "--docker-socket", eng.socket])
            # the container writes into its checkpoint dir, bound from the node's
            st, doc = c.api.submit(image_spec(img, ["/bin/bash", "-c", TICK], name="boxed", gpus=1))
            check_eq(st, 201, f"submit: {doc}")
            j = doc["id"]
            wait_until(lambda: c.api.job(j)["state"] == "running", 60, "the container job runs")
            task = c.api.job(j)["tasks"][0]["id"]
            mark = os.path.join(c.dir, "agent-a1", "checkpoints", str(j), "lines")
            wait_until(lambda: len(lines(mark)) >= 3, 60, "the container writes its lines")
            check_eq(len(engines.list_containers(eng, label=f"yard.job={j}")), 1, "one container")

            a1.kill(signal.SIGKILL)
            killed_at = time.time()
            a1.p.wait()
            wait_until(lambda: engines.list_containers(eng, label=f"yard.job={j}") == [], lease * 3,
                       "the shim to stop and remove the container")
            removed_after = time.time() - killed_at
            stopped_after = lines(mark)[-1][2] - killed_at
            check(stopped_after < lease * 5 / 6 + 0.5,
                  f"the container stopped {stopped_after:.2f} s after its agent died, within "
                  f"two thirds of the {lease:g} s lease and the fence's grace")
            task_dir = os.path.join(c.dir, "agent-a1", "tasks", str(task))
            # the shim writes exit.json last, after it removed the container
            wait_until(lambda: os.path.exists(os.path.join(task_dir, "exit.json")), 30,
                       "the shim's exit record")
            check_fenced_exit(task_dir)
            print(f"agent SIGKILLed at 0: the container's last line after {stopped_after:.2f} s, "
                  f"the container removed after {removed_after:.2f} s (lease {lease:g} s)")
    finally:
        eng.close()


def test_agent_restarted_while_its_master_is_down_keeps_its_task():
    # an upgrade of master and agents at once: the agent comes back first and
    # finds no master listening; nothing can start its job elsewhere, so its
    # heartbeat stops the shim's countdown although it cannot register
    lease = 8.0  # past the agent's registration back-off once the master is back
    with cluster("fence-nomaster", lease=f"{lease:g}s") as c:
        c.start_master()
        a1 = c.start_agent("a1", gpus="sim:1")
        mark = os.path.join(c.dir, "nomaster.lines")
        j = submit(c, "nomaster", mark, gpus=1, restart={"max": 2})
        task_dir = os.path.join(c.dir, "agent-a1", "tasks", str(c.api.job(j)["tasks"][0]["id"]))
        with open(os.path.join(task_dir, "task.pid")) as f:
            pid = json.load(f)["pid"]

        c.master.kill(signal.SIGKILL)
        c.master.p.wait()
        a1.kill(signal.SIGKILL)
        killed_at = time.time()
        a1.p.wait()
        a1 = c.start_agent("a1", gpus="sim:1", ready=False)  # it cannot register yet
        time.sleep(lease * 2 / 3 + 1.5)  # past the countdown from its last answer
        check(pid_alive(pid), "the task runs on while the agent finds no master listening")
        check(not os.path.exists(os.path.join(task_dir, "exit.json")), "and has no exit record")

        c.start_master()
        wait_until(lambda: any("yard agent ready name=a1" in line for line in a1.lines), 30,
                   "the agent to register with the master back")
        time.sleep(1)  # its first report
        doc = c.api.job(j)
        check_eq((doc["state"], doc["attempt"]), ("running", 0), "the job still runs its first attempt")
        check(pid_alive(pid), "the same task")
        runs = lines(mark)
        check_eq({(a, n) for a, n, _ in runs}, {(0, "a1")}, "one attempt only, on a1")
        check(max_gap(runs) < 1.0, f"its lines are continuous (largest gap {max_gap(runs):.2f} s)")
        print(f"master and agent SIGKILLed, the agent back at once, the master "
              f"{time.time() - killed_at:.1f} s later: the task ran on")
