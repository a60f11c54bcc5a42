/* A session's connection: its socket's input (recvmsg with SCM_RIGHTS, framing, the input
 * memory budget, EOF and half-close), when to write its output and what to poll for, and
 * the deadlines the sweep enforces. */
#ifndef SSEQ_CONN_H
#define SSEQ_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <uv.h>

#include "ring.h"
#include "server.h"

struct session;

/* A session's input, embedded in its session (session.c) and changed by this module
 * alone: the bytes read and not yet run, the descriptors that came with them, the
 * deadlines' clocks, and what its socket is polled for. A zeroed one is empty. */
struct session_in {
	uint8_t *buf;
	size_t len, cap; /* buf[0..len) is read and not yet run */
	uint64_t accepted_ns; /* for the Hello deadline */
	uint64_t frame_started_ns; /* the oldest unfinished frame's first byte, 0 if none */
	uint64_t last_read_ns; /* for giving back an idle connection's input buffer */
	int fds[SESSION_MAX_FDS]; /* received (SCM_RIGHTS), not yet taken, oldest first */
	unsigned nfds;
	int poll_events; /* what the session's poll handle watches now */
	uint64_t sock_read; /* bytes read from the socket since the session began */
	struct session_ring ring; /* ring.c names it; this module takes from it */
};

/* The oldest descriptor in `in` that no request took yet, now the caller's; -1 if none.
 * Inline: session.c hands it out (session_take_fd) without calling conn.c. */
static inline int conn_take_fd(struct session_in *in)
{
	int fd;

	if (in->nfds == 0)
		return -1;
	fd = in->fds[0];
	memmove(in->fds, in->fds + 1, --in->nfds * sizeof(int));
	return fd;
}

/* A session for an accepted connection fd, read from now on: NULL without memory. */
struct session *conn_accept(struct server *srv, int fd);
/* The connection is gone (EOF, error, protocol violation, kill -9): stop reading, close
 * it once libuv lets go of the fd, free everything the client owned (session_end) and drop
 * the connection's ref. */
void conn_close(struct session *s);
/* Parse and run buffered frames until none is whole, the window fills, or it closes. */
void conn_process(struct session *s);
/* The daemon paused s (not the client): a frame held back gets its whole --frame-timeout
 * from now. */
void conn_frame_restart(struct session *s);
/* Write out what this turn produced; poll for input unless paused (or close). */
void conn_flush(struct session *s);
/* Once a second (server sweep): enforce the Hello and partial-frame deadlines and give
 * back an idle connection's input buffer. */
void conn_sweep(struct session *s, uint64_t now_ns);
/* Resume reading a session paused at the input memory limit. */
void conn_input_resume(struct session *s);
/* Give the input buffer back (the session ended, or it sat idle). */
void conn_input_free(struct session *s);
/* s's input buffer becomes `in` (malloc'd, len bytes read but not yet run: a restart in
 * place hands them over), counted against the input budget as a live read's buffer is. */
void conn_input_adopt(struct session *s, uint8_t *in, size_t len);

/* Take what the client wrote to s's ring into its input and run it, as a read of the
 * socket does (not while paused: the resume takes it). */
void conn_ring_take(struct session *s);
/* Every ring of the loop's sessions: take what they hold (while the loop spins, and before
 * it sleeps). */
void conn_rings_take(struct server *srv);
/* Bytes read from s's socket so far (a restart in place goes on counting), and the new
 * process's adoption of that count. */
uint64_t conn_sock_read(const struct session *s);
void conn_sock_read_adopt(struct session *s, uint64_t n);

/* The restart in place (session-handover.c) carries the input across as it is. */
/* The bytes read and not yet run: *n of them (NULL when there are none). */
const uint8_t *conn_input_unread(const struct session *s, size_t *n);
/* The descriptors received and not yet taken, oldest first: *n of them. */
const int *conn_fds_held(const struct session *s, unsigned *n);
/* When the connection was accepted (loop clock), for its Hello deadline. */
uint64_t conn_accepted_ns(const struct session *s);
/* The new process takes over what a session held: accepted at accepted_ns (its Hello
 * deadline runs on), with n descriptors (at most SESSION_MAX_FDS) held in order. */
void conn_adopt(struct session *s, uint64_t accepted_ns, const int *fds, unsigned n);

#endif
