#!/bin/bash
# systemd integration with the real tools: the daemon started by systemd-socket-activate
# serves clients; a real NOTIFY_SOCKET listener receives READY=1, STATUS=, WATCHDOG=1 and
# STOPPING=1; an install into a DESTDIR lists what lands where and its units pass
# systemd-analyze verify, the Python package where its python3 reads it, the LICENSE the
# build declares; sseq-demo's usage. Usage: test-systemd.sh SSEQD SSEQCTL SSEQ_DEMO BUILD_DIR
# [PYTHON3]
set -euo pipefail
sseqd=$1 ctl=$2 demo=$3 build=$4
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

echo "== socket activation: systemd-socket-activate -l SOCK sseqd --backend sim"
sock=$tmp/act.sock
systemd-socket-activate -l "$sock" "$sseqd" --backend sim --log-level info \
	2>"$tmp/act.log" &
pids+=($!)
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || fail "systemd-socket-activate did not listen"
"$ctl" --socket "$sock" status >"$tmp/status.txt" || fail "sseqctl through the activated socket"
grep -q 'backend sim' "$tmp/status.txt" || fail "unexpected status: $(cat "$tmp/status.txt")"
"$demo" "$sock" >"$tmp/demo.txt" || fail "sseq-demo through the activated socket: $(cat "$tmp/demo.txt")"
grep -q 'every value right' "$tmp/demo.txt" || fail "demo result: $(cat "$tmp/demo.txt")"
grep -q '(systemd socket)' "$tmp/act.log" || fail "sseqd did not take the passed socket: $(cat "$tmp/act.log")"
echo "served sseqctl and sseq-demo on the socket systemd-socket-activate passed"
kill -TERM "${pids[0]}"
wait "${pids[0]}" || fail "sseqd under socket activation exited with $?"
pids=()

echo "== sd_notify: a real NOTIFY_SOCKET datagram listener"
python3 - "$sseqd" "$tmp" <<'EOF'
import os, signal, socket, subprocess, sys, time
sseqd, tmp = sys.argv[1], sys.argv[2]
path = os.path.join(tmp, "notify.sock")
listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
listener.bind(path)
listener.settimeout(10)
env = dict(os.environ, NOTIFY_SOCKET=path, WATCHDOG_USEC="200000")
proc = subprocess.Popen([sseqd, "--backend", "sim", "--socket", os.path.join(tmp, "n.sock")],
                        env=env, stderr=subprocess.DEVNULL)
got = []
def until(pred, what):
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            msg = listener.recv(4096).decode()
        except socket.timeout:
            break
        got.extend(msg.split("\n"))
        if pred():
            return
    proc.kill()
    sys.exit(f"FAIL: no {what} from sseqd; got {got}")
until(lambda: "READY=1" in got, "READY=1")
until(lambda: any(m.startswith("STATUS=") for m in got), "STATUS=")
# WATCHDOG_USEC=200000: pings every 100 ms; wait for three.
until(lambda: got.count("WATCHDOG=1") >= 3, "three WATCHDOG=1 pings")
proc.send_signal(signal.SIGTERM)
until(lambda: "STOPPING=1" in got, "STOPPING=1 after SIGTERM")
rc = proc.wait(timeout=15)
if rc != 0:
    sys.exit(f"FAIL: sseqd exited {rc} after SIGTERM")
status = [m for m in got if m.startswith("STATUS=")][0]
print(f"received READY=1, {status!r}, {got.count('WATCHDOG=1')} x WATCHDOG=1, STOPPING=1; exit 0")
EOF

echo "== sseq-demo --help, and a bad option"
"$demo" --help | grep -q '^Usage: sseq-demo \[SOCKET\]' || fail "sseq-demo --help: $("$demo" --help 2>&1)"
rc=0
"$demo" --no-such-option >/dev/null 2>"$tmp/demo.err" || rc=$?
[ "$rc" = 2 ] && grep -q "unknown option '--no-such-option'" "$tmp/demo.err" ||
	fail "sseq-demo --no-such-option: exit $rc, $(cat "$tmp/demo.err")"

echo "== install into a DESTDIR"
dest=$tmp/dest
DESTDIR=$dest meson install -C "$build" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
	fail "meson install: $(cat "$tmp/install.log")"
