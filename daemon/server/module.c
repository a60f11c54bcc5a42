/* User code objects (LoadModule, hip backend): paths kept inside --module-dir, modules
 * held while a launch of one of their functions is in flight, functions cached by name. */
#include "module.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "account.h"
#include "buffer.h"
#include "handles.h"
#include "log.h"
#include "modpath.h"
#include "out.h"
#include "outcome.h"
#include "session-limits.h"
#include "session.h"

void smodule_forget_functions(struct smodule *m)
{
	while (m->fns) {
		struct smodule_fn *f = m->fns;

		m->fns = f->next;
		free(f->name);
		free(f);
	}
	m->nfns = 0;
	for (size_t i = 0; i < m->nnames; i++) {
		free(m->names[i]);
		free(m->demangled[i]);
	}
	free(m->names);
	free(m->demangled);
	m->names = m->demangled = NULL;
	m->nnames = 0;
	m->listed = 0;
}

void smodule_unref(struct server *srv, struct smodule *m)
{
	if (--m->refs > 0)
		return;
	smodule_forget_functions(m);
	if (m->module)
		backend_module_unload(&srv->backend, m->module);
	free(m->real);
	free(m);
}

struct smodule_each {
	void (*fn)(struct smodule *m, void *arg);
	void *arg;
};

static void smodule_each_one(void *obj, void *arg)
{
	const struct smodule_each *e = arg;

	e->fn(obj, e->arg);
}

void smodule_foreach(const struct session *s, void (*fn)(struct smodule *m, void *arg), void *arg)
{
	struct smodule_each e = {fn, arg};

	handles_foreach(session_handles_const(s), HANDLE_MODULE, smodule_each_one, &e);
}

/* What a launch of f is checked against: the device's limits, narrowed by the function's
 * own threads per block, and its parameters' sizes; what the backend does not say stays
 * 0 (unchecked). Asked once here, so that a launch makes no backend call to check. */
static void smodule_fn_limits(struct server *srv, struct smodule_fn *f)
{
	struct backend_info info = {0};
	struct backend_fn_attrs a = {0};
	size_t off, size;
	int r = 0;

	backend_info(&srv->backend, &info);
	f->max_threads = info.max_threads_per_block;
	memcpy(f->max_block, info.max_block, sizeof(f->max_block));
	memcpy(f->max_grid, info.max_grid, sizeof(f->max_grid));
	f->shared_optin = info.shared_optin;
	if (backend_function_attrs(&srv->backend, f->function, &a) == 0) {
		if (a.max_threads_per_block &&
			(!f->max_threads || a.max_threads_per_block < f->max_threads))
			f->max_threads = a.max_threads_per_block;
		f->max_shared = a.max_dynamic_shared_size_bytes;
		f->static_shared = a.shared_size_bytes;
	}
	for (f->nparams = 0; f->nparams <= KERNEL_MAX_ARGS; f->nparams++) {
		r = backend_function_param(
			&srv->backend, f->function, (unsigned)f->nparams, &off, &size);
		if (r < 0)
			break;
		if (f->nparams < KERNEL_MAX_ARGS)
			f->param_size[f->nparams] = (uint32_t)size;
	}
	if (r < 0 && r != -ENOENT)
		f->nparams = -1; /* not known (-ENOTSUP) or not answered: unchecked */
}

/* The function `name` of m, from the cache or looked up (and cached). A name the
 * backend finds is used as is (a mangled name); else one with '(' is a signature. */
int smodule_function(struct server *srv, struct smodule *m, const char *name,
	struct smodule_fn **out, char *why, size_t size)
{
	struct smodule_fn *f;
	const char *symbol = name;
	void *fn = NULL;
	int r;

