/* The schedule checker (verify.h). Memory is tracked per allocation, as the core orders
 * per base: each allocation's last writer and, per stream, its last reader since. */
#include "verify.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A vector clock: for each stream, the last point known to come before. */
struct vclock {
	uint64_t c[SEQ_MAX_STREAMS];
};

struct valloc {
	uint64_t addr, size;
	uint64_t serial; /* the allocation's number, for the reports */
	uint64_t base; /* the core's number of the base it holds (mem_owner), or 0 */
	bool live;
	uint64_t released; /* its number among releases, once released */
	struct seq_point writer; /* seq 0: none */
	uint64_t readers[SEQ_MAX_STREAMS];
	uint64_t reader_mask;
};

/* An event: the clock of its stream when it was recorded. */
struct vevent {
	uint64_t seq;
	struct vclock clock;
};

struct vstream {
	struct vclock clock; /* what the next op on the stream comes after */
	struct vevent *events; /* recorded, unretired: a ring */
	size_t head, count, cap;
};

struct verify {
	struct seq_device inner;
	void *inner_ctx;
	verify_report_fn report;
	void *report_arg;
	unsigned nstreams;
	struct vstream streams[SEQ_MAX_STREAMS];
	struct vclock done; /* everything reported complete, and what came before it */
	/* Sorted by address, never overlapping. A released allocation is kept, so that a
	 * later use of it is named as such, until memory overlapping it is allocated or
	 * until it is among the oldest of more than VERIFY_KEEP_RELEASED. */
	struct valloc **allocs;
	size_t nallocs, capallocs, nreleased;
	uint64_t serials, releases, violations;
	struct verify_subject subject; /* what the check in progress is about */
};

/* Released allocations remembered at most (a forgotten one's later use is still a use
 * of memory that is not allocated). */
#define VERIFY_KEEP_RELEASED 4096

static void vclock_join(struct vclock *a, const struct vclock *b, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (a->c[i] < b->c[i])
			a->c[i] = b->c[i];
}

__attribute__((format(printf, 2, 3))) static void violation(struct verify *v, const char *fmt, ...)
{
	char what[320];
	va_list ap;

	v->violations++;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (v->report)
		v->report(v->report_arg, what);
}

/* ---- memory ---- */

