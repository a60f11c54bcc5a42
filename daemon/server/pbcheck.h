/* Checks on a Request's wire bytes that protobuf-c's unpack cannot make safely itself:
 * bounded nesting (batches do not nest) and no NUL inside a string field. */
#ifndef SSEQ_PBCHECK_H
#define SSEQ_PBCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "sseq.pb-c.h"

/* 0 if p[0..len) may go to sseq__request__unpack; -1 with the reason in why. Never
 * recurses; reads only p[0..len). */
int pbcheck_request(const uint8_t *p, size_t len, char *why, size_t why_size);

#endif
