/* sseq-stress's private interface: the host model (storages, handles, the D2H checks
 * in flight), one client's state, and the operations each file contributes to the mix. */
#ifndef SSEQ_STRESS_H
#define SSEQ_STRESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sseq-internal.h"

#define MAX_HANDLES 24
#define MAX_FREED 16
#define MAX_CHECKS 24 /* D2H checks in flight per client before the oldest is waited */
#define HISTORY 6
#define DESCRIBED 4096 /* --verbose: descriptions of recent requests, by tag */
#define CLIENT_FLOATS (2u << 20) /* model memory per client */
/* Every intermediate of every op stays below 2^24 in magnitude: exact in float in any
 * summation order. An op whose model result would not is turned into a fill. */
#define EXACT_LIMIT 16777216.0
#define VALUE_LIMIT 1048576.0

struct options {
	const char *socket;
	uint64_t ops;
	unsigned clients;
	unsigned lanes; /* per client; each op on one of them at random */
	uint64_t seed;
	bool verbose;
};

extern struct options opt; /* stress.c: set once, before any client starts */
extern pthread_mutex_t print_lock; /* stress-client.c: one client's lines at a time */

/* splitmix64: every seed gives a good stream, so client i uses seed + i. */
struct rng {
	uint64_t s;
};

static inline uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static inline int64_t rng_range(struct rng *r, int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

static inline bool rng_chance(struct rng *r, unsigned percent)
{
	return rng_next(r) % 100 < percent;
}

/* The expected contents of one base buffer, shared by its slices. */
struct storage {
	float *data;
	uint64_t n;
	unsigned refs; /* handles naming it */
	unsigned id;
	char history[HISTORY][96]; /* the last writes, for --verbose */
	unsigned nhistory;
};

/* A buffer or slice handle: a window [off, off + n) of a storage, in floats. */
struct handle {
	uint64_t h;
	struct storage *st;
	uint64_t off, n;
	bool slice;
};

struct check {
	uint64_t tag;
	float *got;
	float *expect;
	uint64_t n;
	bool host; /* got is sseq_host_alloc memory */
	bool counted; /* its error was already counted from sseq_next_error */
	uint64_t handle;
	unsigned storage;
	uint64_t off; /* in the storage */
	uint64_t op;
	char history[HISTORY][96]; /* --verbose: the storage's last writes when submitted */
	unsigned nhistory;
};

struct client {
	unsigned id;
	struct sseq *s;
	struct rng rng;
	struct rng lane_rng; /* its own, so that --lanes leaves a seed's ops as they were */
	uint64_t budget;
	struct handle hs[MAX_HANDLES];
	unsigned nh;
	uint64_t freed[MAX_FREED];
	unsigned nfreed;
	struct check checks[MAX_CHECKS];
	unsigned nchecks;
	uint64_t floats; /* model memory in use */
	unsigned next_storage;
	/* --verbose: what each recent tagged request was, so a late error can be named. */
	char (*described)[112];
	/* Results. */
	uint64_t ops, wrong, errors, checked;
	bool dead; /* the connection failed: stop */
	/* For the progress report, read by the main thread: ops so far, and whether the
	 * client has returned. */
	_Atomic uint64_t progress;
	atomic_bool finished;
};
static inline float *at(const struct handle *h, uint64_t i)
{
	return &h->st->data[h->off + i];
}

static inline float small_value(struct rng *r)
{
	return (float)rng_range(r, -8, 8);
}

/* ---- reporting (stress-client.c) ---- */

void client_error(struct client *c, int code, const char *what);
uint64_t *tag_slot(uint64_t *tag);
void describe(struct client *c, uint64_t tag, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void count_reported(struct client *c, int code, uint64_t tag, const char *how);
void drain_errors(struct client *c);
void client_sync(struct client *c);
void note_write(struct storage *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *client_main(void *arg);

/* ---- the model's handles and the operations (stress-ops.c) ---- */

struct handle *pick(struct client *c);
struct handle *pick_other(struct client *c, const struct handle * not, bool other_storage);
bool overlap(const struct handle *x, uint64_t a, const struct handle *y, uint64_t b, uint64_t n);
void forget(struct client *c, struct handle *h);
void pick_range(struct client *c, uint64_t len, uint64_t *off, uint64_t *n);

/* op_elementwise's kernels; client_step picks one as roll % 3. */
enum ew_kind { EW_ADD, EW_AXPY, EW_SCALE };

struct handle *op_alloc(struct client *c);
void op_free(struct client *c, struct handle *h);
struct handle *op_slice(struct client *c, struct handle *base);
void op_h2d(struct client *c, struct handle *d);
void op_d2d(struct client *c, struct handle *src, struct handle *dst);
void execute(struct client *c, const char *kernel, const struct sseq_arg *args, size_t nargs);
void op_fill(struct client *c, struct handle *y, uint64_t n, float v);
void op_iota(struct client *c, struct handle *y);
void op_elementwise(
	struct client *c, enum ew_kind kind, struct handle *x, struct handle *b, struct handle *y);
void op_reduce(struct client *c, struct handle *x, struct handle *y);
void op_spin(struct client *c);
void op_use_freed(struct client *c);
void op_conv2d(struct client *c); /* stress-conv.c */

/* ---- the D2H checks (stress-check.c) ---- */

void op_d2h(struct client *c, struct handle *src);
/* Waits for all but the newest `keep` checks and compares what landed. */
void checks_drain(struct client *c, unsigned keep);

/* ---- scenarios (stress-scenario.c) ---- */

void scenario_h2d_then_kernel(struct client *c);
void scenario_old_upload_after_many_kernels(struct client *c);
void scenario_slice_of_h2d(struct client *c);
void scenario_d2d_of_kernel_output(struct client *c);
void scenario_free_while_reading(struct client *c);
void scenario_write_after_read(struct client *c);

#endif
