/* libsseq entry points for the project's own tools (sseq-stress, test-client): raw
 * queries and connecting over an existing socket. Not part of the public API: they
 * expose the wire types, which may change with the protocol. Named sseq__ (libuv's
 * uv__) so libsseq.syms' sseq_[a-z]* pattern leaves them out of the shared library;
 * the tools link the static libsseq-internal. protobuf-c's generated names are
 * sseq__<message>__<verb>, with the second double underscore, so none collides. */
#ifndef SSEQ_CLIENT_SSEQ_INTERNAL_H
#define SSEQ_CLIENT_SSEQ_INTERNAL_H

#include <sseq/sseq.h>

#include "sseq.pb-c.h"

/* Like sseq_connect() over an already connected stream socket, which the connection
 * then owns (closed on failure too). */
int sseq__connect_fd(int fd, const struct sseq_connect_options *opts, struct sseq **out);

/* Send a Query of `kind` (session 0: everything the caller may see) and wait for its
 * QueryResult. On success *result is the raw result, to be freed with
 * sseq__query_result_free(); a non-OK status in it is returned as -SSEQ_ERR_* with
 * *result NULL and the detail in sseq_last_error_message(). */
int sseq__query(struct sseq *s, Sseq__QueryKind kind, uint64_t session, Sseq__QueryResult **result);

/* Send an arbitrary Query without waiting; *tag names it for sseq__query_next(). A trace
 * query with follow set keeps answering under that tag until the connection closes. */
int sseq__query_send(struct sseq *s, const Sseq__Query *query, uint64_t *tag);

/* The next QueryResult under `tag`, waiting at most timeout_ms (-1: forever).
 * -ETIMEDOUT if none came in time; -EINVAL if tag is not a query in flight. */
int sseq__query_next(struct sseq *s, uint64_t tag, int timeout_ms, Sseq__QueryResult **result);

void sseq__query_result_free(Sseq__QueryResult *result);

#endif
