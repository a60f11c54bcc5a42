#!/bin/bash
# A quiet client's 4 KiB H2D + await (bench-client latency: the median of 2,000), alone and
# while BUSY other clients each run the read-back loop (alloc 1 KiB, fill, D2H, wait, free:
# bench-roundtrip) on the same daemon: the target's "alone and with 16 other clients
# busy". Natively the same: bench-native latency alone, and beside BUSY processes running
# the native read-back loop (bench-roundtrip-native) under CUDA MPS, which this script
# starts and stops (without MPS the contexts time-slice the GPU). Prints key=value lines;
# writes under $OUT. $BACKEND=sim runs the daemon's rows only (no GPU); $SSEQD_OPTS: more
# options for sseqd; $NATIVE=0 skips the native rows. Each row also says how many round
# trips a second the busy clients made in all (busy_rt_per_s): flat out, the native loops
# under MPS make far fewer than the daemon's clients, so the two quiet figures are not
# taken under the same load. $MATCH=1 adds a row, after the native ones, with the daemon's
# busy clients paced (SSEQ_BENCH_PACE_US) to the period the native ones reached: the
# quiet client beside the same load as natively. $BUSY_PACE_US paces every busy client
# of both sides instead. runnable_median: the machine's runnable threads while the quiet
# client measured beside the busy ones (against cpus).
# Usage: bench/quiet-latency.sh BUILD_DIR [BUSY]   (e.g. build-gpur 16)
set -uo pipefail
B=${1:?usage: quiet-latency.sh BUILD_DIR [BUSY]}
busy=${2:-16}
here=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/sseq-bench}
mkdir -p "$O"
sock=$O/quiet.sock
# The build's libraries (and those tests/gpu/prepare.sh copies into its lib/ for a GPU host
# that lacks them), whatever the caller's environment.
bdir=$(cd "$B" && pwd)
export LD_LIBRARY_PATH=$bdir/lib:$bdir/client/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
native_rt=$B/bench/bench-roundtrip-native
# shellcheck disable=SC2012 # one file of a known name
img=$(ls "$B"/daemon/backend/hip/sseq-kernels.* 2>/dev/null | head -1)
median_of() { grep -o 'median_us=[0-9.]*' | cut -d= -f2; }

# BUSY copies of a command (its arguments), each looping until stopped, its lines into
# $blog; the pids.
start_busy() {
	pids=()
	: >"$blog"
	for _ in $(seq "$busy"); do
		"$@" >>"$blog" 2>&1 &
		pids+=($!)
	done
	sleep 1 # connected, or the contexts made, and looping
}
# Stop them (SIGTERM ends each loop after its round; each then prints its line).
stop_busy() {
	kill -TERM "${pids[@]}" 2>/dev/null
	wait "${pids[@]}" 2>/dev/null
}
# From $blog: the busy clients' round trips a second in all, and their mean period (µs).
busy_rate() {
	awk '/roundtrip rounds=/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		n++; rate += v["rounds"] / (v["end"] - v["start"]); per += (v["end"] - v["start"]) / v["rounds"] }
		END { if (n) printf "%.0f %.1f\n", rate, per / n * 1e6; else print "0 0" }' "$blog"
}
# While the quiet client measures beside the busy ones: the machine's runnable threads
# (/proc/loadavg's fourth field, sampled every 10 ms into $1), against its CPUs: when
# they outnumber the CPUs each hand-off of the quiet request waits for one.
start_runnable() {
	(while :; do cut -d' ' -f4 /proc/loadavg | cut -d/ -f1; sleep 0.01; done) >"$1" &
	sampler=$!
}
# Stop the sampler; the median of its samples (less itself and its cut), or "".
stop_runnable() {
	kill "$sampler" 2>/dev/null
	wait "$sampler" 2>/dev/null
	sort -n "$1" | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] - 1 }'
}

# The daemon's rows: alone, then beside BUSY clients; "side=$1".
daemon_rows() {
	local alone beside rate
	rm -f "$sock"
	# shellcheck disable=SC2086 # options, one word each
	"$B/daemon/sseqd" --backend "${BACKEND:-hip}" ${img:+--kernels "$img"} --socket "$sock" \
		--log-level warning ${SSEQD_OPTS:-} 2>>"$O/quiet-sseqd.log" &
	dp=$!
	for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
	alone=$(SSEQ_SOCKET=$sock "$B/bench/bench-client" latency 2000 | tail -1 | median_of)
	blog=$O/quiet-busy-$1.log
	SSEQ_SOCKET=$sock start_busy "$B/bench/bench-roundtrip" 100000000
	start_runnable "$O/quiet-runnable-$1.txt"
	beside=$(SSEQ_SOCKET=$sock "$B/bench/bench-client" latency 2000 | tail -1 | median_of)
	runnable=$(stop_runnable "$O/quiet-runnable-$1.txt")
	stop_busy
	kill -TERM "$dp"
	wait "$dp"
	read -r rate per <<<"$(busy_rate)"
	echo "quiet-latency side=$1 busy=$busy alone_median_us=$alone busy_median_us=$beside" \
		"runnable_median=$runnable cpus=$(nproc)" \
		"busy_rt_per_s=$rate busy_period_us=$per opts=\"${SSEQD_OPTS:-}\""
}

[ -n "${BUSY_PACE_US:-}" ] && export SSEQ_BENCH_PACE_US=$BUSY_PACE_US
daemon_rows daemon

[ "${BACKEND:-hip}" = sim ] || [ "${NATIVE:-1}" = 0 ] && exit 0
[ -x "$native_rt" ] || nvcc -O2 -arch=sm_90 -I"$here" -o "$native_rt" "$here/roundtrip-native.cu"
alone=$("$B/bench/bench-native" latency 2000 | tail -1 | median_of)
tmp=$(mktemp -d)
export CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
nvidia-cuda-mps-control -d
mps_alone=$("$B/bench/bench-native" latency 2000 | tail -1 | median_of)
blog=$O/quiet-busy-native.log
start_busy "$native_rt" 100000000
start_runnable "$O/quiet-runnable-native.txt"
beside=$("$B/bench/bench-native" latency 2000 | tail -1 | median_of)
runnable=$(stop_runnable "$O/quiet-runnable-native.txt")
stop_busy
echo quit | nvidia-cuda-mps-control
sleep 1
rm -rf "$tmp"
read -r rate per <<<"$(busy_rate)"
echo "quiet-latency side=native busy=$busy alone_median_us=$alone mps_alone_median_us=$mps_alone" \
	"runnable_median=$runnable cpus=$(nproc)" \
	"mps_busy_median_us=$beside busy_rt_per_s=$rate busy_period_us=$per"
[ "${MATCH:-0}" = 1 ] || exit 0
SSEQ_BENCH_PACE_US=$per daemon_rows daemon-paced
