#!/bin/bash
# sseqctl against a live sim daemon: every command as tables and as JSON, the JSON
# shapes scripts rely on, and the exit codes for no daemon, a silent one, a refusing one.
# Usage: test-sseqctl.sh SSEQD SSEQCTL
set -euo pipefail

sseqd=$1
sseqctl=$2
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
sock=$dir/s.sock

# Runs sseqctl expecting exit code $1; output in $dir/out and $dir/err.
expect_rc() {
	local want=$1 rc=0
	shift
	"$sseqctl" "$@" >"$dir/out" 2>"$dir/err" || rc=$?
	[[ $rc == "$want" ]] || fail "sseqctl $* exited $rc, want $want: $(cat "$dir/err")"
}

"$sseqd" --backend sim --socket "$sock" 2>"$dir/sseqd.log" &
daemon_pid=$!
wait_socket "$sock"

for cmd in status clients buffers streams stats trace metrics; do
	expect_rc 0 --socket "$sock" "$cmd"
	[[ -s $dir/out ]] || fail "sseqctl $cmd printed nothing"
	expect_rc 0 --socket "$sock" --json "$cmd"
	python3 -m json.tool "$dir/out" >/dev/null || fail "sseqctl --json $cmd: not JSON: $(cat "$dir/out")"
done

# The shapes scripts depend on, on an idle daemon (sseqctl leaves itself out of clients).
expect_rc 0 --socket "$sock" --json buffers
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d == {"buffers": []}, d' \
	"$dir/out" || fail "idle buffers JSON: $(cat "$dir/out")"
expect_rc 0 --socket "$sock" --json status
python3 - "$dir/out" <<'EOF' || fail "status JSON shape: $(cat "$dir/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert set(d) == {"device", "streams", "counters", "clients"}, d.keys()
assert d["device"]["backend"] == "sim", d["device"]
assert isinstance(d["streams"], list) and d["streams"], d["streams"]
assert d["streams"][0]["kind"] == "compute", d["streams"][0]
assert d["counters"]["waits_enqueued"] == 0, d["counters"]
assert d["clients"] == [], d["clients"]
EOF
expect_rc 0 --socket "$sock" --json stats
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert "ops_submitted" in d["counters"], d' \
	"$dir/out" || fail "stats JSON: $(cat "$dir/out")"
expect_rc 0 --socket "$sock" --json metrics
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert "sseq_ops_submitted_total" in d["metrics"], d' \
	"$dir/out" || fail "metrics JSON: $(cat "$dir/out")"
expect_rc 0 --socket "$sock" metrics
grep -q '^# TYPE sseq_ops_submitted_total counter$' "$dir/out" || fail "metrics text: $(cat "$dir/out")"

# SSEQ_SOCKET sets the socket; -n is accepted by trace.
SSEQ_SOCKET=$sock expect_rc 0 --json trace -n 5
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert isinstance(d["trace"], list), d' \
	"$dir/out" || fail "trace JSON: $(cat "$dir/out")"

# --follow keeps polling until interrupted, then exits 0; every line is a JSON document.
# The signal goes to sseqctl alone: timeout(1) would signal its whole process group,
# LeakSanitizer's exit-time tracer included, which can hang it under ASan.
"$sseqctl" --socket "$sock" --json trace --follow >"$dir/out" 2>"$dir/err" &
helper_pid=$!
sleep 1
kill -INT "$helper_pid"
rc=0
wait "$helper_pid" || rc=$?
helper_pid=
[[ $rc == 0 ]] || fail "trace --follow exited $rc: $(cat "$dir/err")"
[[ -s $dir/out ]] || fail "trace --follow printed nothing"
while IFS= read -r line; do
	python3 -c 'import json,sys; json.loads(sys.argv[1])' "$line" || fail "follow line: $line"
done <"$dir/out"

