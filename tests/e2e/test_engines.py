"""The container engines the docker runtime's tests use (engines.py): a
private dockerd and a private Podman API service start, import a Debian
rootfs as images, run a container through the Engine API, and leave nothing
behind, not even when their owner is killed."""
import os
import signal
import subprocess
import sys

import engines
import harness as h
from harness import check, check_eq

# the first run debootstraps the base rootfs (about a minute with a good
# network, several with a slow one); later runs take it from the build dir
TIMEOUT = 900


def build_dir():
    return os.path.dirname(h.YARD)


def run_cat(eng, ref, path, init=False):
    """Creates, starts and waits for a container of ref that cats path (under
    an init as PID 1 if init); returns its stdout after checking it exited 0
    with nothing on stderr."""
    cid = eng.check("POST", "/containers/create",
                    {"Image": ref, "Cmd": ["cat", path], "Labels": {"yard.test": ref},
                     "HostConfig": {"NetworkMode": "host", "Init": init}}, expect=201)["Id"]
    eng.check("POST", f"/containers/{cid}/start", expect=204)
    w = eng.check("POST", f"/containers/{cid}/wait", expect=200)
    out, err = engines.logs(eng, cid)
    check_eq(w.get("StatusCode"), 0, f"exit status of 'cat {path}' in {ref} (stderr {err!r})")
    check_eq(err, b"", f"stderr of 'cat {path}' in {ref}")
    st = engines.inspect(eng, cid)["State"]
    check(st["Status"] == "exited" and st["ExitCode"] == 0, f"state of {cid}: {st}")
    return out


def exercise(eng):
    """What both engines must do for the docker runtime's tests."""
    tar = engines.base_rootfs(build_dir())
    a = engines.import_image(eng, tar, "yard-test/base", "a", extra_files={"/etc/yard-image": b"a\n"})
    b = engines.import_image(eng, tar, "yard-test/base", "b",
                             extra_files={"/etc/yard-image": b"b\n", "/opt/yard/new/file": b"x"})
    check_eq((a, b), ("yard-test/base:a", "yard-test/base:b"), "image references")
    version = run_cat(eng, a, "/etc/debian_version").decode().strip()
    check(version.startswith("12."), f"/etc/debian_version in {a}: {version!r}, expected 12.x")
    check_eq(run_cat(eng, a, "/etc/yard-image"), b"a\n", f"/etc/yard-image in {a}")
    check_eq(run_cat(eng, b, "/etc/yard-image"), b"b\n", f"/etc/yard-image in {b}")
    check_eq(run_cat(eng, b, "/opt/yard/new/file"), b"x", f"a file in a new dir of {b}")
    # the agent's containers ask for an init (docker: tini, podman: catatonit)
    pid1 = run_cat(eng, a, "/proc/1/cmdline", init=True).split(b"\0")
    check(pid1[0] != b"cat" and b"cat" in pid1, f"an init runs cat as its child: PID 1 is {pid1}")
    check_eq(len(engines.list_containers(eng)), 5, "containers, stopped ones included")
    check_eq(len(engines.list_containers(eng, label=f"yard.test={b}")), 2, f"containers labelled {b}")
    check_eq(engines.list_containers(eng, label="yard.test=none"), [], "containers of a label nobody has")
    check(engines.inspect(eng, "no-such-container") is None, "inspect of a missing container is None")


def check_gone(d):
    check(not os.path.exists(d), f"engine dir {d} left behind")
    check_eq(engines.mounts_under(d), [], f"mounts under {d}")
    left = [pid for pid, (_, cmd, cwd) in engines._procs().items() if d in cmd or d in cwd]
    check_eq(left, [], f"processes of {d}")


def test_docker_engine_runs_a_container():
    with engines.DockerEngine() as eng:
        d = eng.dir
        check(os.path.exists(eng.socket), "dockerd's socket")
        check_eq(eng.api("GET", "/_ping"), (200, b"OK"), "GET /_ping")
        exercise(eng)
    check_gone(d)
    check(not any(os.path.isdir(os.path.join("/sys/fs/cgroup", c, engines.PREFIX + eng.id))
                  for c in os.listdir("/sys/fs/cgroup")), "the engine's cgroup parent is removed")


def test_podman_engine_runs_a_container():
    with engines.PodmanEngine() as eng:
        d = eng.dir
        check_eq(eng.api("GET", "/_ping"), (200, b"OK"), "GET /_ping")
        check_eq(eng.api("GET", "/version")[1].get("Components", [{}])[0].get("Name"), "Podman Engine",
                 "the service is podman's")
        exercise(eng)
    check_gone(d)


CRASHER = r"""
import os, signal, sys
sys.path.insert(0, %r)
import engines
eng = {"docker": engines.DockerEngine, "podman": engines.PodmanEngine}[sys.argv[1]]()
ref = engines.import_image(eng, sys.argv[2], "yard-test/crash", "1")
cid = eng.check("POST", "/containers/create", {"Image": ref, "Cmd": ["sleep", "1000"],
                "HostConfig": {"NetworkMode": "host"}}, expect=201)["Id"]
eng.check("POST", f"/containers/{cid}/start", expect=204)
print(eng.dir, engines.inspect(eng, cid)["State"]["Pid"], flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_engine_of_a_killed_owner_is_swept():
    tar = engines.base_rootfs(build_dir())
    for kind in ("docker", "podman"):
        r = subprocess.run([sys.executable, "-c", CRASHER % os.path.dirname(engines.__file__), kind, tar],
                           capture_output=True, text=True, timeout=300)
        check_eq(r.returncode, -signal.SIGKILL, f"{kind} crasher's status (stderr {r.stderr[-3000:]})")
        d, pid = r.stdout.split()
        check(h.pid_alive(int(pid)) and os.path.isdir(d) and engines.mounts_under(d),
              f"{kind}: the killed owner's container runs and its dir is mounted")
        swept = engines.sweep()
        check(d in swept, f"{kind}: sweep() reported {swept}, not {d}")
        check(not h.pid_alive(int(pid)), f"{kind}: the container's process {pid} survived the sweep")
        check_gone(d)
