#!/usr/bin/env bash
# make fuzz: builds the libFuzzer targets with clang (ASan+UBSan) in
# build-fuzz and runs each for FUZZ_SECONDS (default 60) on a copy of its
# corpus in tests/fuzz/corpus/TARGET (new inputs stay in the copy, under
# build-fuzz/corpus; crashes are written to build-fuzz/findings). Exits
# non-zero at the first finding, naming the target and the input.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_EACH=${FUZZ_SECONDS:-60}
BUILD=${FUZZ_BUILD:-build-fuzz}
TARGETS=(spec trace manifest metricparse docker_demux static_path)
if [ ! -f "$BUILD/build.ninja" ]; then
	CC=clang meson setup "$BUILD" -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
ninja -C "$BUILD" $(printf 'tests/fuzz/fuzz_%s ' "${TARGETS[@]}") >/dev/null
mkdir -p "$BUILD/findings"
for t in "${TARGETS[@]}"; do
	corpus="$BUILD/corpus/$t"
	mkdir -p "$corpus"
	cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
	log="$BUILD/findings/$t.log"
	if ! "$BUILD/tests/fuzz/fuzz_$t" "$corpus" -max_total_time="$SECONDS_EACH" -max_len=65536 \
		-artifact_prefix="$BUILD/findings/$t-" -print_final_stats=1 >"$log" 2>&1; then
		echo "fuzz: $t: a finding (see $log):" >&2
		grep -m5 -E "ERROR|SUMMARY|Test unit written" "$log" >&2 || tail -20 "$log" >&2
		exit 1
	fi
	runs=$(grep -m1 -oE "stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" || echo "?")
	echo "fuzz: $t: ${SECONDS_EACH} s, $runs runs, no finding"
done