(cd "$dest" && find . -type f -o -type l | sort | sed 's|^\.|    |')
for f in sseqd sseqctl sseq-stress sseq-demo sseq-enable-gpus 'sseqd@.service' 'sseqd@.socket' \
	sseq.h sseq.pc sseqd.conf.example; do
	[ -n "$(find "$dest" -name "$f" -print -quit)" ] || fail "$f was not installed"
done
[ -n "$(find "$dest" -name 'libsseq.so*' -print -quit)" ] || fail "libsseq was not installed"
[ -n "$(find "$dest" -path '*sysusers.d/sseq.conf' -print -quit)" ] || fail "no sysusers.d snippet"
[ -n "$(find "$dest" -path '*tmpfiles.d/sseq.conf' -print -quit)" ] || fail "no tmpfiles.d snippet"
lic=$(find "$dest" -path '*doc/sseq/LICENSE' -print -quit)
[ -n "$lic" ] || fail "LICENSE was not installed"
declared=$(sed -n "s/^[[:space:]]*license: '\(.*\)',\$/\1/p" "$(dirname "$0")/../meson.build")
[ -n "$declared" ] || fail "no license: line in meson.build"
head -1 "$lic" | grep -q "^$declared License\$" ||
	fail "LICENSE begins \"$(head -1 "$lic")\"; meson.build declares $declared"
# What the install script decided (meson 1.0.1 hides what install scripts print).
decided=$build/meson-logs/install-ldconfig.txt
grep -q 'staged install (DESTDIR): ldconfig .* not run' "$decided" ||
	fail "the install script did not leave ldconfig to the package: $(cat "$decided" 2>&1)"

echo "== ldconfig after meson install"
# The install script's choice: a prefix the dynamic linker does not search gets a hint,
# not an ldconfig run (a stand-in ldconfig records what it was asked).
script=$(dirname "$0")/../client/lib/install-ldconfig.sh
cat >"$tmp/ldconfig" <<EOF
#!/bin/sh
case "\$*" in *-N*) echo '/usr/local/lib: (from /etc/ld.so.conf.d/libc.conf:2)' ;;
*) echo "\$*" >>"$tmp/ldconfig.ran" ;; esac
EOF
chmod +x "$tmp/ldconfig"
mkdir -p "$tmp/scratch/lib"
out=$(LDCONFIG=$tmp/ldconfig sh "$script" "$tmp/scratch/lib")
[ ! -e "$tmp/ldconfig.ran" ] && grep -q "LD_LIBRARY_PATH=$tmp/scratch/lib" <<<"$out" ||
	fail "scratch prefix: $out"
if [ "$(id -u)" -eq 0 ]; then
	out=$(LDCONFIG=$tmp/ldconfig sh "$script" /usr/local/lib)
	[ -e "$tmp/ldconfig.ran" ] && grep -q 'ran ldconfig' <<<"$out" || fail "/usr/local/lib: $out"
fi
echo "a scratch prefix gets LD_LIBRARY_PATH, not ldconfig; /usr/local/lib gets ldconfig"
# The real thing: meson install into /usr/local (/usr/local and /etc overlaid in a mount
# namespace, so that the machine's stay untouched), then the installed sseq-demo starts with no
# LD_LIBRARY_PATH, as on a first day.
prefix=$(meson introspect --buildoptions "$build" | /usr/bin/python3 -c \
	'import json, sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"][0])')
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null || [ "$prefix" != /usr/local ] ||
	! grep -qw overlay /proc/filesystems; then
	echo "NOTE: not root, no unshare or overlayfs, or prefix $prefix: meson install to /usr/local not tried"
else
	mkdir -p "$tmp/ov/up" "$tmp/ov/work" "$tmp/ov/etc-up" "$tmp/ov/etc-work"
	unshare -m --propagation private bash -c '
		set -e
		mount -t overlay overlay -o "lowerdir=/usr/local,upperdir=$1/ov/up,workdir=$1/ov/work" /usr/local
		mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/ov/etc-up,workdir=$1/ov/etc-work" /etc
		meson install -C "$2" --no-rebuild >"$1/sys-install.log" 2>&1
		ldconfig -p >"$1/ldconfig-p.txt"
		env -u LD_LIBRARY_PATH /usr/local/bin/sseq-demo --help >"$1/sys-demo.txt" 2>&1' \
		_ "$tmp" "$build" ||
		fail "meson install to /usr/local: $(tail -5 "$tmp/sys-install.log"; cat "$tmp/sys-demo.txt" 2>/dev/null)"
	grep -q 'libsseq: ran ldconfig' "$decided" ||
		fail "meson install did not run ldconfig: $(cat "$decided" 2>&1)"
	grep -q 'libsseq\.so\.0 .*=> /usr/local/' "$tmp/ldconfig-p.txt" ||
		fail "libsseq.so.0 is not in the linker's cache after meson install"
	echo "meson install to /usr/local ran ldconfig: $(grep -m1 -o 'libsseq\.so\.0 .*' "$tmp/ldconfig-p.txt"); the installed sseq-demo starts"
