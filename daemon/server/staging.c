/* Staging arenas: a client's sealed memfd, checked, mapped and registered with the device;
 * bounded per session, per user and in total, and kept mapped while a copy uses it. */
#include "staging.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "account.h"
#include "handles.h"
#include "out.h"
#include "outcome.h"
#include "session-limits.h"
#include "session.h"
#include "sseq-utf8.h"

/* What an arena holds against the limits, from its register until its mapping goes: an
 * arena unregistered (or whose session left) while a copy still uses it stays mapped and
 * pinned, so it stays counted, against its session, its uid and in total. */
static struct account_rec staging_want(uint64_t size)
{
	return (struct account_rec){.amount = {[ACCOUNT_STAGING] = size,
					    [ACCOUNT_ARENAS] = 1,
					    [ACCOUNT_USER_ARENAS] = 1,
					    [ACCOUNT_ALL_ARENAS] = 1,
					    [ACCOUNT_ALL_STAGING] = size}};
}

int staging_charge_adopted(struct session *s, struct staging *st)
{
	const struct account_rec want = staging_want(st->size);

	if (account_reserve(s) < 0)
		return -ENOMEM;
	account_take(s, &want, &st->held);
	return 0;
}

void staging_unref(struct server *srv, struct staging *st)
{
	if (--st->refs > 0)
		return;
	/* The owner outlives its arenas: its handle table holds them, and each copy in
	 * flight holds both its session and its arena, letting go of the arena first. */
	account_release(st->owner, &st->held);
	backend_staging_unregister(&srv->backend, st->addr, st->size);
	munmap(st->addr, st->size);
	close(st->fd);
	free(st);
}

int staging_req_register(struct session *s, const Sseq__Request *rq)
{
	const Sseq__StagingRegister *sr = rq->staging_register;
	struct staging *st = NULL;
	struct account_rec want;
	struct stat sb;
	int fd, seals, r;
	void *addr;

	if ((fd = session_take_fd(s)) < 0)
		return outcome_error(
			s, -EINVAL, "StagingRegister without a memfd (send it with SCM_RIGHTS)");
	if ((r = account_check(s, ACCOUNT_ONE_HANDLE, "staging arena"))) {
		close(fd);
		return r;
	}
	if (sr->size == 0 || sr->size > SESSION_MAX_ALLOC) {
		close(fd);
		return outcome_error(s, -EINVAL, "staging size %" PRIu64 " out of range", sr->size);
	}
	if ((r = outcome_check_text(s, "StagingRegister.label", sr->label))) {
		close(fd);
		return r;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		close(fd);
		return outcome_error(s, REQ_STAGING_UNSEALED,
			"staging memfd is not sealed with F_SEAL_SHRINK (seals %#x)",
			seals < 0 ? 0 : seals);
	}
	if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) {
		close(fd);
		return outcome_error(s, -EINVAL,
			"staging memfd is sealed with %s: D2H writes its results into the "
			"arena, so it must stay writable",
			seals & F_SEAL_WRITE ? "F_SEAL_WRITE" : "F_SEAL_FUTURE_WRITE");
	}
	want = staging_want(sr->size);
	if ((r = account_check(s, &want, "staging arena of %" PRIu64 " bytes", sr->size))) {
		close(fd);
		return r;
	}
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size < sr->size) {
		close(fd);
		return outcome_error(s, REQ_STAGING_UNSEALED,
			"staging memfd holds %lld bytes, less than the %" PRIu64 " registered",
			(long long)sb.st_size, sr->size);
	}
	addr = mmap(NULL, sr->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	/* Whatever mmap says, the daemon's address space is what ran out. */
	if (addr == MAP_FAILED) {
		close(fd);
		return outcome_error(s, -ENOMEM, "cannot map staging arena: %s", strerror(errno));
	}
	st = calloc(1, sizeof(*st));
	if (!st || account_reserve(s) < 0) {
		free(st);
		munmap(addr, sr->size);
		close(fd);
		return outcome_error(s, -ENOMEM, "out of memory");
	}
	*st = (struct staging){.owner = s, .fd = fd, .addr = addr, .size = sr->size, .refs = 1};
	utf8_copy(st->label, sizeof(st->label), sr->label ? sr->label : "");
	r = backend_staging_register(&session_server(s)->backend, addr, sr->size);
	if (r < 0 || handles_new(session_handles(s), HANDLE_STAGING, st, &st->handle) < 0) {
		if (r >= 0) {
			backend_staging_unregister(&session_server(s)->backend, addr, sr->size);
			r = -ENOMEM; /* the handle table's */
		}
		munmap(addr, sr->size);
		close(fd);
		free(st);
		account_unreserve(s);
		/* Pinning refused (hipHostRegister's -EEXIST is no double definition): the
		 * host memory the daemon may pin ran out, whatever the backend's errno. */
		return outcome_error(s, -ENOMEM, "cannot register staging arena: %s", strerror(-r));
	}
	account_take(s, &want, &st->held);
	if (sr->wait_pinned && !backend_staging_ready(&session_server(s)->backend, addr)) {
		st->waiting = true;
		st->wait_tag = rq->tag;
		st->wait_next = session_server(s)->pin_waits;
		session_server(s)->pin_waits = st;
		return 0;
	}
	out_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", st->handle, NULL, NULL);
	return 0;
}

