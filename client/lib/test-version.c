/* The release a program is compiled against (<sseq/sseq.h>'s SSEQ_VERSION and its parts)
 * is the one the library it runs with reports, sseq_version(), and so is the default
 * socket, sseq_default_socket(). Linked against the shared libsseq, as a program is. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

/* The header's own value, not the one the project's build passes its programs. */
#undef SSEQ_VERSION
#include <sseq/sseq.h>

START_TEST(test_version_macro_is_the_library_version)
{
	ck_assert_ptr_nonnull(sseq_version());
	ck_assert_str_eq(SSEQ_VERSION, sseq_version());
}
END_TEST

START_TEST(test_version_parts_spell_the_string)
{
	char parts[48];

	snprintf(parts, sizeof(parts), "%d.%d.%d", SSEQ_VERSION_MAJOR, SSEQ_VERSION_MINOR,
		SSEQ_VERSION_PATCH);
	ck_assert_str_eq(parts, SSEQ_VERSION);
}
END_TEST

START_TEST(test_default_socket_is_the_headers)
{
	char gpu0[64];

	ck_assert_ptr_nonnull(sseq_default_socket());
	ck_assert_str_eq(SSEQ_DEFAULT_SOCKET, sseq_default_socket());
	/* GPU 0's socket in the sockets' directory, as sseqd and sseqctl spell it. */
	snprintf(gpu0, sizeof(gpu0), SSEQ_SOCKET_DIR "/" SSEQ_SOCKET_NAME, 0u);
	ck_assert_str_eq(gpu0, sseq_default_socket());
}
END_TEST

int main(void)
{
	Suite *s = suite_create("version");
	TCase *tc = tcase_create("version");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_version_macro_is_the_library_version);
	tcase_add_test(tc, test_version_parts_spell_the_string);
	tcase_add_test(tc, test_default_socket_is_the_headers);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
