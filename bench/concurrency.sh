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
O=${OUT:-/tmp/sseq-bench}
mkdir -p "$O"
export LD_LIBRARY_PATH=$PWD/$B/lib:$PWD/$B/client/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
img=$(ls "$B"/daemon/backend/hip/sseq-kernels.* 2>/dev/null | head -1)
log=$O/concurrency.txt
say() { echo "$*" | tee -a "$log"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; echo quit | nvidia-cuda-mps-control >/dev/null 2>&1' EXIT

# P processes of "$@" (one per line of output), started together: prints the aggregate.
together() { # tag P count us cmd...
	local tag=$1 p=$2 count=$3 us=$4 i n
	shift 4
	export SSEQ_BENCH_GO=$tmp/go
	rm -f "$SSEQ_BENCH_GO" "$tmp"/out.*
	for i in $(seq "$p"); do "$@" >"$tmp/out.$i" 2>&1 & done
	for _ in $(seq 600); do
		n=$(cat "$tmp"/out.* 2>/dev/null | grep -c 'burst ready')
		[ "$n" -ge "$p" ] && break
		sleep 0.1
	done
	touch "$SSEQ_BENCH_GO"
	wait
	cat "$tmp"/out.* >>"$O/concurrency-$tag-$p.log"
	grep -h ' burst count=' "$tmp"/out.* | awk -v tag="$tag" -v p="$p" -v c="$count" -v us="$us" '
		{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		  if (!n || v["start"] < s) s = v["start"]; if (!n || v["end"] > e) e = v["end"]; n++ }
		END { printf "%s procs=%d done=%d each=%d us=%d wall_ms=%.1f aggregate_kernels_per_s=%.0f\n",
			tag, p, n, c, us, (e - s) * 1000, n * c / (e - s) }'
}

sock=$tmp/sseq.sock
daemon() { # extra sseqd options...
	rm -f "$sock"
	"$B/daemon/sseqd" --backend hip --kernels "$img" --socket "$sock" --log-level warning "$@" \
		2>>"$O/concurrency-sseqd.log" &
	dpid=$!
	for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done
}

say "date=$(date -u +%FT%TZ) host=$(hostname) gpu=\"$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)\""

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
	kill -TERM "$dpid"; wait "$dpid"
done
for work in "2000 50" "20000 0"; do
	read -r count us <<<"$work"
	for p in $procs; do
		daemon --compute-streams 1
		say "$(SSEQ_SOCKET=$sock together daemon-1lane "$p" "$count" "$us" "$B/bench/bench-client" burst "$count" "$us")"
		kill -TERM "$dpid"; wait "$dpid"
		daemon
		say "$(SSEQ_SOCKET=$sock together daemon-lanes "$p" "$count" "$us" "$B/bench/bench-client" burst "$count" "$us")"
		kill -TERM "$dpid"; wait "$dpid"
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
