#!/bin/bash
# How often each detector catches an injected bug, over seeded sseq-stress runs on the
# sim: for each injection and each seed, a fresh sseqd, one sseq-stress run, then the
# daemon's counters. A run counts as caught by the checker when verify_findings > 0, by
# the sim's shadow detector when race_findings exceeds that, by the data checks when
# sseq-stress saw wrong data. Prints one line per injection; writes under $OUT.
# Usage: bench/catch-rates.sh BUILD_DIR [RUNS] [INJECTION...]
#   (default 50 runs; each injection with random delays, or "nodelay", or "slowh2d":
#   every H2D copy takes 5 ms; default "drop-wait=20" "drop-wait=20 nodelay"
#   "legacy-sync-window=64 slowh2d" "none")
set -uo pipefail
B=${1:?usage: catch-rates.sh BUILD_DIR [RUNS] [INJECTION...]}
runs=${2:-50}
shift $(( $# > 1 ? 2 : 1 ))
[ $# -gt 0 ] || set -- "drop-wait=20" "drop-wait=20 nodelay" "legacy-sync-window=64 slowh2d" "none"
O=${OUT:-/tmp/sseq-bench}
mkdir -p "$O"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sock=$tmp/s.sock
log=$O/catch-rates.txt
for spec in "$@"; do
	read -r inj mode <<<"$spec"
	delays=(--sim-delay "all=rand:0-200us")
	[ "${mode:-}" = nodelay ] && delays=()
	[ "${mode:-}" = slowh2d ] && delays=(--sim-delay "h2d=5ms")
	inject=(--inject "$inj")
	[ "$inj" = none ] && inject=()
	checker=0 shadow=0 data=0 any=0 ops=0 dropped=0
	for seed in $(seq "$runs"); do
		rm -f "$sock"
		"$B/daemon/sseqd" --backend sim --socket "$sock" --log-level err "${delays[@]}" \
			"${inject[@]}" 2>>"$tmp/sseqd.log" &
		pid=$!
		for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.02; done
		out=$("$B/client/stress/sseq-stress" --socket "$sock" --ops 4000 --clients 2 \
			--seed "$seed" 2>/dev/null | tail -1)
		read -r vf rf wd < <("$B/client/ctl/sseqctl" --socket "$sock" --json stats |
			python3 -c 'import json,sys; c=json.load(sys.stdin)["counters"]; print(c.get("verify_findings",0), c["race_findings"], c.get("waits_dropped",0))')
		kill -TERM "$pid"
		wait "$pid"
		wrong=$(sed -n 's/.*wrong=\([0-9]*\).*/\1/p' <<<"$out")
		n=$(sed -n 's/^ops=\([0-9]*\).*/\1/p' <<<"$out")
		ops=$((ops + ${n:-0}))
		dropped=$((dropped + ${wd:-0}))
		[ "${vf:-0}" -gt 0 ] && checker=$((checker + 1))
		[ "${rf:-0}" -gt "${vf:-0}" ] && shadow=$((shadow + 1))
		[ "${wrong:-0}" -gt 0 ] && data=$((data + 1))
		{ [ "${vf:-0}" -gt 0 ] || [ "${rf:-0}" -gt 0 ] || [ "${wrong:-0}" -gt 0 ]; } && any=$((any + 1))
	done
	echo "catch injection=$inj delays=${mode:-random} runs=$runs ops=$ops waits_dropped=$dropped checker=$checker/$runs shadow_detector=$shadow/$runs data_checks=$data/$runs any=$any/$runs" | tee -a "$log"
done
