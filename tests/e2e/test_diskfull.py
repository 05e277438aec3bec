"""Disk full on the master: its data dir is a small tmpfs made by the test.
Submissions beyond the space fail with HTTP 507 and a clear message; every
job acknowledged before stays, also across a master restart; once space
returns (the tmpfs grows), submissions succeed again."""
import os
import signal
import subprocess

from harness import check, check_eq, cluster


def submit(c, i):
    spec = {"name": f"j{i}", "command": ["/bin/true"] + ["x" * 4000] * 5, "tasks": {"worker": {"gpus": 0}},
            "placement": {"wait_for_nodes": True}}
    return c.api.submit(spec)


def test_disk_full_is_507_and_loses_nothing():
    with cluster("diskfull") as c:
        os.makedirs(c.data_dir, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", c.data_dir], check=True,
                       capture_output=True)
        try:
            c.start_master()
            acked, refused = [], None
            for i in range(2000):
                st, doc = submit(c, i)
                if st == 201:
                    acked.append(doc["id"])
                    continue
                refused = (st, doc)
                break
            check(refused is not None, "the tmpfs filled up")
            check_eq(refused[0], 507, f"a submission on a full disk: {refused[1]}")
            check_eq(refused[1]["error"]["code"], "insufficient_storage", "its code")
            check("full" in refused[1]["error"]["message"], f"the message says why: {refused[1]}")
            check(len(acked) >= 10, f"{len(acked)} jobs fitted before")
            # a few more refusals do not hurt what is stored
            for i in range(5):
                check_eq(submit(c, 10000 + i)[0], 507, "still full")
            st, doc = c.api.json("GET", f"/v1/jobs?limit=100000", expect=200)
            ids = sorted(j["id"] for j in doc["jobs"])
            check_eq(ids, sorted(acked), "every acknowledged job is there, nothing else")

            # space returns: submissions work again, and a restart keeps everything
            subprocess.run(["mount", "-o", "remount,size=64m", c.data_dir], check=True, capture_output=True)
            st, doc = submit(c, 20000)
            check_eq(st, 201, f"a submission once space is back: {doc}")
            acked.append(doc["id"])
            c.master.kill(signal.SIGKILL)
            c.master.p.wait()
            c.start_master()
            st, doc = c.api.json("GET", f"/v1/jobs?limit=100000", expect=200)
            check_eq(sorted(j["id"] for j in doc["jobs"]), sorted(acked), "after a restart: the same jobs")
        finally:
            if c.master:
                c.master.stop()
            subprocess.run(["umount", "-l", c.data_dir], capture_output=True)
