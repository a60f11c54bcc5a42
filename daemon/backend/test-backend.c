/* The backend conformance suite: what every backend does the same, through the real core
 * and, where the core would hide a refusal, through the device commands directly. One
 * file built once per backend with its factory from the backend's folder (test-backend-sim,
 * test-backend-hip: skips (77) without a GPU, HIP first touched in Check's forked child).
 * What only one backend has (the sim's detector, delays and injected faults; hip's pools,
 * audit, submit thread and modules) is tested in sim/test-sim.c and hip/test-hip.c. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend-harness.h"
#include "backend.h"
#include "kernels.h"
#include "sequencer.h"

/* What a case may ask of the backend beyond its defaults. A backend without the means
 * ignores it: hip's timing is the device's own. */
struct conf_opts {
	bool jitter; /* random delays on every stream */
	bool slow_h2d; /* H2D copies take long: a missing wait would read stale data */
	bool fault; /* the first launch faults on the device (see conf_fault_payload) */
	bool lost; /* ... and the fault poisons the whole context (hip: any fault does) */
};

/* Where the backends differ by design, named once. */
struct conf_backend {
	const char *name; /* backend_info's backend */
	int cannot_run; /* what a launch of a kernel the backend has no code for fails with */
	bool fault_is_fatal; /* after a device fault, the other streams fail too */
	bool runs_cpu; /* it runs kernels' CPU versions (kernel_desc.cpu) */
};

/* ---- the factory: the backend under test, chosen at build time ---- */

/* From the backend's folder (BACKEND_CONFORMANCE, set by meson: sim/sim-conformance.h,
 * hip/hip-conformance.h): B and conf_present, conf_scaled, conf_reset_in_process,
 * conf_create, conf_fault_payload. */
#include BACKEND_CONFORMANCE

#define HARNESS_NAME B.name
#include "backend-world.h"

/* ---- one test's world: the backend, the core driving it, what came back ---- */

/* The backend with `o` (NULL: defaults) and, with scfg, the core driving it. */
static void h_setup(const struct seq_config *scfg, const struct conf_opts *o)
{
	const struct conf_opts none = {0};

	ck_assert_int_eq(h_world_open(scfg, conf_create, o ? o : &none), 0);
}

static uint64_t h_backend_findings(void)
{
	return backend_findings(&H.be);
}

/* How many of out[i] differ from by * in[i] (exact: by is a power of two). */
static size_t wrong_scaled(const float *in, const float *out, size_t n, float by)
{
	size_t wrong = 0;

	for (size_t i = 0; i < n; i++)
		wrong += out[i] != by * in[i];
	return wrong;
}

/* ---- the device commands directly, bypassing the core ---- */

static void be_release(uint64_t addr, uint64_t size)
{
	H.be.ops->dev.mem_release(H.be.ctx, addr, size);
}

/* Launch a one-access op at `at`: the view is [addr, addr + size). */
static int be_launch(struct seq_point at, enum seq_op_kind kind, struct op_payload *p,
	uint64_t addr, unsigned mode, uint64_t size)
{
	struct seq_op op = {.kind = kind, .naccess = 1, .payload = p};

	op.access[0] = (struct seq_access){NULL, mode, addr, size};
	return H.be.ops->dev.launch(H.be.ctx, at, &op);
}

/* Record (s, n) and wait for its completion; its status. */
static int be_record_wait(uint32_t s, uint64_t n)
{
	return harness_record_wait(&H.be, &H.cq, s, n);
}

/* ---- data through the core ---- */

/* H2D -> scale by 2 -> D2H of n floats; the wrong elements. */
static size_t round_trip(size_t n, unsigned seed)
{
	const size_t bytes = n * sizeof(float);
	struct seq_buffer *in, *out;
	float *src = h_stage(bytes), *dst = h_stage(bytes);
	size_t wrong;

	fill_pattern(src, n, seed);
	h_alloc(bytes, (struct seq_buffer * *[]){&in, &out}, 2);
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, in, src, bytes), 0);
	ck_assert_int_eq(h_scale(in, out, 2.0f, n), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, out, dst, bytes), 0);
	ck_assert_int_eq(h_sync(), 0);
	wrong = wrong_scaled(src, dst, n, 2.0f);
	h_free((struct seq_buffer *[]){in, out}, 2);
	h_unstage(src, bytes);
	h_unstage(dst, bytes);
	return wrong;
}

