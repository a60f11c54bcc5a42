/* The backend registry: which backends this sseqd was built with, how each says whether
 * it can run here, and the one place that reports why one does not. */
#include "registry.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#ifdef SSEQ_HAVE_HIP
#include "hip.h"
#endif

#ifdef SSEQ_HAVE_HIP
_Static_assert(BACKEND_MAX_SUBMIT_THREADS == HIP_MAX_SUBMIT_THREADS,
	"--submit-threads takes what the hip backend can start");

static bool sim_tuned(const struct sim_config *c)
{
	for (unsigned k = 0; k < SEQ_STREAM_KINDS; k++)
		if (c->delay[k].mode != SIM_DELAY_NONE)
			return true;
	return c->nfail > 0;
}

static int hip_probe(const struct backend_options *o, char *why, size_t size)
{
	int n = hip_device_count();

	if (n < 0)
		snprintf(why, size, "the HIP runtime cannot start (no GPU driver: %s)",
			strerror(-n));
	else if (n == 0)
		snprintf(why, size, "no GPU found");
	else if ((unsigned)n <= o->device)
		snprintf(why, size, "no GPU %u (the HIP runtime sees %d)", o->device, n);
	else
		return 0;
	return n < 0 ? n : -ENODEV;
}

static int hip_start(
	struct backend *out, const struct backend_options *o, const struct backend_env *env)
{
	const struct hip_config hc = {.device = o->device,
		.kernels = o->kernels,
		.audit = o->audit,
		.submit_threads = o->submit_threads,
		.device_timeline = o->device_timeline};

	if (sim_tuned(&o->sim))
		log_warn("main",
			"--sim-delay and --inject fail-op/device-fail-op act on the sim backend "
			"only: ignored with hip");
	return hip_create(out, &hc, env);
}
#endif

static int sim_probe(const struct backend_options *o, char *why, size_t size)
{
	return 0;
}

static int sim_start(
	struct backend *out, const struct backend_options *o, const struct backend_env *env)
{
	if (o->audit)
		log_notice("main",
			"--audit: the sim backend's race detector already checks every access "
			"against its producer; --audit adds nothing to it");
	return sim_create(out, &o->sim, env);
}

const struct backend_impl backend_impls[] = {
#ifdef SSEQ_HAVE_HIP
	{"hip", hip_probe, hip_start},
#endif
	{"sim", sim_probe, sim_start},
};
const size_t backend_nimpls = sizeof(backend_impls) / sizeof(backend_impls[0]);

static const struct backend_impl *impl_find(const char *name)
{
	for (size_t i = 0; i < backend_nimpls; i++)
		if (strcmp(backend_impls[i].name, name) == 0)
			return &backend_impls[i];
	return NULL;
}

/* One backend, by name: it must probe and start. */
static int start_named(const char *name, const struct backend_options *o,
	const struct backend_env *env, struct backend *out)
{
	const struct backend_impl *impl = impl_find(name);
	char why[160] = "";
	int r;

	if (!impl) {
		char have[64] = "";

		for (size_t i = 0, n = 0; i < backend_nimpls && n < sizeof(have); i++)
			n += (size_t)snprintf(have + n, sizeof(have) - n, "%s%s", i ? ", " : "",
				backend_impls[i].name);
		if (strcmp(name, "hip") == 0)
			log_err("main",
				"backend hip: this sseqd was built without the HIP backend; its "
				"backends: %s (build with -Dhip=enabled for hip)",
				have);
		else
			log_err("main", "backend %s: unknown; this sseqd's backends: %s, or auto",
				name, have);
		return -ENODEV;
	}
	r = impl->probe(o, why, sizeof(why));
	if (r == 0)
		r = impl->create(out, o, env);
	else
		log_err("main", "backend %s: %s", name, why);
	return r;
}

/* The first backend that probes and starts; the sim always does. */
static int start_auto(
	const struct backend_options *o, const struct backend_env *env, struct backend *out)
{
	int r = -ENODEV;

	if (!impl_find("hip"))
		log_notice("main", "backend auto: no HIP support built in: using the sim backend");
	for (size_t i = 0; i < backend_nimpls; i++) {
		const struct backend_impl *impl = &backend_impls[i];
		const char *next = i + 1 < backend_nimpls ? backend_impls[i + 1].name : NULL;
		char why[160] = "";

		r = impl->probe(o, why, sizeof(why));
		if (r == 0) {
			r = impl->create(out, o, env);
			if (r == 0)
				return 0;
			snprintf(why, sizeof(why), "did not start (%s)", strerror(-r));
		}
		if (next)
			log_msg(r == -ENODEV ? LOG_LVL_NOTICE : LOG_LVL_WARN, "main",
				"backend auto: %s: %s: using the %s backend", impl->name, why,
				next);
	}
	return r;
}

int backend_start(
	const struct backend_options *o, const struct backend_env *env, struct backend *out)
{
	const char *name = o->name ? o->name : "auto";

	if (strcmp(name, "auto") == 0)
		return start_auto(o, env, out);
	return start_named(name, o, env, out);
}
