"""TLS: the master serves https with a certificate it made itself or one from
files; agents (by pin or by CA file; staging datasets from the master too),
the CLI (YARD_CA, --pin; `yard data push` too) and tasks that call back (yard
mpi-rsh with the YARD_PIN/YARD_CA their agent gave them) work through it; a
wrong pin, no trust at all, plain http and a name the certificate lacks are
refused."""
import base64
import json
import os
import re
import socket
import stat
import subprocess
import urllib.request

from harness import YARD, Proc, check, check_eq, cluster, wait_until

YARD_ABS = os.path.abspath(YARD)
WRONG_PIN = "sha256//" + "A" * 43 + "="

# Two tasks, one per agent (each agent has two GPUs, each task wants two).
# Task 0 asks the master to run a command in task 1 (yard mpi-rsh, with the
# job's token and the trust its agent put in its environment) and, once that
# command has exited, says so with a second file; task 1 waits for both
# (ending it earlier would end the command before its exit is reported).
TASK = """\
echo "node=$YARD_NODE index=$YARD_TASK_INDEX pin=$YARD_PIN ca=$YARD_CA"
echo "data: $(cat "$YARD_DATA_DIR/raw/hello.txt")"
if [ "$YARD_TASK_INDEX" = 0 ]; then
  if [ "$YARD_NODE" = n1 ]; then other=n2; else other=n1; fi
  for i in $(seq 150); do
    {yard} mpi-rsh "$other" "echo exec-over-tls on \\$YARD_NODE; touch {marker}" && touch {marker}.done && exit 0
    sleep 0.2
  done
  exit 1
fi
while [ ! -e {marker} ] || [ ! -e {marker}.done ]; do sleep 0.05; done
echo "task 1 saw the marker"
"""


def openssl(*args, cwd=None):
    r = subprocess.run(["openssl", *args], capture_output=True, cwd=cwd)
    if r.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)}: {r.stderr.decode(errors='replace')}")
    return r.stdout


def pin_of(cert):
    """The pin of a certificate's public key, the way a user computes it with openssl."""
    pub = openssl("x509", "-in", cert, "-pubkey", "-noout")
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pub,
                         capture_output=True, check=True).stdout
    digest = subprocess.run(["openssl", "dgst", "-sha256", "-binary"], input=der,
                            capture_output=True, check=True).stdout
    return "sha256//" + base64.b64encode(digest).decode()


def submit_tls_job(c, env):
    """Pushes a dataset and submits the two-task job that stages it with the
    CLI (env: how it trusts the master), waits for it and returns its two
    logs."""
    src = os.path.join(c.dir, "ds")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, "hello.txt"), "w") as f:
        f.write("staged over tls\n")
    c.cli("data", "push", src, "greeting", env=env, check_rc=0)
    marker = os.path.join(c.dir, "marker")
    spec = {"name": "tls", "command": ["/bin/sh", "-c", TASK.format(yard=YARD_ABS, marker=marker)],
            "tasks": {"worker": {"replicas": 2, "gpus": 2, "cpus": 0.1}},
            "data": [{"source": "yard://greeting@1", "mount": "raw"}]}
    path = os.path.join(c.dir, "job.yaml")
    with open(path, "w") as f:
        json.dump(spec, f)  # JSON is YAML
    r = c.cli("submit", path, env=env, check_rc=0)
    jid = r.stdout.decode().strip()
    check(re.fullmatch(r"\d+", jid), f"submit prints the job id: {r.stdout!r}")
    r = c.cli("wait", jid, "--timeout", "90", env=env)
    logs = [c.cli("logs", jid, "--task", f"worker/{i}", env=env, check_rc=0).stdout.decode()
            for i in (0, 1)]
    check_eq(r.returncode, 0, f"yard wait of job {jid} over https (logs: {logs!r}, "
                              f"stderr: {r.stderr!r})")
    os.unlink(marker)
    os.unlink(marker + ".done")
    return logs


def check_task_trust(logs, pin, ca):
    """Each task got the trust of its own agent: n1 the pin, n2 the CA file;
    task 0's command ran in task 1 through the master; both staged the
    dataset from the master."""
    seen = {}
    for out in logs:
        check("data: staged over tls\n" in out, f"a task staged the dataset from the master: {out!r}")
        m = re.search(r"node=(\S+) index=(\d) pin=(\S*) ca=(\S*)", out)
        check(m, f"a task printed its environment: {out!r}")
        seen[m.group(1)] = (m.group(3), m.group(4))
    check_eq(seen.get("n1"), (pin, ""), "YARD_PIN and YARD_CA of the task on n1 (--pin)")
    check_eq(seen.get("n2"), ("", os.path.realpath(ca)), "YARD_PIN and YARD_CA of the task on n2 (--ca)")
    check(re.search(r"exec-over-tls on n[12]\n", logs[1]) and "task 1 saw the marker" in logs[1],
          f"task 0's yard mpi-rsh reached task 1 through the master: {logs!r}")