START_TEST(test_round_trip_gives_right_data)
{
	struct seq_config scfg = {0};

	h_setup(&scfg, NULL);
	ck_assert_uint_eq(round_trip(4096, 7), 0);
	ck_assert_uint_eq(round_trip(1 << 20, 1000), 0); /* big blocks too */
	ck_assert_uint_eq(h_backend_findings(), 0);
	h_teardown();
}
END_TEST

START_TEST(test_h2d_add_scale_d2d_d2h_round_trip)
{
	struct seq_config scfg = {0};
	enum { N = (1 << 20) + 37 }; /* not a multiple of the block */
	const size_t bytes = N * sizeof(float);
	struct seq_buffer *a, *b, *c, *d, *e;
	float *ha, *hb, *out;

	h_setup(&scfg, NULL);
	ha = h_stage(bytes);
	hb = h_stage(bytes);
	out = h_stage(bytes);
	for (unsigned round = 0; round < 3; round++) {
		fill_pattern(ha, N, round);
		fill_pattern(hb, N, 7 * round + 1);
		memset(out, 0, bytes);
		h_alloc(bytes, (struct seq_buffer * *[]){&a, &b, &c, &d, &e}, 5);
		h_add_halve((struct seq_buffer *[]){a, b, c, d, e}, ha, hb, out, N);
		ck_assert_int_eq(h_sync(), 0);
		for (size_t i = 0; i < N; i++)
			if (out[i] != (ha[i] + hb[i]) * 0.5f)
				ck_abort_msg("round %u: [%zu] %g != %g", round, i, out[i],
					(ha[i] + hb[i]) * 0.5f);
		h_free((struct seq_buffer *[]){a, b, c, d, e}, 5);
	}
	ck_assert_uint_ge(seq_counters(H.seq)->waits_enqueued, 3);
	ck_assert_uint_eq(h_backend_findings(), 0);
	h_unstage(ha, bytes);
	h_unstage(hb, bytes);
	h_unstage(out, bytes);
	h_teardown();
}
END_TEST

START_TEST(test_kernel_waits_for_a_delayed_h2d)
{
	struct seq_config scfg = {0};
	const struct conf_opts o = {.slow_h2d = true};

	h_setup(&scfg, &o);
	for (unsigned i = 0; i < 4; i++)
		ck_assert_uint_eq(round_trip(8192, 100 * i), 0);
	ck_assert_uint_ge(seq_counters(H.seq)->waits_enqueued, 4);
	ck_assert_uint_eq(h_backend_findings(), 0);
	h_teardown();
}
END_TEST

START_TEST(test_copies_over_several_d2h_and_d2d_streams_are_ordered)
{
	struct seq_config scfg = {.n_d2h = 2, .n_d2d = 2};
	const struct conf_opts o = {.jitter = true};
	const size_t n = conf_scaled(1 << 22, 256), bytes = n * 4;
	struct seq_buffer *a, *b, *c;
	uint32_t *src, *d1, *d2;

	h_setup(&scfg, &o);
	src = h_stage(bytes);
	d1 = h_stage(bytes);
	d2 = h_stage(bytes);
	h_alloc(bytes, (struct seq_buffer * *[]){&a, &b, &c}, 3);
	for (uint32_t round = 0; round < 8; round++) {
		for (size_t i = 0; i < n; i++)
			src[i] = round * 1000003u + (uint32_t)i;
		memset(d1, 0, bytes);
		memset(d2, 0, bytes);
		ck_assert_int_eq(h_copy(SEQ_OP_H2D, a, src, bytes), 0);
		ck_assert_int_eq(h_d2d(a, b, bytes), 0); /* D2D stream 4 or 5 */
		ck_assert_int_eq(h_d2d(b, c, bytes), 0);
		ck_assert_int_eq(h_copy(SEQ_OP_D2H, b, d1, bytes), 0); /* D2H stream 2 or 3 */
		ck_assert_int_eq(h_copy(SEQ_OP_D2H, c, d2, bytes), 0);
		ck_assert_int_eq(h_sync(), 0);
		ck_assert_mem_eq(d1, src, bytes);
		ck_assert_mem_eq(d2, src, bytes);
	}
	ck_assert_uint_eq(h_backend_findings(), 0);
	h_free((struct seq_buffer *[]){a, b, c}, 3);
	h_unstage(src, bytes);
	h_unstage(d1, bytes);
	h_unstage(d2, bytes);
	h_teardown();
}
END_TEST

