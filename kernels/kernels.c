/* The built-in kernel table: names, signatures, and the check() functions that are the
 * daemon's safety boundary against client input. Once kernel_validate passes, a launch
 * over the elements it reports cannot read or write outside its buffers. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cpu.h"
#include "kernels.h"

/* Long enough for any test, short enough that a bad request cannot hold a stream. */
#define SPIN_MAX_US UINT64_C(10000000)

/* Reasons carry numbers, so they are formatted; one buffer per thread keeps check()
 * callable from any thread without allocating. */
static _Thread_local char why_buf[256];

__attribute__((format(printf, 3, 4))) static int fail(
	const char **why, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why_buf, sizeof(why_buf), fmt, ap);
	va_end(ap);
	if (why)
		*why = why_buf;
	return err;
}

/* Counts come from client scalars, so every product is checked. */
static bool mul_ok(uint64_t a, uint64_t b, uint64_t *r)
{
	return !__builtin_mul_overflow(a, b, r);
}

/* Buffer `a` (called `role` in reasons) must hold `count` floats, `formula` naming
 * where the count came from. */
static int need_floats(const char *kernel, const struct karg *a, const char *role,
	const char *formula, uint64_t count, const char **why)
{
	uint64_t bytes;

	if (!mul_ok(count, sizeof(float), &bytes))
		return fail(why, -ERANGE, "%s: %s=%" PRIu64 " floats overflows a byte count",
			kernel, formula, count);
	/* Slices can start anywhere; a float access off its alignment faults on the GPU
	 * and is undefined on the CPU. (A pointer not yet resolved is NULL and passes.) */
	if ((uintptr_t)a->v.buf.ptr % _Alignof(float) != 0)
		return fail(why, -EINVAL, "%s: %s buffer is not %zu-byte aligned", kernel, role,
			_Alignof(float));
	if (a->v.buf.size < bytes)
		return fail(why, -EINVAL,
			"%s: %s buffer holds %" PRIu64 " bytes, needs %" PRIu64 " for %s=%" PRIu64
			" floats",
			kernel, role, a->v.buf.size, bytes, formula, count);
	return 0;
}

static int check_fill(const struct karg *args, uint64_t *elements, const char **why)
{
	const uint64_t n = args[2].v.u64;
	int r = need_floats("fill", &args[0], "output", "n", n, why);

	if (r < 0)
		return r;
	*elements = n;
	return 0;
}

static int check_iota(const struct karg *args, uint64_t *elements, const char **why)
{
	const uint64_t n = args[3].v.u64;
	int r = need_floats("iota", &args[0], "output", "n", n, why);

	if (r < 0)
		return r;
	*elements = n;
	return 0;
}

static int check_add(const struct karg *args, uint64_t *elements, const char **why)
{
	const uint64_t n = args[3].v.u64;
	int r;

	if ((r = need_floats("add", &args[0], "input a", "n", n, why)) < 0 ||
		(r = need_floats("add", &args[1], "input b", "n", n, why)) < 0 ||
		(r = need_floats("add", &args[2], "output c", "n", n, why)) < 0)
		return r;
	*elements = n;
	return 0;
}

static int check_axpy(const struct karg *args, uint64_t *elements, const char **why)
{
	const uint64_t n = args[3].v.u64;
	int r;

	if ((r = need_floats("axpy", &args[1], "input x", "n", n, why)) < 0 ||
		(r = need_floats("axpy", &args[2], "in-out y", "n", n, why)) < 0)
		return r;
	*elements = n;
	return 0;
}

static int check_scale(const struct karg *args, uint64_t *elements, const char **why)
{
	const uint64_t n = args[3].v.u64;
	int r;

	if ((r = need_floats("scale", &args[0], "input x", "n", n, why)) < 0 ||
		(r = need_floats("scale", &args[1], "output y", "n", n, why)) < 0)
		return r;
	*elements = n;
	return 0;
}

static int check_reduce_sum(const struct karg *args, uint64_t *elements, const char **why)
{
	int r;

	if ((r = need_floats("reduce_sum", &args[0], "input x", "n", args[2].v.u64, why)) < 0 ||
		(r = need_floats("reduce_sum", &args[1], "output y", "1", 1, why)) < 0)
		return r;
	/* One thread sums in order: deterministic, and y[0] is written even when n = 0. */
	*elements = 1;
	return 0;
}

