#!/bin/bash
# The daemon against native HIP, side by side in one run on a GPU machine. Run from the
# repository root with a HIP build (default build-hipnv); prints one key=value line per
# measurement and writes everything under $OUT (default /tmp/sseq-bench).
# Usage: bench/h200.sh [BUILD_DIR]   ($SSEQD_OPTS: more options for sseqd, e.g. --loops 4)
set -uo pipefail
B=${1:-build-hipnv}
. "$(dirname "$0")/hip-env.sh"
log=$O/bench.txt
say() { echo "$*" | tee -a "$log"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
gpu_mem() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }
time_ms() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null 2>&1 || echo "FAILED: $*" >&2; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000 )); }

say "date=$(date -u +%FT%TZ) host=$(hostname) sseqd_opts=\"${SSEQD_OPTS:-}\" gpu=\"$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)\" image=$img"

# ---- native, one process ----
say "$("$native" copy $((256 << 20)))"
say "$(SSEQ_BENCH_BURST=32 "$native" copy $((256 << 20)))"
say "$("$native" latency 2000)"
for i in $(seq 10); do time_ms "$native" first-kernel "$img"; done | median >"$O/native-first.txt"
say "native first_kernel_process_median_us=$(cat "$O/native-first.txt")"
base=$(gpu_mem)
coproc NH { "$native" hold; }
read -r _ <&"${NH[0]}"
sleep 1
say "native hold_context_MiB=$(( $(gpu_mem) - base ))"
eval "exec ${NH[1]}>&-"
wait

# ---- through the daemon ----
sock=/tmp/sseq-bench.sock
export SSEQ_SOCKET=$sock
rm -f "$sock"
# shellcheck disable=SC2086 # options, one word each
"$B/daemon/sseqd" --backend hip --kernels "$img" --socket "$sock" --log-level notice ${SSEQD_OPTS:-} 2>"$O/sseqd.log" &
dpid=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
say "$("$client" copy $((256 << 20)))"
say "$(SSEQ_BENCH_BURST=32 "$client" copy $((256 << 20)))"
"$B/client/ctl/sseqctl" --socket "$sock" stats >"$O/stats-after-copy.txt" 2>&1
say "$("$client" latency 2000)"
# Launch rates move by +-20% between runs on this machine (clocks): native and daemon
# runs alternate, five of each, and the medians are compared. This run's five only: a
# second run into the same $OUT used to add its own to the first's and mix them.
: >"$O/launch-native.txt"
: >"$O/launch-daemon.txt"
: >"$O/launch-multi.txt"
for r in 1 2 3 4 5; do
	"$native" launch "$img" 200000 | tee -a "$O/launch-native.txt" >>"$log"
	"$client" launch 200000 | tee -a "$O/launch-daemon.txt" >>"$log"
	t0=$(date +%s%N)
	for i in $(seq 16); do "$client" launch 50000 >"$O/multi-$i.txt" 2>&1 & done
	wait $(jobs -p | grep -v "^$dpid$") 2>/dev/null
	t1=$(date +%s%N)
	echo "$(awk "BEGIN {printf \"%.0f\", 16 * 50000 / (($t1 - $t0) / 1e9)}")" >>"$O/launch-multi.txt"
	say "daemon launch clients=16 each=50000 wall_s=$(awk "BEGIN {print ($t1 - $t0) / 1e9}") aggregate_launches_per_s=$(tail -1 "$O/launch-multi.txt")"
done
nat=$(sed -n 's/.*launches_per_s=\([0-9]*\).*/\1/p' "$O/launch-native.txt" | median)
one=$(sed -n 's/.*launches_per_s=\([0-9]*\).*/\1/p' "$O/launch-daemon.txt" | median)
multi=$(median <"$O/launch-multi.txt")
say "launch medians of 5: native=$nat daemon_one_client=$one ($(awk "BEGIN {printf \"%.1f\", 100 * $one / $nat}")%) daemon_16_clients=$multi ($(awk "BEGIN {printf \"%.1f\", 100 * $multi / $nat}")%)"
# Each daemon run against the native run just before it (same clocks), median of 5.
sed -n 's/.*launches_per_s=\([0-9]*\).*/\1/p' "$O/launch-native.txt" >"$O/n.txt"
sed -n 's/.*launches_per_s=\([0-9]*\).*/\1/p' "$O/launch-daemon.txt" >"$O/d.txt"
r1=$(paste "$O/n.txt" "$O/d.txt" | awk '{printf "%.1f\n", 100 * $2 / $1}' | median)
r16=$(paste "$O/n.txt" "$O/launch-multi.txt" | awk '{printf "%.1f\n", 100 * $2 / $1}' | median)
say "launch paired ratios, median of 5: one_client=${r1}% 16_clients=${r16}%"
for i in $(seq 10); do time_ms "$client" first-kernel; done | median >"$O/daemon-first.txt"
say "daemon first_kernel_process_median_us=$(cat "$O/daemon-first.txt")"
base=$(gpu_mem)
holders=()
for i in $(seq 16); do
	coproc H { "$client" hold; }
	read -r _ <&"${H[0]}"
	holders+=("${H[1]}")
	exec {H[0]}<&-
done 2>/dev/null
sleep 1
say "daemon hold clients=16 device_MiB_delta=$(( $(gpu_mem) - base ))"
"$B/client/ctl/sseqctl" --socket "$sock" clients >"$O/clients.txt" 2>&1
for fd in "${holders[@]}"; do eval "exec $fd>&-"; done
sleep 0.5
"$B/client/ctl/sseqctl" --socket "$sock" stats >"$O/stats.txt" 2>&1
kill -TERM "$dpid"
wait "$dpid"
say "sseqd exit=$?"
