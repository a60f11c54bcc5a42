/* The completion queue between the backend's threads and the loop: a locked array that
 * the loop swaps for a spare one, so a drain holds the lock for three assignments. */
#include "cq.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void cq_init(struct cq *q)
{
	*q = (struct cq){0};
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->taken, NULL);
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
	pthread_cond_destroy(&q->taken);
	pthread_mutex_destroy(&q->lock);
}

int cq_reserve(struct cq *q, size_t n)
{
	struct completion_ent *e;
	int r = 0;

	/* Only the loop touches the spare. */
	if (q->spare_cap < n) {
		if ((e = realloc(q->spare, n * sizeof(*e)))) {
			q->spare = e;
			q->spare_cap = n;
		} else {
			r = -ENOMEM;
		}
	}
	pthread_mutex_lock(&q->lock);
	if (q->cap < n) {
		if ((e = realloc(q->ents, n * sizeof(*e)))) {
			q->ents = e;
			q->cap = n;
		} else {
			r = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&q->lock);
	return r;
}

size_t cq_room(unsigned nstreams, unsigned window)
{
	const size_t most = 1u << 18; /* 6 MiB an array */
	size_t n = (size_t)nstreams * ((size_t)window + 1);

	return n < most ? n : most;
}

/* Under the lock: room for one more entry, or false. */
static bool cq_grow(struct cq *q)
{
	size_t cap = q->cap ? q->cap * 2 : 256;
	struct completion_ent *n;

	if (q->len < q->cap)
		return true;
	if (!(n = realloc(q->ents, cap * sizeof(*n))))
		return false;
	q->ents = n;
	q->cap = cap;
	return true;
}

/* Under the lock, for a push that found no room and no memory: wake the loop and wait a
 * moment for it to take the queue (its spare may have room), or for memory to come back. */
static void cq_starve(struct cq *q)
{
	const uint64_t takes = q->takes;
	bool say = !q->starved_logged;
	struct timespec until;

	q->starved_logged = true;
	pthread_mutex_unlock(&q->lock);
	if (say)
		fprintf(stderr,
			"<4>cq: out of memory queueing a completion; waiting for the "
			"loop to take the queue\n");
	if (q->wake)
		q->wake(q->wake_arg);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += 10 * 1000 * 1000;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&q->lock);
	while (q->takes == takes &&
		pthread_cond_timedwait(&q->taken, &q->lock, &until) != ETIMEDOUT)
		;
}

bool cq_push(struct cq *q, struct seq_point p, int status)
{
	bool first;

	pthread_mutex_lock(&q->lock);
	while (!cq_grow(q))
		cq_starve(q);
	q->ents[q->len++] = (struct completion_ent){p, status};
	first = q->len == 1;
	pthread_mutex_unlock(&q->lock);
	if (first && q->wake)
		q->wake(q->wake_arg);
	return first;
}

void cq_kick(struct cq *q)
{
	if (q->wake)
		q->wake(q->wake_arg);
}

struct cq_batch cq_take(struct cq *q)
{
	struct cq_batch b;

	pthread_mutex_lock(&q->lock);
	b = (struct cq_batch){q->ents, q->len, q->cap};
	q->ents = q->spare;
	q->cap = q->spare_cap;
	q->len = 0;
	q->takes++;
	pthread_cond_broadcast(&q->taken);
	pthread_mutex_unlock(&q->lock);
	q->spare = NULL;
	q->spare_cap = 0;
	return b;
}

void cq_done(struct cq *q, struct cq_batch b)
{
	/* Only the loop touches the spare. */
	free(q->spare);
	q->spare = b.ents;
	q->spare_cap = b.cap;
}
