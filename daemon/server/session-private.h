/* struct session, private to the session module: session.c (lifetime, accessors),
 * session-req.c (Hello, lanes) and session-handover.c (its record across a restart in
 * place). Every other file reads a session through session.h's accessors; its input
 * (conn.h), its output (out.h) and its handle table (handles.h) are embedded here but
 * changed by their own modules alone. */
#ifndef SSEQ_SESSION_PRIVATE_H
#define SSEQ_SESSION_PRIVATE_H

#include "conn.h"
#include "handles.h"
#include "out.h"
#include "pause.h"
#include "session.h"

struct session {
	struct server *srv;
	struct session *prev, *next;
	int fd;
	uv_poll_t poll; /* conn.c starts, changes and closes it */
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

	struct session_in in; /* conn.c's */
	struct session_out out; /* out.c's */

	struct arena arena; /* one frame's unpacked request and replies */

	struct handle_table handles; /* handles.c's */

	struct account_counts counts;
	/* Its lanes from Hello: a request's lane index k runs on compute stream lanes[k] (and
	 * stream lanes[k] mod the pool's size of the copy pools). */
	uint32_t nlanes;
	uint32_t lanes[SESSION_MAX_LANES];

	struct session_follow follow;
};

#endif
