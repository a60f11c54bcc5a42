/* The read-back round trip of bench-roundtrip written natively, one CUDA stream per
 * process: cudaMallocAsync, a fill kernel, cudaMemcpyAsync into pinned memory,
 * cudaFreeAsync, cudaStreamSynchronize. Run alone, side by side, or under MPS
 * (bench/roundtrip.sh). Prints the same key=value line as bench-roundtrip.
 * Build: nvcc -O2 -arch=sm_90 -o bench-roundtrip-native bench/roundtrip-native.cu
 * $SSEQ_BENCH_PACE_US and SIGTERM as bench-roundtrip's.
 * Usage: bench-roundtrip-native [ROUNDS [BYTES]] */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sys/resource.h>
#include <unistd.h>

#include <cuda_runtime.h>

#define BENCH_NAME "bench-roundtrip-native"
#include "roundtrip-cuda.h"

extern "C" {
#include "common.h"
}

static void round_trip(cudaStream_t st, size_t bytes, float *host, float value, double *t)
{
	const unsigned long long n = bytes / sizeof(float);
	float *dev;
	double t0 = now_s();

	CHECK(cudaMallocAsync((void **)&dev, bytes, st));
	fill<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(dev, value, n);
	CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, st));
	CHECK(cudaFreeAsync(dev, st));
	CHECK(cudaStreamSynchronize(st));
	*t = now_s() - t0;
	if (host[0] != value || host[n - 1] != value) {
		fprintf(stderr, "bench-roundtrip-native: read back %g for %g\n", host[0], value);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const int rounds = argc > 1 ? atoi(argv[1]) : 1000;
	const size_t bytes = argc > 2 ? strtoull(argv[2], NULL, 0) : 1024;
	const char *raw = getenv("SSEQ_BENCH_RAW");
	double *t, start, end, cpu, w, next = 0;
	int done;
	cudaStream_t st;
	struct rusage ru;
	float *host;

	if (rounds < 1 || bytes < sizeof(float) || bytes % sizeof(float)) {
		fprintf(stderr, "usage: bench-roundtrip-native [ROUNDS [BYTES]]\n");
		return 2;
	}
	t = (double *)calloc((size_t)rounds, sizeof(double));
	CHECK(cudaSetDevice(0));
	CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CHECK(cudaMallocHost((void **)&host, bytes));
	for (int r = 0; r < 20; r++)
		round_trip(st, bytes, host, (float)-r, &w);
	bench_stop_on_term();
	start = bench_wait_go("native");
	for (done = 0; done < rounds && !bench_stopped; done++) {
		bench_pace(&next);
		round_trip(st, bytes, host, (float)(done + 1), &t[done]);
	}
	if (done == 0) {
		fprintf(stderr, "bench-roundtrip-native: stopped before the first round\n");
		return 1;
	}
	end = wall_s();
	getrusage(RUSAGE_SELF, &ru);
	cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	      (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
	if (raw && *raw) {
		char path[4096];
		snprintf(path, sizeof(path), "%s.%d", raw, (int)getpid());
		FILE *f = fopen(path, "w");
		for (int r = 0; f && r < done; r++)
			fprintf(f, "%.1f\n", t[r] * 1e6);
		if (f)
			fclose(f);
	}
	std::sort(t, t + done);
	printf("native roundtrip rounds=%d bytes=%zu start=%.6f end=%.6f median_us=%.1f "
	       "p90_us=%.1f cpu_s=%.3f\n",
		done, bytes, start, end, t[done / 2] * 1e6, t[done * 9 / 10] * 1e6, cpu);
	return 0;
}
