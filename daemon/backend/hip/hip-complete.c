/* Completion for the hip backend: each stream's recorded events, in order, reported to
 * the completion queue as points reached (or with the fault they hit).
 *
 * By default one thread, the watcher, looks after every stream: it asks each stream's
 * oldest unreported event whether it completed (hipEventQuery: a read of memory the GPU
 * writes, a microsecond), reports what did, and waits between rounds without holding a
 * core that someone else needs: it spins only for a short while after a record or a
 * completion (a short copy completes within microseconds) and only while a core is free
 * (spin.h), naps in proportion to how long the oldest wait has lasted, and sleeps on a
 * condition when nothing is outstanding. A thread per stream in hipEventSynchronize, the
 * older way (completion sync), lets CUDA's default scheduling spin a core for every
 * stream with work: with many clients those spinners outnumber the cores and every
 * hand-off on the round trip waits for a scheduler slice. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <time.h>

#include "hip-internal.h"
#include "log.h"
#include "spin.h"

/* Polling: a few queries back to back (1-2 us each) catch short ops; then sleep. */
#define HIP_POLL_SPINS 16
#define HIP_POLL_SLEEP_NS 20000

hipError_t hip__event_poll(hipEvent_t ev)
{
	const struct timespec nap = {0, HIP_POLL_SLEEP_NS};

	for (unsigned i = 0;; i++) {
		hipError_t e = hipEventQuery(ev);

		if (e != hipErrorNotReady)
			return e;
		if (i >= HIP_POLL_SPINS)
			nanosleep(&nap, NULL);
	}
}

/* With st->mu held, until there is an unreported event or the stream stops. */
static void hip_completer_idle(struct hip_stream *st)
{
	/* Work tends to come in bursts: look again for a short while before sleeping,
	 * since a futex wake-up costs more than the copy a latency-bound client waits
	 * for. */
	if (st->nreported == st->nsubmitted && !st->stop) {
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			pthread_mutex_unlock(&st->mu);
			for (int i = 0; i < 64; i++)
				hip__cpu_relax();
			clock_gettime(CLOCK_MONOTONIC, &t);
			pthread_mutex_lock(&st->mu);
		} while (st->nreported == st->nsubmitted && !st->stop &&
			(t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) <
				HIP_IDLE_SPIN_NS);
	}
	while (st->nreported == st->nsubmitted && !st->stop) {
		st->sleeping = true;
		pthread_cond_wait(&st->cond, &st->mu);
		st->sleeping = false;
	}
}

/* With st->mu held, *x reached with `status`: the later events already complete come
 * along (*x becomes the newest of them), and all those taken count as reported. Their
 * small-copy pool slots, one list: the caller finishes them. */
static int32_t hip_completer_take(
	struct hip_stream *st, struct hip_event_ent *x, int status, struct done_wakes *wakes)
{
	struct hip *h = st->h;
	size_t taken = 1;
	int32_t list = 0, tail = 0;

	while (status == 0 && st->nreported + taken < st->nsubmitted) {
		struct hip_event_ent next = *hip__ring_at(st, st->nreported + taken);

		if (next.status)
			break; /* reported on its own, with its error */
		pthread_mutex_unlock(&st->mu);
		if (hipEventQuery(next.ev->ev) != hipSuccess) {
			pthread_mutex_lock(&st->mu);
			break;
		}
		*x = next;
		taken++;
		pthread_mutex_lock(&st->mu);
	}
	/* In launch order: two downloads into one range finish as the stream ran them. */
	for (size_t i = 0; i < taken; i++) {
		struct hip_event_ent *t = hip__ring_at(st, st->nreported + i);

		if (!t->pool)
			continue;
		if (tail)
			h->pool_slots[tail - 1].next = t->pool;
		else
			list = t->pool;
		for (tail = t->pool; h->pool_slots[tail - 1].next;)
			tail = h->pool_slots[tail - 1].next;
		t->pool = 0;
	}
	st->nreported += taken;
	/* Before the report: the loop, handling it, finds the tags in place. */
	word_notes_report(&st->notes, x->seq, status, wakes);
	return list;
}

int hip__point_word(
	void *ctx, struct seq_point at, _Atomic uint64_t *word, uint64_t tag, _Atomic bool *written)
{
	struct hip *h = ctx;

	if (at.stream >= h->nstreams)
		return -EINVAL;
	return word_notes_add_locked(&h->streams[at.stream].mu, &h->streams[at.stream].notes,
		at.seq, word, tag, written);
}

/* A device fault: this point and, through the core, all that depends on it fail with it
 * (I9); so does every later launch. */
static void hip_completer_fault(
	struct hip *h, struct hip_stream *st, uint64_t seq, hipError_t e, int status)
{
	int none = 0;

	log_err("hip",
		"stream %" PRIu32 ": event at %" PRIu32 ":%" PRIu64 " completed with %s (%s)",
		st->index, st->index, seq, hipGetErrorName(e), hipGetErrorString(e));
	if (status == -EIO)
		atomic_compare_exchange_strong(&h->device_error, &none, status);
}

