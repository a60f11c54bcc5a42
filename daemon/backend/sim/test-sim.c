/* Tests for what only the sim backend has, mostly through the real sequencer core: the
 * race detector staying quiet when the core waits and speaking up when a wait is missing
 * (bypassed, legacy window, early free), injected faults (refused at launch, or failing on
 * the device and reported through completion), delays, its memory cap, spec parsing and
 * throughput. What every backend does is test-backend's (../test-backend.c). */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend-harness.h"
#include "backend.h"
#include "sequencer.h"
#include "sim.h"

#define MAX_FINDINGS 64

/* One test's world: the sim, the core driving it, and what came back from the workers.
 * The workers only push to the locked queues; the test thread calls seq_complete(). */
struct harness {
	struct backend be;
	struct seq *seq;
	struct harness_cq cq; /* completions not yet handed to the core */
	pthread_mutex_t mu; /* for the findings */
	char *findings[MAX_FINDINGS];
	unsigned nfindings;
	uint64_t dones; /* done callbacks from the core */
	uint64_t failed_dones; /* of those, with an error */
};

static struct harness H;

static void h_finding(void *arg, const char *what)
{
	pthread_mutex_lock(&H.mu);
	if (H.nfindings < MAX_FINDINGS)
		H.findings[H.nfindings] = strdup(what);
	H.nfindings++;
	pthread_mutex_unlock(&H.mu);
}

static void h_done(void *ctx, uint64_t cookie, int status)
{
	H.dones++;
	H.failed_dones += status < 0;
}

/* Hand queued completions to the core; with `block`, wait (bounded) for at least one. */
static size_t h_drain(bool block)
{
	return cq_drain(&H.cq, H.seq, block);
}

/* Until n more completions came back (used without the core). */
static void h_drain_n(size_t n)
{
	while (n)
		n -= h_drain(true);
}

static void h_setup(const struct seq_config *scfg, const struct sim_config *simcfg)
{
	const struct seq_observer obs = {.done = h_done};
	struct seq_layout layout;
	struct backend_env env;

	memset(&H, 0, sizeof(H));
	pthread_mutex_init(&H.mu, NULL);
	harness_cq_init(&H.cq);
	env = harness_env(&layout, scfg, &H.cq, h_finding);
	ck_assert_int_eq(sim_create(&H.be, simcfg, &env), 0);
	if (!scfg)
		return;
	ck_assert_int_eq(seq_create(&H.seq, scfg, &H.be.ops->dev, H.be.ctx, &obs), 0);
}

/* Until everything issued so far has completed. */
static void h_sync(void)
{
	uint64_t want = H.dones + 1;
	int r = seq_sync(H.seq, 1);

	ck_assert_int_ge(r, 0);
	if (r == 1)
		return;
	harness_wait_dones(H.seq, &H.cq, &H.dones, want);
}

/* Until buf's producer has completed. */
static void h_await(struct seq_buffer *buf)
{
	harness_await(H.seq, &H.cq, &H.dones, buf);
}

static uint64_t h_findings(void)
{
	return H.be.ops->findings(H.be.ctx);
}

static bool h_found(const char *needle)
{
	bool found = false;

	pthread_mutex_lock(&H.mu);
	for (unsigned i = 0; i < H.nfindings && i < MAX_FINDINGS; i++)
		if (strstr(H.findings[i], needle))
			found = true;
	pthread_mutex_unlock(&H.mu);
	return found;
}

static void h_teardown(void)
{
	if (H.seq) {
		h_sync();
		seq_destroy(H.seq);
		H.seq = NULL;
	}
	H.be.ops->destroy(H.be.ctx);
	/* Workers are gone: what they queued needs no core any more. */
	h_drain(false);
	for (unsigned i = 0; i < H.nfindings && i < MAX_FINDINGS; i++)
		free(H.findings[i]);
	harness_cq_destroy(&H.cq);
	pthread_mutex_destroy(&H.mu);
}

static void h_delay(struct sim_config *cfg, const char *spec)
{
	const char *why;

	ck_assert_msg(sim_parse_delay(cfg, spec, &why) == 0, "%s: %s", spec, why);
}

/* ---- test kernels (the sim only needs desc->cpu) ---- */

static void cpu_add_one(const struct karg *args, uint64_t elements)
{
	const uint32_t *in = args[0].v.buf.ptr;
	uint32_t *out = args[1].v.buf.ptr;

	for (uint64_t i = 0; i < elements; i++)
		out[i] = in[i] + 1;
}

static const struct kernel_desc k_add_one = {
	.name = "add_one",
	.nargs = 2,
	.types = {KARG_BUFFER, KARG_BUFFER},
	.access = {KARG_IN, KARG_OUT},
	.cpu = cpu_add_one,
};

static atomic_uint touched;

static void cpu_touch(const struct karg *args, uint64_t elements)
{
	atomic_fetch_add(&touched, 1);
}

static const struct kernel_desc k_touch = {
	.name = "touch",
	.nargs = 1,
	.types = {KARG_BUFFER},
	.access = {KARG_INOUT},
	.cpu = cpu_touch,
};

/* What the launches below run: add_one over n elements (buffer 0 in, buffer 1 out), and
 * touch on buffer 0 with the given access. */
static struct op_payload add_one_payload(uint64_t n)
{
	return (struct op_payload){
		.kernel = &k_add_one,
		.nargs = 2,
		.args = {{KARG_BUFFER, KARG_IN, {.buf = {.index = 0}}},
			{KARG_BUFFER, KARG_OUT, {.buf = {.index = 1}}}},
		.elements = n,
	};
}

static struct op_payload touch_payload(enum karg_access access)
{
	return (struct op_payload){
		.kernel = &k_touch,
		.nargs = 1,
		.args = {{KARG_BUFFER, access, {.buf = {.index = 0}}}},
		.elements = 1,
	};
}

/* ---- ops through the core ---- */

static int h_copy(enum seq_op_kind kind, struct seq_buffer *buf, void *host, uint64_t len)
{
	return harness_copy(H.seq, kind, buf, host, len);
}

static int h_add_one(struct seq_buffer *in, struct seq_buffer *out, uint64_t n)
{
	struct op_payload p = add_one_payload(n);
	struct seq_op op = {
		.kind = SEQ_OP_EXEC,
		.naccess = 2,
		.access = {{in, SEQ_READ}, {out, SEQ_WRITE}},
		.payload = &p,
	};

	return seq_submit(H.seq, &op, NULL);
}

