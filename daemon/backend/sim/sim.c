/* The sim backend: a CPU device for machines without a GPU and for tests. Each stream is
 * a worker thread running its queue in order, events are per-stream counters, memory is
 * host memory, and a shadow record of every allocation's writer and readers catches any
 * access that was not ordered after the work it depends on. This part creates and destroys
 * the device and is its backend table; sim-internal.h names the others. */
#include "sim-internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int sim_staging_register(void *ctx, void *addr, size_t size)
{
	return 0; /* host memory is as fast as it gets */
}

static void sim_staging_unregister(void *ctx, void *addr, size_t size)
{
}

static uint64_t sim_findings(void *ctx)
{
	struct sim *sim = ctx;

	return atomic_load(&sim->findings);
}

static void sim_info(void *ctx, struct backend_info *info)
{
	struct sim *sim = ctx;

	memset(info, 0, sizeof(*info));
	info->backend = "sim";
	snprintf(info->name, sizeof(info->name), "sseq sim device");
	info->memory_total = sim->cfg.memory;
	pthread_mutex_lock(&sim->lock);
	info->memory_used = sim->used_bytes;
	pthread_mutex_unlock(&sim->lock);
}

/* The device context of the process's sims: a device-lost-op on any loop's sim loses it
 * for every loop, whose streams then fail as a GPU's do, and the loop that sees a failure
 * first resets (it may not be the culprit's loop). Cleared as the first live sim starts
 * (sim_live counts them) and at reset. */
static atomic_bool sim_context_lost;
static pthread_mutex_t sim_live_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned sim_live;

static void sim_destroy(void *ctx)
{
	struct sim *sim = ctx;

	pthread_mutex_lock(&sim_live_mu);
	sim_live--;
	pthread_mutex_unlock(&sim_live_mu);

	sim_streams_stop(sim);
	sim_mem_finish(sim);
	pthread_mutex_destroy(&sim->lock);
	free(sim->times);
	free(sim);
}

static bool sim_device_lost(void *ctx)
{
	struct sim *sim = ctx;

	return atomic_load(sim->lost);
}

/* The poisoned device built again: the workers finish what they hold (doing no work,
 * every event reporting -EIO), all memory goes, and new workers start with every
 * stream's numbering where it was (the core's points go on). */
static int sim_reset(void *ctx)
{
	struct sim *sim = ctx;
	/* The streams come back as they were: as many, of the same kinds. */
	const unsigned nstreams = sim->nstreams;
	enum seq_stream_kind kinds[SEQ_MAX_STREAMS];
	uint64_t launched[SEQ_MAX_STREAMS];

	sim_streams_stop(sim);
	for (unsigned i = 0; i < nstreams; i++) {
		kinds[i] = sim->streams[i].kind;
		launched[i] = sim->streams[i].launched;
	}
	pthread_mutex_lock(&sim->lock);
	sim_mem_finish(sim);
	sim->blocks = NULL;
	sim->nblocks = sim->cap = 0;
	memset(sim->bucket, 0, sizeof(sim->bucket));
	sim->newest = sim->oldest = NULL;
	sim->used_bytes = sim->cached_bytes = 0;
	sim->nhost = 0;
	memset(sim->streams, 0, sizeof(sim->streams));
	for (unsigned i = 0; i < nstreams; i++) {
		sim->streams[i].launched = launched[i];
		atomic_store(&sim->streams[i].executed, launched[i]);
	}
	atomic_store(sim->lost, false);
	pthread_mutex_unlock(&sim->lock);
	return sim_streams_start(sim, kinds);
}

static const struct backend_ops sim_ops = {
	.dev =
		{
			.mem_alloc = sim_mem_alloc,
			.mem_release = sim_mem_release,
			.mem_owner = sim_mem_owner,
			.record = sim_record,
			.wait = sim_wait,
			.launch = sim_launch,
		},
	.staging_register = sim_staging_register,
	.staging_unregister = sim_staging_unregister,
	.findings = sim_findings,
	.device_lost = sim_device_lost,
	.reset = sim_reset,
	.info = sim_info,
	.op_times = sim_op_times,
	.point_word = sim_point_word,
	.cancel = sim_cancel,
	.destroy = sim_destroy,
};

int sim_create(struct backend *out, const struct sim_config *cfg, const struct backend_env *env)
{
	struct sim *sim;
	int r;

	if (!env->cq || !env->layout || env->layout->nstreams > SEQ_MAX_STREAMS)
		return -EINVAL;
	sim = calloc(1, sizeof(*sim));
	if (!sim)
		return -ENOMEM;
	if (cfg)
		sim->cfg = *cfg;
	if (!sim->cfg.memory)
		sim->cfg.memory = SIM_DEFAULT_MEMORY;
	r = sim_config_check(&sim->cfg);
	if (r < 0) {
		free(sim);
		return r;
	}
	sim->cq = env->cq;
	sim->finding = env->finding;
	sim->finding_op = env->finding_op;
	sim->finding_arg = env->finding_arg;
	sim->nstreams = env->layout->nstreams;
	pthread_mutex_lock(&sim_live_mu);
	if (!sim_live++)
		atomic_store(&sim_context_lost, false);
	pthread_mutex_unlock(&sim_live_mu);
	sim->lost = &sim_context_lost;
	pthread_mutex_init(&sim->lock, NULL);
	sim->times = calloc((size_t)sim->nstreams * SIM_TIMES, sizeof(*sim->times));
	if (!sim->times) {
		r = -ENOMEM;
		goto fail;
	}
	r = sim_streams_start(sim, env->layout->kind);
	if (r < 0)
		goto fail;
	out->ops = &sim_ops;
	out->ctx = sim;
	return 0;
fail:
	sim_destroy(sim);
	return r;
}

/* ---- the descriptor: how sseqd starts the sim (registry.c) ---- */

static int sim_probe(const void *config, unsigned device, char *why, size_t size)
{
	return 0; /* the CPU is always there */
}

static int sim_start(struct backend *out, const void *config, const struct backend_args *args,
	const struct backend_env *env)
{
	struct sim_config cfg = *(const struct sim_config *)config;

	/* The injected faults count launches from the start: after a restart in place they
	 * would fire again on the new count, as a different experiment. */
	if (args->resumed)
		cfg.nfail = 0;
	return sim_create(out, &cfg, env);
}

static const struct sim_config sim_config_default;

const struct backend_desc sim_backend = {
	.name = "sim",
	.title = "sim",
	.probe = sim_probe,
	.create = sim_start,
	.config_size = sizeof(struct sim_config),
	.config_default = &sim_config_default,
	.options = sim_options,
};
