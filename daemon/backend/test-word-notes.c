/* Await's words as a stream's report writes them (word-notes.c): each at the report
 * through its point, not before; dropped at a failure; refused once the stream reported
 * through the point; a sleeper on one woken. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "backend-harness.h"
#include "done-word.h"
#include "word-notes.h"

/* A report as the backends make it: the words written, their sleepers woken after. */
static unsigned report(struct word_notes *wn, uint64_t seq, int status)
{
	struct done_wakes wakes = {.n = 0};
	const unsigned written = word_notes_report(wn, seq, status, &wakes);

	done_wakes_flush(&wakes);
	return written;
}

START_TEST(test_a_word_is_written_at_the_report_through_its_point)
{
	struct word_notes wn = {0};
	_Atomic uint64_t w5 = 0, w9 = 0, w7 = 0;

	ck_assert_int_eq(word_notes_add(&wn, 9, &w9, 109, NULL), 0);
	ck_assert_int_eq(word_notes_add(&wn, 5, &w5, 105, NULL), 0);
	ck_assert_int_eq(word_notes_add(&wn, 7, &w7, 107, NULL), 0);
	ck_assert_uint_eq(report(&wn, 4, 0), 0);
	ck_assert_uint_eq(atomic_load(&w5), 0);
	/* The report through 7 covers 5 and 7, not 9. */
	ck_assert_uint_eq(report(&wn, 7, 0), 2);
	ck_assert_uint_eq(atomic_load(&w5), 105);
	ck_assert_uint_eq(atomic_load(&w7), 107);
	ck_assert_uint_eq(atomic_load(&w9), 0);
	ck_assert_uint_eq(wn.n, 1);
	ck_assert_uint_eq(report(&wn, 12, 0), 1);
	ck_assert_uint_eq(atomic_load(&w9), 109);
	ck_assert_uint_eq(wn.n, 0);
	word_notes_finish(&wn);
}
END_TEST

START_TEST(test_a_failed_report_drops_its_words_unwritten)
{
	struct word_notes wn = {0};
	_Atomic uint64_t w3 = 0, w8 = 0;

	ck_assert_int_eq(word_notes_add(&wn, 3, &w3, 103, NULL), 0);
	ck_assert_int_eq(word_notes_add(&wn, 8, &w8, 108, NULL), 0);
	ck_assert_uint_eq(report(&wn, 3, -EIO), 0);
	ck_assert_uint_eq(atomic_load(&w3), 0);
	ck_assert_uint_eq(wn.n, 1);
	/* A word its client no longer watches (the mark) is left for the Completion. */
	atomic_store(&w8, DONE_WORD_UNWATCHED);
	ck_assert_uint_eq(report(&wn, 8, 0), 0);
	ck_assert_uint_eq(atomic_load(&w8), DONE_WORD_UNWATCHED);
	ck_assert_uint_eq(wn.n, 0);
	word_notes_finish(&wn);
}
END_TEST

/* An Await read after its point's report and before the loop handled it (the report in
 * the completion queue): the tag goes in at once. Failed before: -EALREADY, and the
 * client's answer came by a Completion through the loop. */
START_TEST(test_a_point_already_reported_is_written_at_once)
{
	struct word_notes wn = {0};
	_Atomic uint64_t w6 = 0, w2 = DONE_WORD_SLEEPING, w5 = DONE_WORD_UNWATCHED, w7 = 0;

	report(&wn, 6, 0);
	ck_assert_int_eq(word_notes_add(&wn, 6, &w6, 1, NULL), 1);
	ck_assert_uint_eq(atomic_load(&w6), 1);
	ck_assert_int_eq(word_notes_add(&wn, 2, &w2, 2, NULL), 1); /* over the sleeping mark */
	ck_assert_uint_eq(atomic_load(&w2), 2);
	/* A later report through an older point does not move `reported` back. */
	report(&wn, 4, 0);
	ck_assert_int_eq(word_notes_add(&wn, 5, &w5, 5, NULL), 1);
	ck_assert_uint_eq(atomic_load(&w5), DONE_WORD_UNWATCHED); /* not watched: left */
	ck_assert_int_eq(word_notes_add(&wn, 7, &w7, 7, NULL), 0);
	ck_assert_uint_eq(atomic_load(&w7), 0);
	ck_assert_uint_eq(wn.n, 1);
	word_notes_finish(&wn);
	ck_assert_ptr_null(wn.v);
	ck_assert_uint_eq(wn.n, 0);
}
END_TEST