static int check_spin(const struct karg *args, uint64_t *elements, const char **why)
{
	if (args[0].v.u64 > SPIN_MAX_US)
		return fail(why, -ERANGE,
			"spin: %" PRIu64 " us is over the limit of %" PRIu64 " us", args[0].v.u64,
			SPIN_MAX_US);
	*elements = 1;
	return 0;
}

/* Dimensions of at least 1 whose product is a float count that fits, and p a permutation
 * of 0..3. */
static int check_transpose4(const struct karg *args, uint64_t *elements, const char **why)
{
	uint64_t n = 1;
	unsigned seen = 0;
	int r;

	for (unsigned k = 0; k < 4; k++) {
		const int32_t d = args[2 + k].v.i32, p = args[6 + k].v.i32;

		if (d < 1)
			return fail(why, -EINVAL,
				"transpose4: dimension %u is %" PRId32 ", not >= 1", k, d);
		if (!mul_ok(n, (uint64_t)d, &n))
			return fail(why, -ERANGE, "transpose4: the dimensions' product overflows");
		if (p < 0 || p > 3 || (seen & (1u << p)))
			return fail(why, -EINVAL,
				"transpose4: p0..p3 must be a permutation of 0..3 (p%u is %" PRId32
				")",
				k, p);
		seen |= 1u << p;
	}
	if ((r = need_floats("transpose4", &args[0], "input x", "d0*d1*d2*d3", n, why)) < 0 ||
		(r = need_floats("transpose4", &args[1], "output y", "d0*d1*d2*d3", n, why)) < 0)
		return r;
	*elements = n;
	return 0;
}

void kernel_conv2d_from_args(const struct karg *args, struct kernel_conv2d *p)
{
	*p = (struct kernel_conv2d){
		.n = args[3].v.i32,
		.c = args[4].v.i32,
		.h = args[5].v.i32,
		.w = args[6].v.i32,
		.o = args[7].v.i32,
		.kh = args[8].v.i32,
		.kw = args[9].v.i32,
		.stride_h = args[10].v.i32,
		.stride_w = args[11].v.i32,
		.pad_top = args[12].v.i32,
		.pad_bottom = args[13].v.i32,
		.pad_left = args[14].v.i32,
		.pad_right = args[15].v.i32,
		.lhs_dil_h = args[16].v.i32,
		.lhs_dil_w = args[17].v.i32,
		.rhs_dil_h = args[18].v.i32,
		.rhs_dil_w = args[19].v.i32,
		.groups = args[20].v.i32,
	};
}

/* One spatial axis. With 32-bit inputs every term is below 2^62 in magnitude, so the
 * 64-bit arithmetic here (and in kbody_conv2d) cannot overflow. */
static int conv_extent(const char *axis, int32_t in, int32_t k, int32_t stride, int32_t pad_lo,
	int32_t pad_hi, int32_t lhs_dil, int32_t rhs_dil, int64_t *out, const char **why)
{
	const int64_t in_d = (int64_t)(in - 1) * lhs_dil + 1;
	const int64_t k_d = (int64_t)(k - 1) * rhs_dil + 1;
	const int64_t padded = in_d + pad_lo + pad_hi;

	if (padded < k_d)
		return fail(why, -EINVAL,
			"conv2d: output %s < 1: dilated input %s %" PRId64 " + padding %" PRId32
			" + %" PRId32 " = %" PRId64 " is less than dilated kernel %s %" PRId64,
			axis, axis, in_d, pad_lo, pad_hi, padded, axis, k_d);
	*out = (padded - k_d) / stride + 1;
	return 0;
}

