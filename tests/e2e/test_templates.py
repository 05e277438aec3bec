"""Job templates on a real master and agent (docs/pipelines.md,
"Templates"): a template runs again on each new version of its dataset, as
its owner, reading that version; an unchanged push runs nothing; it is kept
across a master restart, seen only by its owner's team and admins, refused
with the field named, and once deleted runs no more."""
import os

from harness import check, check_eq, cluster, spec, wait_until

SH = "/bin/sh"
READ = 'echo "v$YARD_PARAM_DATASET_VERSION of $YARD_PARAM_TEMPLATE: $(cat "$YARD_DATA_DIR/digits/rows.txt")"'


def push(c, d, rows, token):
    with open(os.path.join(d, "rows.txt"), "w") as f:
        f.write(rows)
    c.cli("data", "push", d, "digits", token=token, check_rc=0)


def template(c, name, token, **extra):
    body = {"name": name, "on_dataset": "digits",
            "spec": spec([SH, "-c", READ], name="ignored", data=[{"source": "yard://digits"}])}
    body.update(extra)
    return c.api.json("POST", "/v1/templates", body, token=token)


def runs(c, name, token):
    return c.api.json("GET", f"/v1/templates/{name}", token=token, expect=200)[1]["runs"]


def test_template_runs_on_each_new_version():
    with cluster("templates") as c:
        c.start_master()
        c.start_agent("n1", gpus="sim:2")
        alice = c.user_token("alice", team="vision")
        bob = c.user_token("bob", team="nlp")
        d = os.path.join(c.dir, "digits")
        os.makedirs(d)
        push(c, d, "10 rows\n", alice)

        # refusals name the field
        st, doc = template(c, "retrain", alice, spec=spec([SH, "-c", "true"], name="x"))
        check_eq((st, doc["error"].get("field")), (400, "data"), f"a spec that does not read the dataset: {doc}")
        st, doc = template(c, "retrain", bob)
        check_eq((st, doc["error"].get("field")), (400, "on_dataset"), f"bob's template on alice's dataset: {doc}")
        st, doc = template(c, "Bad Name", alice)
        check_eq((st, doc["error"].get("field")), (400, "name"), f"a bad name: {doc}")

        r = c.cli("template", "create", "retrain", "--on-dataset", "digits",
                  os.path.join(c.dir, "t.yaml"), token=alice, check_rc=None)
        check(r.returncode != 0, "a missing spec file is refused")
        with open(os.path.join(c.dir, "t.yaml"), "w") as f:
            f.write('name: t\ncommand: ["/bin/sh", "-c", %r]\ntasks: {worker: {cpus: 0.1}}\n'
                    'data: [{source: "yard://digits"}]\n' % READ)
        c.cli("template", "create", "retrain", os.path.join(c.dir, "t.yaml"), "--on-dataset", "digits",
              token=alice, check_rc=0)
        check_eq(runs(c, "retrain", alice), [], "making a template runs nothing")
        st, doc = template(c, "retrain", alice)
        check_eq(st, 409, f"a second template of the name: {doc}")

        # a new version runs it, reading that version, as alice
        push(c, d, "20 rows\n", alice)
        got = wait_until(lambda: runs(c, "retrain", alice) or None, 30, "the run of digits@2")
        check_eq([(r["version"], "job" in r) for r in got], [(2, True)], f"one run, for version 2: {got}")
        j = c.api.wait_job(got[0]["job"])
        check_eq((j["state"], j["name"], j["user"], j["team"]), ("succeeded", "retrain-v2", "alice", "vision"),
                 f"the run: {j}")
        check_eq(c.api.log(j["id"]), b"v2 of retrain: 20 rows\n", "it read version 2")
        # an unchanged push makes no version and no run
        push(c, d, "20 rows\n", alice)
        check_eq(len(runs(c, "retrain", alice)), 1, "an unchanged push runs nothing")

        # others of another team neither see nor delete it
        st, _ = c.api.json("GET", "/v1/templates/retrain", token=bob)
        check_eq(st, 404, "bob reads alice's template")
        check_eq(c.api.json("GET", "/v1/templates", token=bob, expect=200)[1]["templates"], [],
                 "bob's listing")
        st, _ = c.api.json("DELETE", "/v1/templates/retrain", token=bob)
        check_eq(st, 404, "bob deletes alice's template")

        # kept across a restart: the next version runs it again
        c.master.stop()
        c.start_master()
        push(c, d, "30 rows\n", alice)
        got = wait_until(lambda: (lambda r: r if len(r) == 2 else None)(runs(c, "retrain", alice)), 30,
                         "the run of digits@3 after a restart")
        check("job" in got[1], f"the run after a restart was made: {got}")
        j = c.api.wait_job(got[1]["job"])
        check_eq(c.api.log(j["id"]), b"v3 of retrain: 30 rows\n", "the run after a restart read version 3")
        r = c.cli("template", "ls", token=alice, check_rc=0)
        check("retrain" in r.stdout.decode() and "dataset digits" in r.stdout.decode() and
              f"digits@3: job {j['id']}" in r.stdout.decode(),
              f"yard template ls: {r.stdout!r}")

        # deleted: no more runs; its jobs stay
        c.cli("template", "rm", "retrain", token=alice, check_rc=0)
        push(c, d, "40 rows\n", alice)
        check_eq(c.api.json("GET", "/v1/templates/retrain", token=alice)[0], 404, "the deleted template")
        check_eq(c.api.job(j["id"])["state"], "succeeded", "its runs stay")
        names = [x["name"] for x in c.api.json("GET", "/v1/jobs?limit=100", token=alice, expect=200)[1]["jobs"]]
        check("retrain-v4" not in names, f"no run after the delete: {names}")
