/* The session's handle table (handles.c), which could not be tested while it was static
 * inside one big file: per-session numbers with a generation, so a handle of another
 * session, of another kind, or of an object already gone is simply unknown (I10). */
#include <check.h>
#include <stdlib.h>

#include "handles.h"
#include "session-private.h"

static int objs[4096];

static struct session *table_new(void)
{
	struct session *s = calloc(1, sizeof(*s));

	ck_assert_ptr_nonnull(s);
	return s;
}

static void table_free(struct session *s)
{
	free(s->slots);
	free(s);
}

static uint64_t add(struct session *s, enum handle_kind kind, void *obj)
{
	uint64_t h = 0;

	ck_assert_int_eq(handles_new(s, kind, obj, &h), 0);
	ck_assert_uint_ne(h, 0);
	return h;
}

START_TEST(test_handle_finds_its_object_and_only_as_its_kind)
{
	struct session *s = table_new();
	uint64_t b = add(s, HANDLE_BUFFER, &objs[0]), st = add(s, HANDLE_STAGING, &objs[1]);

	ck_assert_ptr_eq(handles_lookup(s, b, HANDLE_BUFFER), &objs[0]);
	ck_assert_ptr_eq(handles_lookup(s, st, HANDLE_STAGING), &objs[1]);
	ck_assert_ptr_null(handles_lookup(s, b, HANDLE_STAGING));
	ck_assert_ptr_null(handles_lookup(s, st, HANDLE_MODULE));
	ck_assert_uint_eq(s->nhandles, 2);
	table_free(s);
}
END_TEST

START_TEST(test_zero_and_unissued_handles_are_unknown)
{
	struct session *s = table_new();
	uint64_t b = add(s, HANDLE_BUFFER, &objs[0]);

	ck_assert_ptr_null(handles_lookup(s, 0, HANDLE_BUFFER));
	ck_assert_ptr_null(handles_lookup(s, b + 1, HANDLE_BUFFER)); /* the next slot */
	ck_assert_ptr_null(handles_lookup(s, 0xffffffffu | (1ull << 32), HANDLE_BUFFER));
	ck_assert_ptr_null(handles_lookup(s, b ^ (1ull << 32), HANDLE_BUFFER)); /* other gen */
	table_free(s);
}
END_TEST

/* A freed slot is reused, but the old number names nothing: its generation moved on. */
START_TEST(test_dropped_handle_stays_unknown_after_its_slot_is_reused)
{
	struct session *s = table_new();
	uint64_t old = add(s, HANDLE_BUFFER, &objs[0]), now;

	handles_drop(s, old);
	ck_assert_ptr_null(handles_lookup(s, old, HANDLE_BUFFER));
	ck_assert_uint_eq(s->nhandles, 0);
	now = add(s, HANDLE_BUFFER, &objs[1]);
	ck_assert_uint_eq(now & 0xffffffffu, old & 0xffffffffu); /* the same slot */
	ck_assert_uint_ne(now, old);
	ck_assert_ptr_null(handles_lookup(s, old, HANDLE_BUFFER));
	ck_assert_ptr_eq(handles_lookup(s, now, HANDLE_BUFFER), &objs[1]);
	table_free(s);
}
END_TEST

/* Numbers are per session: the same number in another session is that session's own,
 * or nothing. */
START_TEST(test_handles_are_per_session)
{
	struct session *a = table_new(), *b = table_new();
	uint64_t ha = add(a, HANDLE_BUFFER, &objs[0]);

	ck_assert_ptr_null(handles_lookup(b, ha, HANDLE_BUFFER));
	uint64_t hb = add(b, HANDLE_MODULE, &objs[1]);
	ck_assert_uint_eq(hb, ha); /* the same number... */
	ck_assert_ptr_null(handles_lookup(b, ha, HANDLE_BUFFER)); /* ...is b's module */
	ck_assert_ptr_eq(handles_lookup(a, ha, HANDLE_BUFFER), &objs[0]);
	table_free(a);
	table_free(b);
}
END_TEST

/* Thousands of handles through the table's growth, half dropped and re-added. */
START_TEST(test_table_grows_and_reuses)
{
	enum { N = 4096 };
	struct session *s = table_new();
	uint64_t *h = calloc(N, sizeof(*h));

	for (int i = 0; i < N; i++)
		h[i] = add(s, HANDLE_BUFFER, &objs[i]);
	for (int i = 0; i < N; i += 2)
		handles_drop(s, h[i]);
	ck_assert_uint_eq(s->nhandles, N / 2);
	for (int i = 0; i < N; i += 2) {
		uint64_t old = h[i];
		h[i] = add(s, HANDLE_STAGING, &objs[i]);
		ck_assert_ptr_null(handles_lookup(s, old, HANDLE_BUFFER));
	}
	ck_assert_uint_eq(s->nslots, N); /* every freed slot was reused */
	for (int i = 0; i < N; i++)
		ck_assert_ptr_eq(
			handles_lookup(s, h[i], i % 2 ? HANDLE_BUFFER : HANDLE_STAGING), &objs[i]);
	free(h);
	table_free(s);
}
END_TEST

int main(void)
{
	Suite *suite = suite_create("handles");
	TCase *tc = tcase_create("handles");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_handle_finds_its_object_and_only_as_its_kind);
	tcase_add_test(tc, test_zero_and_unissued_handles_are_unknown);
	tcase_add_test(tc, test_dropped_handle_stays_unknown_after_its_slot_is_reused);
	tcase_add_test(tc, test_handles_are_per_session);
	tcase_add_test(tc, test_table_grows_and_reuses);
	suite_add_tcase(suite, tc);
	sr = srunner_create(suite);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
