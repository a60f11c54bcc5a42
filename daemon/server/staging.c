/* Staging arenas: a client's sealed memfd, checked, mapped and registered with the device;
 * bounded per session and in total, and kept mapped while a copy uses it. */
#include "session-internal.h"

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

#include "sseq-utf8.h"

/* What an arena holds against the limits, from its register until its mapping goes: an
 * arena unregistered (or whose session left) while a copy still uses it stays mapped and
 * pinned, so it stays counted, against its session and in total. */
static void staging_charge(struct session *s, uint64_t size, bool on)
{
	struct server_limit_counters *c = &s->srv->limit;

	if (on) {
		s->stagings++;
		s->staging_bytes += size;
		c->arenas++;
		c->staging_bytes += size;
	} else {
		s->stagings--;
		s->staging_bytes -= size;
		c->arenas--;
		c->staging_bytes -= size;
	}
}

void staging_unref(struct server *srv, struct staging *st)
{
	if (--st->refs > 0)
		return;
	/* The owner outlives its arenas: its handle table holds them, and each copy in
	 * flight holds both its session and its arena, letting go of the arena first. */
	staging_charge(st->owner, st->size, false);
	backend_staging_unregister(&srv->backend, st->addr, st->size);
	munmap(st->addr, st->size);
	close(st->fd);
	free(st);
}

/* Each arena is mapped into the daemon and pinned: a few hundred sparse ones would take
 * its address space, and the host's memory, from everyone. An arena counts while mapped,
 * registered or not (staging_charge). 0, or -ENOSPC with the limit it reached. */
static int staging_over_limit(struct session *s, uint64_t size)
{
	const struct server_limits *lim = &s->srv->opts.limits;
	struct server_limit_counters *c = &s->srv->limit;

	if (size > lim->client_staging_bytes - s->staging_bytes ||
		s->staging_bytes > lim->client_staging_bytes) {
		c->staging_refused++;
		return req_error(s, -ENOSPC,
			"staging arena of %" PRIu64 " bytes refused: this session maps %" PRIu64
			" of its %" PRIu64 " (--client-staging-limit)",
			size, s->staging_bytes, lim->client_staging_bytes);
	}
	if (s->stagings >= lim->client_arenas || c->arenas >= lim->arenas) {
		bool mine = s->stagings >= lim->client_arenas;
		c->staging_refused++;
		return req_error(s, -ENOSPC,
			"staging arena refused: %s %" PRIu64 " arenas, the most allowed (%s; "
			"an unregistered arena counts until the copies using it complete)",
			mine ? "this session holds" : "all sessions hold",
			mine ? s->stagings : c->arenas,
			mine ? "--client-arena-limit" : "--arena-limit");
	}
	if (size > lim->staging_bytes - c->staging_bytes || c->staging_bytes > lim->staging_bytes) {
		c->staging_refused++;
		return req_error(s, -ENOSPC,
			"staging arena of %" PRIu64 " bytes refused: all sessions map %" PRIu64
			" of the daemon's %" PRIu64 " (--staging-limit)",
			size, c->staging_bytes, lim->staging_bytes);
	}
	return 0;
}

int req_staging_register(struct session *s, const Sseq__Request *rq)
{
	const Sseq__StagingRegister *sr = rq->staging_register;
	struct staging *st = NULL;
	struct stat sb;
	int fd, seals, r;
	void *addr;

	if (s->nfds == 0)
		return req_error(
			s, -EINVAL, "StagingRegister without a memfd (send it with SCM_RIGHTS)");
	fd = s->fds[0];
	memmove(s->fds, s->fds + 1, --s->nfds * sizeof(int));
	if ((r = handle_over_limit(s))) {
		close(fd);
		return r;
	}
	if (sr->size == 0 || sr->size > SESSION_MAX_ALLOC) {
		close(fd);
		return req_error(s, -EINVAL, "staging size %" PRIu64 " out of range", sr->size);
	}
	if ((r = req_check_text(s, "StagingRegister.label", sr->label))) {
		close(fd);
		return r;
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		close(fd);
		return req_error(s, REQ_STAGING_UNSEALED,
			"staging memfd is not sealed with F_SEAL_SHRINK (seals %#x)",
			seals < 0 ? 0 : seals);
	}
	if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) {
		close(fd);
		return req_error(s, -EINVAL,
			"staging memfd is sealed with %s: D2H writes its results into the "
			"arena, so it must stay writable",
			seals & F_SEAL_WRITE ? "F_SEAL_WRITE" : "F_SEAL_FUTURE_WRITE");
	}
	if ((r = staging_over_limit(s, sr->size))) {
		close(fd);
		return r;
	}
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size < sr->size) {
		close(fd);
		return req_error(s, REQ_STAGING_UNSEALED,
			"staging memfd holds %lld bytes, less than the %" PRIu64 " registered",
			(long long)sb.st_size, sr->size);
	}
	addr = mmap(NULL, sr->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	/* Whatever mmap says, the daemon's address space is what ran out. */
	if (addr == MAP_FAILED) {
		close(fd);
		return req_error(s, -ENOMEM, "cannot map staging arena: %s", strerror(errno));
	}
	st = calloc(1, sizeof(*st));
	if (!st) {
		munmap(addr, sr->size);
		close(fd);
		return req_error(s, -ENOMEM, "out of memory");
	}
	*st = (struct staging){.owner = s, .fd = fd, .addr = addr, .size = sr->size, .refs = 1};
	utf8_copy(st->label, sizeof(st->label), sr->label ? sr->label : "");
	r = backend_staging_register(&s->srv->backend, addr, sr->size);
	if (r < 0 || session_handle_new(s, HANDLE_STAGING, st, &st->handle) < 0) {
		if (r >= 0) {
			backend_staging_unregister(&s->srv->backend, addr, sr->size);
			r = -ENOMEM; /* the handle table's */
		}
		munmap(addr, sr->size);
		close(fd);
		free(st);
		/* Pinning refused (hipHostRegister's -EEXIST is no double definition): the
		 * host memory the daemon may pin ran out, whatever the backend's errno. */
		return req_error(s, -ENOMEM, "cannot register staging arena: %s", strerror(-r));
	}
	staging_charge(s, sr->size, true);
	session_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", st->handle, NULL, NULL);
	return 0;
}

int req_staging_unregister(struct session *s, const Sseq__Request *rq)
{
	uint64_t h = rq->staging_unregister->staging;
	struct staging *st = session_lookup(s, h, HANDLE_STAGING);

	if (!st)
		return session_unknown_handle(s, h, "staging");
	session_handle_drop(s, h);
	/* Copies in flight keep it mapped, and counted, until the last completes. */
	staging_unref(s->srv, st);
	session_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	return 0;
}

int req_staging_range(
	struct session *s, uint64_t handle, uint64_t off, uint64_t len, struct staging **out)
{
	struct staging *st = session_lookup(s, handle, HANDLE_STAGING);

	if (!st)
		return session_unknown_handle(s, handle, "staging");
	if (off > st->size || len > st->size - off)
		return req_error(s, -ERANGE,
			"staging range [%" PRIu64 ", +%" PRIu64 ") outside arena of %" PRIu64
			" bytes",
			off, len, st->size);
	*out = st;
	return 0;
}
