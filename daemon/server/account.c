/* Accounting and admission: each limit a slot, checked in one place with one message,
 * taken and given back by records on the objects (account.h). */
#include "account.h"

#include "sseq-frame.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "handles.h"
#include "log.h"
#include "outcome.h"
#include "pause.h"
#include "server.h"
#include "session-limits.h"
#include "session.h"

enum account_scope { ACCOUNT_SESSION, ACCOUNT_USER, ACCOUNT_DAEMON };

static const struct account_slot_desc {
	enum account_scope scope;
	const char *unit; /* after "holds N of M" */
	const char *option; /* in parentheses: the limit's option (or that it has none), and
			     * what to know of it */
	const char *after; /* after them: what to do */
	enum sseq_counter refused; /* its refusals' counter */
} account_slots[ACCOUNT_SLOTS] = {
	[ACCOUNT_HANDLES] = {ACCOUNT_SESSION, "handles (buffers, slices, arenas, modules)",
		"--client-handle-limit", ": free some", SSEQ_COUNTER_HANDLES_REFUSED},
	/* Counted as handles refused: a module is a handle, and sseqctl stats shows no
	 * other counter for it. */
	[ACCOUNT_MODULES] = {ACCOUNT_SESSION, "modules",
		"a fixed limit; a module stays loaded while its session lasts", "",
		SSEQ_COUNTER_HANDLES_REFUSED},
	[ACCOUNT_BUFFERS] = {ACCOUNT_SESSION, "buffers", "no limit", "",
		SSEQ_COUNTER_HANDLES_REFUSED},
	[ACCOUNT_MEMORY] = {ACCOUNT_SESSION, "bytes of device memory", "--client-memory-limit", "",
		SSEQ_COUNTER_QUOTA_REFUSED},
	[ACCOUNT_STAGING] = {ACCOUNT_SESSION, "staging bytes", "--client-staging-limit", "",
		SSEQ_COUNTER_STAGING_REFUSED},
	[ACCOUNT_ARENAS] = {ACCOUNT_SESSION, "staging arenas",
		"--client-arena-limit; an unregistered arena counts until the copies using it "
		"complete",
		"", SSEQ_COUNTER_STAGING_REFUSED},
	[ACCOUNT_USER_ARENAS] = {ACCOUNT_USER, "staging arenas",
		"--arena-limit x --max-clients-per-uid / --max-clients; an unregistered arena "
		"counts until the copies using it complete",
		"", SSEQ_COUNTER_STAGING_REFUSED},
	[ACCOUNT_ALL_ARENAS] = {ACCOUNT_DAEMON, "staging arenas",
		"--arena-limit; an unregistered arena counts until the copies using it complete",
		"", SSEQ_COUNTER_STAGING_REFUSED},
	[ACCOUNT_ALL_STAGING] = {ACCOUNT_DAEMON, "staging bytes", "--staging-limit", "",
		SSEQ_COUNTER_STAGING_REFUSED},
};

#define ACC(field) .offset = offsetof(struct account_limits, field)

const struct option_row account_options[] = {
	/* At least a few frames of the largest size must fit. */
	{.name = "max-input-memory",
		.arg = "SIZE",
		.kind = OPTION_SIZE,
		ACC(max_input_bytes),
		.min = 4u * FRAME_MAX,
		.hint = " (a size of at least 4M)",
		.help = "input buffered across connections (default {default})"},
	{.name = "client-staging-limit",
		.arg = "SIZE",
		.kind = OPTION_SIZE,
		ACC(client_staging_bytes),
		.hint = " (a size: 4096, 64k, 16M, 2G or 1T)",
		.help = "staging arenas per session (default {default})"},
	{.name = "staging-limit",
		.arg = "SIZE",
		.kind = OPTION_SIZE,
		ACC(staging_bytes),
		.hint = " (a size: 4096, 64k, 16M, 2G or 1T)",
		.help = "staging arenas across sessions (default {default})"},
	{.name = "client-memory-limit",
		.arg = "SIZE",
		.kind = OPTION_SIZE,
		ACC(client_memory_bytes),
		.hint = " (a size: 4096, 64k, 16M, 2G or 1T; 0: none)",
		.help = "device memory per session (default {default}: none)"},
	{.name = "client-handle-limit",
		.arg = "N",
		.kind = OPTION_UINT,
		ACC(client_handles),
		.min = 1,
		.max = 1u << 30,
		.help = "buffers, slices, arenas, modules per session (default {default})"},
	{.name = "client-arena-limit",
		.arg = "N",
		.kind = OPTION_UINT,
		ACC(client_arenas),
		.min = 1,
		.max = 1u << 20,
		.help = "staging arenas per session (default {default})"},
	{.name = "arena-limit",
		.arg = "N",
		.kind = OPTION_UINT,
		ACC(arenas),
		.min = 1,
		.max = 1u << 20,
		.help = "staging arenas across sessions (default {default})"},
	{.name = "client-inflight-limit",
		.arg = "N",
		.kind = OPTION_UINT,
		ACC(client_inflight),
		.min = 2,
		.max = 1u << 24,
		.help = "ops and waits in flight per session before its requests wait (default "
			"{default})"},
	{0},
};

