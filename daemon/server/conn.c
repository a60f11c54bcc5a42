/* A session's connection: the socket's input (recvmsg with SCM_RIGHTS, framing, the input
 * memory budget, EOF and half-close) and its request ring's (bytes the client writes into
 * shared memory: the same stream), each whole frame handed to request_run(), when its
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

#include "account.h"
#include "log.h"
#include "out.h"
#include "pause.h"
#include "pbcheck.h"
#include "request.h"
#include "session-limits.h"
#include "session.h"
#include "wire.h"

static void conn_on_io(uv_poll_t *poll, int status, int events);

/* Whether the client is still there: 0 connected, 1 it shut down its sending side (what
 * it sent is still read, once the session reads again), -1 gone (closed, killed). */
static int conn_peer(const struct session *s)
{
	struct pollfd p = {.fd = session_fd(s), .events = POLLRDHUP};

	if (poll(&p, 1, 0) != 1)
		return 0;
	if (p.revents & (POLLHUP | POLLERR))
		return -1;
	return (p.revents & POLLRDHUP) != 0;
}

void conn_frame_restart(struct session *s)
{
	struct session_in *in = session_in(s);

	if (in->len)
		in->frame_started_ns = server_loop_ns(session_server(s));
}

void conn_flush(struct session *s)
{
	struct session_in *in = session_in(s);
	struct session_pause *pause = session_pause(s);
	int r = out_write(s);
	bool closing, eof;

	if (r < 0) {
		log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
			"client %" PRIu64 " (pid %u): write failed: %s", session_id(s),
			session_ident(s)->pid, strerror(-r));
		conn_close(s);
		return;
	}
	if (!session_is_connected(s))
		return;
	closing = session_is_closing(s);
	eof = session_is_draining(s); /* connected: the client closed its sending side */
	if (!out_pending(s)) {
		/* After EOF: once what was read has run and its work completed. */
		if (closing || (eof && !pause_held(pause) && !session_counts(s)->inflight)) {
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
		if (!pause_has(pause, PAUSE_OUTPUT))
			pause_set(s, PAUSE_OUTPUT);
	} else if (pause_has(pause, PAUSE_OUTPUT)) {
		pause_clear(s, PAUSE_OUTPUT);
	}
	if (!pause_any(pause) && !closing && !eof)
		events |= UV_READABLE;
	else if (!closing && !eof) {
		/* Paused, still watched for a hang-up: a dead client's session would otherwise
		 * keep its descriptors and input until the pause ends, which for input memory
		 * that other dead sessions hold is never. */
		if (in->poll_events & UV_DISCONNECT) {
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
	if (events != in->poll_events) {
		in->poll_events = events;
		if (events)
			uv_poll_start(session_poll(s), events, conn_on_io);
		else
			uv_poll_stop(session_poll(s));
	}
}

/* Input memory went back (a buffer shrank or a session ended): resume the sessions that
 * paused at --max-input-memory. */
static void conn_input_released(struct server *srv)
{
	for (struct session *s = srv->input_waiting ? srv->sessions : NULL; s; s = session_next(s))
		conn_input_resume(s);
}

/* Give the input buffer back (the session ended, or it sat idle). */
void conn_input_free(struct session *s)
{
	struct session_in *in = session_in(s);
	struct server *srv = session_server(s);

	if (!in->cap)
		return;
	free(in->buf);
	in->buf = NULL;
	account_input_move(s, in->cap, 0);
	in->cap = in->len = 0;
	conn_input_released(srv);
}

void conn_input_adopt(struct session *s, uint8_t *bytes, size_t len)
{
	struct session_in *in = session_in(s);
	struct server *srv = session_server(s);

	in->buf = bytes;
	in->len = in->cap = len;
	account_input_move(s, 0, len);
	in->last_read_ns = server_loop_ns(srv);
}

const uint8_t *conn_input_unread(const struct session *s, size_t *n)
{
	const struct session_in *in = session_in_const(s);

	*n = in->len;
	return in->len ? in->buf : NULL;
}

const int *conn_fds_held(const struct session *s, unsigned *n)
{
	const struct session_in *in = session_in_const(s);

	*n = in->nfds;
	return in->fds;
}

uint64_t conn_accepted_ns(const struct session *s)
{
	return session_in_const(s)->accepted_ns;
}

void conn_adopt(struct session *s, uint64_t accepted_ns, const int *fds, unsigned n)
{
	struct session_in *in = session_in(s);

	in->accepted_ns = accepted_ns;
	for (unsigned i = 0; i < n && i < SESSION_MAX_FDS; i++)
		in->fds[in->nfds++] = fds[i];
}

/* Tell the client why (a tag-0 notice), then close once that is written. */
static void conn_close_with(struct session *s, Sseq__Status status, const char *why)
{
	struct session_in *in = session_in(s);

	log_about(LOG_LVL_NOTICE, "session", SESSION_WHO(s),
		"client %" PRIu64 " (pid %u): %s; closing", session_id(s), session_ident(s)->pid,
		why);
	out_reply(s, 0, status, why);
	session_close_after_output(s);
	in->len = 0;
	in->frame_started_ns = 0;
}

static void conn_protocol_error(struct session *s, Sseq__Status status, const char *why)
{
	session_server(s)->count[SSEQ_COUNTER_FRAMES_BAD]++;
	conn_close_with(s, status, why);
}

void conn_process(struct session *s)
{
	struct session_in *in = session_in(s);
	struct server *srv = session_server(s);
	struct session_pause *pause = session_pause(s);
	struct arena *arena = session_arena(s);
	/* The loop's decoding storage (each loop decodes its own connections). */
	struct wire_request *wire = &srv->wire;
	size_t off = 0;
	unsigned frames = 0;

	while (session_is_connected(s) && !session_is_closing(s) && !pause_gated(pause) &&
		in->len - off >= 4) {
		const uint8_t *p = in->buf + off;
		uint32_t len = frame_get_len(p);
		Sseq__Request *rq = NULL;
		char why[128];
		int r;

		if (len == 0 && in->ring.hdr) {
			off += 4; /* a doorbell: the ring holds what it rang for */
			continue;
		}
		if (!pause_turn_frame(s, &frames))
			break; /* its turn is up: the rest next turn, after the others */
		if (len > FRAME_MAX) {
			snprintf(why, sizeof(why), "frame of %u bytes exceeds the limit of %u", len,
				FRAME_MAX);
			conn_protocol_error(s, SSEQ__STATUS__STATUS_FRAME_TOO_LARGE, why);
			return;
		}
		if (in->len - off - 4 < len)
			break;
		/* The hot requests decode by hand; protobuf-c has the last word on the rest,
		 * after a look at the bytes that it cannot take safely itself. */
		if (wire_decode_request(p + 4, len, wire))
			rq = &wire->rq;
		else if (pbcheck_request(p + 4, len, why, sizeof(why)) == 0 &&
			!(rq = sseq__request__unpack(&arena->pb, len, p + 4)))
			snprintf(why, sizeof(why), "frame does not decode as a Request");
		if (!rq) {
			conn_protocol_error(s, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, why);
			return;
		}
		srv->count[SSEQ_COUNTER_FRAMES_IN]++;
		r = request_run(s, rq, false);
		arena_reset(arena);
		if (r == -EAGAIN) {
			/* The frame stays: it runs again once its stream has room (I3). */
			pause_set(s, PAUSE_WINDOW);
			break;
		}
		if (r == -EBUSY) /* the frame stays, for when half its work completed */
			break;
		if (r == -EPROTO) {
			session_close_after_output(s);
			in->len = 0;
			return;
		}
		off += 4 + len;
	}
	if (off && session_is_connected(s)) { /* a disconnect gave the input buffer back */
		memmove(in->buf, in->buf + off, in->len - off);
		in->len -= off;
		/* What is left is a new frame's start: its deadline counts from now. */
		in->frame_started_ns = in->len ? server_loop_ns(srv) : 0;
	}
}

/* Room for SESSION_READ_CHUNK more input bytes, within --max-input-memory: 0, or
 * -EAGAIN when the session must wait for others to give input memory back. */
static int conn_input_reserve(struct session *s)
{
	struct session_in *in = session_in(s);
	size_t cap;
	uint8_t *b;
	int r;

	if (in->cap - in->len >= SESSION_READ_CHUNK)
		return 0;
	cap = in->cap ? in->cap * 2 : SESSION_INPUT_BASE;
	while (cap - in->len < SESSION_READ_CHUNK)
		cap *= 2;
	r = account_input_check(s, in->cap, cap);
	if (r < 0)
		return r;
	if (!(b = realloc(in->buf, cap)))
		return -ENOMEM;
	account_input_move(s, in->cap, cap);
	in->buf = b;
	in->cap = cap;
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
	struct pollfd p = {.fd = session_fd(s), .events = POLLOUT};
	struct session_follow *follow = session_follow(s);

	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR))) {
		conn_close(s);
		return;
	}
	session_drain(s);
	if (follow->following)
		session_server(s)->nfollowing--;
	follow->following = false;
	session_in(s)->frame_started_ns = 0; /* a partial frame at EOF can never finish */
	out_mark_dirty(s);
}