def test_self_signed_agents_cli_and_refusals():
    with cluster("tls", master_args=["--tls-self-signed", "--tls-san", "yard.test"]) as c:
        m = c.start_master()
        cert = os.path.join(c.data_dir, "tls", "cert.pem")
        key = os.path.join(c.data_dir, "tls", "key.pem")
        check(c.url.startswith("https://127.0.0.1:"), f"the ready line's URL is https: {c.url}")
        check(c.pin and re.fullmatch(r"sha256//[A-Za-z0-9+/]{43}=", c.pin), f"the pin: {c.pin!r}")
        check_eq(c.pin, pin_of(cert), "the printed pin, against openssl's")
        check_eq(stat.S_IMODE(os.stat(key).st_mode), 0o600, "the key file's mode")
        wait_until(lambda: "made a self-signed certificate" in m.tail(), 5, "the master to say it made a certificate")
        san = openssl("x509", "-in", cert, "-noout", "-ext", "subjectAltName").decode()
        for name in ("DNS:localhost", "IP Address:127.0.0.1", "DNS:yard.test", "DNS:" + socket.gethostname()):
            check(name in san, f"the certificate names {name}: {san!r}")

        c.start_agent("n1")                               # by the pin
        c.start_agent("n2", trust=["--ca", cert])         # by the certificate as CA
        by_ca = {"YARD_PIN": "", "YARD_CA": cert}
        logs = submit_tls_job(c, by_ca)
        check_task_trust(logs, c.pin, cert)

        # the CLI by --pin, and the API through the harness's own TLS client
        r = c.cli("nodes", "--pin", c.pin, "--output", "json", env={"YARD_PIN": ""}, check_rc=0)
        check_eq(sorted(n["name"] for n in json.loads(r.stdout)["nodes"]), ["n1", "n2"], "nodes over https")
        check_eq(c.api.json("GET", "/v1/whoami")[1]["user"], "admin", "the harness's https client")

        # a wrong pin, and no trust at all
        r = c.cli("ls", "--pin", WRONG_PIN, env={"YARD_PIN": ""})
        err = r.stderr.decode()
        check(r.returncode != 0 and f"master {c.url}: the certificate's public key does not match the pin "
              f"'{WRONG_PIN}'" in err, f"a wrong pin is refused, saying so: rc {r.returncode} {err!r}")
        r = c.cli("ls", env={"YARD_PIN": ""})
        err = r.stderr.decode()
        check(r.returncode != 0 and f"master {c.url}: certificate not trusted" in err and
              "give --ca FILE or --pin sha256//" in err,
              f"an untrusted certificate is refused, saying what to give: rc {r.returncode} {err!r}")
        r = c.cli("ls", "--pin", "sha256//nope", env={"YARD_PIN": ""})
        check(r.returncode == 2 and "--pin 'sha256//nope': expected sha256//" in r.stderr.decode(),
              f"a malformed pin is a usage error: {r.stderr!r}")

        # an agent with a wrong pin says why and never registers
        bad = c.start_agent("n3", trust=["--pin", WRONG_PIN], ready=False)
        wait_until(lambda: "does not match the pin" in bad.tail(), 20, "the wrong-pin agent to say why")
        check(f"yard agent: cannot register with '{c.url}': master {c.url}: the certificate's public key "
              f"does not match the pin '{WRONG_PIN}'" in bad.tail(), f"the agent's error: {bad.tail()!r}")
        check(not bad.ready_match and bad.alive(), "the wrong-pin agent is not ready and keeps trying")
        names = [n["name"] for n in c.api.json("GET", "/v1/nodes", expect=200)[1]["nodes"]]
        check("n3" not in names, f"the wrong-pin agent is not a node: {names}")

        # plain http to the https port
        plain = "http://" + c.url[len("https://"):]
        try:
            urllib.request.urlopen(plain + "/healthz", timeout=10).read()
            raise AssertionError("a plain http request to the TLS port was answered")
        except AssertionError:
            raise
        except Exception:
            pass
        r = c.cli("ls", env={"YARD_MASTER": plain})
        err = r.stderr.decode()
        check(r.returncode != 0 and f"cannot reach '{plain}/v1/jobs" in err and
              "does the master serve https?" in err, f"the CLI over plain http: {err!r}")

        # a restart keeps the certificate and its pin
        pin = c.pin
        c.master.stop()
        with open(c.master.logpath, "rb") as f:
            before = len(f.read())
        c.start_master()
        check_eq(c.pin, pin, "the pin after a restart")
        with open(c.master.logpath, "rb") as f:
            second = f.read()[before:].decode(errors="replace")
        check("serving https" in second and "made a self-signed certificate" not in second,
              f"no new certificate at the second start: {second!r}")
        wait_until(lambda: len([n for n in c.api.json("GET", "/v1/nodes")[1]["nodes"]
                                if n["state"] == "ready"]) == 2, 30, "both agents back")
        logs = submit_tls_job(c, {})  # the harness's default: YARD_PIN
        check_task_trust(logs, c.pin, cert)


