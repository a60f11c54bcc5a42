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
assert set(d) == {"daemon", "device", "streams", "counters", "clients"}, d.keys()
assert d["device"]["backend"] == "sim", d["device"]
assert isinstance(d["streams"], list) and d["streams"], d["streams"]
assert d["streams"][0]["kind"] == "compute", d["streams"][0]
assert d["counters"]["waits_enqueued"] == 0, d["counters"]
assert d["clients"] == [], d["clients"]
EOF

# status says which daemon answers, as systemctl status does: version, pid, uptime and
# socket; and streams with nothing in flight are one line by kind, not a row each.
python3 - "$dir/out" "$daemon_pid" "$sock" <<'EOF' || fail "status JSON daemon: $(cat "$dir/out")"
import json, sys, time
d = json.load(open(sys.argv[1]))["daemon"]
assert d["pid"] == int(sys.argv[2]), d
assert d["socket"] == sys.argv[3], d
assert d["version"] and d["protocol"].startswith("1."), d
assert 0 < d["uptime_ns"] < 600e9, d
assert abs(d["started_unix_ns"] / 1e9 - time.time()) < 600, d
# The timeline's origin on this host's CLOCK_MONOTONIC: now less the uptime, within the
# query's own time.
mono = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
assert 0 < mono - d["started_monotonic_ns"] - d["uptime_ns"] < 60e9, d
EOF
expect_rc 0 --socket "$sock" status
grep -qE "^ +Daemon: sseqd [0-9.]+.* \(protocol 1\.[0-9]+\), pid $daemon_pid$" "$dir/out" &&
	grep -qE "^ +Uptime: [0-9]+s \(since [0-9-]+ [0-9:]+ UTC\)$" "$dir/out" &&
	grep -qx " *Socket: $sock" "$dir/out" &&
	grep -qE "^ +Streams: [0-9]+, all [0-9]+ compute, [0-9]+ h2d, [0-9]+ d2h, [0-9]+ d2d idle$" \
		"$dir/out" ||
	fail "status header: $(cat "$dir/out")"
! grep -q "LAST ISSUED" "$dir/out" || fail "status lists idle streams: $(cat "$dir/out")"
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
# No request ring named (sseq(7), Request ring).
assert all(c["ring_size"] == 0 and c["ring_bytes"] == 0 for c in clients), clients
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

# Tables align by what a terminal shows, not by bytes: labels with accents and wide
# characters still put every later column under its header.
python3 -c '
import socket, struct, sys, time
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
        if 1 in m and decode(m[1][0]).get(1, [0])[0] == tag:
            return
call(10, field(1, 1) + field(3, b"wide"))
for label in ("plain", "caf\u00e9", "\u6f22\u5b57\u30e9\u30d9\u30eb", "e\u0301t\u00e9"):
    call(13, field(1, 256) + field(2, label.encode()))
open(sys.argv[2], "w").write("ready")
time.sleep(60)' "$sock" "$dir/wide" &
helper_pid=$!
for _ in $(seq 100); do [[ -s $dir/wide ]] && break; sleep 0.05; done
[[ -s $dir/wide ]] || fail "the labelling client did not finish"
LC_ALL=C expect_rc 0 --socket "$sock" buffers
python3 - "$dir/out" <<'EOF' || fail "buffers table by display width: $(cat "$dir/out")"
import sys, unicodedata
def width(s):
    return sum(0 if unicodedata.combining(ch) else
               2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in s)
rows = open(sys.argv[1], encoding="utf-8").read().splitlines()
header = rows[0]
col = width(header[:header.index("SIZE")])
wide = [r for r in rows[1:] if any(ord(ch) > 127 for ch in r)]
assert len(wide) == 3, rows
for r in rows[1:]:
    at = r.index(" 256 B") + 1
    assert width(r[:at]) == col, (r, width(r[:at]), col)
EOF
kill "$helper_pid" 2>/dev/null || true
wait "$helper_pid" 2>/dev/null || true
helper_pid=