static int h_touch(struct seq_buffer *buf)
{
	struct op_payload p = touch_payload(KARG_INOUT);
	struct seq_op op = {
		.kind = SEQ_OP_EXEC,
		.naccess = 1,
		.access = {{buf, SEQ_READWRITE}},
		.payload = &p,
	};

	return seq_submit(H.seq, &op, NULL);
}

static uint32_t *pattern(size_t n, uint32_t base)
{
	uint32_t *v = malloc(n * sizeof(*v));

	ck_assert_ptr_nonnull(v);
	for (size_t i = 0; i < n; i++)
		v[i] = base + (uint32_t)i;
	return v;
}

/* How many of out[i] differ from in[i] + 1. */
static size_t wrong_add_one(const uint32_t *in, const uint32_t *out, size_t n)
{
	size_t wrong = 0;

	for (size_t i = 0; i < n; i++)
		wrong += out[i] != in[i] + 1;
	return wrong;
}

/* ---- the detector can fail: launches that bypass the core's waits ---- */

static uint64_t sim_alloc(uint64_t size)
{
	uint64_t addr = 0;

	ck_assert_int_eq(H.be.ops->dev.mem_alloc(H.be.ctx, size, &addr), 0);
	ck_assert_uint_eq(addr % 256, 0);
	return addr;
}

static int sim_launch(struct seq_point at, enum seq_op_kind kind, struct op_payload *p,
	unsigned naccess, const uint64_t *addr, const unsigned *mode, uint64_t size)
{
	struct seq_op op = {.kind = kind, .naccess = naccess, .payload = p};

	for (unsigned i = 0; i < naccess; i++) {
		op.access[i].mode = mode[i];
		op.access[i].addr = addr[i];
		op.access[i].size = size;
	}
	return H.be.ops->dev.launch(H.be.ctx, at, &op);
}

/* Record (s, n) and wait for its completion to come back. */
static void sim_record_wait(uint32_t s, uint64_t n)
{
	ck_assert_int_eq(H.be.ops->dev.record(H.be.ctx, (struct seq_point){s, n}), 0);
	h_drain(true);
}

/* With the H2D stream delayed and no core: H2D into `in` on stream 1, then add_one reading
 * `in` on the compute stream, with or without the wait the core would have emitted. */
static void bypass_scenario(bool with_wait, size_t *wrong)
{
	enum { N = 1024 };
	struct sim_config cfg = {0};
	uint32_t *src = pattern(N, 1), *dst = calloc(N, 4);
	uint64_t in, out;
	struct op_payload h2d = {.host = src, .length = N * 4};
	struct op_payload k = add_one_payload(N);
	struct op_payload d2h = {.host = dst, .length = N * 4};
	const unsigned kmode[] = {SEQ_READ, SEQ_WRITE};
	const unsigned w = SEQ_WRITE, r = SEQ_READ;

	h_delay(&cfg, "h2d=50ms");
	h_setup(NULL, &cfg);
	in = sim_alloc(N * 4);
	out = sim_alloc(N * 4);
	ck_assert_int_eq(
		sim_launch((struct seq_point){1, 1}, SEQ_OP_H2D, &h2d, 1, &in, &w, N * 4), 0);
	if (with_wait) {
		ck_assert_int_eq(H.be.ops->dev.record(H.be.ctx, (struct seq_point){1, 1}), 0);
		ck_assert_int_eq(H.be.ops->dev.wait(H.be.ctx, 0, (struct seq_point){1, 1}), 0);
	}
	ck_assert_int_eq(sim_launch((struct seq_point){0, 1}, SEQ_OP_EXEC, &k, 2,
				 (const uint64_t[]){in, out}, kmode, N * 4),
		0);
	/* The D2H always waits for the kernel: the only missing wait is the one above. */
	ck_assert_int_eq(H.be.ops->dev.record(H.be.ctx, (struct seq_point){0, 1}), 0);
	ck_assert_int_eq(H.be.ops->dev.wait(H.be.ctx, 2, (struct seq_point){0, 1}), 0);
	ck_assert_int_eq(
		sim_launch((struct seq_point){2, 1}, SEQ_OP_D2H, &d2h, 1, &out, &r, N * 4), 0);
	ck_assert_int_eq(H.be.ops->dev.record(H.be.ctx, (struct seq_point){2, 1}), 0);
	if (!with_wait)
		ck_assert_int_eq(H.be.ops->dev.record(H.be.ctx, (struct seq_point){1, 1}), 0);
	h_drain_n(3);
	*wrong = wrong_add_one(src, dst, N);
	H.be.ops->dev.mem_release(H.be.ctx, in, N * 4);
	H.be.ops->dev.mem_release(H.be.ctx, out, N * 4);
	free(src);
	free(dst);
}

START_TEST(test_kernel_launched_without_wait_on_delayed_h2d_is_a_race)
{
	size_t wrong;

	bypass_scenario(false, &wrong);
	ck_assert_uint_eq(h_findings(), 1);
	ck_assert(h_found("race: kernel add_one at 0:1 read buffer"));
	ck_assert(h_found("before its producer 1:1 completed (missing wait)"));
	ck_assert_uint_eq(wrong, 1024); /* it read the zeros of fresh memory */
	h_teardown();
}
END_TEST

START_TEST(test_same_launches_with_the_wait_are_clean)
{
	size_t wrong;

	bypass_scenario(true, &wrong);
	ck_assert_uint_eq(h_findings(), 0);
	ck_assert_uint_eq(wrong, 0);
	h_teardown();
}
END_TEST

START_TEST(test_write_before_pending_reader_is_a_race)
{
	struct sim_config cfg = {0};
	uint32_t host[64] = {0};
	uint64_t a;
	struct op_payload k = touch_payload(KARG_IN);
	struct op_payload h2d = {.host = host, .length = sizeof(host)};
	const unsigned r = SEQ_READ, w = SEQ_WRITE;

	h_delay(&cfg, "compute=50ms");
	h_setup(NULL, &cfg);
	a = sim_alloc(sizeof(host));
	ck_assert_int_eq(sim_launch((struct seq_point){0, 1}, SEQ_OP_EXEC, &k, 1, &a, &r, 256), 0);
	ck_assert_int_eq(sim_launch((struct seq_point){1, 1}, SEQ_OP_H2D, &h2d, 1, &a, &w, 256), 0);
	sim_record_wait(1, 1);
	sim_record_wait(0, 1);
	ck_assert_uint_eq(h_findings(), 1);
	ck_assert(h_found("race: h2d at 1:1 wrote buffer"));
	ck_assert(h_found("before its reader 0:1 completed"));
	H.be.ops->dev.mem_release(H.be.ctx, a, sizeof(host));
	h_teardown();
}
END_TEST