START_TEST(test_streams_follow_the_core_layout)
{
	/* The backend builds its streams from the core's layout: with two D2H streams, both
	 * D2H copies run (streams 2 and 3), and a D2H launched directly on the D2D stream (4)
	 * is refused, not run on the wrong queue. */
	struct seq_config scfg = {.n_d2h = 2};
	struct seq_buffer *a;
	uint32_t host[16] = {0};
	struct op_payload p = {.host = host, .length = sizeof(host)};

	h_setup(&scfg, NULL);
	ck_assert_uint_eq(seq_layout(H.seq)->count[SEQ_STREAM_D2H], 2);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, sizeof(host), &a), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, a, host, sizeof(host)), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, a, host, sizeof(host)), 0);
	ck_assert_int_eq(h_sync(), 0);
	ck_assert_uint_eq(seq_counters(H.seq)->ops_completed, 2);
	ck_assert_int_eq(
		be_launch((struct seq_point){4, 1}, SEQ_OP_D2H, &p, a->addr, SEQ_READ, a->size),
		-EINVAL);
	seq_buffer_free(H.seq, a);
	h_teardown();
}
END_TEST

START_TEST(test_zero_element_launch_enqueues_nothing_and_completes)
{
	struct seq_config scfg = {0};
	struct seq_buffer *a;
	struct seq_point at;
	struct op_payload p = {.kernel = kernel_find("fill"), .nargs = 3};
	struct seq_op op = {.kind = SEQ_OP_EXEC, .naccess = 1, .payload = &p};

	h_setup(&scfg, NULL);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 64, &a), 0);
	p.args[0] = (struct karg){KARG_BUFFER, KARG_OUT, {.buf = {NULL, 64, 0}}};
	p.args[1] = F32(1.0f);
	p.args[2] = U64(0);
	p.elements = 0;
	op.access[0] = (struct seq_access){a, SEQ_WRITE};
	ck_assert_int_eq(seq_submit(H.seq, &op, &at), 0);
	ck_assert_uint_eq(at.seq, 1);
	h_await(a);
	ck_assert_int_eq(seq_buffer_error(H.seq, a), 0);
	ck_assert_uint_eq(seq_counters(H.seq)->ops_completed, 1);
	seq_buffer_free(H.seq, a);
	h_teardown();
}
END_TEST

START_TEST(test_overlapping_d2d_within_a_buffer_is_a_memmove)
{
	struct seq_config scfg = {0};
	enum { N = 1 << 20 };
	uint32_t *host, *out, *want;
	struct seq_buffer *a;

	h_setup(&scfg, NULL);
	host = h_stage(N * 4);
	out = h_stage(N * 4);
	want = malloc(N * 4);
	ck_assert_ptr_nonnull(want);
	for (size_t i = 0; i < N; i++)
		host[i] = (uint32_t)i;
	memcpy(want, host, N * 4);
	memmove(want + 9, want + 8, 1024 * 4); /* a small one first: hip's scratch grows */
	memmove(want + 1, want, (N - 1) * 4); /* forwards by one element */
	memmove(want, want + 3, (N - 3) * 4); /* backwards by three */
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &a), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, a, host, N * 4), 0);
	for (int k = 0; k < 3; k++) {
		static const uint64_t src[] = {32, 0, 12}, dst[] = {36, 4, 0};
		static const uint64_t len[] = {1024 * 4, (N - 1) * 4, (N - 3) * 4};
		struct op_payload p = {
			.src_offset = src[k], .dst_offset = dst[k], .length = len[k]};
		struct seq_op op = {
			.kind = SEQ_OP_D2D,
			.naccess = 1,
			.access = {{a, SEQ_READWRITE}},
			.payload = &p,
		};

		ck_assert_int_eq(seq_submit(H.seq, &op, NULL), 0);
	}
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, a, out, N * 4), 0);
	ck_assert_int_eq(h_sync(), 0);
	ck_assert_mem_eq(out, want, N * 4);
	seq_buffer_free(H.seq, a);
	free(want);
	h_unstage(host, N * 4);
	h_unstage(out, N * 4);
	h_teardown();
}
END_TEST

