/* Events for the hip backend: a pool the loop thread takes them from, each stream's ring
 * of recorded events that its completion thread walks, and the sequencer's record, wait
 * and retire on top of them. */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "hip-internal.h"

#define HIP_EVENTS_PRECREATED 64

/* ---- events ---- */

static int hip_event_get(struct hip *h, struct hip_ev **out)
{
	struct hip_ev *ev;
	hipError_t e;
	int r;

	if (h->nevents) {
		*out = h->events[--h->nevents];
		return 0;
	}
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	e = hipEventCreateWithFlags(&ev->ev, h->event_flags);
	if (e != hipSuccess) {
		free(ev);
		r = hip__fail(e, "hipEventCreateWithFlags", "event", (struct seq_point){0, 0});
		assert(r < 0); /* a failure never translates to 0: *out stays unset */
		return r;
	}
	*out = ev;
	return 0;
}

void hip__event_destroy(struct hip_ev *ev)
{
	hipEventDestroy(ev->ev);
	free(ev);
}

static void hip_event_put(struct hip *h, struct hip_ev *ev)
{
	if (h->nevents == h->capevents) {
		size_t cap = h->capevents ? 2 * h->capevents : 64;
		struct hip_ev **v = realloc(h->events, cap * sizeof(*v));

		if (!v) {
			hip__event_destroy(ev);
			return;
		}
		h->events = v;
		h->capevents = cap;
	}
	h->events[h->nevents++] = ev;
}

/* At create: the pool's first events, so that the first records need no create call. */
int hip__event_pool_fill(struct hip *h)
{
	struct hip_ev *made[HIP_EVENTS_PRECREATED];
	int r = 0;
	unsigned n;

	for (n = 0; n < HIP_EVENTS_PRECREATED && r == 0; n++)
		r = hip_event_get(h, &made[n]);
	if (r < 0)
		n--;
	for (unsigned i = 0; i < n; i++)
		hip_event_put(h, made[i]);
	return r;
}

void hip__event_pool_finish(struct hip *h)
{
	for (size_t i = 0; i < h->nevents; i++)
		hip__event_destroy(h->events[i]);
	free(h->events);
}

int hip__record(void *ctx, struct seq_point at)
{
	struct hip *h = ctx;
	struct hip_stream *st;
	struct hip_cmd local, *c;
	struct hip_ev *ev;
	int r;

	if (at.stream >= h->nstreams)
		return -EINVAL;
	st = &h->streams[at.stream];
	if (at.seq > st->launched || at.seq <= st->recorded)
		return -EINVAL;
	r = hip_event_get(h, &ev);
	if (r < 0)
		return r;
	pthread_mutex_lock(&st->mu);
	if (st->count == st->cap) {
		size_t cap = st->cap ? 2 * st->cap : 64;
		struct hip_event_ent *ring = malloc(cap * sizeof(*ring));

		if (!ring) {
			pthread_mutex_unlock(&st->mu);
			hip_event_put(h, ev);
			return -ENOMEM;
		}
		for (size_t i = 0; i < st->count; i++)
			ring[i] = *hip__ring_at(st, i);
		free(st->ring);
		st->ring = ring;
		st->cap = cap;
		st->head = 0;
	}
	*hip__ring_at(st, st->count) = (struct hip_event_ent){
		.seq = at.seq,
		.ev = ev,
		.serial = ++ev->issued,
		.pool = hip__pool_cut(h, st, at.seq),
	};
	st->count++;
	st->recorded = at.seq;
	pthread_mutex_unlock(&st->mu);
	/* The completion thread sees the event once the command has recorded it. */
	c = hip__submit_begin(h, at.stream, &local);
	c->kind = HIP_CMD_RECORD;
	c->stream = at.stream;
	c->at = at;
	c->ev = ev;
	c->serial = ev->issued;
	return hip__submit_end(h, c);
}

/* The event recorded at exactly `seq` on st. Loop thread only: it is the ring's only
 * writer, so reading without the lock is safe. */
static struct hip_event_ent *hip_event_find(struct hip_stream *st, uint64_t seq)
{
	size_t lo = 0, hi = st->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct hip_event_ent *x = hip__ring_at(st, mid);

		if (x->seq == seq)
			return x;
		if (x->seq < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int hip__wait(void *ctx, uint32_t stream, struct seq_point event)
{
	struct hip *h = ctx;
	struct hip_event_ent *x;
	struct hip_cmd local, *c;

	if (stream >= h->nstreams || event.stream >= h->nstreams)
		return -EINVAL;
	if (stream == event.stream)
		return 0; /* an in-order stream already waits for itself */
	x = hip_event_find(&h->streams[event.stream], event.seq);
	if (!x)
		return -EINVAL; /* not recorded, or retired: nothing to wait on */
	/* Queued after the command that records it: on the same thread the queue runs in
	 * order; on another, the wait holds its thread until the record ran (serial). */
	c = hip__submit_begin(h, stream, &local);
	c->kind = HIP_CMD_WAIT;
	c->stream = stream;
	c->at = event;
	c->ev = x->ev;
	c->serial = x->serial;
	return hip__submit_end(h, c);
}

void hip__retire(void *ctx, struct seq_point event)
{
	struct hip *h = ctx;
	struct hip_stream *st;
	struct hip_ev *done[32];
	unsigned n;

	if (event.stream >= h->nstreams)
		return;
	st = &h->streams[event.stream];
	do {
		n = 0;
		pthread_mutex_lock(&st->mu);
		while (n < 32 && st->nreported && st->ring[st->head].seq <= event.seq) {
			done[n++] = st->ring[st->head].ev;
			st->head = (st->head + 1) % st->cap;
			st->count--;
			st->nsubmitted--;
			st->nreported--;
		}
		pthread_mutex_unlock(&st->mu);
		for (unsigned i = 0; i < n; i++)
			hip_event_put(h, done[i]);
	} while (n == 32);
	hip__audit_retire(h, st, event.seq);
	hip__scratch_retire(h, st, event.seq);
}
