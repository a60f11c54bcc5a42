#!/bin/bash
# The timeline end to end: a sim daemon with delays runs sseq-stress (copies and kernels
# on several streams, so kernels wait for copies); sseqctl trace --chrome writes it as
# Chrome trace-event JSON, which timeline-check.py loads and checks (slices named by
# session, worker and kernel, a track per stream, paired flows, consumers starting after
# their producers ended by the device's clock); python3 -m sseq.timeline draws it as a
# PNG. Then the edges: hostile strings from a daemon still make valid JSON, a daemon
# older than protocol 1.4 gets a clear refusal, and bad files a clear error.
# Usage: test-timeline.sh SSEQD SSEQCTL SSEQ_STRESS PYTHON_PACKAGE_DIR
set -euo pipefail

sseqd=$1
sseqctl=$2
stress=$3
pydir=$4
here=$(dirname "$0")
py=/usr/bin/python3
[[ -x $py ]] || py=python3
# shellcheck source-path=SCRIPTDIR
. "$here/lib.sh"
socket_polls=200 # wait_socket: up to 10 s
sock=$dir/s.sock

"$py" -c 'import json' 2>/dev/null || { echo "SKIP: no python3"; exit 77; }

# ---- a real run ----
"$sseqd" --backend sim --socket "$sock" --log-level warning \
	--sim-delay h2d=rand:50-300us --sim-delay compute=rand:0-200us \
	--sim-delay d2d=rand:0-100us 2>"$dir/sseqd.log" &
daemon_pid=$!
wait_socket "$sock"
"$stress" --socket "$sock" --ops 400 --clients 2 --lanes 2 --seed 11 >"$dir/stress.out" ||
	fail "sseq-stress: $(tail -3 "$dir/stress.out")"
grep -q " wrong=0 errors=0 races=0" "$dir/stress.out" || fail "stress: $(tail -1 "$dir/stress.out")"

"$sseqctl" --socket "$sock" trace --chrome "$dir/t.json" 2>"$dir/ctl.err" ||
	fail "sseqctl trace --chrome: $(cat "$dir/ctl.err")"
grep -q "operations" "$dir/ctl.err" || fail "no summary: $(cat "$dir/ctl.err")"
# The sim keeps device times for every op; the stress's kernels wait for its copies.
"$py" "$here/timeline-check.py" "$dir/t.json" --min-ops 200 --min-flows 10 --device \
	>"$dir/check.out" || fail "timeline structure (above)"
echo "timeline: $(cat "$dir/check.out")"
grep -q "wait [1-9]" "$dir/check.out" || fail "no event waits recorded: $(cat "$dir/check.out")"

# --perfetto is the same writer; -n keeps the newest N; stdout with -.
"$sseqctl" --socket "$sock" trace --perfetto - -n 5 >"$dir/five.json" 2>/dev/null ||
	fail "trace --perfetto -"
"$py" "$here/timeline-check.py" "$dir/five.json" --min-ops 5 >/dev/null || fail "-n 5 output"
[[ $("$py" -c 'import json,sys; print(sum(e["ph"] == "X" for e in json.load(open(sys.argv[1]))["traceEvents"]))' "$dir/five.json") == 5 ]] ||
	fail "-n 5 did not keep 5 operations"
# Misuse is a usage error.
rc=0
"$sseqctl" --socket "$sock" stats --chrome "$dir/x.json" 2>/dev/null || rc=$?
[[ $rc == 2 ]] || fail "--chrome with stats: exit $rc, want 2"
rc=0
"$sseqctl" --socket "$sock" trace --chrome "$dir/x.json" --follow 2>/dev/null || rc=$?
[[ $rc == 2 ]] || fail "--chrome with --follow: exit $rc, want 2"
rc=0
"$sseqctl" --socket "$sock" trace --chrome "$dir/no/such/dir.json" 2>"$dir/err" || rc=$?
if [[ $rc != 1 ]] || ! grep -q "cannot write" "$dir/err"; then
	fail "unwritable file: exit $rc: $(cat "$dir/err")"
fi
kill "$daemon_pid"
wait "$daemon_pid" 2>/dev/null || true
daemon_pid=

# The check can fail: with every second wait dropped on the way to the device (the core
# still decides it, so the timeline lists it), kernels start before the copies they
# read have ended, by the device's clock, and the check says which.
"$sseqd" --backend sim --socket "$dir/drop.sock" --log-level warning \
	--sim-delay h2d=1ms --inject drop-wait=2 2>/dev/null &
daemon_pid=$!
wait_socket "$dir/drop.sock"
"$stress" --socket "$dir/drop.sock" --ops 200 --clients 2 --lanes 2 --seed 11 >/dev/null || true
"$sseqctl" --socket "$dir/drop.sock" trace --chrome "$dir/drop.json" 2>/dev/null ||
	fail "trace --chrome with dropped waits"
if "$py" "$here/timeline-check.py" "$dir/drop.json" --device 2>"$dir/err" >/dev/null; then
	fail "the check passed a timeline whose waits were dropped"
fi
grep -q "before its producer" "$dir/err" || fail "dropped waits: $(cat "$dir/err")"
kill "$daemon_pid"
wait "$daemon_pid" 2>/dev/null || true
daemon_pid=

