#!/bin/bash
# Launch throughput of two libsseq builds against one sim sseqd, run alternately so a
# noisy machine's load falls on both alike: bench-client launch (C, pipelined empty
# kernels) and the same loop in Python. Prints each run, then the medians; with perf
# (and tracepoints readable) also the client's and daemon's system calls per launch.
# The baseline is another build's client/lib (e.g. a worktree at an older commit).
# Usage: bench/libsseq-ab.sh BUILD BASE_LIBDIR [ROUNDS [N_C [N_PY]]]
set -euo pipefail
build=$(realpath "${1:?usage: libsseq-ab.sh BUILD BASE_LIBDIR [ROUNDS [N_C [N_PY]]]}")
base=$(realpath "${2:?usage: libsseq-ab.sh BUILD BASE_LIBDIR [ROUNDS [N_C [N_PY]]]}")
rounds=${3:-10} nc=${4:-200000} npy=${5:-30000}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT
sock=$tmp/s.sock
"$build/daemon/sseqd" --backend sim --socket "$sock" --log-level warning ${SSEQD_ARGS:-} 2>"$tmp/log" &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
sleep 0.2
export SSEQ_SOCKET=$sock
cat >"$tmp/loop.py" <<'EOF'
import sys, time, sseq
s = sseq.connect()
n, arg = int(sys.argv[1]), sseq.u64(0)
for _ in range(1000):
    s.execute("spin", arg)
s.sync()
t0 = time.perf_counter()
for _ in range(n):
    s.execute("spin", arg)
s.sync()
print(f"python launch count={n} launches_per_s={n / (time.perf_counter() - t0):.0f}")
EOF
ev=syscalls:sys_enter_sendmsg,syscalls:sys_enter_recvfrom,syscalls:sys_enter_read,syscalls:sys_enter_write
perf=
if command -v perf >/dev/null && perf stat -x, -e "$ev" true >/dev/null 2>&1; then perf=1; fi
per_launch() { # perf csv, count
	awk -F, -v n="$2" '/sys_enter/ {split($3, a, "_enter_"); printf "%s=%.3f ", a[2], $1 / n}' "$1"
}
one() { # name libdir kind count
	local out calls=
	if [ -n "$perf" ]; then
		perf stat -x, -e "$ev" -p "$pid" -o "$tmp/d" &
		local pp=$!
		sleep 0.1
	fi
	if [ "$3" = c ]; then
		out=$(LD_LIBRARY_PATH=$2 ${perf:+perf stat -x, -e "$ev" -o "$tmp/c"} \
			"$build/bench/bench-client" launch "$4")
	else
		out=$(PYTHONPATH=$root/client/python SSEQ_LIBRARY=$2/libsseq.so.0 \
			${perf:+perf stat -x, -e "$ev" -o "$tmp/c"} "${PYTHON:-python3}" "$tmp/loop.py" "$4")
	fi
	if [ -n "$perf" ]; then
		kill -INT $pp
		wait $pp 2>/dev/null || true
		calls=" client: $(per_launch "$tmp/c" "$4")daemon: $(per_launch "$tmp/d" "$4")"
	fi
	echo "$1 $3 $(echo "$out" | sed -n 's/.*launches_per_s=\([0-9]*\).*/\1/p')$calls"
}
for _ in $(seq "$rounds"); do
	for kind in c py; do
		n=$nc
		[ $kind = py ] && n=$npy
		one base "$base" $kind $n
		one new "$build/client/lib" $kind $n
	done
done | tee "$tmp/runs"
echo "medians (launches/s):"
awk '{ v[$1 " " $2] = v[$1 " " $2] " " $3 } END { for (k in v) print k, v[k] }' "$tmp/runs" |
	sort | while read -r who kind vals; do
	echo "  $who $kind $(echo $vals | tr ' ' '\n' | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')"
done
