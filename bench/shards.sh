#!/bin/bash
# The read-back round trip (bench/roundtrip.c) from P clients spread over N daemons on one
# GPU, each daemon with its own loop thread (and its own CUDA context): how far more than
# one loop would carry the aggregate, measured without changing the daemon. The contexts
# time-slice the GPU, which loops sharing one daemon would not, so this bounds the gain
# from below. Also $LIB: another build's client library for the same clients (a
# measurement-only libsseq, e.g. bench/exchanges-exp.patch). Prints one line per N.
# Usage: bench/shards.sh BUILD_DIR [P [N...]]   (default 16 clients; 1, 2 and 4 daemons)
set -uo pipefail
B=${1:?usage: shards.sh BUILD_DIR [P [N...]]}
P=${2:-16}
shift $(($# < 2 ? $# : 2))
NS=${*:-1 2 4}
name=shards
. "$(dirname "$0")/procs.sh"
client=$B/bench/bench-roundtrip
[ -n "${LIB:-}" ] && export LD_LIBRARY_PATH=$LIB:$LD_LIBRARY_PATH
rounds=${ROUNDS:-$((4800 / P > 100 ? 4800 / P : 100))}
for n in $NS; do
	dpids=()
	for d in $(seq "$n"); do
		rm -f "$tmp/s$d.sock"
		"$B/daemon/sseqd" --backend "${BACKEND:-hip}" --kernels "$img" --socket "$tmp/s$d.sock" \
			--log-level warning 2>>"$O/shards-sseqd.log" &
		dpids+=($!)
	done
	for d in $(seq "$n"); do
		for _ in $(seq 300); do [ -S "$tmp/s$d.sock" ] && break; sleep 0.05; done
	done
	export SSEQ_BENCH_GO=$tmp/go SSEQ_BENCH_RAW=$tmp/raw
	rm -f "$SSEQ_BENCH_GO" "$tmp"/out.* "$tmp"/raw.*
	pids=()
	for i in $(seq "$P"); do
		SSEQ_SOCKET=$tmp/s$((i % n + 1)).sock "$client" "$rounds" >"$tmp/out.$i" 2>&1 &
		pids+=($!)
	done
	for _ in $(seq 600); do
		[ "$(cat "$tmp"/out.* 2>/dev/null | grep -c 'burst ready')" -ge "$P" ] && break
		sleep 0.1
	done
	touch "$SSEQ_BENCH_GO"
	wait "${pids[@]}"
	out=$(grep -h ' roundtrip rounds=' "$tmp"/out.*)
	cat "$tmp"/out.* >>"$O/shards-clients.log"
	say "$(printf 'shards daemons=%d clients=%d done=%d median_us=%s aggregate_rt_per_s=%s lib=%s' "$n" "$P" \
		"$(echo "$out" | grep -c roundtrip)" \
		"$(cat "$tmp"/raw.* 2>/dev/null | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "nan"}')" \
		"$(echo "$out" | awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			if (!n || v["start"] < s) s = v["start"]; if (!n || v["end"] > e) e = v["end"]; n++; r += v["rounds"] }
			END { if (n) printf "%.0f", r / (e - s); else printf "nan" }')" "${LIB:-default}")"
	for p in "${dpids[@]}"; do kill -TERM "$p"; done
	wait "${dpids[@]}"
done
