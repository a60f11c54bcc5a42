/* Queries from a client, and trace followers: new trace entries sent each turn. */
#ifndef SSEQ_TRACE_H
#define SSEQ_TRACE_H

#include "sseq.pb-c.h"

struct session;

/* Query: answered at once; a trace query with follow keeps s following. */
int trace_req_query(struct session *s, const Sseq__Request *rq);
/* Send trace entries newer than the last sent to a following session. */
void trace_follow(struct session *s);

#endif
