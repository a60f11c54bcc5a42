/* Model-based randomized test of the sequencer core: random client operations run on a
 * virtual device with random execution and completion orders, and every step is checked
 * against a deliberately simple model that knows nothing but program order, and (for
 * device faults) what the device reported and which events each op waited on. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sequencer.h"
#include "verify.h"

/* A tiny address space so that released ranges are handed out again at once: a use after
 * free then touches memory another base owns, which the device sees. */
#define MODEL_SPACE 1024
#define MODEL_MAX_SIZE 32
#define MODEL_MAX_HANDLES 32
#define MODEL_MAX_OP_ACCESS 4
#define MODEL_PRINT_BUDGET 12
/* Launch faults: rare, because a failure spreads to every later reader (I9). */
#define MODEL_INJECT_PERCENT 1
/* Device faults: a report that says its event completed with an error. A failed stream
 * stays failed (a failed compute stream refuses every later kernel), so only half the
 * sequences get them: most at 1 to 10 reports in 1000, one in five at 50 to 250 so that
 * failures of several streams meet. Not the launch faults' -EIO, so that which failure
 * reached an op shows. */
#define MODEL_DEVICE_ERROR (-EFAULT)
#define MODEL_DEVICE_FAULT_SEQUENCES_PERCENT 50
/* Mutation check: each broken in a private copy of sequencer.c, each caught in a run of
 * 3000 sequences: a partial write not carrying its base's device error; no spread along
 * waits; a base's error ignoring its definition's failure; a spread not moving a stream's
 * failure back to a point reported before it (rarest: 1 to 4 sequences in 3000). */
#define OWNER_FREE (-1)
#define OWNER_PENDING (-2)

enum model_mode {
	MODE_STRICT, /* every violation fails the test */
	MODE_LEGACY_SYNC_WINDOW, /* injected bugs: violations are counted */
	MODE_LEGACY_EARLY_FREE,
};

enum model_violation {
	V_RACE,
	V_UAF,
	V_EARLY_RELEASE,
	V_CHECKER, /* the schedule checker (verify.h), a second oracle, found one */
	V_OTHER,
	V_COUNT,
};

static const char *const violation_name[V_COUNT] = {
	"RACE",
	"USE-AFTER-FREE",
	"EARLY-RELEASE",
	"CHECKER",
	"VIOLATION",
};

/* splitmix64: tiny, and every 64-bit seed gives a good stream, so a sequence's seed can
 * be derived from the master seed and its index. */
struct rng {
	uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static unsigned rng_below(struct rng *r, unsigned n)
{
	return n ? (unsigned)(rng_next(r) % n) : 0;
}

static bool rng_chance(struct rng *r, unsigned percent)
{
	return rng_below(r, 100) < percent;
}

static void *vec_reserve(void *p, size_t *cap, size_t need, size_t elem)
{
	size_t ncap;

	if (need <= *cap)
		return p;
	ncap = *cap ? *cap * 2 : 16;
	while (ncap < need)
		ncap *= 2;
	p = realloc(p, ncap * elem);
	if (!p)
		abort();
	*cap = ncap;
	return p;
}

/* One allocation, in the model: what program order says about it. */
struct model_base {
	uint64_t addr;
	uint64_t size; /* as the client asked */
	uint64_t alloc_size; /* as mem_alloc was asked */
	bool client_freed;
	unsigned live_slices;
	bool released;
	/* I9 state after the last accepted or failed op, in program order: a failed op's
	 * error, or one a partial write carried; the last writer's device failure comes on
	 * top of it (model_base_error). */
	int error;
	long last_writer; /* accepted op id, or -1 */
	unsigned *readers; /* accepted ops that read it since last_writer */
	size_t nreaders, cap_readers;
	unsigned pending; /* accepted ops touching it that the device has not executed */
};

/* A live client handle: a base or a slice of one. */
struct model_handle {
	struct seq_buffer *buf;
	unsigned base;
	uint64_t offset; /* within the base */
	uint64_t size;
	bool is_slice;
};

struct model_access {
	unsigned base;
	unsigned mode;
	uint64_t addr;
	uint64_t size;
	bool whole; /* the view covers the whole base */
};

struct model_op {
	enum seq_op_kind kind;
	unsigned naccess;
	struct model_access access[MODEL_MAX_OP_ACCESS];
	struct seq_point at;
	bool executed;
	size_t pred_start, npred;
	long action;
	/* The events the core made it wait on, and what the device made of it: acked once
	 * the core can know it completed (model_learn), with status. */
	unsigned nwaits;
	struct seq_point waits[SEQ_MAX_STREAMS];
	bool acked;
	int status;
};

/* An op the model says must run before another, and why. */
struct model_pred {
	unsigned op;
	unsigned base;
	const char *why;
};

enum cookie_kind {
	COOKIE_OP,
	COOKIE_AWAIT,
	COOKIE_SYNC,
};

enum cookie_state {
	COOKIE_UNEXPECTED, /* no done() may name it */
	COOKIE_EXPECTED, /* exactly one done() must come */
	COOKIE_DONE,
};

struct model_cookie {
	enum cookie_kind kind;
	enum cookie_state state;
	long op; /* COOKIE_OP, COOKIE_AWAIT: the op whose completion it waits for (-1: none) */
	size_t nops; /* COOKIE_SYNC: ops accepted when it was asked */
	/* COOKIE_SYNC: per stream, the last point launched when it was asked if some were
	 * not acknowledged then, else 0: the points whose failure it reports. */
	uint64_t upto[SEQ_MAX_STREAMS];
};

struct dev_cmd {
	bool is_wait;
	struct seq_point event; /* wait */
	unsigned op; /* op */
};

/* One in-order stream of the virtual device. */
struct dev_stream {
	struct dev_cmd *q;
	size_t head, len, cap;
	uint64_t launched, executed, reported;
	uint64_t *events; /* recorded, ascending */
	bool *retired;
	size_t nevents, cap_events, cap_retired;
	/* What the core can know of the stream (model_learn): the ops by point, the last
	 * acknowledged point, and its device error with the first point it fails. */
	unsigned *ops;
	size_t nops, cap_ops;
	uint64_t acked;
	int error;
	uint64_t fail_from;
};

struct model {
	struct verify *verify; /* between the core and the model's device */
	uint64_t master_seed;
	unsigned index;
	enum model_mode mode;
	bool verbose;
	long action;
	char what[256];
	struct rng rng;
	struct seq_config config;
	struct seq *seq;
	unsigned nstreams;
	unsigned window; /* the window the core should apply */
	unsigned eager; /* % of actions followed by device progress: how fast the device is */
	unsigned fault_permille; /* reports that carry a device error, per 1000 */
	bool destroyed;

	int owner[MODEL_SPACE]; /* base id per address unit */
	bool alloc_called;
	uint64_t alloc_addr, alloc_size;

	struct model_base *bases;
	size_t nbases, cap_bases;
	struct model_handle handles[MODEL_MAX_HANDLES];
	unsigned nhandles;
	struct model_op *ops;
	size_t nops, cap_ops;
	struct model_pred *preds;
	size_t npreds, cap_preds;
	struct model_cookie *cookies;
	size_t ncookies, cap_cookies;
	struct dev_stream dev[SEQ_MAX_STREAMS];

	/* The seq_submit() call in progress: what the backend saw during it. */
	struct {
		bool active;
		const struct model_op *op;
		bool inject;
		unsigned records, waits, launches;
		uint32_t wait_stream;
		uint32_t waited; /* bitmask of streams waited on */
		struct seq_point wait_events[SEQ_MAX_STREAMS];
		bool launched;
		struct seq_point at;
	} sub;

