/* The completion queue between the backend's threads and the loop: a locked array that
 * the loop swaps for a spare one, so a drain holds the lock for three assignments. */
#include "cq.h"

#include <stdio.h>
#include <stdlib.h>

void cq_init(struct cq *q)
{
	*q = (struct cq){0};
	pthread_mutex_init(&q->lock, NULL);
}

void cq_set_wake(struct cq *q, void (*wake)(void *arg), void *arg)
{
	q->wake = wake;
	q->wake_arg = arg;
}

void cq_finish(struct cq *q)
{
	free(q->ents);
	free(q->spare);
	pthread_mutex_destroy(&q->lock);
}

bool cq_push(struct cq *q, struct seq_point p, int status)
{
	bool first;

	pthread_mutex_lock(&q->lock);
	if (q->len == q->cap) {
		size_t cap = q->cap ? q->cap * 2 : 256;
		struct completion_ent *n = realloc(q->ents, cap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&q->lock);
			fprintf(stderr, "<3>cq: out of memory queueing a completion; aborting\n");
			abort();
		}
		q->ents = n;
		q->cap = cap;
	}
	q->ents[q->len++] = (struct completion_ent){p, status};
	first = q->len == 1;
	pthread_mutex_unlock(&q->lock);
	if (first && q->wake)
		q->wake(q->wake_arg);
	return first;
}

struct cq_batch cq_take(struct cq *q)
{
	struct cq_batch b;

	pthread_mutex_lock(&q->lock);
	b = (struct cq_batch){q->ents, q->len, q->cap};
	q->ents = q->spare;
	q->cap = q->spare_cap;
	q->len = 0;
	pthread_mutex_unlock(&q->lock);
	q->spare = NULL;
	return b;
}

void cq_done(struct cq *q, struct cq_batch b)
{
	/* Only the loop touches the spare. */
	free(q->spare);
	q->spare = b.ents;
	q->spare_cap = b.cap;
}
