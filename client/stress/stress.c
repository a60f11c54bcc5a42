/* sseq-stress: random workloads through libsseq, several clients (threads, each with
 * its own connection) at once, every device-to-host result checked against a host model
 * that applies each operation in program order. Values are small integers, so every
 * float result is exact and any difference is a sequencing bug, not rounding. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
	uint64_t seed;
	bool verbose;
};

static struct options opt = {.ops = 10000, .clients = 4, .seed = 1};
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned printed; /* mismatches printed so far, all clients */

/* splitmix64: every seed gives a good stream, so client i uses seed + i. */
struct rng {
	uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static int64_t rng_range(struct rng *r, int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rng_next(r) % (uint64_t)(hi - lo + 1));
}

static bool rng_chance(struct rng *r, unsigned percent)
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
};

/* ---- reporting ---- */

static void client_error(struct client *c, int code, const char *what)
{
	c->errors++;
	/* An errno (not a daemon status) means the connection or the process is in
	 * trouble: stop this client rather than pile up more. */
	if (!SSEQ_IS_DAEMON_ERROR(code))
		c->dead = true;
	if (opt.verbose || c->dead) {
		pthread_mutex_lock(&print_lock);
		fprintf(stderr, "client %u op %" PRIu64 ": %s: %s (%s)\n", c->id, c->ops, what,
			sseq_strerror(code), sseq_last_error_message(c->s));
		pthread_mutex_unlock(&print_lock);
	}
}

/* With --verbose every asynchronous request is tagged and described, so that an error
 * arriving later names the request; otherwise requests go untagged, as most
 * applications would send them. */
static uint64_t *tag_slot(uint64_t *tag)
{
	return opt.verbose ? tag : NULL;
}

static void describe(struct client *c, uint64_t tag, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void describe(struct client *c, uint64_t tag, const char *fmt, ...)
{
	if (!opt.verbose || !c->described)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->described[tag % DESCRIBED], sizeof(c->described[0]), fmt, ap);
	va_end(ap);
}

/* Count an error reported by sseq_sync or sseq_next_error for request `tag`; a D2H check
 * waiting on that tag will see it again and must not count it twice. */
static void count_reported(struct client *c, int code, uint64_t tag, const char *how)
{
	char what[160];
	snprintf(what, sizeof(what), "%s", how);
	for (unsigned i = 0; i < c->nchecks; i++)
		if (c->checks[i].tag == tag)
			c->checks[i].counted = true;
	if (opt.verbose && c->described && tag)
		snprintf(what, sizeof(what), "%s: tag %" PRIu64 " (%s)", how, tag,
			c->described[tag % DESCRIBED]);
	client_error(c, code, what);
}

/* Count the errors the library kept for requests nobody waited on. */
static void drain_errors(struct client *c)
{
	uint64_t tag;
	int code;
	while ((code = sseq_next_error(c->s, &tag)) != 0)
		count_reported(c, code, tag, "pipelined request");
}

static void client_sync(struct client *c)
{
	int r;
	/* Each call reports one queued error; a Sync that itself keeps failing is bounded. */
	for (int i = 0; i < 100000 && (r = sseq_sync(c->s)) < 0 && !c->dead; i++)
		count_reported(c, r, sseq_last_error_tag(c->s), "sync");
}

