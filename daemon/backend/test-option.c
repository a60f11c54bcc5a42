/* The option rows (option.c): each kind parses into its field and refuses in its one
 * format, rows of one name in several groups take a value in turn, and --help shows each
 * name once, with its defaults, within 80 columns. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "option.h"

struct cfg {
	unsigned n, ms, mode;
	uint64_t size;
	const char *path;
	bool flag, word;
	unsigned choice;
	unsigned a, b; /* set by the shared rows */
};

static int parse_a(void *c, const char *arg, const char **why)
{
	struct cfg *cfg = c;

	if (strncmp(arg, "a=", 2))
		return -ENOENT;
	if (!arg[2]) {
		*why = "expected a=N";
		return -EINVAL;
	}
	cfg->a = (unsigned)atoi(arg + 2);
	return 0;
}

static int parse_b(void *c, const char *arg, const char **why)
{
	struct cfg *cfg = c;

	if (strcmp(arg, "b"))
		return -ENOENT;
	cfg->b++;
	return 0;
}

#define F(field) .offset = offsetof(struct cfg, field)

static const struct option_row rows_one[] = {
	{.name = "count",
		.short_name = 'c',
		.arg = "N",
		.kind = OPTION_UINT,
		F(n),
		.min = 2,
		.max = 32,
		.help = "a count (default {default}, at most {max})"},
	{.name = "time",
		.arg = "TIME",
		.kind = OPTION_MS,
		F(ms),
		.max = 86400000,
		.hint = " (500, 500ms or 5s)",
		.help = "a time (default {default})"},
	{.name = "size",
		.arg = "SIZE",
		.kind = OPTION_SIZE,
		F(size),
		.min = 4096,
		.hint = " (a size of at least 4k)",
		.help = "a size (default {default})"},
	{.name = "mode",
		.arg = "MODE",
		.kind = OPTION_OCTAL,
		F(mode),
		.max = 0777,
		.hint = " (octal)",
		.help = "a mode (default {default})"},
	{.name = "path",
		.arg = "PATH",
		.kind = OPTION_STRING,
		F(path),
		.help = "a path",
		.heading = "More:"},
	{.name = "check",
		.kind = OPTION_FLAG,
		F(flag),
		.negatable = true,
		.help = "a switch (default: {default})"},
	{.name = "tl",
		.arg = "on|off",
		.kind = OPTION_WORDS,
		F(word),
		.words = {"off", "on"},
		.hint = " (on or off)",
		.help = "words (default {default})"},
	{.name = "pick",
		.arg = "x|y|z",
		.kind = OPTION_CHOICE,
		F(choice),
		.words = {"x", "y", "z"},
		.hint = " (x, y or z)",
		.help = "one of three (default {default})"},
	{.name = "inject",
		.arg = "SPEC",
		.kind = OPTION_CUSTOM,
		.parse = parse_a,
		.values = "a=N",
		.what = "fault",
		.help = "faults (repeatable)"},
	{0},
};

static const struct option_row rows_two[] = {
	{.name = "inject",
		.arg = "SPEC",
		.kind = OPTION_CUSTOM,
		.parse = parse_b,
		.values = "b",
		.what = "fault",
		.help = "not shown"},
	{.name = "other",
		.kind = OPTION_FLAG,
		F(flag),
		.help = "another switch, with a "
			"text long enough that it has to be wrapped onto a second and a third line "
			"of the help to stay within eighty columns"},
	{0},
};

static const struct cfg defaults = {
	.n = 4, .ms = 5000, .mode = 0660, .size = 64ull << 20, .flag = true, .choice = 1};

static struct option_set set;
static struct cfg one, two;

static void setup(void)
{
	memset(&set, 0, sizeof(set));
	one = two = defaults;
	set.intro = "Usage: test\n";
	ck_assert_int_eq(option_set_add(&set, rows_one, &one, &defaults), 0);
	ck_assert_int_eq(option_set_add(&set, rows_two, &two, &defaults), 1);
}

/* Parse the arguments (after argv[0]); stderr's text in err. */
static char err[4096];

static int parse(const char *const *args)
{
	char *argv[32] = {"test"};
	int argc = 1, saved = dup(2), r;
	FILE *f = tmpfile();
	size_t n;

	while (*args)
		argv[argc++] = (char *)*args++;
	fflush(stderr);
	dup2(fileno(f), 2);
	r = option_parse(&set, argc, argv);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	n = fread(err, 1, sizeof(err) - 1, f);
	err[n] = '\0';
	fclose(f);
	return r;
}

START_TEST(test_each_kind_parses_into_its_field)
{
	ck_assert_int_eq(
		parse((const char *[]){"-c", "7", "--time", "5s", "--size", "16M", "--mode", "0600",
			"--path", "/x", "--no-check", "--tl", "on", NULL}),
		0);
	ck_assert_uint_eq(one.n, 7);
	ck_assert_uint_eq(one.ms, 5000);
	ck_assert_uint_eq(one.size, 16ull << 20);
	ck_assert_uint_eq(one.mode, 0600);
	ck_assert_str_eq(one.path, "/x");
	ck_assert(!one.flag);
	ck_assert(one.word);
	ck_assert_uint_eq(set.group[0].given, 0x7f); /* rows 0..6 */
	ck_assert_uint_eq(set.group[1].given, 0);
	ck_assert_int_eq(parse((const char *[]){"--check", "--time", "250", NULL}), 0);
	ck_assert(one.flag);
	ck_assert_uint_eq(one.ms, 250);
	ck_assert_int_eq(parse((const char *[]){"--pick", "z", NULL}), 0);
	ck_assert_uint_eq(one.choice, 2);
	ck_assert_int_eq(parse((const char *[]){"--pick", "x", NULL}), 0);
	ck_assert_uint_eq(one.choice, 0);
}
END_TEST

