#!/bin/bash
# Two settings of the read-back path, A and B, measured against each other in one run, in
# alternating rounds (A B, then B A, ...): identical runs on a GPU host move by 10-20%, so
# a setting is judged only against the other in the same run, over several rounds. Each
# round runs, for A and for B: the C read-back loop (bench/roundtrip.sh one) with 1, 16
# and 64 clients on every core and 16 on the first four; and the pytest download-only
# test, 480 tests at -n 0, 8 and 16 (bench/short-tests.sh sseq); and one client's 4 KiB
# H2D + await and 256 MiB copies in bursts of 8 and 32 (bench-client latency and copy,
# as bench/h200.sh runs them), with the native program's figures in the same round. Then
# a summary: each figure's mean over the rounds, A against B.
#
# A setting is three variables: the daemon's environment ($A_DENV, $B_DENV: NAME=VALUE
# words), the clients' environment ($A_CENV, $B_CENV: C clients and pytest workers) and
# sseqd's options ($A_OPTS, $B_OPTS); $A_BUILD and $B_BUILD put a side on another build
# (two trees against each other; that side's clients then load that build's libsseq and
# the libraries in its lib/, tests/gpu/prepare.sh's layout). Example: the clients asleep on their done word
# against on the socket:
#   A_CENV=SSEQ_SLEEP_ON_WORD=1 B_CENV= bench/readback-ab.sh build-gpur 4
# Usage: bench/readback-ab.sh BUILD_DIR [ROUNDS]   (default 2 rounds)
# $SECTIONS: any of "rt py copy" (default all; copy needs a GPU); $BACKEND=sim runs rt and
# py where there is no GPU.
# Prints key=value lines; everything goes under $OUT (default /tmp/sseq-bench).
set -uo pipefail
B=${1:?usage: readback-ab.sh BUILD_DIR [ROUNDS]}
rounds=${2:-2}
here=$(cd "$(dirname "$0")" && pwd)
O=${OUT:-/tmp/sseq-bench}
mkdir -p "$O"
res=$O/readback-ab.txt
: >"$res"
cpus=$(nproc)
four="0-$(((cpus < 4 ? cpus : 4) - 1))"

side_var() { # side name: the value of ${side}_${name}
	local v="${1}_${2}"
	echo "${!v:-}"
}

side_build() { # side: its build directory ($A_BUILD, $B_BUILD; else BUILD_DIR)
	local v="${1}_BUILD"
	echo "${!v:-$B}"
}

side_env() { # side: LD_LIBRARY_PATH=... for a side on a build of its own, else nothing
	local v="${1}_BUILD" b
	[ -n "${!v:-}" ] || return 0
	b=$(cd "${!v}" && pwd)
	echo "LD_LIBRARY_PATH=$b/lib:$b/client/lib"
}

# Prints "key=value" figures of one roundtrip.sh line, prefixed.
rt() { # side round P rounds cpus row
	local side=$1 r=$2 p=$3 n=$4 c=$5 row=$6 line
	# shellcheck disable=SC2046 # NAME=VALUE words
	line=$(LABEL="$side-r$r-$row" P=$p ROUNDS=$n CPUS=$c DENV="$(side_var "$side" DENV)" \
		CENV="SSEQ_BENCH_ASYNC=1 $(side_var "$side" CENV)" OPTS="$(side_var "$side" OPTS)" \
		OUT="$O/rt" env $(side_env "$side") timeout 120 bash "$here/roundtrip.sh" "$(side_build "$side")" one 2>&1 | grep 'clients=' | tail -1)
	echo "$line" >>"$O/readback-ab-raw.txt"
	for k in aggregate_rt_per_s median_us over_2ms daemon_cpu_ms_per_rt wakeups_per_rt loop_calls_per_rt; do
		echo "side=$side round=$r row=$row $k=$(echo "$line" | grep -o "$k=[0-9.na]*" | cut -d= -f2)"
	done | tee -a "$res"
}

py() { # side round
	local side=$1 r=$2
	# shellcheck disable=SC2046 # the clients' environment, NAME=VALUE words
	env $(side_var "$side" CENV) SSEQD_ENV="$(side_var "$side" DENV)" \
		SSEQD_OPTS="$(side_var "$side" OPTS)" SHORT_TESTS=480 KINDS=download \
		OUT="$O/py-$side-r$r" env $(side_env "$side") timeout 300 bash "$here/short-tests.sh" "$(side_build "$side")" sseq 2>&1 |
		grep 'kind=' | tee -a "$O/readback-ab-raw.txt" |
		sed -n 's/.* n=\([0-9]*\) .*mean_call_ms=\([0-9.]*\) median_call_ms=\([0-9.]*\).*/\1 \2 \3/p' |
		while read -r n mean med; do
			echo "side=$side round=$r row=pytest_n$n mean_call_ms=$mean"
			echo "side=$side round=$r row=pytest_n$n median_call_ms=$med"
		done | tee -a "$res"
}

