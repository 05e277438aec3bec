"""Tokens (docs/security.md, Tokens): created with an expiry, listed by id
(users their own, admins all), revoked with effect on the next request,
refused with a 401 that says expired or revoked; an agent whose token is
revoked is refused and joins again; all of it survives a master restart."""
import json
import time

from harness import check, check_eq, cluster, spec, wait_until


def whoami(c, token):
    st, data, _ = c.api.request("GET", "/v1/whoami", token=token)
    return st, json.loads(data) if data else None


def ls(c, token):
    r = c.cli("token", "ls", "--output", "json", token=token, check_rc=0)
    return json.loads(r.stdout)["tokens"]


def test_create_expire_list_revoke():
    with cluster("tokens") as c:
        c.start_master()
        # the CLI takes durations; the token works and does not expire soon
        r = c.cli("token", "create", "--user", "alice", "--team", "vision", "--expires", "30d",
                  "--output", "json", check_rc=0)
        made = json.loads(r.stdout)
        alice = made["token"]
        check_eq(len(made["id"]), 12, f"a token's id is 12 hex digits: {made}")
        check(made["id"] not in alice, "the id is not part of the token's text")
        left = made["expires_at"] - made["created_at"]
        check(abs(left - 30 * 86400 * 10**6) < 60 * 10**6, f"--expires 30d: {left} us")
        check_eq(whoami(c, alice)[0], 200, "alice's fresh token")
        # the id does not authenticate
        st, doc = whoami(c, made["id"])
        check_eq(st, 401, f"the id as a token: {doc}")

        # a 2 s token, through the API in seconds: a real 401 that says expired
        st, short = c.api.json("POST", "/v1/tokens", {"user": "bob", "expires": 2}, expect=201)
        check_eq(whoami(c, short["token"])[0], 200, "bob's token before it expires")
        st, doc = wait_until(lambda: (lambda r: r if r[0] != 200 else None)(whoami(c, short["token"])),
                             15, "bob's 2 s token to expire", interval=0.2)
        check_eq(st, 401, f"an expired token: {doc}")
        msg = doc["error"]["message"]
        check("expired at 20" in msg and short["id"] in msg, f"the 401 says it expired, and when: {msg}")
        # bad expiries are refused
        for bad in (0, -5, "soon", "0s"):
            st, doc = c.api.json("POST", "/v1/tokens", {"user": "bob", "expires": bad})
            check_eq(st, 400, f"expires {bad!r}: {doc}")
            check_eq(doc["error"]["field"], "expires", "the bad field")

        # listings: a user sees only their own; an admin all, with dates
        alice2 = c.user_token("alice")
        mine = ls(c, alice)
        check_eq(sorted(t["user"] for t in mine), ["alice", "alice"], f"alice's listing: {mine}")
        check(all("token" not in t for t in mine), "a listing never shows a token's text")
        everyone = ls(c, c.admin_token)
        users = sorted(t["user"] for t in everyone)
        for u in ("admin", "alice", "bob", "join"):
            check(u in users, f"the admin's listing has {u}'s token: {users}")
        row = next(t for t in everyone if t["id"] == made["id"])
        check_eq(row["team"], "vision", "team in the listing")
        check(row["last_used"] and row["last_used"] >= row["created_at"], f"last used is kept: {row}")
        table = c.cli("token", "ls", token=c.admin_token, check_rc=0).stdout.decode()
        for col in ("ID", "USER", "TEAM", "ROLE", "CREATED", "LAST USED", "EXPIRES", "STATE"):
            check(col in table.splitlines()[0], f"'{col}' in the table's header: {table}")
        check(made["id"] in table and "expired" in table and "never" in table, f"the table: {table}")

        # a user cannot revoke someone else's token (it is not theirs to see)
        st, doc = c.api.json("DELETE", f"/v1/tokens/{short['id']}", token=alice)
        check_eq(st, 404, f"alice revokes bob's token: {doc}")
        # revoking one's own: the very next request is refused, saying so
        r = c.cli("token", "revoke", made["id"], token=alice2, check_rc=0)
        check(made["id"] in r.stdout.decode(), f"revoke says which: {r.stdout!r}")
        st, doc = whoami(c, alice)
        check_eq(st, 401, f"a revoked token: {doc}")
        check("was revoked at 20" in doc["error"]["message"], f"the 401 says revoked: {doc}")
        check_eq(whoami(c, alice2)[0], 200, "alice's other token still works")
        r = c.cli("token", "ls", token=alice, check_rc=1)
        check("revoked" in r.stderr.decode(), f"the CLI shows the refusal: {r.stderr!r}")


