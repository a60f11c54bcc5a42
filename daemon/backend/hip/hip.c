/* The hip backend: the sequencer's commands as HIP stream operations on one GPU. The loop
 * thread only enqueues (copies, kernels, event records and waits); one thread per stream
 * waits for that stream's recorded events in order and reports them; device memory comes
 * from a caching pool so that no hipFree, which synchronizes the device, runs on the loop.
 * With --audit, timing events bracket every launch and an audit thread checks on the GPU's
 * timestamps that each operation started after the operations it depends on finished;
 * with --device-timeline the same timestamps, on the host clock, time the timeline.
 * The enqueue calls run inline or on submit threads that own disjoint sets of streams
 * (hip_config.submit_threads; see hip-submit.c).
 *
 * This file: create and destroy, the backend table, info, and HIP errors translated.
 * hip-mem.c, hip-event.c, hip-submit.c, hip-complete.c, hip-audit.c, hip-timeline.c and
 * hip-module.c hold the rest; hip-internal.h the state they share. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hip-internal.h"
#include "log.h"

/* gfx90a and gfx94x run the wall clock behind wall_clock64() at 100 MHz; HIP 5.2 cannot
 * query it (hipDeviceAttributeWallClockRate came later). NVIDIA's %globaltimer is in ns. */
#define HIP_AMD_WALL_CLOCK_KHZ 100000ull
#define HIP_NV_GLOBALTIMER_KHZ 1000000ull

/* ---- errors: translated once, here ---- */

int hip__errno(hipError_t e)
{
	switch (e) {
	case hipSuccess:
		return 0;
	case hipErrorOutOfMemory:
		return -ENOMEM;
	case hipErrorInvalidValue:
	case hipErrorInvalidDevicePointer:
	case hipErrorInvalidResourceHandle:
	case hipErrorInvalidConfiguration:
		return -EINVAL;
	case hipErrorNoDevice:
	case hipErrorInvalidDevice:
	case hipErrorInsufficientDriver:
	case hipErrorInitializationError:
		return -ENODEV;
	case hipErrorFileNotFound:
	case hipErrorNotFound:
		return -ENOENT;
	case hipErrorInvalidImage:
	case hipErrorNoBinaryForGpu:
	case hipErrorSharedObjectInitFailed:
		return -ENOEXEC;
	case hipErrorHostMemoryAlreadyRegistered:
		return -EEXIST;
	case hipErrorHostMemoryNotRegistered:
		return -ENOENT;
	case hipErrorNotSupported:
		return -ENOTSUP;
	case hipErrorLaunchOutOfResources:
		return -E2BIG;
	case hipErrorNotReady:
		return -EAGAIN;
	/* Faults that poison the context: every later call fails, on every stream, until
	 * the device is reset. -EIO is what hip_device_lost and the server's reset key on. */
	case hipErrorIllegalAddress:
	case hipErrorLaunchFailure:
	case hipErrorAssert: /* a trap, a failed device assert */
	case hipErrorLaunchTimeOut: /* a watchdog killed the kernel */
	case hipErrorECCNotCorrectable:
#ifdef SSEQ_HIP_NVIDIA
	case cudaErrorIllegalInstruction:
	case cudaErrorMisalignedAddress:
	case cudaErrorHardwareStackError:
	case cudaErrorInvalidAddressSpace:
	case cudaErrorInvalidPc:
#endif
		return -EIO;
	default:
		/* Anything else the runtime reports for the device is treated as a fault of
		 * the same kind: a reset is safer than a context that may be broken. */
		return -EIO;
	}
}

/* Log a failed call with what it was doing and return the translated error. */
int hip__fail(hipError_t e, const char *call, const char *what, struct seq_point at)
{
	int r = hip__errno(e);

	log_err("hip", "%s for %s at %" PRIu32 ":%" PRIu64 " failed: %s (%s) -> %s", call, what,
		at.stream, at.seq, hipGetErrorName(e), hipGetErrorString(e), strerror(-r));
	return r;
}

/* ---- info, destroy ---- */

static uint64_t hip_findings(void *ctx)
{
	struct hip *h = ctx;

	return atomic_load(&h->findings);
}

/* Used is what the daemon's buffers hold (as the sim counts it, and as sseqctl and the
 * metrics mean it), not the device-wide figure, which includes the context and the pool's
 * cached blocks; the loop thread must not need a driver call to answer it either. */
