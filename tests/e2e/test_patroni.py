"""PostgreSQL itself fails over (docs/faults.md): two masters on a store
that Patroni keeps on a primary and a synchronous replica (patroni.py),
one agent, a job running and 8 clients submitting through whichever master
leads. The primary's machine is lost (its Patroni and its PostgreSQL
SIGKILLed) in the middle of the load; Patroni promotes the replica, the
masters reconnect through their multi-host URL (target_session_attrs=
read-write), a leader serves again, and every acknowledged job is there and
runs once; the job running across it stays in its first attempt."""
import os
import time

from ha import FailoverApi, health
from harness import YARD, Proc, SubmitLoad, check, check_eq, cluster, spec, wait_until
from patroni import PatroniCluster, free_port

# run alone (run.py --jobs): it times a Patroni failover against the master's lease
SERIAL = True

COUNTER = "i=0; while [ $i -lt {n} ]; do i=$((i+1)); echo line $i; sleep {d}; done"


class RecordingApi(FailoverApi):
    """A FailoverApi that remembers when each acknowledged submission was
    sent and answered (200 or 201: SubmitLoad sends a submission again with
    its idempotency key, and one whose COMMIT's answer was lost with the
    primary is then answered with the job it made)."""

    def __init__(self, urls, token):
        super().__init__(urls, token)
        self.acks = []  # (monotonic time the request was sent, answered)

    def submit(self, spec, code=None, token=None, key=None):
        sent = time.monotonic()
        status, doc = super().submit(spec, code, token, key)
        if status in (200, 201):
            self.acks.append((sent, time.monotonic()))
        return status, doc

    def first_ack_sent_after(self, t):
        """When the first submission sent after t was acknowledged, or None."""
        return min((a for s, a in list(self.acks) if s > t), default=None)


def master_log(proc):
    with open(proc.logpath, errors="replace") as f:
        return f.read()


def test_postgres_primary_lost_under_submissions():
    # While the store is away the master's loop waits for it and answers no
    # one; an agent fences its tasks after two thirds of the node's lease
    # without an answer. So the lease is 30 s (fenced after 20 s), above
    # what the failover takes with these Patroni timings (about 12 s), as a
    # site sets it above its own (docs/faults.md).
    with PatroniCluster() as pg, cluster("patroni", lease="30s",
                                         master_args=["--store", pg.url, "--rate-limit", "0"]) as c:
        first = pg.primary()
        check(first, f"a Patroni leader before the test: {pg.cluster()}")
        replica = [n for n in pg.patroni if n != first][0]
        check_eq(pg.psql(first, "SHOW synchronous_standby_names"), [replica],
                 "the primary's synchronous standby")
        # two masters on the store: m1 leads, m2 stands by
        c.port = free_port()  # a real port, not 0: it is what the lease row advertises
        c.start_master()
        wait_until(lambda: (health(c.url) or {}).get("role") == "leader", 30, "m1 to lead")
        port2 = free_port()
        url2 = f"http://127.0.0.1:{port2}"
        m2 = Proc("master-m2", [YARD, "master", "--listen", f"127.0.0.1:{port2}", "--data-dir",
                                os.path.join(c.dir, "master-m2"), "--lease", c.lease, *c.master_args],
                  os.path.join(c.dir, "master-m2.log"), env=c.env(), ready=r"yard master ready url=")
        c.procs.append(m2)
        wait_until(lambda: (health(url2) or {}).get("role") == "standby", 30, "m2 to stand by")
        urls = [c.url, url2]
        c.url = ",".join(urls)  # the agent follows the leader
        c.start_agent("a1", gpus="sim:2")
        api = RecordingApi(urls, c.admin_token)

        st, doc = api.submit(spec(["/bin/sh", "-c", COUNTER.format(n=400, d=0.05)], name="across"))
        check_eq(st, 201, f"submit the long job: {doc}")
        long = doc["id"]
        wait_until(lambda: api.log(long).count(b"\n") >= 5, 60, "the long job to print its first lines")

        total = 240
        with SubmitLoad(api, total, clients=8) as load:
            wait_until(lambda: len(load.acked) >= 60, 60, "60 acknowledged submissions")
            check_eq(api.job(long)["state"], "running", "the long job when the primary is killed")
            pg.kill_node(first)
            killed = time.monotonic()
            at_kill = len(load.acked)
            print(f"killed the primary {first} with {at_kill} submissions acknowledged", flush=True)
            promoted = pg.wait_primary(exclude=first, timeout=60)
            took_promote = time.monotonic() - killed
            # sent once the old primary was dead: stored by the new one
            took = wait_until(lambda: api.first_ack_sent_after(killed), 60,
                              "a submission sent after the kill to be acknowledged") - killed
            load.join(120)
        acked = load.acked
        print(f"Patroni promoted {promoted} {took_promote:.2f} s after the kill; "
              f"the first submission sent after the kill was acknowledged {took:.2f} s after it", flush=True)
        check(at_kill < total, "the primary was killed in the middle of the load")
        check(len(acked) >= total, f"all {total} submissions acknowledged in the end ({len(acked)})")
        check_eq(promoted, replica, "the new primary: the former synchronous replica")
        check_eq(pg.psql(promoted, "SELECT pg_is_in_recovery()"), ["f"], "the new primary is out of recovery")
        check(c.master.alive() and m2.alive(), "both masters carried on")

        # a leader serves again, and has every acknowledged job, once
        leaders = wait_until(lambda: [u for u in urls if (health(u) or {}).get("role") == "leader"], 30,
                             "a master to lead")
        check_eq(len(leaders), 1, f"masters that lead ({leaders})")
        load.check_stored(api, "after the failover")
        stored = set(int(k) for k in pg.psql(promoted, "SELECT k FROM jobs"))
        missing = [jid for jid in acked if jid not in stored]
        check(not missing, f"every acknowledged job is in the new primary (missing: {missing[:10]})")
        for jid in acked:
            j = api.wait_job(jid, timeout=120)
            check_eq(j["state"], "succeeded", f"load job {jid} (reason {j.get('reason')})")
            check_eq(len(j["tasks"]), 1, f"tasks of load job {jid} (it ran once)")

        # the job that ran across the failover: its first attempt, its log whole
        j = api.wait_job(long, timeout=120)
        check_eq(j["state"], "succeeded", f"state of the long job (reason {j.get('reason')})")
        check_eq(j["attempt"], 0, "attempt of the long job: still its first")
        check_eq(len(j["tasks"]), 1, "tasks of the long job: it ran once")
        check_eq(api.log(long).decode(), "".join(f"line {i}\n" for i in range(1, 401)),
                 "log of the long job, byte for byte")
        check_eq(pg.psql(promoted, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'yard-master'"),
                 ["2"], "connections of the masters to the new primary")
        logs = master_log(c.master) + master_log(m2)
        check("connected again" in logs, f"a master connected to PostgreSQL again:\n{logs[-3000:]}")
        check(pg.password not in logs, "the masters' logs never show the store's password")
        with open(c.agents["a1"].logpath, errors="replace") as f:
            alog = f.read()
        check("fenc" not in alog, f"the agent fenced nothing:\n{alog[-2000:]}")
