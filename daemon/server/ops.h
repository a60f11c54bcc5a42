/* Ops: built from a request, submitted to the core, answered, and remembered until their
 * point completes; the in-flight op table, to name the op at a point. */
#ifndef SSEQ_OPS_H
#define SSEQ_OPS_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "outcome.h"
#include "sequencer.h"
#include "session.h"
#include "sseq.pb-c.h"

/* Put op on the session's lane `lane` (a request's index, 0 .. nlanes-1): 0, or the
 * refusal of one beyond the session's count. After ops_init(), which clears it. */
static inline int ops_lane(struct session *s, uint32_t lane, struct seq_op *op)
{
	uint32_t n;
	const uint32_t *lanes = session_lanes(s, &n);

	if (lane >= n)
		return outcome_error(s, -EINVAL,
			"lane %u out of range: this session has %u lane%s (0 .. %u; ask for more "
			"in Hello.lanes)",
			lane, n, n == 1 ? "" : "s", n - 1);
	op->lane = SEQ_LANE(lanes[lane]);
	return 0;
}
int ops_submit(struct session *s, const Sseq__Request *rq, struct seq_op *op, struct staging *st,
	struct smodule *mod, bool notify);
void ops_init(struct seq_op *op, struct op_payload *pl, enum seq_op_kind kind);
unsigned ops_write_mode(const struct seq_buffer *b, uint64_t off, uint64_t len);
/* Sequence op and answer it: the Reply now, a Completion when its point completes (always
 * with notify, else on failure). The staging arena or module the op uses, if any, stays
 * alive until then. 0, or the refusal (REQ_BLOCKED: its stream's window is full). */
int ops_submit(struct session *s, const Sseq__Request *rq, struct seq_op *op, struct staging *st,
	struct smodule *mod, bool notify);
/* CopyH2D, CopyD2H, CopyD2D, Await and Sync. */
int ops_req_copy_h2d(struct session *s, const Sseq__Request *rq);
int ops_req_copy_d2h(struct session *s, const Sseq__Request *rq);
int ops_req_copy_d2d(struct session *s, const Sseq__Request *rq);
int ops_req_await(struct session *s, const Sseq__Request *rq);
int ops_req_sync(struct session *s, const Sseq__Request *rq);

void ops_rec_free(struct op_rec *rec);
/* An op or watch finished (the core's observer: done): its Completion, the timeline. */
void ops_done(struct op_rec *rec, int status);

/* The in-flight op table (stream x, point n at points[x * point_window + n %
 * point_window]): 0 or -ENOMEM; the op in flight at p, or NULL; rec's point completed. */
int ops_points_init(struct server *srv);
struct op_rec *ops_point_op(struct server *srv, struct seq_point p);
void ops_point_done(struct server *srv, const struct op_rec *rec);

#endif
