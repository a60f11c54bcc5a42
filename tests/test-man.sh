#!/bin/bash
# The man pages: each renders without a groff warning, and each keeps up with the code
# it documents (every sseqd / sseqctl / sseq-stress option, every sseqctl command,
# every libsseq function and error code), and libsseq(3)'s example still compiles.
# Usage: test-man.sh SSEQD SSEQCTL SSEQ_STRESS SSEQ_H LIBSSEQ_SCD PAGE...
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

# 3. Every sseqctl command and option.
"$sseqctl" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z]\{1,\}\) .*/\1/p' >"$dir/terms"
expect_terms command sseqctl.1
"$sseqctl" --help | help_options >"$dir/terms"
expect_terms option sseqctl.1

# 4. sseq-stress, documented in sseq(7).
"$stress" --help | help_options >"$dir/terms"
expect_terms option sseq.7

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

# 6. The example program compiles against the header, warnings as errors.
awk '/^# EXAMPLE/ { on = 1; next } /^# / { on = 0 }
     on && /^```/ { if (code) exit; code = 1; next } on && code' "$libsseq_scd" |
	sed 's/\\\\/\\/g' >"$dir/example.c"
if [[ ! -s $dir/example.c ]]; then
	fail "no example program in $libsseq_scd"
elif ! ${CC:-cc} -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only \
	-I "$(dirname "$(dirname "$header")")" "$dir/example.c" 2>"$dir/cc.err"; then
	fail "the libsseq.3 example does not compile:"$'\n'"$(cat "$dir/cc.err")"
fi

exit $failed