/* st leaves the pin_waits list (answered, or its session gone). */
static void staging_wait_unlink(struct server *srv, struct staging *st)
{
	for (struct staging **p = &srv->pin_waits; *p; p = &(*p)->wait_next)
		if (*p == st) {
			*p = st->wait_next;
			break;
		}
	st->waiting = false;
	st->wait_next = NULL;
}

/* The waiting StagingRegister of st answered, and st off the list. */
static void staging_wait_answer(struct server *srv, struct staging *st)
{
	staging_wait_unlink(srv, st);
	out_reply_full(
		st->owner, st->wait_tag, SSEQ__STATUS__STATUS_OK, "", st->handle, NULL, NULL);
}

void staging_waits_answer(struct server *srv, bool all)
{
	for (struct staging *st = srv->pin_waits, *next; st; st = next) {
		next = st->wait_next;
		if (!all && !backend_staging_ready(&srv->backend, st->addr))
			continue;
		staging_wait_answer(srv, st);
	}
}

int staging_req_unregister(struct session *s, const Sseq__Request *rq)
{
	uint64_t h = rq->staging_unregister->staging;
	struct staging *st = handles_lookup(session_handles(s), h, HANDLE_STAGING);

	if (!st)
		return outcome_unknown_handle(s, h, "staging");
	/* Its registration still waits for the pin (the client guessed the handle): it is
	 * answered first, in order. */
	if (st->waiting)
		staging_wait_answer(session_server(s), st);
	handles_drop(session_handles(s), h);
	/* Copies in flight keep it mapped, and counted, until the last completes. */
	staging_unref(session_server(s), st);
	out_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	return 0;
}

int staging_range(
	struct session *s, uint64_t handle, uint64_t off, uint64_t len, struct staging **out)
{
	struct staging *st = handles_lookup(session_handles(s), handle, HANDLE_STAGING);

	if (!st)
		return outcome_unknown_handle(s, handle, "staging");
	if (off > st->size || len > st->size - off)
		return outcome_error(s, -ERANGE,
			"staging range [%" PRIu64 ", +%" PRIu64 ") outside arena of %" PRIu64
			" bytes",
			off, len, st->size);
	*out = st;
	return 0;
}

/* A session's staging handle as it goes (second pass): copies in flight keep the arena
 * mapped, and counted against the daemon's limits, until they complete. */
static bool staging_release_handle(struct session *s, void *obj, unsigned pass)
{
	struct staging *st = obj;

	if (pass == 0)
		return false;
	if (st->waiting)
		staging_wait_unlink(session_server(s), st);
	staging_unref(session_server(s), obj);
	return true;
}

void staging_register_kind(void)
{
	handles_on_release(HANDLE_STAGING, staging_release_handle);
}