/* The staging shadow: an upload from the host range a download is still writing (no
 * order between the two copies) is a race on the host memory, found like a device
 * buffer's; the same upload once the download ran is clean. */
START_TEST(test_copies_racing_on_one_staging_range_are_a_race)
{
	struct sim_config cfg = {0};
	uint32_t host[64] = {0};
	uint64_t a, b;
	struct op_payload copy = {.host = host, .length = sizeof(host)};
	const unsigned r = SEQ_READ, w = SEQ_WRITE;
	char want[96];

	h_delay(&cfg, "d2h=50ms");
	h_setup(NULL, &cfg);
	a = sim_alloc(sizeof(host));
	b = sim_alloc(sizeof(host));
	ck_assert_int_eq(
		sim_launch((struct seq_point){2, 1}, SEQ_OP_D2H, &copy, 1, &a, &r, 256), 0);
	ck_assert_int_eq(
		sim_launch((struct seq_point){1, 1}, SEQ_OP_H2D, &copy, 1, &b, &w, 256), 0);
	sim_record_wait(1, 1);
	sim_record_wait(2, 1);
	ck_assert_uint_eq(h_findings(), 1);
	snprintf(want, sizeof(want), "race: h2d at 1:1 read buffer %#" PRIx64,
		(uint64_t)(uintptr_t)host);
	ck_assert_msg(h_found(want), "no '%s'", want);
	ck_assert(h_found("before its producer 2:1 completed"));
	/* Ordered by completion (the download ran first): nothing to report. */
	ck_assert_int_eq(
		sim_launch((struct seq_point){1, 2}, SEQ_OP_H2D, &copy, 1, &b, &w, 256), 0);
	sim_record_wait(1, 2);
	ck_assert_uint_eq(h_findings(), 1);
	H.be.ops->dev.mem_release(H.be.ctx, a, sizeof(host));
	H.be.ops->dev.mem_release(H.be.ctx, b, sizeof(host));
	h_teardown();
}
END_TEST

/* XLA's slice-outlives-base, injected in the core: the base is freed while a slice of it
 * lives, its memory goes back at once and the next allocation of its size gets it. A
 * kernel through the slice, launched long after, runs on the new owner's memory with
 * nothing in flight to overlap: the allocation serial (the base each block holds) tells
 * the memory changed hands. */
START_TEST(test_a_slice_that_outlived_its_base_is_a_use_after_free)
{
	struct seq_config scfg = {.legacy_slice_outlives_base = true};
	struct seq_buffer *base, *slice, *other, *out;

	h_setup(&scfg, NULL);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 4096, &base), 0);
	ck_assert_int_eq(seq_buffer_slice(H.seq, base, 0, 1024, &slice), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 1024, &out), 0);
	seq_buffer_free(H.seq, base); /* the slice still holds it: the injected bug releases */
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 4096, &other), 0);
	ck_assert_uint_eq(other->addr, slice->addr); /* the sim handed the block out again */
	ck_assert_int_eq(h_add_one(other, out, 256), 0);
	h_sync();
	ck_assert_uint_eq(h_findings(), 0);
	ck_assert_int_eq(h_add_one(slice, out, 256), 0);
	h_sync();
	ck_assert_uint_eq(h_findings(), 1);
	ck_assert(h_found("use-after-free: kernel add_one at 0:2 touches buffer"));
	ck_assert(h_found("(the memory changed hands)"));
	seq_buffer_free(H.seq, slice);
	seq_buffer_free(H.seq, other);
	seq_buffer_free(H.seq, out);
	h_teardown();
}
END_TEST

/* The same, but the new owner never touches the memory: the stale access through the
 * slice is the memory's first use. The core told the sim the owner at allocation, so the
 * slice's op is still reported, naming the base it was made of. */
START_TEST(test_stale_slice_is_reported_when_the_new_owner_never_uses_the_memory)
{
	struct seq_config scfg = {.legacy_slice_outlives_base = true};
	struct seq_buffer *base, *slice, *other, *out;

	h_setup(&scfg, NULL);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 4096, &base), 0);
	ck_assert_int_eq(seq_buffer_slice(H.seq, base, 0, 1024, &slice), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 1024, &out), 0);
	seq_buffer_free(H.seq, base);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 4096, &other), 0);
	ck_assert_uint_eq(other->addr, slice->addr);
	ck_assert_int_eq(h_add_one(slice, out, 256), 0);
	h_sync();
	ck_assert_uint_eq(h_findings(), 1);
	ck_assert(h_found("use-after-free: kernel add_one at 0:1 touches buffer"));
	ck_assert(h_found("as base #1, but it now holds base #3 (the memory changed hands)"));
	seq_buffer_free(H.seq, slice);
	seq_buffer_free(H.seq, other);
	seq_buffer_free(H.seq, out);
	h_teardown();
}
END_TEST

START_TEST(test_release_while_op_pending_is_reported)
{
	struct sim_config cfg = {0};
	uint64_t a;
	struct op_payload k = touch_payload(KARG_INOUT);
	const unsigned rw = SEQ_READWRITE;
	char expect[96];

	h_delay(&cfg, "compute=50ms");
	h_setup(NULL, &cfg);
	a = sim_alloc(512);
	ck_assert_int_eq(sim_launch((struct seq_point){0, 1}, SEQ_OP_EXEC, &k, 1, &a, &rw, 512), 0);
	H.be.ops->dev.mem_release(H.be.ctx, a, 512);
	snprintf(expect, sizeof(expect), "memory %#" PRIx64 " released while 0:1 still uses it", a);
	ck_assert(h_found(expect));
	sim_record_wait(0, 1);
	/* Released, not reused: the op still ran on it and said so. */
	ck_assert(h_found("use-after-free: kernel touch at 0:1 touched buffer"));
	ck_assert_uint_eq(h_findings(), 2);
	h_teardown();
}
END_TEST

