/* libsseq's staging: the range allocator inside an arena, the sealed memfd behind it, and
 * copies through arenas the scripted fake daemon maps itself. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "test-client-fake.h"
#include "test-client.h"

static uint8_t arena_mem[4096];

START_TEST(test_staging_reserve_aligned_until_exhausted)
{
	struct staging_arena a;
	staging_arena_init(&a, arena_mem, sizeof(arena_mem));
	uint64_t off, prev = 0;
	for (int i = 0; i < 32; i++) {
		ck_assert_int_eq(staging_arena_reserve(&a, 100, &off), 0);
		ck_assert_uint_eq(off % STAGING_ALIGN, 0);
		if (i > 0)
			ck_assert_uint_ge(off, prev + 100);
		prev = off;
		staging_arena_find(&a, off, 100)->refs = 1;
	}
	/* 32 * 128 = 4096: full. */
	ck_assert_int_eq(staging_arena_reserve(&a, 1, &off), -ENOSPC);
	ck_assert_int_eq(staging_arena_reserve(&a, 8192, &off), -ENOSPC);
	staging_arena_finish(&a);
}
END_TEST

/* Space comes back only when the copies using it completed, and is then reused. */
START_TEST(test_staging_reuses_range_after_last_ref)
{
	struct staging_arena a;
	staging_arena_init(&a, arena_mem, sizeof(arena_mem));
	uint64_t x, y, z;
	ck_assert_int_eq(staging_arena_reserve(&a, 2048, &x), 0);
	struct staging_range *rx = staging_arena_find(&a, x, 2048);
	rx->refs = 2;
	ck_assert_int_eq(staging_arena_reserve(&a, 2048, &y), 0);
	staging_arena_find(&a, y, 2048)->refs = 1;
	ck_assert_int_eq(staging_arena_reserve(&a, 64, &z), -ENOSPC);

	ck_assert(!staging_range_unref(&a, staging_arena_find(&a, x, 0)));
	ck_assert_int_eq(staging_arena_reserve(&a, 64, &z), -ENOSPC);
	ck_assert(staging_range_unref(&a, staging_arena_find(&a, x, 0)));
	ck_assert_uint_eq(a.used, 2048);
	ck_assert_int_eq(staging_arena_reserve(&a, 1024, &z), 0);
	ck_assert_uint_eq(z, x);
	staging_arena_find(&a, z, 0)->refs = 1;
	/* The gap after z fits 1024 more; 1025 does not. */
	ck_assert_int_eq(staging_arena_reserve(&a, 1025, &z), -ENOSPC);
	ck_assert_int_eq(staging_arena_reserve(&a, 1024, &z), 0);
	ck_assert_uint_eq(z, x + 1024);
	staging_arena_finish(&a);
}
END_TEST

/* sseq_host_free while a copy still reads the range must not free it. */
START_TEST(test_staging_user_hold_and_refs_both_count)
{
	struct staging_arena a;
	staging_arena_init(&a, arena_mem, sizeof(arena_mem));
	uint64_t x;
	ck_assert_int_eq(staging_arena_reserve(&a, 4096, &x), 0);
	struct staging_range *r = staging_arena_find(&a, x, 4096);
	r->user = true;
	r->refs = 1;
	ck_assert(!staging_range_unhold(&a, r));
	ck_assert_uint_eq(a.nranges, 1);
	ck_assert(staging_range_unref(&a, staging_arena_find(&a, x, 0)));
	ck_assert_uint_eq(a.nranges, 0);
	ck_assert_uint_eq(a.used, 0);
	staging_arena_finish(&a);
}
END_TEST

START_TEST(test_staging_find_interior_and_bounds)
{
	struct staging_arena a;
	staging_arena_init(&a, arena_mem, sizeof(arena_mem));
	uint64_t x, y;
	staging_arena_reserve(&a, 100, &x);
	staging_arena_reserve(&a, 100, &y);
	ck_assert_ptr_eq(staging_arena_find(&a, x + 10, 90), &a.ranges[0]);
	ck_assert_ptr_null(staging_arena_find(&a, x + 10, 91));
	ck_assert_ptr_eq(staging_arena_find(&a, y + 99, 1), &a.ranges[1]);
	ck_assert_ptr_null(staging_arena_find(&a, x + 100, 1)); /* the alignment gap */
	ck_assert_ptr_null(staging_arena_find(&a, y + 200, 1));
	ck_assert(staging_arena_contains(&a, arena_mem + 4095));
	ck_assert(!staging_arena_contains(&a, arena_mem + 4096));
	staging_arena_finish(&a);
}
END_TEST