int kernel_conv2d_out_shape(struct kernel_conv2d *p, const char **why)
{
	const struct {
		const char *name;
		int32_t value;
	} positive[] = {
		{"N", p->n},
		{"C", p->c},
		{"H", p->h},
		{"W", p->w},
		{"O", p->o},
		{"KH", p->kh},
		{"KW", p->kw},
		{"stride_h", p->stride_h},
		{"stride_w", p->stride_w},
		{"lhs_dil_h", p->lhs_dil_h},
		{"lhs_dil_w", p->lhs_dil_w},
		{"rhs_dil_h", p->rhs_dil_h},
		{"rhs_dil_w", p->rhs_dil_w},
		{"groups", p->groups},
	};
	int64_t oh = 0, ow = 0;
	int r;

	p->oh = p->ow = 0;
	for (size_t i = 0; i < sizeof(positive) / sizeof(positive[0]); i++)
		if (positive[i].value < 1)
			return fail(why, -EINVAL, "conv2d: %s must be >= 1, got %" PRId32,
				positive[i].name, positive[i].value);
	if (p->c % p->groups != 0)
		return fail(why, -EINVAL, "conv2d: groups=%" PRId32 " does not divide C=%" PRId32,
			p->groups, p->c);
	if (p->o % p->groups != 0)
		return fail(why, -EINVAL, "conv2d: groups=%" PRId32 " does not divide O=%" PRId32,
			p->groups, p->o);

	if ((r = conv_extent("height", p->h, p->kh, p->stride_h, p->pad_top, p->pad_bottom,
		     p->lhs_dil_h, p->rhs_dil_h, &oh, why)) < 0 ||
		(r = conv_extent("width", p->w, p->kw, p->stride_w, p->pad_left, p->pad_right,
			 p->lhs_dil_w, p->rhs_dil_w, &ow, why)) < 0)
		return r;
	p->oh = oh;
	p->ow = ow;
	return 0;
}

/* a*b*c*d, each >= 1, or -ERANGE naming the product. */
static int count4(const char *formula, uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t *r,
	const char **why)
{
	if (!mul_ok(a, b, r) || !mul_ok(*r, c, r) || !mul_ok(*r, d, r))
		return fail(why, -ERANGE, "conv2d: %s overflows 64 bits", formula);
	return 0;
}

static int check_conv2d(const struct karg *args, uint64_t *elements, const char **why)
{
	struct kernel_conv2d p;
	uint64_t in, wt, out;
	int r;

	kernel_conv2d_from_args(args, &p);
	if ((r = kernel_conv2d_out_shape(&p, why)) < 0)
		return r;
	if ((r = count4("N*C*H*W", (uint64_t)p.n, (uint64_t)p.c, (uint64_t)p.h, (uint64_t)p.w, &in,
		     why)) < 0 ||
		(r = count4("O*(C/groups)*KH*KW", (uint64_t)p.o, (uint64_t)(p.c / p.groups),
			 (uint64_t)p.kh, (uint64_t)p.kw, &wt, why)) < 0 ||
		(r = count4("N*O*OH*OW", (uint64_t)p.n, (uint64_t)p.o, (uint64_t)p.oh,
			 (uint64_t)p.ow, &out, why)) < 0)
		return r;
	if ((r = need_floats("conv2d", &args[0], "input", "N*C*H*W", in, why)) < 0 ||
		(r = need_floats("conv2d", &args[1], "weight", "O*(C/groups)*KH*KW", wt, why)) <
			0 ||
		(r = need_floats("conv2d", &args[2], "output", "N*O*OH*OW", out, why)) < 0)
		return r;
	*elements = out;
	return 0;
}

static const struct kernel_desc kernel_fill = {
	.name = "fill",
	.nargs = 3,
	.types = {KARG_BUFFER, KARG_F32, KARG_U64},
	.access = {KARG_OUT},
	.check = check_fill,
	.cpu = kernel_cpu_fill,
};

static const struct kernel_desc kernel_iota = {
	.name = "iota",
	.nargs = 4,
	.types = {KARG_BUFFER, KARG_F32, KARG_F32, KARG_U64},
	.access = {KARG_OUT},
	.check = check_iota,
	.cpu = kernel_cpu_iota,
};

static const struct kernel_desc kernel_add = {
	.name = "add",
	.nargs = 4,
	.types = {KARG_BUFFER, KARG_BUFFER, KARG_BUFFER, KARG_U64},
	.access = {KARG_IN, KARG_IN, KARG_OUT},
	.check = check_add,
	.cpu = kernel_cpu_add,
};

static const struct kernel_desc kernel_axpy = {
	.name = "axpy",
	.nargs = 4,
	.types = {KARG_F32, KARG_BUFFER, KARG_BUFFER, KARG_U64},
	.access = {0, KARG_IN, KARG_INOUT},
	.check = check_axpy,
	.cpu = kernel_cpu_axpy,
};

static const struct kernel_desc kernel_scale = {
	.name = "scale",
	.nargs = 4,
	.types = {KARG_BUFFER, KARG_BUFFER, KARG_F32, KARG_U64},
	.access = {KARG_IN, KARG_OUT},
	.check = check_scale,
	.cpu = kernel_cpu_scale,
};

