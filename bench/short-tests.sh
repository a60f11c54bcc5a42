#!/bin/bash
# Short pytest tests through one sseqd against the same tests natively (PyTorch) under
# CUDA MPS, which this script starts and stops: per-test time as the mean of pytest's own
# `call` durations at -n 0, 8 and 16 (bench/short-tests/: five one-block 2 ms or 20 ms
# spin kernels then fill and download 1 KiB; the download alone; the kernels then a sync).
# Then 16 workers with the daemon pinned onto 4 cores (taskset), with the daemon's CPU
# seconds. Prints key=value lines, writes under $OUT (default /tmp/sseq-bench).
# Usage: bench/short-tests.sh BUILD_DIR [SECTION...]   sections: sseq torch cores (default all)
# $KINDS: the shapes (default "spin2000 spin20000 download sync2000"; "none", an empty test,
# is pytest's own floor); $NS: the -n values (default "0 8 16"); $SSEQD_OPTS / $SSEQD_ENV: the daemon's options and environment;
# $SSEQD_NICE: the daemon's nice value (default 0; the unit's Nice= is the case to compare);
# $PYTHON: the interpreter with pytest, xdist and numpy (torch for the torch section).
# $SHORT_TESTS: tests per run instead of 48 (a variant beside the headline: with 48 tests
# and 16 workers each worker runs 3, while the others are still starting up).
set -uo pipefail
B=${1:?usage: short-tests.sh BUILD_DIR [SECTION...]}
shift
sections=${*:-sseq torch cores}
name=short-tests
. "$(dirname "$0")/procs.sh"
here=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
KINDS=${KINDS:-spin2000 spin20000 download sync2000}
NS=${NS:-0 8 16}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
cpu_s() { awk -v t="$1" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}'; } # ticks
export PYTHONPATH=$PWD/client/python PYTHONDONTWRITEBYTECODE=1
export SSEQ_LIBRARY=$PWD/$B/client/lib/libsseq.so.0

# One pytest run: label, cpus, -n, the test file, extra pytest words. Prints the line.
run_pytest() { # label cpus n file [-p plugin]
	local label=$1 cpus=$2 n=$3 file=$4 kind=$5 xd=() t0 rc
	shift 5
	[ "$n" != 0 ] && xd=(-n "$n")
	case $kind in
	spin*) export SHORT_KIND=spin SHORT_SPIN_US=${kind#spin} ;;
	sync*) export SHORT_KIND=sync SHORT_SPIN_US=${kind#sync} ;;
	*) export SHORT_KIND=$kind SHORT_SPIN_US=0 ;;
	esac
	export SHORT_DURATIONS=$tmp/durations
	rm -f "$SHORT_DURATIONS"
	t0=$(date +%s.%N)
	taskset -c "$cpus" timeout 300 "$PY" -m pytest -q -p no:cacheprovider "$@" "${xd[@]}" \
		"$here/short-tests/$file" >"$O/short-$label-$kind-n$n.log" 2>&1
	rc=$?
	printf '%s kind=%s n=%s rc=%s tests=%s mean_call_ms=%s median_call_ms=%s max_call_ms=%s wall_s=%.2f' \
		"$label" "$kind" "$n" "$rc" "$(wc -l <"$SHORT_DURATIONS" 2>/dev/null || echo 0)" \
		"$(awk '{s += $1} END {if (NR) printf "%.3f", 1000 * s / NR; else print "nan"}' "$SHORT_DURATIONS" 2>/dev/null)" \
		"$(sort -g "$SHORT_DURATIONS" 2>/dev/null | awk '{a[NR]=$1} END {if (NR) printf "%.3f", 1000 * a[int((NR+1)/2)]; else print "nan"}')" \
		"$(sort -g "$SHORT_DURATIONS" 2>/dev/null | tail -1 | awk '{printf "%.3f", 1000 * $1}')" \
		"$(awk "BEGIN {print $(date +%s.%N) - $t0}")"
	# Each worker's first test apart from the rest: a cost paid once per worker (its
	# connection, its staging arena) shows in the first, a cost of sharing in the rest.
	awk '$3 == 1 {f += $1; nf++} $3 > 1 {r += $1; nr++}
		END {printf " first_mean_ms=%s rest_mean_ms=%s\n", nf ? sprintf("%.3f", 1000 * f / nf) : "nan",
			nr ? sprintf("%.3f", 1000 * r / nr) : "nan"}' "$SHORT_DURATIONS" 2>/dev/null || echo
	cp "$SHORT_DURATIONS" "$O/durations-$label-$kind-n$n.txt" 2>/dev/null
}

start_sseqd() { # cpus
	rm -f "$sock"
	# shellcheck disable=SC2086 # words
	taskset -c "$1" nice -n "${SSEQD_NICE:-0}" env ${SSEQD_ENV:-} "$B/daemon/sseqd" --backend "${BACKEND:-hip}" --kernels "$img" --socket "$sock" \
		--log-level warning ${SSEQD_OPTS:-} 2>>"$O/short-sseqd.log" &
	dpid=$!
	for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done
	export SSEQ_SOCKET=$sock
}
stop_sseqd() { kill -TERM "$dpid"; wait "$dpid"; dpid=; }
all="0-$(($(nproc) - 1))"

for section in $sections; do
	case $section in
	sseq)
		start_sseqd "$all"
		for kind in $KINDS; do
			for n in $NS; do
				d0=$(ticks "$dpid")
				say "$(run_pytest sseq "$all" "$n" test_short.py "$kind" -p sseq.pytest_plugin) daemon_cpu_s=$(cpu_s $(($(ticks "$dpid") - d0))) opts=\"${SSEQD_OPTS:-}\" env=\"${SSEQD_ENV:-}\" nice=${SSEQD_NICE:-0}"
			done
		done
		stop_sseqd
		;;
	torch)
		cyc=$("$PY" "$here/short-tests/calibrate.py" 2>>"$log")
		export SHORT_CYCLES_PER_US=$cyc
		say "torch_sleep_cycles_per_us=$cyc"
		export CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log
		mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
		nvidia-cuda-mps-control -d
		for kind in $KINDS; do
			for n in $NS; do
				say "$(run_pytest torch-mps "$all" "$n" test_short_torch.py "$kind")"
			done
		done
		echo quit | nvidia-cuda-mps-control
		sleep 1
		unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
		;;
	cores)
		# 16 workers and the daemon on 4 cores, against -n 0 on the same 4 cores and on all.
		for kind in ${CORE_KINDS:-spin20000 download}; do
			start_sseqd 0-3
			say "$(run_pytest sseq-4cores 0-3 0 test_short.py "$kind" -p sseq.pytest_plugin)"
			d0=$(ticks "$dpid")
			say "$(run_pytest sseq-4cores 0-3 16 test_short.py "$kind" -p sseq.pytest_plugin) daemon_cpu_s=$(cpu_s $(($(ticks "$dpid") - d0))) opts=\"${SSEQD_OPTS:-}\""
			stop_sseqd
		done
		;;
	*) echo "unknown section $section" >&2; exit 2 ;;
	esac
done
