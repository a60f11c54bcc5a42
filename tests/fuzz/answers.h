/* What the protocol promises a client (proto/sseq.proto), kept as a ledger by fuzz-session:
 * one answer per request, in order (a Reply, or a QueryResult for a Query), and a
 * Completion for every accepted operation or watch that is owed one. */
#ifndef SSEQ_FUZZ_ANSWERS_H
#define SSEQ_FUZZ_ANSWERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sseq.pb-c.h"

struct answer_due;
struct answer_tag;

struct answers {
	struct answer_due *due; /* in the order the daemon must answer */
	size_t ndue, capdue, next;
	struct answer_tag *tags; /* Completions owed and seen, by tag */
	size_t ntags, captags;
	bool unchecked; /* the promises no longer apply (see answers_give_up) */
	char broken[160]; /* the first promise broken, "" if none */
};

void answers_init(struct answers *a);
void answers_finish(struct answers *a);
/* The client sent rq (a Batch stands for its requests and then itself). */
void answers_expect(struct answers *a, const Sseq__Request *rq);
/* The daemon sent m. */
void answers_receive(struct answers *a, const Sseq__Message *m);
/* Something the ledger cannot follow happened (a frame that does not decode, a trace
 * follower's unsolicited results, a closed connection): nothing is checked. */
void answers_give_up(struct answers *a);
/* With the daemon idle and the client still connected: abort unless every request was
 * answered in order and every Completion owed arrived, once, and no other. */
void answers_check(const struct answers *a);

#endif
