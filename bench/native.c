/* The native baseline: the same work as bench-client, done directly with HIP in one
 * process (built through the same platform header as the daemon). Each mode prints one
 * line of key=value figures. Modes: copy, latency, launch, threads, first-kernel, burst,
 * hold. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef SSEQ_HIP_NVIDIA
#include "hip-nvidia.h"
#else
#include <hip/hip_runtime_api.h>
#endif

#include "common.h"

/* The spin kernel's clock (its hidden argument, as the hip backend passes it): NVIDIA's
 * globaltimer counts nanoseconds, AMD's wall clock runs at 100 MHz. */
#ifdef SSEQ_HIP_NVIDIA
#define NATIVE_CLOCK_KHZ 1000000ull
#else
#define NATIVE_CLOCK_KHZ 100000ull
#endif

#define CHECK(call)                                                                                \
	do {                                                                                       \
		hipError_t err_ = (call);                                                          \
		if (err_ != hipSuccess) {                                                          \
			fprintf(stderr, "bench-native: %s: %s\n", #call, hipGetErrorString(err_)); \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

/* Copies per timed burst (bench_copy_burst). */
static int COPY_BURST;

static void *pinned(size_t size)
{
	void *p = aligned_alloc(4096, size);
	if (!p) {
		fprintf(stderr, "bench-native: out of host memory\n");
		exit(1);
	}
	memset(p, 1, size);
	CHECK(hipHostRegister(p, size, hipHostRegisterDefault));
	return p;
}

/* H2D, D2H and D2D of `size` bytes from registered host memory, best of `reps`. */
static void mode_copy(size_t size, int reps)
{
	hipStream_t st;
	void *host = pinned(size), *dev, *dev2;
	double best[3] = {1e9, 1e9, 1e9};

	CHECK(hipStreamCreateWithFlags(&st, hipStreamNonBlocking));
	CHECK(hipMalloc(&dev, size));
	CHECK(hipMalloc(&dev2, size));
	/* COPY_BURST copies back to back, then one synchronize: bandwidth, not latency. */
	for (int r = 0; r < reps + 1; r++) {
		for (int k = 0; k < 3; k++) {
			double t0 = now_s(), t;
			for (int i = 0; i < COPY_BURST; i++) {
				if (k == 0)
					CHECK(hipMemcpyAsync(
						dev, host, size, hipMemcpyHostToDevice, st));
				else if (k == 1)
					CHECK(hipMemcpyAsync(
						host, dev, size, hipMemcpyDeviceToHost, st));
				else
					CHECK(hipMemcpyAsync(
						dev2, dev, size, hipMemcpyDeviceToDevice, st));
			}
			CHECK(hipStreamSynchronize(st));
			t = now_s() - t0;
			if (r > 0 && t < best[k]) /* the first round warms up */
				best[k] = t;
		}
	}
	printf("native copy bytes=%zu burst=%d h2d_GBps=%.2f d2h_GBps=%.2f d2d_GBps=%.2f\n", size,
		COPY_BURST, COPY_BURST * (double)size / best[0] / 1e9,
		COPY_BURST * (double)size / best[1] / 1e9,
		COPY_BURST * (double)size / best[2] / 1e9);
}

/* 4 KiB H2D then synchronize, median of `reps`. */
static void mode_latency(int reps)
{
	hipStream_t st;
	void *host = pinned(4096), *dev;
	double *t = calloc((size_t)reps, sizeof(double));

	CHECK(hipStreamCreateWithFlags(&st, hipStreamNonBlocking));
	CHECK(hipMalloc(&dev, 4096));
	for (int r = 0; r < reps; r++) {
		double t0 = now_s();
		CHECK(hipMemcpyAsync(dev, host, 4096, hipMemcpyHostToDevice, st));
		CHECK(hipStreamSynchronize(st));
		t[r] = now_s() - t0;
	}
	print_latency("native", t, reps);
	free(t);
}

static hipFunction_t load_spin(const char *image)
{
	hipModule_t mod;
	hipFunction_t f;

	CHECK(hipModuleLoad(&mod, image));
	CHECK(hipModuleGetFunction(&f, mod, "sseq_spin"));
	return f;
}

/* `count` launches of the built-in spin kernel for 0 us (an empty kernel), one stream. */
static void mode_launch(const char *image, long count)
{
	hipStream_t st;
	hipFunction_t f = load_spin(image);
	uint64_t us = 0, elements = 1, khz = 0;
	void *params[] = {&us, &elements, &khz};
	double t0;

	CHECK(hipStreamCreateWithFlags(&st, hipStreamNonBlocking));
	for (int i = 0; i < 1000; i++) /* warm-up */
		CHECK(hipModuleLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, st, params, NULL));
	CHECK(hipStreamSynchronize(st));
	t0 = now_s();
	for (long i = 0; i < count; i++)
		CHECK(hipModuleLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, st, params, NULL));
	CHECK(hipStreamSynchronize(st));
	print_launch("native", count, t0);
}

/* One context's launch ceiling: `threads` threads, a stream each, each launching `count`
 * empty kernels, all started together; the aggregate over the span. What one daemon (one
 * context, its submit threads) can reach at best, against MPS's contexts. */
struct launcher {
	hipFunction_t f;
	long count;
	pthread_barrier_t *go;
	double t0, t1;
};

static void *launcher_run(void *arg)
{
	struct launcher *l = arg;
	uint64_t us = 0, elements = 1, khz = 0;
	void *params[] = {&us, &elements, &khz};
	hipStream_t st;

	CHECK(hipSetDevice(0));
	CHECK(hipStreamCreateWithFlags(&st, hipStreamNonBlocking));
	for (int i = 0; i < 1000; i++)
		CHECK(hipModuleLaunchKernel(l->f, 1, 1, 1, 256, 1, 1, 0, st, params, NULL));
	CHECK(hipStreamSynchronize(st));
	pthread_barrier_wait(l->go);
	l->t0 = now_s();
	for (long i = 0; i < l->count; i++)
		CHECK(hipModuleLaunchKernel(l->f, 1, 1, 1, 256, 1, 1, 0, st, params, NULL));
	CHECK(hipStreamSynchronize(st));
	l->t1 = now_s();
	CHECK(hipStreamDestroy(st));
	return NULL;
}

static void mode_threads(const char *image, unsigned threads, long count)
{
	struct launcher l[64];
	pthread_t t[64];
	pthread_barrier_t go;
	hipFunction_t f;
	double t0 = 0, t1 = 0;

	if (threads < 1 || threads > 64) {
		fprintf(stderr, "bench-native: threads: 1 to 64\n");
		exit(2);
	}
	CHECK(hipSetDevice(0));
	f = load_spin(image);
	pthread_barrier_init(&go, NULL, threads);
	for (unsigned i = 0; i < threads; i++) {
		l[i] = (struct launcher){f, count, &go, 0, 0};
		if (pthread_create(&t[i], NULL, launcher_run, &l[i])) {
			fprintf(stderr, "bench-native: cannot start a thread\n");
			exit(1);
		}
	}
	for (unsigned i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		if (!i || l[i].t0 < t0)
			t0 = l[i].t0;
		if (l[i].t1 > t1)
			t1 = l[i].t1;
	}
	pthread_barrier_destroy(&go);
	printf("native threads=%u each=%ld seconds=%.4f aggregate_launches_per_s=%.0f\n", threads,
		count, t1 - t0, (double)threads * (double)count / (t1 - t0));
}

/* `count` one-block spin(us) kernels on a stream of this process's own context (or its
 * MPS client), started with the other processes of a concurrency run, then sync. */
static void mode_burst(const char *image, long count, unsigned long us)
{
	hipStream_t st;
	hipFunction_t f;
	uint64_t spin_us = us, elements = 1, khz = NATIVE_CLOCK_KHZ;
	void *params[] = {&spin_us, &elements, &khz};
	double t0;

	CHECK(hipSetDevice(0));
	f = load_spin(image);
	CHECK(hipStreamCreateWithFlags(&st, hipStreamNonBlocking));
	for (int i = 0; i < 10; i++)
		CHECK(hipModuleLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, st, params, NULL));
	CHECK(hipStreamSynchronize(st));
	t0 = bench_wait_go("native");
	for (long i = 0; i < count; i++)
		CHECK(hipModuleLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, st, params, NULL));
	CHECK(hipStreamSynchronize(st));
	print_burst("native", count, us, t0);
}

