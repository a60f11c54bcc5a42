/* What the parts of a session share (session.c, conn.c, request.c, exec.c, staging.c,
 * module.c, trace.c): their limits and the functions one part calls in another. Not for
 * use outside daemon/server. */
#ifndef SSEQ_SESSION_INTERNAL_H
#define SSEQ_SESSION_INTERNAL_H

#include <errno.h>
#include <stdarg.h>

#include "log.h"
#include "session.h"

/* Whom a log line about session s is about: the journal's SSEQ_SESSION= and SSEQ_WORKER=
 * (log_about). The message still names the client itself, for stderr. */
#define SESSION_WHO(s) (&(struct log_who){.session = (s)->id, .worker = (s)->worker})

#define SESSION_READ_CHUNK 65536u
/* Frames one session may have processed per loop turn: the rest wait for the next turn
 * (srv->resume), so that every other session's requests are read in between. */
#define SESSION_TURN_FRAMES 128u
/* Every connection may hold this much input outside --max-input-memory (so small frames
 * never wait on others' large ones): at most --max-clients times this in all. */
#define SESSION_INPUT_BASE (2 * SESSION_READ_CHUNK)
/* A trace follower's unsent output past which new entries are dropped (and counted). */
#define SESSION_FOLLOW_HIGH (1u << 20)
/* Stop reading a client that does not read its replies. */
#define SESSION_OUT_HIGH (8u << 20)
#define SESSION_MAX_ALLOC (1ull << 40)
/* Each module holds device memory for its code; functions are cached up to a bound (a
 * lookup past it still works, uncached). */
#define SESSION_MAX_MODULES 64
#define SESSION_MAX_MODULE_FNS 256
#define SESSION_MAX_FN_NAME 255
/* The most blocks a thread-block cluster may have everywhere clusters run (CUDA's
 * portable cluster size). */
#define SESSION_MAX_CLUSTER 8

/* session.c */
int session_handle_new(struct session *s, enum handle_kind kind, void *obj, uint64_t *handle);
void session_handle_drop(struct session *s, uint64_t handle);
void printable(char *text);
void sbuf_release(struct session *s, struct sbuf *sb);
struct op_rec *op_rec_new(struct session *s, uint64_t tag, bool notify);
void op_rec_free(struct op_rec *rec);
const char *status_text(int status);
/* 0, or the -ENOSPC refusal (req_error) of a session at --client-handle-limit. */
int handle_over_limit(struct session *s);
/* Give s n lanes (1 .. SESSION_MAX_LANES): the compute streams the fewest other
 * connected sessions hold, distinct while the pool has enough. */
void session_lanes_take(struct session *s, unsigned n);

/* conn.c */
void session_mark_dirty(struct session *s);
void session_send(struct session *s, const Sseq__Message *m);
void session_reply_full(struct session *s, uint64_t tag, Sseq__Status status, const char *message,
	uint64_t handle, const struct seq_point *at, Sseq__Welcome *welcome);
void session_reply(struct session *s, uint64_t tag, Sseq__Status status, const char *message);
void session_complete(struct session *s, uint64_t tag, Sseq__Status status, const char *message,
	struct seq_point at);
void session_input_free(struct session *s);
/* s's input buffer becomes `in` (malloc'd, len bytes read but not yet run: a restart in
 * place hands them over), counted against the input budget as a live read's buffer is. */
void session_input_adopt(struct session *s, uint8_t *in, size_t len);

/* staging.c */
void staging_unref(struct server *srv, struct staging *st);
/* An arena of `size` bytes mapped for s without a StagingRegister (a restart in place
 * adopting it), counted as one registered: 0, or -ENOMEM. */
int staging_charge_adopted(struct session *s, uint64_t size);
int req_staging_register(struct session *s, const Sseq__Request *rq);
int req_staging_unregister(struct session *s, const Sseq__Request *rq);
int req_staging_range(
	struct session *s, uint64_t handle, uint64_t off, uint64_t len, struct staging **out);

/* module.c */
void smodule_unref(struct server *srv, struct smodule *m);
/* The refusal for a handle that names nothing of the kind asked for: an unknown handle,
 * or one lost in a device reset (which says so). `what`: "buffer", "argument 2: buffer",
 * "module", "staging". */
int session_unknown_handle(struct session *s, uint64_t handle, const char *what);
/* Drop the cached function lookups (the module was loaded again). */
void smodule_forget_functions(struct smodule *m);
/* The function `name` of m (a symbol, or a signature containing '(' that names one
 * function, module-names.c), cached: 0 with *fn, or -ENOENT (none), -ENOTUNIQ (several
 * match), -ENOTSUP (a signature where functions cannot be listed), -ENXIO (m was lost in
 * a device reset), -ENOMEM; `why` then says what the client should know. */
