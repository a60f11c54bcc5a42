#!/bin/bash
# sseqd's journal entries without booting systemd: in a mount namespace of its own, a
# tmpfs over /run holds a stand-in journal socket (/run/systemd/journal/socket, read here
# in journald's native protocol). With $JOURNAL_STREAM naming its stderr, sseqd sends
# entries whose fields carry the client's session and worker (SSEQ_SESSION=,
# SSEQ_WORKER=) with PRIORITY=, SYSLOG_IDENTIFIER= and MESSAGE=; with a $JOURNAL_STREAM
# that is not its stderr, or none, it writes "<N>" lines to stderr as before. A device
# fault's entry names the culprit's session and worker, and so does a race or schedule
# checker finding (with the kernel and the buffer's label and handle).
# test-systemd-boot.sh checks the same with the real journald (journalctl SSEQ_WORKER=).
# Needs root and unshare(1); skips (77) without them.
# Usage: test-journal.sh SSEQD SSEQ_STRESS
set -euo pipefail
skip() {
	echo "SKIP: $*"
	exit 77
}
if [[ ${1:-} != --inside ]]; then
	[[ $(id -u) == 0 ]] || skip "needs root (a mount namespace with a journal socket of its own)"
	command -v unshare >/dev/null || skip "needs unshare (util-linux)"
	unshare -m --propagation private true 2>/dev/null || skip "cannot make a mount namespace here"
	exec unshare -m --propagation private bash "$0" --inside "$@"
fi
shift
sseqd=$1
stress=$2
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"
pids=()
cleanup_more() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
}
mount -t tmpfs -o mode=0755 tmpfs /run || skip "cannot mount a tmpfs over /run"
mkdir -p /run/systemd/journal

# The stand-in journald: each datagram's fields, one JSON object a line.
python3 -c '
import json, os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/run/systemd/journal/socket")
open(sys.argv[1] + ".ready", "w").close()
out = open(sys.argv[1], "a")
while True:
    d = s.recv(1 << 20)
    fields, i = {}, 0
    while i < len(d):
        nl = d.index(b"\n", i)
        line = d[i:nl]
        if b"=" in line:  # KEY=value
            k, v = line.split(b"=", 1); i = nl + 1
        else:  # KEY, a 64-bit little-endian length, the value, a newline
            k = line; n = struct.unpack("<Q", d[nl + 1:nl + 9])[0]
            v = d[nl + 9:nl + 9 + n]; i = nl + 10 + n
        fields[k.decode()] = v.decode("utf-8", "replace")
    out.write(json.dumps(fields) + "\n"); out.flush()' "$dir/journal.jsonl" &
pids+=($!)
for _ in $(seq 100); do [[ -e $dir/journal.jsonl.ready ]] && break; sleep 0.05; done
[[ -e $dir/journal.jsonl.ready ]] || fail "the stand-in journal did not start"