# Lanes: two clients holding lanes (raw frames, encoded by hand as below), the first
# asking for two. clients shows each one's lanes, streams which sessions hold each
# compute stream.
python3 -c '
import socket, struct, sys, time
from rawwire import field
conns = []
for lanes in (2, 1):
    c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])
    hello = field(1, 1) + field(3, b"laned") + field(6, lanes)
    msg = field(1, 1) + field(10, hello)
    c.sendall(struct.pack("<I", len(msg)) + msg)
    n = struct.unpack("<I", c.recv(4, socket.MSG_WAITALL))[0]
    c.recv(n, socket.MSG_WAITALL)
    conns.append(c)
open(sys.argv[2], "w").write("ready")
time.sleep(60)' "$sock" "$dir/laned" &
helper_pid=$!
for _ in $(seq 100); do [[ -s $dir/laned ]] && break; sleep 0.05; done
[[ -s $dir/laned ]] || fail "the laned clients did not connect"
expect_rc 0 --socket "$sock" --json clients
cp "$dir/out" "$dir/clients.json"
expect_rc 0 --socket "$sock" --json streams
python3 - "$dir/clients.json" "$dir/out" <<'EOF' || fail "lanes JSON: $(cat "$dir/clients.json" "$dir/out")"
import json, sys
clients = json.load(open(sys.argv[1]))["clients"]
streams = json.load(open(sys.argv[2]))["streams"]
lanes = {c["session"]: c["lanes"] for c in clients if c["name"] == "laned"}
assert sorted(map(len, lanes.values())) == [1, 2], lanes
two = next(s for s, l in lanes.items() if len(l) == 2)
one = next(s for s, l in lanes.items() if len(l) == 1)
# Distinct, least loaded: the first client took 0 and 1, the second 2.
assert lanes[two] == [0, 1] and lanes[one] == [2], lanes
compute = {s["id"]: s["sessions"] for s in streams if s["kind"] == "compute"}
assert compute[0] == [two] and compute[1] == [two] and compute[2] == [one], compute
assert all(not v for k, v in compute.items() if k > 2), compute
EOF
expect_rc 0 --socket "$sock" clients
grep -qE "laned .* 0,1$" "$dir/out" || fail "clients table lacks lanes 0,1: $(cat "$dir/out")"
two=$(python3 -c 'import json,sys; print([c["session"] for c in json.load(open(sys.argv[1]))["clients"] if len(c["lanes"]) == 2][0])' "$dir/clients.json")
expect_rc 0 --socket "$sock" streams
grep -q "SESSIONS" "$dir/out" || fail "streams table without SESSIONS: $(cat "$dir/out")"
grep -qE "^ *1 +compute +1 .* $two$" "$dir/out" || fail "streams table: stream 1 not held by $two: $(cat "$dir/out")"
kill "$helper_pid" 2>/dev/null || true
wait "$helper_pid" 2>/dev/null || true
helper_pid=

# One representation per field, valid JSON always. A client with a worker id labels
# buffers with a control character, a quote and a multi-byte character that the
# daemon's 47-byte label limit would cut in half; a slice; a free (a trace entry naming
# the buffer); and a label and a worker id that are not UTF-8, which the daemon refuses
# naming the field.
python3 -c '
import json, os, socket, struct, sys, time
from rawwire import decode, field
c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])
tag = 0
def call(body_field, body):
    global tag
    tag += 1
    msg = field(1, tag) + field(body_field, body)
    c.sendall(struct.pack("<I", len(msg)) + msg)
    while True:
        n = struct.unpack("<I", c.recv(4, socket.MSG_WAITALL))[0]
        m = decode(c.recv(n, socket.MSG_WAITALL))
        if 1 in m:
            r = decode(m[1][0])
            if r.get(1, [0])[0] == tag:
                return r
call(10, field(1, 1) + field(3, b"json-client") + field(5, b"gw5"))
def alloc(label):
    r = call(13, field(1, 256) + field(2, label))
    return r.get(2, [0])[0], r.get(3, [b""])[0].decode("utf-8", "replace"), r.get(4, [0])[0]
