/* Tests for the built-in kernels (kernels/): each CPU version against a direct loop,
 * conv2d against a naive reference that materialises the dilated, padded input, and
 * check() as the boundary that refuses every launch that could leave its buffers. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"

/* ---- helpers ------------------------------------------------------------------------ */

static struct karg buf_arg(void *ptr, uint64_t bytes, unsigned access)
{
	struct karg a = {.type = KARG_BUFFER, .access = access};

	a.v.buf.ptr = ptr;
	a.v.buf.size = bytes;
	return a;
}

static struct karg f32_arg(float v)
{
	struct karg a = {.type = KARG_F32};

	a.v.f32 = v;
	return a;
}

static struct karg u64_arg(uint64_t v)
{
	struct karg a = {.type = KARG_U64};

	a.v.u64 = v;
	return a;
}

static struct karg i32_arg(int32_t v)
{
	struct karg a = {.type = KARG_I32};

	a.v.i32 = v;
	return a;
}

/* Validate and run, as the sim backend would; returns validate's result. */
static int launch(const char *name, const struct karg *args, unsigned nargs, const char **why)
{
	const struct kernel_desc *k = kernel_find(name);
	uint64_t elements = UINT64_MAX;
	int r;

	ck_assert_ptr_nonnull(k);
	r = kernel_validate(k, args, nargs, &elements, why);
	if (r == 0) {
		ck_assert_uint_ne(elements, UINT64_MAX);
		k->cpu(args, elements);
	}
	return r;
}

/* Exactly-sized allocations, so ASan flags any access past the end. */
static float *floats(size_t n)
{
	float *p = malloc(n * sizeof(float) + (n == 0));

	ck_assert_ptr_nonnull(p);
	return p;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void)
{
	/* xorshift64*: reproducible across libcs, unlike rand(). */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1du;
}

static int rng_range(int lo, int hi)
{
	return lo + (int)(rng() % (uint64_t)(hi - lo + 1));
}

static float rng_float(void)
{
	return (float)rng_range(-1000, 1000) / 250.0f;
}

static void fill_random(float *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = rng_float();
}

/* ---- elementwise kernels against direct loops --------------------------------------- */

enum { N_ELEM = 1031 }; /* odd, so no kernel gets away with a power-of-two stride */

START_TEST(test_fill_sets_every_element)
{
	float *y = floats(N_ELEM);
	struct karg args[] = {buf_arg(y, N_ELEM * 4, KARG_OUT), f32_arg(2.5f), u64_arg(N_ELEM)};

	memset(y, 0, N_ELEM * 4);
	ck_assert_int_eq(launch("fill", args, 3, NULL), 0);
	for (int i = 0; i < N_ELEM; i++)
		ck_assert_float_eq(y[i], 2.5f);
	free(y);
}
END_TEST

START_TEST(test_fill_writes_only_n_elements)
{
	float *y = floats(8);
	struct karg args[] = {buf_arg(y, 8 * 4, KARG_OUT), f32_arg(1.0f), u64_arg(5)};

	for (int i = 0; i < 8; i++)
		y[i] = -1.0f;
	ck_assert_int_eq(launch("fill", args, 3, NULL), 0);
	for (int i = 0; i < 8; i++)
		ck_assert_float_eq(y[i], i < 5 ? 1.0f : -1.0f);
	free(y);
}
END_TEST

START_TEST(test_iota_is_start_plus_i_times_step)
{
	float *y = floats(N_ELEM);
	struct karg args[] = {
		buf_arg(y, N_ELEM * 4, KARG_OUT), f32_arg(-3.0f), f32_arg(0.5f), u64_arg(N_ELEM)};

	ck_assert_int_eq(launch("iota", args, 4, NULL), 0);
	for (int i = 0; i < N_ELEM; i++)
		ck_assert_float_eq_tol(y[i], -3.0f + (float)i * 0.5f, 1e-6f);
	ck_assert_float_eq(y[0], -3.0f);
	ck_assert_float_eq(y[7], 0.5f);
	free(y);
}
END_TEST

START_TEST(test_add_sums_elementwise)
{
	float *a = floats(N_ELEM), *b = floats(N_ELEM), *c = floats(N_ELEM);
	struct karg args[] = {buf_arg(a, N_ELEM * 4, KARG_IN), buf_arg(b, N_ELEM * 4, KARG_IN),
		buf_arg(c, N_ELEM * 4, KARG_OUT), u64_arg(N_ELEM)};

	fill_random(a, N_ELEM);
	fill_random(b, N_ELEM);
	ck_assert_int_eq(launch("add", args, 4, NULL), 0);
	for (int i = 0; i < N_ELEM; i++)
		ck_assert_float_eq(c[i], a[i] + b[i]);
	free(a);
	free(b);
	free(c);
}
END_TEST

START_TEST(test_axpy_updates_y_in_place)
{
	float *x = floats(N_ELEM), *y = floats(N_ELEM), *y0 = floats(N_ELEM);
	struct karg args[] = {f32_arg(-1.75f), buf_arg(x, N_ELEM * 4, KARG_IN),
		buf_arg(y, N_ELEM * 4, KARG_INOUT), u64_arg(N_ELEM)};

	fill_random(x, N_ELEM);
	fill_random(y, N_ELEM);
	memcpy(y0, y, N_ELEM * 4);
	ck_assert_int_eq(launch("axpy", args, 4, NULL), 0);
	for (int i = 0; i < N_ELEM; i++)
		ck_assert_float_eq_tol(y[i], -1.75f * x[i] + y0[i], 1e-5f);
	free(x);
	free(y);
	free(y0);
}
END_TEST