/* x, st's oldest unreported event, reached with e: it and the later events already
 * complete count as reported, a fault is logged, and the newest of them goes to the
 * completion queue. Clients asleep on a done word it wrote are woken last (done_wakes):
 * one woken first may take this thread's core before the report is handed on. */
static void hip_completer_report(
	struct hip *h, struct hip_stream *st, struct hip_event_ent x, hipError_t e)
{
	const int status = e == hipSuccess ? x.status : hip__errno(e);
	struct done_wakes wakes; /* only the first wakes.n are read */
	int32_t pool;

	wakes.n = 0;
	pthread_mutex_lock(&st->mu);
	pool = hip_completer_take(st, &x, status, &wakes);
	pthread_mutex_unlock(&st->mu);
	if (pool)
		hip__pool_finish(h, pool, status, &wakes);
	if (e != hipSuccess)
		hip_completer_fault(h, st, x.seq, e, status);
	cq_push(h->cq, (struct seq_point){st->index, x.seq}, status);
	/* The words may be unmapped by now (the loop took the report and freed the op):
	 * a wake on such an address fails harmlessly, one on a reused address wakes a
	 * sleeper that looks at its word again. */
	done_wakes_flush(&wakes);
}

/* Waits for the oldest unreported event, then takes every later one already complete
 * along, and reports the newest: on an in-order stream that covers them all. */
