/* One test's world, as test-backend (the conformance suite) and hip/test-hip have it: the
 * backend, the core driving it, and what came back from the backend's threads. Those
 * only push to the locked queue; the test thread calls seq_complete(), as the server's
 * loop does. The includer names the backend in HARNESS_NAME (what findings are printed
 * with) and makes it in the `create` it hands to h_world_open. */
#ifndef SSEQ_TESTS_BACKEND_WORLD_H
#define SSEQ_TESTS_BACKEND_WORLD_H

#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "backend-harness.h"
#include "backend.h"
#include "kernels.h"
#include "sequencer.h"

#ifndef HARNESS_NAME
#error "define HARNESS_NAME (the backend's name, for findings) before backend-world.h"
#endif

struct harness {
	struct backend be;
	struct seq *seq;
	struct harness_cq cq;
	pthread_mutex_t mu; /* for the findings */
	uint64_t dones;
	int last_status;
	/* Findings (the audit's come from its thread), under mu. */
	unsigned findings;
	char first_finding[512];
	char finding[512];
	/* The schedule checker between the core and the backend, a second oracle: at
	 * teardown it must have found nothing, unless the test set verify_unclean (an
	 * injected bug). */
	struct verify *verify;
	bool verify_unclean;
	char verify_first[320];
};

static struct harness H;

static inline void h_finding(void *arg, const char *what)
{
	(void)arg;
	printf("%s: %s\n", HARNESS_NAME, what);
	pthread_mutex_lock(&H.mu);
	if (H.findings++ == 0)
		snprintf(H.first_finding, sizeof(H.first_finding), "%s", what);
	snprintf(H.finding, sizeof(H.finding), "%s", what);
	pthread_mutex_unlock(&H.mu);
}

static inline void h_verify_found(void *arg, const char *what)
{
	(void)arg;
	if (!H.verify_first[0])
		snprintf(H.verify_first, sizeof(H.verify_first), "%s", what);
}

static inline void h_done(void *ctx, uint64_t cookie, int status)
{
	(void)ctx;
	(void)cookie;
	H.dones++;
	H.last_status = status;
}

/* Makes the backend under test into *be, given its env; `arg` is h_world_open's. */
typedef int h_create_fn(struct backend *be, const struct backend_env *env, const void *arg);

/* A fresh world: the backend from `create` and, with scfg, the core driving it. Returns
 * what `create` returned (the core is made only when that is 0). */
static inline int h_world_open(const struct seq_config *scfg, h_create_fn *create, const void *arg)
{
	const struct seq_observer obs = {.done = h_done};
	struct seq_layout layout;
	struct backend_env env;
	int r;

	memset(&H, 0, sizeof(H));
	pthread_mutex_init(&H.mu, NULL);
	harness_cq_init(&H.cq);
	env = harness_env(&layout, scfg, &H.cq, h_finding);
	r = create(&H.be, &env, arg);
	if (r < 0 || !scfg)
		return r;
	ck_assert_int_eq(
		verify_create(&H.verify, &layout, &H.be.ops->dev, H.be.ctx, h_verify_found, NULL),
		0);
	H.cq.verify = H.verify;
	ck_assert_int_eq(seq_create(&H.seq, scfg, verify_device(), H.verify, &obs), 0);
	return 0;
}

/* Hand queued completions to the core (when there is one); with `block`, wait (bounded)
 * for at least one. */
static inline size_t h_drain(bool block)
{
	return cq_drain(&H.cq, H.seq, block);
}

/* Until everything issued so far has completed; its status. */
static inline int h_sync(void)
{
	uint64_t want = H.dones + 1;
	int r = seq_sync(H.seq, 1);

	if (r < 0)
		return r;
	if (r == 1)
		return 0;
	harness_wait_dones(H.seq, &H.cq, &H.dones, want);
	return H.last_status;
}

/* Until buf's producer has completed. */
static inline void h_await(struct seq_buffer *buf)
{
	harness_await(H.seq, &H.cq, &H.dones, buf);
}

static inline void h_teardown(void)
{
	if (H.seq) {
		h_sync();
		seq_destroy(H.seq);
		H.seq = NULL;
	}
	if (H.verify) {
		ck_assert_msg(H.verify_unclean || verify_violations(H.verify) == 0,
			"%s: the schedule checker found %" PRIu64 " violations, the first: %s",
			HARNESS_NAME, verify_violations(H.verify), H.verify_first);
		verify_destroy(H.verify);
		H.verify = NULL;
		H.cq.verify = NULL;
	}
	backend_destroy(&H.be);
	h_drain(false);
	harness_cq_destroy(&H.cq);
	pthread_mutex_destroy(&H.mu);
}

