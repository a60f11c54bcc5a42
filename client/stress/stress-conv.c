/* sseq-stress's conv2d: a random lax.conv_general_dilated (strides, padding, both
 * dilations, groups) over whatever the client's buffers hold, checked against a direct
 * host loop that refuses any sum that could leave float's exact range. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress.h"

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

/* A random convolution with at least one output element. */
static struct conv conv_draw(struct rng *r)
{
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
	return p;
}

/* Inputs and output from the client's buffers when they are big enough (they carry
 * whatever earlier ops left there), else skip. */
static bool conv_buffers(struct client *c, uint64_t nx, uint64_t nw, uint64_t ny,
	struct handle **px, struct handle **pw, struct handle **py)
{
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
		return false;
	*px = x;
	*pw = w;
	*py = y;
	return true;
}

static void conv_execute(struct client *c, const struct conv *p, const struct handle *x,
	const struct handle *w, const struct handle *y)
{
	struct sseq_arg a[] = {
		SSEQ_IN(x->h),
		SSEQ_IN(w->h),
		SSEQ_OUT(y->h),
		SSEQ_I32(p->n),
		SSEQ_I32(p->c),
		SSEQ_I32(p->h),
		SSEQ_I32(p->w),
		SSEQ_I32(p->o),
		SSEQ_I32(p->kh),
		SSEQ_I32(p->kw),
		SSEQ_I32(p->sh),
		SSEQ_I32(p->sw),
		SSEQ_I32(p->pt),
		SSEQ_I32(p->pb),
		SSEQ_I32(p->pl),
		SSEQ_I32(p->pr),
		SSEQ_I32(p->lh),
		SSEQ_I32(p->lw),
		SSEQ_I32(p->rh),
		SSEQ_I32(p->rw),
		SSEQ_I32(p->g),
	};
	execute(c, "conv2d", a, sizeof(a) / sizeof(*a));
}

void op_conv2d(struct client *c)
{
	struct conv p = conv_draw(&c->rng);
	uint64_t nx = (uint64_t)(p.n * p.c * p.h * p.w);
	uint64_t nw = (uint64_t)(p.o * (p.c / p.g) * p.kh * p.kw);
	uint64_t ny = (uint64_t)(p.n * p.o * p.oh * p.ow);
	struct handle *x, *w, *y;

	if (!conv_buffers(c, nx, nw, ny, &x, &w, &y))
		return;
	float *res = malloc(ny * sizeof(float));
	if (!conv_model(&p, at(x, 0), at(w, 0), res)) {
		free(res);
		return;
	}
	conv_execute(c, &p, x, w, y);
	memcpy(at(y, 0), res, ny * sizeof(float));
	free(res);
	note_write(y->st,
		"op %" PRIu64 " conv2d x=h%" PRIu64 " w=h%" PRIu64 " -> h%" PRIu64 "[0+%" PRIu64
		"]",
		c->ops, x->h, w->h, y->h, ny);
}
