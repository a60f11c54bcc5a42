/* What one CUDA context can do of the read-back round trip, with no daemon: T threads of
 * one process, each with its own non-blocking stream, a device buffer allocated once (as
 * sseqd's block cache serves it) and a pinned host buffer, each looping: the fill kernel,
 * cudaMemcpyAsync of the buffer into the host buffer, an event recorded after it, and a
 * spin on cudaEventQuery until it completes (as sseqd's completion watcher looks), then a
 * check of the value. The aggregate over T threads is the ceiling that sseqd's loops,
 * submit threads and watcher share, since they all call into the one context.
 * Build: nvcc -O2 -arch=sm_90 -o bench-roundtrip-threads bench/roundtrip-threads.cu -lpthread
 * Usage: bench-roundtrip-threads THREADS [ROUNDS [BYTES [spin|sync]]]   (sync: wait in
 * cudaEventSynchronize, CUDA's default scheduling, instead of spinning on the query)
 * Prints: native-threads threads=T rounds=R median_us=... p90_us=... aggregate_rt_per_s=...
 * cpu_s=... */
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#define BENCH_NAME "bench-roundtrip-threads"
#include "roundtrip-cuda.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct worker {
	pthread_t thread;
	int rounds;
	size_t bytes;
	std::vector<double> t;
};

static bool sync_wait;
static std::atomic<int> ready{0};
static std::atomic<bool> go{false};

static void *work(void *arg)
{
	struct worker *w = (struct worker *)arg;
	const unsigned long long n = w->bytes / sizeof(float);
	cudaStream_t st;
	cudaEvent_t ev;
	float *dev, *host;

	CHECK(cudaSetDevice(0));
	CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	CHECK(cudaMalloc((void **)&dev, w->bytes));
	CHECK(cudaMallocHost((void **)&host, w->bytes));
	w->t.resize((size_t)w->rounds);
	ready++;
	while (!go.load())
		;
	for (int r = -20; r < w->rounds; r++) {
		const float value = (float)(r + 21);
		double t0 = now_s();

		fill<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(dev, value, n);
		CHECK(cudaMemcpyAsync(host, dev, w->bytes, cudaMemcpyDeviceToHost, st));
		CHECK(cudaEventRecord(ev, st));
		cudaError_t e;
		if (sync_wait)
			e = cudaEventSynchronize(ev);
		else
			while ((e = cudaEventQuery(ev)) == cudaErrorNotReady)
				;
		CHECK(e);
		if (host[0] != value || host[n - 1] != value) {
			fprintf(stderr, "bench-roundtrip-threads: read back %g for %g\n", host[0],
				value);
			exit(1);
		}
		if (r >= 0)
			w->t[(size_t)r] = now_s() - t0;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const int threads = argc > 1 ? atoi(argv[1]) : 1;
	const int rounds = argc > 2 ? atoi(argv[2]) : 1000;
	const size_t bytes = argc > 3 ? strtoull(argv[3], NULL, 0) : 1024;
	sync_wait = argc > 4 && std::string(argv[4]) == "sync";
	std::vector<worker> ws((size_t)threads);
	std::vector<double> all;
	struct rusage ru;
	double start, end, cpu;

	if (threads < 1 || rounds < 1 || bytes < sizeof(float) || bytes % sizeof(float)) {
		fprintf(stderr, "usage: bench-roundtrip-threads THREADS [ROUNDS [BYTES]]\n");
		return 2;
	}
	CHECK(cudaSetDevice(0));
	CHECK(cudaFree(0));
	for (auto &w : ws) {
		w.rounds = rounds;
		w.bytes = bytes;
		pthread_create(&w.thread, NULL, work, &w);
	}
	while (ready.load() < threads)
		;
	start = now_s();
	go = true;
	for (auto &w : ws)
		pthread_join(w.thread, NULL);
	end = now_s();
	for (auto &w : ws)
		all.insert(all.end(), w.t.begin(), w.t.end());
	std::sort(all.begin(), all.end());
	getrusage(RUSAGE_SELF, &ru);
	cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	      (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
	/* The 20 warm-up rounds per thread run inside the timed span: count them. */
	printf("native-threads wait=%s threads=%d rounds=%d bytes=%zu median_us=%.1f p90_us=%.1f "
	       "aggregate_rt_per_s=%.0f cpu_s=%.2f\n",
		sync_wait ? "sync" : "spin", threads, rounds, bytes, all[all.size() / 2] * 1e6, all[all.size() * 9 / 10] * 1e6,
		(double)threads * (rounds + 20) / (end - start), cpu);
	return 0;
}
