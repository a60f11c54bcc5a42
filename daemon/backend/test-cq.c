/* The completion queue (cq.c) with two pushing threads and the loop's drain, as the
 * backends' threads and the loop use it: nothing lost or repeated, each thread's order
 * kept, and a wake-up asked for exactly when a push finds the queue empty. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cq.h"

enum { PER_THREAD = 200000 };

/* Linked with -Wl,--wrap=realloc: the test makes the queue's allocations fail. */
void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
static atomic_int realloc_failures; /* fail this many more; -1: fail every one */
static atomic_uint realloc_failed;

void *__wrap_realloc(void *p, size_t n)
{
	int left = atomic_load(&realloc_failures);

	while (left != 0) {
		if (left < 0 || atomic_compare_exchange_weak(&realloc_failures, &left, left - 1)) {
			atomic_fetch_add(&realloc_failed, 1);
			return NULL;
		}
	}
	return __real_realloc(p, n);
}

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

struct pusher {
	struct cq *q;
	unsigned n;
};

static void *push_n(void *arg)
{
	struct pusher *p = arg;

	for (uint64_t seq = 1; seq <= p->n; seq++)
		cq_push(p->q, (struct seq_point){0, seq}, 0);
	return NULL;
}

/* Take until n completions of stream 0 came, in order. */
static void take_in_order(struct cq *q, unsigned n)
{
	uint64_t next = 1;

	while (next <= n) {
		struct cq_batch b = cq_take(q);

		for (size_t i = 0; i < b.n; i++)
			ck_assert_uint_eq(b.ents[i].p.seq, next++);
		cq_done(q, b);
	}
	ck_assert_uint_eq(next, n + 1);
}

static void count_wake(void *arg)
{
	atomic_fetch_add((atomic_uint *)arg, 1);
}

/* Out of memory while a backend thread queues a completion: the daemon must not abort (a
 * client can drive it there), nor drop the completion (its stream would stall): the push
 * waits until it can queue it. */
START_TEST(test_a_push_out_of_memory_waits_and_loses_nothing)
{
	struct cq q;
	struct pusher p = {&q, 1000};
	atomic_uint wakes = 0;
	pthread_t th;

	cq_init(&q);
	cq_set_wake(&q, count_wake, &wakes);
	atomic_store(&realloc_failures, 3);
	ck_assert_int_eq(pthread_create(&th, NULL, push_n, &p), 0);
	take_in_order(&q, p.n);
	pthread_join(th, NULL);
	ck_assert_uint_eq(atomic_load(&realloc_failed), 3);
	ck_assert_uint_ge(atomic_load(&wakes), 1);
	cq_finish(&q);
}
END_TEST

/* With room reserved, no push allocates at all; past it, with no memory ever, a push waits
 * for the loop to take the queue and then uses the array the loop handed back. */
START_TEST(test_reserved_room_needs_no_memory)
{
	struct cq q;
	struct pusher p = {&q, 64};
	struct cq_batch b;
	pthread_t th;

	cq_init(&q);
	ck_assert_int_eq(cq_reserve(&q, 8), 0);
	atomic_store(&realloc_failures, -1);
	for (uint64_t seq = 1; seq <= 8; seq++)
		cq_push(&q, (struct seq_point){1, seq}, 0);
	ck_assert_uint_eq(atomic_load(&realloc_failed), 0);
	b = cq_take(&q);
	ck_assert_uint_eq(b.n, 8);
	cq_done(&q, b);
	ck_assert_int_eq(pthread_create(&th, NULL, push_n, &p), 0);
	take_in_order(&q, p.n);
	pthread_join(th, NULL);
	ck_assert_uint_ge(atomic_load(&realloc_failed), 1);
	atomic_store(&realloc_failures, 0);
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
	tcase_add_test(tc, test_a_push_out_of_memory_waits_and_loses_nothing);
	tcase_add_test(tc, test_reserved_room_needs_no_memory);
	suite_add_tcase(suite, tc);
	sr = srunner_create(suite);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
