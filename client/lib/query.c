/* libsseq's queries: the raw Query entry points sseqctl-like tools use (sseq-internal.h)
 * and sseq_stats, the one query the public API offers. A query is waited on like any
 * request, but its answers are QueryResults kept in its op until collected; a trace
 * query with follow set keeps answering under its tag. */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "client.h"
#include "sseq-tables.h"

int sseq__query_send(struct sseq *s, const Sseq__Query *query, uint64_t *tag)
{
	*tag = 0; /* none on failure */
	struct op *op = client_op_new();
	if (!op)
		return client_fail(s, -ENOMEM, "out of memory");
	/* Results wait in the op until sseq__query_next collects them. */
	op->waited = true;
	op->follow = query->trace && query->trace->follow;
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_QUERY;
	req.query = (Sseq__Query *)query;
	int r = client_submit(s, &req, -1, op, tag);
	if (r == 0)
		r = client_flush(s);
	return r;
}

int sseq__query_next(struct sseq *s, uint64_t tag, int timeout_ms, Sseq__QueryResult **result)
{
	*result = NULL;
	struct op *op = client_op_find(s, tag);
	if (!op || op->kind != SSEQ__REQUEST__BODY_QUERY)
		return client_fail(
			s, -EINVAL, "tag %llu is not a query in flight", (unsigned long long)tag);
	while (op->nresults == 0 && !op->done) {
		/* Good enough for a tool: each message restarts the timeout. */
		int r = client_pump(s, timeout_ms);
		if (r == -ETIMEDOUT)
			return client_fail(s, r, "no answer from sseqd within %d ms", timeout_ms);
		if (r < 0 && !op->done)
			return r;
	}
	if (op->nresults == 0)
		return client_op_collect(s, op);
	Sseq__QueryResult *qr = op->results[0];
	memmove(&op->results[0], &op->results[1], --op->nresults * sizeof(*op->results));
	if (op->done && op->nresults == 0)
		client_op_collect(s, op);
	int code = client_status_code((int)qr->status);
	if (code != 0) {
		client_set_error(s, "%s", qr->message[0] ? qr->message : sseq_strerror(code));
		sseq__query_result__free_unpacked(qr, NULL);
		return code;
	}
	*result = qr;
	return 0;
}

int sseq__query(struct sseq *s, Sseq__QueryKind kind, uint64_t session, Sseq__QueryResult **result)
{
	*result = NULL;
	Sseq__Query q = SSEQ__QUERY__INIT;
	q.kind = kind;
	q.session = session;
	uint64_t tag;
	int r = sseq__query_send(s, &q, &tag);
	if (r < 0)
		return r;
	return sseq__query_next(s, tag, -1, result);
}

void sseq__query_result_free(Sseq__QueryResult *result)
{
	if (result)
		sseq__query_result__free_unpacked(result, NULL);
}

/* ---- counters ---- */

int sseq_stats(struct sseq *s, struct sseq_stats *stats)
{
	const size_t size = stats->size ? stats->size : sizeof(*stats);
	Sseq__QueryResult *qr = NULL;
	int r;

	if (size < offsetof(struct sseq_stats, waits_enqueued) + sizeof(uint64_t))
		return client_fail(s, -EINVAL, "sseq_stats: .size %zu holds no counter", size);
	r = sseq__query(s, SSEQ__QUERY_KIND__QUERY_KIND_STATS, 0, &qr);
	if (r < 0)
		return r;
	assert(qr); /* sseq__query's 0 comes with the answer */
	const Sseq__Counters *c = qr->counters;
	struct sseq_stats st = {.size = size};
	if (c) {
		/* struct sseq_stats's counters, each the Counters field of its name. */
#define STATS_FIELD(name) st.name = c->name;
		SSEQ_STATS_FIELDS(STATS_FIELD)
#undef STATS_FIELD
	}
	sseq__query_result_free(qr);
	/* A caller built against an older header passes a smaller struct. */
	memcpy(stats, &st, size < sizeof(st) ? size : sizeof(st));
	return 0;
}
