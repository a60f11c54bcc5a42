/* Requests: dispatch, Hello, buffers and slices, copies, waits and queries; each answered
 * with one Reply under its tag, and a Completion when its point completes. */
#include "session-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sseq-utf8.h"

/* The one table: what every Reply and Completion says for an outcome. A negative errno
 * from the core or a backend, or a handler's own refusal; a positive code for the
 * protocol's statuses that no errno names. */
Sseq__Status server_status_from_errno(int outcome)
{
	switch (outcome) {
	case 0:
		return SSEQ__STATUS__STATUS_OK;
	case -BACKEND_EINJECTED:
		return SSEQ__STATUS__STATUS_INJECTED_FAULT;
	case -ENOMEM: /* out of memory */
	case -ENOSPC: /* a limit or quota reached */
		return SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED;
	case -EINVAL:
		return SSEQ__STATUS__STATUS_INVALID_ARGUMENT;
	case -ENOTSUP: /* the device or platform cannot (a launch attribute) */
		return SSEQ__STATUS__STATUS_NOT_SUPPORTED;
	case -ERANGE:
		return SSEQ__STATUS__STATUS_OUT_OF_RANGE;
	case -EEXIST:
		return SSEQ__STATUS__STATUS_DOUBLE_DEFINITION;
	case -EAGAIN:
		return SSEQ__STATUS__STATUS_BUSY;
	case REQ_UNKNOWN_HANDLE:
		return SSEQ__STATUS__STATUS_UNKNOWN_HANDLE;
	case REQ_UNKNOWN_KERNEL:
		return SSEQ__STATUS__STATUS_UNKNOWN_KERNEL;
	case REQ_BAD_ARGUMENT_TYPE:
		return SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE;
	case REQ_PERMISSION_DENIED:
		return SSEQ__STATUS__STATUS_PERMISSION_DENIED;
	case REQ_STAGING_UNSEALED:
		return SSEQ__STATUS__STATUS_STAGING_UNSEALED;
	case REQ_DEPENDENCY_FAILED:
		return SSEQ__STATUS__STATUS_DEPENDENCY_FAILED;
	case REQ_STREAM_FAILED:
		return SSEQ__STATUS__STATUS_DEVICE_ERROR;
	case REQ_UNSUPPORTED_VERSION:
		return SSEQ__STATUS__STATUS_UNSUPPORTED_VERSION;
	case REQ_PROTOCOL_ERROR:
		return SSEQ__STATUS__STATUS_PROTOCOL_ERROR;
	case REQ_SHUTTING_DOWN:
	case -ESHUTDOWN: /* cancelled, not run: the drain at a stop timed out */
		return SSEQ__STATUS__STATUS_SHUTTING_DOWN;
	default:
		/* REQ_BLOCKED, REQ_CAPPED and REQ_CLOSE are never answered: seeing one here
		 * is a bug. */
		return outcome > 0 ? SSEQ__STATUS__STATUS_INTERNAL
				   : SSEQ__STATUS__STATUS_DEVICE_ERROR;
	}
}

/* The message of the refusal about to be answered: req_error() sets it, req_answer() sends
 * and clears it before the request returns (the loop thread's alone). */
static _Thread_local char req_message[256];

int req_error(struct session *s, int outcome, const char *fmt, ...)
{
	va_list ap;

	(void)s;
	va_start(ap, fmt);
	vsnprintf(req_message, sizeof(req_message), fmt, ap);
	va_end(ap);
	return outcome;
}

int req_check_text(struct session *s, const char *field, const char *text)
{
	if (!text || utf8_valid(text))
		return 0;
	return req_error(s, -EINVAL, "%s is not valid UTF-8", field);
}

/* Send the Reply a handler's outcome calls for; what session_request returns. */
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
	/* A refusal without req_error() says what the errno says. */
	msg = req_message[0] ? req_message : outcome < 0 ? status_text(outcome) : "";
	log_about(LOG_LVL_DEBUG, "session", SESSION_WHO(s),
		"client %" PRIu64 " (pid %u) tag %" PRIu64 ": %s", s->id, s->pid, tag, msg);
	session_reply(s, tag, server_status_from_errno(outcome), msg);
	req_message[0] = '\0';
	return 0;
}