START_TEST(test_staging_memfd_is_sealed_against_shrink)
{
	struct staging_arena *a;
	ck_assert_int_eq(staging_arena_create(1 << 20, "test", &a), 0);
	int seals = fcntl(a->fd, F_GET_SEALS);
	ck_assert(seals & F_SEAL_SHRINK);
	ck_assert_int_eq(lseek(a->fd, 0, SEEK_END), 1 << 20);
	ck_assert_int_ne(ftruncate(a->fd, 4096), 0);
	a->base[(1 << 20) - 1] = 7; /* mapped shared and writable */
	staging_arena_destroy(a);
}
END_TEST

/* H2D from plain memory and from sseq_host_alloc memory, and D2H into both, through a
 * memfd the fake daemon maps itself. */
START_TEST(test_client_copies_through_staging)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	uint64_t b;
	ck_assert_int_eq(sseq_alloc(s, 4096, "b", &b), 0);
	float src[1024], dst[1024];
	for (int i = 0; i < 1024; i++)
		src[i] = (float)i;
	uint64_t t1, t2, t3;
	ck_assert_int_eq(sseq_copy_h2d(s, b, 0, src, 2048, &t1), 0);
	memset(src, 0, sizeof(src)); /* staged already: the copy must not see this */
	float *host;
	ck_assert_int_eq(sseq_host_alloc(s, 2048, (void **)&host), 0);
	for (int i = 0; i < 512; i++)
		host[i] = (float)(1000 + i);
	ck_assert_int_eq(sseq_copy_h2d(s, b, 2048, host, 2048, &t2), 0);
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, dst, 4096, &t3), 0);
	ck_assert_int_eq(sseq_wait(s, t1), 0);
	ck_assert_int_eq(sseq_wait(s, t3), 0);
	for (int i = 0; i < 512; i++) {
		ck_assert(dst[i] == (float)i);
		ck_assert(dst[512 + i] == (float)(1000 + i));
	}
	/* D2H in place into host memory. */
	memset(host, 0, 2048);
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, host, 2048, &t3), 0);
	ck_assert_int_eq(sseq_wait(s, t3), 0);
	ck_assert(host[511] == 511.0f);
	ck_assert_int_eq(sseq_host_free(s, host), 0);
	ck_assert_int_eq(sseq_host_free(s, host), -EINVAL);
	ck_assert_int_eq(sseq_wait(s, t2), 0); /* finished long ago */
	ck_assert_int_eq(sseq_wait(s, 999), -EINVAL);
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert_uint_eq(f->registers, 1);
	fake_stop(f, s);
}
END_TEST

/* A staging arena much smaller than the traffic: ranges are reused once their copies
 * complete, so no second arena is needed. */
START_TEST(test_client_staging_reused_not_grown)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 8192);
	uint64_t b;
	ck_assert_int_eq(sseq_alloc(s, 3000 * 50, "b", &b), 0);
	uint8_t chunk[3000];
	for (int i = 0; i < 50; i++) {
		memset(chunk, i, sizeof(chunk));
		ck_assert_int_eq(sseq_copy_h2d(s, b, (uint64_t)i * 3000, chunk, 3000, NULL), 0);
	}
	static uint8_t all[3000 * 50];
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, all, 3000, NULL), 0);
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert_uint_eq(f->registers, 1);
	ck_assert_uint_eq(all[0], 0);
	ck_assert_uint_eq(all[2999], 0);
	/* One request larger than the arena gets an arena of its own. */
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, all, sizeof(all), NULL), 0);
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert_uint_eq(f->registers, 2);
	for (int i = 0; i < 50; i++)
		ck_assert_uint_eq(all[i * 3000 + 1234], i);
	fake_stop(f, s);
}
END_TEST

/* A D2H waited for by its tag is answered in its word (protocol 1.10): the fake writes
 * the tag 5 ms after its Reply, as sseqd's backend does once the bytes are in place,
 * while the wait spins on the word it armed, and then sends no Completion. A wait spins
 * for twice the connection's last answer (the first after alloc's for less than 5 ms, so
 * its Completion answers it): from the second on, the words do. Each returns the bytes. */
