/* What test-sim and test-hip share to drive a backend through the real core from the
 * test's thread, as sseqd's loop does: the queue of completions the backend's threads
 * report (uv_async_send there, a mutex and a condition variable here), and the ops. */
#ifndef SSEQ_TESTS_BACKEND_HARNESS_H
#define SSEQ_TESTS_BACKEND_HARNESS_H

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "backend.h"
#include "sequencer.h"

struct completion_queue {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct seq_point *points;
	int *status;
	size_t n, cap;
};

static inline void cq_init(struct completion_queue *q)
{
	*q = (struct completion_queue){0};
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cond, NULL);
}

static inline void cq_destroy(struct completion_queue *q)
{
	free(q->points);
	free(q->status);
	pthread_cond_destroy(&q->cond);
	pthread_mutex_destroy(&q->mu);
}

/* From any thread: one completion. */
static inline void cq_push(struct completion_queue *q, struct seq_point p, int status)
{
	pthread_mutex_lock(&q->mu);
	if (q->n == q->cap) {
		size_t cap = q->cap ? 2 * q->cap : 64;

		q->points = realloc(q->points, cap * sizeof(*q->points));
		q->status = realloc(q->status, cap * sizeof(*q->status));
		if (!q->points || !q->status)
			abort();
		q->cap = cap;
	}
	q->points[q->n] = p;
	q->status[q->n] = status;
	q->n++;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->mu);
}

/* Everything queued so far, handed over (the caller frees both arrays); with `block`,
 * first waits up to `timeout_s` seconds for at least one. Returns how many. */
static inline size_t cq_take(struct completion_queue *q, bool block, int timeout_s,
	struct seq_point **points, int **status)
{
	size_t n;

	pthread_mutex_lock(&q->mu);
	if (block && q->n == 0) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += timeout_s;
		while (q->n == 0)
			if (pthread_cond_timedwait(&q->cond, &q->mu, &until) == ETIMEDOUT)
				break;
	}
	*points = q->points;
	*status = q->status;
	n = q->n;
	q->points = NULL;
	q->status = NULL;
	q->n = q->cap = 0;
	pthread_mutex_unlock(&q->mu);
	return n;
}

/* Hand queued completions to `seq` (when there is one); with `block`, wait (bounded) for
 * at least one. Returns how many. */
static inline size_t cq_drain(struct completion_queue *q, struct seq *seq, bool block)
{
	struct seq_point *points;
	int *status;
	size_t n;

	n = cq_take(q, block, 20, &points, &status);
	if (block)
		ck_assert_msg(n > 0, "no completion within 20 s");
	for (size_t i = 0; i < n; i++)
		if (seq)
			seq_complete(seq, points[i], status[i]);
	free(points);
	free(status);
	return n;
}

/* Flush and hand completions to `seq` until its done callbacks, counted in `*dones`,
 * reach `want`. */
static inline void harness_wait_dones(
	struct seq *seq, struct completion_queue *q, const uint64_t *dones, uint64_t want)
{
	while (*dones < want) {
		seq_flush(seq);
		cq_drain(q, seq, true);
	}
}

/* Until buf's producer has completed. */
static inline void harness_await(
	struct seq *seq, struct completion_queue *q, const uint64_t *dones, struct seq_buffer *buf)
{
	uint64_t want = *dones + 1;
	int r = seq_await(seq, buf, 1);

	ck_assert_int_ge(r, 0);
	if (r == 1)
		return;
	harness_wait_dones(seq, q, dones, want);
}

/* An H2D (into buf) or D2H (out of it) copy of len bytes through the core. */
static inline int harness_copy(
	struct seq *seq, enum seq_op_kind kind, struct seq_buffer *buf, void *host, uint64_t len)
{
	struct op_payload p = {.host = host, .length = len};
	struct seq_op op = {
		.kind = kind,
		.naccess = 1,
		.access = {{buf, kind == SEQ_OP_H2D ? SEQ_WRITE : SEQ_READ}},
		.payload = &p,
	};

	return seq_submit(seq, &op, NULL);
}

static inline int harness_d2d(
	struct seq *seq, struct seq_buffer *src, struct seq_buffer *dst, uint64_t len)
{
	struct op_payload p = {.length = len};
	struct seq_op op = {
		.kind = SEQ_OP_D2D,
		.naccess = 2,
		.access = {{src, SEQ_READ}, {dst, SEQ_WRITE}},
		.payload = &p,
	};

	return seq_submit(seq, &op, NULL);
}

#endif