START_TEST(test_scale_multiplies_by_alpha)
{
	float *x = floats(N_ELEM), *y = floats(N_ELEM);
	struct karg args[] = {buf_arg(x, N_ELEM * 4, KARG_IN), buf_arg(y, N_ELEM * 4, KARG_OUT),
		f32_arg(3.0f), u64_arg(N_ELEM)};

	fill_random(x, N_ELEM);
	ck_assert_int_eq(launch("scale", args, 4, NULL), 0);
	for (int i = 0; i < N_ELEM; i++)
		ck_assert_float_eq(y[i], 3.0f * x[i]);
	free(x);
	free(y);
}
END_TEST

START_TEST(test_reduce_sum_exact_on_integers)
{
	/* 1 + 2 + ... + 4096 = 8390656 < 2^24: exact in float, whatever the order. */
	const uint64_t n = 4096;
	float *x = floats(n), *y = floats(1);
	struct karg args[] = {buf_arg(x, n * 4, KARG_IN), buf_arg(y, 4, KARG_OUT), u64_arg(n)};

	for (uint64_t i = 0; i < n; i++)
		x[i] = (float)(i + 1);
	ck_assert_int_eq(launch("reduce_sum", args, 3, NULL), 0);
	ck_assert_float_eq(y[0], 8390656.0f);
	free(x);
	free(y);
}
END_TEST

START_TEST(test_reduce_sum_accumulates_in_double)
{
	/* 2^24 followed by ones: a float accumulator would stay at 2^24. */
	const uint64_t n = 1001;
	float *x = floats(n), *y = floats(1);
	struct karg args[] = {buf_arg(x, n * 4, KARG_IN), buf_arg(y, 4, KARG_OUT), u64_arg(n)};

	x[0] = 16777216.0f;
	for (uint64_t i = 1; i < n; i++)
		x[i] = 1.0f;
	ck_assert_int_eq(launch("reduce_sum", args, 3, NULL), 0);
	ck_assert_float_eq(y[0], 16777216.0f + 1000.0f);
	free(x);
	free(y);
}
END_TEST

START_TEST(test_reduce_sum_of_nothing_is_zero)
{
	float *y = floats(1);
	struct karg args[] = {buf_arg(NULL, 0, KARG_IN), buf_arg(y, 4, KARG_OUT), u64_arg(0)};

	y[0] = 42.0f;
	ck_assert_int_eq(launch("reduce_sum", args, 3, NULL), 0);
	ck_assert_float_eq(y[0], 0.0f);
	free(y);
}
END_TEST

/* ---- spin ---------------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

START_TEST(test_spin_runs_at_least_the_asked_time)
{
	struct karg args[] = {u64_arg(20000)};
	double t0 = now_s();

	ck_assert_int_eq(launch("spin", args, 1, NULL), 0);
	ck_assert_double_ge(now_s() - t0, 0.020);
}
END_TEST

START_TEST(test_spin_rejects_more_than_ten_seconds)
{
	const struct kernel_desc *k = kernel_find("spin");
	struct karg args[] = {u64_arg(10000001)};
	const char *why = NULL;
	uint64_t elements = 0;

	ck_assert_int_eq(kernel_validate(k, args, 1, &elements, &why), -ERANGE);
	ck_assert_ptr_nonnull(why);
	ck_assert_ptr_nonnull(strstr(why, "spin: 10000001 us"));
	args[0].v.u64 = UINT64_MAX;
	ck_assert_int_eq(kernel_validate(k, args, 1, &elements, &why), -ERANGE);
	args[0].v.u64 = 10000000;
	ck_assert_int_eq(kernel_validate(k, args, 1, &elements, &why), 0);
	ck_assert_uint_eq(elements, 1);
}
END_TEST

/* ---- conv2d: naive reference --------------------------------------------------------- */

struct conv_case {
	int n, c, h, w, o, kh, kw, sh, sw, pt, pb, pl, pr, ldh, ldw, rdh, rdw, groups;
};

/* An N x C x H x W input, O filters of KH x KW; stride 1, no padding, no dilation, one
 * group: callers set what their case adds. */
static struct conv_case plain_conv_case(int n, int c, int h, int w, int o, int kh, int kw)
{
	const struct conv_case t = {.n = n,
		.c = c,
		.h = h,
		.w = w,
		.o = o,
		.kh = kh,
		.kw = kw,
		.sh = 1,
		.sw = 1,
		.ldh = 1,
		.ldw = 1,
		.rdh = 1,
		.rdw = 1,
		.groups = 1};

	return t;
}

/* The kernel's shape parameters for case t (the output extent still to be computed). */
static struct kernel_conv2d conv_params(const struct conv_case *t)
{
	const struct kernel_conv2d p = {.n = t->n,
		.c = t->c,
		.h = t->h,
		.w = t->w,
		.o = t->o,
		.kh = t->kh,
		.kw = t->kw,
		.stride_h = t->sh,
		.stride_w = t->sw,
		.pad_top = t->pt,
		.pad_bottom = t->pb,
		.pad_left = t->pl,
		.pad_right = t->pr,
		.lhs_dil_h = t->ldh,
		.lhs_dil_w = t->ldw,
		.rhs_dil_h = t->rdh,
		.rhs_dil_w = t->rdw,
		.groups = t->groups};

