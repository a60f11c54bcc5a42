#!/bin/bash
# A long fuzzing run of each libFuzzer target (tests/fuzz), for BENCHMARKS.md: SECONDS
# each (default 1800) from the seed corpus, then executions, exec/s and coverage (cov, ft)
# per target. Builds through .ci/fuzz --build-only. Usage: bench/fuzz-long.sh [SECONDS];
# SSEQ_FUZZ_TARGETS picks targets (default both), so two runs can share a machine's cores.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-1800}
builddir=${SSEQ_FUZZ_BUILDDIR:-build-fuzz}
.ci/fuzz --build-only

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# The grown corpus stays, so a later run picks up where this one stopped.
work=$builddir/fuzz-long
mkdir -p "$work/artifacts" "$work/tmp"
export TMPDIR=$(cd "$work/tmp" && pwd) # fuzz-session's scratch, left behind by a crash
status=0
summary=()
for t in ${SSEQ_FUZZ_TARGETS:-fuzz-wire fuzz-session}; do
	seeds=tests/fuzz/corpus-${t#fuzz-}
	mkdir -p "$work/corpus-$t"
	log=$work/$t.log
	echo "== $t: ${seconds}s (log: $log)"
	if ! "$builddir/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
		-dict=tests/fuzz/sseq.dict -artifact_prefix="$work/artifacts/$t-" \
		-print_final_stats=1 "$work/corpus-$t" "$seeds" >"$log" 2>&1; then
		grep -av '^#' "$log" | tail -40 >&2
		echo "$t CRASHED: reproducer $(ls -t "$work/artifacts/$t-"* 2>/dev/null | head -1)" >&2
		status=1
	fi
	last=$(grep -a 'DONE\|pulse\|NEW' "$log" | tail -1)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	cov=$(grep -ao 'cov: [0-9]*' <<<"$last" | cut -d' ' -f2)
	ft=$(grep -ao 'ft: [0-9]*' <<<"$last" | cut -d' ' -f2)
	corp=$(grep -ao 'corp: [0-9]*/[0-9A-Za-z]*' <<<"$last" | cut -d' ' -f2)
	summary+=("$(printf '%-13s %6ss %12s %8s %7s %7s %12s' "$t" "$seconds" "${execs:-?}" \
		"${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}")")
done
printf '%-13s %7s %12s %8s %7s %7s %12s\n' target time execs exec/s cov ft corpus
printf '%s\n' "${summary[@]}"
exit $status
