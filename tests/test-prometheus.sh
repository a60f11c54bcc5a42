#!/bin/bash
# A real Prometheus scraping sseq the way a machine ships it: two sim daemons (GPUs 0 and
# 1, sockets in a directory of their own given as $SSEQ_SOCKET_DIR) and a stale socket
# (GPU 2, no daemon), sseq-metrics-textfile writing sseq.prom, node_exporter's textfile
# collector serving it, prometheus scraping that on loopback. Its HTTP API
# (/api/v1/query) must show both daemons' metrics with their own values, told apart by
# device and gpu, sseq_up 1, 1 and 0; after the next run a daemon that crashed down
# (sseq_up 0, its series gone) and a client that left uncounted. The units pass
# systemd-analyze verify where it exists.
# Skips (77) only without prometheus or node_exporter (Debian: prometheus,
# prometheus-node-exporter).
# Usage: test-prometheus.sh SSEQD SSEQCTL SSEQ_METRICS_TEXTFILE UNITS_BUILD_DIR
set -euo pipefail

sseqd=$1
sseqctl=$2
exporter=$3
units=$4
prometheus=${PROMETHEUS:-$(command -v prometheus || true)}
node_exporter=${NODE_EXPORTER:-$(command -v prometheus-node-exporter || command -v node_exporter || true)}
[[ -n $prometheus ]] || { echo "SKIP: prometheus not found (Debian package prometheus)"; exit 77; }
[[ -n $node_exporter ]] ||
	{ echo "SKIP: node_exporter not found (Debian package prometheus-node-exporter)"; exit 77; }
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

pids=()
cleanup_more() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}

export SSEQ_SOCKET_DIR=$dir/run
mkdir -p "$SSEQ_SOCKET_DIR" "$dir/textfile"
version=$("$sseqd" --version | awk '{print $2}')

for gpu in 0 1; do
	"$sseqd" --backend sim --device "$gpu" --socket "$SSEQ_SOCKET_DIR/gpu$gpu.sock" \
		2>"$dir/sseqd$gpu.log" &
	pids+=($!)
	wait_socket "$SSEQ_SOCKET_DIR/gpu$gpu.sock"
done
# GPU 2: a socket left behind by a daemon that is gone (connecting is refused).
py=$(python3 -c 'import sys; print(sys.executable)') # once through any shim
"$py" -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' \
	"$SSEQ_SOCKET_DIR/gpu2.sock"

# One client on GPU 1 holding a 4096-byte buffer, so the daemons' numbers differ.
"$py" -c '
import socket, struct, sys, time
from rawwire import call, decode_last, field
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])
call(c, 1, 10, field(1, 1) + field(3, b"prometheus") + field(5, b"gw0"))
call(c, 2, 13, field(1, 4096) + field(2, b"a"))
open(sys.argv[2], "w").write("ready")
time.sleep(120)' "$SSEQ_SOCKET_DIR/gpu1.sock" "$dir/ready" &
helper_pid=$!
for _ in $(seq 100); do [[ -s $dir/ready ]] && break; sleep 0.05; done
[[ -s $dir/ready ]] || fail "the client on GPU 1 did not connect"

collect() {
	SSEQCTL=$sseqctl sh "$exporter" "$dir/textfile" 2>"$dir/exporter.err" ||
		fail "sseq-metrics-textfile exited $?: $(cat "$dir/exporter.err")"
	[[ -s $dir/textfile/sseq.prom ]] || fail "no sseq.prom written"
	# Renamed into place: no temporary file stays behind.
	[[ $(find "$dir/textfile" -mindepth 1 | wc -l) == 1 ]] ||
		fail "left in the textfile directory: $(ls -A "$dir/textfile")"
}
collect
grep -q "gpu2.sock" "$dir/exporter.err" || fail "the stale GPU 2 socket not reported"
if command -v promtool >/dev/null; then
	promtool check metrics <"$dir/textfile/sseq.prom" >"$dir/promtool.out" 2>&1 ||
		fail "promtool check metrics sseq.prom: $(cat "$dir/promtool.out")"
	echo "promtool check metrics sseq.prom: ok"
fi
# Each family once (node_exporter refuses a file that repeats one).
dups=$(grep '^# TYPE' "$dir/textfile/sseq.prom" | sort | uniq -d)
[[ -z $dups ]] || fail "families declared twice: $dups"