START_TEST(test_slice_waits_for_its_base_h2d)
{
	/* A kernel reading a slice is ordered after the H2D that wrote its base, and a copy
	 * into one slice lands in the base beside what the other holds. */
	struct seq_config scfg = {0};
	const struct conf_opts o = {.slow_h2d = true};
	enum { N = 1 << 16, HALF = N / 2 };
	struct seq_buffer *a, *lo, *hi, *out;
	float *host, *host2, *back, *outh;

	h_setup(&scfg, &o);
	host = h_stage(N * 4);
	host2 = h_stage(N * 4);
	back = h_stage(N * 4);
	outh = h_stage(HALF * 4);
	fill_pattern(host, N, 21);
	fill_pattern(host2, N, 22);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &a), 0);
	ck_assert_int_eq(seq_buffer_slice(H.seq, a, 0, HALF * 4, &lo), 0);
	ck_assert_int_eq(seq_buffer_slice(H.seq, a, HALF * 4, HALF * 4, &hi), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, HALF * 4, &out), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, a, host, N * 4), 0);
	ck_assert_int_eq(h_scale(hi, out, 2.0f, HALF), 0);
	ck_assert_uint_ge(seq_counters(H.seq)->waits_enqueued, 1);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, out, outh, HALF * 4), 0);
	ck_assert_int_eq(h_sync(), 0);
	ck_assert_uint_eq(wrong_scaled(host + HALF, outh, HALF, 2.0f), 0);
	/* Rewrite lo only; the whole base reads lo's new data and hi's old. */
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, lo, host2, HALF * 4), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, a, back, N * 4), 0);
	ck_assert_int_eq(h_sync(), 0);
	ck_assert_mem_eq(back, host2, HALF * 4);
	ck_assert_mem_eq(back + HALF, host + HALF, HALF * 4);
	ck_assert_uint_eq(h_backend_findings(), 0);
	h_free((struct seq_buffer *[]){lo, hi, a, out}, 4);
	h_unstage(host, N * 4);
	h_unstage(host2, N * 4);
	h_unstage(back, N * 4);
	h_unstage(outh, HALF * 4);
	h_teardown();
}
END_TEST

/* The bug sseq exists for, sequenced: a big H2D copy on its stream, the compute stream
 * moving on (small kernels, each seen complete), then a kernel reading the copy. Returns
 * the trials whose kernel read anything but the copied data. */
static unsigned seed_trials(unsigned trials, size_t n)
{
	struct seq_config scfg = {0};
	const struct conf_opts o = {.slow_h2d = true};
	const size_t bytes = n * 4;
	struct seq_buffer *in, *tmp, *out;
	float *host, *back;
	unsigned wrong = 0;

	h_setup(&scfg, &o);
	host = h_stage(bytes);
	back = h_stage(bytes);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 4096, &tmp), 0);
	for (unsigned t = 0; t < trials; t++) {
		size_t bad = 0;

		for (size_t i = 0; i < n; i++)
			host[i] = (float)(t * 7 + 1) + (float)(i & 1023);
		h_alloc(bytes, (struct seq_buffer * *[]){&in, &out}, 2);
		ck_assert_int_eq(h_copy(SEQ_OP_H2D, in, host, bytes), 0);
		for (int i = 0; i < 4; i++) {
			ck_assert_int_eq(h_exec("fill", (struct karg[]){BUF, F32(1.0f), U64(1)}, 3,
						 (struct seq_buffer *[]){tmp}),
				0);
			h_await(tmp);
		}
		ck_assert_int_eq(h_scale(in, out, 1.0f, n), 0);
		ck_assert_int_eq(h_copy(SEQ_OP_D2H, out, back, bytes), 0);
		ck_assert_int_eq(h_sync(), 0);
		for (size_t i = 0; i < n; i++)
			bad += back[i] != host[i];
		wrong += bad != 0;
		h_free((struct seq_buffer *[]){in, out}, 2);
	}
	ck_assert_uint_ge(seq_counters(H.seq)->waits_enqueued, trials);
	ck_assert_uint_eq(h_backend_findings(), 0);
	seq_buffer_free(H.seq, tmp);
	h_unstage(host, bytes);
	h_unstage(back, bytes);
	h_teardown();
	return wrong;
}

