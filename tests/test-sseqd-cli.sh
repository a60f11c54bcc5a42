#!/bin/bash
# sseqd's command line as a user meets it: --socket replaces only a stale socket (a
# regular file, a directory or a symbolic link there is refused, named, and kept), the
# socket is unlinked at exit only while it is still the one sseqd made, option errors
# name the range or form they take, and --backend hip in a build without HIP says which
# backends it has.
# Usage: test-sseqd-cli.sh SSEQD
set -euo pipefail
sseqd=$1
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

# Runs sseqd with the arguments given, expecting it to refuse (exit 1 or 2): its stderr
# in $err.
refused() {
	local rc=0
	err=$(timeout 10 "$sseqd" "$@" 2>&1) || rc=$?
	[[ $rc == 1 || $rc == 2 ]] || fail "sseqd $*: exit $rc, expected a refusal: $err"
}

# Not a socket at the path: refused, named, kept as it was.
echo precious >"$dir/file"
mkdir "$dir/dir"
ln -s file "$dir/link"
for what in "file:a regular file" "dir:a directory" "link:a symbolic link"; do
	path=$dir/${what%%:*}
	refused --backend sim --socket "$path"
	[[ $err == *"$path exists and is ${what#*:}: refusing to replace it"* ]] ||
		fail "--socket $path: $err"
done
[[ $(cat "$dir/file") == precious && -d $dir/dir && -L $dir/link ]] ||
	fail "a path sseqd refused was changed: $(ls -l "$dir")"

# A stale socket (a dead daemon's) is replaced; at exit the socket is unlinked.
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$dir/stale.sock"
"$sseqd" --backend sim --socket "$dir/stale.sock" 2>"$dir/stale.err" &
daemon_pid=$!
# The stale socket is there from the start: wait for one that answers (the daemon's,
# once it replaced it), for up to 10 s.
python3 - "$dir/stale.sock" <<'PY' || fail "the stale socket was not replaced: $(cat "$dir/stale.err")"
import socket, sys, time
deadline = time.monotonic() + 10
while True:
    try:
        socket.socket(socket.AF_UNIX).connect(sys.argv[1])
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.05)
PY
kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "sseqd exited $?: $(cat "$dir/stale.err")"
daemon_pid=
[[ ! -e $dir/stale.sock ]] || fail "the socket was left behind at exit"

# The path replaced by a file while sseqd runs: at exit, the file is kept.
"$sseqd" --backend sim --socket "$dir/moved.sock" 2>"$dir/moved.err" &
daemon_pid=$!
socket_polls=200 wait_socket "$dir/moved.sock"
echo kept >"$dir/moved.new"
mv -f "$dir/moved.new" "$dir/moved.sock"
kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "sseqd exited $?: $(cat "$dir/moved.err")"
daemon_pid=
[[ -f $dir/moved.sock && $(cat "$dir/moved.sock") == kept ]] ||
	fail "sseqd unlinked a file that was not its socket at exit"

# Numbers out of range name the range; injected faults with a missing or bad N the form.
refused --window 0
[[ $err == *"--window: must be 2..1048576"* ]] || fail "--window 0: $err"
refused --max-clients 0
[[ $err == *"--max-clients: must be 1..1048576"* ]] || fail "--max-clients 0: $err"
for spec in fail-op fail-op=x fail-op=0 device-lost-op drop-wait drop-wait=0 \
	legacy-sync-window=; do
	refused --inject "$spec"
	[[ $err == *"expected ${spec%%=*}=N"* ]] || fail "--inject $spec: $err"
done
refused --inject bogus
[[ $err == *"unknown fault (known: fail-op=N,"* ]] || fail "--inject bogus: $err"

# --loops: its range; a limit that cannot be shared out between the loops, said so.
refused --loops 17
[[ $err == *"--loops: must be 0..16"* ]] || fail "--loops 17: $err"
refused --backend sim --socket "$dir/loops.sock" --loops 4 --max-input-memory 8M
[[ $err == *"is shared by --loops 4: each loop needs at least 4M"* ]] ||
	fail "--loops 4 --max-input-memory 8M: $err"
[[ ! -e $dir/loops.sock ]] || fail "a refused --loops left its socket behind"

# --backend hip where this sseqd has no HIP backend: one line that says so and which
# backends it has (in a HIP build without a GPU the refusal names the GPU instead; where
# it has a device, a GPU or the fake CUDA runtime of a -Dfake_cuda build, it serves).
rc=0
err=$(timeout 5 "$sseqd" --backend hip --socket "$dir/hip.sock" 2>&1) || rc=$?
if [[ $rc == 124 ]]; then
	grep -q "hip: GPU [0-9]*: " <<<"$err" || fail "--backend hip neither refused nor served: $err"
	echo "--backend hip: a device here, served (no refusal to check)"
elif [[ $rc != 1 && $rc != 2 ]]; then
	fail "sseqd --backend hip: exit $rc: $err"
elif [[ $err == *"built without"* ]]; then
	[[ $err == *"its backends: sim"* ]] || fail "--backend hip: $err"
	# (A hard descriptor limit below what the default limits may hold adds its own
	# warning, before the backend is chosen: not the line this checks.)
	[[ $(grep -v "descriptor limit" <<<"$err" | grep -c .) == 1 ]] ||
		fail "--backend hip: more than one line: $err"
fi

# The loop makes a sleeping submit thread's calls itself unless told otherwise: --help
# names inline as --submit-idle's default, as sseqd(8) does (BENCHMARKS.md, the H200 A/B
# of 2026-12-07 17:33-18:12).
help=$("$sseqd" --help 2>&1 | tr -s ' \n' ' ')
entry=${help#*--submit-idle }
entry=${entry%%--small-copy-pool*}
[[ $entry =~ \(hip\;\ default\ ([a-z]+)\) ]] ||
	fail "--help's --submit-idle entry names no default: $entry"
[[ ${BASH_REMATCH[1]} == inline ]] || fail "--submit-idle's default is ${BASH_REMATCH[1]}"
echo ok