/* The index of the first allocation that ends after addr (nallocs if none). */
static size_t alloc_lower(const struct verify *v, uint64_t addr)
{
	size_t lo = 0, hi = v->nallocs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct valloc *a = v->allocs[mid];

		if (a->addr + a->size <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The allocation holding addr (live or released), or NULL. */
static struct valloc *alloc_find(struct verify *v, uint64_t addr)
{
	size_t i = alloc_lower(v, addr);

	return i < v->nallocs && v->allocs[i]->addr <= addr ? v->allocs[i] : NULL;
}

/* Forget the older half of the released allocations remembered. */
static void forget_released(struct verify *v)
{
	const uint64_t keep_after = v->releases - VERIFY_KEEP_RELEASED / 2;
	size_t n = 0;

	for (size_t i = 0; i < v->nallocs; i++) {
		struct valloc *a = v->allocs[i];

		if (!a->live && a->released <= keep_after) {
			free(a);
			v->nreleased--;
		} else {
			v->allocs[n++] = a;
		}
	}
	v->nallocs = n;
}

/* A new live range [addr, addr + size): it replaces whatever released allocations it
 * overlaps. 0 or -ENOMEM (nothing recorded). */
static int alloc_note(struct verify *v, uint64_t addr, uint64_t size)
{
	struct valloc *a;
	size_t i, k;

	i = alloc_lower(v, addr);
	for (k = i; k < v->nallocs && v->allocs[k]->addr < addr + size; k++) {
		a = v->allocs[k];
		if (a->live)
			violation(v,
				"allocation %#" PRIx64 "+%" PRIu64 " overlaps live "
				"allocation #%" PRIu64 " at %#" PRIx64 "+%" PRIu64,
				addr, size, a->serial, a->addr, a->size);
		else
			v->nreleased--;
		free(a);
	}
	if (k > i) {
		memmove(&v->allocs[i], &v->allocs[k], (v->nallocs - k) * sizeof(*v->allocs));
		v->nallocs -= k - i;
	}
	if (v->nallocs == v->capallocs) {
		size_t cap = v->capallocs ? 2 * v->capallocs : 64;
		struct valloc **n = realloc(v->allocs, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		v->allocs = n;
		v->capallocs = cap;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->addr = addr;
	a->size = size;
	a->serial = ++v->serials;
	a->live = true;
	memmove(&v->allocs[i + 1], &v->allocs[i], (v->nallocs - i) * sizeof(*v->allocs));
	v->allocs[i] = a;
	v->nallocs++;
	return 0;
}

static int v_mem_alloc(void *ctx, uint64_t size, uint64_t *addr)
{
	struct verify *v = ctx;
	int r = v->inner.mem_alloc(v->inner_ctx, size, addr);

	if (r < 0)
		return r;
	r = alloc_note(v, *addr, size);
	if (r < 0)
		v->inner.mem_release(v->inner_ctx, *addr, size);
	return r;
}

/* Memory the core did not allocate (a module's global) is checked like any allocation. */
static int v_mem_adopt(void *ctx, uint64_t addr, uint64_t size)
{
	struct verify *v = ctx;
	int r = v->inner.mem_adopt ? v->inner.mem_adopt(v->inner_ctx, addr, size) : 0;

	if (r < 0)
		return r;
	r = alloc_note(v, addr, size);
	if (r < 0 && v->inner.mem_disown)
		v->inner.mem_disown(v->inner_ctx, addr, size);
	return r;
}

/* Bound at allocation, not at first use: a stale view that is the memory's first use
 * (or its only one) then names the earlier owner, never the innocent new one. */
static void v_mem_owner(void *ctx, uint64_t addr, uint64_t base)
{
	struct verify *v = ctx;
	struct valloc *a = alloc_find(v, addr);

	if (a && a->live && a->addr == addr)
		a->base = base;
	if (v->inner.mem_owner)
		v->inner.mem_owner(v->inner_ctx, addr, base);
}

static bool point_done(const struct verify *v, struct seq_point p)
{
	return p.seq <= v->done.c[p.stream];
}

/* The range stops being an allocation: nothing may still touch it (I5). */
static void release_note(struct verify *v, uint64_t addr, uint64_t size)
{
	struct valloc *a = alloc_find(v, addr);

	if (!a || !a->live || a->addr != addr) {
		violation(v, "release of %#" PRIx64 "+%" PRIu64 ", which is not allocated", addr,
			size);
	} else {
		if (a->writer.seq && !point_done(v, a->writer))
			violation(v,
				"allocation #%" PRIu64 " (%#" PRIx64 ") released while its "
				"writer %u:%" PRIu64 " may still run (I5)",
				a->serial, a->addr, a->writer.stream, a->writer.seq);
		for (uint64_t m = a->reader_mask; m; m &= m - 1) {
			unsigned x = (unsigned)__builtin_ctzll(m);

			if (!point_done(v, (struct seq_point){x, a->readers[x]}))
				violation(v,
					"allocation #%" PRIu64 " (%#" PRIx64 ") released while its "
					"reader %u:%" PRIu64 " may still run (I5)",
					a->serial, a->addr, x, a->readers[x]);
		}
		a->live = false;
		a->released = ++v->releases;
		if (++v->nreleased > VERIFY_KEEP_RELEASED)
			forget_released(v);
	}
}

static void v_mem_release(void *ctx, uint64_t addr, uint64_t size)
{
	struct verify *v = ctx;

	release_note(v, addr, size);
	v->inner.mem_release(v->inner_ctx, addr, size);
}

static void v_mem_disown(void *ctx, uint64_t addr, uint64_t size)
{
	struct verify *v = ctx;

	release_note(v, addr, size);
	if (v->inner.mem_disown)
		v->inner.mem_disown(v->inner_ctx, addr, size);
}

/* ---- events ---- */

static int v_record(void *ctx, struct seq_point at)
{
	struct verify *v = ctx;
	struct vstream *st = &v->streams[at.stream];
	struct vevent *e;

	if (st->count == st->cap) {
		size_t cap = st->cap ? 2 * st->cap : 64;
		struct vevent *n = malloc(cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		for (size_t i = 0; i < st->count; i++)
			n[i] = st->events[(st->head + i) % st->cap];
		free(st->events);
		st->events = n;
		st->cap = cap;
		st->head = 0;
	}
	e = &st->events[(st->head + st->count) % st->cap];
	e->seq = at.seq;
	e->clock = st->clock;
	e->clock.c[at.stream] = at.seq; /* after everything issued there so far */
	st->count++;
	return v->inner.record(v->inner_ctx, at);
}

static struct vevent *event_find(struct verify *v, struct seq_point at)
{
	struct vstream *st = &v->streams[at.stream];

	for (size_t i = st->count; i-- > 0;) {
		struct vevent *e = &st->events[(st->head + i) % st->cap];

		if (e->seq == at.seq)
			return e;
		if (e->seq < at.seq)
			break;
	}
	return NULL;
}

static int v_wait(void *ctx, uint32_t stream, struct seq_point event)
{
	struct verify *v = ctx;
	struct vevent *e = event_find(v, event);

	if (!e)
		violation(v, "stream %u waits for %u:%" PRIu64 ", which has no event", stream,
			event.stream, event.seq);
	else
		vclock_join(&v->streams[stream].clock, &e->clock, v->nstreams);
	return v->inner.wait(v->inner_ctx, stream, event);
}

static void v_retire(void *ctx, struct seq_point event)
{
	struct verify *v = ctx;
	struct vstream *st = &v->streams[event.stream];

	while (st->count && st->events[st->head].seq <= event.seq) {
		st->head = (st->head + 1) % st->cap;
		st->count--;
	}
	if (v->inner.retire)
		v->inner.retire(v->inner_ctx, event);
}

void verify_complete(struct verify *v, struct seq_point through)
{
	struct vevent *e = through.stream < v->nstreams ? event_find(v, through) : NULL;

	/* The event completed on the device: so did everything in its clock. */
	if (e)
		vclock_join(&v->done, &e->clock, v->nstreams);
	else if (through.stream < v->nstreams && v->done.c[through.stream] < through.seq)
		v->done.c[through.stream] = through.seq;
}

/* ---- launches ---- */

/* What an op launched at `at` comes after, without building its clock: its stream's
 * order and waits, and whatever was reported complete before it was launched. */
struct vorder {
	const struct vclock *stream, *done;
	struct seq_point at;
};

/* Whether p comes before the op. */
static bool before(const struct vorder *k, struct seq_point p)
{
	return (p.stream == k->at.stream && p.seq < k->at.seq) || p.seq <= k->stream->c[p.stream] ||
		p.seq <= k->done->c[p.stream];
}

static void check_access(struct verify *v, struct seq_point at, const struct seq_op *op,
	const struct seq_access *acc, const struct vorder *k)
{
	struct valloc *a = alloc_find(v, acc->addr);

	v->subject = (struct verify_subject){at, op, acc};

	if (!a || !a->live || acc->addr + acc->size > a->addr + a->size) {
		violation(v, "%s at %u:%" PRIu64 " touches %#" PRIx64 "+%" PRIu64 ", %s",
			seq_op_kind_name(op->kind), at.stream, at.seq, acc->addr, acc->size,
			!a		   ? "which is not allocated"
				: !a->live ? "which was released (use after free)"
					   : "past the end of its allocation");
		return;
	}
	/* A view of another base than the one this memory was allocated for: the memory
	 * changed hands under it (released and allocated again, e.g. a slice that outlived
	 * its base). An owner never told (a core without mem_owner) is bound at first use. */
	if (acc->alloc && !a->base)
		a->base = acc->alloc;
	else if (acc->alloc && a->base != acc->alloc)
		violation(v,
			"%s at %u:%" PRIu64 " touches %#" PRIx64 "+%" PRIu64 " as base #%" PRIu64
			", but that memory is allocation #%" PRIu64 " of base #%" PRIu64
			" (it changed hands: use after free)",
			seq_op_kind_name(op->kind), at.stream, at.seq, acc->addr, acc->size,
			acc->alloc, a->serial, a->base);
	if (a->writer.seq && !before(k, a->writer))
		violation(v,
			"%s at %u:%" PRIu64 " %s allocation #%" PRIu64 " (%#" PRIx64
			") without an edge from its writer %u:%" PRIu64 " (missing wait)",
			seq_op_kind_name(op->kind), at.stream, at.seq,
			acc->mode & SEQ_READ ? "reads" : "writes", a->serial, a->addr,
			a->writer.stream, a->writer.seq);
	if (acc->mode & SEQ_WRITE) {
		for (uint64_t m = a->reader_mask; m; m &= m - 1) {
			unsigned x = (unsigned)__builtin_ctzll(m);
			struct seq_point r = {x, a->readers[x]};

			if (!before(k, r))
				violation(v,
					"%s at %u:%" PRIu64 " overwrites allocation #%" PRIu64
					" (%#" PRIx64
					") without an edge from its reader %u:%" PRIu64
					" (missing wait)",
					seq_op_kind_name(op->kind), at.stream, at.seq, a->serial,
					a->addr, x, r.seq);
		}
	}
}

static void note_access(struct verify *v, struct seq_point at, const struct seq_access *acc)
{
	struct valloc *a = alloc_find(v, acc->addr);

	if (!a || !a->live)
		return;
	if (acc->mode & SEQ_WRITE) {
		a->writer = at;
		a->reader_mask = 0;
		memset(a->readers, 0, sizeof(a->readers));
		/* A write that also reads is its own reader: nothing to record. */
	} else if (acc->mode & SEQ_READ) {
		a->readers[at.stream] = at.seq;
		a->reader_mask |= 1ull << at.stream;
	}
}

static int v_launch(void *ctx, struct seq_point at, const struct seq_op *op)
{
	struct verify *v = ctx;
	struct vstream *st = &v->streams[at.stream];
	const struct vorder k = {&st->clock, &v->done, at};
	int r;

	for (unsigned i = 0; i < op->naccess; i++)
		check_access(v, at, op, &op->access[i], &k);
	v->subject = (struct verify_subject){{0, 0}, NULL, NULL};
	r = v->inner.launch(v->inner_ctx, at, op);
	if (r < 0)
		return r; /* not launched: nothing happened */
	for (unsigned i = 0; i < op->naccess; i++)
		note_access(v, at, &op->access[i]);
	st->clock.c[at.stream] = at.seq;
	return 0;
}

static const struct seq_device verify_table = {
	.mem_alloc = v_mem_alloc,
	.mem_release = v_mem_release,
	.mem_adopt = v_mem_adopt,
	.mem_disown = v_mem_disown,
	.mem_owner = v_mem_owner,
	.record = v_record,
	.wait = v_wait,
	.launch = v_launch,
	.retire = v_retire,
};

void verify_subject(const struct verify *v, struct verify_subject *out)
{
	*out = v->subject;
}

const struct seq_device *verify_device(void)
{
	return &verify_table;
}

int verify_create(struct verify **out, const struct seq_layout *layout,
	const struct seq_device *inner, void *inner_ctx, verify_report_fn report, void *arg)
{
	struct verify *v = calloc(1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	v->inner = *inner;
	v->inner_ctx = inner_ctx;
	v->report = report;
	v->report_arg = arg;
	v->nstreams = layout->nstreams;
	*out = v;
	return 0;
}

void verify_reset(struct verify *v)
{
	for (unsigned i = 0; i < v->nstreams; i++) {
		v->streams[i].count = v->streams[i].head = 0;
		v->done.c[i] = v->streams[i].clock.c[i];
		vclock_join(&v->done, &v->streams[i].clock, v->nstreams);
	}
	for (size_t i = 0; i < v->nallocs; i++)
		free(v->allocs[i]);
	v->nallocs = v->nreleased = 0;
}

size_t verify_tracked(const struct verify *v)
{
	return v->nallocs;
}

uint64_t verify_violations(const struct verify *v)
{
	return v->violations;
}

void verify_destroy(struct verify *v)
{
	if (!v)
		return;
	for (unsigned i = 0; i < SEQ_MAX_STREAMS; i++)
		free(v->streams[i].events);
	for (size_t i = 0; i < v->nallocs; i++)
		free(v->allocs[i]);
	free(v->allocs);
	free(v);
}
