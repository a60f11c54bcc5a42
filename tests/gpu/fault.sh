#!/bin/bash
# GPU faults on a real GPU, through one sseqd: the project's Python suite with -n 16
# workers while one more client launches a kernel that writes 1 TiB out of bounds; the
# other clients' tests must pass or fail only with the reset's DEVICE_ERROR (none hangs,
# none gets wrong data); then the whole suite again without a daemon restart; then a trap
# and a failed device assert, each reset in place; the recovery time each time (fault to
# a new client's first kernel completing). Logs under $OUT.
# Usage: tests/gpu/fault.sh RELEASE_BUILD MODULE_DIR   (MODULE_DIR holds gpu-faults.fatbin)
# $SSEQD_OPTS: more options for sseqd (--loops 4: the restart in place of every loop).
set -uo pipefail
R=${1:?usage: fault.sh RELEASE_BUILD MODULE_DIR} M=$(realpath "${2:?}")
O=${OUT:-/tmp/sseq-gpu}
mkdir -p "$O"
export LD_LIBRARY_PATH=$PWD/$R/lib:$PWD/$R/client/lib
export PYTHONPATH=$PWD/client/python PYTHONDONTWRITEBYTECODE=1
export SSEQ_LIBRARY=$PWD/$R/client/lib/libsseq.so.0
img=$PWD/$R/daemon/backend/hip/sseq-kernels.fatbin
sock=/tmp/sseq-fault.sock
export SSEQ_SOCKET=$sock
rm -f "$sock"
# shellcheck disable=SC2086 # options, one word each
"$R/daemon/sseqd" --backend hip --kernels "$img" --socket "$sock" --module-dir "$M" \
	--log-level notice ${SSEQD_OPTS:-} 2>"$O/fault-sseqd.log" &
pid=$!
for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done

t0=$(date +%s.%N)
timeout 300 python3 -m pytest -q -n 16 -p sseq.pytest_plugin -p no:cacheprovider tests/python \
	>"$O/fault-pytest-during.log" 2>&1 &
ppid=$!
# Once most workers are connected and running tests (xdist takes ~4 s to start them; each
# connects at its first test and the first to finish leave before the last connect, so all
# 16 are rarely there at once: with a loop per CPU the suite runs faster and they were not,
# and this wait used to run out while the suite ended).
clients() {
	"$R/client/ctl/sseqctl" --socket "$sock" --json clients 2>/dev/null |
		python3 -c "import json,sys; print(len(json.load(sys.stdin)['clients']))" 2>/dev/null
}
for _ in $(seq 100); do
	n=$(clients)
	[ "${n:-0}" -ge "${FAULT_CLIENTS:-8}" ] && break
	sleep 0.1
done
sleep "${FAULT_AFTER_S:-0.2}"
n=$(clients)
echo "clients connected when the fault came: ${n:-0}"
python3 tests/gpu/fault_client.py oob_write 2>&1 | tee "$O/fault-oob.txt"
wait "$ppid"
rc=$?
failed=$(grep -c '^FAILED' "$O/fault-pytest-during.log")
named=$(grep '^FAILED' "$O/fault-pytest-during.log" | grep -c 'device reset')
echo "during the fault: pytest -n 16 rc=$rc seconds=$(awk "BEGIN {print $(date +%s.%N) - $t0}") $(tail -1 "$O/fault-pytest-during.log"); failed=$failed of which naming the reset=$named"
grep -c 'this test was a bystander\|this test caused' "$O/fault-pytest-during.log" |
	sed 's/^/  reports with the plugin'"'"'s reset section: /'
t0=$(date +%s.%N)
timeout 300 python3 -m pytest -q -n 16 -p sseq.pytest_plugin -p no:cacheprovider tests/python \
	>"$O/fault-pytest-after.log" 2>&1
echo "after, same daemon: pytest -n 16 rc=$? seconds=$(awk "BEGIN {print $(date +%s.%N) - $t0}") $(tail -1 "$O/fault-pytest-after.log")"
for k in trap_now assert_nonzero oob_write; do
	python3 tests/gpu/fault_client.py "$k" 2>&1 | sed 's/ message=.*//'
done
"$R/client/ctl/sseqctl" --socket "$sock" status | head -3
"$R/client/ctl/sseqctl" --socket "$sock" --json stats >"$O/fault-stats.json"
python3 -c "import json; c=json.load(open('$O/fault-stats.json'))['counters']; print('device_resets', c.get('device_resets'), 'buffers_lost', c.get('buffers_lost'))"
kill -TERM "$pid"
wait "$pid"
echo "sseqd exit=$? (pid $pid, never restarted)"
grep -E 'reset:' "$O/fault-sseqd.log" | head -12
