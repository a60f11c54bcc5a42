/* Inspection: the TRACE query, the ring of the core's recent decisions as the asker may
 * see them: one loop's as it numbers them, or every loop's merged by time (--loops);
 * with since_seq, a follower's next entries (sseqctl trace --follow). */
#include "query.h"

#include <inttypes.h>
#include <stdlib.h>

#include "arena.h"
#include "server.h"
#include "session.h"

static const char *const decision_names[] = {
	[SEQ_TRACE_WAIT] = "wait",
	[SEQ_TRACE_ELIDE_SAME_STREAM] = "elided: same stream",
	[SEQ_TRACE_ELIDE_OBSERVED] = "elided: observed complete",
	[SEQ_TRACE_ELIDE_LEGACY] = "elided: LEGACY WINDOW (injected bug)",
	[SEQ_TRACE_FAIL_DEPENDENCY] = "failed: dependency",
	[SEQ_TRACE_BACKPRESSURE] = "backpressure: window full",
	[SEQ_TRACE_DEFER_FREE] = "free deferred: in use",
	[SEQ_TRACE_RELEASE] = "memory released",
};

static char *query_point_text(struct arena *a, struct seq_point p, unsigned base)
{
	return p.seq ? arena_printf(a, "%u:%" PRIu64, base + p.stream, p.seq)
		     : arena_strdup(a, "-");
}

/* Root and the same user see every session's entries; others their own. */
static bool query_trace_visible(
	const Sseq__Query *q, const struct session_info *me, const struct trace_ent *e)
{
	return !(q->session && e->session != q->session) &&
		!(me->uid != 0 && e->session != me->id && e->uid != me->uid);
}

/* e of a loop whose streams start at base, numbered seq, at time_ns. */
static Sseq__TraceEntry *query_trace_entry(
	struct arena *a, const struct trace_ent *e, unsigned base, uint64_t seq, uint64_t time_ns)
{
	Sseq__TraceEntry *te = arena_alloc(a, sizeof(*te));

	sseq__trace_entry__init(te);
	te->seq = seq;
	te->time_ns = time_ns;
	te->op = arena_strdup(a,
		e->decision == SEQ_TRACE_RELEASE || e->decision == SEQ_TRACE_DEFER_FREE
			? "free"
			: seq_op_kind_name((enum seq_op_kind)e->op));
	te->stream = arena_printf(a, "%u", base + e->at.stream);
	te->point = query_point_text(a, e->at, base);
	te->decision = arena_strdup(
		a, e->decision <= SEQ_TRACE_RELEASE ? decision_names[e->decision] : "?");
	/* Decimal, as handles are everywhere else (sseqctl, libsseq, Python). */
	te->buffer = e->buffer ? arena_printf(a, "%" PRIu64, e->buffer) : arena_strdup(a, "-");
	te->producer = query_point_text(a, e->producer, base);
	te->session = e->session;
	return te;
}

/* The ring of a daemon of one loop, numbered as it numbers them. */
static void query_trace_loop(struct server *srv, const struct session *asker, const Sseq__Query *q,
	Sseq__QueryResult *res, struct arena *a)
{
	struct session_info me;
	uint64_t max = q->trace && q->trace->max_entries ? q->trace->max_entries : 100;
	uint64_t since = q->trace ? q->trace->since_seq : 0;
	uint64_t first, last;

	session_info(asker, &me);
	/* Following (since): none skipped, the overwritten counted; else a snapshot. */
	res->trace_dropped = trace_since(&srv->trace, since, max, &first, &last);
	res->trace =
		arena_alloc(a, ((last >= first ? last - first + 1 : 0) + 1) * sizeof(*res->trace));
	for (uint64_t seqno = first; seqno <= last; seqno++) {
		const struct trace_ent *e = trace_entry(&srv->trace, seqno);

		if (query_trace_visible(q, &me, e))
			res->trace[res->n_trace++] = query_trace_entry(a, e, 0, e->seq, e->time_ns);
	}
}

/* A visible entry of some loop's ring, for the merge by time. */
struct query_trace_pick {
	uint64_t key; /* the answer's seq: its time and loop (query_trace_loops) */
	const struct trace_ent *e;
	unsigned base;
};

static int query_trace_pick_cmp(const void *x, const void *y)
{
	const struct query_trace_pick *a = x, *b = y;

	return a->key < b->key ? -1 : a->key > b->key;
}

/* Every loop's ring, merged by time. An entry's time is rebased on loop 0's start and its
 * seq is (time * loops + loop + 1): unique, and rising with time across loops, since a
 * query reads every ring with the others parked, so an entry pushed later has a later
 * time. A poll with since_seq (sseqctl trace --follow) gets the oldest entries after it;
 * how many a ring overwrote before the poll is not known across loops: each loop that
 * shows none at or before since_seq, while its ring has wrapped, counts one dropped (at
 * least one went by unseen). */
static void query_trace_loops(struct server *srv, const struct session *asker, const Sseq__Query *q,
	Sseq__QueryResult *res, struct arena *a)
{
	struct session_info me;
	uint64_t max = q->trace && q->trace->max_entries ? q->trace->max_entries : 100;
	uint64_t since = q->trace ? q->trace->since_seq : 0;
	unsigned n = srv->loops->n;
	struct server *s0 = loops_server(srv->loops, 0) ? loops_server(srv->loops, 0) : srv;
	struct query_trace_pick *v = arena_alloc(a, (n * TRACE_RING + 1) * sizeof(*v));
	size_t nv = 0, from = 0;

	session_info(asker, &me);
	if (max > TRACE_RING)
		max = TRACE_RING;
	for (unsigned k = 0, base = 0; k < n; k++) {
		struct server *s = loops_server(srv->loops, k);
		uint64_t first, last, seqno;
		bool reached = false;

		if (!s)
			continue;
		trace_since(&s->trace, 0, TRACE_RING, &first, &last);
		/* Newest first, down to since. */
		for (seqno = last; seqno >= first && seqno > 0; seqno--) {
			const struct trace_ent *e = trace_entry(&s->trace, seqno);
			uint64_t at = e->time_ns + s->started_ns;
			uint64_t t = at > s0->started_ns ? at - s0->started_ns : 0;
			uint64_t key = t * n + k + 1;

			if (since && key <= since) {
				reached = true;
				break;
			}
			if (query_trace_visible(q, &me, e))
				v[nv++] = (struct query_trace_pick){key, e, base};
		}
		if (since && !reached && trace_last(&s->trace) > TRACE_RING)
			res->trace_dropped++;
		base += seq_stream_count(s->seq);
	}
	qsort(v, nv, sizeof(*v), query_trace_pick_cmp);
	/* A snapshot: the newest max; a poll: the oldest max after since, so none skipped. */
	if (nv > max) {
		if (!since)
			from = nv - max;
		nv = from + max;
	}
	res->trace = arena_alloc(a, (nv - from + 1) * sizeof(*res->trace));
	for (size_t i = from; i < nv; i++)
		res->trace[res->n_trace++] =
			query_trace_entry(a, v[i].e, v[i].base, v[i].key, (v[i].key - 1) / n);
}

void query_trace(struct server *srv, const struct session *asker, const Sseq__Query *q,
	Sseq__QueryResult *res, struct arena *a)
{
	if (srv->loops->n > 1)
		query_trace_loops(srv, asker, q, res, a);
	else
		query_trace_loop(srv, asker, q, res, a);
}
