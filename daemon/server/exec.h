/* Execute and ExecuteFunction: a built-in kernel or a module's function, its arguments
 * checked and turned into the op's accesses. */
#ifndef SSEQ_EXEC_H
#define SSEQ_EXEC_H

#include "sseq.pb-c.h"

struct session;

int exec_req_execute(struct session *s, const Sseq__Request *rq);

#endif