#undef ACC

/* One user's share of --arena-limit: the share of the connections it may hold
 * (--max-clients-per-uid of --max-clients), and at least what one of its sessions may map
 * (--client-arena-limit), so that one user with many sessions, or sessions gone whose
 * arenas copies still use, leaves the others theirs. */
static uint64_t account_user_share(const struct server_options *o)
{
	const struct account_limits *lim = &o->account;
	uint64_t share = o->limits.max_clients
		? (uint64_t)lim->arenas * o->limits.max_clients_per_uid / o->limits.max_clients
		: lim->arenas;

	if (share < lim->client_arenas)
		share = lim->client_arenas;
	return share < lim->arenas ? share : lim->arenas;
}

/* The slot's limit; UINT64_MAX: none. */
static uint64_t account_limit(const struct server_options *o, enum account_slot slot)
{
	const struct account_limits *lim = &o->account;

	switch (slot) {
	case ACCOUNT_HANDLES:
		return lim->client_handles;
	case ACCOUNT_MODULES:
		return SESSION_MAX_MODULES;
	case ACCOUNT_BUFFERS:
		return UINT64_MAX;
	case ACCOUNT_MEMORY:
		return lim->client_memory_bytes ? lim->client_memory_bytes : UINT64_MAX;
	case ACCOUNT_STAGING:
		return lim->client_staging_bytes;
	case ACCOUNT_ARENAS:
		return lim->client_arenas;
	case ACCOUNT_USER_ARENAS:
		return account_user_share(o);
	case ACCOUNT_ALL_ARENAS:
		return lim->arenas;
	case ACCOUNT_ALL_STAGING:
		return lim->staging_bytes;
	case ACCOUNT_SLOTS:
		break;
	}
	return 0;
}

/* s's user's entry, or NULL if it has none. */
static struct server_uid_arenas *account_user(struct server *srv, uint32_t uid)
{
	struct server_limit_counters *c = &srv->limit;

	for (unsigned i = 0; i < c->n_uid_arenas; i++)
		if (c->uid_arenas[i].uid == uid)
			return &c->uid_arenas[i];
	return NULL;
}

