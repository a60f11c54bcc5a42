/* The trace ring (the sequencer's decisions, the last TRACE_RING of them, numbered from 1),
 * queries from a client, and trace followers: new trace entries sent each turn. */
#ifndef SSEQ_TRACE_H
#define SSEQ_TRACE_H

#include <stdint.h>

#include "sequencer.h"
#include "sseq.pb-c.h"

#define TRACE_RING 4096

struct session;

struct trace_ent {
	uint64_t seq;
	uint64_t time_ns;
	uint64_t session;
	uint32_t uid; /* the session's, for who may see the entry */
	uint64_t buffer; /* handle, 0 if none or gone */
	struct seq_point at, producer;
	uint8_t decision;
	uint8_t op;
};

/* Only these functions touch its fields. They are inline: a push runs for every decision
 * on the request path, and the readers (query-trace.c) stay off trace.c, which calls query.c. */
struct trace_ring {
	struct trace_ent ent[TRACE_RING];
	uint64_t seq; /* the newest entry's number, 0 before the first */
};

/* Append ent as the newest entry, numbered one past the last (its seq is ignored),
 * overwriting the oldest once the ring is full: returns its number. */
static inline uint64_t trace_push(struct trace_ring *r, const struct trace_ent *ent)
{
	uint64_t seqno = ++r->seq;
	struct trace_ent *e = &r->ent[seqno % TRACE_RING];

	*e = *ent;
	e->seq = seqno;
	return seqno;
}

/* The newest entry's number (0: none yet). */
static inline uint64_t trace_last(const struct trace_ring *r)
{
	return r->seq;
}

/* Which entries a reader gets, [*first, *last] (empty when *last < *first), at most max
 * (1 or more; the ring holds no more than TRACE_RING). With since, the oldest entries
 * after since, so that a follower skips none: returns how many of those the ring has
 * already overwritten (counted, not silently lost). With since 0, a snapshot: the most
 * recent ones, and 0. */
static inline uint64_t trace_since(
	const struct trace_ring *r, uint64_t since, uint64_t max, uint64_t *first, uint64_t *last)
{
	uint64_t dropped = 0;

	if (max > TRACE_RING)
		max = TRACE_RING;
	*first = r->seq > TRACE_RING ? r->seq - TRACE_RING + 1 : 1;
	*last = r->seq;
	if (since) {
		if (since + 1 > *first)
			*first = since + 1;
		else
			dropped = *first - since - 1;
		if (*last >= *first && *last - *first + 1 > max)
			*last = *first + max - 1;
	} else if (r->seq >= max && r->seq - max + 1 > *first) {
		*first = r->seq - max + 1;
	}
	return dropped;
}

/* Entry seqno, one of those trace_since gave. */
static inline const struct trace_ent *trace_entry(const struct trace_ring *r, uint64_t seqno)
{
	return &r->ent[seqno % TRACE_RING];
}

/* Query: answered at once; a trace query with follow keeps s following. */
int trace_req_query(struct session *s, const Sseq__Request *rq);
/* Send trace entries newer than the last sent to a following session. */
void trace_follow(struct session *s);

#endif
