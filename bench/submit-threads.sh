#!/bin/bash
# Submission that scales: sseqd with 0 (inline), 1, 2, 4, 8 submit threads (or those
# given) against native processes and CUDA MPS, all in one run on the GPU machine.
# Each daemon configuration runs 16 processes x 2,000 one-block 50 us spin kernels,
# 16 x 20,000 empty kernels (with where the daemon's threads spent their CPU time) and
# one client's pipelined launches against native, paired; then native processes, one
# native process launching from 1, 4, 8 and 16 threads (one context's ceiling), and MPS.
# Writes under $OUT.
# Usage: bench/submit-threads.sh BUILD_DIR [THREADS...]
set -uo pipefail
B=${1:?usage: submit-threads.sh BUILD_DIR [THREADS...]}
shift
threads=${*:-0 1 2 4 8}
name=submit-threads
. "$(dirname "$0")/procs.sh"
P=16

for t in $threads; do
	daemon --submit-threads "$t"
	say "$(SSEQ_SOCKET=$sock together "daemon-t$t" $P 2000 50 "$B/bench/bench-client" burst 2000 50)"
	cpu_snapshot "$dpid" >"$tmp/cpu0"
	t0=$(date +%s.%N)
	line=$(SSEQ_SOCKET=$sock together "daemon-t$t" $P 20000 0 "$B/bench/bench-client" burst 20000 0)
	t1=$(date +%s.%N)
	cpu_snapshot "$dpid" >"$tmp/cpu1"
	say "$line"
	say "daemon-t$t cpu over $(awk "BEGIN {printf \"%.2f\", $t1 - $t0}")s (setup included): $(cpu_report "$tmp/cpu0" "$tmp/cpu1" "$(awk "BEGIN {print $t1 - $t0}")")"
	for r in 1 2 3; do
		n=$("$B/bench/bench-native" launch "$img" 200000 | sed -n 's/.*launches_per_s=\([0-9]*\).*/\1/p')
		d=$(SSEQ_SOCKET=$sock "$B/bench/bench-client" launch 200000 | sed -n 's/.*launches_per_s=\([0-9]*\).*/\1/p')
		say "daemon-t$t one-client launch run=$r native=$n daemon=$d ratio=$(awk "BEGIN {printf \"%.3f\", $d / $n}")"
	done
	daemon_stop
done
say "$(together native $P 2000 50 "$B/bench/bench-native" burst "$img" 2000 50)"
say "$(together native $P 20000 0 "$B/bench/bench-native" burst "$img" 20000 0)"
# One context's ceiling: what a daemon's submit threads could reach at best.
for t in 1 4 8 16; do say "$("$B/bench/bench-native" threads "$img" "$t" 20000)"; done
export CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d
say "$(together mps $P 2000 50 "$B/bench/bench-native" burst "$img" 2000 50)"
say "$(together mps $P 20000 0 "$B/bench/bench-native" burst "$img" 20000 0)"
echo quit | nvidia-cuda-mps-control