	if (!m->module) {
		char lost[256];

		/* Lost in a device reset and not loaded again. */
		snprintf(why, size, "was %s", outcome_lost_text(srv, lost, sizeof(lost)));
		return -ENXIO;
	}
	for (f = m->fns; f; f = f->next) {
		if (strcmp(f->name, name) == 0) {
			*out = f;
			return 0;
		}
	}
	snprintf(why, size, "has no function '%.120s'", name);
	r = backend_module_function(&srv->backend, m->module, name, &fn);
	if (r == -ENOENT) {
		r = smodule_resolve(srv, m, name, &symbol, why, size);
		if (r == 0)
			r = backend_module_function(&srv->backend, m->module, symbol, &fn);
	}
	if (r < 0)
		return r;
	f = m->nfns < SESSION_MAX_MODULE_FNS ? calloc(1, sizeof(*f)) : NULL;
	if (f && !(f->name = strdup(name))) {
		free(f);
		f = NULL;
	}
	if (f) {
		f->next = m->fns;
		m->fns = f;
		m->nfns++;
	} else {
		/* Found; just not cached. */
		f = &m->spare;
		*f = (struct smodule_fn){0};
	}
	f->function = fn;
	smodule_fn_limits(srv, f);
	*out = f;
	return 0;
}

/* A path as the client sent it, fit for a reply and a log line. */
static void shown_path(char *out, size_t size, const char *path)
{
	snprintf(out, size, "%s", path ? path : "");
	outcome_printable(out);
}

/* The core released a global's base (its handle freed and its last use complete, or
 * dropped in a reset): the module may go. */
static void sglobal_gone(void *arg)
{
	struct sglobal *g = arg;
	struct sglobal **p = &g->m->globals;

	while (*p && *p != g)
		p = &(*p)->next;
	if (*p)
		*p = g->next;
	smodule_unref(g->srv, g->m);
	free(g);
}

int smodule_global_accesses(struct session *s, struct smodule *m, struct seq_op *op)
{
	unsigned nargs = op->naccess, nglobals = 0;

	for (const struct sglobal *g = m->globals; g; g = g->next)
		if (!g->buf->freed && !g->buf->lost)
			nglobals++;
	if (nargs + nglobals > SEQ_MAX_ACCESS)
		return outcome_error(s, -EINVAL,
			"%u buffer arguments and %u open globals of module %s are more than the "
			"%u buffers a launch may touch: free globals not in use",
			nargs, nglobals, m->path, SEQ_MAX_ACCESS);
	for (const struct sglobal *g = m->globals; g; g = g->next)
		if (!g->buf->freed && !g->buf->lost)
			op->access[op->naccess++] =
				(struct seq_access){g->buf, g->writable ? SEQ_READWRITE : SEQ_READ};
	return 0;
}

int smodule_req_global(struct session *s, const Sseq__Request *rq)
{
	const Sseq__ModuleGlobal *mg = rq->module_global;
	struct smodule *m = handles_lookup(session_handles(s), mg->module, HANDLE_MODULE);
	char shown[64], label[48];
	uint64_t addr = 0, size = 0, handle = 0;
	struct sglobal *g;
	int r;

	if (!m)
		return outcome_unknown_handle(s, mg->module, "module");
	if ((r = outcome_check_text(s, "ModuleGlobal.name", mg->name)))
		return r;
	snprintf(shown, sizeof(shown), "%s", mg->name ? mg->name : "");
	outcome_printable(shown);
	if (!m->module) {
		char what[sizeof(m->path) + 8];

		snprintf(what, sizeof(what), "module %s", m->path);
		return outcome_lost(session_server(s), -ENXIO, what);
	}
	if (!mg->name || !*mg->name || strlen(mg->name) >= sizeof(g->name))
		return outcome_error(
			s, -EINVAL, "ModuleGlobal: the global's name is empty or too long");
	for (g = m->globals; g; g = g->next)
		if (strcmp(g->name, mg->name) == 0)
			return outcome_error(s, -EINVAL,
				"global '%s' of module %s is already open (or its last use is "
				"not complete yet)",
				shown, m->path);
	if ((r = account_check(s, ACCOUNT_ONE_HANDLE, "global '%s' of module %s", shown, m->path)))
		return r;
	r = backend_module_global(&session_server(s)->backend, m->module, mg->name, &addr, &size);
	if (r == -ENOENT)
		return outcome_error(s, -EINVAL, "module %s has no global '%s'", m->path, shown);
	if (r < 0)
		return outcome_error(
			s, r, "global '%s' of module %s: %s", shown, m->path, strerror(-r));
	g = calloc(1, sizeof(*g));
	if (!g)
		return outcome_error(s, -ENOMEM, "out of memory");
	g->m = m;
	g->srv = session_server(s);
	g->writable = mg->writable;
	strcpy(g->name, mg->name);
	r = seq_buffer_adopt(session_server(s)->seq, addr, size, sglobal_gone, g, &g->buf);
	if (r < 0) {
		free(g);
		return outcome_error(
			s, r, "global '%s' of module %s: %s", shown, m->path, strerror(-r));
	}
	m->refs++;
	g->next = m->globals;
	m->globals = g;
	snprintf(label, sizeof(label), "global %.40s", shown);
	if (buffer_new(s, g->buf, label, size, 0, &handle) < 0) {
		seq_buffer_free(
			session_server(s)->seq, g->buf); /* idle: released now, and g with it */
		return outcome_error(s, -ENOMEM, "out of memory");
	}
	log_about(LOG_LVL_DEBUG, "session", SESSION_WHO(s),
		"global %s of module %s (%" PRIu64 " bytes%s) opened as %" PRIu64, shown, m->path,
		size, g->writable ? ", writable" : "", handle);
	out_reply_sized(s, rq->tag, handle, size);
	return 0;
}

