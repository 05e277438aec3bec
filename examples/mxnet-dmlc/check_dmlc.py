#!/usr/bin/env python3
"""Checks the DMLC_* environment of an MXNet (ps-lite) task, without MXNet.

1. Contract: the variables ps-lite reads to start a node, as its docs and
   MXNet's "Distributed Training" FAQ list them:

       DMLC_ROLE          scheduler | server | worker
       DMLC_PS_ROOT_URI   the scheduler's IP address
       DMLC_PS_ROOT_PORT  the port the scheduler listens on (1..65535)
       DMLC_NUM_SERVER    how many servers (an integer >= 0)
       DMLC_NUM_WORKER    how many workers (an integer >= 1)
       DMLC_WORKER_ID     workers only: 0 .. DMLC_NUM_WORKER-1

2. Bootstrap, the way ps-lite's own starts: the scheduler listens on
   DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT (so that must be an address of its
   node); every server and worker connects to it (retrying until the
   deadline) and registers its role, worker id, address and its view of the
   counts. The scheduler checks that it got exactly DMLC_NUM_SERVER servers
   and DMLC_NUM_WORKER workers, with worker ids 0..N-1 each once, and sends
   everyone the roster. Everyone checks its own place in it and prints

       dmlc ok: worker[1] at 10.0.0.7: 1 servers, 2 workers

3. Barrier: everyone acknowledges the roster; once all have, the scheduler
   tells each to go, and exits last. So every task has printed its line
   before any worker exits (an mxnet job ends when all its workers have).

Exit status: 0 ok, 2 the environment breaks the contract (the message names
the variable), 1 the scheduler or a task could not be reached, or the
roster is wrong. Standard library only; any python3 >= 3.9.
"""
import argparse
import ipaddress
import json
import os
import socket
import sys
import threading
import time

ROLES = ("scheduler", "server", "worker")
PROTO = "dmlc-check/1"


class ContractError(Exception):
    """The DMLC_* environment breaks the contract; the message names the variable."""


class PeerError(Exception):
    """The scheduler or a task could not be reached, or answered wrongly."""