static void hip_info(void *ctx, struct backend_info *info)
{
	struct hip *h = ctx;

	memset(info, 0, sizeof(*info));
	info->backend = "hip";
	snprintf(info->name, sizeof(info->name), "%s", h->name);
	snprintf(info->arch, sizeof(info->arch), "%s", h->arch);
	info->memory_total = h->memory_total;
	info->memory_used = h->used_bytes - h->scratch_bytes;
	info->max_threads_per_block = h->max_threads_per_block;
	memcpy(info->max_block, h->max_block, sizeof(info->max_block));
	memcpy(info->max_grid, h->max_grid, sizeof(info->max_grid));
	info->shared_per_block = h->shared_per_block;
	info->shared_optin = h->shared_optin;
	info->cooperative = h->cooperative;
	info->clusters = h->clusters;
	info->multiprocessors = h->multiprocessors;
	info->cc = h->cc;
}

/* One stream once its completion thread was told to stop: the thread joined, then what
 * the stream still holds (audit entries, events, deferred scratch) and the stream. */
static void hip_stream_finish(struct hip *h, struct hip_stream *st)
{
	if (st->started)
		pthread_join(st->thread, NULL);
	hip__audit_retire(h, st, UINT64_MAX);
	free(st->aops);
	for (size_t j = 0; j < st->count; j++)
		hip__event_destroy(hip__ring_at(st, j)->ev);
	free(st->ring);
	word_notes_finish(&st->notes);
	while (st->deferred) {
		struct hip_deferred *d = st->deferred;

		st->deferred = d->next;
		free(d);
	}
	if (st->stream)
		hipStreamDestroy(st->stream);
}

/* What bring-up built, undone: threads stopped (each finishing what it holds), streams,
 * events, memory and the kernel image gone, the locks destroyed. The registered staging
 * ranges stay listed (destroy unregisters them, reset registers them again). */
static void hip_teardown(struct hip *h)
{
	/* The queued commands run first: they hold events and audit references. */
	hip__submit_stop(h);
	/* The caller promised an idle device; make sure before anything goes away. */
	if (h->device_open)
		hipDeviceSynchronize();
	hip__complete_stop(h);
	hip__audit_stop(h);
	hip__timeline_stop(h);
	for (unsigned i = 0; i < h->nstreams; i++)
		hip_stream_finish(h, &h->streams[i]);
	hip__pool_stop(h);
	pthread_mutex_destroy(&h->pool_mu);
	for (unsigned i = 0; i < SEQ_MAX_STREAMS; i++) {
		pthread_cond_destroy(&h->streams[i].cond);
		pthread_mutex_destroy(&h->streams[i].mu);
	}
	pthread_cond_destroy(&h->watch_cond);
	pthread_mutex_destroy(&h->watch_mu);
	hip__submit_finish(h);
	hip__reaper_stop(h);
	hip__pinner_stop(h);
	hip__audit_finish(h);
	hip__event_pool_finish(h);
	hip__mem_finish(h);
	if (h->module_loaded)
		hipModuleUnload(h->module);
}

static void hip_destroy(void *ctx)
{
	struct hip *h = ctx;

	hip_teardown(h);
	hip__staging_finish(h);
	free(h);
}

static bool hip_device_lost(void *ctx)
{
	struct hip *h = ctx;

	return atomic_load(&h->device_error) == -EIO;
}

static int hip_bring_up(struct hip *h);
static void hip_locks_init(struct hip *h);
static void hip_log_ready(const struct hip *h);

/* A poisoned context built again (backend_ops.reset). Teardown on a poisoned context is
 * quick: every call fails at once, so the threads drain what they hold and stop. Then
 * hipDeviceReset destroys the context, the struct starts over from its configuration
 * and the streams' numbering, and bring-up makes a fresh context. */