static void note_write(struct storage *st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void note_write(struct storage *st, const char *fmt, ...)
{
	if (!opt.verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(st->history[st->nhistory++ % HISTORY], sizeof(st->history[0]), fmt, ap);
	va_end(ap);
}

/* ---- the model's handles ---- */

static struct handle *pick(struct client *c)
{
	return &c->hs[rng_next(&c->rng) % c->nh];
}

/* A handle other than `not` (and not over the same storage when `other_storage`). */
static struct handle *pick_other(struct client *c, const struct handle * not, bool other_storage)
{
	for (int tries = 0; tries < 8; tries++) {
		struct handle *h = pick(c);
		if (h != not &&(!other_storage || h->st != not ->st))
			return h;
	}
	return NULL;
}

static float *at(const struct handle *h, uint64_t i)
{
	return &h->st->data[h->off + i];
}

/* Do [a, a + n) of handle x and [b, b + n) of handle y share model memory? */
static bool overlap(
	const struct handle *x, uint64_t a, const struct handle *y, uint64_t b, uint64_t n)
{
	if (x->st != y->st)
		return false;
	uint64_t xa = x->off + a, ya = y->off + b;
	return xa < ya + n && ya < xa + n;
}

static void storage_unref(struct client *c, struct storage *st)
{
	if (--st->refs == 0) {
		c->floats -= st->n;
		free(st->data);
		free(st);
	}
}

static void forget(struct client *c, struct handle *h)
{
	if (c->nfreed < MAX_FREED)
		c->freed[c->nfreed++] = h->h;
	else
		c->freed[rng_next(&c->rng) % MAX_FREED] = h->h;
	storage_unref(c, h->st);
	*h = c->hs[--c->nh];
}

static float small_value(struct rng *r)
{
	return (float)rng_range(r, -8, 8);
}

/* ---- operations: each issues requests and applies them to the model ---- */

static void op_fill(struct client *c, struct handle *y, uint64_t n, float v);

static struct handle *op_alloc(struct client *c)
{
	static const uint64_t sizes[] = {1, 3, 16, 64, 100, 256, 1000, 1024, 4096, 16384, 65536};
	uint64_t n = sizes[rng_next(&c->rng) % (sizeof(sizes) / sizeof(*sizes))];
	if (c->nh >= MAX_HANDLES || c->floats + n > CLIENT_FLOATS)
		return NULL;
	struct storage *st = calloc(1, sizeof(*st));
	st->data = malloc(n * sizeof(float));
	st->n = n;
	st->refs = 1;
	st->id = c->next_storage++;
	char label[32];
	snprintf(label, sizeof(label), "c%u-s%u", c->id, st->id);
	uint64_t h;
	c->ops++;
	int r = sseq_alloc(c->s, n * sizeof(float), label, &h);
	if (r < 0) {
		client_error(c, r, "alloc");
		free(st->data);
		free(st);
		return NULL;
	}
	c->floats += n;
	struct handle *hd = &c->hs[c->nh++];
	*hd = (struct handle){.h = h, .st = st, .off = 0, .n = n};
	/* Define it at once, so the model never holds undefined values. */
	op_fill(c, hd, n, small_value(&c->rng));
	return hd;
}

static void op_free(struct client *c, struct handle *h)
{
	c->ops++;
	int r = sseq_free(c->s, h->h);
	if (r < 0)
		client_error(c, r, "free");
	forget(c, h);
}

static struct handle *op_slice(struct client *c, struct handle *base)
{
	if (c->nh >= MAX_HANDLES || base->n < 2)
		return NULL;
	uint64_t off = (uint64_t)rng_range(&c->rng, 0, (int64_t)base->n - 1);
	uint64_t n = (uint64_t)rng_range(&c->rng, 1, (int64_t)(base->n - off));
	uint64_t h;
	c->ops++;
	int r = sseq_slice(c->s, base->h, off * sizeof(float), n * sizeof(float), NULL, &h);
	if (r < 0) {
		client_error(c, r, "slice");
		return NULL;
	}
	base->st->refs++;
	struct handle *hd = &c->hs[c->nh++];
	*hd = (struct handle){
		.h = h, .st = base->st, .off = base->off + off, .n = n, .slice = true};
	return hd;
}

/* A random sub-range [*off, *off + *n) of a handle of length len: often all of it. */
static void pick_range(struct client *c, uint64_t len, uint64_t *off, uint64_t *n)
{
	if (rng_chance(&c->rng, 50)) {
		*off = 0;
		*n = len;
		return;
	}
	*off = (uint64_t)rng_range(&c->rng, 0, (int64_t)len - 1);
	*n = (uint64_t)rng_range(&c->rng, 1, (int64_t)(len - *off));
}

static void op_h2d(struct client *c, struct handle *d)
{
	uint64_t off, n;
	pick_range(c, d->n, &off, &n);
	/* Half the time from staging memory (zero-copy), given back right after submission:
	 * the library must keep the range until the copy completed. */
	bool host = rng_chance(&c->rng, 50);
	float *src = NULL;
	if (host && sseq_host_alloc(c->s, n * sizeof(float), (void **)&src) < 0)
		src = NULL;
	bool heap = src == NULL;
	if (heap)
		src = malloc(n * sizeof(float));
	for (uint64_t i = 0; i < n; i++)
		src[i] = small_value(&c->rng);
	c->ops++;
	uint64_t tag = 0;
	int r = sseq_copy_h2d(
		c->s, d->h, off * sizeof(float), src, n * sizeof(float), tag_slot(&tag));
	describe(c, tag, "op %" PRIu64 " h2d -> h%" PRIu64 "[%" PRIu64 "+%" PRIu64 "]%s", c->ops,
		d->h, off, n, d->slice ? " (slice)" : "");
	if (r < 0)
		client_error(c, r, "copy_h2d");
	else
		memcpy(at(d, off), src, n * sizeof(float));
	note_write(d->st, "op %" PRIu64 " h2d -> h%" PRIu64 "[%" PRIu64 "+%" PRIu64 "]", c->ops,
		d->h, off, n);
	if (heap)
		free(src);
	else
		sseq_host_free(c->s, src);
}

static void check_release(struct client *c, struct check *k)
{
	if (k->host)
		sseq_host_free(c->s, k->got);
	else
		free(k->got);
	free(k->expect);
}

static void check_finish(struct client *c, struct check *k)
{
	int r = sseq_wait(c->s, k->tag);
	if (r < 0) {
		char what[160];
		snprintf(what, sizeof(what), "copy_d2h of op %" PRIu64, k->op);
		if (!k->counted)
			client_error(c, r, what);
	} else {
		c->checked++;
		uint64_t bad = 0;
		for (uint64_t i = 0; i < k->n; i++) {
			if (k->got[i] == k->expect[i])
				continue;
			if (bad++ == 0 && opt.verbose) {
				pthread_mutex_lock(&print_lock);
				if (printed++ < 10) {
					fprintf(stderr,
						"client %u: mismatch in D2H of op %" PRIu64
						" from h%" PRIu64 " (storage s%u at %" PRIu64
						"): index %" PRIu64
						" expected %g got %g; last writes:\n",
						c->id, k->op, k->handle, k->storage, k->off, i,
						(double)k->expect[i], (double)k->got[i]);
					unsigned first =
						k->nhistory > HISTORY ? k->nhistory - HISTORY : 0;
					for (unsigned j = first; j < k->nhistory; j++)
						fprintf(stderr, "    %s\n",
							k->history[j % HISTORY]);
				}
				pthread_mutex_unlock(&print_lock);
			}
		}
		if (bad)
			c->wrong++;
	}
	check_release(c, k);
}

static void checks_drain(struct client *c, unsigned keep)
{
	unsigned done = c->nchecks > keep ? c->nchecks - keep : 0;
	for (unsigned i = 0; i < done; i++)
		check_finish(c, &c->checks[i]);
	memmove(&c->checks[0], &c->checks[done], (c->nchecks - done) * sizeof(*c->checks));
	c->nchecks -= done;
}

static void op_d2h(struct client *c, struct handle *src)
{
	if (c->nchecks == MAX_CHECKS)
		checks_drain(c, MAX_CHECKS / 2);
	uint64_t off, n;
	pick_range(c, src->n, &off, &n);
	struct check *k = &c->checks[c->nchecks];
	*k = (struct check){
		.n = n, .handle = src->h, .storage = src->st->id, .off = src->off + off};
	k->host = rng_chance(&c->rng, 30) &&
		sseq_host_alloc(c->s, n * sizeof(float), (void **)&k->got) == 0;
	if (!k->host)
		k->got = malloc(n * sizeof(float));
	/* Garbage the destination: a result that never landed must not pass. */
	for (uint64_t i = 0; i < n; i++)
		k->got[i] = NAN;
	k->expect = malloc(n * sizeof(float));
	memcpy(k->expect, at(src, off), n * sizeof(float));
	if (opt.verbose) {
		memcpy(k->history, src->st->history, sizeof(k->history));
		k->nhistory = src->st->nhistory;
	}
	c->ops++;
	k->op = c->ops;
	int r = sseq_copy_d2h(
		c->s, src->h, off * sizeof(float), k->got, n * sizeof(float), &k->tag);
	describe(c, k->tag, "op %" PRIu64 " d2h h%" PRIu64 "[%" PRIu64 "+%" PRIu64 "]", c->ops,
		src->h, off, n);
	if (r < 0) {
		client_error(c, r, "copy_d2h");
		check_release(c, k);
		return;
	}
	c->nchecks++;
}

static void op_d2d(struct client *c, struct handle *src, struct handle *dst)
{
	uint64_t n = src->n < dst->n ? src->n : dst->n;
	n = (uint64_t)rng_range(&c->rng, 1, (int64_t)n);
	uint64_t so = (uint64_t)rng_range(&c->rng, 0, (int64_t)(src->n - n));
	uint64_t doff = (uint64_t)rng_range(&c->rng, 0, (int64_t)(dst->n - n));
	if (overlap(src, so, dst, doff, n))
		return;
	c->ops++;
	uint64_t tag = 0;
	int r = sseq_copy_d2d(c->s, src->h, so * sizeof(float), dst->h, doff * sizeof(float),
		n * sizeof(float), tag_slot(&tag));
	describe(c, tag,
		"op %" PRIu64 " d2d h%" PRIu64 "%s[%" PRIu64 "] -> h%" PRIu64 "%s[%" PRIu64
		"] n=%" PRIu64 "%s",
		c->ops, src->h, src->slice ? "(slice)" : "", so, dst->h,
		dst->slice ? "(slice)" : "", doff, n, src->st == dst->st ? " same base" : "");
	if (r < 0) {
		client_error(c, r, "copy_d2d");
		return;
	}
	memmove(at(dst, doff), at(src, so), n * sizeof(float));
	note_write(dst->st,
		"op %" PRIu64 " d2d h%" PRIu64 "[%" PRIu64 "] -> h%" PRIu64 "[%" PRIu64 "+%" PRIu64
		"]",
		c->ops, src->h, so, dst->h, doff, n);
}

static void execute(struct client *c, const char *kernel, const struct sseq_arg *args, size_t nargs)
{
	c->ops++;
	uint64_t tag = 0;
	int r = sseq_execute(c->s, kernel, args, nargs, NULL, tag_slot(&tag));
	if (r < 0) {
		client_error(c, r, kernel);
		return;
	}
	if (!opt.verbose)
		return;
	char buf[112];
	int len = snprintf(buf, sizeof(buf), "op %" PRIu64 " %s", c->ops, kernel);
	for (size_t i = 0; i < nargs && i < 4 && len < (int)sizeof(buf); i++) {
		const struct sseq_arg *a = &args[i];
		if (a->type == SSEQ_ARG_BUFFER)
			len += snprintf(buf + len, sizeof(buf) - (size_t)len, " %s:h%" PRIu64,
				a->access == SSEQ_ACCESS_IN	       ? "in"
					: a->access == SSEQ_ACCESS_OUT ? "out"
								       : "inout",
				a->v.buffer);
		else if (a->type == SSEQ_ARG_U64)
			len += snprintf(
				buf + len, sizeof(buf) - (size_t)len, " n=%" PRIu64, a->v.u64);
	}
	describe(c, tag, "%s", buf);
}

static void op_fill(struct client *c, struct handle *y, uint64_t n, float v)
{
	struct sseq_arg a[] = {SSEQ_OUT(y->h), SSEQ_F32(v), SSEQ_U64(n)};
	execute(c, "fill", a, 3);
	for (uint64_t i = 0; i < n; i++)
		*at(y, i) = v;
	note_write(y->st, "op %" PRIu64 " fill h%" PRIu64 "[0+%" PRIu64 "] = %g", c->ops, y->h, n,
		(double)v);
}

static void op_iota(struct client *c, struct handle *y)
{
	uint64_t n = (uint64_t)rng_range(&c->rng, 1, (int64_t)y->n);
	float start = small_value(&c->rng), step = (float)rng_range(&c->rng, -2, 2);
	struct sseq_arg a[] = {SSEQ_OUT(y->h), SSEQ_F32(start), SSEQ_F32(step), SSEQ_U64(n)};
	execute(c, "iota", a, 4);
	for (uint64_t i = 0; i < n; i++)
		*at(y, i) = (float)((double)start + (double)i * step);
	note_write(y->st, "op %" PRIu64 " iota h%" PRIu64 "[0+%" PRIu64 "]", c->ops, y->h, n);
}

/* Elementwise kernels: out = f(in...) over n elements. The model computes first; if a
 * value would leave the exact range the op becomes a fill of the output. */
enum ew_kind { EW_ADD, EW_AXPY, EW_SCALE };

static void op_elementwise(
	struct client *c, enum ew_kind kind, struct handle *x, struct handle *b, struct handle *y)
{
	uint64_t n = x->n < y->n ? x->n : y->n;
	if (b && b->n < n)
		n = b->n;
	n = rng_chance(&c->rng, 60) ? n : (uint64_t)rng_range(&c->rng, 1, (int64_t)n);
	/* Outputs must not overlap inputs (axpy's y is its own input). */
	if (overlap(x, 0, y, 0, n) || (b && overlap(b, 0, y, 0, n)))
		return;
	float alpha = (float)rng_range(&c->rng, -2, 2);
	float *res = malloc(n * sizeof(float));
	bool exact = true;
	for (uint64_t i = 0; i < n && exact; i++) {
		double v;
		switch (kind) {
		case EW_ADD:
			v = (double)*at(x, i) + *at(b, i);
			break;
		case EW_AXPY:
			v = (double)alpha * *at(x, i) + *at(y, i);
			break;
		default:
			v = (double)*at(x, i) * alpha;
			break;
		}
		exact = fabs(v) <= VALUE_LIMIT;
		res[i] = (float)v;
	}
	if (!exact) {
		free(res);
		op_fill(c, y, n, small_value(&c->rng));
		return;
	}
	const char *name;
	if (kind == EW_ADD) {
		struct sseq_arg a[] = {SSEQ_IN(x->h), SSEQ_IN(b->h), SSEQ_OUT(y->h), SSEQ_U64(n)};
		execute(c, name = "add", a, 4);
	} else if (kind == EW_AXPY) {
		struct sseq_arg a[] = {
			SSEQ_F32(alpha), SSEQ_IN(x->h), SSEQ_INOUT(y->h), SSEQ_U64(n)};
		execute(c, name = "axpy", a, 4);
	} else {
		struct sseq_arg a[] = {SSEQ_IN(x->h), SSEQ_OUT(y->h), SSEQ_F32(alpha), SSEQ_U64(n)};
		execute(c, name = "scale", a, 4);
	}
	memcpy(at(y, 0), res, n * sizeof(float));
	free(res);
	note_write(y->st, "op %" PRIu64 " %s h%" PRIu64 " -> h%" PRIu64 "[0+%" PRIu64 "]", c->ops,
		name, x->h, y->h, n);
}

static void op_reduce(struct client *c, struct handle *x, struct handle *y)
{
	uint64_t n = (uint64_t)rng_range(&c->rng, 1, (int64_t)x->n);
	if (overlap(x, 0, y, 0, n) || overlap(x, 0, y, 0, 1))
		return;
	double sum = 0, mag = 0;
	for (uint64_t i = 0; i < n; i++) {
		sum += *at(x, i);
		mag += fabs(*at(x, i));
	}
	if (mag >= EXACT_LIMIT) {
		op_fill(c, x, n, small_value(&c->rng));
		return;
	}
	struct sseq_arg a[] = {SSEQ_IN(x->h), SSEQ_OUT(y->h), SSEQ_U64(n)};
	execute(c, "reduce_sum", a, 3);
	*at(y, 0) = (float)sum;
	note_write(y->st,
		"op %" PRIu64 " reduce_sum h%" PRIu64 "[0+%" PRIu64 "] -> h%" PRIu64 "[0]", c->ops,
		x->h, n, y->h);
}

static void op_spin(struct client *c)
{
	struct sseq_arg a[] = {SSEQ_U64(rng_range(&c->rng, 20, 300))};
	execute(c, "spin", a, 1);
}

struct conv {
	int32_t n, c, h, w, o, kh, kw, sh, sw, pt, pb, pl, pr, lh, lw, rh, rw, g;
	int64_t oh, ow;
};

static int64_t conv_extent(
	int32_t in, int32_t k, int32_t stride, int32_t lo, int32_t hi, int32_t lhs, int32_t rhs)
{
	int64_t in_d = (int64_t)(in - 1) * lhs + 1, k_d = (int64_t)(k - 1) * rhs + 1;
	int64_t padded = in_d + lo + hi;
	return padded < k_d ? 0 : (padded - k_d) / stride + 1;
}

/* lax.conv_general_dilated, NCHW / OIHW: zeros between input elements (lhs dilation),
 * then padding, then a correlation with the dilated kernel. Returns false when a sum
 * could leave the exact range. */
static bool conv_model(const struct conv *p, const float *x, const float *w, float *y)
{
	int32_t cg = p->c / p->g, og = p->o / p->g;
	for (int32_t n = 0; n < p->n; n++)
		for (int32_t o = 0; o < p->o; o++)
			for (int64_t oy = 0; oy < p->oh; oy++)
				for (int64_t ox = 0; ox < p->ow; ox++) {
					double sum = 0, mag = 0;
					int32_t grp = o / og;
					for (int32_t ci = 0; ci < cg; ci++)
						for (int32_t ky = 0; ky < p->kh; ky++)
							for (int32_t kx = 0; kx < p->kw; kx++) {
								int64_t iy = oy * p->sh +
									(int64_t)ky * p->rh - p->pt;
								int64_t ix = ox * p->sw +
									(int64_t)kx * p->rw - p->pl;
								if (iy < 0 || ix < 0 ||
									iy % p->lh || ix % p->lw)
									continue;
								iy /= p->lh;
								ix /= p->lw;
								if (iy >= p->h || ix >= p->w)
									continue;
								int32_t cc = grp * cg + ci;
								double xv =
									x[((int64_t)(n * p->c +
										   cc) * p->h +
										  iy) * p->w +
										ix];
								double wv =
									w[((int64_t)(o * cg + ci) *
											  p->kh +
										  ky) * p->kw +
										kx];
								sum += xv * wv;
								mag += fabs(xv * wv);
							}
					if (mag >= EXACT_LIMIT)
						return false;
					y[((int64_t)(n * p->o + o) * p->oh + oy) * p->ow + ox] =
						(float)sum;
				}
	return true;
}

static void op_conv2d(struct client *c)
{
	struct rng *r = &c->rng;
	struct conv p;
	do {
		p = (struct conv){
			.n = (int32_t)rng_range(r, 1, 2),
			.c = (int32_t)rng_range(r, 1, 3),
			.h = (int32_t)rng_range(r, 2, 6),
			.w = (int32_t)rng_range(r, 2, 6),
			.o = (int32_t)rng_range(r, 1, 3),
			.kh = (int32_t)rng_range(r, 1, 3),
			.kw = (int32_t)rng_range(r, 1, 3),
			.sh = (int32_t)rng_range(r, 1, 2),
			.sw = (int32_t)rng_range(r, 1, 2),
			.pt = (int32_t)rng_range(r, 0, 2),
			.pb = (int32_t)rng_range(r, 0, 2),
			.pl = (int32_t)rng_range(r, 0, 2),
			.pr = (int32_t)rng_range(r, 0, 2),
			.lh = (int32_t)rng_range(r, 1, 2),
			.lw = (int32_t)rng_range(r, 1, 2),
			.rh = (int32_t)rng_range(r, 1, 2),
			.rw = (int32_t)rng_range(r, 1, 2),
			.g = 1,
		};
		if (p.c % 2 == 0 && p.o % 2 == 0 && rng_chance(r, 50))
			p.g = 2;
		p.oh = conv_extent(p.h, p.kh, p.sh, p.pt, p.pb, p.lh, p.rh);
		p.ow = conv_extent(p.w, p.kw, p.sw, p.pl, p.pr, p.lw, p.rw);
	} while (p.oh < 1 || p.ow < 1);
	uint64_t nx = (uint64_t)(p.n * p.c * p.h * p.w);
	uint64_t nw = (uint64_t)(p.o * (p.c / p.g) * p.kh * p.kw);
	uint64_t ny = (uint64_t)(p.n * p.o * p.oh * p.ow);

	/* Inputs and output from the client's buffers when they are big enough (they carry
	 * whatever earlier ops left there), else skip. */
	struct handle *x = NULL, *w = NULL, *y = NULL;
	for (int tries = 0; tries < 12 && !(x && w && y); tries++) {
		struct handle *h = pick(c);
		if (!x && h->n >= nx)
			x = h;
		else if (!w && h->n >= nw)
			w = h;
		else if (!y && h->n >= ny)
			y = h;
	}
	/* The output must not share memory with the inputs; the inputs may share. */
	if (!x || !w || !y || x->st == y->st || w->st == y->st)
		return;
	float *res = malloc(ny * sizeof(float));
	if (!conv_model(&p, at(x, 0), at(w, 0), res)) {
		free(res);
		return;
	}
	struct sseq_arg a[] = {
		SSEQ_IN(x->h),
		SSEQ_IN(w->h),
		SSEQ_OUT(y->h),
		SSEQ_I32(p.n),
		SSEQ_I32(p.c),
		SSEQ_I32(p.h),
		SSEQ_I32(p.w),
		SSEQ_I32(p.o),
		SSEQ_I32(p.kh),
		SSEQ_I32(p.kw),
		SSEQ_I32(p.sh),
		SSEQ_I32(p.sw),
		SSEQ_I32(p.pt),
		SSEQ_I32(p.pb),
		SSEQ_I32(p.pl),
		SSEQ_I32(p.pr),
		SSEQ_I32(p.lh),
		SSEQ_I32(p.lw),
		SSEQ_I32(p.rh),
		SSEQ_I32(p.rw),
		SSEQ_I32(p.g),
	};
	execute(c, "conv2d", a, sizeof(a) / sizeof(*a));
	memcpy(at(y, 0), res, ny * sizeof(float));
	free(res);
	note_write(y->st,
		"op %" PRIu64 " conv2d x=h%" PRIu64 " w=h%" PRIu64 " -> h%" PRIu64 "[0+%" PRIu64
		"]",
		c->ops, x->h, w->h, y->h, ny);
}

/* A request on a handle this client freed must be refused, and only that request. */
static void op_use_freed(struct client *c)
{
	if (c->nfreed == 0)
		return;
	uint64_t stale = c->freed[rng_next(&c->rng) % c->nfreed];
	struct handle *dst = pick(c);
	uint64_t tag;
	c->ops++;
	int r = sseq_copy_d2d(c->s, stale, 0, dst->h, 0, sizeof(float), &tag);
	if (r == 0)
		r = sseq_wait(c->s, tag);
	if (r != -SSEQ_ERR_UNKNOWN_HANDLE) {
		client_error(c, r ? r : -EINVAL, "d2d from a freed handle was not refused");
		if (r == 0) /* it ran: the model cannot know what it copied */
			op_fill(c, dst, dst->n, 0);
	}
}

/* ---- scenarios: the cross-stream hazards the daemon must order ---- */

/* Copy in, then at once a kernel reading it on the compute stream. */
static void scenario_h2d_then_kernel(struct client *c)
{
	struct handle *x = pick(c);
	op_h2d(c, x);
	struct handle *y = pick_other(c, x, true);
	if (y)
		op_elementwise(c, rng_chance(&c->rng, 50) ? EW_SCALE : EW_AXPY, x, NULL, y);
}

/* A slice of a freshly copied buffer, read by a kernel: the slice must carry its base's
 * definition (I6). */
static void scenario_slice_of_h2d(struct client *c)
{
	struct handle *base = pick(c);
	op_h2d(c, base);
	struct handle *sl = op_slice(c, base);
	if (!sl)
		return;
	struct handle *y = pick_other(c, sl, true);
	if (y)
		op_reduce(c, sl, y);
}

/* A kernel's output copied device-to-device on another stream, then read back. */
static void scenario_d2d_of_kernel_output(struct client *c)
{
	struct handle *x = pick(c);
	struct handle *y = pick_other(c, x, true);
	if (!y)
		return;
	op_elementwise(c, EW_SCALE, x, NULL, y);
	struct handle *z = pick_other(c, y, true);
	if (!z)
		return;
	op_d2d(c, y, z);
	op_d2h(c, z);
}

/* Free a buffer right after submitting a kernel that reads it, then allocate and write
 * new buffers that may get its memory (I5). */
static void scenario_free_while_reading(struct client *c)
{
	struct handle *x = pick(c);
	struct handle *y = pick_other(c, x, true);
	if (!y || c->nh < 4)
		return;
	uint64_t yh = y->h;
	op_elementwise(c, EW_SCALE, x, NULL, y);
	op_free(c, x); /* x's slot now holds another handle */
	struct handle *n = op_alloc(c);
	if (n)
		op_h2d(c, n);
	for (unsigned i = 0; i < c->nh; i++)
		if (c->hs[i].h == yh) {
			op_d2h(c, &c->hs[i]);
			break;
		}
}

/* A kernel reads x, then x is overwritten by a copy on another stream (I4). */
static void scenario_write_after_read(struct client *c)
{
	struct handle *x = pick(c);
	struct handle *y = pick_other(c, x, true);
	if (!y)
		return;
	op_elementwise(c, EW_SCALE, x, NULL, y);
	op_h2d(c, x);
	op_d2h(c, y);
	op_d2h(c, x);
}

/* ---- the client loop ---- */

static void client_step(struct client *c)
{
	struct rng *r = &c->rng;
	if (c->nh < 4) {
		op_alloc(c);
		return;
	}
	unsigned roll = (unsigned)(rng_next(r) % 100);
	struct handle *x = pick(c), *y;
	if (roll < 6) {
		if (!op_alloc(c))
			op_free(c, x);
	} else if (roll < 11) {
		op_free(c, x);
	} else if (roll < 20) {
		op_h2d(c, x);
	} else if (roll < 30) {
		op_d2h(c, x);
	} else if (roll < 37) {
		if ((y = pick_other(c, x, false)))
			op_d2d(c, x, y);
	} else if (roll < 42) {
		op_slice(c, x);
	} else if (roll < 45) {
		op_fill(c, x, (uint64_t)rng_range(r, 1, (int64_t)x->n), small_value(r));
	} else if (roll < 48) {
		op_iota(c, x);
	} else if (roll < 60) {
		struct handle *b = pick_other(c, x, false);
		if (b && (y = pick_other(c, x, true)))
			op_elementwise(c, (enum ew_kind)(roll % 3), x, b, y);
	} else if (roll < 64) {
		if ((y = pick_other(c, x, true)))
			op_reduce(c, x, y);
	} else if (roll < 66) {
		op_conv2d(c);
	} else if (roll < 67) {
		op_spin(c);
	} else if (roll < 68) {
		op_use_freed(c);
	} else if (roll < 73) {
		scenario_h2d_then_kernel(c);
	} else if (roll < 78) {
		scenario_slice_of_h2d(c);
	} else if (roll < 83) {
		scenario_d2d_of_kernel_output(c);
	} else if (roll < 88) {
		scenario_free_while_reading(c);
	} else if (roll < 93) {
		scenario_write_after_read(c);
	} else if (roll < 94) {
		c->ops++;
		int e = sseq_await(c->s, x->h);
		if (e < 0)
			client_error(c, e, "await");
	} else if (roll < 95) {
		c->ops++;
		client_sync(c);
	} else {
		op_d2h(c, x);
	}
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	char name[32];
	snprintf(name, sizeof(name), "sseq-stress/%u", c->id);
	struct sseq_connect_options o = {
		.size = sizeof(o),
		.client_name = name,
		/* Small enough that staging space is reused and waited for. */
		.staging_size = 8u << 20,
	};
	if (opt.verbose)
		c->described = calloc(DESCRIBED, sizeof(*c->described));
	int r = sseq_connect(opt.socket, &o, &c->s);
	if (r < 0) {
		fprintf(stderr, "client %u: connect: %s\n", c->id, sseq_last_error_message(NULL));
		c->errors++;
		return NULL;
	}
	while (c->ops < c->budget && !c->dead) {
		client_step(c);
		if (c->ops % 64 == 0)
			drain_errors(c);
	}
	client_sync(c);
	checks_drain(c, 0);
	drain_errors(c);
	while (c->nh > 0)
		forget(c, &c->hs[c->nh - 1]);
	sseq_close(c->s);
	free(c->described);
	return NULL;
}

static int race_findings(uint64_t *out)
{
	struct sseq *s;
	struct sseq_connect_options o = {.size = sizeof(o), .client_name = "sseq-stress"};
	int r = sseq_connect(opt.socket, &o, &s);
	if (r < 0) {
		fprintf(stderr, "sseq-stress: connect: %s\n", sseq_last_error_message(NULL));
		return r;
	}
	Sseq__QueryResult *qr;
	r = sseq_query(s, SSEQ__QUERY_KIND__QUERY_KIND_STATS, 0, &qr);
	if (r == 0) {
		*out = qr->counters ? qr->counters->race_findings : 0;
		sseq_query_result_free(qr);
	} else {
		fprintf(stderr, "sseq-stress: STATS query: %s\n", sseq_last_error_message(s));
	}
	sseq_close(s);
	return r;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: sseq-stress [OPTIONS]\n"
		"Random workloads through libsseq, checked against a host model.\n\n"
		"  -s, --socket PATH   daemon socket (default $SSEQ_SOCKET or "
		"/run/sseq/gpu0.sock)\n"
		"  -n, --ops N         operations in total, split across clients (default 10000)\n"
		"  -c, --clients N     concurrent clients, each its own connection (default 4)\n"
		"  -S, --seed S        random seed; client i uses S + i (default 1)\n"
		"  -v, --verbose       print errors and the first mismatches\n"
		"  -h, --help\n\n"
		"The last line is 'ops=N wrong=N errors=N races=N'; the exit status is 1 when\n"
		"wrong or races is not 0.\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"socket", required_argument, NULL, 's'},
		{"ops", required_argument, NULL, 'n'},
		{"clients", required_argument, NULL, 'c'},
		{"seed", required_argument, NULL, 'S'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "s:n:c:S:vh", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			opt.socket = optarg;
			break;
		case 'n':
			opt.ops = strtoull(optarg, NULL, 0);
			break;
		case 'c':
			opt.clients = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'S':
			opt.seed = strtoull(optarg, NULL, 0);
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (opt.clients == 0 || opt.clients > 1024) {
		fprintf(stderr, "sseq-stress: --clients must be 1..1024\n");
		return 2;
	}

	uint64_t races_before = 0, races_after = 0;
	if (race_findings(&races_before) < 0)
		return 2;
	struct client *cl = calloc(opt.clients, sizeof(*cl));
	pthread_t *th = calloc(opt.clients, sizeof(*th));
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0; i < opt.clients; i++) {
		cl[i].id = i;
		cl[i].rng.s = opt.seed + i;
		cl[i].budget = opt.ops / opt.clients + (i < opt.ops % opt.clients);
		pthread_create(&th[i], NULL, client_main, &cl[i]);
	}
	uint64_t ops = 0, wrong = 0, errors = 0, checked = 0;
	for (unsigned i = 0; i < opt.clients; i++) {
		pthread_join(th[i], NULL);
		ops += cl[i].ops;
		wrong += cl[i].wrong;
		errors += cl[i].errors;
		checked += cl[i].checked;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (race_findings(&races_after) < 0)
		errors++;
	uint64_t races = races_after - races_before;
	printf("clients=%u seed=%" PRIu64 " checks=%" PRIu64 " seconds=%.2f ops/s=%.0f\n",
		opt.clients, opt.seed, checked, secs, secs > 0 ? (double)ops / secs : 0.0);
	printf("ops=%" PRIu64 " wrong=%" PRIu64 " errors=%" PRIu64 " races=%" PRIu64 "\n", ops,
		wrong, errors, races);
	free(cl);
	free(th);
	return wrong || races ? 1 : 0;
}
