/* The hip backend as sseqd knows it: its options (rows parsed into a struct hip_config)
 * and its descriptor. Built into every sseqd, with or without HIP, so that one
 * configuration serves every build: without HIP the options are taken (and named as
 * ignored) and --backend hip says how to build it. The rest of the backend is hip.c's. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "hip.h"

/* sseqd's defaults, where they differ from a zero config: 16 submit threads, the loop
 * making a sleeping submit thread's calls itself (--submit-idle inline: BENCHMARKS.md,
 * 2026-12-07 17:33-18:12 on an H200), a 16 MiB
 * small-copy pool (256 copies of up to 64 KiB in flight before one waits for a pin). The
 * timeline stays as the daemon observed it: from the GPU's timestamps it costs two more
 * timing events per launch. */
/* --submit-idle's OPTION_CHOICE writes the index of its word as an unsigned. */
_Static_assert(sizeof(enum hip_submit_idle) == sizeof(unsigned), "submit_idle's size");

static const struct hip_config hip_config_default = {
	.submit_threads = 16,
	.submit_idle = HIP_SUBMIT_IDLE_INLINE,
	.small_copy_pool_mib = 16,
	.device_timeline = false,
};

static const struct option_row hip_options[] = {
	{.name = "submit-threads",
		.arg = "N",
		.kind = OPTION_UINT,
		.offset = offsetof(struct hip_config, submit_threads),
		.max = HIP_MAX_SUBMIT_THREADS,
		.help = "threads that make the GPU enqueue calls, each for its own streams (hip; "
			"default {default}, at most {max}; 0: on the thread that reads requests)"},
	{.name = "submit-idle",
		.arg = "wake|copies|inline",
		.kind = OPTION_CHOICE,
		.offset = offsetof(struct hip_config, submit_idle),
		.words = {"wake", "copies", "inline"},
		.hint = " (wake, copies or inline)",
		.help = "a command for a submit thread asleep with nothing queued: wake the "
			"thread; make a small copy's call (through the small-copy pool) on the "
			"thread that reads requests and wake it for the rest; or make every call "
			"there, at most eight in a row (a flood goes to the thread), which spares "
			"a request the thread's wake-up (hip; default {default})"},
	{.name = "small-copy-pool",
		.arg = "MIB",
		.kind = OPTION_UINT,
		.offset = offsetof(struct hip_config, small_copy_pool_mib),
		.max = 4096,
		.help = "pinned memory of the daemon's own through which copies of up to 64 KiB "
			"go, so that a staging arena is pinned only at its first larger copy: "
			"pinning stalls the GPU's other work (hip; default {default}; 0: pin "
			"every arena when it registers)"},
	{.name = "audit",
		.kind = OPTION_FLAG,
		.offset = offsetof(struct hip_config, audit),
		.help = "check on the GPU's timestamps that every operation started after its "
			"producers finished (hip)"},
	{.name = "device-timeline",
		.arg = "on|off",
		.kind = OPTION_WORDS,
		.offset = offsetof(struct hip_config, device_timeline),
		.words = {"off", "on"},
		.hint = " (on or off)",
		.help = "time the timeline (sseqctl trace) by the GPU's own timestamps: two "
			"timing events per launch (hip; default {default})"},
	{.name = "kernels",
		.arg = "PATH",
		.kind = OPTION_STRING,
		.offset = offsetof(struct hip_config, kernels),
		.help = "the built-in kernels' code object for the hip backend (default: the "
			"build tree's, else the installed one)"},
	{0},
};

#ifdef SSEQ_HAVE_HIP
static int hip_probe(const void *config, unsigned device, char *why, size_t size)
{
	int n = hip_device_count();

	if (n < 0)
		snprintf(why, size, "the HIP runtime cannot start (no GPU driver: %s)",
			strerror(-n));
	else if (n == 0)
		snprintf(why, size, "no GPU found");
	else if ((unsigned)n <= device)
		snprintf(why, size, "no GPU %u (the HIP runtime sees %d)", device, n);
	else
		return 0;
	return n < 0 ? n : -ENODEV;
}

static int hip_start(struct backend *out, const void *config, const struct backend_args *args,
	const struct backend_env *env)
{
	struct hip_config cfg = *(const struct hip_config *)config;

	cfg.device = args->device;
	/* Each loop's instance gets its share of the submit threads, rounded up, and a
	 * small-copy pool of its own: a share of it would run out sooner under a loop's
	 * burst, and a copy that finds it full pins its arena, which stalls everyone. */
	if (args->loops > 1)
		cfg.submit_threads = (cfg.submit_threads + args->loops - 1) / args->loops;
	return hip_create(out, &cfg, env);
}
#endif

static void hip_describe(const void *config, const struct backend *be, char *buf, size_t size)
{
	const struct hip_config *cfg = config;

	snprintf(buf, size, "%s%s", cfg->audit && backend_has_audit(be) ? "; audit on" : "",
		cfg->device_timeline ? "; device timeline on" : "");
}

const struct backend_desc hip_backend = {
	.name = "hip",
	.title = "HIP",
	.build_option = "-Dhip=enabled",
#ifdef SSEQ_HAVE_HIP
	.probe = hip_probe,
	.create = hip_start,
#endif
	.config_size = sizeof(struct hip_config),
	.config_default = &hip_config_default,
	.options = hip_options,
	.describe = hip_describe,
	/* A loop per CPU, at most 16: sixteen clients on a 16-CPU GPU host each on a
	 * loop of its own make 31-42% more round trips than on four loops, for a point or
	 * two of a lone client's launch rate (BENCHMARKS.md, "Client-named handles, and a
	 * loop per CPU"). */
	.cpus_per_loop = 1,
	.loops_max = 16,
};
