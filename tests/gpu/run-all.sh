#!/bin/bash
# Everything that needs the GPU, in one visit: the hip backend's Check suites (the
# conformance suite, the backend's own with audit and user modules, sseqd through
# libsseq), sseq-stress under --audit clean and with the legacy bug, the race harness, the
# timeline (sseqctl trace --chrome on hip, observed and --device-timeline on, its structure
# checked), module functions by
# name (tests/gpu/names.sh),
# the daemon-vs-native benchmarks, the Python suite with -n 8 and -n 1 against one hip
# daemon, and conv2d against PyTorch. Logs go to $OUT.
# Usage: tests/gpu/run-all.sh DEBUG_BUILD RELEASE_BUILD   (e.g. build-hipnv build-hiprel)
# Preparing the builds on a machine without a GPU, for one that lacks libuv/protobuf-c
# (tests/gpu/prepare.sh does all of it; tests/gpu/visit.sh adds fault.sh and user kernels):
#   meson setup build-hipnv -Dhip=enabled -Dhip_platform=nvidia
#   meson setup build-hiprel -Dhip=enabled -Dhip_platform=nvidia --buildtype=release -Dtests=false
#   ninja -C build-hipnv && ninja -C build-hiprel
#   for b in build-hipnv build-hiprel; do mkdir -p $b/lib; cp /usr/lib/x86_64-linux-gnu/{libuv.so.1,libprotobuf-c.so.1,libsubunit.so.0} $b/lib/; done
set -uo pipefail
D=${1:?usage: run-all.sh DEBUG_BUILD RELEASE_BUILD} R=${2:?}
O=${OUT:-/tmp/sseq-gpu}
mkdir -p "$O"
S=$O/summary.txt
step() { echo "$*" | tee -a "$S"; }
t0=$(date +%s)
el() { echo "$(( $(date +%s) - t0 ))s"; }
export CK_DEFAULT_TIMEOUT=120

# ---- the debug build's suites ----
export LD_LIBRARY_PATH=$PWD/$D/lib:$PWD/$D/client/lib
export SSEQ_KERNELS=$PWD/$D/daemon/backend/hip/sseq-kernels.fatbin
"$D/daemon/server/test-modpath" >"$O/test-modpath.log" 2>&1
step "test-modpath rc=$? $(grep Checks "$O/test-modpath.log")"
for t in daemon/backend/test-backend-hip daemon/backend/hip/test-hip tests/test-hip-daemon; do
	n=$(basename "$t")
	timeout 300 "$D/$t" >"$O/$n.log" 2>&1
	step "$n rc=$? ($(el)) $(grep -E 'Checks' "$O/$n.log")"
	grep -E ":F:|:E:" "$O/$n.log" | head -20 | tee -a "$S"
done