/* n more bytes in s's input, read from its socket or taken from its ring: the clocks, then
 * what is whole runs. False when the input buffer went back to sessions waiting for input
 * memory (all of it ran): the caller stops taking more for now. */
static bool conn_input_grew(struct session *s, size_t n)
{
	struct session_in *in = session_in(s);
	struct server *srv = session_server(s);

	in->last_read_ns = server_loop_ns(srv);
	if (!in->len)
		in->frame_started_ns = in->last_read_ns;
	in->len += n;
	conn_process(s);
	if (!in->len && srv->input_waiting) {
		conn_input_free(s); /* others wait for input memory */
		return false;
	}
	return true;
}

static void conn_read(struct session *s)
{
	struct session_in *in = session_in(s);
	const struct session_pause *pause = session_pause(s);

	/* Bounded per turn so one busy client cannot starve the others. */
	for (int rounds = 0; rounds < 4 && session_is_connected(s) && !pause_any(pause) &&
		!session_is_closing(s) && !session_is_draining(s);
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
		iov.iov_base = in->buf + in->len;
		iov.iov_len = in->cap - in->len;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		n = recvmsg(session_fd(s), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
				"client %" PRIu64 " (pid %u): read failed: %s", session_id(s),
				session_ident(s)->pid, strerror(errno));
			conn_close(s);
			return;
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			const int *fds = (const int *)(const void *)CMSG_DATA(c);
			for (size_t i = 0; i < nfd; i++) {
				if (in->nfds < SESSION_MAX_FDS)
					in->fds[in->nfds++] = fds[i];
				else
					close(fds[i]); /* more memfds than pending registrations */
			}
		}
		if (n == 0) {
			conn_ring_take(s); /* written before the close */
			if (session_is_connected(s))
				conn_input_ended(s);
			return;
		}
		in->sock_read += (uint64_t)n;
		if (in->ring.hdr) /* in the input: the ring may carry what comes after */
			atomic_store_explicit(
				&in->ring.hdr->sock_read, in->sock_read, memory_order_release);
		if (!conn_input_grew(s, (size_t)n))
			break;
		if ((size_t)n < iov.iov_len)
			break;
	}
}

