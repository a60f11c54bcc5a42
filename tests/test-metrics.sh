#!/bin/bash
# sseqctl metrics from a sim daemon for GPU 1 with work done (three clients connected,
# copies on the streams): Prometheus' own checker accepts it, every family's samples stand
# together after its HELP and TYPE, every sample carries device and gpu (the index) and
# backend, sseq_clients counts the clients and not the scraper, sseq_build_info names the
# release sseqd --version prints, sseq_start_time_seconds is when it started, the memory
# total is the device's, and every metric is documented in sseqctl(1). Skips (77) only
# without promtool (Debian: prometheus).
# Usage: test-metrics.sh SSEQD SSEQCTL SSEQCTL_MAN_SOURCE
set -euo pipefail

sseqd=$1
sseqctl=$2
man=$3
promtool=${PROMTOOL:-$(command -v promtool || true)}
[[ -n $promtool ]] || { echo "SKIP: promtool not found (Debian package prometheus)"; exit 77; }
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
sock=$dir/s.sock

version=$("$sseqd" --version | awk '{print $2}')
before=$(date +%s.%N)
"$sseqd" --backend sim --device 1 --socket "$sock" 2>"$dir/sseqd.log" &
daemon_pid=$!
wait_socket "$sock"
after=$(date +%s.%N)
"$sseqctl" --socket "$sock" --json status >"$dir/status.json"

# Three clients (raw frames), each allocating two buffers and copying between them
# twice, so that streams have issued and completed points; they stay connected.
python3 -c '
import socket, struct, sys, time
from rawwire import call, decode_last, field
conns = []
for k in range(3):
    c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])
    call(c, 1, 10, field(1, 1) + field(3, b"metrics") + field(5, b"gw%d" % k))
    a = call(c, 2, 13, field(1, 4096) + field(2, b"a"))[4]
    b = call(c, 3, 13, field(1, 4096) + field(2, b"b"))[4]
    call(c, 4, 18, field(1, a) + field(3, b) + field(5, 4096))
    call(c, 5, 18, field(1, b) + field(3, a) + field(5, 4096))
    conns.append(c)
open(sys.argv[2], "w").write("ready")
time.sleep(60)' "$sock" "$dir/ready" &
helper_pid=$!
for _ in $(seq 100); do [[ -s $dir/ready ]] && break; sleep 0.05; done
[[ -s $dir/ready ]] || fail "the clients did not connect"
# Their copies complete on the sim's stream threads.
for _ in $(seq 100); do
	"$sseqctl" --socket "$sock" metrics >"$dir/metrics.txt"
	grep -q '^sseq_ops_completed_total{.*} 6$' "$dir/metrics.txt" && break
	sleep 0.05
done
grep -q '^sseq_ops_completed_total{.*} 6$' "$dir/metrics.txt" ||
	fail "the six copies did not complete: $(grep ops_ "$dir/metrics.txt")"

"$promtool" check metrics <"$dir/metrics.txt" >"$dir/promtool.out" 2>&1 ||
	fail "promtool check metrics: $(cat "$dir/promtool.out")"
echo "promtool check metrics: ok ($(grep -vc '^#' "$dir/metrics.txt") samples)"

python3 - "$dir/metrics.txt" "$man" "$version" "$before" "$after" "$dir/status.json" \
	<<'EOF' || fail "metrics text (above)"
import json, re, sys
text = open(sys.argv[1]).read()
man = open(sys.argv[2]).read().replace("\\", "")
version, before, after = sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
status = json.load(open(sys.argv[6]))
families, order, samples = {}, [], {}
current = None
for line in text.splitlines():
    m = re.match(r"# (HELP|TYPE) (\S+)", line)
    if m:
        kind, name = m.groups()
        if kind == "HELP":
            assert name not in families, f"family {name} begins twice"
            families[name] = None
            order.append(name)
            current = name
        else:
            assert name == current, f"TYPE {name} not after its HELP"
            families[name] = line.split()[3]
        continue
    name = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)", line).group(1)
    # Every sample belongs to the family whose HELP and TYPE came last: no interleaving.
    assert name == current, f"sample {line!r} inside family {current}"
    samples.setdefault(name, []).append(line)
missing = [f for f in order if f not in samples]
assert not missing, f"families without samples: {missing}"
# Per-stream families: one sample per stream, all together.
streams = [l for l in samples["sseq_stream_last_issued"]]
assert len(streams) > 4 and all('stream="' in l for l in streams), streams
issued = {re.search(r'stream="(\d+)"', l).group(1): int(l.split()[-1]) for l in streams}
assert sum(issued.values()) == 6, issued  # the six copies
# The three clients, not the sseqctl asking.
clients = samples["sseq_clients"]
assert len(clients) == 1 and clients[0].endswith(" 3"), clients
# Every sample names the GPU twice, as device and as DCGM's gpu, and the backend.
for lines in samples.values():
    for l in lines:
        assert re.search(r'[{,]device="1",gpu="1",backend="sim"[,}]', l), l
# The release, as one sample of 1.
build = samples["sseq_build_info"]
assert len(build) == 1 and build[0].endswith(" 1"), build
assert f',version="{version}"}}' in build[0], (build, version)
# When it started: between the moments before it was started and its socket was there.
started = [float(l.split()[-1]) for l in samples["sseq_start_time_seconds"]]
assert len(started) == 1 and before - 0.001 <= started[0] <= after + 0.001, (before, started, after)
# The device's memory, as status says it, and no less than what buffers hold.
total = [int(l.split()[-1]) for l in samples["sseq_memory_total_bytes"]]
used = [int(l.split()[-1]) for l in samples["sseq_memory_used_bytes"]]
assert total == [status["device"]["memory_total"]] and total[0] > 0, (total, status["device"])
assert used[0] == 6 * 4096 and used[0] <= total[0], (used, total)
# Documented: each metric by its full name in sseqctl(1).
undocumented = [f for f in order if f not in man]
assert not undocumented, f"not in sseqctl(1): {undocumented}"
print(f"{len(order)} families, grouped, all documented")
EOF
echo "ok"