/* ---- the legacy bugs, injected in the core, are caught ---- */

/* The seed: an H2D copy, the compute stream moving past a small window (each kernel seen
 * complete), then a kernel reading the copy. */
static void seed_scenario(unsigned legacy_window, size_t *wrong, uint64_t *elided)
{
	struct seq_config scfg = {.legacy_sync_window = legacy_window};
	struct sim_config cfg = {0};
	enum { N = 64 << 10 };
	uint32_t *src = pattern(N, 3), *dst = calloc(N, 4);
	struct seq_buffer *in, *tmp, *out;

	h_delay(&cfg, "h2d=100ms");
	h_setup(&scfg, &cfg);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &in), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 4096, &tmp), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &out), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, in, src, N * 4), 0);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(h_touch(tmp), 0);
		h_await(tmp);
	}
	ck_assert_int_eq(h_add_one(in, out, N), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, out, dst, N * 4), 0);
	h_sync();
	*wrong = wrong_add_one(src, dst, N);
	*elided = seq_counters(H.seq)->waits_elided_legacy;
	free(src);
	free(dst);
}

START_TEST(test_legacy_sync_window_race_is_caught)
{
	size_t wrong;
	uint64_t elided;

	seed_scenario(2, &wrong, &elided);
	ck_assert_uint_eq(elided, 1);
	ck_assert_uint_ge(h_findings(), 1);
	ck_assert(h_found("race: kernel add_one at 0:5 read buffer"));
	ck_assert(h_found("before its producer 1:1 completed (missing wait)"));
	ck_assert_uint_gt(wrong, 0);
	h_teardown();
}
END_TEST

START_TEST(test_seed_scenario_without_legacy_window_is_clean)
{
	size_t wrong;
	uint64_t elided;

	seed_scenario(0, &wrong, &elided);
	ck_assert_uint_eq(elided, 0);
	ck_assert_uint_eq(h_findings(), 0);
	ck_assert_uint_eq(wrong, 0);
	h_teardown();
}
END_TEST

/* A kernel reads `a` while delayed; the owner frees `a` and allocates `b` of the same size
 * and fills it. With the legacy early free, b reuses a's memory under the kernel's feet. */
static void early_free_scenario(bool legacy, bool *reused, size_t *wrong)
{
	struct seq_config scfg = {.legacy_early_free = legacy};
	struct sim_config cfg = {0};
	enum { N = 1024 };
	uint32_t *src = pattern(N, 10), *other = pattern(N, 5000), *dst = calloc(N, 4);
	struct seq_buffer *a, *b, *out;
	uint64_t a_addr;

	h_delay(&cfg, "compute=script:0,100ms");
	h_setup(&scfg, &cfg);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &a), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &out), 0);
	a_addr = a->addr;
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, a, src, N * 4), 0);
	h_sync();
	ck_assert_int_eq(h_touch(out), 0); /* the script's 0 delay */
	ck_assert_int_eq(h_add_one(a, out, N), 0); /* runs 100 ms late */
	seq_buffer_free(H.seq, a);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &b), 0);
	*reused = b->addr == a_addr;
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, b, other, N * 4), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, out, dst, N * 4), 0);
	h_sync();
	*wrong = wrong_add_one(src, dst, N);
	free(src);
	free(other);
	free(dst);
}

START_TEST(test_legacy_early_free_reuse_is_a_use_after_free)
{
	bool reused;
	size_t wrong;

	early_free_scenario(true, &reused, &wrong);
	ck_assert(reused);
	ck_assert_uint_ge(h_findings(), 2);
	ck_assert(h_found("released while 0:2 still uses it"));
	ck_assert(h_found("use-after-free: kernel add_one at 0:2 touched buffer"));
	ck_assert_uint_gt(wrong, 0); /* it read the new owner's data */
	h_teardown();
}
END_TEST

START_TEST(test_deferred_free_keeps_memory_until_last_use)
{
	bool reused;
	size_t wrong;

	early_free_scenario(false, &reused, &wrong);
	ck_assert(!reused);
	ck_assert_uint_eq(h_findings(), 0);
	ck_assert_uint_eq(wrong, 0);
	h_teardown();
}
END_TEST

/* ---- faults, memory, delays ---- */

START_TEST(test_fail_op_fails_that_launch_only)
{
	struct seq_config scfg = {0};
	struct sim_config cfg = {0};
	struct seq_buffer *buf[4];
	uint32_t host[64] = {0};
	const char *why;

	ck_assert_int_eq(sim_parse_inject(&cfg, "fail-op=3", &why), 0);
	h_setup(&scfg, &cfg);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(seq_buffer_alloc(H.seq, sizeof(host), &buf[i]), 0);
		ck_assert_int_eq(h_copy(SEQ_OP_H2D, buf[i], host, sizeof(host)),
			i == 2 ? -BACKEND_EINJECTED : 0);
	}
	h_sync();
	ck_assert_int_eq(seq_buffer_error(H.seq, buf[2]), -BACKEND_EINJECTED);
	ck_assert_int_eq(seq_buffer_error(H.seq, buf[3]), 0);
	ck_assert_uint_eq(seq_counters(H.seq)->ops_failed, 1);
	ck_assert_uint_eq(seq_counters(H.seq)->ops_completed, 3);
	ck_assert_uint_eq(h_findings(), 0);
	h_teardown();
}
END_TEST

/* Record (s, n) and return the status its completion came back with. */
static int sim_record_status(uint32_t s, uint64_t n)
{
	return harness_record_wait(&H.be, &H.cq, s, n);
}