int smodule_function(struct server *srv, struct smodule *m, const char *name,
	struct smodule_fn **fn, char *why, size_t size);
/* module-names.c: list m's functions once (m->names, m->demangled): 0 or m->listed. */
int smodule_list(struct server *srv, struct smodule *m);
/* The symbol of m's one function whose demangled signature is `sig` (spaces aside), or
 * whose name is `sig` (a short name, "scale" or "reduce<256>"): as smodule_function. */
int smodule_resolve(struct server *srv, struct smodule *m, const char *sig, const char **symbol,
	char *why, size_t size);
/* fn(m, arg) for every module handle of s, in handle order. */
void smodule_foreach(const struct session *s, void (*fn)(struct smodule *m, void *arg), void *arg);
int req_load_module(struct session *s, const Sseq__Request *rq);
/* ModuleGlobal: a module's global as a buffer handle (Reply.handle, Reply.size). */
int req_module_global(struct session *s, const Sseq__Request *rq);
/* The implicit accesses of a launch of one of m's functions: each open global, read (or
 * read-write when opened writable), appended to op. 0, or the refusal when they do not
 * fit in SEQ_MAX_ACCESS with the arguments. */
int smodule_global_accesses(struct session *s, struct smodule *m, struct seq_op *op);
/* request.c: a handle for b (a base or a slice) labelled `label`. */
int sbuf_new(struct session *s, struct seq_buffer *b, const char *label, uint64_t *handle);
/* conn.c: the Reply to ModuleGlobal, with the new handle and the global's size. */
void session_reply_sized(struct session *s, uint64_t tag, uint64_t handle, uint64_t size);

/* exec.c */
int req_execute(struct session *s, const Sseq__Request *rq);

/* request.c */

/* What a request handler (req_*) returns. 0: answered (success is the handler's own Reply,
 * which carries a handle or a point). A refusal is returned, not sent: a negative errno
 * (-EINVAL, -ERANGE, -ENOMEM; -ENOSPC for a limit) or one of these codes for the protocol's
 * statuses no errno names, its message set by req_error(); session_request() answers it
 * with the status server_status_from_errno(), the one table, maps it to. */
enum req_code {
	REQ_UNKNOWN_HANDLE = 1,
	REQ_UNKNOWN_KERNEL,
	REQ_BAD_ARGUMENT_TYPE,
	REQ_PERMISSION_DENIED,
	REQ_STAGING_UNSEALED,
	REQ_DEPENDENCY_FAILED, /* an input's producer failed (I9) */
	REQ_STREAM_FAILED, /* the op's stream failed on the device: DEVICE_ERROR */
	REQ_UNSUPPORTED_VERSION,
	REQ_PROTOCOL_ERROR,
	REQ_SHUTTING_DOWN,
	/* Not answered: */
	REQ_BLOCKED, /* its stream's window is full; the request runs again later (I3) */
	REQ_CAPPED, /* a batch at --client-inflight-limit: the rest runs once resumed */
	REQ_CLOSE, /* already answered; close the connection */
};

/* Set the message of the refusal `outcome` and return it: return req_error(s, -EINVAL, ...). */
int req_error(struct session *s, int outcome, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* 0, or the -EINVAL refusal naming `field` (e.g. "Alloc.label") of client text that is not
 * UTF-8: kept, it would reach sseqctl --json and the journal. */
int req_check_text(struct session *s, const char *field, const char *text);
/* Put op on the session's lane `lane` (a request's index, 0 .. nlanes-1): 0, or the
 * refusal of one beyond the session's count. After op_init(), which clears it. */
static inline int req_lane(struct session *s, uint32_t lane, struct seq_op *op)
{
	if (lane >= s->nlanes)
		return req_error(s, -EINVAL,
			"lane %u out of range: this session has %u lane%s (0 .. %u; ask for more "
			"in Hello.lanes)",
			lane, s->nlanes, s->nlanes == 1 ? "" : "s", s->nlanes - 1);
	op->lane = SEQ_LANE(s->lanes[lane]);
	return 0;
}
int session_submit(struct session *s, const Sseq__Request *rq, struct seq_op *op,
	struct staging *st, struct smodule *mod, bool notify);
void op_init(struct seq_op *op, struct op_payload *pl, enum seq_op_kind kind);
unsigned write_mode(const struct seq_buffer *b, uint64_t off, uint64_t len);
int session_request(struct session *s, const Sseq__Request *rq, bool nested);

/* query.c (request.c and trace.c answer queries) */
#include "query.h"

#endif
