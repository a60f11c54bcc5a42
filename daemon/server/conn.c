/* A session's connection: the socket's input (recvmsg with SCM_RIGHTS, framing, the input
 * memory budget, EOF and half-close), its coalesced output (replies and completions,
 * written at the end of the loop turn) and the deadlines the sweep enforces. */
#include "session-internal.h"

#include "sseq-frame.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "pbcheck.h"
#include "wire.h"

/* Decoding storage for the loop thread (the only thread that touches sessions). */
static struct wire_request session_wire;

void session_mark_dirty(struct session *s)
{
	if (s->dirty)
		return;
	s->dirty = true;
	s->next_dirty = s->srv->dirty;
	s->srv->dirty = s;
}

/* Room for n more bytes of output, or NULL (the session is then closing). */
static uint8_t *session_out_reserve(struct session *s, size_t n)
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
					"client %" PRIu64 ": out of memory for replies", s->id);
				s->closing = true;
				return NULL;
			}
			s->out = b;
			s->out_cap = cap;
		}
	}
	session_mark_dirty(s);
	return s->out + s->out_len;
}

void session_send(struct session *s, const Sseq__Message *m)
{
	size_t len;
	uint8_t *o;

	if (!s->connected)
		return;
	len = sseq__message__get_packed_size(m);
	if (!(o = session_out_reserve(s, 4 + len)))
		return;
	frame_put_len(o, (uint32_t)len);
	sseq__message__pack(m, o + 4);
	s->out_len += 4 + len;
}

void session_reply_full(struct session *s, uint64_t tag, Sseq__Status status, const char *message,
	uint64_t handle, const struct seq_point *at, Sseq__Welcome *welcome)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__Reply r = SSEQ__REPLY__INIT;
	Sseq__Point p = SSEQ__POINT__INIT;

	if (!welcome) {
		/* The common reply, encoded by hand: see wire.c for why. */
		uint8_t *o;
		if (!s->connected ||
			!(o = session_out_reserve(
				  s, WIRE_REPLY_MAX + (message ? strlen(message) : 0))))
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
	session_send(s, &m);
}

void session_reply_sized(struct session *s, uint64_t tag, uint64_t handle, uint64_t size)
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
	session_send(s, &m);
}

void session_reply(struct session *s, uint64_t tag, Sseq__Status status, const char *message)
{
	session_reply_full(s, tag, status, message, 0, NULL, NULL);
}

void session_notice(struct session *s, Sseq__Status status, const char *message)
{
	session_reply(s, 0, status, message);
}

void session_complete(struct session *s, uint64_t tag, Sseq__Status status, const char *message,
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
	session_send(s, &m);
}

/* Whether the client is still there: 0 connected, 1 it shut down its sending side (what
 * it sent is still read, once the session reads again), -1 gone (closed, killed). */
static int session_peer(const struct session *s)
{
	struct pollfd p = {.fd = s->fd, .events = POLLRDHUP};

	if (poll(&p, 1, 0) != 1)
		return 0;
	if (p.revents & (POLLHUP | POLLERR))
		return -1;
	return (p.revents & POLLRDHUP) != 0;
}

void session_flush(struct session *s)
{
	while (s->connected && s->out_off < s->out_len) {
		ssize_t n = send(s->fd, s->out + s->out_off, s->out_len - s->out_off,
			MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
				"client %" PRIu64 " (pid %u): write failed: %s", s->id, s->pid,
				strerror(errno));
			session_disconnect(s);
			return;
		}
		s->out_off += (size_t)n;
	}
	if (!s->connected)
		return;
	if (s->out_off == s->out_len) {
		s->out_off = s->out_len = 0;
		/* After EOF: once what was read has run and its work completed. */
		if (s->closing ||
			(s->eof && !s->blocked && !s->inflight_capped && !s->resume &&
				!s->inflight)) {
			session_disconnect(s);
			return;
		}
	}
	/* Poll for writability only while output is stuck; read unless paused. */
	int events = 0;
	if (s->out_off < s->out_len)
		events |= UV_WRITABLE;
	if (!s->blocked && !s->closing && !s->eof && !s->input_wait && !s->inflight_capped &&
		!s->resume && s->out_len - s->out_off < SESSION_OUT_HIGH)
		events |= UV_READABLE;
	else if (!s->closing && !s->eof) {
		/* Paused, still watched for a hang-up: a dead client's session would otherwise
		 * keep its descriptors and input until the pause ends, which for input memory
		 * that other dead sessions hold is never. */
		if (s->poll_events & UV_DISCONNECT) {
			events |= UV_DISCONNECT;
		} else {
			int peer = session_peer(s);
			if (peer < 0) {
				session_disconnect(s);
				return;
			}
			if (peer == 0)
				events |= UV_DISCONNECT;
		}
	}
	if (events != s->poll_events) {
		s->poll_events = events;
		if (events)
			uv_poll_start(&s->poll, events, session_on_io);
		else
			uv_poll_stop(&s->poll);
	}
}

/* What of an input buffer of `cap` bytes counts against --max-input-memory. */
static size_t input_large(size_t cap)
{
	return cap > SESSION_INPUT_BASE ? cap - SESSION_INPUT_BASE : 0;
}

