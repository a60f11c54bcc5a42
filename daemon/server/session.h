/* A client session: one connection, its handles (buffers, slices, staging arenas, modules), its
 * framed input and coalesced output. Everything here runs on the loop thread. */
#ifndef SSEQ_SESSION_H
#define SSEQ_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "account.h"
#include "arena.h"
#include "handles.h"
#include "log.h"
#include "server.h"

/* Lanes a session may ask for in Hello. */
#define SESSION_MAX_LANES 8

/* Whom a log line about session s is about: the journal's SSEQ_SESSION= and SSEQ_WORKER=
 * (log_about). The message still names the client itself, for stderr. */
#define SESSION_WHO(s)                                                                             \
	(&(struct log_who){.session = session_ident(s)->id, .worker = session_ident(s)->worker})

/* A session is private to its module (session-private.h): other files read it through
 * the accessors below, and the parts they keep in it come as one struct each. */
struct session;

/* Who the client is: its ids from SO_PEERCRED, its name and worker from Hello. */
struct session_ident {
	uint64_t id;
	uint32_t pid, uid;
	char name[64];
	char worker[32];
};

/* Why its input is paused, and the lists that hold it until it runs again: pause.h. */
struct session_pause;
/* Its output not yet written, and its place on the list of those to write: out.h. */
struct session_out;
/* Its input not yet run, the descriptors that came with it, its deadlines: conn.h. */
struct session_in;

/* What its ops need of it: whether its kernels run alone, its last op per stream. */
struct session_work {
	bool isolated; /* a suspect of a device reset: its kernels run alone (--isolate-faults) */
	uint64_t last_point[SEQ_MAX_STREAMS]; /* this session's last op per stream, for Sync */
};

/* A TRACE query with follow: new entries go out under tag each turn (trace.c). */
struct session_follow {
	bool following;
	uint64_t tag, since;
	uint64_t dropped; /* entries not sent since the last answer */
};

struct server *session_server(const struct session *s);
uint64_t session_id(const struct session *s);
const struct session_ident *session_ident(const struct session *s);
struct account_counts *session_counts(struct session *s);
struct session_pause *session_pause(struct session *s);
struct session_work *session_work(struct session *s);
struct session_follow *session_follow(struct session *s);
/* Its input, its output and its handle table, each changed by its own module alone
 * (conn.c, out.c, handles.c); the _const ones for reading. */
struct session_in *session_in(struct session *s);
const struct session_in *session_in_const(const struct session *s);
struct session_out *session_out(struct session *s);
const struct session_out *session_out_const(const struct session *s);
struct handle_table *session_handles(struct session *s);
const struct handle_table *session_handles_const(const struct session *s);
/* The connection's socket. */
int session_fd(const struct session *s);
/* libuv let go of the socket (conn_close): it is closed, and its number may go to a new
 * connection from now on. */
void session_close_fd(struct session *s);
/* The connection's poll handle (conn.c starts, changes and closes it). */
uv_poll_t *session_poll(struct session *s);
/* It closes once its output is written (conn_flush). */
void session_close_after_output(struct session *s);
/* It answered its last: closed once its output is written, and nothing more is read. */
bool session_is_closing(const struct session *s);
/* One frame's unpacked request and replies, reset after each frame (or answer). */
struct arena *session_arena(struct session *s);
/* Its lanes (compute stream numbers, in its order); *n their count. */
const uint32_t *session_lanes(const struct session *s, uint32_t *n);
/* Still connected: what is sent to it is written. */
bool session_is_connected(const struct session *s);
/* Connected, and the client closed its sending side: it closes once its work is done. */
bool session_is_draining(const struct session *s);
/* The client closed its sending side (EOF): nothing more is read; draining from now on. */
void session_drain(struct session *s);
/* The connection is gone (conn_close): nothing more is sent to it. */
void session_disconnected(struct session *s);
/* It has said Hello. */
bool session_has_hello(const struct session *s);
/* The next session of srv->sessions' list, or NULL. */
struct session *session_next(const struct session *s);
/* The oldest descriptor the client sent (SCM_RIGHTS) that no request took yet: now the
 * caller's; -1 if none. */
int session_take_fd(struct session *s);
/* A ref for an object that lives past the connection (an op record, a buffer still in
 * use): dropped with session_unref. */
void session_ref(struct session *s);

/* A session for the connection fd (conn_accept): linked into srv's list, its poll handle
 * ready (session_poll; conn_accept starts it); NULL without memory. */
struct session *session_new(struct server *srv, int fd);
/* The connection closed (conn_close): release everything the client owned, each handle by
 * its kind's release (deferred as the sequencer requires), and leave srv's list. */
void session_end(struct session *s);
/* It holds a place in the loops' admission (loops.h), given back when it ends. */
void session_admitted(struct session *s);
/* Hello: the session's name, worker and lanes, answered with Welcome. */
int session_req_hello(struct session *s, const Sseq__Request *rq);
/* Drop a ref (the connection's, or an op record's): freed at the last. */
void session_unref(struct session *s);

/* What inspection (query.c) may know of a session: it reads sessions only through these
 * accessors, never through struct session. The strings live as long as the session. */
struct session_info {
	uint64_t id;
	uint32_t pid, uid;
	const char *name, *worker;
	uint64_t buffers, bytes, inflight, stagings, staging_bytes;
	uint32_t handles; /* live handles of every kind */
	const uint32_t *lanes; /* its lanes (compute stream numbers), in its order */
	uint32_t nlanes;
};
void session_info(const struct session *s, struct session_info *info);
/* Whether `asker` may see session s's details: root and the same user see every session
 * (I10). */
bool session_may_see(const struct session_info *asker, const struct session_info *s);
/* fn(s, arg) for every connected session, newest first. */
void session_foreach(struct server *srv, void (*fn)(const struct session *s, void *arg), void *arg);

/* A buffer or slice handle of a session, for inspection. */
struct session_buffer {
	uint64_t handle;
	const char *label;
	const struct seq_buffer *buf; /* as the handle names it: a base or a slice */
	uint64_t base_handle; /* a slice's base's handle, 0 if a base or the base has none */
};
/* fn(b, arg) for every buffer and slice handle of s, in handle order. */
void session_foreach_buffer(
	const struct session *s, void (*fn)(const struct session_buffer *b, void *arg), void *arg);

#endif