/* After a report with an error the stream's points reported are refused: the Completion
 * carries the status. */
START_TEST(test_a_point_reported_after_a_failure_is_refused)
{
	struct word_notes wn = {0};
	_Atomic uint64_t w = 0;

	report(&wn, 3, 0);
	report(&wn, 6, -EIO);
	ck_assert_int_eq(word_notes_add(&wn, 6, &w, 1, NULL), -EALREADY);
	ck_assert_int_eq(word_notes_add(&wn, 2, &w, 1, NULL), -EALREADY);
	ck_assert_uint_eq(atomic_load(&w), 0);
	ck_assert_int_eq(word_notes_add(&wn, 7, &w, 1, NULL), 0);
	word_notes_finish(&wn);
}
END_TEST

START_TEST(test_many_words_on_one_point_grow_the_list)
{
	enum { N = 100 };
	struct word_notes wn = {0};
	_Atomic uint64_t w[N];

	for (unsigned i = 0; i < N; i++) {
		atomic_init(&w[i], 0);
		ck_assert_int_eq(word_notes_add(&wn, 10 + i % 3, &w[i], 1000 + i, NULL), 0);
	}
	ck_assert_uint_eq(report(&wn, 12, 0), N);
	for (unsigned i = 0; i < N; i++)
		ck_assert_uint_eq(atomic_load(&w[i]), 1000 + i);
	word_notes_finish(&wn);
}
END_TEST

static void *sleep_on(void *arg)
{
	_Atomic uint64_t *w = arg;
	uint64_t zero = 0;

	if (!atomic_compare_exchange_strong(w, &zero, DONE_WORD_SLEEPING))
		return NULL;
	while (atomic_load(w) == DONE_WORD_SLEEPING)
		done_word_sleep(w, 1000000000L);
	return NULL;
}

START_TEST(test_a_client_asleep_on_its_word_is_woken_by_the_report)
{
	struct word_notes wn = {0};
	_Atomic uint64_t w = 0;
	pthread_t t;

	ck_assert_int_eq(word_notes_add(&wn, 1, &w, 42, NULL), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, sleep_on, &w), 0);
	while (atomic_load(&w) != DONE_WORD_SLEEPING)
		nanosleep(&(struct timespec){0, 100000}, NULL);
	ck_assert_uint_eq(report(&wn, 1, 0), 1);
	/* Joined within the test's time only if the report (its flush) woke the sleeper. */
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_uint_eq(atomic_load(&w), 42);
	word_notes_finish(&wn);
}
END_TEST

/* With `wakes`, the report writes the tag but leaves the sleeper asleep until the caller
 * has pushed its report and flushes them: the woken client must not take the reporting
 * thread's core first. */
START_TEST(test_a_sleeper_is_woken_only_when_the_wakes_are_flushed)
{
	struct word_notes wn = {0};
	struct harness_sleep o = {.word = DONE_WORD_SLEEPING};
	struct done_wakes wakes = {.n = 0};
	pthread_t t;

	ck_assert_int_eq(word_notes_add(&wn, 3, &o.word, 77, NULL), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, harness_sleep_once, &o), 0);
	ck_assert_msg(harness_await_asleep(&o.tid), "the sleeper never slept");
	ck_assert_uint_eq(word_notes_report(&wn, 3, 0, &wakes), 1);
	ck_assert_uint_eq(atomic_load(&o.word), 77);
	ck_assert_uint_eq(wakes.n, 1);
	nanosleep(&(struct timespec){0, 100000000}, NULL);
	ck_assert_msg(!atomic_load(&o.woke), "woken before the flush");
	done_wakes_flush(&wakes);
	ck_assert_uint_eq(wakes.n, 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert(atomic_load(&o.woke));
	word_notes_finish(&wn);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("word-notes");
	TCase *tc = tcase_create("notes");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_a_word_is_written_at_the_report_through_its_point);
	tcase_add_test(tc, test_a_failed_report_drops_its_words_unwritten);
	tcase_add_test(tc, test_a_point_already_reported_is_written_at_once);
	tcase_add_test(tc, test_a_point_reported_after_a_failure_is_refused);
	tcase_add_test(tc, test_many_words_on_one_point_grow_the_list);
	tcase_add_test(tc, test_a_client_asleep_on_its_word_is_woken_by_the_report);
	tcase_add_test(tc, test_a_sleeper_is_woken_only_when_the_wakes_are_flushed);
	tcase_set_timeout(tc, 10);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
