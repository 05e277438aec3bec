"""The audit log (docs/security.md, Audit log): one entry per request to a
route that changes state, refused ones included, with who, from where, what
and how it ended; non-UTF-8 paths stored escaped; GET /v1/audit and
`yard audit` filter by user, since and limit."""
import json
import time
import urllib.request

from harness import check, check_eq, cluster


def audit(c, query=""):
    st, doc = c.api.json("GET", "/v1/audit" + query, expect=200)
    return doc["entries"]


def test_audited_requests_and_refusals():
    with cluster("audit") as c:
        c.start_master()
        st, made = c.api.json("POST", "/v1/tokens", {"user": "alice"}, expect=201)
        alice = made["token"]
        before = len(audit(c))
        check_eq(before, 1, "the token's creation is the only entry so far")

        st, job = c.api.submit({"name": "a", "command": ["/bin/true"], "tasks": {"worker": {}}}, token=alice)
        check_eq(st, 201, f"alice submits: {job}")
        c.api.json("GET", f"/v1/jobs/{job['id']}", token=alice, expect=200)  # not audited
        c.api.json("POST", f"/v1/jobs/{job['id']}/cancel", token=alice, expect=200)
        # refusals: a user may not drain (403), an unknown token may not submit (401)
        st, _ = c.api.json("POST", "/v1/nodes/n1/drain", token=alice)
        check_eq(st, 403, "alice drains")
        st, _ = c.api.json("POST", "/v1/jobs", {"spec": {}}, token="yard_u_0_nosuchtoken")
        check_eq(st, 401, "an unknown token submits")
        # a path that is not UTF-8 once decoded (refused: alice may not drain)
        req = urllib.request.Request(c.url + "/v1/nodes/%FF%C3(/drain", method="POST",
                                     headers={"Authorization": "Bearer " + alice})
        try:
            urllib.request.urlopen(req, timeout=30)
            check(False, "alice drains a node whose name is not UTF-8")
        except urllib.error.HTTPError as e:
            check_eq(e.code, 403, "alice drains a node whose name is not UTF-8")

        # the raw body must be valid JSON (the escaped path)
        st, raw, _ = c.api.request("GET", "/v1/audit")
        check_eq(st, 200, "GET /v1/audit")
        entries = json.loads(raw.decode("utf-8"))["entries"]
        got = [(e["user"], e["method"], e["path"], e["status"], e["code"]) for e in entries]
        want = [
            ("alice", "POST", "/v1/nodes/%FF%C3(/drain", 403, "forbidden"),
            (None, "POST", "/v1/jobs", 401, "unauthorized"),
            ("alice", "POST", "/v1/nodes/n1/drain", 403, "forbidden"),
            ("alice", "POST", f"/v1/jobs/{job['id']}/cancel", 200, None),
            ("alice", "POST", "/v1/jobs", 201, None),
            ("admin", "POST", "/v1/tokens", 201, None),
        ]
        check_eq(got, want, "one entry per audited request, newest first")
        for e in entries:
            check_eq(e["addr"], "127.0.0.1", f"the client's address: {e}")
            check(e["time"] > 0, f"a time: {e}")
        alice_e = [e for e in entries if e["user"] == "alice"]
        check(all(e["role"] == "user" and e["token"] == made["id"] for e in alice_e),
              f"alice's role and token id: {alice_e}")
        check_eq(entries[1]["token"], None, "an unknown token has no id")
        check_eq(entries[1]["role"], None, "nor a role")

        # a revoked token's attempt names who tried
        c.api.json("DELETE", f"/v1/tokens/{made['id']}", token=alice, expect=200)
        st, doc = c.api.json("POST", "/v1/jobs", {"spec": {}}, token=alice)
        check_eq(st, 401, f"a revoked token submits: {doc}")
        top = audit(c, "?limit=2")
        check_eq([(e["user"], e["path"], e["status"]) for e in top],
                 [("alice", "/v1/jobs", 401), ("alice", f"/v1/tokens/{made['id']}", 200)],
                 "the revocation and the refused attempt after it")
        check_eq(top[0]["code"], "unauthorized", "the refusal's code")

        # only admins read it
        bob = c.user_token("bob")
        st, doc = c.api.json("GET", "/v1/audit", token=bob)
        check_eq(st, 403, f"a user reads the audit log: {doc}")
        st, doc = c.api.json("GET", "/v1/audit?since=soon")
        check_eq(st, 400, f"a bad since: {doc}")


def test_cli_filters_by_user_and_since():
    with cluster("audit-cli") as c:
        c.start_master()
        alice = c.user_token("alice")
        bob = c.user_token("bob")
        for tok in (alice, bob, alice):
            st, _ = c.api.submit({"name": "a", "command": ["/bin/true"], "tasks": {"worker": {}}}, token=tok)
            check_eq(st, 201, "submit")
        r = c.cli("audit", "--user", "alice", "--since", "1d", "--output", "json", check_rc=0)
        entries = json.loads(r.stdout)["entries"]
        check_eq([(e["user"], e["path"], e["status"]) for e in entries],
                 [("alice", "/v1/jobs", 201)] * 2, "yard audit --user alice --since 1d")
        table = c.cli("audit", "--user", "bob", check_rc=0).stdout.decode().splitlines()
        check("TIME" in table[0] and "ADDRESS" in table[0] and "STATUS" in table[0], f"header: {table}")
        check_eq(len(table), 2, f"one row for bob: {table}")
        check("bob" in table[1] and "POST /v1/jobs" in table[1] and "201" in table[1], f"bob's row: {table}")
        r = c.cli("audit", "--limit", "1", "--output", "json", check_rc=0)
        check_eq(len(json.loads(r.stdout)["entries"]), 1, "--limit 1")

        # --since leaves out what is older
        time.sleep(3)
        st, _ = c.api.submit({"name": "b", "command": ["/bin/true"], "tasks": {"worker": {}}}, token=bob)
        check_eq(st, 201, "a later submit")
        r = c.cli("audit", "--since", "2s", "--output", "json", check_rc=0)
        recent = json.loads(r.stdout)["entries"]
        check_eq([(e["user"], e["status"]) for e in recent], [("bob", 201)], "yard audit --since 2s")
        r = c.cli("audit", "--since", "1d", "--output", "json", check_rc=0)
        check_eq(len(json.loads(r.stdout)["entries"]), 6, "--since 1d: 2 token creations, 4 submits")
        r = c.cli("audit", "--since", "yesterday", check_rc=2)
        check("--since" in r.stderr.decode(), f"a bad --since: {r.stderr!r}")
        r = c.cli("audit", token=alice, check_rc=1)
        check("admin" in r.stderr.decode() or "may not" in r.stderr.decode(), f"a user: {r.stderr!r}")
