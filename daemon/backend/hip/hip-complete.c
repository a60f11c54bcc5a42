/* Completion for the hip backend: one thread per stream waits for the stream's recorded
 * events in order and reports each point reached (or the fault it hit) to the core
 * to the completion queue. */
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
 * along (*x becomes the newest of them), and all those taken count as reported. */
static void hip_completer_take(struct hip_stream *st, struct hip_event_ent *x, int status)
{
	size_t taken = 1;

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
	st->nreported += taken;
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
		int status;

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
		status = e == hipSuccess ? x.status : hip__errno(e);
		pthread_mutex_lock(&st->mu);
		hip_completer_take(st, &x, status);
		pthread_mutex_unlock(&st->mu);

		if (e != hipSuccess)
			hip_completer_fault(h, st, x.seq, e, status);
		cq_push(h->cq, (struct seq_point){st->index, x.seq}, status);
		pthread_mutex_lock(&st->mu);
	}
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

int hip__complete_start(struct hip *h)
{
	for (unsigned i = 0; i < h->nstreams; i++) {
		struct hip_stream *st = &h->streams[i];
		int r = -pthread_create(&st->thread, NULL, hip_completer, st);

		if (r < 0)
			return r;
		st->started = true;
	}
	return 0;
}

/* Tells every completion thread to stop once its stream has nothing left to report;
 * hip_destroy joins each as it finishes the stream. */
void hip__complete_stop(struct hip *h)
{
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
