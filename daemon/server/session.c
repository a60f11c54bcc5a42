/* A client session's lifetime: created at accept, what other modules and inspection may
 * read of it (its accessors, session_info, session_foreach), and the release of everything
 * it owned when the connection goes (each handle by its kind's release, handles.c). It calls
 * only leaves (arena.c, handles.c), so that every module may read a session through it. */
#include "session-private.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buffer.h"
#include "handles.h"

struct server *session_server(const struct session *s)
{
	return s->srv;
}

uint64_t session_id(const struct session *s)
{
	return s->ident.id;
}

const struct session_ident *session_ident(const struct session *s)
{
	return &s->ident;
}

struct account_counts *session_counts(struct session *s)
{
	return &s->counts;
}

struct session_pause *session_pause(struct session *s)
{
	return &s->pause;
}

struct session_work *session_work(struct session *s)
{
	return &s->work;
}

struct session_follow *session_follow(struct session *s)
{
	return &s->follow;
}

struct session_in *session_in(struct session *s)
{
	return &s->in;
}

const struct session_in *session_in_const(const struct session *s)
{
	return &s->in;
}

struct session_out *session_out(struct session *s)
{
	return &s->out;
}

const struct session_out *session_out_const(const struct session *s)
{
	return &s->out;
}

struct handle_table *session_handles(struct session *s)
{
	return &s->handles;
}

const struct handle_table *session_handles_const(const struct session *s)
{
	return &s->handles;
}

int session_fd(const struct session *s)
{
	return s->fd;
}

void session_close_fd(struct session *s)
{
	close(s->fd);
	s->fd = -1;
}

uv_poll_t *session_poll(struct session *s)
{
	return &s->poll;
}

void session_close_after_output(struct session *s)
{
	s->closing = true;
}

bool session_is_closing(const struct session *s)
{
	return s->closing;
}

struct arena *session_arena(struct session *s)
{
	return &s->arena;
}

const uint32_t *session_lanes(const struct session *s, uint32_t *n)
{
	*n = s->nlanes;
	return s->lanes;
}

bool session_is_connected(const struct session *s)
{
	return s->connected;
}

bool session_is_draining(const struct session *s)
{
	return s->eof && s->connected;
}

void session_drain(struct session *s)
{
	s->eof = true;
}

void session_disconnected(struct session *s)
{
	s->connected = false;
}

bool session_has_hello(const struct session *s)
{
	return s->hello;
}

struct session *session_next(const struct session *s)
{
	return s->next;
}

int session_take_fd(struct session *s)
{
	return conn_take_fd(&s->in);
}

void session_ref(struct session *s)
{
	s->refs++;
}

void session_info(const struct session *s, struct session_info *info)
{
	*info = (struct session_info){
		.id = s->ident.id,
		.pid = s->ident.pid,
		.uid = s->ident.uid,
		.name = s->ident.name,
		.worker = s->ident.worker,
		.buffers = s->counts.buffers,
		.bytes = s->counts.bytes,
		.inflight = s->counts.inflight,
		.stagings = s->counts.stagings,
		.staging_bytes = s->counts.staging_bytes,
		.handles = (uint32_t)handles_count(&s->handles),
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

struct session_each_buffer {
	void (*fn)(const struct session_buffer *b, void *arg);
	void *arg;
};

static void session_each_buffer_one(void *obj, void *arg)
{
	const struct session_each_buffer *e = arg;
	const struct sbuf *sb = obj;
	const struct seq_buffer *base = sb->buf->base;
	struct session_buffer b = {
		.handle = sb->handle,
		.label = sb->label,
		.buf = sb->buf,
		.base_handle = base && base->user
			? ((const struct sbuf *)(uintptr_t)base->user)->handle
			: 0,
	};

	e->fn(&b, e->arg);
}

void session_foreach_buffer(
	const struct session *s, void (*fn)(const struct session_buffer *b, void *arg), void *arg)
{
	/* Both arrays: the handles the daemon picked and those the client named. */
	handles_foreach(&s->handles, HANDLE_BUFFER, session_each_buffer_one,
		&(struct session_each_buffer){.fn = fn, .arg = arg});
}

struct session *session_new(struct server *srv, int fd)
{
	struct session *s = calloc(1, sizeof(*s));
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!s)
		return NULL;
	s->srv = srv;
	s->fd = fd;
	s->ident.id = loops_session_id(srv->loops);
	s->refs = 1;
	s->connected = true;
	arena_init(&s->arena);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		s->ident.pid = (uint32_t)cred.pid;
		s->ident.uid = cred.uid;
	}
	if (uv_poll_init(srv->loop, &s->poll, fd) < 0) {
		free(s);
		return NULL;
	}
	s->poll.data = s;
	s->next = srv->sessions;
	if (srv->sessions)
		srv->sessions->prev = s;
	srv->sessions = s;
	srv->nsessions++;
	srv->count[SSEQ_COUNTER_SESSIONS_TOTAL]++;
	return s;
}

void session_unref(struct session *s)
{
	if (--s->refs > 0)
		return;
	arena_finish(&s->arena);
	out_finish(&s->out);
	handles_finish(&s->handles);
	free(s);
}

void session_end(struct session *s)
{
	struct server *srv = s->srv;

	handles_release_all(&s->handles, s);
	if (s->prev)
		s->prev->next = s->next;
	else
		srv->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
	srv->nsessions--;
	if (s->admitted)
		loops_leave(srv->loops, srv->loop_index, s->ident.uid);
	s->admitted = false;
}

void session_admitted(struct session *s)
{
	s->admitted = true;
}
