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

/* The fake module's echo functions (fakecuda/fake-module.txt), for real: every parameter
 * after the first written into out at its offset in the parameter space (CUDA's layout:
 * each at its natural alignment), so tests/test-hip-daemon sees the bytes the daemon
 * packed. Half and bfloat16 are taken as their 16 bits (same size and alignment). */
extern "C" __global__ void echo_narrow(
	char *out, int8_t a, uint8_t b, int16_t c, uint16_t d, uint16_t e, uint16_t f)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		memcpy(out + 8, &a, 1);
		memcpy(out + 9, &b, 1);
		memcpy(out + 10, &c, 2);
		memcpy(out + 12, &d, 2);
		memcpy(out + 14, &e, 2);
		memcpy(out + 16, &f, 2);
	}
}

struct echo_vec12 {
	int32_t a, b, c;
};

extern "C" __global__ void echo_struct(
	char *out, echo_vec12 s, float4 v, const float *base, const float *slice)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		memcpy(out + 8, &s, sizeof(s));
		memcpy(out + 32, &v, sizeof(v));
		memcpy(out + 48, &base, sizeof(base));
		memcpy(out + 56, &slice, sizeof(slice));
	}
}