	return p;
}

/* One axis of the reference: dilate by scattering, then pad by copying into a larger
 * array, then crop for negative padding. Returns the padded extent. */
static int ref_axis_extent(int in, int ld, int lo, int hi)
{
	return (in - 1) * ld + 1 + lo + hi;
}

/* y[n][o][oh][ow] by correlating the materialised input in double; also returns the
 * per-element sum of |terms| for a tolerance. Output extent from the materialised array. */
static void ref_conv(const struct conv_case *t, const float *x, const float *w, double **out,
	double **mag, int *oh_out, int *ow_out)
{
	const int hd = (t->h - 1) * t->ldh + 1, wd = (t->w - 1) * t->ldw + 1;
	/* Step 1: lhs dilation, by scattering into a zeroed array. */
	double *xd = calloc((size_t)t->n * t->c * hd * wd, sizeof(double));
	/* Step 2: padding, non-negative part first, into a larger zeroed array. */
	const int plo_h = t->pt > 0 ? t->pt : 0, phi_h = t->pb > 0 ? t->pb : 0;
	const int plo_w = t->pl > 0 ? t->pl : 0, phi_w = t->pr > 0 ? t->pr : 0;
	const int hg = hd + plo_h + phi_h, wg = wd + plo_w + phi_w;
	double *xg = calloc((size_t)t->n * t->c * hg * wg, sizeof(double));
	/* Step 3: negative padding crops the grown array. */
	const int ch = t->pt < 0 ? -t->pt : 0, cw = t->pl < 0 ? -t->pl : 0;
	const int hp = ref_axis_extent(t->h, t->ldh, t->pt, t->pb);
	const int wp = ref_axis_extent(t->w, t->ldw, t->pl, t->pr);
	const int khd = (t->kh - 1) * t->rdh + 1, kwd = (t->kw - 1) * t->rdw + 1;
	const int oh = (hp - khd) / t->sh + 1, ow = (wp - kwd) / t->sw + 1;
	const int cg = t->c / t->groups, og = t->o / t->groups;

	ck_assert(hp >= khd && wp >= kwd);
	for (int n = 0; n < t->n; n++)
		for (int c = 0; c < t->c; c++)
			for (int h = 0; h < t->h; h++)
				for (int ww = 0; ww < t->w; ww++)
					xd[(((size_t)n * t->c + c) * hd + h * t->ldh) * wd +
						ww * t->ldw] =
						x[(((size_t)n * t->c + c) * t->h + h) * t->w + ww];
	for (int nc = 0; nc < t->n * t->c; nc++)
		for (int h = 0; h < hd; h++)
			for (int ww = 0; ww < wd; ww++)
				xg[((size_t)nc * hg + h + plo_h) * wg + ww + plo_w] =
					xd[((size_t)nc * hd + h) * wd + ww];

	*out = calloc((size_t)t->n * t->o * oh * ow, sizeof(double));
	*mag = calloc((size_t)t->n * t->o * oh * ow, sizeof(double));
	for (int n = 0; n < t->n; n++)
		for (int o = 0; o < t->o; o++)
			for (int i = 0; i < oh; i++)
				for (int j = 0; j < ow; j++) {
					double s = 0, m = 0;
					const int g = o / og;

					for (int ci = 0; ci < cg; ci++)
						for (int a = 0; a < t->kh; a++)
							for (int b = 0; b < t->kw; b++) {
								/* (row, col) in the cropped array;
								 * +crop in the grown one. */
								const int r =
									i * t->sh + a * t->rdh + ch;
								const int q =
									j * t->sw + b * t->rdw + cw;
								const double xv = r < hg && q < wg
									? xg[(((size_t)n * t->c +
										      g * cg + ci) *
											     hg +
										     r) * wg +
										  q]
									: 0.0;
								const double wv =
									w[(((size_t)o * cg + ci) *
											  t->kh +
										  a) * t->kw +
										b];

								s += xv * wv;
								m += fabs(xv * wv);
							}
					(*out)[(((size_t)n * t->o + o) * oh + i) * ow + j] = s;
					(*mag)[(((size_t)n * t->o + o) * oh + i) * ow + j] = m;
				}
	*oh_out = oh;
	*ow_out = ow;
	free(xd);
	free(xg);
}

static void conv_args(struct karg *args, const struct conv_case *t, float *x, uint64_t xb, float *w,
	uint64_t wb, float *y, uint64_t yb)
{
	const int32_t s[18] = {t->n, t->c, t->h, t->w, t->o, t->kh, t->kw, t->sh, t->sw, t->pt,
		t->pb, t->pl, t->pr, t->ldh, t->ldw, t->rdh, t->rdw, t->groups};

	args[0] = buf_arg(x, xb, KARG_IN);
	args[1] = buf_arg(w, wb, KARG_IN);
	args[2] = buf_arg(y, yb, KARG_OUT);
	for (int i = 0; i < 18; i++)
		args[3 + i] = i32_arg(s[i]);
}

/* Runs case t through the kernel with exactly-sized buffers and the given data
 * (random when NULL); compares with the reference. Returns the output, for callers
 * that check exact values. */