START_TEST(test_device_fail_op_does_no_work_and_fails_the_streams_events)
{
	enum { N = 64 };
	struct sim_config cfg = {0};
	uint32_t *first = pattern(N, 1), *second = pattern(N, 500), dst[N];
	struct op_payload h1 = {.host = first, .length = N * 4};
	struct op_payload h2 = {.host = second, .length = N * 4};
	struct op_payload d2h = {.host = dst, .length = N * 4};
	const unsigned w = SEQ_WRITE, r = SEQ_READ;
	const char *why;
	uint64_t a, b;

	ck_assert_int_eq(sim_parse_inject(&cfg, "device-fail-op=2", &why), 0);
	/* Where both kinds name one launch, the refusal wins: nothing runs. */
	ck_assert_int_eq(sim_parse_inject(&cfg, "device-fail-op=5", &why), 0);
	ck_assert_int_eq(sim_parse_inject(&cfg, "fail-op=5", &why), 0);
	h_setup(NULL, &cfg);
	a = sim_alloc(N * 4);
	b = sim_alloc(N * 4);
	ck_assert_int_eq(
		sim_launch((struct seq_point){1, 1}, SEQ_OP_H2D, &h1, 1, &a, &w, N * 4), 0);
	ck_assert_int_eq(sim_record_status(1, 1), 0);
	/* Launch 2 is accepted: the fault is the device's, learned through completion. */
	ck_assert_int_eq(
		sim_launch((struct seq_point){1, 2}, SEQ_OP_H2D, &h2, 1, &a, &w, N * 4), 0);
	ck_assert_int_eq(sim_record_status(1, 2), -EIO);
	ck_assert_int_eq(
		sim_launch((struct seq_point){1, 3}, SEQ_OP_H2D, &h1, 1, &b, &w, N * 4), 0);
	ck_assert_int_eq(sim_record_status(1, 3), -EIO); /* the stream stays failed */
	/* Another stream is fine, and reads what the faulted copy left: the first copy's. */
	memset(dst, 0, sizeof(dst));
	ck_assert_int_eq(
		sim_launch((struct seq_point){2, 1}, SEQ_OP_D2H, &d2h, 1, &a, &r, N * 4), 0);
	ck_assert_int_eq(sim_record_status(2, 1), 0);
	ck_assert_mem_eq(dst, first, sizeof(dst));
	ck_assert_int_eq(sim_launch((struct seq_point){2, 2}, SEQ_OP_D2H, &d2h, 1, &a, &r, N * 4),
		-BACKEND_EINJECTED);
	ck_assert_uint_eq(h_findings(), 0);
	H.be.ops->dev.mem_release(H.be.ctx, a, N * 4);
	H.be.ops->dev.mem_release(H.be.ctx, b, N * 4);
	free(first);
	free(second);
	h_teardown();
}
END_TEST

START_TEST(test_device_failed_producer_fails_dependents_with_its_error)
{
	enum { N = 64 };
	struct seq_config scfg = {0};
	struct sim_config cfg = {0};
	struct seq_buffer *in, *a, *out;
	uint32_t *src = pattern(N, 3), dst[N];
	struct seq_stream_info info;
	const char *why;

	ck_assert_int_eq(sim_parse_inject(&cfg, "device-fail-op=2", &why), 0);
	h_setup(&scfg, &cfg);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &in), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &a), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &out), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, in, src, N * 4), 0);
	h_sync();
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, a, src, N * 4), 0); /* launch 2: faults */
	h_sync();
	ck_assert_uint_eq(H.failed_dones, 1);
	ck_assert_int_eq(seq_buffer_error(H.seq, a), -EIO);
	ck_assert_int_eq(seq_buffer_error(H.seq, in), 0);
	seq_stream_info(H.seq, 1, &info);
	ck_assert_int_eq(info.error, -EIO);
	/* A kernel reading it fails with the device's error, not launched, and so does what
	 * it would have written. */
	ck_assert_int_eq(h_add_one(a, out, N), -EIO);
	ck_assert_int_eq(seq_buffer_error(H.seq, out), -EIO);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, a, dst, N * 4), -EIO);
	/* The failed stream refuses what comes next; the others run. */
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, a, src, N * 4), -EIO);
	ck_assert_int_eq(h_add_one(in, out, N), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, out, dst, N * 4), 0);
	h_sync();
	ck_assert_uint_eq(wrong_add_one(src, dst, N), 0);
	ck_assert_uint_eq(seq_counters(H.seq)->ops_failed, 3);
	ck_assert_uint_eq(h_findings(), 0);
	seq_buffer_free(H.seq, in);
	seq_buffer_free(H.seq, a);
	seq_buffer_free(H.seq, out);
	free(src);
	h_teardown();
}
END_TEST

START_TEST(test_slice_overwrite_keeps_device_error_whole_overwrite_clears_it)
{
	enum { N = 64 };
	struct seq_config scfg = {0};
	struct sim_config cfg = {0};
	struct seq_buffer *in, *a, *lo, *hi;
	uint32_t *src = pattern(N, 10), *dst = calloc(N, 4);
	const char *why;

	ck_assert_ptr_nonnull(dst);
	ck_assert_int_eq(sim_parse_inject(&cfg, "device-fail-op=2", &why), 0);
	h_setup(&scfg, &cfg);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &in), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &a), 0);
	ck_assert_int_eq(seq_buffer_slice(H.seq, a, 0, N * 2, &lo), 0);
	ck_assert_int_eq(seq_buffer_slice(H.seq, a, N * 2, N * 2, &hi), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, in, src, N * 4), 0);
	h_sync();
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, a, src, N * 4), 0); /* launch 2: faults */
	h_sync();
	/* A kernel rewrites all of lo; hi still holds nothing the faulted copy wrote (the
	 * sim left it zero): a's contents are still wrong, whichever view is read. */
	ck_assert_int_eq(h_add_one(in, lo, N / 2), 0);
	h_sync();
	ck_assert_int_eq(seq_buffer_error(H.seq, a), -EIO);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, a, dst, N * 4), -EIO);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, hi, dst, N * 2), -EIO);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, lo, dst, N * 2), -EIO);
	/* A kernel writing all of a defines it again. */
	ck_assert_int_eq(h_add_one(in, a, N), 0);
	ck_assert_int_eq(seq_buffer_error(H.seq, a), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, a, dst, N * 4), 0);
	h_sync();
	ck_assert_uint_eq(wrong_add_one(src, dst, N), 0);
	ck_assert_uint_eq(h_findings(), 0);
	seq_buffer_free(H.seq, lo);
	seq_buffer_free(H.seq, hi);
	seq_buffer_free(H.seq, in);
	seq_buffer_free(H.seq, a);
	free(src);
	free(dst);
	h_teardown();
}
END_TEST

