/* The timeline: a bounded ring of completed operations with when each was issued, ran
 * and was seen complete, and the dependencies it passed (sseqctl trace --chrome). An op
 * in flight carries its part (struct timeline_op, in its op record) until its point
 * completes; only then does it take a slot, so the ring holds finished work only. */
#ifndef SSEQ_TIMELINE_H
#define SSEQ_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>

#include "sequencer.h"

#define TIMELINE_RING 4096
#define TIMELINE_WAITS 8 /* dependencies kept per op; the rest are counted */
#define TIMELINE_LABEL 32

enum timeline_dep_how {
	TIMELINE_DEP_WAIT, /* an event wait was enqueued */
	TIMELINE_DEP_OBSERVED, /* elided: the producer was seen complete */
	TIMELINE_DEP_LEGACY, /* elided by the injected legacy bug */
};

enum timeline_timing {
	TIMELINE_OBSERVED, /* start and end as the daemon saw them */
	TIMELINE_DEVICE, /* the backend's own timestamps */
};

struct timeline_dep {
	struct seq_point producer;
	uint8_t how; /* enum timeline_dep_how */
};

/* What an op in flight has gathered: its issue time and the dependencies the core
 * decided for it before the launch. Only the first ndeps of deps[] are ever read. */
struct timeline_op {
	uint64_t issue_ns;
	uint8_t kind; /* enum seq_op_kind */
	uint8_t ndeps;
	uint8_t deps_dropped;
	struct timeline_dep deps[TIMELINE_WAITS];
};

/* A completed op. Times are CLOCK_MONOTONIC ns. */
struct timeline_ent {
	uint64_t seq; /* entry number, from 1 */
	struct seq_point at;
	uint64_t session;
	uint64_t tag;
	uint32_t uid, pid;
	int status;
	uint8_t kind; /* enum seq_op_kind */
	uint8_t timing; /* enum timeline_timing */
	uint8_t ndeps, deps_dropped;
	uint64_t issue_ns, start_ns, end_ns, complete_ns;
	/* Device timing: how far start and end may lie from the host clock's instants
	 * (the backend's mapping of its clock onto the host's); 0 when observed. */
	uint64_t clock_error_ns;
	char worker[TIMELINE_LABEL];
	char kernel[TIMELINE_LABEL];
	struct timeline_dep deps[TIMELINE_WAITS];
};

struct timeline {
	struct timeline_ent *ring;
	unsigned capacity; /* a power of two */
	uint64_t last; /* the newest entry's seq; 0 when none */
	/* Per stream: the end of its last completed op, which an observed op cannot have
	 * started before (a stream runs in order). */
	uint64_t stream_end[SEQ_MAX_STREAMS];
};

/* A ring of at least `capacity` entries (TIMELINE_RING when 0; rounded up to a power
 * of two): 0 or -ENOMEM. */
int timeline_init(struct timeline *t, unsigned capacity);
void timeline_finish(struct timeline *t);

/* At submit: the op's kind and issue time, no dependencies yet. */
static inline void timeline_op_begin(struct timeline_op *op, uint8_t kind, uint64_t now_ns)
{
	op->issue_ns = now_ns;
	op->kind = kind;
	op->ndeps = 0;
	op->deps_dropped = 0;
}

/* A dependency the core decided for the op being submitted (once per producer). */
void timeline_op_dep(struct timeline_op *op, struct seq_point producer, enum timeline_dep_how how);

/* The op at `at` completed, seen at complete_ns: a new entry (the oldest is overwritten
 * when the ring is full) with op's issue time and dependencies, its start and end from
 * device[0..1] when the backend had them (device may be NULL; device[2] their error
 * bound on the host clock), else as observed. The
 * caller fills in who ran it (session, tag, uid, pid, status, worker, kernel). */
struct timeline_ent *timeline_add(struct timeline *t, struct seq_point at,
	const struct timeline_op *op, uint64_t complete_ns, const uint64_t *device);

/* Entry seqno if the ring still holds it, else NULL. */
const struct timeline_ent *timeline_get(const struct timeline *t, uint64_t seqno);
/* The oldest entry the ring holds (last + 1 when empty). */
uint64_t timeline_first(const struct timeline *t);

const char *timeline_dep_how_name(enum timeline_dep_how how);

#endif
