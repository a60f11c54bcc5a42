/* Tests for the hip backend (daemon/hip.c) on a real GPU, through the real sequencer core:
 * data round trips through every built-in kernel, the seed scenario, the caching pool,
 * errors flowing forward, and how fast completion is learned. Skips (77) without a GPU;
 * HIP is first touched in a forked child, so Check's fork() always comes first. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "hip.h"
#include "kernels.h"
#include "sequencer.h"

/* One test's world: the backend, the core driving it, and what came back from the
 * completion threads. Those only push to the locked queue; the test thread calls
 * seq_complete(), as the server's loop does. */
struct harness {
	struct backend be;
	struct seq *seq;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct seq_point *done_q;
	int *status_q;
	size_t nq, capq;
	uint64_t dones;
	int last_status;
};

static struct harness H;

static void h_complete(void *arg, struct seq_point p, int status)
{
	pthread_mutex_lock(&H.mu);
	if (H.nq == H.capq) {
		size_t cap = H.capq ? 2 * H.capq : 64;

		H.done_q = realloc(H.done_q, cap * sizeof(*H.done_q));
		H.status_q = realloc(H.status_q, cap * sizeof(*H.status_q));
		if (!H.done_q || !H.status_q)
			abort();
		H.capq = cap;
	}
	H.done_q[H.nq] = p;
	H.status_q[H.nq] = status;
	H.nq++;
	pthread_cond_signal(&H.cond);
	pthread_mutex_unlock(&H.mu);
}

static void h_done(void *ctx, uint64_t cookie, int status)
{
	H.dones++;
	H.last_status = status;
}

/* Hand queued completions to the core; with `block`, wait (bounded) for at least one. */
static size_t h_drain(bool block)
{
	struct seq_point *q;
	int *st;
	size_t n;

	pthread_mutex_lock(&H.mu);
	if (block && H.nq == 0) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 20;
		while (H.nq == 0)
			if (pthread_cond_timedwait(&H.cond, &H.mu, &until) == ETIMEDOUT)
				break;
	}
	q = H.done_q;
	st = H.status_q;
	n = H.nq;
	H.done_q = NULL;
	H.status_q = NULL;
	H.nq = H.capq = 0;
	pthread_mutex_unlock(&H.mu);
	if (block)
		ck_assert_msg(n > 0, "no completion within 20 s");
	for (size_t i = 0; i < n; i++) {
		if (H.seq)
			seq_complete(H.seq, q[i], st[i]);
		else
			H.last_status = st[i];
	}
	free(q);
	free(st);
	return n;
}

static const char *h_kernels(void)
{
	/* The build tree moves when the tests run elsewhere (the GPU machine). */
	return getenv("SSEQ_KERNELS");
}

static int h_try_setup(const struct seq_config *scfg, struct hip_config *hcfg)
{
	struct hip_config def = {0};
	struct seq_backend sb;
	int r;

	memset(&H, 0, sizeof(H));
	pthread_mutex_init(&H.mu, NULL);
	pthread_cond_init(&H.cond, NULL);
	if (!hcfg)
		hcfg = &def;
	if (!hcfg->kernels)
		hcfg->kernels = h_kernels();
	if (scfg) {
		hcfg->n_d2h = scfg->n_d2h;
		hcfg->n_d2d = scfg->n_d2d;
	}
	r = hip_create(&H.be, hcfg, h_complete, NULL, NULL);
	if (r < 0 || !scfg)
		return r;
	sb = H.be.ops->seq;
	sb.ctx = H.be.ctx;
	sb.done = h_done;
	ck_assert_int_eq(seq_create(&H.seq, scfg, &sb), 0);
	return 0;
}

static void h_setup(const struct seq_config *scfg, struct hip_config *hcfg)
{
	ck_assert_int_eq(h_try_setup(scfg, hcfg), 0);
}

/* Until everything issued so far has completed; its status. */
static int h_sync(void)
{
	uint64_t want = H.dones + 1;
	int r = seq_sync(H.seq, 1);

	if (r < 0)
		return r;
	if (r == 1)
		return 0;
	while (H.dones < want) {
		seq_flush(H.seq);
		h_drain(true);
	}
	return H.last_status;
}