static float *run_conv_case(const struct conv_case *t, const float *xin, const float *win)
{
	const size_t xn = (size_t)t->n * t->c * t->h * t->w;
	const size_t wn = (size_t)t->o * (t->c / t->groups) * t->kh * t->kw;
	float *x = floats(xn), *w = floats(wn), *y;
	double *ref, *mag;
	int oh, ow;
	struct kernel_conv2d p = conv_params(t);
	struct karg args[21];
	const char *why = NULL;
	size_t yn;

	if (xin)
		memcpy(x, xin, xn * sizeof(float));
	else
		fill_random(x, xn);
	if (win)
		memcpy(w, win, wn * sizeof(float));
	else
		fill_random(w, wn);
	ref_conv(t, x, w, &ref, &mag, &oh, &ow);
	ck_assert_int_eq(kernel_conv2d_out_shape(&p, &why), 0);
	ck_assert_int_eq(p.oh, oh);
	ck_assert_int_eq(p.ow, ow);

	yn = (size_t)t->n * t->o * oh * ow;
	y = floats(yn);
	for (size_t i = 0; i < yn; i++)
		y[i] = NAN; /* every element must be written */
	conv_args(args, t, x, xn * 4, w, wn * 4, y, yn * 4);
	ck_assert_msg(launch("conv2d", args, 21, &why) == 0, "conv2d rejected: %s", why);
	for (size_t i = 0; i < yn; i++) {
		/* float accumulation vs double reference: a few ulps of the magnitude. */
		const double tol = 1e-5 * mag[i] + 1e-6;

		ck_assert_msg(fabs((double)y[i] - ref[i]) <= tol,
			"element %zu: got %.9g, reference %.9g (N=%d C=%d H=%d W=%d O=%d K=%dx%d "
			"s=%d,%d pad=%d,%d,%d,%d ld=%d,%d rd=%d,%d g=%d)",
			i, (double)y[i], ref[i], t->n, t->c, t->h, t->w, t->o, t->kh, t->kw, t->sh,
			t->sw, t->pt, t->pb, t->pl, t->pr, t->ldh, t->ldw, t->rdh, t->rdw,
			t->groups);
	}
	free(x);
	free(w);
	free(ref);
	free(mag);
	return y;
}

/* Runs case t on x and w (so against the reference too) and checks its n outputs are
 * exactly want. */
static void ck_conv_exact(
	const struct conv_case *t, const float *x, const float *w, const float *want, int n)
{
	float *y = run_conv_case(t, x, w);

	for (int i = 0; i < n; i++)
		ck_assert_msg(y[i] == want[i], "output %d: got %.9g, want %.9g", i, (double)y[i],
			(double)want[i]);
	free(y);
}

START_TEST(test_conv2d_matches_naive_reference_on_random_shapes)
{
	int ran = 0, strided = 0, negative = 0, asymmetric = 0, lhs = 0, rhs = 0, grouped = 0;

	rng_state = 0x5eed0c0272d5ull;
	for (int tries = 0; ran < 60 && tries < 10000; tries++) {
		struct conv_case t;
		const char *why = NULL;

		t.groups = rng_range(1, 3);
		t.n = rng_range(1, 2);
		t.c = t.groups * rng_range(1, 3);
		t.o = t.groups * rng_range(1, 3);
		t.h = rng_range(1, 7);
		t.w = rng_range(1, 7);
		t.kh = rng_range(1, 3);
		t.kw = rng_range(1, 3);
		t.sh = rng_range(1, 3);
		t.sw = rng_range(1, 3);
		t.pt = rng_range(-2, 3);
		t.pb = rng_range(-2, 3);
		t.pl = rng_range(-2, 3);
		t.pr = rng_range(-2, 3);
		t.ldh = rng_range(1, 3);
		t.ldw = rng_range(1, 3);
		t.rdh = rng_range(1, 3);
		t.rdw = rng_range(1, 3);

		struct kernel_conv2d p = conv_params(&t);
		const bool empty =
			ref_axis_extent(t.h, t.ldh, t.pt, t.pb) < (t.kh - 1) * t.rdh + 1 ||
			ref_axis_extent(t.w, t.ldw, t.pl, t.pr) < (t.kw - 1) * t.rdw + 1;

		/* Shapes with no output must be refused, not run. */
		if (empty) {
			ck_assert_int_eq(kernel_conv2d_out_shape(&p, &why), -EINVAL);
			ck_assert_ptr_nonnull(strstr(why, "< 1"));
			continue;
		}
		free(run_conv_case(&t, NULL, NULL));
		ran++;
		strided += t.sh > 1 || t.sw > 1;
		negative += t.pt < 0 || t.pb < 0 || t.pl < 0 || t.pr < 0;
		asymmetric += t.pt != t.pb || t.pl != t.pr;
		lhs += t.ldh > 1 || t.ldw > 1;
		rhs += t.rdh > 1 || t.rdw > 1;
		grouped += t.groups > 1;
	}
	ck_assert_int_ge(ran, 60);
	/* The table must actually exercise every feature. */
	ck_assert_int_ge(strided, 5);
	ck_assert_int_ge(negative, 5);
	ck_assert_int_ge(asymmetric, 5);
	ck_assert_int_ge(lhs, 5);
	ck_assert_int_ge(rhs, 5);
	ck_assert_int_ge(grouped, 5);
}
END_TEST

START_TEST(test_conv2d_plain_3x3_by_2x2_ones)
{
	/* One 3x3 channel, one 2x2 filter. */
	const struct conv_case t = plain_conv_case(1, 1, 3, 3, 1, 2, 2);
	const float x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	const float w[] = {1, 1, 1, 1};
	const float want[] = {12, 16, 24, 28};

	ck_conv_exact(&t, x, w, want, 4);
}
END_TEST

