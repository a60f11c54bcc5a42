/* The sim backend: a CPU device for machines without a GPU and for tests. Each stream is
 * a worker thread running its queue in order, events are per-stream counters, memory is
 * host memory, and a shadow record of every allocation's writer and readers catches any
 * access that was not ordered after the work it depends on. */
#include "sim.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

/* What the core's addresses and kernels may assume of device memory. */
#define SIM_ALIGN 256
/* Blocks this large come from mmap: already zero and only committed when touched. */
#define SIM_MAP_MIN (64u << 10)
#define SIM_CLASS_BUCKETS 64
/* Released blocks stay cached for reuse (that is what makes a use-after-free visible);
 * past this many cached bytes the oldest idle ones go back to the host. */
#define SIM_CACHE_MAX (1ull << 30)
#define SIM_DELAY_MAX_NS (3600ull * 1000000000ull)

/* Device memory races on purpose when a wait is missing: that is what the detector is
 * there to report. Under ThreadSanitizer, keep its eye on the sim's own state. */
#if defined(__SANITIZE_THREAD__)
#define SIM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SIM_TSAN 1
#endif
#endif
#ifdef SIM_TSAN
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define SIM_DEVICE_ACCESS_BEGIN()                                                                  \
	do {                                                                                       \
		AnnotateIgnoreReadsBegin(__FILE__, __LINE__);                                      \
		AnnotateIgnoreWritesBegin(__FILE__, __LINE__);                                     \
	} while (0)
#define SIM_DEVICE_ACCESS_END()                                                                    \
	do {                                                                                       \
		AnnotateIgnoreWritesEnd(__FILE__, __LINE__);                                       \
		AnnotateIgnoreReadsEnd(__FILE__, __LINE__);                                        \
	} while (0)
#else
#define SIM_DEVICE_ACCESS_BEGIN() ((void)0)
#define SIM_DEVICE_ACCESS_END() ((void)0)
#endif

enum sim_entry_type {
	SIM_ENTRY_OP,
	SIM_ENTRY_WAIT, /* at: the event waited for */
	SIM_ENTRY_RECORD,
};

enum sim_race {
	SIM_RACE_RAW, /* read before its producer */
	SIM_RACE_WAR, /* write before a pending reader */
	SIM_RACE_WAW, /* write before the previous writer */
};

/* An allocation: its memory and its shadow. The shadow and the cache links belong to
 * whoever holds sim.lock; workers only read `gen`. */
struct sim_block {
	uint64_t addr;
	uint64_t size; /* the size class: a multiple of SIM_ALIGN */
	bool live;
	bool mapped;
	/* Bumped at release and at reuse: an op that sees it change while in flight touched
	 * memory that changed hands. */
	_Atomic uint64_t gen;
	struct seq_point writer; /* last launched writer */
	uint64_t readers[SEQ_MAX_STREAMS]; /* launched readers since that writer */
	uint64_t used[SEQ_MAX_STREAMS]; /* last launched op touching it, for the release check */
	struct sim_block *age_prev, *age_next; /* free cache, newest first */
	struct sim_block *class_prev, *class_next; /* free cache bucket, newest first */
};

/* A point an op must run after, found at launch and checked when the op runs. */
struct sim_need {
	struct seq_point p;
	enum sim_race race;
	uint64_t addr;
};

struct sim_view {
	uint64_t addr;
	uint64_t size;
	struct sim_block *block;
	uint64_t gen; /* block->gen at launch */
	bool reported; /* already a use-after-free at launch */
};

/* A queued command. Launch copies everything it needs: the caller's op and payload are
 * gone once launch returns. */
struct sim_entry {
	struct sim_entry *next;
	enum sim_entry_type type;
	struct seq_point at;
	enum seq_op_kind kind;
	bool device_fault; /* injected device-fail-op: runs without doing its work */
	unsigned naccess;
	unsigned nneed;
	struct sim_view view[SEQ_MAX_ACCESS];
	struct sim_need need[SEQ_MAX_STREAMS];
	struct op_payload payload;
};

struct sim;

struct sim_stream {
	struct sim *sim;
	enum seq_stream_kind kind;
	pthread_t thread;
	bool started;
	/* The worker's own. */
	uint64_t rng;
	uint64_t script_pos;
	int fault; /* once an op faulted: what every later event reports (sticky) */
	/* The submitting side's, under sim.lock. */
	uint64_t launched;
	struct sim_entry *cache; /* entries to reuse, taken from `spare` in bulk */
	/* Under mu. */
	pthread_mutex_t mu;
	pthread_cond_t work; /* the worker sleeps here for entries */
	pthread_cond_t progress; /* other workers sleep here for `executed` */
	struct sim_entry *head, *tail;
	struct sim_entry *spare; /* run entries handed back by the worker */
	bool sleeping;
	bool stop;
	/* Written by the worker only. `waiters` is raised under mu before sleeping on
	 * progress, so the worker locks and broadcasts only when somebody sleeps. */
	_Atomic uint64_t executed;
	_Atomic unsigned waiters;
};

