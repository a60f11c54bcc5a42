/* sseqd's options from their rows: getopt_long's table, the parse of each value into its
 * group's config, the refusals (one format per kind of value) and --help, all built from
 * the same rows, so that an option is written once. */
#include "option.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define OPTION_HELP_COLUMN 27 /* where a description starts */
#define OPTION_HELP_WIDTH 80

int option_set_add(
	struct option_set *set, const struct option_row *rows, void *cfg, const void *defaults)
{
	size_t nrows = 0;

	while (rows[nrows].name)
		nrows++;
	if (set->ngroups == OPTION_MAX_GROUPS || nrows > OPTION_MAX_ROWS)
		return -ENOSPC;
	set->group[set->ngroups] = (struct option_group){rows, nrows, cfg, defaults, 0};
	return (int)set->ngroups++;
}

static int option_parse_uint(const char *s, uint64_t min, uint64_t max, unsigned *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* A byte count with an optional binary suffix: 4096, 64k, 16M, 2G, 1T. */
static int option_parse_size(const char *s, uint64_t *out)
{
	static const char suffixes[] = "kMGT";
	unsigned long long v;
	const char *at;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	if (*end) {
		if (end[1] || !(at = strchr(suffixes, *end == 'K' ? 'k' : *end)))
			return -EINVAL;
		for (int shift = (int)(at - suffixes + 1) * 10; shift > 0; shift -= 10) {
			if (v > (UINT64_MAX >> 10))
				return -EINVAL;
			v <<= 10;
		}
	}
	*out = v;
	return 0;
}

/* Milliseconds, written 500, 500ms or 5s. */
static int option_parse_ms(const char *s, uint64_t max, unsigned *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	if (strcmp(end, "s") == 0)
		v *= 1000;
	else if (*end && strcmp(end, "ms") != 0)
		return -EINVAL;
	if (v > max)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* One row given ARG (NULL for a flag; neg: it came as --no-NAME): 0, -EINVAL with the
 * refusal on stderr, or -ENOENT (a custom row's: not its value). */
static int option_apply(const struct option_row *row, void *cfg, const char *arg, bool neg)
{
	char *field = (char *)cfg + row->offset, *end;
	const char *why = NULL;
	unsigned long mode;
	unsigned u;
	uint64_t v;
	bool b;
	int r;

	switch (row->kind) {
	case OPTION_UINT:
		if (option_parse_uint(arg, row->min, row->max, &u) < 0) {
			fprintf(stderr, "sseqd: invalid value '%s' for --%s: must be %llu..%llu\n",
				arg, row->name, (unsigned long long)row->min,
				(unsigned long long)row->max);
			return -EINVAL;
		}
		memcpy(field, &u, sizeof(u));
		return 0;
	case OPTION_MS:
		if (option_parse_ms(arg, row->max, &u) < 0)
			goto bad;
		memcpy(field, &u, sizeof(u));
		return 0;
	case OPTION_SIZE:
		if (option_parse_size(arg, &v) < 0 || v < row->min)
			goto bad;
		memcpy(field, &v, sizeof(v));
		return 0;
	case OPTION_OCTAL:
		mode = strtoul(arg, &end, 8);
		if (end == arg || *end || mode > row->max)
			goto bad;
		u = (unsigned)mode;
		memcpy(field, &u, sizeof(u));
		return 0;
	case OPTION_STRING:
		memcpy(field, &arg, sizeof(arg));
		return 0;
	case OPTION_FLAG:
		b = !neg;
		memcpy(field, &b, sizeof(b));
		return 0;
	case OPTION_WORDS:
		if (strcmp(arg, row->words[0]) && strcmp(arg, row->words[1]))
			goto bad;
		b = strcmp(arg, row->words[1]) == 0;
		memcpy(field, &b, sizeof(b));
		return 0;
	case OPTION_CHOICE:
		for (u = 0; u < OPTION_MAX_WORDS && row->words[u]; u++)
			if (strcmp(arg, row->words[u]) == 0)
				break;
		if (u == OPTION_MAX_WORDS || !row->words[u])
			goto bad;
		memcpy(field, &u, sizeof(u));
		return 0;
	case OPTION_CUSTOM:
		r = row->parse(cfg, arg, &why);
		if (r >= 0 || r == -ENOENT)
			return r;
		if (!why)
			goto bad;
		fprintf(stderr, "sseqd: --%s %s: %s\n", row->name, arg, why);
		return -EINVAL;
	}
bad:
	fprintf(stderr, "sseqd: invalid value '%s' for --%s%s\n", arg, row->name,
		row->hint ? row->hint : "");
	return -EINVAL;
}

/* Every row named `name`, in order, until one takes arg: 0 or -EINVAL, said. */
static int option_take(struct option_set *set, const char *name, const char *arg, bool neg)
{
	const struct option_row *first = NULL;
	char known[512] = "";
	size_t n = 0;

	for (size_t g = 0; g < set->ngroups; g++) {
		struct option_group *grp = &set->group[g];

		for (size_t i = 0; i < grp->nrows; i++) {
			const struct option_row *row = &grp->rows[i];
			int r;

			if (strcmp(row->name, name))
				continue;
			if (!first)
				first = row;
			r = option_apply(row, grp->cfg, arg, neg);
			if (r == 0)
				grp->given |= 1ull << i;
			if (r != -ENOENT)
				return r;
			if (row->values && n < sizeof(known))
				n += (size_t)snprintf(known + n, sizeof(known) - n, "%s%s",
					n ? ", " : "", row->values);
		}
	}
	fprintf(stderr, "sseqd: --%s %s: unknown %s (known: %s)\n", name, arg,
		first && first->what ? first->what : "value", known);
	return -EINVAL;
}

int option_parse(struct option_set *set, int argc, char **argv)
{
	/* Each name once (the first row's), and --no-NAME beside a negatable one. */
	struct option longopts[2 * OPTION_MAX_NAMES + 1];
	const struct option_row *first[OPTION_MAX_NAMES];
	char shortopts[2 * OPTION_MAX_NAMES + 1], nonames[OPTION_MAX_NAMES][48];
	size_t nnames = 0, nlong = 0, nshort = 0;
	int c;

	for (size_t g = 0; g < set->ngroups; g++) {
		for (size_t i = 0; i < set->group[g].nrows; i++) {
			const struct option_row *row = &set->group[g].rows[i];
			const int has_arg = row->arg ? required_argument : no_argument;
			const int val = 256 + 2 * (int)nnames;
			size_t k = 0;

			while (k < nnames && strcmp(first[k]->name, row->name))
				k++;
			if (k < nnames)
				continue;
			if (nnames == OPTION_MAX_NAMES)
				return -ENOSPC;
			first[nnames] = row;
			longopts[nlong++] = (struct option){row->name, has_arg, NULL, val};
			if (row->kind == OPTION_FLAG && row->negatable) {
				snprintf(nonames[nnames], sizeof(nonames[0]), "no-%s", row->name);
				longopts[nlong++] = (struct option){
					nonames[nnames], no_argument, NULL, val + 1};
			}
			if (row->short_name) {
				shortopts[nshort++] = (char)row->short_name;
				if (row->arg)
					shortopts[nshort++] = ':';
			}
			nnames++;
		}
	}
	longopts[nlong] = (struct option){0};
	shortopts[nshort] = '\0';
	optind = 0; /* from the start, as if never called (glibc): the tests parse again */
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		size_t k = 0;
		bool neg = false;
		int r;

		if (c >= 256) {
			k = (size_t)(c - 256) / 2;
			neg = (c - 256) % 2;
		} else {
			while (k < nnames && first[k]->short_name != c)
				k++;
		}
		if (c == '?' || k == nnames) {
			option_usage(set, stderr);
			return -EINVAL;
		}
		r = option_take(set, first[k]->name, optarg, neg);
		if (r < 0)
			return r;
	}
	if (optind < argc) {
		fprintf(stderr, "sseqd: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/* A default as its option is written: 64M, 5000ms, 0660. */
static void option_default(
	const struct option_row *row, const void *defaults, char *buf, size_t size)
{
	static const char *const units[] = {"", "k", "M", "G", "T"};
	const char *field = (const char *)defaults + row->offset, *s;
	unsigned u = 0;
	uint64_t v;
	bool b;
	int unit = 0;

	switch (row->kind) {
	case OPTION_UINT:
	case OPTION_MS:
	case OPTION_OCTAL:
		memcpy(&u, field, sizeof(u));
		snprintf(buf, size, row->kind == OPTION_OCTAL ? "%04o" : "%u%s", u,
			row->kind == OPTION_MS ? "ms" : "");
		return;
	case OPTION_SIZE:
		memcpy(&v, field, sizeof(v));
		while (v && unit < 4 && v % 1024 == 0) {
			v /= 1024;
			unit++;
		}
		snprintf(buf, size, "%llu%s", (unsigned long long)v, units[unit]);
		return;
	case OPTION_STRING:
		memcpy(&s, field, sizeof(s));
		snprintf(buf, size, "%s", s ? s : "none");
		return;
	case OPTION_FLAG:
	case OPTION_WORDS:
		memcpy(&b, field, sizeof(b));
		snprintf(buf, size, "%s",
			row->kind == OPTION_WORDS ? row->words[b]
				: b		  ? "on"
						  : "off");
		return;
	case OPTION_CHOICE:
		memcpy(&u, field, sizeof(u));
		snprintf(buf, size, "%s",
			u < OPTION_MAX_WORDS && row->words[u] ? row->words[u] : "?");
		return;
	case OPTION_CUSTOM:
		snprintf(buf, size, "?");
		return;
	}
}

/* The text with {default} and {max} replaced. */
static size_t option_expand(
	const struct option_row *row, const void *defaults, char *out, size_t size, size_t n)
{
	for (const char *s = row->help; s && *s && n + 1 < size;) {
		char value[32];

		if (strncmp(s, "{default}", 9) == 0) {
			option_default(row, defaults, value, sizeof(value));
			s += 9;
		} else if (strncmp(s, "{max}", 5) == 0) {
			snprintf(value, sizeof(value), "%llu", (unsigned long long)row->max);
			s += 5;
		} else {
			out[n++] = *s++;
			continue;
		}
		n += (size_t)snprintf(out + n, size - n, "%s", value);
	}
	out[n < size ? n : size - 1] = '\0';
	return n < size ? n : size - 1;
}

/* "  -s, --socket PATH" and the text, wrapped at OPTION_HELP_WIDTH and continued at
 * OPTION_HELP_COLUMN. */
static void option_print(FILE *f, const char *term, const char *text)
{
	int col = fprintf(f, "%s", term);

	/* A term too long for its column: two spaces, and the text goes on beside it. */
	if (col + 2 > OPTION_HELP_COLUMN)
		col += fprintf(f, " ");
	for (const char *w = text; *w;) {
		const int len = (int)strcspn(w, " ");

		if (col >= OPTION_HELP_COLUMN && col + 1 + len > OPTION_HELP_WIDTH) {
			fputc('\n', f);
			col = 0;
		}
		if (col < OPTION_HELP_COLUMN)
			col += fprintf(f, "%*s", OPTION_HELP_COLUMN - col, "");
		else
			col += fprintf(f, " ");
		col += fprintf(f, "%.*s", len, w);
		w += len;
		while (*w == ' ')
			w++;
	}
	fputc('\n', f);
}

void option_usage(const struct option_set *set, FILE *f)
{
	fputs(set->intro, f);
	for (size_t g = 0; g < set->ngroups; g++) {
		for (size_t i = 0; i < set->group[g].nrows; i++) {
			const struct option_row *row = &set->group[g].rows[i];
			char term[96], text[1024];
			size_t n;
			bool seen = false;

			/* A name is shown once, at its first row, with every row's values. */
			for (size_t h = 0; h <= g && !seen; h++)
				for (size_t j = 0; j < (h < g ? set->group[h].nrows : i); j++)
					seen |= strcmp(set->group[h].rows[j].name, row->name) == 0;
			if (seen)
				continue;
			if (row->heading)
				fprintf(f, "%s\n", row->heading);
			snprintf(term, sizeof(term), "  %c%c%s--%s%s%s%s%s",
				row->short_name ? '-' : ' ',
				row->short_name ? row->short_name : ' ',
				row->short_name ? ", " : "  ", row->name,
				row->negatable ? ", --no-" : "", row->negatable ? row->name : "",
				row->arg ? " " : "", row->arg ? row->arg : "");
			n = option_expand(row, set->group[g].defaults, text, sizeof(text), 0);
			for (size_t h = g, sep = 0; h < set->ngroups; h++)
				for (size_t j = h == g ? i : 0; j < set->group[h].nrows; j++) {
					const struct option_row *r = &set->group[h].rows[j];

					if (strcmp(r->name, row->name) || !r->values ||
						n + 1 >= sizeof(text))
						continue;
					n += (size_t)snprintf(text + n, sizeof(text) - n, "%s%s",
						sep++ ? ", " : ": ", r->values);
				}
			option_print(f, term, text);
		}
	}
}
