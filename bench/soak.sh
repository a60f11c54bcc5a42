#!/bin/bash
# Soak: one sim daemon serves sseq-stress runs back to back (every result checked) until
# TOTAL operations are done, with a storm of clients killed mid-work after every STEP
# operations; the daemon's resident memory, heap, threads and descriptors are recorded
# at each STEP. A daemon whose memory is bounded shows RSS flat after the first steps.
# A benchmark, not a test: use a release build (--buildtype=release).
# Usage: bench/soak.sh BUILD_DIR [TOTAL [SSEQD_OPTION...]]
#   TOTAL: operations in all (default 10000000)
#   SOAK_STEP: operations between samples (default 1000000)
#   SOAK_RUN: operations per sseq-stress run (default 100000), SOAK_CLIENTS its clients (4)
#   SOAK_STORM: clients started and killed with SIGKILL at each step (default 16)
#   SOAK_SECONDS: stop after the step that passes this many seconds (default: none)
# Output: stdout and $OUT/soak.txt (OUT default /tmp/sseq-bench); exit 1 on a wrong
# result, a race, an error or a daemon that died.
set -uo pipefail
B=${1:?usage: soak.sh BUILD_DIR [TOTAL [SSEQD_OPTION...]]}
[[ $B = /* ]] || B=$PWD/$B
total=${2:-10000000}
shift $(($# < 2 ? $# : 2))
step=${SOAK_STEP:-1000000} run=${SOAK_RUN:-100000} clients=${SOAK_CLIENTS:-4}
storm=${SOAK_STORM:-16} seconds=${SOAK_SECONDS:-0}
O=${OUT:-/tmp/sseq-bench}
mkdir -p "$O"
log=$O/soak.txt
export LD_LIBRARY_PATH=$B/client/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
stress=$B/client/stress/sseq-stress
tmp=$(mktemp -d)
dpid=
trap '[ -n "$dpid" ] && kill -TERM "$dpid" 2>/dev/null; wait; rm -rf "$tmp"' EXIT
say() { echo "$*" | tee -a "$log"; }
fail() { say "FAIL: $*"; exit 1; }

sock=$tmp/sseq.sock
"$B/daemon/sseqd" --backend sim --socket "$sock" --log-level warning "$@" 2>>"$tmp/sseqd.log" &
dpid=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "sseqd did not start: $(cat "$tmp/sseqd.log")"

kb() { awk -v k="$1:" '$1 == k { print $2 }' /proc/"$dpid"/status; }
heap_kb() { awk '/\[heap\]/ { h = 1; next } /^[0-9a-f]+-/ { h = 0 } h && /^Rss:/ { print $2 }' \
	/proc/"$dpid"/smaps; }
sample() { # ops elapsed_s
	say "$(printf 'ops=%d elapsed_s=%d rss_kb=%d rss_anon_kb=%d heap_kb=%d threads=%d fds=%d\n' \
		"$1" "$2" "$(kb VmRSS)" "$(kb RssAnon)" "$(heap_kb)" "$(kb Threads)" \
		"$(find /proc/"$dpid"/fd -mindepth 1 | wc -l)" | tee -a "$tmp/samples")"
}
# Clients killed with SIGKILL mid-work: whatever they held is the daemon's to clean up.
storm() {
	local pids=() i
	for i in $(seq "$storm"); do
		"$stress" --socket "$sock" --ops 1000000 --clients 1 --seed $((1000 + i)) \
			>/dev/null 2>&1 &
		pids+=($!)
	done
	sleep 0.5
	for i in "${pids[@]}"; do kill -KILL "$i" 2>/dev/null; done
	wait "${pids[@]}" 2>/dev/null
	# The daemon learns of each death by hang-up: let it finish the cleanup.
	for _ in $(seq 100); do
		"$B/client/ctl/sseqctl" --socket "$sock" --json clients 2>/dev/null |
			grep -q '"clients": \[\]' && break
		sleep 0.1
	done
}

say "soak date=$(date -u +%FT%TZ) host=$(hostname) cpus=$(nproc)" \
	"cpu=\"$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)\"" \
	"total=$total step=$step run=$run clients=$clients storm=$storm options=\"$*\""
sample 0 0
start=$(date +%s) done=0 seed=1 next=$step
while [ "$done" -lt "$total" ]; do
	out=$("$stress" --socket "$sock" --ops "$run" --clients "$clients" --seed "$seed" 2>&1 |
		tail -1)
	seed=$((seed + clients))
	kill -0 "$dpid" 2>/dev/null || fail "sseqd died: $(tail -5 "$tmp/sseqd.log")"
	case $out in
	*" wrong=0 errors=0 races=0"*) ;;
	*) fail "sseq-stress at ops=$done: $out" ;;
	esac
	done=$((done + $(sed -n 's/^ops=\([0-9]*\).*/\1/p' <<<"$out")))
	if [ "$done" -ge "$next" ] || [ "$done" -ge "$total" ]; then
		[ "$storm" -gt 0 ] && storm
		now=$(($(date +%s) - start))
		sample "$done" "$now"
		next=$((next + step))
		if [ "$seconds" -gt 0 ] && [ "$now" -ge "$seconds" ] && [ "$done" -lt "$total" ]; then
			say "stopped at ops=$done of $total: past SOAK_SECONDS=$seconds"
			break
		fi
	fi
done
# The first step includes the daemon's warm-up (rings and caches filled once): growth
# counts from there.
awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	n++; if (n == 2) first = v["rss_kb"]; if (v["rss_kb"] > max) max = v["rss_kb"]; last = v["rss_kb"] }
	END { if (n > 2) printf "rss_kb at the first step=%d last=%d max=%d growth since=%+d\n",
		first, last, max, last - first }' "$tmp/samples" | tee -a "$log"
kill -TERM "$dpid"
wait "$dpid" || fail "sseqd exited with status $?: $(tail -5 "$tmp/sseqd.log")"
dpid=