/* What a module wants: a handle, and one of the session's modules. */
#define SMODULE_WANT                                                                               \
	(&(const struct account_rec){.amount = {[ACCOUNT_HANDLES] = 1, [ACCOUNT_MODULES] = 1}})

int smodule_req_load(struct session *s, const Sseq__Request *rq)
{
	const char *path = rq->load_module->path;
	char real[PATH_MAX], shown[96];
	const char *why = NULL;
	struct smodule *m;
	void *mod = NULL;
	int r;

	if (!backend_has_modules(&session_server(s)->backend)) {
		char text[128];

		return outcome_error(s, -EINVAL, "%s",
			outcome_needs_modules(
				session_server(s), "LoadModule needs", text, sizeof(text)));
	}
	if (!session_server(s)->opts.module_dir)
		return outcome_error(s, REQ_PERMISSION_DENIED, "no --module-dir configured");
	shown_path(shown, sizeof(shown), path);
	r = modpath_resolve(session_server(s)->opts.module_dir, path, real, sizeof(real), &why);
	/* Outside --module-dir is refused; any other bad path (not there, not a regular
	 * file, too long) is the client's argument. */
	if (r == -EPERM || r == -EACCES)
		return outcome_error(s, REQ_PERMISSION_DENIED, "module '%s': %s", shown, why);
	if (r < 0)
		return outcome_error(s, -EINVAL, "module '%s': %s", shown, why);
	if ((r = account_check(s, SMODULE_WANT, "module '%s'", shown)))
		return r;
	r = backend_module_load(&session_server(s)->backend, real, &mod);
	if (r == -ENOMEM)
		return outcome_error(s, r, "cannot load module '%s': out of memory", shown);
	/* The file is there: whatever else the backend says, it is not code for this
	 * device, which is the client's argument. */
	if (r < 0)
		return outcome_error(s, -EINVAL,
			"module '%s' does not load: not a code object for this device (%s)", shown,
			strerror(-r));
	m = calloc(1, sizeof(*m));
	if (m && !(m->real = strdup(real))) {
		free(m);
		m = NULL;
	}
	if (!m || handles_new(session_handles(s), HANDLE_MODULE, m, &m->handle) < 0) {
		if (m)
			free(m->real);
		free(m);
		backend_module_unload(&session_server(s)->backend, mod);
		return outcome_error(s, -ENOMEM, "out of memory");
	}
	m->module = mod;
	m->refs = 1;
	memcpy(m->path, shown, sizeof(m->path));
	account_take(s, &(const struct account_rec){.amount = {[ACCOUNT_MODULES] = 1}}, &m->held);
	log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
		"client %" PRIu64 " (pid %u) loaded module %s as %" PRIu64, session_id(s),
		session_ident(s)->pid, m->path, m->handle);
	out_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", m->handle, NULL, NULL);
	return 0;
}

/* A session's module handle as it goes (second pass): launches in flight keep it loaded
 * until they complete. */
static bool smodule_release_handle(struct session *s, void *obj, unsigned pass)
{
	struct smodule *m = obj;

	if (pass == 0)
		return false;
	account_release(s, &m->held);
	smodule_unref(session_server(s), m);
	return true;
}

void smodule_register_kind(void)
{
	handles_on_release(HANDLE_MODULE, smodule_release_handle);
}
