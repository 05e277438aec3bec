#!/usr/bin/env bash
# make demo: a local cluster (one master, two agents on loopback, each with a
# simulated GPU) in a temp dir; the pytorch-ddp-digits example trained with
# DistributedDataParallel across both agents, its logs and metrics followed
# to the end; then everything stopped again. Exits 0 only if the job
# succeeded.
set -euo pipefail
YARD=$(realpath "${1:-build/yard}")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=$(mktemp -d /tmp/yard-demo.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$DIR"
}
trap cleanup EXIT

# wait_line FILE REGEX: waits (up to 30 s) for a line in FILE, prints its match
wait_line() {
	for _ in $(seq 300); do
		if grep -Eo "$2" "$1" 2>/dev/null | head -n1 | grep .; then return 0; fi
		sleep 0.1
	done
	echo "demo: no '$2' in $1:" >&2; cat "$1" >&2; return 1
}

echo "== starting a master in $DIR"
"$YARD" master --listen 127.0.0.1:0 --data-dir "$DIR/master" >"$DIR/master.log" 2>&1 &
pids+=($!)
url=$(wait_line "$DIR/master.log" 'url=http://[^ ]+' | cut -d= -f2)
export YARD_MASTER=$url YARD_TOKEN=$(cat "$DIR/master/admin-token")
echo "   master at $url"
# Two agents on one host: their port ranges must not overlap.
ports=(30000-30999 31000-31999)
i=0
for n in node1 node2; do
	"$YARD" agent --master "$url" --name "$n" --work-dir "$DIR/$n" --gpus sim:1 \
		--advertise-addr 127.0.0.1 --ports "${ports[$i]}" \
		--join-token-file "$DIR/master/join-token" >"$DIR/$n.log" 2>&1 &
	pids+=($!)
	i=$((i + 1))
	wait_line "$DIR/$n.log" "yard agent ready name=$n" >/dev/null
	echo "   agent $n ready"
done
echo "== yard nodes"
"$YARD" nodes
# One GPU per worker: one worker on each agent.
echo "== yard submit examples/pytorch-ddp-digits/job.yaml --set tasks.worker.gpus=1 --follow"
"$YARD" submit "$ROOT/examples/pytorch-ddp-digits/job.yaml" --set tasks.worker.gpus=1 --follow
id=$("$YARD" ls --output json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["id"])')
"$YARD" wait "$id"
echo "== yard show $id"
"$YARD" show "$id"
echo "== yard metrics $id"
"$YARD" metrics "$id"
acc=$("$YARD" logs "$id" --task worker/1 | grep -Eo 'final test accuracy: [0-9.]+' | tail -n1)
echo "== worker/1: $acc"
echo "== demo finished: job $id succeeded; the API was served at $url"
