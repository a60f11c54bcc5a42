// Module functions by name on a real GPU (tests/gpu/names.sh): a template, two
// overloads and a kernel with dynamic shared memory, as nvcc names them.
template <int N> __global__ void __launch_bounds__(N) reduce(const float *in, float *out, int n)
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
template __global__ void reduce<256>(const float *, float *, int);

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

// Reverses x through dynamic shared memory: one block of n threads, n * 4 bytes or more.
extern "C" __global__ void reverse_shared(float *x, int n)
{
	extern __shared__ float buf[];
	int i = threadIdx.x;

	if (i < n)
		buf[i] = x[i];
	__syncthreads();
	if (i < n)
		x[i] = buf[n - 1 - i];
}