# ---- fake daemons, frames by hand (rawwire.py: field tags and varints) ----
cat >"$dir/fake.py" <<'PY'
import socket, sys
from rawwire import field, frame, read_frame
path, minor = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_UNIX); s.bind(path); s.listen(4)
c, _ = s.accept()
read_frame(c)
welcome = field(1, 1) + field(2, minor) + field(3, 7)
c.sendall(frame(field(1, field(1, 1) + field(6, welcome))))
if minor >= 4:
    read_frame(c)
    point = lambda x, n: field(1, x) + field(2, n)
    # Two ops, the second waiting for the first: labels with quotes, a backslash, a
    # control character, bytes that are not UTF-8 and a character that is.
    prod = (field(1, 1) + field(2, point(16, 1)) + field(3, b"h2d") + field(4, b"h2d")
            + field(6, 5) + field(7, b'gw"0\\\x01\xff\xfe') + field(11, 100)
            + field(12, 1000) + field(13, 5000) + field(14, 6000) + field(15, 1))
    cons = (field(1, 2) + field(2, point(0, 1)) + field(3, b"execute")
            + field(4, b"compute") + field(6, 5) + field(7, b'gw"0\\\x01\xff\xfe')
            + field(9, "k\u00e9rnel\n".encode()) + field(11, 200) + field(12, 5000)
            + field(13, 7000) + field(14, 8000) + field(15, 1)
            + field(16, field(1, point(16, 1)) + field(2, b"wait")))
    result = field(1, 2) + field(12, prod) + field(12, cons)
    c.sendall(frame(field(3, result)))
c.recv(1)
PY

# A daemon of protocol 1.3 knows no timeline: a clear refusal, exit 1, no file.
"$py" "$dir/fake.py" "$dir/old.sock" 3 &
helper_pid=$!
wait_socket "$dir/old.sock"
rc=0
"$sseqctl" --socket "$dir/old.sock" trace --chrome "$dir/old.json" 2>"$dir/err" || rc=$?
[[ $rc == 1 ]] || fail "old daemon: exit $rc, want 1"
grep -q "sseqd is too old for trace --chrome: it speaks protocol 1.3" "$dir/err" ||
	fail "old daemon message: $(cat "$dir/err")"
[[ ! -e $dir/old.json ]] || fail "wrote a file for an old daemon"
wait "$helper_pid" 2>/dev/null || true
helper_pid=

# Whatever bytes a daemon sends, the file is JSON in UTF-8 (strict decoding in the check).
"$py" "$dir/fake.py" "$dir/odd.sock" 4 &
helper_pid=$!
wait_socket "$dir/odd.sock"
"$sseqctl" --socket "$dir/odd.sock" trace --chrome "$dir/odd.json" 2>"$dir/err" ||
	fail "odd labels: $(cat "$dir/err")"
wait "$helper_pid" 2>/dev/null || true
helper_pid=
"$py" "$here/timeline-check.py" "$dir/odd.json" --min-ops 2 --min-flows 1 >/dev/null ||
	fail "odd labels: structure"
"$py" - "$dir/odd.json" <<'PY' || fail "odd labels: content"
import json, sys
evs = json.load(open(sys.argv[1], encoding="utf-8"))["traceEvents"]
x = [e for e in evs if e["ph"] == "X"]
assert x[0]["args"]["worker"] == 'gw"0\\\x01\ufffd\ufffd', x[0]["args"]["worker"]
assert x[1]["args"]["kernel"] == "k\u00e9rnel\n", x[1]["args"]["kernel"]
assert x[1]["ts"] == 5.0 and x[1]["dur"] == 2.0, x[1]
PY

# ---- the picture ----
if ! "$py" -c 'import matplotlib' 2>/dev/null; then
	echo "SKIP: python3-matplotlib is not installed: the PNG is not drawn"
	exit 77
fi
PYTHONPATH=$pydir "$py" -m sseq.timeline "$dir/t.json" -o "$dir/t.png" 2>"$dir/err" ||
	fail "sseq.timeline: $(cat "$dir/err")"
"$py" - "$dir/t.png" <<'PY' || fail "not a PNG"
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", b[:8]
w, h = struct.unpack(">II", b[16:24])
assert len(b) > 10000 and w > 500 and h > 200, (len(b), w, h)
PY
# Bad input: a clear message, exit 1, no picture.
echo '{"traceEvents": [' >"$dir/broken.json"
rc=0
PYTHONPATH=$pydir "$py" -m sseq.timeline "$dir/broken.json" -o "$dir/b.png" 2>"$dir/err" || rc=$?
if [[ $rc != 1 ]] || ! grep -q "is not valid JSON" "$dir/err"; then
	fail "broken JSON: exit $rc: $(cat "$dir/err")"
fi
echo '{"traceEvents": []}' >"$dir/empty.json"
rc=0
PYTHONPATH=$pydir "$py" -m sseq.timeline "$dir/empty.json" -o "$dir/b.png" 2>"$dir/err" || rc=$?
if [[ $rc != 1 ]] || ! grep -q "no operations" "$dir/err"; then
	fail "empty trace: exit $rc: $(cat "$dir/err")"
fi
[[ ! -e $dir/b.png ]] || fail "drew a picture of nothing"
echo "ok"
