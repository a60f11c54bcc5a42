/* A session's output: Replies, Completions and notices, coalesced into its output buffer
 * and written at the end of the loop turn. */
#ifndef SSEQ_OUT_H
#define SSEQ_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "sequencer.h"
#include "sseq.pb-c.h"

struct server;
struct session;

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
/* Write what s's output holds, as far as the socket takes it: 0 (all written, or the rest
 * waits for writability), or the negative errno the write failed with. */
int out_write(struct session *s);
/* Bytes of output not yet written. */
size_t out_pending(const struct session *s);
/* The next session with output to write this turn, taken off the list; NULL at its end. */
struct session *out_next_dirty(struct server *srv);

#endif