int account_reserve(struct session *s)
{
	struct server_limit_counters *c = &session_server(s)->limit;
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
static void account_user_trim(struct server *srv)
{
	struct server_limit_counters *c = &srv->limit;

	if (c->n_uid_arenas == 0) {
		free(c->uid_arenas);
		c->uid_arenas = NULL;
		c->cap_uid_arenas = 0;
	}
}

void account_unreserve(struct session *s)
{
	account_user_trim(session_server(s));
}

/* Where the amount of a slot counted as a plain number is kept for s: its session's
 * counts or the server's; NULL for the two kept otherwise (handles: the handle table's
 * live slots; a user's arenas: its entry in the server's table). */
static uint64_t *account_at(struct session *s, enum account_slot slot)
{
	switch (slot) {
	case ACCOUNT_MODULES:
		return &session_counts(s)->modules;
	case ACCOUNT_BUFFERS:
		return &session_counts(s)->buffers;
	case ACCOUNT_MEMORY:
		return &session_counts(s)->bytes;
	case ACCOUNT_STAGING:
		return &session_counts(s)->staging_bytes;
	case ACCOUNT_ARENAS:
		return &session_counts(s)->stagings;
	case ACCOUNT_ALL_ARENAS:
		return &session_server(s)->limit.arenas;
	case ACCOUNT_ALL_STAGING:
		return &session_server(s)->count[SSEQ_COUNTER_STAGING_BYTES];
	case ACCOUNT_HANDLES:
	case ACCOUNT_USER_ARENAS:
	case ACCOUNT_SLOTS:
		break;
	}
	return NULL;
}

uint64_t account_used(struct session *s, enum account_slot slot)
{
	const struct server_uid_arenas *u;
	const uint64_t *at = account_at(s, slot);

	if (at)
		return *at;
	if (slot == ACCOUNT_HANDLES)
		return handles_count(session_handles(s));
	u = account_user(session_server(s), session_ident(s)->uid);
	return u ? u->arenas : 0;
}

int account_check(struct session *s, const struct account_rec *want, const char *what, ...)
{
	struct server *srv = session_server(s);

	for (unsigned i = 0; i < ACCOUNT_SLOTS; i++) {
		const struct account_slot_desc *d = &account_slots[i];
		const uint64_t limit = account_limit(&srv->opts, (enum account_slot)i);
		uint64_t used;
		char holder[48], text[96];
		va_list ap;

		if (!want->amount[i] || limit == UINT64_MAX)
			continue;
		used = account_used(s, (enum account_slot)i);
		if (used <= limit && want->amount[i] <= limit - used)
			continue;
		srv->count[d->refused]++;
		if (d->scope == ACCOUNT_SESSION)
			snprintf(holder, sizeof(holder), "this session holds");
		else if (d->scope == ACCOUNT_USER)
			snprintf(holder, sizeof(holder), "uid %" PRIu32 " holds",
				session_ident(s)->uid);
		else
			snprintf(holder, sizeof(holder), "all sessions hold");
		va_start(ap, what);
		vsnprintf(text, sizeof(text), what, ap);
		va_end(ap);
		return outcome_error(s, -ENOSPC,
			"%s refused: %s %" PRIu64 " of %" PRIu64 " %s (%s)%s", text, holder, used,
			limit, d->unit, d->option, d->after);
	}
	return 0;
}

/* Add (sign 1) or take away (-1) amount in slot i. */
static void account_move(struct session *s, unsigned i, uint64_t amount, int sign)
{
	struct server_limit_counters *c = NULL;
	struct server_uid_arenas *u;
	uint64_t *at = account_at(s, (enum account_slot)i);

	if (at) {
		*at = sign > 0 ? *at + amount : *at - amount;
		return;
	}
	if (i != ACCOUNT_USER_ARENAS)
		return; /* handles: the handle table counts its live slots */
	c = &session_server(s)->limit;
	u = account_user(session_server(s), session_ident(s)->uid);
	if (sign > 0 && !u) {
		/* account_reserve made the room. */
		u = &c->uid_arenas[c->n_uid_arenas++];
		*u = (struct server_uid_arenas){.uid = session_ident(s)->uid};
	}
	if (!u)
		return;
	u->arenas = sign > 0 ? u->arenas + (uint32_t)amount : u->arenas - (uint32_t)amount;
	if (u->arenas == 0) {
		/* The last entry takes the place of one that goes. */
		*u = c->uid_arenas[--c->n_uid_arenas];
		account_user_trim(session_server(s));
	}
}

void account_op_begin(struct session *s)
{
	struct server *srv = session_server(s);

	if (++session_counts(s)->inflight >= srv->opts.account.client_inflight &&
		!pause_has(session_pause(s), PAUSE_INFLIGHT)) {
		pause_set(s, PAUSE_INFLIGHT);
		srv->count[SSEQ_COUNTER_INFLIGHT_CAPPED]++;
	}
}

void account_op_end(struct session *s)
{
	session_counts(s)->inflight--;
	if (pause_has(session_pause(s), PAUSE_INFLIGHT) &&
		session_counts(s)->inflight <=
			session_server(s)->opts.account.client_inflight / 2 &&
		session_is_connected(s))
		pause_clear(s, PAUSE_INFLIGHT); /* its frames run at the next turn */
}

void account_take(struct session *s, const struct account_rec *want, struct account_rec *rec)
{
	for (unsigned i = 0; i < ACCOUNT_SLOTS; i++)
		if (want->amount[i]) {
			account_move(s, i, want->amount[i], 1);
			rec->amount[i] += want->amount[i];
		}
}

void account_release_slot(struct session *s, struct account_rec *rec, enum account_slot slot)
{
	if (rec->amount[slot]) {
		account_move(s, slot, rec->amount[slot], -1);
		rec->amount[slot] = 0;
	}
}

void account_release(struct session *s, struct account_rec *rec)
{
	for (unsigned i = 0; i < ACCOUNT_SLOTS; i++)
		account_release_slot(s, rec, (enum account_slot)i);
}

/* What of an input buffer of `cap` bytes counts against --max-input-memory: every
 * session's first SESSION_INPUT_BASE bytes are bounded by --max-clients instead. */
static uint64_t account_input_large(size_t cap)
{
	return cap > SESSION_INPUT_BASE ? cap - SESSION_INPUT_BASE : 0;
}

int account_input_check(struct session *s, size_t from, size_t to)
{
	struct server *srv = session_server(s);
	const uint64_t grow = account_input_large(to) - account_input_large(from);

	if (!grow || srv->limit.input_large_bytes + grow <= srv->opts.account.max_input_bytes)
		return 0;
	if (pause_set(s, PAUSE_INPUT)) {
		srv->count[SSEQ_COUNTER_INPUT_PAUSED]++;
		log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
			"client %" PRIu64 " (pid %u): input paused: %" PRIu64
			" bytes of large frames buffered (--max-input-memory %" PRIu64 ")",
			session_id(s), session_ident(s)->pid, srv->limit.input_large_bytes,
			srv->opts.account.max_input_bytes);
	}
	return -EAGAIN;
}

void account_input_move(struct session *s, size_t from, size_t to)
{
	struct server *srv = session_server(s);

	/* Unsigned differences: a buffer given back subtracts, modulo 2^64. */
	srv->count[SSEQ_COUNTER_INPUT_BYTES] += (uint64_t)to - from;
	srv->limit.input_large_bytes += account_input_large(to) - account_input_large(from);
}
