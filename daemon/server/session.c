/* A client session's lifetime: created at accept, named and given lanes by Hello, what
 * inspection may read of it (session_info, session_foreach), and the release of everything
 * it owned when the connection goes (each handle by its kind's release, handles.c). */
#include "session.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buffer.h"
#include "handles.h"
#include "log.h"
#include "out.h"
#include "outcome.h"
#include "sseq-utf8.h"

void session_info(const struct session *s, struct session_info *info)
{
	*info = (struct session_info){
		.id = s->id,
		.pid = s->pid,
		.uid = s->uid,
		.name = s->name,
		.worker = s->worker,
		.buffers = s->buffers,
		.bytes = s->bytes,
		.inflight = s->inflight,
		.stagings = s->stagings,
		.staging_bytes = s->staging_bytes,
		.handles = s->nhandles,
		.lanes = s->lanes,
		.nlanes = s->nlanes,
	};
}

/* Root and the same user see every session; others only their own. */
bool session_may_see(const struct session_info *asker, const struct session_info *s)
{
	return asker->id == s->id || asker->uid == 0 || asker->uid == s->uid;
}

void session_foreach(struct server *srv, void (*fn)(const struct session *s, void *arg), void *arg)
{
	for (const struct session *s = srv->sessions; s; s = s->next)
		fn(s, arg);
}

void session_foreach_buffer(
	const struct session *s, void (*fn)(const struct session_buffer *b, void *arg), void *arg)
{
	for (uint32_t i = 0; i < s->nslots; i++) {
		const struct sbuf *sb;
		const struct seq_buffer *base;
		struct session_buffer b;

		if (s->slots[i].kind != HANDLE_BUFFER)
			continue;
		sb = s->slots[i].obj;
		base = sb->buf->base;
		b = (struct session_buffer){
			.handle = sb->handle,
			.label = sb->label,
			.buf = sb->buf,
			.base_handle = base && base->user
				? ((const struct sbuf *)(uintptr_t)base->user)->handle
				: 0,
		};
		fn(&b, arg);
	}
}

struct session *session_new(struct server *srv, int fd, uv_poll_cb on_io)
{
	struct session *s = calloc(1, sizeof(*s));
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!s)
		return NULL;
	s->srv = srv;
	s->fd = fd;
	s->id = ++srv->next_session;
	s->refs = 1;
	s->connected = true;
	s->accepted_ns = server_loop_ns(srv);
	arena_init(&s->arena);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		s->pid = (uint32_t)cred.pid;
		s->uid = cred.uid;
	}
	if (uv_poll_init(srv->loop, &s->poll, fd) < 0) {
		free(s);
		return NULL;
	}
	s->poll.data = s;
	s->poll_events = UV_READABLE;
	uv_poll_start(&s->poll, UV_READABLE, on_io);
	s->next = srv->sessions;
	if (srv->sessions)
		srv->sessions->prev = s;
	srv->sessions = s;
	srv->nsessions++;
	srv->sessions_total++;
	return s;
}

void session_unref(struct session *s)
{
	if (--s->refs > 0)
		return;
	arena_finish(&s->arena);
	free(s->out);
	free(s->slots);
	free(s);
}

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

int session_handle_limit(struct session *s)
{
	const unsigned limit = s->srv->opts.limits.client_handles;

	if (s->nhandles < limit)
		return 0;
	s->srv->limit.handles_refused++;
	return outcome_error(s, -ENOSPC,
		"this session holds %u handles (buffers, slices, arenas, modules), the most "
		"allowed (--client-handle-limit): free some",
		limit);
}

void session_end(struct session *s)
{
	struct server *srv = s->srv;

	handles_release_all(s);
	if (s->prev)
		s->prev->next = s->next;
	else
		srv->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
	srv->nsessions--;
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
	utf8_copy(s->name, sizeof(s->name), h->client_name ? h->client_name : "");
	utf8_copy(s->worker, sizeof(s->worker), h->worker_id ? h->worker_id : "");
	outcome_printable(s->name);
	outcome_printable(s->worker);
	log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
		"client %" PRIu64 " connected: %s pid %u uid %u%s%s, lane%s %u%s", s->id,
		s->name[0] ? s->name : "unnamed", s->pid, s->uid, s->worker[0] ? " worker " : "",
		s->worker, s->nlanes > 1 ? "s" : "", s->lanes[0], s->nlanes > 1 ? " ..." : "");
	backend_info(&s->srv->backend, &info);
	d.index = s->srv->opts.device;
	d.name = info.name;
	d.backend = (char *)info.backend;
	d.arch = info.arch;
	d.memory_total = info.memory_total;
	d.memory_used = info.memory_used;
	w.protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	w.protocol_minor = SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR;
	w.session = s->id;
	w.device = &d;
	w.daemon_version = (char *)SSEQ_VERSION;
	w.n_lanes = s->nlanes;
	w.lanes = s->lanes;
	out_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", 0, NULL, &w);
	return 0;
}
