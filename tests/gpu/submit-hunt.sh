#!/bin/bash
# Hunts the submit thread's intermittent test timeouts: runs the suspect cases (the
# sequenced seed of the conformance suite, the sequenced audit run of test-hip) again and
# again with SSEQ_HIP_SUBMIT=$HUNT_SUBMIT (default thread) in Check's fork mode; a run still going after
# $HUNT_STALL_S seconds gets every thread of every process in its tree backtraced
# (cuda-gdb, else gdb), then is killed. Logs under $OUT.
# Usage: tests/gpu/submit-hunt.sh DEBUG_BUILD [ROUNDS]
set -uo pipefail
D=${1:?usage: submit-hunt.sh DEBUG_BUILD [ROUNDS]}
rounds=${2:-10}
O=${OUT:-/tmp/sseq-gpu}
mkdir -p "$O"
stall=${HUNT_STALL_S:-45}
export LD_LIBRARY_PATH=$PWD/$D/lib:$PWD/$D/client/lib SSEQ_HIP_SUBMIT=${HUNT_SUBMIT:-thread} CK_DEFAULT_TIMEOUT=300
export SSEQ_KERNELS=$PWD/$D/daemon/backend/hip/sseq-kernels.fatbin
dbg=$(command -v cuda-gdb || command -v gdb || true)
backtrace() { # pid: every process below it
	local p
	for p in $1 $(pgrep -P "$1") $(for c in $(pgrep -P "$1"); do pgrep -P "$c"; done); do
		echo "=== pid $p: $(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null)"
		[ -n "$dbg" ] && timeout 60 "$dbg" -batch -p "$p" -ex "thread apply all bt" 2>&1 | grep -v '^\[New LWP'
	done
}
hunt() { # name binary case
	local name=$1 bin=$2 tc=$3 i t0 pid el
	for i in $(seq "$rounds"); do
		t0=$(date +%s.%N)
		CK_RUN_CASE=$tc "$D/$bin" >"$O/hunt-$name-$i.log" 2>&1 &
		pid=$!
		while kill -0 "$pid" 2>/dev/null; do
			el=$(awk "BEGIN {print $(date +%s.%N) - $t0}")
			if awk "BEGIN {exit !($el > $stall)}"; then
				backtrace "$pid" >"$O/hunt-$name-$i.bt" 2>&1
				pkill -KILL -P "$pid"; kill -KILL "$pid"
				echo "hunt $name round $i: STALLED after ${el}s: backtraces in hunt-$name-$i.bt"
				break
			fi
			sleep 0.5
		done
		wait "$pid"
		echo "hunt $name round $i rc=$? seconds=$(awk "BEGIN {print $(date +%s.%N) - $t0}") $(grep -o '[0-9]*%: Checks.*' "$O/hunt-$name-$i.log")"
	done
}
hunt seed daemon/backend/test-backend-hip data
hunt audit daemon/backend/hip/test-hip audit
