/* The sequencer core: decides the waits for each operation from where its inputs were
 * really produced (I1, I2, I4), learns completion only from reported events (I3), defers
 * frees (I5), treats slices as views (I6) and carries failures forward (I7, I9). */
#include "sequencer.h"
#include "sseq-tables.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct point_wait {
	uint32_t stream;
	uint64_t event; /* the event waited on: a seq >= the producer's */
};

/* Waits a point record holds in place. Most ops wait on a few streams; one that waits on
 * more (an exclusive op waits on every busy stream) keeps the rest in an array of its own.
 * Room for SEQ_MAX_STREAMS in place made each record 1 KiB and each stream's window of
 * them 1 MiB, all of it touched once the stream had issued a window of points: resident
 * memory that grew with the streams used until every one had cycled its window. */
#define POINT_WAITS_INLINE 6

/* What the core remembers of an incomplete point until it is acknowledged. */
struct point_rec {
	uint64_t cookie;
	bool want_done;
	uint8_t nwaits;
	struct point_wait waits[POINT_WAITS_INLINE];
	struct point_wait *more; /* waits past POINT_WAITS_INLINE, or NULL */
};

static const struct point_wait *point_rec_wait(const struct point_rec *r, unsigned i)
{
	return i < POINT_WAITS_INLINE ? &r->waits[i] : &r->more[i - POINT_WAITS_INLINE];
}

struct watch {
	uint64_t cookie;
	unsigned pending;
	int status;
};

struct watch_ent {
	uint64_t seq;
	struct watch *watch;
};

struct stream {
	uint64_t issued; /* last point launched */
	uint64_t completed; /* last point acknowledged complete */
	uint64_t reported; /* last point the backend saw complete */
	uint64_t recorded; /* last point with an event */
	int error; /* sticky device error ... */
	uint64_t fail_from; /* ... from this point on */
	struct point_rec *recs; /* window entries, indexed by seq % window */
	uint64_t *events; /* recorded, unretired events, ascending: a ring */
	unsigned ev_head, ev_count;
	struct watch_ent *watches; /* ascending by seq */
	size_t nwatches, capwatches;
};

struct seq {
	struct seq_config config;
	struct seq_device dev; /* copied: one load per command */
	void *dev_ctx;
	struct seq_observer obs;
	struct seq_counters counters;
	struct seq_layout layout; /* the streams' numbering */
	struct stream streams[SEQ_MAX_STREAMS];
	unsigned rr_d2h, rr_d2d;
	struct seq_point barrier; /* the last exclusive op: later ops wait for it (seq 0: none) */
	uint64_t waits_decided; /* for the drop_wait injection */
	uint64_t allocs; /* allocations made: the next base's number */
	struct seq_buffer *all; /* every live buffer object */
	struct seq_buffer **pending; /* bases freed by their owner, still in use */
	size_t npending, cappending;
};

static void seq_trace_emit(struct seq *seq, enum seq_decision decision, struct seq_point at,
	enum seq_op_kind op, const struct seq_buffer *buf, struct seq_point producer)
{
	if (!seq->obs.trace)
		return;
	struct seq_trace t = {
		.decision = decision,
		.at = at,
		.op = op,
		.buf = buf,
		.producer = producer,
	};
	seq->obs.trace(seq->obs.ctx, &t);
}

const char *seq_op_kind_name(enum seq_op_kind kind)
{
	static const char *const names[SEQ_OP_KINDS] = {
		[SEQ_OP_H2D] = "h2d",
		[SEQ_OP_D2H] = "d2h",
		[SEQ_OP_D2D] = "d2d",
		[SEQ_OP_EXEC] = "execute",
	};

	return (unsigned)kind < SEQ_OP_KINDS ? names[kind] : "?";
}

/* The kinds are the wire's StreamKind less its UNSPECIFIED, one down (the server sends
 * kind + 1), and spelt as the schema spells them (sseq-tables.h, from sseq.proto). */