START_TEST(test_conv2d_lhs_dilation_inserts_zeros)
{
	/* x dilated by 2 is [[1 0 2] [0 0 0] [3 0 4]]; each 2x2 window holds one input. */
	struct conv_case t = plain_conv_case(1, 1, 2, 2, 1, 2, 2);
	const float x[] = {1, 2, 3, 4};
	const float w[] = {1, 2, 3, 4};
	const float want[] = {1, 4, 9, 16};

	t.ldh = 2;
	t.ldw = 2;
	ck_conv_exact(&t, x, w, want, 4);
}
END_TEST

START_TEST(test_conv2d_groups_negative_pad_and_rhs_dilation)
{
	/* Two groups of one channel. Padding (left -1, right +1) turns row [1 2 3 4] into
	 * [2 3 4 0]; the kernel's two taps sit 2 apart (rhs dilation 2). */
	struct conv_case t = plain_conv_case(1, 2, 1, 4, 2, 1, 2);
	const float x[] = {1, 2, 3, 4, 10, 20, 30, 40};
	const float w[] = {1, 1, 1, -1};
	const float want[] = {2 + 4, 3 + 0, 20 - 40, 30 - 0};

	t.pl = -1;
	t.pr = 1;
	t.rdw = 2;
	t.groups = 2;
	ck_conv_exact(&t, x, w, want, 4);
}
END_TEST

START_TEST(test_conv2d_out_shape_follows_lax_formula)
{
	/* H=10, lhs_dil 2 -> 19; pads 1 + 2 -> 22; KH=3, rhs_dil 3 -> 7; stride 4:
	 * (22 - 7) / 4 + 1 = 4. W: 5 - 5 + 1 = 1. */
	struct kernel_conv2d p = {.n = 1,
		.c = 1,
		.h = 10,
		.w = 5,
		.o = 1,
		.kh = 3,
		.kw = 5,
		.stride_h = 4,
		.stride_w = 1,
		.pad_top = 1,
		.pad_bottom = 2,
		.lhs_dil_h = 2,
		.lhs_dil_w = 1,
		.rhs_dil_h = 3,
		.rhs_dil_w = 1,
		.groups = 1};

	ck_assert_int_eq(kernel_conv2d_out_shape(&p, NULL), 0);
	ck_assert_int_eq(p.oh, 4);
	ck_assert_int_eq(p.ow, 1);
	/* One more row of padding completes a window: (23 - 7) / 4 + 1 = 5 ... */
	p.pad_bottom = 3;
	ck_assert_int_eq(kernel_conv2d_out_shape(&p, NULL), 0);
	ck_assert_int_eq(p.oh, 5);
	/* ... and the floor drops a partial one: (26 - 7) / 4 + 1 = 5. */
	p.pad_bottom = 6;
	ck_assert_int_eq(kernel_conv2d_out_shape(&p, NULL), 0);
	ck_assert_int_eq(p.oh, 5);
}
END_TEST

/* ---- check(): the safety boundary ---------------------------------------------------- */

/* Validates without running; the buffers are never touched. */
static int validate(const char *name, const struct karg *args, unsigned nargs, const char **why)
{
	uint64_t elements = 0;

	*why = NULL;
	return kernel_validate(kernel_find(name), args, nargs, &elements, why);
}

static float dummy[64];

START_TEST(test_check_rejects_too_small_elementwise_buffers)
{
	struct karg fill[] = {buf_arg(dummy, 39, KARG_OUT), f32_arg(0), u64_arg(10)};
	struct karg add[] = {buf_arg(dummy, 40, KARG_IN), buf_arg(dummy, 36, KARG_IN),
		buf_arg(dummy, 40, KARG_OUT), u64_arg(10)};
	struct karg axpy[] = {f32_arg(1), buf_arg(dummy, 40, KARG_IN),
		buf_arg(dummy, 8, KARG_INOUT), u64_arg(10)};
	struct karg scale[] = {
		buf_arg(dummy, 40, KARG_IN), buf_arg(dummy, 0, KARG_OUT), f32_arg(1), u64_arg(10)};
	struct karg iota[] = {buf_arg(dummy, 4, KARG_OUT), f32_arg(0), f32_arg(1), u64_arg(2)};
	struct karg rsum[] = {
		buf_arg(dummy, 40, KARG_IN), buf_arg(dummy, 0, KARG_OUT), u64_arg(10)};
	const char *why;

	ck_assert_int_eq(validate("fill", fill, 3, &why), -EINVAL);
	ck_assert_str_eq(why, "fill: output buffer holds 39 bytes, needs 40 for n=10 floats");
	ck_assert_int_eq(validate("add", add, 4, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "input b buffer holds 36 bytes"));
	ck_assert_int_eq(validate("axpy", axpy, 4, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "in-out y"));
	ck_assert_int_eq(validate("scale", scale, 4, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "output y"));
	ck_assert_int_eq(validate("iota", iota, 4, &why), -EINVAL);
	ck_assert_int_eq(validate("reduce_sum", rsum, 3, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "needs 4 for 1=1 floats"));
	/* Exactly enough passes. */
	fill[0].v.buf.size = 40;
	ck_assert_int_eq(validate("fill", fill, 3, &why), 0);
}
END_TEST