# Many buffers: one session with 20,000 long-labelled buffers (about 1.3 MB listed,
# more than one frame may carry) and another session with three; buffers comes in
# pages, and sseqctl lists them all, as a table and as JSON.
python3 -c '
import os, socket, struct, sys, time
from rawwire import decode, field, frame, read_frame
def client(n, name):
    c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])
    c.sendall(frame(field(1, 1) + field(10, field(1, 1) + field(3, name))))
    read_frame(c)
    out = b"".join(frame(field(1, 2 + i) + field(13, field(1, 16) +
                   field(2, b"%s-%06d-" % (name, i) + b"L" * 30)))
                   for i in range(n))
    c.sendall(out)
    for _ in range(n):
        r = decode(decode(read_frame(c))[1][0])
        assert r.get(2, [0])[0] == 0, r
    return c
many = client(20000, b"many")
few = client(3, b"few")
open(sys.argv[2], "w").write("ready")
time.sleep(120)' "$sock" "$dir/many.ready" &
helper_pid=$!
for _ in $(seq 600); do [[ -s $dir/many.ready ]] && break; sleep 0.05; done
[[ -s $dir/many.ready ]] || fail "the client with many buffers did not finish"
expect_rc 0 --socket "$sock" --json buffers
python3 - "$dir/out" <<'EOF' || fail "--json buffers with 20,003 buffers (above)"
import json, sys
bufs = json.load(open(sys.argv[1]))["buffers"]
labels = [b["label"] for b in bufs]
assert len(bufs) == 20003, len(bufs)
assert len(set(labels)) == 20003, "a buffer listed twice"
assert {l[:12] for l in labels if l.startswith("many-")} == \
       {"many-%06d-" % i for i in range(20000)}, "a buffer missing"
assert sum(l.startswith("few-") for l in labels) == 3, "the other session's buffers"
EOF
expect_rc 0 --socket "$sock" buffers
[[ $(grep -c " many-[0-9]\{6\}-L" "$dir/out") == 20000 ]] ||
	fail "buffers table: $(grep -c " many-" "$dir/out") of 20000 rows"
[[ $(grep -c " few-[0-9]\{6\}-L" "$dir/out") == 3 ]] || fail "buffers table: the other session's"
kill "$helper_pid" 2>/dev/null || true
wait "$helper_pid" 2>/dev/null || true
helper_pid=

# trace --follow into a reader that stops (| head): it ends, quietly, when the reader
# goes, without waiting for an entry to write; also where SIGPIPE was left ignored.
for ignore in "" --ignore-signal=PIPE; do
	rc=0
	timeout 20 env $ignore bash -c '"$1" --socket "$2" trace --follow 2>"$3" | head -n 1 >/dev/null' \
		_ "$sseqctl" "$sock" "$dir/err" || rc=$?
	[[ $rc == 0 ]] || fail "trace --follow | head ${ignore:+($ignore) }did not end: rc $rc"
	[[ ! -s $dir/err ]] || fail "trace --follow | head printed: $(cat "$dir/err")"
done

# Bad usage; a bad number says which are good.
expect_rc 2 --socket "$sock" frobnicate
expect_rc 2 --socket "$sock" status -n 3
expect_rc 2 --socket "$sock" trace -n 0
grep -q "^sseqctl: -n wants a count from 1 to 4294967295 .*, not '0'$" "$dir/err" ||
	fail "-n range: $(cat "$dir/err")"
expect_rc 2 --socket "$sock" trace -n 4294967296
grep -q "from 1 to 4294967295" "$dir/err" || fail "-n range: $(cat "$dir/err")"
expect_rc 2 -i -1 status
grep -q "^sseqctl: -i wants a GPU number from 0 to 4294967295, not '-1'$" "$dir/err" ||
	fail "-i range: $(cat "$dir/err")"
expect_rc 2
expect_rc 0 --help
expect_rc 0 --version

