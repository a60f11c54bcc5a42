#!/bin/bash
# The wait path's benchmarks in one visit, for a GPU lease: C clients (1/8/16/64, on 4
# cores, the attribution rows) and the pytest short tests through NEW_BUILD, the same
# through OLD_BUILD when given (a baseline in the same run), the native loop and PyTorch
# under MPS, and 16 pytest workers on 4 cores. Release builds with -Dhip=enabled
# -Dhip_platform=nvidia -Dtests=false, libuv/protobuf-c/subunit copied into BUILD/lib where
# the GPU machine lacks them (tests/gpu/run-all.sh says how). Everything goes under $OUT;
# about 5 minutes on an H200.
# Usage: bench/wait-path.sh NEW_BUILD [OLD_BUILD]
set -u
N=${1:?usage: wait-path.sh NEW_BUILD [OLD_BUILD]}
P=${2:-}
O=${OUT:-/tmp/sseq-bench}
mkdir -p "$O"
export PYTHON=${PYTHON:-python3}
t0=$(date +%s)
step() { echo "$1 $(($(date +%s) - t0))s" >>"$O/steps.txt"; }
(nvidia-smi; nproc; date -u) >"$O/steps.txt" 2>&1
OUT=$O/rt-new LABEL=new ATTRIB=1 timeout 150 bash bench/roundtrip.sh "$N" compare >"$O/rt-new.txt" 2>&1
step rt-new
if [ -n "$P" ]; then
	OUT=$O/rt-old LABEL=old timeout 120 bash bench/roundtrip.sh "$P" compare native >"$O/rt-old.txt" 2>&1
	step rt-old+native
fi
OUT=$O/py-new timeout 120 bash bench/short-tests.sh "$N" sseq >"$O/py-new.txt" 2>&1
step py-new
OUT=$O/py-mps timeout 150 bash bench/short-tests.sh "$N" torch >"$O/py-mps.txt" 2>&1
step py-mps
if [ -n "$P" ]; then
	OUT=$O/py-old NS="0 8" KINDS="spin2000 spin20000 download" timeout 80 bash bench/short-tests.sh "$P" sseq >"$O/py-old.txt" 2>&1
	step py-old
fi
OUT=$O/py-cores CORE_KINDS="spin20000 download" timeout 90 bash bench/short-tests.sh "$N" cores >"$O/py-cores.txt" 2>&1
step py-cores
# Only a few files come back from a lease: the folders go into one archive.
(cd "$O" && tar czf all.tgz rt-new rt-old py-new py-mps py-old py-cores 2>/dev/null; rm -rf rt-new rt-old py-new py-mps py-old py-cores)
