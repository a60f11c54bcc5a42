/* Staging arenas: a client's sealed memfds, mapped here and registered with the device,
 * counted against the per-session, per-uid and daemon-wide arena limits. */
#ifndef SSEQ_STAGING_H
#define SSEQ_STAGING_H

#include <stdbool.h>
#include <stdint.h>

#include "account.h"
#include "sseq.pb-c.h"

struct server;
struct session;

/* A staging arena: the client's sealed memfd, mapped here and registered with the device. */
struct staging {
	struct session *owner;
	int fd; /* the client's memfd, kept: a restart in place maps it again */
	void *addr;
	uint64_t size;
	uint64_t handle;
	unsigned refs; /* the handle's + one per copy in flight */
	struct account_rec held; /* against the limits, until its mapping goes */
	char label[48];
	/* A StagingRegister with wait_pinned, unanswered until the backend says the arena
	 * is ready: its tag, and the next such arena (the server's pin_waits list). */
	uint64_t wait_tag;
	struct staging *wait_next;
	bool waiting;
};

void staging_unref(struct server *srv, struct staging *st);
/* st (its size set), mapped for s without a StagingRegister (a restart in place adopting
 * it), counted as one registered: 0, or -ENOMEM. */
int staging_charge_adopted(struct session *s, struct staging *st);
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