/* Give the input buffer back (the session ended, or it sat idle). */
void session_input_free(struct session *s)
{
	if (!s->in_cap)
		return;
	free(s->in);
	s->in = NULL;
	s->srv->limit.input_bytes -= s->in_cap;
	s->srv->limit.input_large_bytes -= input_large(s->in_cap);
	s->in_cap = s->in_len = 0;
	server_input_released(s->srv);
}

void session_input_adopt(struct session *s, uint8_t *in, size_t len)
{
	s->in = in;
	s->in_len = s->in_cap = len;
	s->srv->limit.input_bytes += len;
	s->srv->limit.input_large_bytes += input_large(len);
	s->last_read_ns = server_loop_ns(s->srv);
}

/* Tell the client why (a tag-0 notice), then close once that is written. */
static void session_close_with(struct session *s, Sseq__Status status, const char *why)
{
	log_about(LOG_LVL_NOTICE, "session", SESSION_WHO(s),
		"client %" PRIu64 " (pid %u): %s; closing", s->id, s->pid, why);
	session_reply(s, 0, status, why);
	s->closing = true;
	s->in_len = 0;
	s->frame_started_ns = 0;
}

static void session_protocol_error(struct session *s, Sseq__Status status, const char *why)
{
	s->srv->frames_bad++;
	session_close_with(s, status, why);
}

void session_process(struct session *s)
{
	size_t off = 0;
	unsigned frames = 0;

	while (s->connected && !s->closing && !s->inflight_capped && s->in_len - off >= 4) {
		const uint8_t *p = s->in + off;
		uint32_t len = frame_get_len(p);
		Sseq__Request *rq = NULL;
		char why[128];
		int r;

		if (frames++ == SESSION_TURN_FRAMES) {
			/* Its turn is up: the rest next turn, after the others. */
			server_resume_session(s->srv, s);
			break;
		}
		if (len > FRAME_MAX) {
			snprintf(why, sizeof(why), "frame of %u bytes exceeds the limit of %u", len,
				FRAME_MAX);
			session_protocol_error(s, SSEQ__STATUS__STATUS_FRAME_TOO_LARGE, why);
			return;
		}
		if (s->in_len - off - 4 < len)
			break;
		/* The hot requests decode by hand; protobuf-c has the last word on the rest,
		 * after a look at the bytes that it cannot take safely itself. */
		if (wire_decode_request(p + 4, len, &session_wire))
			rq = &session_wire.rq;
		else if (pbcheck_request(p + 4, len, why, sizeof(why)) == 0 &&
			!(rq = sseq__request__unpack(&s->arena.pb, len, p + 4)))
			snprintf(why, sizeof(why), "frame does not decode as a Request");
		if (!rq) {
			session_protocol_error(s, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, why);
			return;
		}
		s->srv->frames_in++;
		r = session_request(s, rq, false);
		arena_reset(&s->arena);
		if (r == -EAGAIN) {
			/* The frame stays: it runs again once its stream has room (I3). */
			server_block_session(s->srv, s);
			break;
		}
		if (r == -EBUSY) /* the frame stays, for when half its work completed */
			break;
		if (r == -EPROTO) {
			s->closing = true;
			s->in_len = 0;
			return;
		}
		off += 4 + len;
	}
	if (off && s->connected) { /* a disconnect gave the input buffer back */
		memmove(s->in, s->in + off, s->in_len - off);
		s->in_len -= off;
		/* What is left is a new frame's start: its deadline counts from now. */
		s->frame_started_ns = s->in_len ? server_loop_ns(s->srv) : 0;
	}
}

/* Room for SESSION_READ_CHUNK more input bytes, within --max-input-memory: 0, or
 * -EAGAIN when the session must wait for others to give input memory back. */
static int session_input_reserve(struct session *s)
{
	struct server *srv = s->srv;
	size_t cap, grow;
	uint8_t *b;

	if (s->in_cap - s->in_len >= SESSION_READ_CHUNK)
		return 0;
	cap = s->in_cap ? s->in_cap * 2 : SESSION_INPUT_BASE;
	while (cap - s->in_len < SESSION_READ_CHUNK)
		cap *= 2;
	grow = input_large(cap) - input_large(s->in_cap);
	if (grow && srv->limit.input_large_bytes + grow > srv->opts.limits.max_input_bytes) {
		if (!s->input_wait) {
			s->input_wait = true;
			srv->input_waiting++;
			srv->limit.input_paused++;
			log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
				"client %" PRIu64 " (pid %u): input paused: %" PRIu64
				" bytes of large frames buffered (--max-input-memory %" PRIu64 ")",
				s->id, s->pid, srv->limit.input_large_bytes,
				srv->opts.limits.max_input_bytes);
		}
		return -EAGAIN;
	}
	if (!(b = realloc(s->in, cap)))
		return -ENOMEM;
	srv->limit.input_bytes += cap - s->in_cap;
	srv->limit.input_large_bytes += grow;
	s->in = b;
	s->in_cap = cap;
	return 0;
}

