/* The device timeline (sseqd --device-timeline): the GPU's own start and end of every
 * launched op, from the timing events the audit table keeps around each launch, mapped
 * onto CLOCK_MONOTONIC through an anchor: an event recorded on an idle stream of its own
 * whose host time is measured. An anchor thread takes a new one every second, since
 * hipEventElapsedTime is float milliseconds (sub-microsecond only within a few seconds)
 * and the two clocks drift apart by some parts per million.
 *
 * The mapping is continuous and increasing: a new anchor takes the host time the old
 * mapping gives it, and the measured offset is slewed away over the next period by
 * the slope, so no two ops swap order at a re-anchor. Only an offset over
 * HIP_TL_STEP_NS (the first anchor after a stall, say) steps the mapping. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <sys/prctl.h>

#include "hip-internal.h"
#include "log.h"

/* How often the anchor is taken again. */
#define HIP_TL_PERIOD_NS 1000000000ll
/* Tries per anchor: the one whose record was seen complete soonest is kept. */
#define HIP_TL_TRIES 5
/* How long one try may wait for its record (a device busy on every queue). */
#define HIP_TL_TRY_NS 10000000ll
/* A measurement wider than this (twice) only carries the mapping over. */
#define HIP_TL_TRUST_NS 100000ull
/* An offset beyond this is stepped, not slewed. */
#define HIP_TL_STEP_NS 1000000ll
/* The slope stays within this of 1 (200 ppm): clocks drift by far less. */
#define HIP_TL_SLOPE_MAX 2e-4

/* Without libm: nearest integer, magnitude, clamp. */
static int64_t hip_tl_round(double x)
{
	return (int64_t)(x < 0 ? x - 0.5 : x + 0.5);
}

static double hip_tl_abs(double x)
{
	return x < 0 ? -x : x;
}

static double hip_tl_clamp(double x, double lo, double hi)
{
	return x < lo ? lo : x > hi ? hi : x;
}

static uint64_t hip_tl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* a to b in ns on the device's clock (either order), from float milliseconds. */
static int hip_tl_elapsed(hipEvent_t a, hipEvent_t b, double *ns)
{
	float ms = 0, back = 0;
	hipError_t e = hipEventElapsedTime(&ms, a, b);
	int r;

	if (e != hipSuccess) {
		r = hip__errno(e);
		assert(r < 0); /* a failure never translates to 0: *ns stays unset */
		return r;
	}
	/* An interval that ends before it starts: negative, or clamped to 0 by some
	 * runtimes, so asked the other way round too. */
	if (ms <= 0 && hipEventElapsedTime(&back, b, a) == hipSuccess && back > 0)
		ms = -back;
	*ns = (double)ms * 1e6;
	return 0;
}

/* One measurement: `ev` recorded on the anchor stream and seen complete, its device time
 * somewhere in [t0, t1] on the host clock. Spins on hipEventQuery, not a blocking wait,
 * so t1 follows the completion within a query's time. */
static int hip_tl_try(struct hip_timeline *tl, hipEvent_t ev, uint64_t *t0, uint64_t *t1)
{
	hipError_t e;

	*t0 = hip_tl_now();
	e = hipEventRecord(ev, tl->stream);
	if (e == hipSuccess)
		while ((e = hipEventQuery(ev)) == hipErrorNotReady) {
			if (hip_tl_now() - *t0 > HIP_TL_TRY_NS) {
				e = hipEventSynchronize(ev);
				break;
			}
			hip__cpu_relax();
		}
	*t1 = hip_tl_now();
	return e == hipSuccess ? 0 : hip__errno(e);
}

/* A measured anchor in tl->best: the tightest of HIP_TL_TRIES tries, its host time the
 * middle of its window, *half the half-width (the measurement's error bound). */
static int hip_tl_measure(struct hip_timeline *tl, uint64_t *host, uint64_t *half)
{
	uint64_t width = UINT64_MAX;
	int r = 0;

	for (unsigned i = 0; i < HIP_TL_TRIES; i++) {
		uint64_t t0, t1;
		hipEvent_t swap;

		r = hip_tl_try(tl, tl->trial, &t0, &t1);
		if (r < 0)
			return r;
		if (t1 - t0 >= width)
			continue;
		width = t1 - t0;
		*host = t0 + width / 2;
		swap = tl->best;
		tl->best = tl->trial;
		tl->trial = swap;
	}
	*half = (width + 1) / 2;
	return r;
}