START_TEST(test_memory_limit_and_use_are_counted)
{
	/* The sim's --sim-memory cap and its exact accounting (1024-byte classes); what
	 * every backend does with released memory is test-backend's. */
	struct sim_config cfg = {.memory = 1 << 20};
	struct backend_info info;
	uint64_t a, b, c, d, e;

	h_setup(NULL, &cfg);
	a = sim_alloc(1000);
	b = sim_alloc(1000);
	c = sim_alloc(5000);
	H.be.ops->info(H.be.ctx, &info);
	ck_assert_str_eq(info.backend, "sim");
	ck_assert_str_eq(info.name, "sseq sim device");
	ck_assert_str_eq(info.arch, "");
	ck_assert_uint_eq(info.memory_total, 1 << 20);
	ck_assert_uint_eq(info.memory_used, 1024 + 1024 + 5120);
	H.be.ops->dev.mem_release(H.be.ctx, a, 1000);
	H.be.ops->dev.mem_release(H.be.ctx, c, 5000);
	H.be.ops->dev.mem_release(H.be.ctx, b, 1000);
	d = sim_alloc(1001);
	e = sim_alloc(1024);
	ck_assert_int_eq(H.be.ops->dev.mem_alloc(H.be.ctx, 1 << 20, &a), -ENOMEM);
	H.be.ops->info(H.be.ctx, &info);
	ck_assert_uint_eq(info.memory_used, 2048);
	ck_assert_uint_eq(h_findings(), 0);
	H.be.ops->dev.mem_release(H.be.ctx, d, 1001);
	H.be.ops->dev.mem_release(H.be.ctx, e, 1024);
	h_teardown();
}
END_TEST

START_TEST(test_script_delay_is_slept_before_each_op_in_turn)
{
	struct seq_config scfg = {0};
	struct sim_config cfg = {0};
	struct seq_buffer *buf;
	struct timespec t0, t1;
	double ms;

	h_delay(&cfg, "compute=script:20ms,0");
	h_setup(&scfg, &cfg);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 256, &buf), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(h_touch(buf), 0);
	h_sync();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	ck_assert_msg(ms >= 40.0, "4 ops with script 20ms,0 took %.1f ms", ms);
	h_teardown();
}
END_TEST

/* A burst queued on one stream, once run, gives its memory back but for a few entries kept
 * for reuse: kept all, a stream held as many run entries (some 4 KiB each) as its deepest
 * queue had ever been, for the daemon's lifetime. Measured as the heap's bytes in use
 * (mallinfo2), which a sanitizer's allocator does not report: then only the run is checked. */
START_TEST(test_a_burst_gives_its_memory_back)
{
	struct sim_config cfg = {0};
	struct op_payload k = touch_payload(KARG_INOUT);
	const unsigned rw = SEQ_READWRITE;
	const uint64_t burst = 2000;
	uint32_t src[64] = {0};
	struct op_payload h2d = {.host = src, .length = sizeof(src)};
	const unsigned w = SEQ_WRITE;
	size_t before, after;
	uint64_t a, b;

	h_delay(&cfg, "h2d=100ms");
	h_setup(NULL, &cfg);
	a = sim_alloc(256);
	b = sim_alloc(256);
	/* Warm: each stream's entries kept for reuse are there before the measure. */
	for (uint64_t i = 1; i <= 64; i++)
		ck_assert_int_eq(
			sim_launch((struct seq_point){0, i}, SEQ_OP_EXEC, &k, 1, &a, &rw, 256), 0);
	sim_record_wait(0, 64);
	nanosleep(&(struct timespec){0, 20000000}, NULL);
	before = mallinfo2().uordblks;
	/* Stream 0 first waits for a slow H2D on stream 1: the burst queues behind it. */
	ck_assert_int_eq(sim_launch((struct seq_point){1, 1}, SEQ_OP_H2D, &h2d, 1, &b, &w, 256), 0);
	ck_assert_int_eq(H.be.ops->dev.record(H.be.ctx, (struct seq_point){1, 1}), 0);
	ck_assert_int_eq(H.be.ops->dev.wait(H.be.ctx, 0, (struct seq_point){1, 1}), 0);
	for (uint64_t i = 65; i <= 64 + burst; i++)
		ck_assert_int_eq(
			sim_launch((struct seq_point){0, i}, SEQ_OP_EXEC, &k, 1, &a, &rw, 256), 0);
	if (before)
		ck_assert_uint_gt(mallinfo2().uordblks, before); /* the burst is measured */
	ck_assert_int_eq(H.be.ops->dev.record(H.be.ctx, (struct seq_point){0, 64 + burst}), 0);
	h_drain_n(2); /* (1, 1) and the burst's end */
	/* The worker hands the run batch back just after the completion. */
	nanosleep(&(struct timespec){0, 50000000}, NULL);
	after = mallinfo2().uordblks;
	ck_assert_uint_eq(h_findings(), 0);
	if (before)
		ck_assert_msg(after < before + (256u << 10),
			"a burst of %" PRIu64 " ops left %zu bytes more in use", burst,
			after - before);
	h_teardown();
}
END_TEST

START_TEST(test_destroy_runs_everything_queued)
{
	struct sim_config cfg = {0};
	struct op_payload k = touch_payload(KARG_INOUT);
	const unsigned rw = SEQ_READWRITE;
	uint64_t a;

	h_delay(&cfg, "compute=5ms");
	h_setup(NULL, &cfg);
	atomic_store(&touched, 0);
	a = sim_alloc(256);
	for (uint64_t i = 1; i <= 5; i++)
		ck_assert_int_eq(
			sim_launch((struct seq_point){0, i}, SEQ_OP_EXEC, &k, 1, &a, &rw, 256), 0);
	ck_assert_uint_lt(atomic_load(&touched), 5);
	h_teardown();
	ck_assert_uint_eq(atomic_load(&touched), 5);
}
END_TEST

static double h_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The cancel at the end of sseqd's drain: the op a worker runs runs to its end, every op
 * not begun is skipped without touching its memory, and the stream's events report
 * -ESHUTDOWN, so the wait for the rest ends at once. */
START_TEST(test_cancel_skips_what_has_not_begun)
{
	struct seq_config scfg = {0};
	struct sim_config cfg = {0};
	struct seq_buffer *buf;
	double t0;

	h_delay(&cfg, "compute=100ms");
	h_setup(&scfg, &cfg);
	atomic_store(&touched, 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 256, &buf), 0);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(h_touch(buf), 0);
	seq_flush(H.seq);
	while (atomic_load(&touched) < 2)
		usleep(1000);
	t0 = h_now_ms();
	H.be.ops->cancel(H.be.ctx);
	h_sync();
	ck_assert_msg(
		h_now_ms() - t0 < 400, "the sync took %.0f ms after the cancel", h_now_ms() - t0);
	ck_assert_uint_le(atomic_load(&touched), 3); /* the one running at the cancel */
	ck_assert_uint_ge(H.failed_dones, 1);
	seq_buffer_free(H.seq, buf);
	ck_assert_uint_eq(h_findings(), 0);
	h_teardown();
	ck_assert_uint_le(atomic_load(&touched), 3);
}
END_TEST

