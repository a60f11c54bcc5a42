#!/bin/bash
# The service unit's sandbox, reproduced without a service manager (CI has no systemd as
# PID 1): sseqd runs in its own mount namespace with / read-only (ProtectSystem=strict),
# /home, /root and /run/user hidden (ProtectHome=yes), a private /tmp (PrivateTmp=yes),
# a writable /run/sseq only (RuntimeDirectory=sseq), as an unprivileged user with no
# capabilities and no_new_privs (User=, NoNewPrivileges=yes), and must still serve a
# real workload. Before that, the same user without /run/sseq: sseqd must say it cannot
# create it (permission denied) and point to --socket. Needs root (to build the
# namespace); skips (77) otherwise.
# Usage: test-hardening.sh SSEQD SSEQ_STRESS SSEQCTL
set -euo pipefail
sseqd=$(realpath "$1") stress=$(realpath "$2") ctl=$(realpath "$3")
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null || ! command -v setpriv >/dev/null; then
	echo "SKIP: needs root, unshare and setpriv"
	exit 77
fi
if ! unshare --mount true 2>/dev/null; then
	echo "SKIP: cannot create a mount namespace here"
	exit 77
fi
user=nobody
uid=$(id -u $user) gid=$(id -g $user)
# Inside the namespace /tmp is a fresh tmpfs: the log lives (and is read) there.
log=/tmp/sseqd-hardening.log

# Everything below runs inside the namespace; its mounts vanish with it.
unshare --mount --propagation private bash -s "$sseqd" "$stress" "$ctl" "$uid" "$gid" "$log" <<'EOF'
set -euo pipefail
sseqd=$1 stress=$2 ctl=$3 uid=$4 gid=$5 log=$6
# A fresh /run holds the runtime directory and copies of the binaries: the build tree
# may itself live under /tmp, /home or /root, which the sandbox hides.
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/sseq-test
cp "$sseqd" "$stress" "$ctl" /run/sseq-test/
sseqd=/run/sseq-test/$(basename "$sseqd")
stress=/run/sseq-test/$(basename "$stress")
ctl=/run/sseq-test/$(basename "$ctl")
# No /run/sseq, and the user may not make it: the default socket's directory is named,
# with why, and --socket suggested.
rc=0
err=$(timeout 10 setpriv --reuid="$uid" --regid="$gid" --clear-groups "$sseqd" --backend sim 2>&1) ||
	rc=$?
[ "$rc" = 1 ] || { echo "FAIL: sseqd as uid $uid without /run/sseq: exit $rc: $err"; exit 1; }
case "$err" in
*"cannot create /run/sseq"*"Permission denied"*"--socket PATH"*) ;;
*) echo "FAIL: without /run/sseq: $err"; exit 1 ;;
esac
echo "without /run/sseq: $(head -1 <<<"$err")"
mkdir -p /run/sseq
chown "$uid:$gid" /run/sseq
# Then / read-only (ProtectSystem=strict), homes hidden, a private /tmp.
mount --bind / /
mount -o remount,bind,ro /
for d in /home /root; do [ -d "$d" ] && mount -t tmpfs -o ro,mode=0755 tmpfs "$d"; done
mount -t tmpfs -o mode=1777 tmpfs /tmp
setpriv --reuid="$uid" --regid="$gid" --clear-groups --no-new-privs --inh-caps=-all \
	--bounding-set=-all "$sseqd" --backend sim --device 0 --log-level notice 2>"$log" &
pid=$!
for _ in $(seq 200); do [ -S /run/sseq/gpu0.sock ] && break; sleep 0.05; done
[ -S /run/sseq/gpu0.sock ] || { cat "$log"; echo "FAIL: no socket"; exit 1; }
grep -q "NoNewPrivs:.*1" /proc/$pid/status || { echo "FAIL: no_new_privs not set"; exit 1; }
[ "$(awk '/^CapEff/ {print $2}' /proc/$pid/status)" = 0000000000000000 ] ||
	{ echo "FAIL: sseqd has capabilities"; exit 1; }
out=$("$stress" --socket /run/sseq/gpu0.sock --ops 20000 --clients 2 --seed 5 | tail -1)
echo "$out"
case "$out" in *"wrong=0 errors=0 races=0"*) ;; *) echo "FAIL: $out"; exit 1 ;; esac
"$ctl" --socket /run/sseq/gpu0.sock status | head -1
kill -TERM $pid
wait $pid || { echo "FAIL: sseqd exited $?"; cat "$log"; exit 1; }
if grep -q -i 'read-only\|permission denied' "$log"; then
	cat "$log"
	echo "FAIL: sseqd hit the sandbox"
	exit 1
fi
echo "sseqd served 20,000 ops as uid $uid with / read-only, no capabilities, no_new_privs"
EOF
echo PASS
