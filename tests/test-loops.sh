#!/bin/bash
# sseqd --loops 4 on the sim: sseqctl answers for the whole daemon (every loop's clients
# and buffers, streams with ids unique across loops, counters summed, trace and timeline
# entries of every loop, sseq_clients), the SIGHUP summary counts every loop, sseq-stress
# finds nothing wrong, the connection limit per uid counts across loops, and SIGTERM
# drains every loop and exits 0.
# Usage: test-loops.sh SSEQD SSEQCTL SSEQ_STRESS
set -euo pipefail

sseqd=$1
sseqctl=$2
stress=$3
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
sock=$dir/s.sock
field() { sed -n "s/.*\b$1=\([0-9]*\).*/\1/p" <<<"$2"; }

# Connects $2 clients (raw frames) to socket $1, named ${3}0.., each allocating two
# buffers and copying between them twice; they stay connected until killed. Sets
# helper_pid; $dir/ready holds their session ids once all are in.
connect_clients() {
	rm -f "$dir/ready"
	python3 -c '
import socket, struct, sys, time
from rawwire import call, decode_last, field
conns = []
for k in range(int(sys.argv[2])):
    c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])
    call(c, 1, 10, field(1, 1) + field(3, b"loops") + field(5, b"%s%d" % (sys.argv[3].encode(), k)))
    a = call(c, 2, 13, field(1, 4096) + field(2, b"a"))[4]
    b = call(c, 3, 13, field(1, 4096) + field(2, b"b"))[4]
    call(c, 4, 18, field(1, a) + field(3, b) + field(5, 4096))
    call(c, 5, 18, field(1, b) + field(3, a) + field(5, 4096))
    conns.append(c)
open(sys.argv[4], "w").write("ready")
time.sleep(600)' "$1" "$2" "$3" "$dir/ready" &
	helper_pid=$!
	for _ in $(seq 200); do [[ -s $dir/ready ]] && break; sleep 0.05; done
	[[ -s $dir/ready ]] || fail "the clients did not connect"
}

# Four loops of 2 compute, 1 h2d, 1 d2h and 1 d2d streams each (the daemon's streams
# shared out, each loop's share rounded up).
"$sseqd" --backend sim --socket "$sock" --loops 4 --compute-streams 8 --h2d-streams 4 \
	--d2h-streams 4 --d2d-streams 4 --sim-delay h2d=rand:0-100us 2>"$dir/sseqd.log" &
daemon_pid=$!
wait_socket "$sock"

out=$("$stress" --socket "$sock" --ops 20000 --clients 8 --seed 5 | tail -1) ||
	fail "sseq-stress failed with --loops 4: $out"
echo "$out"
[[ $(field wrong "$out") == 0 && $(field races "$out") == 0 && $(field errors "$out") == 0 ]] ||
	fail "expected wrong=0 errors=0 races=0 with --loops 4: $out"
ops=$(field ops "$out")
[[ $ops -ge 20000 ]] || fail "fewer ops than asked: $out"

# Ten clients: every loop holds two or three of them (each new one goes to the loop
# with the fewest sessions).
connect_clients "$sock" 10 gw
# Their copies complete on the sim's stream threads.
for _ in $(seq 100); do
	"$sseqctl" --socket "$sock" --json status >"$dir/status.json"
	python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["counters"]; sys.exit(c["ops_completed"] < c["ops_submitted"])' \
		"$dir/status.json" && break
	sleep 0.05
done
python3 - "$dir/status.json" "$ops" <<'EOF' || fail "status over four loops: $(cat "$dir/status.json")"
import json, sys
d = json.load(open(sys.argv[1]))
ops = int(sys.argv[2])
names = sorted(c.get("worker_id", "") for c in d["clients"])
assert names == sorted("gw%d" % k for k in range(10)), names
ids = [int(c["session"]) for c in d["clients"]]
assert len(set(ids)) == len(ids), ids
assert all(int(c["buffers"]) == 2 for c in d["clients"]), d["clients"]
streams = d["streams"]
assert len(streams) == 4 * 5, len(streams)
assert sorted(s["id"] for s in streams) == list(range(20)), [s["id"] for s in streams]
assert [s["kind"] for s in streams[:5]] * 4 == [s["kind"] for s in streams], streams
# Every client's lanes are on its own loop's compute streams: each loop's show up.
held = {sid for s in streams for sid in s.get("sessions", [])}
assert set(ids) <= {int(x) for x in held}, (ids, held)
# Summed over the loops: every op sseq-stress ran came in a frame of its own (its
# allocs and frees too, which are not device ops), and at least half were device ops.
c = d["counters"]
assert int(c["frames_in"]) >= ops + 10 * 5, (c["frames_in"], ops)
assert int(c["ops_completed"]) == int(c["ops_submitted"]), c
assert int(c["ops_completed"]) >= ops // 2 + 20, (c["ops_completed"], ops)
assert int(c["sessions_total"]) >= 8 + 10, c["sessions_total"]
EOF