/* Take an anchor and make it current: the first one as measured; later ones continuous
 * with the current mapping, the slope aimed to remove the measured offset by the next
 * anchor. A measurement too wide to trust (the anchor's record queued behind busy work)
 * only carries the mapping over to the fresh event, for the float's resolution. */
static int hip_tl_anchor(struct hip *h)
{
	struct hip_timeline *tl = &h->tl;
	uint64_t meas = 0, half = 0, host = 0, err = atomic_load(&tl->error_ns);
	double dd = 0, slope = 1.0, off = 0;
	bool step, trusted;
	hipEvent_t old;
	int r = hip_tl_measure(tl, &meas, &half);

	if (r < 0)
		return r;
	trusted = half <= HIP_TL_TRUST_NS;
	/* tl->cur changes only here, on this thread (or at start, before it runs). */
	step = !tl->anchored || hip_tl_elapsed(tl->cur, tl->best, &dd) < 0 || dd <= 0;
	if (!step) {
		const double predicted = (double)tl->host_ns + dd * tl->slope;

		host = (uint64_t)hip_tl_round(predicted);
		off = (double)meas - predicted;
		if (!trusted) {
			slope = tl->rate;
		} else if (hip_tl_abs(off) > HIP_TL_STEP_NS) {
			step = true;
		} else {
			/* The clocks' rate, averaged over anchors, then the offset on top. */
			const double rate = ((double)meas - (double)tl->meas_ns) / dd;

			if (tl->meas_ok && hip_tl_abs(rate - 1.0) < HIP_TL_SLOPE_MAX)
				tl->rate += (rate - tl->rate) / 8;
			slope = tl->rate + off / (double)HIP_TL_PERIOD_NS;
			slope = hip_tl_clamp(slope, 1.0 - HIP_TL_SLOPE_MAX, 1.0 + HIP_TL_SLOPE_MAX);
			err = half + (uint64_t)hip_tl_abs(off);
		}
	}
	if (step) {
		if (tl->anchored)
			log_info("hip",
				"device timeline: the mapping was %.1f us off the host clock: "
				"stepped",
				off / 1e3);
		host = meas;
		slope = tl->rate = 1.0;
		err = half;
		trusted = true; /* nothing better to go by */
	}
	log_debug("hip",
		"device timeline: anchored within +-%.1f us%s; the old mapping was %.1f us off; "
		"rate %+.2f ppm",
		(double)half / 1e3, trusted ? "" : " (too wide: mapping carried over)", off / 1e3,
		(tl->rate - 1.0) * 1e6);
	pthread_mutex_lock(&tl->mu);
	old = tl->cur;
	tl->cur = tl->best;
	tl->best = old;
	tl->host_ns = host;
	tl->slope = slope;
	atomic_store(&tl->error_ns, err); /* with the mapping it bounds */
	tl->anchored = true;
	pthread_mutex_unlock(&tl->mu);
	/* The rate is measured between anchors whose host times were measured well. */
	tl->meas_ns = meas;
	tl->meas_ok = trusted;
	return 0;
}

static void *hip_tl_thread(void *arg)
{
	struct hip *h = arg;
	struct hip_timeline *tl = &h->tl;
	bool warned = false;

	hipSetDevice(h->device);
	prctl(PR_SET_NAME, "sseq-anchor");
	pthread_mutex_lock(&tl->mu);
	for (;;) {
		struct timespec until;
		int r;

		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += HIP_TL_PERIOD_NS / 1000000000ll;
		while (!tl->stop && pthread_cond_timedwait(&tl->cond, &tl->mu, &until) != ETIMEDOUT)
			;
		if (tl->stop)
			break;
		pthread_mutex_unlock(&tl->mu);
		/* After a device fault every call fails: the old anchor stays, op_times
		 * finds the ops' events failed, and a reset brings a new one. */
		r = hip_tl_anchor(h);
		if (r < 0 && !warned)
			log_info("hip", "device timeline: cannot anchor: %s", strerror(-r));
		warned |= r < 0;
		pthread_mutex_lock(&tl->mu);
	}
	pthread_mutex_unlock(&tl->mu);
	return NULL;
}

/* At bring-up: the anchor stream and events, the first anchor (so the first ops are
 * timed), and the thread that keeps it fresh. What was made is left for stop. */