/* ---- the request ring ---- */

uint64_t conn_sock_read(const struct session *s)
{
	return session_in_const(s)->sock_read;
}

void conn_sock_read_adopt(struct session *s, uint64_t n)
{
	session_in(s)->sock_read = n;
}

void conn_ring_take(struct session *s)
{
	struct session_in *in = session_in(s);
	struct session_ring *rg = &in->ring;
	struct server *srv = session_server(s);

	/* Bounded per call, as a read is, so one busy client cannot starve the others. */
	for (int rounds = 0; rounds < 4 && rg->hdr && session_is_connected(s) &&
		!pause_any(session_pause(s)) && !session_is_closing(s);
		rounds++) {
		const uint64_t tail = atomic_load_explicit(&rg->hdr->tail, memory_order_acquire);
		uint64_t n = tail - rg->head;
		char why[128];
		int r;

		if (!n)
			return;
		if (n > rg->size) {
			snprintf(why, sizeof(why),
				"request ring: tail %" PRIu64 " is more than the ring's %" PRIu64
				" bytes past the head %" PRIu64,
				tail, rg->size, rg->head);
			conn_protocol_error(s, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, why);
			return;
		}
		r = conn_input_reserve(s);
		if (r == -EAGAIN)
			return;
		if (r < 0) {
			conn_close(s);
			return;
		}
		if (n > in->cap - in->len)
			n = in->cap - in->len;
		/* Into the input first: what the client writes to the ring from here on cannot
		 * change what runs. */
		sseq_ring_get(rg->data, rg->size, rg->head, in->buf + in->len, n);
		srv->count[SSEQ_COUNTER_RING_BYTES] += n;
		rg->head += n;
		atomic_store_explicit(&rg->hdr->head, rg->head, memory_order_release);
		if (!conn_input_grew(s, (size_t)n))
			return;
		if (session_is_connected(s))
			out_mark_dirty(s); /* the turn's end writes the answers */
	}
}

void conn_rings_take(struct server *srv)
{
	for (struct session *s = srv->nrings ? srv->sessions : NULL, *next; s; s = next) {
		const struct session_ring *rg = &session_in(s)->ring;

		next = session_next(s);
		/* Work only where the client wrote (the loop's busy time counts it). */
		if (rg->hdr &&
			atomic_load_explicit(&rg->hdr->tail, memory_order_relaxed) != rg->head) {
			const uint64_t t0 = server_busy_begin(srv);

			conn_ring_take(s);
			server_busy_end(srv, t0);
		}
	}
}

