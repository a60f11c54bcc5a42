/* A user code object for test-hip: LoadModule and Execute of module functions, built
 * apart from the built-in kernels as a client's own code would be (nvcc -fatbin on
 * NVIDIA, hipcc --genco on AMD). Every argument arrives by value, in order. */
#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#endif
#include <stdint.h>

/* x[i] *= 2 for i < n: one in-out buffer and a count. */
extern "C" __global__ void twice(float *x, uint64_t n)
{
	const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] *= 2.0f;
}

/* out[i] = a * in[i]: an input the daemon must order after its producer. */
extern "C" __global__ void scaled(const float *in, float *out, float a, uint64_t n)
{
	const uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		out[i] = a * in[i];
}

/* Every scalar type, in order, written back as doubles: pins how each is passed. */
extern "C" __global__ void scalars(double *y, int32_t a, uint32_t b, int64_t c, uint64_t d,
	float e, double f)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		y[0] = (double)a;
		y[1] = (double)b;
		y[2] = (double)c;
		y[3] = (double)d;
		y[4] = (double)e;
		y[5] = f;
	}
}
