/* Ops: building an op (its payload, its lane, a write's mode), submitting it to the core
 * and answering it (the Reply now, a Completion when its point completes), the copies and
 * waits built here, the record each op keeps until then, and the in-flight op table that
 * names an op from its point (a device fault's culprit, a backend's finding). */
#include "ops.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "account.h"
#include "buffer.h"
#include "handles.h"
#include "module.h"
#include "out.h"
#include "outcome.h"
#include "pause.h"
#include "session.h"
#include "staging.h"

/* The in-flight op table: the op at each point of each stream, until it completes. */
int ops_points_init(struct server *srv)
{
	const unsigned n = seq_stream_count(srv->seq);
	const unsigned window = srv->opts.seq.window ? srv->opts.seq.window : SEQ_DEFAULT_WINDOW;

	srv->point_window = window;
	srv->points = calloc((size_t)n * window, sizeof(*srv->points));
	return srv->points ? 0 : -ENOMEM;
}

static struct op_rec **ops_point_slot(struct server *srv, struct seq_point p)
{
	return &srv->points[(size_t)p.stream * srv->point_window + p.seq % srv->point_window];
}

struct op_rec *ops_point_op(struct server *srv, struct seq_point p)
{
	struct op_rec *rec = p.stream < seq_stream_count(srv->seq) ? *ops_point_slot(srv, p) : NULL;

	return rec && rec->at.stream == p.stream && rec->at.seq == p.seq ? rec : NULL;
}

static void ops_point_launched(struct server *srv, struct op_rec *rec)
{
	*ops_point_slot(srv, rec->at) = rec;
}

void ops_point_done(struct server *srv, const struct op_rec *rec)
{
	struct op_rec **slot = ops_point_slot(srv, rec->at);

	if (*slot == rec)
		*slot = NULL;
}

/* Who ran it, when it ran (the device's clock where the backend kept it) and when the
 * loop saw it complete: one ring entry, a few dozen stores, once per op. */
static void ops_timeline_done(struct server *srv, const struct op_rec *rec, int status)
{
	const struct session_ident *s = session_ident(rec->session);
	const uint64_t now = srv->drain_ns ? srv->drain_ns : server_now_ns();
	uint64_t device[3];
	const bool timed =
		backend_op_times(&srv->backend, rec->at, &device[0], &device[1], &device[2]) == 0;
	struct timeline_ent *e =
		timeline_add(&srv->timeline, rec->at, &rec->tl, now, timed ? device : NULL);

	_Static_assert(
		sizeof(e->worker) <= sizeof(s->worker) && sizeof(e->worker) <= sizeof(s->name),
		"the label is copied whole");
	_Static_assert(sizeof(e->kernel) <= sizeof(rec->what), "the name is copied whole");
	e->session = s->id;
	e->tag = rec->tag;
	e->uid = s->uid;
	e->pid = s->pid;
	e->status = status;
	/* Fixed-size copies (a few moves, no strlen): both end in NUL within the size. */
	memcpy(e->worker, s->worker[0] ? s->worker : s->name, sizeof(e->worker));
	e->worker[sizeof(e->worker) - 1] = '\0';
	memcpy(e->kernel, rec->what, sizeof(e->kernel));
	e->kernel[sizeof(e->kernel) - 1] = '\0';
}

/* An op's or a watch's record until it completes: NULL without memory. It holds a ref on
 * s and counts against --client-inflight-limit (at the limit, s stops taking requests).
 * Inlined in both callers (GCC left it a call even static): it runs for every op, and
 * the call cost 15 instructions per execute (bench/callgrind-execute.sh). */
static inline __attribute__((always_inline)) struct op_rec *ops_rec_new(
	struct session *s, uint64_t tag, bool notify)
{
	struct server *srv = session_server(s);
	struct op_rec *rec = srv->op_free;

