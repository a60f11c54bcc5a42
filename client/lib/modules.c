/* libsseq's questions about loaded modules (the MODULES query): a module's functions with
 * their demangled names and attributes, one function's attributes, and the device's
 * launch limits, so a client can pick block sizes. */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client.h"

static void function_info(struct sseq_function_info *out, const Sseq__FunctionInfo *fi)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->name, sizeof(out->name), "%s", fi->name ? fi->name : "");
	snprintf(out->demangled, sizeof(out->demangled), "%s", fi->demangled ? fi->demangled : "");
	out->max_threads_per_block = fi->max_threads_per_block;
	out->num_regs = fi->num_regs;
	out->shared_size_bytes = fi->shared_size_bytes;
	out->max_dynamic_shared_size_bytes = fi->max_dynamic_shared_size_bytes;
	out->const_size_bytes = fi->const_size_bytes;
	out->local_size_bytes = fi->local_size_bytes;
	out->ptx_version = fi->ptx_version;
	out->binary_version = fi->binary_version;
}

/* The MODULES answer for one module of this connection (and one function of it). */
static int module_query(
	struct sseq *s, uint64_t module, const char *function, Sseq__QueryResult **qr)
{
	Sseq__Query q = SSEQ__QUERY__INIT;
	uint64_t tag;
	int r;

	*qr = NULL;
	if (!module)
		return client_fail(s, -EINVAL, "module handle 0");
	if ((r = client_handle_in(s, module, "module query", &q.module)) < 0)
		return r;
	q.kind = SSEQ__QUERY_KIND__QUERY_KIND_MODULES;
	q.function = (char *)(function ? function : "");
	if ((r = sseq__query_send(s, &q, &tag)) < 0 || (r = sseq__query_next(s, tag, -1, qr)) < 0)
		return r;
	if ((*qr)->n_modules != 1) {
		const size_t got = (*qr)->n_modules;

		sseq__query_result_free(*qr);
		*qr = NULL;
		return client_fail(s, -SSEQ_ERR_PROTOCOL_ERROR,
			"the daemon answered about %zu modules, not one (too old for MODULES?)",
			got);
	}
	return 0;
}

int sseq_module_functions(
	struct sseq *s, uint64_t module, struct sseq_function_info *fns, size_t n, size_t *count)
{
	Sseq__QueryResult *qr;
	const Sseq__ModuleInfo *mi;
	int r;

	*count = 0;
	if (n && !fns)
		return client_fail(s, -EINVAL, "sseq_module_functions: no room for %zu", n);
	if ((r = module_query(s, module, NULL, &qr)) < 0)
		return r;
	assert(qr); /* module_query's 0 comes with the answer */
	mi = qr->modules[0];
	if (mi->functions_error && *mi->functions_error) {
		r = client_fail(s, -SSEQ_ERR_INVALID_ARGUMENT, "module %llu: %s",
			(unsigned long long)module, mi->functions_error);
	} else {
		for (size_t i = 0; i < mi->n_functions && i < n; i++)
			function_info(&fns[i], mi->functions[i]);
		*count = mi->n_functions;
	}
	sseq__query_result_free(qr);
	return r;
}

int sseq_function_attributes(
	struct sseq *s, uint64_t module, const char *name, struct sseq_function_info *info)
{
	Sseq__QueryResult *qr;
	int r;

	if (!name || !*name)
		return client_fail(s, -EINVAL, "sseq_function_attributes: no function name");
	if ((r = module_query(s, module, name, &qr)) < 0)
		return r;
	assert(qr); /* module_query's 0 comes with the answer */
	if (qr->modules[0]->n_functions != 1)
		r = client_fail(s, -SSEQ_ERR_PROTOCOL_ERROR, "the daemon answered no function");
	else
		function_info(info, qr->modules[0]->functions[0]);
	sseq__query_result_free(qr);
	return r;
}

int sseq_device_limits(struct sseq *s, struct sseq_device_limits *limits)
{
	Sseq__QueryResult *qr = NULL;
	const Sseq__DeviceInfo *d;
	int r = sseq__query(s, SSEQ__QUERY_KIND__QUERY_KIND_STATUS, 0, &qr);

	memset(limits, 0, sizeof(*limits));
	if (r < 0)
		return r;
	d = qr->device;
	if (d) {
		limits->max_threads_per_block = d->max_threads_per_block;
		for (size_t i = 0; i < 3 && i < d->n_max_block; i++)
			limits->max_block[i] = d->max_block[i];
		for (size_t i = 0; i < 3 && i < d->n_max_grid; i++)
			limits->max_grid[i] = d->max_grid[i];
		limits->shared_per_block = d->shared_per_block;
		limits->shared_optin = d->shared_optin;
	}
	sseq__query_result_free(qr);
	return 0;
}