START_TEST(test_check_rejects_element_count_overflow)
{
	struct karg fill[] = {buf_arg(dummy, 256, KARG_OUT), f32_arg(0), u64_arg(UINT64_MAX / 2)};
	const char *why;

	ck_assert_int_eq(validate("fill", fill, 3, &why), -ERANGE);
	ck_assert_ptr_nonnull(strstr(why, "overflows"));
	/* 2^62 floats is 2^64 bytes, which wraps to 0 in 64 bits. */
	fill[2].v.u64 = UINT64_C(1) << 62;
	ck_assert_int_eq(validate("fill", fill, 3, &why), -ERANGE);
}
END_TEST

START_TEST(test_check_rejects_misaligned_buffer)
{
	struct karg fill[] = {buf_arg((char *)dummy + 2, 40, KARG_OUT), f32_arg(0), u64_arg(10)};
	const char *why;

	ck_assert_int_eq(validate("fill", fill, 3, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "aligned"));
}
END_TEST

START_TEST(test_validate_rejects_wrong_signature)
{
	struct karg fill[] = {buf_arg(dummy, 40, KARG_OUT), f32_arg(0), u64_arg(10)};
	const char *why;

	ck_assert_int_eq(validate("fill", fill, 2, &why), -EINVAL);
	ck_assert_str_eq(why, "fill: takes 3 arguments, got 2");
	fill[1] = u64_arg(0);
	ck_assert_int_eq(validate("fill", fill, 3, &why), -EINVAL);
	ck_assert_str_eq(why, "fill: argument 1 must be f32, got u64");
}
END_TEST

START_TEST(test_validate_rejects_buffer_marked_with_less_access)
{
	/* A written buffer declared "in" would not be ordered after its readers (I4). */
	struct karg axpy[] = {
		f32_arg(1), buf_arg(dummy, 40, KARG_IN), buf_arg(dummy, 40, KARG_IN), u64_arg(10)};
	struct karg fill[] = {buf_arg(dummy, 40, KARG_INOUT), f32_arg(0), u64_arg(10)};
	const char *why;

	ck_assert_int_eq(validate("axpy", axpy, 4, &why), -EINVAL);
	ck_assert_str_eq(why, "axpy: buffer argument 2 is marked in, the kernel needs inout");
	axpy[2].access = KARG_OUT;
	ck_assert_int_eq(validate("axpy", axpy, 4, &why), -EINVAL);
	axpy[2].access = 7;
	ck_assert_int_eq(validate("axpy", axpy, 4, &why), -EINVAL);
	/* More access than needed only costs waits. */
	ck_assert_int_eq(validate("fill", fill, 3, &why), 0);
}
END_TEST

/* A valid 1x2x4x4 input, 2x1x3x3 weights (groups 2), 1x2x2x2 output. */
static void good_conv(struct karg *args)
{
	struct conv_case t = plain_conv_case(1, 2, 4, 4, 2, 3, 3);

	t.groups = 2;
	conv_args(args, &t, dummy, 32 * 4, dummy, 18 * 4, dummy, 8 * 4);
}

/* Validates good_conv() with its i32 argument `arg` (3: N ... 20: groups) set to v. */
static int validate_conv_with(int arg, int32_t v, const char **why)
{
	struct karg args[21];

	good_conv(args);
	args[arg].v.i32 = v;
	return validate("conv2d", args, 21, why);
}

START_TEST(test_conv2d_check_rejects_too_small_buffers)
{
	struct karg args[21];
	const char *why;
	uint64_t elements = 0;

	good_conv(args);
	ck_assert_int_eq(kernel_validate(kernel_find("conv2d"), args, 21, &elements, &why), 0);
	ck_assert_uint_eq(elements, 8);

	args[0].v.buf.size = 96;
	ck_assert_int_eq(validate("conv2d", args, 21, &why), -EINVAL);
	ck_assert_str_eq(
		why, "conv2d: input buffer holds 96 bytes, needs 128 for N*C*H*W=32 floats");
	good_conv(args);
	args[1].v.buf.size = 71;
	ck_assert_int_eq(validate("conv2d", args, 21, &why), -EINVAL);
	ck_assert_str_eq(why,
		"conv2d: weight buffer holds 71 bytes, needs 72 for O*(C/groups)*KH*KW=18 floats");
	good_conv(args);
	args[2].v.buf.size = 28;
	ck_assert_int_eq(validate("conv2d", args, 21, &why), -EINVAL);
	ck_assert_str_eq(
		why, "conv2d: output buffer holds 28 bytes, needs 32 for N*O*OH*OW=8 floats");
}
END_TEST

START_TEST(test_conv2d_check_rejects_nonpositive_dims)
{
	/* Every argument from N (3) to groups (20) except the four paddings must be >= 1. */
	const char *why;

	for (int i = 3; i <= 20; i++) {
		if (i >= 12 && i <= 15)
			continue;
		for (int v = 0; v >= -1; v--) {
			ck_assert_int_eq(validate_conv_with(i, v, &why), -EINVAL);
			ck_assert_ptr_nonnull(strstr(why, "must be >= 1"));
		}
	}
	ck_assert_int_eq(validate_conv_with(5, INT32_MIN, &why), -EINVAL);
	ck_assert_str_eq(why, "conv2d: H must be >= 1, got -2147483648");
}
END_TEST

