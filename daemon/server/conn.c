/* A session's connection: the socket's input (recvmsg with SCM_RIGHTS, framing, the input
 * memory budget, EOF and half-close), each whole frame handed to request_run(), when its
 * output (out.c) is written and what to poll for, and the deadlines the sweep enforces. */
#include "conn.h"

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
#include "out.h"
#include "pause.h"
#include "pbcheck.h"
#include "request.h"
#include "session-limits.h"
#include "session-private.h"
#include "wire.h"

static void conn_on_io(uv_poll_t *poll, int status, int events);

/* Whether the client is still there: 0 connected, 1 it shut down its sending side (what
 * it sent is still read, once the session reads again), -1 gone (closed, killed). */
static int conn_peer(const struct session *s)
{
	struct pollfd p = {.fd = s->fd, .events = POLLRDHUP};

	if (poll(&p, 1, 0) != 1)
		return 0;
	if (p.revents & (POLLHUP | POLLERR))
		return -1;
	return (p.revents & POLLRDHUP) != 0;
}

void conn_frame_restart(struct session *s)
{
	if (s->in_len)
		s->frame_started_ns = server_loop_ns(s->srv);
}

void conn_flush(struct session *s)
{
	int r = out_write(s);

	if (r < 0) {
		log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
			"client %" PRIu64 " (pid %u): write failed: %s", s->ident.id, s->ident.pid,
			strerror(-r));
		conn_close(s);
		return;
	}
	if (!s->connected)
		return;
	if (!out_pending(s)) {
		/* After EOF: once what was read has run and its work completed. */
		if (s->closing || (s->eof && !pause_held(&s->pause) && !s->counts.inflight)) {
			conn_close(s);
			return;
		}
	}
	/* Poll for writability only while output is stuck; read unless paused. */
	int events = 0;
	if (out_pending(s))
		events |= UV_WRITABLE;
	/* A client that does not read its replies is not read either. */
	if (out_pending(s) >= SESSION_OUT_HIGH) {
		if (!pause_has(&s->pause, PAUSE_OUTPUT))
			pause_set(s, PAUSE_OUTPUT);
	} else if (pause_has(&s->pause, PAUSE_OUTPUT)) {
		pause_clear(s, PAUSE_OUTPUT);
	}
	if (!pause_any(&s->pause) && !s->closing && !s->eof)
		events |= UV_READABLE;
	else if (!s->closing && !s->eof) {
		/* Paused, still watched for a hang-up: a dead client's session would otherwise
		 * keep its descriptors and input until the pause ends, which for input memory
		 * that other dead sessions hold is never. */
		if (s->poll_events & UV_DISCONNECT) {
			events |= UV_DISCONNECT;
		} else {
			int peer = conn_peer(s);
			if (peer < 0) {
				conn_close(s);
				return;
			}
			if (peer == 0)
				events |= UV_DISCONNECT;
		}
	}
	if (events != s->poll_events) {
		s->poll_events = events;
		if (events)
			uv_poll_start(&s->poll, events, conn_on_io);
		else
			uv_poll_stop(&s->poll);
	}
}

/* Input memory went back (a buffer shrank or a session ended): resume the sessions that
 * paused at --max-input-memory. */
static void conn_input_released(struct server *srv)
{
	for (struct session *s = srv->input_waiting ? srv->sessions : NULL; s; s = s->next)
		conn_input_resume(s);
}

/* What of an input buffer of `cap` bytes counts against --max-input-memory. */
static size_t input_large(size_t cap)
{
	return cap > SESSION_INPUT_BASE ? cap - SESSION_INPUT_BASE : 0;
}

/* Give the input buffer back (the session ended, or it sat idle). */
void conn_input_free(struct session *s)
{
	if (!s->in_cap)
		return;
	free(s->in);
	s->in = NULL;
	s->srv->limit.input_bytes -= s->in_cap;
	s->srv->limit.input_large_bytes -= input_large(s->in_cap);
	s->in_cap = s->in_len = 0;
	conn_input_released(s->srv);
}

void conn_input_adopt(struct session *s, uint8_t *in, size_t len)
{
	s->in = in;
	s->in_len = s->in_cap = len;
	s->srv->limit.input_bytes += len;
	s->srv->limit.input_large_bytes += input_large(len);
	s->last_read_ns = server_loop_ns(s->srv);
}