static int req_hello(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Hello *h = rq->hello;
	struct backend_info info = {0};
	Sseq__Welcome w = SSEQ__WELCOME__INIT;
	Sseq__DeviceInfo d = SSEQ__DEVICE_INFO__INIT;
	int r;

	if (s->hello)
		return req_error(s, REQ_PROTOCOL_ERROR, "Hello sent twice");
	if (h->protocol_major != SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR) {
		s->closing = true; /* after this Reply */
		return req_error(s, REQ_UNSUPPORTED_VERSION,
			"protocol major %u not supported: this daemon speaks %u.%u",
			h->protocol_major, SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR,
			SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR);
	}
	if ((r = req_check_text(s, "Hello.client_name", h->client_name)) ||
		(r = req_check_text(s, "Hello.worker_id", h->worker_id)))
		return r;
	if (h->lanes > SESSION_MAX_LANES)
		return req_error(s, -EINVAL,
			"Hello asks for %u lanes: at most %u (0 means 1; lanes share the daemon's "
			"%u compute streams)",
			h->lanes, SESSION_MAX_LANES,
			seq_layout(s->srv->seq)->count[SEQ_STREAM_COMPUTE]);
	s->hello = true;
	session_lanes_take(s, h->lanes ? h->lanes : 1);
	utf8_copy(s->name, sizeof(s->name), h->client_name ? h->client_name : "");
	utf8_copy(s->worker, sizeof(s->worker), h->worker_id ? h->worker_id : "");
	printable(s->name);
	printable(s->worker);
	log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
		"client %" PRIu64 " connected: %s pid %u uid %u%s%s, lane%s %u%s", s->id,
		s->name[0] ? s->name : "unnamed", s->pid, s->uid, s->worker[0] ? " worker " : "",
		s->worker, s->nlanes > 1 ? "s" : "", s->lanes[0], s->nlanes > 1 ? " ..." : "");
	backend_info(&s->srv->backend, &info);
	d.index = s->srv->opts.device;
	d.name = info.name;
	d.backend = (char *)info.backend;
	d.arch = info.arch;
	d.memory_total = info.memory_total;
	d.memory_used = info.memory_used;
	w.protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	w.protocol_minor = SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR;
	w.session = s->id;
	w.device = &d;
	w.daemon_version = (char *)SSEQ_VERSION;
	w.n_lanes = s->nlanes;
	w.lanes = s->lanes;
	session_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", 0, NULL, &w);
	return 0;
}

int sbuf_new(struct session *s, struct seq_buffer *b, const char *label, uint64_t *handle)
{
	struct sbuf *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return -ENOMEM;
	sb->buf = b;
	sb->owner = s;
	/* Cut at a character: half of one would make the label invalid UTF-8 again. */
	utf8_copy(sb->label, sizeof(sb->label), label ? label : "");
	if (session_handle_new(s, HANDLE_BUFFER, sb, &sb->handle) < 0) {
		free(sb);
		return -ENOMEM;
	}
	b->user = (uint64_t)(uintptr_t)sb;
	b->owner = s->id;
	*handle = sb->handle;
	return 0;
}

static int req_alloc(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Alloc *a = rq->alloc;
	const uint64_t quota = s->srv->opts.limits.client_memory_bytes;
	struct seq_buffer *b;
	uint64_t handle;
	int r;

	if (a->size == 0 || a->size > SESSION_MAX_ALLOC)
		return req_error(
			s, -EINVAL, "alloc size %" PRIu64 " out of range (1 .. 2^40)", a->size);
	if ((r = req_check_text(s, "Alloc.label", a->label)))
		return r;
	if ((r = handle_over_limit(s)))
		return r;
	if (quota && (a->size > quota || s->bytes > quota - a->size)) {
		s->srv->limit.quota_refused++;
		return req_error(s, -ENOSPC,
			"cannot allocate %" PRIu64 " bytes: this session holds %" PRIu64
			" of its device memory quota of %" PRIu64 " (--client-memory-limit)",
			a->size, s->bytes, quota);
	}
	r = seq_buffer_alloc(s->srv->seq, a->size, &b);
	/* The backend's own errno: out of memory, or an error it reported (the size was
	 * checked above). */
	if (r < 0)
		return req_error(
			s, r, "cannot allocate %" PRIu64 " bytes: %s", a->size, strerror(-r));
	if (sbuf_new(s, b, a->label, &handle) < 0) {
		seq_buffer_free(s->srv->seq, b);
		return req_error(s, -ENOMEM, "out of memory");
	}
	s->buffers++;
	s->bytes += a->size;
	session_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", handle, NULL, NULL);
	return 0;
}

