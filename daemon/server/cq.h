/* The completion queue: backend threads push (stream, seq, status) under a lock; the
 * loop takes everything at once. A push that finds the queue empty asks for a wake-up,
 * so the loop is woken once per batch, not once per completion (h2o's multithread.c). */
#ifndef SSEQ_CQ_H
#define SSEQ_CQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "sequencer.h"

struct completion_ent {
	struct seq_point p;
	int status;
};

/* A batch taken by the loop; handed back with cq_done so its memory is reused. */
struct cq_batch {
	struct completion_ent *ents;
	size_t n, cap;
};

struct cq {
	pthread_mutex_t lock;
	struct completion_ent *ents, *spare;
	size_t len, cap, spare_cap;
};

void cq_init(struct cq *q);
void cq_finish(struct cq *q);
/* From any thread. True when the queue was empty: the caller wakes the loop. Never drops
 * a completion (that would stall its stream forever): out of memory aborts. */
bool cq_push(struct cq *q, struct seq_point p, int status);
/* On the loop thread: everything queued so far, in push order per pushing thread. */
struct cq_batch cq_take(struct cq *q);
void cq_done(struct cq *q, struct cq_batch b);

#endif
