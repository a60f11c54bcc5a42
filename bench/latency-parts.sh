#!/bin/bash
# Where a lone 4 KiB H2D + await spends its time (bench/latency-parts.py): one daemon with
# --device-timeline on, `bench-client latency N` with its stamps, the daemon's timeline
# through `sseqctl trace --chrome` (its times from the daemon's start on CLOCK_MONOTONIC,
# `sseqctl --json status`'s started_monotonic_ns), joined by tag; then the same client against a daemon
# with the timeline as observed (what the device timeline's events cost the round trip),
# and bench-native's figure in the same run. Writes under $OUT.
# Usage: bench/latency-parts.sh BUILD_DIR [ROUNDS]   (default 2000; the timeline keeps 4096)
set -uo pipefail
B=${1:?usage: latency-parts.sh BUILD_DIR [ROUNDS]}
n=${2:-2000}
name=latency-parts
. "$(dirname "$0")/procs.sh"
here=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}

for run in 1 2; do
	daemon --device-timeline on
	line=$(SSEQ_SOCKET=$sock SSEQ_BENCH_STAMPS=$tmp/stamps "$B/bench/bench-client" latency "$n" 2>&1 | tail -1)
	"$B/client/ctl/sseqctl" --socket "$sock" trace --chrome "$tmp/trace.json" >/dev/null 2>&1
	origin=$("$B/client/ctl/sseqctl" --socket "$sock" --json status |
		"$PY" -c 'import json, sys; print(json.load(sys.stdin)["daemon"]["started_monotonic_ns"])')
	daemon_stop
	cp "$tmp/stamps" "$O/latency-parts-stamps-$run.txt"
	cp "$tmp/trace.json" "$O/latency-parts-trace-$run.json"
	say "run=$run device_timeline=on $line"
	say "run=$run $("$PY" "$here/latency-parts.py" "$tmp/stamps" "$tmp/trace.json" "$origin" parts)"
	daemon
	say "run=$run device_timeline=off $(SSEQ_SOCKET=$sock "$B/bench/bench-client" latency "$n" 2>&1 | tail -1)"
	daemon_stop
	[ -x "$B/bench/bench-native" ] && say "run=$run $("$B/bench/bench-native" latency "$n" 2>&1 | tail -1)"
done
