#!/bin/bash
# The units under a real systemd as PID 1. This machine's / is booted in a container
# (systemd-nspawn) through an overlay whose writes land in a tmpfs, with sseq installed
# into it by `meson install`; a oneshot unit inside then drives the real thing: sysusers
# makes the sseq user, the socket unit listens, the first client starts the service
# (Type=notify), the sandbox is checked on the running daemon (user, no_new_privs,
# seccomp, read-only /, hidden /home, private /tmp, device policy), a workload runs
# through the socket, the journal holds the daemon's log (lines about a client with its
# SSEQ_SESSION= and SSEQ_WORKER= fields), reload (SIGHUP), the watchdog
# (a stopped daemon is killed and restarted), a device fault recovered in place (no
# restart), a crash restart, sseqd's options from /etc/default/sseqd and
# /etc/sseq/sseqd@0.conf (SSEQD_OPTS on its command line and in effect), and a clean stop.
# Needs root, systemd-nspawn (systemd-container) and overlayfs; skips (77) without them,
# or when the container cannot boot here at all.
# Usage: test-systemd-boot.sh SOURCE_DIR
set -uo pipefail
src=$(realpath "${1:?usage: test-systemd-boot.sh SOURCE_DIR}")
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root"
command -v systemd-nspawn >/dev/null || skip "needs systemd-nspawn (package systemd-container)"
[ -x /lib/systemd/systemd ] || skip "needs systemd installed (it boots the container)"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
grep -qw overlay /proc/filesystems || skip "needs overlayfs"

w=$(mktemp -d /var/tmp/sseq-boot.XXXXXX)
root=$w/root
cleanup() {
	umount "$root" 2>/dev/null
	umount "$w/layer" 2>/dev/null
	rm -rf "$w"
}
trap cleanup EXIT
trap 'exit 1' INT TERM # through the EXIT trap: nothing stays mounted
mkdir -p "$w/layer" "$root" "$w/results"

# A plain (unsanitized) build installed as a distribution would: prefix /usr.
echo "== build and install into the container's root"
meson setup "$w/build" "$src" --prefix=/usr --buildtype=debugoptimized -Dtests=false \
	-Dman=disabled >"$w/setup.log" 2>&1 || { cat "$w/setup.log"; exit 1; }
ninja -C "$w/build" >"$w/ninja.log" 2>&1 || { cat "$w/ninja.log"; exit 1; }

# The writes go to a tmpfs layer; / itself is never touched.
mount -t tmpfs -o mode=0755 tmpfs "$w/layer" && mkdir -p "$w/layer/up" "$w/layer/work" ||
	skip "cannot mount a tmpfs"
mount -t overlay overlay -o "lowerdir=/,upperdir=$w/layer/up,workdir=$w/layer/work" "$root" ||
	skip "cannot mount an overlay of /"
# nspawn wants an unpopulated /dev; the rest of the old state must not leak in either.
find "$root/dev" "$root/run" -mindepth 1 -maxdepth 1 -exec rm -rf {} + 2>/dev/null
rm -f "$root/etc/machine-id" && : >"$root/etc/machine-id"
DESTDIR=$root meson install -C "$w/build" --no-rebuild >"$w/install.log" 2>&1 ||
	{ cat "$w/install.log"; exit 1; }
grep -E 'Installing .*(sseqd|sseqd@\.service|sseqd@\.socket|sseq\.conf)' "$w/install.log" |
	sed "s|$root||g" | head -8