START_TEST(test_d2h_answered_in_its_word)
{
	struct fake *f = fake_start();
	f->minor = 10;
	f->word_delay_ms = 5;
	setenv("SSEQ_SPIN_POLICY", "always", 1);
	setenv("SSEQ_SPIN_US", "2000000", 1);
	struct sseq *s = fake_connect(f, 0);
	uint64_t b, t;
	float src[256], dst[256];
	for (int i = 0; i < 256; i++)
		src[i] = (float)i;
	ck_assert_int_eq(sseq_alloc(s, sizeof(src), "b", &b), 0);
	ck_assert_int_eq(sseq_copy_h2d(s, b, 0, src, sizeof(src), NULL), 0);
	ck_assert_int_eq(sseq_sync(s), 0);
	for (unsigned round = 1; round <= 5; round++) {
		memset(dst, 0, sizeof(dst));
		ck_assert_int_eq(sseq_copy_d2h(s, b, 0, dst, sizeof(dst), &t), 0);
		ck_assert_int_eq(sseq_wait(s, t), 0);
		ck_assert(dst[0] == 0.0f && dst[255] == 255.0f);
		ck_assert_uint_eq(f->words_written + f->words_refused, round);
	}
	unsetenv("SSEQ_SPIN_POLICY");
	unsetenv("SSEQ_SPIN_US");
	ck_assert_uint_ge(f->words_written, 3);
	ck_assert_uint_eq(sseq_outstanding(s), 0);
	ck_assert_int_eq(sseq_sync(s), 0);
	fake_stop(f, s);
}
END_TEST

/* A waiter that sleeps marks its word first, so the daemon's swap fails and its
 * Completion wakes the waiter: without the mark this wait would sleep for good. */
START_TEST(test_d2h_sleeping_waiter_is_woken_by_the_completion)
{
	struct fake *f = fake_start();
	f->minor = 10;
	f->word_delay_ms = 100;
	struct sseq *s = fake_connect(f, 0);
	uint64_t b, t;
	float src[64], dst[64] = {0};
	for (int i = 0; i < 64; i++)
		src[i] = (float)(i + 1);
	setenv("SSEQ_SPIN_US", "0", 1); /* no spinning: every wait sleeps */
	ck_assert_int_eq(sseq_alloc(s, sizeof(src), "b", &b), 0);
	ck_assert_int_eq(sseq_copy_h2d(s, b, 0, src, sizeof(src), NULL), 0);
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, dst, sizeof(dst), &t), 0);
	ck_assert_int_eq(sseq_wait(s, t), 0);
	unsetenv("SSEQ_SPIN_US");
	ck_assert(dst[0] == 1.0f && dst[63] == 64.0f);
	ck_assert_uint_ne(f->last_done_word, 0);
	ck_assert_uint_eq(f->words_refused, 1);
	ck_assert_uint_eq(f->words_written, 0);
	fake_stop(f, s);
}
END_TEST

/* With $SSEQ_SLEEP_ON_WORD=1 and a daemon of protocol 1.12, a waiter that sleeps sleeps
 * on its word: the daemon's write of the tag over the sleeping mark wakes it, and no
 * Completion is needed; by default, or from a daemon before 1.12, it sleeps on the socket
 * (the word marked, the swap refused, the Completion). */
START_TEST(test_d2h_sleeping_waiter_sleeps_on_its_word)
{
	setenv("SSEQ_SPIN_US", "0", 1); /* no spinning: every wait sleeps */
	for (int round = 0; round < 3; round++) {
		struct fake *f = fake_start();
		f->minor = round == 2 ? 11 : 12;
		f->word_delay_ms = 50;
		if (round != 1)
			setenv("SSEQ_SLEEP_ON_WORD", "1", 1);
		struct sseq *s = fake_connect(f, 0);
		uint64_t b, t;
		float src[64], dst[64] = {0};
		for (int i = 0; i < 64; i++)
			src[i] = (float)(i + round);
		ck_assert_int_eq(sseq_alloc(s, sizeof(src), "b", &b), 0);
		ck_assert_int_eq(sseq_copy_h2d(s, b, 0, src, sizeof(src), NULL), 0);
		ck_assert_int_eq(sseq_copy_d2h(s, b, 0, dst, sizeof(dst), &t), 0);
		ck_assert_int_eq(sseq_wait(s, t), 0);
		unsetenv("SSEQ_SLEEP_ON_WORD");
		ck_assert(dst[0] == (float)round && dst[63] == (float)(63 + round));
		ck_assert_uint_ne(f->last_done_word, 0);
		if (round == 0) {
			ck_assert_uint_eq(f->words_written, 1);
			ck_assert_uint_eq(f->words_woken, 1);
			ck_assert_uint_eq(f->words_refused, 0);
		} else {
			ck_assert_uint_eq(f->words_written, 0);
			ck_assert_uint_eq(f->words_refused, 1);
		}
		ck_assert_uint_eq(sseq_outstanding(s), 0);
		fake_stop(f, s);
	}
	unsetenv("SSEQ_SPIN_US");
}
END_TEST