START_TEST(test_launch_on_unknown_memory_is_refused)
{
	/* The sim's detector knows every block: an access in none is refused (-EFAULT)
	 * before anything runs. backend_op_check's refusals are test-backend's. */
	struct sim_config cfg = {0};
	uint32_t host[64];
	struct op_payload h2d = {.host = host, .length = sizeof(host)};
	const unsigned w = SEQ_WRITE;
	uint64_t a, bogus = 0x1000;

	h_setup(NULL, &cfg);
	a = sim_alloc(sizeof(host));
	ck_assert_int_eq(sim_launch((struct seq_point){1, 1}, SEQ_OP_H2D, &h2d, 1, &bogus, &w, 256),
		-EFAULT);
	ck_assert_int_eq(sim_launch((struct seq_point){1, 1}, SEQ_OP_H2D, &h2d, 1, &a, &w, 256), 0);
	sim_record_wait(1, 1);
	H.be.ops->dev.mem_release(H.be.ctx, a, sizeof(host));
	h_teardown();
}
END_TEST

/* ---- spec parsing ---- */

START_TEST(test_delay_specs_parse)
{
	struct sim_config cfg = {0};

	h_delay(&cfg, "h2d=2ms");
	ck_assert_int_eq(cfg.delay[SEQ_STREAM_H2D].mode, SIM_DELAY_FIXED);
	ck_assert_uint_eq(cfg.delay[SEQ_STREAM_H2D].lo_ns, 2000000);
	h_delay(&cfg, "d2d=rand:0-500us");
	ck_assert_int_eq(cfg.delay[SEQ_STREAM_D2D].mode, SIM_DELAY_RAND);
	ck_assert_uint_eq(cfg.delay[SEQ_STREAM_D2D].lo_ns, 0);
	ck_assert_uint_eq(cfg.delay[SEQ_STREAM_D2D].hi_ns, 500000);
	h_delay(&cfg, "d2h=rand:1-3ms"); /* a bare LO takes HI's unit */
	ck_assert_uint_eq(cfg.delay[SEQ_STREAM_D2H].lo_ns, 1000000);
	ck_assert_uint_eq(cfg.delay[SEQ_STREAM_D2H].hi_ns, 3000000);
	h_delay(&cfg, "compute=script:1ms,0,5ms");
	ck_assert_int_eq(cfg.delay[SEQ_STREAM_COMPUTE].mode, SIM_DELAY_SCRIPT);
	ck_assert_uint_eq(cfg.delay[SEQ_STREAM_COMPUTE].nscript, 3);
	ck_assert_uint_eq(cfg.delay[SEQ_STREAM_COMPUTE].script_ns[0], 1000000);
	ck_assert_uint_eq(cfg.delay[SEQ_STREAM_COMPUTE].script_ns[1], 0);
	ck_assert_uint_eq(cfg.delay[SEQ_STREAM_COMPUTE].script_ns[2], 5000000);
	h_delay(&cfg, "all=1.5us");
	for (int k = 0; k <= SEQ_STREAM_D2D; k++)
		ck_assert_uint_eq(cfg.delay[k].lo_ns, 1500);
	h_delay(&cfg, "h2d=100ns");
	h_delay(&cfg, "d2h=1s");
	ck_assert_uint_eq(cfg.delay[SEQ_STREAM_D2H].lo_ns, 1000000000);
	h_delay(&cfg, "all=0");
	ck_assert_uint_eq(cfg.delay[SEQ_STREAM_H2D].lo_ns, 0);
}
END_TEST

START_TEST(test_bad_delay_specs_are_rejected_with_a_reason)
{
	static const char *const bad[] = {
		"",
		"h2d",
		"h2d=",
		"gpu=1ms",
		"h2d=5",
		"h2d=5xs",
		"h2d=-1ms",
		"h2d= 1ms",
		"h2d=1ms,2ms",
		"h2d=rand:5ms-1ms",
		"h2d=rand:1ms",
		"h2d=rand:-",
		"h2d=script:",
		"h2d=script:1ms,",
		"h2d=script:1ms,,2ms",
		"h2d=inf",
		"h2d=nanms",
		"h2d=2h",
		"h2d=7200s",
		"H2D=1ms",
		"all=rand:1-2",
		"compute=script:1,2ms",
	};
	struct sim_config cfg = {0};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = NULL;

		ck_assert_msg(
			sim_parse_delay(&cfg, bad[i], &why) == -EINVAL, "accepted '%s'", bad[i]);
		ck_assert_msg(why && *why, "no reason for '%s'", bad[i]);
	}
	for (int k = 0; k <= SEQ_STREAM_D2D; k++)
		ck_assert_int_eq(cfg.delay[k].mode, SIM_DELAY_NONE);
}
END_TEST

