/* sseqctl's JSON writer: whatever bytes a string holds, the document is valid JSON in
 * UTF-8; well-formed characters pass through, control characters are escaped, anything
 * else becomes U+FFFD. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-json.h"
#include "sseq-utf8.h"

/* The document json_string(value) makes, as {"s": ...} on one line. */
static char *render(const char *value)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct json j;

	ck_assert_ptr_nonnull(f);
	json_init(&j, f, false);
	json_object_begin(&j, NULL);
	json_string(&j, "s", value);
	json_object_end(&j);
	json_finish(&j);
	fclose(f);
	return text;
}

static void assert_renders(const char *value, const char *want)
{
	char *got = render(value);

	ck_assert_msg(strcmp(got, want) == 0, "rendered %s, want %s", got, want);
	ck_assert(utf8_valid(got));
	free(got);
}

START_TEST(test_json_string_valid_utf8_passes_through)
{
	assert_renders("gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80",
		"{\"s\":\"gr\xc3\xbc\xc3\x9f "
		"\xe2\x82\xac \xf0\x9f\x98\x80\"}\n");
}
END_TEST

START_TEST(test_json_string_escapes_controls_and_quotes)
{
	assert_renders("a\x01\"\\\n\x7f", "{\"s\":\"a\\u0001\\\"\\\\\\n\\u007f\"}\n");
}
END_TEST

START_TEST(test_json_string_replaces_invalid_utf8)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"\xff", "\xef\xbf\xbd"}, /* never a UTF-8 byte */
		{"x\xc3", "x\xef\xbf\xbd"}, /* cut mid-character at the end */
		{"\xc3(", "\xef\xbf\xbd("}, /* a lead without its continuation */
		{"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"}, /* overlong '/' */
		{"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* a surrogate */
		{"\xf4\x90\x80\x80",
			"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* > U+10FFFF */
		{"\x80z", "\xef\xbf\xbdz"}, /* a lone continuation */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char want[64];
		snprintf(want, sizeof(want), "{\"s\":\"%s\"}\n", cases[i].out);
		assert_renders(cases[i].in, want);
	}
}
END_TEST

START_TEST(test_json_text_empty_is_null)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct json j;

	json_init(&j, f, false);
	json_object_begin(&j, NULL);
	json_text(&j, "a", "");
	json_text(&j, "b", NULL);
	json_text(&j, "c", "x");
	json_object_end(&j);
	json_finish(&j);
	fclose(f);
	ck_assert_str_eq(text, "{\"a\":null,\"b\":null,\"c\":\"x\"}\n");
	free(text);
}
END_TEST

/* What the daemon keeps of a label: a whole character or none of it. */
START_TEST(test_utf8_copy_cuts_at_a_character)
{
	char buf[4];

	utf8_copy(buf, sizeof(buf), "ab\xc3\xa9");
	ck_assert_str_eq(buf, "ab");
	utf8_copy(buf, sizeof(buf), "a\xc3\xa9z");
	ck_assert_str_eq(buf, "a\xc3\xa9");
	ck_assert(!utf8_valid("ok\xff"));
	ck_assert(utf8_valid("ok \xe2\x82\xac"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ctl-json");
	TCase *tc = tcase_create("writer");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_json_string_valid_utf8_passes_through);
	tcase_add_test(tc, test_json_string_escapes_controls_and_quotes);
	tcase_add_test(tc, test_json_string_replaces_invalid_utf8);
	tcase_add_test(tc, test_json_text_empty_is_null);
	tcase_add_test(tc, test_utf8_copy_cuts_at_a_character);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
