/* The backend registry: the list of backends this sseqd knows (each one's descriptor, in
 * the order meson's list gives, the order auto tries), --backend, and the one place that
 * reports why a backend does not run. Nothing here names a backend. */
#include "registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-list.h" /* SSEQ_BACKENDS: X(name) for each, from meson */
#include "log.h"

#define X(name) extern const struct backend_desc name##_backend;
SSEQ_BACKENDS
#undef X

static const struct backend_desc *const backends[] = {
#define X(name) &name##_backend,
	SSEQ_BACKENDS
#undef X
};

#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))
_Static_assert(NBACKENDS <= REGISTRY_MAX_BACKENDS, "raise REGISTRY_MAX_BACKENDS");

static bool registry_built(const struct backend_desc *b)
{
	return b->probe && b->create;
}

static int registry_parse_name(void *cfg, const char *arg, const char **why)
{
	struct registry *reg = cfg;

	if (strcmp(arg, "auto") == 0) {
		reg->name = arg;
		return 0;
	}
	for (size_t i = 0; i < NBACKENDS; i++) {
		if (strcmp(backends[i]->name, arg) == 0) {
			reg->name = arg;
			return 0;
		}
	}
	return -EINVAL;
}

/* "hip, sim or auto": every backend known, built into this sseqd or not. */
static void registry_names(char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < NBACKENDS && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s, ", backends[i]->name);
	if (n >= 2 && n < size)
		snprintf(buf + n - 2, size - n + 2, " or auto");
}

int registry_init(struct registry *reg, struct option_set *set)
{
	char names[64];
	int g;

	memset(reg, 0, sizeof(*reg));
	reg->set = set;
	registry_names(names, sizeof(names));
	snprintf(reg->hint, sizeof(reg->hint), " (%s)", names);
	snprintf(reg->help, sizeof(reg->help),
		"%s (default auto: the first of these that can run here)", names);
	reg->rows[0] = (struct option_row){.name = "backend",
		.short_name = 'b',
		.arg = "KIND",
		.kind = OPTION_CUSTOM,
		.parse = registry_parse_name,
		.hint = reg->hint,
		.help = reg->help};
	if (option_set_add(set, reg->rows, reg, NULL) < 0)
		return -ENOSPC;
	for (size_t i = 0; i < NBACKENDS; i++) {
		const struct backend_desc *b = backends[i];

		reg->config[i] = calloc(1, b->config_size ? b->config_size : 1);
		if (!reg->config[i])
			return -ENOMEM;
		if (b->config_default)
			memcpy(reg->config[i], b->config_default, b->config_size);
		g = option_set_add(set, b->options, reg->config[i], b->config_default);
		if (g < 0)
			return g;
		reg->group[i] = g;
	}
	return 0;
}

void registry_finish(struct registry *reg)
{
	for (size_t i = 0; i < NBACKENDS; i++)
		free(reg->config[i]);
	memset(reg->config, 0, sizeof(reg->config));
}

/* The backends built into this sseqd, "sim" or "hip, sim". */
static void registry_built_names(char *buf, size_t size)
{
	buf[0] = '\0';
	for (size_t i = 0, n = 0; i < NBACKENDS && n < size; i++)
		if (registry_built(backends[i]))
			n += (size_t)snprintf(
				buf + n, size - n, "%s%s", n ? ", " : "", backends[i]->name);
}

static int registry_try(struct registry *reg, size_t i, const struct backend_args *args,
	const struct backend_env *env, struct backend *out, char *why, size_t size)
{
	const struct backend_desc *b = backends[i];
	int r = b->probe(reg->config[i], args->device, why, size);

	if (r == 0)
		r = b->create(out, reg->config[i], args, env);
	if (r == 0)
		reg->running = b;
	return r;
}

/* One backend, by name: it must be built in, probe and start. */
static int registry_start_named(struct registry *reg, const struct backend_args *args,
	const struct backend_env *env, struct backend *out)
{
	char why[160] = "", have[64];
	size_t i = 0;
	int r;

	while (i < NBACKENDS && strcmp(backends[i]->name, reg->name))
		i++;
	if (i == NBACKENDS || !registry_built(backends[i])) {
		registry_built_names(have, sizeof(have));
		if (i == NBACKENDS)
			log_err("main", "backend %s: unknown; this sseqd's backends: %s, or auto",
				reg->name, have);
		else
			log_err("main",
				"backend %s: this sseqd was built without the %s backend; its "
				"backends: %s (build with %s for %s)",
				reg->name, backends[i]->title, have, backends[i]->build_option,
				reg->name);
		return -ENODEV;
	}
	r = registry_try(reg, i, args, env, out, why, sizeof(why));
	if (r < 0 && why[0])
		log_err("main", "backend %s: %s", reg->name, why);
	return r;
}

