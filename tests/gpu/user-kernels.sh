#!/bin/bash
# The project's own user kernels on the GPU: user-kernels.cu built by nvcc (templated and
# overloaded names, a struct and narrow scalars by value, a __constant__ filter set
# between launches and a __device__ counter as module globals, > 48 KiB of dynamic
# shared memory, a 3-D launch), loaded into sseqd --backend hip --audit --verify;
# test_user_kernels.py checks each against numpy under 8 xdist workers; the checker's
# and the audit's findings from sseqctl --json stats must be 0. Logs to $OUT.
# Usage: tests/gpu/user-kernels.sh BUILD   (an NVIDIA build, -Dhip_platform=nvidia;
# BUILD/user-kernels.fatbin is used when there, e.g. built where nvcc is:
#   nvcc -fatbin -arch=sm_90 -o BUILD/user-kernels.fatbin tests/gpu/user-kernels.cu)
set -uo pipefail
B=${1:?usage: user-kernels.sh BUILD}
O=${OUT:-/tmp/sseq-gpu}
mkdir -p "$O"
dir=$(mktemp -d)
if [ -s "$B/user-kernels.fatbin" ]; then
	cp "$B/user-kernels.fatbin" "$dir/"
else
	nvcc -fatbin -arch=sm_90 -o "$dir/user-kernels.fatbin" tests/gpu/user-kernels.cu || exit 1
fi
export LD_LIBRARY_PATH=$PWD/$B/lib:$PWD/$B/client/lib
sock=$dir/sock
"$B/daemon/sseqd" --backend hip --kernels "$PWD/$B/daemon/backend/hip/sseq-kernels.fatbin" \
	--socket "$sock" --module-dir "$dir" --audit --verify --log-level info \
	2>"$O/user-kernels-sseqd.log" &
pid=$!
for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done
SSEQ_SOCKET=$sock SSEQ_REQUIRE=1 SSEQ_LIBRARY=$PWD/$B/client/lib/libsseq.so.0 PYTHONDONTWRITEBYTECODE=1 \
	PYTHONPATH=$PWD/client/python \
	python3 -m pytest -n 8 -p sseq.pytest_plugin -p no:cacheprovider -q \
	tests/gpu/test_user_kernels.py >"$O/user-kernels.txt" 2>&1
rc=$?
"$B/client/ctl/sseqctl" --socket "$sock" --json stats >"$O/user-kernels-stats.json"
findings=$(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["counters"]
print("verify_findings=%d audit_findings=%d race_findings=%d waits_enqueued=%d" % (
    c.get("verify_findings", -1), c.get("audit_findings", -1), c.get("race_findings", -1),
    c.get("waits_enqueued", -1)))
bad = c.get("verify_findings", 1) or c.get("audit_findings", 1) or c.get("race_findings", 1)
sys.exit(1 if bad else 0)' "$O/user-kernels-stats.json") || rc=1
kill -TERM "$pid"
wait "$pid" || rc=1
grep -E '^<[0-3]>' "$O/user-kernels-sseqd.log" | head -20
rm -rf "$dir"
echo "user-kernels rc=$rc: $(tail -1 "$O/user-kernels.txt"); $findings"
exit $rc
