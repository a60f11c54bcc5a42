#!/bin/bash
# The man pages: each renders without a groff warning, and each keeps up with the code
# it documents (every sseqd / sseqctl / sseq-stress option; sseqd's both ways, the same
# entries in --help and sseqd(8) with the defaults --help names; every sseqctl command,
# every libsseq function and error code, the protocol version, the sseq-stress synopsis,
# the lines of sseqctl status), every function libsseq exports has a page of its name, and
# libsseq(3)'s example still compiles.
# Usage: test-man.sh SSEQD SSEQCTL SSEQ_STRESS SSEQ_H LIBSSEQ_SCD PAGE...
# With $LIBSSEQ (the built library) and $MAN_LINKS_DIR (the built FUNCTION.3 pages) the
# per-function pages are checked too.
set -euo pipefail

sseqd=$1 sseqctl=$2 stress=$3 header=$4 libsseq_scd=$5
shift 5
dir=$(mktemp -d "${TMPDIR:-/tmp}/test-man.XXXXXX")
trap 'rm -rf "$dir"' EXIT
export LC_ALL=C.UTF-8 MANPAGER=cat PAGER=cat
failed=0

fail() {
	echo "FAIL: $*" >&2
	failed=1
}

declare -A page
for p in "$@"; do
	page[$(basename "$p")]=$p
done
for name in sseqd.8 sseqctl.1 libsseq.3 sseq.7; do
	[[ -n ${page[$name]:-} ]] || { echo "FAIL: $name not given" >&2; exit 1; }
done

# The rest needs man-db (and groff) to render the pages.
if ! command -v man >/dev/null; then
	echo "SKIP: man (man-db) is not installed" >&2
	exit 77
fi

# 1. No groff or man warnings at the width people read them.
for name in "${!page[@]}"; do
	out=$(MANWIDTH=80 man --warnings -E UTF-8 -l "${page[$name]}" 2>&1 >/dev/null) ||
		fail "$name: man exited with status $?"
	[[ -z $out ]] || fail "$name: man --warnings printed:"$'\n'"$out"
	# groff does not warn about a literal block running past the right margin.
	wide=$(MANWIDTH=80 man -E ascii -l "${page[$name]}" 2>/dev/null | awk 'length > 80')
	[[ -z $wide ]] || fail "$name: lines wider than 80 columns:"$'\n'"$wide"
	# Unwrapped plain text, so nothing is hyphenated: the text the checks below read.
	MANWIDTH=1000 man -E ascii -l "${page[$name]}" 2>/dev/null | sed 's/^ *//' >"$dir/$name.txt"
done

# A help text's option lines ("  -s, --socket PATH   text"): the part before the
# description, which must appear as a term of its own in the page.
help_options() {
	sed -n 's/^ \{2,\}\(-[A-Za-z0-9-]\{1,\}\(, --[a-z0-9-]\{1,\}\)\{0,1\}\( [A-Z]\{1,\}\)\{0,1\}\)\( \{2,\}.*\)\{0,1\}$/\1/p'
}

# Every line of $1 (the help text's entries) is a line of the rendered page $2.
expect_terms() {
	local what=$1 name=$2 term n=0
	while IFS= read -r term; do
		n=$((n + 1))
		grep -qxF -- "$term" "$dir/$name.txt" || fail "$name does not document $what '$term'"
	done <"$dir/terms"
	[[ $n -gt 0 ]] || fail "found no $what in the help text for $name"
}

# 2. Every sseqd option, exactly as --help spells it.
"$sseqd" --help | help_options >"$dir/terms"
expect_terms option sseqd.8

