/* What a request comes to: a handler's outcome (0, a negative errno, or a positive code of
 * the protocol's own), the one table that maps it to a wire status, and the message a
 * refusal carries. Everything here runs on the loop thread. */
#ifndef SSEQ_OUTCOME_H
#define SSEQ_OUTCOME_H

#include <stddef.h>
#include <stdint.h>

#include "sseq-tables.h"
#include "sseq.pb-c.h"

struct arena;
struct server;
struct session;

/* What a request handler returns. 0: answered (success is the handler's own Reply, which
 * carries a handle or a point). A refusal is returned, not sent: a negative errno
 * (-EINVAL, -ERANGE, -ENOMEM; -ENOSPC for a limit) or, for a status of the protocol's
 * that no errno names, REQ_<STATUS>, its message set by outcome_error(); request_run()
 * answers it with the status outcome_status() maps it to. REQ_<STATUS> is the number of
 * STATUS_<STATUS>, for each of the schema's statuses but OK (sseq-tables.h, generated
 * from sseq.proto): REQ_UNKNOWN_HANDLE, REQ_DEVICE_ERROR (an op whose stream failed on
 * the device), ... */
enum req_code {
#define REQ_STATUS(name, number, text) REQ_##name = SSEQ__STATUS__STATUS_##name,
	SSEQ_STATUS_ERRORS(REQ_STATUS)
#undef REQ_STATUS
	/* Not answered, so numbered past the statuses: */
	REQ_BLOCKED = SSEQ_STATUS_COUNT, /* its stream's window is full; runs again later (I3) */
	REQ_CAPPED, /* a batch at --client-inflight-limit: the rest runs once resumed */
	REQ_CLOSE, /* already answered; close the connection */
};

/* The Status an outcome maps to: a negative errno from the core or a backend, or a
 * handler's own code (enum req_code). The one table. */
Sseq__Status outcome_status(int outcome);
/* What a negative errno says in a message (strerror, and the daemon's own). */
const char *outcome_text(int status);
/* Set the message of the refusal `outcome` and return it:
 * return outcome_error(s, -EINVAL, ...). */
int outcome_error(struct session *s, int outcome, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The message of the refusal `outcome` about to be answered: outcome_error()'s, else what
 * the errno says; outcome_clear() once it is sent. */
const char *outcome_message(int outcome);
void outcome_clear(void);
/* 0, or the -EINVAL refusal naming `field` (e.g. "Alloc.label") of client text that is not
 * UTF-8: kept, it would reach sseqctl --json and the journal. */
int outcome_check_text(struct session *s, const char *field, const char *text);
/* Client-supplied text goes into log lines and tables: control characters become '?'. */
void outcome_printable(char *text);
/* The refusal for a handle that names nothing of the kind asked for: an unknown handle,
 * one lost in a device reset (which says so), or a client's name for a buffer whose Alloc
 * or Slice was refused (DEPENDENCY_FAILED, quoting that refusal). `what`: "buffer", "argument 2:
 * buffer", "module", "staging". */
int outcome_unknown_handle(struct session *s, uint64_t handle, const char *what);
/* outcome_error() for a use of something lost in a reset (`what`: "a buffer it names"). */
int outcome_lost(struct server *srv, int outcome, const char *what);
/* Into text, which it returns: "lost in a device reset (the last, reset N at T, was caused
 * by C)", what outcome_lost() says, for a message that is no refusal of its own (why a
 * module's function is not there, why its functions are not listed). */
const char *outcome_lost_text(struct server *srv, char *text, size_t size);
/* Into text, which it returns: "`what` a backend that loads code modules (this daemon runs
 * the sim backend)", the refusal of something only a backend that loads modules does, on
 * one that does not (`what`: "LoadModule needs"); it names the capability, not a backend. */
const char *outcome_needs_modules(struct server *srv, const char *what, char *text, size_t size);
/* The outcome a MODULES query answers for smodule_function()'s refusal r: -ENOMEM as is;
 * -ENXIO, a module lost in a reset, an unknown handle (it has no functions to describe;
 * an Execute of it is refused DEVICE_ERROR, outcome_lost()); any other, the function not
 * there, an unknown kernel. */
int outcome_query_function(int r);
/* A query's refusal: res's status the one table's for `outcome`, its message formatted into
 * the answer's arena (at any length: it may quote a module's functions). */
void outcome_query(Sseq__QueryResult *res, struct arena *a, int outcome, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
