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
#include "session-private.h"
#include "wire.h"

void out_mark_dirty(struct session *s)
{
	if (s->dirty)
		return;
	s->dirty = true;
	s->next_dirty = s->srv->dirty;
	s->srv->dirty = s;
}

/* Room for n more bytes of output, or NULL (the session is then closing). */
static uint8_t *out_reserve(struct session *s, size_t n)
{
	size_t need = s->out_len + n;

	if (need > s->out_cap) {
		size_t cap = s->out_cap ? s->out_cap : 4096;
		uint8_t *b;
		/* Reclaim what was written before growing. */
		if (s->out_off) {
			memmove(s->out, s->out + s->out_off, s->out_len - s->out_off);
			s->out_len -= s->out_off;
			s->out_off = 0;
			need = s->out_len + n;
		}
		while (cap < need)
			cap *= 2;
		if (cap > s->out_cap) {
			b = realloc(s->out, cap);
			if (!b) {
				log_about(LOG_LVL_ERR, "session", SESSION_WHO(s),
					"client %" PRIu64 ": out of memory for replies",
					s->ident.id);
				s->closing = true;
				return NULL;
			}
			s->out = b;
			s->out_cap = cap;
		}
	}
	out_mark_dirty(s);
	return s->out + s->out_len;
}

void out_send(struct session *s, const Sseq__Message *m)
{
	size_t len;
	uint8_t *o;

	if (!s->connected)
		return;
	len = sseq__message__get_packed_size(m);
	if (!(o = out_reserve(s, 4 + len)))
		return;
	frame_put_len(o, (uint32_t)len);
	sseq__message__pack(m, o + 4);
	s->out_len += 4 + len;
}

void out_reply_full(struct session *s, uint64_t tag, Sseq__Status status, const char *message,
	uint64_t handle, const struct seq_point *at, Sseq__Welcome *welcome)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__Reply r = SSEQ__REPLY__INIT;
	Sseq__Point p = SSEQ__POINT__INIT;

	if (!welcome) {
		/* The common reply, encoded by hand: see wire.c for why. */
		uint8_t *o;
		if (!s->connected ||
			!(o = out_reserve(s, WIRE_REPLY_MAX + (message ? strlen(message) : 0))))
			return;
		s->out_len += wire_encode_reply(o, tag, (int)status, message, handle, at);
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
	return s->out_len - s->out_off;
}

struct session *out_next_dirty(struct server *srv)
{
	struct session *s = srv->dirty;

	if (s) {
		srv->dirty = s->next_dirty;
		s->dirty = false;
	}
	return s;
}

int out_write(struct session *s)
{
	while (s->connected && s->out_off < s->out_len) {
		ssize_t n = send(s->fd, s->out + s->out_off, s->out_len - s->out_off,
			MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return -errno;
		}
		s->out_off += (size_t)n;
	}
	return 0;
}
