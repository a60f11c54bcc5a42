/* Requests: a frame's Request checked (Hello first, no tag 0, no work while stopping),
 * dispatched to its handler, and the handler's outcome answered. */
#ifndef SSEQ_REQUEST_H
#define SSEQ_REQUEST_H

#include <stdbool.h>

#include "sseq.pb-c.h"

struct session;

/* 0: answered; -EAGAIN: window full, retry later; -EBUSY: a batch held at
 * --client-inflight-limit, retry once resumed; -EPROTO: close the connection. */
int request_run(struct session *s, const Sseq__Request *rq, bool nested);

#endif
