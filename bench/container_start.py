#!/usr/bin/env python3
"""Container task start latency: yard's docker runtime beside `docker run` by
hand, on the same private dockerd (tests/e2e/engines.py) and the same image
(a debootstrap'd Debian bookworm minbase rootfs, imported), in one run.

  yard        submit -> running: from the client's POST /v1/jobs until the
              master's running_at (the agent reported the job's one task
              running, i.e. its container started), for a job of `image:
              IMAGE`, command [sleep, --sleep] (sleep, so the task is seen
              running before it ends: a task that starts and ends between
              two reports gets running_at = finished_at), one task, no GPU,
              on one agent started with `--runtime process,docker
              --docker-socket SOCK`. Beside it the master's own split:
              submitted_at -> started_at (placed) -> running_at. Jobs are
              submitted one at a time, each waited for to the end.
  docker run  invoke -> first output: from spawning `docker -H unix://SOCK
              run --rm --network host IMAGE echo x` until its first byte on
              stdout, i.e. the container's process ran (and the CLI, attached
              before start, relayed it); and invoke -> exit, the wall time of
              the whole command, teardown (--rm) included. The CLI's own
              start-up (tens of ms: a Go binary) is in both numbers, as a
              user typing the command pays it.
  engine API  create -> started: POST /containers/create then POST
              /containers/{id}/start, timed until the start returns (the
              container's process is running), the same two requests an
              agent makes; no CLI, no attach. The container is removed
              afterwards, outside the time.

So "submit -> running" is to be read against "invoke -> first output" (each
the whole path a user waits on) and against "create -> started" (the
engine's share, which yard also pays). Runs of the sides are interleaved
(yard, docker run, engine API, yard, ...) after one warm-up of each that is
not counted. Run by hand as root; prints numbers and asserts nothing.

The yard side needs an agent with the docker runtime: with an agent that
does not know `--runtime` or a master that refuses `image:`, that side is
reported once as not measured, with the reason, and the others still run.

usage: bench/container_start.py [--yard build/yard] [--runs 50] [--sleep 1]
                                [--only yard|docker|api] [--engine docker|podman]
                                [--docker-cli PATH] [--timeout 60]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from benchlib import RunFailed, pct  # noqa: E402
SIDES = ("yard", "docker", "api")


class Series:
    """Samples of one measured interval, in seconds."""

    def __init__(self, label):
        self.label = label
        self.values = []

    def row(self):
        v = self.values
        if not v:
            return f"  {self.label:<46} {'no runs':>10}"
        ms = lambda x: f"{x * 1000:8.1f} ms"
        return (f"  {self.label:<46} {ms(pct(v, 50))} {ms(pct(v, 90))} {ms(statistics.mean(v))} "
                f"{ms(min(v))} {ms(max(v))}  ({len(v)})")


class Side:
    def __init__(self, name, *labels):
        self.name = name
        self.series = [Series(lb) for lb in labels]
        self.failures = []
        self.disabled = None
        self.notes = []

    def add(self, *values):
        for s, v in zip(self.series, values):
            if v is not None:
                s.values.append(v)

    def report(self):
        print(f"{self.name}:")
        if self.disabled:
            print(f"  not measured: {self.disabled}")
        for s in self.series:
            if s.values or not self.disabled:
                print(s.row())
        for n in self.notes:
            print(f"  note: {n}")
        for f in self.failures[:5]:
            print(f"  failed run: {f}")
        if len(self.failures) > 5:
            print(f"  ... and {len(self.failures) - 5} more failed runs")


# -- docker run by hand --

def docker_run_once(cli, sock, ref, env, timeout):
    argv = [cli, "-H", "unix://" + sock, "run", "--rm", "--network", "host", ref, "echo", "x"]
    t0 = time.monotonic()
    # unbuffered: read(1) takes one byte and leaves the rest to communicate()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, bufsize=0)
    try:
        first = p.stdout.read(1)
        t_first = time.monotonic() - t0
        rest, err = p.communicate(timeout=timeout)
        t_exit = time.monotonic() - t0
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        raise RunFailed(f"`docker run` not done in {timeout} s")
    if p.returncode != 0 or first + rest != b"x\n":
        raise RunFailed(f"`{' '.join(argv)}` exit {p.returncode}, stdout {first + rest!r}, "
                        f"stderr {err.decode(errors='replace').strip()[-800:]}")
    return t_first, t_exit


# -- the engine API --

def api_once(eng, ref):
    import engines
    body = {"Image": ref, "Cmd": ["sleep", "0"], "HostConfig": {"NetworkMode": "host"},
            "Labels": {"yard.bench": "container_start"}}
    t0 = time.monotonic()
    status, doc = eng.api("POST", "/containers/create", body)
    if status != 201:
        raise RunFailed(f"POST /containers/create: HTTP {status}: {str(doc)[:500]}")
    cid = doc["Id"]
    t_created = time.monotonic() - t0
    try:
        status, doc = eng.api("POST", f"/containers/{cid}/start")
        t_started = time.monotonic() - t0
        if status != 204:
            raise RunFailed(f"POST /containers/{cid[:12]}/start: HTTP {status}: {str(doc)[:500]}")
    finally:
        eng.api("POST", f"/containers/{cid}/wait")
        eng.api("DELETE", f"/containers/{cid}?force=1")
    if engines.inspect(eng, cid) is not None:
        raise RunFailed(f"container {cid[:12]} still there after DELETE")
    return t_created, t_started


# -- yard --

def yard_once(c, ref, sleep, timeout, run):
    api = c.api
    spec = {"name": f"ctr{run}", "image": ref, "command": ["sleep", str(sleep)],
            "tasks": {"worker": {"replicas": 1, "gpus": 0, "cpus": 0.5}}}
    t0 = time.time()
    status, job = api.submit(spec)
    if status != 201:
        err = (job or {}).get("error", {})
        raise RunFailed(f"POST /v1/jobs answered HTTP {status} {err.get('code')}: "
                        f"{err.get('message')} (field {err.get('field')})")
    jid = job["id"]
    try:
        j = api.wait_job(jid, timeout=timeout)
    except AssertionError:
        j = api.job(jid)
        api.json("POST", f"/v1/jobs/{jid}/cancel")
        raise RunFailed(f"job {jid} not finished in {timeout} s: state {j['state']}, reason "
                        f"{j.get('reason')}, tasks {[(t.get('node'), t.get('state')) for t in j['tasks']]}")
    if j["state"] != "succeeded":
        err = api.log(jid, stream="stderr").decode(errors="replace").strip()[-800:]
        raise RunFailed(f"job {jid} {j['state']}: {j.get('reason')}; stderr {err!r}")
    us = 1e6
    seen_running = j["running_at"] != j["finished_at"]
    return (j["running_at"] / us - t0, (j["started_at"] - j["submitted_at"]) / us,
            (j["running_at"] - j["started_at"]) / us, j["submitted_at"] / us - t0, seen_running)


def start_yard(c, eng, agent_args):
    c.start_master()
    c.start_agent("n1", gpus="none",
                  extra=["--runtime", "process,docker", "--docker-socket", eng.socket] + agent_args)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--sleep", default="1", help="seconds the yard task sleeps (default 1)")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per run")
    ap.add_argument("--only", action="append", choices=SIDES,
                    help="measure only this side (repeatable; default: all three)")
    ap.add_argument("--engine", choices=("docker", "podman"), default="docker",
                    help="the private engine to run on (podman: its Docker-compatible API)")
    ap.add_argument("--docker-cli", default=shutil.which("docker", path="/usr/bin") or shutil.which("docker"),
                    help="the docker CLI (default: Debian's /usr/bin/docker)")
    ap.add_argument("--agent-args", default="", help="more yard agent arguments (one string)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("container_start needs root (it starts its own dockerd)", file=sys.stderr)
        return 2
    os.environ["YARD"] = os.path.abspath(args.yard)
    import engines
    import harness as h
    h.YARD = os.environ["YARD"]
    which = args.only or list(SIDES)
    if "docker" in which and not args.docker_cli:
        print("no docker CLI (Debian: docker.io); use --only yard,api", file=sys.stderr)
        return 2

    sides = {}
    if "yard" in which:
        sides["yard"] = Side("yard (image: IMAGE, command [sleep, %s], --runtime process,docker)" % args.sleep,
                             "submit -> running (POST -> running_at)",
                             "  of which submitted_at -> started_at (placed)",
                             "  of which started_at -> running_at (agent)",
                             "  client POST sent -> submitted_at")
    if "docker" in which:
        sides["docker"] = Side(f"docker run by hand ({args.docker_cli} run --rm --network host IMAGE echo x)",
                               "invoke -> first output (process ran)",
                               "invoke -> exit (wall, --rm included)")
    if "api" in which:
        sides["api"] = Side("engine API (POST create + POST start, as an agent does)",
                            "create -> created",
                            "create -> started (start returned)")

    Engine = engines.DockerEngine if args.engine == "docker" else engines.PodmanEngine
    build_dir = os.path.dirname(os.path.abspath(args.yard))
    t = time.monotonic()
    try:
        tar = engines.base_rootfs(build_dir)
    except engines.EngineUnavailable as e:
        print(f"no base image: {e}", file=sys.stderr)
        return 1
    rootfs_s = time.monotonic() - t
    cli_home = tempfile.mkdtemp(prefix="yard-bench-docker-cli-")
    cli_env = dict(os.environ, DOCKER_CONFIG=cli_home)
    cli_env.pop("DOCKER_HOST", None)
    try:
        with Engine() as eng:
            version = eng.check("GET", "/version", expect=200)
            t = time.monotonic()
            ref = engines.import_image(eng, tar, "yard-bench/base", "bookworm")
            import_s = time.monotonic() - t
            print(f"{args.engine} engine {version.get('Version')} (API {version.get('ApiVersion')}), "
                  f"socket {eng.socket}; image {ref} from {tar} "
                  f"({os.path.getsize(tar) / 2**20:.0f} MiB; rootfs {rootfs_s:.1f} s, import {import_s:.1f} s); "
                  f"{args.runs} runs of each side, interleaved, after one warm-up")
            if "docker" in sides:
                r = subprocess.run([args.docker_cli, "-H", "unix://" + eng.socket, "version", "--format",
                                    "{{.Client.Version}}"], capture_output=True, text=True, env=cli_env)
                print(f"docker CLI {args.docker_cli} {r.stdout.strip() or r.stderr.strip()[-200:]}")
            with h.cluster("bench-ctr") as c:
                if "yard" in sides:
                    try:
                        start_yard(c, eng, args.agent_args.split())
                    except (AssertionError, OSError) as e:
                        sides["yard"].disabled = f"no master + docker-runtime agent: {str(e)[:1500]}"
                        print(f"yard: side skipped: {sides['yard'].disabled}", file=sys.stderr)
                not_seen = 0
                for run in range(-1, args.runs):  # run -1: the warm-up
                    line = []
                    for name, side in sides.items():
                        if side.disabled:
                            continue
                        try:
                            if name == "yard":
                                *v, seen = yard_once(c, ref, args.sleep, args.timeout, run)
                                not_seen += 0 if seen or run < 0 else 1
                            elif name == "docker":
                                v = docker_run_once(args.docker_cli, eng.socket, ref, cli_env, args.timeout)
                            else:
                                v = api_once(eng, ref)
                            if run >= 0:
                                side.add(*v)
                            line.append(f"{name} {v[0] * 1000:.1f} ms" if name != "api" else
                                        f"{name} {v[1] * 1000:.1f} ms")
                        except RunFailed as e:
                            side.failures.append(f"{'warm-up' if run < 0 else f'run {run + 1}'}: {e}")
                            line.append(f"{name} failed")
                            if not side.series[0].values:
                                side.disabled = side.disabled or f"the first run failed: {e}"
                                print(f"{name}: the first run failed; side skipped: {e}", file=sys.stderr)
                    what = "warm-up" if run < 0 else f"run {run + 1}/{args.runs}"
                    print(f"{what}: " + "  ".join(line), flush=True)
                if not_seen:
                    sides["yard"].notes.append(
                        f"{not_seen} jobs ended before their task was reported running "
                        f"(running_at = finished_at): raise --sleep")
                print(f"\n{'':<49}{'p50':>11}{'p90':>12}{'mean':>12}{'min':>12}{'max':>12}")
                for side in sides.values():
                    side.report()
                left = engines.list_containers(eng)
                if left:
                    print(f"containers left in the engine after the runs: {len(left)} "
                          f"({', '.join(sorted({c['Image'] for c in left}))})")
    finally:
        shutil.rmtree(cli_home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