/* A copy that completes before its wait arms the word is answered by its Completion, and
 * the daemon refuses the word first (protocol 1.12): the wait, which arms the word only
 * then, finds the refusal and sleeps on its socket, where the Completion is, rather than
 * on a word nobody will write or wake (it would sleep out its 5 ms nap each time). The
 * fake answers each copy while the client pauses before its wait. */
START_TEST(test_d2h_wait_armed_after_its_completion_does_not_sleep_on_the_word)
{
	struct fake *f = fake_start();
	f->minor = 12;
	setenv("SSEQ_SLEEP_ON_WORD", "1", 1);
	struct sseq *s = fake_connect(f, 0);
	unsetenv("SSEQ_SLEEP_ON_WORD");
	enum { ROUNDS = 20 };
	uint64_t b, t;
	float src[16], dst[16];
	for (int i = 0; i < 16; i++)
		src[i] = (float)(2 * i);
	setenv("SSEQ_SPIN_US", "0", 1); /* no spinning: every wait sleeps */
	ck_assert_int_eq(sseq_alloc(s, sizeof(src), "b", &b), 0);
	ck_assert_int_eq(sseq_copy_h2d(s, b, 0, src, sizeof(src), NULL), 0);
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert(s->word_sleeps);
	for (int round = 0; round < ROUNDS; round++) {
		memset(dst, 0, sizeof(dst));
		ck_assert_int_eq(sseq_copy_d2h(s, b, 0, dst, sizeof(dst), &t), 0);
		ck_assert_int_eq(sseq_flush(s), 0);
		usleep(20000); /* the fake answers meanwhile: the word refused, the Completion */
		ck_assert_int_eq(sseq_wait(s, t), 0);
		ck_assert(dst[1] == 2.0f && dst[15] == 30.0f);
	}
	unsetenv("SSEQ_SPIN_US");
	ck_assert_uint_eq(f->words_written + f->words_refused, ROUNDS);
	ck_assert_uint_gt(f->words_refused, 0);
	ck_assert_msg(s->word_naps_unwoken == 0, "%llu of %llu sleeps on the word ran out unwoken",
		(unsigned long long)s->word_naps_unwoken, (unsigned long long)s->word_naps);
	fake_stop(f, s);
}
END_TEST

/* An Await (protocol 1.13) carries a word of the session's first arena, answered as a
 * D2H's is: the fake writes the tag 5 ms after its Reply while the wait spins on the
 * word, and sends no Completion (from the second wait on: the first spins too briefly);
 * asleep with $SSEQ_SLEEP_ON_WORD=1, the write wakes it. A daemon before 1.13, a session
 * with no arena yet, or one with $SSEQ_DONE_WORDS=0 (round 3) is sent no word, and the
 * Completion answers. Each Await's
 * word goes back to the arena: five hundred of them leave nothing reserved. */
START_TEST(test_await_answered_in_its_word)
{
	for (int round = 0; round < 4; round++) {
		struct fake *f = fake_start();
		f->minor = round == 2 ? 12 : 13;
		f->word_delay_ms = 5;
		setenv("SSEQ_SPIN_POLICY", "always", 1);
		setenv("SSEQ_SPIN_US", "2000000", 1);
		setenv("SSEQ_SLEEP_ON_WORD", "1", 1);
		if (round == 3)
			setenv("SSEQ_DONE_WORDS", "0", 1);
		struct sseq *s = fake_connect(f, 0);
		unsetenv("SSEQ_SLEEP_ON_WORD");
		unsetenv("SSEQ_DONE_WORDS");
		uint64_t b;
		float src[64];
		for (int i = 0; i < 64; i++)
			src[i] = (float)i;
		ck_assert_int_eq(sseq_alloc(s, sizeof(src), "b", &b), 0);
		if (round == 0) {
			/* No arena yet: no word. */
			ck_assert_int_eq(sseq_await(s, b), 0);
			ck_assert_uint_eq(f->last_await_word, 0);
		}
		ck_assert_int_eq(sseq_copy_h2d(s, b, 0, src, sizeof(src), NULL), 0);
		ck_assert_int_eq(sseq_sync(s), 0);
		for (unsigned i = 1; i <= 5; i++) {
			ck_assert_int_eq(sseq_await(s, b), 0);
			ck_assert_uint_eq(f->words_written + f->words_refused, round >= 2 ? 0 : i);
		}
		if (round >= 2) {
			float dst[64];
			ck_assert_int_eq(sseq_copy_d2h(s, b, 0, dst, sizeof(dst), NULL), 0);
			ck_assert_int_eq(sseq_sync(s), 0);
			/* 1.12 takes a D2H's word; $SSEQ_DONE_WORDS=0 names none. */
			ck_assert_uint_eq(f->last_done_word != 0, round == 2);
			ck_assert_uint_eq(f->last_await_word, 0);
		} else {
			ck_assert_uint_ne(f->last_await_word, 0);
			ck_assert_uint_ge(f->words_written, 3);
		}
		unsetenv("SSEQ_SPIN_POLICY");
		/* Asleep on the word (no spinning): woken by the write. */
		setenv("SSEQ_SPIN_US", "0", 1);
		if (round == 1) {
			unsigned woken = f->words_woken;
			f->word_delay_ms = 50;
			ck_assert_int_eq(sseq_await(s, b), 0);
			ck_assert_uint_eq(f->words_woken, woken + 1);
		}
		f->word_delay_ms = 0;
		for (int i = 0; i < 500; i++)
			ck_assert_int_eq(sseq_await(s, b), 0);
		unsetenv("SSEQ_SPIN_US");
		ck_assert_uint_eq(s->staging.refs, 0);
		ck_assert_uint_eq(sseq_outstanding(s), 0);
		ck_assert_int_eq(sseq_sync(s), 0);
		fake_stop(f, s);
	}
}
END_TEST

