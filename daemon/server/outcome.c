/* Outcomes: the one table from a handler's outcome to the wire's Status, and the messages
 * refusals carry (unknown handles, things lost in a device reset, client text that cannot
 * be kept). */
#include "outcome.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "backend.h"
#include "session.h"
#include "sseq-utf8.h"

/* The one table: what every Reply and Completion says for an outcome. A negative errno
 * from the core or a backend, or a handler's own refusal; REQ_<STATUS>, the status's own
 * number, for the protocol's statuses that no errno names. */
Sseq__Status outcome_status(int outcome)
{
	switch (outcome) {
	case 0:
		return SSEQ__STATUS__STATUS_OK;
	case -BACKEND_EINJECTED:
		return SSEQ__STATUS__STATUS_INJECTED_FAULT;
	case -ENOMEM: /* out of memory */
	case -ENOSPC: /* a limit or quota reached */
		return SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED;
	case -EINVAL:
		return SSEQ__STATUS__STATUS_INVALID_ARGUMENT;
	case -ENOTSUP: /* the device or platform cannot (a launch attribute) */
		return SSEQ__STATUS__STATUS_NOT_SUPPORTED;
	case -ERANGE:
		return SSEQ__STATUS__STATUS_OUT_OF_RANGE;
	case -EEXIST:
		return SSEQ__STATUS__STATUS_DOUBLE_DEFINITION;
	case -EAGAIN:
		return SSEQ__STATUS__STATUS_BUSY;
	case -ESHUTDOWN: /* cancelled, not run: the drain at a stop timed out */
		return SSEQ__STATUS__STATUS_SHUTTING_DOWN;
	default:
		/* A handler's REQ_<STATUS> is that status's number (outcome.h). REQ_BLOCKED,
		 * REQ_CAPPED and REQ_CLOSE, past them, are never answered: seeing one here is
		 * a bug. */
		if (outcome > 0)
			return outcome < SSEQ_STATUS_COUNT ? (Sseq__Status)outcome
							   : SSEQ__STATUS__STATUS_INTERNAL;
		return SSEQ__STATUS__STATUS_DEVICE_ERROR;
	}
}

const char *outcome_text(int status)
{
	if (status == -BACKEND_EINJECTED)
		return "injected fault";
	if (status == -ESHUTDOWN)
		return "cancelled: the daemon is stopping";
	return strerror(-status);
}

/* The message of the refusal about to be answered: outcome_error() sets it, the request's
 * answer sends and clears it before the request returns (the loop thread's alone). */
static _Thread_local char outcome_msg[256];

int outcome_error(struct session *s, int outcome, const char *fmt, ...)
{
	va_list ap;

	(void)s;
	va_start(ap, fmt);
	vsnprintf(outcome_msg, sizeof(outcome_msg), fmt, ap);
	va_end(ap);
	return outcome;
}

const char *outcome_message(int outcome)
{
	/* A refusal without outcome_error() says what the errno says. */
	return outcome_msg[0] ? outcome_msg : outcome < 0 ? outcome_text(outcome) : "";
}

void outcome_clear(void)
{
	outcome_msg[0] = '\0';
}

int outcome_check_text(struct session *s, const char *field, const char *text)
{
	if (!text || utf8_valid(text))
		return 0;
	return outcome_error(s, -EINVAL, "%s is not valid UTF-8", field);
}

/* Client-supplied text goes into log lines and tables: nothing that could forge or
 * break a line. */
void outcome_printable(char *text)
{
	for (char *c = text; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
}

int outcome_unknown_handle(struct session *s, uint64_t handle, const char *what)
{
	const char *refused = handles_lookup(session_handles(s), handle, HANDLE_REFUSED);
	char text[96];

	/* A name the client gave a buffer whose Alloc (or Slice) was refused: what uses it
	 * was sent before that Reply came, and fails for the same reason. */
	if (refused)
		return outcome_error(s, REQ_DEPENDENCY_FAILED, "%s handle %#" PRIx64 ": %s", what,
			handle, refused);
	if (!handles_lost(session_handles(s), handle))
		return outcome_error(
			s, REQ_UNKNOWN_HANDLE, "unknown %s handle %" PRIu64, what, handle);
	snprintf(text, sizeof(text), "%s handle %" PRIu64, what, handle);
	return outcome_lost(session_server(s), -ENXIO, text);
}

int outcome_lost(struct server *srv, int outcome, const char *what)
{
	char text[sizeof(outcome_msg)];

	return outcome_error(NULL, outcome, "%s was %s: free it and allocate again", what,
		outcome_lost_text(srv, text, sizeof(text)));
}

const char *outcome_lost_text(struct server *srv, char *text, size_t size)
{
	snprintf(text, size,
		"lost in a device reset (the last, reset %" PRIu64 " at %s, was caused by %s)",
		srv->loops->resets.count, srv->loops->resets.at, srv->loops->resets.cause);
	return text;
}

const char *outcome_needs_modules(struct server *srv, const char *what, char *text, size_t size)
{
	struct backend_info info = {0};

	backend_info(&srv->backend, &info);
	snprintf(text, size,
		"%s a backend that loads code modules (this daemon runs the %s backend)", what,
		info.backend ? info.backend : "?");
	return text;
}

int outcome_query_function(int r)
{
	return r == -ENOMEM ? r : r == -ENXIO ? REQ_UNKNOWN_HANDLE : REQ_UNKNOWN_KERNEL;
}

void outcome_query(Sseq__QueryResult *res, struct arena *a, int outcome, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	res->status = outcome_status(outcome);
	res->message = n < 0 ? NULL : arena_alloc(a, (size_t)n + 1);
	if (!res->message) {
		res->message = (char *)""; /* out of memory: the status alone */
		return;
	}
	va_start(ap, fmt);
	vsnprintf(res->message, (size_t)n + 1, fmt, ap);
	va_end(ap);
}
