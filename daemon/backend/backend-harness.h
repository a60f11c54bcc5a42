/* What test-sim and test-hip share to drive a backend through the real core from the
 * test's thread, as sseqd's loop does: the completion queue the backend's threads push
 * to (woken by uv_async_send there, a condition variable here), and the ops. */
#ifndef SSEQ_TESTS_BACKEND_HARNESS_H
#define SSEQ_TESTS_BACKEND_HARNESS_H

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "cq.h"
#include "done-word.h"
#include "kernels.h"
#include "sequencer.h"
#include "verify.h"

/* Kernel arguments, as a launch's karg array spells them. */
#define BUF ((struct karg){.type = KARG_BUFFER})
#define F32(x) ((struct karg){.type = KARG_F32, .v.f32 = (x)})
#define U64(x) ((struct karg){.type = KARG_U64, .v.u64 = (x)})
#define I32(x) ((struct karg){.type = KARG_I32, .v.i32 = (x)})

/* The real completion queue (cq.c), with a wake hook that signals the test's thread
 * where sseqd's loop gets uv_async_send. */
struct harness_cq {
	struct cq q;
	struct verify *verify; /* hears each completion before the core, when there is one */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool woken;
};

static inline void harness_cq_wake(void *arg)
{
	struct harness_cq *h = arg;

	pthread_mutex_lock(&h->mu);
	h->woken = true;
	pthread_cond_signal(&h->cond);
	pthread_mutex_unlock(&h->mu);
}

static inline void harness_cq_init(struct harness_cq *h)
{
	*h = (struct harness_cq){0};
	cq_init(&h->q);
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cond, NULL);
	cq_set_wake(&h->q, harness_cq_wake, h);
}

static inline void harness_cq_destroy(struct harness_cq *h)
{
	cq_finish(&h->q);
	pthread_cond_destroy(&h->cond);
	pthread_mutex_destroy(&h->mu);
}

/* Everything queued so far (hand it back with cq_done); with `block`, first waits up to
 * `timeout_s` seconds for at least one. */
static inline struct cq_batch harness_cq_take(struct harness_cq *h, bool block, int timeout_s)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_s;
	for (;;) {
		struct cq_batch b = cq_take(&h->q);
		bool late = false;

		if (b.n || !block)
			return b;
		cq_done(&h->q, b);
		/* Empty: the next push wakes us (it finds the queue empty). */
		pthread_mutex_lock(&h->mu);
		while (!h->woken && !late)
			late = pthread_cond_timedwait(&h->cond, &h->mu, &until) == ETIMEDOUT;
		h->woken = false;
		pthread_mutex_unlock(&h->mu);
		if (late)
			return cq_take(&h->q);
	}
}

/* What a backend under test is given: the core's layout for scfg (NULL: the default) and
 * the harness's queue. */
static inline struct backend_env harness_env(struct seq_layout *layout,
	const struct seq_config *scfg, struct harness_cq *h, backend_finding_fn finding)
{
	const struct seq_config none = {0};

	ck_assert_int_eq(seq_layout_init(layout, scfg ? scfg : &none), 0);
	return (struct backend_env){.layout = layout, .cq = &h->q, .finding = finding};
}

/* Hand queued completions to `seq` (when there is one); with `block`, wait (bounded) for
 * at least one. Returns how many. */
static inline size_t cq_drain(struct harness_cq *q, struct seq *seq, bool block)
{
	struct cq_batch b = harness_cq_take(q, block, 20);
	size_t n = b.n;

	if (block)
		ck_assert_msg(n > 0, "no completion within 20 s");
	for (size_t i = 0; i < n; i++) {
		if (q->verify)
			verify_complete(q->verify, b.ents[i].p);
		if (seq)
			seq_complete(seq, b.ents[i].p, b.ents[i].status);
	}
	cq_done(&q->q, b);
	return n;
}