# Permission denied is not "no daemon": who owns the socket, or the directory closed
# to us, and what lets us in, exit 4. Run as nobody; root would be let in.
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null; then
	as_nobody() {
		local want=$1 rc=0
		shift
		setpriv --reuid=65534 --regid=65534 --clear-groups "$sseqctl" "$@" \
			>"$dir/out" 2>"$dir/err" || rc=$?
		[[ $rc == "$want" ]] || fail "as nobody: sseqctl $* exited $rc, want $want: $(cat "$dir/err")"
	}
	chmod 0700 "$dir"
	as_nobody 4 --socket "$sock" status
	grep -q "^sseqctl: permission denied on $sock: its directory $dir (owner root, group root, mode 0700): join group 'root' .* or run as root$" \
		"$dir/err" || fail "closed directory: $(cat "$dir/err")"
	chmod 0755 "$dir"
	chmod 0600 "$sock"
	as_nobody 4 --socket "$sock" --json status
	grep -q "^sseqctl: permission denied on $sock (owner root, group root, mode 0600): its mode does not let group root read and write it" \
		"$dir/err" || fail "socket mode: $(cat "$dir/err")"
	chmod 0660 "$sock"
	as_nobody 4 --socket "$sock" clients
	grep -q "^sseqctl: permission denied on $sock (owner root, group root, mode 0660): join group 'root' (sudo usermod -aG root \$USER, then log in again) or run as root$" \
		"$dir/err" || fail "not in the group: $(cat "$dir/err")"
	[[ ! -s $dir/out ]] || fail "output without access: $(cat "$dir/out")"
	chmod 0700 "$dir"
	chmod 0666 "$sock"
else
	echo "skip: permission messages need root and setpriv"
fi

# The daemon stopping under trace --follow: sseqctl says it went away and exits 3.
"$sseqctl" --socket "$sock" trace --follow >"$dir/out" 2>"$dir/err" &
helper_pid=$!
sleep 0.5
kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "sseqd exited $? after SIGTERM: $(cat "$dir/sseqd.log")"
daemon_pid=
rc=0
wait "$helper_pid" || rc=$?
helper_pid=
[[ $rc == 3 ]] || fail "trace --follow after the daemon stopped exited $rc: $(cat "$dir/err")"
grep -q "^sseqctl: the daemon at $sock went away" "$dir/err" && ! grep -qi "broken pipe" "$dir/err" ||
	fail "trace --follow after the daemon stopped: $(cat "$dir/err")"

# A stream with a point in flight is listed in status; the idle ones stay one line.
"$sseqd" --backend sim --socket "$dir/slow.sock" --sim-delay d2d=60s 2>>"$dir/sseqd.log" &
daemon_pid=$!
wait_socket "$dir/slow.sock"
python3 -c '
import socket, struct, sys, time
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
call(10, field(1, 1) + field(3, b"slow"))
a = call(13, field(1, 256))[4][0]
b = call(13, field(1, 256))[4][0]
call(18, field(1, a) + field(3, b) + field(5, 64))
open(sys.argv[2], "w").write("ready")
time.sleep(60)' "$dir/slow.sock" "$dir/slow" &
helper_pid=$!
for _ in $(seq 100); do [[ -s $dir/slow ]] && break; sleep 0.05; done
[[ -s $dir/slow ]] || fail "the slow client did not copy"
expect_rc 0 --socket "$dir/slow.sock" status
grep -qE "^ +Streams: [0-9]+, 1 busy \(below\); [0-9]+ compute, [0-9]+ h2d, [0-9]+ d2h, [0-9]+ d2d idle$" "$dir/out" &&
	grep -qE "^ *[0-9]+ +d2d +[0-9]+ +1 +0 +1/[0-9]+ " "$dir/out" &&
	[[ $(grep -cE "^ *[0-9]+ +(compute|h2d|d2h|d2d) " "$dir/out") == 1 ]] ||
	fail "status with a busy stream: $(cat "$dir/out")"