# STREAMS, CLIENTS and BUFFERS as status lists them.
"$sseqctl" --socket "$sock" --json clients >"$dir/clients.json"
"$sseqctl" --socket "$sock" --json buffers >"$dir/buffers.json"
"$sseqctl" --socket "$sock" --json streams >"$dir/streams.json"
python3 - "$dir/clients.json" "$dir/buffers.json" "$dir/streams.json" <<'EOF' ||
import json, sys
clients = json.load(open(sys.argv[1]))["clients"]
buffers = json.load(open(sys.argv[2]))["buffers"]
streams = json.load(open(sys.argv[3]))["streams"]
assert len(clients) == 10, clients
ids = {int(c["session"]) for c in clients}
assert {int(b["session"]) for b in buffers} == ids, buffers
assert len(buffers) == 20, len(buffers)
assert len(streams) == 20, len(streams)
# A buffer's producer is a d2d copy on its own loop's stream, numbered as STREAMS numbers.
d2d = {s["id"] for s in streams if s["kind"] == "d2d"}
assert {b["producer"]["stream"] for b in buffers} <= d2d, buffers
assert len({b["producer"]["stream"] for b in buffers}) == 4, buffers
EOF
	fail "clients, buffers, streams: $(cat "$dir/clients.json" "$dir/buffers.json")"

