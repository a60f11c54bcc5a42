/* The built-in kernels as device code: one source, compiled by hipcc for AMD (a .hsaco
 * code object) and by nvcc for NVIDIA (a .fatbin), loaded by the hip backend at run time.
 * Each wrapper forms its 64-bit element index and calls the shared body in kernels-impl.h. */
#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#endif

#include "kernels-impl.h"

/* Arguments: the kernel's signature in order (a buffer is the device address of its
 * view), then `elements`, the launch's extent as check() computed it, then any extra the
 * hip backend adds for the kernel (spin: the clock rate; conv2d: its output extent). The
 * grid is 1-D, blocks of 256, covering elements; threads past the end do nothing. */
#define SSEQ_INDEX() ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x)

/* The device clock spin counts: AMD's wall_clock64() (constant rate, clock_khz ticks per
 * ms) or NVIDIA's %globaltimer (nanoseconds, clock_khz = 1e6). Neither follows the shader
 * clock, so the wait is wall time whatever the GPU's frequency does. */
__device__ static inline uint64_t sseq_clock(void)
{
#if defined(__HIPCC__)
	return (uint64_t)wall_clock64();
#else
	uint64_t t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
#endif
}

extern "C" __global__ void sseq_fill(float *y, float value, uint64_t n, uint64_t elements)
{
	const uint64_t i = SSEQ_INDEX();

	if (i < elements)
		kbody_fill(y, value, i);
}

extern "C" __global__ void sseq_iota(float *y, float start, float step, uint64_t n,
	uint64_t elements)
{
	const uint64_t i = SSEQ_INDEX();

	if (i < elements)
		kbody_iota(y, start, step, i);
}

extern "C" __global__ void sseq_add(const float *a, const float *b, float *c, uint64_t n,
	uint64_t elements)
{
	const uint64_t i = SSEQ_INDEX();

	if (i < elements)
		kbody_add(a, b, c, i);
}

extern "C" __global__ void sseq_axpy(float alpha, const float *x, float *y, uint64_t n,
	uint64_t elements)
{
	const uint64_t i = SSEQ_INDEX();

	if (i < elements)
		kbody_axpy(alpha, x, y, i);
}

extern "C" __global__ void sseq_scale(const float *x, float *y, float alpha, uint64_t n,
	uint64_t elements)
{
	const uint64_t i = SSEQ_INDEX();

	if (i < elements)
		kbody_scale(x, y, alpha, i);
}

extern "C" __global__ void sseq_reduce_sum(const float *x, float *y, uint64_t n,
	uint64_t elements)
{
	if (SSEQ_INDEX() < elements)
		kbody_reduce_sum(x, y, n);
}

extern "C" __global__ void sseq_spin(uint64_t us, uint64_t elements, uint64_t clock_khz)
{
	if (SSEQ_INDEX() < elements) {
		const uint64_t ticks = us * clock_khz / 1000;
		const uint64_t start = sseq_clock();

		while (sseq_clock() - start < ticks)
			;
	}
}

/* The scalars arrive both as the signature's int32s and, with the output extent the
 * host derived through kernel_conv2d_out_shape (its one definition), as `p`. */
extern "C" __global__ void sseq_conv2d(const float *x, const float *w, float *y, int32_t n,
	int32_t c, int32_t h, int32_t wd, int32_t o, int32_t kh, int32_t kw, int32_t stride_h,
	int32_t stride_w, int32_t pad_top, int32_t pad_bottom, int32_t pad_left,
	int32_t pad_right, int32_t lhs_dil_h, int32_t lhs_dil_w, int32_t rhs_dil_h,
	int32_t rhs_dil_w, int32_t groups, uint64_t elements, struct kernel_conv2d p)
{
	const uint64_t i = SSEQ_INDEX();

	if (i < elements)
		kbody_conv2d(x, w, y, &p, i);
}

extern "C" __global__ void sseq_transpose4(const float *x, float *y, int32_t d0, int32_t d1,
	int32_t d2, int32_t d3, int32_t p0, int32_t p1, int32_t p2, int32_t p3, uint64_t elements)
{
	const uint64_t i = SSEQ_INDEX();

	if (i < elements)
		kbody_transpose4(x, y, d0, d1, d2, d3, p0, p1, p2, p3, i);
}
