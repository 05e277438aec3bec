#!/usr/bin/env python3
"""Checks the TF_CONFIG a TensorFlow task gets, without TensorFlow.

1. Contract: TF_CONFIG is what tf.distribute.cluster_resolver.
   TFConfigClusterResolver and the multi-worker strategies read:

       {"cluster": {"chief": ["host:port"], "worker": ["host:port", ...],
                    "ps": ["host:port", ...]},
        "task": {"type": "worker", "index": 1}}

   The roles are chief (at most one), worker and ps; an evaluator task is
   not in "cluster" but has task type "evaluator". The task's index is in
   range for its role, every address is "host:port" with a port in
   1..65535, and no two tasks share an address.

2. Reachability: every task of the cluster listens on its own address (so
   that address must belong to its node, and the port be free), connects to
   every other task's address, and both sides say who they are: the task at
   an address must be the one the cluster spec puts there, and both must
   have the same cluster spec. Each task also waits until every other task
   has connected to it.

3. Barrier: every task prints its result, then the others report "done" to
   the chief (worker 0 when there is no chief) and exit once it has
   acknowledged; the chief exits last, after everyone reported. So when
   the chief's success ends the job, every task has printed its line:

       tf_config ok: task worker:1 reached 3 peers, reached by 3 peers

An evaluator has no address in the cluster: it checks the contract only.
Exit status: 0 ok, 2 TF_CONFIG breaks the contract (the message names the
field), 1 a peer could not be reached or answered wrongly.

Standard library only; any python3 >= 3.9.
"""
import argparse
import hashlib
import ipaddress
import json
import os
import socket
import sys
import threading
import time

ROLES = ("chief", "worker", "ps")   # the roles TF_CONFIG's "cluster" may hold
EVALUATOR = "evaluator"             # a task type that is not in "cluster"
OPTIONAL_KEYS = ("environment", "rpc_layer")  # other top-level keys TF reads
PROTO = "tf-config-check/1"


class ContractError(Exception):
    """TF_CONFIG breaks the contract; the message starts with the field."""


class PeerError(Exception):
    """A peer could not be reached, or it is not who the cluster spec says."""


