/* sseq-stress's scenarios: short sequences of operations aimed at one cross-stream
 * hazard each, mixed into the random workload by client_step. */
#include "stress.h"

/* ---- scenarios: the cross-stream hazards the daemon must order ---- */

/* Copy in, then at once a kernel reading it on the compute stream. */
void scenario_h2d_then_kernel(struct client *c)
{
	struct handle *x = pick(c);
	op_h2d(c, x);
	struct handle *y = pick_other(c, x, true);
	if (y)
		op_elementwise(c, rng_chance(&c->rng, 50) ? EW_SCALE : EW_AXPY, x, NULL, y);
}

/* A slice of a freshly copied buffer, read by a kernel: the slice must carry its base's
 * definition (I6). */
void scenario_slice_of_h2d(struct client *c)
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
void scenario_d2d_of_kernel_output(struct client *c)
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
void scenario_free_while_reading(struct client *c)
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

/* An upload, then more unrelated kernels on the lane than a legacy readiness window
 * holds (16 to 192 of them, drawn around the windows one injects), then a kernel reading
 * the old upload: with legacy-sync-window=N the daemon takes the upload as done N
 * compute points after it and skips the wait, which a slow upload exposes. */
void scenario_old_upload_after_many_kernels(struct client *c)
{
	struct handle *x = pick(c);
	struct handle *busy = pick_other(c, x, true);
	struct handle *y;
	int64_t kernels = rng_range(&c->rng, 16, 192);

	if (!busy)
		return;
	op_h2d(c, x);
	for (int64_t i = 0; i < kernels && c->ops < opt.ops; i++)
		op_fill(c, busy, (uint64_t)rng_range(&c->rng, 1, (int64_t)busy->n), (float)(i % 7));
	y = pick_other(c, x, true);
	if (y && y != busy)
		op_elementwise(c, EW_SCALE, x, NULL, y);
}

/* A kernel reads x, then x is overwritten by a copy on another stream (I4). */
void scenario_write_after_read(struct client *c)
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
