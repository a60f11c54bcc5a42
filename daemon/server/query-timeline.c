/* Inspection: the TIMELINE query (protocol 1.4), the ring of completed operations as
 * sseqctl trace --chrome pages through it, filtered to what the asker may see. */
#include "query.h"

#include <inttypes.h>
#include <string.h>

#include "arena.h"
#include "outcome.h"
#include "server.h"
#include "session.h"

/* Entries per answer: a worst-case entry packs to about 300 bytes, so a full answer
 * stays well inside MAX_FRAME_SIZE. */
#define TIMELINE_PAGE 1024

static uint64_t since_start(const struct server *srv, uint64_t ns)
{
	return ns > srv->started_ns ? ns - srv->started_ns : 0;
}

/* e of loop srv (its streams from base on in the answer), numbered seq, its times from
 * s0's start (loop 0's: one time base for every loop). */
static Sseq__TimelineEntry *timeline_entry(struct server *srv, const struct server *s0,
	unsigned base, uint64_t seq, const struct timeline_ent *e, struct arena *a)
{
	const struct seq_layout *layout = seq_layout(srv->seq);
	Sseq__TimelineEntry *te = arena_alloc(a, sizeof(*te));
	Sseq__Point *at = arena_alloc(a, sizeof(*at));

	sseq__timeline_entry__init(te);
	sseq__point__init(at);
	at->stream = base + e->at.stream;
	at->seq = e->at.seq;
	te->seq = seq;
	te->at = at;
	te->op = (char *)seq_op_kind_name((enum seq_op_kind)e->kind);
	te->stream_kind = (char *)(e->at.stream < layout->nstreams
			? seq_stream_kind_name(layout->kind[e->at.stream])
			: "?");
	te->stream_index = e->at.stream < layout->nstreams ? layout->index[e->at.stream] : 0;
	te->session = e->session;
	te->worker = arena_strdup(a, e->worker);
	te->pid = e->pid;
	te->kernel = arena_strdup(a, e->kernel);
	te->tag = e->tag;
	te->issue_ns = since_start(s0, e->issue_ns);
	te->start_ns = since_start(s0, e->start_ns);
	te->end_ns = since_start(s0, e->end_ns);
	te->complete_ns = since_start(s0, e->complete_ns);
	te->clock_error_ns = e->clock_error_ns;
	te->timing = e->timing == TIMELINE_DEVICE ? SSEQ__TIMELINE_TIMING__TIMELINE_TIMING_DEVICE
						  : SSEQ__TIMELINE_TIMING__TIMELINE_TIMING_OBSERVED;
	te->status = outcome_status(e->status);
	te->waits_dropped = e->deps_dropped;
	te->n_waits = e->ndeps;
	te->waits = arena_alloc(a, (e->ndeps + 1) * sizeof(*te->waits));
	for (unsigned i = 0; i < e->ndeps; i++) {
		Sseq__TimelineWait *w = arena_alloc(a, sizeof(*w));
		Sseq__Point *p = arena_alloc(a, sizeof(*p));

		sseq__timeline_wait__init(w);
		sseq__point__init(p);
		p->stream = base + e->deps[i].producer.stream;
		p->seq = e->deps[i].producer.seq;
		w->producer = p;
		w->how = (char *)timeline_dep_how_name((enum timeline_dep_how)e->deps[i].how);
		te->waits[i] = w;
	}
	return te;
}

/* With several loops (--loops) the pages go through loop 0's ring, then loop 1's, and so
 * on: an entry's seq is (its loop's number for it * loops + loop), which since_seq and
 * timeline_next take, so a cursor names the loop and the entry in it (with one loop,
 * the ring's own numbers). sseqctl trace --chrome orders the entries by time. */
void query_timeline(struct server *srv, const struct session *asker, const Sseq__Query *q,
	Sseq__QueryResult *res, struct arena *a)
{
	const unsigned n = srv->loops->n;
	const struct server *s0 = loops_server(srv->loops, 0) ? loops_server(srv->loops, 0) : srv;
	uint64_t max = q->trace && q->trace->max_entries ? q->trace->max_entries : TIMELINE_PAGE;
	uint64_t since = q->trace ? q->trace->since_seq : 0;
	uint64_t scanned = 0, last_scanned = 0;
	unsigned k0 = (unsigned)(since % n), base = loops_stream_base(srv->loops, k0);
	struct session_info me;

	session_info(asker, &me);
	if (max > TIMELINE_PAGE)
		max = TIMELINE_PAGE;
	res->timeline = arena_alloc(a, (max + 1) * sizeof(*res->timeline));
	for (unsigned k = k0; k < n; k++) {
		struct server *s = loops_server(srv->loops, k);
		const struct timeline *t = s ? &s->timeline : NULL;
		uint64_t first = t ? timeline_first(t) : 1, after = since / n;

		if (!t)
			continue;
		if (k == k0 && since) {
			if (after >= first)
				first = after + 1;
			else
				res->timeline_dropped = first - after - 1;
		}
		/* Scanned, not just returned, entries bound an answer: one that skips others'
		 * entries still ends, and timeline_next says where to go on. */
		for (uint64_t seqno = first; seqno <= t->last; seqno++) {
			const struct timeline_ent *e;

			if (scanned == max) {
				res->timeline_next = last_scanned;
				return;
			}
			scanned++;
			last_scanned = seqno * n + k;
			e = timeline_get(t, seqno);
			/* Root and the same user see every session's entries; others their own. */
			if (!e || (q->session && e->session != q->session) ||
				(me.uid != 0 && e->session != me.id && e->uid != me.uid))
				continue;
			res->timeline[res->n_timeline++] =
				timeline_entry(s, s0, base, seqno * n + k, e, a);
		}
		base += seq_stream_count(s->seq);
	}
}
