#!/bin/bash
# The read-back round trip (alloc 1 KiB, fill, D2H into the staging arena, wait, free) with
# 1 to 64 clients on one sseqd, against the same loop natively (one stream per process:
# alone, side by side, and under CUDA MPS, which this script starts and stops), and where
# the daemon's time goes: per thread group its CPU seconds, its run-queue wait (runnable,
# no core free) and what it blocks in (bench/threadstat.py), the daemon's CPU seconds per
# round trip, and the spans its timeline shows (bench/timeline-ops.py). Sections:
#   table     1, 8, 16, 64 clients on the default daemon, on all cores
#   native    the native loop alone, 8 and 16 side by side, and 1, 8, 16, 64 under MPS
#   knobs     16 clients, one setting changed at a time (spin, submit threads, completion,
#             CUDA's scheduling flag, streams); needs $EXP for the idle-spin rows
#   cores     daemon and clients on 4 cores (taskset), 1 and 16 clients
#   short     the deciding rows of the others, for a short lease (needs $EXP)
#   one       one configuration from LABEL P BIN CPUS DENV CENV OPTS (the daemon's env,
#             the clients' env, sseqd's options)
#   stacks    cuda-gdb's backtraces of every daemon thread under 16 clients
#   profile   the loop thread's stacks, sampled (bench/prof-preload.c), at 1, 8, 16 clients
#             ($PROF_CLOCK=wall: on the monotonic clock, idle included, more samples)
#   loops     1, 8, 16, 64 clients (and 1, 16 on 4 cores) with --loops 1, 2, 4, 8
#             ($LOOPS_LIST, $LOOPS_PS)
#   ceiling   what one CUDA context does of the same round trip with no daemon: 1 to 16
#             threads of one process, a stream each, spinning on the event (bench/
#             roundtrip-threads.cu), 16 and 64 waiting in cudaEventSynchronize, 16 on 4 cores
#   compare   the build as it is ($LABEL): 1, 8, 16, 64 clients, then 1 and 16 on 4
#             cores; $ATTRIB adds 16 clients with the old completion threads, and with
#             spinning whatever the load
# $EXP: a build of the daemon with bench/roundtrip-exp.patch (completion and submit threads'
# idle spin from $SSEQ_EXP_IDLE_SPIN_NS), for the rows that turn it off; measurement only.
# $ROUNDS: round trips per client instead of 2000/500/300/100; $BACKEND: sim to try the
# script where there is no GPU; $SSEQD_NICE: the daemon's nice value (default 0). Prints key=value lines; everything goes under $OUT (default /tmp/sseq-bench).
# Usage: bench/roundtrip.sh BUILD_DIR [SECTION...]   (default: table native knobs cores)
set -uo pipefail
B=${1:?usage: roundtrip.sh BUILD_DIR [SECTION...]}
shift
sections=${*:-table native knobs cores}
name=roundtrip
. "$(dirname "$0")/procs.sh"
here=$(cd "$(dirname "$0")" && pwd)
EXP=${EXP:-}
ctl=$B/client/ctl/sseqctl
client=$B/bench/bench-roundtrip
native=$B/bench/bench-roundtrip-native
preload=$B/bench/sched-preload.so
[ -x "$native" ] || nvcc -O2 -arch=sm_90 -I"$here" -o "$native" "$here/roundtrip-native.cu"
threads=$B/bench/bench-roundtrip-threads
[ -x "$threads" ] || nvcc -O2 -arch=sm_90 -o "$threads" "$here/roundtrip-threads.cu" -lpthread
[ -f "$preload" ] || cc -O2 -shared -fPIC -o "$preload" "$here/sched-preload.c" -ldl
prof=$B/bench/prof-preload.so
[ -f "$prof" ] || cc -O2 -shared -fPIC -o "$prof" "$here/prof-preload.c" -lrt
cpus_all="0-$(($(nproc) - 1))"

