#!/bin/bash
# Daemon instructions per pipelined execute request on the sim backend, counted by
# callgrind (stable on a noisy machine): run the daemon under callgrind for N and 2N
# pipelined executes and divide the difference of the loop thread's totals by N, which
# cancels start-up and shutdown; $SSEQD_ARGS adds sseqd options (e.g. --no-verify).
# Usage: bench/callgrind-execute.sh BUILD_DIR [N]
set -euo pipefail
build=${1:?usage: callgrind-execute.sh BUILD_DIR [N]}
n=${2:-20000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
total() { # $1: count -> prints the loop thread's and all threads' instruction totals
	local sock=$tmp/s.sock out=$tmp/cg.$1
	valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out" \
		"$build/daemon/sseqd" --backend sim --socket "$sock" --log-level warning ${SSEQD_ARGS:-} 2>/dev/null &
	local pid=$!
	for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
	"$build/bench/bench-pipeline" --socket "$sock" --count "$1" >/dev/null
	kill -TERM $pid
	wait $pid || true
	local loop all=0
	loop=$(grep '^summary' "$out-01" | cut -d' ' -f2)
	for f in "$out"-*; do all=$((all + $(grep '^summary' "$f" | cut -d' ' -f2))); done
	echo "$loop $all"
}
read -r l1 a1 < <(total "$n")
read -r l2 a2 < <(total $((2 * n)))
echo "executes=$n loop_thread_instructions_per_execute=$(((l2 - l1) / n)) all_threads=$(((a2 - a1) / n))"
