// The project's own user kernels for the H200 run (tests/gpu/user-kernels.sh): one
// module using each feature a user module may: templated and overloaded names, a struct
// and narrow scalars by value, a filter in __constant__ memory set between launches, a
// __device__ variable kernels write, more than 48 KiB of dynamic shared memory and a
// 3-D launch. test_user_kernels.py checks each against numpy.
#include <stdint.h>

// ---- templated and overloaded names ----

// One block of N threads sums in[0..n) into out[0].
template <int N> __global__ void __launch_bounds__(N) reduce_sum(const float *in, float *out, int n)
{
	__shared__ float part[N];
	float v = 0;

	for (int i = threadIdx.x; i < n; i += N)
		v += in[i];
	part[threadIdx.x] = v;
	__syncthreads();
	for (int s = N / 2; s > 0; s /= 2) {
		if (threadIdx.x < s)
			part[threadIdx.x] += part[threadIdx.x + s];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[0] = part[0];
}
template __global__ void reduce_sum<128>(const float *, float *, int);
template __global__ void reduce_sum<256>(const float *, float *, int);

__global__ void scale(float *x, int n, float a)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] *= a;
}

__global__ void scale(double *x, int n, double a)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] *= a;
}

// ---- a struct and narrow scalars by value ----

struct affine_params {
	float a, b;
	int32_t n;
};

// y[i] = p.a * x[i] + p.b + k * m, for i < p.n (k an int8, m a uint16).
extern "C" __global__ void affine(float *y, const float *x, affine_params p, int8_t k, uint16_t m)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < p.n)
		y[i] = p.a * x[i] + p.b + (float)k * (float)m;
}

// ---- module globals: a constant filter and a counter kernels write ----

__constant__ float c_filter[9];
__device__ unsigned int d_launches;

// out = in (h x w, row-major) correlated with the 3x3 c_filter, zero padding ("same").
extern "C" __global__ void conv3x3(const float *in, float *out, int w, int h)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;
	float acc = 0;

	if (x >= w || y >= h)
		return;
	for (int dy = -1; dy <= 1; dy++)
		for (int dx = -1; dx <= 1; dx++) {
			int xx = x + dx, yy = y + dy;

			if (xx >= 0 && xx < w && yy >= 0 && yy < h)
				acc += c_filter[(dy + 1) * 3 + (dx + 1)] * in[yy * w + xx];
		}
	out[y * w + x] = acc;
	if (x == 0 && y == 0)
		atomicAdd(&d_launches, 1u);
}

// ---- more than 48 KiB of dynamic shared memory ----

// One block reverses x[0..n) through n floats of dynamic shared memory.
extern "C" __global__ void reverse_big(float *x, int n)
{
	extern __shared__ float buf[];

	for (int i = threadIdx.x; i < n; i += blockDim.x)
		buf[i] = x[i];
	__syncthreads();
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		x[i] = buf[n - 1 - i];
}

// ---- a 3-D launch ----

// out[(z * ny + y) * nx + x] = x + 1000 * y + 1000000 * z over an nx x ny x nz grid.
extern "C" __global__ void fill3d(float *out, int nx, int ny, int nz)
{
	int x = blockIdx.x * blockDim.x + threadIdx.x;
	int y = blockIdx.y * blockDim.y + threadIdx.y;
	int z = blockIdx.z * blockDim.z + threadIdx.z;

	if (x < nx && y < ny && z < nz)
		out[((size_t)z * ny + y) * nx + x] = (float)x + 1000.0f * y + 1000000.0f * z;
}
