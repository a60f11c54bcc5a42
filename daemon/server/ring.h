/* A session's request ring (RequestRing, protocol 1.15): frames the client writes into one
 * of its staging arenas instead of sending them, the same stream as its socket's
 * (proto/sseq-ring.h). This module names it, publishes what the client reads from its
 * header, and tells the loop's clients whether the loop looks at their rings unasked;
 * conn.c takes the bytes into the session's input. */
#ifndef SSEQ_RING_MODULE_H
#define SSEQ_RING_MODULE_H

#include <stdbool.h>
#include <stdint.h>

#include "sseq-ring.h"
#include "sseq.pb-c.h"

struct server;
struct session;

/* Embedded in the session's input (conn.h). A zeroed one is no ring. */
struct session_ring {
	struct sseq_ring_header *hdr; /* NULL: no ring */
	uint8_t *data;
	uint64_t size; /* a power of two */
	uint64_t head; /* bytes taken into the input so far: the daemon's own count */
	uint64_t staging; /* the arena's handle, which stays registered meanwhile */
	uint64_t offset; /* the header's place in it */
};

/* RequestRing: checked (size, alignment, the arena's range) and named. */
int ring_req_name(struct session *s, const Sseq__Request *rq);
/* 0, or the refusal of a StagingUnregister of the arena that holds s's ring. */
int ring_holds(struct session *s, uint64_t staging);
/* s's ring, or NULL. */
const struct session_ring *ring_get(const struct session *s);
/* s reads from hdr (size data bytes after it, in the arena `staging` at `offset`) from
 * `head` on (a restart in place goes on where the old process stopped). */
void ring_attach(struct session *s, struct sseq_ring_header *hdr, uint64_t size, uint64_t staging,
	uint64_t offset, uint64_t head);
/* The session ends: its ring is no longer read (before its arena goes). */
void ring_detach(struct session *s);
/* Tell the clients of the loop's rings whether the loop looks at them unasked. Before it
 * sleeps (awake false) the caller takes them all once more, after a fence: a client that
 * wrote before it saw 0 rang no doorbell. */
void ring_awake_all(struct server *srv, bool awake);

#endif
