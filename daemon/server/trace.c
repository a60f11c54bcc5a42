/* Queries: answered at once (query.c builds the answer); a trace query with follow
 * (TraceOptions.follow) then gets new entries each turn, bounded for a follower that does
 * not read (dropped and counted, and the next answer says how many). */
#include "trace.h"

#include "out.h"
#include "query.h"
#include "server.h"
#include "session-limits.h"
#include "session.h"

/* Several loops: the merged numbering's cursor for now (query.c numbers an entry
 * (time since loop 0 started) * loops + loop + 1): what comes after it is new. */
static uint64_t trace_merged_now(struct server *srv)
{
	const struct server *s0 = loops_server(srv->loops, 0) ? loops_server(srv->loops, 0) : srv;
	const uint64_t now = server_now_ns();

	return (now > s0->started_ns ? now - s0->started_ns : 0) * srv->loops->n;
}

void trace_follow(struct session *s)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__QueryResult res = SSEQ__QUERY_RESULT__INIT;
	Sseq__Query q = SSEQ__QUERY__INIT;
	Sseq__TraceOptions t = SSEQ__TRACE_OPTIONS__INIT;
	struct server *srv = session_server(s);
	struct session_follow *f = session_follow(s);
	const bool merged = srv->loops->n > 1;
	uint64_t newest = trace_last(&srv->trace);

	if (!session_is_connected(s) || !f->following || (!merged && newest <= f->since))
		return;
	/* Several loops: since is a cursor in every loop's merged numbering (query.c); a
	 * follower that does not read gets nothing now, and the next answer counts what the
	 * rings overwrote meanwhile. */
	if (merged && out_pending(s) >= SESSION_FOLLOW_HIGH)
		return;
	if (out_pending(s) >= SESSION_FOLLOW_HIGH) {
		/* It does not read: its output stays bounded, and it hears what it missed. */
		f->dropped += newest - f->since;
		srv->count[SSEQ_COUNTER_TRACE_ENTRIES_DROPPED] += newest - f->since;
		f->since = newest;
		return;
	}
	t.max_entries = 256;
	t.since_seq = f->since;
	q.kind = SSEQ__QUERY_KIND__QUERY_KIND_TRACE;
	q.trace = &t;
	res.tag = f->tag;
	query_answer(srv, s, &q, &res, session_arena(s));
	if (merged && !res.n_trace && !res.trace_dropped) {
		arena_reset(session_arena(s));
		return;
	}
	srv->count[SSEQ_COUNTER_TRACE_ENTRIES_DROPPED] += res.trace_dropped;
	res.trace_dropped += f->dropped;
	f->dropped = 0;
	if (res.n_trace)
		f->since = res.trace[res.n_trace - 1]->seq;
	m.body_case = SSEQ__MESSAGE__BODY_QUERY_RESULT;
	m.query_result = &res;
	out_send(s, &m);
	arena_reset(session_arena(s));
}

int trace_req_query(struct session *s, const Sseq__Request *rq)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__QueryResult res = SSEQ__QUERY_RESULT__INIT;

	res.tag = rq->tag;
	query_answer(session_server(s), s, rq->query, &res, session_arena(s));
	m.body_case = SSEQ__MESSAGE__BODY_QUERY_RESULT;
	m.query_result = &res;
	out_send(s, &m);
	if (rq->query->kind == SSEQ__QUERY_KIND__QUERY_KIND_TRACE && rq->query->trace &&
		rq->query->trace->follow) {
		uint64_t newest = trace_last(&session_server(s)->trace);
		struct session_follow *f = session_follow(s);

		if (!f->following)
			session_server(s)->nfollowing++;
		f->following = true;
		f->tag = rq->tag;
		f->since = res.n_trace
			? res.trace[res.n_trace - 1]->seq
			: (rq->query->trace->since_seq > newest ? newest
								: rq->query->trace->since_seq);
		if (f->since < newest && !res.n_trace)
			f->since = newest;
		if (session_server(s)->loops->n > 1 && !res.n_trace)
			f->since = rq->query->trace->since_seq
				? rq->query->trace->since_seq
				: trace_merged_now(session_server(s));
	}
	return 0;
}
