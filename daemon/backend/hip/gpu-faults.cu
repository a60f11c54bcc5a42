/* Kernels that fault, for the device-fault tests (tests/gpu/fault.sh): a user code object
 * like gpu-module.cu, loaded through --module-dir, never part of the built-in kernels.
 * Each poisons the GPU context the way a broken test's kernel does, which is what sseqd
 * must contain: the out-of-bounds write is an illegal address, the trap and the failed
 * assert are a kernel stopping itself. A kernel spinning past a watchdog is not among
 * them: datacenter GPUs such as the H200 run compute without a display watchdog, so such
 * a kernel would hold the GPU until it ends, not fault. */
#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#endif
#include <assert.h>
#include <stdint.h>

/* One thread writes `tib` TiB past x: far outside any allocation. */
extern "C" __global__ void oob_write(float *x, uint64_t tib)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		x[(tib << 40) / sizeof(float)] = 1.0f;
}

/* The kernel stops itself, as a failed check in a test kernel does. */
extern "C" __global__ void trap_now(float *x)
{
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		x[0] = 1.0f;
#if defined(__HIPCC__)
		abort(); /* HIP's device abort: a trap */
#else
		__trap();
#endif
	}
}

/* A device-side assert that fails when v is 0. */
extern "C" __global__ void assert_nonzero(int32_t v)
{
	assert(v != 0);
}