START_TEST(test_seed_h2d_then_kernel_reads_the_copy)
{
	const unsigned trials = conf_scaled(50, 10);
	unsigned wrong = seed_trials(trials, conf_scaled(16 << 20, 64));

	printf("%s: seed scenario, sequenced: %u of %u trials read stale data\n", B.name, wrong,
		trials);
	ck_assert_uint_eq(wrong, 0);
}
END_TEST

START_TEST(test_staging_register_and_copies_through_it)
{
	static const size_t sizes[] = {4096, 4 << 20};
	struct seq_config scfg = {0};

	h_setup(&scfg, NULL);
	for (unsigned k = 0; k < 2; k++) {
		const size_t size = sizes[k];
		struct seq_buffer *a, *b;
		uint8_t *src = h_stage(size), *dst = h_stage(size);

		for (size_t i = 0; i < size; i++)
			src[i] = (uint8_t)(i * 7 + k);
		h_alloc(size, (struct seq_buffer * *[]){&a, &b}, 2);
		ck_assert_int_eq(h_copy(SEQ_OP_H2D, a, src, size), 0);
		ck_assert_int_eq(h_d2d(a, b, size), 0);
		ck_assert_int_eq(h_copy(SEQ_OP_D2H, b, dst, size), 0);
		ck_assert_int_eq(h_sync(), 0);
		ck_assert_mem_eq(dst, src, size);
		h_free((struct seq_buffer *[]){a, b}, 2);
		/* Unregistered and registered again: the same mapping is staging once more. */
		backend_staging_unregister(&H.be, src, size);
		ck_assert_int_eq(backend_staging_register(&H.be, src, size), 0);
		h_unstage(src, size);
		h_unstage(dst, size);
	}
	ck_assert_uint_eq(h_backend_findings(), 0);
	h_teardown();
}
END_TEST

/* ---- memory and refusals, on the device commands ---- */

START_TEST(test_launch_refuses_what_it_cannot_run_safely)
{
	/* backend_op_check's refusals, whatever the backend: past the view, the wrong stream
	 * for the kind, an out-of-order point; and a record of a point never launched. */
	uint32_t host[64];
	struct op_payload h2d = {.host = host, .length = sizeof(host)};
	struct op_payload nohost = {.length = sizeof(host)};
	uint64_t a;

	h_setup(NULL, NULL);
	for (unsigned i = 0; i < 64; i++)
		host[i] = i;
	a = be_alloc(sizeof(host));
	ck_assert_int_eq(
		be_launch((struct seq_point){1, 1}, SEQ_OP_H2D, &h2d, a, SEQ_WRITE, 128), -EINVAL);
	ck_assert_int_eq(
		be_launch((struct seq_point){0, 1}, SEQ_OP_H2D, &h2d, a, SEQ_WRITE, 256), -EINVAL);
	ck_assert_int_eq(
		be_launch((struct seq_point){1, 2}, SEQ_OP_H2D, &h2d, a, SEQ_WRITE, 256), -EINVAL);
	ck_assert_int_eq(
		be_launch((struct seq_point){1, 1}, SEQ_OP_H2D, &nohost, a, SEQ_WRITE, 256),
		-EINVAL);
	ck_assert_int_eq(H.be.ops->dev.record(H.be.ctx, (struct seq_point){1, 1}), -EINVAL);
	/* Nothing refused was counted: point 1 is still the next. */
	ck_assert_int_eq(
		be_launch((struct seq_point){1, 1}, SEQ_OP_H2D, &h2d, a, SEQ_WRITE, 256), 0);
	ck_assert_int_eq(be_record_wait(1, 1), 0);
	be_release(a, sizeof(host));
	ck_assert_uint_eq(h_backend_findings(), 0);
	h_teardown();
}
END_TEST

