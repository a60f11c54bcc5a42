/* The completion queue: created first (main.c) and handed to the backend, whose threads
 * push (stream, seq, status) under a lock, and to the server, whose loop takes everything
 * at once. A push that finds the queue empty calls the wake hook, so the loop is woken
 * once per batch, not once per completion (h2o's multithread.c). */
#ifndef SSEQ_CQ_H
#define SSEQ_CQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
	pthread_cond_t taken; /* a take made room (a push that could not grow waits on it) */
	struct completion_ent *ents, *spare;
	size_t len, cap, spare_cap;
	uint64_t takes;
	bool starved_logged; /* a push found no memory: said once */
	/* Called by a push that found the queue empty, outside the lock (may be NULL). */
	void (*wake)(void *arg);
	void *wake_arg;
};

void cq_init(struct cq *q);
void cq_finish(struct cq *q);
/* On the loop thread, before work is queued: room for n completions in the queue and in
 * the batch the loop holds, so that a push within n outstanding never allocates. 0 or
 * -ENOMEM. */
int cq_reserve(struct cq *q, size_t n);
/* The room to reserve for nstreams streams of `window` incomplete points each: each
 * outstanding completion is one of their recorded events (at most window + 1 a stream),
 * up to a bound past which a push may allocate. */
size_t cq_room(unsigned nstreams, unsigned window);
/* Who is woken (the server's loop, a test's thread); set before the first push. */
void cq_set_wake(struct cq *q, void (*wake)(void *arg), void *arg);
/* From any thread. True when the queue was empty (the wake hook was called). Never drops
 * a completion (that would stall its stream forever) and never fails: a push past the
 * room reserved that cannot grow the queue waits for the loop to take what is queued. */
bool cq_push(struct cq *q, struct seq_point p, int status);
/* From any thread: wake the loop as a push would, with no completion: something else it
 * looks at on each wake changed (a staging arena's pin finished). */
void cq_kick(struct cq *q);
/* On the loop thread: everything queued so far, in push order per pushing thread. */
struct cq_batch cq_take(struct cq *q);
void cq_done(struct cq *q, struct cq_batch b);

#endif
