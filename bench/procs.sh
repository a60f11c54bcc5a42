# Shared by the multi-process benchmarks (sourced): their set-up, processes started
# together, a daemon started and stopped, and where a process's threads spent their CPU
# time. The caller sets B (the build) and name (its log is $OUT/$name.txt) first; this
# sets O (the output folder), img (the kernel image), log, say, tmp (a scratch folder,
# removed on exit, and MPS told to quit if a run started it).
O=${OUT:-/tmp/sseq-bench}
mkdir -p "$O"
export LD_LIBRARY_PATH=$PWD/$B/lib:$PWD/$B/client/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
img=$(ls "$B"/daemon/backend/hip/sseq-kernels.* 2>/dev/null | head -1)
log=$O/$name.txt
say() { echo "$*" | tee -a "$log"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; echo quit | nvidia-cuda-mps-control >/dev/null 2>&1' EXIT
say "date=$(date -u +%FT%TZ) host=$(hostname) cpus=$(nproc) gpu=\"$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)\""

# P processes of "$@" (one per line of output), started together: prints the aggregate.
together() { # tag P count us cmd...
	local tag=$1 p=$2 count=$3 us=$4 i n
	shift 4
	export SSEQ_BENCH_GO=$tmp/go
	rm -f "$SSEQ_BENCH_GO" "$tmp"/out.*
	for i in $(seq "$p"); do "$@" >"$tmp/out.$i" 2>&1 & done
	for _ in $(seq 600); do
		n=$(cat "$tmp"/out.* 2>/dev/null | grep -c 'burst ready')
		[ "$n" -ge "$p" ] && break
		sleep 0.1
	done
	touch "$SSEQ_BENCH_GO"
	wait $(jobs -p | grep -v "^${dpid:-none}$") 2>/dev/null
	cat "$tmp"/out.* >>"$O/procs-$tag-$p.log"
	grep -h ' burst count=' "$tmp"/out.* | awk -v tag="$tag" -v p="$p" -v c="$count" -v us="$us" '
		{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		  if (!n || v["start"] < s) s = v["start"]; if (!n || v["end"] > e) e = v["end"]; n++ }
		END { printf "%s procs=%d done=%d each=%d us=%d wall_ms=%.1f aggregate_kernels_per_s=%.0f\n",
			tag, p, n, c, us, (e - s) * 1000, n * c / (e - s) }'
}

sock=$tmp/sseq.sock
daemon() { # extra sseqd options...
	rm -f "$sock"
	"$B/daemon/sseqd" --backend hip --kernels "$img" --socket "$sock" --log-level warning "$@" \
		2>>"$O/procs-sseqd.log" &
	dpid=$!
	for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.05; done
}
daemon_stop() { kill -TERM "$dpid"; wait "$dpid"; dpid=; }

# CPU ticks (user + system) of each thread of $1, as "name ticks" lines, and of the whole
# machine as "machine busy total".
cpu_snapshot() { # pid
	local t
	for t in /proc/"$1"/task/*; do
		# comm may hold spaces; the fields after its closing parenthesis do not.
		sed -E 's/^[0-9]+ \((.*)\) (.*)$/\1 \2/' "$t/stat" 2>/dev/null | awk '{ print $1, $13 + $14 }'
	done
	awk '/^cpu / { busy = $2 + $3 + $4 + $7 + $8; print "machine", busy, busy + $5 + $6 }' /proc/stat
}
# Where the time between two snapshots went: per thread group (the loop thread keeps the
# process's name; sseq-submit/N, sseq-done/N grouped), in CPU seconds and as a share of
# one core over the interval, and the machine's busy share.
cpu_report() { # before after wall_s
	awk -v wall="$3" -v hz="$(getconf CLK_TCK)" '
		FNR == NR { if ($1 == "machine") { mb = $2; mt = $3 } else a[$1] += $2; next }
		$1 == "machine" { busy = $2 - mb; tot = $3 - mt; next }
		{ b[$1] += $2 }
		END {
			for (k in b) { g = k; sub(/\/[0-9]+$/, "", g); d[g] += b[k] - a[k]; n[g]++ }
			for (g in d) printf "%s(%d)=%.2fs/%.0f%% ", g, n[g], d[g] / hz, 100 * d[g] / hz / wall
			printf "machine_busy=%.0f%%\n", tot ? 100 * busy / tot : 0
		}' "$1" "$2"
}
