/* A session's own requests and refusals: Hello (its name, worker and lanes, answered with
 * Welcome) and the refusal at --client-handle-limit. Apart from session.c, whose accessors
 * every module calls: these answer the client (out.c, outcome.c), which session.c must not
 * call back. */
#include "session-private.h"

#include <errno.h>
#include <inttypes.h>

#include "log.h"
#include "out.h"
#include "outcome.h"
#include "sseq-utf8.h"

/* Give s n lanes (1 .. SESSION_MAX_LANES): the compute streams the fewest other
 * connected sessions hold, distinct while the pool has enough. */
static void session_lanes_take(struct session *s, unsigned n)
{
	struct server *srv = s->srv;
	const struct seq_layout *layout = seq_layout(srv->seq);
	const unsigned pool = layout->count[SEQ_STREAM_COMPUTE];
	unsigned mine[SEQ_MAX_STREAMS] = {0}, load[SEQ_MAX_STREAMS] = {0};
	bool failed[SEQ_MAX_STREAMS];

	/* A lane whose stream a device fault failed (sticky) fails whatever runs there:
	 * a new session gets one only when every lane has failed. */
	for (unsigned l = 0; l < pool; l++) {
		struct seq_stream_info si;

		seq_stream_info(srv->seq, layout->first[SEQ_STREAM_COMPUTE] + l, &si);
		failed[l] = si.error != 0;
	}
	/* How many other sessions hold each lane (each counted once however often it holds
	 * it); s itself holds none yet. Hello is rare: counting beats keeping a tally. */
	for (const struct session *o = srv->sessions; o; o = o->next) {
		uint64_t held = 0;
		for (unsigned k = 0; k < o->nlanes; k++)
			held |= 1ull << o->lanes[k];
		for (; held; held &= held - 1)
			load[__builtin_ctzll(held)]++;
	}
	/* Each lane: a healthy one, then one this session does not hold yet, then the least
	 * held by others, then the lowest number. Sessions never share buffers, so nothing
	 * orders one session's lanes after another's: spreading them lets them overlap. */
	for (unsigned k = 0; k < n; k++) {
		unsigned best = 0;
		for (unsigned l = 1; l < pool; l++)
			if (failed[l] != failed[best]		? !failed[l]
					: mine[l] != mine[best] ? mine[l] < mine[best]
								: load[l] < load[best])
				best = l;
		mine[best]++;
		s->lanes[k] = best;
	}
	s->nlanes = n;
}

int session_req_hello(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Hello *h = rq->hello;
	struct backend_info info = {0};
	Sseq__Welcome w = SSEQ__WELCOME__INIT;
	Sseq__DeviceInfo d = SSEQ__DEVICE_INFO__INIT;
	int r;

	if (s->hello)
		return outcome_error(s, REQ_PROTOCOL_ERROR, "Hello sent twice");
	if (h->protocol_major != SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR) {
		s->closing = true; /* after this Reply */
		return outcome_error(s, REQ_UNSUPPORTED_VERSION,
			"protocol major %u not supported: this daemon speaks %u.%u",
			h->protocol_major, SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR,
			SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR);
	}
	if ((r = outcome_check_text(s, "Hello.client_name", h->client_name)) ||
		(r = outcome_check_text(s, "Hello.worker_id", h->worker_id)))
		return r;
	if (h->lanes > SESSION_MAX_LANES)
		return outcome_error(s, -EINVAL,
			"Hello asks for %u lanes: at most %u (0 means 1; lanes share the daemon's "
			"%u compute streams)",
			h->lanes, SESSION_MAX_LANES,
			seq_layout(s->srv->seq)->count[SEQ_STREAM_COMPUTE]);
	s->hello = true;
	session_lanes_take(s, h->lanes ? h->lanes : 1);
	utf8_copy(s->ident.name, sizeof(s->ident.name), h->client_name ? h->client_name : "");
	utf8_copy(s->ident.worker, sizeof(s->ident.worker), h->worker_id ? h->worker_id : "");
	outcome_printable(s->ident.name);
	outcome_printable(s->ident.worker);
	log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
		"client %" PRIu64 " connected: %s pid %u uid %u%s%s, lane%s %u%s", s->ident.id,
		s->ident.name[0] ? s->ident.name : "unnamed", s->ident.pid, s->ident.uid,
		s->ident.worker[0] ? " worker " : "", s->ident.worker, s->nlanes > 1 ? "s" : "",
		s->lanes[0], s->nlanes > 1 ? " ..." : "");
	backend_info(&s->srv->backend, &info);
	d.index = s->srv->opts.device;
	d.name = info.name;
	d.backend = (char *)info.backend;
	d.arch = info.arch;
	d.memory_total = info.memory_total;
	d.memory_used = info.memory_used;
	w.protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	w.protocol_minor = SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR;
	w.session = s->ident.id;
	w.device = &d;
	w.daemon_version = (char *)SSEQ_VERSION;
	w.n_lanes = s->nlanes;
	w.lanes = s->lanes;
	out_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", 0, NULL, &w);
	return 0;
}
