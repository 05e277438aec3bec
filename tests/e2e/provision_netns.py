#!/usr/bin/python3
"""The command provisioner of tests/e2e/test_elastic.py: what an admin's
script for cloud VMs does, with network namespaces for VMs.

    provision_netns.py up POOL COUNT    start COUNT agents (`yard agent
                                        --ephemeral`), each in a free
                                        namespace; print their names
    provision_netns.py down NODE        stop NODE's agent, free its namespace

Its state is the JSON file $YARD_TEST_PROVISION (written by the test):
{"yard": PATH, "dir": DIR, "gpus": {POOL: "sim:1" | "none"}, "free": [{"ns", "addr",
"hostname"}], "nodes": {NAME: {"ns", "addr", "hostname", "pid"}}, "mode":
"normal" | "ghost" (print a name, start nothing: a VM that never comes
up) | "slow" (start the agents, then take 5 s to answer)}, and every call
is a line of DIR/calls.log. The master gives YARD_MASTER, YARD_POOL,
YARD_REQUEST and YARD_JOIN_TOKEN_FILE in the environment.
"""
import fcntl
import json
import os
import signal
import subprocess
import sys
import time


def main():
    path = os.environ["YARD_TEST_PROVISION"]
    with open(path + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(path) as f:
            st = json.load(f)
        with open(os.path.join(st["dir"], "calls.log"), "a") as log:
            log.write(" ".join(sys.argv[1:]) + "\n")
        names = []
        if sys.argv[1] == "up":
            pool, count = sys.argv[2], int(sys.argv[3])
            for i in range(count):
                name = f"{pool}-{os.environ['YARD_REQUEST']}-{i}"
                names.append(name)
                if st["mode"] == "ghost":
                    st["nodes"][name] = {"pid": None}
                    continue
                if not st["free"]:
                    print("no free machine", file=sys.stderr)
                    sys.exit(1)
                node = st["free"].pop(0)
                agent = [st["yard"], "agent", "--ephemeral", "--master", os.environ["YARD_MASTER"],
                         "--name", name, "--pool", pool, "--work-dir", os.path.join(st["dir"], "agent-" + name),
                         "--gpus", st["gpus"][pool], "--join-token-file", os.environ["YARD_JOIN_TOKEN_FILE"],
                         "--advertise-addr", node["addr"]]
                argv = ["ip", "netns", "exec", node["ns"], "unshare", "--uts", "sh", "-c",
                        'hostname "$0"; exec "$@"', node["hostname"], *agent]
                out = open(os.path.join(st["dir"], f"agent-{name}.log"), "ab")
                p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                     start_new_session=True)
                st["nodes"][name] = dict(node, pid=p.pid)
        elif sys.argv[1] == "down":
            node = st["nodes"].pop(sys.argv[2], None)
            if node and node.get("pid"):
                try:
                    os.kill(node["pid"], signal.SIGTERM)
                except ProcessLookupError:
                    pass
                st["free"].append({k: node[k] for k in ("ns", "addr", "hostname")})
        with open(path + ".tmp", "w") as f:
            json.dump(st, f)
        os.rename(path + ".tmp", path)
    if names and st["mode"] == "slow":
        with open(os.path.join(st["dir"], "calls.log"), "a") as log:
            log.write("slow\n")
        time.sleep(5)
    for n in names:
        print(n)


if __name__ == "__main__":
    main()
