/* LoadModule's path rules (modpath.c) on a real directory tree: what resolves,
 * what is refused as an escape, what is missing. No GPU needed, so these run everywhere;
 * the hip backend's own LoadModule test only has to show the rules are applied. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "modpath.h"

/* root/mods is the --module-dir; root/outside.bin and root/mods2 lie next to it. */
static char root[PATH_MAX], mods[PATH_MAX];

static void at(char *buf, const char *rel)
{
	ck_assert_int_lt(snprintf(buf, PATH_MAX, "%s/%s", root, rel), PATH_MAX);
}

static void mkfile(const char *rel)
{
	char p[PATH_MAX];
	int fd;

	at(p, rel);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "code", 4), 4);
	close(fd);
}

static void mkdirat_root(const char *rel)
{
	char p[PATH_MAX];

	at(p, rel);
	ck_assert_int_eq(mkdir(p, 0755), 0);
}

static void mklink(const char *target, const char *rel)
{
	char p[PATH_MAX];

	at(p, rel);
	ck_assert_int_eq(symlink(target, p), 0);
}

static void tree_setup(void)
{
	char tmpl[] = "/tmp/test-modpath.XXXXXX";

	ck_assert_ptr_nonnull(mkdtemp(tmpl));
	/* Real paths throughout: /tmp may itself be a symlink. */
	ck_assert_ptr_nonnull(realpath(tmpl, root));
	at(mods, "mods");
	mkdirat_root("mods");
	mkdirat_root("mods/sub");
	mkdirat_root("mods2");
	mkfile("mods/good.bin");
	mkfile("mods/sub/inner.bin");
	mkfile("mods/..dots.bin");
	mkfile("outside.bin");
	mkfile("mods2/evil.bin");
	mklink("good.bin", "mods/link-in");
	mklink("../outside.bin", "mods/link-out");
	mklink("/etc/passwd", "mods/link-abs");
	mklink("../mods2", "mods/dir-out");
	mklink("../mods2/evil.bin", "mods/sibling");
	mklink("sub", "mods/dir-in");
	mklink("mods", "mods-link");
}

