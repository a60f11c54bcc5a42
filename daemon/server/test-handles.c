/* The session's handle table (handles.c), which could not be tested while it was static
 * inside one big file: per-session numbers with a generation, so a handle of another
 * session, of another kind, or of an object already gone is simply unknown (I10). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "handles.h"

static int objs[4096];

static struct handle_table *table_new(void)
{
	struct handle_table *t = calloc(1, sizeof(*t));

	ck_assert_ptr_nonnull(t);
	return t;
}

static void table_free(struct handle_table *t)
{
	handles_finish(t);
	free(t);
}

/* A client's name: index in bits 0..30 with bit 31 set, generation in bits 32..46. */
static uint64_t name_of(uint32_t index, uint32_t gen)
{
	return ((uint64_t)gen << 32) | 0x80000000u | index;
}

static uint64_t add(struct handle_table *t, enum handle_kind kind, void *obj)
{
	uint64_t h = 0;

	ck_assert_int_eq(handles_new(t, kind, obj, &h), 0);
	ck_assert_uint_ne(h, 0);
	return h;
}

START_TEST(test_handle_finds_its_object_and_only_as_its_kind)
{
	struct handle_table *t = table_new();
	uint64_t b = add(t, HANDLE_BUFFER, &objs[0]), st = add(t, HANDLE_STAGING, &objs[1]);

	ck_assert_ptr_eq(handles_lookup(t, b, HANDLE_BUFFER), &objs[0]);
	ck_assert_ptr_eq(handles_lookup(t, st, HANDLE_STAGING), &objs[1]);
	ck_assert_ptr_null(handles_lookup(t, b, HANDLE_STAGING));
	ck_assert_ptr_null(handles_lookup(t, st, HANDLE_MODULE));
	ck_assert_uint_eq(t->nhandles, 2);
	table_free(t);
}
END_TEST

START_TEST(test_zero_and_unissued_handles_are_unknown)
{
	struct handle_table *t = table_new();
	uint64_t b = add(t, HANDLE_BUFFER, &objs[0]);

	ck_assert_ptr_null(handles_lookup(t, 0, HANDLE_BUFFER));
	ck_assert_ptr_null(handles_lookup(t, b + 1, HANDLE_BUFFER)); /* the next slot */
	ck_assert_ptr_null(handles_lookup(t, 0xffffffffu | (1ull << 32), HANDLE_BUFFER));
	ck_assert_ptr_null(handles_lookup(t, b ^ (1ull << 32), HANDLE_BUFFER)); /* other gen */
	table_free(t);
}
END_TEST

/* A freed slot is reused, but the old number names nothing: its generation moved on. */
START_TEST(test_dropped_handle_stays_unknown_after_its_slot_is_reused)
{
	struct handle_table *t = table_new();
	uint64_t old = add(t, HANDLE_BUFFER, &objs[0]), now;

	handles_drop(t, old);
	ck_assert_ptr_null(handles_lookup(t, old, HANDLE_BUFFER));
	ck_assert_uint_eq(t->nhandles, 0);
	now = add(t, HANDLE_BUFFER, &objs[1]);
	ck_assert_uint_eq(now & 0xffffffffu, old & 0xffffffffu); /* the same slot */
	ck_assert_uint_ne(now, old);
	ck_assert_ptr_null(handles_lookup(t, old, HANDLE_BUFFER));
	ck_assert_ptr_eq(handles_lookup(t, now, HANDLE_BUFFER), &objs[1]);
	table_free(t);
}
END_TEST

/* Numbers are per session: the same number in another session is that session's own,
 * or nothing. */
START_TEST(test_handles_are_per_session)
{
	struct handle_table *a = table_new(), *b = table_new();
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
	struct handle_table *t = table_new();
	uint64_t *h = calloc(N, sizeof(*h));

	for (int i = 0; i < N; i++)
		h[i] = add(t, HANDLE_BUFFER, &objs[i]);
	for (int i = 0; i < N; i += 2)
		handles_drop(t, h[i]);
	ck_assert_uint_eq(t->nhandles, N / 2);
	for (int i = 0; i < N; i += 2) {
		uint64_t old = h[i];
		h[i] = add(t, HANDLE_STAGING, &objs[i]);
		ck_assert_ptr_null(handles_lookup(t, old, HANDLE_BUFFER));
	}
	ck_assert_uint_eq(t->nslots, N); /* every freed slot was reused */
	for (int i = 0; i < N; i++)
		ck_assert_ptr_eq(
			handles_lookup(t, h[i], i % 2 ? HANDLE_BUFFER : HANDLE_STAGING), &objs[i]);
	free(h);
	table_free(t);
}
END_TEST