static const struct kernel_desc kernel_reduce_sum = {
	.name = "reduce_sum",
	.nargs = 3,
	.types = {KARG_BUFFER, KARG_BUFFER, KARG_U64},
	.access = {KARG_IN, KARG_OUT},
	.check = check_reduce_sum,
	.cpu = kernel_cpu_reduce_sum,
};

static const struct kernel_desc kernel_spin = {
	.name = "spin",
	.nargs = 1,
	.types = {KARG_U64},
	.check = check_spin,
	.cpu = kernel_cpu_spin,
};

static const struct kernel_desc kernel_conv2d = {
	.name = "conv2d",
	.nargs = 21,
	.types = {KARG_BUFFER, KARG_BUFFER, KARG_BUFFER,
		/* N, C, H, W, O, KH, KW */
		KARG_I32, KARG_I32, KARG_I32, KARG_I32, KARG_I32, KARG_I32, KARG_I32,
		/* stride h, w; pad top, bottom, left, right */
		KARG_I32, KARG_I32, KARG_I32, KARG_I32, KARG_I32, KARG_I32,
		/* lhs dilation h, w; rhs dilation h, w; groups */
		KARG_I32, KARG_I32, KARG_I32, KARG_I32, KARG_I32},
	.access = {KARG_IN, KARG_IN, KARG_OUT},
	.check = check_conv2d,
	.cpu = kernel_cpu_conv2d,
};

static const struct kernel_desc kernel_transpose4 = {
	.name = "transpose4",
	.nargs = 10,
	.types = {KARG_BUFFER, KARG_BUFFER,
		/* x's dimensions d0..d3, then the permutation p0..p3 */
		KARG_I32, KARG_I32, KARG_I32, KARG_I32, KARG_I32, KARG_I32, KARG_I32, KARG_I32},
	.access = {KARG_IN, KARG_OUT},
	.check = check_transpose4,
	.cpu = kernel_cpu_transpose4,
};

static const struct kernel_desc *const kernels[] = {
	&kernel_fill,
	&kernel_iota,
	&kernel_add,
	&kernel_axpy,
	&kernel_scale,
	&kernel_reduce_sum,
	&kernel_spin,
	&kernel_conv2d,
	&kernel_transpose4,
	NULL,
};

const struct kernel_desc *const *kernel_list(void)
{
	return kernels;
}

const struct kernel_desc *kernel_find(const char *name)
{
	if (!name)
		return NULL;
	for (const struct kernel_desc *const *k = kernels; *k; k++)
		if (strcmp((*k)->name, name) == 0)
			return *k;
	return NULL;
}

const struct karg_type_info karg_types[KARG_NTYPES] = {
#define KARG_INFO(T, name, ctype, size, wide, min, max) [KARG_##T] = {#name, size},
	KARG_TYPES(KARG_INFO)
#undef KARG_INFO
};

const char *karg_type_name(enum karg_type type)
{
	return (unsigned)type < KARG_NTYPES ? karg_types[type].name : "unknown";
}

const char *karg_access_name(unsigned access)
{
	static const char *const names[] = {"?", "in", "out", "inout"};

	return names[access & 3];
}

int kernel_validate(const struct kernel_desc *k, const struct karg *args, unsigned nargs,
	uint64_t *elements, const char **why)
{
	if (nargs != k->nargs)
		return fail(
			why, -EINVAL, "%s: takes %u arguments, got %u", k->name, k->nargs, nargs);
	for (unsigned i = 0; i < nargs; i++) {
		if (args[i].type != k->types[i])
			return fail(why, -EINVAL, "%s: argument %u must be %s, got %s", k->name, i,
				karg_type_name(k->types[i]), karg_type_name(args[i].type));
		/* The sequencer orders the launch by the declared access (I2, I4): a buffer
		 * the kernel writes but the client marked "in" would race with its readers. */
		if (args[i].type == KARG_BUFFER &&
			(args[i].access > KARG_INOUT ||
				(args[i].access & k->access[i]) != k->access[i]))
			return fail(why, -EINVAL,
				"%s: buffer argument %u is marked %s, the kernel needs %s", k->name,
				i, karg_access_name(args[i].access),
				karg_access_name(k->access[i]));
	}
	return k->check(args, elements, why);
}
