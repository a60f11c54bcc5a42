#!/bin/bash
# The timeline end to end: a sim daemon with delays runs sseq-stress (copies and kernels
# on several streams, so kernels wait for copies); sseqctl trace --chrome writes it as
# Chrome trace-event JSON, which timeline-check.py loads and checks (slices named by
# session, worker and kernel, a track per stream, paired flows, consumers starting after
# their producers ended by the device's clock); python3 -m sseq.timeline draws it as a
# PNG. The filters (--session, --worker, --since, --last) keep exactly the operations
# they name, in sseqctl and in the plotter, and the picture names sessions, workers and
# kernels and cuts long idle gaps out of its axis. On hip (a -Dfake_cuda build, or a
# GPU), --device-timeline on times every entry by the device, off by what was observed.
# Then the edges: hostile strings from a daemon still make valid JSON, a daemon older
# than protocol 1.4 gets a clear refusal, and bad files a clear error.
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
# A second burst after an idle second, of another session and worker (libsseq takes the
# worker id from $PYTEST_XDIST_WORKER).
sleep 1
PYTEST_XDIST_WORKER=gw7 "$stress" --socket "$sock" --ops 60 --clients 1 --lanes 1 --seed 12 \
	>"$dir/stress2.out" || fail "sseq-stress as gw7: $(tail -3 "$dir/stress2.out")"

"$sseqctl" --socket "$sock" trace --chrome "$dir/t.json" 2>"$dir/ctl.err" ||
	fail "sseqctl trace --chrome: $(cat "$dir/ctl.err")"
grep -q "operations" "$dir/ctl.err" || fail "no summary: $(cat "$dir/ctl.err")"
# The sim keeps device times for every op; the stress's kernels wait for its copies.
"$py" "$here/timeline-check.py" "$dir/t.json" --min-ops 200 --min-flows 10 --device \
	>"$dir/check.out" || fail "timeline structure (above)"
echo "timeline: $(cat "$dir/check.out")"
grep -q "wait [1-9]" "$dir/check.out" || fail "no event waits recorded: $(cat "$dir/check.out")"
grep -q "clock_error_max_ns=0" "$dir/check.out" || fail "the sim's times are the host's own"

# Device times mapped onto the host clock may lie within their clock_error_ns of the
# host's instants: a start 500 ns before its issue passes with a bound of 1000 ns and
# fails with one of 400 ns (hip on a GPU maps within a few microseconds).
for bound in 1000 400; do
	"$py" - "$dir/t.json" "$dir/skew.json" "$bound" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
e = next(e for e in doc["traceEvents"] if e["ph"] == "X" and not e["args"]["waits"])
a = e["args"]
a["start_ns"] = a["issue_ns"] - 500
a["clock_error_ns"] = int(sys.argv[3])
e["ts"] = a["start_ns"] / 1000
e["dur"] = (a["end_ns"] - a["start_ns"]) / 1000
json.dump(doc, open(sys.argv[2], "w"))
PY
	rc=0
	"$py" "$here/timeline-check.py" "$dir/skew.json" --device >/dev/null 2>"$dir/err" || rc=$?
	if [[ $bound == 1000 && $rc != 0 ]]; then
		fail "a start within clock_error_ns of its issue: $(cat "$dir/err")"
	fi
	if [[ $bound == 400 ]] && { [[ $rc == 0 ]] || ! grep -q "out of order" "$dir/err"; }; then
		fail "a start 500 ns before its issue passed with clock_error_ns 400"
	fi
done

