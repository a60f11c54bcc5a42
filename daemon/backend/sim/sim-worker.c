/* The sim's streams: launch, record and wait queue entries under sim.lock, and one worker
 * thread per stream runs its queue in order, sleeping the configured delay before each op
 * and waiting for other streams' progress where the core asked it to. */
#include "sim-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static uint64_t sim_splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- submission ---- */

static struct sim_entry *sim_entry_get(struct sim_stream *st)
{
	struct sim_entry *e;

	if (!st->cache) {
		pthread_mutex_lock(&st->mu);
		st->cache = st->spare;
		st->spare = NULL;
		st->nspare = 0;
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

int sim_record(void *ctx, struct seq_point at)
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

int sim_wait(void *ctx, uint32_t stream, struct seq_point event)
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
static bool sim_injected(const struct sim *sim, bool *on_device, bool *lost)
{
	bool hit = false;

	*on_device = *lost = false;
	for (unsigned i = 0; i < sim->cfg.nfail; i++) {
		if (sim->cfg.fail_op[i] != sim->launches)
			continue;
		if (!sim->cfg.fail_on_device[i]) {
			*on_device = *lost = false;
			return true;
		}
		hit = *on_device = true;
		*lost |= sim->cfg.fail_lost[i];
	}
	return hit;
}

/* Copy what the worker needs of the payload: the caller's is gone once launch returns. */
static void sim_entry_set_payload(struct sim_entry *e, const struct seq_op *op)
{
	const struct op_payload *p = op->payload;

	e->payload.host = p->host;
	e->payload.src_offset = p->src_offset;
	e->payload.dst_offset = p->dst_offset;
	e->payload.length = p->length;
	e->payload.kernel = p->kernel;
	e->payload.nargs = 0;
	if (op->kind == SEQ_OP_D2H) {
		e->payload.done_word = p->done_word;
		e->payload.done_tag = p->done_tag;
		e->payload.done_written = p->done_written;
	}
	if (op->kind == SEQ_OP_EXEC) {
		e->payload.nargs = p->nargs;
		memcpy(e->payload.args, p->args, p->nargs * sizeof(p->args[0]));
		e->payload.elements = p->elements;
		e->payload.grid = p->grid;
	}
}

/* All under one hold of sim.lock: the launch count (what --inject counts), the shadow and
 * the stream's queue change together, in the order the core launches. */
int sim_launch(void *ctx, struct seq_point at, const struct seq_op *op)
{
	struct sim *sim = ctx;
	struct sim_stream *st = NULL;
	struct sim_entry *e = NULL;
	bool device_fault = false, device_lost = false;
	int r;

	pthread_mutex_lock(&sim->lock);
	sim->launches++;
	if (sim_injected(sim, &device_fault, &device_lost) && !device_fault) {
		r = -BACKEND_EINJECTED;
		goto fail;
	}
	/* A poisoned context takes nothing more, as a GPU's after an illegal address. */
	if (atomic_load(sim->lost)) {
		r = -EIO;
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
	e->device_lost = device_lost;
	e->naccess = op->naccess;

	/* Resolve every view before changing any shadow, so a refused op leaves none. */
	r = sim_detect_views(sim, e, op);
	if (r < 0)
		goto fail;
	sim_detect_needs(sim, e, op);
	r = sim_detect_staging(sim, e, op);
	if (r < 0)
		goto fail;
	sim_detect_note(e, op);

	sim_entry_set_payload(e, op);
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
	/* Cancelled: what comes after the wait is skipped, so it orders nothing. */
	while (atomic_load(&x->executed) < p.seq && !atomic_load(&sim->cancelled))
		pthread_cond_wait(&x->progress, &x->mu);
	atomic_fetch_sub(&x->waiters, 1);
	pthread_mutex_unlock(&x->mu);
}

static uint64_t sim_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The writing side of the seqlock (the stream's worker is the only writer). */
static void sim_times_put(struct sim *sim, struct seq_point at, uint64_t start, uint64_t end)
{
	struct sim_times *t = &sim->times[(size_t)at.stream * SIM_TIMES + at.seq % SIM_TIMES];

	atomic_store_explicit(&t->seq, 0, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&t->start_ns, start, memory_order_relaxed);
	atomic_store_explicit(&t->end_ns, end, memory_order_relaxed);
	atomic_store_explicit(&t->seq, at.seq, memory_order_release);
}

int sim_op_times(
	void *ctx, struct seq_point at, uint64_t *start_ns, uint64_t *end_ns, uint64_t *error_ns)
{
	struct sim *sim = ctx;
	struct sim_times *t;

	if (at.stream >= sim->nstreams || at.seq == 0)
		return -ENOENT;
	t = &sim->times[(size_t)at.stream * SIM_TIMES + at.seq % SIM_TIMES];
	if (atomic_load_explicit(&t->seq, memory_order_acquire) != at.seq)
		return -ENOENT;
	*start_ns = atomic_load_explicit(&t->start_ns, memory_order_relaxed);
	*end_ns = atomic_load_explicit(&t->end_ns, memory_order_relaxed);
	*error_ns = 0; /* the worker read the host clock itself */
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&t->seq, memory_order_relaxed) == at.seq ? 0 : -ENOENT;
}

/* A report of st's events through `at`: the Await words up to it first, so that the loop,
 * handling the report, finds the tags in place; their sleepers woken last, as hip's. */
static void sim_stream_report(struct sim_stream *st, struct seq_point at, int status)
{
	struct done_wakes wakes;

	wakes.n = 0;
	pthread_mutex_lock(&st->mu);
	word_notes_report(&st->notes, at.seq, status, &wakes);
	pthread_mutex_unlock(&st->mu);
	cq_push(st->sim->cq, at, status);
	done_wakes_flush(&wakes);
}

int sim_point_word(
	void *ctx, struct seq_point at, _Atomic uint64_t *word, uint64_t tag, _Atomic bool *written)
{
	struct sim *sim = ctx;

	if (at.stream >= sim->nstreams)
		return -EINVAL;
	return word_notes_add_locked(&sim->streams[at.stream].mu, &sim->streams[at.stream].notes,
		at.seq, word, tag, written);
}

static void sim_run_op(struct sim_stream *st, struct sim_entry *e)
{
	struct sim *sim = st->sim;
	struct op_payload *p = &e->payload;
	uint64_t ns = sim_delay_next(st);
	const uint64_t start = sim_clock_ns();
	unsigned char *src, *dst;
	bool worked = false;

	/* Not begun before the cancel: it never touches its memory, and fails its stream's
	 * events from here on, as a launch the daemon held back would. */
	if (atomic_load(&sim->cancelled)) {
		/* What ran before is reported complete as it ran: a later event would report
		 * it failed with the rest (the core records lazily, often after a burst). */
		if (!st->fault) {
			const uint64_t ran = atomic_load(&st->executed);

			if (ran)
				sim_stream_report(st, (struct seq_point){e->at.stream, ran}, 0);
			st->fault = -ESHUTDOWN;
		}
		goto done;
	}
	/* A fault that loses the context does so as its op starts: every stream's work
	 * fails from here on, while the op's own stream reports only after the op's time
	 * (--sim-delay), as a GPU's other streams may see a faulting kernel's trap before
	 * its own stream reports it. */
	if (e->device_lost)
		atomic_store(sim->lost, true);
	if (ns)
		sim_sleep(ns);
	sim_detect_races(sim, e);
	/* An injected device fault: the op runs in stream order and is checked like any
	 * other, but does not do its work, so what it would write keeps what it held, as
	 * after a kernel that faulted before its stores: a failure the core lost would
	 * show as wrong data too. Its stream's events report the error from now on. */
	if (e->device_fault || atomic_load(sim->lost)) {
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
	sim_detect_released(sim, e);
	worked = true;

done:
	/* Before `executed` and the completion: whoever learns the op complete finds them. */
	sim_times_put(sim, e->at, start, sim_clock_ns());
	atomic_store(&st->executed, e->at.seq);
	/* After `executed`: a client that reads its word and reuses the range at once is
	 * ordered after this copy in the staging shadow too. */
	if (worked && e->kind == SEQ_OP_D2H)
		backend_done_word(p->done_word, p->done_tag, p->done_written);
	if (atomic_load(&st->waiters)) {
		pthread_mutex_lock(&st->mu);
		pthread_cond_broadcast(&st->progress);
		pthread_mutex_unlock(&st->mu);
	}
}

static void sim_entries_free(struct sim_entry *e);

/* Under mu: hand the run batch (n entries, ending at last) back for reuse, up to
 * SIM_SPARE_MAX spare entries; returns the entries past that, for the caller to free. */
static struct sim_entry *sim_spare_keep(
	struct sim_stream *st, struct sim_entry *batch, struct sim_entry *last, unsigned n)
{
	unsigned room = st->nspare < SIM_SPARE_MAX ? SIM_SPARE_MAX - st->nspare : 0;
	struct sim_entry *rest = NULL;

	if (room == 0)
		return batch;
	if (n > room) {
		last = batch;
		for (unsigned i = 1; i < room; i++)
			last = last->next;
		rest = last->next;
		n = room;
	}
	last->next = st->spare;
	st->spare = batch;
	st->nspare += n;
	return rest;
}

static void *sim_worker(void *arg)
{
	struct sim_stream *st = arg;
	struct sim *sim = st->sim;

	pthread_mutex_lock(&st->mu);
	for (;;) {
		struct sim_entry *batch, *last = NULL;
		unsigned n = 0;

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
				if (!atomic_load(&sim->cancelled))
					sim_wait_for(sim, e->at);
				break;
			case SIM_ENTRY_RECORD:
				if (atomic_load(sim->lost))
					st->fault = -EIO;
				sim_stream_report(st, e->at, st->fault);
				break;
			}
			last = e;
			n++;
		}
		pthread_mutex_lock(&st->mu);
		batch = sim_spare_keep(st, batch, last, n);
		if (batch) {
			/* Past what is kept: freed off the lock (only after a burst). */
			pthread_mutex_unlock(&st->mu);
			sim_entries_free(batch);
			pthread_mutex_lock(&st->mu);
		}
	}
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

/* Set up layout's streams (sim->nstreams of them) and start their workers. On failure,
 * some workers may be running: sim_streams_stop ends them (every stream's locks are set
 * up by then). */
int sim_streams_start(struct sim *sim, const enum seq_stream_kind *kinds)
{
	int r;

	for (unsigned i = 0; i < sim->nstreams; i++) {
		struct sim_stream *st = &sim->streams[i];
		uint64_t seed = sim->cfg.seed ^ (0x5eedull * (i + 1));

		st->sim = sim;
		st->kind = kinds[i];
		st->rng = sim_splitmix(&seed);
		pthread_mutex_init(&st->mu, NULL);
		pthread_cond_init(&st->work, NULL);
		pthread_cond_init(&st->progress, NULL);
	}
	for (unsigned i = 0; i < sim->nstreams; i++) {
		struct sim_stream *st = &sim->streams[i];

		r = -pthread_create(&st->thread, NULL, sim_worker, st);
		if (r < 0)
			return r;
		st->started = true;
	}
	return 0;
}

/* The op a worker runs (its delay models the device running it) runs to its end; every
 * later one is skipped as its worker reaches it. Workers asleep waiting for another
 * stream's progress are woken to skip theirs. */
void sim_cancel(void *ctx)
{
	struct sim *sim = ctx;

	atomic_store(&sim->cancelled, true);
	for (unsigned i = 0; i < sim->nstreams; i++) {
		struct sim_stream *st = &sim->streams[i];

		if (!st->started)
			continue;
		pthread_mutex_lock(&st->mu);
		pthread_cond_broadcast(&st->progress);
		pthread_mutex_unlock(&st->mu);
	}
}

static void sim_entries_free(struct sim_entry *e)
{
	while (e) {
		struct sim_entry *next = e->next;

		free(e);
		e = next;
	}
}

void sim_streams_stop(struct sim *sim)
{
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
		word_notes_finish(&st->notes);
		pthread_cond_destroy(&st->progress);
		pthread_cond_destroy(&st->work);
		pthread_mutex_destroy(&st->mu);
	}
}