def log(msg):
    print(f"check_dmlc: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- contract

def env_int(env, name, low, high=None, why=""):
    """The integer in env[name], in low..high."""
    v = env.get(name)
    want = f"{low}..{high}" if high is not None else f">= {low}"
    if v is None:
        raise ContractError(f"{name}: not set")
    if not (v.isascii() and v.isdigit()):
        raise ContractError(f"{name}: expected an integer {want}{why}, got {v!r}")
    n = int(v)
    if n < low or (high is not None and n > high):
        raise ContractError(f"{name}: {n} is not in {want}{why}" if high is not None
                            else f"{name}: {n} is not {want}{why}")
    return n


def parse_env(env):
    """Checks the DMLC_* variables; returns them as a dict."""
    role = env.get("DMLC_ROLE")
    if role is None:
        raise ContractError("DMLC_ROLE: not set (an mxnet task gets it from the launcher)")
    if role not in ROLES:
        raise ContractError(f"DMLC_ROLE: expected one of {', '.join(ROLES)}, got {role!r}")
    uri = env.get("DMLC_PS_ROOT_URI")
    if uri is None:
        raise ContractError("DMLC_PS_ROOT_URI: not set")
    try:
        ipaddress.ip_address(uri)
    except ValueError:
        raise ContractError(f"DMLC_PS_ROOT_URI: expected the scheduler's IP address, got {uri!r}") from None
    cfg = {
        "role": role,
        "root_uri": uri,
        "root_port": env_int(env, "DMLC_PS_ROOT_PORT", 1, 65535),
        "num_server": env_int(env, "DMLC_NUM_SERVER", 0),
        "num_worker": env_int(env, "DMLC_NUM_WORKER", 1),
        "worker_id": None,
    }
    if role == "worker":
        if "DMLC_WORKER_ID" not in env:
            raise ContractError("DMLC_WORKER_ID: not set, and every worker has one")
        cfg["worker_id"] = env_int(env, "DMLC_WORKER_ID", 0, cfg["num_worker"] - 1,
                                   f" (DMLC_NUM_WORKER={cfg['num_worker']})")
    elif "DMLC_WORKER_ID" in env:
        raise ContractError(f"DMLC_WORKER_ID: set ({env['DMLC_WORKER_ID']!r}) for a {role}; "
                            "only workers have one")
    if role == "server" and cfg["num_server"] == 0:
        raise ContractError("DMLC_NUM_SERVER: 0, but this task is a server")
    return cfg


def view(cfg):
    """What every task must agree on."""
    return {k: cfg[k] for k in ("root_uri", "root_port", "num_server", "num_worker")}


VIEW_VARS = {"root_uri": "DMLC_PS_ROOT_URI", "root_port": "DMLC_PS_ROOT_PORT",
             "num_server": "DMLC_NUM_SERVER", "num_worker": "DMLC_NUM_WORKER"}


# ------------------------------------------------------------ the protocol
#
# One JSON object a line, on one connection from each server and worker to
# the scheduler:
#   node -> scheduler  {"proto", "role", "worker_id", "addr", "host", "view"}
#   scheduler -> node  {"roster": {"servers": [...], "workers": [...]}, "you": {...}}
#                      or {"error": "..."}
#   node -> scheduler  {"ack": true}
#   scheduler -> node  {"bye": true}
# then the node closes the connection and exits.

def send(f, obj):
    f.write((json.dumps(obj) + "\n").encode())
    f.flush()


def recv(f):
    line = f.readline()
    if not line:
        raise PeerError("the connection closed")
    try:
        obj = json.loads(line)
    except ValueError:
        raise PeerError(f"not a {PROTO} message: {line[:80]!r}") from None
    if not isinstance(obj, dict):
        raise PeerError(f"not a {PROTO} message: {line[:80]!r}")
    return obj


def name(role, ident):
    return f"{role}[{ident}]"


def summary(cfg):
    return f"{cfg['num_server']} servers, {cfg['num_worker']} workers"


# ---------------------------------------------------------------- scheduler

class Scheduler:
    def __init__(self, cfg, deadline):
        self.cfg = cfg
        self.deadline = deadline
        self.cond = threading.Condition()
        self.servers = []      # registrations, in order of arrival
        self.workers = {}      # worker id -> registration
        self.roster = None
        self.acks = 0
        self.bye = False
        self.finished = 0      # handlers that said bye and saw the node close
        self.active = 0        # connections being served
        self.error = None

    def left(self):
        return max(0.0, self.deadline - time.monotonic())

    def complete(self):
        return len(self.servers) == self.cfg["num_server"] and \
            len(self.workers) == self.cfg["num_worker"]

    def fail(self, msg):
        with self.cond:
            if not self.error:
                self.error = msg
            self.cond.notify_all()

    def register(self, reg, src):
        """Checks one registration; returns its roster key, or raises PeerError."""
        role, wid = reg.get("role"), reg.get("worker_id")
        who = name(role, wid if role == "worker" else "?")
        for k, v in view(self.cfg).items():
            if reg.get("view", {}).get(k) != v:
                raise PeerError(f"{who} from {src} has {VIEW_VARS[k]}={reg.get('view', {}).get(k)}, "
                                f"the scheduler {v}")
        with self.cond:
            if self.roster is not None:
                raise PeerError(f"{who} from {src} registered after the roster was complete")
            if role == "server":
                if len(self.servers) == self.cfg["num_server"]:
                    raise PeerError(f"a server from {src} is one more than "
                                    f"DMLC_NUM_SERVER={self.cfg['num_server']}")
                reg["id"] = len(self.servers)
                self.servers.append(reg)
            elif role == "worker":
                if not isinstance(wid, int) or not 0 <= wid < self.cfg["num_worker"]:
                    raise PeerError(f"a worker from {src} has DMLC_WORKER_ID={wid}, not in "
                                    f"0..{self.cfg['num_worker'] - 1}")
                if wid in self.workers:
                    raise PeerError(f"two workers have DMLC_WORKER_ID={wid}: "
                                    f"{self.workers[wid]['addr']} and {reg['addr']}")
                reg["id"] = wid
                self.workers[wid] = reg
            else:
                raise PeerError(f"a task from {src} registered as {role!r}, "
                                "neither server nor worker")
            self.cond.notify_all()
            return reg["id"]

    def serve(self, conn, src):
        with self.cond:
            self.active += 1
        conn.settimeout(self.left() + 60)
        f = conn.makefile("rwb")
        who = src
        try:
            reg = recv(f)
            if reg.get("proto") != PROTO:
                log(f"ignored a connection from {src}: not a {PROTO} registration")
                return
            try:
                ident = self.register(reg, src)
            except PeerError as e:
                send(f, {"error": str(e)})
                self.fail(str(e))
                return
            who = name(reg["role"], ident)
            log(f"{who} registered from {reg['addr']} ({reg.get('host')})")
            with self.cond:
                while self.roster is None and not self.error:
                    self.cond.wait()
                if self.error:
                    send(f, {"error": self.error})
                    return
                roster = self.roster
            send(f, {"roster": roster, "you": {"role": reg["role"], "id": ident}})
            if recv(f).get("ack") is not True:
                raise PeerError(f"{who} did not acknowledge the roster")
            with self.cond:
                self.acks += 1
                self.cond.notify_all()
                while not self.bye and not self.error:
                    self.cond.wait()
                if self.error:
                    send(f, {"error": self.error})
                    return
            send(f, {"bye": True})
            # wait (briefly) for the node to close: it is on its way out
            conn.settimeout(5.0)
            try:
                f.readline()
            except OSError:
                pass
            with self.cond:
                self.finished += 1
                self.cond.notify_all()
        except (OSError, PeerError) as e:
            self.fail(f"{who}: {e}")
        finally:
            f.close()
            conn.close()
            with self.cond:
                self.active -= 1
                self.cond.notify_all()

    def wait(self, what, done):
        with self.cond:
            while not done() and not self.error:
                if not self.cond.wait(timeout=min(1.0, self.left())) and self.left() <= 0:
                    break
            if self.error:
                raise PeerError(self.error)
            if not done():
                raise PeerError(f"timed out waiting for {what()}")

    def missing(self):
        want = [f"{self.cfg['num_server'] - len(self.servers)} of "
                f"{self.cfg['num_server']} servers"] if len(self.servers) < self.cfg["num_server"] else []
        ids = [str(i) for i in range(self.cfg["num_worker"]) if i not in self.workers]
        if ids:
            want.append("worker ids " + ", ".join(ids))
        return "registrations (missing: " + "; ".join(want) + ")"

    def run(self, linger):
        try:
            self._run(linger)
        except PeerError:
            # give every connection (briefly) the chance to tell its task why
            end = time.monotonic() + 2.0
            with self.cond:
                while self.active and time.monotonic() < end:
                    self.cond.wait(timeout=0.1)
            raise

    def _run(self, linger):
        host, port = self.cfg["root_uri"], self.cfg["root_port"]
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        srv = socket.socket(family, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            srv.bind((host, port))
        except OSError as e:
            if e.errno == 99:  # EADDRNOTAVAIL
                raise ContractError(f"DMLC_PS_ROOT_URI: {host} is not an address of the "
                                    "scheduler's node") from None
            raise ContractError(f"DMLC_PS_ROOT_PORT: cannot listen on {host}:{port}: "
                                f"{e.strerror}") from None
        srv.listen(128)
        log(f"scheduler listening on {host}:{port}, expecting {summary(self.cfg)}")

        def accept():
            while True:
                conn, src = srv.accept()
                threading.Thread(target=self.serve, args=(conn, src[0]), daemon=True).start()
        threading.Thread(target=accept, daemon=True).start()

        self.wait(self.missing, self.complete)
        entry = lambda r: {"id": r["id"], "addr": r["addr"], "host": r.get("host")}
        with self.cond:
            self.roster = {"scheduler": f"{host}:{port}",
                           "servers": [entry(r) for r in self.servers],
                           "workers": [entry(self.workers[i]) for i in sorted(self.workers)]}
            self.cond.notify_all()
        n = self.cfg["num_server"] + self.cfg["num_worker"]
        self.wait(lambda: f"acknowledgements ({self.acks} of {n})", lambda: self.acks == n)
        print(f"dmlc ok: scheduler[0] at {host}:{port}: {summary(self.cfg)}", flush=True)
        self.deadline = time.monotonic() + 30
        with self.cond:
            self.bye = True
            self.cond.notify_all()
        self.wait(lambda: f"the tasks to leave ({self.finished} of {n})", lambda: self.finished == n)
        time.sleep(linger)  # lets the others end by themselves before the scheduler does


# ------------------------------------------------------- server and worker

def run_node(cfg, deadline):
    host, port = cfg["root_uri"], cfg["root_port"]
    me = name(cfg["role"], cfg["worker_id"] if cfg["role"] == "worker" else "?")
    last = None
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=5.0)
            break
        except OSError as e:
            last = e
            if time.monotonic() >= deadline:
                raise PeerError(f"cannot reach the scheduler at {host}:{port} "
                                f"(DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT): {last}") from None
            time.sleep(0.5)
    addr = conn.getsockname()[0]  # the address this node reaches the scheduler from
    # the scheduler waits for every task, so allow for the whole deadline and then some
    conn.settimeout(max(1.0, deadline - time.monotonic()) + 60)
    f = conn.makefile("rwb")
    send(f, {"proto": PROTO, "role": cfg["role"], "worker_id": cfg["worker_id"],
             "addr": addr, "host": socket.gethostname(), "view": view(cfg)})
    msg = recv(f)
    if "error" in msg:
        raise PeerError(f"the scheduler refused: {msg['error']}")
    roster, you = msg.get("roster"), msg.get("you", {})
    if not isinstance(roster, dict):
        raise PeerError(f"the scheduler sent {msg} instead of the roster")
    servers, workers = roster.get("servers", []), roster.get("workers", [])
    if len(servers) != cfg["num_server"] or len(workers) != cfg["num_worker"]:
        raise PeerError(f"the roster has {len(servers)} servers and {len(workers)} workers, "
                        f"DMLC_NUM_SERVER={cfg['num_server']} and DMLC_NUM_WORKER={cfg['num_worker']}")
    if [w["id"] for w in workers] != list(range(cfg["num_worker"])):
        raise PeerError(f"the roster's worker ids are {[w['id'] for w in workers]}")
    ident = you.get("id")
    mine = (servers if cfg["role"] == "server" else workers)
    if you.get("role") != cfg["role"] or not any(e["id"] == ident and e["addr"] == addr for e in mine) \
            or (cfg["role"] == "worker" and ident != cfg["worker_id"]):
        raise PeerError(f"the roster does not hold this {me} at {addr}: {roster}")
    print(f"dmlc ok: {name(cfg['role'], ident)} at {addr}: {summary(cfg)}", flush=True)
    send(f, {"ack": True})
    msg = recv(f)
    if "error" in msg:
        raise PeerError(f"the scheduler reports: {msg['error']}")
    if msg.get("bye") is not True:
        raise PeerError(f"the scheduler sent {msg} instead of bye")
    f.close()
    conn.close()


def main():
    ap = argparse.ArgumentParser(description="Checks the DMLC_* variables of an MXNet (ps-lite) "
                                             "task and that all tasks meet at the scheduler.")
    ap.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                    help="how long to wait for the scheduler, or (scheduler) for every task")
    ap.add_argument("--linger", type=float, default=1.0, metavar="SECONDS",
                    help="how long the scheduler waits, once everyone has left, before it exits")
    args = ap.parse_args()
    deadline = time.monotonic() + args.timeout
    try:
        cfg = parse_env(os.environ)
        log(f"DMLC_* follow the contract: {cfg['role']}"
            + (f" {cfg['worker_id']}" if cfg["role"] == "worker" else "")
            + f", scheduler {cfg['root_uri']}:{cfg['root_port']}, {summary(cfg)}")
        if cfg["role"] == "scheduler":
            Scheduler(cfg, deadline).run(args.linger)
        else:
            run_node(cfg, deadline)
        return 0
    except ContractError as e:
        log(f"the environment breaks the contract: {e}")
        return 2
    except PeerError as e:
        log(f"FAILED: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