# The trace: entries from every loop, in time order, with unique numbers.
"$sseqctl" --socket "$sock" --json trace -n 200 >"$dir/trace.json"
python3 - "$dir/trace.json" <<'EOF' || fail "trace over four loops: $(head -c 2000 "$dir/trace.json")"
import json, sys
t = json.load(open(sys.argv[1]))["trace"]
assert len(t) == 200, len(t)
seqs = [int(e["seq"]) for e in t]
assert len(set(seqs)) == len(seqs) and seqs == sorted(seqs), seqs
times = [int(e["time_ns"]) for e in t]
assert times == sorted(times), times
loops = {int(e["stream"]) // 5 for e in t}
assert loops == {0, 1, 2, 3}, loops
EOF

# The timeline, paged loop by loop: every loop's operations (more than one ring of 4096
# holds), each arrow within a loop.
"$sseqctl" --socket "$sock" trace --chrome "$dir/t.json" 2>"$dir/ctl.err" ||
	fail "sseqctl trace --chrome: $(cat "$dir/ctl.err")"
python3 - "$dir/t.json" <<'EOF' || fail "timeline over four loops"
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
ops = [e for e in ev if e.get("ph") == "X"]
assert len(ops) > 8192, len(ops)
assert len({(e["args"]["session"], e["args"]["point"]) for e in ops}) == len(ops), "twice"
assert {e["args"]["stream"] // 5 for e in ops} == {0, 1, 2, 3}, "not every loop's"
# An arrow joins a producer to the op that waited for it: both on one loop's streams.
at = {e["args"]["point"]: e["args"]["stream"] // 5 for e in ops}
waits = [(w, e) for e in ops for w in e["args"]["waits"]]
assert waits, "no dependency arrows"
for w, e in waits:
    p = w if isinstance(w, str) else w.get("producer", "")
    if p in at:
        assert at[p] == e["args"]["stream"] // 5, (w, e["args"])
EOF

# trace --follow polls with since_seq: new entries from every loop, none twice.
"$sseqctl" --socket "$sock" --json trace --follow -n 1 >"$dir/follow.json" &
follow_pid=$!
sleep 0.5
"$stress" --socket "$sock" --ops 2000 --clients 8 --seed 6 >/dev/null ||
	fail "sseq-stress during trace --follow"
sleep 0.5 # its last poll
kill -TERM "$follow_pid"
wait "$follow_pid" || fail "sseqctl trace --follow exited $?"
python3 - "$dir/follow.json" <<'EOF' || fail "trace --follow over four loops"
import json, sys
t = [e for line in open(sys.argv[1]) for e in json.loads(line)["trace"]]
seqs = [int(e["seq"]) for e in t]
assert len(seqs) > 1000 and len(set(seqs)) == len(seqs) and seqs == sorted(seqs), seqs[:20]
assert {int(e["stream"]) // 5 for e in t} == {0, 1, 2, 3}, t[:5]
EOF

# A libsseq-style follow subscription (TraceOptions.follow) hears every loop's new
# entries too, in the merged numbering, none twice (wherever its own session is).
rm -f "$dir/follow-ready" "$dir/follow-stop"
python3 - "$sock" "$dir" >"$dir/subscribed.json" <<'EOF' &
import json, os, select, socket, sys
from rawwire import call, decode, decode_last, field, frame, read_frame
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])
call(c, 1, 10, field(1, 1) + field(3, b"loops") + field(5, b"follower"))
c.sendall(frame(field(1, 2) + field(24, field(1, 6) + field(2, field(1, 1) + field(2, 1)))))
open(os.path.join(sys.argv[2], "follow-ready"), "w").close()
out, stop = [], None
while stop is None or os.times().elapsed < stop:
    if stop is None and os.path.exists(os.path.join(sys.argv[2], "follow-stop")):
        stop = os.times().elapsed + 0.5
    if not select.select([c], [], [], 0.05)[0]:
        continue
    m = decode_last(read_frame(c))
    if 3 not in m:
        continue
    r = decode(m[3])
    if r.get(1, [0])[-1] != 2:
        continue
    for e in r.get(9, []):
        e = decode_last(e)
        out.append({"seq": e.get(1, 0), "stream": e.get(4, b"").decode()})
print(json.dumps(out))
EOF
sub_pid=$!
for _ in $(seq 100); do [ -e "$dir/follow-ready" ] && break; sleep 0.05; done
"$stress" --socket "$sock" --ops 2000 --clients 8 --seed 8 >/dev/null ||
	fail "sseq-stress during the follow subscription"
touch "$dir/follow-stop"
wait "$sub_pid" || fail "the follow subscription's client exited $?"
python3 - "$dir/subscribed.json" <<'EOF' || fail "a follow subscription over four loops"
import json, sys
t = json.load(open(sys.argv[1]))
seqs = [e["seq"] for e in t]
assert len(seqs) > 1000 and len(set(seqs)) == len(seqs) and seqs == sorted(seqs), (len(seqs), seqs[:20])
assert {int(e["stream"]) // 5 for e in t if e["stream"].isdigit()} == {0, 1, 2, 3}, t[:5]
EOF

# sseq_clients: the ten, the scraper not counted.
"$sseqctl" --socket "$sock" metrics >"$dir/metrics.txt"
grep -q '^sseq_clients{.*} 10$' "$dir/metrics.txt" ||
	fail "sseq_clients: $(grep '^sseq_clients' "$dir/metrics.txt")"
[[ $(grep -c '^sseq_stream_last_issued{' "$dir/metrics.txt") == 20 ]] ||
	fail "stream samples: $(grep '^sseq_stream_last_issued' "$dir/metrics.txt")"

# The SIGHUP summary counts every loop's clients.
kill -HUP "$daemon_pid"
for _ in $(seq 100); do grep -q "SIGHUP: " "$dir/sseqd.log" && break; sleep 0.05; done
grep -q "SIGHUP: 10 clients, 0 ops in flight" "$dir/sseqd.log" ||
	fail "SIGHUP summary: $(grep SIGHUP "$dir/sseqd.log")"

# SIGTERM: every loop drains, and sseqd exits 0.
kill "$helper_pid"
wait "$helper_pid" 2>/dev/null || true
helper_pid=
kill -TERM "$daemon_pid"
rc=0
wait "$daemon_pid" || rc=$?
daemon_pid=
[[ $rc == 0 ]] || fail "sseqd exited $rc: $(tail -20 "$dir/sseqd.log")"
for k in 0 1 2 3; do
	grep -q "drained loop $k: " "$dir/sseqd.log" ||
		fail "loop $k did not drain: $(tail -20 "$dir/sseqd.log")"
done

# Admission counts across loops: the 4th connection of one uid is refused though every
# loop has room.
sock=$dir/limit.sock
"$sseqd" --backend sim --socket "$sock" --loops 4 --max-clients-per-uid 3 \
	2>"$dir/limit.log" &
daemon_pid=$!
wait_socket "$sock"
connect_clients "$sock" 3 lim
rc=0
"$sseqctl" --socket "$sock" status >"$dir/out" 2>"$dir/err" || rc=$?
[[ $rc != 0 ]] || fail "a 4th connection of the uid was served: $(cat "$dir/out")"
grep -q "max-clients-per-uid" "$dir/err" || fail "4th connection: $(cat "$dir/err")"
grep -qi "RESOURCE_EXHAUSTED\|resource exhausted\|RESOURCE EXHAUSTED" "$dir/err" ||
	fail "4th connection: not RESOURCE_EXHAUSTED: $(cat "$dir/err")"
kill "$helper_pid"
wait "$helper_pid" 2>/dev/null || true
helper_pid=
# Once they are gone, a connection is served again.
for _ in $(seq 100); do
	"$sseqctl" --socket "$sock" --json status >"$dir/out" 2>/dev/null && break
	sleep 0.05
done
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["clients"] == [], d["clients"]' \
	"$dir/out" || fail "after the clients left: $(cat "$dir/out")"
kill -TERM "$daemon_pid"
rc=0
wait "$daemon_pid" || rc=$?
daemon_pid=
[[ $rc == 0 ]] || fail "sseqd (limit) exited $rc: $(tail -20 "$dir/limit.log")"
echo "ok"