/* Host memory as the daemon has it: a mapping registered as staging (pinned, on hip). */
static inline void *h_stage(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert(p != MAP_FAILED);
	ck_assert_int_eq(backend_staging_register(&H.be, p, size), 0);
	return p;
}

static inline void h_unstage(void *p, size_t size)
{
	backend_staging_unregister(&H.be, p, size);
	munmap(p, size);
}

/* ---- ops through the core ---- */

static inline int h_copy(enum seq_op_kind kind, struct seq_buffer *buf, void *host, uint64_t len)
{
	return harness_copy(H.seq, kind, buf, host, len);
}

static inline int h_d2d(struct seq_buffer *src, struct seq_buffer *dst, uint64_t len)
{
	return harness_d2d(H.seq, src, dst, len);
}

/* A built-in kernel by name on `lane` (SEQ_LANE(n) or SEQ_LANE_NONE), its arguments
 * validated as the server validates them; the buffer arguments take `bufs` in order. */
static inline int h_exec_on(uint32_t lane, const char *name, const struct karg *in, unsigned nargs,
	struct seq_buffer *const *bufs)
{
	const struct kernel_desc *k = kernel_find(name);
	struct op_payload p = {.kernel = k, .nargs = nargs};
	struct seq_op op = {.kind = SEQ_OP_EXEC, .lane = lane, .payload = &p};
	const char *why = NULL;
	int r;

	ck_assert_ptr_nonnull(k);
	for (unsigned i = 0; i < nargs; i++) {
		p.args[i] = in[i];
		if (in[i].type != KARG_BUFFER)
			continue;
		p.args[i].access = k->access[i];
		p.args[i].v.buf.index = op.naccess;
		p.args[i].v.buf.size = bufs[op.naccess]->size;
		op.access[op.naccess] = (struct seq_access){bufs[op.naccess], k->access[i]};
		op.naccess++;
	}
	r = kernel_validate(k, p.args, nargs, &p.elements, &why);
	ck_assert_msg(r == 0, "%s: %s", name, why ? why : "invalid");
	return seq_submit(H.seq, &op, NULL);
}

static inline int h_exec(
	const char *name, const struct karg *in, unsigned nargs, struct seq_buffer *const *bufs)
{
	return h_exec_on(SEQ_LANE_NONE, name, in, nargs, bufs);
}

static inline int h_scale(struct seq_buffer *in, struct seq_buffer *out, float by, uint64_t n)
{
	return h_exec("scale", (struct karg[]){BUF, BUF, F32(by), U64(n)}, 4,
		(struct seq_buffer *[]){in, out});
}

/* n buffers of `size` bytes each, into *out[0] to *out[n - 1]. */
static inline void h_alloc(uint64_t size, struct seq_buffer **const *out, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(seq_buffer_alloc(H.seq, size, out[i]), 0);
}

static inline void h_free(struct seq_buffer *const *bufs, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		seq_buffer_free(H.seq, bufs[i]);
}

/* (ha + hb) / 2 into out, n floats, through every stream kind: H2D into bufs[0] and
 * bufs[1], add into bufs[2], scale into bufs[3], D2D into bufs[4] and D2H from it. */
static inline void h_add_halve(
	struct seq_buffer *const *bufs, float *ha, float *hb, float *out, uint64_t n)
{
	const uint64_t bytes = n * sizeof(float);

	ck_assert_int_eq(h_copy(SEQ_OP_H2D, bufs[0], ha, bytes), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, bufs[1], hb, bytes), 0);
	ck_assert_int_eq(h_exec("add", (struct karg[]){BUF, BUF, BUF, U64(n)}, 4,
				 (struct seq_buffer *[]){bufs[0], bufs[1], bufs[2]}),
		0);
	ck_assert_int_eq(h_scale(bufs[2], bufs[3], 0.5f, n), 0);
	ck_assert_int_eq(h_d2d(bufs[3], bufs[4], bytes), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, bufs[4], out, bytes), 0);
}

/* ---- the device commands directly, bypassing the core ---- */

static inline uint64_t be_alloc(uint64_t size)
{
	uint64_t addr = 0;

	ck_assert_int_eq(H.be.ops->dev.mem_alloc(H.be.ctx, size, &addr), 0);
	ck_assert_uint_ne(addr, 0);
	ck_assert_uint_eq(addr % 256, 0);
	return addr;
}

#endif
