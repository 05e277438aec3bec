"""Hostile requests, sent as raw bytes over a socket (no client library
between the test and the master to tidy them up): bytes that are not UTF-8,
NULs, overlong encodings, surrogates, control characters and huge numbers
in every path segment of every route of docs/api.md, in every query
parameter the API reads, and in the headers it reads. None may crash the
master (its pid stays the same, /healthz answers) or get a 5xx; every
error is a JSON document {"error": {"code", "message"}} that parses as
UTF-8; a path segment that names nothing gets a 4xx."""
import json
import os
import re
import socket

from harness import api_routes, check, check_eq, cluster, wait_until

# percent-encoded as they would come in a URL
HOSTILE = [
    "%FF%FE",                 # not UTF-8
    "%00",                    # NUL
    "a%00b",
    "%C0%AF",                 # overlong '/'
    "%E0%80%AF",              # overlong, three bytes
    "%ED%A0%80",              # a UTF-16 surrogate
    "%F4%90%80%80",           # past U+10FFFF
    "%0D%0AX-Injected:%201",  # a header in a value
    "%1B%5B2J",               # a terminal escape
    "99999999999999999999999999",
    "18446744073709551616",   # 2^64
    "-1",
    "1e999",
    "%25FF",
    "A" * 3000,
]
# raw, as a careless client would put them on the wire
RAW = [b"\xff\xfe", b"\xc0\xaf", b"caf\xc3", b"\x1b[2J"]
# every query parameter a route of the API reads
QUERY = ["task", "stream", "offset", "limit", "follow", "state", "user", "rev", "wait", "name",
         "since", "port"]


class Raw:
    """One request a connection, its bytes exactly as given."""

    def __init__(self, port):
        self.port = port
        self.sent = 0

    def send(self, method, target, token=None, headers=(), body=b""):
        if isinstance(target, str):
            target = target.encode()
        head = [method.encode() + b" " + target + b" HTTP/1.1", b"Host: test", b"Connection: close"]
        if token:
            head.append(b"Authorization: Bearer " + token.encode())
        head += list(headers)
        if not any(h.lower().startswith(b"content-length:") for h in headers):
            head.append(b"Content-Length: %d" % len(body))
        data = b"\r\n".join(head) + b"\r\n\r\n" + body
        self.sent += 1
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.sendall(data)
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        status = int(out[9:12]) if out.startswith(b"HTTP/1.1 ") else 0
        hdrs, _, rbody = out.partition(b"\r\n\r\n")
        return status, hdrs.decode("latin-1").lower(), rbody


def check_reply(what, status, hdrs, body, want_4xx=False):
    check(0 < status < 500, f"{what}: {status} {body[:300]!r}")
    if want_4xx:
        check(400 <= status < 500, f"{what}: a 4xx, got {status} {body[:300]!r}")
    if "content-type: application/json" in hdrs and body:
        doc = json.loads(body.decode("utf-8"))  # strict: the reply is UTF-8
        if status >= 400:
            e = doc.get("error", {})
            check(isinstance(e.get("code"), str) and e.get("message"), f"{what}: an error document: {doc}")
            check("\n" not in e["message"] and "\x1b" not in e["message"],
                  f"{what}: the message is one line of text: {e['message']!r}")
            check("X-Injected" not in hdrs, f"{what}: no header came from the request: {hdrs}")


