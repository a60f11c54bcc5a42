/* A session's output: Replies, Completions and notices, coalesced into its output buffer
 * and written at the end of the loop turn. */
#ifndef SSEQ_OUT_H
#define SSEQ_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "sequencer.h"
#include "sseq.pb-c.h"

struct server;
struct session;

/* A session's output, embedded in its session (session.c) and changed by this module
 * alone: the bytes packed and not yet written, and its place on the server's list of
 * sessions to write this turn. A zeroed one is empty. */
struct session_out {
	uint8_t *buf;
	size_t len, off, cap; /* buf[off..len) is not written yet */
	bool dirty; /* on the server's list (srv->dirty) */
	struct session *next_dirty;
};

/* Its memory freed (the session's last reference went). Inline: session.c frees its
 * parts without calling out.c, which reads the session through its accessors. */
static inline void out_finish(struct session_out *o)
{
	free(o->buf);
	*o = (struct session_out){0};
}

/* s has output to write this turn (or its poll events to change): on the server's list. */
void out_mark_dirty(struct session *s);
/* m, framed, into s's output; nothing once s is disconnected. */
void out_send(struct session *s, const Sseq__Message *m);
void out_reply_full(struct session *s, uint64_t tag, Sseq__Status status, const char *message,
	uint64_t handle, const struct seq_point *at, Sseq__Welcome *welcome);
void out_reply(struct session *s, uint64_t tag, Sseq__Status status, const char *message);
/* The Reply to ModuleGlobal, with the new handle and the global's size. */
void out_reply_sized(struct session *s, uint64_t tag, uint64_t handle, uint64_t size);
/* A daemon-originated Reply (tag 0): shutdown notices. */
void out_notice(struct session *s, Sseq__Status status, const char *message);
void out_complete(struct session *s, uint64_t tag, Sseq__Status status, const char *message,
	struct seq_point at);
/* Write what s's output holds, as far as the socket takes it: 0 (all written, and the
 * buffer starts over, or the rest waits for writability), or the negative errno the write
 * failed with. */
int out_write(struct session *s);
/* Bytes of output not yet written. */
size_t out_pending(const struct session *s);
/* The restart in place (session-handover.c) hands the output not yet written over: its
 * bytes, out_pending(s) of them (NULL when there are none). */
const uint8_t *out_unwritten(const struct session *s);
/* The new process takes n of them over into s, which has no output yet: room for them
 * in a buffer of its own, or NULL; out_adopted(s, n) once they are in. */
uint8_t *out_adopt(struct session *s, size_t n);
void out_adopted(struct session *s, size_t n);
/* The next session with output to write this turn, taken off the list; NULL at its end. */
struct session *out_next_dirty(struct server *srv);

#endif
