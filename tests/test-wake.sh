#!/bin/bash
# The loop's wake-ups: whether it spins (--spin-us) or sleeps, a completion reaches it
# and its answer is written before it sleeps again. A change that skipped the wake-up of
# a spinning loop without taking the queue once more where the spin stops left a lone
# client's read-backs waiting for the next tick or event: 3,000 round trips (alloc, fill,
# download, wait, free) took 27-39 s on a 2-core machine instead of under one. Here 3,000
# of them on the sim, with the default spin and with --spin-us 20 (the spin stops and
# starts all the time), must each finish within 20 s: a liveness bound twenty times what
# they take, not a measurement.
# Usage: test-wake.sh SSEQD BENCH_ROUNDTRIP
set -euo pipefail

sseqd=$1
roundtrip=$2
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
sock=$dir/s.sock

for spin in 2000 20; do
	rm -f "$sock"
	"$sseqd" --backend sim --socket "$sock" --spin-us "$spin" --log-level warning \
		2>"$dir/sseqd.log" &
	daemon_pid=$!
	wait_socket "$sock"
	t0=$(date +%s%N)
	out=$(SSEQ_SOCKET=$sock timeout 60 "$roundtrip" 3000 2>&1 | tail -1) ||
		fail "--spin-us $spin: the round trips did not finish in 60 s: $out"
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "--spin-us $spin: 3000 round trips in $ms ms: $out"
	[[ $out == *"rounds=3000"* ]] || fail "--spin-us $spin: no result: $out"
	((ms < 20000)) || fail "--spin-us $spin: 3000 round trips took $ms ms (a lost wake-up)"
	kill -TERM "$daemon_pid"
	wait "$daemon_pid" || fail "sseqd --spin-us $spin exited with $?"
done
echo "ok"
