#!/usr/bin/env python3
"""Images built from a job's code (docs/images.md), measured on this machine.

Time from `yard submit --git URL@BRANCH` to the job running (the master's
own timestamps: submitted_at to running_at), with the cluster's registry
(Debian's docker-registry on loopback) and a node with its own dockerd:

  cold      a Dockerfile whose RUN step the engine has never run (its ARG
            differs each run: nothing of it is in the layer cache), built,
            then pushed to the registry
  warm      the same commit, Dockerfile and args again: nothing is built
  changed   a new commit that changes only the file the Dockerfile copies
            last: the layer cache rebuilds only that layer, then pushes
  pulled    the cold run's image on a second node (its own dockerd): pulled
            from the registry instead of built

Beside it, in the same run, the same context by hand with Debian's docker
CLI against the same engine: `docker build` + `docker push` (cold: a new
ARG; warm: the same again; changed: the copied file changed). The hand
figures have no scheduling, no code fetch, no container start: what the
platform adds is the difference.

Run by hand as root (it starts dockerds and a registry); asserts nothing,
prints the numbers.

usage: bench/imagebuild.py [--yard build/yard] [--runs 3] [--blob-mib 64]
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from benchlib import RunFailed, pct  # noqa: E402

DOCKER = "/usr/bin/docker"  # Debian's docker.io CLI

DOCKERFILE = """FROM yard-test/base:1
ARG NONCE=0
RUN echo "$NONCE" > /nonce && head -c {blob} /dev/urandom > /blob
COPY run.sh /run.sh
"""

JOB = """name: bench-{name}
command: [/bin/sh, /run.sh]
image: {{build: {{args: {{NONCE: "{nonce}"}}}}}}
placement: {{labels: {{site: {site}}}}}
tasks: {{worker: {{cpus: 0.1}}}}
"""


def submit_to_running(c, proj, url, name, nonce, site):
    """Seconds from submit to running of one job from url, by the master's clock."""
    path = os.path.join(proj, f"{name}.yaml")
    with open(path, "w") as f:
        f.write(JOB.format(name=name, nonce=nonce, site=site))
    r = c.cli("submit", path, "--git", url)
    if r.returncode != 0:
        raise RunFailed(f"submit {name}: {r.stderr.decode(errors='replace')[-500:]}")
    jid = int(r.stdout)
    doc = c.api.wait_job(jid, timeout=600)
    if doc["state"] != "succeeded":
        raise RunFailed(f"job {name}: {doc['state']} ({doc.get('reason')})")
    return (doc["running_at"] - doc["submitted_at"]) / 1e6


def by_hand(eng, ctx, tag, nonce):
    """Seconds for docker build + docker push of ctx as tag."""
    env = dict(os.environ, DOCKER_BUILDKIT="0", DOCKER_HOST=f"unix://{eng.socket}",
               DOCKER_CONFIG=os.path.join(ctx, ".docker-config"))
    t0 = time.monotonic()
    for argv in ([DOCKER, "build", "-q", "--network", "host", "--build-arg", f"NONCE={nonce}", "-t", tag, ctx],
                 [DOCKER, "push", "-q", tag]):
        r = subprocess.run(argv, capture_output=True, env=env)
        if r.returncode != 0:
            raise RunFailed(f"{' '.join(argv[:2])}: {r.stderr.decode(errors='replace')[-500:]}")
    return time.monotonic() - t0


def line(name, yard, hand):
    def fmt(v):
        return f"{pct(v, 50):6.2f} s (min {min(v):.2f}, max {max(v):.2f})" if v else "     -"
    print(f"{name:8} | {fmt(yard)} | {fmt(hand)}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--blob-mib", type=int, default=64, help="what the Dockerfile's RUN step writes")
    args = ap.parse_args()
    yard = os.path.abspath(args.yard)
    os.environ["YARD"] = yard
    import harness
    harness.YARD = yard
    import engines
    from gitserve import repos
    from registry import Registry

    dockerfile = DOCKERFILE.format(blob=args.blob_mib << 20)
    engs = []
    res = {k: [] for k in ("cold", "warm", "changed", "pulled", "hand-cold", "hand-warm", "hand-changed")}
    try:
        for _ in range(2):
            engs.append(engines.docker_with_base(os.path.dirname(yard)))
        with Registry() as reg, repos() as g, harness.cluster("bench-imagebuild",
                                                             master_args=["--registry", reg.addr]) as c:
            g.make("repo", {"main": {"Dockerfile": dockerfile, "run.sh": "echo v0\n"}})
            url = g.serve_daemon() + "/repo.git"
            c.start_master()
            for i, eng in enumerate(engs):
                c.start_agent(f"n{i + 1}", extra=["--runtime", "process,docker", "--docker-socket", eng.socket,
                                                   "--label", f"site=s{i + 1}"])
            proj = os.path.join(c.dir, "proj")
            os.makedirs(proj)
            ctx = os.path.join(c.dir, "ctx")  # the same files, for the hand builds
            os.makedirs(ctx)
            with open(os.path.join(ctx, "Dockerfile"), "w") as f:
                f.write(dockerfile)
            for run in range(args.runs):
                try:
                    nonce = f"{time.time_ns()}-{run}"
                    res["cold"].append(submit_to_running(c, proj, f"{url}@main", f"cold{run}", nonce, "s1"))
                    res["warm"].append(submit_to_running(c, proj, f"{url}@main", f"warm{run}", nonce, "s1"))
                    res["pulled"].append(submit_to_running(c, proj, f"{url}@main", f"pulled{run}", nonce, "s2"))
                    g.commit("repo", "main", {"run.sh": f"echo v{run + 1}\n"})
                    res["changed"].append(submit_to_running(c, proj, f"{url}@main", f"changed{run}", nonce,
                                                            "s1"))
                    with open(os.path.join(ctx, "run.sh"), "w") as f:
                        f.write(f"echo hand v{run}\n")
                    hnonce = f"hand-{nonce}"
                    tag = f"{reg.addr}/hand/build:{run}"
                    res["hand-cold"].append(by_hand(engs[0], ctx, tag, hnonce))
                    res["hand-warm"].append(by_hand(engs[0], ctx, tag, hnonce))
                    with open(os.path.join(ctx, "run.sh"), "w") as f:
                        f.write(f"echo hand v{run} changed\n")
                    res["hand-changed"].append(by_hand(engs[0], ctx, tag + "c", hnonce))
                except RunFailed as e:
                    print(f"run {run} failed: {e}", flush=True)
        print(f"\nimages built from code, {args.runs} runs, a RUN step writing {args.blob_mib} MiB; "
              f"median (min, max)")
        print(f"{'':8} | {'submit --git to running':30} | by hand: docker build + docker push")
        for k in ("cold", "warm", "changed"):
            line(k, res[k], res[f"hand-{k}"])
        line("pulled", res["pulled"], [])
    finally:
        for eng in engs:
            eng.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
