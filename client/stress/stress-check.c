/* sseq-stress's checks: a D2H copy of a random range with the model's expected values
 * beside it, waited for later (at most MAX_CHECKS in flight) and compared element by
 * element; with --verbose the first mismatches print the storage's last writes. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stress.h"

static unsigned printed; /* mismatches printed so far, all clients */

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

void checks_drain(struct client *c, unsigned keep)
{
	unsigned done = c->nchecks > keep ? c->nchecks - keep : 0;
	for (unsigned i = 0; i < done; i++)
		check_finish(c, &c->checks[i]);
	memmove(&c->checks[0], &c->checks[done], (c->nchecks - done) * sizeof(*c->checks));
	c->nchecks -= done;
}

void op_d2h(struct client *c, struct handle *src)
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
