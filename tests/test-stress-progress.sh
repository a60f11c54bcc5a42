#!/bin/bash
# sseq-stress's progress: on a terminal, a line on stderr updated in place while the
# clients run (cleared before the report); stdout keeps only the report, whose last line
# is still "ops=N wrong=N errors=N races=N"; a short run to a pipe prints nothing else.
# The terminal comes from script(1); skips (77) without it.
# Usage: test-stress-progress.sh SSEQD SSEQ_STRESS
set -euo pipefail
sseqd=$1
stress=$(realpath "$2")
command -v script >/dev/null || {
	echo "SKIP: needs script(1) (util-linux)"
	exit 77
}
# shellcheck source-path=SCRIPTDIR
. "$(dirname "$0")/lib.sh"

# Every stream slowed down: a few hundred ops take a second or more.
"$sseqd" --backend sim --socket "$dir/s.sock" --sim-delay all=2ms 2>"$dir/sseqd.err" &
daemon_pid=$!
socket_polls=200 wait_socket "$dir/s.sock"

# On a terminal (script's pty carries stdout and stderr together).
script -qec "'$stress' --socket '$dir/s.sock' --ops 800 --clients 1 --seed 3" \
	"$dir/typescript" >"$dir/tty.out" </dev/null || fail "sseq-stress on a tty: $(cat "$dir/tty.out")"
grep -qa $'\rsseq-stress: [0-9]*/800 ops ([0-9]*%), [0-9]* s' "$dir/tty.out" ||
	fail "no progress line on the terminal: $(od -c "$dir/tty.out" | head -20)"
last=$(tr -d '\r' <"$dir/tty.out" | tail -1)
[[ $last =~ ^ops=[0-9]+\ wrong=0\ errors=0\ races=0$ ]] || fail "last line on the tty: '$last'"

# To a pipe, a short run: the two report lines on stdout, nothing on stderr.
"$stress" --socket "$dir/s.sock" --ops 200 --clients 1 --seed 3 >"$dir/pipe.out" 2>"$dir/pipe.err"
[[ $(wc -l <"$dir/pipe.out") == 2 && ! -s $dir/pipe.err ]] ||
	fail "to a pipe: stdout $(cat "$dir/pipe.out"), stderr $(cat "$dir/pipe.err")"
kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "sseqd exited $?: $(cat "$dir/sseqd.err")"
daemon_pid=
echo ok