fi

echo "== the Python package lands where its python3 looks"
# $5: the python3 the build found (empty without one). The package goes where that
# interpreter's sysconfig says for the prefix (client/python/install-dir.py), and meson
# said where and whether that interpreter reads it: Debian's python3 does not read
# PREFIX/lib/python3/dist-packages for a prefix other than /usr, and a pyenv python3
# reads nothing under /usr/local.
if [ -n "${5:-}" ]; then
	init=$(find "$dest" -path '*/sseq/__init__.py' -print -quit)
	[ -n "$init" ] || fail "the sseq package was not installed"
	pkgdir=$(dirname "$(dirname "$init")")
	pkgdir=${pkgdir#"$dest"}
	options=$(meson introspect --buildoptions "$build")
	opt() { /usr/bin/python3 -c 'import json, sys
print([o["value"] for o in json.load(sys.stdin) if o["name"] == sys.argv[1]][0])' "$1" <<<"$options"; }
	mapfile -t where < <("$5" -E "$(dirname "$0")/../client/python/install-dir.py" "$(opt prefix)")
	want=${where[0]} reads=${where[1]}
	[ -z "$(opt python_install_dir)" ] || want=$(opt python_install_dir)
	[ "$pkgdir" = "$want" ] || fail "sseq went to $pkgdir; $5's sysconfig says $want"
	said=$(sed -n 's/^Message: Python package: //p' "$build/meson-logs/meson-log.txt" | tail -1)
	if [ "$reads" = yes ]; then verb=reads; else verb="does not read"; fi
	[ "$said" = "$pkgdir/sseq ($5 $verb it)" ] ||
		fail "meson said \"$said\"; want \"$pkgdir/sseq ($5 $verb it)\""
	# The system's python3 reads the default prefix's packages (/usr/local).
	if [ "$("$5" -c 'import sys; print(sys.prefix)')" = /usr ] && [ "$(opt prefix)" = /usr/local ]; then
		[ "$reads" = yes ] || fail "sseq went to $pkgdir, which $5 does not read"
	fi
	if [ "$reads" = yes ]; then
		"$5" -E -c 'import os, site, sys
sys.exit(0 if sys.argv[1] in sys.path + site.getsitepackages() else 1)' "$pkgdir" ||
			fail "sseq went to $pkgdir, which $5 does not read ($("$5" -c 'import sys; print(sys.path)'))"
	fi
	for f in "$(dirname "$0")"/../client/python/sseq/*.py; do
		[ -f "$dest$pkgdir/sseq/$(basename "$f")" ] || fail "sseq/$(basename "$f") was not installed"
	done
	echo "sseq installed in $pkgdir; meson said: $said"
	# The README's line for pip (PEP 668: in a venv), on a copy so that the build stays out
	# of the source tree.
	# It builds with the system's setuptools and wheel (Debian: python3-setuptools,
	# python3-wheel), so only with the system's python3.
	if [ "$("$5" -c 'import sys; print(sys.prefix)')" != /usr ]; then
		echo "NOTE: $5 is not the system's python3; the pip line was not tried"
	elif "$5" -c 'import ensurepip, venv, setuptools, wheel' 2>/dev/null; then
		cp -r "$(dirname "$0")/../client/python" "$tmp/pysrc"
		rm -rf "$tmp/pysrc/build" "$tmp/pysrc"/*.egg-info
		"$5" -m venv --system-site-packages "$tmp/venv" &&
			"$tmp/venv/bin/pip" install -q --no-build-isolation --no-index "$tmp/pysrc" \
				>"$tmp/pip.log" 2>&1 || fail "pip install in a venv: $(cat "$tmp/pip.log")"
		"$tmp/venv/bin/python" -c '
import importlib.metadata as m, sseq
assert sseq.__file__.startswith(__import__("sys").prefix), sseq.__file__
assert "sseq.pytest_plugin" in [e.name for e in m.entry_points(group="pytest11")]' ||
			fail "the venv's sseq or its pytest11 entry point"
		echo "pip install --no-build-isolation in a venv: sseq and its pytest plugin entry point"
	else
		echo "NOTE: $5 lacks venv, setuptools or wheel (Debian: python3-venv, python3-setuptools, python3-wheel); the pip line was not tried"
	fi
fi

echo "== sseq-enable-gpus on fake device trees"
enable=$(find "$dest" -name sseq-enable-gpus -print -quit)
fake=$tmp/devtree
# Two NVIDIA GPUs by their device nodes (nvidiactl and nvidia-uvm are not GPUs), and two
# AMD GPUs in the KFD topology beside its CPU node (simd_count 0).
mkdir -p "$fake/dev/dri" "$fake/sys/class/kfd/kfd/topology/nodes"/{0,1,2}
touch "$fake/dev/nvidia0" "$fake/dev/nvidia1" "$fake/dev/nvidiactl" "$fake/dev/nvidia-uvm" \
	"$fake/dev/kfd" "$fake/dev/dri/renderD128" "$fake/dev/dri/renderD129"
printf 'cpu_cores_count 16\nsimd_count 0\n' >"$fake/sys/class/kfd/kfd/topology/nodes/0/properties"
printf 'simd_count 416\n' >"$fake/sys/class/kfd/kfd/topology/nodes/1/properties"
printf 'simd_count 416\n' >"$fake/sys/class/kfd/kfd/topology/nodes/2/properties"
out=$(SSEQ_SYSROOT=$fake sh "$enable" --dry-run) || fail "sseq-enable-gpus on the fake tree: $out"
for i in 0 1 2 3; do
	grep -qx "systemctl enable sseqd@$i.socket" <<<"$out" || fail "no sseqd@$i.socket: $out"
done
grep -q "sseqd@4" <<<"$out" && fail "more sockets than GPUs: $out"
grep -q "4 GPU(s) (2 NVIDIA, 2 AMD)" <<<"$out" || fail "the count: $out"
# Without the topology, AMD GPUs are counted by render nodes; /proc's list wins for NVIDIA.
rm -rf "$fake/sys" "$fake/dev/nvidia1"
mkdir -p "$fake/proc/driver/nvidia/gpus/0000:01:00.0" "$fake/proc/driver/nvidia/gpus/0000:02:00.0"
out=$(SSEQ_SYSROOT=$fake sh "$enable" --dry-run --now) || fail "sseq-enable-gpus: $out"
grep -qx "systemctl enable --now sseqd@3.socket" <<<"$out" &&
	grep -q "(2 NVIDIA, 2 AMD)" <<<"$out" || fail "the fallbacks: $out"
# No GPU: nothing enabled, exit 1, said so.
rc=0
SSEQ_SYSROOT=$tmp/empty sh "$enable" --dry-run >"$tmp/enable.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "no GPU found" "$tmp/enable.out" || fail "no GPU: exit $rc, $(cat "$tmp/enable.out")"
echo "sseq-enable-gpus: 2 NVIDIA + 2 AMD on fake trees, both ways of counting; none: exit 1"

echo "== systemd-analyze verify on the installed units"
units=$tmp/units
mkdir -p "$units"
service=$(find "$dest" -name 'sseqd@.service' -print -quit)
socket_unit=$(find "$dest" -name 'sseqd@.socket' -print -quit)
installed_sseqd=$(find "$dest" -path '*/sbin/sseqd' -print -quit)
# The units name the final path of sseqd; point them at the staged copy so verify can
# check it exists and is executable.
exec_path=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$service")
sed "s|$exec_path|$installed_sseqd|" "$service" >"$units/sseqd@.service"
cp "$socket_unit" "$units/sseqd@.socket"
manpath=$(find "$dest" -type d -name man -path '*share/man' -print -quit || true)
if [ -n "$manpath" ] && command -v man >/dev/null; then
	man_opt=--man=yes
	export MANPATH=$manpath
else
	man_opt=--man=no
fi
if ! systemd-analyze verify "$man_opt" "$units/sseqd@0.service" "$units/sseqd@0.socket" \
	>"$tmp/verify.log" 2>&1; then
	cat "$tmp/verify.log" >&2
	fail "systemd-analyze verify"
fi
if [ -s "$tmp/verify.log" ]; then
	cat "$tmp/verify.log" >&2
	fail "systemd-analyze verify printed warnings"
fi
echo "systemd-analyze verify ($man_opt): clean"
echo "PASS"