static void *hip_completer(void *arg)
{
	struct hip_stream *st = arg;
	struct hip *h = st->h;
	const bool poll = h->cfg.completion == HIP_COMPLETION_POLL;
	char name[16];

	snprintf(name, sizeof(name), "sseq-done/%u", st->index);
	prctl(PR_SET_NAME, name); /* top -H, perf: which thread is whose */
	hipSetDevice(h->device);
	if (poll)
		prctl(PR_SET_TIMERSLACK, 1000ul); /* the naps are short; keep them so */
	pthread_mutex_lock(&st->mu);
	for (;;) {
		struct hip_event_ent x;
		hipError_t e;

		hip_completer_idle(st);
		if (st->nreported == st->nsubmitted)
			break;
		x = *hip__ring_at(st, st->nreported);
		pthread_mutex_unlock(&st->mu);

		/* An event whose record failed marks nothing: wait for the stream instead, so
		 * that what ran before is done before the core hears of the failure. */
		if (x.unrecorded)
			e = hipStreamSynchronize(st->stream);
		else
			e = poll ? hip__event_poll(x.ev->ev) : hipEventSynchronize(x.ev->ev);
		hip_completer_report(h, st, x, e);
		pthread_mutex_lock(&st->mu);
	}
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

/* ---- the watcher: one thread for every stream ---- */

/* Report st's oldest unreported event if it completed (with the later ones already
 * complete): whether it did. *pending is set when st has one outstanding. */
static bool hip_watch_stream(struct hip *h, struct hip_stream *st, bool *pending)
{
	struct hip_event_ent x;
	hipError_t e;

	pthread_mutex_lock(&st->mu);
	if (st->nreported == st->nsubmitted) {
		pthread_mutex_unlock(&st->mu);
		return false;
	}
	x = *hip__ring_at(st, st->nreported);
	pthread_mutex_unlock(&st->mu);
	*pending = true;
	/* An event whose record failed marks nothing: the stream's own state says when
	 * what ran before is done, so the core hears of the failure after it. */
	e = x.unrecorded ? hipStreamQuery(st->stream) : hipEventQuery(x.ev->ev);
	if (e == hipErrorNotReady)
		return false;
	hip_completer_report(h, st, x, e);
	return true;
}

/* Nothing outstanding: sleep until a record runs (watch_gen moves from gen) or the
 * backend stops. Whether to stop. */
static bool hip_watch_sleep(struct hip *h, uint64_t gen)
{
	bool stop;

	pthread_mutex_lock(&h->watch_mu);
	atomic_fetch_add_explicit(&h->watch_sleeps, 1, memory_order_relaxed);
	/* Sequentially consistent, against hip__complete_kick's increment of watch_gen and
	 * load of watch_sleeping: one of the two sees the other. */
	atomic_store(&h->watch_sleeping, true);
	while (atomic_load(&h->watch_gen) == gen && !h->watch_stop)
		pthread_cond_wait(&h->watch_cond, &h->watch_mu);
	atomic_store(&h->watch_sleeping, false);
	stop = h->watch_stop && atomic_load(&h->watch_gen) == gen;
	pthread_mutex_unlock(&h->watch_mu);
	return stop;
}

/* Something outstanding and nothing completed in the last round: look again at once
 * (spin) within HIP_WATCH_SPIN_NS of the last record or completion while a core is free,
 * else nap for a 128th of the wait so far (bounded). */
static void hip_watch_pause(const struct hip *h, uint64_t since_ns, uint64_t now_ns)
{
	const uint64_t waited = now_ns - since_ns;
	struct timespec nap = {0, 0};
	uint64_t ns;

	if (waited < (uint64_t)HIP_WATCH_SPIN_NS && spin_core_free()) {
		for (int i = 0; i < 32; i++)
			hip__cpu_relax();
		return;
	}
	ns = waited / 128;
	if (ns < h->watch_nap_min_ns)
		ns = h->watch_nap_min_ns;
	if (ns > (uint64_t)HIP_WATCH_NAP_MAX_NS)
		ns = HIP_WATCH_NAP_MAX_NS;
	nap.tv_nsec = (long)ns;
	nanosleep(&nap, NULL);
}

/* The backend whose watcher had the latest record of the process (each loop has its own
 * backend and watcher), the one that may stay awake longer (HIP_WATCH_LONG_SPIN_NS). */
static hip_latest hip_watch_last;

/* Whether an idle watcher, its last record or completion `idle_ns` ago, looks again
 * rather than sleeps: within HIP_WATCH_SPIN_NS, or within its long spin while its backend
 * had the latest record of all; only while a core is free. */
static bool hip_watch_stays(const struct hip *h, uint64_t idle_ns)
{
	if (idle_ns >= (uint64_t)HIP_WATCH_SPIN_NS &&
		(idle_ns >= h->watch_long_spin_ns || !hip__latest_is(&hip_watch_last, h)))
		return false;
	return spin_core_free();
}

static void *hip_watcher(void *arg)
{
	struct hip *h = arg;
	uint64_t seen = atomic_load(&h->watch_gen), since = spin_now_ns();

	prctl(PR_SET_NAME, "sseq-done"); /* top -H, perf: which thread is whose */
	prctl(PR_SET_TIMERSLACK, 1000ul); /* the naps are short; keep them so */
	hipSetDevice(h->device);
	for (;;) {
		const uint64_t gen = atomic_load(&h->watch_gen);
		bool pending = false, progress = false;

		for (unsigned i = 0; i < h->nstreams; i++)
			progress |= hip_watch_stream(h, &h->streams[i], &pending);
		if (progress || gen != seen) {
			/* A completion, or a record since the last round: more is likely soon. */
			seen = gen;
			since = spin_now_ns();
			continue;
		}
		if (!pending) {
			/* A client that just got its answer often sends the next request
			 * within microseconds: stay awake as after a record, since the
			 * futex wake-up on the next record would cost more than the op. */
			if (hip_watch_stays(h, spin_now_ns() - since)) {
				for (int i = 0; i < 32; i++)
					hip__cpu_relax();
				continue;
			}
			if (hip_watch_sleep(h, gen))
				break;
			since = spin_now_ns();
			continue;
		}
		hip_watch_pause(h, since, spin_now_ns());
	}
	return NULL;
}

void hip__complete_kick(struct hip *h, struct hip_stream *st)
{
	if (h->cfg.completion != HIP_COMPLETION_WATCH) {
		/* Only a sleeping thread needs the wake-up; a busy one finds the entry. */
		pthread_mutex_lock(&st->mu);
		if (st->sleeping)
			pthread_cond_signal(&st->cond);
		pthread_mutex_unlock(&st->mu);
		return;
	}
	hip__latest_note(&hip_watch_last, h);
	atomic_fetch_add(&h->watch_gen, 1);
	if (atomic_load(&h->watch_sleeping)) {
		pthread_mutex_lock(&h->watch_mu);
		pthread_cond_signal(&h->watch_cond);
		pthread_mutex_unlock(&h->watch_mu);
	}
}

int hip__complete_start(struct hip *h)
{
	if (h->cfg.completion == HIP_COMPLETION_WATCH) {
		int r = -pthread_create(&h->watcher, NULL, hip_watcher, h);

		if (r == 0)
			h->watcher_started = true;
		return r;
	}
	for (unsigned i = 0; i < h->nstreams; i++) {
		struct hip_stream *st = &h->streams[i];
		int r = -pthread_create(&st->thread, NULL, hip_completer, st);

		if (r < 0)
			return r;
		st->started = true;
	}
	return 0;
}

/* Tells every completion thread to stop once its streams have nothing left to report:
 * the watcher is joined here, a stream's own thread as hip_destroy finishes the stream. */
void hip__complete_stop(struct hip *h)
{
	if (h->watcher_started) {
		pthread_mutex_lock(&h->watch_mu);
		h->watch_stop = true;
		pthread_cond_signal(&h->watch_cond);
		pthread_mutex_unlock(&h->watch_mu);
		pthread_join(h->watcher, NULL);
		h->watcher_started = false;
	}
	for (unsigned i = 0; i < h->nstreams; i++) {
		struct hip_stream *st = &h->streams[i];

		if (!st->started)
			continue;
		pthread_mutex_lock(&st->mu);
		st->stop = true;
		pthread_cond_signal(&st->cond);
		pthread_mutex_unlock(&st->mu);
	}
}
