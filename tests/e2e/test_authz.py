"""Every API endpoint, one table: each route of docs/api.md (which
tests/unit/master/test_api_doc.c checks against the master's route table,
so a new route cannot be missed) is called without a token (401), with an
unknown token (401), and with a real token of a role its permission does not
admit (403). A `hook` route takes no token but a signature of its body
(docs/git.md): unsigned, it is 401 with no token, an unknown one, or even an
admin's."""
import json
import os
import re

from harness import api_routes, check, check_eq, cluster

# for each permission, a role that lacks it
DENIED_ROLE = {"read": "join", "user": "agent", "admin": "user", "agent": "user", "join": "user", "job": "agent"}


def fill(path, names):
    return re.sub(r"\{(\w+)\}", lambda m: names.get(m.group(1), "1"), path)


def test_every_route_refuses_missing_unknown_and_wrong_tokens():
    rows = [r[:3] for r in api_routes()]
    check(len(rows) >= 30, f"docs/api.md lists the routes ({len(rows)} found)")
    with cluster("authz") as c:
        secret = os.path.join(c.dir, "hook-secret")
        with open(secret, "w") as f:
            f.write("0123456789abcdef0123456789abcdef\n")
        c.master_args += ["--git-hook-secret-file", secret]
        c.start_master()
        with open(os.path.join(c.data_dir, "join-token")) as f:
            join = f.read().strip()
        st, reg = c.api.json("POST", "/v1/agents", {"name": "n1", "addr": "127.0.0.1", "cpus": 1, "gpus": []},
                             token=join)
        check(st in (200, 201), f"a node registers: {st} {reg}")
        tokens = {"join": join, "agent": reg["token"], "user": c.user_token("alice")}
        st, job = c.api.submit({"name": "j", "command": ["/bin/true"], "tasks": {"worker": {}}})
        check_eq(st, 201, f"a job exists: {job}")
        names = {"id": str(job["id"]), "name": "n1", "digest": "sha256:" + "0" * 64, "n": "1", "eid": "1"}

        checked = 0
        for method, pattern, perm in rows:
            if perm == "public":
                continue
            path = fill(pattern, names)
            body = b"{}" if method in ("POST", "PUT") else None
            for token, why in ((None, "no token"), ("yard_u_0_nosuchtoken", "an unknown token")):
                st, data, _ = c.api.request(method, path, token=token or "", raw=body,
                                            ctype="application/json")
                check_eq(st, 401, f"{method} {pattern} with {why}: {data[:200]!r}")
            if perm == "hook":
                st, data, _ = c.api.request(method, path, raw=body, ctype="application/json")
                check_eq(st, 401, f"{method} {pattern} unsigned with an admin token: {data[:200]!r}")
                checked += 1
                continue
            role = DENIED_ROLE[perm]
            st, data, _ = c.api.request(method, path, token=tokens[role], raw=body, ctype="application/json")
            check_eq(st, 403, f"{method} {pattern} ({perm}) with a {role} token: {data[:200]!r}")
            doc = json.loads(data)
            check_eq(doc["error"]["code"], "forbidden", f"{method} {pattern}: the error's code")
            checked += 1
        check(checked >= 25, f"{checked} routes checked")
        print(f"{checked} routes refuse missing, unknown and wrong-role tokens")
