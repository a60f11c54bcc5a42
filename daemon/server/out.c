/* A session's output: replies and completions packed into its output buffer, coalesced and
 * written once per loop turn (conn.c decides when to write and what to poll for). */
#include "out.h"

#include "sseq-frame.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "server.h"
#include "session.h"
#include "wire.h"

void out_mark_dirty(struct session *s)
{
	struct session_out *o = session_out(s);
	struct server *srv;

	if (o->dirty)
		return;
	srv = session_server(s);
	o->dirty = true;
	o->next_dirty = srv->dirty;
	srv->dirty = s;
}

/* Room for n more bytes of output, or NULL (the session is then closing). */
static uint8_t *out_reserve(struct session *s, size_t n)
{
	struct session_out *o = session_out(s);
	size_t need = o->len + n;

	if (need > o->cap) {
		size_t cap = o->cap ? o->cap : 4096;
		uint8_t *b;
		/* Reclaim what was written before growing. */
		if (o->off) {
			memmove(o->buf, o->buf + o->off, o->len - o->off);
			o->len -= o->off;
			o->off = 0;
			need = o->len + n;
		}
		while (cap < need)
			cap *= 2;
		if (cap > o->cap) {
			b = realloc(o->buf, cap);
			if (!b) {
				log_about(LOG_LVL_ERR, "session", SESSION_WHO(s),
					"client %" PRIu64 ": out of memory for replies",
					session_id(s));
				session_close_after_output(s);
				return NULL;
			}
			o->buf = b;
			o->cap = cap;
		}
	}
	out_mark_dirty(s);
	return o->buf + o->len;
}

void out_send(struct session *s, const Sseq__Message *m)
{
	struct session_out *o = session_out(s);
	size_t len;
	uint8_t *p;

	if (!session_is_connected(s))
		return;
	len = sseq__message__get_packed_size(m);
	if (!(p = out_reserve(s, 4 + len)))
		return;
	frame_put_len(p, (uint32_t)len);
	sseq__message__pack(m, p + 4);
	o->len += 4 + len;
}

void out_reply_full(struct session *s, uint64_t tag, Sseq__Status status, const char *message,
	uint64_t handle, const struct seq_point *at, Sseq__Welcome *welcome)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__Reply r = SSEQ__REPLY__INIT;
	Sseq__Point p = SSEQ__POINT__INIT;

	if (!welcome) {
		/* The common reply, encoded by hand: see wire.c for why. */
		struct session_out *o = session_out(s);
		uint8_t *b;
		if (!session_is_connected(s) ||
			!(b = out_reserve(s, WIRE_REPLY_MAX + (message ? strlen(message) : 0))))
			return;
		o->len += wire_encode_reply(b, tag, (int)status, message, handle, at);
		return;
	}
	r.tag = tag;
	r.status = status;
	r.message = (char *)(message ? message : "");
	r.handle = handle;
	if (at) {
		p.stream = at->stream;
		p.seq = at->seq;
		r.point = &p;
	}
	r.welcome = welcome;
	m.body_case = SSEQ__MESSAGE__BODY_REPLY;
	m.reply = &r;
	out_send(s, &m);
}

void out_reply_sized(struct session *s, uint64_t tag, uint64_t handle, uint64_t size)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__Reply r = SSEQ__REPLY__INIT;

	r.tag = tag;
	r.status = SSEQ__STATUS__STATUS_OK;
	r.message = (char *)"";
	r.handle = handle;
	r.size = size;
	m.body_case = SSEQ__MESSAGE__BODY_REPLY;
	m.reply = &r;
	out_send(s, &m);
}

void out_reply(struct session *s, uint64_t tag, Sseq__Status status, const char *message)
{
	out_reply_full(s, tag, status, message, 0, NULL, NULL);
}

void out_notice(struct session *s, Sseq__Status status, const char *message)
{
	out_reply(s, 0, status, message);
}

void out_complete(struct session *s, uint64_t tag, Sseq__Status status, const char *message,
	struct seq_point at)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__Completion c = SSEQ__COMPLETION__INIT;
	Sseq__Point p = SSEQ__POINT__INIT;

	c.tag = tag;
	c.status = status;
	c.message = (char *)(message ? message : "");
	if (at.seq) {
		p.stream = at.stream;
		p.seq = at.seq;
		c.point = &p;
	}
	m.body_case = SSEQ__MESSAGE__BODY_COMPLETION;
	m.completion = &c;
	out_send(s, &m);
}

size_t out_pending(const struct session *s)
{
	const struct session_out *o = session_out_const(s);

	return o->len - o->off;
}

const uint8_t *out_unwritten(const struct session *s)
{
	const struct session_out *o = session_out_const(s);

	/* A session that never answered has no buffer: NULL + 0 is undefined. */
	return o->len > o->off ? o->buf + o->off : NULL;
}

uint8_t *out_adopt(struct session *s, size_t n)
{
	struct session_out *o = session_out(s);

	if (!(o->buf = malloc(n)))
		return NULL;
	o->cap = n;
	return o->buf;
}

void out_adopted(struct session *s, size_t n)
{
	session_out(s)->len = n;
}

struct session *out_next_dirty(struct server *srv)
{
	struct session *s = srv->dirty;

	if (s) {
		struct session_out *o = session_out(s);

		srv->dirty = o->next_dirty;
		o->dirty = false;
	}
	return s;
}

int out_write(struct session *s)
{
	struct session_out *o = session_out(s);
	int fd = session_fd(s);

	if (!session_is_connected(s))
		return 0;
	while (o->off < o->len) {
		ssize_t n = send(fd, o->buf + o->off, o->len - o->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return -errno;
		}
		o->off += (size_t)n;
	}
	/* All written: the buffer starts over at its front. */
	if (o->off == o->len)
		o->off = o->len = 0;
	return 0;
}