START_TEST(test_released_memory_is_reused_lifo_by_size_class)
{
	uint64_t a, b, c, d, e;

	h_setup(NULL, NULL);
	a = be_alloc(1000);
	b = be_alloc(1000);
	c = be_alloc(5000);
	ck_assert(a != b && b != c && a != c);
	be_release(a, 1000);
	be_release(c, 5000);
	be_release(b, 1000);
	d = be_alloc(1001); /* the 1024 class: the latest released first */
	e = be_alloc(1024);
	ck_assert_uint_eq(d, b);
	ck_assert_uint_eq(e, a);
	be_release(d, 1001);
	be_release(e, 1024);
	ck_assert_uint_eq(h_backend_findings(), 0);
	be_release(d, 1001); /* twice: reported, not reused */
	ck_assert_uint_eq(h_backend_findings(), 1);
	ck_assert_uint_eq(H.findings, 1);
	ck_assert_msg(strstr(H.finding, "that is not allocated"), "finding: %s", H.finding);
	d = be_alloc(1024);
	e = be_alloc(1024);
	ck_assert_uint_ne(d, e);
	be_release(d, 1024);
	be_release(e, 1024);
	h_teardown();
}
END_TEST

START_TEST(test_freed_buffer_memory_comes_back_only_after_its_last_use)
{
	struct seq_config scfg = {0};
	struct seq_buffer *a, *b;
	uint64_t addr;

	h_setup(&scfg, NULL);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 1 << 20, &a), 0);
	addr = a->addr;
	/* A 50 ms kernel, then one writing a; the owner lets go at once: the memory stays
	 * a's until that kernel is done. */
	ck_assert_int_eq(h_exec("spin", (struct karg[]){U64(50000)}, 1, NULL), 0);
	ck_assert_int_eq(h_exec("fill", (struct karg[]){BUF, F32(1.0f), U64(1 << 18)}, 3,
				 (struct seq_buffer *[]){a}),
		0);
	seq_buffer_free(H.seq, a);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 1 << 20, &b), 0);
	ck_assert_uint_ne(b->addr, addr);
	seq_buffer_free(H.seq, b);
	ck_assert_int_eq(h_sync(), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 1 << 20, &a), 0);
	ck_assert(a->addr == addr || a->addr == b->addr);
	seq_buffer_free(H.seq, a);
	ck_assert_uint_eq(h_backend_findings(), 0);
	h_teardown();
}
END_TEST

START_TEST(test_info_names_the_backend_and_counts_memory)
{
	struct backend_info before, during, after;
	uint64_t a;

	h_setup(NULL, NULL);
	backend_info(&H.be, &before);
	ck_assert_str_eq(before.backend, B.name);
	ck_assert_uint_gt(strlen(before.name), 0);
	ck_assert_uint_gt(before.memory_total, 0);
	ck_assert_uint_le(before.memory_used, before.memory_total);
	a = be_alloc(1 << 20);
	backend_info(&H.be, &during);
	ck_assert_uint_ge(during.memory_used, before.memory_used + (1 << 20));
	ck_assert_uint_le(during.memory_used, during.memory_total);
	be_release(a, 1 << 20);
	backend_info(&H.be, &after);
	ck_assert_uint_eq(after.memory_used, before.memory_used);
	ck_assert_str_eq(after.name, before.name);
	h_teardown();
}
END_TEST

/* ---- errors ---- */

static void cpu_nothing(const struct karg *args, uint64_t elements)
{
	(void)args;
	(void)elements;
}

START_TEST(test_kernel_the_backend_cannot_run_fails_its_launch)
{
	/* Neither in hip's image nor with a CPU version the sim could run (the CPU pointer
	 * stays NULL in the sim build). */
	const struct kernel_desc k_other = {
		.name = "not_built_in",
		.nargs = 1,
		.types = {KARG_BUFFER},
		.access = {KARG_OUT},
		.cpu = B.runs_cpu ? NULL : cpu_nothing,
	};
	struct seq_config scfg = {0};
	struct seq_buffer *a, *b;
	struct op_payload p = {.kernel = &k_other, .nargs = 1, .elements = 16};
	struct seq_op op = {.kind = SEQ_OP_EXEC, .naccess = 1, .payload = &p};

	(void)cpu_nothing;
	h_setup(&scfg, NULL);
	h_alloc(64, (struct seq_buffer * *[]){&a, &b}, 2);
	p.args[0] = (struct karg){KARG_BUFFER, KARG_OUT, {.buf = {NULL, 64, 0}}};
	op.access[0] = (struct seq_access){a, SEQ_WRITE};
	ck_assert_int_eq(seq_submit(H.seq, &op, NULL), B.cannot_run);
	ck_assert_int_eq(op.fail_cause, SEQ_FAIL_LAUNCH);
	ck_assert_int_eq(seq_buffer_error(H.seq, a), B.cannot_run);
	/* What reads the failed buffer fails with its error; the device is fine. */
	ck_assert_int_eq(h_d2d(a, b, 64), B.cannot_run);
	ck_assert_int_eq(h_exec("fill", (struct karg[]){BUF, F32(1.0f), U64(16)}, 3,
				 (struct seq_buffer *[]){b}),
		0);
	h_await(b);
	ck_assert_int_eq(seq_buffer_error(H.seq, b), 0);
	h_free((struct seq_buffer *[]){a, b}, 2);
	h_teardown();
}
END_TEST

