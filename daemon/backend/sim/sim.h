/* The sim backend: a CPU device with one worker thread per stream, host memory as device
 * memory, configurable delays and injected faults, and a shadow race detector that checks
 * every access against the point that last wrote or read its allocation. */
#ifndef SSEQ_SIM_H
#define SSEQ_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"

#define SIM_SCRIPT_MAX 64
#define SIM_INJECT_MAX 32
#define SIM_DEFAULT_MEMORY (16ull << 30)

enum sim_delay_mode {
	SIM_DELAY_NONE,
	SIM_DELAY_FIXED, /* lo */
	SIM_DELAY_RAND, /* uniform in [lo, hi], per-stream seeded PRNG */
	SIM_DELAY_SCRIPT, /* script[0], script[1], ... then again from the start */
};

/* Slept before each op of one stream kind (not before waits or records). */
struct sim_delay {
	enum sim_delay_mode mode;
	uint64_t lo_ns, hi_ns;
	unsigned nscript;
	uint64_t script_ns[SIM_SCRIPT_MAX];
};

/* All zero is a valid configuration: no delays, no faults, SIM_DEFAULT_MEMORY bytes,
 * seed 0. The streams come from the core's layout (backend_env). */
struct sim_config {
	uint64_t memory; /* bytes the device offers; 0: SIM_DEFAULT_MEMORY */
	uint64_t seed; /* for random delays */
	struct sim_delay delay[SEQ_STREAM_D2D + 1]; /* by enum seq_stream_kind */
	/* Injected faults, each naming a launch call (1-based, counted over all streams,
	 * refused calls included). fail-op=N: the call fails with -BACKEND_EINJECTED and
	 * enqueues nothing. device-fail-op=N (fail_on_device): the call succeeds, but the
	 * op faults on the device, as a kernel hitting an illegal address would: it does
	 * not do its work, and its stream's events from then on complete with -EIO.
	 * device-lost-op=N (fail_lost, with fail_on_device): the same fault poisons the
	 * whole "context", as an illegal address does on a GPU: from then on every op on
	 * every stream does no work, every event reports -EIO and launches are refused with
	 * -EIO, until the backend is reset (backend_ops.reset). */
	unsigned nfail;
	uint64_t fail_op[SIM_INJECT_MAX];
	bool fail_on_device[SIM_INJECT_MAX];
	bool fail_lost[SIM_INJECT_MAX];
};

/* Parse one --sim-delay spec into cfg: KIND=DELAY where KIND is compute, h2d, d2h, d2d or
 * all, and DELAY is a duration (2ms), rand:LO-HI (rand:0-500us; a bare LO takes HI's
 * unit) or script:D,D,... (cycled). Durations are a number with ns, us, ms or s; a bare
 * 0 is allowed. Returns 0, or -EINVAL with *why set to a static reason. */
int sim_parse_delay(struct sim_config *cfg, const char *spec, const char **why);
/* Parse one --inject spec for the sim: fail-op=N, device-fail-op=N or device-lost-op=N
 * (N >= 1; each repeatable, at most SIM_INJECT_MAX in all). Returns 0 or -EINVAL with
 * *why set: the fault's =N form when N is missing or bad, a reason starting "unknown
 * fault" when spec names none of them. */
int sim_parse_inject(struct sim_config *cfg, const char *spec, const char **why);

/* Start the device with env's streams: its worker threads are running when this returns
 * 0. A worker pushes every recorded event reached to env->cq; env->finding hears each
 * race-detector finding, from a worker or from the thread calling launch or mem_release.
 * Returns 0, -EINVAL for a bad config, or -ENOMEM / a thread-creation error. */
int sim_create(struct backend *out, const struct sim_config *cfg, const struct backend_env *env);

/* The sim as sseqd's registry knows it: its name, options and start. */
extern const struct backend_desc sim_backend;

#endif
