/* An LD_PRELOAD shim for measurements: sets how CUDA waits (the primary context's
 * scheduling flag) in a process that does not choose, before the process creates its
 * context. $SSEQ_BENCH_SCHED is spin, yield, blocking or auto. The driver API is used, not
 * the runtime's cudaSetDeviceFlags, since sseqd links the runtime statically: the flag is
 * the driver's, process-wide. Device 0 unless $SSEQ_BENCH_SCHED_DEVICE.
 * Build: cc -O2 -shared -fPIC -o sched-preload.so bench/sched-preload.c -ldl */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cuda.h's values, so that this builds without the toolkit. */
#define CU_CTX_SCHED_AUTO 0x00
#define CU_CTX_SCHED_SPIN 0x01
#define CU_CTX_SCHED_YIELD 0x02
#define CU_CTX_SCHED_BLOCKING_SYNC 0x04

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_set_flags_fn)(int, unsigned);

__attribute__((constructor)) static void sched_preload_init(void)
{
	const char *want = getenv("SSEQ_BENCH_SCHED"), *devs = getenv("SSEQ_BENCH_SCHED_DEVICE");
	unsigned flag;
	void *lib;
	int dev, r;

	if (!want || !*want)
		return;
	if (!strcmp(want, "spin"))
		flag = CU_CTX_SCHED_SPIN;
	else if (!strcmp(want, "yield"))
		flag = CU_CTX_SCHED_YIELD;
	else if (!strcmp(want, "blocking"))
		flag = CU_CTX_SCHED_BLOCKING_SYNC;
	else
		flag = CU_CTX_SCHED_AUTO;
	lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!lib) {
		fprintf(stderr, "sched-preload: %s\n", dlerror());
		return;
	}
	cu_init_fn cu_init = (cu_init_fn)dlsym(lib, "cuInit");
	cu_device_get_fn cu_device_get = (cu_device_get_fn)dlsym(lib, "cuDeviceGet");
	cu_set_flags_fn cu_set_flags = (cu_set_flags_fn)dlsym(lib, "cuDevicePrimaryCtxSetFlags_v2");

	if (!cu_set_flags)
		cu_set_flags = (cu_set_flags_fn)dlsym(lib, "cuDevicePrimaryCtxSetFlags");
	if (!cu_init || !cu_device_get || !cu_set_flags) {
		fprintf(stderr, "sched-preload: driver entry points missing\n");
		return;
	}
	r = cu_init(0);
	if (r == 0)
		r = cu_device_get(&dev, devs ? atoi(devs) : 0);
	if (r == 0)
		r = cu_set_flags(dev, flag);
	fprintf(stderr, "sched-preload: primary context scheduling %s (0x%x): %s (%d)\n", want,
		flag, r == 0 ? "set" : "FAILED", r);
}