rounds_for() { [ -n "${ROUNDS:-}" ] && { echo "$ROUNDS"; return; }; case $1 in 1) echo 2000 ;; 8) echo 500 ;; 16) echo 300 ;; *) echo 100 ;; esac; }
med() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "nan"}'; }
p90() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int(NR*0.9)>0?int(NR*0.9):1]; else print "nan"}'; }
kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; } # the value of key $1 on each line
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# The daemon's loop_busy_us, submit_wakeups and calls_on_loop counters, one line (each
# empty from a daemon without it).
counters() { "$ctl" --socket "$sock" stats --json 2>/dev/null |
	${PYTHON:-python3} -c 'import json, sys
c = json.load(sys.stdin)["counters"]
print(" ".join(str(c.get(k, "")) for k in ("loop_busy_us", "submit_wakeups", "calls_on_loop")))' 2>/dev/null; }

# The daemon: binary, CPUs, environment (NAME=VALUE words), then sseqd's options.
start_daemon() { # bin cpus env -- opts...
	local bin=$1 cpus=$2 envs=$3
	shift 4
	rm -f "$sock"
	# shellcheck disable=SC2086 # env words
	taskset -c "$cpus" nice -n "${SSEQD_NICE:-0}" env $envs "$bin" --backend "${BACKEND:-hip}" --kernels "$img" --socket "$sock" \
		--log-level warning "$@" 2>>"$O/roundtrip-sseqd.log" &
	dpid=$!
	for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done
}
stop_daemon() { kill -TERM "$dpid"; wait "$dpid"; dpid=; }

# P copies of cmd started together on cpus; prints one line: the round trips' median over
# all clients, the slowest client's p90, the aggregate rate, the median of the clients'
# step medians, the clients' CPU, and (with a daemon) its CPU seconds and thread report.
together_rt() { # tag P cpus cmd...
	local tag=$1 p=$2 cpus=$3 i n d0 d1 hz w0 w1 b0='' b1 k0='' k1 l0='' l1 pids=() out
	shift 3
	export SSEQ_BENCH_GO=$tmp/go SSEQ_BENCH_RAW=$tmp/raw
	rm -f "$SSEQ_BENCH_GO" "$tmp"/out.* "$tmp"/raw.* "$tmp/stop"
	for i in $(seq "$p"); do
		taskset -c "$cpus" "$@" >"$tmp/out.$i" 2>&1 &
		pids+=($!)
	done
	for _ in $(seq 600); do
		n=$(cat "$tmp"/out.* 2>/dev/null | grep -c 'burst ready')
		d0=0
		for i in "${pids[@]}"; do kill -0 "$i" 2>/dev/null || d0=$((d0 + 1)); done
		[ $((n + d0)) -ge "$p" ] && break
		sleep 0.1
	done
	if [ -n "${dpid:-}" ]; then
		d0=$(ticks "$dpid")
		rm -f "$tmp/tsready"
		THREADSTAT_READY=$tmp/tsready ${PYTHON:-python3} "$here/threadstat.py" "$dpid" "$tmp/stop" 10 >"$tmp/threads" 2>&1 &
		w0=$!
		for _ in $(seq 200); do [ -e "$tmp/tsready" ] && break; sleep 0.05; done
	fi
	[ -n "${dpid:-}" ] && read -r b0 k0 l0 <<<"$(counters)"
	w1=$(date +%s%N)
	touch "$SSEQ_BENCH_GO"
	wait "${pids[@]}" 2>/dev/null
	w1=$(( ($(date +%s%N) - w1) / 1000000 ))
	cat "$tmp"/out.* >>"$O/roundtrip-$tag-$p.log"
	out=$(grep -h ' roundtrip rounds=' "$tmp"/out.*)
	n=$(echo "$out" | grep -c roundtrip)
	hz=$(getconf CLK_TCK)
	printf '%s clients=%d done=%d median_us=%s slowest_p90_us=%s aggregate_rt_per_s=%s' "$tag" "$p" "$n" \
		"$(cat "$tmp"/raw.* 2>/dev/null | med)" "$(echo "$out" | kv p90_us | sort -g | tail -1)" \
		"$(echo "$out" | awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			if (!n || v["start"] < s) s = v["start"]; if (!n || v["end"] > e) e = v["end"]; n++; r += v["rounds"] }
			END { if (n) printf "%.0f", r / (e - s); else printf "nan" }')"
	for k in alloc_med_us wait_med_us free_med_us; do
		printf ' %s=%s' "$k" "$(echo "$out" | kv $k | med)"
	done
	printf ' clients_cpu_s=%s wall_ms=%s' "$(echo "$out" | kv cpu_s | awk '{s += $1} END {printf "%.2f", s}')" "$w1"
	# Stalls: round trips over 2 ms (a wake-up lost to a timeout shows here).
	printf ' over_2ms=%s' "$(cat "$tmp"/raw.* 2>/dev/null | awk '$1 > 2000 {n++} END {print n + 0}')"
	if [ -n "${dpid:-}" ]; then
		d1=$(ticks "$dpid")
		touch "$tmp/stop"
		wait "$w0"
		read -r b1 k1 l1 <<<"$(counters)"
		# The share of the run the loop thread spent working: near 1, clients queue there.
		printf ' loop_busy=%s' "$(awk -v a="$b0" -v b="$b1" -v w="$w1" 'BEGIN {if (a == "" || b == "" || !w) print "nan"; else printf "%.2f", (b - a) / 1000 / w}')"
		# Per round trip: submit threads woken (each a wake-up the request paid) and
		# commands the loop made itself (--submit-idle inline: wake-ups spared).
		printf ' wakeups_per_rt=%s loop_calls_per_rt=%s' \
			"$(echo "$out" | kv rounds | awk -v a="$k0" -v b="$k1" '{s += $1} END {if (a == "" || b == "" || !s) print "nan"; else printf "%.2f", (b - a) / s}')" \
			"$(echo "$out" | kv rounds | awk -v a="$l0" -v b="$l1" '{s += $1} END {if (a == "" || b == "" || !s) print "nan"; else printf "%.2f", (b - a) / s}')"
		printf ' daemon_cpu_s=%s' "$(echo "$out" | kv rounds | awk -v t=$((d1 - d0)) -v hz="$hz" \
			'{s += $1} END {printf "%.2f daemon_cpu_ms_per_rt=%.3f", t / hz, s ? 1000 * t / hz / s : 0}')"
		sed "s/^/    $tag /" "$tmp/threads" >>"$log"
		cp "$tmp/threads" "$O/threads-$tag-$p.txt"
	fi
	echo
}

# One daemon configuration at P clients: label, daemon binary, CPUs, daemon env, client
# env, then sseqd's options. Saves the timeline when $TL is set.
config() { # label P bin cpus denv cenv -- opts...
	local label=$1 p=$2 bin=$3 cpus=$4 denv=$5 cenv=$6
	shift 7
	start_daemon "$bin" "$cpus" "$denv" -- "$@"
	# shellcheck disable=SC2086 # env words
	say "$(SSEQ_SOCKET=$sock together_rt "$label" "$p" "$cpus" env $cenv "$client" "$(rounds_for "$p")") opts=\"$*\" denv=\"$denv\" cenv=\"$cenv\""
	if [ -n "${TL:-}" ]; then
		"$ctl" --socket "$sock" trace --chrome "$O/timeline-$label-$p.json" 2>>"$log"
		say "$(${PYTHON:-python3} "$here/timeline-ops.py" "$O/timeline-$label-$p.json" "$label-$p" 2>&1)"
	fi
	stop_daemon
}

sseqd=$B/daemon/sseqd
quiet="SSEQ_SPIN_US=0"
blocking="LD_PRELOAD=$PWD/$preload SSEQ_BENCH_SCHED=blocking"
for section in $sections; do
	case $section in
	table)
		for p in 1 8 16 64; do
			TL=1 config default "$p" "$sseqd" "$cpus_all" "" "" --
		done
		;;
	native)
		say "$(together_rt native 1 "$cpus_all" "$native" 2000)"
		for p in 8 16; do say "$(together_rt native-timesliced "$p" "$cpus_all" "$native" "$(rounds_for "$p")")"; done
		export CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log
		mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
		nvidia-cuda-mps-control -d
		for p in 1 8 16 64; do say "$(together_rt native-mps "$p" "$cpus_all" "$native" "$(rounds_for "$p")")"; done
		echo quit | nvidia-cuda-mps-control
		sleep 1
		cp "$CUDA_MPS_LOG_DIRECTORY/control.log" "$O/mps-control.log" 2>/dev/null
		unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
		;;
	knobs)
		# One thing at a time against the default, then together; 16 clients, all cores.
		config default 16 "$sseqd" "$cpus_all" "" "" --
		config client-spin0 16 "$sseqd" "$cpus_all" "" "$quiet" --
		config loop-spin0 16 "$sseqd" "$cpus_all" "" "$quiet" -- --spin-us 0
		config submit0 16 "$sseqd" "$cpus_all" "" "" -- --submit-threads 0
		config both 16 "$sseqd" "$cpus_all" "" "$quiet" -- --spin-us 0 --submit-threads 0
		config poll 16 "$sseqd" "$cpus_all" "SSEQ_HIP_COMPLETION=poll" "" --
		config blocking 16 "$sseqd" "$cpus_all" "$blocking" "" --
		config both+blocking 16 "$sseqd" "$cpus_all" "$blocking" "$quiet" -- --spin-us 0 --submit-threads 0
		config both+poll 16 "$sseqd" "$cpus_all" "SSEQ_HIP_COMPLETION=poll" "$quiet" -- --spin-us 0 --submit-threads 0
		config both+4streams 16 "$sseqd" "$cpus_all" "" "$quiet" -- --spin-us 0 --submit-threads 0 \
			--compute-streams 4 --h2d-streams 2 --d2h-streams 2 --d2d-streams 2
		if [ -n "$EXP" ]; then
			# No thread spins anywhere: the completion threads block in the driver and
			# sleep at once when idle.
			TL=1 config nospin 16 "$EXP/daemon/sseqd" "$cpus_all" "$blocking SSEQ_EXP_IDLE_SPIN_NS=0" "$quiet" -- --spin-us 0 --submit-threads 0
			config nospin-poll 16 "$EXP/daemon/sseqd" "$cpus_all" "SSEQ_HIP_COMPLETION=poll SSEQ_EXP_IDLE_SPIN_NS=0" "$quiet" -- --spin-us 0 --submit-threads 0
			config idle0 16 "$EXP/daemon/sseqd" "$cpus_all" "SSEQ_EXP_IDLE_SPIN_NS=0" "" --
			config blocking+idle0 16 "$EXP/daemon/sseqd" "$cpus_all" "$blocking SSEQ_EXP_IDLE_SPIN_NS=0" "" --
			for p in 1 8 64; do
				config nospin "$p" "$EXP/daemon/sseqd" "$cpus_all" "$blocking SSEQ_EXP_IDLE_SPIN_NS=0" "$quiet" -- --spin-us 0 --submit-threads 0
			done
		fi
		;;
	short)
		# The deciding rows alone, for a short lease: the table's 16, one change at a
		# time, no spin anywhere at 1, 16 and 64, and MPS.
		TL=1 config default 16 "$sseqd" "$cpus_all" "" "" --
		config both 16 "$sseqd" "$cpus_all" "" "$quiet" -- --spin-us 0 --submit-threads 0
		config blocking 16 "$sseqd" "$cpus_all" "$blocking" "" --
		config both+blocking 16 "$sseqd" "$cpus_all" "$blocking" "$quiet" -- --spin-us 0 --submit-threads 0
		if [ -n "$EXP" ]; then
			config blocking+idle0 16 "$EXP/daemon/sseqd" "$cpus_all" "$blocking SSEQ_EXP_IDLE_SPIN_NS=0" "" --
			for p in 1 16 64; do
				TL=$([ "$p" = 16 ] && echo 1) config nospin "$p" "$EXP/daemon/sseqd" "$cpus_all" "$blocking SSEQ_EXP_IDLE_SPIN_NS=0" "$quiet" -- --spin-us 0 --submit-threads 0
			done
			ROUNDS=${ROUNDS:-150} config nospin-4cores 16 "$EXP/daemon/sseqd" 0-3 "$blocking SSEQ_EXP_IDLE_SPIN_NS=0" "$quiet" -- --spin-us 0 --submit-threads 0
		fi
		config default 1 "$sseqd" "$cpus_all" "" "" --
		config default 64 "$sseqd" "$cpus_all" "" "" --
		say "$(together_rt native 1 "$cpus_all" "$native" 2000)"
		export CUDA_MPS_PIPE_DIRECTORY=$tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=$tmp/mps-log
		mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
		nvidia-cuda-mps-control -d
		for p in 1 16 64; do say "$(together_rt native-mps "$p" "$cpus_all" "$native" "$(rounds_for "$p")")"; done
		echo quit | nvidia-cuda-mps-control
		sleep 1
		unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
		;;
	compare)
		# The build as it is, labelled $LABEL: 1, 8, 16, 64 clients on all cores, then
		# daemon and clients on 4 cores; with $ATTRIB, 16 clients with one part of the
		# wait path put back as it was (a completion thread per stream in
		# hipEventSynchronize; every thread spinning whatever the load), and 16, 64
		# and 1 clients with --submit-idle inline (the loop making the call for a
		# sleeping submit thread instead of waking it).
		for p in 1 8 16 64; do
			TL=$([ "$p" = 16 ] && echo 1) config "${LABEL:-build}" "$p" "$sseqd" "$cpus_all" "" "" --
		done
		ROUNDS=${ROUNDS:-1000} config "${LABEL:-build}-4cores" 1 "$sseqd" 0-3 "" "" --
		ROUNDS=${ROUNDS:-150} config "${LABEL:-build}-4cores" 16 "$sseqd" 0-3 "" "" --
		if [ -n "${ATTRIB:-}" ]; then
			config "${LABEL:-build}-sync" 16 "$sseqd" "$cpus_all" "SSEQ_HIP_COMPLETION=sync" "" --
			config "${LABEL:-build}-spinalways" 16 "$sseqd" "$cpus_all" "SSEQ_SPIN_POLICY=always" "" --
			ROUNDS=${ROUNDS:-150} config "${LABEL:-build}-4cores-spinalways" 16 "$sseqd" 0-3 "SSEQ_SPIN_POLICY=always" "" --
			config "${LABEL:-build}-inline" 16 "$sseqd" "$cpus_all" "SSEQ_HIP_SUBMIT_IDLE=inline" "" --
			config "${LABEL:-build}-inline" 64 "$sseqd" "$cpus_all" "SSEQ_HIP_SUBMIT_IDLE=inline" "" --
			config "${LABEL:-build}-inline" 1 "$sseqd" "$cpus_all" "SSEQ_HIP_SUBMIT_IDLE=inline" "" --
		fi
		;;
	profile)
		# Where the loop thread's CPU time goes (bench/prof-preload.c samples its
		# stacks; bench/prof-report.py names them against this build): 1, 8 and 16
		# clients ($PROF_PS), more rounds than the table for enough samples.
		for p in ${PROF_PS:-1 8 16}; do
			ROUNDS=${ROUNDS:-$((10000 / p > 1000 ? 10000 / p : 1000))} config "${LABEL:-build}-prof" "$p" "$sseqd" "$cpus_all" \
				"LD_PRELOAD=$PWD/$prof SSEQ_PROF_OUT=$O/prof-$p.txt SSEQ_PROF_US=${PROF_US:-50} SSEQ_PROF_CLOCK=${PROF_CLOCK:-cpu}" "" -- ${OPTS:-}
			${PYTHON:-python3} "$here/prof-report.py" "$O/prof-$p.txt" "$B" 30 >"$O/prof-report-$p.txt" 2>&1
			say "clients=$p $(grep -m1 'stacks=' "$O/prof-report-$p.txt") top: $(grep -m4 ' self ' "$O/prof-report-$p.txt" | cut -d' ' -f3- | tr -s ' ' | paste -sd';')"
		done
		;;
	loops)
		# The same build on $LOOPS_LIST loops (--loops; default 1 2 4 8): 1, 8, 16, 64
		# clients on all cores, then 1 and 16 with daemon and clients on 4 cores.
		for l in ${LOOPS_LIST:-1 2 4 8}; do
			for p in ${LOOPS_PS:-1 8 16 64}; do
				config "loops$l" "$p" "$sseqd" "$cpus_all" "" "" -- --loops "$l"
			done
		done
		for l in ${LOOPS_LIST:-1 2 4 8}; do
			ROUNDS=${ROUNDS:-1000} config "loops$l-4cores" 1 "$sseqd" 0-3 "" "" -- --loops "$l"
			ROUNDS=${ROUNDS:-150} config "loops$l-4cores" 16 "$sseqd" 0-3 "" "" -- --loops "$l"
		done
		;;
	ceiling)
		for t in 1 4 8 16; do say "$("$threads" "$t" "$(rounds_for 1)")"; done
		for t in 16 64; do say "$("$threads" "$t" 500 1024 sync)"; done
		say "$(taskset -c 0-3 "$threads" 16 300 1024 sync) cpus=0-3"
		;;
	one)
		# One configuration from the environment: LABEL P BIN CPUS DENV CENV OPTS.
		# shellcheck disable=SC2086 # OPTS: options, one word each
		config "${LABEL:-one}" "${P:-16}" "${BIN:-$sseqd}" "${CPUS:-$cpus_all}" "${DENV:-}" "${CENV:-}" -- ${OPTS:-}
		;;
	cores)
		for p in 1 16; do
			# Fewer rounds: a round trip takes tens of milliseconds here.
			r=$([ "$p" = 1 ] && echo 1000 || echo 150)
			ROUNDS=${ROUNDS:-$r} config default-4cores "$p" "$sseqd" 0-3 "" "" --
			ROUNDS=${ROUNDS:-$r} config both-4cores "$p" "$sseqd" 0-3 "" "$quiet" -- --spin-us 0 --submit-threads 0
			[ -n "$EXP" ] && ROUNDS=${ROUNDS:-$r} config nospin-4cores "$p" "$EXP/daemon/sseqd" 0-3 "$blocking SSEQ_EXP_IDLE_SPIN_NS=0" "$quiet" -- --spin-us 0 --submit-threads 0
		done
		;;
	stacks)
		# Every daemon thread's stack, twice, while 16 clients run (a long run: the
		# attach stops the daemon).
		start_daemon "$sseqd" "$cpus_all" "" --
		for i in $(seq 16); do SSEQ_SOCKET=$sock "$client" 4000 >/dev/null 2>&1 & done
		sleep 3
		for k in 1 2; do
			timeout 120 cuda-gdb -p "$dpid" -batch -ex "info threads" -ex "thread apply all bt 12" \
				>"$O/stacks-$k.txt" 2>&1
			say "stacks $k rc=$? threads=$(grep -c '^Thread ' "$O/stacks-$k.txt")"
			sleep 1
		done
		# shellcheck disable=SC2046 # one pid a word
		kill $(jobs -p | grep -v "^$dpid$") 2>/dev/null
		stop_daemon
		;;
	esac
done
