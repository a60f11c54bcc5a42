/* Queries: answered at once (query.c builds the answer); a trace query with follow
 * (TraceOptions.follow) then gets new entries each turn, bounded for a follower that does
 * not read (dropped and counted, and the next answer says how many). */
#include "trace.h"

#include "out.h"
#include "query.h"
#include "session-limits.h"
#include "session.h"

void trace_follow(struct session *s)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__QueryResult res = SSEQ__QUERY_RESULT__INIT;
	Sseq__Query q = SSEQ__QUERY__INIT;
	Sseq__TraceOptions t = SSEQ__TRACE_OPTIONS__INIT;
	struct server *srv = s->srv;
	uint64_t newest = trace_last(&srv->trace);

	if (!s->connected || !s->following || newest <= s->follow_since)
		return;
	if (s->out_len - s->out_off >= SESSION_FOLLOW_HIGH) {
		/* It does not read: its output stays bounded, and it hears what it missed. */
		s->follow_dropped += newest - s->follow_since;
		srv->limit.trace_entries_dropped += newest - s->follow_since;
		s->follow_since = newest;
		return;
	}
	t.max_entries = 256;
	t.since_seq = s->follow_since;
	q.kind = SSEQ__QUERY_KIND__QUERY_KIND_TRACE;
	q.trace = &t;
	res.tag = s->follow_tag;
	query_answer(srv, s, &q, &res, &s->arena);
	srv->limit.trace_entries_dropped += res.trace_dropped;
	res.trace_dropped += s->follow_dropped;
	s->follow_dropped = 0;
	if (res.n_trace)
		s->follow_since = res.trace[res.n_trace - 1]->seq;
	m.body_case = SSEQ__MESSAGE__BODY_QUERY_RESULT;
	m.query_result = &res;
	out_send(s, &m);
	arena_reset(&s->arena);
}

int trace_req_query(struct session *s, const Sseq__Request *rq)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__QueryResult res = SSEQ__QUERY_RESULT__INIT;

	res.tag = rq->tag;
	query_answer(s->srv, s, rq->query, &res, &s->arena);
	m.body_case = SSEQ__MESSAGE__BODY_QUERY_RESULT;
	m.query_result = &res;
	out_send(s, &m);
	if (rq->query->kind == SSEQ__QUERY_KIND__QUERY_KIND_TRACE && rq->query->trace &&
		rq->query->trace->follow) {
		uint64_t newest = trace_last(&s->srv->trace);

		if (!s->following)
			s->srv->nfollowing++;
		s->following = true;
		s->follow_tag = rq->tag;
		s->follow_since = res.n_trace
			? res.trace[res.n_trace - 1]->seq
			: (rq->query->trace->since_seq > newest ? newest
								: rq->query->trace->since_seq);
		if (s->follow_since < newest && !res.n_trace)
			s->follow_since = newest;
	}
	return 0;
}
