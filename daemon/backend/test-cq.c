/* The completion queue (cq.c) with two pushing threads and the loop's drain, as the
 * backends' threads and the loop use it: nothing lost or repeated, each thread's order
 * kept, and a wake-up asked for exactly when a push finds the queue empty. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cq.h"

enum { PER_THREAD = 200000 };

struct producer {
	struct cq *q;
	uint32_t stream;
	atomic_uint *wakes;
};

static void *produce(void *arg)
{
	struct producer *p = arg;

	for (uint64_t seq = 1; seq <= PER_THREAD; seq++)
		if (cq_push(p->q, (struct seq_point){p->stream, seq}, -(int)(seq % 7)))
			atomic_fetch_add(p->wakes, 1);
	return NULL;
}

START_TEST(test_two_threads_lose_nothing_and_keep_their_order)
{
	struct cq q;
	atomic_uint wakes = 0;
	struct producer ps[2] = {{&q, 0, &wakes}, {&q, 1, &wakes}};
	pthread_t th[2];
	uint64_t next[2] = {1, 1}, takes = 0, nonempty = 0;

	cq_init(&q);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, produce, &ps[i]), 0);
	while (next[0] <= PER_THREAD || next[1] <= PER_THREAD) {
		struct cq_batch b = cq_take(&q);

		takes++;
		nonempty += b.n > 0;
		for (size_t i = 0; i < b.n; i++) {
			const struct completion_ent *e = &b.ents[i];
			ck_assert_uint_lt(e->p.stream, 2);
			ck_assert_uint_eq(e->p.seq, next[e->p.stream]);
			ck_assert_int_eq(e->status, -(int)(e->p.seq % 7));
			next[e->p.stream]++;
		}
		cq_done(&q, b);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	/* Everything arrived once; nothing is left over. */
	struct cq_batch rest = cq_take(&q);
	ck_assert_uint_eq(rest.n, 0);
	cq_done(&q, rest);
	/* A wake-up per batch that went from empty to non-empty, not per completion. */
	ck_assert_uint_ge(atomic_load(&wakes), 1);
	ck_assert_uint_le(atomic_load(&wakes), nonempty);
	ck_assert_uint_lt(atomic_load(&wakes), 2 * PER_THREAD);
	cq_finish(&q);
}
END_TEST

START_TEST(test_push_to_empty_queue_asks_for_a_wake_up)
{
	struct cq q;
	struct cq_batch b;

	cq_init(&q);
	ck_assert(cq_push(&q, (struct seq_point){0, 1}, 0));
	ck_assert(!cq_push(&q, (struct seq_point){0, 2}, 0));
	b = cq_take(&q);
	ck_assert_uint_eq(b.n, 2);
	cq_done(&q, b);
	/* Drained: the next push wakes again, and reuses the spare array. */
	ck_assert(cq_push(&q, (struct seq_point){0, 3}, 0));
	b = cq_take(&q);
	ck_assert_uint_eq(b.n, 1);
	ck_assert_uint_eq(b.ents[0].p.seq, 3);
	cq_done(&q, b);
	cq_finish(&q);
}
END_TEST

int main(void)
{
	Suite *suite = suite_create("cq");
	TCase *tc = tcase_create("cq");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_two_threads_lose_nothing_and_keep_their_order);
	tcase_add_test(tc, test_push_to_empty_queue_asks_for_a_wake_up);
	suite_add_tcase(suite, tc);
	sr = srunner_create(suite);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
