#!/bin/bash
# The race harness on a real GPU: sseq-stress through sseqd --backend hip, clean (expect
# wrong=0 races=0 over >= 100,000 ops) and with the legacy bug injected (expect wrong
# results; the rate is reported). Optional extra sseqd arguments (e.g. --audit) apply to
# both runs. Usage: tests/gpu/race-harness.sh BUILD_DIR [SSEQD_ARGS...]
# ($SSEQ_HARNESS_OPS and $SSEQ_HARNESS_LEGACY_OPS change the op counts, e.g. for a try on
# the fake CUDA runtime.)
set -uo pipefail
B=${1:?usage: race-harness.sh BUILD_DIR [SSEQD_ARGS...]}
shift
O=${OUT:-/tmp/sseq-race}
mkdir -p "$O"
export LD_LIBRARY_PATH=$PWD/$B/lib:$PWD/$B/client/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
img=$(ls "$B"/daemon/backend/hip/sseq-kernels.* | head -1)
sock=/tmp/sseq-race.sock
rc=0
run() { # $1: label, $2: ops, rest: sseqd args
	local label=$1 ops=$2
	shift 2
	rm -f "$sock"
	"$B/daemon/sseqd" --backend hip --kernels "$img" --socket "$sock" --log-level warning "$@" \
		2>"$O/sseqd-$label.log" &
	local pid=$!
	for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
	local t0 t1 out
	t0=$(date +%s.%N)
	out=$("$B/client/stress/sseq-stress" --socket "$sock" --ops "$ops" --clients 4 --seed 11 2>>"$O/stress-$label.err" | tail -1)
	t1=$(date +%s.%N)
	"$B/client/ctl/sseqctl" --socket "$sock" stats >"$O/stats-$label.txt" 2>&1
	kill -TERM "$pid"
	wait "$pid"
	local findings
	findings=$(grep -c -E 'detector|audit|verify:' "$O/sseqd-$label.log")
	echo "race-harness $label args=\"$*\" $out seconds=$(awk "BEGIN {print $t1 - $t0}") log_findings=$findings"
	LAST=$out
}
run clean ${SSEQ_HARNESS_OPS:-100000} "$@"
case "$LAST" in *"wrong=0 errors=0 races=0"*) ;; *) echo "FAIL: clean run not clean"; rc=1 ;; esac
run legacy ${SSEQ_HARNESS_LEGACY_OPS:-20000} --inject legacy-sync-window=4 "$@"
case "$LAST" in *"wrong=0 "*) echo "NOTE: the injected bug produced no wrong result in this run" ;; esac
exit $rc
