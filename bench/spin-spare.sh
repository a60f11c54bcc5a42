#!/bin/bash
# How the clients' spinning affects a read-back under many workers: the download-only
# test's Python body (bench/py-phases.py) run by P processes at once, the pytest
# download-only test at -n 0 / 8 / 16 (bench/short-tests.sh), and the C clients' round
# trip (bench/roundtrip.sh one), each under client settings that alternate: the default
# (a client leaves $SSEQ_SPIN_SPARE cores, by default a quarter, to the daemon's threads),
# SSEQ_SPIN_SPARE=0 (spin whenever one core is free) and SSEQ_SPIN_POLICY=never.
# Prints one line per run; everything goes under $OUT (default /tmp/sseq-bench).
# Usage: bench/spin-spare.sh BUILD_DIR   ($ROUNDS: py-phases rounds, default 1000;
#   $SETTINGS: the client settings, words of VAR=VALUE, X=1 for the default)
set -uo pipefail
B=${1:?usage: spin-spare.sh BUILD_DIR}
O=${OUT:-/tmp/sseq-bench}
mkdir -p "$O"
log=$O/spin-spare.txt
settings=${SETTINGS:-X=1 SSEQ_SPIN_SPARE=0 SSEQ_SPIN_POLICY=never}
PY=${PYTHON:-python3}
say() { echo "$*" | tee -a "$log"; }
export LD_LIBRARY_PATH=$PWD/$B/lib:$PWD/$B/client/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
img=$(ls "$B"/daemon/backend/hip/sseq-kernels.* 2>/dev/null | head -1)
sock=/tmp/sseq-bench-spin.sock
say "date=$(date -u +%FT%TZ) host=$(hostname) cpus=$(nproc) gpu=\"$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)\""
rm -f "$sock"
"$B/daemon/sseqd" --backend "${BACKEND:-hip}" ${img:+--kernels "$PWD/$img"} --socket "$sock" \
	--log-level warning 2>>"$O/spin-spare-sseqd.log" &
dpid=$!
for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done
export SSEQ_SOCKET=$sock SSEQ_LIBRARY=$PWD/$B/client/lib/libsseq.so.0
export PYTHONPATH=$PWD/client/python PYTHONDONTWRITEBYTECODE=1

# P processes of py-phases at once under one setting; the medians over the processes.
phases() { # P SETTING
	local p=$1 e=$2 pids=()
	rm -f "$O"/pp-*.txt
	for i in $(seq "$p"); do
		env "$e" timeout 120 "$PY" bench/py-phases.py "${ROUNDS:-1000}" >"$O/pp-$i.txt" 2>&1 &
		pids+=($!)
	done
	wait "${pids[@]}"
	say "$("$PY" - "$p" "$e" "$O"/pp-*.txt <<'PY'
import re, statistics as st, sys
p, env, files = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = [open(f).read() for f in files]
def col(k):
    return [float(m.group(1)) for r in rows for m in [re.search(k + r"=([\d.]+)", r)] if m]
keys = ["alloc_med_us", "fill_med_us", "download_med_us", "free_med_us", "whole_med_us", "whole_p90_us"]
print("py-phases P=%s setting=%s processes=%d " % (p, env, len(col("whole_med_us")))
      + " ".join("%s=%.1f" % (k, st.median(col(k)) if col(k) else float("nan")) for k in keys))
PY
)"
}
for _ in 1 2; do
	for e in $settings; do phases 16 "$e"; done
done
for e in $settings; do phases 8 "$e"; done
for e in $settings; do phases 1 "$e"; done
kill -TERM "$dpid"
wait "$dpid"

for _ in 1 2; do
	for e in $settings; do
		env "$e" KINDS=download OUT="$O/short" bash bench/short-tests.sh "$B" sseq 2>&1 |
			grep 'kind=' | sed "s/^/setting=$e /" | tee -a "$log"
	done
done
for e in $settings; do
	for p in 1 16; do
		LABEL="spin[$e]" P=$p CENV="SSEQ_BENCH_ASYNC=1 $e" OUT="$O/rt" bash bench/roundtrip.sh "$B" one 2>&1 |
			grep 'clients=' | tail -1 | tee -a "$log"
	done
done
