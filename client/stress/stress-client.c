/* sseq-stress's client thread: its own connection, a random mix of operations and
 * scenarios until its budget is spent, and the accounting of every error it sees
 * (described by tag with --verbose, so a late error names its request). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "stress.h"

pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- reporting ---- */

void client_error(struct client *c, int code, const char *what)
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
uint64_t *tag_slot(uint64_t *tag)
{
	return opt.verbose ? tag : NULL;
}

void describe(struct client *c, uint64_t tag, const char *fmt, ...)
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
void count_reported(struct client *c, int code, uint64_t tag, const char *how)
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
void drain_errors(struct client *c)
{
	uint64_t tag;
	int code;
	while ((code = sseq_next_error(c->s, &tag)) != 0)
		count_reported(c, code, tag, "pipelined request");
}

void client_sync(struct client *c)
{
	int r;
	/* Each call reports one queued error; a Sync that itself keeps failing is bounded. */
	for (int i = 0; i < 100000 && (r = sseq_sync(c->s)) < 0 && !c->dead; i++)
		count_reported(c, r, sseq_last_error_tag(c->s), "sync");
}

void note_write(struct storage *st, const char *fmt, ...)
{
	if (!opt.verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(st->history[st->nhistory++ % HISTORY], sizeof(st->history[0]), fmt, ap);
	va_end(ap);
}

/* ---- the client loop ---- */

static void client_step(struct client *c)
{
	struct rng *r = &c->rng;
	/* Lanes only place work: the daemon orders it across them all the same. */
	if (opt.lanes > 1 &&
		sseq_set_lane(c->s, (unsigned)(rng_next(&c->lane_rng) % opt.lanes)) < 0)
		client_error(c, -EINVAL, "set_lane");
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
	} else if (roll < 92) {
		scenario_write_after_read(c);
	} else if (roll < 93) {
		scenario_old_upload_after_many_kernels(c);
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

void *client_main(void *arg)
{
	struct client *c = arg;
	char name[32];
	snprintf(name, sizeof(name), "sseq-stress/%u", c->id);
	struct sseq_connect_options o = {
		.size = sizeof(o),
		.client_name = name,
		/* Small enough that staging space is reused and waited for. */
		.staging_size = 8u << 20,
		.lanes = opt.lanes,
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
		atomic_store_explicit(&c->progress, c->ops, memory_order_relaxed);
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
