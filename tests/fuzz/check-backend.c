/* The fuzzing device model: streams are command queues run one head at a time in the
 * fuzzer's order, so any schedule a GPU could pick is tried, and every access is checked
 * against what was launched before it and not yet run. Addresses are never reused, so a
 * stale one is always caught. Nothing here touches memory: views are only numbers. */
#include "check-backend.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CB_BASE_ADDR (1ull << 44)
#define CB_ALIGN 4096u
#define CB_MEMORY (64ull << 30) /* what the model device offers */

enum cb_cmd_kind { CB_OP, CB_WAIT, CB_RECORD };

struct cb_module;

struct cb_fn {
	struct cb_module *module;
	struct cb_fn *next;
};

struct cb_module {
	bool live;
	unsigned id;
	struct cb_fn *fns;
	struct cb_module *next;
};

struct cb_alloc {
	uint64_t addr, size;
	bool live;
	struct seq_point writer; /* the last op launched that writes it */
};

struct cb_staging {
	const char *addr;
	size_t size;
	bool live;
};

struct cb_cmd {
	enum cb_cmd_kind kind;
	struct seq_point at; /* op, record: its point; wait: the event */
	uint64_t order; /* ops: launch order over all streams */
	enum seq_op_kind op;
	unsigned naccess;
	size_t alloc[SEQ_MAX_ACCESS];
	unsigned mode[SEQ_MAX_ACCESS];
	size_t staging; /* index + 1, 0: none */
	struct cb_module *module;
	struct cb_cmd *next; /* the stream's queue */
	struct cb_cmd *iprev, *inext; /* launched and not yet run, in launch order */
};

struct cb_rec {
	uint64_t seq;
	bool executed, retired;
};

struct cb_done {
	uint64_t seq;
	int status;
};

struct cb_stream {
	enum seq_stream_kind kind;
	struct cb_cmd *head, *tail;
	uint64_t launched;
	uint64_t fail_from; /* a device error from this op on; 0: healthy */
	/* The last event delivered with that error, and of those the last one the server has
	 * surely seen (its loop ran since): 0 if none. */
	uint64_t failure_sent, failure_told;
	struct cb_rec *recs;
	size_t nrecs, caprecs;
	struct cb_done *done; /* events reached, not yet delivered, oldest first */
	size_t done_head, ndone, capdone;
};

struct check_backend {
	unsigned nstreams;
	struct cb_stream streams[SEQ_MAX_STREAMS];
	struct cb_alloc *allocs; /* by address: addresses only grow */
	size_t nallocs, capallocs, live_allocs;
	uint64_t next_addr, live_bytes;
	struct cb_staging *stagings;
	size_t nstagings, capstagings, live_stagings;
	struct cb_module *modules;
	unsigned nmodules, live_modules;
	struct cb_cmd *inflight_head, *inflight_tail;
	uint64_t order, commands;
	struct fuzz_sched *sched;
	bool faults;
	bool lost; /* check_backend_lose: the queues are gone */
	uint64_t fault_rng;
	bool trace; /* SSEQ_FUZZ_LOG: a line per command, to read a reproducer by */
	struct cq *cq;
};

uint8_t fuzz_sched_next(struct fuzz_sched *s)
{
	/* Past its end the schedule is all 0: the laziest device (no steps between frames)
	 * running the lowest-numbered stream first, compute before the copies it may need. */
	return s && s->i < s->n ? s->p[s->i++] : 0;
}

