/* The timeline ring of completed operations (timeline.h). Filled on the loop thread at
 * each op's completion from what its op record gathered at submit; read by the
 * TIMELINE query. No allocation after init. */
#include "timeline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int timeline_init(struct timeline *t, unsigned capacity)
{
	memset(t, 0, sizeof(*t));
	/* A power of two, so that a slot is a mask away, not a division. */
	for (t->capacity = 1; t->capacity < (capacity ? capacity : TIMELINE_RING);)
		t->capacity <<= 1;
	t->ring = calloc(t->capacity, sizeof(*t->ring));
	return t->ring ? 0 : -ENOMEM;
}

void timeline_finish(struct timeline *t)
{
	free(t->ring);
	t->ring = NULL;
	t->capacity = 0;
}

void timeline_op_dep(struct timeline_op *op, struct seq_point producer, enum timeline_dep_how how)
{
	/* Two buffers written by one producer are one dependency. */
	for (unsigned i = 0; i < op->ndeps; i++)
		if (op->deps[i].producer.stream == producer.stream &&
			op->deps[i].producer.seq == producer.seq)
			return;
	if (op->ndeps == TIMELINE_WAITS) {
		if (op->deps_dropped < UINT8_MAX)
			op->deps_dropped++;
		return;
	}
	op->deps[op->ndeps].producer = producer;
	op->deps[op->ndeps].how = (uint8_t)how;
	op->ndeps++;
}

struct timeline_ent *timeline_add(struct timeline *t, struct seq_point at,
	const struct timeline_op *op, uint64_t complete_ns, const uint64_t *device)
{
	const uint64_t seqno = ++t->last;
	struct timeline_ent *e = &t->ring[seqno & (t->capacity - 1)];
	uint64_t *stream_end = at.stream < SEQ_MAX_STREAMS ? &t->stream_end[at.stream] : NULL;

	e->seq = seqno;
	e->at = at;
	e->kind = op->kind;
	e->issue_ns = op->issue_ns;
	e->complete_ns = complete_ns;
	e->ndeps = op->ndeps;
	e->deps_dropped = op->deps_dropped;
	for (unsigned i = 0; i < op->ndeps; i++) /* mostly none or one: no memcpy call */
		e->deps[i] = op->deps[i];
	if (device && device[0] <= device[1]) {
		e->timing = TIMELINE_DEVICE;
		e->start_ns = device[0];
		e->end_ns = device[1];
		e->clock_error_ns = device[2];
	} else {
		/* An in-order stream ran it after its previous op ended; the end is when the
		 * completion was seen, an upper bound. */
		e->timing = TIMELINE_OBSERVED;
		e->clock_error_ns = 0;
		e->start_ns = op->issue_ns;
		if (stream_end && *stream_end > e->start_ns)
			e->start_ns = *stream_end;
		if (e->start_ns > complete_ns)
			e->start_ns = complete_ns;
		e->end_ns = complete_ns;
	}
	if (stream_end && e->end_ns > *stream_end)
		*stream_end = e->end_ns;
	return e;
}

uint64_t timeline_first(const struct timeline *t)
{
	return t->last >= t->capacity ? t->last - t->capacity + 1 : 1;
}

const struct timeline_ent *timeline_get(const struct timeline *t, uint64_t seqno)
{
	if (seqno == 0 || seqno > t->last || seqno < timeline_first(t))
		return NULL;
	return &t->ring[seqno & (t->capacity - 1)];
}

const char *timeline_dep_how_name(enum timeline_dep_how how)
{
	switch (how) {
	case TIMELINE_DEP_WAIT:
		return "wait";
	case TIMELINE_DEP_OBSERVED:
		return "observed";
	case TIMELINE_DEP_LEGACY:
		return "legacy";
	}
	return "?";
}