static int hip_reset(void *ctx)
{
	struct hip *h = ctx;
	struct hip *keep = malloc(sizeof(*keep));
	hipError_t e;
	int r;

	if (!keep)
		return -ENOMEM;
	hip_teardown(h);
	e = hipDeviceReset();
	if (e != hipSuccess)
		log_warn(
			"hip", "hipDeviceReset: %s (%s)", hipGetErrorName(e), hipGetErrorString(e));
	memcpy(keep, h, sizeof(*h));
	memset(h, 0, sizeof(*h));
	h->cq = keep->cq;
	h->finding = keep->finding;
	h->finding_arg = keep->finding_arg;
	h->cfg = keep->cfg;
	h->submit_spin_ns = keep->submit_spin_ns;
	h->submit_long_spin_ns = keep->submit_long_spin_ns;
	h->watch_long_spin_ns = keep->watch_long_spin_ns;
	h->watch_nap_min_ns = keep->watch_nap_min_ns;
	h->submit_inline_gap_ns = keep->submit_inline_gap_ns;
	h->event_flags = keep->event_flags;
	h->nstreams = keep->nstreams;
	atomic_store(&h->findings, atomic_load(&keep->findings));
	atomic_store(&h->audit_findings, atomic_load(&keep->audit_findings));
	atomic_store(&h->audit_checks, atomic_load(&keep->audit_checks));
	atomic_store(&h->pool_copies, atomic_load(&keep->pool_copies));
	atomic_store(&h->pool_misses, atomic_load(&keep->pool_misses));
	atomic_store(&h->pins_done, atomic_load(&keep->pins_done));
	h->staging = keep->staging;
	h->nstaging = keep->nstaging;
	h->capstaging = keep->capstaging;
	for (unsigned i = 0; i < h->nstreams; i++) {
		h->streams[i].kind = keep->streams[i].kind;
		h->streams[i].launched = keep->streams[i].launched;
		h->streams[i].recorded = keep->streams[i].recorded;
	}
	free(keep);
	hip_locks_init(h);
	r = hip_bring_up(h);
	if (r < 0) {
		log_err("hip", "the device does not come back after a reset: %s", strerror(-r));
		atomic_store(&h->device_error, -EIO);
		return r;
	}
	/* The new context knows none of the staging ranges: the pin thread pins them
	 * again, and copies through them wait for it. */
	hip__staging_repin(h);
	hip_log_ready(h);
	return 0;
}

static const struct backend_ops hip_ops = {
	.dev =
		{
			.mem_alloc = hip__mem_alloc,
			.mem_release = hip__mem_release,
			.record = hip__record,
			.wait = hip__wait,
			.launch = hip__launch,
			.retire = hip__retire,
		},
	.staging_register = hip__staging_register,
	.staging_unregister = hip__staging_unregister,
	.staging_ready = hip__staging_ready,
	.findings = hip_findings,
	.audit_findings = hip__audit_findings,
	.counters = hip__counters,
	.module_load = hip__module_load,
	.module_function = hip__module_function,
	.module_unload = hip__module_unload,
	.module_global = hip__module_global,
	.function_param = hip__function_param,
	.module_functions = hip__module_functions,
	.function_attrs = hip__function_attrs,
	.function_max_shared = hip__function_max_shared,
	.function_occupancy = hip__function_occupancy,
	.info = hip_info,
	.op_times = hip__op_times,
	.point_word = hip__point_word,
	.device_lost = hip_device_lost,
	.reset = hip_reset,
	.cancel = hip__cancel,
	.destroy = hip_destroy,
};

/* ---- set-up ---- */

/* Load every kernel when its module loads, not at its first launch: CUDA's lazy
 * loading may synchronize the whole device at that first launch, stalling every
 * client's work in flight. Must run before the runtime starts. */
/* Before the runtime starts, unless the environment says otherwise. The daemon keeps many
 * streams (a lane per session, copy pools), and the runtime spreads streams over a few
 * hardware work queues: streams sharing one run one after the other. CUDA's default of 8
 * queues made 16 lanes of 2,000 x 50 us kernels take 232 ms on an H200 instead of the
 * 100 ms they need; with 32 (the most) they took 131-140 ms (BENCHMARKS.md). ROCm's
 * default is 4 queues; 16 there follows the same reasoning but has not been measured on
 * an AMD GPU. */
static void hip_runtime_setup(void)
{
#ifdef SSEQ_HIP_NVIDIA
	setenv("CUDA_MODULE_LOADING", "EAGER", 0);
	setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
#else
	setenv("GPU_MAX_HW_QUEUES", "16", 0);
#endif
}

int hip_device_count(void)
{
	int n = 0;
	hipError_t e;

	hip_runtime_setup();
	e = hipGetDeviceCount(&n);

	if (e == hipErrorNoDevice)
		return 0;
	if (e != hipSuccess) {
		log_info("hip", "hipGetDeviceCount: %s (%s)", hipGetErrorName(e),
			hipGetErrorString(e));
		return hip__errno(e) ? hip__errno(e) : -ENODEV;
	}
	return n;
}