	if (rec) {
		srv->op_free = rec->next_free;
		srv->nop_free--;
	} else if (!(rec = malloc(sizeof(*rec))))
		return NULL;
	/* Zeroed up to its timeline part, which ops_submit sets before use (a watch never
	 * reads it): that part is as large as the rest. */
	memset(rec, 0, offsetof(struct op_rec, tl));
	rec->session = s;
	rec->tag = tag;
	rec->notify = notify;
	session_ref(s);
	account_op_begin(s);
	return rec;
}

void ops_rec_free(struct op_rec *rec)
{
	struct session *s = rec->session;
	struct server *srv = session_server(s);

	if (rec->at.seq)
		ops_point_done(srv, rec);
	if (rec->staging)
		staging_unref(srv, rec->staging);
	if (rec->module)
		smodule_unref(srv, rec->module);
	account_op_end(s); /* at half the cap, its frames run again at the next turn */
	if (session_is_draining(s))
		out_mark_dirty(s); /* its flush closes it once the last op is done */
	/* Kept for reuse up to a bound: kept all, the list held as many records as were ever
	 * in flight at once (65,536 a session at the default limit), for good. */
	if (srv->nop_free < OP_FREE_MAX) {
		rec->next_free = srv->op_free;
		srv->op_free = rec;
		srv->nop_free++;
	} else {
		free(rec);
	}
	session_unref(s);
}

void ops_done(struct op_rec *rec, int status)
{
	struct session *s = rec->session;

	if (status == 0 && rec->notify && rec->staging && rec->done_word &&
		atomic_load_explicit(&rec->word_written, memory_order_relaxed)) {
		/* The client has its answer in its word (its writer set word_written before
		 * the report, the completion queue's lock since). A kernel's success (no
		 * Completion wanted) pays the first two tests only. */
		session_server(s)->count[SSEQ_COUNTER_COMPLETIONS_WRITTEN]++;
	} else if (status < 0 || rec->notify) {
		char msg[768] = "";
		/* A watch (Await, Sync) has no point of its own: what it waited for failed. */
		if (status < 0 && session_server(s)->resetting)
			snprintf(msg, sizeof(msg),
				"%s in flight when device reset %" PRIu64
				" at %s failed it; the reset "
				"was caused by %s",
				rec->at.seq ? "the operation was" : "what it waited for was",
				session_server(s)->loops->resets.count,
				session_server(s)->loops->resets.at,
				session_server(s)->loops->resets.cause);
		else if (status < 0 && rec->at.seq)
			snprintf(msg, sizeof(msg), "operation at %u:%" PRIu64 " failed: %s",
				rec->at.stream, rec->at.seq, outcome_text(status));
		else if (status < 0)
			snprintf(msg, sizeof(msg), "an operation it waited for failed: %s",
				outcome_text(status));
		out_complete(s, rec->tag, outcome_status(status), msg, rec->at);
		/* The tag will not come (a failure, a copy the backend does not write the word
		 * for, a client not watching it yet): a client watching the word, arming it
		 * or asleep on it (protocol 1.12) is told to read its socket. */
		if (rec->staging && rec->done_word)
			done_word_refuse(rec->done_word);
	}
	if (rec->at.seq) /* an op, not a watch */
		ops_timeline_done(session_server(s), rec, status);
	ops_rec_free(rec);
}

/* An empty op of `kind` with an empty payload. Only the first naccess of op->access[]
 * and the first nargs of pl->args[] are ever read, and both arrays come last: zeroing
 * them whole cost ~220 instructions a request. */
void ops_init(struct seq_op *op, struct op_payload *pl, enum seq_op_kind kind)
{
	memset(op, 0, offsetof(struct seq_op, access));
	memset(pl, 0, offsetof(struct op_payload, args));
	op->kind = kind;
	op->payload = pl;
}