# ... and the other way: sseqd(8)'s OPTIONS entries and --help's (built from one table,
# the backends' rows included) are the same options spelled the same, and where --help
# names a default, the page's entry names it too (5000ms as 5s).
sseqd_entries() { # stdin: --help, or the page's OPTIONS section: "TERM<tab>TEXT" per entry
	awk -v page="$1" '
		function flush() { if (term != "") print term "\t" text; term = ""; text = "" }
		page && /^[A-Z]/ { flush(); on = $0 == "OPTIONS"; next }
		page && !on { next }
		(page && /^       -/) || (!page && /^  -|^      --/) {
			flush(); line = $0; sub(/^ +/, "", line)
			term = line; text = ""
			if (!page && match(line, /  +/)) {
				term = substr(line, 1, RSTART - 1); text = substr(line, RSTART + RLENGTH)
			}
			next
		}
		/^[^ ]/ && !page { flush(); next }
		term != "" { line = $0; sub(/^ +/, "", line); text = text " " line }
		END { flush() }'
}
"$sseqd" --help | sseqd_entries 0 | sort >"$dir/help-entries"
MANWIDTH=1000 man -E ascii -l "${page[sseqd.8]}" 2>/dev/null | sseqd_entries 1 | sort >"$dir/page-entries"
diff <(cut -f1 "$dir/help-entries") <(cut -f1 "$dir/page-entries") >"$dir/entries.diff" ||
	fail "sseqd --help (<) and sseqd.8's OPTIONS (>) differ:"$'\n'"$(cat "$dir/entries.diff")"
[[ $(wc -l <"$dir/help-entries") -gt 30 ]] || fail "found too few sseqd options: $(cat "$dir/help-entries")"
while IFS=$'\t' read -r term text; do
	def=$(grep -o 'default [0-9][0-9]*[kMGT]\{0,1\}\(ms\)\{0,1\}\b\|default o[nf]f\{0,1\}\b' <<<"$text" | head -1) ||
		continue
	value=${def#default }
	if [[ $value =~ ^([0-9]+)000ms$ ]]; then
		value=${BASH_REMATCH[1]}s
	fi
	entry=$(grep -F -- "$term"$'\t' "$dir/page-entries" | cut -f2)
	grep -qiE -- "default $value\b" <<<"$entry" ||
		fail "sseqd.8's $term does not say 'default $value' as --help does: $entry"
done <"$dir/help-entries"

# 3. Every sseqctl command and option.
"$sseqctl" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z]\{1,\}\) .*/\1/p' >"$dir/terms"
expect_terms command sseqctl.1
"$sseqctl" --help | help_options >"$dir/terms"
expect_terms option sseqctl.1

# 4. sseq-stress, documented in sseq(7).
"$stress" --help | help_options >"$dir/terms"
expect_terms option sseq.7
# ... and its synopsis names every short option but -h.
synopsis=$(grep -m1 '^sseq-stress \[' "$dir/sseq.7.txt" || true)
[[ -n $synopsis ]] || fail "sseq.7 has no sseq-stress synopsis"
for opt in $("$stress" --help | sed -n 's/^ \{2,\}\(-[A-Za-gi-z0-9]\),.*/\1/p'); do
	[[ $synopsis == *"[$opt"* ]] || fail "the sseq-stress synopsis in sseq.7 lacks $opt: $synopsis"
done

# 5. Every libsseq function and error code.
grep -o '\bsseq_[a-z0-9_]*(' "$header" | sed 's/($//' | sort -u >"$dir/functions"
[[ -s $dir/functions ]] || fail "found no functions in $header"
while IFS= read -r fn; do
	grep -qF -- "$fn(" "$dir/libsseq.3.txt" || fail "libsseq.3 does not document $fn()"
done <"$dir/functions"
grep -o '\bSSEQ_ERR_[A-Z_]*' "$header" | sort -u >"$dir/codes"
while IFS= read -r code; do
	grep -qw -- "$code" "$dir/libsseq.3.txt" || fail "libsseq.3 does not document $code"