static int hip_device_open(struct hip *h)
{
	hipDeviceProp_t prop;
	hipError_t e;
	int n = hip_device_count();

	if (n < 0) {
		log_err("hip", "the HIP runtime cannot start (no driver?): %s", strerror(-n));
		return -ENODEV;
	}
	if ((unsigned)n <= h->cfg.device) {
		log_err("hip", "no GPU %u: the HIP runtime sees %d device%s", h->cfg.device, n,
			n == 1 ? "" : "s");
		return -ENODEV;
	}
	h->device = (int)h->cfg.device;
	e = hipSetDevice(h->device);
	if (e == hipSuccess)
		e = hipGetDeviceProperties(&prop, h->device);
	if (e != hipSuccess) {
		log_err("hip", "GPU %d: %s (%s)", h->device, hipGetErrorName(e),
			hipGetErrorString(e));
		return hip__errno(e);
	}
	h->device_open = true;
	h->memory_total = prop.totalGlobalMem;
	h->max_threads_per_block = (uint32_t)prop.maxThreadsPerBlock;
	for (int i = 0; i < 3; i++) {
		h->max_block[i] = (uint32_t)prop.maxThreadsDim[i];
		h->max_grid[i] = (uint32_t)prop.maxGridSize[i];
	}
	h->shared_per_block = prop.sharedMemPerBlock;
	h->multiprocessors = prop.multiProcessorCount > 0 ? (uint32_t)prop.multiProcessorCount : 0;
	/* AMD: HIP 5.2 has no cooperative launch of a module function
	 * (hipModuleLaunchCooperativeKernel came later) and no clusters: both stay off. */
	snprintf(h->name, sizeof(h->name), "%.*s", (int)sizeof(h->name) - 1, prop.name);
#ifdef SSEQ_HIP_NVIDIA
	snprintf(h->arch, sizeof(h->arch), "sm_%d%d", prop.major, prop.minor);
	h->shared_optin = prop.sharedMemPerBlockOptin;
	h->clock_khz = HIP_NV_GLOBALTIMER_KHZ;
	h->cc = (uint32_t)(prop.major * 10 + prop.minor);
	h->cooperative = prop.cooperativeLaunch != 0;
	h->clusters = prop.major >= 9 && prop.clusterLaunch != 0;
#else
	snprintf(h->arch, sizeof(h->arch), "%.*s", (int)sizeof(h->arch) - 1, prop.gcnArchName);
	/* No opt-in on AMD: a block may use all of its LDS from the start. */
	h->shared_optin = prop.sharedMemPerBlock;
	h->clock_khz = HIP_AMD_WALL_CLOCK_KHZ;
#endif
	return 0;
}

/* $name in microseconds (0 to 1000000) as ns, else `dflt` ns (unset, or not a number
 * in range: said so). */
static uint64_t hip_env_us(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (!v || !*v)
		return dflt;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || *v == '-' || n > 1000000) {
		log_warn("hip", "%s=%s is not 0 to 1000000: ignored", name, v);
		return dflt;
	}
	return (uint64_t)n * 1000u;
}

/* The caller's config (all zero is valid), and the environment's overrides on top, for
 * comparisons: SSEQ_HIP_COMPLETION ("watch", "sync" or "poll"), SSEQ_HIP_SUBMIT_IDLE
 * ("inline" or "wake"), SSEQ_HIP_SUBMIT ("inline", "thread" for one, or a count of
 * submit threads), SSEQ_HIP_SUBMIT_SPIN_US (how long an idle submit thread looks for
 * work before it sleeps), SSEQ_HIP_SUBMIT_LONG_SPIN_US (how long the one that goes on
 * looking does), SSEQ_HIP_WATCH_LONG_SPIN_US (how long the watcher of the latest
 * record stays awake), SSEQ_HIP_WATCH_NAP_MIN_US (the watcher's shortest nap while it
 * may not spin) and SSEQ_HIP_SUBMIT_INLINE_GAP_US (how far apart commands run
 * inline may come and still count as one run: HIP_SUBMIT_INLINE_RUN). */