struct sim {
	backend_complete_fn complete;
	backend_finding_fn finding;
	void *arg;
	struct sim_config cfg;
	unsigned nstreams;
	_Atomic uint64_t findings;
	struct sim_stream streams[SEQ_MAX_STREAMS];
	/* The shadow, the memory map and every stream's submitting side. Taken by the
	 * thread driving the core, never by workers. */
	pthread_mutex_t lock;
	uint64_t launches;
	struct sim_block **blocks; /* every block, live or cached, by address */
	size_t nblocks, cap;
	struct sim_block *bucket[SIM_CLASS_BUCKETS];
	struct sim_block *newest, *oldest;
	uint64_t used_bytes;
	uint64_t cached_bytes;
};

/* ---- small helpers ---- */

static uint64_t sim_splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* "kernel add at 0:5" or "h2d at 1:2", for findings. */
static void sim_describe(char *buf, size_t size, enum seq_op_kind kind, const struct op_payload *p,
	struct seq_point at)
{
	if (kind == SEQ_OP_EXEC && p && p->kernel && p->kernel->name)
		snprintf(buf, size, "kernel %s at %" PRIu32 ":%" PRIu64, p->kernel->name, at.stream,
			at.seq);
	else
		snprintf(buf, size, "%s at %" PRIu32 ":%" PRIu64, backend_op_name(kind), at.stream,
			at.seq);
}

__attribute__((format(printf, 2, 3))) static void sim_report(struct sim *sim, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	atomic_fetch_add(&sim->findings, 1);
	if (sim->finding)
		sim->finding(sim->arg, what);
}

static bool sim_executed(struct sim *sim, struct seq_point p)
{
	return atomic_load(&sim->streams[p.stream].executed) >= p.seq;
}

/* Whether a launched op on b has not run yet; names it in *p. */
static bool sim_block_pending(struct sim *sim, const struct sim_block *b, struct seq_point *p)
{
	for (uint32_t x = 0; x < sim->nstreams; x++) {
		struct seq_point u = {x, b->used[x]};

		if (u.seq && !sim_executed(sim, u)) {
			if (p)
				*p = u;
			return true;
		}
	}
	return false;
}

/* ---- memory ---- */