/* A write covering the whole view defines it anew; a partial one keeps the rest. */
unsigned ops_write_mode(const struct seq_buffer *b, uint64_t off, uint64_t len)
{
	return (off == 0 && len == b->size) ? SEQ_WRITE : SEQ_READWRITE;
}

/* Sequence op and answer it: the Reply now, a Completion when its point completes. The
 * staging arena or module the op uses, if any, stays alive until then. */
int ops_submit(struct session *s, const Sseq__Request *rq, struct seq_op *op, struct staging *st,
	struct smodule *mod, bool notify)
{
	struct op_rec *rec = ops_rec_new(s, rq->tag, notify);
	struct session_work *work = session_work(s);
	struct server *srv = session_server(s);
	struct seq_point at = {0, 0};
	int r;

	if (!rec)
		return outcome_error(s, -ENOMEM, "out of memory");
	op->want_done = true;
	op->cookie = (uint64_t)(uintptr_t)rec;
	if (st) /* a copy: the backend marks here whether it wrote the word, if any */
		((struct op_payload *)op->payload)->done_written = &rec->word_written;
	op->exclusive = work->isolated && op->kind == SEQ_OP_EXEC;
	/* Before the launch, which may start the op at once; the trace hook adds the waits
	 * decided for it while it is `submitting`. */
	timeline_op_begin(&rec->tl, (uint8_t)op->kind, server_now_ns());
	srv->submitting = rec;
	r = seq_submit(srv->seq, op, &at);
	srv->submitting = NULL;
	if (r == -EAGAIN) {
		/* The stream's window is full of incomplete points: pause this client until
		 * that stream has room (I3); the core named it in at, and
		 * pause_set(PAUSE_WINDOW) puts s on that stream's list. */
		ops_rec_free(rec);
		session_pause(s)->blocked_stream =
			at.stream < SEQ_MAX_STREAMS ? at.stream : SEQ_MAX_STREAMS;
		return REQ_BLOCKED;
	}
	if (r < 0) {
		ops_rec_free(rec);
		switch (op->fail_cause) {
		case SEQ_FAIL_INPUT:
			return outcome_error(s, REQ_DEPENDENCY_FAILED,
				"not launched: an input's producer %u:%" PRIu64 " failed: %s",
				op->failed_producer.stream, op->failed_producer.seq,
				outcome_text(r));
		case SEQ_FAIL_STREAM:
			return outcome_error(s, REQ_DEVICE_ERROR,
				"not launched: stream %u failed: %s", op->failed_producer.stream,
				outcome_text(r));
		case SEQ_FAIL_LOST:
			return outcome_lost(srv, r, "not launched: a buffer it names");
		default:
			break;
		}
		if (r == -EEXIST)
			return outcome_error(
				s, r, "one operation writes the same buffer twice (I7)");
		return outcome_error(s, r, "launch failed: %s", outcome_text(r));
	}
	rec->at = at;
	if (op->kind == SEQ_OP_EXEC) {
		const struct op_payload *p = op->payload;
		const char *name = p->kernel ? p->kernel->name : p->function_name;
		size_t n = name ? strnlen(name, sizeof(rec->what) - 1) : 0;

		memcpy(rec->what, name ? name : "", n);
		rec->what[n] = '\0';
	}
	ops_point_launched(srv, rec);
	work->last_point[at.stream] = at.seq;
	if (st) {
		rec->staging = st;
		rec->done_word = ((const struct op_payload *)op->payload)->done_word;
		st->refs++;
	}
	if (mod) {
		rec->module = mod;
		mod->refs++;
	}
	out_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, NULL, 0, &at, NULL);
	return 0;
}

/* A word of arena st where the daemon may write a request's tag (CopyD2H.done_word,
 * Await.done_word: `done_word` is its offset + 1), outside the range [off, +len) the
 * request copies through: in *word, or an error for the client. */
