/* A device model for fuzzing the server: each stream's commands (launch, wait, record)
 * are queued and executed one at a time in an order the fuzzer picks, and anything that
 * would be a bug on a GPU aborts: an access not ordered after a conflicting one, memory
 * or a staging arena released while in use, a wait on an event never recorded, ... */
#ifndef SSEQ_CHECK_BACKEND_H
#define SSEQ_CHECK_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* The fuzzer's choices: its bytes in order, then 0s. */
struct fuzz_sched {
	const uint8_t *p;
	size_t n, i;
};

uint8_t fuzz_sched_next(struct fuzz_sched *s);

struct check_backend;

/* A model of the core's streams (its layout). Completions go to cq only when
 * check_backend_step delivers them. With faults on, a generator seeded with
 * fault_seed refuses launches, records, waits, allocations, staging registrations and
 * module loads now and then, and fails operations on the device. */
int check_backend_create(struct backend *out, const struct seq_layout *layout,
	struct fuzz_sched *sched, bool faults, uint64_t fault_seed, struct cq *cq);
struct check_backend *check_backend_get(const struct backend *be);
void check_backend_set_faults(struct check_backend *cb, bool on);
/* Execute one runnable stream head or deliver one pending completion, chosen by `choice`
 * among those possible. Returns false when nothing can happen. */
bool check_backend_step(struct check_backend *cb, uint8_t choice);
/* The server's loop ran a turn: the completions delivered before it have been seen (a
 * launch in that turn may have come first). */
void check_backend_loop_ran(struct check_backend *cb);
/* The device is lost (a sticky fault): nothing queued will ever run or complete,
 * releasing what it used is no longer a race, and what is not released went with it.
 * What the server does on the new device (fuzz-resume) goes to a fresh model. */
void check_backend_lose(struct check_backend *cb);
/* Commands received so far: lets a caller tell whether the server issued more. */
uint64_t check_backend_commands(const struct check_backend *cb);
/* Once nothing can happen any more: abort unless every stream ran dry (no wait stuck on a
 * record that never runs), and every allocation, staging arena and module was given
 * back. */
void check_backend_settled(struct check_backend *cb);

#endif