static int req_free(struct session *s, const Sseq__Request *rq)
{
	uint64_t h = rq->free->buffer;
	struct sbuf *sb = session_lookup(s, h, HANDLE_BUFFER);

	if (!sb && session_handle_lost(s, h)) {
		session_handle_drop(s, h); /* nothing behind it any more */
		session_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
		return 0;
	}
	if (!sb)
		return session_unknown_handle(s, h, "buffer");
	session_handle_drop(s, h);
	sbuf_release(s, sb); /* the sequencer defers the memory until it is idle (I5) */
	session_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	return 0;
}

static int req_slice(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Slice *sl = rq->slice;
	struct sbuf *sb = session_lookup(s, sl->buffer, HANDLE_BUFFER);
	struct seq_buffer *b;
	uint64_t handle;
	int r;

	if (!sb)
		return session_unknown_handle(s, sl->buffer, "buffer");
	if ((r = req_check_text(s, "Slice.label", sl->label)))
		return r;
	if (sl->length == 0 || sl->offset > sb->buf->size ||
		sl->length > sb->buf->size - sl->offset)
		return req_error(s, -ERANGE,
			"slice [%" PRIu64 ", +%" PRIu64 ") outside buffer of %" PRIu64 " bytes",
			sl->offset, sl->length, sb->buf->size);
	if ((r = handle_over_limit(s)))
		return r;
	/* The range was checked above: only memory can fail, or the base was lost in a
	 * device reset this process recovered from (its handle still names it). */
	r = seq_buffer_slice(s->srv->seq, sb->buf, sl->offset, sl->length, &b);
	if (r == -ENXIO)
		return server_lost_error(s->srv, r, "the buffer");
	if (r < 0)
		return req_error(s, -ENOMEM, "out of memory");
	if (sbuf_new(s, b, sl->label, &handle) < 0) {
		seq_buffer_free(s->srv->seq, b);
		return req_error(s, -ENOMEM, "out of memory");
	}
	session_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", handle, NULL, NULL);
	return 0;
}

/* Sequence op and answer it: the Reply now, a Completion when its point completes. The
 * staging arena or module the op uses, if any, stays alive until then. */
int session_submit(struct session *s, const Sseq__Request *rq, struct seq_op *op,
	struct staging *st, struct smodule *mod, bool notify)
{
	struct op_rec *rec = op_rec_new(s, rq->tag, notify);
	struct seq_point at = {0, 0};
	int r;

	if (!rec)
		return req_error(s, -ENOMEM, "out of memory");
	op->want_done = true;
	op->cookie = (uint64_t)(uintptr_t)rec;
	op->exclusive = s->isolated && op->kind == SEQ_OP_EXEC;
	/* Before the launch, which may start the op at once; the trace hook adds the waits
	 * decided for it while it is `submitting`. */
	timeline_op_begin(&rec->tl, (uint8_t)op->kind, server_now_ns());
	s->srv->submitting = rec;
	r = seq_submit(s->srv->seq, op, &at);
	s->srv->submitting = NULL;
	if (r == -EAGAIN) {
		/* The stream's window is full of incomplete points: pause this client until
		 * that stream has room (I3); the core named it in at, and
		 * server_block_session() puts s on that stream's list. */
		op_rec_free(rec);
		s->blocked_stream = at.stream < SEQ_MAX_STREAMS ? at.stream : SEQ_MAX_STREAMS;
		return REQ_BLOCKED;
	}
	if (r < 0) {
		op_rec_free(rec);
		switch (op->fail_cause) {
		case SEQ_FAIL_INPUT:
			return req_error(s, REQ_DEPENDENCY_FAILED,
				"not launched: an input's producer %u:%" PRIu64 " failed: %s",
				op->failed_producer.stream, op->failed_producer.seq,
				status_text(r));
		case SEQ_FAIL_STREAM:
			return req_error(s, REQ_STREAM_FAILED, "not launched: stream %u failed: %s",
				op->failed_producer.stream, status_text(r));
		case SEQ_FAIL_LOST:
			return server_lost_error(s->srv, r, "not launched: a buffer it names");
		default:
			break;
		}
		if (r == -EEXIST)
			return req_error(s, r, "one operation writes the same buffer twice (I7)");
		return req_error(s, r, "launch failed: %s", status_text(r));
	}
	rec->at = at;
	if (op->kind == SEQ_OP_EXEC) {
		const struct op_payload *p = op->payload;
		const char *name = p->kernel ? p->kernel->name : p->function_name;
		size_t n = name ? strnlen(name, sizeof(rec->what) - 1) : 0;

		memcpy(rec->what, name ? name : "", n);
		rec->what[n] = '\0';
	}
	server_point_launched(s->srv, rec);
	s->last_point[at.stream] = at.seq;
	if (st) {
		rec->staging = st;
		st->refs++;
	}
	if (mod) {
		rec->module = mod;
		mod->refs++;
	}
	session_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, NULL, 0, &at, NULL);
	return 0;
}

