/* What the detectors and the schedule checker find, in the journal with whom it is about:
 * the backend's findings come from its threads and wait on a queue for the loop, which
 * knows whose op each was; the checker's are made on the loop. */
#ifndef SSEQ_FINDING_H
#define SSEQ_FINDING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sequencer.h"

struct server;

/* A finding about an op, from a backend thread, waiting for the loop to name its owner. */
struct finding {
	struct seq_point at;
	uint64_t addr;
	char what[256];
};
#define FINDING_MAX 64

/* The backend's findings about ops (finding_queue_op), named on the loop. */
struct finding_queue {
	pthread_mutex_t lock;
	bool open; /* the loop names them (else they are logged as they come) */
	_Atomic size_t n; /* under lock; read without it to skip an empty queue */
	struct finding ent[FINDING_MAX];
};

/* The lock, before any backend thread may report (it is never destroyed: see
 * finding_close). */
void finding_init(struct finding_queue *q);
/* From open on the loop names the findings queued; after close they are logged as they
 * come, since backend threads may still report until the backend is destroyed. */
void finding_open(struct finding_queue *q);
void finding_close(struct finding_queue *q);
/* The backend's finding hooks (arg: the server for finding_queue_op): log the finding;
 * finding_queue_op has the loop name the op's session, worker, kernel and buffer. */
void finding_log(void *arg, const char *what);
void finding_queue_op(void *arg, struct seq_point at, uint64_t addr, const char *what);
/* On the loop, after taking the completions but before handling them: the queued
 * findings, named while their ops are still in flight. */
void finding_drain(struct server *srv);
/* The schedule checker's finding hook (arg: the server), made inside seq_submit. */
void finding_log_verify(void *arg, const char *what);

#endif