int hip__timeline_start(struct hip *h)
{
	struct hip_timeline *tl = &h->tl;
	pthread_condattr_t ca;
	hipError_t e;
	int r;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&tl->mu, NULL);
	pthread_cond_init(&tl->cond, &ca);
	pthread_condattr_destroy(&ca);
	tl->made = true;
	tl->rate = 1.0;
	e = hipStreamCreateWithFlags(&tl->stream, hipStreamNonBlocking);
	if (e == hipSuccess)
		e = hipEventCreateWithFlags(&tl->cur, hipEventDefault);
	if (e == hipSuccess)
		e = hipEventCreateWithFlags(&tl->best, hipEventDefault);
	if (e == hipSuccess)
		e = hipEventCreateWithFlags(&tl->trial, hipEventDefault);
	if (e != hipSuccess)
		return hip__fail(e, "hipEventCreateWithFlags", "device timeline anchor",
			(struct seq_point){0, 0});
	r = hip_tl_anchor(h);
	if (r < 0)
		return r;
	r = -pthread_create(&tl->thread, NULL, hip_tl_thread, h);
	if (r < 0)
		return r;
	tl->started = true;
	return 0;
}

/* At teardown, the device idle: the thread joined, its stream and events gone. */
void hip__timeline_stop(struct hip *h)
{
	struct hip_timeline *tl = &h->tl;

	if (!tl->made)
		return;
	if (tl->started) {
		pthread_mutex_lock(&tl->mu);
		tl->stop = true;
		pthread_cond_signal(&tl->cond);
		pthread_mutex_unlock(&tl->mu);
		pthread_join(tl->thread, NULL);
		tl->started = false;
	}
	if (tl->trial)
		hipEventDestroy(tl->trial);
	if (tl->best)
		hipEventDestroy(tl->best);
	if (tl->cur)
		hipEventDestroy(tl->cur);
	if (tl->stream)
		hipStreamDestroy(tl->stream);
	pthread_cond_destroy(&tl->cond);
	pthread_mutex_destroy(&tl->mu);
	tl->made = false;
}

/* ns on the host clock for a complete timing event, under tl->mu. */
static int hip_tl_map(const struct hip_timeline *tl, hipEvent_t ev, uint64_t *ns)
{
	double dd;
	int r = hip_tl_elapsed(tl->cur, ev, &dd);

	if (r < 0)
		return r;
	*ns = (uint64_t)((int64_t)tl->host_ns + hip_tl_round(dd * tl->slope));
	return 0;
}

/* backend_ops.op_times. The op's completion was reported, so both its events are
 * complete (the end precedes the reported record on its in-order stream) and the
 * elapsed-time calls only read them. The entry lives in the audit table until the core
 * retires the point, which it does only after asking. Start and end are both mapped
 * through the anchor (not start plus the op's own elapsed time) so that float rounding
 * keeps every order: start <= end, and one op's end <= the next op's start. */
int hip__op_times(
	void *ctx, struct seq_point at, uint64_t *start_ns, uint64_t *end_ns, uint64_t *error_ns)
{
	struct hip *h = ctx;
	struct hip_timeline *tl = &h->tl;
	const struct hip_audit_op *a;
	uint64_t s = 0, e = 0, err = 0;
	int r;

	/* Not made: a reset whose bring-up failed (the table is empty then too). */
	if (!h->cfg.device_timeline || !tl->made || at.stream >= h->nstreams)
		return -ENOENT;
	a = hip__audit_lookup(&h->streams[at.stream], at.seq);
	if (!a || !atomic_load_explicit(&a->settled, memory_order_acquire) || a->bad)
		return -ENOENT;
	pthread_mutex_lock(&tl->mu);
	r = tl->anchored ? hip_tl_map(tl, a->start, &s) : -ENOENT;
	if (r == 0)
		r = hip_tl_map(tl, a->end, &e);
	err = atomic_load(&tl->error_ns);
	pthread_mutex_unlock(&tl->mu);
	if (r < 0 || e < s)
		return -ENOENT;
	*start_ns = s;
	*end_ns = e;
	*error_ns = err;
	return 0;
}

uint64_t hip_timeline_error_ns(void *ctx)
{
	struct hip *h = ctx;

	return h->cfg.device_timeline ? atomic_load(&h->tl.error_ns) : 0;
}