done <"$dir/codes"
# The protocol version sseq(7) names is proto/sseq.proto's.
proto=$(dirname "$0")/../proto/sseq.proto
major=$(sed -n 's/^[[:space:]]*PROTOCOL_MAJOR = \([0-9]*\);.*/\1/p' "$proto")
minor=$(sed -n 's/^[[:space:]]*PROTOCOL_MINOR = \([0-9]*\);.*/\1/p' "$proto")
[[ -n $major && -n $minor ]] || fail "no PROTOCOL_MAJOR/PROTOCOL_MINOR in $proto"
grep -q "Protocol version $major\.$minor\b" "$dir/sseq.7.txt" ||
	fail "sseq.7 says \"$(grep -o 'Protocol version [0-9.]*[0-9]' "$dir/sseq.7.txt")\"; sseq.proto is $major.$minor"


# 6. Every function the built libsseq exports ($LIBSSEQ) has a page of its own name that
# includes libsseq(3) ($MAN_LINKS_DIR/FUNCTION.3), so `man sseq_connect` and the
# sseq_connect(3) other pages cite are found: checked through man itself, on a manual
# tree laid out as installed.
if [[ -n ${LIBSSEQ:-} && -n ${MAN_LINKS_DIR:-} ]]; then
	nm -D --defined-only "$LIBSSEQ" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }' |
		grep '^sseq_' | sort -u >"$dir/exports"
	[[ -s $dir/exports ]] || fail "found no exported functions in $LIBSSEQ"
	mkdir -p "$dir/tree/man3"
	cp "${page[libsseq.3]}" "$dir/tree/man3/libsseq.3"
	while IFS= read -r fn; do
		link=$MAN_LINKS_DIR/$fn.3
		if [[ ! -f $link ]]; then
			fail "$fn is exported but has no page ($fn.3)"
			continue
		fi
		cp "$link" "$dir/tree/man3/"
		MANWIDTH=1000 man -M "$dir/tree" 3 "$fn" 2>/dev/null | grep -q '^ *libsseq - ' ||
			fail "man 3 $fn does not show libsseq(3) ($fn.3: $(head -1 "$link"))"
	done <"$dir/exports"
	echo "$(wc -l <"$dir/exports") exported functions, each with its page (man 3 FUNCTION shows libsseq(3))"
fi

# 7. The example program compiles against the header, warnings as errors.
awk '/^# EXAMPLE/ { on = 1; next } /^# / { on = 0 }
     on && /^```/ { if (code) exit; code = 1; next } on && code' "$libsseq_scd" |
	sed 's/\\\\/\\/g' >"$dir/example.c"
if [[ ! -s $dir/example.c ]]; then
	fail "no example program in $libsseq_scd"
elif ! ${CC:-cc} -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only \
	-I "$(dirname "$(dirname "$header")")" "$dir/example.c" 2>"$dir/cc.err"; then
	fail "the libsseq.3 example does not compile:"$'\n'"$(cat "$dir/cc.err")"
fi

# 8. sseqctl(1)'s sample of status has the lines sseqctl prints today: each label of the
# header ("Daemon:", "Uptime:", ...) and each counter line's name, from a sim daemon.
"$sseqd" --backend sim --socket "$dir/s.sock" 2>/dev/null &
daemon=$!
for _ in $(seq 100); do [[ -S $dir/s.sock ]] && break; sleep 0.05; done
if "$sseqctl" --socket "$dir/s.sock" status >"$dir/status.txt" 2>&1; then
	sed -n 's/^ *\([A-Z][a-z]*\): .*/\1:/p; s/^\([a-z]\{1,\}\)  .*/\1/p' "$dir/status.txt" >"$dir/labels"
	[[ -s $dir/labels ]] || fail "no labels in sseqctl status:"$'\n'"$(cat "$dir/status.txt")"
	while IFS= read -r label; do
		grep -q -- "^$label " "$dir/sseqctl.1.txt" ||
			fail "sseqctl.1's status sample lacks '$label' (sseqctl status prints it)"
	done <"$dir/labels"
else
	fail "sseqctl status on a sim daemon: $(cat "$dir/status.txt")"
fi
kill "$daemon" 2>/dev/null
wait "$daemon" 2>/dev/null || true

exit $failed
