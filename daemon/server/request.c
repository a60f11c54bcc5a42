/* Requests: a frame's Request checked (Hello first, no tag 0, no work while stopping),
 * dispatched to its handler (a handler's name tells its file: ops_req_*, buffer_req_*,
 * exec_req_*, staging_req_*, smodule_req_*, session_req_hello, trace_req_query), Batch
 * unpacked, and each handler's outcome answered with one Reply under its tag. */
#include "request.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "exec.h"
#include "log.h"
#include "module.h"
#include "ops.h"
#include "out.h"
#include "outcome.h"
#include "pause.h"
#include "ring.h"
#include "session.h"
#include "sseq-utf8.h"
#include "staging.h"
#include "trace.h"

/* Send the Reply a handler's outcome calls for; what request_run returns. */
static int req_answer(struct session *s, uint64_t tag, int outcome)
{
	const char *msg;

	switch (outcome) {
	case 0:
		return 0;
	case REQ_BLOCKED:
		return -EAGAIN;
	case REQ_CAPPED:
		return -EBUSY;
	case REQ_CLOSE:
		return -EPROTO;
	default:
		break;
	}
	msg = outcome_message(outcome);
	log_about(LOG_LVL_DEBUG, "session", SESSION_WHO(s),
		"client %" PRIu64 " (pid %u) tag %" PRIu64 ": %s", session_id(s),
		session_ident(s)->pid, tag, msg);
	out_reply(s, tag, outcome_status(outcome), msg);
	outcome_clear();
	return 0;
}

static int req_batch(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Batch *b = rq->batch;
	struct session_pause *p = session_pause(s);

	/* After backpressure the batch is unpacked again: skip what already ran. */
	for (size_t i = p->batch_resume; i < b->n_requests; i++) {
		int r;

		/* A gate (pause.h: --client-inflight-limit) holds within a batch as between
		 * frames: the rest runs at the turn after it ended, from here. */
		if (pause_gated(p)) {
			p->batch_resume = (uint32_t)i;
			return REQ_CAPPED;
		}
		r = request_run(s, b->requests[i], true);
		if (r == -EAGAIN) {
			p->batch_resume = (uint32_t)i;
			return REQ_BLOCKED;
		}
		if (r < 0)
			return REQ_CLOSE; /* answered: it broke the protocol */
	}
	p->batch_resume = 0;
	out_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	return 0;
}

/* The handler for rq's body: its outcome (see enum req_code). */
static int req_dispatch(struct session *s, const Sseq__Request *rq, bool nested)
{
	switch (rq->body_case) {
	case SSEQ__REQUEST__BODY_HELLO:
		return session_req_hello(s, rq);
	case SSEQ__REQUEST__BODY_STAGING_REGISTER:
		return staging_req_register(s, rq);
	case SSEQ__REQUEST__BODY_STAGING_UNREGISTER: {
		const int r = ring_holds(s, rq->staging_unregister->staging);

		return r ? r : staging_req_unregister(s, rq);
	}
	case SSEQ__REQUEST__BODY_REQUEST_RING:
		return ring_req_name(s, rq);
	case SSEQ__REQUEST__BODY_ALLOC:
		return buffer_req_alloc(s, rq);
	case SSEQ__REQUEST__BODY_FREE:
		return buffer_req_free(s, rq);
	case SSEQ__REQUEST__BODY_SLICE:
		return buffer_req_slice(s, rq);
	case SSEQ__REQUEST__BODY_COPY_H2D:
		return ops_req_copy_h2d(s, rq);
	case SSEQ__REQUEST__BODY_COPY_D2H:
		return ops_req_copy_d2h(s, rq);
	case SSEQ__REQUEST__BODY_COPY_D2D:
		return ops_req_copy_d2d(s, rq);
	case SSEQ__REQUEST__BODY_EXECUTE:
		return exec_req_execute(s, rq);
	case SSEQ__REQUEST__BODY_LOAD_MODULE:
		return smodule_req_load(s, rq);
	case SSEQ__REQUEST__BODY_MODULE_GLOBAL:
		return smodule_req_global(s, rq);
	case SSEQ__REQUEST__BODY_AWAIT:
		return ops_req_await(s, rq);
	case SSEQ__REQUEST__BODY_SYNC:
		return ops_req_sync(s, rq);
	case SSEQ__REQUEST__BODY_BATCH:
		if (nested) {
			req_answer(s, rq->tag,
				outcome_error(s, REQ_PROTOCOL_ERROR, "batches do not nest"));
			return REQ_CLOSE;
		}
		return req_batch(s, rq);
	case SSEQ__REQUEST__BODY_QUERY:
		return trace_req_query(s, rq);
	default:
		return outcome_error(
			s, -EINVAL, "request without a known body (%d)", (int)rq->body_case);
	}
}

/* 0: answered; -EAGAIN: window full, retry later; -EBUSY: a batch held at
 * --client-inflight-limit, retry once resumed; -EPROTO: close the connection. */
int request_run(struct session *s, const Sseq__Request *rq, bool nested)
{
	int r;

	if (session_server(s)->stopping && rq->body_case != SSEQ__REQUEST__BODY_QUERY)
		return req_answer(
			s, rq->tag, outcome_error(s, REQ_SHUTTING_DOWN, "the daemon is stopping"));
	if (rq->tag == 0) {
		/* A reply under tag 0 would read as the daemon's own notice. */
		req_answer(s, 0,
			outcome_error(s, REQ_PROTOCOL_ERROR,
				"tag 0 is reserved for the daemon's own messages: tag every "
				"request "
				"with a number of your own"));
		session_server(s)->count[SSEQ_COUNTER_FRAMES_BAD]++;
		return -EPROTO;
	}
	if (!session_has_hello(s) && rq->body_case != SSEQ__REQUEST__BODY_HELLO) {
		req_answer(s, rq->tag,
			outcome_error(s, REQ_PROTOCOL_ERROR, "the first request must be Hello"));
		return -EPROTO;
	}
	r = req_dispatch(s, rq, nested);
	if (r == 0)
		return 0;
	return req_answer(s, rq->tag, r);
}
