#!/bin/bash
# One client's pipelined launch rate through sseqd against native HIP, for several daemon
# option sets in one run: for each set a daemon is started, and native and daemon runs
# alternate five times (the clocks move by +-20% between runs on a GPU host), so each daemon
# run is compared with the native run just before it. Prints one line per set: the medians
# and the median of the paired ratios. Writes under $OUT (default /tmp/sseq-bench).
# Usage: bench/launch.sh BUILD_DIR [OPTION_SET...]   e.g. "" "--submit-threads 32"
#   (default: the daemon's defaults only; $DENV: the daemon's environment, words)
set -uo pipefail
B=${1:?usage: launch.sh BUILD_DIR [OPTION_SET...]}
shift
[ $# -eq 0 ] && set -- ""
. "$(dirname "$0")/hip-env.sh"
sock=/tmp/sseq-bench-launch.sock
export SSEQ_SOCKET=$sock
N=${N:-200000}
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "nan"}'; }
rate() { sed -n 's/.*launches_per_s=\([0-9]*\).*/\1/p'; }
echo "date=$(date -u +%FT%TZ) host=$(hostname) gpu=\"$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)\" denv=\"${DENV:-}\"" | tee -a "$O/launch.txt"
for opts in "$@"; do
	rm -f "$sock"
	# shellcheck disable=SC2086 # options and environment, one word each
	env ${DENV:-} "$B/daemon/sseqd" --backend hip --kernels "$img" --socket "$sock" \
		--log-level notice $opts 2>>"$O/launch-sseqd.log" &
	dpid=$!
	for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
	: >"$O/n.txt"
	: >"$O/d.txt"
	for _ in 1 2 3 4 5; do
		"$native" launch "$img" "$N" | rate >>"$O/n.txt"
		"$client" launch "$N" | rate >>"$O/d.txt"
	done
	kill -TERM "$dpid"
	wait "$dpid"
	nat=$(median <"$O/n.txt")
	one=$(median <"$O/d.txt")
	paired=$(paste "$O/n.txt" "$O/d.txt" | awk '$1 > 0 {printf "%.1f\n", 100 * $2 / $1}' | median)
	echo "launch opts=\"$opts\" native=$nat daemon=$one ratio=$(awk "BEGIN {printf \"%.1f\", 100 * $one / $nat}")% paired=${paired}% runs_native=\"$(paste -sd, "$O/n.txt")\" runs_daemon=\"$(paste -sd, "$O/d.txt")\"" |
		tee -a "$O/launch.txt"
done
