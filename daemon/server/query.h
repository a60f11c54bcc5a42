/* Inspection: the answer to a Query (sseqctl's status, clients, buffers, streams, stats,
 * trace and metrics), built from the server's state and read through accessors. */
#ifndef SSEQ_QUERY_H
#define SSEQ_QUERY_H

#include <stdbool.h>

#include "sseq.pb-c.h"

struct arena;
struct server;
struct session;

/* Fill result for q's kind as `asker` may see it; allocations come from `a`. With
 * several loops (--loops) the answer covers every loop: the others are parked meanwhile
 * (loops_stop_world), except for a trace follower's own loop's entries (trace.c). */
void query_answer(struct server *srv, const struct session *asker, const Sseq__Query *q,
	Sseq__QueryResult *result, struct arena *a);
/* TIMELINE (query-timeline.c): one page of completed operations. */
void query_timeline(struct server *srv, const struct session *asker, const Sseq__Query *q,
	Sseq__QueryResult *result, struct arena *a);

/* MODULES (query-modules.c): loaded modules with their functions' names and attributes. */
void query_modules(struct server *srv, const struct session *asker, const Sseq__Query *q,
	Sseq__QueryResult *result, struct arena *a);

/* TRACE (query-trace.c): the core's recent decisions, every loop's merged by time. */
void query_trace(struct server *srv, const struct session *asker, const Sseq__Query *q,
	Sseq__QueryResult *result, struct arena *a);

#endif