static int ops_done_word(struct session *s, const struct staging *st, uint64_t done_word,
	uint64_t off, uint64_t len, _Atomic uint64_t **word)
{
	const uint64_t w = done_word - 1;

	if (w % 8 || st->size < 8 || w > st->size - 8 || (w < off + len && off < w + 8)) {
		if (len == 0)
			return outcome_error(s, -ERANGE,
				"done word at %" PRIu64 ": it must be 8-byte aligned and inside "
				"the arena of %" PRIu64 " bytes",
				w, st->size);
		return outcome_error(s, -ERANGE,
			"done word at %" PRIu64 ": it must be 8-byte aligned, inside the "
			"arena of %" PRIu64 " bytes and outside the copy's range [%" PRIu64
			", +%" PRIu64 ")",
			w, st->size, off, len);
	}
	*word = (_Atomic uint64_t *)((char *)st->addr + w);
	return 0;
}

/* Await (buffer b) or Sync (b NULL), answered by a Completion once what it waits for is
 * complete; an Await with a word (st, word) in that word where the backend can write it
 * (backend_ops.point_word) or the point already is complete: then no Completion. */
static int ops_watch(struct session *s, const Sseq__Request *rq, const struct seq_buffer *b,
	struct staging *st, _Atomic uint64_t *word)
{
	struct op_rec *rec = ops_rec_new(s, rq->tag, true);
	struct server *srv = session_server(s);
	struct seq_point at = {0, 0};
	int r;

	if (!rec)
		return outcome_error(s, -ENOMEM, "out of memory");
	/* Sync covers this session's own work, not other clients'. */
	r = b ? seq_await(srv->seq, b, (uint64_t)(uintptr_t)rec, &at)
	      : seq_sync_points(srv->seq, session_work(s)->last_point, (uint64_t)(uintptr_t)rec);
	if (r < 0) {
		/* The Reply carries the error; no Completion repeats it. */
		ops_rec_free(rec);
		if (r == -ENXIO)
			return outcome_lost(srv, r, "the buffer");
		return outcome_error(s, r, "%s", outcome_text(r));
	}
	if (word) {
		/* The arena stays mapped while the backend may write the word (ops_done). */
		rec->staging = st;
		rec->done_word = word;
		st->refs++;
	}
	out_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	if (r == 0) {
		/* The backend writes the tag at the point's report, or now if it reported
		 * the point meanwhile (1); else (-EALREADY: a failed report; no backend
		 * support) the Completion answers, and ops_done refuses the word first. */
		if (word)
			backend_point_word(&srv->backend, at, word, rq->tag, &rec->word_written);
		return 0;
	}
	if (word) /* where the client watches it already */
		done_word_deliver(word, rq->tag, &rec->word_written, NULL);
	ops_done(rec, 0);
	return 0;
}

/* A copy between a client's staging range and a device buffer (H2D into it, D2H out of
 * it): each range checked (the side read first, so the refusal names what the client
 * would look at first), the op built with the buffer's access, and submitted. */
struct ops_host_copy {
	bool to_device;
	uint64_t buffer, buffer_offset, staging, staging_offset, length;
	uint32_t lane;
	bool want_completion;
	uint64_t done_word; /* D2H: CopyD2H.done_word (the word's offset + 1, 0: none) */
};

