/* Accounting and admission (after dbus-broker's user.c): what each session, each user and
 * the daemon hold against the limits (--client-handle-limit, --client-memory-limit,
 * --client-staging-limit, --client-arena-limit, --arena-limit and its per-user share,
 * --staging-limit), one slot per limit, and the input memory its connections buffer
 * (--max-input-memory), a pause rather than a refusal. A request checks what it wants in one call,
 * which refuses with one message format naming the limit and counts the refusal; what it then takes
 * is recorded on the object it was taken for (a buffer, an arena, a handle), and the object's
 * release gives back exactly that record. The amounts held are kept where they are shown: a
 * session's in its struct account_counts, the daemon's and each user's in the server's counters
 * (count[] where sseqctl stats shows them, limit otherwise); this module alone changes them. So a
 * new per-session limit is a slot here, its option (a row of account_options), its test and its
 * display (a field of sseq.proto's Counters for its refusals, which the STATS query reports by
 * itself); a new per-session policy on ops (a pause, as the in-flight cap) lives in
 * account_op_begin and account_op_end. */
#ifndef SSEQ_ACCOUNT_H
#define SSEQ_ACCOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "option.h"

struct server;
struct session;

/* What a session holds against the per-session limits, and the state of its policies on
 * ops (session_counts(s)): changed by this module alone. */
struct account_counts {
	uint64_t buffers, bytes, inflight, stagings, staging_bytes, modules;
};

/* The limits admission checks against (sseqd(8), LIMITS), as its options set them. The
 * daemon-wide ones are each loop's share (main.c divides them among the loops). */
struct account_limits {
	uint64_t max_input_bytes; /* input buffered across all connections, past each one's
				   * first SESSION_INPUT_BASE bytes */
	uint64_t client_staging_bytes; /* staging arenas mapped per session */
	uint64_t staging_bytes; /* ... and across sessions */
	uint64_t client_memory_bytes; /* device memory per session; 0: no quota */
	unsigned client_handles; /* buffers, slices, arenas and modules per session */
	unsigned client_arenas; /* staging arenas per session (each is a mapping) */
	unsigned arenas; /* ... and across sessions (vm.max_map_count is 65530) */
	unsigned client_inflight; /* ops and watches in flight per session */
};

#define ACCOUNT_LIMITS_DEFAULT                                                                     \
	{                                                                                          \
		.max_input_bytes = 64ull << 20, .client_staging_bytes = 64ull << 30,               \
		.staging_bytes = 256ull << 30, .client_memory_bytes = 0, .client_handles = 65536,  \
		.client_arenas = 256, .arenas = 16384, .client_inflight = 65536,                   \
	}

/* Their options, rows over struct account_limits (option.h), ending with a row named
 * NULL: sseqd's command line adds them as one group, so a new limit's option is written
 * here beside the limit. */
extern const struct option_row account_options[];

/* In the order a request's wants are checked: the first refused is the one named. */
enum account_slot {
	ACCOUNT_HANDLES, /* a session's handles (buffers, slices, arenas, modules): checked
			  * here, held by the handle table (each live slot one) */
	ACCOUNT_MODULES, /* its modules loaded (SESSION_MAX_MODULES, fixed) */
	ACCOUNT_BUFFERS, /* its bases' handles (allocations, modules' globals): counted for
			  * sseqctl clients, never refused */
	ACCOUNT_MEMORY, /* its device bytes: buffers and modules' globals */
	ACCOUNT_STAGING, /* its staging bytes mapped */
	ACCOUNT_ARENAS, /* its staging arenas mapped */
	ACCOUNT_USER_ARENAS, /* its user's staging arenas, sessions gone included */
	ACCOUNT_ALL_ARENAS, /* every session's staging arenas */
	ACCOUNT_ALL_STAGING, /* every session's staging bytes */
	ACCOUNT_SLOTS,
};

/* An amount per slot: what a request wants, and what an object holds. */
struct account_rec {
	uint64_t amount[ACCOUNT_SLOTS];
};

/* One more handle: what every request that makes one wants. */
#define ACCOUNT_ONE_HANDLE (&(const struct account_rec){.amount = {[ACCOUNT_HANDLES] = 1}})

/* Whether s may take every amount `want` names: 0, or the first refusal (-ENOSPC), said
 * to s as "<what> refused: <holder> holds <used> of <limit> <unit> (<option>)" and
 * counted (sseqctl stats). Takes nothing. `what` is a format, formatted only to refuse. */
int account_check(struct session *s, const struct account_rec *want, const char *what, ...)
	__attribute__((format(printf, 3, 4)));
/* Room for s's user's entry, so that a take that follows cannot fail: 0 or -ENOMEM.
 * account_unreserve: no take followed (the table goes if it holds no one). */
int account_reserve(struct session *s);
void account_unreserve(struct session *s);
/* Take want's amounts for s, added to *rec (the object's record); unchecked (a restart in
 * place takes again what the old process had). account_reserve first when want names
 * ACCOUNT_USER_ARENAS. */
void account_take(struct session *s, const struct account_rec *want, struct account_rec *rec);
/* Give back all *rec holds for s, and clear it. s is the session it was taken for. */
void account_release(struct session *s, struct account_rec *rec);
/* Give back what *rec holds in one slot only, ahead of the rest (a freed base's handle
 * goes at once, its memory when it goes back). */
void account_release_slot(struct session *s, struct account_rec *rec, enum account_slot slot);
/* An op (or watch) of s begins and ends: each op record holds one (ops.c; the
 * sequencer's windows bound ops, not watches). Every per-session policy on ops lives
 * here; now --client-inflight-limit, a pause, never a refusal: at the limit the session
 * takes no more requests (PAUSE_INFLIGHT, counted) until half have completed, and its
 * frames run again at the next turn. */
void account_op_begin(struct session *s);
void account_op_end(struct session *s);
/* Input memory, the session's input buffer (conn.c): whether it may grow from `from` to
 * `to` bytes within --max-input-memory: 0, or -EAGAIN with s paused for it (PAUSE_INPUT,
 * counted and logged), until input memory is given back. Takes nothing. */
int account_input_check(struct session *s, size_t from, size_t to);
/* Its buffer went from `from` to `to` bytes (grown, given back, or adopted from 0): the
 * daemon's input counters follow. The buffer's size is the record. */
void account_input_move(struct session *s, size_t from, size_t to);
/* What s (its session, its user, the daemon) holds in a slot now. */
uint64_t account_used(struct session *s, enum account_slot slot);

#endif
