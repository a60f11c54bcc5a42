/* The per-element bodies of the built-in kernels, written once: cpu.c loops i over the
 * launch, the HIP wrappers call the same bodies with i from the grid. Plain C11 that is
 * also valid C++, because hipcc and nvcc compile device code as C++. */
#ifndef SSEQ_KERNELS_IMPL_H
#define SSEQ_KERNELS_IMPL_H

#include <stdint.h>

#include "kernels.h"

#if defined(__HIPCC__) || defined(__CUDACC__)
#define SSEQ_KFN __device__ static inline
#else
#define SSEQ_KFN static inline
#endif

/* Every body trusts its arguments: check() has proved that i < elements and that every
 * index it forms lies inside its buffer. The HIP wrappers must form i in 64 bits
 * ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) and skip i >= elements. */

SSEQ_KFN void kbody_fill(float *y, float value, uint64_t i)
{
	y[i] = value;
}

SSEQ_KFN void kbody_iota(float *y, float start, float step, uint64_t i)
{
	y[i] = start + (float)i * step;
}

SSEQ_KFN void kbody_add(const float *a, const float *b, float *c, uint64_t i)
{
	c[i] = a[i] + b[i];
}

SSEQ_KFN void kbody_axpy(float alpha, const float *x, float *y, uint64_t i)
{
	y[i] = alpha * x[i] + y[i];
}

SSEQ_KFN void kbody_scale(const float *x, float *y, float alpha, uint64_t i)
{
	y[i] = alpha * x[i];
}

/* One element: a single thread sums in index order, in double, so the result is the same
 * on every run and every device, whatever the launch shape. */
SSEQ_KFN void kbody_reduce_sum(const float *x, float *y, uint64_t n)
{
	double sum = 0.0;

	for (uint64_t j = 0; j < n; j++)
		sum += (double)x[j];
	y[0] = (float)sum;
}

/* Output element i of a 4-D transpose: y's dimension k is x's dimension p[k] (a
 * permutation of 0..3), so y[j0][j1][j2][j3] is x at the coordinates c with c[p[k]] = jk.
 * XLA inserts this to change layouts (NHWC to NCHW is p = 0, 3, 1, 2). */
SSEQ_KFN void kbody_transpose4(const float *x, float *y, int32_t d0, int32_t d1, int32_t d2,
	int32_t d3, int32_t p0, int32_t p1, int32_t p2, int32_t p3, uint64_t i)
{
	const int64_t d[4] = {d0, d1, d2, d3};
	const int32_t p[4] = {p0, p1, p2, p3};
	int64_t c[4], rest = (int64_t)i;

	for (int k = 3; k >= 0; k--) {
		c[p[k]] = rest % d[p[k]];
		rest /= d[p[k]];
	}
	y[i] = x[((c[0] * d[1] + c[1]) * d[2] + c[2]) * d[3] + c[3]];
}

/* Output element i = y[n][o][oh][ow]. Accumulates in float in (ci, kh, kw) order, as the
 * GPU does. A tap reads the lhs-dilated, padded input at row ihd = oh*stride - pad_top +
 * kh*rhs_dil; rows outside [0, Hd) are padding and rows off the dilation grid are the
 * inserted zeros, so neither is read. Index arithmetic is 64-bit: with 32-bit dimensions
 * no intermediate can exceed 2^63 (see kernel_conv2d_out_shape). */
SSEQ_KFN void kbody_conv2d(
	const float *x, const float *w, float *y, const struct kernel_conv2d *p, uint64_t i)
{
	const int64_t ow = (int64_t)(i % (uint64_t)p->ow);
	const int64_t oh = (int64_t)(i / (uint64_t)p->ow % (uint64_t)p->oh);
	const int64_t oc = (int64_t)(i / ((uint64_t)p->ow * (uint64_t)p->oh) % (uint64_t)p->o);
	const int64_t n = (int64_t)(i / ((uint64_t)p->ow * (uint64_t)p->oh * (uint64_t)p->o));
	const int64_t cg = p->c / p->groups;
	const int64_t c0 = oc / (p->o / p->groups) * cg;
	const int64_t hd = (int64_t)(p->h - 1) * p->lhs_dil_h + 1;
	const int64_t wd = (int64_t)(p->w - 1) * p->lhs_dil_w + 1;
	float acc = 0.0f;

	for (int64_t ci = 0; ci < cg; ci++) {
		const float *xc = x + ((int64_t)n * p->c + c0 + ci) * p->h * p->w;
		const float *wc = w + (oc * cg + ci) * p->kh * p->kw;

		for (int64_t kh = 0; kh < p->kh; kh++) {
			const int64_t ihd = oh * p->stride_h - p->pad_top + kh * p->rhs_dil_h;

			if (ihd < 0 || ihd >= hd || ihd % p->lhs_dil_h != 0)
				continue;
			const int64_t ih = ihd / p->lhs_dil_h;

			for (int64_t kw = 0; kw < p->kw; kw++) {
				const int64_t iwd =
					ow * p->stride_w - p->pad_left + kw * p->rhs_dil_w;

				if (iwd < 0 || iwd >= wd || iwd % p->lhs_dil_w != 0)
					continue;
				acc += xc[ih * p->w + iwd / p->lhs_dil_w] * wc[kh * p->kw + kw];
			}
		}
	}
	y[i] = acc;
}

#endif
