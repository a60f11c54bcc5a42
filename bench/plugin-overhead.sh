#!/bin/bash
# What the pytest plugin costs per test: N trivial tests (default 1000) that take the
# sseq_session fixture and do nothing, run with -p sseq.pytest_plugin against a sim
# sseqd, then the same file with the plugin off (-p no:sseq.pytest_plugin; a conftest
# gives the fixture: one plain connection), and tests doing one kernel each. Prints
# seconds (the best and the median of R runs, default 5) and microseconds per test over
# the plugin-off run.
# Usage: bench/plugin-overhead.sh [BUILD] (default build); env N, R, PYTHON, SSEQ_PY (the
# directory holding the sseq package, default client/python).
set -euo pipefail
B=${1:-build}
N=${N:-1000} R=${R:-5}
py=${PYTHON:-/usr/bin/python3}
root=$(cd "$(dirname "$0")/.." && pwd)
sseqd=$root/$B/daemon/sseqd lib=$root/$B/client/lib/libsseq.so
[ -x "$sseqd" ] || { echo "no $sseqd: build first (meson setup $B; ninja -C $B)" >&2; exit 1; }

tmp=$(mktemp -d)
dpid=
trap '[ -n "$dpid" ] && kill -TERM "$dpid" 2>/dev/null; rm -rf "$tmp"' EXIT
sock=$tmp/sseqd.sock
"$sseqd" --backend sim --socket "$sock" --log-level warning 2>"$tmp/daemon.log" &
dpid=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done

# The suites: each test takes the fixture; "work" tests also run one kernel and wait.
mkdir -p "$tmp/on" "$tmp/off" "$tmp/work"
cat >"$tmp/on/test_trivial.py" <<EOF
import pytest

@pytest.mark.parametrize("i", range($N))
def test_trivial(sseq_session, i):
    pass
EOF
cp "$tmp/on/test_trivial.py" "$tmp/off/"
# Plugin off: the same fixture name, one plain connection for the whole run.
cat >"$tmp/off/conftest.py" <<'EOF'
import pytest, sseq

@pytest.fixture(scope="session")
def sseq_session():
    with sseq.connect(name="pytest") as s:
        yield s
EOF
cat >"$tmp/work/test_work.py" <<EOF
import pytest, sseq

@pytest.fixture(scope="module")
def buf(sseq_session):
    b = sseq_session.alloc(64, "f4", label="bench")
    yield b
    b.free()

@pytest.mark.parametrize("i", range($N))
def test_work(sseq_session, buf, i):
    sseq_session.execute("fill", sseq.Out(buf), 1.0, 64).wait()
EOF
cp "$tmp/work/test_work.py" "$tmp/off/test_work.py.txt"

# SSEQ_PY: another copy of the package to measure (e.g. an older plugin).
pkg=${SSEQ_PY:-$root/client/python}
export PYTHONPATH=$pkg${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1 SSEQ_SOCKET=$sock SSEQ_LIBRARY=$lib
unset SSEQ_SOCKETS PYTEST_ADDOPTS

secs() { # dir plugin-args... : one run's wall time in seconds
	local dir=$1
	shift
	/usr/bin/time -o "$tmp/time" -f %e "$py" -m pytest -q -p no:cacheprovider "$@" "$dir" \
		>"$tmp/out" 2>&1 || true
	if ! grep -q " passed" "$tmp/out" || grep -q "failed\|error" "$tmp/out"; then
		cat "$tmp/out" >&2
		exit 1
	fi
	tail -1 "$tmp/time"
}

echo "date=$(date -u +%FT%TZ) host=$(hostname) cpus=$(nproc) tests=$N runs=$R" \
	"load=$(cut -d' ' -f1 /proc/loadavg) pytest=$("$py" -m pytest --version 2>&1 | awk '{ print $2 }')" \
	"package=$pkg"
mkdir -p "$tmp/offwork"
cp "$tmp/off/conftest.py" "$tmp/offwork/"
mv "$tmp/off/test_work.py.txt" "$tmp/offwork/test_work.py"
# Interleaved, so that a machine busy for a while slows both alike; R runs of each.
off='' on='' woff='' won=''
for _ in $(seq "$R"); do
	off="$off $(secs "$tmp/off" -p no:sseq.pytest_plugin)"
	on="$on $(secs "$tmp/on" -p sseq.pytest_plugin)"
	woff="$woff $(secs "$tmp/offwork" -p no:sseq.pytest_plugin)"
	won="$won $(secs "$tmp/work" -p sseq.pytest_plugin)"
done
# The best and the median of the runs; the per-test cost from each.
awk -v n="$N" -v off="$off" -v on="$on" -v woff="$woff" -v won="$won" '
function stat(list, which,   a, k, i, j, t) {
	k = split(list, a, " ")
	for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return which == "min" ? a[1] : (k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2)
}
function line(name, o, p,   w) {
	for (w = 0; w < 2; w++) {
		s = w ? "median" : "best"; m = w ? "med" : "min"
		printf "%s (%s): plugin off %.2f s, on %.2f s: %.0f us per test\n", name, s,
			stat(o, m), stat(p, m), (stat(p, m) - stat(o, m)) / n * 1e6
	}
}
BEGIN {
	line("trivial", off, on)
	line("one kernel each", woff, won)
	print "runs (s): trivial off" off "; on" on "; kernel off" woff "; on" won
}'
kill -TERM "$dpid"
wait "$dpid" || { echo "sseqd exited with status $?: $(tail -5 "$tmp/daemon.log")" >&2; exit 1; }
dpid=
