/* User code objects (LoadModule, hip backend): loaded for a session, their functions
 * looked up and cached, their globals opened as buffers (ModuleGlobal). */
#ifndef SSEQ_MODULE_H
#define SSEQ_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "account.h"
#include "kernels.h"
#include "sequencer.h"
#include "sseq.pb-c.h"

struct server;
struct session;
struct sglobal;

/* A function looked up in a module, cached by the name the client used (its symbol or
 * a signature), with what a launch is checked against. */
struct smodule_fn {
	char *name;
	void *function; /* the backend's */
	struct smodule_fn *next;
	/* The device's launch limits with the function's own: threads per block (the
	 * smaller of the two), block and grid dimensions; 0 where unknown. */
	uint32_t max_threads, max_block[3], max_grid[3];
	/* Dynamic shared memory launches may use as far as known (0: not asked yet), the
	 * function's static shared memory, and the most a block may have (opt-in). */
	uint64_t max_shared, static_shared, shared_optin;
	/* Its parameters' sizes as the backend gives them, asked once at lookup:
	 * nparams -1 where the backend cannot say (AMD), KERNEL_MAX_ARGS + 1 for more
	 * parameters than a launch may pass. */
	int nparams;
	uint32_t param_size[KERNEL_MAX_ARGS];
};

/* A user code object from LoadModule (hip backend). Unloaded once the handle is gone (the
 * session ended) and no launch of one of its functions is in flight. */
struct smodule {
	void *module; /* the backend's */
	uint64_t handle;
	unsigned refs; /* the handle's + one per launch in flight */
	struct account_rec held; /* its session's module, until the handle goes */
	unsigned nfns;
	struct smodule_fn *fns;
	char path[96]; /* as the client named it, for the log */
	char *real; /* the file, to load it again after a device reset */
	/* Its functions' symbols as the device lists them and each one demangled (NULL
	 * where it is no C++ name), listed once when first needed (module-names.c).
	 * listed: 0 not yet, 1 done, else the negative errno listing failed with. */
	char **names, **demangled;
	size_t nnames;
	int listed;
	struct smodule_fn spare; /* a lookup past the cache's bound */
	/* Globals opened with ModuleGlobal and not yet released by the core (each holds a
	 * reference): every launch of one of m's functions reads those whose handle is
	 * open. */
	struct sglobal *globals;
};

/* A module's global as a buffer: the core's adopted base over the module's memory. */
struct sglobal {
	struct sglobal *next;
	struct smodule *m;
	struct server *srv;
	struct seq_buffer *buf;
	bool writable;
	char name[128];
};

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
