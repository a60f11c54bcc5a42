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

#include "handles.h"
#include "out.h"
#include "outcome.h"
#include "session-limits.h"
#include "session.h"
#include "sseq-utf8.h"

/* s's uid's entry in the per-uid arena counts, or NULL if it has none. */
static struct server_uid_arenas *staging_uid(struct server *srv, uint32_t uid)
{
	struct server_limit_counters *c = &srv->limit;

	for (unsigned i = 0; i < c->n_uid_arenas; i++)
		if (c->uid_arenas[i].uid == uid)
			return &c->uid_arenas[i];
	return NULL;
}

/* Room for one more uid's entry, so that the charge that follows cannot fail: 0 or
 * -ENOMEM. Entries are few: one per user with an arena mapped. */
static int staging_uid_reserve(struct server *srv)
{
	struct server_limit_counters *c = &srv->limit;
	struct server_uid_arenas *grown;
	unsigned cap;

	if (c->n_uid_arenas < c->cap_uid_arenas)
		return 0;
	cap = c->cap_uid_arenas ? 2 * c->cap_uid_arenas : 8;
	grown = realloc(c->uid_arenas, cap * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	c->uid_arenas = grown;
	c->cap_uid_arenas = cap;
	return 0;
}

/* The table goes with its last entry, so that a server with no arena mapped holds none. */
static void staging_uid_trim(struct server *srv)
{
	struct server_limit_counters *c = &srv->limit;

	if (c->n_uid_arenas == 0) {
		free(c->uid_arenas);
		c->uid_arenas = NULL;
		c->cap_uid_arenas = 0;
	}
}

/* What an arena holds against the limits, from its register until its mapping goes: an
 * arena unregistered (or whose session left) while a copy still uses it stays mapped and
 * pinned, so it stays counted, against its session, its uid and in total. Taking a charge
 * needs staging_uid_reserve first. */
static void staging_charge(struct session *s, uint64_t size, bool on)
{
	struct server_limit_counters *c = &session_server(s)->limit;
	struct server_uid_arenas *u = staging_uid(session_server(s), session_ident(s)->uid);

	if (on) {
		if (!u) {
			u = &c->uid_arenas[c->n_uid_arenas++];
			*u = (struct server_uid_arenas){.uid = session_ident(s)->uid};
		}
		u->arenas++;
		session_counts(s)->stagings++;
		session_counts(s)->staging_bytes += size;
		c->arenas++;
		c->staging_bytes += size;
	} else {
		/* The last entry takes the place of one that goes. */
		if (--u->arenas == 0) {
			*u = c->uid_arenas[--c->n_uid_arenas];
			staging_uid_trim(session_server(s));
		}
		session_counts(s)->stagings--;
		session_counts(s)->staging_bytes -= size;
		c->arenas--;
		c->staging_bytes -= size;
	}
}

int staging_charge_adopted(struct session *s, uint64_t size)
{
	if (staging_uid_reserve(session_server(s)) < 0)
		return -ENOMEM;
	staging_charge(s, size, true);
	return 0;
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

/* One user's share of --arena-limit: the share of the connections it may hold
 * (--max-clients-per-uid of --max-clients), and at least what one of its sessions may map
 * (--client-arena-limit), so that one user with many sessions, or sessions gone whose
 * arenas copies still use, leaves the others theirs. */
static uint64_t staging_uid_share(const struct server_limits *lim)
{
	uint64_t share = lim->max_clients
		? (uint64_t)lim->arenas * lim->max_clients_per_uid / lim->max_clients
		: lim->arenas;

	if (share < lim->client_arenas)
		share = lim->client_arenas;
	return share < lim->arenas ? share : lim->arenas;
}

/* Each arena is mapped into the daemon and pinned: a few hundred sparse ones would take
 * its address space, and the host's memory, from everyone. An arena counts while mapped,
 * registered or not (staging_charge). 0, or -ENOSPC with the limit it reached. */
static int staging_over_limit(struct session *s, uint64_t size)
{
	const struct server_limits *lim = &session_server(s)->opts.limits;
	struct server_limit_counters *c = &session_server(s)->limit;
	const struct server_uid_arenas *u = staging_uid(session_server(s), session_ident(s)->uid);
	uint64_t mine = u ? u->arenas : 0, share = staging_uid_share(lim);

	if (size > lim->client_staging_bytes - session_counts(s)->staging_bytes ||
		session_counts(s)->staging_bytes > lim->client_staging_bytes) {
		c->staging_refused++;
		return outcome_error(s, -ENOSPC,
			"staging arena of %" PRIu64 " bytes refused: this session maps %" PRIu64
			" of its %" PRIu64 " (--client-staging-limit)",
			size, session_counts(s)->staging_bytes, lim->client_staging_bytes);
	}
	if (session_counts(s)->stagings >= lim->client_arenas) {
		c->staging_refused++;
		return outcome_error(s, -ENOSPC,
			"staging arena refused: this session holds %" PRIu64 " arenas, the most "
			"allowed (--client-arena-limit; an unregistered arena counts until the "
			"copies using it complete)",
			session_counts(s)->stagings);
	}
	if (mine >= share) {
		c->staging_refused++;
		return outcome_error(s, -ENOSPC,
			"staging arena refused: uid %u holds %" PRIu64 " arenas, the most one "
			"user may (--arena-limit x --max-clients-per-uid / --max-clients; an "
			"unregistered arena counts until the copies using it complete)",
			session_ident(s)->uid, mine);
	}
	if (c->arenas >= lim->arenas) {
		c->staging_refused++;
		return outcome_error(s, -ENOSPC,
			"staging arena refused: all sessions hold %" PRIu64 " arenas, the most "
			"allowed (--arena-limit; an unregistered arena counts until the copies "
			"using it complete)",
			c->arenas);
	}
	if (size > lim->staging_bytes - c->staging_bytes || c->staging_bytes > lim->staging_bytes) {
		c->staging_refused++;
		return outcome_error(s, -ENOSPC,
			"staging arena of %" PRIu64 " bytes refused: all sessions map %" PRIu64
			" of the daemon's %" PRIu64 " (--staging-limit)",
			size, c->staging_bytes, lim->staging_bytes);
	}
	return 0;
}

int staging_req_register(struct session *s, const Sseq__Request *rq)
{
	const Sseq__StagingRegister *sr = rq->staging_register;
	struct staging *st = NULL;
	struct stat sb;
	int fd, seals, r;
	void *addr;

	if ((fd = session_take_fd(s)) < 0)
		return outcome_error(
			s, -EINVAL, "StagingRegister without a memfd (send it with SCM_RIGHTS)");
	if ((r = session_handle_limit(s))) {
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
	if ((r = staging_over_limit(s, sr->size))) {
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
	if (!st || staging_uid_reserve(session_server(s)) < 0) {
		free(st);
		munmap(addr, sr->size);
		close(fd);
		return outcome_error(s, -ENOMEM, "out of memory");
	}
	*st = (struct staging){.owner = s, .fd = fd, .addr = addr, .size = sr->size, .refs = 1};
	utf8_copy(st->label, sizeof(st->label), sr->label ? sr->label : "");
	r = backend_staging_register(&session_server(s)->backend, addr, sr->size);
	if (r < 0 || handles_new(s, HANDLE_STAGING, st, &st->handle) < 0) {
		if (r >= 0) {
			backend_staging_unregister(&session_server(s)->backend, addr, sr->size);
			r = -ENOMEM; /* the handle table's */
		}
		munmap(addr, sr->size);
		close(fd);
		free(st);
		staging_uid_trim(session_server(s));
		/* Pinning refused (hipHostRegister's -EEXIST is no double definition): the
		 * host memory the daemon may pin ran out, whatever the backend's errno. */
		return outcome_error(s, -ENOMEM, "cannot register staging arena: %s", strerror(-r));
	}
	staging_charge(s, sr->size, true);
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
	struct staging *st = handles_lookup(s, h, HANDLE_STAGING);

	if (!st)
		return outcome_unknown_handle(s, h, "staging");
	/* Its registration still waits for the pin (the client guessed the handle): it is
	 * answered first, in order. */
	if (st->waiting)
		staging_wait_answer(session_server(s), st);
	handles_drop(s, h);
	/* Copies in flight keep it mapped, and counted, until the last completes. */
	staging_unref(session_server(s), st);
	out_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	return 0;
}

int staging_range(
	struct session *s, uint64_t handle, uint64_t off, uint64_t len, struct staging **out)
{
	struct staging *st = handles_lookup(s, handle, HANDLE_STAGING);

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
