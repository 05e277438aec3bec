"""The proxy to a task's port and `yard port-forward` (docs/protocol.md,
"Proxy" and "Sessions"): a real HTTP server in a task (Python's, with a
WebSocket echo of its own) reached through the master and the agent's own
connection: the target passed on whole, the master's credentials kept from
the task, hop-by-hop fields dropped both ways, bodies of 20 MB up and 50 MB
down byte for byte, HEAD, a WebSocket upgrade answered with the upstream's
101 and then raw frames both ways; the refusals (another team, a cookie from
another site, a bad path, a chunked body, nothing listening, a finished
job) and the audit entries; all of it over https too (the master reads
and writes an upgraded TLS connection itself); a cut answer when the agent
dies mid-body; a stalled reader of 200 MB that does not grow the master's
memory (with the session's buffers made 64 MiB, it does: 64 MiB); and 100
MB byte-exact through `yard port-forward`, both ways at once, with a
half-close."""
import base64
import hashlib
import json
import os
import re
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time

from harness import YARD, check, check_eq, cluster, spec, wait_until

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

# The task's server: HTTP/1.0 as the proxy speaks it upstream (one request a
# connection), a WebSocket echo on an upgrade; it prints its port.
UPSTREAM = r'''
import base64, hashlib, http.server, json, socket, struct, sys, time
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
BLOCK = bytes(range(256)) * 256
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def log_message(self, *a):
        pass
    def send_body(self, code, body, extra=()):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    def do_GET(self):
        if self.headers.get("Upgrade", "").lower() == "websocket":
            return self.websocket()
        path = self.path.split("?")[0]
        if path.endswith("/big"):
            # n bytes of a known pattern, its end the connection's (no Content-Length)
            n = int(self.path.split("n=")[1])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.end_headers()
            while n > 0:
                self.wfile.write(BLOCK[:min(n, len(BLOCK))])
                n -= len(BLOCK)
            return
        if path.endswith("/slow"):
            self.send_response(200)
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.write(b"x" * 1000)
            self.wfile.flush()
            time.sleep(600)
        doc = {"method": self.command, "target": self.path,
               "headers": [[k, v] for k, v in self.headers.items()]}
        self.send_body(200, json.dumps(doc).encode(), [("X-Upstream", "yes"),
                       ("Set-Cookie", "yard_token=stolen; Path=/"), ("Set-Cookie", "theme=dark; Path=/"),
                       ("Connection", "close, X-Hop"), ("X-Hop", "dropped")])
    do_HEAD = do_GET
    def do_POST(self):
        n = int(self.headers["Content-Length"])
        h = hashlib.sha256()
        left = n
        while left:
            b = self.rfile.read(min(left, 1 << 16))
            h.update(b)
            left -= len(b)
        self.send_body(201, json.dumps({"method": self.command, "len": n, "sha256": h.hexdigest()}).encode())
    do_PUT = do_PATCH = do_DELETE = do_POST
    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        if "echo.v1" in self.headers.get("Sec-WebSocket-Protocol", ""):
            self.send_header("Sec-WebSocket-Protocol", "echo.v1")
        self.end_headers()
        self.wfile.flush()
        r = self.rfile
        while True:
            b0, b1 = r.read(2)
            n = b1 & 0x7f
            if n == 126:
                n = struct.unpack(">H", r.read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", r.read(8))[0]
            mask = r.read(4)
            data = bytes(c ^ mask[i % 4] for i, c in enumerate(r.read(n))) if n else b""
            op = b0 & 0x0f
            head = bytes([0x80 | op])
            if len(data) < 126:
                head += bytes([len(data)])
            elif len(data) < 65536:
                head += bytes([126]) + struct.pack(">H", len(data))
            else:
                head += bytes([127]) + struct.pack(">Q", len(data))
            self.wfile.write(head + data)
            self.wfile.flush()
            if op == 8:
                return
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print("listening", srv.server_address[1], flush=True)
srv.serve_forever()
'''

