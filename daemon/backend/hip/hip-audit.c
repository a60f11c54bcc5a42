/* The GPU-timestamp audit (sseqd --audit): timing events around every launch, and an
 * audit thread that checks on the GPU's own clock that each operation started after the
 * operations it depends on finished. A violation is a missing wait, reported as a finding.
 * The device timeline (hip-timeline.c) reads the same timestamps from the same table. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <sys/prctl.h>

#include "hip-internal.h"
#include "log.h"

/* ---- audit: timestamps around every launch ---- */

void hip__audit_op_put(struct hip *h, struct hip_audit_op *a)
{
	if (!a || atomic_fetch_sub(&a->refs, 1) != 1)
		return;
	pthread_mutex_lock(&h->audit_mu);
	a->next_free = h->afree;
	h->afree = a;
	pthread_mutex_unlock(&h->audit_mu);
}

/* A spent op with its two timing events, or a new one. */
static struct hip_audit_op *hip_audit_op_get(struct hip *h)
{
	struct hip_audit_op *a;
	hipError_t e;

	pthread_mutex_lock(&h->audit_mu);
	a = h->afree;
	if (a)
		h->afree = a->next_free;
	pthread_mutex_unlock(&h->audit_mu);
	if (a)
		return a;
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	/* Timing on, whatever cfg.timing says: the audit is about the timestamps. */
	e = hipEventCreateWithFlags(&a->start, hipEventDefault);
	if (e == hipSuccess) {
		e = hipEventCreateWithFlags(&a->end, hipEventDefault);
		if (e != hipSuccess)
			hipEventDestroy(a->start);
	}
	if (e != hipSuccess) {
		free(a);
		return NULL;
	}
	return a;
}

static void hip_audit_op_destroy(struct hip_audit_op *a)
{
	hipEventDestroy(a->start);
	hipEventDestroy(a->end);
	free(a);
}

/* Timestamps are best effort: an op whose start or end cannot be recorded still runs, it
 * just goes unchecked, and the log says so once. */
void hip__audit_warn(struct hip *h, const char *why, hipError_t e)
{
	if (atomic_exchange(&h->audit_warned, true))
		return;
	log_warn("hip", "audit: %s (%s): some operations go unchecked", why,
		e == hipSuccess ? "out of memory" : hipGetErrorName(e));
}

/* The op's timestamps, with one reference for the launch command, which records them
 * around the op (the start after the waits the core enqueued). */
struct hip_audit_op *hip__audit_prepare(struct hip *h, struct seq_point at, const struct seq_op *op)
{
	const struct op_payload *p = op->payload;
	struct hip_audit_op *a = hip_audit_op_get(h);

	if (!a) {
		hip__audit_warn(h, "cannot create timing events", hipSuccess);
		return NULL;
	}
	atomic_store(&a->refs, 1);
	atomic_store(&a->settled, false);
	a->bad = false;
	a->at = at;
	if (!h->cfg.audit) /* the device timeline alone: no report names it */
		a->what[0] = '\0';
	else if (op->kind == SEQ_OP_EXEC)
		snprintf(a->what, sizeof(a->what), "kernel %s", hip__kernel_name(p));
	else
		snprintf(a->what, sizeof(a->what), "%s", seq_op_kind_name(op->kind));
	return a;
}

/* The entry for point seq of st: NULL when retired (known complete) or unrecorded. Loop
 * thread only. */
struct hip_audit_op *hip__audit_lookup(struct hip_stream *st, uint64_t seq)
{
	if (seq < st->afirst || seq - st->afirst >= st->acount)
		return NULL;
	return st->aops[(st->ahead + (seq - st->afirst)) % st->acap];
}

static int hip_audit_push(struct hip_stream *st, struct seq_point at, struct hip_audit_op *a)
{
	if (st->acount == 0)
		st->afirst = at.seq;
	if (at.seq != st->afirst + st->acount)
		return -EINVAL; /* launches are consecutive; anything else is a bug */
	if (st->acount == st->acap) {
		size_t cap = st->acap ? 2 * st->acap : 256;
		struct hip_audit_op **v = malloc(cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < st->acount; i++)
			v[i] = st->aops[(st->ahead + i) % st->acap];
		free(st->aops);
		st->aops = v;
		st->acap = cap;
		st->ahead = 0;
	}
	st->aops[(st->ahead + st->acount) % st->acap] = a;
	st->acount++;
	return 0;
}

/* On the loop thread, as the op is launched: its table entry (the audit's and the device
 * timeline's), and with --audit the checks against the newest producer on each other
 * stream that is not yet known complete, for the launch command to queue once the
 * timestamps are recorded. The core calls launch before it updates the buffers, so a
 * base's def and readers still name what this op must come after: the writer of
 * everything it touches (read after write, write after write) and, for what it writes,
 * the readers since (write after read). */