#define SEQ_STREAM_KIND_MATCHES(NAME, number, name)                                                \
	_Static_assert(SEQ_STREAM_##NAME == (number)-1,                                            \
		"SEQ_STREAM_" #NAME " is not STREAM_KIND_" #NAME " - 1");
SSEQ_STREAM_KINDS(SEQ_STREAM_KIND_MATCHES)
_Static_assert(SSEQ_STREAM_KIND_COUNT == SEQ_STREAM_KINDS, "a stream kind is not the core's");

const char *seq_stream_kind_name(enum seq_stream_kind kind)
{
#define SEQ_STREAM_KIND_NAME(NAME, number, name) [SEQ_STREAM_##NAME] = name,
	static const char *const names[SEQ_STREAM_KINDS] = {
		SSEQ_STREAM_KINDS(SEQ_STREAM_KIND_NAME)};
#undef SEQ_STREAM_KIND_NAME

	return (unsigned)kind < SEQ_STREAM_KINDS ? names[kind] : "?";
}

int seq_layout_init(struct seq_layout *l, const struct seq_config *cfg)
{
	const unsigned count[SEQ_STREAM_KINDS] = {
		[SEQ_STREAM_COMPUTE] = cfg->n_compute ? cfg->n_compute : 1,
		[SEQ_STREAM_H2D] = cfg->n_h2d ? cfg->n_h2d : 1,
		[SEQ_STREAM_D2H] = cfg->n_d2h ? cfg->n_d2h : 1,
		[SEQ_STREAM_D2D] = cfg->n_d2d ? cfg->n_d2d : 1,
	};

	memset(l, 0, sizeof(*l));
	for (unsigned k = 0; k < SEQ_STREAM_KINDS; k++) {
		if (count[k] > SEQ_MAX_STREAMS - l->nstreams)
			return -EINVAL;
		l->first[k] = l->nstreams;
		l->count[k] = count[k];
		for (unsigned i = 0; i < count[k]; i++, l->nstreams++) {
			l->kind[l->nstreams] = (enum seq_stream_kind)k;
			l->index[l->nstreams] = i;
		}
	}
	return 0;
}

const struct seq_layout *seq_layout(const struct seq *seq)
{
	return &seq->layout;
}

int seq_create(struct seq **out, const struct seq_config *config, const struct seq_device *device,
	void *device_ctx, const struct seq_observer *observer)
{
	struct seq *seq = NULL;
	struct seq_config cfg = *config;
	struct seq_layout layout;

	if (cfg.window == 0)
		cfg.window = SEQ_DEFAULT_WINDOW;
	if (seq_layout_init(&layout, &cfg) < 0 || !device->mem_alloc || !device->mem_release ||
		!device->record || !device->wait || !device->launch)
		return -EINVAL;

	seq = calloc(1, sizeof(*seq));
	if (!seq)
		return -ENOMEM;
	seq->config = cfg;
	seq->dev = *device;
	seq->dev_ctx = device_ctx;
	if (observer)
		seq->obs = *observer;
	seq->layout = layout;
	for (unsigned i = 0; i < seq->layout.nstreams; i++) {
		struct stream *s = &seq->streams[i];
		s->recs = calloc(cfg.window, sizeof(*s->recs));
		s->events = calloc(cfg.window + 1, sizeof(*s->events));
		if (!s->recs || !s->events)
			goto fail;
	}
	*out = seq;
	return 0;
fail:
	seq_destroy(seq);
	return -ENOMEM;
}

static void buffer_unlink(struct seq *seq, struct seq_buffer *b)
{
	if (b->all_prev)
		b->all_prev->all_next = b->all_next;
	else
		seq->all = b->all_next;
	if (b->all_next)
		b->all_next->all_prev = b->all_prev;
}

/* A base's memory goes back: to the device, or (adopted) to its owner. */
static void buffer_mem_release(struct seq *seq, struct seq_buffer *b)
{
	if (!b->adopted)
		seq->dev.mem_release(seq->dev_ctx, b->addr, b->size);
	else if (seq->dev.mem_disown)
		seq->dev.mem_disown(seq->dev_ctx, b->addr, b->size);
}

void seq_destroy(struct seq *seq)
{
	if (!seq)
		return;
	while (seq->all) {
		struct seq_buffer *b = seq->all;
		void (*gone)(void *) = b->gone;
		void *arg = b->gone_arg;

		if (!b->base && !b->lost && !b->early_released)
			buffer_mem_release(seq, b);
		/* b is the head: popped, the list stays whole for the callback. */
		seq->all = b->all_next;
		if (seq->all)
			seq->all->all_prev = NULL;
		free(b);
		if (gone)
			gone(arg);
	}
	for (unsigned i = 0; i < seq->layout.nstreams; i++) {
		struct stream *s = &seq->streams[i];
		for (size_t w = 0; w < s->nwatches; w++)
			if (--s->watches[w].watch->pending == 0)
				free(s->watches[w].watch);
		free(s->watches);
		for (unsigned n = 0; s->recs && n < seq->config.window; n++)
			free(s->recs[n].more);
		free(s->recs);
		free(s->events);
	}
	free(seq->pending);
	free(seq);
}

unsigned seq_stream_count(const struct seq *seq)
{
	return seq->layout.nstreams;
}

void seq_stream_info(const struct seq *seq, uint32_t stream, struct seq_stream_info *info)
{
	const struct stream *s = &seq->streams[stream];
	*info = (struct seq_stream_info){
		.kind = seq->layout.kind[stream],
		.index = seq->layout.index[stream],
		.issued = s->issued,
		.completed = s->completed,
		.recorded = s->recorded,
		.window_used = (unsigned)(s->issued - s->completed),
		.window_capacity = seq->config.window,
		.error = s->error,
	};
}

const struct seq_counters *seq_counters(const struct seq *seq)
{
	return &seq->counters;
}

static struct seq_buffer *buffer_base(const struct seq_buffer *b)
{
	return b->base ? b->base : (struct seq_buffer *)b;
}

static bool point_complete(const struct seq *seq, struct seq_point p)
{
	return p.seq <= seq->streams[p.stream].completed;
}

static bool point_failed(const struct seq *seq, struct seq_point p)
{
	const struct stream *s = &seq->streams[p.stream];
	return p.seq && s->error && p.seq >= s->fail_from;
}

/* Record an event after everything issued on x so far, unless one is there already. */
static int stream_record(struct seq *seq, uint32_t x)
{
	struct stream *s = &seq->streams[x];
	int r;

	if (s->recorded == s->issued || s->issued == s->completed)
		return 0;
	r = seq->dev.record(seq->dev_ctx, (struct seq_point){x, s->issued});
	if (r < 0)
		return r;
	s->events[(s->ev_head + s->ev_count) % (seq->config.window + 1)] = s->issued;
	s->ev_count++;
	s->recorded = s->issued;
	seq->counters.events_recorded++;
	return 0;
}

/* The earliest recorded, unretired event on x at or after n; recording one if needed. */
static int stream_event_for(struct seq *seq, uint32_t x, uint64_t n, uint64_t *event)
{
	struct stream *s = &seq->streams[x];
	unsigned cap = seq->config.window + 1;
	int r;

	if (s->recorded < n) {
		r = stream_record(seq, x);
		if (r < 0)
			return r;
	}
	/* Waits are mostly for recent points: scan from the newest event back. */
	*event = s->recorded;
	for (unsigned i = s->ev_count; i-- > 0;) {
		uint64_t e = s->events[(s->ev_head + i) % cap];
		if (e < n)
			break;
		*event = e;
	}
	return 0;
}

bool seq_buffer_idle(const struct seq *seq, const struct seq_buffer *buf)
{
	const struct seq_buffer *b = buffer_base(buf);

	if (!point_complete(seq, b->def))
		return false;
	for (uint64_t m = b->reader_mask; m; m &= m - 1) {
		unsigned x = (unsigned)__builtin_ctzll(m);

		if (b->readers[x] > seq->streams[x].completed)
			return false;
	}
	return true;
}

int seq_buffer_error(const struct seq *seq, const struct seq_buffer *buf)
{
	const struct seq_buffer *b = buffer_base(buf);

	if (b->lost)
		return -ENXIO;
	if (b->error)
		return b->error;
	if (point_failed(seq, b->def))
		return seq->streams[b->def.stream].error;
	return 0;
}

size_t seq_pending_count(const struct seq *seq)
{
	return seq->npending;
}

const struct seq_buffer *seq_pending_get(const struct seq *seq, size_t i)
{
	return i < seq->npending ? seq->pending[i] : NULL;
}

static struct seq_buffer *buffer_new(struct seq *seq)
{
	struct seq_buffer *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->all_next = seq->all;
	if (seq->all)
		seq->all->all_prev = b;
	seq->all = b;
	return b;
}

int seq_buffer_alloc(struct seq *seq, uint64_t size, struct seq_buffer **out)
{
	struct seq_buffer *b;
	uint64_t addr = 0;
	int r;

	if (size == 0)
		return -EINVAL;
	r = seq->dev.mem_alloc(seq->dev_ctx, size, &addr);
	if (r < 0)
		return r;
	b = buffer_new(seq);
	if (!b) {
		seq->dev.mem_release(seq->dev_ctx, addr, size);
		return -ENOMEM;
	}
	b->size = size;
	b->addr = addr;
	b->alloc = ++seq->allocs;
	b->refs = 1;
	if (seq->dev.mem_owner)
		seq->dev.mem_owner(seq->dev_ctx, addr, b->alloc);
	*out = b;
	return 0;
}

int seq_buffer_adopt(struct seq *seq, uint64_t addr, uint64_t size, void (*gone)(void *arg),
	void *arg, struct seq_buffer **out)
{
	struct seq_buffer *b;
	int r;

	if (size == 0 || addr + size < addr)
		return -EINVAL;
	if (seq->dev.mem_adopt && (r = seq->dev.mem_adopt(seq->dev_ctx, addr, size)) < 0)
		return r;
	b = buffer_new(seq);
	if (!b) {
		if (seq->dev.mem_disown)
			seq->dev.mem_disown(seq->dev_ctx, addr, size);
		return -ENOMEM;
	}
	b->size = size;
	b->addr = addr;
	b->alloc = ++seq->allocs;
	b->refs = 1;
	b->adopted = true;
	if (seq->dev.mem_owner)
		seq->dev.mem_owner(seq->dev_ctx, addr, b->alloc);
	b->gone = gone;
	b->gone_arg = arg;
	*out = b;
	return 0;
}

int seq_buffer_slice(struct seq *seq, struct seq_buffer *of, uint64_t offset, uint64_t size,
	struct seq_buffer **out)
{
	struct seq_buffer *base;
	struct seq_buffer *b;

	if (!of || of->freed || size == 0 || offset > of->size || size > of->size - offset)
		return -EINVAL;
	base = buffer_base(of);
	if (base->lost)
		return -ENXIO;
	b = buffer_new(seq);
	if (!b)
		return -ENOMEM;
	b->base = base;
	b->offset = of->offset + offset;
	b->size = size;
	b->addr = base->addr + b->offset;
	base->refs++;
	*out = b;
	return 0;
}

static void buffer_release(struct seq *seq, struct seq_buffer *b)
{
	void (*gone)(void *) = b->gone;
	void *arg = b->gone_arg;

	if (!b->lost && !b->early_released)
		buffer_mem_release(seq, b);
	seq->counters.releases++;
	seq_trace_emit(seq, SEQ_TRACE_RELEASE, (struct seq_point){0, 0}, SEQ_OP_EXEC, b, b->def);
	buffer_unlink(seq, b);
	free(b);
	if (gone)
		gone(arg);
}

/* A base nobody holds any more: hand its memory back now, or once it is idle (I5). */
static void buffer_drop(struct seq *seq, struct seq_buffer *b)
{
	if (seq->config.legacy_early_free || seq_buffer_idle(seq, b)) {
		buffer_release(seq, b);
		return;
	}
	if (seq->npending == seq->cappending) {
		size_t cap = seq->cappending ? seq->cappending * 2 : 16;
		struct seq_buffer **p = realloc(seq->pending, cap * sizeof(*p));
		if (!p)
			return; /* stays allocated until seq_destroy: a leak, never a reuse */
		seq->pending = p;
		seq->cappending = cap;
	}
	seq->pending[seq->npending++] = b;
	b->pending = true;
	seq->counters.frees_deferred++;
	seq_trace_emit(seq, SEQ_TRACE_DEFER_FREE, (struct seq_point){0, 0}, SEQ_OP_EXEC, b, b->def);
	/* Its release waits on these points: make sure their completion will be learned. */
	if (!point_complete(seq, b->def))
		stream_record(seq, b->def.stream);
	for (uint64_t m = b->reader_mask; m; m &= m - 1) {
		unsigned x = (unsigned)__builtin_ctzll(m);

		if (b->readers[x] > seq->streams[x].completed)
			stream_record(seq, x);
	}
}

void seq_buffer_on_gone(struct seq_buffer *base, void (*gone)(void *arg), void *arg)
{
	base->gone = gone;
	base->gone_arg = arg;
}

void seq_buffer_free(struct seq *seq, struct seq_buffer *buf)
{
	struct seq_buffer *base = buffer_base(buf);
	const bool is_base = !buf->base;

	if (!is_base) {
		buffer_unlink(seq, buf);
		free(buf);
	} else {
		buf->freed = true;
	}
	/* Injected: the memory goes back now, though slices still name it; the base stays
	 * for them, marked lost-free (it releases nothing later). */
	if (is_base && base->refs > 1 && seq->config.legacy_slice_outlives_base && !base->lost) {
		buffer_mem_release(seq, base);
		base->early_released = true;
	}
	if (--base->refs == 0)
		buffer_drop(seq, base);
}

/* A stream of the pool [first, first + n) holding an unfinished point the op must wait
 * for, or UINT32_MAX. Putting the op there turns that wait into stream order: a chain of
 * dependent copies (a burst into one buffer, a gather) runs back to back on one stream
 * instead of hopping between streams through events, each hop costing the GPU an event
 * wait (microseconds). */
static uint32_t pool_affinity(
	const struct seq *seq, const struct seq_op *op, uint32_t first, uint32_t n)
{
	for (unsigned i = 0; i < op->naccess; i++) {
		const struct seq_buffer *b = buffer_base(op->access[i].buf);

		if (b->def.stream - first < n && !point_complete(seq, b->def))
			return b->def.stream;
		if (!(op->access[i].mode & SEQ_WRITE))
			continue;
		for (uint32_t x = first; x < first + n; x++)
			if (b->readers[x] &&
				!point_complete(seq, (struct seq_point){x, b->readers[x]}))
				return x;
	}
	return UINT32_MAX;
}

/* The stream of a pool that an op's lane names: lanes share streams when there are more
 * lanes than streams. */
static uint32_t lane_stream(const struct seq *seq, enum seq_stream_kind kind, uint32_t lane)
{
	const uint32_t first = seq->layout.first[kind];

	return lane == SEQ_LANE_NONE ? first : first + (lane - 1) % seq->layout.count[kind];
}

/* Kernels and H2D copies go on their lane's stream of the compute and H2D pools. D2H and
 * D2D copies go where an unfinished point they depend on already is (pool_affinity),
 * else on their lane's stream, else (no lane) round robin, so that independent copies
 * overlap. */
static uint32_t seq_pick_stream(const struct seq *seq, const struct seq_op *op, bool *affine)
{
	enum seq_stream_kind kind;
	uint32_t first, n, s;
	unsigned rr;

	*affine = false;
	kind = seq_op_stream_kind(op->kind);
	if (kind == SEQ_STREAM_COMPUTE || kind == SEQ_STREAM_H2D)
		return lane_stream(seq, kind, op->lane);
	rr = kind == SEQ_STREAM_D2H ? seq->rr_d2h : seq->rr_d2d;
	first = seq->layout.first[kind];
	n = seq->layout.count[kind];
	s = n > 1 ? pool_affinity(seq, op, first, n) : UINT32_MAX;
	*affine = s != UINT32_MAX;
	if (*affine)
		return s;
	return op->lane != SEQ_LANE_NONE ? lane_stream(seq, kind, op->lane) : first + rr % n;
}

static int op_validate(const struct seq_op *op)
{
	if (op->naccess > SEQ_MAX_ACCESS || (unsigned)op->kind >= SEQ_OP_KINDS)
		return -EINVAL;
	for (unsigned i = 0; i < op->naccess; i++) {
		const struct seq_access *a = &op->access[i];
		/* A base its owner freed may still be named through a live slice (I6). */
		if (!a->buf || (a->buf->freed && a->buf->refs == 0) || a->mode < SEQ_READ ||
			a->mode > SEQ_READWRITE)
			return -EINVAL;
	}
	/* I7: one definition per write. */
	for (unsigned i = 0; i < op->naccess; i++)
		for (unsigned j = i + 1; j < op->naccess; j++)
			if ((op->access[i].mode & SEQ_WRITE) && (op->access[j].mode & SEQ_WRITE) &&
				buffer_base(op->access[i].buf) == buffer_base(op->access[j].buf))
				return -EEXIST;
	return 0;
}

/* Whether the op's stream must wait for producer p of b, counting the decision. */
static bool op_needs(struct seq *seq, uint32_t s, const struct seq_buffer *b, struct seq_point p,
	enum seq_op_kind kind)
{
	/* The point the op gets if it launches: what the trace shows it under. */
	struct seq_point at = {s, seq->streams[s].issued + 1};
	unsigned window = seq->config.legacy_sync_window;

	if (p.seq == 0)
		return false;
	if (p.stream == s) {
		seq->counters.waits_elided_same_stream++;
		seq_trace_emit(seq, SEQ_TRACE_ELIDE_SAME_STREAM, at, kind, b, p);
		return false;
	}
	if (point_complete(seq, p)) {
		seq->counters.waits_elided_observed++;
		seq_trace_emit(seq, SEQ_TRACE_ELIDE_OBSERVED, at, kind, b, p);
		return false;
	}
	/* The injected legacy bug: an H2D definition held as a compute-stream sync point
	 * counts as complete once that point has left a window of `window` entries. */
	if (window && b->legacy_mark && p.stream == b->def.stream && p.seq == b->def.seq &&
		seq->streams[b->legacy_stream].issued + 1 - b->legacy_mark >= window) {
		seq->counters.waits_elided_legacy++;
		seq_trace_emit(seq, SEQ_TRACE_ELIDE_LEGACY, at, kind, b, p);
		return false;
	}
	return true;
}

/* An op that cannot run: what it would have written now carries its error (I9). */
static int op_fail(struct seq *seq, struct seq_op *op, uint32_t s, int error,
	enum seq_fail_cause why, const struct seq_buffer *cause, struct seq_point producer)
{
	op->fail_cause = why;
	op->failed_producer = producer;
	for (unsigned i = 0; i < op->naccess; i++)
		if ((op->access[i].mode & SEQ_WRITE) && !buffer_base(op->access[i].buf)->lost)
			buffer_base(op->access[i].buf)->error = error;
	seq->counters.ops_failed++;
	seq_trace_emit(seq, SEQ_TRACE_FAIL_DEPENDENCY, (struct seq_point){s, 0}, op->kind, cause,
		producer);
	return error;
}

/* The op's stream has a free window slot, else -EAGAIN (nothing emitted; at->stream
 * names the full stream for the caller's resume). */
static int submit_window(struct seq *seq, const struct seq_op *op, uint32_t s, struct seq_point *at)
{
	struct stream *st = &seq->streams[s];

	if (st->issued - st->completed < seq->config.window)
		return 0;
	seq->counters.backpressure++;
	seq_trace_emit(seq, SEQ_TRACE_BACKPRESSURE, (struct seq_point){s, 0}, op->kind, NULL,
		(struct seq_point){s, st->completed + 1});
	stream_record(seq, s);
	if (at)
		*at = (struct seq_point){s, 0};
	return -EAGAIN;
}

/* I9 before launch: the stream's device error, or an input's failure, fails the op. */
static int submit_failures(struct seq *seq, struct seq_op *op, uint32_t s)
{
	struct stream *st = &seq->streams[s];

	for (unsigned i = 0; i < op->naccess; i++) {
		struct seq_buffer *b = buffer_base(op->access[i].buf);

		if (b->lost)
			return op_fail(seq, op, s, -ENXIO, SEQ_FAIL_LOST, b, b->def);
	}
	if (st->error)
		return op_fail(seq, op, s, st->error, SEQ_FAIL_STREAM, NULL,
			(struct seq_point){s, st->fail_from});
	for (unsigned i = 0; i < op->naccess; i++) {
		struct seq_buffer *b = buffer_base(op->access[i].buf);
		int error = seq_buffer_error(seq, b);

		if (!error)
			continue;
		if (op->access[i].mode & SEQ_READ)
			return op_fail(seq, op, s, error, SEQ_FAIL_INPUT, b, b->def);
		/* A write of part of a failed base leaves the rest as the failed op left it. The
		 * failure may be known only through b->def, which this write is about to move:
		 * b->error keeps it (I9). Only a write of the whole base clears it, at launch. */
		if (op->access[i].buf->size != b->size)
			b->error = error;
	}
	return 0;
}

/* What an op must wait for: the latest point per stream (need[x], valid where bit x of
 * mask is set), with a buffer each for the trace. A mask, so that neither collecting nor
 * emitting walks every stream of the layout (up to SEQ_MAX_STREAMS). */
struct submit_needs {
	uint64_t mask;
	uint64_t need[SEQ_MAX_STREAMS];
	const struct seq_buffer *buf[SEQ_MAX_STREAMS];
};

static void needs_add(struct submit_needs *n, struct seq_point p, const struct seq_buffer *b)
{
	const uint64_t bit = 1ull << p.stream;

	if (!(n->mask & bit) || n->need[p.stream] < p.seq) {
		n->mask |= bit;
		n->need[p.stream] = p.seq;
		n->buf[p.stream] = b;
	}
}

/* An exclusive op waits for the last point issued on every other stream; any op waits
 * for the last exclusive one, until that is complete. */
static void submit_needs_exclusive(
	struct seq *seq, const struct seq_op *op, uint32_t s, struct submit_needs *n)
{
	if (seq->barrier.seq && !point_complete(seq, seq->barrier) && seq->barrier.stream != s)
		needs_add(n, seq->barrier, NULL);
	if (!op->exclusive)
		return;
	for (uint32_t x = 0; x < seq->layout.nstreams; x++) {
		const struct stream *o = &seq->streams[x];

		if (x != s && o->issued > o->completed)
			needs_add(n, (struct seq_point){x, o->issued}, NULL);
	}
}

/* I1/I2: the latest point on each stream that op must wait for (its inputs' producers,
 * and for what it writes, their readers). Fills in each access's device view for the
 * backend. */
static void submit_needs(struct seq *seq, struct seq_op *op, uint32_t s, struct submit_needs *n)
{
	for (unsigned i = 0; i < op->naccess; i++) {
		struct seq_access *a = &op->access[i];
		const struct seq_buffer *b = buffer_base(a->buf);

		a->addr = a->buf->addr;
		a->size = a->buf->size;
		a->alloc = b->alloc;
		if (op_needs(seq, s, b, b->def, op->kind))
			needs_add(n, b->def, b);
		if (!(a->mode & SEQ_WRITE))
			continue;
		for (uint64_t m = b->reader_mask; m; m &= m - 1) {
			struct seq_point p = {(uint32_t)__builtin_ctzll(m), 0};

			p.seq = b->readers[p.stream];
			if (op_needs(seq, s, b, p, op->kind))
				needs_add(n, p, b);
		}
	}
}

/* One wait per stream needed, in stream order, each on the earliest event covering the
 * point, kept in the op's point record (rec) for retirement. */
static int submit_waits(struct seq *seq, struct seq_op *op, uint32_t s, struct point_rec *rec,
	const struct submit_needs *n)
{
	const uint64_t next = seq->streams[s].issued + 1;

	/* Most ops wait on one stream or none, which fit inline without counting (the count
	 * is a library call where the CPU baseline has no popcnt). */
	if (n->mask & (n->mask - 1)) {
		const unsigned nwaits = (unsigned)__builtin_popcountll(n->mask);

		if (nwaits > POINT_WAITS_INLINE &&
			!(rec->more = malloc((nwaits - POINT_WAITS_INLINE) * sizeof(*rec->more))))
			return op_fail(seq, op, s, -ENOMEM, SEQ_FAIL_LAUNCH, NULL,
				(struct seq_point){s, 0});
	}
	for (uint64_t m = n->mask; m; m &= m - 1) {
		uint32_t x = (uint32_t)__builtin_ctzll(m);
		uint64_t event;
		int r;

		r = stream_event_for(seq, x, n->need[x], &event);
		/* Injected: every Nth wait is decided and kept in the core's books, but the
		 * device never hears of it. */
		if (r >= 0 && seq->config.drop_wait &&
			++seq->waits_decided % seq->config.drop_wait == 0)
			seq->counters.waits_dropped++;
		else if (r >= 0)
			r = seq->dev.wait(seq->dev_ctx, s, (struct seq_point){x, event});
		if (r < 0)
			return op_fail(seq, op, s, r, SEQ_FAIL_LAUNCH, NULL,
				(struct seq_point){x, n->need[x]});
		seq->counters.waits_enqueued++;
		seq_trace_emit(seq, SEQ_TRACE_WAIT, (struct seq_point){s, next}, op->kind,
			n->buf[x], (struct seq_point){x, n->need[x]});
		if (rec->nwaits < POINT_WAITS_INLINE)
			rec->waits[rec->nwaits] = (struct point_wait){x, event};
		else
			rec->more[rec->nwaits - POINT_WAITS_INLINE] = (struct point_wait){x, event};
		rec->nwaits++;
	}
	return 0;
}

/* The op launched as p: it is now the reader or the definition (I1) of its buffers. */
static void submit_commit(struct seq *seq, const struct seq_op *op, struct seq_point p, bool affine)
{
	seq->counters.ops_submitted++;
	if (affine)
		seq->counters.placed_by_affinity++;
	else if (op->lane == SEQ_LANE_NONE && op->kind == SEQ_OP_D2H)
		seq->rr_d2h++;
	else if (op->lane == SEQ_LANE_NONE && op->kind == SEQ_OP_D2D)
		seq->rr_d2d++;

	for (unsigned i = 0; i < op->naccess; i++) {
		const struct seq_access *a = &op->access[i];
		struct seq_buffer *b = buffer_base(a->buf);
		if (a->mode & SEQ_READ) {
			b->readers[p.stream] = p.seq;
			b->reader_mask |= 1ull << p.stream;
		}
		if (!(a->mode & SEQ_WRITE))
			continue;
		b->def = p;
		/* Cleared where set, so readers[] reads 0 wherever the mask has no bit. */
		for (uint64_t m = b->reader_mask; m; m &= m - 1)
			b->readers[__builtin_ctzll(m)] = 0;
		b->reader_mask = 0;
		if (a->mode == SEQ_WRITE && a->buf->size == b->size)
			b->error = 0;
		b->legacy_mark = 0;
		if (op->kind == SEQ_OP_H2D && seq->config.legacy_sync_window) {
			b->legacy_stream = lane_stream(seq, SEQ_STREAM_COMPUTE, op->lane);
			b->legacy_mark = seq->streams[b->legacy_stream].issued + 1;
		}
	}
}

int seq_submit(struct seq *seq, struct seq_op *op, struct seq_point *at)
{
	struct submit_needs needs;
	struct point_rec *rec;
	struct stream *st;
	struct seq_point p;
	uint32_t s;
	bool affine;
	int r;

	op->fail_cause = SEQ_FAIL_NONE;
	r = op_validate(op);
	if (r == -EEXIST)
		seq->counters.double_definitions++;
	if (r < 0)
		return r;

	s = seq_pick_stream(seq, op, &affine);
	st = &seq->streams[s];
	r = submit_window(seq, op, s, at);
	if (r < 0)
		return r;
	/* The window check above means the point this slot held is complete and its record
	 * done with: fill it in place. Until the launch succeeds nothing reads it. */
	rec = &st->recs[(st->issued + 1) % seq->config.window];
	rec->nwaits = 0;
	free(rec->more);
	rec->more = NULL;
	r = submit_failures(seq, op, s);
	if (r < 0)
		return r;
	needs.mask = 0;
	submit_needs(seq, op, s, &needs);
	if (seq->barrier.seq || op->exclusive)
		submit_needs_exclusive(seq, op, s, &needs);
	r = submit_waits(seq, op, s, rec, &needs);
	if (r < 0)
		return r;

	p = (struct seq_point){s, st->issued + 1};
	r = seq->dev.launch(seq->dev_ctx, p, op);
	if (r < 0)
		return op_fail(seq, op, s, r, SEQ_FAIL_LAUNCH, NULL, p);
	st->issued = p.seq;
	if (op->exclusive)
		seq->barrier = p;
	rec->cookie = op->cookie;
	rec->want_done = op->want_done;
	submit_commit(seq, op, p, affine);
	if (at)
		*at = p;
	return 0;
}

static int watch_add(struct seq *seq, uint32_t x, uint64_t n, struct watch *w)
{
	struct stream *s = &seq->streams[x];
	size_t i;
	int r;

	if (s->recorded < n) {
		r = stream_record(seq, x);
		if (r < 0)
			return r;
	}
	if (s->nwatches == s->capwatches) {
		size_t cap = s->capwatches ? s->capwatches * 2 : 8;
		struct watch_ent *e = realloc(s->watches, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		s->watches = e;
		s->capwatches = cap;
	}
	/* Kept ascending; usually an append. */
	for (i = s->nwatches; i > 0 && s->watches[i - 1].seq > n; i--)
		s->watches[i] = s->watches[i - 1];
	s->watches[i] = (struct watch_ent){n, w};
	s->nwatches++;
	w->pending++;
	return 0;
}

int seq_await(struct seq *seq, const struct seq_buffer *buf, uint64_t cookie, struct seq_point *at)
{
	const struct seq_buffer *b = buffer_base(buf);
	struct watch *w;
	int r = seq_buffer_error(seq, b);

	if (r < 0)
		return r;
	if (point_complete(seq, b->def))
		return 1;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->cookie = cookie;
	r = watch_add(seq, b->def.stream, b->def.seq, w);
	if (r < 0)
		free(w);
	else if (at)
		*at = b->def;
	return r;
}

int seq_sync_points(struct seq *seq, const uint64_t *upto, uint64_t cookie)
{
	struct watch *w = calloc(1, sizeof(*w));
	int r = 0;

	if (!w)
		return -ENOMEM;
	w->cookie = cookie;
	/* Held by one extra count while the entries go in, so none can finish it early. */
	w->pending = 1;
	for (uint32_t x = 0; x < seq->layout.nstreams && r >= 0; x++) {
		uint64_t n = upto ? upto[x] : seq->streams[x].issued;
		if (n > seq->streams[x].issued)
			n = seq->streams[x].issued;
		if (n > seq->streams[x].completed)
			r = watch_add(seq, x, n, w);
	}
	if (--w->pending == 0) {
		free(w);
		return r < 0 ? r : 1;
	}
	/* On a partial failure the entries already in still finish (and free) the watch. */
	return r < 0 ? r : 0;
}

int seq_sync(struct seq *seq, uint64_t cookie)
{
	return seq_sync_points(seq, NULL, cookie);
}

void seq_flush(struct seq *seq)
{
	for (uint32_t x = 0; x < seq->layout.nstreams; x++)
		stream_record(seq, x);
}

/* Acknowledge every point of s whose completion was reported and whose waited-on
 * streams are acknowledged up to the event it waited on. */
static bool stream_advance(struct seq *seq, uint32_t x)
{
	struct stream *s = &seq->streams[x];
	bool progress = false;

	while (s->completed < s->reported) {
		uint64_t n = s->completed + 1;
		const struct point_rec *r = &s->recs[n % seq->config.window];
		int status = (s->error && n >= s->fail_from) ? s->error : 0;

		for (unsigned i = 0; i < r->nwaits; i++) {
			const struct point_wait *w = point_rec_wait(r, i);
			const struct stream *o = &seq->streams[w->stream];
			if (o->error && w->event >= o->fail_from) {
				if (!status)
					status = o->error;
			} else if (o->completed < w->event) {
				return progress;
			}
		}
		if (status && (!s->error || n < s->fail_from)) {
			/* A device error spreads along waits: this stream is now broken too, from
			 * this point on. It may have failed already from a later point (this one
			 * was reported but not acknowledged when that failure came): then it is
			 * failed from here, with this point's error, so that what this point wrote
			 * reads as failed and agrees with its done() (I9). */
			s->error = status;
			s->fail_from = n;
		}
		s->completed = n;
		seq->counters.ops_completed++;
		progress = true;
		if (r->want_done && seq->obs.done)
			seq->obs.done(seq->obs.ctx, r->cookie, status);
	}
	return progress;
}

static void stream_retire_and_notify(struct seq *seq, uint32_t x)
{
	struct stream *s = &seq->streams[x];
	unsigned cap = seq->config.window + 1;
	size_t i = 0;

	while (s->ev_count && s->events[s->ev_head] <= s->completed) {
		if (seq->dev.retire)
			seq->dev.retire(seq->dev_ctx, (struct seq_point){x, s->events[s->ev_head]});
		s->ev_head = (s->ev_head + 1) % cap;
		s->ev_count--;
	}
	for (; i < s->nwatches && s->watches[i].seq <= s->completed; i++) {
		struct watch *w = s->watches[i].watch;
		if (point_failed(seq, (struct seq_point){x, s->watches[i].seq}) && !w->status)
			w->status = s->error;
		if (--w->pending == 0) {
			if (seq->obs.done)
				seq->obs.done(seq->obs.ctx, w->cookie, w->status);
			free(w);
		}
	}
	if (i) {
		memmove(s->watches, s->watches + i, (s->nwatches - i) * sizeof(*s->watches));
		s->nwatches -= i;
	}
}

static void seq_release_idle(struct seq *seq)
{
	size_t kept = 0;

	for (size_t i = 0; i < seq->npending; i++) {
		struct seq_buffer *b = seq->pending[i];
		if (seq_buffer_idle(seq, b))
			buffer_release(seq, b);
		else
			seq->pending[kept++] = b;
	}
	seq->npending = kept;
}

void seq_complete(struct seq *seq, struct seq_point through, int status)
{
	struct stream *s;
	bool progress;

	if (through.stream >= seq->layout.nstreams)
		return;
	s = &seq->streams[through.stream];
	/* Only points that were issued can complete; anything else is a backend bug. */
	if (through.seq > s->issued)
		through.seq = s->issued;
	if (status < 0 && !s->error) {
		s->error = status;
		s->fail_from = s->reported + 1; /* everything reported so far was fine */
	}
	if (through.seq > s->reported)
		s->reported = through.seq;

	do {
		progress = false;
		for (uint32_t x = 0; x < seq->layout.nstreams; x++)
			progress |= stream_advance(seq, x);
	} while (progress);
	for (uint32_t x = 0; x < seq->layout.nstreams; x++)
		stream_retire_and_notify(seq, x);
	seq_release_idle(seq);
}

uint64_t seq_reset(struct seq *seq, int status)
{
	uint64_t lost = 0;
	bool progress;

	/* Everything issued is reported, the unreported part failed. */
	for (uint32_t x = 0; x < seq->layout.nstreams; x++) {
		struct stream *s = &seq->streams[x];

		if (s->issued > s->reported) {
			if (!s->error) {
				s->error = status;
				s->fail_from = s->reported + 1;
			}
			s->reported = s->issued;
		}
	}
	do {
		progress = false;
		for (uint32_t x = 0; x < seq->layout.nstreams; x++)
			progress |= stream_advance(seq, x);
	} while (progress);
	/* The old backend's events are gone with it: no retire reaches the new one. */
	for (uint32_t x = 0; x < seq->layout.nstreams; x++) {
		struct stream *s = &seq->streams[x];

		s->ev_head = s->ev_count = 0;
		stream_retire_and_notify(seq, x);
		s->recorded = s->issued;
		s->error = 0;
		s->fail_from = 0;
	}
	for (size_t i = 0; i < seq->npending; i++) {
		seq->pending[i]->lost = true;
		buffer_release(seq, seq->pending[i]);
	}
	seq->npending = 0;
	for (struct seq_buffer *b = seq->all; b; b = b->all_next) {
		if (b->base || b->lost)
			continue;
		b->lost = true;
		lost++;
	}
	return lost;
}