/* An empty op of `kind` with an empty payload. Only the first naccess of op->access[]
 * and the first nargs of pl->args[] are ever read, and both arrays come last: zeroing
 * them whole cost ~220 instructions a request. */
void op_init(struct seq_op *op, struct op_payload *pl, enum seq_op_kind kind)
{
	memset(op, 0, offsetof(struct seq_op, access));
	memset(pl, 0, offsetof(struct op_payload, args));
	op->kind = kind;
	op->payload = pl;
}

/* Look up a buffer and check [off, off + len) lies in it. */
static int req_range(struct session *s, uint64_t handle, uint64_t off, uint64_t len,
	const char *what, struct sbuf **out)
{
	struct sbuf *sb = session_lookup(s, handle, HANDLE_BUFFER);

	if (!sb) {
		char kind[32];

		snprintf(kind, sizeof(kind), "%s buffer", what);
		return session_unknown_handle(s, handle, kind);
	}
	if (off > sb->buf->size || len > sb->buf->size - off)
		return req_error(s, -ERANGE,
			"%s range [%" PRIu64 ", +%" PRIu64 ") outside buffer of %" PRIu64 " bytes",
			what, off, len, sb->buf->size);
	*out = sb;
	return 0;
}

/* A write covering the whole view defines it anew; a partial one keeps the rest. */
unsigned write_mode(const struct seq_buffer *b, uint64_t off, uint64_t len)
{
	return (off == 0 && len == b->size) ? SEQ_WRITE : SEQ_READWRITE;
}

static int req_copy_h2d(struct session *s, const Sseq__Request *rq)
{
	const Sseq__CopyH2D *c = rq->copy_h2d;
	struct op_payload pl;
	struct seq_op op;
	struct staging *st = NULL;
	struct sbuf *dst = NULL;
	int r;

	if (c->length == 0)
		return req_error(s, -EINVAL, "copy of 0 bytes");
	if ((r = req_staging_range(s, c->staging, c->staging_offset, c->length, &st)) ||
		(r = req_range(s, c->dst, c->dst_offset, c->length, "destination", &dst)))
		return r;
	op_init(&op, &pl, SEQ_OP_H2D);
	if ((r = req_lane(s, c->lane, &op)))
		return r;
	op.naccess = 1;
	op.access[0] =
		(struct seq_access){dst->buf, write_mode(dst->buf, c->dst_offset, c->length)};
	pl.host = (char *)st->addr + c->staging_offset;
	pl.dst_offset = c->dst_offset;
	pl.length = c->length;
	return session_submit(s, rq, &op, st, NULL, rq->want_completion);
}

static int req_copy_d2h(struct session *s, const Sseq__Request *rq)
{
	const Sseq__CopyD2H *c = rq->copy_d2h;
	struct op_payload pl;
	struct seq_op op;
	struct staging *st = NULL;
	struct sbuf *src = NULL;
	int r;

	if (c->length == 0)
		return req_error(s, -EINVAL, "copy of 0 bytes");
	if ((r = req_range(s, c->src, c->src_offset, c->length, "source", &src)) ||
		(r = req_staging_range(s, c->staging, c->staging_offset, c->length, &st)))
		return r;
	op_init(&op, &pl, SEQ_OP_D2H);
	if ((r = req_lane(s, c->lane, &op)))
		return r;
	op.naccess = 1;
	op.access[0] = (struct seq_access){src->buf, SEQ_READ};
	pl.host = (char *)st->addr + c->staging_offset;
	pl.src_offset = c->src_offset;
	pl.length = c->length;
	return session_submit(s, rq, &op, st, NULL, true);
}