struct hip_audit_check *hip__audit_table(struct hip *h, struct hip_stream *st, struct seq_point at,
	const struct seq_op *op, struct hip_audit_op *a)
{
	struct hip_audit_check *checks = NULL, *last = NULL;
	uint64_t need[SEQ_MAX_STREAMS] = {0};
	const struct seq_buffer *need_buf[SEQ_MAX_STREAMS] = {0};
	bool need_war[SEQ_MAX_STREAMS] = {0};

	/* Keep the table consecutive even for an unchecked point. */
	if (hip_audit_push(st, at, a) < 0) {
		hip__audit_warn(h, "cannot grow the audit table", hipSuccess);
		return NULL;
	}
	if (!a)
		return NULL;
	atomic_fetch_add(&a->refs, 1); /* the table's */
	if (!h->cfg.audit)
		return NULL; /* timestamps for the device timeline only */
	for (unsigned i = 0; i < op->naccess; i++) {
		const struct seq_buffer *b = op->access[i].buf;

		if (!b)
			continue;
		b = b->base ? b->base : b;
		if (b->def.seq && b->def.stream != at.stream && b->def.stream < h->nstreams &&
			need[b->def.stream] < b->def.seq) {
			need[b->def.stream] = b->def.seq;
			need_buf[b->def.stream] = b;
			need_war[b->def.stream] = false;
		}
		if (!(op->access[i].mode & SEQ_WRITE))
			continue;
		for (uint32_t x = 0; x < h->nstreams; x++) {
			if (x == at.stream || need[x] >= b->readers[x])
				continue;
			need[x] = b->readers[x];
			need_buf[x] = b;
			need_war[x] = true;
		}
	}
	for (uint32_t x = 0; x < h->nstreams; x++) {
		struct hip_audit_op *prod;
		struct hip_audit_check *c;

		if (!need[x] || !(prod = hip__audit_lookup(&h->streams[x], need[x])))
			continue;
		c = malloc(sizeof(*c));
		if (!c) {
			hip__audit_warn(h, "cannot queue a check", hipSuccess);
			continue;
		}
		atomic_fetch_add(&a->refs, 1);
		atomic_fetch_add(&prod->refs, 1);
		atomic_fetch_add(&h->audit_queued, 1);
		*c = (struct hip_audit_check){
			a, prod, need_war[x], need_buf[x]->addr, need_buf[x]->size, NULL};
		if (last)
			last->next = c;
		else
			checks = c;
		last = c;
	}
	return checks;
}

/* A launch the inline path could not enqueue: its table entry goes again. */
void hip__audit_unpush(struct hip *h, struct hip_stream *st, struct seq_point at)
{
	if (!st->acount || st->afirst + st->acount - 1 != at.seq)
		return;
	st->acount--;
	hip__audit_op_put(h, st->aops[(st->ahead + st->acount) % st->acap]);
}

/* Hand a launch's checks to the audit thread once its timestamps are recorded (the
 * producers they name were queued earlier, perhaps to another submit thread: the audit
 * thread waits for each to settle); a bad op's are dropped. */
void hip__audit_queue(struct hip *h, struct hip_audit_op *a, struct hip_audit_check *checks)
{
	struct hip_audit_check *last = checks;

	if (!checks)
		return;
	if (!a || a->bad) {
		while (checks) {
			struct hip_audit_check *next = checks->next;

			hip__audit_op_put(h, checks->consumer);
			hip__audit_op_put(h, checks->producer);
			free(checks);
			atomic_fetch_add(&h->audit_done, 1);
			checks = next;
		}
		return;
	}
	while (last->next)
		last = last->next;
	pthread_mutex_lock(&h->audit_mu);
	if (h->aq_tail)
		h->aq_tail->next = checks;
	else
		h->aq_head = checks;
	h->aq_tail = last;
	pthread_cond_signal(&h->audit_cond);
	pthread_mutex_unlock(&h->audit_mu);
}

/* The core retired `through`: every point up to it on the stream is known complete. */
void hip__audit_retire(struct hip *h, struct hip_stream *st, uint64_t through)
{
	while (st->acount && st->afirst <= through) {
		hip__audit_op_put(h, st->aops[st->ahead]);
		st->ahead = (st->ahead + 1) % st->acap;
		st->acount--;
		st->afirst++;
	}
}

/* ---- the audit thread ---- */

/* Compare one consumer's start with its producer's end, both read off the GPU's clock.
 * A negative gap is a consumer that started before its producer finished: a missing
 * wait, whatever the data turned out to be. */
