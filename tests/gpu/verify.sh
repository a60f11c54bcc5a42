#!/bin/bash
# The schedule checker on a real GPU, with the device's own audit beside it: 16
# sseq-stress clients and the race harness through sseqd --verify --audit (0 findings of
# either kind and 0 wrong expected), drop-wait injected over seeded runs (the checker must
# catch it in every one), the Python suite -n 8 against --verify --audit, and what the
# checker costs in launch throughput (--verify against --no-verify, alternating, one
# client and 16). One summary line per step in $OUT/verify.txt, logs beside it.
# Usage: tests/gpu/verify.sh RELEASE_BUILD [DROP_RUNS]
set -uo pipefail
R=${1:?usage: verify.sh RELEASE_BUILD [DROP_RUNS]}
runs=${2:-20}
O=${OUT:-/tmp/sseq-gpu}
mkdir -p "$O"
S=$O/verify.txt
say() { echo "$*" | tee -a "$S"; }
export LD_LIBRARY_PATH=$PWD/$R/lib:$PWD/$R/client/lib
img=$PWD/$R/daemon/backend/hip/sseq-kernels.fatbin
ctl=$R/client/ctl/sseqctl
stress=$R/client/stress/sseq-stress
client=$R/bench/bench-client
fail=0
# start SOCKET TAG ARGS...: a hip sseqd in the background ($pid), its log under $O.
start() {
	local sock=$1 tag=$2
	shift 2
	rm -f "$sock"
	"$R/daemon/sseqd" --backend hip --kernels "$img" --socket "$sock" --log-level warning "$@" \
		2>"$O/sseqd-$tag.log" &
	pid=$!
	for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done
}
stop() { kill -TERM "$1"; wait "$1"; }
# counters SOCKET NAME...: the named counters, space-separated.
counters() {
	local sock=$1
	shift
	"$ctl" --socket "$sock" --json stats | python3 -c '
import json, sys
c = json.load(sys.stdin)["counters"]
print(" ".join(str(c.get(n, 0)) for n in sys.argv[1:]))' "$@"
}
field() { sed -n "s/.*\<$1=\([0-9]*\).*/\1/p" <<<"$2"; }
sock=/tmp/sseq-verify.sock

# ---- 16 clients, clean ----
start "$sock" lanes --verify --audit
out=$("$stress" --socket "$sock" --ops 100000 --clients 16 --seed 5 2>"$O/stress-lanes.err" | tail -1)
read -r vf af < <(counters "$sock" verify_findings audit_findings)
stop "$pid"
say "16 clients --verify --audit: $out verify_findings=$vf audit_findings=$af"
[ "$(field wrong "$out")" = 0 ] && [ "$vf" = 0 ] && [ "$af" = 0 ] || fail=1

# ---- the race harness (clean, then the legacy window: the checker must see that) ----
OUT=$O bash tests/gpu/race-harness.sh "$R" --verify --audit >"$O/race-verify.txt" 2>&1 || fail=1
say "$(cat "$O/race-verify.txt")"
for l in clean legacy; do
	say "race-harness $l counters: $(grep -E '^(verify|audit|race) findings' "$O/stats-$l.txt" | tr -s ' \n' ' ')"
done

# ---- drop-wait: caught by the checker in every seeded run, no delays but the GPU's ----
caught=0 audit=0 data=0 ops=0 dropped=0
for seed in $(seq "$runs"); do
	start "$sock" drop --verify --audit --inject drop-wait=20
	out=$("$stress" --socket "$sock" --ops 4000 --clients 2 --seed "$seed" 2>/dev/null | tail -1)
	read -r vf af wd < <(counters "$sock" verify_findings audit_findings waits_dropped)
	stop "$pid"
	ops=$((ops + $(field ops "$out")))
	dropped=$((dropped + wd))
	[ "$vf" -gt 0 ] && caught=$((caught + 1))
	[ "$af" -gt 0 ] && audit=$((audit + 1))
	[ "$(field wrong "$out")" -gt 0 ] && data=$((data + 1))
done
say "drop-wait=20 on hip: runs=$runs ops=$ops waits_dropped=$dropped checker=$caught/$runs audit=$audit/$runs data_checks=$data/$runs first: $(grep -m1 'verify:' "$O/sseqd-drop.log")"
[ "$caught" = "$runs" ] || fail=1

# ---- the Python suite against --verify --audit ----
start "$sock" python --verify --audit
export PYTHONPATH=$PWD/client/python SSEQ_SOCKET=$sock SSEQ_LIBRARY=$PWD/$R/client/lib/libsseq.so.0 PYTHONDONTWRITEBYTECODE=1
s0=$(date +%s.%N)
timeout 240 python3 -m pytest -q -n 8 -p sseq.pytest_plugin tests/python >"$O/pytest-verify.log" 2>&1
rc=$?
read -r vf af < <(counters "$sock" verify_findings audit_findings)
stop "$pid"
say "pytest -n 8 --verify --audit rc=$rc seconds=$(awk "BEGIN {print $(date +%s.%N) - $s0}") verify_findings=$vf audit_findings=$af $(tail -1 "$O/pytest-verify.log")"
[ "$rc" = 0 ] && [ "$vf" = 0 ] && [ "$af" = 0 ] || fail=1

# ---- cost: launch rates with and without the checker, alternating ----
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: >"$O/cost.txt"
for r in 1 2 3 4 5; do
	for mode in verify no-verify; do
		start "$sock" "cost-$mode" "--$mode"
		one=$(SSEQ_SOCKET=$sock "$client" launch 200000 | sed -n 's/.*launches_per_s=\([0-9]*\).*/\1/p')
		t0=$(date +%s%N)
		for i in $(seq 16); do SSEQ_SOCKET=$sock "$client" launch 50000 >/dev/null 2>&1 & done
		wait $(jobs -p | grep -v "^$pid$") 2>/dev/null
		t1=$(date +%s%N)
		stop "$pid"
		echo "$mode $one $(awk "BEGIN {printf \"%.0f\", 16 * 50000 / (($t1 - $t0) / 1e9)}")" >>"$O/cost.txt"
	done
done
for mode in verify no-verify; do
	one=$(awk -v m=$mode '$1 == m {print $2}' "$O/cost.txt" | median)
	multi=$(awk -v m=$mode '$1 == m {print $3}' "$O/cost.txt" | median)
	say "launches --$mode, medians of 5: one_client=$one clients_16=$multi"
done
# Each --verify run against the --no-verify run just after it (paired, median of 5).
paste <(awk '$1 == "verify"' "$O/cost.txt") <(awk '$1 == "no-verify"' "$O/cost.txt") |
	awk '{printf "%.1f %.1f\n", 100 * $2 / $5, 100 * $3 / $6}' >"$O/cost-ratio.txt"
say "launches with the checker / without, paired medians of 5: one_client=$(cut -d' ' -f1 "$O/cost-ratio.txt" | median)% clients_16=$(cut -d' ' -f2 "$O/cost-ratio.txt" | median)%"
say "verify.sh rc=$fail"
exit $fail
