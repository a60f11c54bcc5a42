#!/bin/bash
# Every GPU suite in one visit, for builds made by tests/gpu/prepare.sh: run-all.sh (the
# Check suites, audit, race harness, timelines, names, launch attributes, the benchmarks
# against native, Python, conv2d), fault.sh (faults during and after the Python suite,
# each reset in place) and user-kernels.sh. The summary lines go to $OUT/visit.txt and
# stdout, every log into $OUT/logs.tgz (a call brings back at most eight files).
# Usage: tests/gpu/visit.sh [DEBUG_DIR] [RELEASE_DIR]   (defaults build-gpud build-gpur)
set -uo pipefail
D=${1:-build-gpud} R=${2:-build-gpur}
O=${OUT:-/tmp/sseq-gpu}
mkdir -p "$O/run-all" "$O/fault" "$O/user-kernels"
s=$O/visit.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$s"
echo "cpus=$(nproc)" >>"$s"
t0=$(date +%s)
OUT=$O/run-all timeout 330 bash tests/gpu/run-all.sh "$D" "$R" >"$O/run-all/out.txt" 2>&1
echo "run-all rc=$? $(($(date +%s) - t0))s" >>"$s"
cat "$O/run-all/summary.txt" >>"$s"
t0=$(date +%s)
OUT=$O/fault timeout 150 bash tests/gpu/fault.sh "$R" "$D/daemon/backend/hip" >"$O/fault/out.txt" 2>&1
echo "fault rc=$? $(($(date +%s) - t0))s" >>"$s"
cat "$O/fault/out.txt" >>"$s"
t0=$(date +%s)
OUT=$O/user-kernels timeout 90 bash tests/gpu/user-kernels.sh "$R" >"$O/user-kernels/out.txt" 2>&1
echo "user-kernels rc=$? $(($(date +%s) - t0))s" >>"$s"
tail -3 "$O/user-kernels/out.txt" >>"$s"
tar czf /tmp/sseq-visit-logs.tgz -C "$O" run-all fault user-kernels &&
	rm -rf "$O/run-all" "$O/fault" "$O/user-kernels" && mv /tmp/sseq-visit-logs.tgz "$O/logs.tgz"
cat "$s"