static int req_copy_d2d(struct session *s, const Sseq__Request *rq)
{
	const Sseq__CopyD2D *c = rq->copy_d2d;
	struct op_payload pl;
	struct seq_op op;
	struct sbuf *src = NULL, *dst = NULL;
	struct seq_buffer *sbase, *dbase;
	int r;

	if (c->length == 0)
		return req_error(s, -EINVAL, "copy of 0 bytes");
	if ((r = req_range(s, c->src, c->src_offset, c->length, "source", &src)) ||
		(r = req_range(s, c->dst, c->dst_offset, c->length, "destination", &dst)))
		return r;
	op_init(&op, &pl, SEQ_OP_D2D);
	if ((r = req_lane(s, c->lane, &op)))
		return r;
	sbase = src->buf->base ? src->buf->base : src->buf;
	dbase = dst->buf->base ? dst->buf->base : dst->buf;
	pl.length = c->length;
	if (sbase == dbase) {
		/* Within one buffer: one read-write access on the base, offsets rebased. */
		op.naccess = 1;
		op.access[0] = (struct seq_access){sbase, SEQ_READWRITE};
		pl.src_offset = src->buf->offset + c->src_offset;
		pl.dst_offset = dst->buf->offset + c->dst_offset;
	} else {
		op.naccess = 2;
		op.access[0] = (struct seq_access){src->buf, SEQ_READ};
		op.access[1] = (struct seq_access){
			dst->buf, write_mode(dst->buf, c->dst_offset, c->length)};
		pl.src_offset = c->src_offset;
		pl.dst_offset = c->dst_offset;
	}
	return session_submit(s, rq, &op, NULL, NULL, rq->want_completion);
}

static int session_watch(struct session *s, const Sseq__Request *rq, const struct seq_buffer *b)
{
	struct op_rec *rec = op_rec_new(s, rq->tag, true);
	int r;

	if (!rec)
		return req_error(s, -ENOMEM, "out of memory");
	/* Sync covers this session's own work, not other clients'. */
	r = b ? seq_await(s->srv->seq, b, (uint64_t)(uintptr_t)rec)
	      : seq_sync_points(s->srv->seq, s->last_point, (uint64_t)(uintptr_t)rec);
	if (r < 0) {
		/* The Reply carries the error; no Completion repeats it. */
		op_rec_free(rec);
		if (r == -ENXIO)
			return server_lost_error(s->srv, r, "the buffer");
		return req_error(s, r, "%s", status_text(r));
	}
	session_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	if (r == 0)
		return 0; /* the Completion comes with the point */
	session_op_done(rec, 0);
	return 0;
}

static int req_await(struct session *s, const Sseq__Request *rq)
{
	struct sbuf *sb = session_lookup(s, rq->await->buffer, HANDLE_BUFFER);

	if (!sb)
		return session_unknown_handle(s, rq->await->buffer, "buffer");
	return session_watch(s, rq, sb->buf);
}

static int req_query(struct session *s, const Sseq__Request *rq)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__QueryResult res = SSEQ__QUERY_RESULT__INIT;

	res.tag = rq->tag;
	query_answer(s->srv, s, rq->query, &res, &s->arena);
	m.body_case = SSEQ__MESSAGE__BODY_QUERY_RESULT;
	m.query_result = &res;
	session_send(s, &m);
	if (rq->query->kind == SSEQ__QUERY_KIND__QUERY_KIND_TRACE && rq->query->trace &&
		rq->query->trace->follow) {
		if (!s->following)
			s->srv->nfollowing++;
		s->following = true;
		s->follow_tag = rq->tag;
		s->follow_since = res.n_trace ? res.trace[res.n_trace - 1]->seq
					      : (rq->query->trace->since_seq > s->srv->trace_seq
								? s->srv->trace_seq
								: rq->query->trace->since_seq);
		if (s->follow_since < s->srv->trace_seq && !res.n_trace)
			s->follow_since = s->srv->trace_seq;
	}
	return 0;
}

