/* Inspection: the MODULES query, the loaded modules the asker may see with their
 * functions' symbols, demangled names and attributes (sseqctl modules, and a client
 * picking block sizes); one function when Query.function names it. */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "module.h"
#include "outcome.h"
#include "query.h"
#include "server.h"
#include "session.h"

/* Names packed in one answer past which further modules' functions are left out (their
 * ModuleInfo says so): the answer stays well inside MAX_FRAME_SIZE. */
#define MODULES_NAME_BUDGET (512u << 10)

struct query_mods {
	struct server *srv; /* the walked sessions' loop */
	struct session_info asker;
	uint64_t only_session, only_module; /* 0: all */
	uint64_t session; /* the session being walked */
	const char *function; /* NULL: all */
	Sseq__QueryResult *res;
	struct arena *a;
	size_t cap, bytes;
};

static Sseq__FunctionInfo *query_function(
	struct query_mods *w, void *fn, const char *name, const char *demangled)
{
	Sseq__FunctionInfo *fi = arena_alloc(w->a, sizeof(*fi));
	struct backend_fn_attrs at = {0};

	sseq__function_info__init(fi);
	fi->name = arena_strdup(w->a, name);
	fi->demangled = arena_strdup(w->a, demangled ? demangled : "");
	w->bytes += strlen(name) + (demangled ? strlen(demangled) : 0) + 64;
	if (fn && backend_function_attrs(&w->srv->backend, fn, &at) == 0) {
		fi->max_threads_per_block = at.max_threads_per_block;
		fi->num_regs = at.num_regs;
		fi->shared_size_bytes = at.shared_size_bytes;
		fi->max_dynamic_shared_size_bytes = at.max_dynamic_shared_size_bytes;
		fi->const_size_bytes = at.const_size_bytes;
		fi->local_size_bytes = at.local_size_bytes;
		fi->ptx_version = at.ptx_version;
		fi->binary_version = at.binary_version;
	}
	return fi;
}

/* Every listed function of m into mi (or why not). */
static void query_module_functions(struct query_mods *w, struct smodule *m, Sseq__ModuleInfo *mi)
{
	int r = w->bytes > MODULES_NAME_BUDGET ? -E2BIG : smodule_list(w->srv, m);

	if (r == -ENXIO) {
		char lost[256];

		mi->functions_error =
			arena_strdup(w->a, outcome_lost_text(w->srv, lost, sizeof(lost)));
		return;
	}
	if (r < 0) {
		mi->functions_error = (char *)(r == -ENOTSUP
				? "listing functions is not supported on this platform"
				: r == -E2BIG
				? "not listed: the answer is full (ask for this module alone)"
				: strerror(-r));
		return;
	}
	mi->functions = arena_alloc(w->a, (m->nnames + 1) * sizeof(*mi->functions));
	for (size_t i = 0; i < m->nnames; i++) {
		void *fn = NULL;

		if (backend_module_function(&w->srv->backend, m->module, m->names[i], &fn) < 0)
			fn = NULL;
		mi->functions[mi->n_functions++] =
			query_function(w, fn, m->names[i], m->demangled[i]);
	}
}

/* Query.function of m, resolved as Execute resolves it. */
static void query_module_function(struct query_mods *w, struct smodule *m, Sseq__ModuleInfo *mi)
{
	struct smodule_fn *f = NULL;
	const char *symbol = w->function, *demangled = NULL;
	char why[220];
	int r = smodule_function(w->srv, m, w->function, &f, why, sizeof(why));

	if (r < 0) {
		outcome_query(
			w->res, w->a, outcome_query_function(r), "module %s %s", m->path, why);
		return;
	}
	/* Its symbol and demangled name, where the module's functions can be listed. */
	if (smodule_list(w->srv, m) == 0) {
		for (size_t i = 0; i < m->nnames; i++) {
			void *fn = NULL;

			if (backend_module_function(
				    &w->srv->backend, m->module, m->names[i], &fn) == 0 &&
				fn == f->function) {
				symbol = m->names[i];
				demangled = m->demangled[i];
				break;
			}
		}
	}
	mi->functions = arena_alloc(w->a, sizeof(*mi->functions));
	mi->functions[mi->n_functions++] = query_function(w, f->function, symbol, demangled);
}

static void query_module(struct smodule *m, void *arg)
{
	struct query_mods *w = arg;
	Sseq__ModuleInfo *mi;

	if (w->only_module && m->handle != w->only_module)
		return;
	if (w->res->n_modules == w->cap) {
		Sseq__ModuleInfo **grown = arena_alloc(w->a, 2 * w->cap * sizeof(*grown));

		memcpy(grown, w->res->modules, w->cap * sizeof(*grown));
		w->res->modules = grown;
		w->cap *= 2;
	}
	mi = arena_alloc(w->a, sizeof(*mi));
	sseq__module_info__init(mi);
	mi->session = w->session;
	mi->handle = m->handle;
	mi->path = arena_strdup(w->a, m->path);
	w->res->modules[w->res->n_modules++] = mi;
	if (w->function)
		query_module_function(w, m, mi);
	else
		query_module_functions(w, m, mi);
}

static void query_session_modules(const struct session *s, void *arg)
{
	struct query_mods *w = arg;
	struct session_info si;

	session_info(s, &si);
	if (!session_may_see(&w->asker, &si) || (w->only_session && si.id != w->only_session))
		return;
	w->session = si.id;
	smodule_foreach(s, query_module, w);
}

void query_modules(struct server *srv, const struct session *asker, const Sseq__Query *q,
	Sseq__QueryResult *res, struct arena *a)
{
	struct query_mods w = {.srv = srv, .res = res, .a = a, .cap = 8};

	session_info(asker, &w.asker);
	res->modules = arena_alloc(a, w.cap * sizeof(*res->modules));
	if (q->function && *q->function && !q->module) {
		outcome_query(res, a, -EINVAL, "Query.function needs Query.module");
		return;
	}
	if (q->module && !backend_has_modules(&srv->backend)) {
		char msg[96];

		outcome_query(res, a, -EINVAL, "%s",
			outcome_needs_modules(srv, "modules need", msg, sizeof(msg)));
		return;
	}
	if (q->module) {
		/* One module: a handle of one session, the asker's own unless named. */
		w.only_session = q->session ? q->session : w.asker.id;
		w.only_module = q->module;
		w.function = q->function && *q->function ? q->function : NULL;
	} else {
		w.only_session = q->session;
	}
	/* Every loop's sessions, each module read through its own loop's backend. */
	for (unsigned k = 0; k < srv->loops->n; k++) {
		w.srv = loops_server(srv->loops, k);
		if (w.srv)
			session_foreach(w.srv, query_session_modules, &w);
	}
	if (q->module && res->n_modules == 0 && res->status == SSEQ__STATUS__STATUS_OK)
		outcome_query(res, a, REQ_UNKNOWN_HANDLE, "no such module handle in that session");
}