START_TEST(test_conv2d_check_rejects_groups_not_dividing)
{
	const char *why;

	ck_assert_int_eq(validate_conv_with(4, 3, &why), -EINVAL); /* C = 3, groups = 2 */
	ck_assert_str_eq(why, "conv2d: groups=2 does not divide C=3");
	ck_assert_int_eq(validate_conv_with(7, 3, &why), -EINVAL); /* O = 3 */
	ck_assert_str_eq(why, "conv2d: groups=2 does not divide O=3");
}
END_TEST

START_TEST(test_conv2d_check_rejects_empty_output)
{
	struct karg args[21];
	const char *why;

	ck_assert_int_eq(validate_conv_with(8, 5, &why), -EINVAL); /* KH = 5 > H = 4 */
	ck_assert_ptr_nonnull(strstr(why, "output height < 1"));
	/* pad_left -2: 4 - 2 = 2 columns, kernel needs 3 */
	ck_assert_int_eq(validate_conv_with(14, -2, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "output width < 1"));
	/* rhs_dil_w 2: kernel spans 5 > 4 */
	ck_assert_int_eq(validate_conv_with(19, 2, &why), -EINVAL);
	good_conv(args);
	args[12].v.i32 = INT32_MIN; /* pad_top far negative, no overflow either */
	args[13].v.i32 = INT32_MIN;
	ck_assert_int_eq(validate("conv2d", args, 21, &why), -EINVAL);
}
END_TEST

START_TEST(test_conv2d_check_rejects_huge_dims)
{
	struct karg args[21];
	const char *why;

	/* N*C*H*W = 2^124: overflows 64 bits. */
	good_conv(args);
	args[3].v.i32 = INT32_MAX;
	args[4].v.i32 = INT32_MAX - 1; /* even, so groups 2 divides it */
	args[5].v.i32 = INT32_MAX;
	args[6].v.i32 = INT32_MAX;
	ck_assert_int_eq(validate("conv2d", args, 21, &why), -ERANGE);
	ck_assert_str_eq(why, "conv2d: N*C*H*W overflows 64 bits");

	/* Output extent ~2^62 from lhs dilation: N*O*OH*OW overflows, even though the
	 * input is tiny. */
	good_conv(args);
	args[16].v.i32 = INT32_MAX;
	args[17].v.i32 = INT32_MAX;
	ck_assert_int_eq(validate("conv2d", args, 21, &why), -ERANGE);
	ck_assert_str_eq(why, "conv2d: N*O*OH*OW overflows 64 bits");

	/* Large but representable: fits 64 bits, not the buffers. */
	/* pad_right: OW ~ 2^31 */
	ck_assert_int_eq(validate_conv_with(15, INT32_MAX, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "output buffer"));

	/* Floats fit 64 bits, bytes do not. */
	good_conv(args);
	args[3].v.i32 = 1 << 30;
	args[5].v.i32 = 1 << 30; /* 2^62 floats, 2^64 bytes */
	ck_assert_int_eq(validate("conv2d", args, 21, &why), -ERANGE);
	ck_assert_ptr_nonnull(strstr(why, "overflows a byte count"));
}
END_TEST

/* ---- transpose4 ----------------------------------------------------------------------- */

/* x (d0..d3) through permutation p into y: every element against the index formula. */
static void transpose_check(const int32_t d[4], const int32_t p[4])
{
	const size_t n = (size_t)d[0] * d[1] * d[2] * d[3];
	float *x = floats(n), *y = floats(n);
	struct karg args[10] = {buf_arg(x, n * 4, KARG_IN), buf_arg(y, n * 4, KARG_OUT)};
	int64_t j[4];

	for (unsigned k = 0; k < 4; k++) {
		args[2 + k] = i32_arg(d[k]);
		args[6 + k] = i32_arg(p[k]);
	}
	for (size_t i = 0; i < n; i++)
		x[i] = (float)i;
	ck_assert_int_eq(launch("transpose4", args, 10, NULL), 0);
	for (j[0] = 0; j[0] < d[p[0]]; j[0]++)
		for (j[1] = 0; j[1] < d[p[1]]; j[1]++)
			for (j[2] = 0; j[2] < d[p[2]]; j[2]++)
				for (j[3] = 0; j[3] < d[p[3]]; j[3]++) {
					int64_t c[4], yi, xi;

					for (unsigned k = 0; k < 4; k++)
						c[p[k]] = j[k];
					yi = ((j[0] * d[p[1]] + j[1]) * d[p[2]] + j[2]) * d[p[3]] +
						j[3];
					xi = ((c[0] * d[1] + c[1]) * d[2] + c[2]) * d[3] + c[3];
					ck_assert_float_eq(y[yi], (float)xi);
				}
	free(x);
	free(y);
}

START_TEST(test_transpose4_permutes_dimensions)
{
	/* NHWC to NCHW and HWIO to OIHW (the seed test's layouts), the identity, a reversal. */
	transpose_check((const int32_t[]){10, 5, 5, 3}, (const int32_t[]){0, 3, 1, 2});
	transpose_check((const int32_t[]){3, 3, 2, 5}, (const int32_t[]){3, 2, 0, 1});
	transpose_check((const int32_t[]){2, 3, 4, 5}, (const int32_t[]){0, 1, 2, 3});
	transpose_check((const int32_t[]){2, 3, 4, 5}, (const int32_t[]){3, 2, 1, 0});
}
END_TEST

