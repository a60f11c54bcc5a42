#!/bin/bash
# Fairness on the GPU: a quiet client's 4 KiB H2D + await alone and beside a client that
# floods launches (empty kernels, pipelined), for each daemon configuration given (one
# quoted string of sseqd options each; default: the defaults, one with
# --client-inflight-limit 1024, one with --submit-threads 0). Also the flood's own
# launch rate beside the quiet client, so a cap that starves the flood shows.
# Usage: bench/fairness.sh BUILD_DIR [OPTIONS...]
set -uo pipefail
B=${1:?usage: fairness.sh BUILD_DIR [OPTIONS...]}
shift
[ $# -gt 0 ] || set -- "" "--client-inflight-limit 1024" "--submit-threads 0"
name=fairness
. "$(dirname "$0")/procs.sh"

for opts in "$@"; do
	# shellcheck disable=SC2086 # options, one word each
	daemon $opts
	say "fairness options=\"$opts\" idle: $(SSEQ_SOCKET=$sock "$B/bench/bench-client" latency 2000)"
	SSEQ_SOCKET=$sock SSEQ_BENCH_GO= "$B/bench/bench-client" burst 400000 0 >"$tmp/flood.out" 2>&1 &
	fpid=$!
	sleep 0.3
	lat=$(SSEQ_SOCKET=$sock "$B/bench/bench-client" latency 2000)
	wait "$fpid"
	say "fairness options=\"$opts\" beside the launch flood: $lat flood: $(grep -o 'kernels_per_s=[0-9]*' "$tmp/flood.out")"
	daemon_stop
done
