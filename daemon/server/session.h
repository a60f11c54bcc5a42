/* A client session: one connection, its handles (buffers, slices, staging arenas, modules), its
 * framed input and coalesced output. Everything here runs on the loop thread. */
#ifndef SSEQ_SESSION_H
#define SSEQ_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "arena.h"
#include "handles.h"
#include "log.h"
#include "server.h"

/* Lanes a session may ask for in Hello. */
#define SESSION_MAX_LANES 8

/* Whom a log line about session s is about: the journal's SSEQ_SESSION= and SSEQ_WORKER=
 * (log_about). The message still names the client itself, for stderr. */
#define SESSION_WHO(s) (&(struct log_who){.session = (s)->id, .worker = (s)->worker})

struct session {
	struct server *srv;
	struct session *prev, *next;
	struct session *next_dirty;
	bool dirty;
	uint64_t id;
	int fd;
	uv_poll_t poll;
	int poll_events;
	unsigned refs; /* 1 while connected + one per op record */
	bool connected;
	bool closing; /* close once the output is written */
	/* The client closed its sending side (or died): read nothing more; close once the
	 * work in flight completed and its output is written (a half-close keeps its
	 * Completions). */
	bool eof;
	bool input_wait; /* paused until input memory frees (--max-input-memory) */
	bool inflight_capped; /* at --client-inflight-limit: paused until half completed */
	bool resume; /* on srv->resume: process its buffered input again */
	bool hello;
	bool isolated; /* a suspect of a device reset: its kernels run alone (--isolate-faults) */
	bool blocked; /* a stream's window is full: input paused (I3) */
	uint32_t blocked_stream; /* ... that one (SEQ_MAX_STREAMS: not named) */
	struct session *blocked_next, **blocked_pprev; /* on srv->blocked[blocked_stream] */
	struct session *resume_next, **resume_pprev; /* on srv->resume */
	uint32_t batch_resume; /* inner requests of the held batch already done */

	uint32_t pid, uid;
	char name[64];
	char worker[32];

	uint8_t *in;
	size_t in_len, in_cap;
	uint64_t accepted_ns; /* for the Hello deadline */
	uint64_t frame_started_ns; /* the oldest unfinished frame's first byte, 0 if none */
	uint64_t last_read_ns; /* for giving back an idle connection's input buffer */
	int fds[SESSION_MAX_FDS];
	unsigned nfds;

	uint8_t *out;
	size_t out_len, out_off, out_cap;

	struct arena arena; /* one frame's unpacked request and replies */

	struct handle_slot *slots;
	uint32_t nslots, free_slot; /* free_slot: index + 1, 0 = none */
	uint32_t nhandles; /* live ones, for --client-handle-limit */

	uint64_t buffers, bytes, inflight, stagings, staging_bytes, modules;
	uint64_t last_point[SEQ_MAX_STREAMS]; /* this session's last op per stream, for Sync */
	/* Its lanes from Hello: a request's lane index k runs on compute stream lanes[k] (and
	 * stream lanes[k] mod the pool's size of the copy pools). */
	uint32_t nlanes;
	uint32_t lanes[SESSION_MAX_LANES];

	/* A TRACE query with follow: new entries go out under follow_tag each turn. */
	bool following;
	uint64_t follow_tag, follow_since;
	uint64_t follow_dropped; /* entries not sent since the last answer */
};

/* A session for the connection fd (conn_accept): linked into srv's list, polled for
 * input by on_io; NULL without memory. */
struct session *session_new(struct server *srv, int fd, uv_poll_cb on_io);
/* The connection closed (conn_close): release everything the client owned, each handle by
 * its kind's release (deferred as the sequencer requires), and leave srv's list. */
void session_end(struct session *s);
/* Hello: the session's name, worker and lanes, answered with Welcome. */
int session_req_hello(struct session *s, const Sseq__Request *rq);
/* 0, or the -ENOSPC refusal (outcome_error) of a session at --client-handle-limit. */
int session_handle_limit(struct session *s);
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
