/* sseqd's command-line options as rows of tables: each option written once (its name,
 * argument, how its value is parsed and where it goes, its help), and getopt's table,
 * --help and every refusal built from the rows. cmdline.c's table and each backend's (in its
 * descriptor, backend.h) are groups of one set. */
#ifndef SSEQ_OPTION_H
#define SSEQ_OPTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define OPTION_MAX_GROUPS 8
#define OPTION_MAX_ROWS 64 /* of one group: its rows given are bits of a word */
#define OPTION_MAX_NAMES 96 /* in a set */
#define OPTION_MAX_WORDS 4 /* of an OPTION_CHOICE row */

enum option_kind {
	OPTION_UINT, /* unsigned, min .. max */
	OPTION_MS, /* unsigned milliseconds, written 500, 500ms or 5s; at most max */
	OPTION_SIZE, /* uint64_t bytes with a binary suffix (4096, 64k, 16M, 2G, 1T), >= min */
	OPTION_OCTAL, /* unsigned, octal, at most max */
	OPTION_STRING, /* const char *: the argument as given */
	OPTION_FLAG, /* bool, no argument: --NAME sets it (and --no-NAME clears it: negatable) */
	OPTION_WORDS, /* bool: words[0] clears it, words[1] sets it */
	OPTION_CHOICE, /* unsigned: the index of the word given among words[] (NULL ends) */
	OPTION_CUSTOM, /* parse() */
};

struct option_row {
	const char *name;
	int short_name; /* 0: none */
	const char *arg; /* its argument in --help (N, PATH); NULL: it takes none */
	enum option_kind kind;
	size_t offset; /* of the field it sets, in its group's config */
	uint64_t min, max;
	const char *words[OPTION_MAX_WORDS + 1]; /* OPTION_WORDS (2), OPTION_CHOICE */
	bool negatable; /* OPTION_FLAG */
	/* OPTION_CUSTOM: 0; -EINVAL, refused as "invalid value 'ARG' for --NAME" and the
	 * hint (*why NULL) or as "--NAME ARG: why"; or -ENOENT when the value is none of
	 * this row's, so that the next row of the same name may take it. */
	int (*parse)(void *cfg, const char *arg, const char **why);
	const char *hint; /* after "invalid value 'ARG' for --NAME" */
	/* Rows of one name in several groups (--inject: the sim's faults and the core's)
	 * each list what they take: --help shows the lists after the first row's help,
	 * and a value no row takes is refused as "unknown WHAT (known: the lists)". */
	const char *values;
	const char *what;
	/* --help's text; {default} is replaced by the default value (its group's defaults)
	 * and {max} by max. */
	const char *help;
	const char *heading; /* a line of --help before this row's */
};

struct option_group {
	const struct option_row *rows;
	size_t nrows;
	void *cfg; /* what the rows set */
	const void *defaults; /* the same, as it starts: --help's {default} */
	uint64_t given; /* bit i: rows[i] took a value */
};

struct option_set {
	const char *intro; /* --help's lines before the options */
	struct option_group group[OPTION_MAX_GROUPS];
	size_t ngroups;
};

/* Append a group, its rows ending with one named NULL: its index, or -ENOSPC. */
int option_set_add(
	struct option_set *set, const struct option_row *rows, void *cfg, const void *defaults);

/* Parse argv into the groups' configs: 0, or -EINVAL once the refusal is on stderr
 * (an unknown option or a missing argument: getopt's message and --help). */
int option_parse(struct option_set *set, int argc, char **argv);

/* --help: the intro, then every option once, its text wrapped at 80 columns. */
void option_usage(const struct option_set *set, FILE *f);

#endif