def log(msg):
    print(f"check_tf_config: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- contract

def parse_address(addr, field):
    """'host:port' or '[v6]:port' -> (host, port)."""
    if not isinstance(addr, str):
        raise ContractError(f"{field}: expected a \"host:port\" string, got {json.dumps(addr)}")
    if addr.startswith("["):
        host, sep, port = addr[1:].partition("]:")
        if sep:
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                raise ContractError(f"{field}: '{host}' in {addr!r} is not an IPv6 address") from None
    else:
        host, sep, port = addr.rpartition(":")
        if ":" in host:
            raise ContractError(f"{field}: {addr!r}: an IPv6 host must be in brackets, [host]:port")
    if not sep or not host:
        raise ContractError(f"{field}: expected \"host:port\", got {addr!r}")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise ContractError(f"{field}: port {port!r} of {addr!r} is not in 1..65535")
    return host, int(port)


def parse_tf_config(text):
    """Checks TF_CONFIG's text; returns (cluster, task_type, task_index)."""
    if text is None or not text.strip():
        raise ContractError("TF_CONFIG: not set (a tensorflow task gets it from the launcher)")
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ContractError(f"TF_CONFIG: not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ContractError(f"TF_CONFIG: expected a JSON object, got {type(doc).__name__}")
    for key in doc:
        if key not in ("cluster", "task") + OPTIONAL_KEYS:
            log(f"warning: TF_CONFIG.{key}: not a key TensorFlow reads, ignored")

    cluster = doc.get("cluster")
    if not isinstance(cluster, dict) or not cluster:
        raise ContractError("TF_CONFIG.cluster: expected an object of roles "
                            "({\"worker\": [\"host:port\", ...], ...}), "
                            f"got {json.dumps(cluster)}")
    seen = {}
    for role, addrs in cluster.items():
        field = f"TF_CONFIG.cluster.{role}"
        if role == EVALUATOR:
            raise ContractError(f"{field}: an evaluator is not part of the cluster "
                                "(it only has task type \"evaluator\")")
        if role not in ROLES:
            raise ContractError(f"{field}: unknown role '{role}' (roles: {', '.join(ROLES)})")
        if not isinstance(addrs, list) or not addrs:
            raise ContractError(f"{field}: expected a non-empty list of \"host:port\", "
                                f"got {json.dumps(addrs)}")
        if role == "chief" and len(addrs) > 1:
            raise ContractError(f"{field}: {len(addrs)} chiefs, a cluster has at most one")
        for i, addr in enumerate(addrs):
            host, port = parse_address(addr, f"{field}[{i}]")
            key = (host.lower(), port)
            if key in seen:
                raise ContractError(f"{field}[{i}]: {addr} is also {seen[key]}'s address")
            seen[key] = f"{role}:{i}"
    if "chief" not in cluster and "worker" not in cluster:
        raise ContractError("TF_CONFIG.cluster: needs a chief or a worker")

    task = doc.get("task")
    if not isinstance(task, dict):
        raise ContractError(f"TF_CONFIG.task: expected an object {{\"type\": ..., \"index\": ...}}, "
                            f"got {json.dumps(task)}")
    ttype, index = task.get("type"), task.get("index")
    if not isinstance(ttype, str) or not ttype:
        raise ContractError(f"TF_CONFIG.task.type: expected a role name, got {json.dumps(ttype)}")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ContractError(f"TF_CONFIG.task.index: expected an integer >= 0, got {json.dumps(index)}")
    if ttype != EVALUATOR:
        if ttype not in cluster:
            raise ContractError(f"TF_CONFIG.task.type: '{ttype}' is not a role of the cluster "
                                f"({', '.join(cluster)}) nor {EVALUATOR}")
        if index >= len(cluster[ttype]):
            raise ContractError(f"TF_CONFIG.task.index: {index} is out of range for '{ttype}', "
                                f"which has {len(cluster[ttype])} task(s)")
    return cluster, ttype, index


def coordinator(cluster):
    """The task whose success is the job's: the chief, else worker 0."""
    return ("chief", 0) if "chief" in cluster else ("worker", 0)


def cluster_digest(cluster):
    """A digest of the cluster spec: every task must have been given the same one."""
    canon = json.dumps(cluster, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


# ------------------------------------------------------------ the protocol
#
# One JSON object a line. The dialling task sends a hello, the listener
# answers with its own; both carry (type, index) and the cluster's digest.
# On its connection to the coordinator, a task later sends {"done": true}
# and the coordinator answers {"ack": true}.

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


def hello(me, digest):
    return {"proto": PROTO, "type": me[0], "index": me[1], "cluster": digest}


class Node:
    """One task of the cluster: its listener, its peers, what it has seen."""

    def __init__(self, cluster, me, deadline):
        self.cluster = cluster
        self.me = me
        self.digest = cluster_digest(cluster)
        self.deadline = deadline
        self.addrs = {(r, i): parse_address(a, f"TF_CONFIG.cluster.{r}[{i}]")
                      for r, lst in cluster.items() for i, a in enumerate(lst)}
        self.peers = sorted(t for t in self.addrs if t != me)
        self.coord = coordinator(cluster)
        self.cond = threading.Condition()
        self.reached_by = set()   # peers that connected to us and said hello
        self.done = set()         # peers that reported done (coordinator only)
        self.errors = []          # fatal problems seen by the listener's threads

    def name(self, t):
        return f"{t[0]}:{t[1]}"

    def left(self):
        return max(0.0, self.deadline - time.monotonic())

    # -- listening

    def listen(self):
        host, port = self.addrs[self.me]
        field = f"TF_CONFIG.cluster.{self.me[0]}[{self.me[1]}]"
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as e:
            raise ContractError(f"{field}: cannot resolve '{host}': {e}") from None
        family, _, _, _, sockaddr = infos[0]
        srv = socket.socket(family, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            srv.bind(sockaddr)
        except OSError as e:
            why = ("is not an address of this node" if e.errno == 99  # EADDRNOTAVAIL
                   else f"cannot be bound: {e.strerror}")
            raise ContractError(f"{field}: this task's own address {host}:{port} {why}") from None
        srv.listen(64)
        threading.Thread(target=self._accept, args=(srv,), daemon=True).start()

    def _accept(self, srv):
        while True:
            conn, src = srv.accept()
            threading.Thread(target=self._serve, args=(conn, src), daemon=True).start()

    def _serve(self, conn, src):
        """One incoming connection: a hello, then (at the coordinator) done/ack."""
        conn.settimeout(self.left() + 60)
        f = conn.makefile("rwb")
        peer = None
        try:
            msg = recv(f)
            if msg.get("proto") != PROTO:
                log(f"ignored a connection from {src[0]}: not a {PROTO} hello")
                return
            peer = (msg.get("type"), msg.get("index"))
            problem = None
            if peer not in self.addrs or peer == self.me:
                problem = (f"a task from {src[0]} says it is {peer[0]}:{peer[1]}, "
                           "which is not another task of the cluster")
            elif msg.get("cluster") != self.digest:
                problem = (f"{self.name(peer)} (from {src[0]}) was given another cluster spec "
                           f"(digest {msg.get('cluster')}, ours {self.digest})")
            if problem:
                # both sides fail, and say why
                send(f, {"proto": PROTO, "type": self.me[0], "index": self.me[1], "error": problem})
                self._fail(problem)
                return
            send(f, hello(self.me, self.digest))
            with self.cond:
                self.reached_by.add(peer)
                self.cond.notify_all()
            if self.me != self.coord:
                return
            # At the coordinator the dialler keeps this connection open and
            # later sends its "done" on it.
            msg = recv(f)
            if msg.get("done") is not True:
                self._fail(f"{self.name(peer)} sent {msg} where 'done' was due")
                return
            send(f, {"ack": True})
            # The peer closes the connection on its way out: waiting for that
            # (briefly) lets it exit by itself before the job ends.
            conn.settimeout(5.0)
            try:
                f.readline()
            except OSError:
                pass
            with self.cond:
                self.done.add(peer)
                self.cond.notify_all()
        except (OSError, PeerError) as e:
            # A peer that dies shows up as a timeout of the wait for it; the
            # reason seen here helps to tell why.
            who = self.name(peer) if peer else src[0]
            log(f"connection from {who}: {e}")
        finally:
            f.close()
            conn.close()

    def _fail(self, msg):
        with self.cond:
            self.errors.append(msg)
            self.cond.notify_all()

    # -- dialling

    def dial(self, peer):
        """Connects to peer (retrying until the deadline), exchanges hellos."""
        host, port = self.addrs[peer]
        last = None
        while True:
            try:
                conn = socket.create_connection((host, port), timeout=max(1.0, min(5.0, self.left())))
                conn.settimeout(self.left() + 60)
                f = conn.makefile("rwb")
                send(f, hello(self.me, self.digest))
                msg = recv(f)
                break
            except (OSError, PeerError) as e:
                last = e
                with self.cond:
                    if self.errors:  # our listener has seen a fatal problem: stop here
                        raise PeerError(self.errors[0]) from None
                if self.left() <= 0:
                    raise PeerError(f"cannot reach {self.name(peer)} at {host}:{port}: {last}") from None
                time.sleep(0.5)
        got = (msg.get("type"), msg.get("index"))
        if "error" in msg:
            raise PeerError(f"{self.name(peer)} at {host}:{port} refused our hello: {msg['error']}")
        if msg.get("proto") != PROTO:
            raise PeerError(f"{host}:{port}, {self.name(peer)}'s address, "
                            f"answered {msg}, not a {PROTO} hello")
        if got != peer:
            raise PeerError(f"{host}:{port} should be {self.name(peer)}, "
                            f"but the task there says it is {got[0]}:{got[1]}")
        if msg.get("cluster") != self.digest:
            raise PeerError(f"{self.name(peer)} at {host}:{port} was given another cluster spec "
                            f"(digest {msg.get('cluster')}, ours {self.digest})")
        return conn, f

    def wait_for(self, what, done):
        """Waits (until the deadline) for done() under the lock."""
        with self.cond:
            while not done() and not self.errors:
                if not self.cond.wait(timeout=min(1.0, self.left())) and self.left() <= 0:
                    break
            if self.errors:
                raise PeerError(self.errors[0])
            if not done():
                raise PeerError(f"timed out waiting for {what}")


def run_cluster_task(cluster, me, timeout, linger):
    node = Node(cluster, me, time.monotonic() + timeout)
    node.listen()
    n = len(node.peers)
    log(f"task {node.name(me)} listening on {cluster[me[0]][me[1]]}, {n} peers, "
        f"cluster {node.digest}")

    coord_link = None
    for peer in node.peers:
        conn, f = node.dial(peer)
        if peer == node.coord:
            coord_link = (conn, f)  # kept open for the barrier
        else:
            f.close()
            conn.close()
    node.wait_for("every peer to connect (missing: " + ", ".join(
        node.name(p) for p in node.peers if p not in node.reached_by) + ")",
        lambda: len(node.reached_by) == n)
    print(f"tf_config ok: task {node.name(me)} reached {n} peers, reached by {n} peers", flush=True)

    # barrier: everyone has printed before the coordinator exits
    node.deadline = time.monotonic() + timeout
    if me == node.coord:
        node.wait_for("every peer to report done", lambda: len(node.done) == n)
        log(f"all {n + 1} tasks done")
        # Each peer has closed its connection and is exiting; a moment more
        # lets it end by itself before the chief's exit ends the job (the
        # platform then stops whatever task is left).
        time.sleep(linger)
    else:
        conn, f = coord_link
        send(f, {"done": True})
        if recv(f).get("ack") is not True:
            raise PeerError(f"{node.name(node.coord)} did not acknowledge")
        f.close()
        conn.close()


def main():
    ap = argparse.ArgumentParser(description="Checks TF_CONFIG against TensorFlow's contract "
                                             "and that every task of the cluster reaches every other.")
    ap.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                    help="how long to wait for the peers (each phase)")
    ap.add_argument("--linger", type=float, default=1.0, metavar="SECONDS",
                    help="how long the chief waits, once all reported done, before it exits")
    args = ap.parse_args()
    try:
        cluster, ttype, index = parse_tf_config(os.environ.get("TF_CONFIG"))
        sizes = ", ".join(f"{len(a)} {r}" for r, a in cluster.items())
        if ttype == EVALUATOR:
            print(f"tf_config ok: task {EVALUATOR}:{index} (not in the cluster of {sizes})",
                  flush=True)
            return 0
        log(f"TF_CONFIG follows the contract: {sizes}; this is {ttype}:{index}")
        run_cluster_task(cluster, (ttype, index), args.timeout, args.linger)
        return 0
    except ContractError as e:
        log(f"TF_CONFIG breaks the contract: {e}")
        return 2
    except PeerError as e:
        log(f"FAILED: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