def test_certificate_files():
    with cluster("tlsfiles") as c:
        d = os.path.join(c.dir, "pki")
        os.makedirs(d)
        cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost")
        other = os.path.join(d, "other.pem")
        openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", other)

        def refused(args, want):
            r = subprocess.run([YARD, "master", "--listen", "127.0.0.1:0", "--data-dir",
                                os.path.join(c.dir, "bad"), *args], capture_output=True, timeout=30,
                               env=c.env())
            err = r.stderr.decode()
            check(r.returncode != 0 and want in err and "ready" not in r.stdout.decode(),
                  f"yard master {' '.join(args)}: expected a refusal with {want!r}, got rc "
                  f"{r.returncode}: {err!r}")
            c.scan_text(err, "yard master")

        refused(["--tls-cert", cert], "--tls-cert needs --tls-key too")
        refused(["--tls-cert", cert, "--tls-key", other],
                f"--tls-key '{other}' and --tls-cert '{cert}': the key does not belong to the certificate")
        refused(["--tls-cert", os.path.join(d, "nope.pem"), "--tls-key", key],
                f"--tls-cert '{os.path.join(d, 'nope.pem')}': cannot read: No such file or directory")
        refused(["--tls-cert", key, "--tls-key", key], f"--tls-cert '{key}': not a PEM certificate")
        refused(["--tls-self-signed", "--tls-cert", cert, "--tls-key", key], "not both")
        refused(["--tls-san", "x"], "--tls-san 'x' needs --tls-self-signed")
        refused(["--tls-self-signed", "--tls-san", "a b"], "--tls-san 'a b': expected a host name or an IP address")

        # https to a master that serves plain http
        plain = Proc("plain-master", [YARD, "master", "--listen", "127.0.0.1:0", "--data-dir",
                                      os.path.join(c.dir, "plain")],
                     os.path.join(c.dir, "plain-master.log"), env=c.env(),
                     ready=r"yard master ready url=(http://\S+)$")
        c.procs.append(plain)
        url = "https://" + plain.ready_match.group(1)[len("http://"):]
        r = subprocess.run([YARD, "ls"], capture_output=True, timeout=60,
                           env=c.env({"YARD_MASTER": url, "YARD_TOKEN": "t", "YARD_CA": cert,
                                      "HOME": c.dir}))
        err = r.stderr.decode()
        c.scan_text(err, "yard ls")
        check(r.returncode != 0 and f"cannot reach '{url}/v1/jobs" in err and
              "does the master serve plain http?" in err, f"the CLI's https to a plain master: {err!r}")
        plain.stop()

        c.master_args = ["--tls-cert", cert, "--tls-key", key]
        c.ca_file = cert
        c.host = "0.0.0.0"  # so that 127.0.0.2 reaches it too (the URL stays 127.0.0.1)
        c.start_master()
        check_eq(c.pin, pin_of(cert), "the pin printed for a certificate from files")
        c.start_agent("n1", trust=["--pin", c.pin])
        c.start_agent("n2", trust=["--ca", cert])
        logs = submit_tls_job(c, {"YARD_PIN": "", "YARD_CA": cert})
        check_task_trust(logs, c.pin, cert)
        # the CA check also checks the name: this certificate names localhost
        # and 127.0.0.1, not 127.0.0.2
        c.cli("ls", env={"YARD_PIN": "", "YARD_CA": cert,
                         "YARD_MASTER": c.url.replace("127.0.0.1", "localhost")}, check_rc=0)
        r = c.cli("ls", env={"YARD_PIN": "", "YARD_CA": cert,
                             "YARD_MASTER": c.url.replace("127.0.0.1", "127.0.0.2")})
        check(r.returncode != 0 and "certificate not trusted" in r.stderr.decode(),
              f"a CA-verified master reached by a name its certificate lacks: {r.stderr!r}")
        # a pin with a CA: both must hold
        r = c.cli("ls", env={"YARD_PIN": WRONG_PIN, "YARD_CA": cert})
        check(r.returncode != 0 and "does not match the pin" in r.stderr.decode(),
              f"a wrong pin next to a good CA: {r.stderr!r}")