/* A name the client gave finds its object, as that kind and under that generation only,
 * beside daemon-picked handles of the same low index. */
START_TEST(test_named_handle_finds_its_object_beside_daemon_picked_ones)
{
	struct handle_table *t = table_new();
	uint64_t picked = add(t, HANDLE_BUFFER, &objs[0]), named = name_of(1, 5);

	ck_assert_int_eq(handles_claim(t, HANDLE_BUFFER, &objs[1], named, 100), 0);
	ck_assert_ptr_eq(handles_lookup(t, named, HANDLE_BUFFER), &objs[1]);
	ck_assert_ptr_eq(handles_lookup(t, picked, HANDLE_BUFFER), &objs[0]);
	ck_assert_ptr_null(handles_lookup(t, named, HANDLE_STAGING));
	ck_assert_ptr_null(handles_lookup(t, name_of(1, 4), HANDLE_BUFFER)); /* other gen */
	ck_assert_ptr_null(handles_lookup(t, named | (1ull << 47), HANDLE_BUFFER));
	ck_assert_ptr_null(handles_lookup(t, name_of(2, 5), HANDLE_BUFFER)); /* unnamed index */
	ck_assert_ptr_null(handles_lookup(t, name_of(0, 0), HANDLE_FREE));
	/* A generation of 0 is the client's to choose too. */
	ck_assert_int_eq(handles_claim(t, HANDLE_BUFFER, &objs[2], name_of(7, 0), 100), 0);
	ck_assert_ptr_eq(handles_lookup(t, name_of(7, 0), HANDLE_BUFFER), &objs[2]);
	ck_assert_ptr_null(handles_lookup(t, 7, HANDLE_BUFFER));
	ck_assert_uint_eq(handles_count(t), 3);
	handles_drop(t, named);
	ck_assert_ptr_null(handles_lookup(t, named, HANDLE_BUFFER));
	ck_assert_uint_eq(handles_count(t), 2);
	/* Its index may be named again, under any generation. */
	ck_assert_int_eq(handles_claim(t, HANDLE_BUFFER, &objs[3], name_of(1, 6), 100), 0);
	ck_assert_ptr_eq(handles_lookup(t, name_of(1, 6), HANDLE_BUFFER), &objs[3]);
	ck_assert_ptr_null(handles_lookup(t, named, HANDLE_BUFFER));
	table_free(t);
}
END_TEST

/* Only the form sseq.proto gives is a name; an index in use is not taken again. */
START_TEST(test_names_of_another_form_or_in_use_are_refused)
{
	struct handle_table *t = table_new();

	ck_assert_int_eq(handles_check_name(t, 5, 100), -EINVAL); /* bit 31 clear */
	ck_assert_int_eq(handles_check_name(t, name_of(0, 1), 100), -EINVAL); /* index 0 */
	ck_assert_int_eq(handles_check_name(t, name_of(101, 1), 100), -EINVAL); /* > limit */
	ck_assert_int_eq(handles_check_name(t, name_of(1, 1) | (1ull << 47), 100), -EINVAL);
	ck_assert_int_eq(handles_check_name(t, name_of(1, 1) | (1ull << 63), 100), -EINVAL);
	ck_assert_int_eq(handles_claim(t, HANDLE_BUFFER, &objs[0], name_of(101, 1), 100), -EINVAL);
	ck_assert_int_eq(handles_check_name(t, name_of(100, 0x7fff), 100), 0);
	ck_assert_int_eq(handles_claim(t, HANDLE_BUFFER, &objs[0], name_of(3, 1), 100), 0);
	ck_assert_int_eq(handles_check_name(t, name_of(3, 2), 100), -EEXIST);
	ck_assert_int_eq(handles_claim(t, HANDLE_BUFFER, &objs[1], name_of(3, 2), 100), -EEXIST);
	ck_assert_ptr_eq(handles_lookup(t, name_of(3, 1), HANDLE_BUFFER), &objs[0]);
	/* A lost name is in use until freed. */
	ck_assert_int_eq(handles_claim(t, HANDLE_LOST, NULL, name_of(4, 1), 100), 0);
	ck_assert(handles_lost(t, name_of(4, 1)));
	ck_assert(!handles_lost(t, name_of(4, 2)));
	ck_assert_int_eq(handles_check_name(t, name_of(4, 2), 100), -EEXIST);
	ck_assert_uint_eq(handles_count(t), 2);
	table_free(t);
}
END_TEST

/* A refused name keeps its own copy of the refusal (cut short), counts as no live handle,
 * and is replaced when named again or dropped when freed, its copy freed (LSan). */
