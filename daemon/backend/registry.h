/* The backends sseqd can run, as a table of name, probe and create tried in order
 * (seatd's impls[]): `--backend auto` takes the first whose probe succeeds, a named
 * backend must probe. Every refusal is reported in one format, "backend NAME: why". */
#ifndef SSEQ_REGISTRY_H
#define SSEQ_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "sim.h"

/* What the daemon's options ask of whichever backend runs. */
struct backend_options {
	const char *name; /* "sim", "hip" or "auto"; NULL: auto */
	unsigned device; /* --device */
	const char *kernels; /* hip: the built-in kernels' image; NULL: the installed one */
	bool audit; /* hip: --audit (the sim's detector always checks) */
	unsigned submit_threads; /* hip: --submit-threads (0: the enqueue calls inline) */
	bool device_timeline; /* hip: --device-timeline (the sim's is always device-timed) */
	struct sim_config sim; /* sim: delays and injected faults */
};

/* sseqd's --submit-threads when not given (the sim has no use for it). */
#define BACKEND_DEFAULT_SUBMIT_THREADS 16
#define BACKEND_MAX_SUBMIT_THREADS 16
/* sseqd's --device-timeline when not given: hip's timeline from the GPU's timestamps
 * (two more timing events per launch) or as the daemon observed it. */
#define BACKEND_DEFAULT_DEVICE_TIMELINE false

struct backend_impl {
	const char *name;
	/* 0 when the backend can run o->device on this machine, else a negative errno with
	 * the reason in why. Must not start the device. */
	int (*probe)(const struct backend_options *o, char *why, size_t size);
	int (*create)(struct backend *out, const struct backend_options *o,
		const struct backend_env *env);
};

/* The table, in the order auto tries it, and its length. */
extern const struct backend_impl backend_impls[];
extern const size_t backend_nimpls;

/* Start the backend o asks for into *out: 0, or a negative errno once the reason was
 * logged. */
int backend_start(
	const struct backend_options *o, const struct backend_env *env, struct backend *out);

#endif
