#!/usr/bin/env bash
# make fuzz (and the fuzz step of make test): builds the libFuzzer targets
# with clang (ASan+UBSan, every library instrumented for coverage) in
# build-fuzz, once, and runs each for FUZZ_SECONDS (default 60) on a copy of
# its corpus in tests/fuzz/corpus/TARGET (new inputs stay in the copy,
# under build-fuzz/corpus; findings are written to build-fuzz/findings),
# FUZZ_JOBS (default 2) targets at a time. Before it fuzzes, each target
# runs every committed input of its corpus once, by name, so that each
# finding ever committed there is replayed deterministically as a
# regression test (FUZZ_SECONDS=0: only that). Prints one line a target:
#   fuzz: TARGET: K inputs replayed, 60 s, N runs (R/s), no finding
#   fuzz: TARGET: a finding: INPUT (log LOG)
# and exits non-zero when any target had a finding (or the build failed).
# Arguments: the targets to run (default all).
set -uo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${FUZZ_SECONDS:-60}
JOBS=${FUZZ_JOBS:-2}
BUILD=${FUZZ_BUILD:-build-fuzz}
TARGETS=(api http spec trace pollux manifest metricparse docker_demux static_path conf backup wsframe)
[ $# -gt 0 ] && TARGETS=("$@")
if ! command -v clang >/dev/null 2>&1; then
	echo "fuzz: clang is missing (make deps installs it)" >&2
	exit 1
fi
if [ ! -f "$BUILD/build.ninja" ]; then
	CC=clang meson setup "$BUILD" -Db_sanitize=address,undefined -Db_lundef=false \
		-Dc_args=-fsanitize=fuzzer-no-link >/dev/null || exit 1
elif ! grep -q fuzzer-no-link "$BUILD/meson-info/intro-buildoptions.json" 2>/dev/null; then
	# a build-fuzz from before the libraries were instrumented
	meson configure "$BUILD" -Dc_args=-fsanitize=fuzzer-no-link >/dev/null || exit 1
fi
if ! ninja -C "$BUILD" $(printf 'tests/fuzz/fuzz_%s ' "${TARGETS[@]}") >"$BUILD/fuzz-build.log" 2>&1; then
	echo "fuzz: the build failed (see $BUILD/fuzz-build.log):" >&2
	grep -m10 -E "error|FAILED" "$BUILD/fuzz-build.log" >&2
	exit 1
fi
mkdir -p "$BUILD/findings" "$BUILD/tmp"
# fuzz_api's and fuzz_http's master keeps its data dir here (left behind only by a finding)
export TMPDIR="$PWD/$BUILD/tmp"
# undefined behaviour is a finding too, not a line in the log
export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1

# one target: its line on stdout, status 0 or 1 (a finding)
run_one() {
	local t=$1 corpus="$BUILD/corpus/$1" log="$BUILD/findings/$1.log" runs rate input
	local seeds=(tests/fuzz/corpus/"$t"/*)
	if [ ! -f "${seeds[0]}" ]; then
		echo "fuzz: $t: a finding: tests/fuzz/corpus/$t has no inputs to replay"
		return 1
	fi
	if ! "$BUILD/tests/fuzz/fuzz_$t" -runs=1 "${seeds[@]}" >"$log" 2>&1; then
		echo "fuzz: $t: a finding: a committed input fails again (log $log)"
		grep -a -m1 -E "^Running: " "$log" | sed "s/^/fuzz: $t:   /"
		grep -a -m5 -E "ERROR|SUMMARY|fuzz_(api|http):" "$log" | sed "s/^/fuzz: $t:   /"
		return 1
	fi
	if [ "$SECONDS_EACH" = 0 ]; then
		echo "fuzz: $t: ${#seeds[@]} inputs replayed, no finding"
		return 0
	fi
	mkdir -p "$corpus"
	cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
	if ! "$BUILD/tests/fuzz/fuzz_$t" "$corpus" -max_total_time="$SECONDS_EACH" -max_len=65536 \
		-timeout=30 -artifact_prefix="$BUILD/findings/$t-" -print_final_stats=1 >"$log" 2>&1; then
		input=$(grep -a -m1 -oE "Test unit written to [^ ]+" "$log" | sed 's/Test unit written to //')
		echo "fuzz: $t: a finding: ${input:-(no input written)} (log $log)"
		grep -a -m5 -E "ERROR|SUMMARY|fuzz_(api|http):" "$log" | sed "s/^/fuzz: $t:   /"
		return 1
	fi
	runs=$(grep -a -m1 -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$")
	rate=$(grep -a -m1 -oE "stat::average_exec_per_sec: *[0-9]+" "$log" | grep -oE "[0-9]+$")
	echo "fuzz: $t: ${#seeds[@]} inputs replayed, ${SECONDS_EACH} s, ${runs:-?} runs (${rate:-?}/s), no finding"
}

failed=0
running=0
for t in "${TARGETS[@]}"; do
	if [ "$running" -ge "$JOBS" ]; then
		wait -n || failed=1
		running=$((running - 1))
	fi
	run_one "$t" &
	running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
	wait -n || failed=1
	running=$((running - 1))
done
exit "$failed"