static void hip_configure(struct hip *h, const struct hip_config *cfg)
{
	const char *submit, *completion, *idle;
	char *end;
	unsigned long n;

	if (cfg)
		h->cfg = *cfg;
	h->submit_spin_ns = hip_env_us("SSEQ_HIP_SUBMIT_SPIN_US", HIP_SUBMIT_SPIN_NS);
	h->submit_long_spin_ns =
		hip_env_us("SSEQ_HIP_SUBMIT_LONG_SPIN_US", HIP_SUBMIT_LONG_SPIN_NS);
	h->watch_long_spin_ns = hip_env_us("SSEQ_HIP_WATCH_LONG_SPIN_US", HIP_WATCH_LONG_SPIN_NS);
	h->watch_nap_min_ns = hip_env_us("SSEQ_HIP_WATCH_NAP_MIN_US", HIP_WATCH_NAP_MIN_NS);
	h->submit_inline_gap_ns =
		hip_env_us("SSEQ_HIP_SUBMIT_INLINE_GAP_US", HIP_SUBMIT_INLINE_GAP_NS);
	idle = getenv("SSEQ_HIP_SUBMIT_IDLE");
	if (idle && strcmp(idle, "wake") == 0)
		h->cfg.submit_idle = HIP_SUBMIT_IDLE_WAKE;
	else if (idle && strcmp(idle, "copies") == 0)
		h->cfg.submit_idle = HIP_SUBMIT_IDLE_COPIES;
	else if (idle && strcmp(idle, "inline") == 0)
		h->cfg.submit_idle = HIP_SUBMIT_IDLE_INLINE;
	else if (idle && *idle)
		log_warn("hip", "SSEQ_HIP_SUBMIT_IDLE=%s is not wake, copies or inline: ignored",
			idle);
	completion = getenv("SSEQ_HIP_COMPLETION");
	if (completion && strcmp(completion, "watch") == 0)
		h->cfg.completion = HIP_COMPLETION_WATCH;
	else if (completion && strcmp(completion, "poll") == 0)
		h->cfg.completion = HIP_COMPLETION_POLL;
	else if (completion && strcmp(completion, "sync") == 0)
		h->cfg.completion = HIP_COMPLETION_SYNC;
	else if (completion && *completion)
		log_warn("hip", "SSEQ_HIP_COMPLETION=%s is not watch, sync or poll: ignored",
			completion);
	submit = getenv("SSEQ_HIP_SUBMIT");
	if (!submit || !*submit)
		return;
	if (strcmp(submit, "inline") == 0) {
		h->cfg.submit_threads = 0;
		return;
	}
	if (strcmp(submit, "thread") == 0) {
		h->cfg.submit_threads = 1;
		return;
	}
	errno = 0;
	n = strtoul(submit, &end, 10);
	if (errno || *end || end == submit || n > HIP_MAX_SUBMIT_THREADS)
		log_warn("hip",
			"SSEQ_HIP_SUBMIT=%s is not inline, thread or a count of threads (0 to %d): "
			"ignored",
			submit, HIP_MAX_SUBMIT_THREADS);
	else
		h->cfg.submit_threads = (unsigned)n;
}

/* Every lock, before anything can fail: hip_destroy destroys them all. */
static void hip_locks_init(struct hip *h)
{
	pthread_mutex_init(&h->reap_mu, NULL);
	pthread_cond_init(&h->reap_cond, NULL);
	pthread_mutex_init(&h->audit_mu, NULL);
	pthread_cond_init(&h->audit_cond, NULL);
	pthread_mutex_init(&h->watch_mu, NULL);
	pthread_cond_init(&h->watch_cond, NULL);
	pthread_mutex_init(&h->staging_mu, NULL);
	pthread_cond_init(&h->staging_cond, NULL);
	pthread_mutex_init(&h->pool_mu, NULL);
	for (unsigned i = 0; i < HIP_MAX_SUBMIT_THREADS; i++) {
		pthread_mutex_init(&h->sub[i].mu, NULL);
		pthread_cond_init(&h->sub[i].cond, NULL);
	}
	for (unsigned i = 0; i < HIP_EVENT_LOCKS; i++)
		pthread_mutex_init(&h->event_lock[i], NULL);
	for (unsigned i = 0; i < SEQ_MAX_STREAMS; i++) {
		pthread_mutex_init(&h->streams[i].mu, NULL);
		pthread_cond_init(&h->streams[i].cond, NULL);
	}
}

