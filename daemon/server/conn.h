/* A session's connection: its socket's input (recvmsg with SCM_RIGHTS, framing, the input
 * memory budget, EOF and half-close), when to write its output and what to poll for, and
 * the deadlines the sweep enforces. */
#ifndef SSEQ_CONN_H
#define SSEQ_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct server;
struct session;

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

#endif
