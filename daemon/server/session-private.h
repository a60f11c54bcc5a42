/* struct session, private to the session module: session.c (lifetime, accessors),
 * session-req.c (Hello, lanes), session-handover.c (its record across a restart
 * in place) and the connection it wraps, conn.c (input). Every other file reads a session
 * through session.h's accessors; its output (out.h) and its handle table (handles.h) are
 * embedded here but changed by their own modules alone. */
#ifndef SSEQ_SESSION_PRIVATE_H
#define SSEQ_SESSION_PRIVATE_H

#include "handles.h"
#include "out.h"
#include "pause.h"
#include "session.h"

struct session {
	struct server *srv;
	struct session *prev, *next;
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
	bool hello;
	bool admitted; /* counted in the loops' admission (loops_admit, loops_join) */
	struct session_pause pause; /* why its input is paused (pause.h) */
	struct session_work work;

	struct session_ident ident;

	uint8_t *in;
	size_t in_len, in_cap;
	uint64_t accepted_ns; /* for the Hello deadline */
	uint64_t frame_started_ns; /* the oldest unfinished frame's first byte, 0 if none */
	uint64_t last_read_ns; /* for giving back an idle connection's input buffer */
	int fds[SESSION_MAX_FDS];
	unsigned nfds;

	struct session_out out; /* out.c's */

	struct arena arena; /* one frame's unpacked request and replies */

	struct handle_table handles; /* handles.c's */

	struct session_counts counts;
	/* Its lanes from Hello: a request's lane index k runs on compute stream lanes[k] (and
	 * stream lanes[k] mod the pool's size of the copy pools). */
	uint32_t nlanes;
	uint32_t lanes[SESSION_MAX_LANES];

	struct session_follow follow;
};

#endif
