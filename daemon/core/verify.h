/* An independent schedule checker (sseqd --verify): a layer between the core and a
 * backend that sees only the command stream (alloc, release, record, wait, launch with
 * each op's accesses by address and range, retire) and the completions the backend
 * reports, and decides from its own records, not the sequencer's, whether the schedule
 * is safe: every access ordered after the last write of what it touches, every write
 * after the reads since, no op touching memory after it was released, no memory released
 * while an op may still touch it. Ordering is happens-before by vector clocks: a stream's
 * ops are ordered among themselves, a wait orders its stream after the event's clock, and
 * a reported completion orders everything after the clock of the event that completed.
 * A violation is reported whatever the timing: the op, the memory, the missing edge. */
#ifndef SSEQ_VERIFY_H
#define SSEQ_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include "sequencer.h"

struct verify;

/* Called once per violation with a one-line description (the loop thread's). */
typedef void (*verify_report_fn)(void *arg, const char *what);

/* A checker for the layout's streams in front of `inner` (with its ctx). */
int verify_create(struct verify **out, const struct seq_layout *layout,
	const struct seq_device *inner, void *inner_ctx, verify_report_fn report, void *arg);
/* The device table to give the core (seq_create) with the checker as its ctx. */
const struct seq_device *verify_device(void);
/* The backend reported the event recorded at `through` complete (before the core hears
 * of it, or with it). */
void verify_complete(struct verify *v, struct seq_point through);
/* The device context was reset: nothing is in flight, nothing is allocated any more. */
void verify_reset(struct verify *v);
uint64_t verify_violations(const struct verify *v);
/* What a report being made is about, for a reporter that names its owners (the
 * checker knows addresses and points only): the op being launched and its access at
 * fault, NULL outside a launch's check. Valid only within the report callback. */
struct verify_subject {
	struct seq_point at;
	const struct seq_op *op;
	const struct seq_access *access;
};
void verify_subject(const struct verify *v, struct verify_subject *out);
/* Allocations it keeps records of: the live ones and the last released ones (at most
 * 4096 of those). */
size_t verify_tracked(const struct verify *v);
void verify_destroy(struct verify *v);

#endif