def test_revoked_agent_is_refused_and_joins_again():
    with cluster("tokens-agent") as c:
        c.start_master()
        c.start_agent("n1")
        agents = [t for t in ls(c, c.admin_token) if t["role"] == "agent" and t["user"] == "n1"]
        check_eq(len(agents), 1, f"n1's agent token: {agents}")
        old = agents[0]["id"]
        # users may not revoke an agent's token; admins may
        st, doc = c.api.json("DELETE", f"/v1/tokens/{old}", token=c.user_token("alice"))
        check_eq(st, 404, f"a user revokes n1's token: {doc}")
        c.cli("token", "revoke", old, check_rc=0)

        # the master refuses n1's next request; the agent joins again with the
        # join token and gets a new agent token
        def rejoined():
            toks = [t for t in ls(c, c.admin_token) if t["role"] == "agent" and t["user"] == "n1"]
            fresh = [t for t in toks if t["id"] != old and not t["revoked_at"]]
            return fresh or None
        fresh = wait_until(rejoined, 60, "n1 to join again with a new token", interval=0.3)
        check_eq(len(fresh), 1, f"one new token for n1: {fresh}")
        # the refusal is clear in the agent's log: which node, and why
        log = c.agents["n1"].logpath
        text = wait_until(lambda: (lambda t: t if "refused node 'n1'" in t else None)(open(log).read()),
                          10, "the agent to log the refusal", interval=0.2)
        check(f"token '{old}' (user 'n1') was revoked" in text, f"the agent says why: {text[-2000:]}")
        # it registered again, with the join token
        st, doc = c.api.json("GET", "/v1/audit", expect=200)
        joins = [e for e in doc["entries"] if e["path"] == "/v1/agents" and e["status"] == 200]
        check_eq(len(joins), 2, f"n1 registered twice: {joins}")
        check(all(e["role"] == "join" for e in joins), f"with the join token: {joins}")
        # and it works again: a job runs on it
        st, job = c.api.submit(spec(["/bin/true"]))
        check_eq(st, 201, f"submit: {job}")
        j = c.api.wait_job(job["id"], timeout=60)
        check_eq(j["state"], "succeeded", f"a job on the re-joined node: {j}")


def test_tokens_survive_restart():
    with cluster("tokens-restart") as c:
        c.start_master()
        keep = c.user_token("alice")
        st, gone = c.api.json("POST", "/v1/tokens", {"user": "alice"}, expect=201)
        st, soon = c.api.json("POST", "/v1/tokens", {"user": "bob", "expires": "4s"}, expect=201)
        st, never = c.api.json("POST", "/v1/tokens", {"user": "carol", "expires": "30d"}, expect=201)
        check_eq(whoami(c, gone["token"])[0], 200, "the token to revoke, used once")
        before = {t["id"]: t for t in ls(c, c.admin_token)}
        c.cli("token", "revoke", gone["id"], token=keep, check_rc=0)
        revoked = {t["id"]: t for t in ls(c, c.admin_token)}[gone["id"]]
        check(revoked["revoked_at"], f"revoked: {revoked}")
        gone_id = gone["id"]
        gone = gone["token"]

        c.master.stop()
        c.start_master()
        after = {t["id"]: t for t in ls(c, c.admin_token)}
        check_eq(sorted(after), sorted(before), "the same tokens after a restart")
        check_eq(after[gone_id]["revoked_at"], revoked["revoked_at"], "revocation time kept")
        check_eq(after[never["id"]]["expires_at"], never["expires_at"], "expiry kept")
        check_eq(after[never["id"]]["created_at"], never["created_at"], "creation time kept")
        st, doc = whoami(c, gone)
        check_eq(st, 401, f"the revoked token after a restart: {doc}")
        check("revoked" in doc["error"]["message"], f"says revoked: {doc}")
        check_eq(whoami(c, keep)[0], 200, "the kept token after a restart")
        check_eq(whoami(c, never["token"])[0], 200, "the 30d token after a restart")
        st, doc = wait_until(lambda: (lambda r: r if r[0] != 200 else None)(whoami(c, soon["token"])),
                             20, "bob's 4 s token to expire after the restart", interval=0.2)
        check_eq(st, 401, f"expired after a restart: {doc}")
        check("expired" in doc["error"]["message"], f"says expired: {doc}")
