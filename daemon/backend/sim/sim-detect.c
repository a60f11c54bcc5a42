/* The sim's race detector: at launch, each op's accesses are resolved to blocks and
 * checked against their shadow (the last writer, the readers since) for the points the op
 * must run after; when the op runs, any of them not yet executed is a finding. */
#include "sim-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "kernel add at 0:5" or "h2d at 1:2", for findings. */
static void sim_describe(char *buf, size_t size, enum seq_op_kind kind, const struct op_payload *p,
	struct seq_point at)
{
	if (kind == SEQ_OP_EXEC && p && p->kernel && p->kernel->name)
		snprintf(buf, size, "kernel %s at %" PRIu32 ":%" PRIu64, p->kernel->name, at.stream,
			at.seq);
	else
		snprintf(buf, size, "%s at %" PRIu32 ":%" PRIu64, seq_op_kind_name(kind), at.stream,
			at.seq);
}

void sim_report(struct sim *sim, struct seq_point at, uint64_t addr, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	atomic_fetch_add(&sim->findings, 1);
	if (sim->finding_op)
		sim->finding_op(sim->finding_arg, at, addr, what);
	else if (sim->finding)
		sim->finding(sim->finding_arg, what);
}

/* Resolve every view of e (its `at` set) to its block, reporting those already
 * released. Changes no shadow; -EFAULT when an access is in no block at all. */
int sim_detect_views(struct sim *sim, struct sim_entry *e, const struct seq_op *op)
{
	const struct op_payload *p = op->payload;
	char who[96];

	for (unsigned i = 0; i < op->naccess; i++) {
		struct sim_view *v = &e->view[i];

		v->addr = op->access[i].addr;
		v->size = op->access[i].size;
		v->block = sim_block_find(sim, v->addr, v->size);
		if (!v->block) {
			/* Not host memory the sim owns any more: running it could crash. */
			sim_describe(who, sizeof(who), op->kind, p, e->at);
			sim_report(sim, e->at, v->addr,
				"use-after-free: %s touches unallocated memory %#" PRIx64, who,
				v->addr);
			return -EFAULT;
		}
		v->gen = atomic_load(&v->block->gen);
		v->reported = !v->block->live;
		if (v->reported) {
			sim_describe(who, sizeof(who), op->kind, p, e->at);
			sim_report(sim, e->at, v->block->addr,
				"use-after-free: %s touches buffer %#" PRIx64
				" after it was released",
				who, v->block->addr);
		} else if (op->access[i].alloc) {
			/* The allocation serial: a view of a base this block was not
			 * allocated for names memory that changed hands (a slice outliving
			 * its base, say). A block whose owner was never told (no core in
			 * front, as in the backend's own tests) is bound at first use. */
			if (!v->block->base) {
				v->block->base = op->access[i].alloc;
			} else if (v->block->base != op->access[i].alloc) {
				sim_describe(who, sizeof(who), op->kind, p, e->at);
				sim_report(sim, e->at, v->block->addr,
					"use-after-free: %s touches buffer %#" PRIx64
					" as base #%" PRIu64 ", but it now holds base #%" PRIu64
					" (the memory changed hands)",
					who, v->block->addr, op->access[i].alloc, v->block->base);
				v->reported = true;
			}
		}
	}
	return 0;
}

/* Note that the op must run after p, keeping the latest point per stream (need[x] is
 * valid where bit x of *mask is set: no walk over every stream of the layout). */
static void sim_need_add(struct sim_need *need, uint64_t *mask, uint32_t self, struct seq_point p,
	enum sim_race race, uint64_t addr)
{
	const uint64_t bit = 1ull << p.stream;

	if (p.seq == 0 || p.stream == self || ((*mask & bit) && p.seq <= need[p.stream].p.seq))
		return;
	*mask |= bit;
	need[p.stream] = (struct sim_need){p, race, addr};
}

/* What the op must run after, by the shadow as launched so far (I2, I4). All found
 * before any update, so an op reading and writing one allocation needs itself not: call
 * it before sim_detect_note. Only the points not executed yet go into e->need. */
void sim_detect_needs(struct sim *sim, struct sim_entry *e, const struct seq_op *op)
{
	struct sim_need need[SEQ_MAX_STREAMS]; /* valid where `mask` says */
	uint64_t mask = 0;
	struct seq_point at = e->at;

	for (unsigned i = 0; i < op->naccess; i++) {
		const struct sim_block *b = e->view[i].block;

		if (op->access[i].mode & SEQ_READ)
			sim_need_add(need, &mask, at.stream, b->writer, SIM_RACE_RAW, b->addr);
		if (op->access[i].mode & SEQ_WRITE) {
			sim_need_add(need, &mask, at.stream, b->writer, SIM_RACE_WAW, b->addr);
			for (uint64_t m = b->reader_mask; m; m &= m - 1) {
				uint32_t x = (uint32_t)__builtin_ctzll(m);

				sim_need_add(need, &mask, at.stream,
					(struct seq_point){x, b->readers[x]}, SIM_RACE_WAR,
					b->addr);
			}
		}
	}
	e->nneed = 0;
	for (uint64_t m = mask; m; m &= m - 1) {
		uint32_t x = (uint32_t)__builtin_ctzll(m);

		if (!sim_executed(sim, need[x].p))
			e->need[e->nneed++] = need[x];
	}
}

