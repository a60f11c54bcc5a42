/* Backpressure's lists: which sessions are paused, on what, and which wait to be processed
 * again at the server's next turn. */
#ifndef SSEQ_PAUSE_H
#define SSEQ_PAUSE_H

struct server;
struct session;

/* A request of s found its stream's window full (-EAGAIN): stop reading s until that
 * stream falls below half its window (ops_submit named it in s->blocked_stream). */
void pause_block(struct server *srv, struct session *s);
/* Process what s has buffered (it was paused) once this turn's completions are in. */
void pause_resume(struct server *srv, struct session *s);
/* Off the blocked and resume lists, not blocked: s is going away, or resumes now. */
void pause_forget(struct server *srv, struct session *s);

#endif
