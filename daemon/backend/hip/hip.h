/* The hip backend: one GPU through the HIP runtime (ROCm on AMD, CUDA through
 * hip-nvidia.h on NVIDIA). Streams, pooled events, a caching memory pool, the built-in
 * kernels from a code object, and one completion thread for every stream. */
#ifndef SSEQ_HIP_H
#define SSEQ_HIP_H

#include <stdbool.h>

#include "backend.h"

/* Who learns that a stream's oldest event completed, and how. */
enum hip_completion {
	/* One thread for every stream (the default): hipEventQuery on each stream's oldest
	 * event; spins briefly after a record or a completion while a core is free, then
	 * naps in proportion to the wait. At most one waiting thread, whatever the number
	 * of streams and clients. */
	HIP_COMPLETION_WATCH,
	/* A thread per stream in hipEventSynchronize (the runtime spins or yields), each
	 * spinning 1 ms when idle: kept for comparisons (SSEQ_HIP_COMPLETION=sync). */
	HIP_COMPLETION_SYNC,
	/* A thread per stream: hipEventQuery, spinning briefly, then short sleeps
	 * (SSEQ_HIP_COMPLETION=poll). */
	HIP_COMPLETION_POLL,
};

/* Who makes the enqueue calls (hipModuleLaunchKernel, hipMemcpyAsync, event records and
 * waits): inline on the caller's (the loop) thread, or submit threads that each own a
 * fixed set of streams (stream i goes to thread i % N), so that launches to different
 * lanes are issued in parallel while each stream's commands keep their order. A wait on
 * another thread's event holds its thread until that record has run. With submit
 * threads, an enqueue error fails the op's stream from that point on (its next event
 * reports it) instead of failing the launch call. The SSEQ_HIP_SUBMIT environment
 * variable (inline, thread for one, or a count) overrides the config, for comparisons. */
#define HIP_MAX_SUBMIT_THREADS 16

/* All zero is valid: device 0 (its streams come from the core's layout, backend_env),
 * the kernel image found where the build put it or where it was installed, the watcher,
 * untimed events, no audit, submission inline on the caller's thread. */
/* What the loop does with a command for a submit thread that sleeps with nothing
 * queued (--submit-idle; the order is the option's words'). */
enum hip_submit_idle {
	HIP_SUBMIT_IDLE_WAKE, /* wake the thread */
	/* make a copy through the small-copy pool (and the stream waits and records that go
	 * with it) here, on the loop; wake the thread for kernels and other copies */
	HIP_SUBMIT_IDLE_COPIES,
	HIP_SUBMIT_IDLE_INLINE, /* make every call here */
};

struct hip_config {
	unsigned device;
	/* The built-in kernels' code object (.hsaco / .fatbin); NULL: hip_kernels_path(). */
	const char *kernels;
	enum hip_completion completion;
	/* 0: the enqueue calls inline; 1..HIP_MAX_SUBMIT_THREADS: that many submit
	 * threads (at most one per stream: more are not started). */
	unsigned submit_threads;
	/* A command for a submit thread asleep with nothing queued (--submit-idle). */
	enum hip_submit_idle submit_idle;
	/* The small-copy pool, in MiB (--small-copy-pool): pinned memory of the daemon's own,
	 * in HIP_POOL_SLOT slots, through which every copy of up to a slot goes, so that a
	 * client's staging arena is pinned only when a larger copy first goes through it
	 * (pinning stalls the device's other work: BENCHMARKS.md). 0: no pool, and every
	 * arena is pinned as it registers. */
	unsigned small_copy_pool_mib;
	/* Events carry timestamps (for profiling); off, they are cheaper to record. */
	bool timing;
	/* Audit (sseqd --audit): timing events around every launch, and a check on the GPU's
	 * own timestamps that each operation started after the producers of what it reads
	 * (and the readers and writer of what it writes) finished. A violation is reported
	 * through the finding callback and counted by the audit_findings op. */
	bool audit;
	/* Device timeline (sseqd --device-timeline): timing events around every launch, as
	 * the audit has them, read by backend_ops.op_times and mapped onto CLOCK_MONOTONIC
	 * through an anchor taken again every second (hip-timeline.c). Off: op_times says
	 * -ENOENT and launches carry no extra events. */
	bool device_timeline;
};

/* Devices the HIP runtime sees: >= 0, or a negative errno when the runtime cannot start
 * (no driver); the reason is logged at info level. Initialises HIP: in tests, call it
 * only in a child process. */
int hip_device_count(void);

/* The kernel image used when the config names none: the build tree's if it is there,
 * else the installed one. */
const char *hip_kernels_path(void);

/* Open the device, create env's streams and their completion threads and load the
 * kernels. A completion thread pushes every recorded event reached to env->cq, with 0 or
 * a negative errno (-EIO for a device fault); env->finding (may be NULL) hears each audit
 * finding, from the audit thread (and from the loop thread for a release of memory that
 * is not allocated). Returns 0, -ENODEV without a usable device, -ENOENT /
 * -ENOEXEC for a missing or unloadable kernel image, -ENOMEM, or another translated
 * HIP error; the reason is logged. */
int hip_create(struct backend *out, const struct hip_config *cfg, const struct backend_env *env);

/* The hip backend as sseqd's registry knows it (hip-config.c): its name, options and
 * start, in every build; it starts only where HIP was built in. */
extern const struct backend_desc hip_backend;

/* Audit checks made so far (both timestamps read), whether or not they found anything,
 * and in *pending (when not NULL) those queued and not yet made: 0 when the audit is off.
 * `ctx` is the backend's. */
uint64_t hip_audit_checks(void *ctx, uint64_t *pending);

/* How far the device timeline's times may be off the host clock as of its latest anchor
 * (the anchor's measurement window, half of it, plus how far the previous mapping had
 * drifted), in ns: 0 when the device timeline is off. */
uint64_t hip_timeline_error_ns(void *ctx);

#endif
