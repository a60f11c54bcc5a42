/* The hip backend: one GPU through the HIP runtime (ROCm on AMD, CUDA through
 * hip-nvidia.h on NVIDIA). Streams, pooled events, a caching memory pool, the built-in
 * kernels from a code object, and one completion thread per stream. */
#ifndef SSEQ_HIP_H
#define SSEQ_HIP_H

#include <stdbool.h>

#include "backend.h"

/* How a completion thread learns that the oldest event of its stream completed. */
enum hip_completion {
	HIP_COMPLETION_SYNC, /* hipEventSynchronize (the runtime spins or yields) */
	HIP_COMPLETION_POLL, /* hipEventQuery, spinning briefly, then short sleeps */
};

/* All zero is valid: device 0, 1 D2H and 1 D2D stream, the kernel image found where the
 * build put it or where it was installed, hipEventSynchronize, untimed events. */
struct hip_config {
	unsigned device;
	/* Must equal the sequencer's seq_config (streams are numbered as the core numbers
	 * them: 0 compute, 1 H2D, then the D2H streams, then the D2D streams). 0 means 1. */
	unsigned n_d2h;
	unsigned n_d2d;
	/* The built-in kernels' code object (.hsaco / .fatbin); NULL: hip_kernels_path(). */
	const char *kernels;
	enum hip_completion completion;
	/* Events carry timestamps (for profiling); off, they are cheaper to record. */
	bool timing;
};

/* Devices the HIP runtime sees: >= 0, or a negative errno when the runtime cannot start
 * (no driver); the reason is logged at info level. Initialises HIP: in tests, call it
 * only in a child process. */
int hip_device_count(void);

/* The kernel image used when the config names none: the build tree's if it is there,
 * else the installed one. */
const char *hip_kernels_path(void);

/* Open the device, create its streams and completion threads and load the kernels.
 * `complete` is called from a completion thread for every recorded event reached, with
 * 0 or a negative errno (-EIO for a device fault); `finding` may be NULL (the hip
 * backend has no race detector). Returns 0, -ENODEV without a usable device, -ENOENT /
 * -ENOEXEC for a missing or unloadable kernel image, -ENOMEM, or another translated
 * HIP error; the reason is logged. */
int hip_create(struct backend *out, const struct hip_config *cfg, backend_complete_fn complete,
	backend_finding_fn finding, void *arg);

#endif