free_port() {
	"$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
ne_port=$(free_port)
"$node_exporter" --web.listen-address="127.0.0.1:$ne_port" --collector.disable-defaults \
	--collector.textfile --collector.textfile.directory="$dir/textfile" \
	>"$dir/node_exporter.log" 2>&1 &
pids+=($!)

prom_port=$(free_port)
cat >"$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: sseq
    static_configs:
      - targets: ['127.0.0.1:$ne_port']
EOF
"$prometheus" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
	--web.listen-address="127.0.0.1:$prom_port" >"$dir/prometheus.log" 2>&1 &
pids+=($!)

# check EXPR [N [PYTHON]]: an instant query through the HTTP API, asked again (for 60 s)
# until it gives N series when N is given, then PYTHON asserting on `series` (each
# {"labels", "value"}), `by_gpu` (the same by their gpu label) and `version`. One
# python3 run per check: on a loaded machine each start costs.
check() {
	"$py" - "http://127.0.0.1:$prom_port/api/v1/query" "$version" "$@" <<'EOF' && return 0
import json, sys, time, urllib.parse, urllib.request
url, version, expr = sys.argv[1:4]
want = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] else None
code = sys.argv[5] if len(sys.argv) > 5 else ""
deadline = time.monotonic() + 60
while True:
    try:
        q = url + "?" + urllib.parse.urlencode({"query": expr})
        r = json.load(urllib.request.urlopen(q, timeout=5))
        assert r["status"] == "success", r
        series = [{"labels": s["metric"], "value": float(s["value"][1])}
                  for s in r["data"]["result"]]
    except OSError:
        series = None  # not listening yet
    if series is not None and (want is None or len(series) == want):
        break
    if time.monotonic() > deadline:
        sys.exit(f"query {expr}: {series}, wanted {want} series")
    time.sleep(0.2)
by_gpu = {s["labels"].get("gpu"): s for s in series}
try:
    exec(code)
except AssertionError:
    print(f"query {expr}:", json.dumps(series, indent=1))
    raise
EOF
	echo "--- prometheus.log" >&2
	tail -n 20 "$dir/prometheus.log" >&2
	echo "--- node_exporter.log" >&2
	tail -n 20 "$dir/node_exporter.log" >&2
	fail "query $1 (above)"
}

check 'up{job="sseq"} == 1' 1
echo "prometheus scrapes node_exporter on 127.0.0.1:$ne_port"

check 'sseq_build_info' 2 '
assert sorted(by_gpu) == ["0", "1"], by_gpu
for g, s in by_gpu.items():
    l = s["labels"]
    assert l["device"] == g and l["backend"] == "sim" and l["version"] == version, l
    assert l["job"] == "sseq" and s["value"] == 1, s'
check 'sseq_up' '' '
assert {g: s["value"] for g, s in by_gpu.items()} == {"0": 1, "1": 1, "2": 0}, by_gpu'
check 'sseq_memory_used_bytes' '' '
assert {g: s["value"] for g, s in by_gpu.items()} == {"0": 0, "1": 4096}, by_gpu'
check 'sseq_clients' '' '
assert {g: s["value"] for g, s in by_gpu.items()} == {"0": 0, "1": 1}, by_gpu'
check 'sseq_memory_total_bytes' '' '
assert sorted(by_gpu) == ["0", "1"] and all(s["value"] > 0 for s in series), by_gpu'
check 'time() - sseq_start_time_seconds' '' '
assert sorted(by_gpu) == ["0", "1"] and all(0 <= s["value"] < 600 for s in series), by_gpu'
check 'count by (gpu) (sseq_stream_last_issued)' '' '
assert sorted(by_gpu) == ["0", "1"] and all(s["value"] >= 4 for s in series), by_gpu'
check 'sseq_stream_window_used{gpu="1",stream="0"}' '' '
assert len(series) == 1 and series[0]["labels"]["kind"], series'
check 'sum by (gpu) (sseq_sessions_total)' '' '
assert by_gpu["1"]["value"] >= 1, by_gpu'
check 'sseq_loop_busy_seconds_total' '' '
assert sorted(by_gpu) == ["0", "1"] and all(0 < s["value"] < 600 for s in series), by_gpu'
echo "prometheus has both daemons: build info, up, memory, clients, start time, streams"

# The next run (the timer's): GPU 1's client gone, GPU 0's daemon stopped.
kill "$helper_pid"
wait "$helper_pid" 2>/dev/null || true
helper_pid=
kill -KILL "${pids[0]}" # GPU 0's, as a crash: its socket stays, refusing
wait "${pids[0]}" 2>/dev/null || true
for _ in $(seq 100); do
	"$sseqctl" --socket "$SSEQ_SOCKET_DIR/gpu1.sock" metrics | grep -q '^sseq_clients{.*} 0$' && break
	sleep 0.05
done
collect
check 'sseq_up == 0' 2
check 'sseq_up' '' '
assert {g: s["value"] for g, s in by_gpu.items()} == {"0": 0, "1": 1, "2": 0}, by_gpu'
check 'sseq_build_info' 1 'assert sorted(by_gpu) == ["1"], by_gpu'
check 'sseq_clients == 0' 1
check 'sseq_memory_used_bytes' '' 'assert {g: s["value"] for g, s in by_gpu.items()} == {"1": 0}, by_gpu'
echo "the next collection: GPU 0 down (sseq_up 0, its series gone), GPU 1's client gone"

# The units as shipped, the script's path pointed at the one under test.
if command -v systemd-analyze >/dev/null; then
	mkdir "$dir/units"
	sed "s|^ExecStart=.*|ExecStart=$(command -v sh) $(realpath "$exporter")|" \
		"$units/sseq-metrics-textfile.service" >"$dir/units/sseq-metrics-textfile.service"
	cp "$(dirname "$0")/../systemd/sseq-metrics-textfile.timer" "$dir/units/"
	if ! systemd-analyze verify --man=no "$dir/units/sseq-metrics-textfile.service" \
		"$dir/units/sseq-metrics-textfile.timer" >"$dir/verify.log" 2>&1 ||
		[[ -s $dir/verify.log ]]; then
		cat "$dir/verify.log" >&2
		fail "systemd-analyze verify sseq-metrics-textfile.{service,timer}"
	fi
	echo "systemd-analyze verify: clean"
fi
echo "ok"