_, _, plain = alloc("ctl\x01\"q".encode())
_, _, cut = alloc(("x" * 46 + "\u00e9").encode())
view = call(15, field(1, plain) + field(3, 128) + field(4, b"s"))[4][0]
gone = alloc(b"freed")[2]
call(14, field(1, gone))
copy = alloc(b"copy")[2]
# Two copies: the second reads what the first wrote, a decision the trace names it in.
call(18, field(1, plain) + field(3, cut) + field(5, 64))
call(18, field(1, cut) + field(3, copy) + field(5, 64))
status, message, _ = alloc(b"bad\xff\xfe")
# A Hello whose worker id is not UTF-8, on a second connection.
main, c = c, socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])
r = call(10, field(1, 1) + field(3, b"json-client") + field(5, b"gw\xc3"))
hello_status, hello_message = r.get(2, [0])[0], r.get(3, [b""])[0].decode()
c.close(); c = main
json.dump({"plain": plain, "cut": cut, "view": view, "gone": gone, "copy": copy,
           "bad_status": status, "bad_message": message,
           "hello_status": hello_status, "hello_message": hello_message},
          open(sys.argv[2] + ".tmp", "w"))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
time.sleep(60)' "$sock" "$dir/labels.json" &
helper_pid=$!
for _ in $(seq 100); do [[ -s $dir/labels.json ]] && break; sleep 0.05; done
[[ -s $dir/labels.json ]] || fail "the labelling client did not finish"
for cmd in status clients buffers streams trace; do
	expect_rc 0 --socket "$sock" --json "$cmd"
	cp "$dir/out" "$dir/$cmd.json"
done
expect_rc 0 --socket "$sock" buffers
cp "$dir/out" "$dir/buffers.txt"
python3 - "$dir" <<'EOF' || fail "JSON representations (above)"
import json, os, sys
d = sys.argv[1]
want = json.load(open(os.path.join(d, "labels.json")))
docs = {}
for cmd in ("status", "clients", "buffers", "streams", "trace"):
    raw = open(os.path.join(d, cmd + ".json"), "rb").read()
    try:
        docs[cmd] = json.loads(raw.decode("utf-8"))  # strict: no invalid UTF-8
    except ValueError as e:
        sys.exit(f"--json {cmd}: not valid JSON in UTF-8: {e}: {raw[:400]!r}")
def walk(v, where):
    if isinstance(v, dict):
        for k, x in v.items(): walk(x, f"{where}.{k}")
    elif isinstance(v, list):
        for i, x in enumerate(v): walk(x, f"{where}[{i}]")
    elif v == "-" or v == "":
        sys.exit(f"{where}: {v!r} where JSON has null")
for cmd, doc in docs.items():
    walk(doc, cmd)
# The refusal names the field; nothing was allocated for it.
assert want["bad_status"] == 1, want  # STATUS_INVALID_ARGUMENT
assert "label" in want["bad_message"] and "UTF-8" in want["bad_message"], want
assert want["hello_status"] == 1, want
assert want["hello_message"] == "Hello.worker_id is not valid UTF-8", want
bufs = {b["handle"]: b for b in docs["buffers"]["buffers"]}
assert all(isinstance(h, int) for h in bufs), list(bufs)
assert set(bufs) == {want["plain"], want["cut"], want["view"], want["copy"]}, (bufs.keys(), want)
assert bufs[want["plain"]]["label"] == "ctl\x01\"q", bufs[want["plain"]]
# Cut at a character boundary, never inside the multi-byte one.
assert bufs[want["cut"]]["label"] == "x" * 46, bufs[want["cut"]]
v = bufs[want["view"]]
assert v["is_slice"] and v["base_handle"] == want["plain"], v
assert bufs[want["plain"]]["base_handle"] is None, bufs[want["plain"]]
assert bufs[want["plain"]]["producer"] is None, bufs[want["plain"]]  # never written
assert bufs[want["cut"]]["producer"]["stream"] >= 0, bufs[want["cut"]]  # written
# Trace: the second copy names the buffer it read by the same number; streams are
# numbers everywhere.
assert any(e["op"] == "d2d" and e["buffer"] == want["cut"] for e in docs["trace"]["trace"]), \
    (docs["trace"], want)