# ---- the filters: exactly the operations of the whole timeline they keep ----
# The first stress session, and a time in the idle second between the bursts.
read -r session gap_ms < <("$py" - "$dir/t.json" <<'PY'
import json, sys
xs = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
first = [e for e in xs if e["args"]["worker"] != "gw7"]
second = [e for e in xs if e["args"]["worker"] == "gw7"]
assert first and second, "both bursts in the timeline"
end = max(e["args"]["end_ns"] for e in first)
start = min(e["args"]["start_ns"] for e in second)
assert start - end > 500e6, "the bursts %d ns apart" % (start - end)
print(first[0]["args"]["session"], (end + start) // 2 // 1000000)
PY
) || fail "the two bursts are not in the timeline"
filtered() { # NAME SSEQCTL-FILTER... -- CHECK-FILTER...: write $dir/NAME.json, check it
	local name=$1
	shift
	local ctl_args=()
	while [[ $1 != -- ]]; do
		ctl_args+=("$1")
		shift
	done
	shift
	"$sseqctl" --socket "$sock" trace --chrome "$dir/$name.json" "${ctl_args[@]}" \
		2>"$dir/$name.err" || fail "trace --chrome ${ctl_args[*]}: $(cat "$dir/$name.err")"
	grep -q "of [0-9]* operations (${ctl_args[*]})" "$dir/$name.err" ||
		fail "no summary of the filter: $(cat "$dir/$name.err")"
	"$py" "$here/timeline-check.py" "$dir/$name.json" --whole "$dir/t.json" "$@" \
		>/dev/null 2>"$dir/$name.check" ||
		fail "trace --chrome ${ctl_args[*]}: $(cat "$dir/$name.check")"
}
filtered worker --worker gw7 -- --worker gw7 --min-ops 10
filtered session --session "$session" -- --session "$session" --min-ops 10
filtered last --last 100 -- --last-ms 100
filtered since --since "$gap_ms" -- --since-ms "$gap_ms" --only-worker gw7
filtered both --session "$session" --last 300 -- --session "$session" --last-ms 300
# Nothing matches: a file all the same, and what the timeline does hold.
"$sseqctl" --socket "$sock" trace --chrome "$dir/none.json" --worker nobody 2>"$dir/err" ||
	fail "--worker nobody: $(cat "$dir/err")"
if ! grep -q "0 of [0-9]* operations" "$dir/err" || ! grep -q "(worker gw7)" "$dir/err"; then
	fail "--worker nobody: $(cat "$dir/err")"
fi
# Bad values name what would do; the filters need --chrome.
for bad in "--last 0" "--last 1.5" "--since -1" "--session 0" "--session x" "--worker="; do
	rc=0
	# shellcheck disable=SC2086 # the option and its value
	"$sseqctl" --socket "$sock" trace --chrome "$dir/x.json" $bad 2>"$dir/err" || rc=$?
	[[ $rc == 2 ]] || fail "$bad: exit $rc, want 2"
	grep -Eq "wants (whole milliseconds, [01] to|a session number|a worker id)" "$dir/err" ||
		fail "$bad: $(cat "$dir/err")"
done
rc=0
"$sseqctl" --socket "$sock" trace --last 5 2>"$dir/err" || rc=$?
if [[ $rc != 2 ]] || ! grep -q "apply to trace --chrome" "$dir/err"; then
	fail "--last without --chrome: exit $rc: $(cat "$dir/err")"
fi

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

# ---- hip (the fake CUDA runtime of a -Dfake_cuda build, or a GPU) ----
# --device-timeline on: every entry the GPU's own timestamps, in order (issue <= start <=
# end <= complete, consumers after their producers); off: what the daemon observed. A
# build without hip, or a machine without a GPU, skips this part.
for mode in on off; do
	rm -f "$dir/hip.sock"
	"$sseqd" --backend hip --socket "$dir/hip.sock" --log-level warning \
		--device-timeline "$mode" 2>"$dir/sseqd-hip.log" &
	daemon_pid=$!
	for _ in $(seq 200); do
		[[ -S $dir/hip.sock ]] || ! kill -0 "$daemon_pid" 2>/dev/null && break
		sleep 0.05
	done
	if [[ ! -S $dir/hip.sock ]]; then
		wait "$daemon_pid" 2>/dev/null || true
		daemon_pid=
		echo "hip: no hip backend here: skipped ($(tail -1 "$dir/sseqd-hip.log"))"
		break
	fi
	"$stress" --socket "$dir/hip.sock" --ops 300 --clients 2 --lanes 2 --seed 13 \
		>"$dir/hip-stress.out" || fail "sseq-stress on hip: $(tail -3 "$dir/hip-stress.out")"
	"$sseqctl" --socket "$dir/hip.sock" trace --chrome "$dir/hip-$mode.json" 2>/dev/null ||
		fail "trace --chrome on hip, --device-timeline $mode"
	kill "$daemon_pid"
	wait "$daemon_pid" 2>/dev/null || true
	daemon_pid=
	device=()
	[[ $mode == off ]] || device=(--device)
	"$py" "$here/timeline-check.py" "$dir/hip-$mode.json" --min-ops 100 --min-flows 1 \
		"${device[@]}" >"$dir/hip-check.out" || fail "hip timeline, --device-timeline $mode (above)"
	"$py" - "$dir/hip-$mode.json" "$mode" <<'PY' || fail "hip timeline, --device-timeline $mode: timing"
import json, sys
evs = json.load(open(sys.argv[1], encoding="utf-8"))["traceEvents"]
timing = {e["args"]["timing"] for e in evs if e["ph"] == "X"}
want = "device" if sys.argv[2] == "on" else "observed"
assert timing == {want}, (sys.argv[2], timing)
# The device's clock is mapped onto the host's within a bound each entry states.
errs = {e["args"]["clock_error_ns"] > 0 for e in evs if e["ph"] == "X"}
assert errs == {sys.argv[2] == "on"}, (sys.argv[2], errs)
PY
	echo "hip timeline, --device-timeline $mode: $(cat "$dir/hip-check.out")"
done

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
# The plotter's filters keep what sseqctl's keep; the picture names every session and
# worker in its legend and each track's users, puts kernel names on wide bars, cuts a
# long idle gap out of its axis and says so, and --progress says each stage.
PYTHONPATH=$pydir "$py" - "$dir" "$session" "$gap_ms" <<'PY' || fail "the plotter (above)"
import json, sys
import sseq.timeline as tl
d, session, gap_ms = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
whole = tl.load(d + "/t.json")
def points(tr):
    return {s["args"]["point"] for s in tr.slices}
def same(flt, name):
    sub = tl.select(whole, flt)
    want = points(tl.load("%s/%s.json" % (d, name)))
    assert points(sub) == want, (flt, len(points(sub)), len(want))
    assert 0 < len(sub.slices) < len(whole.slices), (flt, len(sub.slices))
    # Every wait mark and arrow left binds to an operation kept.
    kept = {id(s) for s in sub.slices}
    for ev in sub.instants + list(sub.flow_starts.values()) + list(sub.flow_ends.values()):
        sl = whole.enclosing((ev["pid"], ev["tid"]), ev["ts"])
        assert sl is not None and id(sl) in kept, ev
    return sub
assert {s["args"]["worker"] for s in same(tl.Filter(worker="gw7"), "worker").slices} == {"gw7"}
assert {s["args"]["session"] for s in same(tl.Filter(session=session), "session").slices} == {session}
same(tl.Filter(last_ms=100), "last")
same(tl.Filter(since_ms=gap_ms), "since")
same(tl.Filter(session=session, last_ms=300), "both")
try:
    tl.select(whole, tl.Filter(worker="nobody"))
    raise AssertionError("a filter that matches nothing drew")
except tl.TimelineError as e:
    assert "no operation matches --worker nobody" in str(e) and "gw7" in str(e), e

drawing = tl.render(whole, d + "/labels.png")
owners = {s: w for s, w in {(s["args"]["session"], s["args"]["worker"]) for s in whole.slices}}
for s, w in owners.items():
    assert any(l.startswith("s%d %s (" % (s, w)) for l in drawing.legend), (s, w, drawing.legend)
assert drawing.owners == ["s%d %s" % (s, owners[s]) for s in sorted(owners)], drawing.owners
assert "%d sessions" % len(owners) in drawing.title, drawing.title
# A long run with a long pause: two bursts of two workers 100 s apart, one kernel wide
# enough to carry its name.
def op(ts, dur, session, worker, kernel, tid):
    return {"ph": "X", "name": "s%d %s %s" % (session, worker, kernel), "cat": "execute",
            "ts": ts, "dur": dur, "pid": 1, "tid": tid,
            "args": {"session": session, "worker": worker, "kernel": kernel, "op": "execute"}}
evs = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 100, "args": {"name": "compute 0 (stream 0)"}}]
evs += [op(1000 + 300 * i, 200, 1, "gw0", "spin", 100) for i in range(20)]
evs += [op(100e6 + 300 * i, 200, 2, "gw1", "fill", 101) for i in range(19)]
evs += [op(100e6 + 6000, 3000, 2, "gw1", "scale", 101)]
json.dump({"traceEvents": evs}, open(d + "/idle.json", "w"))
idle = tl.load(d + "/idle.json")
drawing = tl.render(idle, d + "/idle.png")
assert drawing.compressed and drawing.gaps == 1, drawing
assert drawing.track_labels == ["compute 0 (stream 0)\ns1 gw0", "pid 1 / tid 101\ns2 gw1"], drawing
assert "1 idle gap cut out of the time axis (1.7 min in all)" in drawing.note, drawing.note
assert "scale" in drawing.slice_labels, drawing.slice_labels
assert [l for l in drawing.legend if l.startswith("s")] == ["s1 gw0 (20 ops)", "s2 gw1 (20 ops)"], drawing.legend
assert drawing.unit == "ms", drawing.unit
drawing = tl.render(idle, d + "/kept.png", gaps="keep")
assert not drawing.compressed and drawing.unit == "s" and "idle" not in drawing.note, drawing
PY
rc=0
PYTHONPATH=$pydir "$py" -m sseq.timeline "$dir/t.json" --worker gw7 --last 100 --progress \
	-o "$dir/w.png" 2>"$dir/err" || rc=$?
[[ $rc == 0 ]] || fail "sseq.timeline --worker gw7 --last 100: $(cat "$dir/err")"
if ! grep -q "\] drawing [0-9]* bars" "$dir/err" || ! grep -q "\] writing $dir/w.png" "$dir/err"; then
	fail "no progress: $(cat "$dir/err")"
fi
grep -q "operations, [0-9]* tracks, 1 session, " "$dir/err" || fail "summary: $(cat "$dir/err")"
rc=0
PYTHONPATH=$pydir "$py" -m sseq.timeline "$dir/t.json" --session 99999 -o "$dir/b.png" \
	2>"$dir/err" || rc=$?
if [[ $rc != 1 ]] || ! grep -q "no operation matches --session 99999" "$dir/err"; then
	fail "--session 99999: exit $rc: $(cat "$dir/err")"
fi
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
