/* Buffers and slices: a client's handles on the core's buffers, and what they count
 * against --client-memory-limit. */
#ifndef SSEQ_BUFFER_H
#define SSEQ_BUFFER_H

#include <stdint.h>

#include "account.h"
#include "sseq.pb-c.h"

struct seq_buffer;
struct session;

/* A client's buffer or slice handle. */
struct sbuf {
	struct seq_buffer *buf;
	uint64_t handle;
	struct session *owner;
	struct account_rec held; /* a base's memory, held until it goes back */
	char label[48];
};

/* A handle of s for b (a base or a slice) labelled `label`, holding `memory` bytes of
 * device memory (account.h) until they go back: the client's `name` for it (checked free),
 * or one the daemon picks (name 0). 0 with *handle, or -ENOMEM. */
int buffer_new(struct session *s, struct seq_buffer *b, const char *label, uint64_t memory,
	uint64_t name, uint64_t *handle);
/* sb's handle is gone: the core frees b once idle; a base's memory counts until then. */
void buffer_release(struct session *s, struct sbuf *sb);
/* The buffer `handle` names, with [off, off + len) inside it: 0 with *out, or the
 * refusal (`what`: "source", "destination"). */
int buffer_range(struct session *s, uint64_t handle, uint64_t off, uint64_t len, const char *what,
	struct sbuf **out);
/* Alloc, Free and Slice (the client may name the new handle: handles.h). */
int buffer_req_alloc(struct session *s, const Sseq__Request *rq);
int buffer_req_free(struct session *s, const Sseq__Request *rq);
int buffer_req_slice(struct session *s, const Sseq__Request *rq);
/* Register the release of a buffer handle (handles_on_release). */
void buffer_register_kind(void);

#endif