START_TEST(test_refusals_name_the_range_or_form)
{
	ck_assert_int_eq(parse((const char *[]){"--count", "1", NULL}), -EINVAL);
	ck_assert_str_eq(err, "sseqd: invalid value '1' for --count: must be 2..32\n");
	ck_assert_int_eq(parse((const char *[]){"--size", "1k", NULL}), -EINVAL);
	ck_assert_str_eq(err, "sseqd: invalid value '1k' for --size (a size of at least 4k)\n");
	ck_assert_int_eq(parse((const char *[]){"--time", "5h", NULL}), -EINVAL);
	ck_assert_str_eq(err, "sseqd: invalid value '5h' for --time (500, 500ms or 5s)\n");
	ck_assert_int_eq(parse((const char *[]){"--mode", "0800", NULL}), -EINVAL);
	ck_assert_str_eq(err, "sseqd: invalid value '0800' for --mode (octal)\n");
	ck_assert_int_eq(parse((const char *[]){"--tl", "yes", NULL}), -EINVAL);
	ck_assert_str_eq(err, "sseqd: invalid value 'yes' for --tl (on or off)\n");
	ck_assert_int_eq(parse((const char *[]){"--pick", "w", NULL}), -EINVAL);
	ck_assert_str_eq(err, "sseqd: invalid value 'w' for --pick (x, y or z)\n");
	ck_assert_int_eq(parse((const char *[]){"--pick", "", NULL}), -EINVAL);
	ck_assert_int_eq(parse((const char *[]){"--inject", "a=", NULL}), -EINVAL);
	ck_assert_str_eq(err, "sseqd: --inject a=: expected a=N\n");
	ck_assert_int_eq(parse((const char *[]){"stray", NULL}), -EINVAL);
	ck_assert_str_eq(err, "sseqd: unexpected argument 'stray'\n");
	/* An unknown option: getopt's word, then the help. */
	ck_assert_int_eq(parse((const char *[]){"--bogus", NULL}), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "unrecognized option"));
	ck_assert_ptr_nonnull(strstr(err, "Usage: test\n"));
}
END_TEST

/* --inject: the first group's row, then the second's; neither: the lists of both. */
START_TEST(test_shared_name_tries_its_rows_in_order)
{
	ck_assert_int_eq(
		parse((const char *[]){"--inject", "a=3", "--inject", "b", "--inject", "b", NULL}),
		0);
	ck_assert_uint_eq(one.a, 3);
	ck_assert_uint_eq(two.b, 2);
	ck_assert_uint_eq(set.group[0].given, 1u << 8); /* the inject row */
	ck_assert_uint_eq(set.group[1].given, 1u << 0);
	ck_assert_int_eq(parse((const char *[]){"--inject", "c", NULL}), -EINVAL);
	ck_assert_str_eq(err, "sseqd: --inject c: unknown fault (known: a=N, b)\n");
}
END_TEST

START_TEST(test_help_shows_each_name_once_within_80_columns)
{
	char *text = NULL, *line, *save;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	unsigned injects = 0;

	option_usage(&set, f);
	fclose(f);
	ck_assert_ptr_nonnull(strstr(text, "Usage: test\n"));
	ck_assert_ptr_nonnull(strstr(text,
		"  -c, --count N            a count (default 4, at "
		"most 32)\n"));
	ck_assert_ptr_nonnull(strstr(text, "(default 5000ms)"));
	ck_assert_ptr_nonnull(strstr(text, "(default 64M)"));
	ck_assert_ptr_nonnull(strstr(text, "(default 0660)"));
	ck_assert_ptr_nonnull(strstr(text, "\nMore:\n      --path PATH"));
	ck_assert_ptr_nonnull(strstr(text, "      --check, --no-check  a switch (default: on)"));
	ck_assert_ptr_nonnull(strstr(text, "      --tl on|off          words (default off)"));
	ck_assert_ptr_nonnull(strstr(text, "      --pick x|y|z         one of three (default y)"));
	ck_assert_ptr_nonnull(strstr(text, "faults (repeatable): a=N, b\n"));
	ck_assert_ptr_null(strstr(text, "not shown"));
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		ck_assert_msg(strlen(line) <= 80, "wider than 80 columns: %s", line);
		injects += strstr(line, "--inject") != NULL;
	}
	ck_assert_uint_eq(injects, 1);
	free(text);
}
END_TEST

static Suite *option_suite(void)
{
	Suite *s = suite_create("option");
	TCase *tc = tcase_create("option");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_each_kind_parses_into_its_field);
	tcase_add_test(tc, test_refusals_name_the_range_or_form);
	tcase_add_test(tc, test_shared_name_tries_its_rows_in_order);
	tcase_add_test(tc, test_help_shows_each_name_once_within_80_columns);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(option_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