/* Until buf's producer has completed. */
static void h_await(struct seq_buffer *buf)
{
	uint64_t want = H.dones + 1;
	int r = seq_await(H.seq, buf, 1);

	ck_assert_int_ge(r, 0);
	if (r == 1)
		return;
	while (H.dones < want) {
		seq_flush(H.seq);
		h_drain(true);
	}
}

static void h_teardown(void)
{
	if (H.seq) {
		h_sync();
		seq_destroy(H.seq);
		H.seq = NULL;
	}
	H.be.ops->destroy(H.be.ctx);
	h_drain(false);
	pthread_cond_destroy(&H.cond);
	pthread_mutex_destroy(&H.mu);
}

/* Host memory as the daemon has it: a mapping registered as staging (pinned). */
static void *h_stage(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ck_assert(p != MAP_FAILED);
	ck_assert_int_eq(H.be.ops->staging_register(H.be.ctx, p, size), 0);
	return p;
}

static void h_unstage(void *p, size_t size)
{
	H.be.ops->staging_unregister(H.be.ctx, p, size);
	munmap(p, size);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- ops through the core ---- */

static int h_copy(enum seq_op_kind kind, struct seq_buffer *buf, void *host, uint64_t len)
{
	struct op_payload p = {.host = host, .length = len};
	struct seq_op op = {
		.kind = kind,
		.naccess = 1,
		.access = {{buf, kind == SEQ_OP_H2D ? SEQ_WRITE : SEQ_READ}},
		.payload = &p,
	};

	return seq_submit(H.seq, &op, NULL);
}

static int h_d2d(struct seq_buffer *src, struct seq_buffer *dst, uint64_t len)
{
	struct op_payload p = {.length = len};
	struct seq_op op = {
		.kind = SEQ_OP_D2D,
		.naccess = 2,
		.access = {{src, SEQ_READ}, {dst, SEQ_WRITE}},
		.payload = &p,
	};

	return seq_submit(H.seq, &op, NULL);
}

/* A built-in kernel by name, its arguments validated as the server validates them. The
 * buffers in `bufs` are taken in order by the buffer arguments. */
static int h_exec(
	const char *name, const struct karg *in, unsigned nargs, struct seq_buffer *const *bufs)
{
	const struct kernel_desc *k = kernel_find(name);
	struct op_payload p = {.kernel = k, .nargs = nargs};
	struct seq_op op = {.kind = SEQ_OP_EXEC, .payload = &p};
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

#define BUF ((struct karg){.type = KARG_BUFFER})
#define F32(x) ((struct karg){.type = KARG_F32, .v.f32 = (x)})
#define U64(x) ((struct karg){.type = KARG_U64, .v.u64 = (x)})
#define I32(x) ((struct karg){.type = KARG_I32, .v.i32 = (x)})

static void fill_pattern(float *v, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		v[i] = (float)((i * 2654435761u + seed) % 1000003u) * 0.001f;
}

/* ---- data through the core ---- */

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
		ck_assert_int_eq(seq_buffer_alloc(H.seq, bytes, &a), 0);
		ck_assert_int_eq(seq_buffer_alloc(H.seq, bytes, &b), 0);
		ck_assert_int_eq(seq_buffer_alloc(H.seq, bytes, &c), 0);
		ck_assert_int_eq(seq_buffer_alloc(H.seq, bytes, &d), 0);
		ck_assert_int_eq(seq_buffer_alloc(H.seq, bytes, &e), 0);
		ck_assert_int_eq(h_copy(SEQ_OP_H2D, a, ha, bytes), 0);
		ck_assert_int_eq(h_copy(SEQ_OP_H2D, b, hb, bytes), 0);
		ck_assert_int_eq(h_exec("add", (struct karg[]){BUF, BUF, BUF, U64(N)}, 4,
					 (struct seq_buffer *[]){a, b, c}),
			0);
		ck_assert_int_eq(h_exec("scale", (struct karg[]){BUF, BUF, F32(0.5f), U64(N)}, 4,
					 (struct seq_buffer *[]){c, d}),
			0);
		ck_assert_int_eq(h_d2d(d, e, bytes), 0);
		ck_assert_int_eq(h_copy(SEQ_OP_D2H, e, out, bytes), 0);
		ck_assert_int_eq(h_sync(), 0);
		for (size_t i = 0; i < N; i++)
			ck_assert_msg(out[i] == (ha[i] + hb[i]) * 0.5f, "round %u: [%zu] %g != %g",
				round, i, out[i], (ha[i] + hb[i]) * 0.5f);
		seq_buffer_free(H.seq, a);
		seq_buffer_free(H.seq, b);
		seq_buffer_free(H.seq, c);
		seq_buffer_free(H.seq, d);
		seq_buffer_free(H.seq, e);
	}
	ck_assert_uint_ge(seq_counters(H.seq)->waits_enqueued, 3);
	h_unstage(ha, bytes);
	h_unstage(hb, bytes);
	h_unstage(out, bytes);
	h_teardown();
}
END_TEST