/* What a fresh worker does natively: create a context, load the kernels, allocate, run
 * one kernel and wait for it. Timed from outside (process start to exit). */
static void mode_first_kernel(const char *image)
{
	hipStream_t st;
	hipFunction_t f;
	uint64_t us = 0, elements = 1, khz = 0;
	void *params[] = {&us, &elements, &khz};
	void *dev;

	CHECK(hipSetDevice(0));
	f = load_spin(image);
	CHECK(hipStreamCreateWithFlags(&st, hipStreamNonBlocking));
	CHECK(hipMalloc(&dev, 4096));
	CHECK(hipModuleLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, st, params, NULL));
	CHECK(hipStreamSynchronize(st));
	printf("native first-kernel done\n");
}

/* Hold a context (and a 4 KiB buffer) until stdin closes: for device-memory figures. */
static void mode_hold(void)
{
	void *dev;

	CHECK(hipSetDevice(0));
	CHECK(hipMalloc(&dev, 4096));
	hold_until_stdin_closes("native");
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	COPY_BURST = bench_copy_burst();
	if (!strcmp(mode, "copy"))
		mode_copy(argc > 2 ? strtoull(argv[2], NULL, 0) : 256u << 20, 5);
	else if (!strcmp(mode, "latency"))
		mode_latency(argc > 2 ? atoi(argv[2]) : 2000);
	else if (!strcmp(mode, "launch") && argc > 2)
		mode_launch(argv[2], argc > 3 ? atol(argv[3]) : 200000);
	else if (!strcmp(mode, "threads") && argc > 3)
		mode_threads(argv[2], (unsigned)atoi(argv[3]), argc > 4 ? atol(argv[4]) : 20000);
	else if (!strcmp(mode, "first-kernel") && argc > 2)
		mode_first_kernel(argv[2]);
	else if (!strcmp(mode, "burst") && argc > 2)
		mode_burst(argv[2], argc > 3 ? atol(argv[3]) : 2000,
			argc > 4 ? strtoul(argv[4], NULL, 0) : 50);
	else if (!strcmp(mode, "hold"))
		mode_hold();
	else {
		fprintf(stderr,
			"usage: bench-native copy [BYTES] | latency [N] | launch IMAGE [N] |"
			" threads IMAGE T [N] |"
			" first-kernel IMAGE | burst IMAGE [N [US]] | hold\n");
		return 2;
	}
	return 0;
}
