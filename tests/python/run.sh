#!/bin/bash
# The Python tests (client, pytest plugin, conv2d batching stress) against a sim sseqd
# with random H2D delays, run as pytest-xdist workers like a real suite. Fails if any
# test fails or the daemon exits non-zero (a crash, a sanitizer report).
# Usage: run.sh SSEQD SSEQCTL LIBSSEQ
# Exits 77 (skip) when no Python with numpy, pytest and pytest-xdist is found
# ($PYTHON, else python3, else /usr/bin/python3).
set -euo pipefail
# meson passes paths relative to the build directory; the tests run from the source root.
sseqd=$(realpath "$1") ctl=$(realpath "$2") lib=$(realpath "$3")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

py=
for cand in ${PYTHON:-} python3 /usr/bin/python3; do
	if command -v "$cand" >/dev/null 2>&1 &&
		"$cand" -c 'import numpy, pytest, xdist' 2>/dev/null; then
		py=$cand
		break
	fi
done
if [ -z "$py" ]; then
	echo "SKIP: no python3 with numpy, pytest and pytest-xdist" \
		"(Debian: python3-numpy python3-pytest python3-pytest-xdist)" >&2
	exit 77
fi

tmp=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT

sock=$tmp/sseqd.sock
"$sseqd" --backend sim --socket "$sock" --log-level warning \
	--sim-delay h2d=rand:0-500us 2>"$tmp/daemon.log" &
pid=$!
# Ready once it answers (the socket file appears before listen()).
ready=
for _ in $(seq 200); do
	if [ -S "$sock" ] && "$ctl" --socket "$sock" status >/dev/null 2>&1; then
		ready=1
		break
	fi
	sleep 0.05
done
if [ -z "$ready" ]; then
	echo "FAIL: sseqd did not start: $(cat "$tmp/daemon.log")" >&2
	exit 1
fi

export PYTHONPATH=$root/client/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
export SSEQ_SOCKET=$sock SSEQ_LIBRARY=$lib SSEQD=$sseqd SSEQCTL=$ctl
unset SSEQ_SOCKETS PYTEST_ADDOPTS

# A libsseq built with -Db_sanitize=address needs the ASan runtime loaded first, and
# python itself is not instrumented: preload the runtime the library was linked with
# and turn leak detection off for python (it keeps its interned objects to the end).
# Daemons the tests start get the original ASAN_OPTIONS back (SSEQD_ASAN_OPTIONS).
asan_rt=$(ldd "$lib" | awk '/libasan\.so/ { print $3 }')
if [ -n "$asan_rt" ]; then
	echo "libsseq is built with ASan: preloading $asan_rt into python"
	export SSEQD_ASAN_OPTIONS=${ASAN_OPTIONS:-}
	export LD_PRELOAD=$asan_rt${LD_PRELOAD:+:$LD_PRELOAD}
	export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi

rc=0
(cd "$root" && "$py" -m pytest -q -n 4 -p sseq.pytest_plugin -p no:cacheprovider \
	tests/python) || rc=$?

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
if [ "$status" -ne 0 ]; then
	echo "FAIL: sseqd exited with status $status: $(tail -20 "$tmp/daemon.log")" >&2
	exit 1
fi
exit "$rc"
