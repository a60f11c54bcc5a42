/* The CPU versions of the built-in kernels: each loops over the launch's elements and
 * calls the shared body from kernels-impl.h, so the sim computes what the GPU computes.
 * Arguments were validated by kernel_validate before any of these runs. */
#include <time.h>

#include "cpu.h"
#include "kernels-impl.h"

void kernel_cpu_fill(const struct karg *args, uint64_t elements)
{
	float *y = args[0].v.buf.ptr;

	for (uint64_t i = 0; i < elements; i++)
		kbody_fill(y, args[1].v.f32, i);
}

void kernel_cpu_iota(const struct karg *args, uint64_t elements)
{
	float *y = args[0].v.buf.ptr;

	for (uint64_t i = 0; i < elements; i++)
		kbody_iota(y, args[1].v.f32, args[2].v.f32, i);
}

void kernel_cpu_add(const struct karg *args, uint64_t elements)
{
	const float *a = args[0].v.buf.ptr;
	const float *b = args[1].v.buf.ptr;
	float *c = args[2].v.buf.ptr;

	for (uint64_t i = 0; i < elements; i++)
		kbody_add(a, b, c, i);
}

void kernel_cpu_axpy(const struct karg *args, uint64_t elements)
{
	const float *x = args[1].v.buf.ptr;
	float *y = args[2].v.buf.ptr;

	for (uint64_t i = 0; i < elements; i++)
		kbody_axpy(args[0].v.f32, x, y, i);
}

void kernel_cpu_scale(const struct karg *args, uint64_t elements)
{
	const float *x = args[0].v.buf.ptr;
	float *y = args[1].v.buf.ptr;

	for (uint64_t i = 0; i < elements; i++)
		kbody_scale(x, y, args[2].v.f32, i);
}

void kernel_cpu_reduce_sum(const struct karg *args, uint64_t elements)
{
	if (elements > 0)
		kbody_reduce_sum(args[0].v.buf.ptr, args[1].v.buf.ptr, args[2].v.u64);
}

static int64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Busy rather than sleep: it stands in for a kernel that occupies its stream, and a
 * stream worker that sleeps would not show the contention a GPU kernel does. */
void kernel_cpu_spin(const struct karg *args, uint64_t elements)
{
	/* check() capped the duration, so the product fits. */
	const int64_t ns = (int64_t)args[0].v.u64 * 1000;
	const int64_t start = monotonic_ns();

	(void)elements;
	while (monotonic_ns() - start < ns)
		;
}

void kernel_cpu_conv2d(const struct karg *args, uint64_t elements)
{
	struct kernel_conv2d p;

	kernel_conv2d_from_args(args, &p);
	if (kernel_conv2d_out_shape(&p, NULL) < 0)
		return; /* unreachable after check(); never index with a bad shape */
	for (uint64_t i = 0; i < elements; i++)
		kbody_conv2d(args[0].v.buf.ptr, args[1].v.buf.ptr, args[2].v.buf.ptr, &p, i);
}

void kernel_cpu_transpose4(const struct karg *args, uint64_t elements)
{
	const float *x = args[0].v.buf.ptr;
	float *y = args[1].v.buf.ptr;

	for (uint64_t i = 0; i < elements; i++)
		kbody_transpose4(x, y, args[2].v.i32, args[3].v.i32, args[4].v.i32, args[5].v.i32,
			args[6].v.i32, args[7].v.i32, args[8].v.i32, args[9].v.i32, i);
}