/* Tell the client why (a tag-0 notice), then close once that is written. */
static void conn_close_with(struct session *s, Sseq__Status status, const char *why)
{
	log_about(LOG_LVL_NOTICE, "session", SESSION_WHO(s),
		"client %" PRIu64 " (pid %u): %s; closing", s->ident.id, s->ident.pid, why);
	out_reply(s, 0, status, why);
	s->closing = true;
	s->in_len = 0;
	s->frame_started_ns = 0;
}

static void conn_protocol_error(struct session *s, Sseq__Status status, const char *why)
{
	s->srv->frames_bad++;
	conn_close_with(s, status, why);
}

void conn_process(struct session *s)
{
	/* The loop's decoding storage (each loop decodes its own connections). */
	struct wire_request *wire = &s->srv->wire;
	size_t off = 0;
	unsigned frames = 0;

	while (s->connected && !s->closing && !pause_gated(&s->pause) && s->in_len - off >= 4) {
		const uint8_t *p = s->in + off;
		uint32_t len = frame_get_len(p);
		Sseq__Request *rq = NULL;
		char why[128];
		int r;

		if (!pause_turn_frame(s, &frames))
			break; /* its turn is up: the rest next turn, after the others */
		if (len > FRAME_MAX) {
			snprintf(why, sizeof(why), "frame of %u bytes exceeds the limit of %u", len,
				FRAME_MAX);
			conn_protocol_error(s, SSEQ__STATUS__STATUS_FRAME_TOO_LARGE, why);
			return;
		}
		if (s->in_len - off - 4 < len)
			break;
		/* The hot requests decode by hand; protobuf-c has the last word on the rest,
		 * after a look at the bytes that it cannot take safely itself. */
		if (wire_decode_request(p + 4, len, wire))
			rq = &wire->rq;
		else if (pbcheck_request(p + 4, len, why, sizeof(why)) == 0 &&
			!(rq = sseq__request__unpack(&s->arena.pb, len, p + 4)))
			snprintf(why, sizeof(why), "frame does not decode as a Request");
		if (!rq) {
			conn_protocol_error(s, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, why);
			return;
		}
		s->srv->frames_in++;
		r = request_run(s, rq, false);
		arena_reset(&s->arena);
		if (r == -EAGAIN) {
			/* The frame stays: it runs again once its stream has room (I3). */
			pause_set(s, PAUSE_WINDOW);
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
static int conn_input_reserve(struct session *s)
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
		if (pause_set(s, PAUSE_INPUT)) {
			srv->limit.input_paused++;
			log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
				"client %" PRIu64 " (pid %u): input paused: %" PRIu64
				" bytes of large frames buffered (--max-input-memory %" PRIu64 ")",
				s->ident.id, s->ident.pid, srv->limit.input_large_bytes,
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

void conn_input_resume(struct session *s)
{
	/* Its partial frame's deadline keeps running (the pause was the client's): while it
	 * waited it held input memory that others wait for, and a deadline that started again
	 * at every resume would let a client that gives some back now and then hold the rest
	 * for good. */
	pause_clear(s, PAUSE_INPUT);
}

/* The client will send nothing more (EOF). If it only shut down its sending side, what
 * it sent still runs and its replies and completions still go out before the daemon
 * closes (conn_flush). If it is gone altogether (closed, killed: a Unix socket then
 * reports POLLHUP), nobody will read them: end the session now. */
static void conn_input_ended(struct session *s)
{
	struct pollfd p = {.fd = s->fd, .events = POLLOUT};

	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR))) {
		conn_close(s);
		return;
	}
	s->eof = true;
	if (s->follow.following)
		s->srv->nfollowing--;
	s->follow.following = false;
	s->frame_started_ns = 0; /* a partial frame at EOF can never finish */
	out_mark_dirty(s);
}

static void conn_read(struct session *s)
{
	/* Bounded per turn so one busy client cannot starve the others. */
	for (int rounds = 0;
		rounds < 4 && s->connected && !pause_any(&s->pause) && !s->closing && !s->eof;
		rounds++) {
		union {
			struct cmsghdr align;
			char buf[CMSG_SPACE(sizeof(int) * SESSION_MAX_FDS)];
		} ctl;
		struct iovec iov;
		struct msghdr msg = {0};
		ssize_t n;
		int r = conn_input_reserve(s);

		if (r == -EAGAIN)
			return;
		if (r < 0) {
			conn_close(s);
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
				"client %" PRIu64 " (pid %u): read failed: %s", s->ident.id,
				s->ident.pid, strerror(errno));
			conn_close(s);
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
			conn_input_ended(s);
			return;
		}
		s->last_read_ns = server_loop_ns(s->srv);
		if (!s->in_len)
			s->frame_started_ns = s->last_read_ns;
		s->in_len += (size_t)n;
		conn_process(s);
		if (!s->in_len && s->srv->input_waiting) {
			conn_input_free(s); /* others wait for input memory */
			break;
		}
		if ((size_t)n < iov.iov_len)
			break;
	}
}