	uint64_t n_failed, n_eexist, n_eagain, n_waits, n_releases;
	/* Device faults: reports that failed a stream, ops they failed on the device, ops
	 * refused on a failed stream, partial writes that carried a base's error. */
	uint64_t n_faults, n_device_failed, n_stream_refused, n_carried;
	unsigned violations[V_COUNT];
};

static unsigned print_budget = MODEL_PRINT_BUDGET;

static void model_fail(struct model *m, enum model_violation v, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Everything a failure report needs to be reproduced: the master seed, the sequence and
 * the client action that was running. */
static void model_fail(struct model *m, enum model_violation v, const char *fmt, ...)
{
	va_list ap;

	m->violations[v]++;
	if (!print_budget)
		return;
	print_budget--;
	fprintf(stderr, "test-model: %s: seed=%" PRIu64 " sequence=%u action=%ld (%s)%s\n  ",
		violation_name[v], m->master_seed, m->index, m->action, m->what,
		m->mode == MODE_STRICT ? "" : " [legacy bug injected]");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n  reproduce: SSEQ_MODEL_SEED=%" PRIu64 " SSEQ_MODEL_ONLY=%u%s\n",
		m->master_seed, m->index, m->mode == MODE_STRICT ? "" : " (legacy test)");
}

static void model_log(struct model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void model_log(struct model *m, const char *fmt, ...)
{
	va_list ap;

	if (!m->verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "  [%u:%ld] ", m->index, m->action);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

static unsigned model_total(const struct model *m)
{
	unsigned n = 0;

	for (unsigned v = 0; v < V_COUNT; v++)
		n += m->violations[v];
	return n;
}

static const char *op_kind_name(enum seq_op_kind kind)
{
	switch (kind) {
	case SEQ_OP_H2D:
		return "H2D";
	case SEQ_OP_D2H:
		return "D2H";
	case SEQ_OP_D2D:
		return "D2D";
	case SEQ_OP_EXEC:
		return "EXEC";
	}
	return "?";
}

static const char *mode_name(unsigned mode)
{
	switch (mode) {
	case SEQ_READ:
		return "R";
	case SEQ_WRITE:
		return "W";
	case SEQ_READWRITE:
		return "RW";
	}
	return "bad";
}

static void op_describe(const struct model_op *op, char *out, size_t len)
{
	int n = snprintf(out, len, "%s [", op_kind_name(op->kind));

	for (unsigned i = 0; i < op->naccess && n > 0 && (size_t)n < len; i++)
		n += snprintf(out + n, len - (size_t)n, "%s%s b%u@%" PRIu64 "+%" PRIu64,
			i ? ", " : "", mode_name(op->access[i].mode), op->access[i].base,
			op->access[i].addr, op->access[i].size);
	if (n > 0 && (size_t)n < len)
		snprintf(out + n, len - (size_t)n, "]");
}

/* ---- the virtual device: the backend the core drives ---- */

/* The model's own numbering of the layout sseq(7) documents: the compute pool, then the
 * H2D, D2H and D2D pools. */
static enum seq_stream_kind stream_kind(const struct model *m, uint32_t s)
{
	const struct seq_config *c = &m->config;

	if (s < c->n_compute)
		return SEQ_STREAM_COMPUTE;
	if (s < c->n_compute + c->n_h2d)
		return SEQ_STREAM_H2D;
	if (s < c->n_compute + c->n_h2d + c->n_d2h)
		return SEQ_STREAM_D2H;
	return SEQ_STREAM_D2D;
}

static bool stream_fits_op(const struct model *m, uint32_t s, enum seq_op_kind kind)
{
	static const enum seq_stream_kind want[SEQ_OP_KINDS] = {
		[SEQ_OP_H2D] = SEQ_STREAM_H2D,
		[SEQ_OP_D2H] = SEQ_STREAM_D2H,
		[SEQ_OP_D2D] = SEQ_STREAM_D2D,
		[SEQ_OP_EXEC] = SEQ_STREAM_COMPUTE,
	};

	return (unsigned)kind < SEQ_OP_KINDS && s < m->nstreams && stream_kind(m, s) == want[kind];
}

static void dev_push(struct dev_stream *d, struct dev_cmd cmd)
{
	d->q = vec_reserve(d->q, &d->cap, d->len + 1, sizeof(*d->q));
	d->q[d->len++] = cmd;
}

/* Index of the event recorded at seq on d, or -1. */
static long dev_find_event(const struct dev_stream *d, uint64_t seq)
{
	for (size_t i = d->nevents; i-- > 0;) {
		if (d->events[i] == seq)
			return (long)i;
		if (d->events[i] < seq)
			break;
	}
	return -1;
}

static int dev_mem_alloc(void *ctx, uint64_t size, uint64_t *addr)
{
	struct model *m = ctx;
	uint64_t run = 0;

	if (m->destroyed)
		model_fail(m, V_OTHER, "mem_alloc after seq_destroy");
	if (size == 0 || size > MODEL_SPACE)
		return -ENOMEM;
	/* First fit from the bottom: what was just released is what comes back. */
	for (uint64_t a = 0; a < MODEL_SPACE; a++) {
		run = m->owner[a] == OWNER_FREE ? run + 1 : 0;
		if (run == size) {
			uint64_t start = a + 1 - size;

			for (uint64_t u = start; u <= a; u++)
				m->owner[u] = OWNER_PENDING;
			m->alloc_called = true;
			m->alloc_addr = start;
			m->alloc_size = size;
			*addr = start;
			return 0;
		}
	}
	return -ENOMEM;
}

static void dev_mem_release(void *ctx, uint64_t addr, uint64_t size)
{
	struct model *m = ctx;
	struct model_base *b;
	int owner;

	model_log(m, "mem_release %" PRIu64 "+%" PRIu64, addr, size);
	if (m->destroyed)
		model_fail(m, V_OTHER, "mem_release(%" PRIu64 ") after seq_destroy", addr);
	if (addr >= MODEL_SPACE || size > MODEL_SPACE - addr) {
		model_fail(m, V_OTHER,
			"mem_release of a range never allocated: %" PRIu64 "+%" PRIu64, addr, size);
		return;
	}
	owner = m->owner[addr];
	if (owner == OWNER_PENDING) {
		/* A failed seq_buffer_alloc handing back what it got. */
		for (uint64_t u = addr; u < addr + size; u++)
			m->owner[u] = OWNER_FREE;
		m->alloc_called = false;
		return;
	}
	if (owner < 0) {
		model_fail(m, V_OTHER,
			"mem_release of unallocated memory %" PRIu64 "+%" PRIu64
			" (double release?)",
			addr, size);
		return;
	}
	b = &m->bases[owner];
	if (b->addr != addr || b->alloc_size != size) {
		model_fail(m, V_OTHER,
			"mem_release(%" PRIu64 "+%" PRIu64 ") does not match b%d's "
			"allocation %" PRIu64 "+%" PRIu64,
			addr, size, owner, b->addr, b->alloc_size);
		return;
	}
	if (!b->client_freed || b->live_slices)
		model_fail(m, V_EARLY_RELEASE,
			"b%d released while the client still holds it "
			"(base freed: %d, live slices: %u)",
			owner, b->client_freed, b->live_slices);
	if (b->pending)
		model_fail(m, V_EARLY_RELEASE,
			"b%d released while %u accepted op(s) touching it "
			"have not executed on the device (I5)",
			owner, b->pending);
	for (uint64_t u = addr; u < addr + size; u++)
		m->owner[u] = OWNER_FREE;
	b->released = true;
	m->n_releases++;
}

static int dev_record(void *ctx, struct seq_point at)
{
	struct model *m = ctx;
	struct dev_stream *d;

	model_log(m, "record (%u,%" PRIu64 ")", at.stream, at.seq);
	if (m->destroyed)
		model_fail(m, V_OTHER, "record after seq_destroy");
	if (at.stream >= m->nstreams) {
		model_fail(m, V_OTHER, "record on stream %u of %u", at.stream, m->nstreams);
		return -EINVAL;
	}
	d = &m->dev[at.stream];
	if (at.seq != d->launched || at.seq == 0)
		model_fail(m, V_OTHER,
			"record at (%u,%" PRIu64 ") but the stream's last launched "
			"point is %" PRIu64,
			at.stream, at.seq, d->launched);
	if (m->sub.active)
		m->sub.records++;
	if (d->nevents && d->events[d->nevents - 1] >= at.seq)
		return 0; /* the same point twice: the event already exists */
	d->events = vec_reserve(d->events, &d->cap_events, d->nevents + 1, sizeof(*d->events));
	d->retired = vec_reserve(d->retired, &d->cap_retired, d->nevents + 1, sizeof(*d->retired));
	d->events[d->nevents] = at.seq;
	d->retired[d->nevents] = false;
	d->nevents++;
	return 0;
}

static int dev_wait(void *ctx, uint32_t stream, struct seq_point event)
{
	struct model *m = ctx;
	long e;

	model_log(m, "wait %u on (%u,%" PRIu64 ")", stream, event.stream, event.seq);
	if (m->destroyed)
		model_fail(m, V_OTHER, "wait after seq_destroy");
	if (stream >= m->nstreams || event.stream >= m->nstreams) {
		model_fail(m, V_OTHER, "wait %u on (%u,%" PRIu64 "): no such stream", stream,
			event.stream, event.seq);
		return -EINVAL;
	}
	m->n_waits++;
	if (stream == event.stream)
		model_fail(m, V_OTHER, "stream %u waits on its own event (%u,%" PRIu64 ")", stream,
			event.stream, event.seq);
	e = dev_find_event(&m->dev[event.stream], event.seq);
	if (e < 0)
		model_fail(m, V_OTHER, "wait on (%u,%" PRIu64 "): no event was recorded there",
			event.stream, event.seq);
	else if (m->dev[event.stream].retired[e])
		model_fail(m, V_OTHER, "wait on (%u,%" PRIu64 "), an event already retired",
			event.stream, event.seq);
	if (m->sub.active) {
		if (m->sub.waits && m->sub.wait_stream != stream)
			model_fail(m, V_OTHER, "one op's waits go to streams %u and %u",
				m->sub.wait_stream, stream);
		if (m->sub.waited & (1u << event.stream))
			model_fail(m, V_OTHER, "two waits on stream %u for one op", event.stream);
		if (m->sub.waits < SEQ_MAX_STREAMS)
			m->sub.wait_events[m->sub.waits] = event;
		m->sub.waits++;
		m->sub.wait_stream = stream;
		m->sub.waited |= 1u << event.stream;
	} else {
		model_fail(m, V_OTHER, "wait emitted outside seq_submit");
	}
	dev_push(&m->dev[stream], (struct dev_cmd){.is_wait = true, .event = event});
	return 0;
}

static int dev_launch(void *ctx, struct seq_point at, const struct seq_op *op)
{
	struct model *m = ctx;
	const struct model_op *want = m->sub.op;
	struct dev_stream *d;

	model_log(m, "launch %s at (%u,%" PRIu64 ")%s", op_kind_name(op->kind), at.stream, at.seq,
		m->sub.inject ? " -> injected -EIO" : "");
	if (m->destroyed)
		model_fail(m, V_OTHER, "launch after seq_destroy");
	if (!m->sub.active || !want) {
		model_fail(m, V_OTHER, "launch outside seq_submit");
		return -EINVAL;
	}
	m->sub.launches++;
	if (m->sub.launches > 1) {
		model_fail(m, V_OTHER, "one op launched twice");
		return -EINVAL;
	}
	if (!stream_fits_op(m, at.stream, op->kind)) {
		model_fail(
			m, V_OTHER, "%s launched on stream %u", op_kind_name(op->kind), at.stream);
		return -EINVAL;
	}
	if (m->sub.waits && m->sub.wait_stream != at.stream)
		model_fail(m, V_OTHER, "the op's waits went to stream %u, it runs on %u",
			m->sub.wait_stream, at.stream);
	if (m->sub.waited & (1u << at.stream))
		model_fail(m, V_OTHER, "stream %u waited on itself", at.stream);
	d = &m->dev[at.stream];
	if (at.seq != d->launched + 1)
		model_fail(m, V_OTHER, "launch at (%u,%" PRIu64 ") after point %" PRIu64, at.stream,
			at.seq, d->launched);
	if (op->naccess != want->naccess) {
		model_fail(m, V_OTHER, "launch with %u accesses, submitted %u", op->naccess,
			want->naccess);
		return -EINVAL;
	}
	for (unsigned i = 0; i < op->naccess; i++) {
		if (op->access[i].addr != want->access[i].addr ||
			op->access[i].size != want->access[i].size ||
			op->access[i].mode != want->access[i].mode)
			model_fail(m, V_OTHER,
				"access %u launched as %s %" PRIu64 "+%" PRIu64
				", the view is %s %" PRIu64 "+%" PRIu64,
				i, mode_name(op->access[i].mode), op->access[i].addr,
				op->access[i].size, mode_name(want->access[i].mode),
				want->access[i].addr, want->access[i].size);
	}
	if (m->sub.inject)
		return -EIO;
	d->launched = at.seq;
	m->sub.launched = true;
	m->sub.at = at;
	/* The op will get the next id when seq_submit() reports it accepted. */
	dev_push(d, (struct dev_cmd){.is_wait = false, .op = (unsigned)m->nops});
	return 0;
}

static void dev_retire(void *ctx, struct seq_point event)
{
	struct model *m = ctx;
	struct dev_stream *d;
	long e;

	model_log(m, "retire (%u,%" PRIu64 ")", event.stream, event.seq);
	if (m->destroyed)
		model_fail(m, V_OTHER, "retire after seq_destroy");
	if (event.stream >= m->nstreams) {
		model_fail(m, V_OTHER, "retire on stream %u", event.stream);
		return;
	}
	d = &m->dev[event.stream];
	e = dev_find_event(d, event.seq);
	if (e < 0) {
		model_fail(m, V_OTHER, "retire of (%u,%" PRIu64 "), never recorded", event.stream,
			event.seq);
		return;
	}
	if (d->retired[e])
		model_fail(m, V_OTHER, "(%u,%" PRIu64 ") retired twice", event.stream, event.seq);
	/* I3: only a reported event, or one before it on the same stream, is complete. */
	if (event.seq > d->reported)
		model_fail(m, V_OTHER,
			"(%u,%" PRIu64 ") retired but the stream was reported "
			"only through %" PRIu64 " (completion inferred, I3)",
			event.stream, event.seq, d->reported);
	d->retired[e] = true;
}

static bool model_ops_executed(const struct model *m, size_t nops, long *missing)
{
	for (size_t i = 0; i < nops; i++) {
		if (!m->ops[i].executed) {
			*missing = (long)i;
			return false;
		}
	}
	return true;
}

/* Whether point n of a stream failed, as far as the device has said. */
static bool dev_failed_at(const struct dev_stream *d, uint64_t n)
{
	return d->error && n >= d->fail_from;
}

/* The status c's done() must carry: the op's own, or the awaited writer's; a sync's, the
 * error of a stream it waited for that failed at or before the point it waited for.
 * *why is set where no done() may come yet. */
static int model_cookie_status(
	const struct model *m, const struct model_cookie *c, const char **why)
{
	int status = 0;

	*why = NULL;
	if (c->kind == COOKIE_SYNC) {
		for (uint32_t x = 0; x < m->nstreams; x++) {
			const struct dev_stream *d = &m->dev[x];

			if (!c->upto[x])
				continue;
			if (d->acked < c->upto[x]) {
				*why = "before every point it waits for could be known complete";
				return 0;
			}
			if (!status && dev_failed_at(d, c->upto[x]))
				status = d->error;
		}
		return status;
	}
	if (c->op < 0 || !m->ops[c->op].acked) {
		*why = "before its op could be known complete";
		return 0;
	}
	return m->ops[c->op].status;
}

static void dev_done(void *ctx, uint64_t cookie, int status)
{
	struct model *m = ctx;
	struct model_cookie *c;
	const char *why;
	long missing;
	int want;

	model_log(m, "done %" PRIu64 " status %d", cookie, status);
	if (m->destroyed)
		model_fail(m, V_OTHER, "done(%" PRIu64 ") after seq_destroy", cookie);
	if (cookie >= m->ncookies) {
		model_fail(m, V_OTHER, "done(%" PRIu64 "): no such cookie", cookie);
		return;
	}
	c = &m->cookies[cookie];
	if (c->state != COOKIE_EXPECTED) {
		model_fail(m, V_OTHER, "done(%" PRIu64 ", %d) %s", cookie, status,
			c->state == COOKIE_DONE ? "called twice"
						: "for a request that was not to call done (yet)");
		return;
	}
	c->state = COOKIE_DONE;
	want = model_cookie_status(m, c, &why);
	if (why)
		model_fail(m, V_OTHER, "%s done(%" PRIu64 ", %d) %s",
			c->kind == COOKIE_SYNC	       ? "sync"
				: c->kind == COOKIE_OP ? "op"
						       : "await",
			cookie, status, why);
	else if (status != want)
		model_fail(m, V_OTHER,
			"done(%" PRIu64 ") with status %d, the model expects %d (device "
			"faults: %" PRIu64 ")",
			cookie, status, want, m->n_faults);
	if (c->kind == COOKIE_SYNC) {
		if (!model_ops_executed(m, c->nops, &missing))
			model_fail(m, V_RACE,
				"sync done(%" PRIu64 ") but op %ld (%s at (%u,%" PRIu64
				")) has not executed",
				cookie, missing, op_kind_name(m->ops[missing].kind),
				m->ops[missing].at.stream, m->ops[missing].at.seq);
	} else if (c->op >= 0 && !m->ops[c->op].executed) {
		model_fail(m, V_RACE,
			"%s done(%" PRIu64 ") but op %ld (%s at (%u,%" PRIu64 ")) "
			"has not executed",
			c->kind == COOKIE_OP ? "op" : "await", cookie, c->op,
			op_kind_name(m->ops[c->op].kind), m->ops[c->op].at.stream,
			m->ops[c->op].at.seq);
	}
}

static void dev_trace(void *ctx, const struct seq_trace *t)
{
	(void)ctx;
	(void)t;
}

/* Run the op at the head of stream s: the model's checks 1 (order) and memory. */
static void dev_execute(struct model *m, uint32_t s, unsigned id)
{
	struct model_op *op = &m->ops[id];
	struct dev_stream *d = &m->dev[s];
	char desc[200];

	op_describe(op, desc, sizeof(desc));
	model_log(m, "execute op %u %s at (%u,%" PRIu64 ")", id, desc, s, op->at.seq);
	d->executed = op->at.seq;
	for (size_t i = 0; i < op->npred; i++) {
		const struct model_pred *p = &m->preds[op->pred_start + i];
		const struct model_op *q = &m->ops[p->op];

		if (!q->executed)
			model_fail(m, V_RACE,
				"op %u %s at (%u,%" PRIu64 ", action %ld) ran before op %u "
				"%s at (%u,%" PRIu64 ", action %ld) on b%u (%s): missing wait",
				id, desc, s, op->at.seq, op->action, p->op, op_kind_name(q->kind),
				q->at.stream, q->at.seq, q->action, p->base, p->why);
	}
	for (unsigned i = 0; i < op->naccess; i++) {
		const struct model_access *a = &op->access[i];

		for (uint64_t u = a->addr; u < a->addr + a->size; u++) {
			if (u >= MODEL_SPACE || m->owner[u] != (int)a->base) {
				model_fail(m, V_UAF,
					"op %u %s at (%u,%" PRIu64 ") touches %" PRIu64
					" for b%u, but that memory is %s",
					id, desc, s, op->at.seq, u, a->base,
					u >= MODEL_SPACE		    ? "outside the device"
						: m->owner[u] == OWNER_FREE ? "free"
									    : "another base's");
				break;
			}
		}
	}
	op->executed = true;
	for (unsigned i = 0; i < op->naccess; i++) {
		bool seen = false;

		for (unsigned j = 0; j < i; j++)
			seen |= op->access[j].base == op->access[i].base;
		if (!seen)
			m->bases[op->access[i].base].pending--;
	}
}

static bool dev_runnable(const struct model *m, uint32_t s)
{
	const struct dev_stream *d = &m->dev[s];
	const struct dev_cmd *c;

	if (d->head == d->len)
		return false;
	c = &d->q[d->head];
	return !c->is_wait || m->dev[c->event.stream].executed >= c->event.seq;
}

/* Execute the head of one random stream that can run; false when none can. */
static bool dev_step(struct model *m)
{
	uint32_t cand[SEQ_MAX_STREAMS];
	unsigned n = 0;
	struct dev_cmd c;
	uint32_t s;

	for (uint32_t i = 0; i < m->nstreams; i++)
		if (dev_runnable(m, i))
			cand[n++] = i;
	if (!n)
		return false;
	s = cand[rng_below(&m->rng, n)];
	c = m->dev[s].q[m->dev[s].head++];
	if (!c.is_wait)
		dev_execute(m, s, c.op);
	return true;
}

/* One stream's part of model_learn: acknowledge its reported points in order while what
 * each waited on is known: complete, or failed. */
static bool model_ack(struct model *m, uint32_t x)
{
	struct dev_stream *d = &m->dev[x];
	bool moved = false;

	while (d->acked < d->reported && d->acked < d->nops) {
		uint64_t n = d->acked + 1;
		struct model_op *op = &m->ops[d->ops[n - 1]];
		int status = dev_failed_at(d, n) ? d->error : 0;

		for (unsigned i = 0; i < op->nwaits; i++) {
			const struct dev_stream *o = &m->dev[op->waits[i].stream];

			if (dev_failed_at(o, op->waits[i].seq)) {
				if (!status)
					status = o->error;
			} else if (o->acked < op->waits[i].seq) {
				return moved;
			}
		}
		/* Waiting on a failed event fails the op and its stream from it on. */
		if (status && !dev_failed_at(d, n)) {
			d->error = status;
			d->fail_from = n;
		}
		op->acked = true;
		op->status = status;
		m->n_device_failed += status != 0;
		d->acked = n;
		moved = true;
	}
	return moved;
}

/* What the core can know once stream s reported through `through` with status, the
 * stream having reported through `before` until now. A device error fails the stream
 * from its first point not reported before (they ran since the last good report); a
 * point is known complete once reported and once every event it waited on is known
 * complete or failed; it fails if its stream failed at or before it or it waited on a
 * failed event. Learned before the core is told, so that done() is checked as it
 * comes. */
static void model_learn(struct model *m, uint32_t s, uint64_t before, int status)
{
	struct dev_stream *d = &m->dev[s];
	bool moved = true;

	if (status && !d->error) {
		d->error = status;
		d->fail_from = before + 1;
		m->n_faults++;
	}
	while (moved) {
		moved = false;
		for (uint32_t x = 0; x < m->nstreams; x++)
			moved |= model_ack(m, x);
	}
}

/* Check I3 from outside: no stream is complete beyond what was reported for it, and the
 * core knows of each stream what the model knows: how far it is complete, and whether
 * it failed. */
static void model_check_streams(struct model *m)
{
	for (uint32_t s = 0; s < m->nstreams; s++) {
		struct seq_stream_info info;

		seq_stream_info(m->seq, s, &info);
		if (info.completed > m->dev[s].reported)
			model_fail(m, V_OTHER,
				"stream %u completed through %" PRIu64 " but reported "
				"only through %" PRIu64 " (I3)",
				s, info.completed, m->dev[s].reported);
		else if (info.completed != m->dev[s].acked)
			model_fail(m, V_OTHER,
				"stream %u completed through %" PRIu64 ", the model "
				"through %" PRIu64,
				s, info.completed, m->dev[s].acked);
		if (info.error != m->dev[s].error)
			model_fail(m, V_OTHER,
				"stream %u error %d, the model says %d (failed from %" PRIu64 ")",
				s, info.error, m->dev[s].error, m->dev[s].fail_from);
		if (info.issued != m->dev[s].launched)
			model_fail(m, V_OTHER, "stream %u issued %" PRIu64 ", launched %" PRIu64, s,
				info.issued, m->dev[s].launched);
	}
}

/* Report a fired event on stream s: the latest one, or any later than the last report. */
static bool dev_report(struct model *m, uint32_t s, bool latest)
{
	struct dev_stream *d = &m->dev[s];
	size_t lo = d->nevents, hi = 0;
	size_t pick;
	struct seq_point through;
	uint64_t before;
	int status = 0;

	for (size_t i = 0; i < d->nevents; i++) {
		if (d->events[i] > d->reported && d->events[i] <= d->executed) {
			if (lo == d->nevents)
				lo = i;
			hi = i + 1;
		}
	}
	if (lo == d->nevents)
		return false;
	pick = latest ? hi - 1 : lo + rng_below(&m->rng, (unsigned)(hi - lo));
	through = (struct seq_point){.stream = s, .seq = d->events[pick]};
	if (m->fault_permille && rng_below(&m->rng, 1000) < m->fault_permille)
		status = MODEL_DEVICE_ERROR;
	model_log(m, "complete (%u,%" PRIu64 ")%s", s, through.seq,
		status ? " with a device error" : "");
	before = d->reported;
	d->reported = through.seq;
	model_learn(m, s, before, status);
	verify_complete(m->verify, through);
	seq_complete(m->seq, through, status);
	model_check_streams(m);
	return true;
}

static void dev_report_random(struct model *m)
{
	uint32_t s = rng_below(&m->rng, m->nstreams);

	for (uint32_t i = 0; i < m->nstreams; i++)
		if (dev_report(m, (s + i) % m->nstreams, false))
			return;
}

/* Let the device make progress: a few random steps and reports, or (full) run it to idle
 * and report everything that fired until nothing more happens. */
static void model_progress(struct model *m, bool full)
{
	if (!full) {
		unsigned steps = 1 + rng_below(&m->rng, 2 * m->nstreams);

		for (unsigned i = 0; i < steps && dev_step(m); i++)
			;
		for (unsigned i = rng_below(&m->rng, 3); i > 0; i--)
			dev_report_random(m);
		return;
	}
	for (bool moved = true; moved;) {
		moved = false;
		while (dev_step(m))
			moved = true;
		for (uint32_t s = 0; s < m->nstreams; s++)
			moved |= dev_report(m, s, true);
	}
}

/* ---- the model: program order only ---- */

static void model_pred_add(struct model *m, unsigned op, unsigned base, const char *why)
{
	m->preds = vec_reserve(m->preds, &m->cap_preds, m->npreds + 1, sizeof(*m->preds));
	m->preds[m->npreds++] = (struct model_pred){.op = op, .base = base, .why = why};
}

static bool op_writes_twice(const struct model_op *op)
{
	for (unsigned i = 0; i < op->naccess; i++)
		for (unsigned j = i + 1; j < op->naccess; j++)
			if (op->access[i].base == op->access[j].base &&
				(op->access[i].mode & SEQ_WRITE) &&
				(op->access[j].mode & SEQ_WRITE))
				return true;
	return false;
}

static bool op_malformed(const struct seq_op *op)
{
	/* No access at all is fine (a kernel on scalars only); too many is not. */
	if (op->naccess > SEQ_MAX_ACCESS || (unsigned)op->kind >= SEQ_OP_KINDS)
		return true;
	for (unsigned i = 0; i < op->naccess; i++)
		if (op->access[i].mode < SEQ_READ || op->access[i].mode > SEQ_READWRITE)
			return true;
	return false;
}

/* A base's I9 state as the core can know it: a failed op's (or a carried) error, else
 * its last writer's device failure once reported. */
static int model_base_error(const struct model *m, unsigned base)
{
	const struct model_base *b = &m->bases[base];
	const struct model_op *w;

	if (b->error || b->last_writer < 0)
		return b->error;
	w = &m->ops[b->last_writer];
	return dev_failed_at(&m->dev[w->at.stream], w->at.seq) ? m->dev[w->at.stream].error : 0;
}

/* I9 from program order: an op fails when it reads a base in error. */
static int op_input_error(const struct model *m, const struct model_op *op)
{
	for (unsigned i = 0; i < op->naccess; i++) {
		int error = model_base_error(m, op->access[i].base);

		if ((op->access[i].mode & SEQ_READ) && error)
			return error;
	}
	return 0;
}

static void model_mark_failed(struct model *m, const struct model_op *op, int error)
{
	for (unsigned i = 0; i < op->naccess; i++)
		if (op->access[i].mode & SEQ_WRITE)
			m->bases[op->access[i].base].error = error;
	m->n_failed++;
}

/* The op was accepted: derive from program order what it must follow, then advance. */
static void model_accept(struct model *m, const struct model_op *want)
{
	unsigned id = (unsigned)m->nops;
	struct model_op *op;

	m->ops = vec_reserve(m->ops, &m->cap_ops, m->nops + 1, sizeof(*m->ops));
	op = &m->ops[m->nops++];
	*op = *want;
	op->at = m->sub.at;
	op->executed = false;
	op->action = m->action;
	op->nwaits = m->sub.waits < SEQ_MAX_STREAMS ? m->sub.waits : SEQ_MAX_STREAMS;
	memcpy(op->waits, m->sub.wait_events, op->nwaits * sizeof(op->waits[0]));
	op->acked = false;
	op->status = 0;
	if (op->at.stream < m->nstreams) {
		struct dev_stream *d = &m->dev[op->at.stream];

		if (op->at.seq != d->nops + 1)
			model_fail(m, V_OTHER, "op accepted at (%u,%" PRIu64 ") after point %zu",
				op->at.stream, op->at.seq, d->nops);
		d->ops = vec_reserve(d->ops, &d->cap_ops, d->nops + 1, sizeof(*d->ops));
		d->ops[d->nops++] = id;
	}
	/* I9: a write of part of a base in error leaves the rest as the failure left it, so
	 * the error stays once this op defines the base; a write of the whole clears it. */
	for (unsigned i = 0; i < op->naccess; i++) {
		const struct model_access *a = &op->access[i];
		int error = model_base_error(m, a->base);

		if ((a->mode & SEQ_WRITE) && !(a->mode == SEQ_WRITE && a->whole) && error) {
			/* Counted where only the writer's device failure held it until now. */
			m->n_carried += m->bases[a->base].error == 0;
			m->bases[a->base].error = error;
		}
	}
	op->pred_start = m->npreds;
	for (unsigned i = 0; i < op->naccess; i++) {
		struct model_base *b = &m->bases[op->access[i].base];

		if ((op->access[i].mode & SEQ_READ) && b->last_writer >= 0)
			model_pred_add(m, (unsigned)b->last_writer, op->access[i].base,
				"read after write");
		if (op->access[i].mode & SEQ_WRITE) {
			if (b->last_writer >= 0)
				model_pred_add(m, (unsigned)b->last_writer, op->access[i].base,
					"write after write");
			for (size_t r = 0; r < b->nreaders; r++)
				model_pred_add(
					m, b->readers[r], op->access[i].base, "write after read");
		}
	}
	op->npred = m->npreds - op->pred_start;
	for (unsigned i = 0; i < op->naccess; i++) {
		struct model_base *b = &m->bases[op->access[i].base];
		bool seen = false;

		for (unsigned j = 0; j < i; j++)
			seen |= op->access[j].base == op->access[i].base;
		if (!seen)
			b->pending++;
		if (op->access[i].mode & SEQ_WRITE) {
			b->last_writer = id;
			b->nreaders = 0;
			if (op->access[i].mode == SEQ_WRITE && op->access[i].whole)
				b->error = 0;
		}
	}
	for (unsigned i = 0; i < op->naccess; i++) {
		struct model_base *b = &m->bases[op->access[i].base];

		if (op->access[i].mode != SEQ_READ || b->last_writer == id)
			continue;
		if (b->nreaders && b->readers[b->nreaders - 1] == id)
			continue;
		b->readers = vec_reserve(
			b->readers, &b->cap_readers, b->nreaders + 1, sizeof(*b->readers));
		b->readers[b->nreaders++] = id;
	}
}

static size_t model_cookie_new(struct model *m, enum cookie_kind kind)
{
	m->cookies = vec_reserve(m->cookies, &m->cap_cookies, m->ncookies + 1, sizeof(*m->cookies));
	m->cookies[m->ncookies] = (struct model_cookie){
		.kind = kind,
		.state = COOKIE_UNEXPECTED,
		.op = -1,
	};
	return m->ncookies++;
}

static void model_access_set(struct model *m, struct model_op *mop, struct seq_op *op, unsigned i,
	const struct model_handle *h, unsigned mode)
{
	const struct model_base *b = &m->bases[h->base];

	op->access[i] = (struct seq_access){.buf = h->buf, .mode = mode};
	mop->access[i] = (struct model_access){
		.base = h->base,
		.mode = mode,
		.addr = b->addr + h->offset,
		.size = h->size,
		.whole = h->offset == 0 && h->size == b->size,
	};
}

/* For an op the core did not refuse as malformed: what the model expects of it, given
 * where the core put it (the model does not choose among a pool's streams). An op on a
 * stream known to have failed is refused with that stream's error; else one reading a
 * base in error with that error (I9); else a launch fault with -EIO. */
static int model_expect(struct model *m, const struct seq_op *op, const struct model_op *mop,
	int rc, bool inject, bool *on_stream, bool *by_input)
{
	unsigned nfit = 0, nfailed = 0;
	int expect;

	*on_stream = *by_input = false;
	for (uint32_t x = 0; x < m->nstreams; x++) {
		if (stream_fits_op(m, x, op->kind)) {
			nfit++;
			nfailed += m->dev[x].error != 0;
		}
	}
	if (rc < 0 && op->fail_cause == SEQ_FAIL_STREAM) {
		struct seq_point f = op->failed_producer;

		*on_stream = true;
		m->n_stream_refused++;
		if (!stream_fits_op(m, f.stream, op->kind)) {
			model_fail(m, V_OTHER, "refused for stream %u, which cannot run a %s",
				f.stream, op_kind_name(op->kind));
			return rc;
		}
		if (!m->dev[f.stream].error || f.seq != m->dev[f.stream].fail_from)
			model_fail(m, V_OTHER,
				"refused for stream %u as failed from %" PRIu64 ", the model "
				"knows it failed from %" PRIu64 " (0: not failed)",
				f.stream, f.seq,
				m->dev[f.stream].error ? m->dev[f.stream].fail_from : 0);
		return m->dev[f.stream].error ? m->dev[f.stream].error : rc;
	}
	if (nfit && nfailed == nfit)
		model_fail(m, V_OTHER,
			"every stream for %s has failed, yet the op was not refused for it "
			"(returned %d)",
			op_kind_name(op->kind), rc);
	if (m->sub.launched && m->sub.at.stream < m->nstreams && m->dev[m->sub.at.stream].error)
		model_fail(m, V_OTHER, "launched at (%u,%" PRIu64 ") on a stream known failed",
			m->sub.at.stream, m->sub.at.seq);
	expect = op_input_error(m, mop);
	*by_input = expect != 0;
	if (!expect && inject)
		expect = -EIO;
	return expect;
}

/* Submit, predict the outcome from the model alone, and hold the core to it. Backpressure
 * is retried after device progress; it must clear (liveness). */
static void model_submit(struct model *m, struct seq_op *op, struct model_op *mop, bool inject)
{
	int expect = 0, rc;
	bool by_input = false, on_stream = false;
	size_t cookie = 0;
	unsigned tries = 0;
	char desc[200];

	mop->naccess = op->naccess <= MODEL_MAX_OP_ACCESS ? op->naccess : 0;
	mop->kind = op->kind;
	op_describe(mop, desc, sizeof(desc));
	snprintf(m->what, sizeof(m->what), "submit %s%s", desc, inject ? " with launch fault" : "");
	model_log(m, "%s", m->what);
	if (op_malformed(op))
		expect = -EINVAL;
	else if (op_writes_twice(mop))
		expect = -EEXIST;
	if (op->want_done) {
		cookie = model_cookie_new(m, COOKIE_OP);
		op->cookie = cookie;
	}
	/* Lanes only place ops; ordering must hold whatever they say (past the pool's size
	 * too, and none at all). */
	op->lane = rng_chance(&m->rng, 20) ? SEQ_LANE_NONE
					   : SEQ_LANE(rng_below(&m->rng, m->config.n_compute + 2));
	for (;;) {
		memset(&m->sub, 0, sizeof(m->sub));
		m->sub.active = true;
		m->sub.op = mop;
		m->sub.inject = inject;
		rc = seq_submit(m->seq, op, NULL);
		m->sub.active = false;
		if (rc != -EAGAIN)
			break;
		m->n_eagain++;
		if (expect == -EINVAL || expect == -EEXIST)
			model_fail(m, V_OTHER, "-EAGAIN for an op that must be refused with %d",
				expect);
		if (m->sub.launches || m->sub.waits)
			model_fail(m, V_OTHER, "-EAGAIN but %u wait(s) and %u launch(es) emitted",
				m->sub.waits, m->sub.launches);
		if (m->sub.launched)
			break;
		tries++;
		if (tries > 12) {
			model_fail(m, V_OTHER,
				"LIVENESS: still -EAGAIN after the device ran to idle "
				"and every fired event was reported");
			return;
		}
		model_progress(m, tries > 8);
	}
	/* Judged on what the core knew when it answered: retries let the device move. */
	if (expect != -EINVAL && expect != -EEXIST)
		expect = model_expect(m, op, mop, rc, inject, &on_stream, &by_input);
	if (rc != expect)
		model_fail(m, V_OTHER, "seq_submit returned %d, the model expects %d%s", rc, expect,
			on_stream		 ? " (its stream failed on the device)"
				: by_input	 ? " (reads a base in error, I9)"
				: expect == -EIO ? " (injected launch fault)"
						 : "");
	if (rc != -EINVAL && rc != -EEXIST &&
		op->fail_cause !=
			(rc == 0		    ? SEQ_FAIL_NONE
					: on_stream ? SEQ_FAIL_STREAM
					: by_input  ? SEQ_FAIL_INPUT
						    : SEQ_FAIL_LAUNCH))
		model_fail(m, V_OTHER, "seq_submit returned %d with fail_cause %d", rc,
			(int)op->fail_cause);
	if (m->sub.launched) {
		/* Launched: the device will run it whatever seq_submit said. */
		model_accept(m, mop);
		if (m->sub.at.stream < m->nstreams) {
			struct seq_stream_info info;

			/* I3's backpressure: never more incomplete points than the window. */
			seq_stream_info(m->seq, m->sub.at.stream, &info);
			if (info.issued - info.completed > m->window)
				model_fail(m, V_OTHER,
					"stream %u has %" PRIu64 " incomplete points, "
					"window %u",
					m->sub.at.stream, info.issued - info.completed, m->window);
		}
		if (rc == 0 && op->want_done) {
			m->cookies[cookie].state = COOKIE_EXPECTED;
			m->cookies[cookie].op = (long)m->nops - 1;
		}
		return;
	}
	if (rc == 0) {
		model_fail(m, V_OTHER, "seq_submit returned 0 without a launch");
		return;
	}
	if (expect == -EINVAL || expect == -EEXIST) {
		if (m->sub.records || m->sub.waits || m->sub.launches)
			model_fail(m, V_OTHER,
				"refused op emitted %u record(s), %u wait(s), "
				"%u launch(es)",
				m->sub.records, m->sub.waits, m->sub.launches);
		if (expect == -EEXIST)
			m->n_eexist++;
		return;
	}
	if (!by_input && !on_stream) {
		if (m->sub.launches != 1)
			model_fail(m, V_OTHER, "launch fault expected, %u launch(es) tried",
				m->sub.launches);
	} else if (m->sub.records || m->sub.waits || m->sub.launches) {
		model_fail(m, V_OTHER,
			"op failed by %s (I9) but %u record(s), %u wait(s), "
			"%u launch(es) were emitted",
			on_stream ? "its stream" : "its input", m->sub.records, m->sub.waits,
			m->sub.launches);
	}
	model_mark_failed(m, mop, expect);
}

/* ---- client actions ---- */

static int model_pick(struct model *m)
{
	return m->nhandles ? (int)rng_below(&m->rng, m->nhandles) : -1;
}

static void model_alloc(struct model *m, uint64_t size, int *handle)
{
	struct seq_buffer *buf = NULL;
	struct model_base *b;
	int rc;

	*handle = -1;
	snprintf(m->what, sizeof(m->what), "alloc %" PRIu64, size);
	model_log(m, "%s", m->what);
	if (m->nhandles == MODEL_MAX_HANDLES)
		return;
	m->alloc_called = false;
	rc = seq_buffer_alloc(m->seq, size, &buf);
	if (rc) {
		if (rc != -ENOMEM || m->alloc_called)
			model_fail(m, V_OTHER, "seq_buffer_alloc: %d (mem_alloc %s)", rc,
				m->alloc_called ? "succeeded" : "failed with -ENOMEM");
		return;
	}
	if (!m->alloc_called) {
		model_fail(m, V_OTHER, "seq_buffer_alloc without mem_alloc");
		return;
	}
	if (buf->addr != m->alloc_addr || buf->size != size || buf->base)
		model_fail(m, V_OTHER,
			"new base: addr %" PRIu64 " size %" PRIu64 " base %p, "
			"expected addr %" PRIu64 " size %" PRIu64,
			buf->addr, buf->size, (void *)buf->base, m->alloc_addr, size);
	m->bases = vec_reserve(m->bases, &m->cap_bases, m->nbases + 1, sizeof(*m->bases));
	b = &m->bases[m->nbases];
	*b = (struct model_base){
		.addr = m->alloc_addr,
		.size = size,
		.alloc_size = m->alloc_size,
		.last_writer = -1,
	};
	for (uint64_t u = b->addr; u < b->addr + b->alloc_size; u++)
		m->owner[u] = (int)m->nbases;
	m->handles[m->nhandles] = (struct model_handle){
		.buf = buf,
		.base = (unsigned)m->nbases,
		.size = size,
	};
	*handle = (int)m->nhandles++;
	m->nbases++;
}

static void model_slice(struct model *m, int of, bool in_bounds)
{
	const struct model_handle *h = &m->handles[of];
	struct seq_buffer *buf = NULL;
	uint64_t off, size;
	int rc;

	if (in_bounds) {
		off = rng_below(&m->rng, (unsigned)h->size);
		size = 1 + rng_below(&m->rng, (unsigned)(h->size - off));
	} else {
		off = rng_below(&m->rng, (unsigned)h->size + 1);
		size = h->size - off + 1 + rng_below(&m->rng, 4);
	}
	snprintf(m->what, sizeof(m->what),
		"slice b%u[%" PRIu64 "+%" PRIu64 "] at %" PRIu64 "+%" PRIu64, h->base, h->offset,
		h->size, off, size);
	model_log(m, "%s", m->what);
	if (m->nhandles == MODEL_MAX_HANDLES)
		return;
	rc = seq_buffer_slice(m->seq, h->buf, off, size, &buf);
	if (!in_bounds) {
		if (rc != -EINVAL)
			model_fail(m, V_OTHER, "out-of-bounds slice returned %d", rc);
		if (!rc)
			seq_buffer_free(m->seq, buf);
		return;
	}
	if (rc) {
		model_fail(m, V_OTHER, "in-bounds slice returned %d", rc);
		return;
	}
	if (buf->addr != m->bases[h->base].addr + h->offset + off || buf->size != size)
		model_fail(m, V_OTHER,
			"slice view %" PRIu64 "+%" PRIu64 ", expected %" PRIu64 "+%" PRIu64,
			buf->addr, buf->size, m->bases[h->base].addr + h->offset + off, size);
	m->bases[h->base].live_slices++;
	m->handles[m->nhandles++] = (struct model_handle){
		.buf = buf,
		.base = h->base,
		.offset = h->offset + off,
		.size = size,
		.is_slice = true,
	};
}

static void model_free(struct model *m, int i)
{
	struct model_handle h = m->handles[i];

	snprintf(m->what, sizeof(m->what), "free %s of b%u", h.is_slice ? "slice" : "base", h.base);
	model_log(m, "%s", m->what);
	/* The model moves first: the release this may trigger is checked against it. */
	if (h.is_slice)
		m->bases[h.base].live_slices--;
	else
		m->bases[h.base].client_freed = true;
	m->handles[i] = m->handles[--m->nhandles];
	seq_buffer_free(m->seq, h.buf);
}

static void model_await(struct model *m, int i)
{
	const struct model_handle *h = &m->handles[i];
	const struct model_base *b = &m->bases[h->base];
	size_t cookie = model_cookie_new(m, COOKIE_AWAIT);
	int rc, err, want = model_base_error(m, h->base);

	snprintf(m->what, sizeof(m->what), "await b%u (cookie %zu)", h->base, cookie);
	model_log(m, "%s", m->what);
	m->cookies[cookie].op = b->last_writer;
	err = seq_buffer_error(m->seq, h->buf);
	if (err != want)
		model_fail(m, V_OTHER, "seq_buffer_error(b%u) = %d, the model says %d", h->base,
			err, want);
	if (seq_buffer_idle(m->seq, h->buf) && b->pending)
		model_fail(m, V_OTHER,
			"seq_buffer_idle(b%u) but %u op(s) touching it have not "
			"executed",
			h->base, b->pending);
	rc = seq_await(m->seq, h->buf, cookie, NULL);
	if (want) {
		if (rc != want)
			model_fail(m, V_OTHER, "await of b%u in error %d returned %d", h->base,
				want, rc);
		return;
	}
	if (rc == 1) {
		if (b->last_writer >= 0 && !m->ops[b->last_writer].executed)
			model_fail(m, V_RACE,
				"await(b%u) returned 1 but its writer, op %ld, has not "
				"executed",
				h->base, b->last_writer);
		else if (b->last_writer >= 0 && !m->ops[b->last_writer].acked)
			model_fail(m, V_OTHER,
				"await(b%u) returned 1 but its writer, op %ld, cannot be "
				"known complete yet",
				h->base, b->last_writer);
	} else if (rc == 0) {
		if (b->last_writer < 0)
			model_fail(m, V_OTHER, "await(b%u), never written, returned 0", h->base);
		else if (m->ops[b->last_writer].acked)
			model_fail(m, V_OTHER,
				"await(b%u) returned 0 but its writer, op %ld, is known "
				"complete",
				h->base, b->last_writer);
		m->cookies[cookie].state = COOKIE_EXPECTED;
	} else {
		model_fail(m, V_OTHER, "await(b%u) returned %d", h->base, rc);
	}
}

static void model_sync(struct model *m)
{
	size_t cookie = model_cookie_new(m, COOKIE_SYNC);
	long missing;
	int rc;

	snprintf(m->what, sizeof(m->what), "sync (cookie %zu)", cookie);
	model_log(m, "%s", m->what);
	m->cookies[cookie].nops = m->nops;
	for (uint32_t x = 0; x < m->nstreams; x++)
		if (m->dev[x].acked < m->dev[x].launched)
			m->cookies[cookie].upto[x] = m->dev[x].launched;
	rc = seq_sync(m->seq, cookie);
	if (rc == 1) {
		if (!model_ops_executed(m, m->nops, &missing))
			model_fail(
				m, V_RACE, "sync returned 1 but op %ld has not executed", missing);
	} else if (rc == 0) {
		m->cookies[cookie].state = COOKIE_EXPECTED;
	} else {
		model_fail(m, V_OTHER, "sync returned %d", rc);
	}
}

static void model_flush(struct model *m)
{
	snprintf(m->what, sizeof(m->what), "flush");
	model_log(m, "%s", m->what);
	seq_flush(m->seq);
	for (uint32_t s = 0; s < m->nstreams; s++) {
		const struct dev_stream *d = &m->dev[s];

		if (d->launched && (!d->nevents || d->events[d->nevents - 1] < d->launched))
			model_fail(m, V_OTHER,
				"after seq_flush stream %u has no event at its last "
				"point %" PRIu64,
				s, d->launched);
	}
}

static unsigned model_random_mode(struct model *m)
{
	static const unsigned modes[] = {SEQ_READ, SEQ_READ, SEQ_WRITE, SEQ_READWRITE};

	return modes[rng_below(&m->rng, 4)];
}

static int model_handle_of_base(struct model *m, unsigned base)
{
	unsigned start = rng_below(&m->rng, m->nhandles);

	for (unsigned i = 0; i < m->nhandles; i++)
		if (m->handles[(start + i) % m->nhandles].base == base)
			return (int)((start + i) % m->nhandles);
	return -1;
}

static void model_copy(struct model *m, enum seq_op_kind kind)
{
	struct seq_op op = {.kind = kind};
	struct model_op mop = {0};
	int src = model_pick(m), dst = model_pick(m);

	switch (kind) {
	case SEQ_OP_H2D:
		/* Uploads mostly fill a whole base: the write that clears an error (I9). */
		for (unsigned i = 0; i < m->nhandles && rng_chance(&m->rng, 50); i++) {
			if (!m->handles[(dst + i) % m->nhandles].is_slice) {
				dst = (int)((dst + i) % m->nhandles);
				break;
			}
		}
		model_access_set(m, &mop, &op, 0, &m->handles[dst], SEQ_WRITE);
		op.naccess = 1;
		break;
	case SEQ_OP_D2H:
		model_access_set(m, &mop, &op, 0, &m->handles[src], SEQ_READ);
		op.naccess = 1;
		break;
	default:
		/* Source and destination may share a base: one read and one write is fine. */
		if (rng_chance(&m->rng, 15)) {
			int other = model_handle_of_base(m, m->handles[src].base);

			if (other >= 0)
				dst = other;
		}
		model_access_set(m, &mop, &op, 0, &m->handles[src], SEQ_READ);
		model_access_set(m, &mop, &op, 1, &m->handles[dst], SEQ_WRITE);
		op.naccess = 2;
		break;
	}
	op.want_done = rng_chance(&m->rng, kind == SEQ_OP_D2H ? 60 : 15);
	model_submit(m, &op, &mop, rng_chance(&m->rng, MODEL_INJECT_PERCENT));
}

static void model_exec(struct model *m)
{
	struct seq_op op = {.kind = SEQ_OP_EXEC};
	struct model_op mop = {0};
	unsigned n = 1 + rng_below(&m->rng, MODEL_MAX_OP_ACCESS);
	int pick[MODEL_MAX_OP_ACCESS];
	unsigned mode[MODEL_MAX_OP_ACCESS];

	for (unsigned i = 0; i < n; i++) {
		pick[i] = model_pick(m);
		mode[i] = model_random_mode(m);
	}
	if (n >= 2 && rng_chance(&m->rng, 5)) {
		/* Two writes of one base, possibly through different views: -EEXIST (I7). */
		pick[1] = model_handle_of_base(m, m->handles[pick[0]].base);
		mode[0] = SEQ_WRITE;
		mode[1] = rng_chance(&m->rng, 50) ? SEQ_WRITE : SEQ_READWRITE;
	}
	for (unsigned i = 0; i < n; i++)
		model_access_set(m, &mop, &op, i, &m->handles[pick[i]], mode[i]);
	op.naccess = n;
	if (rng_chance(&m->rng, 3)) {
		switch (rng_below(&m->rng, 4)) {
		case 0: /* a kernel that touches no buffer: valid */
			op.naccess = 0;
			break;
		case 1: /* more accesses than an op can carry */
			op.naccess = SEQ_MAX_ACCESS + 1;
			break;
		case 2: /* no such kind */
			op.kind = (enum seq_op_kind)SEQ_OP_KINDS;
			break;
		default: /* a mode that is none of the three */
			op.access[n - 1].mode = rng_chance(&m->rng, 50) ? 0 : 4;
			mop.access[n - 1].mode = op.access[n - 1].mode;
			break;
		}
	}
	op.want_done = rng_chance(&m->rng, 15);
	model_submit(m, &op, &mop, rng_chance(&m->rng, MODEL_INJECT_PERCENT));
}

/* Submit a plain op on one or two handles (h1 < 0: one), without fault injection. */
static void model_submit_plain(
	struct model *m, enum seq_op_kind kind, int h0, unsigned mode0, int h1, unsigned mode1)
{
	struct seq_op op = {.kind = kind, .naccess = h1 < 0 ? 1 : 2};
	struct model_op mop = {0};

	model_access_set(m, &mop, &op, 0, &m->handles[h0], mode0);
	if (h1 >= 0)
		model_access_set(m, &mop, &op, 1, &m->handles[h1], mode1);
	model_submit(m, &op, &mop, false);
}

/* A fresh base written by H2D, several EXECs on the compute stream, then an EXEC reading
 * the H2D buffer: the shape of the original bug. Under legacy_sync_window the reader's
 * wait is elided while the copy may still be pending. */
static void model_pattern_sync_window(struct model *m)
{
	unsigned execs = m->config.legacy_sync_window + 1 + rng_below(&m->rng, 2);
	int a, scratch;

	model_alloc(m, 1 + rng_below(&m->rng, MODEL_MAX_SIZE), &a);
	model_alloc(m, 1 + rng_below(&m->rng, MODEL_MAX_SIZE), &scratch);
	if (a < 0 || scratch < 0)
		return;
	model_submit_plain(m, SEQ_OP_H2D, a, SEQ_WRITE, -1, 0);
	for (unsigned i = 0; i < execs; i++)
		model_submit_plain(m, SEQ_OP_EXEC, scratch, SEQ_WRITE, -1, 0);
	model_submit_plain(m, SEQ_OP_EXEC, scratch, SEQ_WRITE, a, SEQ_READ);
}

/* A buffer read by a pending EXEC, freed, and its memory handed out again at once. */
static void model_pattern_early_free(struct model *m)
{
	uint64_t size = 1 + rng_below(&m->rng, MODEL_MAX_SIZE);
	int a, out, again;

	model_alloc(m, size, &a);
	model_alloc(m, 1 + rng_below(&m->rng, MODEL_MAX_SIZE), &out);
	if (a < 0 || out < 0)
		return;
	model_submit_plain(m, SEQ_OP_H2D, a, SEQ_WRITE, -1, 0);
	model_submit_plain(m, SEQ_OP_EXEC, a, SEQ_READ, out, SEQ_WRITE);
	model_free(m, a);
	/* First fit: the same size lands on the range just released. */
	model_alloc(m, size, &again);
	if (again >= 0)
		model_submit_plain(m, SEQ_OP_H2D, again, SEQ_WRITE, -1, 0);
}

static void model_action(struct model *m)
{
	unsigned r = rng_below(&m->rng, 100);
	int h;

	if (m->mode == MODE_LEGACY_SYNC_WINDOW && rng_chance(&m->rng, 20)) {
		model_pattern_sync_window(m);
		return;
	}
	if (m->mode == MODE_LEGACY_EARLY_FREE && rng_chance(&m->rng, 20)) {
		model_pattern_early_free(m);
		return;
	}
	if (m->nhandles == 0 || (r < 9 && m->nhandles < MODEL_MAX_HANDLES)) {
		model_alloc(m, 1 + rng_below(&m->rng, MODEL_MAX_SIZE), &h);
		return;
	}
	if (m->nhandles > MODEL_MAX_HANDLES - 8 && r < 30) {
		model_free(m, model_pick(m));
		return;
	}
	if (r < 16)
		model_slice(m, model_pick(m), !rng_chance(&m->rng, 8));
	else if (r < 24)
		model_free(m, model_pick(m));
	else if (r < 35)
		model_copy(m, SEQ_OP_H2D);
	else if (r < 43)
		model_copy(m, SEQ_OP_D2H);
	else if (r < 53)
		model_copy(m, SEQ_OP_D2D);
	else if (r < 73)
		model_exec(m);
	else if (r < 77)
		model_await(m, model_pick(m));
	else if (r < 78)
		model_sync(m);
	else if (r < 81)
		model_flush(m);
	else if (r < 93) {
		snprintf(m->what, sizeof(m->what), "device steps");
		model_log(m, "%s", m->what);
		model_progress(m, false);
	} else {
		snprintf(m->what, sizeof(m->what), "report completions");
		model_log(m, "%s", m->what);
		for (unsigned i = 1 + rng_below(&m->rng, 3); i > 0; i--)
			dev_report_random(m);
	}
}

/* Check 5: once everything is freed, flushed and run to idle, nothing may be left. */
static void model_finish(struct model *m)
{
	const struct seq_counters *c;
	long missing;

	m->action = -1;
	while (m->nhandles)
		model_free(m, model_pick(m));
	/* Deferred frees, awaits and syncs record their own events: without a flush, running
	 * the device to idle and reporting what fired must release and answer them all. */
	snprintf(m->what, sizeof(m->what), "teardown: run to idle without a flush");
	model_progress(m, true);
	for (size_t b = 0; b < m->nbases; b++)
		if (!m->bases[b].released)
			model_fail(m, V_OTHER,
				"b%zu, freed, not released once the device was idle "
				"and every recorded event reported (no event for its deferred "
				"free?)",
				b);
	for (size_t k = 0; k < m->ncookies; k++)
		if (m->cookies[k].state == COOKIE_EXPECTED && m->cookies[k].kind != COOKIE_OP)
			model_fail(m, V_OTHER,
				"%s done(%zu) not called once the device was idle and "
				"every recorded event reported",
				m->cookies[k].kind == COOKIE_SYNC ? "sync" : "await", k);
	snprintf(m->what, sizeof(m->what), "teardown: flush and run to idle");
	seq_flush(m->seq);
	model_progress(m, true);
	if (!model_ops_executed(m, m->nops, &missing))
		model_fail(m, V_OTHER, "op %ld never executed (device stuck?)", missing);
	for (size_t i = 0; i < m->nops; i++) {
		if (!m->ops[i].acked) {
			model_fail(m, V_OTHER, "op %zu at (%u,%" PRIu64 ") never known complete", i,
				m->ops[i].at.stream, m->ops[i].at.seq);
			break;
		}
	}
	for (size_t b = 0; b < m->nbases; b++)
		if (!m->bases[b].released)
			model_fail(m, V_OTHER, "b%zu never released (pending free lost, I5)", b);
	for (size_t k = 0; k < m->ncookies; k++)
		if (m->cookies[k].state == COOKIE_EXPECTED)
			model_fail(m, V_OTHER, "done(%zu) never called", k);
	for (uint32_t s = 0; s < m->nstreams; s++) {
		struct seq_stream_info info;

		seq_stream_info(m->seq, s, &info);
		if (info.completed != info.issued || info.window_used)
			model_fail(m, V_OTHER,
				"stream %u at idle: issued %" PRIu64 " completed %" PRIu64
				" window %u",
				s, info.issued, info.completed, info.window_used);
	}
	c = seq_counters(m->seq);
	if (c->ops_submitted != m->nops || c->ops_completed != m->nops ||
		c->ops_failed != m->n_failed || c->double_definitions != m->n_eexist ||
		c->backpressure != m->n_eagain || c->releases != m->n_releases ||
		c->waits_enqueued != m->n_waits)
		model_fail(m, V_OTHER,
			"counters: submitted %" PRIu64 "/%zu completed %" PRIu64
			"/%zu failed %" PRIu64 "/%" PRIu64 " double_definitions %" PRIu64
			"/%" PRIu64 " backpressure %" PRIu64 "/%" PRIu64 " releases %" PRIu64
			"/%" PRIu64 " waits %" PRIu64 "/%" PRIu64 " (core/model)",
			c->ops_submitted, m->nops, c->ops_completed, m->nops, c->ops_failed,
			m->n_failed, c->double_definitions, m->n_eexist, c->backpressure,
			m->n_eagain, c->releases, m->n_releases, c->waits_enqueued, m->n_waits);
	seq_destroy(m->seq);
	m->destroyed = true;
	m->seq = NULL;
}

/* The checker's findings: violations of their own kind, counted as the model's are. */
static void model_checker_found(void *arg, const char *what)
{
	model_fail(arg, V_CHECKER, "%s", what);
}

static void model_cleanup(struct model *m)
{
	verify_destroy(m->verify);
	for (size_t b = 0; b < m->nbases; b++)
		free(m->bases[b].readers);
	for (uint32_t s = 0; s < SEQ_MAX_STREAMS; s++) {
		free(m->dev[s].q);
		free(m->dev[s].events);
		free(m->dev[s].retired);
		free(m->dev[s].ops);
	}
	free(m->bases);
	free(m->ops);
	free(m->preds);
	free(m->cookies);
}

struct model_run {
	uint64_t seed;
	unsigned sequences;
	long only; /* run just this sequence index, or -1 */
	bool verbose;
};

/* What the sequences exercised, so a passing run shows it tested something. */
static struct {
	uint64_t sequences, ops, preds, failed, eexist, eagain, waits, releases, dones;
	uint64_t fault_sequences, faults, device_failed, stream_refused, carried;
} stats;

static uint64_t sequence_seed(uint64_t master, unsigned index)
{
	struct rng r = {master ^ (0xd1b54a32d192ed03ull * (index + 1))};

	return rng_next(&r);
}

/* One sequence; returns its violations by kind in counts[]. */
static void model_run_sequence(
	const struct model_run *run, unsigned index, enum model_mode mode, unsigned counts[V_COUNT])
{
	struct model *m = calloc(1, sizeof(*m));
	struct seq_device device;
	struct seq_observer observer;
	unsigned nactions;
	int rc;

	ck_assert_ptr_nonnull(m);
	m->master_seed = run->seed;
	m->index = index;
	m->mode = mode;
	m->verbose = run->verbose;
	m->rng.s = sequence_seed(run->seed, index);
	for (unsigned u = 0; u < MODEL_SPACE; u++)
		m->owner[u] = OWNER_FREE;
	m->config = (struct seq_config){
		.n_compute = 1 + rng_below(&m->rng, 4),
		.n_h2d = 1 + rng_below(&m->rng, 3),
		.n_d2h = 1 + rng_below(&m->rng, 3),
		.n_d2d = 1 + rng_below(&m->rng, 3),
		/* Small windows exercise backpressure; 0 asks for the default. */
		.window = rng_chance(&m->rng, 5) ? 0 : 2 + rng_below(&m->rng, 15),
		.legacy_sync_window = mode == MODE_LEGACY_SYNC_WINDOW ? 2 : 0,
		.legacy_early_free = mode == MODE_LEGACY_EARLY_FREE,
	};
	m->nstreams = m->config.n_compute + m->config.n_h2d + m->config.n_d2h + m->config.n_d2d;
	m->window = m->config.window ? m->config.window : SEQ_DEFAULT_WINDOW;
	m->eager = rng_below(&m->rng, 4) * 20;
	/* Device faults only where every violation counts: the legacy runs count races. */
	if (mode == MODE_STRICT && rng_chance(&m->rng, MODEL_DEVICE_FAULT_SEQUENCES_PERCENT))
		m->fault_permille = rng_chance(&m->rng, 80) ? 1 + rng_below(&m->rng, 10)
							    : 50 + rng_below(&m->rng, 200);
	device = (struct seq_device){
		.mem_alloc = dev_mem_alloc,
		.mem_release = dev_mem_release,
		.record = dev_record,
		.wait = dev_wait,
		.launch = dev_launch,
		/* The optional hooks are left out now and then: the core must cope. */
		.retire = rng_chance(&m->rng, 90) ? dev_retire : NULL,
	};
	observer = (struct seq_observer){
		.ctx = m,
		.done = dev_done,
		.trace = rng_chance(&m->rng, 50) ? dev_trace : NULL,
	};
	snprintf(m->what, sizeof(m->what),
		"seq_create n_compute=%u n_h2d=%u n_d2h=%u n_d2d=%u window=%u", m->config.n_compute,
		m->config.n_h2d, m->config.n_d2h, m->config.n_d2d, m->config.window);
	model_log(m, "%s", m->what);
	{
		struct seq_layout layout;

		rc = seq_layout_init(&layout, &m->config);
		if (rc == 0)
			rc = verify_create(&m->verify, &layout, &device, m, model_checker_found, m);
	}
	if (rc == 0)
		rc = seq_create(&m->seq, &m->config, verify_device(), m->verify, &observer);
	if (rc) {
		model_fail(m, V_OTHER, "seq_create: %d", rc);
		goto out;
	}
	if (seq_stream_count(m->seq) != m->nstreams)
		model_fail(m, V_OTHER, "%u streams, expected %u", seq_stream_count(m->seq),
			m->nstreams);
	for (uint32_t s = 0; s < m->nstreams && s < seq_stream_count(m->seq); s++) {
		struct seq_stream_info info;

		seq_stream_info(m->seq, s, &info);
		if (info.kind != stream_kind(m, s) || info.window_capacity != m->window)
			model_fail(m, V_OTHER, "stream %u: kind %d window %u", s, info.kind,
				info.window_capacity);
	}
	nactions = 400 + rng_below(&m->rng, 401);
	for (unsigned i = 0; i < nactions; i++) {
		m->action = i;
		model_action(m);
		if (rng_chance(&m->rng, m->eager))
			model_progress(m, false);
		/* In strict mode the first violation is the story; what follows is noise. */
		if (mode == MODE_STRICT && model_total(m))
			break;
	}
	model_finish(m);
	stats.sequences++;
	stats.ops += m->nops;
	stats.preds += m->npreds;
	stats.failed += m->n_failed;
	stats.eexist += m->n_eexist;
	stats.eagain += m->n_eagain;
	stats.waits += m->n_waits;
	stats.releases += m->n_releases;
	stats.fault_sequences += m->n_faults != 0;
	stats.faults += m->n_faults;
	stats.device_failed += m->n_device_failed;
	stats.stream_refused += m->n_stream_refused;
	stats.carried += m->n_carried;
	for (size_t k = 0; k < m->ncookies; k++)
		stats.dones += m->cookies[k].state == COOKIE_DONE;
out:
	for (unsigned v = 0; v < V_COUNT; v++)
		counts[v] = m->violations[v];
	model_cleanup(m);
	free(m);
}

static struct model_run the_run;

static void model_run_all(
	enum model_mode mode, unsigned sequences, unsigned totals[V_COUNT], unsigned *failing)
{
	memset(totals, 0, V_COUNT * sizeof(*totals));
	*failing = 0;
	for (unsigned i = 0; i < sequences; i++) {
		unsigned counts[V_COUNT];
		unsigned n = 0;

		if (the_run.only >= 0 && i != (unsigned)the_run.only)
			continue;
		model_run_sequence(&the_run, i, mode, counts);
		for (unsigned v = 0; v < V_COUNT; v++) {
			totals[v] += counts[v];
			n += counts[v];
		}
		if (n)
			(*failing)++;
		if (mode == MODE_STRICT && *failing >= 5)
			break;
	}
}

START_TEST(test_model_random_sequences_match_model)
{
	unsigned totals[V_COUNT], failing;

	model_run_all(MODE_STRICT, the_run.sequences, totals, &failing);
	fprintf(stderr,
		"test-model: %" PRIu64 " sequences: %" PRIu64 " ops executed, %" PRIu64
		" ordering constraints checked, %" PRIu64 " waits, %" PRIu64
		" failed ops (I9), %" PRIu64 " -EEXIST, %" PRIu64 " -EAGAIN, %" PRIu64
		" releases, %" PRIu64 " done; device faults: %" PRIu64 " in %" PRIu64
		" sequences, %" PRIu64 " ops failed on the device, %" PRIu64
		" refused on a failed stream, %" PRIu64 " errors carried by partial writes\n",
		stats.sequences, stats.ops, stats.preds, stats.waits, stats.failed, stats.eexist,
		stats.eagain, stats.releases, stats.dones, stats.faults, stats.fault_sequences,
		stats.device_failed, stats.stream_refused, stats.carried);
	ck_assert_msg(failing == 0,
		"%u sequence(s) violated the model (races %u, use-after-free %u, early "
		"releases %u, checker %u, other %u); seed=%" PRIu64 ", details above",
		failing, totals[V_RACE], totals[V_UAF], totals[V_EARLY_RELEASE], totals[V_CHECKER],
		totals[V_OTHER], the_run.seed);
}
END_TEST

/* The checker must be able to fail: with a legacy bug injected it has to find it. */
static void model_expect_caught(enum model_mode mode, const char *name)
{
	unsigned totals[V_COUNT], failing;
	unsigned sequences = the_run.sequences < 200 ? the_run.sequences : 200;

	if (!getenv("SSEQ_MODEL_PRINT"))
		print_budget = 1; /* one example is enough */
	if (the_run.only >= 0)
		sequences = (unsigned)the_run.only + 1;
	model_run_all(mode, sequences, totals, &failing);
	fprintf(stderr,
		"test-model: %s: %u of %u sequences caught (races %u, use-after-free "
		"%u, early releases %u, checker %u, other %u)\n",
		name, failing, the_run.only >= 0 ? 1 : sequences, totals[V_RACE], totals[V_UAF],
		totals[V_EARLY_RELEASE], totals[V_CHECKER], totals[V_OTHER]);
	/* Replaying one sequence (SSEQ_MODEL_ONLY) is for reading its trace, not a verdict. */
	ck_assert_msg(
		the_run.only >= 0 || totals[V_RACE] + totals[V_UAF] + totals[V_EARLY_RELEASE] > 0,
		"%s injected, but the model found no race or use-after-free in %u "
		"sequences (seed=%" PRIu64 ")",
		name, sequences, the_run.seed);
	/* ... and so must the checker, on its own records. */
	ck_assert_msg(the_run.only >= 0 || totals[V_CHECKER] > 0,
		"%s injected, but the schedule checker found nothing in %u sequences (seed=%" PRIu64
		")",
		name, sequences, the_run.seed);
}

START_TEST(test_model_catches_legacy_sync_window)
{
	model_expect_caught(MODE_LEGACY_SYNC_WINDOW, "legacy_sync_window=2");
}
END_TEST

START_TEST(test_model_catches_legacy_early_free)
{
	model_expect_caught(MODE_LEGACY_EARLY_FREE, "legacy_early_free");
}
END_TEST

/* SEQ_OP_KINDS is written by hand beside the enum; op_kind_name's switch has no default,
 * so -Wswitch makes it name every kind, and a kind added without the count shows here. */
START_TEST(test_model_op_kinds_are_counted)
{
	for (unsigned k = 0; k < SEQ_OP_KINDS; k++) {
		ck_assert_str_ne(op_kind_name((enum seq_op_kind)k), "?");
		ck_assert_ptr_nonnull(seq_op_kind_name((enum seq_op_kind)k));
		ck_assert_str_ne(seq_op_kind_name((enum seq_op_kind)k), "?");
	}
	ck_assert_str_eq(op_kind_name((enum seq_op_kind)SEQ_OP_KINDS), "?");
	ck_assert_str_eq(seq_op_kind_name((enum seq_op_kind)SEQ_OP_KINDS), "?");
}
END_TEST

static uint64_t env_u64(const char *name, uint64_t fallback)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return fallback;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end) {
		fprintf(stderr, "test-model: ignoring %s=%s: not a number\n", name, s);
		return fallback;
	}
	return v;
}

int main(void)
{
	struct timespec ts;
	Suite *s = suite_create("model");
	TCase *tc = tcase_create("random");
	TCase *legacy = tcase_create("legacy");
	TCase *kinds = tcase_create("kinds");
	SRunner *sr;
	int failed;

	clock_gettime(CLOCK_REALTIME, &ts);
	the_run.seed = env_u64("SSEQ_MODEL_SEED",
		(uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^
			((uint64_t)getpid() << 32));
	the_run.sequences = (unsigned)env_u64("SSEQ_MODEL_SEQUENCES", 3000);
	the_run.only = getenv("SSEQ_MODEL_ONLY") ? (long)env_u64("SSEQ_MODEL_ONLY", 0) : -1;
	the_run.verbose = env_u64("SSEQ_MODEL_VERBOSE", 0) != 0;
	print_budget = (unsigned)env_u64("SSEQ_MODEL_PRINT", MODEL_PRINT_BUDGET);
	printf("test-model: seed=%" PRIu64 " sequences=%u (set SSEQ_MODEL_SEED to reproduce, "
	       "SSEQ_MODEL_ONLY=<index> to run one sequence, SSEQ_MODEL_VERBOSE=1 to trace it)\n",
		the_run.seed, the_run.sequences);
	fflush(stdout);

	/* Under ASan on a small machine the full run takes tens of seconds. */
	tcase_set_timeout(tc, 280);
	tcase_set_timeout(legacy, 120);
	tcase_add_test(tc, test_model_random_sequences_match_model);
	tcase_add_test(legacy, test_model_catches_legacy_sync_window);
	tcase_add_test(legacy, test_model_catches_legacy_early_free);
	tcase_add_test(kinds, test_model_op_kinds_are_counted);
	suite_add_tcase(s, tc);
	suite_add_tcase(s, legacy);
	suite_add_tcase(s, kinds);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