static void cb_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void cb_fail(const char *fmt, ...)
{
	va_list ap;

	fputs("check-backend: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

static void cb_trace(const struct check_backend *cb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void cb_trace(const struct check_backend *cb, const char *fmt, ...)
{
	va_list ap;

	if (!cb->trace)
		return;
	fputs("check-backend: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void *cb_grow(void *p, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return p;
	*cap = *cap ? *cap * 2 : 16;
	p = realloc(p, *cap * elem);
	if (!p)
		cb_fail("out of memory");
	return p;
}

/* Faults come from their own stream, seeded by the input, so that turning them on does
 * not shift every later scheduling choice. */
static bool cb_fault(struct check_backend *cb, unsigned one_in)
{
	uint64_t z;

	if (!cb->faults)
		return false;
	z = (cb->fault_rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (z ^ (z >> 31)) % one_in == 0;
}

static void cb_describe(char *out, size_t size, const struct cb_cmd *c)
{
	snprintf(out, size, "%s at %" PRIu32 ":%" PRIu64 " (launch #%" PRIu64 ")",
		seq_op_kind_name(c->op), c->at.stream, c->at.seq, c->order);
}

/* The allocation holding [addr, addr + size), or -1. */
static ptrdiff_t cb_alloc_find(const struct check_backend *cb, uint64_t addr, uint64_t size)
{
	size_t lo = 0, hi = cb->nallocs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cb->allocs[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -1;
	lo--;
	if (addr - cb->allocs[lo].addr > cb->allocs[lo].size ||
		size > cb->allocs[lo].size - (addr - cb->allocs[lo].addr))
		return -1;
	return (ptrdiff_t)lo;
}

static void cb_push(struct check_backend *cb, uint32_t stream, struct cb_cmd *c)
{
	struct cb_stream *st = &cb->streams[stream];

	c->next = NULL;
	if (st->tail)
		st->tail->next = c;
	else
		st->head = c;
	st->tail = c;
	cb->commands++;
}

static struct cb_cmd *cb_cmd_new(enum cb_cmd_kind kind, struct seq_point at)
{
	struct cb_cmd *c = calloc(1, sizeof(*c));

	if (!c)
		cb_fail("out of memory");
	c->kind = kind;
	c->at = at;
	return c;
}

/* ---- the sequencer's commands ---------------------------------------------------------- */

static int cb_mem_alloc(void *ctx, uint64_t size, uint64_t *addr)
{
	struct check_backend *cb = ctx;
	struct cb_alloc *a;

	if (size == 0)
		cb_fail("mem_alloc of 0 bytes");
	if (size > CB_MEMORY - cb->live_bytes || cb_fault(cb, 16))
		return -ENOMEM;
	cb->allocs = cb_grow(cb->allocs, &cb->capallocs, cb->nallocs, sizeof(*cb->allocs));
	a = &cb->allocs[cb->nallocs++];
	*a = (struct cb_alloc){.addr = cb->next_addr, .size = size, .live = true};
	/* A gap after each allocation: a view running past its end lands in no allocation. */
	cb->next_addr += (size + 2 * CB_ALIGN - 1) & ~(uint64_t)(CB_ALIGN - 1);
	cb->live_allocs++;
	cb->live_bytes += size;
	*addr = a->addr;
	return 0;
}

static bool cb_touches(const struct cb_cmd *c, size_t alloc)
{
	for (unsigned i = 0; i < c->naccess; i++)
		if (c->alloc[i] == alloc)
			return true;
	return false;
}

static void cb_mem_release(void *ctx, uint64_t addr, uint64_t size)
{
	struct check_backend *cb = ctx;
	ptrdiff_t i = cb_alloc_find(cb, addr, 0);
	char who[96];

	if (i < 0 || cb->allocs[i].addr != addr || !cb->allocs[i].live)
		cb_fail("mem_release of %#" PRIx64 ", which is not a live allocation", addr);
	if (cb->allocs[i].size != size)
		cb_fail("mem_release of %#" PRIx64 " with %" PRIu64 " bytes; it has %" PRIu64, addr,
			size, cb->allocs[i].size);
	for (const struct cb_cmd *c = cb->inflight_head; c; c = c->inext) {
		if (cb_touches(c, (size_t)i)) {
			cb_describe(who, sizeof(who), c);
			cb_fail("memory %#" PRIx64 " released while %s, launched and not run, "
				"uses it (I5)",
				addr, who);
		}
	}
	cb->allocs[i].live = false;
	cb->live_allocs--;
	cb->live_bytes -= size;
}

static struct cb_rec *cb_rec_find(struct cb_stream *st, uint64_t seq)
{
	for (size_t i = st->nrecs; i-- > 0;)
		if (st->recs[i].seq == seq)
			return &st->recs[i];
	return NULL;
}

static int cb_record(void *ctx, struct seq_point at)
{
	struct check_backend *cb = ctx;
	struct cb_stream *st;

	if (at.stream >= cb->nstreams)
		cb_fail("record on stream %" PRIu32 " of %u", at.stream, cb->nstreams);
	st = &cb->streams[at.stream];
	/* An event goes after everything issued so far: its point is the last launched. */
	if (at.seq == 0 || at.seq != st->launched)
		cb_fail("record at %" PRIu32 ":%" PRIu64
			" but the stream's last launch is %" PRIu64,
			at.stream, at.seq, st->launched);
	if (st->nrecs && st->recs[st->nrecs - 1].seq > at.seq)
		cb_fail("record at %" PRIu32 ":%" PRIu64 " after one at %" PRIu64, at.stream,
			at.seq, st->recs[st->nrecs - 1].seq);
	if (cb_fault(cb, 32))
		return -EIO;
	st->recs = cb_grow(st->recs, &st->caprecs, st->nrecs, sizeof(*st->recs));
	st->recs[st->nrecs++] = (struct cb_rec){.seq = at.seq};
	cb_push(cb, at.stream, cb_cmd_new(CB_RECORD, at));
	cb_trace(cb, "record %" PRIu32 ":%" PRIu64, at.stream, at.seq);
	return 0;
}

static int cb_wait(void *ctx, uint32_t stream, struct seq_point event)
{
	struct check_backend *cb = ctx;
	struct cb_rec *rec;

	if (stream >= cb->nstreams || event.stream >= cb->nstreams)
		cb_fail("wait of stream %" PRIu32 " on %" PRIu32 ":%" PRIu64 " of %u streams",
			stream, event.stream, event.seq, cb->nstreams);
	if (stream == event.stream)
		return 0; /* an in-order stream waits for itself */
	rec = cb_rec_find(&cb->streams[event.stream], event.seq);
	/* On a GPU a wait on an event never recorded returns at once: no order at all. */
	if (!rec)
		cb_fail("stream %" PRIu32 " waits on %" PRIu32 ":%" PRIu64
			", an event never recorded",
			stream, event.stream, event.seq);
	if (rec->retired)
		cb_fail("stream %" PRIu32 " waits on %" PRIu32 ":%" PRIu64 ", an event retired",
			stream, event.stream, event.seq);
	if (cb_fault(cb, 32))
		return -EIO;
	cb_push(cb, stream, cb_cmd_new(CB_WAIT, event));
	cb_trace(cb, "stream %" PRIu32 " waits on %" PRIu32 ":%" PRIu64, stream, event.stream,
		event.seq);
	return 0;
}

static size_t cb_staging_find(const struct check_backend *cb, const void *host, uint64_t len)
{
	const char *p = host;

	for (size_t i = 0; i < cb->nstagings; i++) {
		const struct cb_staging *s = &cb->stagings[i];
		if (s->live && p >= s->addr && (size_t)(p - s->addr) <= s->size &&
			len <= s->size - (size_t)(p - s->addr))
			return i + 1;
	}
	return 0;
}

static struct cb_module *cb_fn_module(const struct check_backend *cb, const void *function)
{
	for (struct cb_module *m = cb->modules; m; m = m->next)
		for (struct cb_fn *f = m->fns; f; f = f->next)
			if (f == function)
				return m;
	return NULL;
}

/* I9: once the server heard that the op which last wrote an input failed on the device,
 * what reads that input must fail without being launched. */
static void cb_check_input(const struct check_backend *cb, struct seq_point at,
	enum seq_op_kind kind, const struct cb_alloc *a, unsigned mode)
{
	const struct cb_stream *w;

	if (!(mode & SEQ_READ) || !a->writer.seq)
		return;
	w = &cb->streams[a->writer.stream];
	if (w->fail_from && a->writer.seq >= w->fail_from && a->writer.seq <= w->failure_told)
		cb_fail("%s at %" PRIu32 ":%" PRIu64 " launched reading memory %#" PRIx64
			" whose producer %" PRIu32 ":%" PRIu64
			" failed, after that failure was reported (I9)",
			seq_op_kind_name(kind), at.stream, at.seq, a->addr, a->writer.stream,
			a->writer.seq);
}

static int cb_launch(void *ctx, struct seq_point at, const struct seq_op *op)
{
	struct check_backend *cb = ctx;
	const struct op_payload *p = op->payload;
	struct cb_stream *st;
	struct cb_cmd *c;

	if (at.stream >= cb->nstreams)
		cb_fail("launch on stream %" PRIu32 " of %u", at.stream, cb->nstreams);
	st = &cb->streams[at.stream];
	/* What the sim and hip refuse, the server must never send. */
	if (backend_op_check(st->kind, st->launched, at, op) < 0)
		cb_fail("%s at %" PRIu32 ":%" PRIu64 " fails backend_op_check (last launch %" PRIu64
			")",
			seq_op_kind_name(op->kind), at.stream, at.seq, st->launched);
	c = cb_cmd_new(CB_OP, at);
	c->op = op->kind;
	c->naccess = op->naccess;
	for (unsigned i = 0; i < op->naccess; i++) {
		ptrdiff_t a = cb_alloc_find(cb, op->access[i].addr, op->access[i].size);
		if (a < 0 || !cb->allocs[a].live)
			cb_fail("%s at %" PRIu32 ":%" PRIu64 " launched on %s memory %#" PRIx64
				" (+%" PRIu64 ")",
				seq_op_kind_name(op->kind), at.stream, at.seq,
				a < 0 ? "unallocated" : "released", op->access[i].addr,
				op->access[i].size);
		if (!op->access[i].mode || op->access[i].mode > SEQ_READWRITE)
			cb_fail("access mode %u", op->access[i].mode);
		c->alloc[i] = (size_t)a;
		c->mode[i] = op->access[i].mode;
		cb_check_input(cb, at, op->kind, &cb->allocs[a], op->access[i].mode);
	}
	if ((op->kind == SEQ_OP_H2D || op->kind == SEQ_OP_D2H) &&
		!(c->staging = cb_staging_find(cb, p->host, p->length)))
		cb_fail("%s at %" PRIu32 ":%" PRIu64 " copies %" PRIu64
			" bytes outside every registered staging arena",
			seq_op_kind_name(op->kind), at.stream, at.seq, p->length);
	if (op->kind == SEQ_OP_EXEC && p->function) {
		c->module = cb_fn_module(cb, p->function);
		if (!c->module || !c->module->live)
			cb_fail("kernel at %" PRIu32 ":%" PRIu64 " runs a function of %s module",
				at.stream, at.seq, c->module ? "an unloaded" : "no");
	}
	if (cb_fault(cb, 16)) {
		free(c);
		return -EIO;
	}
	c->order = ++cb->order;
	st->launched = at.seq;
	for (unsigned i = 0; i < c->naccess; i++)
		if (c->mode[i] & SEQ_WRITE)
			cb->allocs[c->alloc[i]].writer = at;
	c->iprev = cb->inflight_tail;
	if (cb->inflight_tail)
		cb->inflight_tail->inext = c;
	else
		cb->inflight_head = c;
	cb->inflight_tail = c;
	cb_push(cb, at.stream, c);
	if (cb->trace) {
		char who[96];
		cb_describe(who, sizeof(who), c);
		cb_trace(cb, "launch %s, %u access(es)", who, c->naccess);
	}
	return 0;
}

static void cb_retire(void *ctx, struct seq_point event)
{
	struct check_backend *cb = ctx;
	struct cb_rec *rec;

	if (cb->lost)
		return; /* its events went with the context */
	if (event.stream >= cb->nstreams ||
		!(rec = cb_rec_find(&cb->streams[event.stream], event.seq)))
		cb_fail("retire of %" PRIu32 ":%" PRIu64 ", an event never recorded", event.stream,
			event.seq);
	/* A backend recycles a retired event: the device must be done with it. */
	if (!rec->executed)
		cb_fail("retire of %" PRIu32 ":%" PRIu64 " before the device reached it",
			event.stream, event.seq);
	if (rec->retired)
		cb_fail("retire of %" PRIu32 ":%" PRIu64 " twice", event.stream, event.seq);
	rec->retired = true;
}

/* ---- the server's other calls ---------------------------------------------------------- */

static int cb_staging_register(void *ctx, void *addr, size_t size)
{
	struct check_backend *cb = ctx;

	if (!addr || !size)
		cb_fail("staging_register of %p, %zu bytes", addr, size);
	if (cb_fault(cb, 16))
		return -ENOMEM;
	cb->stagings =
		cb_grow(cb->stagings, &cb->capstagings, cb->nstagings, sizeof(*cb->stagings));
	cb->stagings[cb->nstagings++] = (struct cb_staging){addr, size, true};
	cb->live_stagings++;
	return 0;
}

static void cb_staging_unregister(void *ctx, void *addr, size_t size)
{
	struct check_backend *cb = ctx;
	char who[96];
	size_t i;

	for (i = 0; i < cb->nstagings; i++)
		if (cb->stagings[i].live && cb->stagings[i].addr == addr)
			break;
	if (i == cb->nstagings || cb->stagings[i].size != size)
		cb_fail("staging_unregister of %p (%zu bytes), which is not registered", addr,
			size);
	for (const struct cb_cmd *c = cb->inflight_head; c; c = c->inext) {
		if (c->staging == i + 1) {
			cb_describe(who, sizeof(who), c);
			cb_fail("staging arena %p unregistered while %s, launched and not run, "
				"copies through it",
				addr, who);
		}
	}
	cb->stagings[i].live = false;
	cb->live_stagings--;
}

static uint64_t cb_findings(void *ctx)
{
	return 0;
}

static int cb_module_load(void *ctx, const char *path, void **module)
{
	struct check_backend *cb = ctx;
	struct cb_module *m;

	if (cb_fault(cb, 8))
		return -ENOEXEC;
	if (!(m = calloc(1, sizeof(*m))))
		return -ENOMEM;
	m->live = true;
	m->id = ++cb->nmodules;
	m->next = cb->modules;
	cb->modules = m;
	cb->live_modules++;
	*module = m;
	return 0;
}

static int cb_module_function(void *ctx, void *module, const char *name, void **function)
{
	struct check_backend *cb = ctx;
	struct cb_module *m = module;
	struct cb_fn *f;

	if (!m->live)
		cb_fail("module_function '%s' of unloaded module %u", name, m->id);
	/* Some names are missing, as in a real code object. */
	if (name[0] == '_' || cb_fault(cb, 8))
		return -ENOENT;
	if (!(f = calloc(1, sizeof(*f))))
		return -ENOMEM;
	f->module = m;
	f->next = m->fns;
	m->fns = f;
	*function = f;
	return 0;
}

static void cb_module_unload(void *ctx, void *module)
{
	struct check_backend *cb = ctx;
	struct cb_module *m = module;
	char who[96];

	if (!m->live)
		cb_fail("module %u unloaded twice", m->id);
	for (const struct cb_cmd *c = cb->inflight_head; c; c = c->inext) {
		if (c->module == m) {
			cb_describe(who, sizeof(who), c);
			cb_fail("module %u unloaded while %s, launched and not run, runs one of "
				"its functions",
				m->id, who);
		}
	}
	m->live = false;
	cb->live_modules--;
}

static void cb_info(void *ctx, struct backend_info *info)
{
	info->backend = "check";
	snprintf(info->name, sizeof(info->name), "fuzzing model");
	info->memory_total = CB_MEMORY;
}

static void cb_destroy(void *ctx)
{
	struct check_backend *cb = ctx;

	for (unsigned x = 0; x < cb->nstreams; x++) {
		struct cb_stream *st = &cb->streams[x];
		while (st->head) {
			struct cb_cmd *c = st->head;
			st->head = c->next;
			free(c);
		}
		free(st->recs);
		free(st->done);
	}
	while (cb->modules) {
		struct cb_module *m = cb->modules;
		cb->modules = m->next;
		while (m->fns) {
			struct cb_fn *f = m->fns;
			m->fns = f->next;
			free(f);
		}
		free(m);
	}
	free(cb->allocs);
	free(cb->stagings);
	free(cb);
}

static const struct backend_ops cb_ops = {
	.dev =
		{
			.mem_alloc = cb_mem_alloc,
			.mem_release = cb_mem_release,
			.record = cb_record,
			.wait = cb_wait,
			.launch = cb_launch,
			.retire = cb_retire,
		},
	.staging_register = cb_staging_register,
	.staging_unregister = cb_staging_unregister,
	.findings = cb_findings,
	.module_load = cb_module_load,
	.module_function = cb_module_function,
	.module_unload = cb_module_unload,
	.info = cb_info,
	.destroy = cb_destroy,
};

int check_backend_create(struct backend *out, const struct seq_layout *layout,
	struct fuzz_sched *sched, bool faults, uint64_t fault_seed, struct cq *cq)
{
	struct check_backend *cb;

	if (layout->nstreams > SEQ_MAX_STREAMS)
		return -EINVAL;
	if (!(cb = calloc(1, sizeof(*cb))))
		return -ENOMEM;
	cb->nstreams = layout->nstreams;
	for (unsigned x = 0; x < cb->nstreams; x++)
		cb->streams[x].kind = layout->kind[x];
	cb->next_addr = CB_BASE_ADDR;
	cb->trace = getenv("SSEQ_FUZZ_LOG") != NULL;
	cb->sched = sched;
	cb->faults = faults;
	cb->fault_rng = fault_seed;
	cb->cq = cq;
	out->ops = &cb_ops;
	out->ctx = cb;
	return 0;
}

struct check_backend *check_backend_get(const struct backend *be)
{
	return be->ops == &cb_ops ? be->ctx : NULL;
}

void check_backend_set_faults(struct check_backend *cb, bool on)
{
	cb->faults = on;
}

void check_backend_loop_ran(struct check_backend *cb)
{
	for (uint32_t x = 0; x < cb->nstreams; x++)
		cb->streams[x].failure_told = cb->streams[x].failure_sent;
}

void check_backend_lose(struct check_backend *cb)
{
	for (unsigned x = 0; x < cb->nstreams; x++) {
		struct cb_stream *st = &cb->streams[x];

		while (st->head) {
			struct cb_cmd *c = st->head;
			st->head = c->next;
			free(c);
		}
		st->tail = NULL;
		st->ndone = st->done_head = 0;
	}
	cb->inflight_head = cb->inflight_tail = NULL;
	cb->lost = true;
}

uint64_t check_backend_commands(const struct check_backend *cb)
{
	return cb->commands;
}

/* ---- running the device ---------------------------------------------------------------- */

static bool cb_runnable(struct check_backend *cb, uint32_t x)
{
	const struct cb_cmd *c = cb->streams[x].head;
	const struct cb_rec *rec;

	if (!c)
		return false;
	if (c->kind != CB_WAIT)
		return true;
	rec = cb_rec_find(&cb->streams[c->at.stream], c->at.seq);
	return rec && rec->executed;
}

static bool cb_conflict(const struct cb_cmd *a, const struct cb_cmd *b, size_t *alloc)
{
	for (unsigned i = 0; i < a->naccess; i++) {
		for (unsigned j = 0; j < b->naccess; j++) {
			if (a->alloc[i] == b->alloc[j] && ((a->mode[i] | b->mode[j]) & SEQ_WRITE)) {
				*alloc = a->alloc[i];
				return true;
			}
		}
	}
	return false;
}

static void cb_run_op(struct check_backend *cb, struct cb_cmd *c)
{
	struct cb_stream *st = &cb->streams[c->at.stream];
	char who[96], other[96];
	size_t alloc;

	/* Anything launched earlier that conflicts and has not run would, on a GPU, race
	 * with this op: nothing (stream order, a wait) made this op wait for it (I2, I4). */
	for (const struct cb_cmd *e = cb->inflight_head; e != c; e = e->inext) {
		if (cb_conflict(c, e, &alloc)) {
			cb_describe(who, sizeof(who), c);
			cb_describe(other, sizeof(other), e);
			cb_fail("missing wait: %s runs before %s, launched earlier; both touch "
				"allocation %#" PRIx64 " and one of them writes it",
				who, other, cb->allocs[alloc].addr);
		}
	}
	for (unsigned i = 0; i < c->naccess; i++) {
		if (!cb->allocs[c->alloc[i]].live) {
			cb_describe(who, sizeof(who), c);
			cb_fail("use after free: %s runs on released memory %#" PRIx64, who,
				cb->allocs[c->alloc[i]].addr);
		}
	}
	if (c->staging && !cb->stagings[c->staging - 1].live) {
		cb_describe(who, sizeof(who), c);
		cb_fail("%s copies through an unregistered staging arena", who);
	}
	if (!st->fail_from && cb_fault(cb, 8))
		st->fail_from = c->at.seq; /* a device error: this op and all after it fail */
	if (c->iprev)
		c->iprev->inext = c->inext;
	else
		cb->inflight_head = c->inext;
	if (c->inext)
		c->inext->iprev = c->iprev;
	else
		cb->inflight_tail = c->iprev;
}

static void cb_run_head(struct check_backend *cb, uint32_t x)
{
	struct cb_stream *st = &cb->streams[x];
	struct cb_cmd *c = st->head;

	st->head = c->next;
	if (!st->head)
		st->tail = NULL;
	cb_trace(cb, "stream %" PRIu32 " runs its %s %" PRIu32 ":%" PRIu64, x,
		c->kind == CB_OP	     ? "op"
			: c->kind == CB_WAIT ? "wait on"
					     : "record",
		c->at.stream, c->at.seq);
	switch (c->kind) {
	case CB_OP:
		cb_run_op(cb, c);
		break;
	case CB_WAIT:
		break;
	case CB_RECORD: {
		struct cb_rec *rec = cb_rec_find(st, c->at.seq);
		rec->executed = true;
		st->done = cb_grow(
			st->done, &st->capdone, st->done_head + st->ndone, sizeof(*st->done));
		st->done[st->done_head + st->ndone++] = (struct cb_done){
			c->at.seq, st->fail_from && c->at.seq >= st->fail_from ? -EIO : 0};
		break;
	}
	}
	free(c);
}

bool check_backend_step(struct check_backend *cb, uint8_t choice)
{
	unsigned cand[2 * SEQ_MAX_STREAMS], n = 0;

	for (uint32_t x = 0; x < cb->nstreams; x++)
		if (cb_runnable(cb, x))
			cand[n++] = x;
	for (uint32_t x = 0; x < cb->nstreams; x++)
		if (cb->streams[x].ndone)
			cand[n++] = SEQ_MAX_STREAMS + x;
	if (!n)
		return false;
	unsigned pick = cand[choice % n];
	if (pick < SEQ_MAX_STREAMS) {
		cb_run_head(cb, pick);
	} else {
		struct cb_stream *st = &cb->streams[pick - SEQ_MAX_STREAMS];
		struct cb_done d = st->done[st->done_head++];
		if (--st->ndone == 0)
			st->done_head = 0;
		cb_trace(cb, "completion %u:%" PRIu64 " (%d) delivered", pick - SEQ_MAX_STREAMS,
			d.seq, d.status);
		if (d.status < 0)
			st->failure_sent = d.seq;
		cq_push(cb->cq, (struct seq_point){pick - SEQ_MAX_STREAMS, d.seq}, d.status);
	}
	return true;
}

void check_backend_settled(struct check_backend *cb)
{
	for (uint32_t x = 0; x < cb->nstreams; x++) {
		const struct cb_cmd *c = cb->streams[x].head;
		if (!c)
			continue;
		if (c->kind == CB_WAIT)
			cb_fail("stream %" PRIu32 " hangs: it waits on %" PRIu32 ":%" PRIu64
				", whose record never runs",
				x, c->at.stream, c->at.seq);
		cb_fail("stream %" PRIu32 " still holds commands", x);
	}
	/* A lost device's memory and modules went with its context. */
	if (cb->live_allocs && !cb->lost) {
		for (size_t i = 0; i < cb->nallocs; i++)
			if (cb->allocs[i].live)
				cb_fail("memory %#" PRIx64 " (%" PRIu64
					" bytes) never released: %zu allocation(s) left (I5, I10)",
					cb->allocs[i].addr, cb->allocs[i].size, cb->live_allocs);
	}
	if (cb->live_stagings)
		cb_fail("%zu staging arena(s) never unregistered (I10)", cb->live_stagings);
	if (cb->live_modules && !cb->lost)
		cb_fail("%u module(s) never unloaded (I10)", cb->live_modules);
}