START_TEST(test_conv2d_matches_the_cpu_version)
{
	struct seq_config scfg = {0};
	/* N C H W O KH KW, stride h w, pad t b l r, lhs dil h w, rhs dil h w, groups */
	const int32_t s[18] = {2, 4, 9, 7, 6, 3, 2, 2, 1, 1, 0, 1, 1, 1, 2, 2, 1, 2};
	struct kernel_conv2d p;
	struct karg args[21] = {BUF, BUF, BUF};
	size_t nx, nw, ny;
	float *x, *w, *y, *want;
	struct seq_buffer *bx, *bw, *by;
	const struct kernel_desc *k = kernel_find("conv2d");

	for (int i = 0; i < 18; i++)
		args[3 + i] = I32(s[i]);
	kernel_conv2d_from_args(args, &p);
	ck_assert_int_eq(kernel_conv2d_out_shape(&p, NULL), 0);
	nx = (size_t)p.n * p.c * p.h * p.w;
	nw = (size_t)p.o * (p.c / p.groups) * p.kh * p.kw;
	ny = (size_t)p.n * p.o * p.oh * p.ow;

	h_setup(&scfg, NULL);
	x = h_stage(nx * 4);
	w = h_stage(nw * 4);
	y = h_stage(ny * 4);
	want = calloc(ny, 4);
	ck_assert_ptr_nonnull(want);
	fill_pattern(x, nx, 3);
	fill_pattern(w, nw, 5);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, nx * 4, &bx), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, nw * 4, &bw), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, ny * 4, &by), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, bx, x, nx * 4), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_H2D, bw, w, nw * 4), 0);
	ck_assert_int_eq(h_exec("conv2d", args, 21, (struct seq_buffer *[]){bx, bw, by}), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, by, y, ny * 4), 0);
	ck_assert_int_eq(h_sync(), 0);

	args[0].v.buf.ptr = x;
	args[1].v.buf.ptr = w;
	args[2].v.buf.ptr = want;
	k->cpu(args, ny);
	/* The same body in the same order; the GPU may fuse multiply-adds. */
	for (size_t i = 0; i < ny; i++)
		ck_assert_msg(fabsf(y[i] - want[i]) <= 1e-5f * fmaxf(1.0f, fabsf(want[i])),
			"[%zu] %g != %g", i, y[i], want[i]);
	free(want);
	h_unstage(x, nx * 4);
	h_unstage(w, nw * 4);
	h_unstage(y, ny * 4);
	h_teardown();
}
END_TEST

