/* Completions a backend reports from its own threads, queued for the test's thread to
 * hand to the core: what sseqd does with uv_async_send, done with a mutex and a condition
 * variable. Shared by test-sim and test-hip. */
#ifndef SSEQ_TESTS_COMPLETION_QUEUE_H
#define SSEQ_TESTS_COMPLETION_QUEUE_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

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

#endif