START_TEST(test_transpose4_check_rejects_bad_shapes)
{
	float x[24], y[24];
	struct karg args[10] = {buf_arg(x, sizeof(x), KARG_IN), buf_arg(y, sizeof(y), KARG_OUT)};
	const char *why = NULL;

	for (unsigned k = 0; k < 4; k++) {
		args[2 + k] = i32_arg(k == 0 ? 1 : (int32_t)k + 1); /* 1 x 2 x 3 x 4 */
		args[6 + k] = i32_arg((int32_t)k);
	}
	ck_assert_int_eq(launch("transpose4", args, 10, &why), 0);
	args[8] = i32_arg(1); /* p = 0, 1, 1, 3 */
	ck_assert_int_eq(launch("transpose4", args, 10, &why), -EINVAL);
	ck_assert_msg(strstr(why, "permutation"), "%s", why);
	args[8] = i32_arg(2);
	args[3] = i32_arg(0);
	ck_assert_int_eq(launch("transpose4", args, 10, &why), -EINVAL);
	ck_assert_msg(strstr(why, "dimension 1 is 0"), "%s", why);
	args[3] = i32_arg(3); /* 1 x 3 x 3 x 4 = 36 floats: more than the buffers hold */
	ck_assert_int_eq(launch("transpose4", args, 10, &why), -EINVAL);
	ck_assert_msg(strstr(why, "holds 96 bytes"), "%s", why);
}
END_TEST

/* ---- the table ----------------------------------------------------------------------- */

START_TEST(test_table_lists_every_kernel_by_name)
{
	const char *names[] = {"fill", "iota", "add", "axpy", "scale", "reduce_sum", "spin",
		"conv2d", "transpose4"};
	const struct kernel_desc *const *list = kernel_list();
	unsigned count = 0;

	for (; list[count]; count++) {
		ck_assert_ptr_eq(kernel_find(list[count]->name), list[count]);
		ck_assert(list[count]->check != NULL);
		ck_assert(list[count]->cpu != NULL);
		ck_assert_uint_le(list[count]->nargs, KERNEL_MAX_ARGS);
		/* Every buffer has an access mode; scalars have none. */
		for (unsigned i = 0; i < list[count]->nargs; i++)
			ck_assert_uint_eq(
				list[count]->access[i] != 0, list[count]->types[i] == KARG_BUFFER);
	}
	ck_assert_uint_eq(count, sizeof(names) / sizeof(names[0]));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		ck_assert_ptr_nonnull(kernel_find(names[i]));
	ck_assert_ptr_null(kernel_find("conv3d"));
	ck_assert_ptr_null(kernel_find(NULL));
	ck_assert_str_eq(karg_type_name(KARG_F32), "f32");
	ck_assert_str_eq(karg_type_name(KARG_BUFFER), "buffer");
	ck_assert_str_eq(karg_type_name((enum karg_type)99), "unknown");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("kernels");
	TCase *elementwise = tcase_create("elementwise");
	TCase *conv = tcase_create("conv2d");
	TCase *check = tcase_create("check");
	SRunner *sr;
	int failed;

	tcase_add_test(elementwise, test_fill_sets_every_element);
	tcase_add_test(elementwise, test_fill_writes_only_n_elements);
	tcase_add_test(elementwise, test_iota_is_start_plus_i_times_step);
	tcase_add_test(elementwise, test_add_sums_elementwise);
	tcase_add_test(elementwise, test_axpy_updates_y_in_place);
	tcase_add_test(elementwise, test_scale_multiplies_by_alpha);
	tcase_add_test(elementwise, test_reduce_sum_exact_on_integers);
	tcase_add_test(elementwise, test_reduce_sum_accumulates_in_double);
	tcase_add_test(elementwise, test_reduce_sum_of_nothing_is_zero);
	tcase_add_test(elementwise, test_spin_runs_at_least_the_asked_time);
	tcase_add_test(elementwise, test_spin_rejects_more_than_ten_seconds);
	tcase_add_test(conv, test_conv2d_matches_naive_reference_on_random_shapes);
	tcase_add_test(conv, test_conv2d_plain_3x3_by_2x2_ones);
	tcase_add_test(conv, test_conv2d_lhs_dilation_inserts_zeros);
	tcase_add_test(conv, test_conv2d_groups_negative_pad_and_rhs_dilation);
	tcase_add_test(conv, test_conv2d_out_shape_follows_lax_formula);
	tcase_add_test(check, test_check_rejects_too_small_elementwise_buffers);
	tcase_add_test(check, test_check_rejects_element_count_overflow);
	tcase_add_test(check, test_check_rejects_misaligned_buffer);
	tcase_add_test(check, test_validate_rejects_wrong_signature);
	tcase_add_test(check, test_validate_rejects_buffer_marked_with_less_access);
	tcase_add_test(check, test_conv2d_check_rejects_too_small_buffers);
	tcase_add_test(check, test_conv2d_check_rejects_nonpositive_dims);
	tcase_add_test(check, test_conv2d_check_rejects_groups_not_dividing);
	tcase_add_test(check, test_conv2d_check_rejects_empty_output);
	tcase_add_test(check, test_conv2d_check_rejects_huge_dims);
	tcase_add_test(check, test_table_lists_every_kernel_by_name);
	tcase_add_test(conv, test_transpose4_permutes_dimensions);
	tcase_add_test(check, test_transpose4_check_rejects_bad_shapes);
	suite_add_tcase(s, elementwise);
	suite_add_tcase(s, conv);
	suite_add_tcase(s, check);

	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