static int hip_streams_create(struct hip *h)
{
	for (unsigned i = 0; i < h->nstreams; i++) {
		struct hip_stream *st = &h->streams[i];
		hipError_t e;

		st->h = h;
		st->index = i;
		/* Non-blocking: no implicit ordering with the legacy default stream. */
		e = hipStreamCreateWithFlags(&st->stream, hipStreamNonBlocking);
		if (e != hipSuccess)
			return hip__fail(
				e, "hipStreamCreateWithFlags", "stream", (struct seq_point){i, 0});
	}
	return 0;
}

static void hip_log_ready(const struct hip *h)
{
	char how[48], pool[64] = "";

	if (h->nsubmitters)
		snprintf(how, sizeof(how), "by %u submit thread%s", h->nsubmitters,
			h->nsubmitters == 1 ? "" : "s");
	else
		snprintf(how, sizeof(how), "inline on the loop thread");
	if (h->pool)
		snprintf(pool, sizeof(pool), ", copies up to %u KiB through a %zu MiB pinned pool",
			HIP_POOL_SLOT >> 10, h->pool_bytes >> 20);
	log_info("hip", "GPU %d: %s (%s), %u streams%s, enqueued %s, completion by %s%s%s",
		h->device, h->name, h->arch, h->nstreams, pool, how,
		h->cfg.completion == HIP_COMPLETION_WATCH ? "one watcher thread"
			: h->cfg.completion == HIP_COMPLETION_POLL
			? "hipEventQuery polling per stream"
			: "hipEventSynchronize per stream",
		h->cfg.audit ? "; audit on: every launch is timestamped and checked against "
			       "its producers"
			     : "",
		h->cfg.device_timeline ? "; device timeline on" : "");
}

static double hip_ms_between(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

/* The device, its kernels, streams (their kinds set), events and threads: what create and
 * reset build, each step timed for the debug log (a daemon of many loops makes this many
 * times while its first clients wait). On failure what was made is left for teardown. */
static int hip_bring_up(struct hip *h)
{
	const struct {
		const char *name;
		int (*run)(struct hip *h);
		bool on;
	} steps[] = {
		{"device", hip_device_open, true},
		{"kernels", hip__kernels_load, true},
		{"pool", hip__pool_start, true},
		{"streams", hip_streams_create, true},
		{"events", hip__event_pool_fill, true},
		{"timeline", hip__timeline_start, h->cfg.device_timeline},
		{"completion", hip__complete_start, true},
		{"reaper", hip__reaper_start, true},
		{"pinner", hip__pinner_start, true},
		{"audit", hip__audit_start, h->cfg.audit},
		{"submit", hip__submit_start, h->cfg.submit_threads != 0},
	};
	char took[256];
	size_t used = 0;
	struct timespec t0, a, b;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	a = t0;
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		int r;

		if (!steps[i].on)
			continue;
		r = steps[i].run(h);
		if (r < 0)
			return r;
		clock_gettime(CLOCK_MONOTONIC, &b);
		if (used < sizeof(took))
			used += (size_t)snprintf(took + used, sizeof(took) - used, "%s%s %.1f",
				used ? ", " : "", steps[i].name, hip_ms_between(&a, &b));
		a = b;
	}
	log_debug("hip", "GPU %d brought up in %.1f ms (%s)", h->device, hip_ms_between(&t0, &a),
		used ? took : "nothing");
	return 0;
}

int hip_create(struct backend *out, const struct hip_config *cfg, const struct backend_env *env)
{
	struct hip *h;
	int r;

	if (!env->cq || !env->layout || env->layout->nstreams > SEQ_MAX_STREAMS)
		return -EINVAL;
	hip_runtime_setup();
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	hip_configure(h, cfg);
	h->cq = env->cq;
	h->finding = env->finding;
	h->finding_arg = env->finding_arg;
	h->event_flags = h->cfg.timing ? hipEventDefault : hipEventDisableTiming;
	hip_locks_init(h);
	if (h->cfg.completion > HIP_COMPLETION_POLL ||
		h->cfg.submit_threads > HIP_MAX_SUBMIT_THREADS) {
		r = -EINVAL;
		goto fail;
	}
	h->nstreams = env->layout->nstreams;
	for (unsigned i = 0; i < h->nstreams; i++)
		h->streams[i].kind = env->layout->kind[i];
	r = hip_bring_up(h);
	if (r < 0)
		goto fail;
	hip_log_ready(h);
	out->ops = &hip_ops;
	out->ctx = h;
	return 0;
fail:
	/* What was never created is NULL or zero, as calloc left it. */
	hip_destroy(h);
	return r;
}