START_TEST(test_inject_specs_parse)
{
	static const char *const bad[] = {
		"",
		"fail-op",
		"fail-op=",
		"fail-op=0",
		"fail-op=abc",
		"fail-op=3x",
		"fail-op=-1",
		"fail-op=99999999999999999999999",
		"crash=1",
		"device-fail-op",
		"device-fail-op=",
		"device-fail-op=0",
		"device-fail-op=x",
		"device-fail-op=-1",
		"device-fail-op=2 ",
		"device-fail=2",
		"device-op=2",
	};
	struct sim_config cfg = {0};
	const char *why;

	ck_assert_int_eq(sim_parse_inject(&cfg, "fail-op=3", &why), 0);
	ck_assert_int_eq(sim_parse_inject(&cfg, "fail-op=17", &why), 0);
	ck_assert_int_eq(sim_parse_inject(&cfg, "device-fail-op=5", &why), 0);
	ck_assert_uint_eq(cfg.nfail, 3);
	ck_assert_uint_eq(cfg.fail_op[0], 3);
	ck_assert_uint_eq(cfg.fail_op[1], 17);
	ck_assert_uint_eq(cfg.fail_op[2], 5);
	ck_assert(!cfg.fail_on_device[0] && !cfg.fail_on_device[1] && cfg.fail_on_device[2]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		ck_assert_msg(
			sim_parse_inject(&cfg, bad[i], &why) == -EINVAL, "accepted '%s'", bad[i]);
		ck_assert_msg(why && *why, "no reason for '%s'", bad[i]);
		/* A known fault with a missing or bad N hears the form it takes. */
		if (strncmp(bad[i], "fail-op", 7) == 0)
			ck_assert_msg(strstr(why, "expected fail-op=N"), "'%s': %s", bad[i], why);
		else if (strncmp(bad[i], "device-fail-op", 14) == 0)
			ck_assert_msg(
				strstr(why, "expected device-fail-op=N"), "'%s': %s", bad[i], why);
		else
			ck_assert_msg(
				strncmp(why, "unknown fault", 13) == 0, "'%s': %s", bad[i], why);
	}
	ck_assert_uint_eq(cfg.nfail, 3);
	/* Both kinds share the limit. */
	while (cfg.nfail < SIM_INJECT_MAX)
		ck_assert_int_eq(sim_parse_inject(&cfg, "device-fail-op=9", &why), 0);
	ck_assert_int_eq(sim_parse_inject(&cfg, "fail-op=9", &why), -EINVAL);
	ck_assert_ptr_nonnull(why);
}
END_TEST

/* ---- throughput ---- */

/* Submit n ops made by `submit` through the core, flushing and handing completions back
 * the way the server's loop does; returns ops/s. */
static double pump(uint64_t n, int (*submit)(uint64_t i, void *arg), void *arg)
{
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint64_t i = 0; i < n;) {
		int r = submit(i, arg);

		if (r == -EAGAIN) {
			seq_flush(H.seq);
			h_drain(true);
			continue;
		}
		if (r != 0) /* not ck_assert: each of those writes to Check's pipe */
			ck_abort_msg("op %" PRIu64 " failed: %d", i, r);
		if (++i % 128 == 0) {
			seq_flush(H.seq);
			h_drain(false);
		}
	}
	h_sync();
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)n /
		((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
}

static int submit_touch(uint64_t i, void *arg)
{
	return h_touch(arg);
}

static int submit_pipeline(uint64_t i, void *arg)
{
	struct seq_buffer **b = arg;
	static uint32_t in[16], out[16]; /* D2H copies all run on the one D2H stream */

	switch (i % 3) {
	case 0:
		return h_copy(SEQ_OP_H2D, b[(i / 3) % 4], in, sizeof(in));
	case 1:
		return h_touch(b[(i / 3) % 4]);
	default:
		return h_copy(SEQ_OP_D2H, b[(i / 3) % 4], out, sizeof(out));
	}
}

START_TEST(test_throughput_of_simple_ops)
{
	struct seq_config scfg = {0};
	struct seq_buffer *buf[4];
	uint64_t n = 300000;
	const char *env = getenv("SSEQ_SIM_OPS");
	double same, pipe;

	if (env)
		n = strtoull(env, NULL, 10);
	h_setup(&scfg, NULL);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(seq_buffer_alloc(H.seq, 64, &buf[i]), 0);
	same = pump(n, submit_touch, buf[0]);
	pipe = pump(n, submit_pipeline, buf);
	printf("sim throughput: %.0f ops/s one stream, %.0f ops/s h2d->kernel->d2h "
	       "(%" PRIu64 " waits)\n",
		same, pipe, seq_counters(H.seq)->waits_enqueued);
	ck_assert_uint_eq(h_findings(), 0);
	/* Loose: sanitizer builds are several times slower. */
	ck_assert_msg(same > 20000 && pipe > 20000, "%.0f / %.0f ops/s", same, pipe);
	h_teardown();
}
END_TEST

static Suite *sim_suite(void)
{
	Suite *s = suite_create("sim");
	TCase *detector = tcase_create("detector");
	TCase *device = tcase_create("device");
	TCase *parse = tcase_create("parse");
	TCase *speed = tcase_create("throughput");

	tcase_add_test(detector, test_kernel_launched_without_wait_on_delayed_h2d_is_a_race);
	tcase_add_test(detector, test_same_launches_with_the_wait_are_clean);
	tcase_add_test(detector, test_write_before_pending_reader_is_a_race);
	tcase_add_test(detector, test_copies_racing_on_one_staging_range_are_a_race);
	tcase_add_test(detector, test_a_slice_that_outlived_its_base_is_a_use_after_free);
	tcase_add_test(detector, test_release_while_op_pending_is_reported);
	tcase_add_test(detector, test_legacy_sync_window_race_is_caught);
	tcase_add_test(detector, test_seed_scenario_without_legacy_window_is_clean);
	tcase_add_test(
		detector, test_stale_slice_is_reported_when_the_new_owner_never_uses_the_memory);
	tcase_add_test(detector, test_legacy_early_free_reuse_is_a_use_after_free);
	tcase_add_test(detector, test_deferred_free_keeps_memory_until_last_use);
	suite_add_tcase(s, detector);

	tcase_add_test(device, test_fail_op_fails_that_launch_only);
	tcase_add_test(device, test_device_fail_op_does_no_work_and_fails_the_streams_events);
	tcase_add_test(device, test_device_failed_producer_fails_dependents_with_its_error);
	tcase_add_test(device, test_slice_overwrite_keeps_device_error_whole_overwrite_clears_it);
	tcase_add_test(device, test_memory_limit_and_use_are_counted);
	tcase_add_test(device, test_script_delay_is_slept_before_each_op_in_turn);
	tcase_add_test(device, test_destroy_runs_everything_queued);
	tcase_add_test(device, test_cancel_skips_what_has_not_begun);
	tcase_add_test(device, test_a_burst_gives_its_memory_back);
	tcase_add_test(device, test_launch_on_unknown_memory_is_refused);
	suite_add_tcase(s, device);

	tcase_add_test(parse, test_delay_specs_parse);
	tcase_add_test(parse, test_bad_delay_specs_are_rejected_with_a_reason);
	tcase_add_test(parse, test_inject_specs_parse);
	suite_add_tcase(s, parse);

	tcase_add_test(speed, test_throughput_of_simple_ops);
	suite_add_tcase(s, speed);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sim_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