START_TEST(test_fill_iota_reduce_and_spin_run_on_the_device)
{
	struct seq_config scfg = {0};
	enum { N = 100000 };
	struct seq_buffer *a, *sum;
	float *out, *s;
	double t0, dt;

	h_setup(&scfg, NULL);
	out = h_stage(N * 4);
	s = h_stage(4096);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &a), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 4, &sum), 0);
	ck_assert_int_eq(h_exec("iota", (struct karg[]){BUF, F32(1.0f), F32(0.5f), U64(N)}, 4,
				 (struct seq_buffer *[]){a}),
		0);
	ck_assert_int_eq(h_exec("reduce_sum", (struct karg[]){BUF, BUF, U64(N)}, 3,
				 (struct seq_buffer *[]){a, sum}),
		0);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, a, out, N * 4), 0);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, sum, s, 4), 0);
	ck_assert_int_eq(h_sync(), 0);
	for (size_t i = 0; i < N; i++)
		ck_assert_float_eq(out[i], 1.0f + (float)i * 0.5f);
	ck_assert_float_eq_tol(s[0], (float)(N * 1.0 + 0.5 * (N - 1.0) * N / 2), 1.0f);

	ck_assert_int_eq(h_exec("fill", (struct karg[]){BUF, F32(-2.5f), U64(N)}, 3,
				 (struct seq_buffer *[]){a}),
		0);
	ck_assert_int_eq(h_copy(SEQ_OP_D2H, a, out, N * 4), 0);
	ck_assert_int_eq(h_sync(), 0);
	for (size_t i = 0; i < N; i++)
		ck_assert_float_eq(out[i], -2.5f);

	/* 20 ms on the device clock: the host sees at least that. */
	t0 = now_s();
	ck_assert_int_eq(h_exec("spin", (struct karg[]){U64(20000)}, 1, NULL), 0);
	ck_assert_int_eq(h_sync(), 0);
	dt = now_s() - t0;
	printf("hip: spin 20000 us took %.1f ms on the host\n", dt * 1e3);
	ck_assert_msg(dt >= 0.019 && dt < 2.0, "spin took %.3f s", dt);
	h_unstage(out, N * 4);
	h_unstage(s, 4096);
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
	h_teardown();
}
END_TEST

START_TEST(test_copies_over_several_d2h_and_d2d_streams_are_ordered)
{
	struct seq_config scfg = {.n_d2h = 2, .n_d2d = 2};
	enum { N = 1 << 22 };
	struct seq_buffer *a, *b, *c;
	uint32_t *src, *d1, *d2;

	h_setup(&scfg, NULL);
	src = h_stage(N * 4);
	d1 = h_stage(N * 4);
	d2 = h_stage(N * 4);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &a), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &b), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, N * 4, &c), 0);
	for (uint32_t round = 0; round < 8; round++) {
		for (size_t i = 0; i < N; i++)
			src[i] = round * 1000003u + (uint32_t)i;
		ck_assert_int_eq(h_copy(SEQ_OP_H2D, a, src, N * 4), 0);
		ck_assert_int_eq(h_d2d(a, b, N * 4), 0);
		ck_assert_int_eq(h_d2d(b, c, N * 4), 0);
		ck_assert_int_eq(h_copy(SEQ_OP_D2H, b, d1, N * 4), 0);
		ck_assert_int_eq(h_copy(SEQ_OP_D2H, c, d2, N * 4), 0);
		ck_assert_int_eq(h_sync(), 0);
		ck_assert_mem_eq(d1, src, N * 4);
		ck_assert_mem_eq(d2, src, N * 4);
	}
	h_unstage(src, N * 4);
	h_unstage(d1, N * 4);
	h_unstage(d2, N * 4);
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
	memmove(want + 9, want + 8, 1024 * 4); /* a small one first: the scratch grows */
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
	free(want);
	h_unstage(host, N * 4);
	h_unstage(out, N * 4);
	h_teardown();
}
END_TEST

/* ---- the seed ---- */

/* The bug sseq exists for: a 64 MiB H2D copy on its stream, the compute stream moving on
 * (small kernels, each seen complete), then a kernel reading the copy. Returns the trials
 * (of `trials`) whose kernel read anything but the copied data. */