# One client's copies and 4 KiB H2D + await through a daemon of this side's setting.
copy() { # side round
	local side=$1 r=$2 sock=$O/ab.sock dp line img
	local B
	B=$(side_build "$side")
	local client=$B/bench/bench-client le
	le=$(side_env "$side")
	[ -n "$le" ] && local -x "$le"
	# shellcheck disable=SC2012 # one file of a known name
	img=$(ls "$B"/daemon/backend/hip/sseq-kernels.* 2>/dev/null | head -1)
	rm -f "$sock"
	# shellcheck disable=SC2046,SC2086 # NAME=VALUE words; options, one word each
	env $(side_var "$side" DENV) "$B/daemon/sseqd" --backend "${BACKEND:-hip}" --kernels "$img" \
		--socket "$sock" --log-level warning $(side_var "$side" OPTS) 2>>"$O/ab-sseqd.log" &
	dp=$!
	for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
	for burst in 8 32; do
		# shellcheck disable=SC2046 # NAME=VALUE words
		line=$(env $(side_var "$side" CENV) SSEQ_SOCKET="$sock" SSEQ_BENCH_BURST=$burst \
			"$client" copy $((256 << 20)) 2>&1 | tail -1)
		echo "$line" >>"$O/readback-ab-raw.txt"
		for k in h2d_GBps d2h_GBps d2d_GBps; do
			echo "side=$side round=$r row=copy_burst$burst $k=$(echo "$line" | grep -o "$k=[0-9.]*" | cut -d= -f2)"
		done | tee -a "$res"
	done
	# shellcheck disable=SC2046 # NAME=VALUE words
	line=$(env $(side_var "$side" CENV) SSEQ_SOCKET="$sock" "$client" latency 2000 2>&1 | tail -1)
	echo "$line" >>"$O/readback-ab-raw.txt"
	echo "side=$side round=$r row=h2d_4k_await median_us=$(echo "$line" | grep -o 'median_us=[0-9.]*' | cut -d= -f2)" | tee -a "$res"
	kill -TERM "$dp"
	wait "$dp"
}

# The native program's figures for the same round (no daemon: one process).
native() { # round
	local r=$1 line native=$B/bench/bench-native
	[ -x "$native" ] || return 0
	for burst in 8 32; do
		line=$(SSEQ_BENCH_BURST=$burst "$native" copy $((256 << 20)) 2>&1 | tail -1)
		echo "native round=$r burst=$burst $line" | tee -a "$O/readback-ab-raw.txt"
	done
	echo "native round=$r $("$native" latency 2000 2>&1 | tail -1)" | tee -a "$O/readback-ab-raw.txt"
}

echo "date=$(date -u +%FT%TZ) build=$B rounds=$rounds A=\"build=$(side_build A) denv=${A_DENV:-} cenv=${A_CENV:-} opts=${A_OPTS:-}\" B=\"build=$(side_build B) denv=${B_DENV:-} cenv=${B_CENV:-} opts=${B_OPTS:-}\""
for r in $(seq "$rounds"); do
	order="A B"
	[ $((r % 2)) = 0 ] && order="B A"
	for side in $order; do
		case " ${SECTIONS:-rt py copy} " in
		*" rt "*)
			rt "$side" "$r" 1 20000 "0-$((cpus - 1))" rt_p1
			rt "$side" "$r" 16 4000 "0-$((cpus - 1))" rt_p16
			rt "$side" "$r" 64 1000 "0-$((cpus - 1))" rt_p64
			rt "$side" "$r" 16 400 "$four" rt_p16_4cores
			;;
		esac
		case " ${SECTIONS:-rt py copy} " in *" py "*) py "$side" "$r" ;; esac
		case " ${SECTIONS:-rt py copy} " in *" copy "*) copy "$side" "$r" ;; esac
	done
	case " ${SECTIONS:-rt py copy} " in *" copy "*) native "$r" ;; esac
done

# The summary: per row and figure, each side's mean over the rounds and B against A.
echo "summary (means over $rounds rounds; b_vs_a: B's mean over A's)"
awk '{
	for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2]; if (i == NF) key = kv[1] }
	if (f[key] == "" || f[key] == "nan") next
	id = f["row"] " " key; sum[id, f["side"]] += f[key]; cnt[id, f["side"]]++; ids[id] = 1
}
END {
	for (id in ids) {
		if (!cnt[id, "A"] || !cnt[id, "B"]) continue
		a = sum[id, "A"] / cnt[id, "A"]; b = sum[id, "B"] / cnt[id, "B"]
		split(id, p, " ")
		printf "row=%s %s a=%.4g b=%.4g b_vs_a=%s\n", p[1], p[2], a, b, a ? sprintf("%.3f", b / a) : "nan"
	}
}' "$res" | sort
