/* The backends sseqd knows, as a list of descriptors (backend.h) tried in order (seatd's
 * impls[]): `--backend auto` takes the first whose probe succeeds, a named backend must
 * probe. The list is the build's (daemon/backend/meson.build); each backend brings its
 * own options. Every refusal is reported in one format, "backend NAME: why". */
#ifndef SSEQ_REGISTRY_H
#define SSEQ_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "option.h"

#define REGISTRY_MAX_BACKENDS 8

struct registry {
	const char *name; /* --backend; NULL: auto */
	const struct option_set *set;
	void *config[REGISTRY_MAX_BACKENDS]; /* each backend's, as its options set it */
	int group[REGISTRY_MAX_BACKENDS]; /* each backend's option group in set */
	const struct backend_desc *running;
	struct option_row rows[2]; /* --backend, its names from the list */
	char hint[96], help[192];
};

/* Add --backend and every backend's options to set, each backend's config at its
 * defaults: 0, -ENOMEM or -ENOSPC. */
int registry_init(struct registry *reg, struct option_set *set);
void registry_finish(struct registry *reg);

/* Start the backend the options ask for into *out: 0, or a negative errno once the
 * reason was logged. Options given for another backend are named in a warning. */
int registry_start(struct registry *reg, const struct backend_args *args,
	const struct backend_env *env, struct backend *out);

/* --loops 0 (auto): the loops for the backend that registry_start would start on this
 * machine, whose sseqd may use cpus CPUs (the backend's cpus_per_loop and loops_max). */
unsigned registry_auto_loops(const struct registry *reg, unsigned device, unsigned cpus);

/* One more instance of the running backend, for another loop (--loops): 0, or a negative
 * errno once the reason was logged. */
int registry_start_another(struct registry *reg, const struct backend_args *args,
	const struct backend_env *env, struct backend *out);

/* What the running backend's options turned on, for the start-up line ("; audit on"). */
void registry_describe(
	const struct registry *reg, const struct backend *be, char *buf, size_t size);

#endif
