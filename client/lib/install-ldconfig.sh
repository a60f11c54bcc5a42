#!/bin/sh
# meson install script: refresh the dynamic linker's cache after libsseq was installed, so
# that programs and `import sseq` find libsseq.so.0 at once (meson 1.0.1, Debian 12's,
# does not). Only for a library directory the linker searches (ld.so.conf's list and its
# trusted directories: /usr/local/lib/<triplet>, /usr/lib/<triplet>, ...), run as root,
# and never for a staged install (DESTDIR) or a dry run; elsewhere it says how to reach
# the library instead. Meson before 1.1 hides what an install script prints, so the
# decision is also written to the build's meson-logs/install-ldconfig.txt.
# Usage: install-ldconfig.sh LIBDIR (absolute); install-ldconfig.sh --query LIBDIR prints
# yes or no (is LIBDIR searched?). $LDCONFIG and $LDSO_CONF override the program and the
# configuration read (tests).
set -eu
query=no
if [ "${1:-}" = --query ]; then
	query=yes
	shift
fi
libdir=$1
ldconfig=${LDCONFIG:-ldconfig}
command -v "$ldconfig" >/dev/null 2>&1 || ldconfig=/sbin/ldconfig
conf=${LDSO_CONF:-/etc/ld.so.conf}

# The directories a configuration file lists, following its includes (globs, relative
# to the file's directory).
conf_dirs() { # file
	[ -r "$1" ] || return 0
	while read -r word rest; do
		case $word in
		'' | '#'*) ;;
		include)
			for pattern in $rest; do
				case $pattern in /*) ;; *) pattern=$(dirname "$1")/$pattern ;; esac
				for f in $pattern; do conf_dirs "$f"; done
			done
			;;
		*) echo "$word" ;;
		esac
	done <"$1"
}

searched() { # LIBDIR: yes if the dynamic linker searches it
	real=$(realpath -m "$1")
	# What ldconfig itself reports (-N: no cache written, -X: no links made; existing
	# directories only, each as "DIR:" or "DIR: (from FILE:LINE)"), what ld.so.conf
	# lists (those not made yet too), and the trusted directories.
	for dir in $("$ldconfig" -v -N -X 2>/dev/null | sed -n 's|^\(/[^:]*\):.*|\1|p') \
		$(conf_dirs "$conf") /lib /usr/lib /lib64 /usr/lib64; do
		if [ "$(realpath -m "$dir")" = "$real" ]; then
			echo yes
			return
		fi
	done
	echo no
}

if [ "$query" = yes ]; then
	searched "$libdir"
	exit 0
fi

say() {
	echo "libsseq: $*"
	if [ -n "${MESON_BUILD_ROOT:-}" ] && [ -d "$MESON_BUILD_ROOT/meson-logs" ]; then
		echo "libsseq: $*" >>"$MESON_BUILD_ROOT/meson-logs/install-ldconfig.txt"
	fi
}

[ -z "${MESON_BUILD_ROOT:-}" ] || rm -f "$MESON_BUILD_ROOT/meson-logs/install-ldconfig.txt"
if [ -n "${DESTDIR:-}" ]; then
	say "staged install (DESTDIR): ldconfig is the package's job, not run"
	exit 0
fi
if [ -n "${MESON_INSTALL_DRY_RUN:-}" ]; then
	exit 0
fi
if [ "$(searched "$libdir")" = no ]; then
	say "$libdir is not a directory the dynamic linker searches: ldconfig not run;" \
		"use LD_LIBRARY_PATH=$libdir (or SSEQ_LIBRARY=$libdir/libsseq.so.0 for Python)"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	say "$libdir is searched by the dynamic linker: run ldconfig as root to refresh its cache"
	exit 0
fi
"$ldconfig"
say "ran ldconfig ($libdir is searched by the dynamic linker)"