# Runs sseqd (options after the first two arguments) with stderr to $dir/$1.err and
# JOURNAL_STREAM=$2 (empty: unset), one client as worker gw3 (libsseq reads
# PYTEST_XDIST_WORKER) running $ops ops (default 50), then stops it.
run() {
	local name=$1 stream=$2 sock=$dir/$1.sock pid
	shift 2
	: >"$dir/$name.err"
	[[ $stream == self ]] && stream=$(stat -c %d:%i "$dir/$name.err")
	if [[ -n $stream ]]; then
		JOURNAL_STREAM=$stream "$sseqd" --backend sim --socket "$sock" "$@" 2>"$dir/$name.err" &
	else
		env -u JOURNAL_STREAM "$sseqd" --backend sim --socket "$sock" "$@" 2>"$dir/$name.err" &
	fi
	pid=$!
	for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.05; done
	[[ -S $sock ]] || fail "$name: no socket"
	PYTEST_XDIST_WORKER=gw3 "$stress" --socket "$sock" --ops "${ops:-50}" --clients 1 --seed 3 \
		>"$dir/$name.stress" 2>&1 || [[ $# -gt 0 ]] ||
		fail "$name: sseq-stress: $(cat "$dir/$name.stress")"
	kill -TERM "$pid"
	wait "$pid" || fail "$name: sseqd exited $?: $(cat "$dir/$name.err")"
}

run journal self
python3 - "$dir/journal.jsonl" "$dir/journal.err" <<'EOF' || fail "journal entries (above)"
import json, re, sys
entries = [json.loads(l) for l in open(sys.argv[1])]
assert entries, "no journal entries"
mine = [e for e in entries if e.get("SSEQ_WORKER") == "gw3"]
conn = [e for e in mine if re.match(r"session: client \d+ connected: .* worker gw3", e["MESSAGE"])]
assert conn, mine or entries  # sseq-stress's connections, each as worker gw3
for c in conn:
    session = c["SSEQ_SESSION"]
    assert c["MESSAGE"].startswith(f"session: client {session} connected"), c
    assert c["PRIORITY"] == "6" and c["SYSLOG_IDENTIFIER"] == "sseqd", c
    assert c["SSEQ_SUBSYSTEM"] == "session" and "CODE_FILE" not in c, c
    assert any("disconnected" in e["MESSAGE"] and e["SSEQ_SESSION"] == session
               for e in mine), (session, mine)
# Lines about no client carry no such fields.
start = [e for e in entries if "serving device" in e["MESSAGE"]]
assert start and "SSEQ_SESSION" not in start[0] and "SSEQ_WORKER" not in start[0], start
assert start[0]["PRIORITY"] == "5", start[0]
# All of it went to the journal: nothing on stderr.
err = open(sys.argv[2]).read()
assert "connected" not in err and "serving device" not in err, err
print(f"{len(entries)} entries; gw3's sessions: {[c['SSEQ_SESSION'] for c in conn]}")
EOF

# A device fault: the reset's err entry names the culprit's session and worker.
: >"$dir/journal.jsonl"
run fault self --inject device-lost-op=5
python3 - "$dir/journal.jsonl" <<'EOF' || fail "the device reset's entry (above)"
import json, sys
entries = [json.loads(l) for l in open(sys.argv[1])]
resets = [e for e in entries if e["MESSAGE"].startswith("reset: device reset 1:")]
assert resets, entries
r = resets[0]
assert r["PRIORITY"] == "3" and r.get("SSEQ_WORKER") == "gw3", r
assert f"caused by session {r['SSEQ_SESSION']} (gw3" in r["MESSAGE"], r
EOF

# A missing wait (injected) found by the schedule checker, and with the checker off by the
# sim's race detector: each err entry names the op's session, worker, kernel and buffer
# (its label and handle), and carries SSEQ_SESSION= and SSEQ_WORKER= like a fault's.
for detector in verify detector; do
	: >"$dir/journal.jsonl"
	opts=(--inject legacy-sync-window=2 --sim-delay h2d=2ms)
	[[ $detector == detector ]] && opts+=(--no-verify)
	ops=300 run "$detector" self "${opts[@]}"
	# The sim's race detector sees a race only when the racing ops overlap in time: a run
	# where they happened not to has no finding to check, so up to two more runs.
	for _ in 1 2; do
		[[ $detector == detector ]] && ! grep -q '"MESSAGE": *"detector: ' "$dir/journal.jsonl" ||
			break
		: >"$dir/journal.jsonl"
		ops=300 run "$detector" self "${opts[@]}"
	done
	python3 - "$dir/journal.jsonl" "$detector" <<'EOF' || fail "the $detector finding's entry (above)"
import json, re, sys
entries = [json.loads(l) for l in open(sys.argv[1])]
found = [e for e in entries if e["MESSAGE"].startswith(sys.argv[2] + ": ") and
         e.get("PRIORITY") == "3"]
assert found, [e["MESSAGE"] for e in entries]
for f in found:
    m = re.match(r"\w+: session (\d+) \(gw3, pid \d+\)[,:] ", f["MESSAGE"])
    assert m, f
    assert f.get("SSEQ_WORKER") == "gw3" and f.get("SSEQ_SESSION") == m.group(1), f
# sseq-stress labels its buffers c<client>-s<slot>.
named = r"\w+: session \d+ \(gw3, pid \d+\), kernel \w+, buffer 'c\d+-s\d+' \(handle \d+\): "
assert any(re.match(named, f["MESSAGE"]) for f in found), found
print(f"{sys.argv[2]}: {found[0]['MESSAGE']}")
EOF
done
: >"$dir/journal.jsonl"
n=0

# A $JOURNAL_STREAM that is not our stderr (redirected since), and none: stderr lines.
run stale 1:1
run plain ""
for name in stale plain; do
	grep -qE '^<6>session: client [0-9]+ connected: .* worker gw3' "$dir/$name.err" ||
		fail "$name: no <6> line on stderr: $(cat "$dir/$name.err")"
	grep -q '^<5>main: sseqd .* serving device' "$dir/$name.err" ||
		fail "$name: no <5> start line: $(cat "$dir/$name.err")"
done
[[ $(wc -l <"$dir/journal.jsonl") == "$n" ]] ||
	fail "entries sent to the journal without \$JOURNAL_STREAM naming stderr"
echo "ok"
