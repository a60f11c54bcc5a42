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
	t0=$(date +%s.%N)
	timeout 300 python3 -m pytest -q -p no:cacheprovider -p sseq.pytest_plugin -n "$n" \
		bench/gpu-bound >"$O/gpu-bound-n$n.log" 2>&1
	rc=$?
	echo "gpu-bound workers=$n rc=$rc seconds=$(awk "BEGIN {print $(date +%s.%N) - $t0}") options=\"$*\" $(tail -1 "$O/gpu-bound-n$n.log")"
done
kill -TERM "$pid"
wait "$pid"
