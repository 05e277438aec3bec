#!/usr/bin/env python3
"""What a CLI call and an idle node daemon cost, beside Slurm's, in one run:

  cpu    CPU time (user + system, from the kernel's accounting of each
         child) per call, median over --calls calls of each, run one after
         another on an otherwise idle master and slurmctld:
           yard submit job.yaml   beside  sbatch --hold --wrap true
                                  (the spec's directory unchanged since its last
                                  upload: the code cache names its digest)
           yard submit job.yaml   the same with no code cache: packed (libarchive
                                  loaded) and uploaded each time
           yard ls --limit 100000 beside  squeue (every job of each, as many)
           yard show ID           beside  scontrol show job ID
         and the floors under them, the same way:
           yard --version         beside  sbatch --version
           yard-core --version    (the whole program: what yard execs for the
                                   commands it does not serve itself)
           curl --version         (Debian's libcurl and what it loads, initialised:
                                   the least any program that speaks HTTP with it costs)
  memory RSS and PSS of an idle agent (no task, registered, a minute of
         heartbeats at most) beside an idle slurmd of the same Slurm, and of
         a program that only initialises libcurl (curl --version is gone too
         fast: `curl -s --max-time 30 telnet://127.0.0.1:PORT` kept open on a
         listening socket of ours)

Slurm is Debian's slurm-wlm, started by this bench in a temp dir
(tests/e2e/slurm.py: munged, slurmctld, one slurmd). The yard master and
agent run on loopback over plain http. Prints numbers; asserts nothing.

usage: bench/cli.py [--yard build/yard] [--calls 200]
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from benchlib import rss_pss_mib  # noqa: E402


def cpu_ms(argv, env, n):
    """Median CPU ms (user + system) of n runs of argv (each checked)."""
    got = []
    for _ in range(n):
        p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        _, status, ru = os.wait4(p.pid, 0)
        err = p.stderr.read()
        p.stderr.close()
        if os.waitstatus_to_exitcode(status):
            raise SystemExit(f"{' '.join(argv)} failed: {err.decode(errors='replace')[-400:]}")
        got.append((ru.ru_utime + ru.ru_stime) * 1000)
    return statistics.median(got)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness as h
    import slurm
    h.YARD = os.environ["YARD"]
    n = args.calls

    with slurm.SlurmCluster(nodes=1) as s, h.cluster("bench-cli") as c:
        c.start_master()
        agent = c.start_agent("n1", gpus="none")
        env = c.env({"YARD_MASTER": c.url, "YARD_TOKEN": c.admin_token, "HOME": c.dir})
        senv = s.env_all()
        # its own dir: a submission uploads the spec's dir as the job's code
        # (here the spec alone, as sbatch sends its script)
        os.makedirs(os.path.join(c.dir, "spec"))
        spec = os.path.join(c.dir, "spec", "job.yaml")
        with open(spec, "w") as f:
            f.write("name: cli\ncommand: [/bin/true]\ntasks:\n  worker:\n    cpus: 0.1\n")
        # one job of each to show, held (Slurm) or done (yard)
        out = subprocess.run([args.yard, "submit", spec, "-o", "json"], env=env, check=True,
                             capture_output=True, text=True).stdout
        import json
        jid = str(json.loads(out)["id"])
        sid = s.run("sbatch", "--parsable", "--hold", "--wrap", "true").strip().split(";")[0]

        # a cache that can never be written: every submission packs
        nocache = dict(env, XDG_CACHE_HOME="/dev/null/no-cache")
        time.sleep(1.1)  # the spec's dir settled: the next upload is remembered
        subprocess.run([args.yard, "submit", spec], env=env, check=True, capture_output=True)
        rows = [
            ("submit", [args.yard, "submit", spec], env, ["sbatch", "--hold", "--wrap", "true"], senv),
            ("submit*", [args.yard, "submit", spec], nocache, ["sbatch", "--hold", "--wrap", "true"], senv),
            ("list", [args.yard, "ls", "--limit", "100000"], env, ["squeue"], senv),
            ("show", [args.yard, "show", jid], env, ["scontrol", "show", "job", sid], senv),
            ("version", [args.yard, "--version"], env, ["sbatch", "--version"], senv),
        ]
        print(f"CPU per call, median of {n} calls each (ms)")
        print(f"{'':10}{'yard':>10}{'slurm':>10}{'yard / slurm':>14}")
        for name, ya, ye, sa, se in rows:
            y = cpu_ms(ya, ye, n)
            sl = cpu_ms(sa, se, n)
            print(f"{name:10}{y:10.2f}{sl:10.2f}{y / sl:13.2f}x   (yard {ya[1]} / {' '.join(sa[:2])})",
                  flush=True)
        print("  (submit*: no code cache, the directory packed and uploaded each time)")
        core = os.path.join(os.path.dirname(os.path.abspath(args.yard)), "yard-core")
        whole = cpu_ms([core, "--version"], None, n)
        print(f"{'yard-core':10}{whole:10.2f}{'':10}{'':14}   (yard-core --version: the whole program, "
              f"which yard execs for the rest)")
        floor = cpu_ms(["curl", "--version"], None, n)
        print(f"{'libcurl':10}{floor:10.2f}{'':10}{'':14}   (curl --version: Debian's libcurl loaded and "
              f"initialised)")

        # idle daemons: a few seconds after the last call
        time.sleep(3)
        slurmd = next(p for p, _ in s.procs if os.path.basename(p.args[0]) == "slurmd")
        ar, ap_ = rss_pss_mib(agent.p.pid)
        sr, sp = rss_pss_mib(slurmd.pid)
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(1)
        port = lsock.getsockname()[1]
        cp = subprocess.Popen(["curl", "-s", "--max-time", "30", f"telnet://127.0.0.1:{port}"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        conn, _ = lsock.accept()
        time.sleep(0.5)
        cr, cps = rss_pss_mib(cp.pid)
        cp.kill()
        cp.wait()
        conn.close()
        lsock.close()
        print()
        print(f"idle memory (MiB){'RSS':>8}{'PSS':>8}")
        print(f"{'yard agent':17}{ar:8.1f}{ap_:8.1f}")
        print(f"{'slurmd':17}{sr:8.1f}{sp:8.1f}   agent / slurmd RSS: {ar / sr:.2f}x")
        print(f"{'curl (libcurl)':17}{cr:8.1f}{cps:8.1f}   a program with libcurl initialised and one connection")


if __name__ == "__main__":
    main()