# A TCP echo: what comes back is what went, its end after the other's.
ECHO = r'''
import socket, threading
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print("listening", s.getsockname()[1], flush=True)
def serve(c):
    while True:
        d = c.recv(1 << 16)
        if not d:
            break
        c.sendall(d)
    c.shutdown(socket.SHUT_WR)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''


def server_job(c, program, token=None, name="srv"):
    """A job whose task runs program (Python) until cancelled; returns (job
    id, the port it listens on, as it printed it)."""
    st, doc = c.api.submit(spec(["/usr/bin/python3", "-c", program], name=name), token=token)
    check_eq(st, 201, f"submit {name}: {doc}")
    jid = doc["id"]
    log = wait_until(lambda: (lambda t: t if b"listening" in t else None)(c.api.log(jid)), 60,
                     f"job {jid} to listen")
    return jid, int(re.search(rb"listening (\d+)", log).group(1))


def connect(c):
    """A connection to the master, over TLS (its CA trusted) when it is https."""
    s = socket.create_connection(("127.0.0.1", c.port), timeout=60)
    if c.url.startswith("https://"):
        ctx = ssl.create_default_context(cafile=c.ca_file or os.path.join(c.data_dir, "tls", "cert.pem"))
        ctx.check_hostname = False
        s = ctx.wrap_socket(s)
    return s


def raw_request(c, method, target, headers=None, body=b"", token=None):
    """One request as raw bytes; returns (status, [(name, value)...], body)
    read to the connection's end."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{c.port}", "Connection: close"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    with connect(c) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        data = bytearray()
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            data += b
    end = data.index(b"\r\n\r\n")
    first, *fields = data[:end].decode("latin-1").split("\r\n")
    pairs = [tuple(f.split(": ", 1)) for f in fields]
    at, rest = end + 4, bytearray()
    if any(k.lower() == "transfer-encoding" for k, _ in pairs):
        while True:
            eol = data.index(b"\r\n", at)
            n = int(data[at:eol], 16)
            if not n:
                break
            rest += data[eol + 2:eol + 2 + n]
            at = eol + 2 + n + 2
    else:
        rest = data[at:]
    return int(first.split()[1]), pairs, bytes(rest)


def fields_named(pairs, name):
    return [v for k, v in pairs if k.lower() == name.lower()]


# ---- a WebSocket client of our own (masked frames, as a browser sends) ----

def ws_connect(c, target, token=None, cookie=None, origin=None, protocol=None):
    """A WebSocket through the master: (socket, status, head fields,
    the key sent); the socket is None unless the answer was 101."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [f"GET {target} HTTP/1.1", f"Host: 127.0.0.1:{c.port}", "Connection: Upgrade",
             "Upgrade: websocket", "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Key: {key}"]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    if cookie:
        lines.append(f"Cookie: yard_token={cookie}")
    if origin:
        lines.append(f"Origin: {origin}")
    if protocol:
        lines.append(f"Sec-WebSocket-Protocol: {protocol}")
    s = connect(c)
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            break
        head += b
    first, *fields = head.decode("latin-1").split("\r\n\r\n")[0].split("\r\n")
    status = int(first.split()[1])
    pairs = [tuple(f.split(": ", 1)) for f in fields]
    if status != 101:
        s.close()
        s = None
    return s, status, pairs, key


def ws_send(s, op, data):
    mask = os.urandom(4)
    head = bytes([0x80 | op])
    if len(data) < 126:
        head += bytes([0x80 | len(data)])
    elif len(data) < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", len(data))
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", len(data))
    s.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        b = s.recv(n - len(out))
        check(b, f"the connection ended after {len(out)} of {n} bytes")
        out += b
    return out


def ws_recv(s):
    """One frame from the server (unmasked): (opcode, payload)."""
    b0, b1 = recv_exact(s, 2)
    check(not b1 & 0x80, "a server's frame is not masked")
    n = b1 & 0x7f
    if n == 126:
        n = struct.unpack(">H", recv_exact(s, 2))[0]
    elif n == 127:
        n = struct.unpack(">Q", recv_exact(s, 8))[0]
    return b0 & 0x0f, recv_exact(s, n)


def audit_entries(c, prefix):
    _, doc = c.api.json("GET", "/v1/audit?limit=1000", expect=200)
    return [e for e in doc["entries"] if e["path"].startswith(prefix)]


def test_proxy_http():
    with cluster("proxy-http") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        alice = c.user_token("alice", team="vision")
        jid, port = server_job(c, UPSTREAM, token=alice)
        base = f"/v1/jobs/{jid}/proxy/worker/0/{port}"

        # the target goes upstream whole (encoded path, query); the master's
        # credentials do not; the forwarding fields say who asked, and how
        target = base + "/a/b%20c/%2E%2E?x=1&y=%2F&token=jupyters"
        st, pairs, body = raw_request(c, "GET", target, token=alice,
                                      headers={"Cookie": "theme=light; yard_token=secret; lang=en",
                                               "X-Forwarded-For": "6.6.6.6", "Connection": "close, X-Private",
                                               "X-Private": "hop", "X-Custom": "kept"})
        check_eq(st, 200, f"GET through the proxy: {body[:300]!r}")
        doc = json.loads(body)
        check_eq((doc["method"], doc["target"]), ("GET", target), "what the upstream got")
        up = {k.lower(): v for k, v in doc["headers"]}
        check("authorization" not in up, f"the bearer token stays with the master: {up}")
        check_eq(up.get("cookie"), "theme=light; lang=en", "the cookie without yard_token")
        check_eq((up.get("x-forwarded-for"), up.get("x-forwarded-proto"), up.get("x-forwarded-host"),
                  up.get("x-forwarded-prefix")), ("127.0.0.1", "http", f"127.0.0.1:{c.port}", base),
                 "the forwarding fields are the master's")
        check_eq(up.get("host"), f"127.0.0.1:{c.port}", "the client's Host")
        check_eq(up.get("connection"), "close", "HTTP/1.0 with Connection: close upstream")
        check("x-private" not in up and up.get("x-custom") == "kept", f"hop-by-hop fields named by Connection: {up}")
        # the answer: the upstream's fields but its hop-by-hop ones and its yard_token cookie
        check_eq(fields_named(pairs, "X-Upstream"), ["yes"], "the upstream's own field")
        check_eq(fields_named(pairs, "Set-Cookie"), ["theme=dark; Path=/"], "no Set-Cookie of yard_token")
        check_eq(fields_named(pairs, "X-Hop"), [], "a field the upstream's Connection names")
        check_eq(fields_named(pairs, "X-Content-Type-Options"), ["nosniff"], "nosniff, once")
        check_eq(fields_named(pairs, "Content-Length"), [str(len(body))], "the upstream's length")

        # HEAD: the length, no body
        st, pairs, hbody = raw_request(c, "HEAD", base + "/same", token=alice)
        st2, _, gbody = raw_request(c, "GET", base + "/same", token=alice)
        check_eq((st, hbody), (200, b""), "HEAD")
        check_eq(fields_named(pairs, "Content-Length"), [str(len(gbody.replace(b'"GET"', b'"HEAD"')))],
                 "HEAD's length is the upstream's")

        # bodies: 20 MB up (each method with one), 50 MB down without a length (chunked to us)
        data = os.urandom(20 << 20)
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            st, _, body = raw_request(c, method, base + "/up", token=alice, body=data if method == "POST" else b"xyz")
            check_eq(st, 201, f"{method}: {body[:200]!r}")
            want = (len(data), hashlib.sha256(data).hexdigest()) if method == "POST" else (3, hashlib.sha256(b"xyz").hexdigest())
            check_eq((json.loads(body)["len"], json.loads(body)["sha256"], json.loads(body)["method"]),
                     want + (method,), f"{method} body upstream byte for byte")
        n = 50 << 20
        st, pairs, body = raw_request(c, "GET", base + f"/big?n={n}", token=alice)
        check_eq((st, len(body)), (200, n), "50 MB down")
        pattern = bytes(range(256)) * 256
        check(body == (pattern * (n // len(pattern) + 1))[:n], "50 MB down byte for byte")
        check_eq(fields_named(pairs, "Transfer-Encoding"), ["chunked"], "a body without a length, chunked")

        # no slash after the port: sent to the directory's URL
        st, pairs, _ = raw_request(c, "GET", base + "?q=1", token=alice)
        check_eq((st, fields_named(pairs, "Location")), (308, [base + "/?q=1"]), "the slash after PORT")

        # refusals, each naming what is wrong
        for target, want, words in (
                (f"/v1/jobs/{jid}/proxy/worker/0/{port + 1 if port < 65535 else port - 1}/", 502,
                 "cannot connect to port"),
                (f"/v1/jobs/{jid}/proxy/worker/7/{port}/", 404, "has no task worker/7"),
                (f"/v1/jobs/{jid}/proxy/worker/0/99999/", 400, "expected a port"),
                (f"/v1/jobs/{jid}/proxy/worker/x/{port}/", 400, "expected a task index"),
                (f"/v1/jobs/{jid}/proxy/worker", 400, "expected ROLE/INDEX/PORT/"),
                (f"/v1/jobs/999/proxy/worker/0/{port}/", 404, "no job '999'")):
            st, _, body = raw_request(c, "GET", target, token=alice)
            check_eq(st, want, f"GET {target}: {body[:300]!r}")
            check(words in json.loads(body)["error"]["message"], f"{target} says why: {body[:300]!r}")
        # a bare CR in a field: a line break to some upstreams, a field smuggled past the master's
        st, _, body = raw_request(c, "GET", base + "/", token=alice,
                                  headers={"X-Note": "a\rX-Forwarded-For: 6.6.6.6"})
        check_eq(st, 400, f"a CR in a field's value: {body[:300]!r}")
        check(b"control character" in body, f"says why: {body!r}")
        with socket.create_connection(("127.0.0.1", c.port), timeout=30) as s:
            s.sendall((f"POST {base}/up HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {alice}\r\n"
                       "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n").encode())
            answer = s.recv(65536)
        check(answer.startswith(b"HTTP/1.1 411") and b"Content-Length" in answer, f"a chunked body: {answer!r}")

        # the audit log: what is not a read, with the task's path; reads that got an answer are not
        entries = audit_entries(c, base)
        posts = [e for e in entries if e["method"] == "POST" and e["status"] == 201]
        check(posts and posts[0]["user"] == "alice" and posts[0]["path"] == base + "/up",
              f"the POST is audited: {entries}")
        check(not [e for e in entries if e["method"] == "GET" and e["status"] == 200],
              f"the GETs are not: {entries}")
        check([e for e in entries if e["status"] == 411], f"a refusal is: {entries}")
        check([e for e in audit_entries(c, f"/v1/jobs/{jid}/proxy/worker/0/99999/") if e["status"] == 400],
              "a GET the master refused is")

        # a finished job
        c.cli("cancel", str(jid), token=alice, check_rc=0)
        c.api.wait_job(jid, states=("cancelled",))
        st, _, body = raw_request(c, "GET", base + "/", token=alice)
        check_eq(st, 409, f"the job ended: {body[:200]!r}")
        check(b"is cancelled, not running" in body, f"says so: {body!r}")


def test_proxy_websocket_and_who_may():
    with cluster("proxy-ws") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        alice = c.user_token("alice", team="vision")
        carol = c.user_token("carol", team="vision")
        bob = c.user_token("bob", team="nlp")
        jid, port = server_job(c, UPSTREAM, token=alice)
        base = f"/v1/jobs/{jid}/proxy/worker/0/{port}"

        # the upstream's 101 is the master's, with its accept key and protocol
        s, st, pairs, key = ws_connect(c, base + "/ws?x=1", token=alice, protocol="other.v1, echo.v1")
        check_eq(st, 101, f"the upgrade: {pairs}")
        want = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        check_eq(fields_named(pairs, "Sec-WebSocket-Accept"), [want], "the upstream's accept key")
        check_eq(fields_named(pairs, "Sec-WebSocket-Protocol"), ["echo.v1"], "the protocol the upstream chose")
        with s:
            ws_send(s, 1, b"hello")
            check_eq(ws_recv(s), (1, b"hello"), "a text frame echoed")
            big = os.urandom(1 << 20)
            ws_send(s, 2, big)
            check(ws_recv(s) == (2, big), "1 MiB echoed byte for byte")
            ws_send(s, 8, struct.pack(">H", 1000))
            check_eq(ws_recv(s)[0], 8, "the close comes back")
        # a browser's: the cookie, from the master's own origin
        s, st, _, _ = ws_connect(c, base + "/ws", cookie=carol, origin=c.url)
        check_eq(st, 101, "carol (alice's team) by the cookie from the master's pages")
        with s:
            ws_send(s, 1, b"carol")
            check_eq(ws_recv(s), (1, b"carol"), "carol's echo")
        _, st, _, _ = ws_connect(c, base + "/ws", cookie=carol, origin="http://evil.example")
        check_eq(st, 403, "the cookie from another site")

        # who may: the visibility rule, HTTP and WebSocket alike
        for who, tok, want in (("bob", bob, 403), ("carol", carol, 200), ("admin", c.admin_token, 200),
                               ("nobody", None, 401)):
            st, _, body = raw_request(c, "GET", base + "/", token=tok)
            check_eq(st, want, f"{who}: {body[:300]!r}")
            if want == 403:
                check(b"may not see" in body, f"the rule's words: {body!r}")
        _, st, _, _ = ws_connect(c, base + "/ws", token=bob)
        check_eq(st, 403, "bob's WebSocket")
        st, _, body = raw_request(c, "GET", base + "/", headers={"Cookie": f"yard_token={alice}",
                                                               "Origin": "http://evil.example"})
        check_eq(st, 403, f"alice's cookie from another site: {body!r}")
        # a job's token reaches its own job only
        other, _ = server_job(c, ECHO, token=alice, name="other")
        tok = c.cli("exec", str(other), "--", "/bin/sh", "-c", "printf %s \"$YARD_JOB_TOKEN\"", token=alice,
                    check_rc=0).stdout.decode()
        st, _, _ = raw_request(c, "GET", base + "/", token=tok)
        check_eq(st, 403, "another job's token")

        entries = audit_entries(c, base + "/ws")
        check([e for e in entries if e["status"] == 101 and e["user"] == "alice"],
              f"a WebSocket is audited: {entries}")
        check([e for e in entries if e["status"] == 403 and e["user"] == "bob"], f"so is a refusal: {entries}")


def test_proxy_over_https():
    # the master reads and writes an upgraded TLS connection itself
    # (sessions.c): a WebSocket's leg is one; an http answer is MHD's own
    with cluster("proxy-tls", master_args=["--tls-self-signed"]) as c:
        c.start_master()
        check(c.url.startswith("https://"), f"an https master: {c.url}")
        c.start_agent("n1", gpus="sim:2")
        jid, port = server_job(c, UPSTREAM)
        base = f"/v1/jobs/{jid}/proxy/worker/0/{port}"
        st, _, body = raw_request(c, "GET", base + "/x?y=1", token=c.admin_token)
        check_eq(st, 200, f"GET over https: {body[:200]!r}")
        up = {k.lower(): v for k, v in json.loads(body)["headers"]}
        check_eq(up.get("x-forwarded-proto"), "https", "the scheme the client used")
        n = 8 << 20
        st, _, body = raw_request(c, "GET", base + f"/big?n={n}", token=c.admin_token)
        pattern = bytes(range(256)) * 256
        check(st == 200 and body == (pattern * (n // len(pattern) + 1))[:n], "8 MB down over https, byte for byte")
        data = os.urandom(5 << 20)
        st, _, body = raw_request(c, "POST", base + "/up", token=c.admin_token, body=data)
        check_eq((st, json.loads(body)["sha256"]), (201, hashlib.sha256(data).hexdigest()), "5 MB up over https")
        s, st, _, _ = ws_connect(c, base + "/ws", token=c.admin_token)
        check_eq(st, 101, "a WebSocket over https")
        with s:
            big = os.urandom(3 << 20)
            ws_send(s, 2, big)
            check(ws_recv(s) == (2, big), "3 MiB echoed over https")
            ws_send(s, 8, struct.pack(">H", 1000))
            check_eq(ws_recv(s)[0], 8, "the close comes back")


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def test_proxy_slow_reader_bounded_master_memory():
    # as test_exec's: ASan's quarantine kept out of what is measured
    os.environ["ASAN_OPTIONS"] = (os.environ.get("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
                                  + ":quarantine_size_mb=1")
    with cluster("proxy-slow") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        jid, port = server_job(c, UPSTREAM)
        n = 200 << 20
        master = c.master.p.pid
        before = rss_kb(master)
        with socket.create_connection(("127.0.0.1", c.port), timeout=60) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            s.sendall((f"GET /v1/jobs/{jid}/proxy/worker/0/{port}/big?n={n} HTTP/1.1\r\nHost: x\r\n"
                       f"Authorization: Bearer {c.admin_token}\r\nConnection: close\r\n\r\n").encode())
            got = len(s.recv(1 << 20))
            # a reader that stops: the master's memory must not follow what the
            # upstream can send (samples over two seconds of not reading)
            peak = before
            for _ in range(20):
                peak = max(peak, rss_kb(master))
                time.sleep(0.1)
            while True:
                b = s.recv(1 << 20)
                if not b:
                    break
                got += len(b)
        check(got > n, f"all of it came after all ({got} bytes, head and chunks included)")
        check(peak - before < 4096, f"the master's RSS grew {peak - before} KiB under a stalled reader")


def test_proxy_agent_killed_mid_answer():
    with cluster("proxy-cut") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        jid, port = server_job(c, UPSTREAM)
        base = f"/v1/jobs/{jid}/proxy/worker/0/{port}"
        with socket.create_connection(("127.0.0.1", c.port), timeout=30) as s:
            s.sendall((f"GET {base}/slow HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {c.admin_token}\r\n"
                       "Connection: close\r\n\r\n").encode())
            data = b""
            while b"x" * 1000 not in data:
                b = s.recv(65536)
                check(b, f"the first 1000 bytes: {data!r}")
                data += b
            check(data.startswith(b"HTTP/1.1 200") and b"Content-Length: 1000000" in data, f"{data[:300]!r}")
            t0 = time.monotonic()
            c.agents["n1"].kill(signal.SIGKILL)
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
            took = time.monotonic() - t0
        check(took < 10, f"the client learns within seconds ({took:.1f} s)")
        check(len(data.partition(b"\r\n\r\n")[2]) < 1000000, "the answer is cut, not passed off as whole")


def test_port_forward_100mb():
    with cluster("port-forward") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        jid, port = server_job(c, ECHO)
        env = c.env({"YARD_MASTER": c.url, "YARD_TOKEN": c.admin_token, "HOME": c.dir})
        p = subprocess.Popen([YARD, "port-forward", str(jid), "--task", "worker/0", f":{port}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            line = p.stdout.readline().decode()
            m = re.match(r"forwarding 127\.0\.0\.1:(\d+) -> port (\d+) of task worker/0 of job (\d+)", line)
            check(m and int(m.group(2)) == port and int(m.group(3)) == jid, f"where it listens: {line!r}")
            local = int(m.group(1))

            # 100 MB there and back at once, the end of sending a half-close
            block = os.urandom(1 << 20)
            want = hashlib.sha256(block * 100).hexdigest()
            t0 = time.monotonic()
            with socket.create_connection(("127.0.0.1", local), timeout=60) as s:
                def send():
                    for _ in range(100):
                        s.sendall(block)
                    s.shutdown(socket.SHUT_WR)
                th = threading.Thread(target=send)
                th.start()
                h, got = hashlib.sha256(), 0
                while True:
                    b = s.recv(1 << 20)
                    if not b:
                        break
                    h.update(b)
                    got += len(b)
                th.join()
            took = time.monotonic() - t0
            check_eq(got, 100 << 20, "bytes back")
            check_eq(h.hexdigest(), want, "100 MB byte for byte")
            print(f"100 MB each way through yard port-forward in {took:.1f} s")

            # connections side by side
            socks = [socket.create_connection(("127.0.0.1", local), timeout=30) for _ in range(3)]
            for i, s in enumerate(socks):
                s.sendall(b"conn-%d" % i)
            for i, s in enumerate(socks):
                check_eq(recv_exact(s, 6), b"conn-%d" % i, f"connection {i}")
                s.close()
        finally:
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=15)
        check_eq(p.returncode, 0, f"SIGTERM ends it cleanly: {err!r}")
        c.scan_text(err.decode(errors="replace"), "yard port-forward")

        # a port nothing listens on: the connection closes, and it says why
        p = subprocess.Popen([YARD, "port-forward", str(jid), f"0:{port + 1 if port < 65535 else port - 1}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            local = int(re.search(rb"127\.0\.0\.1:(\d+)", p.stdout.readline()).group(1))
            with socket.create_connection(("127.0.0.1", local), timeout=30) as s:
                try:
                    check_eq(s.recv(10), b"", "closed")
                except ConnectionResetError:
                    pass
        finally:
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=15)
        check(b"connection 1: cannot connect to port" in err, f"the CLI says why: {err!r}")

        # refusals before listening: a job that is not running; bad ports
        c.cli("cancel", str(jid), check_rc=0)
        c.api.wait_job(jid, states=("cancelled",))
        r = c.cli("port-forward", str(jid), f"{port}")
        check(r.returncode == 1 and b"is cancelled, not running" in r.stderr, f"a finished job: {r.stderr!r}")
        r = c.cli("port-forward", str(jid), "8888:99999")
        check(r.returncode == 2 and b"expected LOCAL:REMOTE" in r.stderr, f"a bad port: {r.stderr!r}")
