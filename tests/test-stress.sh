#!/bin/bash
# End-to-end through libsseq: sseq-stress against a real sseqd. Without injections the
# daemon must sequence 100,000 random ops with no wrong result and no race; with each
# legacy bug injected, the same workload must expose it; a stress client killed with
# kill -9 mid-work must leave no buffer and no memory behind.
# Usage: test-stress.sh SSEQD SSEQ_STRESS SSEQCTL
set -euo pipefail
sseqd=$1 stress=$2 ctl=$3
tmp=$(mktemp -d)
pid=
cleanup() { [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

start() { # start a daemon with extra args; sets $sock and $pid
	sock=$tmp/d$RANDOM.sock
	"$sseqd" --backend sim --socket "$sock" --log-level warning "$@" 2>>"$tmp/daemon.log" &
	pid=$!
	for _ in $(seq 200); do [ -S "$sock" ] && return; sleep 0.05; done
	fail "sseqd did not start: $(cat "$tmp/daemon.log")"
}
stop() { # stop it; a non-zero exit (sanitizer report, crash) fails the test
	kill -TERM "$pid"
	wait "$pid" || fail "sseqd exited with status $?: $(tail -20 "$tmp/daemon.log")"
	pid=
}
field() { sed -n "s/.*\b$1=\([0-9]*\).*/\1/p" <<<"$2"; }

echo "== no injection: 100,000 ops, 4 clients, seed 7"
start --sim-delay h2d=rand:0-200us
out=$("$stress" --socket "$sock" --ops 100000 --clients 4 --seed 7 | tail -1) ||
	fail "sseq-stress failed: $out"
echo "$out"
[ "$(field wrong "$out")" = 0 ] && [ "$(field races "$out")" = 0 ] && [ "$(field errors "$out")" = 0 ] ||
	fail "expected wrong=0 errors=0 races=0: $out"
[ "$(field ops "$out")" -ge 100000 ] || fail "fewer ops than asked: $out"
stop

echo "== lanes: 20,000 ops, 4 clients of 4 lanes each, random delays on every stream"
start --sim-delay all=rand:0-100us
out=$("$stress" --socket "$sock" --ops 20000 --clients 4 --lanes 4 --seed 9 | tail -1) ||
	fail "sseq-stress failed with lanes: $out"
echo "$out"
[ "$(field wrong "$out")" = 0 ] && [ "$(field races "$out")" = 0 ] && [ "$(field errors "$out")" = 0 ] ||
	fail "expected wrong=0 errors=0 races=0 with lanes: $out"
lanes=$("$ctl" --socket "$sock" streams | awk '$2 == "compute" && $4 > 0' | wc -l)
[ "$lanes" -ge 8 ] || fail "the clients' work ran on $lanes compute streams, not on their lanes"
stop

echo "== request rings: 20,000 ops, 4 clients writing their requests into shared memory"
start --sim-delay all=rand:0-100us
out=$(SSEQ_REQUEST_RING=1 "$stress" --socket "$sock" --ops 20000 --clients 4 --seed 11 | tail -1) ||
	fail "sseq-stress failed with request rings: $out"
echo "$out"
[ "$(field wrong "$out")" = 0 ] && [ "$(field races "$out")" = 0 ] && [ "$(field errors "$out")" = 0 ] ||
	fail "expected wrong=0 errors=0 races=0 with request rings: $out"
rb=$("$ctl" --socket "$sock" --json stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["counters"]["ring_bytes"])')
[ "$rb" -gt 100000 ] || fail "the requests did not come through the rings: ring_bytes=$rb"
stop

for inj in "--inject legacy-sync-window=4 --sim-delay h2d=2ms" "--inject early-free" \
	"--inject slice-outlives-base"; do
	echo "== injected: $inj"
	# shellcheck disable=SC2086
	start $inj
	if out=$("$stress" --socket "$sock" --ops 20000 --clients 4 --seed 7 | tail -1); then
		fail "sseq-stress passed with $inj: the injected bug went unnoticed: $out"
	fi
	echo "$out"
	[ "$(field wrong "$out")" -gt 0 ] || [ "$(field races "$out")" -gt 0 ] ||
		fail "expected wrong or races above 0 with $inj: $out"
	stop
done

echo "== a dropped wait, no delays at all: the schedule checker reports it"
start --inject drop-wait=20
out=$("$stress" --socket "$sock" --ops 4000 --clients 2 --seed 11 | tail -1) || true # it exits 1: races
echo "$out"
vf=$("$ctl" --socket "$sock" --json stats | python3 -c 'import json,sys; print(json.load(sys.stdin)["counters"]["verify_findings"])')
[ "$vf" -gt 0 ] || fail "drop-wait=20 without delays: the checker found nothing ($out)"
echo "checker findings: $vf"
stop

echo "== kill -9 mid-work leaves nothing behind"
start --sim-delay compute=200us
"$stress" --socket "$sock" --ops 10000000 --clients 4 --seed 9 >/dev/null 2>&1 &
victim=$!
for _ in $(seq 100); do
	n=$("$ctl" --socket "$sock" --json buffers | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["buffers"]))')
	[ "$n" -gt 0 ] && break
	sleep 0.05
done
[ "$n" -gt 0 ] || fail "the stress client never held a buffer"
echo "stress client holds $n buffers; kill -9"
kill -KILL "$victim"
wait "$victim" 2>/dev/null || true
for _ in $(seq 200); do
	left=$("$ctl" --socket "$sock" --json status | python3 -c '
import json, sys
s = json.load(sys.stdin)
others = [c for c in s["clients"] if c["name"] != "sseqctl"]  # the asker itself
print(len(others), s["device"]["memory_used"])')
	[ "$left" = "0 0" ] && break
	sleep 0.05
done
[ "$left" = "0 0" ] || fail "after kill -9: clients and memory left: $left"
n=$("$ctl" --socket "$sock" --json buffers | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["buffers"]))')
[ "$n" = 0 ] || fail "buffers left: $("$ctl" --socket "$sock" --json buffers)"
echo "nothing left: 0 clients, 0 bytes, no buffers"
stop
echo "PASS"