static void hip_audit_check_one(struct hip *h, const struct hip_audit_check *c)
{
	/* Never the runtime's synchronize unless asked for: it may spin a core. */
	const bool poll = h->cfg.completion != HIP_COMPLETION_SYNC;
	const struct hip_audit_op *con = c->consumer, *prod = c->producer;
	char what[320];
	float ms = 0;
	hipError_t e;

	e = poll ? hip__event_poll(con->start) : hipEventSynchronize(con->start);
	if (e == hipSuccess)
		e = poll ? hip__event_poll(prod->end) : hipEventSynchronize(prod->end);
	if (e == hipSuccess)
		e = hipEventElapsedTime(&ms, prod->end, con->start);
	if (e == hipSuccess && ms <= 0) {
		float back = 0;

		/* Measured the other way round too, whichever way a runtime reports an
		 * interval that ends before it starts (negative, or clamped to 0). */
		if (hipEventElapsedTime(&back, con->start, prod->end) == hipSuccess && back > 0)
			ms = -back;
	}
	if (e != hipSuccess) {
		/* A device fault: the completion threads report it; nothing to time. */
		log_debug("hip", "audit: %s at %" PRIu32 ":%" PRIu64 " not checked: %s", con->what,
			con->at.stream, con->at.seq, hipGetErrorName(e));
		return;
	}
	atomic_fetch_add(&h->audit_checks, 1);
	if (ms >= 0)
		return;
	if (c->war)
		snprintf(what, sizeof(what),
			"audit: %s at %" PRIu32 ":%" PRIu64 " started %.3f ms before its reader "
			"%" PRIu32 ":%" PRIu64 " (%s) finished (missing wait: it overwrites what "
			"that reads, buffer %#" PRIx64 ", %" PRIu64 " bytes)",
			con->what, con->at.stream, con->at.seq, -ms, prod->at.stream, prod->at.seq,
			prod->what, c->addr, c->size);
	else
		snprintf(what, sizeof(what),
			"audit: %s at %" PRIu32 ":%" PRIu64 " started %.3f ms before its producer "
			"%" PRIu32 ":%" PRIu64 " (%s) finished (missing wait, buffer %#" PRIx64
			", %" PRIu64 " bytes)",
			con->what, con->at.stream, con->at.seq, -ms, prod->at.stream, prod->at.seq,
			prod->what, c->addr, c->size);
	atomic_fetch_add(&h->audit_findings, 1);
	atomic_fetch_add(&h->findings, 1);
	if (h->finding)
		h->finding(h->finding_arg, what);
	else
		log_err("hip", "%s", what);
}

/* Checks in the order they were queued; it may block on one event at a time, which only
 * delays the audit, never the loop or the completion threads. */
static void *hip_auditor(void *arg)
{
	struct hip *h = arg;

	hipSetDevice(h->device);
	prctl(PR_SET_NAME, "sseq-audit");
	pthread_mutex_lock(&h->audit_mu);
	for (;;) {
		struct hip_audit_check *c;

		while (!h->aq_head && !h->audit_stop)
			pthread_cond_wait(&h->audit_cond, &h->audit_mu);
		if (!h->aq_head)
			break;
		c = h->aq_head;
		h->aq_head = c->next;
		if (!h->aq_head)
			h->aq_tail = NULL;
		pthread_mutex_unlock(&h->audit_mu);
		/* The consumer's thread queued the check; the producer's may not have run
		 * its launch yet (its timestamps would be an older op's). */
		while (!atomic_load_explicit(&c->producer->settled, memory_order_acquire))
			sched_yield();
		if (!c->consumer->bad && !c->producer->bad)
			hip_audit_check_one(h, c);
		hip__audit_op_put(h, c->consumer);
		hip__audit_op_put(h, c->producer);
		free(c);
		atomic_fetch_add(&h->audit_done, 1);
		pthread_mutex_lock(&h->audit_mu);
	}
	pthread_mutex_unlock(&h->audit_mu);
	return NULL;
}

int hip__audit_start(struct hip *h)
{
	int r = -pthread_create(&h->auditor, NULL, hip_auditor, h);

	if (r < 0)
		return r;
	h->auditor_started = true;
	return 0;
}

void hip__audit_stop(struct hip *h)
{
	if (h->auditor_started) {
		/* It finishes the queued checks first: the device is idle, so they are quick. */
		pthread_mutex_lock(&h->audit_mu);
		h->audit_stop = true;
		pthread_cond_signal(&h->audit_cond);
		pthread_mutex_unlock(&h->audit_mu);
		pthread_join(h->auditor, NULL);
	}
	if (h->cfg.audit)
		log_info("hip", "audit: %" PRIu64 " checks, %" PRIu64 " findings",
			atomic_load(&h->audit_checks), atomic_load(&h->audit_findings));
}

/* At destroy, once the streams let go of their table entries. */
void hip__audit_finish(struct hip *h)
{
	/* Checks never processed (the auditor did not start) still hold their ops. */
	while (h->aq_head) {
		struct hip_audit_check *c = h->aq_head;

		h->aq_head = c->next;
		hip__audit_op_put(h, c->consumer);
		hip__audit_op_put(h, c->producer);
		free(c);
	}
	while (h->afree) {
		struct hip_audit_op *a = h->afree;

		h->afree = a->next_free;
		hip_audit_op_destroy(a);
	}
	pthread_cond_destroy(&h->audit_cond);
	pthread_mutex_destroy(&h->audit_mu);
}

uint64_t hip__audit_findings(void *ctx)
{
	struct hip *h = ctx;

	return atomic_load(&h->audit_findings);
}

uint64_t hip_audit_checks(void *ctx, uint64_t *pending)
{
	struct hip *h = ctx;
	uint64_t done = atomic_load(&h->audit_done);

	if (pending)
		*pending = atomic_load(&h->audit_queued) - done;
	return atomic_load(&h->audit_checks);
}
