#!/bin/bash
# Daemon instructions per pipelined execute request on the sim backend, counted by
# callgrind (stable on a noisy machine): run the daemon under callgrind for N and 2N
# pipelined executes and divide the difference of the loop thread's totals by N, which
# cancels start-up and shutdown; $SSEQD_ARGS adds sseqd options (e.g. --no-verify).
# The loop's total moves by about a hundred between runs of one binary: the sim's worker
# thread, whose turns under valgrind decide whether the loop finds a spare command entry
# or mallocs one, and libc's locks with it. daemon_code_per_execute is steadier: the
# loop's instructions in sseqd's own functions (callgrind_annotate, per function, the 2N
# run less the N run), the sim backend's and libc's left out; compare builds by it (release
# builds without -g: with debug info callgrind_annotate splits functions by source file
# and the sum is not comparable).
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
	local loop all=0 own
	loop=$(grep '^summary' "$out-01" | cut -d' ' -f2)
	for f in "$out"-*; do all=$((all + $(grep '^summary' "$f" | cut -d' ' -f2))); done
	# The loop thread's instructions in sseqd's functions but the sim's.
	own=$(callgrind_annotate --threshold=100 "$out-01" 2>/dev/null |
		awk '/\/daemon\/sseqd\]$/ && !/:sim_/ {gsub(",", "", $1); s += $1} END {print s + 0}')
	echo "$loop $all $own"
}
read -r l1 a1 o1 < <(total "$n")
read -r l2 a2 o2 < <(total $((2 * n)))
echo "executes=$n loop_thread_instructions_per_execute=$(((l2 - l1) / n)) all_threads=$(((a2 - a1) / n)) daemon_code_per_execute=$(((o2 - o1) / n))"
