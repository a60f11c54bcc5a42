/* Staging arenas: a client's sealed memfds, mapped here and registered with the device,
 * counted against the per-session, per-uid and daemon-wide arena limits. */
#ifndef SSEQ_STAGING_H
#define SSEQ_STAGING_H

#include <stdbool.h>
#include <stdint.h>

#include "sseq.pb-c.h"

struct server;
struct session;
struct staging;

void staging_unref(struct server *srv, struct staging *st);
/* An arena of `size` bytes mapped for s without a StagingRegister (a restart in place
 * adopting it), counted as one registered: 0, or -ENOMEM. */
int staging_charge_adopted(struct session *s, uint64_t size);
/* StagingRegister and StagingUnregister. */
int staging_req_register(struct session *s, const Sseq__Request *rq);
int staging_req_unregister(struct session *s, const Sseq__Request *rq);
/* The arena `handle` names, with [off, off + len) inside it: 0 with *out, or the refusal. */
int staging_range(
	struct session *s, uint64_t handle, uint64_t off, uint64_t len, struct staging **out);
/* Answer the StagingRegisters that wait for their arena's pin (wait_pinned) whose arena
 * the backend now says is ready, or every one of them (`all`: a restart in place, which
 * pins again in the new process). On each wake of the loop; the backend kicks it when a
 * pin is done. */
void staging_waits_answer(struct server *srv, bool all);
/* Register the release of a staging handle (handles_on_release). */
void staging_register_kind(void);

#endif