# The checks, run inside by a oneshot unit that then powers the container off.
mkdir -p "$root/usr/local/libexec/sseq-boot"
cat >"$root/usr/local/libexec/sseq-boot/checks.sh" <<'EOF'
#!/bin/bash
set -u
out=/sseq-results/results.txt
exec >>"$out" 2>&1
echo "booted"
fails=0
ok() { echo "ok - $*"; }
bad() { echo "not ok - $*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
sock=/run/sseq/gpu0.sock
unit=sseqd@0.service
prop() { systemctl show -P "$1" "$unit"; }
mainpid() { systemctl show -P MainPID "$unit"; }
wait_for() { # seconds, command...: until the command succeeds
	local n=$(( $1 * 10 )); shift
	for _ in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
	return 1
}

# What a distribution package's postinst does (systemd-sysusers.service runs at boot only
# when /etc needs an update).
check "systemd-sysusers sseq.conf makes user sseq" \
	sh -c "systemd-sysusers sseq.conf && getent passwd sseq >/dev/null && getent group sseq >/dev/null"
check "systemd-tmpfiles --create sseq.conf" systemd-tmpfiles --create sseq.conf
uid=$(id -u sseq)
check "systemctl enable --now sseqd@0.socket" systemctl enable --now sseqd@0.socket
check "socket $sock exists" test -S "$sock"
echo "# socket: $(stat -c '%A %U:%G' "$sock")"
check "socket mode 0660, group sseq" test "$(stat -c '%a %G' "$sock")" = "660 sseq"
check "service not started before the first client" test "$(prop ActiveState)" = inactive

# First connection: systemd starts the daemon, which answers once READY=1 is sent.
status=$(timeout 30 sseqctl --socket "$sock" status 2>&1); rc=$?
echo "$status" | sed 's/^/# /' | head -6
check "sseqctl status through the activated socket" test "$rc" -eq 0
check "the service is active (Type=notify: READY=1 received)" test "$(prop ActiveState)" = active
pid=$(mainpid)
conf="$(prop Type) $(prop WatchdogUSec) $(prop Restart)"
check "Type=notify, WatchdogSec=30s, Restart=on-failure (have: $conf)" \
	test "$conf" = "notify 30s on-failure"
check "the daemon runs as user sseq" test "$(stat -c %u "/proc/$pid")" = "$uid"
check "no_new_privs (NoNewPrivileges=yes)" grep -q '^NoNewPrivs:[[:space:]]*1' "/proc/$pid/status"
check "seccomp filter on (RestrictAddressFamilies=, LockPersonality=, ...)" \
	grep -q '^Seccomp:[[:space:]]*2' "/proc/$pid/status"
check "no capabilities" grep -q '^CapEff:[[:space:]]*0000000000000000' "/proc/$pid/status"
check "STATUS= shown by systemd" test -n "$(prop StatusText)"
echo "# StatusText: $(prop StatusText)"
# The sandbox as the daemon sees it, from inside its own mount namespace.
in_ns() { nsenter -t "$pid" -m -- "$@"; }
check "/ is read-only for the daemon (ProtectSystem=strict)" \
	sh -c "! nsenter -t $pid -m -- touch /usr/sseq-write-test 2>/dev/null"
touch /home/sseq-visible-on-the-host /tmp/sseq-visible-on-the-host
check "/home hidden from the daemon (ProtectHome=yes)" \
	sh -c "! nsenter -t $pid -m -- test -e /home/sseq-visible-on-the-host"
check "/tmp private to the daemon (PrivateTmp=yes)" \
	sh -c "! nsenter -t $pid -m -- test -e /tmp/sseq-visible-on-the-host"
check "/run/sseq writable for the daemon (RuntimeDirectory=sseq)" \
	test "$(stat -c %U /run/sseq)" = sseq
check "own network namespace (PrivateNetwork=yes)" \
	test "$(readlink "/proc/$pid/ns/net")" != "$(readlink /proc/1/ns/net)"
check "empty capability bounding set" grep -q '^CapBnd:[[:space:]]*0000000000000000' "/proc/$pid/status"
check "DevicePolicy=closed" test "$(prop DevicePolicy)" = closed
echo "# DeviceAllow: $(prop DeviceAllow | tr "\n" ";")"
check "RestrictAddressFamilies=AF_UNIX" test "$(prop RestrictAddressFamilies)" = AF_UNIX

# Real work through the socket.
stress=$(timeout 120 sseq-stress --socket "$sock" --ops 3000 --clients 2 --seed 5 2>&1 | tail -1)
echo "# sseq-stress: $stress"
check "sseq-stress through the service: wrong=0 errors=0" \
	sh -c "echo '$stress' | grep -q 'wrong=0 errors=0'"
check "the journal holds the daemon's log" \
	sh -c "journalctl -b -u $unit -o cat | grep -q 'serving device 0'"
check "log priorities reach the journal (notice)" \
	sh -c "journalctl -b -u $unit -p notice -o cat | grep -q 'serving device 0'"
# Lines about a client carry its session and worker as journal fields (sd_journal_send,
# $JOURNAL_STREAM): one client with a worker id (libsseq takes it from
# PYTEST_XDIST_WORKER), found again by the field alone.
PYTEST_XDIST_WORKER=gw3 timeout 60 sseq-stress --socket "$sock" --ops 50 --clients 1 --seed 3 >/dev/null 2>&1
check "journalctl SSEQ_WORKER=gw3 finds the worker's connect and disconnect" \
	wait_for 5 sh -c "journalctl -b -u $unit SSEQ_WORKER=gw3 -o cat | grep -q 'connected: .* worker gw3' &&
		journalctl -b -u $unit SSEQ_WORKER=gw3 -o cat | grep -q 'disconnected'"
session=$(journalctl -b -u "$unit" SSEQ_WORKER=gw3 -o export | sed -n 's/^SSEQ_SESSION=//p' | head -1)
echo "# SSEQ_WORKER=gw3: SSEQ_SESSION=$session"
check "... with SSEQ_SESSION= its session, and the same lines under it" \
	sh -c "[ -n '$session' ] && journalctl -b -u $unit SSEQ_SESSION=$session -o cat | grep -q 'client $session connected'"
check "... at their priority (info), as SYSLOG_IDENTIFIER=sseqd" \
	sh -c "journalctl -b -u $unit SSEQ_WORKER=gw3 -p info -o export | grep -qx 'PRIORITY=6' &&
		journalctl -b -u $unit SSEQ_WORKER=gw3 -o export | grep -qx 'SYSLOG_IDENTIFIER=sseqd'"
check "... and without the <N> prefix (MESSAGE= is the subsystem and text)" \
	sh -c "journalctl -b -u $unit SSEQ_WORKER=gw3 -o cat | grep -q '^session: client '"

# Reload: SIGHUP, same process.
check "systemctl reload" systemctl reload "$unit"
sleep 0.5
check "still active, same process after reload" \
	test "$(prop ActiveState) $(mainpid)" = "active $pid"

# The watchdog, shortened by a drop-in: a daemon that pings stays up through several
# periods; a stopped one is killed and restarted (Restart=on-failure).
mkdir -p "/run/systemd/system/$unit.d"
printf '[Service]\nWatchdogSec=2s\nTimeoutAbortSec=3s\n' >"/run/systemd/system/$unit.d/watchdog.conf"
systemctl daemon-reload
systemctl restart "$unit"
wait_for 10 test "$(prop ActiveState)" = active
pid=$(mainpid)
check "WatchdogSec=2s in effect" test "$(prop WatchdogUSec)" = 2s
sleep 5
check "pinging daemon survives 2.5 watchdog periods" \
	test "$(prop ActiveState) $(mainpid)" = "active $pid"
restarts=$(prop NRestarts)
kill -STOP "$pid"
check "a stopped daemon is killed by the watchdog and restarted" \
	wait_for 15 sh -c "[ \"\$(systemctl show -P NRestarts $unit)\" -gt $restarts ] && [ \"\$(systemctl show -P ActiveState $unit)\" = active ] && [ \"\$(systemctl show -P MainPID $unit)\" != $pid ]"
check "the journal names the watchdog" \
	sh -c "journalctl -b -u $unit -o cat | grep -qi 'watchdog timeout'"
rm -rf "/run/systemd/system/$unit.d"
systemctl daemon-reload

# A device fault: the daemon restarts in place (exec, the way a CUDA context needs it);
# the unit does not restart: same PID, NRestarts unchanged.
mkdir -p "/run/systemd/system/$unit.d"
printf '[Service]\nExecStart=\nExecStart=/usr/sbin/sseqd --device 0 --inject device-lost-op=5 --device-reset exec\n' \
	>"/run/systemd/system/$unit.d/fault.conf"
systemctl daemon-reload
systemctl restart "$unit"
wait_for 10 test "$(prop ActiveState)" = active
pid=$(mainpid)
restarts=$(prop NRestarts)
timeout 60 sseq-stress --socket "$sock" --ops 400 --clients 1 --seed 9 >/dev/null 2>&1
check "a device fault resets the device: the journal names the reset" \
	wait_for 10 sh -c "journalctl -b -u $unit -o cat | grep -q 'device reset 1 done'"
check "... and the unit did not restart: same process, active, NRestarts unchanged" \
	test "$(prop ActiveState) $(mainpid) $(prop NRestarts)" = "active $pid $restarts"
check "... STATUS= shows the reset" wait_for 5 sh -c "systemctl show -P StatusText $unit | grep -q 'device resets: 1'"
check "... and it serves again" \
	sh -c "timeout 60 sseq-stress --socket $sock --ops 300 --clients 1 --seed 10 | grep -q 'wrong=0 errors=0'"
rm -rf "/run/systemd/system/$unit.d"
systemctl daemon-reload
systemctl restart "$unit"
wait_for 10 test "$(prop ActiveState)" = active

# A crash: restarted.
pid=$(mainpid)
restarts=$(prop NRestarts)
kill -SEGV "$pid"
check "a crashed daemon is restarted" \
	wait_for 15 sh -c "[ \"\$(systemctl show -P NRestarts $unit)\" -gt $restarts ] && [ \"\$(systemctl show -P ActiveState $unit)\" = active ]"
check "and serves again" sh -c "timeout 30 sseqctl --socket $sock status >/dev/null"

# Options through the environment files: /etc/default/sseqd for every GPU's daemon,
# then /etc/sseq/sseqd@0.conf, whose SSEQD_OPTS replaces it; each word one argument.
args() { tr '\0' '\n' <"/proc/$(mainpid)/cmdline"; }
window() { timeout 30 sseqctl --socket "$sock" streams | awk '$2 == "compute" { print $6; exit }'; }
printf '# every GPU\nSSEQD_OPTS="--window 99 --client-memory-limit 3M"\n' >/etc/default/sseqd
systemctl restart "$unit"
wait_for 10 test "$(prop ActiveState)" = active
echo "# with /etc/default/sseqd: $(args | tr '\n' ' ')"
check "/etc/default/sseqd's SSEQD_OPTS reach sseqd as separate arguments" \
	sh -c "tr '\0' '\n' </proc/$(mainpid)/cmdline | tr '\n' ' ' | grep -q -- '--device 0 --window 99 --client-memory-limit 3M \$'"
check "... and take effect (sseqctl streams: window 0/99)" test "$(window)" = 0/99
mkdir -p /etc/sseq
printf 'SSEQD_OPTS="--window 77"\n' >/etc/sseq/sseqd@0.conf
systemctl restart "$unit"
wait_for 10 test "$(prop ActiveState)" = active
echo "# with /etc/sseq/sseqd@0.conf too: $(args | tr '\n' ' ')"
check "/etc/sseq/sseqd@0.conf's SSEQD_OPTS replaces /etc/default/sseqd's" \
	sh -c "tr '\0' '\n' </proc/$(mainpid)/cmdline | tr '\n' ' ' | grep -q -- '--device 0 --window 77 \$'"
check "... and takes effect (sseqctl streams: window 0/77)" test "$(window)" = 0/77
rm -f /etc/default/sseqd /etc/sseq/sseqd@0.conf
systemctl restart "$unit"
wait_for 10 test "$(prop ActiveState)" = active
check "without either file: sseqd --device 0 alone" \
	sh -c "tr '\0' '\n' </proc/$(mainpid)/cmdline | tr '\n' ' ' | grep -q -- '--device 0 \$'"
# Those restarts count against the unit's start limit (5 in 10 s): forget them, so the
# socket's next start below is not refused for them.
systemctl reset-failed "$unit"

# A clean stop (SIGTERM: drain, STOPPING=1, exit 0); the socket stays and starts it again.
check "systemctl stop" systemctl stop "$unit"
check "stopped cleanly (Result=success, exit status 0)" \
	test "$(prop Result) $(prop ExecMainStatus)" = "success 0"
check "the journal shows the drain" sh -c "journalctl -b -u $unit -o cat | grep -q 'stopped'"
check "the socket still listens and restarts the daemon" \
	sh -c "timeout 30 sseqctl --socket $sock status >/dev/null"
echo "# systemd-analyze security: $(systemd-analyze security "$unit" 2>/dev/null | tail -1)"
echo "done fails=$fails"
EOF
chmod +x "$root/usr/local/libexec/sseq-boot/checks.sh"
cat >"$root/etc/systemd/system/sseq-boot-checks.service" <<'EOF'
[Unit]
Description=sseq checks under systemd
Requires=basic.target
After=basic.target
OnSuccess=poweroff.target
OnFailure=poweroff.target

[Service]
Type=oneshot
ExecStart=/usr/local/libexec/sseq-boot/checks.sh
EOF
cat >"$root/etc/systemd/system/sseq-boot.target" <<'EOF'
[Unit]
Description=sseq checks
Requires=basic.target sseq-boot-checks.service
After=basic.target
EOF

echo "== boot (systemd $(systemctl --version | head -1 | cut -d' ' -f2) as PID 1 in a container)"
timeout 240 systemd-nspawn -D "$root" -M sseq-boot --register=no --keep-unit --link-journal=no \
	--bind="$w/results:/sseq-results" --boot -- systemd.unit=sseq-boot.target \
	>"$w/console.log" 2>&1
rc=$?
if [ ! -s "$w/results/results.txt" ]; then
	tail -30 "$w/console.log"
	skip "the container did not boot here (systemd-nspawn exit $rc)"
fi
cat "$w/results/results.txt"
grep -q '^done fails=0$' "$w/results/results.txt" || {
	echo "== console"
	tail -40 "$w/console.log"
	exit 1
}