/* Flush and hand completions to `seq` until its done callbacks, counted in `*dones`,
 * reach `want`. */
static inline void harness_wait_dones(
	struct seq *seq, struct harness_cq *q, const uint64_t *dones, uint64_t want)
{
	while (*dones < want) {
		seq_flush(seq);
		cq_drain(q, seq, true);
	}
}

/* Until buf's producer has completed. */
static inline void harness_await(
	struct seq *seq, struct harness_cq *q, const uint64_t *dones, struct seq_buffer *buf)
{
	uint64_t want = *dones + 1;
	int r = seq_await(seq, buf, 1, NULL);

	ck_assert_int_ge(r, 0);
	if (r == 1)
		return;
	harness_wait_dones(seq, q, dones, want);
}

/* An H2D (into buf) or D2H (out of it) copy of len bytes through the core. */
static inline int harness_copy(
	struct seq *seq, enum seq_op_kind kind, struct seq_buffer *buf, void *host, uint64_t len)
{
	struct op_payload p = {.host = host, .length = len};
	struct seq_op op = {
		.kind = kind,
		.naccess = 1,
		.access = {{buf, kind == SEQ_OP_H2D ? SEQ_WRITE : SEQ_READ}},
		.payload = &p,
	};

	return seq_submit(seq, &op, NULL);
}

static inline int harness_d2d(
	struct seq *seq, struct seq_buffer *src, struct seq_buffer *dst, uint64_t len)
{
	struct op_payload p = {.length = len};
	struct seq_op op = {
		.kind = SEQ_OP_D2D,
		.naccess = 2,
		.access = {{src, SEQ_READ}, {dst, SEQ_WRITE}},
		.payload = &p,
	};

	return seq_submit(seq, &op, NULL);
}

/* Record (s, n) on be's device directly (no core) and wait for that completion alone;
 * the status it came back with. */
static inline int harness_record_wait(
	struct backend *be, struct harness_cq *q, uint32_t s, uint64_t n)
{
	struct cq_batch b;
	int r;

	ck_assert_int_eq(be->ops->dev.record(be->ctx, (struct seq_point){s, n}), 0);
	b = harness_cq_take(q, true, 20);
	ck_assert_uint_eq(b.n, 1);
	ck_assert_uint_eq(b.ents[0].p.stream, s);
	ck_assert_uint_eq(b.ents[0].p.seq, n);
	r = b.ents[0].status;
	cq_done(&q->q, b);
	return r;
}

/* A float pattern that differs from element to element and from seed to seed. */
static inline void fill_pattern(float *v, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (float)((i * 2654435761u + seed) % 1000003u) * 0.001f;
}

/* A client's one futex sleep on a done word marked sleeping (done-word.h), for up to 5 s,
 * on a thread of its own (harness_sleep_once): `tid` says which, `woke` when it returned
 * and `after` (may be NULL) is called then. */
struct harness_sleep {
	_Atomic uint64_t word;
	atomic_int tid;
	atomic_bool woke;
	void (*after)(struct harness_sleep *o);
	void *arg;
};

static inline void *harness_sleep_once(void *arg)
{
	struct harness_sleep *o = arg;

	atomic_store(&o->tid, (int)syscall(SYS_gettid));
	done_word_sleep(&o->word, 5000000000L);
	if (o->after)
		o->after(o);
	atomic_store(&o->woke, true);
	return NULL;
}

/* Whether thread tid of this process is asleep (state S in its stat). */
static inline bool harness_thread_asleep(int tid)
{
	char path[64], buf[256], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] == 'S';
}

/* Until thread tid sleeps (at most 1 s): whether it does. */
static inline bool harness_await_asleep(const atomic_int *tid)
{
	for (int i = 0; i < 1000 && !(atomic_load(tid) && harness_thread_asleep(atomic_load(tid)));
		i++)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	return atomic_load(tid) && harness_thread_asleep(atomic_load(tid));
}

#endif