# ---- release build: audit, race harness, benchmarks ----
export LD_LIBRARY_PATH=$PWD/$R/lib:$PWD/$R/client/lib
img=$PWD/$R/daemon/backend/hip/sseq-kernels.fatbin
sock=/tmp/sseq-gpu.sock
start() { rm -f "$sock"; "$R/daemon/sseqd" --backend hip --kernels "$img" --socket "$sock" --log-level warning "$@" 2>"$O/sseqd-$tag.log" & pid=$!; for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done; }
stop() { kill -TERM "$pid"; wait "$pid"; }
tag=audit-clean; start --audit
out=$("$R/client/stress/sseq-stress" --socket "$sock" --ops 100000 --clients 8 --seed 3 | tail -1)
"$R/client/ctl/sseqctl" --socket "$sock" --json stats >"$O/stats-$tag.json"; stop
step "audit clean: $out audit_findings=$(python3 -c "import json;print(json.load(open('$O/stats-$tag.json'))['counters']['audit_findings'])") ($(el))"
# Four loops, as when this step was written: on a loop per CPU each of the 4 clients has
# streams of its own and the legacy race shows by timing far less often.
tag=audit-legacy; start --audit --inject legacy-sync-window=4 --loops 4
out=$("$R/client/stress/sseq-stress" --socket "$sock" --ops 20000 --clients 4 --seed 7 | tail -1)
"$R/client/ctl/sseqctl" --socket "$sock" --json stats >"$O/stats-$tag.json"; stop
step "audit legacy-sync-window=4: $out audit_findings=$(python3 -c "import json;print(json.load(open('$O/stats-$tag.json'))['counters']['audit_findings'])") first: $(grep -m1 'audit:' "$O/sseqd-$tag.log")"
OUT=$O bash tests/gpu/race-harness.sh "$R" >"$O/race.txt" 2>&1; step "$(cat "$O/race.txt")"
# The timeline on the GPU: sseqctl trace --chrome, its structure checked; observed times by
# default, and with --device-timeline on every entry device-timed (issue <= start <= end <=
# complete, each consumer starting after its producer ended, on the GPU's clock).
tag=timeline; start
"$R/client/stress/sseq-stress" --socket "$sock" --ops 3000 --clients 4 --lanes 2 --seed 9 >/dev/null 2>&1
"$R/client/ctl/sseqctl" --socket "$sock" trace --chrome "$O/timeline-hip.json" 2>"$O/timeline-hip.err"
step "timeline on hip: $(python3 tests/timeline-check.py "$O/timeline-hip.json" --min-ops 100 --min-flows 1 2>&1 | tail -1) ($(cat "$O/timeline-hip.err"))"
stop
tag=timeline-device; start --device-timeline on
"$R/client/stress/sseq-stress" --socket "$sock" --ops 3000 --clients 4 --lanes 2 --seed 9 >/dev/null 2>&1
"$R/client/ctl/sseqctl" --socket "$sock" trace --chrome "$O/timeline-hip-device.json" 2>"$O/timeline-hip-device.err"
step "timeline on hip, --device-timeline on: $(python3 tests/timeline-check.py "$O/timeline-hip-device.json" --min-ops 100 --min-flows 1 --device 2>&1 | tail -1) ($(cat "$O/timeline-hip-device.err"))"
stop
# Module functions by name, their attributes and limits (names.cu: build R/names.fatbin
# beforehand where nvcc is, see names.sh).
OUT=$O bash tests/gpu/names.sh "$R" >"$O/names-summary.txt" 2>&1; step "$(tail -1 "$O/names-summary.txt")"
# Cooperative launches and thread-block clusters (launch-attrs.cu, built as names.cu is).
OUT=$O bash tests/gpu/launch-attrs.sh "$R" >"$O/launch-attrs-summary.txt" 2>&1; step "$(tail -1 "$O/launch-attrs-summary.txt")"
OUT=$O bash bench/h200.sh "$R" >/dev/null 2>&1; step "$(cat "$O/bench.txt")"

# ---- Python: the suite with -n 8 and -n 1 against one hip daemon; conv2d vs torch ----
tag=python; start
export PYTHONPATH=$PWD/client/python SSEQ_SOCKET=$sock SSEQ_LIBRARY=$PWD/$R/client/lib/libsseq.so.0 PYTHONDONTWRITEBYTECODE=1
for n in 8 1; do
	s0=$(date +%s.%N)
	timeout 240 python3 -m pytest -q -n $n -p sseq.pytest_plugin tests/python >"$O/pytest-n$n.log" 2>&1
	rc=$?
	step "pytest -n $n rc=$rc seconds=$(awk "BEGIN {print $(date +%s.%N) - $s0}") $(tail -1 "$O/pytest-n$n.log")"
done
timeout 240 python3 tests/gpu/conv2d_torch.py 300 1 >"$O/conv2d-torch.log" 2>&1
step "conv2d_torch rc=$? $(tail -1 "$O/conv2d-torch.log")"
stop
step "done ($(el))"
# Only eight files come back: pack the logs into one.
tar czf /tmp/sseq-gpu-logs.tgz -C "$O" . && find "$O" -type f ! -name summary.txt -delete && mv /tmp/sseq-gpu-logs.tgz "$O/logs.tgz"