static void tree_teardown(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

/* Resolve path in dir; on success the result must be want (relative to root). */
static int resolve(const char *dir, const char *path, const char *want, const char **why)
{
	char out[PATH_MAX], expect[PATH_MAX];
	const char *w = NULL;
	int r = modpath_resolve(dir, path, out, sizeof(out), &w);

	ck_assert_ptr_nonnull(w);
	if (why)
		*why = w;
	if (r == 0 && want) {
		at(expect, want);
		ck_assert_str_eq(out, expect);
	}
	return r;
}

/* path in dir must be refused with err; where why_has is given, the reason must say it. */
static void refused(const char *dir, const char *path, int err, const char *why_has)
{
	const char *why;
	int r = resolve(dir, path, NULL, &why);

	ck_assert_msg(r == err, "\"%s\": got %d, want %d", path, r, err);
	if (why_has)
		ck_assert_msg(strstr(why, why_has) != NULL, "\"%s\": reason \"%s\" lacks \"%s\"",
			path, why, why_has);
}

START_TEST(test_files_inside_the_dir_resolve)
{
	ck_assert_int_eq(resolve(mods, "good.bin", "mods/good.bin", NULL), 0);
	ck_assert_int_eq(resolve(mods, "sub/inner.bin", "mods/sub/inner.bin", NULL), 0);
	ck_assert_int_eq(resolve(mods, "./sub//inner.bin", "mods/sub/inner.bin", NULL), 0);
	/* A name that merely starts with two dots is not a ".." component. */
	ck_assert_int_eq(resolve(mods, "..dots.bin", "mods/..dots.bin", NULL), 0);
}
END_TEST

START_TEST(test_symlinks_that_stay_inside_are_followed)
{
	ck_assert_int_eq(resolve(mods, "link-in", "mods/good.bin", NULL), 0);
	ck_assert_int_eq(resolve(mods, "dir-in/inner.bin", "mods/sub/inner.bin", NULL), 0);
}
END_TEST

START_TEST(test_module_dir_given_through_a_symlink)
{
	char dir[PATH_MAX];

	at(dir, "mods-link");
	/* Checked against the directory's real path, so inside stays inside. */
	ck_assert_int_eq(resolve(dir, "good.bin", "mods/good.bin", NULL), 0);
	refused(dir, "link-out", -EPERM, NULL);
	at(dir, "mods/");
	ck_assert_int_eq(resolve(dir, "good.bin", "mods/good.bin", NULL), 0);
}
END_TEST

START_TEST(test_absolute_path_is_denied)
{
	char abs[PATH_MAX];

	at(abs, "mods/good.bin");
	/* Even one that points inside: the path is always relative to --module-dir. */
	refused(mods, abs, -EPERM, "absolute");
	refused(mods, "/etc/passwd", -EPERM, NULL);
}
END_TEST

START_TEST(test_dotdot_component_is_denied)
{
	refused(mods, "../outside.bin", -EPERM, "..");
	/* Refused even where it would come back inside. */
	refused(mods, "sub/../good.bin", -EPERM, NULL);
	refused(mods, "..", -EPERM, NULL);
	refused(mods, "sub/..", -EPERM, NULL);
	/* And whether or not the target exists. */
	refused(mods, "../../nonexistent", -EPERM, NULL);
}
END_TEST

START_TEST(test_symlink_escape_is_denied)
{
	refused(mods, "link-out", -EPERM, "outside");
	refused(mods, "link-abs", -EPERM, NULL);
	refused(mods, "dir-out/evil.bin", -EPERM, NULL);
	/* mods2 shares the prefix "mods" as a string, not as a directory. */
	refused(mods, "sibling", -EPERM, NULL);
}
END_TEST

START_TEST(test_missing_file_is_enoent)
{
	refused(mods, "nope.bin", -ENOENT, "no such file");
	refused(mods, "sub/nope.bin", -ENOENT, NULL);
	refused(mods, "good.bin/x", -ENOENT, NULL);
}
END_TEST

START_TEST(test_directory_or_empty_path_is_invalid)
{
	refused(mods, "sub", -EINVAL, "regular file");
	refused(mods, ".", -EINVAL, NULL);
	refused(mods, "", -EINVAL, NULL);
}
END_TEST

START_TEST(test_no_module_dir_is_denied)
{
	const char *why;

	ck_assert_int_eq(resolve(NULL, "good.bin", NULL, &why), -EPERM);
	ck_assert_str_eq(why, "no --module-dir configured");
}
END_TEST

START_TEST(test_result_that_does_not_fit_is_refused)
{
	char out[8];

	ck_assert_int_eq(modpath_resolve(mods, "good.bin", out, sizeof(out), NULL), -ENAMETOOLONG);
}
END_TEST

static Suite *modpath_suite(void)
{
	Suite *s = suite_create("modpath");
	TCase *tc = tcase_create("resolve");

	tcase_add_checked_fixture(tc, tree_setup, tree_teardown);
	tcase_add_test(tc, test_files_inside_the_dir_resolve);
	tcase_add_test(tc, test_symlinks_that_stay_inside_are_followed);
	tcase_add_test(tc, test_module_dir_given_through_a_symlink);
	tcase_add_test(tc, test_absolute_path_is_denied);
	tcase_add_test(tc, test_dotdot_component_is_denied);
	tcase_add_test(tc, test_symlink_escape_is_denied);
	tcase_add_test(tc, test_missing_file_is_enoent);
	tcase_add_test(tc, test_directory_or_empty_path_is_invalid);
	tcase_add_test(tc, test_no_module_dir_is_denied);
	tcase_add_test(tc, test_result_that_does_not_fit_is_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(modpath_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