def s_client(url, *args):
    """One openssl s_client handshake with the master: (completed, protocol,
    cipher, output). A handshake that completes prints the cipher it chose."""
    hostport = url.split("://", 1)[1]
    r = subprocess.run(["openssl", "s_client", "-connect", hostport, "-servername", "localhost",
                        *args], input=b"", capture_output=True, timeout=30)
    out = (r.stdout + r.stderr).decode(errors="replace")
    m = re.search(r"^New, (\S+), Cipher is (\S+)$", out, re.M)
    done = bool(m) and m.group(2) != "(NONE)"
    return done, m.group(1).rstrip(",") if done else None, m.group(2) if done else None, out


def check_protocols(url, kind):
    """TLS 1.0 and 1.1 and CBC ciphers refused, 1.2 and 1.3 with AEAD taken
    (kind: ECDSA or RSA, the certificate's key)."""
    weak = "DEFAULT@SECLEVEL=0"
    for args in (["-tls1", "-cipher", weak], ["-tls1_1", "-cipher", weak],
                 ["-tls1_2", "-cipher", f"ECDHE-{kind}-AES256-SHA:ECDHE-{kind}-AES128-SHA:"
                                        f"ECDHE-{kind}-AES128-SHA256:AES256-SHA:AES128-SHA256:@SECLEVEL=0"],
                 ["-tls1_2", "-cipher", f"ECDHE-{kind}-AES256-SHA384:AES256-GCM-SHA384"]):
        done, proto, cipher, out = s_client(url, *args)
        check(not done, f"openssl s_client {' '.join(args)} to a {kind} master is refused, "
              f"got {proto} {cipher}: {out[-400:]!r}")
    for args, want in ((["-tls1_2", "-cipher", f"ECDHE-{kind}-AES256-GCM-SHA384"], f"ECDHE-{kind}-AES256-GCM-SHA384"),
                       (["-tls1_2", "-cipher", f"ECDHE-{kind}-AES128-GCM-SHA256"], f"ECDHE-{kind}-AES128-GCM-SHA256"),
                       (["-tls1_2", "-cipher", f"ECDHE-{kind}-CHACHA20-POLY1305"], f"ECDHE-{kind}-CHACHA20-POLY1305"),
                       (["-tls1_3"], None),
                       (["-tls1_3", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"], "TLS_CHACHA20_POLY1305_SHA256"),
                       (["-tls1_3", "-ciphersuites", "TLS_AES_128_GCM_SHA256"], "TLS_AES_128_GCM_SHA256")):
        done, proto, cipher, out = s_client(url, *args)
        check(done, f"openssl s_client {' '.join(args)} to a {kind} master: {out[-400:]!r}")
        check_eq(proto, "TLSv1.3" if "-tls1_3" in args else "TLSv1.2", f"protocol of {' '.join(args)}")
        if want:
            check_eq(cipher, want, f"cipher of {' '.join(args)}")
    # no version given: the best both have
    done, proto, _, out = s_client(url)
    check(done and proto == "TLSv1.3", f"a default handshake is TLS 1.3: {out[-400:]!r}")


def test_protocols_and_ciphers():
    """RFC 8996: the master speaks TLS 1.2 and 1.3 only, with AEAD ciphers,
    for its own ECDSA certificate and for an RSA one from files; the agent and
    the CLI (libcurl) still connect."""
    with cluster("tlsproto", master_args=["--tls-self-signed"]) as c:
        c.start_master()
        check_protocols(c.url, "ECDSA")
        c.start_agent("n1")
        r = c.cli("nodes", "--output", "json", check_rc=0)
        check_eq([n["name"] for n in json.loads(r.stdout)["nodes"]], ["n1"], "the agent over TLS 1.2+")
        c.master.stop()

        d = os.path.join(c.dir, "pki")
        os.makedirs(d)
        cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost")
        c.master_args = ["--tls-cert", cert, "--tls-key", key]
        c.ca_file = cert
        c.start_master()
        check_protocols(c.url, "RSA")
        c.cli("ls", env={"YARD_PIN": "", "YARD_CA": cert}, check_rc=0)
        r = c.cli("ls", "--pin", c.pin, env={"YARD_PIN": ""}, check_rc=0)
