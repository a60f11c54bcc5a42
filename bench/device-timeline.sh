#!/bin/bash
# What sseqd --device-timeline on costs in launch rate: rounds alternating off and on (the
# machine's rate moves by ±20% from minute to minute, so each on run is paired with the
# off run just before it), each one client's pipelined empty-kernel launches and 16
# processes x 20,000 empty kernels started together. Prints each run, then the medians and
# the median of the paired on/off ratios. Writes under $OUT.
# Usage: bench/device-timeline.sh BUILD_DIR [ROUNDS]   (e.g. build-hiprel 5)
set -uo pipefail
B=${1:?usage: device-timeline.sh BUILD_DIR [ROUNDS]}
rounds=${2:-5}
name=device-timeline
. "$(dirname "$0")/procs.sh"
P=16

median() { sort -n | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

for r in $(seq "$rounds"); do
	for mode in off on; do
		daemon --device-timeline "$mode"
		one=$(SSEQ_SOCKET=$sock "$B/bench/bench-client" launch 200000 |
			sed -n 's/.*launches_per_s=\([0-9]*\).*/\1/p')
		line=$(SSEQ_SOCKET=$sock together "timeline-$mode" $P 20000 0 \
			"$B/bench/bench-client" burst 20000 0)
		multi=$(echo "$line" | sed -n 's/.*aggregate_kernels_per_s=\([0-9]*\).*/\1/p')
		daemon_stop
		say "round=$r device_timeline=$mode one_client_launches_per_s=$one procs16_kernels_per_s=$multi"
		echo "$one" >>"$tmp/one-$mode"
		echo "$multi" >>"$tmp/multi-$mode"
	done
done
for m in one multi; do
	paste "$tmp/$m-off" "$tmp/$m-on" | awk '{ printf "%.4f\n", $2 / $1 }' >"$tmp/$m-ratio"
	say "$m: median off=$(median <"$tmp/$m-off") on=$(median <"$tmp/$m-on") paired on/off median=$(median <"$tmp/$m-ratio")"
done