static int req_batch(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Batch *b = rq->batch;

	/* After backpressure the batch is unpacked again: skip what already ran. */
	for (size_t i = s->batch_resume; i < b->n_requests; i++) {
		int r;

		/* --client-inflight-limit holds within a batch as between frames: the rest
		 * waits until half of what is in flight completed (op_rec_free resumes it). */
		if (s->inflight_capped) {
			s->batch_resume = (uint32_t)i;
			return REQ_CAPPED;
		}
		r = session_request(s, b->requests[i], true);
		if (r == -EAGAIN) {
			s->batch_resume = (uint32_t)i;
			return REQ_BLOCKED;
		}
		if (r < 0)
			return REQ_CLOSE; /* answered: it broke the protocol */
	}
	s->batch_resume = 0;
	session_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	return 0;
}

/* The handler for rq's body: its outcome (see enum req_code). */
static int req_dispatch(struct session *s, const Sseq__Request *rq, bool nested)
{
	switch (rq->body_case) {
	case SSEQ__REQUEST__BODY_HELLO:
		return req_hello(s, rq);
	case SSEQ__REQUEST__BODY_STAGING_REGISTER:
		return req_staging_register(s, rq);
	case SSEQ__REQUEST__BODY_STAGING_UNREGISTER:
		return req_staging_unregister(s, rq);
	case SSEQ__REQUEST__BODY_ALLOC:
		return req_alloc(s, rq);
	case SSEQ__REQUEST__BODY_FREE:
		return req_free(s, rq);
	case SSEQ__REQUEST__BODY_SLICE:
		return req_slice(s, rq);
	case SSEQ__REQUEST__BODY_COPY_H2D:
		return req_copy_h2d(s, rq);
	case SSEQ__REQUEST__BODY_COPY_D2H:
		return req_copy_d2h(s, rq);
	case SSEQ__REQUEST__BODY_COPY_D2D:
		return req_copy_d2d(s, rq);
	case SSEQ__REQUEST__BODY_EXECUTE:
		return req_execute(s, rq);
	case SSEQ__REQUEST__BODY_LOAD_MODULE:
		return req_load_module(s, rq);
	case SSEQ__REQUEST__BODY_MODULE_GLOBAL:
		return req_module_global(s, rq);
	case SSEQ__REQUEST__BODY_AWAIT:
		return req_await(s, rq);
	case SSEQ__REQUEST__BODY_SYNC:
		return session_watch(s, rq, NULL);
	case SSEQ__REQUEST__BODY_BATCH:
		if (nested) {
			req_answer(s, rq->tag,
				req_error(s, REQ_PROTOCOL_ERROR, "batches do not nest"));
			return REQ_CLOSE;
		}
		return req_batch(s, rq);
	case SSEQ__REQUEST__BODY_QUERY:
		return req_query(s, rq);
	default:
		return req_error(
			s, -EINVAL, "request without a known body (%d)", (int)rq->body_case);
	}
}

/* 0: answered; -EAGAIN: window full, retry later; -EBUSY: a batch held at
 * --client-inflight-limit, retry once resumed; -EPROTO: close the connection. */
int session_request(struct session *s, const Sseq__Request *rq, bool nested)
{
	int r;

	if (s->srv->stopping && rq->body_case != SSEQ__REQUEST__BODY_QUERY)
		return req_answer(
			s, rq->tag, req_error(s, REQ_SHUTTING_DOWN, "the daemon is stopping"));
	if (rq->tag == 0) {
		/* A reply under tag 0 would read as the daemon's own notice. */
		req_answer(s, 0,
			req_error(s, REQ_PROTOCOL_ERROR,
				"tag 0 is reserved for the daemon's own messages: tag every "
				"request "
				"with a number of your own"));
		s->srv->frames_bad++;
		return -EPROTO;
	}
	if (!s->hello && rq->body_case != SSEQ__REQUEST__BODY_HELLO) {
		req_answer(s, rq->tag,
			req_error(s, REQ_PROTOCOL_ERROR, "the first request must be Hello"));
		return -EPROTO;
	}
	r = req_dispatch(s, rq, nested);
	if (r == 0)
		return 0;
	return req_answer(s, rq->tag, r);
}
