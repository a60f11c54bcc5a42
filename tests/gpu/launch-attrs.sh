#!/bin/bash
# Launch attributes on the GPU: launch-attrs.cu built by nvcc (a cooperative kernel
# using grid.sync(), kernels in thread-block clusters), loaded into
# sseqd --backend hip --audit --verify; launch_attrs.py launches them with cooperative=
# and cluster=, checks each result and the refusals, one PASS/FAIL line each. Logs to
# $OUT.
# Usage: tests/gpu/launch-attrs.sh BUILD   (an NVIDIA build, -Dhip_platform=nvidia;
# BUILD/launch-attrs.fatbin is used when there, e.g. built where nvcc is:
#   nvcc -fatbin -arch=sm_90 -o BUILD/launch-attrs.fatbin tests/gpu/launch-attrs.cu)
set -uo pipefail
B=${1:?usage: launch-attrs.sh BUILD}
O=${OUT:-/tmp/sseq-gpu}
mkdir -p "$O"
dir=$(mktemp -d)
if [ -s "$B/launch-attrs.fatbin" ]; then
	cp "$B/launch-attrs.fatbin" "$dir/"
else
	nvcc -fatbin -arch=sm_90 -o "$dir/launch-attrs.fatbin" tests/gpu/launch-attrs.cu || exit 1
fi
export LD_LIBRARY_PATH=$PWD/$B/lib:$PWD/$B/client/lib
sock=$dir/sock
"$B/daemon/sseqd" --backend hip --kernels "$PWD/$B/daemon/backend/hip/sseq-kernels.fatbin" \
	--socket "$sock" --module-dir "$dir" --audit --verify --log-level info \
	2>"$O/launch-attrs-sseqd.log" &
pid=$!
for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done
SSEQ_LIBRARY=$PWD/$B/client/lib/libsseq.so PYTHONPATH=$PWD/client/python \
	python3 tests/gpu/launch_attrs.py "$sock" 2>&1 | tee "$O/launch-attrs.txt"
rc=${PIPESTATUS[0]}
kill -TERM "$pid"
wait "$pid" || { echo "FAIL sseqd exited non-zero (see $O/launch-attrs-sseqd.log)"; rc=1; }
rm -rf "$dir"
echo "launch-attrs rc=$rc: $(grep -c '^PASS' "$O/launch-attrs.txt") passed, $(grep -c '^FAIL' "$O/launch-attrs.txt") failed"
exit $rc
