/* User code objects (LoadModule, hip backend): loaded for a session, their functions
 * looked up and cached, their globals opened as buffers (ModuleGlobal). */
#ifndef SSEQ_MODULE_H
#define SSEQ_MODULE_H

#include <stddef.h>

#include "sequencer.h"
#include "sseq.pb-c.h"

struct server;
struct session;
struct smodule;
struct smodule_fn;

void smodule_unref(struct server *srv, struct smodule *m);
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
/* LoadModule. */
int smodule_req_load(struct session *s, const Sseq__Request *rq);
/* ModuleGlobal: a module's global as a buffer handle (Reply.handle, Reply.size). */
int smodule_req_global(struct session *s, const Sseq__Request *rq);
/* The implicit accesses of a launch of one of m's functions: each open global, read (or
 * read-write when opened writable), appended to op. 0, or the refusal when they do not
 * fit in SEQ_MAX_ACCESS with the arguments. */
int smodule_global_accesses(struct session *s, struct smodule *m, struct seq_op *op);
/* Register the release of a module handle (handles_on_release). */
void smodule_register_kind(void);

#endif
