#!/bin/bash
# Module functions by name on the GPU: names.cu built by nvcc (a template, overloads,
# dynamic shared memory), loaded into sseqd --backend hip; names.py lists, resolves,
# launches and checks the limits; sseqctl modules shows the functions. Logs to $OUT.
# Usage: tests/gpu/names.sh BUILD   (an NVIDIA build, -Dhip_platform=nvidia;
# BUILD/names.fatbin is used when there, e.g. built where nvcc is:
#   nvcc -fatbin -arch=sm_90 -o BUILD/names.fatbin tests/gpu/names.cu)
set -uo pipefail
B=${1:?usage: names.sh BUILD}
O=${OUT:-/tmp/sseq-gpu}
mkdir -p "$O"
dir=$(mktemp -d)
if [ -s "$B/names.fatbin" ]; then
	cp "$B/names.fatbin" "$dir/"
else
	nvcc -fatbin -arch=sm_90 -o "$dir/names.fatbin" tests/gpu/names.cu || exit 1
fi
export LD_LIBRARY_PATH=$PWD/$B/lib:$PWD/$B/client/lib
sock=$dir/sock
"$B/daemon/sseqd" --backend hip --kernels "$PWD/$B/daemon/backend/hip/sseq-kernels.fatbin" \
	--socket "$sock" --module-dir "$dir" --log-level info 2>"$O/names-sseqd.log" &
pid=$!
for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done
SSEQ_LIBRARY=$PWD/$B/client/lib/libsseq.so PYTHONPATH=$PWD/client/python \
	python3 tests/gpu/names.py "$sock" >"$O/names.txt" 2>&1
rc=$?
# While a session holds the module: what sseqctl modules shows.
SSEQ_LIBRARY=$PWD/$B/client/lib/libsseq.so PYTHONPATH=$PWD/client/python python3 -c '
import sys, time, subprocess, sseq
s = sseq.connect(sys.argv[1]); s.load_module("names.fatbin")
print(subprocess.run([sys.argv[2], "--socket", sys.argv[1], "modules"], capture_output=True, text=True).stdout)
print(subprocess.run([sys.argv[2], "--socket", sys.argv[1], "--json", "modules"], capture_output=True, text=True).stdout)
' "$sock" "$B/client/ctl/sseqctl" >>"$O/names.txt" 2>&1
kill -TERM "$pid"
wait "$pid" || rc=1
rm -rf "$dir"
echo "names rc=$rc: $(grep -c '^ok' "$O/names.txt") checks ok"
exit $rc