/* The staging shadow, for a copy being launched (under sim.lock): what it needs of the
 * recent in-flight copies whose host range overlaps its own, when either of the two
 * writes it, goes into e->need like a device buffer's (checked when e runs); then its own
 * range is entered. */
int sim_detect_staging(struct sim *sim, struct sim_entry *e, const struct seq_op *op)
{
	const struct op_payload *p = op->payload;
	const bool write = op->kind == SEQ_OP_D2H;
	const size_t n = sim->nhost < SIM_HOST_USES ? sim->nhost : SIM_HOST_USES;
	uintptr_t lo, hi;

	if ((op->kind != SEQ_OP_H2D && op->kind != SEQ_OP_D2H) || !p->length)
		return 0;
	lo = (uintptr_t)p->host;
	hi = lo + p->length;
	for (size_t i = 0; i < n; i++) {
		const struct sim_host_use *u = &sim->host[i];
		struct seq_point at = u->at;
		unsigned k;

		if (u->hi <= lo || hi <= u->lo || (!write && !u->write) ||
			at.stream == e->at.stream || sim_executed(sim, at))
			continue;
		for (k = 0; k < e->nneed && e->need[k].p.stream != at.stream; k++)
			;
		if (k < e->nneed && e->need[k].p.seq >= at.seq)
			continue;
		e->need[k] = (struct sim_need){at,
			write ? (u->write ? SIM_RACE_WAW : SIM_RACE_WAR) : SIM_RACE_RAW,
			(uint64_t)u->lo};
		if (k == e->nneed)
			e->nneed++;
	}
	sim->host[sim->nhost++ % SIM_HOST_USES] = (struct sim_host_use){lo, hi, e->at, write};
	return 0;
}

/* Enter the launched op in its blocks' shadows: every view's reads first, then its
 * writes, so an op that reads and writes one block ends as its writer with no readers. */
void sim_detect_note(struct sim_entry *e, const struct seq_op *op)
{
	struct seq_point at = e->at;

	for (unsigned i = 0; i < op->naccess; i++) {
		struct sim_block *b = e->view[i].block;

		b->used[at.stream] = at.seq;
		if (op->access[i].mode & SEQ_READ && b->readers[at.stream] < at.seq) {
			b->readers[at.stream] = at.seq;
			b->reader_mask |= 1ull << at.stream;
		}
	}
	for (unsigned i = 0; i < op->naccess; i++) {
		struct sim_block *b = e->view[i].block;

		if (op->access[i].mode & SEQ_WRITE) {
			b->writer = at;
			for (uint64_t m = b->reader_mask; m; m &= m - 1)
				b->readers[__builtin_ctzll(m)] = 0;
			b->reader_mask = 0;
		}
	}
}

static void sim_race_report(struct sim *sim, const struct sim_entry *e, const struct sim_need *n)
{
	static const char *const act[] = {
		[SIM_RACE_RAW] = "read",
		[SIM_RACE_WAR] = "wrote",
		[SIM_RACE_WAW] = "wrote",
	};
	static const char *const other[] = {
		[SIM_RACE_RAW] = "producer",
		[SIM_RACE_WAR] = "reader",
		[SIM_RACE_WAW] = "previous writer",
	};
	char who[96];

	sim_describe(who, sizeof(who), e->kind, &e->payload, e->at);
	sim_report(sim, e->at, n->addr,
		"race: %s %s buffer %#" PRIx64 " before its %s %" PRIu32 ":%" PRIu64
		" completed (missing wait)",
		who, act[n->race], n->addr, other[n->race], n->p.stream, n->p.seq);
}

/* On the worker, just before the op runs: every point it needed that has not executed
 * was not ordered before it. */
void sim_detect_races(struct sim *sim, const struct sim_entry *e)
{
	for (unsigned i = 0; i < e->nneed; i++)
		if (!sim_executed(sim, e->need[i].p))
			sim_race_report(sim, e, &e->need[i]);
}

/* On the worker, after the op's work: a release at any time while it ran is a use after
 * free. */
void sim_detect_released(struct sim *sim, const struct sim_entry *e)
{
	for (unsigned i = 0; i < e->naccess; i++) {
		const struct sim_view *v = &e->view[i];

		if (!v->reported && atomic_load(&v->block->gen) != v->gen) {
			char who[96];

			sim_describe(who, sizeof(who), e->kind, &e->payload, e->at);
			sim_report(sim, e->at, v->block->addr,
				"use-after-free: %s touched buffer %#" PRIx64
				" after it was released",
				who, v->block->addr);
		}
	}
}