for e in docs["trace"]["trace"]:
    assert isinstance(e["stream"], int), e
    assert e["buffer"] is None or isinstance(e["buffer"], int), e
    for k in ("point", "producer"):
        assert e[k] is None or isinstance(e[k]["stream"], int), e
for s in docs["streams"]["streams"]:
    assert isinstance(s["id"], int), s
me = [c for c in docs["clients"]["clients"] if c["name"] == "json-client"]
assert me and me[0]["worker_id"] == "gw5", docs["clients"]
# Tables: the same decimal handles.
table = open(os.path.join(d, "buffers.txt")).read()
for h in (want["plain"], want["view"]):
    assert f" {h} " in table, (h, table)
assert f"{want['plain']}+0" in table, table
assert "0x" not in table, table
EOF
kill "$helper_pid" 2>/dev/null || true
wait "$helper_pid" 2>/dev/null || true
helper_pid=

# Bad usage.
expect_rc 2 --socket "$sock" frobnicate
expect_rc 2 --socket "$sock" status -n 3
expect_rc 2 --socket "$sock" trace -n 0
expect_rc 2
expect_rc 0 --help
expect_rc 0 --version

kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "sseqd exited $? after SIGTERM: $(cat "$dir/sseqd.log")"
daemon_pid=

# Several GPUs: with no socket named, status and clients ask every gpu*.sock in
# $SSEQ_SOCKET_DIR, a section (text) or a member (JSON) each, keyed by socket; -i N picks
# one; a socket nobody answers at is reported in its place, the others still shown, and
# the exit status says so. Other commands keep the one default socket (gpu0.sock there).
run=$dir/run
mkdir "$run"
gpu_pids=()
for n in 0 1; do
	"$sseqd" --backend sim --device "$n" --socket "$run/gpu$n.sock" 2>>"$dir/gpus.log" &
	gpu_pids+=($!)
done
wait_socket "$run/gpu0.sock"
wait_socket "$run/gpu1.sock"
(
	unset SSEQ_SOCKET
	export SSEQ_SOCKET_DIR=$run
	expect_rc 0 --json status
	python3 - "$dir/out" "$run" <<'EOF' || fail "status of every GPU: $(cat "$dir/out")"
import json, sys
d = json.loads(open(sys.argv[1], "rb").read().decode("utf-8"))
run = sys.argv[2]
assert list(d) == [f"{run}/gpu0.sock", f"{run}/gpu1.sock"], list(d)
for n in (0, 1):
    s = d[f"{run}/gpu{n}.sock"]
    assert set(s) == {"device", "streams", "counters", "clients"}, s.keys()
    assert s["device"]["index"] == n, (n, s["device"])
EOF
	expect_rc 0 status
	grep -qx "$run/gpu0.sock:" "$dir/out" && grep -qx "$run/gpu1.sock:" "$dir/out" ||
		fail "status sections: $(cat "$dir/out")"
	[[ $(grep -c '^device [01]: ' "$dir/out") == 2 ]] || fail "two devices: $(cat "$dir/out")"
	grep -A1 -x "$run/gpu1.sock:" "$dir/out" | grep -q '^device 1: ' ||
		fail "gpu1's section is not device 1's: $(cat "$dir/out")"
	expect_rc 0 -i 1 --json status
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["device"]["index"] == 1, d["device"]' \
		"$dir/out" || fail "-i 1: $(cat "$dir/out")"
	expect_rc 0 --json stats # one daemon: the default socket in $SSEQ_SOCKET_DIR
	python3 -c 'import json,sys; assert "counters" in json.load(open(sys.argv[1]))' "$dir/out" ||
		fail "stats with SSEQ_SOCKET_DIR: $(cat "$dir/out")"
	expect_rc 2 -i 1 --socket "$run/gpu0.sock" status
	expect_rc 2 -i one status
	SSEQ_SOCKET=$run/gpu1.sock expect_rc 0 --json clients
	python3 -c 'import json,sys; assert set(json.load(open(sys.argv[1]))) == {"clients"}' "$dir/out" ||
		fail "SSEQ_SOCKET names one daemon: $(cat "$dir/out")"
	# A third socket nobody answers at.
	python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$run/gpu2.sock"
	expect_rc 3 --json clients
	python3 - "$dir/out" "$run" <<'EOF' || fail "a dead GPU among live ones: $(cat "$dir/out")"
import json, sys
d = json.load(open(sys.argv[1]))
run = sys.argv[2]
assert list(d) == [f"{run}/gpu{n}.sock" for n in (0, 1, 2)], list(d)
assert d[f"{run}/gpu0.sock"] == {"clients": []} and d[f"{run}/gpu1.sock"] == {"clients": []}, d
dead = d[f"{run}/gpu2.sock"]
assert "Connection refused" in dead["error"] and dead["exit_status"] == 3, dead
EOF
	grep -q "gpu2.sock: Connection refused" "$dir/err" || fail "dead GPU on stderr: $(cat "$dir/err")"
	expect_rc 3 clients
	grep -qx "$run/gpu1.sock:" "$dir/out" && grep -q "^error: .*gpu2.sock" "$dir/out" ||
		fail "clients sections with a dead GPU: $(cat "$dir/out")"
	# Nothing found: the default socket, as without discovery.
	mkdir "$dir/none"
	SSEQ_SOCKET_DIR=$dir/none expect_rc 3 status
	grep -q "no daemon answers at $dir/none/gpu0.sock" "$dir/err" ||
		fail "no GPU socket found: $(cat "$dir/err")"
) || exit 1
kill "${gpu_pids[@]}"
wait "${gpu_pids[@]}" 2>/dev/null || true

