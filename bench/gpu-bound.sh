#!/bin/bash
# The GPU-bound pytest suite (bench/gpu-bound/) against one hip sseqd, with -n 1 and
# -n 8 pytest-xdist workers: the ratio of the two wall times is how well workers sharing
# a GPU run side by side. Prints one key=value line per run, writes under $OUT.
# Usage: bench/gpu-bound.sh BUILD_DIR [extra sseqd options...]
set -uo pipefail
B=${1:?usage: gpu-bound.sh BUILD_DIR [sseqd options...]}
shift
O=${OUT:-/tmp/sseq-bench}
mkdir -p "$O"
export LD_LIBRARY_PATH=$PWD/$B/lib:$PWD/$B/client/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
img=$(ls "$B"/daemon/backend/hip/sseq-kernels.* 2>/dev/null | head -1)
sock=$(mktemp -u /tmp/sseq-gpu-bound.XXXXXX.sock)
"$B/daemon/sseqd" --backend hip --kernels "$img" --socket "$sock" --log-level warning "$@" \
	2>"$O/gpu-bound-sseqd.log" &
pid=$!
for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done
export PYTHONPATH=$PWD/client/python SSEQ_SOCKET=$sock PYTHONDONTWRITEBYTECODE=1
export SSEQ_LIBRARY=$PWD/$B/client/lib/libsseq.so.0
for n in 1 8; do
	# What the daemon serves halfway through: who holds which lane, how far each got.
	(sleep 3; "$B/client/ctl/sseqctl" --socket "$sock" streams >"$O/gpu-bound-n$n-streams.txt" 2>&1) &
	t0=$(date +%s.%N)
	timeout 400 python3 -m pytest -q -p no:cacheprovider -p sseq.pytest_plugin -n "$n" \
		--durations=3 bench/gpu-bound >"$O/gpu-bound-n$n.log" 2>&1
	rc=$?
	echo "gpu-bound workers=$n rc=$rc seconds=$(awk "BEGIN {print $(date +%s.%N) - $t0}") options=\"$*\" spin_us=${GPU_BOUND_SPIN_US:-20000} spin_only=${GPU_BOUND_SPIN_ONLY:-0} $(tail -1 "$O/gpu-bound-n$n.log")"
	grep -E '^[0-9.]+s (call|setup|teardown)' "$O/gpu-bound-n$n.log" | head -3 | sed 's/^/  slowest: /'

done
kill -TERM "$pid"
wait "$pid"