void conn_sweep(struct session *s, uint64_t now)
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
		conn_close_with(s, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, why);
		return;
	}
	/* A pause of the daemon's (PAUSE_HELD: a full window, --client-inflight-limit, the
	 * turn's frames used up) is not the client stalling: the deadline starts again when
	 * it ends (server.c). A pause at --max-input-memory counts: the partial frame holds
	 * memory others wait for, and only the client can finish it. */
	if (s->frame_started_ns && !pause_held(&s->pause) && lim->frame_timeout_ms &&
		now - s->frame_started_ns > (uint64_t)lim->frame_timeout_ms * 1000000u) {
		s->srv->limit.frame_timeouts++;
		snprintf(why, sizeof(why),
			"a frame stalled: %zu bytes of it in %u ms "
			"(--frame-timeout)",
			s->in_len, lim->frame_timeout_ms);
		conn_close_with(s, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, why);
		return;
	}
	/* An idle connection holds no input memory. */
	if (!s->in_len && s->in_cap && now - s->last_read_ns > 1000000000u)
		conn_input_free(s);
}

static void conn_io(struct session *s, int status, int events)
{
	if (status < 0) {
		conn_close(s);
		return;
	}
	if (events & UV_DISCONNECT) {
		if (conn_peer(s) < 0) {
			conn_close(s);
			return;
		}
		/* Only a half-close, while paused: not watched again (it stays readable), and
		 * its input is read to the end once the pause ends. */
		s->poll_events &= ~UV_DISCONNECT;
		if (s->poll_events)
			uv_poll_start(&s->poll, s->poll_events, conn_on_io);
		else
			uv_poll_stop(&s->poll);
	}
	if (events & UV_WRITABLE)
		out_mark_dirty(s);
	if (events & UV_READABLE)
		conn_read(s);
	if (s->connected)
		out_mark_dirty(s);
}

static void conn_on_io(uv_poll_t *poll, int status, int events)
{
	struct session *s = poll->data;
	struct server *srv = s->srv; /* s may be gone after */
	const uint64_t t0 = server_busy_begin(srv);

	conn_io(s, status, events);
	server_busy_end(srv, t0);
}

struct session *conn_accept(struct server *srv, int fd)
{
	return session_new(srv, fd, conn_on_io);
}

/* libuv has let go of the fd: only now may its number go to a new connection. */
static void conn_poll_closed(uv_handle_t *h)
{
	struct session *s = h->data;

	close(s->fd);
	s->fd = -1;
	session_unref(s); /* the connection's */
}

void conn_close(struct session *s)
{
	struct server *srv = s->srv;

	if (!s->connected)
		return;
	s->connected = false;
	if (s->follow.following)
		srv->nfollowing--;
	s->follow.following = false;
	pause_forget(s);
	log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
		"client %" PRIu64 " (pid %u, %s%s%s) disconnected: %" PRIu64 " buffers, %" PRIu64
		" ops in flight",
		s->ident.id, s->ident.pid, s->ident.name[0] ? s->ident.name : "unnamed",
		s->ident.worker[0] ? " " : "", s->ident.worker, s->counts.buffers,
		s->counts.inflight);
	/* The fd stays open until the poll handle is closed: closing it first would let
	 * accept() hand its number to a new client whose registration the late close of
	 * this handle then removes from epoll (the new client would never be read). */
	uv_close((uv_handle_t *)&s->poll, conn_poll_closed);
	conn_input_free(s);
	for (unsigned i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	s->nfds = 0;
	session_end(s);
}