# No daemon: one clear line and exit 3, for a missing socket and a dead one.
expect_rc 3 --socket "$dir/missing.sock" status
grep -q "^sseqctl: no daemon answers at $dir/missing.sock: No such file or directory" "$dir/err" ||
	fail "missing socket message: $(cat "$dir/err")"
[[ $(wc -l <"$dir/err") == 1 ]] || fail "more than one line: $(cat "$dir/err")"
python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$dir/dead.sock"
expect_rc 3 --socket "$dir/dead.sock" --json buffers
grep -q "Connection refused (is sseqd running? set --socket or SSEQ_SOCKET)" "$dir/err" ||
	fail "dead socket message: $(cat "$dir/err")"
[[ ! -s $dir/out ]] || fail "printed output without a daemon: $(cat "$dir/out")"

# A peer that accepts and never answers: a timeout and exit 3, not a hang.
python3 -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)
c, _ = s.accept(); time.sleep(30)' "$dir/mute.sock" &
helper_pid=$!
wait_socket "$dir/mute.sock"
expect_rc 3 --socket "$dir/mute.sock" status
grep -q "within 5 s" "$dir/err" || fail "timeout message: $(cat "$dir/err")"
kill "$helper_pid" 2>/dev/null || true
wait "$helper_pid" 2>/dev/null || true
helper_pid=

# A daemon that welcomes and then refuses the query: its message, exit 1. The frames
# are encoded by hand (rawwire.py: field tags and varints) to keep the test free of protobuf.
python3 -c '
import socket, sys
from rawwire import field, frame, read_frame
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)
c, _ = s.accept()
read_frame(c)
welcome = field(3, 7)
c.sendall(frame(field(1, field(1, 1) + field(6, welcome))))
read_frame(c)
result = field(1, 2) + field(2, 15) + field(3, b"window full, try later")
c.sendall(frame(field(3, result)))
c.recv(1)' "$dir/busy.sock" &
helper_pid=$!
wait_socket "$dir/busy.sock"
expect_rc 1 --socket "$dir/busy.sock" stats
grep -q "busy: window full, try later" "$dir/err" || fail "daemon error message: $(cat "$dir/err")"
wait "$helper_pid" 2>/dev/null || true
helper_pid=

echo "ok"