static unsigned seed_trials(unsigned legacy_window, unsigned trials)
{
	struct seq_config scfg = {.legacy_sync_window = legacy_window};
	enum { N = 16 << 20 }; /* floats: 64 MiB */
	const size_t bytes = (size_t)N * 4;
	struct seq_buffer *in, *tmp, *out;
	float *host, *back;
	unsigned wrong = 0;

	h_setup(&scfg, NULL);
	host = h_stage(bytes);
	back = h_stage(bytes);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 4096, &tmp), 0);
	for (unsigned t = 0; t < trials; t++) {
		size_t bad = 0;

		for (size_t i = 0; i < N; i++)
			host[i] = (float)(t * 7 + 1) + (float)(i & 1023);
		ck_assert_int_eq(seq_buffer_alloc(H.seq, bytes, &in), 0);
		ck_assert_int_eq(seq_buffer_alloc(H.seq, bytes, &out), 0);
		ck_assert_int_eq(h_copy(SEQ_OP_H2D, in, host, bytes), 0);
		for (int i = 0; i < 4; i++) {
			ck_assert_int_eq(h_exec("fill", (struct karg[]){BUF, F32(1.0f), U64(1)}, 3,
						 (struct seq_buffer *[]){tmp}),
				0);
			h_await(tmp);
		}
		ck_assert_int_eq(h_exec("scale", (struct karg[]){BUF, BUF, F32(1.0f), U64(N)}, 4,
					 (struct seq_buffer *[]){in, out}),
			0);
		ck_assert_int_eq(h_copy(SEQ_OP_D2H, out, back, bytes), 0);
		ck_assert_int_eq(h_sync(), 0);
		for (size_t i = 0; i < N; i++)
			bad += back[i] != host[i];
		wrong += bad != 0;
		seq_buffer_free(H.seq, in);
		seq_buffer_free(H.seq, out);
	}
	h_unstage(host, bytes);
	h_unstage(back, bytes);
	h_teardown();
	return wrong;
}

START_TEST(test_seed_registered_h2d_then_kernel_reads_the_copy)
{
	unsigned wrong = seed_trials(0, 50);

	printf("hip: seed scenario, sequenced: %u of 50 trials read stale data\n", wrong);
	ck_assert_uint_eq(wrong, 0);
}
END_TEST

START_TEST(test_seed_with_the_legacy_window_reads_stale_data)
{
	/* The injected legacy bug on real hardware: shown, not asserted, since whether
	 * the kernel overtakes the copy is up to the device's timing. */
	unsigned wrong = seed_trials(2, 20);

	printf("hip: seed scenario, legacy window 2: %u of 20 trials read stale data\n", wrong);
}
END_TEST

/* ---- the caching pool ---- */

static uint64_t be_alloc(uint64_t size)
{
	uint64_t addr = 0;

	ck_assert_int_eq(H.be.ops->seq.mem_alloc(H.be.ctx, size, &addr), 0);
	ck_assert_uint_ne(addr, 0);
	ck_assert_uint_eq(addr % 256, 0);
	return addr;
}

START_TEST(test_pool_reuses_released_blocks_by_size_class)
{
	uint64_t a, b, c, d, e, big, big2;
	double t0, dt;

	h_setup(NULL, NULL);
	a = be_alloc(1000);
	b = be_alloc(1000);
	c = be_alloc(5000);
	ck_assert(a != b && b != c && a != c);
	H.be.ops->seq.mem_release(H.be.ctx, a, 1000);
	H.be.ops->seq.mem_release(H.be.ctx, c, 5000);
	H.be.ops->seq.mem_release(H.be.ctx, b, 1000);
	d = be_alloc(1001); /* the 1024 class: newest released first */
	e = be_alloc(1024);
	ck_assert_uint_eq(d, b);
	ck_assert_uint_eq(e, a);
	ck_assert_uint_eq(be_alloc(4700), c); /* 5000 and 4700 share the 5120 class */
	big = be_alloc(64 << 20);
	H.be.ops->seq.mem_release(H.be.ctx, big, 64 << 20);
	big2 = be_alloc((64 << 20) - 4096);
	ck_assert_uint_eq(big2, big);
	H.be.ops->seq.mem_release(H.be.ctx, big2, (64 << 20) - 4096);
	/* Reuse never reaches the runtime: far cheaper than hipMalloc + hipFree. */
	t0 = now_s();
	for (int i = 0; i < 100000; i++) {
		uint64_t x = be_alloc(1 << 20);

		H.be.ops->seq.mem_release(H.be.ctx, x, 1 << 20);
	}
	dt = now_s() - t0;
	printf("hip: pooled alloc+release: %.0f ns\n", dt * 1e9 / 100000);
	ck_assert_msg(dt < 1.0, "100000 pooled allocations took %.3f s", dt);
	H.be.ops->seq.mem_release(H.be.ctx, d, 1001);
	H.be.ops->seq.mem_release(H.be.ctx, e, 1024);
	ck_assert_uint_eq(H.be.ops->findings(H.be.ctx), 0);
	H.be.ops->seq.mem_release(H.be.ctx, d, 1001); /* twice: reported, not reused */
	ck_assert_uint_eq(H.be.ops->findings(H.be.ctx), 1);
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
	/* A 50 ms kernel writes a; the owner lets go at once: the memory stays its own. */
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
	h_teardown();
}
END_TEST

