#!/bin/bash
# Many processes sharing one GPU, all three ways in one run: through one sseqd (with one
# compute lane, as before lanes, and with the default lanes), natively with a context
# each, and natively under CUDA MPS, which this script starts and stops itself. Each
# process sets up (connects, or creates its context), then all start together and launch
# N one-block spin(US) kernels; the aggregate is every kernel over the span from the first
# start to the last finish. Prints one key=value line per run, writes under $OUT.
# Usage: bench/concurrency.sh BUILD_DIR [PROCS...]   (default 1 4 16)
set -uo pipefail
B=${1:?usage: concurrency.sh BUILD_DIR [PROCS...]}
shift
procs=${*:-1 4 16}
name=concurrency
. "$(dirname "$0")/procs.sh"

# A quiet client's 4 KiB H2D + await, alone and while another client floods the H2D
# direction with 256 MiB copies: with one stream per direction it queues behind them.
for opts in "--compute-streams 1 --h2d-streams 1" ""; do
	# shellcheck disable=SC2086 # options, one word each
	daemon $opts
	say "quiet-latency idle options=\"$opts\" $(SSEQ_SOCKET=$sock "$B/bench/bench-client" latency 2000)"
	SSEQ_SOCKET=$sock "$B/bench/bench-client" copy-flood 6 >"$tmp/flood.out" 2>&1 &
	fpid=$!
	for _ in $(seq 100); do grep -q 'flood ready' "$tmp/flood.out" 2>/dev/null && break; sleep 0.1; done
	sleep 0.5
	lat=$(SSEQ_SOCKET=$sock "$B/bench/bench-client" latency 2000)
	wait "$fpid"
	say "quiet-latency flooded options=\"$opts\" $lat flood: $(tail -1 "$tmp/flood.out")"
	# ... and beside a client flooding launches (empty kernels, pipelined).
	SSEQ_SOCKET=$sock SSEQ_BENCH_GO= "$B/bench/bench-client" burst 1000000 0 >"$tmp/lflood.out" 2>&1 &
	fpid=$!
	sleep 1
	lat=$(SSEQ_SOCKET=$sock "$B/bench/bench-client" latency 2000)
	kill -TERM "$fpid" 2>/dev/null; wait "$fpid"
	say "quiet-latency launch-flooded options=\"$opts\" $lat"
	daemon_stop
done
for work in "2000 50" "20000 0"; do
	read -r count us <<<"$work"
	for p in $procs; do
		daemon --compute-streams 1
		say "$(SSEQ_SOCKET=$sock together daemon-1lane "$p" "$count" "$us" "$B/bench/bench-client" burst "$count" "$us")"
		daemon_stop
		daemon
		say "$(SSEQ_SOCKET=$sock together daemon-lanes "$p" "$count" "$us" "$B/bench/bench-client" burst "$count" "$us")"
		daemon_stop
		say "$(together native "$p" "$count" "$us" "$B/bench/bench-native" burst "$img" "$count" "$us")"
	done
	# MPS: its control daemon, pipe and log directories under $tmp; quit afterwards.
	export CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log
	mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
	nvidia-cuda-mps-control -d
	for p in $procs; do
		say "$(together mps "$p" "$count" "$us" "$B/bench/bench-native" burst "$img" "$count" "$us")"
	done
	echo quit | nvidia-cuda-mps-control
	sleep 1
	unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
done
