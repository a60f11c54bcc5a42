#!/bin/bash
# Correctness with compute lanes on a real GPU: 16 sseq-stress clients (a lane each)
# through sseqd --audit, clean (expect 0 wrong, 0 findings) and with the legacy window
# injected (expect it caught), then the race harness. Logs under $OUT.
# Usage: tests/gpu/lanes.sh RELEASE_BUILD
set -uo pipefail
R=${1:?usage: lanes.sh RELEASE_BUILD}
O=${OUT:-/tmp/sseq-gpu}
mkdir -p "$O"
export LD_LIBRARY_PATH=$PWD/$R/lib:$PWD/$R/client/lib
img=$PWD/$R/daemon/backend/hip/sseq-kernels.fatbin
sock=/tmp/sseq-lanes.sock
for args in "--audit" "--audit --inject legacy-sync-window=4"; do
	rm -f "$sock"
	# shellcheck disable=SC2086 # options, one word each
	"$R/daemon/sseqd" --backend hip --kernels "$img" --socket "$sock" --log-level warning $args \
		2>"$O/lanes-sseqd.log" &
	pid=$!
	for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done
	out=$("$R/client/stress/sseq-stress" --socket "$sock" --ops 100000 --clients 16 --seed 5 | tail -1)
	"$R/client/ctl/sseqctl" --socket "$sock" --json status >"$O/lanes-stats.json"
	busy=$(python3 -c "import json; d=json.load(open('$O/lanes-stats.json')); print(sum(1 for s in d['streams'] if s['kind'] == 'compute' and int(s.get('last_issued', 0)) > 0))")
	findings=$(python3 -c "import json; print(json.load(open('$O/lanes-stats.json'))['counters'].get('audit_findings', 0))")
	kill -TERM "$pid"
	wait "$pid"
	echo "lanes stress 16 clients args=\"$args\" $out audit_findings=$findings compute_streams_used=$busy sseqd_exit=$?"
done