/* Index of the first block whose address is greater than addr. */
static size_t sim_block_upper(const struct sim *sim, uint64_t addr)
{
	size_t lo = 0, hi = sim->nblocks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (sim->blocks[mid]->addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The block holding [addr, addr + size), live or cached, or NULL. */
static struct sim_block *sim_block_find(const struct sim *sim, uint64_t addr, uint64_t size)
{
	size_t i = sim_block_upper(sim, addr);
	struct sim_block *b;

	if (i == 0)
		return NULL;
	b = sim->blocks[i - 1];
	if (addr - b->addr > b->size || size > b->size - (addr - b->addr))
		return NULL;
	return b;
}

static unsigned sim_class_bucket(uint64_t size)
{
	return (unsigned)(((size / SIM_ALIGN) * 0x9e3779b97f4a7c15ull) >> 58) % SIM_CLASS_BUCKETS;
}

static void sim_cache_push(struct sim *sim, struct sim_block *b)
{
	struct sim_block **head = &sim->bucket[sim_class_bucket(b->size)];

	b->age_prev = NULL;
	b->age_next = sim->newest;
	if (sim->newest)
		sim->newest->age_prev = b;
	else
		sim->oldest = b;
	sim->newest = b;
	b->class_prev = NULL;
	b->class_next = *head;
	if (*head)
		(*head)->class_prev = b;
	*head = b;
	sim->cached_bytes += b->size;
}

static void sim_cache_remove(struct sim *sim, struct sim_block *b)
{
	if (b->age_prev)
		b->age_prev->age_next = b->age_next;
	else
		sim->newest = b->age_next;
	if (b->age_next)
		b->age_next->age_prev = b->age_prev;
	else
		sim->oldest = b->age_prev;
	if (b->class_prev)
		b->class_prev->class_next = b->class_next;
	else
		sim->bucket[sim_class_bucket(b->size)] = b->class_next;
	if (b->class_next)
		b->class_next->class_prev = b->class_prev;
	sim->cached_bytes -= b->size;
}

static void sim_block_free(struct sim_block *b)
{
	if (b->mapped)
		munmap((void *)(uintptr_t)b->addr, b->size);
	else
		free((void *)(uintptr_t)b->addr);
	free(b);
}

/* Hand the oldest cached blocks back to the host while the cache is over its limit; a
 * block an op still uses stays (its memory must outlive the op). */
static void sim_cache_trim(struct sim *sim)
{
	while (sim->cached_bytes > SIM_CACHE_MAX && sim->oldest &&
		!sim_block_pending(sim, sim->oldest, NULL)) {
		struct sim_block *b = sim->oldest;
		size_t i = sim_block_upper(sim, b->addr) - 1;

		sim_cache_remove(sim, b);
		memmove(&sim->blocks[i], &sim->blocks[i + 1],
			(sim->nblocks - i - 1) * sizeof(*sim->blocks));
		sim->nblocks--;
		sim_block_free(b);
	}
}

static int sim_block_new(struct sim *sim, uint64_t size, struct sim_block **out)
{
	struct sim_block *b;
	void *mem;
	size_t i;

	if (sim->nblocks == sim->cap) {
		size_t cap = sim->cap ? 2 * sim->cap : 64;
		struct sim_block **blocks = realloc(sim->blocks, cap * sizeof(*blocks));

		if (!blocks)
			return -ENOMEM;
		sim->blocks = blocks;
		sim->cap = cap;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	/* Fresh device memory reads as zeros, like the stale input of the seed bug. */
	if (size >= SIM_MAP_MIN) {
		mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED)
			mem = NULL;
		b->mapped = true;
	} else {
		mem = aligned_alloc(SIM_ALIGN, size);
		if (mem)
			memset(mem, 0, size);
	}
	if (!mem) {
		free(b);
		return -ENOMEM;
	}
	b->addr = (uint64_t)(uintptr_t)mem;
	b->size = size;
	i = sim_block_upper(sim, b->addr);
	memmove(&sim->blocks[i + 1], &sim->blocks[i], (sim->nblocks - i) * sizeof(*sim->blocks));
	sim->blocks[i] = b;
	sim->nblocks++;
	*out = b;
	return 0;
}

static int sim_mem_alloc(void *ctx, uint64_t size, uint64_t *addr)
{
	struct sim *sim = ctx;
	struct sim_block *b;
	uint64_t class;
	int r = 0;

	if (size > sim->cfg.memory)
		return -ENOMEM;
	class = size ? (size + SIM_ALIGN - 1) & ~(uint64_t)(SIM_ALIGN - 1) : SIM_ALIGN;
	pthread_mutex_lock(&sim->lock);
	if (class > sim->cfg.memory - sim->used_bytes) {
		r = -ENOMEM;
		goto out;
	}
	/* Reuse the most recently released block of the class first: an op still touching
	 * it then scribbles over the new owner's data, as a reused GPU allocation would. */
	for (b = sim->bucket[sim_class_bucket(class)]; b; b = b->class_next)
		if (b->size == class)
			break;
	if (b) {
		sim_cache_remove(sim, b);
	} else {
		r = sim_block_new(sim, class, &b);
		if (r < 0)
			goto out;
	}
	b->live = true;
	atomic_fetch_add(&b->gen, 1);
	b->writer = (struct seq_point){0, 0};
	memset(b->readers, 0, sizeof(b->readers));
	sim->used_bytes += class;
	*addr = b->addr;
out:
	pthread_mutex_unlock(&sim->lock);
	return r;
}

static void sim_mem_release(void *ctx, uint64_t addr, uint64_t size)
{
	struct sim *sim = ctx;
	struct sim_block *b;
	struct seq_point p;

	pthread_mutex_lock(&sim->lock);
	b = sim_block_find(sim, addr, 0);
	if (!b || b->addr != addr || !b->live) {
		sim_report(sim, "release of memory %#" PRIx64 " that is not allocated", addr);
		goto out;
	}
	if (sim_block_pending(sim, b, &p))
		sim_report(sim,
			"memory %#" PRIx64 " released while %" PRIu32 ":%" PRIu64 " still uses it",
			addr, p.stream, p.seq);
	b->live = false;
	atomic_fetch_add(&b->gen, 1);
	sim->used_bytes -= b->size;
	sim_cache_push(sim, b);
	sim_cache_trim(sim);
out:
	pthread_mutex_unlock(&sim->lock);
}

/* ---- submission ---- */

static struct sim_entry *sim_entry_get(struct sim_stream *st)
{
	struct sim_entry *e;

	if (!st->cache) {
		pthread_mutex_lock(&st->mu);
		st->cache = st->spare;
		st->spare = NULL;
		pthread_mutex_unlock(&st->mu);
	}
	e = st->cache;
	if (e)
		st->cache = e->next;
	else
		e = malloc(sizeof(*e));
	return e;
}

static void sim_entry_push(struct sim_stream *st, struct sim_entry *e)
{
	e->next = NULL;
	pthread_mutex_lock(&st->mu);
	if (st->tail)
		st->tail->next = e;
	else
		st->head = e;
	st->tail = e;
	/* Only a sleeping worker costs a wake-up; a busy one finds the entry itself. */
	if (st->sleeping)
		pthread_cond_signal(&st->work);
	pthread_mutex_unlock(&st->mu);
}

static int sim_record(void *ctx, struct seq_point at)
{
	struct sim *sim = ctx;
	struct sim_stream *st;
	struct sim_entry *e;
	int r = 0;

	if (at.stream >= sim->nstreams)
		return -EINVAL;
	st = &sim->streams[at.stream];
	pthread_mutex_lock(&sim->lock);
	if (at.seq > st->launched) {
		r = -EINVAL;
		goto out;
	}
	e = sim_entry_get(st);
	if (!e) {
		r = -ENOMEM;
		goto out;
	}
	e->type = SIM_ENTRY_RECORD;
	e->at = at;
	sim_entry_push(st, e);
out:
	pthread_mutex_unlock(&sim->lock);
	return r;
}

static int sim_wait(void *ctx, uint32_t stream, struct seq_point event)
{
	struct sim *sim = ctx;
	struct sim_stream *st;
	struct sim_entry *e;
	int r = 0;

	if (stream >= sim->nstreams || event.stream >= sim->nstreams)
		return -EINVAL;
	if (stream == event.stream)
		return 0; /* an in-order stream already waits for itself */
	st = &sim->streams[stream];
	pthread_mutex_lock(&sim->lock);
	if (event.seq > sim->streams[event.stream].launched) {
		r = -EINVAL; /* it would never complete */
		goto out;
	}
	e = sim_entry_get(st);
	if (!e) {
		r = -ENOMEM;
		goto out;
	}
	e->type = SIM_ENTRY_WAIT;
	e->at = event;
	sim_entry_push(st, e);
out:
	pthread_mutex_unlock(&sim->lock);
	return r;
}

/* What the sim can check of an op before it touches anything (backend_op_check), plus
 * that a kernel has a CPU version. */
static int sim_op_check(const struct sim *sim, struct seq_point at, const struct seq_op *op)
{
	const struct op_payload *p = op->payload;

	if (at.stream >= sim->nstreams)
		return -EINVAL;
	if (op->kind == SEQ_OP_EXEC && p && (!p->kernel || !p->kernel->cpu))
		return -EINVAL;
	return backend_op_check(
		sim->streams[at.stream].kind, sim->streams[at.stream].launched, at, op);
}

/* Whether the current launch call is a fail-op (refused) or a device-fail-op (faults
 * on the device, *on_device) fault. Refusal wins where both name it: nothing runs. */
static bool sim_injected(const struct sim *sim, bool *on_device)
{
	bool hit = false;

	*on_device = false;
	for (unsigned i = 0; i < sim->cfg.nfail; i++) {
		if (sim->cfg.fail_op[i] != sim->launches)
			continue;
		if (!sim->cfg.fail_on_device[i]) {
			*on_device = false;
			return true;
		}
		hit = *on_device = true;
	}
	return hit;
}

/* Note that the op must run after p, keeping the latest point per stream. */
static void sim_need_add(
	struct sim_need *need, uint32_t self, struct seq_point p, enum sim_race race, uint64_t addr)
{
	if (p.seq == 0 || p.stream == self || p.seq <= need[p.stream].p.seq)
		return;
	need[p.stream] = (struct sim_need){p, race, addr};
}

static int sim_launch(void *ctx, struct seq_point at, const struct seq_op *op)
{
	struct sim *sim = ctx;
	struct sim_need need[SEQ_MAX_STREAMS]; /* the first nstreams: cleared below */
	struct sim_stream *st = NULL;
	struct sim_entry *e = NULL;
	const struct op_payload *p = op->payload;
	bool device_fault = false;
	char who[96];
	int r;

	pthread_mutex_lock(&sim->lock);
	sim->launches++;
	if (sim_injected(sim, &device_fault) && !device_fault) {
		r = -BACKEND_EINJECTED;
		goto fail;
	}
	r = sim_op_check(sim, at, op);
	if (r < 0)
		goto fail;
	st = &sim->streams[at.stream];
	e = sim_entry_get(st);
	if (!e) {
		r = -ENOMEM;
		goto fail;
	}
	e->type = SIM_ENTRY_OP;
	e->at = at;
	e->kind = op->kind;
	e->device_fault = device_fault;
	e->naccess = op->naccess;

	/* Resolve every view before changing any shadow, so a refused op leaves none. */
	for (unsigned i = 0; i < op->naccess; i++) {
		struct sim_view *v = &e->view[i];

		v->addr = op->access[i].addr;
		v->size = op->access[i].size;
		v->block = sim_block_find(sim, v->addr, v->size);
		if (!v->block) {
			/* Not host memory the sim owns any more: running it could crash. */
			sim_describe(who, sizeof(who), op->kind, p, at);
			sim_report(sim, "use-after-free: %s touches unallocated memory %#" PRIx64,
				who, v->addr);
			r = -EFAULT;
			goto fail;
		}
		v->gen = atomic_load(&v->block->gen);
		v->reported = !v->block->live;
		if (v->reported) {
			sim_describe(who, sizeof(who), op->kind, p, at);
			sim_report(sim,
				"use-after-free: %s touches buffer %#" PRIx64
				" after it was released",
				who, v->block->addr);
		}
	}
	/* What the op must run after, by the shadow as launched so far (I2, I4). All found
	 * before any update, so an op reading and writing one allocation needs itself not. */
	for (uint32_t x = 0; x < sim->nstreams; x++)
		need[x].p.seq = 0;
	for (unsigned i = 0; i < op->naccess; i++) {
		const struct sim_block *b = e->view[i].block;

		if (op->access[i].mode & SEQ_READ)
			sim_need_add(need, at.stream, b->writer, SIM_RACE_RAW, b->addr);
		if (op->access[i].mode & SEQ_WRITE) {
			sim_need_add(need, at.stream, b->writer, SIM_RACE_WAW, b->addr);
			for (uint32_t x = 0; x < sim->nstreams; x++)
				sim_need_add(need, at.stream, (struct seq_point){x, b->readers[x]},
					SIM_RACE_WAR, b->addr);
		}
	}
	e->nneed = 0;
	for (uint32_t x = 0; x < sim->nstreams; x++)
		if (need[x].p.seq && !sim_executed(sim, need[x].p))
			e->need[e->nneed++] = need[x];
	for (unsigned i = 0; i < op->naccess; i++) {
		struct sim_block *b = e->view[i].block;

		b->used[at.stream] = at.seq;
		if (op->access[i].mode & SEQ_READ && b->readers[at.stream] < at.seq)
			b->readers[at.stream] = at.seq;
	}
	for (unsigned i = 0; i < op->naccess; i++) {
		struct sim_block *b = e->view[i].block;

		if (op->access[i].mode & SEQ_WRITE) {
			b->writer = at;
			memset(b->readers, 0, sizeof(b->readers));
		}
	}

	e->payload.host = p->host;
	e->payload.src_offset = p->src_offset;
	e->payload.dst_offset = p->dst_offset;
	e->payload.length = p->length;
	e->payload.kernel = p->kernel;
	e->payload.nargs = 0;
	if (op->kind == SEQ_OP_EXEC) {
		e->payload.nargs = p->nargs;
		memcpy(e->payload.args, p->args, p->nargs * sizeof(p->args[0]));
		e->payload.elements = p->elements;
		e->payload.grid = p->grid;
	}
	st->launched = at.seq;
	sim_entry_push(st, e);
	pthread_mutex_unlock(&sim->lock);
	return 0;
fail:
	if (e) {
		e->next = st->cache;
		st->cache = e;
	}
	pthread_mutex_unlock(&sim->lock);
	return r;
}

/* ---- the workers ---- */

static uint64_t sim_delay_next(struct sim_stream *st)
{
	const struct sim_delay *d = &st->sim->cfg.delay[st->kind];
	uint64_t span;

	switch (d->mode) {
	case SIM_DELAY_NONE:
		break;
	case SIM_DELAY_FIXED:
		return d->lo_ns;
	case SIM_DELAY_RAND:
		span = d->hi_ns - d->lo_ns + 1;
		return d->lo_ns + sim_splitmix(&st->rng) % span;
	case SIM_DELAY_SCRIPT:
		return d->script_ns[st->script_pos++ % d->nscript];
	}
	return 0;
}

static void sim_sleep(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

static void sim_wait_for(struct sim *sim, struct seq_point p)
{
	struct sim_stream *x = &sim->streams[p.stream];

	if (atomic_load(&x->executed) >= p.seq)
		return;
	pthread_mutex_lock(&x->mu);
	atomic_fetch_add(&x->waiters, 1);
	while (atomic_load(&x->executed) < p.seq)
		pthread_cond_wait(&x->progress, &x->mu);
	atomic_fetch_sub(&x->waiters, 1);
	pthread_mutex_unlock(&x->mu);
}

static void sim_race_report(struct sim *sim, const struct sim_entry *e, const struct sim_need *n)
{
	static const char *const act[] = {
		[SIM_RACE_RAW] = "read",
		[SIM_RACE_WAR] = "wrote",
		[SIM_RACE_WAW] = "wrote",
	};
	static const char *const other[] = {
		[SIM_RACE_RAW] = "producer",
		[SIM_RACE_WAR] = "reader",
		[SIM_RACE_WAW] = "previous writer",
	};
	char who[96];

	sim_describe(who, sizeof(who), e->kind, &e->payload, e->at);
	sim_report(sim,
		"race: %s %s buffer %#" PRIx64 " before its %s %" PRIu32 ":%" PRIu64
		" completed (missing wait)",
		who, act[n->race], n->addr, other[n->race], n->p.stream, n->p.seq);
}

static void sim_run_op(struct sim_stream *st, struct sim_entry *e)
{
	struct sim *sim = st->sim;
	struct op_payload *p = &e->payload;
	uint64_t ns = sim_delay_next(st);
	unsigned char *src, *dst;

	if (ns)
		sim_sleep(ns);
	for (unsigned i = 0; i < e->nneed; i++)
		if (!sim_executed(sim, e->need[i].p))
			sim_race_report(sim, e, &e->need[i]);
	/* An injected device fault: the op runs in stream order and is checked like any
	 * other, but does not do its work, so what it would write keeps what it held, as
	 * after a kernel that faulted before its stores: a failure the core lost would
	 * show as wrong data too. Its stream's events report the error from now on. */
	if (e->device_fault) {
		st->fault = -EIO;
		goto done;
	}

	SIM_DEVICE_ACCESS_BEGIN();
	switch (e->kind) {
	case SEQ_OP_H2D:
		if (p->length)
			memcpy((unsigned char *)(uintptr_t)e->view[0].addr + p->dst_offset, p->host,
				p->length);
		break;
	case SEQ_OP_D2H:
		if (p->length)
			memcpy(p->host, (unsigned char *)(uintptr_t)e->view[0].addr + p->src_offset,
				p->length);
		break;
	case SEQ_OP_D2D:
		src = (unsigned char *)(uintptr_t)e->view[0].addr + p->src_offset;
		dst = (unsigned char *)(uintptr_t)e->view[e->naccess > 1].addr + p->dst_offset;
		if (p->length)
			memmove(dst, src, p->length);
		break;
	case SEQ_OP_EXEC:
		for (unsigned i = 0; i < p->nargs; i++) {
			struct karg *a = &p->args[i];

			if (a->type == KARG_BUFFER) {
				a->v.buf.ptr = (void *)(uintptr_t)e->view[a->v.buf.index].addr;
				a->v.buf.size = e->view[a->v.buf.index].size;
			}
		}
		p->kernel->cpu(p->args, p->elements);
		break;
	}
	SIM_DEVICE_ACCESS_END();

	/* Checked after the work: a release at any time while it ran is a use after free. */
	for (unsigned i = 0; i < e->naccess; i++) {
		const struct sim_view *v = &e->view[i];

		if (!v->reported && atomic_load(&v->block->gen) != v->gen) {
			char who[96];

			sim_describe(who, sizeof(who), e->kind, p, e->at);
			sim_report(sim,
				"use-after-free: %s touched buffer %#" PRIx64
				" after it was released",
				who, v->block->addr);
		}
	}

done:
	atomic_store(&st->executed, e->at.seq);
	if (atomic_load(&st->waiters)) {
		pthread_mutex_lock(&st->mu);
		pthread_cond_broadcast(&st->progress);
		pthread_mutex_unlock(&st->mu);
	}
}

static void *sim_worker(void *arg)
{
	struct sim_stream *st = arg;
	struct sim *sim = st->sim;

	pthread_mutex_lock(&st->mu);
	for (;;) {
		struct sim_entry *batch, *last = NULL;

		while (!st->head && !st->stop) {
			st->sleeping = true;
			pthread_cond_wait(&st->work, &st->mu);
			st->sleeping = false;
		}
		if (!st->head)
			break;
		/* Take the whole queue: one lock round per batch, not per entry. */
		batch = st->head;
		st->head = st->tail = NULL;
		pthread_mutex_unlock(&st->mu);
		for (struct sim_entry *e = batch; e; e = e->next) {
			switch (e->type) {
			case SIM_ENTRY_OP:
				sim_run_op(st, e);
				break;
			case SIM_ENTRY_WAIT:
				sim_wait_for(sim, e->at);
				break;
			case SIM_ENTRY_RECORD:
				sim->complete(sim->arg, e->at, st->fault);
				break;
			}
			last = e;
		}
		pthread_mutex_lock(&st->mu);
		last->next = st->spare;
		st->spare = batch;
	}
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

/* ---- the rest of the backend ---- */

static int sim_staging_register(void *ctx, void *addr, size_t size)
{
	return 0; /* host memory is as fast as it gets */
}

static void sim_staging_unregister(void *ctx, void *addr, size_t size)
{
}

static uint64_t sim_findings(void *ctx)
{
	struct sim *sim = ctx;

	return atomic_load(&sim->findings);
}

static void sim_info(void *ctx, struct backend_info *info)
{
	struct sim *sim = ctx;

	memset(info, 0, sizeof(*info));
	info->backend = "sim";
	snprintf(info->name, sizeof(info->name), "sseq sim device");
	info->memory_total = sim->cfg.memory;
	pthread_mutex_lock(&sim->lock);
	info->memory_used = sim->used_bytes;
	pthread_mutex_unlock(&sim->lock);
}

static void sim_entries_free(struct sim_entry *e)
{
	while (e) {
		struct sim_entry *next = e->next;

		free(e);
		e = next;
	}
}

static void sim_destroy(void *ctx)
{
	struct sim *sim = ctx;

	/* Workers drain their queues before they see stop: every launched op runs. */
	for (unsigned i = 0; i < sim->nstreams; i++) {
		struct sim_stream *st = &sim->streams[i];

		if (!st->started)
			continue;
		pthread_mutex_lock(&st->mu);
		st->stop = true;
		pthread_cond_signal(&st->work);
		pthread_mutex_unlock(&st->mu);
	}
	for (unsigned i = 0; i < sim->nstreams; i++) {
		struct sim_stream *st = &sim->streams[i];

		if (st->started)
			pthread_join(st->thread, NULL);
		sim_entries_free(st->head);
		sim_entries_free(st->spare);
		sim_entries_free(st->cache);
		pthread_cond_destroy(&st->progress);
		pthread_cond_destroy(&st->work);
		pthread_mutex_destroy(&st->mu);
	}
	for (size_t i = 0; i < sim->nblocks; i++)
		sim_block_free(sim->blocks[i]);
	free(sim->blocks);
	pthread_mutex_destroy(&sim->lock);
	free(sim);
}

static const struct backend_ops sim_ops = {
	.seq =
		{
			.mem_alloc = sim_mem_alloc,
			.mem_release = sim_mem_release,
			.record = sim_record,
			.wait = sim_wait,
			.launch = sim_launch,
		},
	.staging_register = sim_staging_register,
	.staging_unregister = sim_staging_unregister,
	.findings = sim_findings,
	.info = sim_info,
	.destroy = sim_destroy,
};

/* The core's numbering: compute, H2D, the D2H streams, the D2D streams. */
static enum seq_stream_kind sim_stream_kind(const struct sim_config *cfg, unsigned i)
{
	if (i == 0)
		return SEQ_STREAM_COMPUTE;
	if (i == 1)
		return SEQ_STREAM_H2D;
	return i < 2 + cfg->n_d2h ? SEQ_STREAM_D2H : SEQ_STREAM_D2D;
}

static int sim_config_check(const struct sim_config *cfg)
{
	if (2 + cfg->n_d2h + cfg->n_d2d > SEQ_MAX_STREAMS || cfg->nfail > SIM_INJECT_MAX)
		return -EINVAL;
	for (unsigned k = 0; k <= SEQ_STREAM_D2D; k++) {
		const struct sim_delay *d = &cfg->delay[k];

		if (d->mode > SIM_DELAY_SCRIPT ||
			(d->mode == SIM_DELAY_RAND && d->lo_ns > d->hi_ns) ||
			(d->mode == SIM_DELAY_SCRIPT &&
				(d->nscript < 1 || d->nscript > SIM_SCRIPT_MAX)))
			return -EINVAL;
	}
	return 0;
}

int sim_create(struct backend *out, const struct sim_config *cfg, backend_complete_fn complete,
	backend_finding_fn finding, void *arg)
{
	struct sim *sim;
	int r;

	if (!complete)
		return -EINVAL;
	sim = calloc(1, sizeof(*sim));
	if (!sim)
		return -ENOMEM;
	if (cfg)
		sim->cfg = *cfg;
	if (!sim->cfg.n_d2h)
		sim->cfg.n_d2h = 1;
	if (!sim->cfg.n_d2d)
		sim->cfg.n_d2d = 1;
	if (!sim->cfg.memory)
		sim->cfg.memory = SIM_DEFAULT_MEMORY;
	r = sim_config_check(&sim->cfg);
	if (r < 0) {
		free(sim);
		return r;
	}
	sim->complete = complete;
	sim->finding = finding;
	sim->arg = arg;
	sim->nstreams = 2 + sim->cfg.n_d2h + sim->cfg.n_d2d;
	pthread_mutex_init(&sim->lock, NULL);
	for (unsigned i = 0; i < sim->nstreams; i++) {
		struct sim_stream *st = &sim->streams[i];
		uint64_t seed = sim->cfg.seed ^ (0x5eedull * (i + 1));

		st->sim = sim;
		st->kind = sim_stream_kind(&sim->cfg, i);
		st->rng = sim_splitmix(&seed);
		pthread_mutex_init(&st->mu, NULL);
		pthread_cond_init(&st->work, NULL);
		pthread_cond_init(&st->progress, NULL);
	}
	for (unsigned i = 0; i < sim->nstreams; i++) {
		struct sim_stream *st = &sim->streams[i];

		r = -pthread_create(&st->thread, NULL, sim_worker, st);
		if (r < 0)
			goto fail;
		st->started = true;
	}
	out->ops = &sim_ops;
	out->ctx = sim;
	return 0;
fail:
	sim_destroy(sim);
	return r;
}

/* ---- parsing the command-line specs ---- */

/* One duration of [s, end): a number and a unit; a bare number takes *unit_ns when it is
 * not 0 (the unit of rand's upper bound), and only 0 may be bare otherwise. */
static int sim_parse_duration(const char *s, const char *end, uint64_t bare_unit, uint64_t *ns,
	uint64_t *unit_ns, const char **why)
{
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = {{"ns", 1}, {"us", 1000}, {"ms", 1000000}, {"s", 1000000000}};
	char buf[64], *u;
	size_t len = (size_t)(end - s);
	uint64_t unit = 0;
	double v;

	if (len == 0 || len >= sizeof(buf) || *s < '0' || *s > '9') {
		*why = "expected a duration such as 2ms, 500us or 0";
		return -EINVAL;
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	v = strtod(buf, &u);
	if (*u == '\0') {
		unit = bare_unit;
	} else {
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (strcmp(u, units[i].name) == 0)
				unit = units[i].ns;
		if (!unit) {
			*why = "unknown unit: use ns, us, ms or s";
			return -EINVAL;
		}
	}
	if (!unit && v != 0) {
		*why = "a duration needs a unit (ns, us, ms, s)";
		return -EINVAL;
	}
	if (!isfinite(v) || v * (double)(unit ? unit : 1) > (double)SIM_DELAY_MAX_NS) {
		*why = "a delay may be at most one hour";
		return -EINVAL;
	}
	*ns = (uint64_t)llround(v * (double)unit);
	if (unit_ns)
		*unit_ns = unit;
	return 0;
}

int sim_parse_delay(struct sim_config *cfg, const char *spec, const char **why)
{
	static const char *const kinds[] = {
		[SEQ_STREAM_COMPUTE] = "compute",
		[SEQ_STREAM_H2D] = "h2d",
		[SEQ_STREAM_D2H] = "d2h",
		[SEQ_STREAM_D2D] = "d2d",
	};
	const char *eq = strchr(spec, '='), *v, *end;
	struct sim_delay d = {0};
	size_t klen;
	int kind = -1;
	bool all = false;
	int r;

	*why = NULL;
	if (!eq) {
		*why = "expected KIND=DELAY, e.g. h2d=2ms";
		return -EINVAL;
	}
	klen = (size_t)(eq - spec);
	for (int k = 0; k <= SEQ_STREAM_D2D; k++)
		if (strlen(kinds[k]) == klen && strncmp(spec, kinds[k], klen) == 0)
			kind = k;
	all = klen == 3 && strncmp(spec, "all", 3) == 0;
	if (kind < 0 && !all) {
		*why = "unknown stream kind: use compute, h2d, d2h, d2d or all";
		return -EINVAL;
	}
	v = eq + 1;
	end = v + strlen(v);
	if (strncmp(v, "rand:", 5) == 0) {
		const char *dash = strchr(v + 5, '-');
		uint64_t unit;

		if (!dash) {
			*why = "expected rand:LO-HI, e.g. rand:0-500us";
			return -EINVAL;
		}
		d.mode = SIM_DELAY_RAND;
		r = sim_parse_duration(dash + 1, end, 0, &d.hi_ns, &unit, why);
		if (r < 0)
			return r;
		r = sim_parse_duration(v + 5, dash, unit, &d.lo_ns, NULL, why);
		if (r < 0)
			return r;
		if (d.lo_ns > d.hi_ns) {
			*why = "rand:LO-HI needs LO <= HI";
			return -EINVAL;
		}
	} else if (strncmp(v, "script:", 7) == 0) {
		d.mode = SIM_DELAY_SCRIPT;
		for (const char *s = v + 7;; s++) {
			const char *comma = strchr(s, ',');
			const char *stop = comma ? comma : end;

			if (d.nscript == SIM_SCRIPT_MAX) {
				*why = "a script holds at most 64 delays";
				return -EINVAL;
			}
			r = sim_parse_duration(s, stop, 0, &d.script_ns[d.nscript++], NULL, why);
			if (r < 0)
				return r;
			if (!comma)
				break;
			s = comma;
		}
	} else {
		d.mode = SIM_DELAY_FIXED;
		r = sim_parse_duration(v, end, 0, &d.lo_ns, NULL, why);
		if (r < 0)
			return r;
		d.hi_ns = d.lo_ns;
	}
	for (int k = 0; k <= SEQ_STREAM_D2D; k++)
		if (all || k == kind)
			cfg->delay[k] = d;
	return 0;
}

int sim_parse_inject(struct sim_config *cfg, const char *spec, const char **why)
{
	static const struct {
		const char *prefix;
		bool on_device;
	} faults[] = {{"fail-op=", false}, {"device-fail-op=", true}};
	const char *s = NULL;
	bool on_device = false;
	uint64_t n = 0;

	*why = NULL;
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		size_t len = strlen(faults[i].prefix);

		if (strncmp(spec, faults[i].prefix, len) == 0) {
			s = spec + len;
			on_device = faults[i].on_device;
		}
	}
	if (!s) {
		*why = "unknown fault: the sim knows fail-op=N and device-fail-op=N";
		return -EINVAL;
	}
	if (*s == '\0') {
		*why = "the fault needs a launch number N";
		return -EINVAL;
	}
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || n > (UINT64_MAX - 9) / 10) {
			*why = "N must be a decimal number";
			return -EINVAL;
		}
		n = n * 10 + (uint64_t)(*s - '0');
	}
	if (n == 0) {
		*why = "N counts launches from 1";
		return -EINVAL;
	}
	if (cfg->nfail == SIM_INJECT_MAX) {
		*why = "at most 32 fail-op and device-fail-op faults in all";
		return -EINVAL;
	}
	cfg->fail_op[cfg->nfail] = n;
	cfg->fail_on_device[cfg->nfail] = on_device;
	cfg->nfail++;
	return 0;
}
