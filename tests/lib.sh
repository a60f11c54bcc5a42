# Set-up shared by the shell tests, sourced first thing: a temporary $dir named after the
# script, removed on exit with $daemon_pid and $helper_pid killed; fail and wait_socket.
# shellcheck shell=bash

dir=$(mktemp -d "${TMPDIR:-/tmp}/$(basename "$0" .sh).XXXXXX")
daemon_pid=
helper_pid=
# python3 snippets import the wire helpers from rawwire.py beside this file.
lib_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PYTHONPATH="$lib_dir${PYTHONPATH:+:$PYTHONPATH}"

# A script with more to undo (other processes, files outside $dir) defines cleanup_more.
cleanup() {
	if [[ -n $helper_pid ]]; then kill "$helper_pid" 2>/dev/null || true; fi
	if [[ -n $daemon_pid ]]; then kill "$daemon_pid" 2>/dev/null || true; fi
	if declare -F cleanup_more >/dev/null; then cleanup_more || true; fi
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

# Waits for a socket at $1: $socket_polls looks (default 100), 50 ms apart.
wait_socket() {
	for _ in $(seq "${socket_polls:-100}"); do
		[[ -S $1 ]] && return 0
		sleep 0.05
	done
	fail "no socket at $1"
}