/* A D2H nobody waits for by its tag keeps its word marked: the fake's swap fails and the
 * Completion finishes the copy, so sseq_sync returns with the bytes copied out. */
START_TEST(test_d2h_waited_by_sync_gets_its_completion)
{
	struct fake *f = fake_start();
	f->minor = 10;
	struct sseq *s = fake_connect(f, 0);
	uint64_t b;
	float src[32], dst[32] = {0};
	for (int i = 0; i < 32; i++)
		src[i] = (float)(3 * i);
	ck_assert_int_eq(sseq_alloc(s, sizeof(src), "b", &b), 0);
	ck_assert_int_eq(sseq_copy_h2d(s, b, 0, src, sizeof(src), NULL), 0);
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, dst, sizeof(dst), NULL), 0);
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert(dst[1] == 3.0f && dst[31] == 93.0f);
	ck_assert_uint_eq(sseq_outstanding(s), 0);
	ck_assert_uint_ne(f->last_done_word, 0);
	ck_assert_uint_eq(f->words_refused, 1);
	ck_assert_uint_eq(f->words_written, 0);
	fake_stop(f, s);
}
END_TEST

/* A daemon older than protocol 1.10 is never asked to write a word. */
START_TEST(test_d2h_names_no_word_to_an_older_daemon)
{
	struct fake *f = fake_start();
	f->minor = 9;
	struct sseq *s = fake_connect(f, 0);
	uint64_t b;
	float v[16] = {0};
	ck_assert_int_eq(sseq_alloc(s, sizeof(v), "b", &b), 0);
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, v, sizeof(v), NULL), 0);
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert_uint_eq(f->last_done_word, 0);
	ck_assert_uint_eq(f->words_written + f->words_refused, 0);
	fake_stop(f, s);
}
END_TEST

static Suite *staging_suite(void)
{
	Suite *s = suite_create("client-staging");
	TCase *tc = tcase_create("staging");

	tcase_add_test(tc, test_staging_reserve_aligned_until_exhausted);
	tcase_add_test(tc, test_staging_reuses_range_after_last_ref);
	tcase_add_test(tc, test_staging_user_hold_and_refs_both_count);
	tcase_add_test(tc, test_staging_find_interior_and_bounds);
	tcase_add_test(tc, test_staging_memfd_is_sealed_against_shrink);
	tcase_add_test(tc, test_client_copies_through_staging);
	tcase_add_test(tc, test_client_staging_reused_not_grown);
	tcase_add_test(tc, test_d2h_answered_in_its_word);
	tcase_add_test(tc, test_await_answered_in_its_word);
	tcase_add_test(tc, test_d2h_sleeping_waiter_is_woken_by_the_completion);
	tcase_add_test(tc, test_d2h_sleeping_waiter_sleeps_on_its_word);
	tcase_add_test(tc, test_d2h_wait_armed_after_its_completion_does_not_sleep_on_the_word);
	tcase_add_test(tc, test_d2h_waited_by_sync_gets_its_completion);
	tcase_add_test(tc, test_d2h_names_no_word_to_an_older_daemon);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return client_test_run(staging_suite());
}