void session_input_resume(struct session *s)
{
	if (!s->input_wait)
		return;
	s->input_wait = false;
	s->srv->input_waiting--;
	/* Its partial frame's deadline keeps running: while it waited it held input memory
	 * that others wait for, and a deadline that started again at every resume would let
	 * a client that gives some back now and then hold the rest for good. */
	session_mark_dirty(s); /* its flush polls for input again */
}

/* The client will send nothing more (EOF). If it only shut down its sending side, what
 * it sent still runs and its replies and completions still go out before the daemon
 * closes (session_flush). If it is gone altogether (closed, killed: a Unix socket then
 * reports POLLHUP), nobody will read them: end the session now. */
static void session_input_ended(struct session *s)
{
	struct pollfd p = {.fd = s->fd, .events = POLLOUT};

	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR))) {
		session_disconnect(s);
		return;
	}
	s->eof = true;
	if (s->following)
		s->srv->nfollowing--;
	s->following = false;
	s->frame_started_ns = 0; /* a partial frame at EOF can never finish */
	session_mark_dirty(s);
}

static void session_read(struct session *s)
{
	/* Bounded per turn so one busy client cannot starve the others. */
	for (int rounds = 0; rounds < 4 && s->connected && !s->blocked && !s->closing && !s->eof &&
		!s->inflight_capped && !s->resume;
		rounds++) {
		union {
			struct cmsghdr align;
			char buf[CMSG_SPACE(sizeof(int) * SESSION_MAX_FDS)];
		} ctl;
		struct iovec iov;
		struct msghdr msg = {0};
		ssize_t n;
		int r = session_input_reserve(s);

		if (r == -EAGAIN)
			return;
		if (r < 0) {
			session_disconnect(s);
			return;
		}
		iov.iov_base = s->in + s->in_len;
		iov.iov_len = s->in_cap - s->in_len;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		n = recvmsg(s->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
				"client %" PRIu64 " (pid %u): read failed: %s", s->id, s->pid,
				strerror(errno));
			session_disconnect(s);
			return;
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			const int *fds = (const int *)(const void *)CMSG_DATA(c);
			for (size_t i = 0; i < nfd; i++) {
				if (s->nfds < SESSION_MAX_FDS)
					s->fds[s->nfds++] = fds[i];
				else
					close(fds[i]); /* more memfds than pending registrations */
			}
		}
		if (n == 0) {
			session_input_ended(s);
			return;
		}
		s->last_read_ns = server_loop_ns(s->srv);
		if (!s->in_len)
			s->frame_started_ns = s->last_read_ns;
		s->in_len += (size_t)n;
		session_process(s);
		if (!s->in_len && s->srv->input_waiting) {
			session_input_free(s); /* others wait for input memory */
			break;
		}
		if ((size_t)n < iov.iov_len)
			break;
	}
}

void session_sweep(struct session *s, uint64_t now)
{
	const struct server_limits *lim = &s->srv->opts.limits;
	char why[128];

	if (!s->connected || s->closing)
		return;
	if (!s->hello && lim->hello_timeout_ms &&
		now - s->accepted_ns > (uint64_t)lim->hello_timeout_ms * 1000000u) {
		s->srv->limit.hello_timeouts++;
		snprintf(why, sizeof(why), "no Hello within %u ms (--hello-timeout)",
			lim->hello_timeout_ms);
		session_close_with(s, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, why);
		return;
	}
	/* A pause of the daemon's (a full window, --client-inflight-limit, the turn's frames
	 * used up) is not the client stalling: the deadline starts again when it ends
	 * (server.c). A pause at --max-input-memory counts: the partial frame holds memory
	 * others wait for, and only the client can finish it. */
	if (s->frame_started_ns && !s->blocked && !s->inflight_capped && !s->resume &&
		lim->frame_timeout_ms &&
		now - s->frame_started_ns > (uint64_t)lim->frame_timeout_ms * 1000000u) {
		s->srv->limit.frame_timeouts++;
		snprintf(why, sizeof(why),
			"a frame stalled: %zu bytes of it in %u ms "
			"(--frame-timeout)",
			s->in_len, lim->frame_timeout_ms);
		session_close_with(s, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, why);
		return;
	}
	/* An idle connection holds no input memory. */
	if (!s->in_len && s->in_cap && now - s->last_read_ns > 1000000000u)
		session_input_free(s);
}

void session_on_io(uv_poll_t *poll, int status, int events)
{
	struct session *s = poll->data;

	if (status < 0) {
		session_disconnect(s);
		return;
	}
	if (events & UV_DISCONNECT) {
		if (session_peer(s) < 0) {
			session_disconnect(s);
			return;
		}
		/* Only a half-close, while paused: not watched again (it stays readable), and
		 * its input is read to the end once the pause ends. */
		s->poll_events &= ~UV_DISCONNECT;
		if (s->poll_events)
			uv_poll_start(&s->poll, s->poll_events, session_on_io);
		else
			uv_poll_stop(&s->poll);
	}
	if (events & UV_WRITABLE)
		session_mark_dirty(s);
	if (events & UV_READABLE)
		session_read(s);
	if (s->connected)
		session_mark_dirty(s);
}
