"""Rate limits per token (yard master --rate-limit RATE[:BURST]): a burst
beyond the limit gets 429s with Retry-After and an error naming the user
and the limit, while another token is unaffected; a refused request changes
nothing; requests pass again once the bucket refills; callers without a
known token are limited by address; agents are not limited; 0 turns it off
and a bad value is refused. The bucket arithmetic itself is unit-tested
(tests/unit/master/test_ratelimit.c)."""
import json
import os
import subprocess
import time

from harness import YARD, check, check_eq, cluster, wait_until

RATE, BURST = 5, 10


def burst(api, n, token=None, path="/v1/jobs"):
    """n requests back to back; returns ([statuses], [(headers, body) of the 429s], seconds)."""
    statuses, refused = [], []
    t0 = time.monotonic()
    for _ in range(n):
        st, data, hdrs = api.request("GET", path, token=token)
        statuses.append(st)
        if st == 429:
            refused.append((hdrs, data))
    return statuses, refused, time.monotonic() - t0


def test_rate_limit_per_token():
    with cluster("ratelimit", master_args=["--rate-limit", f"{RATE}:{BURST}"]) as c:
        c.start_master()
        alice, bob = c.user_token("alice"), c.user_token("bob")

        # alice's burst: BURST pass (plus what refilled meanwhile), then 429s
        statuses, refused, dt = burst(c.api, 3 * BURST, token=alice)
        ok = statuses.count(200)
        check(BURST <= ok <= BURST + RATE * dt + 1,
              f"alice: {ok} of {3 * BURST} requests passed in {dt:.2f} s (burst {BURST}, {RATE}/s)")
        check_eq(ok + len(refused), len(statuses), f"alice's answers are 200 or 429: {statuses}")
        check(len(refused) >= BURST, f"alice got 429s: {len(refused)}")
        hdrs, data = refused[0]
        retry = {k.lower(): v for k, v in hdrs.items()}.get("retry-after")
        check(retry is not None and retry.isdigit() and int(retry) >= 1,
              f"a 429 says when to retry (Retry-After: {retry!r})")
        err = json.loads(data)["error"]
        check_eq(err["code"], "rate_limited", "the error code")
        for part in ("'alice'", f"{RATE} requests per second", f"bursts of {BURST}", "retry in"):
            check(part in err["message"], f"the message names {part!r}: {err['message']}")

        # bob's bucket is his own
        statuses, _, _ = burst(c.api, BURST, token=bob)
        check_eq(statuses, [200] * BURST, "bob's requests while alice is over her limit")

        # a refused request changes nothing: alice's job is not created
        st, data, _ = c.api.request("POST", "/v1/jobs", token=alice, body={
            "spec": {"name": "refused-submit", "command": ["/bin/true"], "tasks": {"worker": {}}}})
        check_eq(st, 429, f"alice's submit over the limit: {data[:300]!r}")
        st, doc = c.api.json("GET", "/v1/jobs", expect=200)  # as the admin
        names = [j["name"] for j in doc["jobs"]]
        check("refused-submit" not in names, f"the refused submit made no job: {names}")

        # refilled, alice passes again: one request after about 1/RATE s,
        # and the whole burst after BURST/RATE s without requests
        wait_until(lambda: c.api.request("GET", "/v1/jobs", token=alice)[0] == 200, 5,
                   "alice's first request after the refill")
        time.sleep(BURST / RATE + 0.2)
        statuses, _, _ = burst(c.api, BURST, token=alice)
        check_eq(statuses, [200] * BURST, "alice's burst after a full refill")

        # no token or an unknown one: limited by address, and said so
        statuses, refused, _ = burst(c.api, 3 * BURST, token="yard_u_" + "0" * 64)
        check(statuses.count(401) >= BURST and refused,
              f"unknown tokens: 401s then 429s: {statuses}")
        msg = json.loads(refused[0][1])["error"]["message"]
        check("without a known token from 127.0.0.1" in msg, f"the 429 says why and whose: {msg}")

        # agents are not limited (heartbeats, logs, metrics of all its tasks)
        with open(os.path.join(c.data_dir, "join-token")) as f:
            join = f.read().strip()
        st, reg = c.api.json("POST", "/v1/agents", {"name": "n1", "addr": "127.0.0.1", "cpus": 1,
                                                    "gpus": []}, token=join)
        check(st in (200, 201), f"a node registers: {st} {reg}")
        statuses = []
        for _ in range(3 * BURST):
            st, _, _ = c.api.request("POST", f"/v1/agents/{reg['id']}/status", body={"tasks": []},
                                     token=reg["token"])
            statuses.append(st)
        check_eq(statuses, [200] * (3 * BURST), "an agent's status reports beyond the burst")


def test_rate_limit_off_and_bad_values():
    with cluster("ratelimit-off", master_args=["--rate-limit", "0"]) as c:
        c.start_master()
        statuses, _, _ = burst(c.api, 300)
        check_eq(statuses, [200] * 300, "--rate-limit 0: 300 requests back to back")
    for bad in ("fast", "10:0", "-1", "5:5:5"):
        r = subprocess.run([YARD, "master", "--listen", "127.0.0.1:0", "--data-dir", "/nonexistent/never",
                            "--rate-limit", bad], capture_output=True, text=True, timeout=30)
        check(r.returncode != 0, f"--rate-limit {bad}: refused (exit {r.returncode})")
        check(f"--rate-limit '{bad}'" in r.stderr, f"the error names the flag and value: {r.stderr!r}")


def test_cli_waits_out_the_limit():
    """The CLI waits out a 429 for its Retry-After (a few times) instead of
    failing at once: with the token's bucket just emptied, `yard ls` still
    answers."""
    with cluster("ratelimit-cli", master_args=["--rate-limit", "1:2"]) as c:
        c.start_master()
        carol = c.user_token("carol")
        statuses, refused, _ = burst(c.api, 4, token=carol)
        check(refused, f"carol's bucket is empty: {statuses}")
        r = c.cli("ls", token=carol)
        check_eq(r.returncode, 0, f"yard ls right after the 429s: {r.stderr.decode()!r}")
        check(b"NAME" in r.stdout.upper(), f"yard ls printed its table: {r.stdout!r}")