def test_hostile_requests():
    with cluster("hostile") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        pid = c.master.p.pid
        st, job = c.api.submit({"name": "h", "command": ["/bin/sleep", "600"],
                                "tasks": {"worker": {"cpus": 0.1, "memory": "64MiB"}}})
        check_eq(st, 201, f"a job to aim at: {job}")
        c.api.wait_job(job["id"], states=("running",), timeout=60)
        tokens = [t for t in c.api.json("GET", "/v1/tokens", expect=200)[1]["tokens"]
                  if t["role"] == "agent"]
        check_eq(len(tokens), 1, "n1's token is listed (by id)")
        # the agent's own token is not to be had from the API: a node of our own
        st, reg = c.api.json("POST", "/v1/agents", {"name": "n9", "addr": "127.0.0.9", "cpus": 1,
                                                    "gpus": []},
                             token=open(os.path.join(c.data_dir, "join-token")).read().strip())
        check_eq(st, 200, f"node n9 registers: {reg}")
        raw = Raw(c.port)
        admin, agent = c.admin_token, reg["token"]
        # the proxy's {path} names a task the job does not have: a 404 of the
        # master's, never the upstream's answer
        good = {"id": str(job["id"]), "name": "n9", "digest": "sha256:" + "0" * 64, "n": "1",
                "eid": "1", "sid": "0123456789abcdef", "path": "worker/9/8888/x"}

        def token_for(perm, path):
            return agent if perm == "agent" else admin

        def fill(pattern, which, value):
            names = dict(good)
            if pattern.startswith("/v1/agents/"):
                names["id"] = "n9"
            names[which] = value
            return re.sub(r"\{(\w+)\}", lambda m: names[m.group(1)], pattern)

        rows = [r[:3] for r in api_routes()]
        check(len(rows) >= 35, f"docs/api.md lists the routes ({len(rows)} found)")
        # 1. every path segment a route captures
        for method, pattern, perm in rows:
            body = b"{}" if method in ("POST", "PUT") else b""
            for cap in re.findall(r"\{(\w+)\}", pattern):
                for v in HOSTILE:
                    target = fill(pattern, cap, v)
                    st, hdrs, rb = raw.send(method, target, token_for(perm, pattern), body=body)
                    check_reply(f"{method} {target[:120]}", st, hdrs, rb, want_4xx=True)
                for v in RAW:
                    target = fill(pattern, cap, "X").encode().replace(b"X", v)
                    st, hdrs, rb = raw.send(method, target, token_for(perm, pattern), body=body)
                    check_reply(f"{method} {target[:120]!r}", st, hdrs, rb, want_4xx=True)
        # 2. every query parameter, on every GET route, with a path that names something
        for method, pattern, perm in rows:
            if method != "GET":
                continue
            base = re.sub(r"\{(\w+)\}", lambda m: good[m.group(1)] if not pattern.startswith("/v1/agents/")
                          else "n9", pattern)
            for q in QUERY:
                for v in HOSTILE:
                    target = f"{base}?{q}={v}"
                    st, hdrs, rb = raw.send(method, target, token_for(perm, pattern))
                    check_reply(f"GET {target[:120]}", st, hdrs, rb)
                for v in RAW:
                    target = f"{base}?{q}=X".encode().replace(b"X", v)
                    st, hdrs, rb = raw.send(method, target, token_for(perm, pattern))
                    check_reply(f"GET {target[:120]!r}", st, hdrs, rb)
        # 3. the headers the master reads: the token, the body's length and type
        targets = [("GET", "/v1/jobs"), ("POST", "/v1/jobs"), ("GET", f"/v1/jobs/{job['id']}/logs"),
                   ("GET", "/v1/whoami"), ("POST", "/v1/agents/n9/status"), ("GET", "/index.html")]
        values = [v.encode() for v in HOSTILE] + RAW + [b"", b" ", b"\t"]
        for method, target in targets:
            for v in values:
                for hdrs in ([b"Authorization: Bearer " + v], [b"Authorization: " + v],
                             [b"Content-Length: " + v], [b"Content-Type: " + v],
                             [b"X-Forwarded-For: " + v], [b"If-None-Match: " + v]):
                    tok = None if hdrs[0].startswith(b"Authorization") else admin
                    st, h, rb = raw.send(method, target, tok, headers=hdrs,
                                         body=b"{}" if method == "POST" else b"")
                    check_reply(f"{method} {target} with {hdrs[0][:80]!r}", st, h, rb)
        check(c.master.alive() and c.master.p.pid == pid, "the master is the same process")
        st, doc = c.api.json("GET", "/healthz", expect=200)
        check_eq(c.api.job(job["id"])["state"], "running", "the job runs on")
        print(f"{raw.sent} hostile requests, the master still up (pid {pid})")