START_TEST(test_refused_name_keeps_its_message_until_named_again_or_dropped)
{
	struct handle_table *t = table_new();
	char msg[512];
	const char *kept;

	memset(msg, 'x', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	memcpy(msg, "its Alloc was refused", 21);
	ck_assert_int_eq(handles_refuse(t, name_of(2, 9), 100, msg), 0);
	ck_assert_ptr_nonnull(kept = handles_lookup(t, name_of(2, 9), HANDLE_REFUSED));
	ck_assert_ptr_ne(kept, msg);
	ck_assert_uint_eq(strlen(kept), HANDLES_REFUSED_MAX - 1);
	ck_assert_int_eq(strncmp(kept, "its Alloc was refused", 21), 0);
	ck_assert_ptr_null(handles_lookup(t, name_of(2, 8), HANDLE_REFUSED));
	ck_assert_ptr_null(handles_lookup(t, name_of(2, 9), HANDLE_BUFFER));
	ck_assert_uint_eq(handles_count(t), 0);
	/* Refused again, then named again: the old copies go. */
	ck_assert_int_eq(handles_check_name(t, name_of(2, 9), 100), 0);
	ck_assert_int_eq(handles_refuse(t, name_of(2, 9), 100, "second"), 0);
	ck_assert_str_eq(handles_lookup(t, name_of(2, 9), HANDLE_REFUSED), "second");
	ck_assert_int_eq(handles_claim(t, HANDLE_BUFFER, &objs[0], name_of(2, 10), 100), 0);
	ck_assert_ptr_null(handles_lookup(t, name_of(2, 9), HANDLE_REFUSED));
	ck_assert_ptr_eq(handles_lookup(t, name_of(2, 10), HANDLE_BUFFER), &objs[0]);
	ck_assert_uint_eq(handles_count(t), 1);
	/* Dropped (a Free of it). */
	ck_assert_int_eq(handles_refuse(t, name_of(5, 1), 100, "third"), 0);
	handles_drop(t, name_of(5, 1));
	ck_assert_ptr_null(handles_lookup(t, name_of(5, 1), HANDLE_REFUSED));
	ck_assert_uint_eq(handles_count(t), 1);
	/* Held when the table goes: freed with it. */
	ck_assert_int_eq(handles_refuse(t, name_of(6, 1), 100, "fourth"), 0);
	table_free(t);
}
END_TEST

/* The named array grows to the index asked for (doubling), never past the limit. */
START_TEST(test_named_array_grows_only_as_far_as_asked_and_the_limit)
{
	struct handle_table *t = table_new();

	ck_assert_int_eq(handles_claim(t, HANDLE_BUFFER, &objs[0], name_of(5, 1), 1000), 0);
	ck_assert_uint_le(t->nnamed, 16);
	ck_assert_uint_ge(t->nnamed, 5);
	ck_assert_int_eq(handles_claim(t, HANDLE_BUFFER, &objs[1], name_of(40, 1), 1000), 0);
	ck_assert_uint_le(t->nnamed, 80);
	ck_assert_int_eq(handles_claim(t, HANDLE_BUFFER, &objs[2], name_of(999, 1), 1000), 0);
	ck_assert_uint_eq(t->nnamed, 1000);
	ck_assert_ptr_eq(handles_lookup(t, name_of(5, 1), HANDLE_BUFFER), &objs[0]);
	ck_assert_ptr_eq(handles_lookup(t, name_of(40, 1), HANDLE_BUFFER), &objs[1]);
	ck_assert_ptr_eq(handles_lookup(t, name_of(999, 1), HANDLE_BUFFER), &objs[2]);
	ck_assert_ptr_null(handles_lookup(t, name_of(1000, 1), HANDLE_BUFFER));
	table_free(t);
}
END_TEST

/* Bit 31 is the clients': the daemon gives out no index that would set it. */
START_TEST(test_daemon_picked_handles_stay_below_bit_31)
{
	struct handle_table *t = table_new();
	uint64_t h = 0;

	t->nslots = 0x7fffffffu; /* as if that many were given out (no array behind it) */
	ck_assert_int_eq(handles_new(t, HANDLE_BUFFER, &objs[0], &h), -ENOMEM);
	ck_assert_uint_eq(h, 0);
	t->nslots = 0;
	table_free(t);
}
END_TEST

static unsigned released[2];

static bool release_counting(struct session *s, void *obj, unsigned pass)
{
	(void)s;
	(void)obj;
	released[pass]++;
	return true;
}

/* A session's end releases what either array holds and drops its refused names; the
 * walks over a kind see both arrays. */
static void count_one(void *obj, void *arg)
{
	(void)obj;
	(*(unsigned *)arg)++;
}

START_TEST(test_release_and_walks_cover_named_handles)
{
	struct handle_table *t = table_new();
	unsigned seen = 0;

	handles_on_release(HANDLE_MODULE, release_counting);
	add(t, HANDLE_MODULE, &objs[0]);
	ck_assert_int_eq(handles_claim(t, HANDLE_MODULE, &objs[1], name_of(3, 1), 100), 0);
	ck_assert_int_eq(handles_claim(t, HANDLE_MODULE, &objs[2], name_of(9, 2), 100), 0);
	ck_assert_int_eq(handles_refuse(t, name_of(4, 1), 100, "refused"), 0);
	handles_foreach(t, HANDLE_MODULE, count_one, &seen);
	ck_assert_uint_eq(seen, 3);
	handles_release_all(t, NULL);
	handles_on_release(HANDLE_MODULE, NULL);
	ck_assert_uint_eq(released[0], 3);
	ck_assert_uint_eq(handles_count(t), 0);
	ck_assert_ptr_null(handles_lookup(t, name_of(3, 1), HANDLE_MODULE));
	ck_assert_ptr_null(handles_lookup(t, name_of(4, 1), HANDLE_REFUSED));
	table_free(t);
}
END_TEST

/* A table carried across a restart in place (session-handover.c) comes back as it was:
 * the same handles name the same objects, and its freed slots are given out again before
 * it grows, each under a generation no handle of the old table had. */
START_TEST(test_adopted_table_keeps_its_handles_and_generations)
{
	struct handle_table *old = table_new(), *now = table_new();
	const struct handle_slot *slots, *named;
	uint64_t h[6], reused[3];
	uint32_t n, nnamed;

	for (int i = 0; i < 6; i++)
		h[i] = add(old, HANDLE_BUFFER, &objs[i]);
	handles_drop(old, h[1]);
	handles_drop(old, h[4]);
	handles_drop(old, h[2]);
	ck_assert_int_eq(handles_claim(old, HANDLE_LOST, NULL, name_of(3, 7), 100), 0);
	slots = handles_picked(old, &n);
	ck_assert_uint_eq(n, 6);
	ck_assert_int_eq(handles_adopt(now, n), 0);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_uint_eq(
			handles_adopt_slot(now, i, slots[i].kind, slots[i].gen, slots[i].obj),
			((uint64_t)slots[i].gen << 32) | (i + 1));
	named = handles_named(old, &nnamed);
	for (uint32_t i = 0; i < nnamed; i++)
		if (named[i].kind == HANDLE_LOST)
			ck_assert_int_eq(handles_claim(now, HANDLE_LOST, NULL,
						 handles_name(i, named[i].gen), 100),
				0);
	ck_assert_uint_eq(handles_count(now), 4);
	for (int i = 0; i < 6; i++)
		ck_assert_ptr_eq(handles_lookup(now, h[i], HANDLE_BUFFER),
			i == 1 || i == 2 || i == 4 ? NULL : &objs[i]);
	ck_assert(handles_lost(now, name_of(3, 7)));
	/* The three freed slots first, each a number never given out before; then a new one. */
	for (int i = 0; i < 3; i++) {
		uint32_t slot;

		reused[i] = add(now, HANDLE_STAGING, &objs[10 + i]);
		slot = (uint32_t)reused[i];
		ck_assert(slot == 2 || slot == 3 || slot == 5);
		ck_assert_uint_ne(reused[i], h[slot - 1]);
		for (int j = 0; j < i; j++)
			ck_assert_uint_ne(reused[i], reused[j]);
	}
	ck_assert_uint_eq((uint32_t)add(now, HANDLE_STAGING, &objs[20]), 7);
	table_free(old);
	table_free(now);
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
	tcase_add_test(tc, test_named_handle_finds_its_object_beside_daemon_picked_ones);
	tcase_add_test(tc, test_names_of_another_form_or_in_use_are_refused);
	tcase_add_test(tc, test_refused_name_keeps_its_message_until_named_again_or_dropped);
	tcase_add_test(tc, test_named_array_grows_only_as_far_as_asked_and_the_limit);
	tcase_add_test(tc, test_daemon_picked_handles_stay_below_bit_31);
	tcase_add_test(tc, test_release_and_walks_cover_named_handles);
	tcase_add_test(tc, test_adopted_table_keeps_its_handles_and_generations);
	suite_add_tcase(suite, tc);
	sr = srunner_create(suite);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
