/* sseq-stress's operations: each issues one request (or a few) through libsseq and applies
 * the same change to the host model, so that a later D2H check knows what to expect.
 * Also the model's handles: picking them, slicing, forgetting freed ones. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress.h"

/* ---- the model's handles ---- */

struct handle *pick(struct client *c)
{
	return &c->hs[rng_next(&c->rng) % c->nh];
}

/* A handle other than `not` (and not over the same storage when `other_storage`). */
struct handle *pick_other(struct client *c, const struct handle * not, bool other_storage)
{
	for (int tries = 0; tries < 8; tries++) {
		struct handle *h = pick(c);
		if (h != not &&(!other_storage || h->st != not ->st))
			return h;
	}
	return NULL;
}

/* Do [a, a + n) of handle x and [b, b + n) of handle y share model memory? */
bool overlap(const struct handle *x, uint64_t a, const struct handle *y, uint64_t b, uint64_t n)
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

void forget(struct client *c, struct handle *h)
{
	if (c->nfreed < MAX_FREED)
		c->freed[c->nfreed++] = h->h;
	else
		c->freed[rng_next(&c->rng) % MAX_FREED] = h->h;
	storage_unref(c, h->st);
	*h = c->hs[--c->nh];
}

/* ---- operations: each issues requests and applies them to the model ---- */

struct handle *op_alloc(struct client *c)
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

void op_free(struct client *c, struct handle *h)
{
	c->ops++;
	int r = sseq_free(c->s, h->h);
	if (r < 0)
		client_error(c, r, "free");
	forget(c, h);
}

struct handle *op_slice(struct client *c, struct handle *base)
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
void pick_range(struct client *c, uint64_t len, uint64_t *off, uint64_t *n)
{
	if (rng_chance(&c->rng, 50)) {
		*off = 0;
		*n = len;
		return;
	}
	*off = (uint64_t)rng_range(&c->rng, 0, (int64_t)len - 1);
	*n = (uint64_t)rng_range(&c->rng, 1, (int64_t)(len - *off));
}

void op_h2d(struct client *c, struct handle *d)
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

void op_d2d(struct client *c, struct handle *src, struct handle *dst)
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

void execute(struct client *c, const char *kernel, const struct sseq_arg *args, size_t nargs)
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

void op_fill(struct client *c, struct handle *y, uint64_t n, float v)
{
	struct sseq_arg a[] = {SSEQ_OUT(y->h), SSEQ_F32(v), SSEQ_U64(n)};
	execute(c, "fill", a, 3);
	for (uint64_t i = 0; i < n; i++)
		*at(y, i) = v;
	note_write(y->st, "op %" PRIu64 " fill h%" PRIu64 "[0+%" PRIu64 "] = %g", c->ops, y->h, n,
		(double)v);
}

void op_iota(struct client *c, struct handle *y)
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
void op_elementwise(
	struct client *c, enum ew_kind kind, struct handle *x, struct handle *b, struct handle *y)
{
	uint64_t n = x->n < y->n ? x->n : y->n;
	if (kind == EW_ADD && !b)
		return; /* add has a second input */
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

void op_reduce(struct client *c, struct handle *x, struct handle *y)
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

void op_spin(struct client *c)
{
	struct sseq_arg a[] = {SSEQ_U64(rng_range(&c->rng, 20, 300))};
	execute(c, "spin", a, 1);
}

/* A request on a handle this client freed must be refused, and only that request. */
void op_use_freed(struct client *c)
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