/* ---- errors ---- */

START_TEST(test_missing_kernel_image_fails_create_clearly)
{
	struct hip_config cfg = {.kernels = "/nonexistent/sseq-kernels.image"};

	ck_assert_int_eq(h_try_setup(NULL, &cfg), -ENOENT);
	pthread_cond_destroy(&H.cond);
	pthread_mutex_destroy(&H.mu);
}
END_TEST

static void cpu_nothing(const struct karg *args, uint64_t elements)
{
}

START_TEST(test_kernel_not_in_the_image_fails_its_launch)
{
	static const struct kernel_desc k_other = {
		.name = "not_built_in",
		.nargs = 1,
		.types = {KARG_BUFFER},
		.access = {KARG_OUT},
		.cpu = cpu_nothing,
	};
	struct seq_config scfg = {0};
	struct seq_buffer *a;
	struct op_payload p = {.kernel = &k_other, .nargs = 1, .elements = 16};
	struct seq_op op = {.kind = SEQ_OP_EXEC, .naccess = 1, .payload = &p};

	h_setup(&scfg, NULL);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 64, &a), 0);
	p.args[0] = (struct karg){KARG_BUFFER, KARG_OUT, {.buf = {NULL, 64, 0}}};
	op.access[0] = (struct seq_access){a, SEQ_WRITE};
	ck_assert_int_eq(seq_submit(H.seq, &op, NULL), -ENOSYS);
	ck_assert_int_eq(op.fail_cause, SEQ_FAIL_LAUNCH);
	ck_assert_int_eq(seq_buffer_error(H.seq, a), -ENOSYS);
	h_teardown();
}
END_TEST

START_TEST(test_device_fault_flows_forward)
{
	struct seq_config scfg = {0};
	struct seq_buffer *a, *b;
	uint32_t *host;
	int r;

	h_setup(&scfg, NULL);
	host = h_stage(4096);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 4096, &a), 0);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 4096, &b), 0);
	/* Unchecked on purpose: 2^36 elements run far past a's 4 KiB into unmapped memory. */
	{
		struct op_payload p = {.kernel = kernel_find("fill"), .nargs = 3};
		struct seq_op op = {.kind = SEQ_OP_EXEC, .naccess = 1, .payload = &p};

		p.args[0] = (struct karg){KARG_BUFFER, KARG_OUT, {.buf = {NULL, 4096, 0}}};
		p.args[1] = F32(1.0f);
		p.args[2] = U64(1ull << 36);
		p.elements = 1ull << 36;
		op.access[0] = (struct seq_access){a, SEQ_WRITE};
		ck_assert_int_eq(seq_submit(H.seq, &op, NULL), 0);
	}
	/* Depends on the fault through a cross-stream wait. */
	r = h_d2d(a, b, 4096);
	ck_assert_msg(r == 0 || r == -EIO, "d2d: %d", r);
	r = h_sync();
	printf("hip: device fault reported as %d (%s)\n", r, strerror(-r));
	ck_assert_int_eq(r, -EIO);
	ck_assert_int_eq(seq_buffer_error(H.seq, b), -EIO);
	/* The device is gone for this process: later work fails, it does not hang. */
	r = h_copy(SEQ_OP_H2D, b, host, 4096);
	ck_assert_int_lt(r, 0);
	h_unstage(host, 4096);
	h_teardown();
}
END_TEST

/* ---- how fast completion is learned ---- */