/* A fill of the 4096-byte buffer a that faults on the device (conf_fault_payload); the
 * core accepts it. */
static void submit_faulting_fill(struct seq_buffer *a)
{
	struct op_payload p = {.kernel = kernel_find("fill"), .nargs = 3, .elements = 1024};
	struct seq_op op = {.kind = SEQ_OP_EXEC, .naccess = 1, .payload = &p};

	p.args[0] = (struct karg){KARG_BUFFER, KARG_OUT, {.buf = {NULL, 4096, 0}}};
	p.args[1] = F32(1.0f);
	p.args[2] = U64(1024);
	conf_fault_payload(&p);
	op.access[0] = (struct seq_access){a, SEQ_WRITE};
	ck_assert_int_eq(seq_submit(H.seq, &op, NULL), 0);
}

START_TEST(test_device_fault_fails_what_depends_on_it)
{
	/* A kernel that faults on the device (accepted at launch, failed through its
	 * completion): its buffer, its stream and what waited on it across streams get the
	 * device's error, and the sync reports it. */
	struct seq_config scfg = {0};
	const struct conf_opts o = {.fault = true};
	struct seq_stream_info info;
	struct seq_buffer *a, *b, *c;
	uint32_t *host;
	int r;

	h_setup(&scfg, &o);
	host = h_stage(4096);
	h_alloc(4096, (struct seq_buffer * *[]){&a, &b, &c}, 3);
	submit_faulting_fill(a);
	/* Depends on the fault through a cross-stream wait. */
	r = h_d2d(a, b, 4096);
	ck_assert_msg(r == 0 || r == -EIO, "d2d: %d", r);
	r = h_sync();
	printf("%s: device fault reported as %d (%s)\n", B.name, r, strerror(-r));
	ck_assert_int_eq(r, -EIO);
	ck_assert_int_eq(seq_buffer_error(H.seq, a), -EIO);
	ck_assert_int_eq(seq_buffer_error(H.seq, b), -EIO);
	seq_stream_info(H.seq, 0, &info);
	ck_assert_int_eq(info.error, -EIO);
	/* A kernel reading the failed buffer is not launched. */
	ck_assert_int_eq(h_scale(a, c, 1.0f, 1024), -EIO);
	/* Independent work: hip's device is gone for this process (it fails, it does not
	 * hang); the sim's other streams run on. */
	r = h_copy(SEQ_OP_H2D, c, host, 4096);
	if (B.fault_is_fatal) {
		ck_assert_int_lt(r, 0);
	} else {
		ck_assert_int_eq(r, 0);
		h_await(c);
		ck_assert_int_eq(seq_buffer_error(H.seq, c), 0);
	}
	h_free((struct seq_buffer *[]){a, b, c}, 3);
	h_unstage(host, 4096);
	h_teardown();
}
END_TEST