kill -KILL "$daemon_pid" "$helper_pid"
wait "$daemon_pid" "$helper_pid" 2>/dev/null || true
daemon_pid= helper_pid=

# A socket systemd passed: status names it as the socket itself says.
if command -v systemd-socket-activate >/dev/null; then
	systemd-socket-activate -l "$dir/act.sock" "$sseqd" --backend sim 2>>"$dir/sseqd.log" &
	daemon_pid=$!
	wait_socket "$dir/act.sock"
	expect_rc 0 --socket "$dir/act.sock" --json status
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["daemon"]; assert d["socket"] == sys.argv[2], d' \
		"$dir/out" "$dir/act.sock" || fail "socket from systemd: $(cat "$dir/out")"
	kill -TERM "$daemon_pid"
	wait "$daemon_pid" 2>/dev/null || true
	daemon_pid=
fi

# Several GPUs: with no socket named, status, clients, stats and metrics ask every
# gpu*.sock in $SSEQ_SOCKET_DIR, a section (text) or a member (JSON) each, keyed by
# socket, one exposition for metrics; -i N picks one; a socket nobody answers at is
# reported in its place, the others still shown, and the exit status says so. Other
# commands keep the one default socket (gpu0.sock there).
run=$dir/run
mkdir "$run"
gpu_pids=()
# A failure in the subshell below must not leave cleanup waiting for these.
cleanup_more() {
	if ((${#gpu_pids[@]})); then kill "${gpu_pids[@]}" 2>/dev/null; fi
}
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
    assert set(s) == {"daemon", "device", "streams", "counters", "clients"}, s.keys()
    assert s["device"]["index"] == n, (n, s["device"])
    assert s["daemon"]["socket"] == f"{run}/gpu{n}.sock", s["daemon"]
EOF
	expect_rc 0 status
	grep -qx "$run/gpu0.sock:" "$dir/out" && grep -qx "$run/gpu1.sock:" "$dir/out" ||
		fail "status sections: $(cat "$dir/out")"
	[[ $(grep -cE '^ +Device: [01], ' "$dir/out") == 2 ]] || fail "two devices: $(cat "$dir/out")"
	grep -A4 -x "$run/gpu1.sock:" "$dir/out" | grep -qE '^ +Device: 1, ' ||
		fail "gpu1's section is not device 1's: $(cat "$dir/out")"
	expect_rc 0 -i 1 --json status
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["device"]["index"] == 1, d["device"]' \
		"$dir/out" || fail "-i 1: $(cat "$dir/out")"
	expect_rc 0 --json stats
	python3 - "$dir/out" "$run" <<'EOF' || fail "stats of every GPU: $(cat "$dir/out")"
import json, sys
d = json.load(open(sys.argv[1]))
run = sys.argv[2]
assert list(d) == [f"{run}/gpu0.sock", f"{run}/gpu1.sock"], list(d)
assert all("ops_submitted" in d[k]["counters"] for k in d), d
EOF
	expect_rc 0 stats
	grep -qx "$run/gpu1.sock:" "$dir/out" && [[ $(grep -c "^COUNTER " "$dir/out") == 2 ]] ||
		fail "stats sections: $(cat "$dir/out")"
	# metrics: one exposition, each family's HELP and TYPE once, every GPU's samples.
	expect_rc 0 metrics
	python3 - "$dir/out" <<'EOF' || fail "metrics of every GPU: $(cat "$dir/out")"
import collections, re, sys
lines = open(sys.argv[1]).read().splitlines()
for kind in ("HELP", "TYPE"):
    names = [l.split()[2] for l in lines if l.startswith(f"# {kind} ")]
    dup = [n for n, k in collections.Counter(names).items() if k > 1]
    assert not dup, (kind, dup)
for fam in ("sseq_ops_submitted_total", "sseq_clients"):
    devs = sorted(re.search(r'device="(\d+)"', l).group(1) for l in lines
                  if l.startswith(fam + "{"))
    assert devs == ["0", "1"], (fam, devs)
# A family's lines together: once another family starts, it does not come back.
seen, last = set(), None
for l in lines:
    name = l.split()[2] if l.startswith("#") else re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", l).group(0)
    if name != last:
        assert name not in seen, ("family split", name)
        seen.add(name)
        last = name
EOF
	if command -v promtool >/dev/null; then
		promtool check metrics <"$dir/out" >"$dir/promtool.out" 2>&1 ||
			fail "promtool check metrics: $(cat "$dir/promtool.out")"
	fi
	expect_rc 0 --json metrics
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d) == 2 and all("sseq_clients" in v["metrics"] for v in d.values()), d' \
		"$dir/out" || fail "metrics JSON of every GPU: $(cat "$dir/out")"
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
	# Nothing found: the default socket, as without discovery; the JSON is keyed by
	# socket all the same, whatever the number of daemons.
	mkdir "$dir/none"
	SSEQ_SOCKET_DIR=$dir/none expect_rc 3 status
	grep -q "no daemon answers at $dir/none/gpu0.sock" "$dir/err" ||
		fail "no GPU socket found: $(cat "$dir/err")"
	SSEQ_SOCKET_DIR=$dir/none expect_rc 3 --json status
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert list(d) == [sys.argv[2]] and d[sys.argv[2]]["exit_status"] == 3, d' \
		"$dir/out" "$dir/none/gpu0.sock" || fail "no GPU socket found, JSON: $(cat "$dir/out")"
	mkdir "$dir/one"
	ln -s "$run/gpu1.sock" "$dir/one/gpu1.sock"
	SSEQ_SOCKET_DIR=$dir/one expect_rc 0 --json status
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert list(d) == [sys.argv[2]] and d[sys.argv[2]]["device"]["index"] == 1, d' \
		"$dir/out" "$dir/one/gpu1.sock" || fail "one GPU socket found, JSON: $(cat "$dir/out")"
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

# A daemon older than protocol 1.6 says nothing of itself in status: its version comes
# from the Welcome, the socket is the one asked, pid and uptime are unknown (null).
python3 -c '
import socket, sys
from rawwire import field, frame, read_frame
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4)
for _ in range(2):
    c, _ = s.accept()
    read_frame(c)
    welcome = field(1, 1) + field(2, 5) + field(3, 7) + field(5, b"0.0.9")
    c.sendall(frame(field(1, field(1, 1) + field(6, welcome))))
    read_frame(c)
    device = field(2, b"old device") + field(3, b"sim")
    stream = field(1, 0) + field(2, 1) + field(7, 64)
    c.sendall(frame(field(3, field(1, 2) + field(4, device) + field(5, stream))))
    c.recv(1)
    c.close()' "$dir/old.sock" &
helper_pid=$!
wait_socket "$dir/old.sock"
expect_rc 0 --socket "$dir/old.sock" status
grep -qx "     Daemon: sseqd 0.0.9 (protocol 1.5)" "$dir/out" &&
	grep -qx "     Socket: $dir/old.sock" "$dir/out" && ! grep -q "Uptime:" "$dir/out" &&
	grep -qx "    Streams: 1, all 1 compute idle" "$dir/out" ||
	fail "status of a protocol 1.5 daemon: $(cat "$dir/out")"
expect_rc 0 --socket "$dir/old.sock" --json status
python3 - "$dir/out" "$dir/old.sock" <<'EOF' || fail "status JSON of a protocol 1.5 daemon: $(cat "$dir/out")"
import json, sys
d = json.load(open(sys.argv[1]))["daemon"]
assert d == {"version": "0.0.9", "protocol": "1.5", "pid": None, "started_unix_ns": None,
             "uptime_ns": None, "started_monotonic_ns": None, "socket": sys.argv[2]}, d
EOF
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
