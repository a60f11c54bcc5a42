/* A session's request ring: naming it (RequestRing), the arena it keeps registered, and
 * the header fields the daemon writes for the client (ring.h). */
#include "ring.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>

#include "conn.h"
#include "out.h"
#include "outcome.h"
#include "session.h"
#include "staging.h"

int ring_req_name(struct session *s, const Sseq__Request *rq)
{
	const Sseq__RequestRing *rr = rq->request_ring;
	struct staging *st;
	int r;

	if (ring_get(s))
		return outcome_error(s, -EINVAL, "the session has a request ring already");
	if (rr->size < SSEQ_RING_MIN || rr->size > SSEQ_RING_MAX || (rr->size & (rr->size - 1)))
		return outcome_error(s, -EINVAL,
			"request ring of %" PRIu64
			" bytes: it must be a power of two from %u to %u",
			rr->size, SSEQ_RING_MIN, SSEQ_RING_MAX);
	if (rr->offset % 64)
		return outcome_error(s, -EINVAL,
			"request ring at %" PRIu64 ": it must start on a multiple of 64",
			rr->offset);
	r = staging_range(s, rr->staging, rr->offset, SSEQ_RING_HEADER + rr->size, &st);
	if (r)
		return r;
	/* Its counters start at 0: the client's tail too, or its first frames are garbled
	 * (its session's loss alone). */
	ring_attach(s, (void *)((uint8_t *)st->addr + rr->offset), rr->size, rr->staging,
		rr->offset, 0);
	out_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	return 0;
}

int ring_holds(struct session *s, uint64_t staging)
{
	const struct session_ring *rg = ring_get(s);

	if (!rg || rg->staging != staging)
		return 0;
	return outcome_error(s, -EINVAL,
		"staging %" PRIu64 " holds the session's request ring: it stays registered while "
		"the session lasts",
		staging);
}

const struct session_ring *ring_get(const struct session *s)
{
	const struct session_ring *rg = &session_in_const(s)->ring;

	return rg->hdr ? rg : NULL;
}

void ring_attach(struct session *s, struct sseq_ring_header *hdr, uint64_t size, uint64_t staging,
	uint64_t offset, uint64_t head)
{
	struct session_in *in = session_in(s);
	struct server *srv = session_server(s);

	if (!in->ring.hdr)
		srv->nrings++;
	in->ring = (struct session_ring){.hdr = hdr,
		.data = (uint8_t *)hdr + SSEQ_RING_HEADER,
		.size = size,
		.head = head,
		.staging = staging,
		.offset = offset};
	atomic_store_explicit(&hdr->head, head, memory_order_release);
	atomic_store_explicit(&hdr->sock_read, in->sock_read, memory_order_release);
	atomic_store(&hdr->awake, atomic_load(&srv->spinning) ? 1u : 0u);
}

void ring_detach(struct session *s)
{
	struct session_in *in = session_in(s);

	if (!in->ring.hdr)
		return;
	/* Nobody looks at it from here: the client's next write rings, and hears of the
	 * closed connection as a send on the socket would. */
	atomic_store(&in->ring.hdr->awake, 0u);
	in->ring = (struct session_ring){0};
	session_server(s)->nrings--;
}

void ring_awake_all(struct server *srv, bool awake)
{
	for (struct session *s = srv->nrings ? srv->sessions : NULL; s; s = session_next(s)) {
		const struct session_ring *rg = ring_get(s);

		if (rg)
			atomic_store(&rg->hdr->awake, awake ? 1u : 0u);
	}
}
