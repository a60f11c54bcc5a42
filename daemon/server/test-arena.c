/* The frame arena (arena.c): aligned bump allocation, chunks for what does not fit, one
 * reset that keeps a chunk for the next frame (so a steady pipeline mallocs nothing),
 * and protobuf-c unpacking into it. LSan checks that reset and finish free the rest. */
#include <check.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "sseq.pb-c.h"

START_TEST(test_allocations_are_aligned_and_disjoint)
{
	struct arena a;
	char *prev = NULL;

	arena_init(&a);
	for (size_t n = 1; n < 200; n++) {
		char *p = arena_alloc(&a, n);
		ck_assert_ptr_nonnull(p);
		ck_assert_uint_eq((uintptr_t)p % alignof(max_align_t), 0);
		memset(p, (int)n, n); /* ASan: inside what was handed out */
		if (prev)
			ck_assert_int_eq(prev[0], (char)(n - 1)); /* not overwritten */
		prev = p;
	}
	arena_finish(&a);
}
END_TEST

START_TEST(test_an_allocation_larger_than_a_chunk_fits)
{
	struct arena a;
	char *small, *big;

	arena_init(&a);
	small = arena_alloc(&a, 16);
	big = arena_alloc(&a, 1u << 20);
	ck_assert_ptr_nonnull(big);
	memset(big, 0xab, 1u << 20);
	strcpy(small, "still here");
	ck_assert_str_eq(small, "still here");
	arena_finish(&a);
}
END_TEST

START_TEST(test_reset_keeps_the_newest_chunk_and_reuses_it)
{
	struct arena a;
	char *big, *again;

	arena_init(&a);
	for (int i = 0; i < 100; i++)
		arena_alloc(&a, 1000); /* several chunks */
	big = arena_alloc(&a, 1u << 20); /* a chunk of its own, the newest */
	arena_reset(&a);
	ck_assert_uint_eq(a.used, 0);
	/* The kept chunk is the largest needed lately: the next frame fits in it. */
	again = arena_alloc(&a, 1u << 19);
	ck_assert_ptr_eq(again, big);
	memset(again, 1, 1u << 19);
	arena_reset(&a);
	ck_assert_ptr_eq(arena_alloc(&a, 64), big);
	arena_finish(&a);
	ck_assert_ptr_null(a.head);
}
END_TEST

START_TEST(test_strdup_and_printf_copy_into_the_arena)
{
	struct arena a;
	char text[] = "label";
	char *d, *p;

	arena_init(&a);
	d = arena_strdup(&a, text);
	text[0] = 'X';
	ck_assert_str_eq(d, "label");
	p = arena_printf(&a, "%u:%s", 7u, "x");
	ck_assert_str_eq(p, "7:x");
	p = arena_printf(&a, "%0300d", 1);
	ck_assert_uint_eq(strlen(p), 300);
	arena_finish(&a);
}
END_TEST

START_TEST(test_protobuf_unpacks_into_the_arena)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT, *out;
	Sseq__Alloc al = SSEQ__ALLOC__INIT;
	uint8_t buf[256];
	size_t len;
	struct arena a;

	al.size = 4096;
	al.label = (char *)"a buffer";
	rq.tag = 9;
	rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
	rq.alloc = &al;
	len = sseq__request__pack(&rq, buf);
	arena_init(&a);
	for (int i = 0; i < 3; i++) {
		out = sseq__request__unpack(&a.pb, len, buf);
		ck_assert_ptr_nonnull(out);
		ck_assert_uint_eq(out->tag, 9);
		ck_assert_uint_eq(out->alloc->size, 4096);
		ck_assert_str_eq(out->alloc->label, "a buffer");
		/* Freed by the reset, not one by one (LSan: nothing leaks). */
		sseq__request__free_unpacked(out, &a.pb);
		arena_reset(&a);
	}
	arena_finish(&a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("arena");
	TCase *tc = tcase_create("arena");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_allocations_are_aligned_and_disjoint);
	tcase_add_test(tc, test_an_allocation_larger_than_a_chunk_fits);
	tcase_add_test(tc, test_reset_keeps_the_newest_chunk_and_reuses_it);
	tcase_add_test(tc, test_strdup_and_printf_copy_into_the_arena);
	tcase_add_test(tc, test_protobuf_unpacks_into_the_arena);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