/* The first backend that probes and starts. */
static int registry_start_auto(struct registry *reg, const struct backend_args *args,
	const struct backend_env *env, struct backend *out)
{
	int r = -ENODEV;

	for (size_t i = 0; i < NBACKENDS; i++) {
		const struct backend_desc *b = backends[i];
		const char *next = NULL;
		char why[160] = "";

		for (size_t j = i + 1; j < NBACKENDS && !next; j++)
			if (registry_built(backends[j]))
				next = backends[j]->name;
		if (!registry_built(b)) {
			if (next)
				log_notice("main",
					"backend auto: no %s support built in: using the %s "
					"backend",
					b->title, next);
			continue;
		}
		r = registry_try(reg, i, args, env, out, why, sizeof(why));
		if (r == 0)
			return 0;
		if (!why[0]) /* it probed, and create failed */
			snprintf(why, sizeof(why), "did not start (%s)", strerror(-r));
		if (next)
			log_msg(r == -ENODEV ? LOG_LVL_NOTICE : LOG_LVL_WARN, "main",
				"backend auto: %s: %s: using the %s backend", b->name, why, next);
	}
	return r;
}

/* Options given for backends other than the one running: named, as they do nothing. */
static void registry_warn_unused(const struct registry *reg)
{
	for (size_t i = 0; i < NBACKENDS; i++) {
		const struct backend_desc *b = backends[i];
		const uint64_t given = reg->set->group[reg->group[i]].given;
		char names[256] = "";
		size_t n = 0, count = 0;

		if (b == reg->running || !given)
			continue;
		for (size_t k = 0; b->options[k].name && n < sizeof(names); k++) {
			if (!(given >> k & 1))
				continue;
			n += (size_t)snprintf(names + n, sizeof(names) - n, "%s--%s", n ? ", " : "",
				b->options[k].name);
			count++;
		}
		log_warn("main", "%s: the %s backend's option%s, ignored with %s", names, b->name,
			count == 1 ? "" : "s", reg->running->name);
	}
}

int registry_start(struct registry *reg, const struct backend_args *args,
	const struct backend_env *env, struct backend *out)
{
	int r;

	if (reg->name && strcmp(reg->name, "auto"))
		r = registry_start_named(reg, args, env, out);
	else
		r = registry_start_auto(reg, args, env, out);
	/* -ENODEV was said where it was found (no such backend in this build, no device). */
	if (r < 0 && r != -ENODEV)
		log_err("main", "cannot start the %s backend: %s", reg->name ? reg->name : "auto",
			strerror(-r));
	if (r == 0)
		registry_warn_unused(reg);
	return r;
}

unsigned registry_auto_loops(const struct registry *reg, unsigned device, unsigned cpus)
{
	for (size_t i = 0; i < NBACKENDS; i++) {
		const struct backend_desc *b = backends[i];
		char why[160];
		unsigned n;

		if (reg->name && strcmp(reg->name, "auto") && strcmp(reg->name, b->name))
			continue;
		if (!registry_built(b) || b->probe(reg->config[i], device, why, sizeof(why)) < 0)
			continue;
		if (!b->cpus_per_loop)
			return 1;
		n = cpus / b->cpus_per_loop;
		return n < 1 ? 1 : n > b->loops_max ? b->loops_max : n;
	}
	return 1; /* none starts: registry_start says why */
}

int registry_start_another(struct registry *reg, const struct backend_args *args,
	const struct backend_env *env, struct backend *out)
{
	size_t i = 0;
	int r;

	while (i < NBACKENDS && backends[i] != reg->running)
		i++;
	if (i == NBACKENDS)
		return -ENODEV;
	r = backends[i]->create(out, reg->config[i], args, env);
	if (r < 0)
		log_err("main", "cannot start the %s backend for loop %u: %s", backends[i]->name,
			args->loop, strerror(-r));
	return r;
}

void registry_describe(const struct registry *reg, const struct backend *be, char *buf, size_t size)
{
	buf[0] = '\0';
	if (reg->running && reg->running->describe) {
		size_t i = 0;

		/* running is one of backends[]: its index finds its options. */
		while (i < NBACKENDS && backends[i] != reg->running)
			i++;
		if (i < NBACKENDS)
			reg->running->describe(reg->config[i], be, buf, size);
	}
}
