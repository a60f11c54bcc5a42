#!/bin/bash
# Where a burst of copies through the daemon spends its time (D2D bursts of 8 reach 91-96%
# of native): one client's `bench-client copy` bursts (H2D, D2H, D2D, each SIZE bytes,
# bursts of 8 and 32) through sseqd --device-timeline on, each burst's trace split by
# bench/burst-gaps.py into the loop's hand-off to the device (lead), the device's idle time
# inside the burst (gaps), the copies themselves (device) and the completion's way back to
# the loop (tail). Prints bench-client's bandwidth and the split for each burst length.
# $BACKEND (default hip; sim: the worker's clock stands in for the device's), $PYTHON,
# $SSEQD_OPTS (more options for sseqd, e.g. --submit-idle inline). With $LATENCY=N, one run
# of `bench-client latency N` instead (N lone 4 KiB H2D + await, each a burst of one): its
# median round trip as the client saw it, beside the daemon's part of it split the same way.
# Usage: bench/burst-gaps.sh BUILD_DIR [SIZE]   (e.g. build-gpur 268435456)
set -uo pipefail
B=${1:?usage: burst-gaps.sh BUILD_DIR [SIZE]}
size=${2:-268435456}
here=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-$(mktemp -d)}
mkdir -p "$O"
sock=$O/burst-gaps.sock
py=${PYTHON:-python3}
# shellcheck disable=SC2012 # one file of a known name
img=$(ls "$B"/daemon/backend/hip/sseq-kernels.* 2>/dev/null | head -1)

runs="8 32"
[ -n "${LATENCY:-}" ] && runs=latency
for burst in $runs; do
	rm -f "$sock"
	# shellcheck disable=SC2086 # options, one word each
	"$B/daemon/sseqd" --backend "${BACKEND:-hip}" ${img:+--kernels "$img"} --socket "$sock" \
		--device-timeline on --log-level warning ${SSEQD_OPTS:-} 2>>"$O/burst-gaps-sseqd.log" &
	dp=$!
	for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
	if [ "$burst" = latency ]; then
		SSEQ_SOCKET="$sock" "$B/bench/bench-client" latency "$LATENCY" | tail -1
	else
		SSEQ_SOCKET="$sock" SSEQ_BENCH_BURST=$burst "$B/bench/bench-client" copy "$size" | tail -1
	fi
	SSEQ_SOCKET="$sock" "$B/client/ctl/sseqctl" trace --chrome "$O/burst$burst.json" >/dev/null
	"$py" "$here/burst-gaps.py" "$O/burst$burst.json" "burst$burst${SSEQD_OPTS:+ opts=\"$SSEQD_OPTS\"}"
	kill -TERM "$dp"
	wait "$dp"
done
