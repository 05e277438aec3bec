#!/usr/bin/env python3
"""make test: the unit tests (meson test on the sanitizer build, then the web
UI's Vitest tests when web/ has its packages), the libFuzzer targets
(tests/fuzz/run.sh: FUZZ_SECONDS each, 30 by default here (make fuzz: 60),
two at a time, each target one test that fails on a finding) and then the
end-to-end suite, with one closing line that counts them all."""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fuzz():
    """Runs every fuzz target (tests/fuzz/run.sh); returns (passed, failed),
    one per target, or (0, 1) when they could not be built."""
    # half of make fuzz's minute a target: eleven targets, two at a time, are
    # three minutes of make test's 25 (a committed finding replays at once)
    env = dict(os.environ)
    env.setdefault("FUZZ_SECONDS", "30")
    f = subprocess.Popen([os.path.join(ROOT, "tests", "fuzz", "run.sh")], stdout=subprocess.PIPE,
                         text=True, env=env)
    fok = fbad = 0
    for line in f.stdout:
        print(line, end="", flush=True)
        if re.match(r"^fuzz: \S+: .*, no finding$", line):
            fok += 1
        elif re.match(r"^fuzz: \S+: a finding", line):
            fbad += 1
    f.wait()
    if f.returncode != 0 and fbad == 0:
        fbad = 1
    print(f"fuzz: {fok} passed, {fbad} failed", flush=True)
    return fok, fbad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build-asan")
    args = ap.parse_args()
    build = os.path.join(ROOT, args.build)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    u = subprocess.run(["meson", "test", "-C", build, "--suite", "unit", "--print-errorlogs"],
                       capture_output=True, text=True, env=env)
    print(u.stdout[-20000:], end="")
    print(u.stderr[-5000:], end="", file=sys.stderr)
    ok = int(m.group(1)) if (m := re.search(r"^Ok:\s+(\d+)", u.stdout, re.M)) else 0
    bad = sum(int(m.group(1)) for m in re.finditer(r"^(?:Fail|Unexpected Pass|Timeout):\s+(\d+)", u.stdout, re.M))
    if u.returncode != 0 and bad == 0:
        bad = 1
    web = os.path.join(ROOT, "web")
    if os.path.isdir(os.path.join(web, "node_modules")):
        # the UI logic (Vitest): one unit test program, like a meson one
        w = subprocess.run(["npm", "test", "--silent"], cwd=web, capture_output=True, text=True)
        print(w.stdout[-5000:], end="")
        print(w.stderr[-5000:], end="", file=sys.stderr)
        if w.returncode == 0:
            ok += 1
        else:
            bad += 1
        print(f"web unit (vitest): {'ok' if w.returncode == 0 else 'FAILED'}", flush=True)
    elif os.path.isfile(os.path.join(web, "package.json")):
        print("web unit (vitest): web/node_modules is missing (make asan installs it)", flush=True)
        bad += 1
    print(f"unit: {ok} passed, {bad} failed", flush=True)
    fok, fbad = fuzz()
    ok += fok
    bad += fbad
    # two tests at a time: they wait on daemons far more than they compute
    e = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "e2e", "run.py"),
                          "--yard", os.path.join(build, "yard"),
                          "--jobs", os.environ.get("YARD_E2E_JOBS", "2")], stdout=subprocess.PIPE, text=True)
    out = []
    for line in e.stdout:
        print(line, end="", flush=True)
        out.append(line)
    e.wait()
    m = re.search(r"^e2e: (\d+) passed, (\d+) failed", "".join(out), re.M)
    eok, ebad = (int(m.group(1)), int(m.group(2))) if m else (0, 1)
    if e.returncode != 0 and ebad == 0:
        ebad = 1
    print(f"{ok + eok} passed, {bad + ebad} failed")
    return 0 if bad + ebad == 0 and ok + eok > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