START_TEST(test_a_lost_context_is_reset_and_serves_again)
{
	/* A fault that poisons the context: the backend says so, its reset builds it again
	 * (the old context's completions discarded, the core's state failed and lost by
	 * seq_reset), the registered staging range works again, and new buffers give right
	 * data through every stream kind. */
	struct seq_config scfg = {0};
	const struct conf_opts o = {.fault = true, .lost = true};
	struct seq_buffer *a, *bufs[5];
	float *ha, *hb, *out;
	struct cq_batch batch;
	int r;

	h_setup(&scfg, &o);
	ha = h_stage(4096);
	hb = h_stage(4096);
	out = h_stage(4096);
	h_alloc(4096, (struct seq_buffer * *[]){&a}, 1);
	submit_faulting_fill(a);
	ck_assert_int_eq(h_sync(), -EIO);
	ck_assert(backend_device_lost(&H.be));

	r = backend_reset(&H.be);
	printf("%s: reset after a lost context: %d\n", B.name, r);
	if (r < 0 && !conf_reset_in_process()) {
		/* CUDA cannot make a context again in a process after a sticky fault: the
		 * daemon restarts in place instead (tests/test-reset.c, tests/gpu/fault.sh). */
		printf("%s: the context cannot be made again in this process: %s\n", B.name,
			strerror(-r));
		ck_assert(backend_device_lost(&H.be));
		batch = cq_take(&H.cq.q);
		cq_done(&H.cq.q, batch);
		seq_reset(H.seq, -EIO);
		verify_reset(H.verify);
		h_free((struct seq_buffer *[]){a}, 1);
		h_unstage(ha, 4096);
		h_unstage(hb, 4096);
		h_unstage(out, 4096);
		h_teardown();
		return;
	}
	ck_assert_int_eq(r, 0);
	ck_assert(!backend_device_lost(&H.be));
	batch = cq_take(&H.cq.q); /* the old context's: seq_reset fails all of it */
	cq_done(&H.cq.q, batch);
	ck_assert_uint_eq(seq_reset(H.seq, -EIO), 1);
	verify_reset(H.verify);
	ck_assert_int_eq(seq_buffer_error(H.seq, a), -ENXIO);

	h_alloc(4096, (struct seq_buffer * *[]){&bufs[0], &bufs[1], &bufs[2], &bufs[3], &bufs[4]},
		5);
	for (unsigned i = 0; i < 1024; i++) {
		ha[i] = (float)i;
		hb[i] = 3.0f * (float)i;
	}
	h_add_halve(bufs, ha, hb, out, 1024);
	ck_assert_int_eq(h_sync(), 0);
	for (unsigned i = 0; i < 1024; i++)
		if (out[i] != 2.0f * (float)i)
			ck_abort_msg("[%u] %g != %g after the reset", i, out[i], 2.0f * (float)i);
	h_free(bufs, 5);
	h_free((struct seq_buffer *[]){a}, 1);
	h_unstage(ha, 4096);
	h_unstage(hb, 4096);
	h_unstage(out, 4096);
	h_teardown();
}
END_TEST

static Suite *backend_suite(void)
{
	Suite *s = suite_create(B.name);
	TCase *data = tcase_create("data");
	TCase *memory = tcase_create("memory");
	TCase *errors = tcase_create("errors");

	tcase_add_test(data, test_round_trip_gives_right_data);
	tcase_add_test(data, test_h2d_add_scale_d2d_d2h_round_trip);
	tcase_add_test(data, test_kernel_waits_for_a_delayed_h2d);
	tcase_add_test(data, test_copies_over_several_d2h_and_d2d_streams_are_ordered);
	tcase_add_test(data, test_streams_follow_the_core_layout);
	tcase_add_test(data, test_zero_element_launch_enqueues_nothing_and_completes);
	tcase_add_test(data, test_overlapping_d2d_within_a_buffer_is_a_memmove);
	tcase_add_test(data, test_slice_waits_for_its_base_h2d);
	tcase_add_test(data, test_seed_h2d_then_kernel_reads_the_copy);
	tcase_add_test(data, test_staging_register_and_copies_through_it);
	suite_add_tcase(s, data);

	tcase_add_test(memory, test_launch_refuses_what_it_cannot_run_safely);
	tcase_add_test(memory, test_released_memory_is_reused_lifo_by_size_class);
	tcase_add_test(memory, test_freed_buffer_memory_comes_back_only_after_its_last_use);
	tcase_add_test(memory, test_info_names_the_backend_and_counts_memory);
	suite_add_tcase(s, memory);

	tcase_add_test(errors, test_kernel_the_backend_cannot_run_fails_its_launch);
	tcase_add_test(errors, test_device_fault_fails_what_depends_on_it);
	tcase_add_test(errors, test_a_lost_context_is_reset_and_serves_again);
	suite_add_tcase(s, errors);
	return s;
}

int main(void)
{
	SRunner *sr;
	int failed;

	if (!conf_present()) {
		printf("test-backend-%s: no device: skipped\n", B.name);
		return 77;
	}
	sr = srunner_create(backend_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