void conn_sweep(struct session *s, uint64_t now)
{
	struct session_in *in = session_in(s);
	struct server *srv = session_server(s);
	const struct server_limits *lim = &srv->opts.limits;
	char why[128];

	if (!session_is_connected(s) || session_is_closing(s))
		return;
	if (!session_has_hello(s) && lim->hello_timeout_ms &&
		now - in->accepted_ns > (uint64_t)lim->hello_timeout_ms * 1000000u) {
		srv->count[SSEQ_COUNTER_HELLO_TIMEOUTS]++;
		snprintf(why, sizeof(why), "no Hello within %u ms (--hello-timeout)",
			lim->hello_timeout_ms);
		conn_close_with(s, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, why);
		return;
	}
	/* A pause of the daemon's (PAUSE_HELD: a full window, --client-inflight-limit, the
	 * turn's frames used up) is not the client stalling: the deadline starts again when
	 * it ends (server.c). A pause at --max-input-memory counts: the partial frame holds
	 * memory others wait for, and only the client can finish it. */
	if (in->frame_started_ns && !pause_held(session_pause(s)) && lim->frame_timeout_ms &&
		now - in->frame_started_ns > (uint64_t)lim->frame_timeout_ms * 1000000u) {
		srv->count[SSEQ_COUNTER_FRAME_TIMEOUTS]++;
		snprintf(why, sizeof(why),
			"a frame stalled: %zu bytes of it in %u ms "
			"(--frame-timeout)",
			in->len, lim->frame_timeout_ms);
		conn_close_with(s, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, why);
		return;
	}
	/* An idle connection holds no input memory. */
	if (!in->len && in->cap && now - in->last_read_ns > 1000000000u)
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
		struct session_in *in = session_in(s);

		in->poll_events &= ~UV_DISCONNECT;
		if (in->poll_events)
			uv_poll_start(session_poll(s), in->poll_events, conn_on_io);
		else
			uv_poll_stop(session_poll(s));
	}
	if (events & UV_WRITABLE)
		out_mark_dirty(s);
	if (events & UV_READABLE) {
		conn_read(s);
		conn_ring_take(s); /* a doorbell, or frames before a descriptor's */
	}
	if (session_is_connected(s))
		out_mark_dirty(s);
}

static void conn_on_io(uv_poll_t *poll, int status, int events)
{
	struct session *s = poll->data;
	struct server *srv = session_server(s); /* s may be gone after */
	const uint64_t t0 = server_busy_begin(srv);

	conn_io(s, status, events);
	server_busy_end(srv, t0);
}

struct session *conn_accept(struct server *srv, int fd)
{
	struct session *s = session_new(srv, fd);
	struct session_in *in;

	if (!s)
		return NULL;
	in = session_in(s);
	in->accepted_ns = server_loop_ns(srv);
	in->poll_events = UV_READABLE;
	uv_poll_start(session_poll(s), UV_READABLE, conn_on_io);
	return s;
}

/* libuv has let go of the fd: only now may its number go to a new connection. */
static void conn_poll_closed(uv_handle_t *h)
{
	struct session *s = h->data;

	session_close_fd(s);
	session_unref(s); /* the connection's */
}

void conn_close(struct session *s)
{
	struct session_in *in = session_in(s);
	struct session_follow *follow = session_follow(s);
	const struct session_ident *id = session_ident(s);
	const struct account_counts *counts = session_counts(s);

	if (!session_is_connected(s))
		return;
	session_disconnected(s);
	if (follow->following)
		session_server(s)->nfollowing--;
	follow->following = false;
	pause_forget(s);
	log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
		"client %" PRIu64 " (pid %u, %s%s%s) disconnected: %" PRIu64 " buffers, %" PRIu64
		" ops in flight",
		id->id, id->pid, id->name[0] ? id->name : "unnamed", id->worker[0] ? " " : "",
		id->worker, counts->buffers, counts->inflight);
	/* The fd stays open until the poll handle is closed: closing it first would let
	 * accept() hand its number to a new client whose registration the late close of
	 * this handle then removes from epoll (the new client would never be read). */
	uv_close((uv_handle_t *)session_poll(s), conn_poll_closed);
	ring_detach(s); /* before session_end lets its arena go */
	conn_input_free(s);
	for (unsigned i = 0; i < in->nfds; i++)
		close(in->fds[i]);
	in->nfds = 0;
	session_end(s);
}
