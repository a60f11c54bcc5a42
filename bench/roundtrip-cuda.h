/* What the native sides of the read-back round trip share (roundtrip-native.cu,
 * roundtrip-threads.cu): the check of every CUDA call, which names the program
 * (BENCH_NAME) and exits, and the fill kernel, the same as sseqd's built-in one. */
#ifndef SSEQ_BENCH_ROUNDTRIP_CUDA_H
#define SSEQ_BENCH_ROUNDTRIP_CUDA_H

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CHECK(call)                                                                                \
	do {                                                                                       \
		cudaError_t err_ = (call);                                                         \
		if (err_ != cudaSuccess) {                                                         \
			fprintf(stderr, "%s: %s: %s\n", BENCH_NAME, #call,                         \
				cudaGetErrorString(err_));                                         \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

__global__ void fill(float *p, float v, unsigned long long n)
{
	unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = v;
}

#endif