static int ops_copy_host(struct session *s, const Sseq__Request *rq, const struct ops_host_copy *c)
{
	struct op_payload pl;
	struct seq_op op;
	struct staging *st = NULL;
	struct sbuf *sb = NULL;
	const char *side = c->to_device ? "destination" : "source";
	int r;

	if (c->length == 0)
		return outcome_error(s, -EINVAL, "copy of 0 bytes");
	if (c->to_device) {
		if ((r = staging_range(s, c->staging, c->staging_offset, c->length, &st)) ||
			(r = buffer_range(s, c->buffer, c->buffer_offset, c->length, side, &sb)))
			return r;
	} else if ((r = buffer_range(s, c->buffer, c->buffer_offset, c->length, side, &sb)) ||
		(r = staging_range(s, c->staging, c->staging_offset, c->length, &st))) {
		return r;
	}
	ops_init(&op, &pl, c->to_device ? SEQ_OP_H2D : SEQ_OP_D2H);
	if ((r = ops_lane(s, c->lane, &op)))
		return r;
	op.naccess = 1;
	op.access[0] = (struct seq_access){sb->buf,
		c->to_device ? ops_write_mode(sb->buf, c->buffer_offset, c->length) : SEQ_READ};
	pl.host = (char *)st->addr + c->staging_offset;
	if (c->to_device)
		pl.dst_offset = c->buffer_offset;
	else
		pl.src_offset = c->buffer_offset;
	pl.length = c->length;
	pl.done_word = NULL;
	pl.done_tag = 0;
	if (c->done_word) {
		if ((r = ops_done_word(
			     s, st, c->done_word, c->staging_offset, c->length, &pl.done_word)))
			return r;
		pl.done_tag = rq->tag;
	}
	return ops_submit(s, rq, &op, st, NULL, c->want_completion);
}

int ops_req_copy_h2d(struct session *s, const Sseq__Request *rq)
{
	const Sseq__CopyH2D *c = rq->copy_h2d;

	return ops_copy_host(s, rq,
		&(struct ops_host_copy){.to_device = true,
			.buffer = c->dst,
			.buffer_offset = c->dst_offset,
			.staging = c->staging,
			.staging_offset = c->staging_offset,
			.length = c->length,
			.lane = c->lane,
			.want_completion = rq->want_completion});
}

int ops_req_copy_d2h(struct session *s, const Sseq__Request *rq)
{
	const Sseq__CopyD2H *c = rq->copy_d2h;

	return ops_copy_host(s, rq,
		&(struct ops_host_copy){.to_device = false,
			.buffer = c->src,
			.buffer_offset = c->src_offset,
			.staging = c->staging,
			.staging_offset = c->staging_offset,
			.length = c->length,
			.lane = c->lane,
			.want_completion = true,
			.done_word = c->done_word});
}

int ops_req_copy_d2d(struct session *s, const Sseq__Request *rq)
{
	const Sseq__CopyD2D *c = rq->copy_d2d;
	struct op_payload pl;
	struct seq_op op;
	struct sbuf *src = NULL, *dst = NULL;
	struct seq_buffer *sbase, *dbase;
	int r;

	if (c->length == 0)
		return outcome_error(s, -EINVAL, "copy of 0 bytes");
	if ((r = buffer_range(s, c->src, c->src_offset, c->length, "source", &src)) ||
		(r = buffer_range(s, c->dst, c->dst_offset, c->length, "destination", &dst)))
		return r;
	ops_init(&op, &pl, SEQ_OP_D2D);
	if ((r = ops_lane(s, c->lane, &op)))
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
			dst->buf, ops_write_mode(dst->buf, c->dst_offset, c->length)};
		pl.src_offset = c->src_offset;
		pl.dst_offset = c->dst_offset;
	}
	return ops_submit(s, rq, &op, NULL, NULL, rq->want_completion);
}

int ops_req_await(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Await *aw = rq->await;
	struct sbuf *sb = handles_lookup(session_handles(s), aw->buffer, HANDLE_BUFFER);
	struct staging *st = NULL;
	_Atomic uint64_t *word = NULL;
	int r;

	if (!sb)
		return outcome_unknown_handle(s, aw->buffer, "buffer");
	if (aw->done_word &&
		((r = staging_range(s, aw->staging, 0, 0, &st)) ||
			(r = ops_done_word(s, st, aw->done_word, 0, 0, &word))))
		return r;
	return ops_watch(s, rq, sb->buf, st, word);
}

int ops_req_sync(struct session *s, const Sseq__Request *rq)
{
	return ops_watch(s, rq, NULL, NULL, NULL);
}