static void completion_speed(enum hip_completion mode, const char *name)
{
	struct seq_config scfg = {0};
	struct hip_config cfg = {.completion = mode};
	struct seq_buffer *a;
	enum { ROUNDS = 2000, PIPE = 20000 };
	double t0, lat, thr;

	h_setup(&scfg, &cfg);
	ck_assert_int_eq(seq_buffer_alloc(H.seq, 4096, &a), 0);
	for (int i = 0; i < 100; i++) { /* warm up */
		ck_assert_int_eq(h_exec("fill", (struct karg[]){BUF, F32(1.0f), U64(1)}, 3,
					 (struct seq_buffer *[]){a}),
			0);
		h_await(a);
	}
	t0 = now_s();
	for (int i = 0; i < ROUNDS; i++) {
		ck_assert_int_eq(h_exec("fill", (struct karg[]){BUF, F32(1.0f), U64(1)}, 3,
					 (struct seq_buffer *[]){a}),
			0);
		h_await(a);
	}
	lat = (now_s() - t0) / ROUNDS;
	t0 = now_s();
	for (int i = 0; i < PIPE; i++) {
		int r;

		while ((r = h_exec("fill", (struct karg[]){BUF, F32(1.0f), U64(1)}, 3,
				(struct seq_buffer *[]){a})) == -EAGAIN) {
			seq_flush(H.seq);
			h_drain(true);
		}
		ck_assert_int_eq(r, 0);
		h_drain(false);
	}
	ck_assert_int_eq(h_sync(), 0);
	thr = PIPE / (now_s() - t0);
	printf("hip: completion by %s: %.1f us per kernel round trip, %.0f kernels/s "
	       "pipelined\n",
		name, lat * 1e6, thr);
	ck_assert_msg(lat < 1e-3, "%.1f us per round trip", lat * 1e6);
	h_teardown();
}

START_TEST(test_completion_by_event_synchronize)
{
	completion_speed(HIP_COMPLETION_SYNC, "hipEventSynchronize");
}
END_TEST

START_TEST(test_completion_by_event_query_polling)
{
	completion_speed(HIP_COMPLETION_POLL, "hipEventQuery polling");
}
END_TEST

static Suite *hip_suite(void)
{
	Suite *s = suite_create("hip");
	TCase *data = tcase_create("data");
	TCase *seed = tcase_create("seed");
	TCase *pool = tcase_create("pool");
	TCase *errors = tcase_create("errors");
	TCase *speed = tcase_create("completion");

	tcase_add_test(data, test_h2d_add_scale_d2d_d2h_round_trip);
	tcase_add_test(data, test_conv2d_matches_the_cpu_version);
	tcase_add_test(data, test_fill_iota_reduce_and_spin_run_on_the_device);
	tcase_add_test(data, test_zero_element_launch_enqueues_nothing_and_completes);
	tcase_add_test(data, test_copies_over_several_d2h_and_d2d_streams_are_ordered);
	tcase_add_test(data, test_overlapping_d2d_within_a_buffer_is_a_memmove);
	suite_add_tcase(s, data);

	tcase_add_test(seed, test_seed_registered_h2d_then_kernel_reads_the_copy);
	tcase_add_test(seed, test_seed_with_the_legacy_window_reads_stale_data);
	suite_add_tcase(s, seed);

	tcase_add_test(pool, test_pool_reuses_released_blocks_by_size_class);
	tcase_add_test(pool, test_freed_buffer_memory_comes_back_only_after_its_last_use);
	suite_add_tcase(s, pool);

	tcase_add_test(errors, test_missing_kernel_image_fails_create_clearly);
	tcase_add_test(errors, test_kernel_not_in_the_image_fails_its_launch);
	tcase_add_test(errors, test_device_fault_flows_forward);
	suite_add_tcase(s, errors);

	tcase_add_test(speed, test_completion_by_event_synchronize);
	tcase_add_test(speed, test_completion_by_event_query_polling);
	suite_add_tcase(s, speed);
	return s;
}

/* Whether a GPU is there, asked in a child: this process must not start HIP before
 * Check forks the tests. */
static bool gpu_present(void)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return false;
	if (pid == 0)
		_exit(hip_device_count() > 0 ? 0 : 1);
	if (waitpid(pid, &status, 0) < 0)
		return false;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(void)
{
	SRunner *sr;
	int failed;

	if (!gpu_present()) {
		printf("test-hip: no GPU: skipped\n");
		return 77;
	}
	sr = srunner_create(hip_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
