#!/usr/bin/env python3
"""Data staging throughput (docs/datasets.md), in one run, over loopback:

  push      a dataset of --files files, --size bytes in all (random bytes),
            pushed with `yard data push` (8 chunks PUT at once), beside one
            curl process PUTting the same chunks, 8 in parallel, to a
            second master that holds none of them.
  yard://   that dataset staged by an agent into its
            empty node cache for a job that names it: every chunk fetched
            from the master (GET /v1/blobs), verified, assembled.
  s3://     the same files as objects in s3rver (tests/e2e/s3, `make
            s3rver`), staged by another agent: ListObjectsV2, every object
            fetched with SigV4, sizes and MD5 ETags verified.
  curl      beside each, a plain parallel copy of the same bytes over the
            same loopback: one curl process, --parallel-max 8, every chunk
            from the master's GET /v1/blobs, every object from s3rver's GET
            (with --aws-sigv4), written to files and nothing verified.
            s3rver is warmed first by one untimed pass of those GETs, so
            that neither side pays for a cold server.

Staging time is the master's started_at (the job placed) -> running_at (the
agent reported its task running: staging done, then the process started,
which costs about a millisecond). Each agent has its own work dir, so each
staging starts from an empty cache; a second job on the same node then
shows the cache hit. Run by hand as root; prints numbers, asserts nothing.

usage: bench/staging.py [--yard build/yard] [--size 2GiB] [--files 10000]
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))


def parse_size(s):
    m = re.fullmatch(r"(\d+)(KiB|MiB|GiB)?", s)
    if not m:
        raise SystemExit(f"--size {s!r}: expected N, NKiB, NMiB or NGiB")
    return int(m.group(1)) * {None: 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)]


def make_files(root, total, nfiles):
    """nfiles files of random bytes in 100 directories, sizes summing to total."""
    base, extra = divmod(total, nfiles)
    names = []
    for i in range(nfiles):
        d = os.path.join(root, f"d{i % 100:02d}")
        os.makedirs(d, exist_ok=True)
        name = f"d{i % 100:02d}/f{i:05d}.bin"
        with open(os.path.join(root, name), "wb") as f:
            f.write(os.urandom(base + (1 if i < extra else 0)))
        names.append(name)
    return names


def settle():
    """Every dirty page written out before a timed step, so that no step pays
    for the writeback of the one before."""
    os.sync()
    time.sleep(1)


def curl_timed(config, extra):
    """One curl process running config (a curlrc's lines: its transfers), 8
    transfers at a time, after settle(); seconds."""
    cfg = tempfile.NamedTemporaryFile("w", suffix=".curlrc", delete=False)
    cfg.write(config)
    cfg.close()
    settle()
    t0 = time.monotonic()
    subprocess.run(["curl", "-sSf", "--no-progress-meter", "--parallel", "--parallel-max", "8", *extra,
                    "-K", cfg.name], check=True)
    dt = time.monotonic() - t0
    os.unlink(cfg.name)
    return dt


def curl_parallel(pairs, extra):
    """Every (url, path) pair fetched; seconds."""
    return curl_timed("".join(f'url = "{url}"\noutput = "{path}"\n' for url, path in pairs),
                      ["--create-dirs", *extra])


# curl's SigV4 GETs from s3rver
S3_CURL = ["--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "S3RVER:S3RVER", "-H",
           "x-amz-content-sha256: UNSIGNED-PAYLOAD"]

CHUNK = 8 << 20  # DATASET_CHUNK_MAX: yard cuts files at 8 MiB


def chunk_pieces(root, names, tmp):
    """(digest, path) of every chunk of the files as yard cuts them: a
    file's own path when it is one chunk, else its pieces written to tmp."""
    out = []
    for n in names:
        path = os.path.join(root, n)
        with open(path, "rb") as f:
            data = f.read()
        if len(data) <= CHUNK:
            out.append(("sha256:" + hashlib.sha256(data).hexdigest(), path))
            continue
        for off in range(0, len(data), CHUNK):
            piece = data[off:off + CHUNK]
            digest = "sha256:" + hashlib.sha256(piece).hexdigest()
            p = os.path.join(tmp, digest[7:])
            with open(p, "wb") as f:
                f.write(piece)
            out.append((digest, p))
    return out


def curl_put(url, token, pieces):
    """Every (digest, path) chunk PUT to the master's /v1/blobs; seconds."""
    return curl_timed("".join(f'upload-file = "{path}"\nurl = "{url}/v1/blobs/{digest}"\noutput = "/dev/null"\n'
                              for digest, path in pieces),
                      ["-H", f"Authorization: Bearer {token}", "-H", "Content-Type: application/octet-stream"])


def s3_put_all(url, bucket, root, names):
    """Every file as an object, through one curl process (8 in parallel)."""
    cfg = tempfile.NamedTemporaryFile("w", suffix=".curlrc", delete=False)
    for n in names:
        cfg.write(f'upload-file = "{os.path.join(root, n)}"\nurl = "{url}/{bucket}/data/{n}"\n')
    cfg.close()
    subprocess.run(["curl", "-sSf", "--no-progress-meter", "--parallel", "--parallel-max", "8", "--aws-sigv4", "aws:amz:us-east-1:s3",
                    "--user", "S3RVER:S3RVER", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-o", "/dev/null",
                    "-K", cfg.name], check=True)
    os.unlink(cfg.name)


def stage_job(c, name, pool, source):
    settle()
    st, job = c.api.submit({"name": name, "command": ["/bin/true"], "pool": pool,
                            "tasks": {"worker": {"replicas": 1, "gpus": 0, "cpus": 0.1}},
                            "data": [{"source": source, "mount": "d"}]})
    if st != 201:
        raise SystemExit(f"submit {name}: HTTP {st}: {job}")
    doc = c.api.wait_job(job["id"], timeout=3600)
    if doc["state"] != "succeeded":
        raise SystemExit(f"job {name}: {doc['state']}: {doc.get('reason')}")
    return (doc["running_at"] - doc["started_at"]) / 1e6


def rate(nbytes, secs):
    return f"{secs:8.2f} s  {nbytes / secs / (1 << 20):8.1f} MiB/s"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--yard", default=os.path.join(ROOT, "build", "yard"))
    ap.add_argument("--size", default="2GiB")
    ap.add_argument("--files", type=int, default=10000)
    args = ap.parse_args()
    os.environ["YARD"] = os.path.abspath(args.yard)
    import harness
    from test_staging import BUCKET, S3rver, s3_args

    total = parse_size(args.size)
    # the rate limit off on both masters (printed): 10,000 PUTs in seconds
    # are what it is there to stop
    print("both masters run with --rate-limit 0 (off)", flush=True)
    with harness.cluster("bench-staging", master_args=["--rate-limit", "0"]) as c:
        src = os.path.join(c.dir, "src")
        t0 = time.monotonic()
        names = make_files(src, total, args.files)
        print(f"dataset: {args.files} files, {total / (1 << 20):.0f} MiB of random bytes "
              f"(made in {time.monotonic() - t0:.1f} s)", flush=True)
        c.start_master()
        settle()
        t0 = time.monotonic()
        push = json.loads(c.cli("data", "push", src, "bench", "--output", "json", check_rc=0,
                                timeout=7200).stdout)
        t_push = time.monotonic() - t0
        print(f"yard data push: {push['files']} files, {push['chunks']} chunks, {rate(total, t_push)}", flush=True)
        with harness.cluster("bench-staging-put", master_args=["--rate-limit", "0"]) as c2:
            c2.start_master()
            pieces_dir = os.path.join(c2.dir, "pieces")
            os.makedirs(pieces_dir)
            pieces = chunk_pieces(src, names, pieces_dir)
            t_put = curl_put(c2.url, c2.admin_token, pieces)
        print(f"curl, 8 parallel PUTs of the {len(pieces)} chunks: {rate(total, t_put)}", flush=True)

        s3 = S3rver(c.dir)
        try:
            t0 = time.monotonic()
            s3_put_all(s3.url, BUCKET, src, names)
            print(f"s3rver: {len(names)} objects put with curl in {time.monotonic() - t0:.1f} s", flush=True)
            # a cold s3rver serves slower than a warm one, and whichever side
            # went first paid for it (yard's staging, ahead of the peer's
            # GETs: 15.2 s against 10.5 with yard first; 5.9 against 7.0
            # with the peer first, on 1 GiB in 5,000 files): one untimed
            # pass of the peer's GETs warms it for both
            warm = os.path.join(c.dir, "curl-s3-warm")
            curl_parallel([(f"{s3.url}/{BUCKET}/data/{n}", os.path.join(warm, n)) for n in names], S3_CURL)
            shutil.rmtree(warm)
            c.start_agent("from-master", gpus="none", extra=["--pool", "m", "--cache-size", "64GiB"])
            c.start_agent("from-s3", gpus="none",
                          extra=["--pool", "s", "--cache-size", "64GiB", *s3_args(c, s3.url)])

            t_yard = stage_job(c, "yard1", "m", "yard://bench@1")
            t_yard2 = stage_job(c, "yard2", "m", "yard://bench@1")
            t_s3 = stage_job(c, "s3-1", "s", f"s3://{BUCKET}/data")
            t_s32 = stage_job(c, "s3-2", "s", f"s3://{BUCKET}/data")

            # the plain copies: every chunk from the master, every object from s3rver
            st, ver = c.api.json("GET", "/v1/datasets/bench/1", expect=200)
            chunks = [ch for f in ver["manifest"]["files"] for ch in f["chunks"]]
            out = os.path.join(c.dir, "curl-master")
            t_cm = curl_parallel([(f"{c.url}/v1/blobs/{ch}", os.path.join(out, ch[7:])) for ch in chunks],
                                 ["-H", f"Authorization: Bearer {c.admin_token}"])
            out = os.path.join(c.dir, "curl-s3")
            t_cs = curl_parallel([(f"{s3.url}/{BUCKET}/data/{n}", os.path.join(out, n)) for n in names], S3_CURL)
        finally:
            s3.stop()

    print()
    print(f"{'':46}{'time':>10}  {'throughput':>13}")
    print(f"yard data push (8 chunks at once)               {rate(total, t_push)}   "
          f"{t_put / t_push:.2f}x the peer")
    print(f"  curl, 8 parallel PUTs of the same chunks      {rate(total, t_put)}")
    print(f"yard:// staged from the master (empty cache)    {rate(total, t_yard)}")
    print(f"  curl, 8 parallel GETs of the same chunks      {rate(total, t_cm)}   "
          f"(yard: {t_cm / t_yard:.2f}x the peer)")
    print(f"  the same job again on that node (cache hit)   {t_yard2:8.3f} s")
    print(f"s3:// staged from s3rver (empty cache)          {rate(total, t_s3)}")
    print(f"  curl, 8 parallel SigV4 GETs of the objects    {rate(total, t_cs)}   "
          f"(yard: {t_cs / t_s3:.2f}x the peer)")
    print(f"  the same job again on that node (cache hit)   {t_s32:8.3f} s")


if __name__ == "__main__":
    main()
