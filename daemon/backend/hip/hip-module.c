/* Code objects for the hip backend: the built-in kernels' image, loaded at create with
 * each kernel's function looked up once, and users' modules (LoadModule), loaded and
 * looked up on the loop thread and unloaded by the reaper. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hip-internal.h"
#include "log.h"

#ifndef SSEQ_KERNELS_INSTALL_PATH
#define SSEQ_KERNELS_INSTALL_PATH "/usr/local/lib/sseq/sseq-kernels"
#endif

/* ---- the built-in kernels ---- */

const char *hip_kernels_path(void)
{
#ifdef SSEQ_KERNELS_BUILD_PATH
	if (access(SSEQ_KERNELS_BUILD_PATH, R_OK) == 0)
		return SSEQ_KERNELS_BUILD_PATH;
#endif
	return SSEQ_KERNELS_INSTALL_PATH;
}

int hip__kernels_load(struct hip *h)
{
	const char *path = h->cfg.kernels ? h->cfg.kernels : hip_kernels_path();
	hipError_t e = hipModuleLoad(&h->module, path);
	unsigned missing = 0;

	if (e != hipSuccess) {
		const bool readable = access(path, R_OK) == 0;
		int r = hip__errno(e);

		log_err("hip", "cannot load the kernel image %s: %s (%s)%s", path,
			hipGetErrorName(e), hipGetErrorString(e),
			readable ? "" : "; the file is not readable (use --kernels PATH)");
		/* A file that is there but does not load is not a code object for this GPU. */
		if (!readable)
			return -ENOENT;
		return r == -EIO || r == -EINVAL ? -ENOEXEC : r;
	}
	h->module_loaded = true;
	h->kernels = kernel_list();
	for (h->nfn = 0; h->kernels[h->nfn] && h->nfn < HIP_MAX_KERNELS; h->nfn++) {
		const char *kname = h->kernels[h->nfn]->name;
		struct hip_fn *fn = &h->fn[h->nfn];
		char sym[64];

		snprintf(sym, sizeof(sym), "sseq_%s", kname);
		e = hipModuleGetFunction(&fn->f, h->module, sym);
		if (e != hipSuccess) {
			log_warn(
				"hip", "%s: no %s in the image: %s", path, sym, hipGetErrorName(e));
			fn->f = NULL;
			missing++;
		}
		if (strcmp(kname, "spin") == 0)
			fn->extra = HIP_EXTRA_CLOCK;
		else if (strcmp(kname, "conv2d") == 0)
			fn->extra = HIP_EXTRA_CONV2D;
	}
	log_info("hip", "loaded %u kernels from %s%s", h->nfn - missing, path,
		missing ? " (some missing: an image from another version?)" : "");
	return 0;
}

/* ---- user code objects ---- */

/* On the loop thread: loading reads a file and may take milliseconds, which is why
 * clients load modules once per session, not per launch. */
int hip__module_load(void *ctx, const char *path, void **module)
{
	hipModule_t m;
	hipError_t e = hipModuleLoad(&m, path);
	int r;

	if (e != hipSuccess) {
		r = hip__errno(e);
		log_info("hip", "cannot load module %s: %s (%s)", path, hipGetErrorName(e),
			hipGetErrorString(e));
		/* The file is there (the caller checked): it is not code for this GPU. */
		return r == -EIO || r == -EINVAL || r == -ENOENT ? -ENOEXEC : r;
	}
	*module = (void *)m;
	return 0;
}

int hip__module_function(void *ctx, void *module, const char *name, void **function)
{
	hipFunction_t f;
	hipError_t e = hipModuleGetFunction(&f, (hipModule_t)module, name);

	if (e != hipSuccess) {
		log_debug(
			"hip", "no function %s in module %p: %s", name, module, hipGetErrorName(e));
		return hip__errno(e) == -ENOMEM ? -ENOMEM : -ENOENT;
	}
	*function = (void *)f;
	return 0;
}

int hip__module_global(void *ctx, void *module, const char *name, uint64_t *addr, uint64_t *size)
{
	hipDeviceptr_t p = NULL;
	size_t bytes = 0;
	hipError_t e = hipModuleGetGlobal(&p, &bytes, (hipModule_t)module, name);

	(void)ctx;
	if (e != hipSuccess) {
		log_debug("hip", "no global %s in module %p: %s", name, module, hipGetErrorName(e));
		return hip__errno(e) == -ENOMEM ? -ENOMEM : -ENOENT;
	}
	if (!p || !bytes)
		return -ENOENT;
	*addr = (uint64_t)(uintptr_t)p;
	*size = bytes;
	return 0;
}

/* Unloading may synchronize; the reaper does it, as it does hipFree. */
void hip__module_unload(void *ctx, void *module)
{
	struct hip *h = ctx;
	struct hip_reap_module *m = malloc(sizeof(*m));

	if (!m) {
		/* Better a module left loaded than a blocked loop. */
		log_warn("hip", "out of memory unloading module %p: it stays loaded", module);
		return;
	}
	m->module = (hipModule_t)module;
	pthread_mutex_lock(&h->reap_mu);
	m->next = h->reap_modules;
	h->reap_modules = m;
	pthread_cond_signal(&h->reap_cond);
	pthread_mutex_unlock(&h->reap_mu);
}

/* ---- what a client asks about a module's functions ---- */

#ifdef SSEQ_HIP_NVIDIA
int hip__module_functions(void *ctx, void *module, char ***names, size_t *n)
{
	hipModule_t m = (hipModule_t)module;
	hipFunction_t *fns = NULL;
	char **out = NULL;
	unsigned count = 0, i = 0;
	hipError_t e;
	int r = 0;

	*names = NULL;
	*n = 0;
	e = hipModuleGetFunctionCount(&count, m);
	if (e == hipSuccess && count) {
		fns = calloc(count, sizeof(*fns));
		out = calloc(count, sizeof(*out));
		if (!fns || !out) {
			r = -ENOMEM;
			goto out;
		}
		e = hipModuleEnumerateFunctions(fns, count, m);
	}
	if (e != hipSuccess) {
		log_info("hip", "cannot list the functions of module %p: %s", module,
			hipGetErrorName(e));
		r = hip__errno(e);
		goto out;
	}
	for (i = 0; i < count; i++) {
		const char *name = NULL;

		e = hipFuncGetName(&name, fns[i]);
		if (e != hipSuccess || !name) {
			log_info("hip", "module %p: function %u has no name: %s", module, i,
				hipGetErrorName(e));
			r = e == hipSuccess ? -EIO : hip__errno(e);
			goto out;
		}
		if (!(out[i] = strdup(name))) {
			r = -ENOMEM;
			goto out;
		}
	}
	*names = out;
	*n = count;
	out = NULL;
out:
	if (out) {
		while (i > 0)
			free(out[--i]);
		free(out);
	}
	free(fns);
	return r;
}

int hip__function_attrs(void *ctx, void *function, struct backend_fn_attrs *attrs)
{
	hipFuncAttributes a;
	hipError_t e = hipModuleFuncGetAttributes(&a, (hipFunction_t)function);

	if (e != hipSuccess)
		return hip__errno(e);
	*attrs = (struct backend_fn_attrs){
		.max_threads_per_block = (uint32_t)a.maxThreadsPerBlock,
		.num_regs = (uint32_t)a.numRegs,
		.shared_size_bytes = a.sharedSizeBytes,
		.max_dynamic_shared_size_bytes = (uint64_t)a.maxDynamicSharedSizeBytes,
		.const_size_bytes = a.constSizeBytes,
		.local_size_bytes = a.localSizeBytes,
		.ptx_version = (uint32_t)a.ptxVersion,
		.binary_version = (uint32_t)a.binaryVersion,
	};
	return 0;
}

int hip__function_max_shared(void *ctx, void *function, uint64_t bytes)
{
	struct hip *h = ctx;
	hipError_t e;

	if (h->shared_optin && bytes > h->shared_optin)
		return -EINVAL;
	e = hipModuleFuncSetMaxDynamicShared((hipFunction_t)function, (int)bytes);
	if (e != hipSuccess) {
		log_info("hip", "cannot let function %p use %" PRIu64 " bytes of shared memory: %s",
			function, bytes, hipGetErrorName(e));
		return hip__errno(e) == -ENOMEM ? -ENOMEM : -EINVAL;
	}
	return 0;
}
#else
/* HIP 5.2 has no call that lists a module's functions. */
int hip__module_functions(void *ctx, void *module, char ***names, size_t *n)
{
	*names = NULL;
	*n = 0;
	return -ENOTSUP;
}

int hip__function_attrs(void *ctx, void *function, struct backend_fn_attrs *attrs)
{
	static const struct {
		hipFunction_attribute attr;
		size_t offset;
		bool wide;
	} fields[] = {
		{HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
			offsetof(struct backend_fn_attrs, max_threads_per_block), false},
		{HIP_FUNC_ATTRIBUTE_NUM_REGS, offsetof(struct backend_fn_attrs, num_regs), false},
		{HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
			offsetof(struct backend_fn_attrs, shared_size_bytes), true},
		{HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
			offsetof(struct backend_fn_attrs, max_dynamic_shared_size_bytes), true},
		{HIP_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
			offsetof(struct backend_fn_attrs, const_size_bytes), true},
		{HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
			offsetof(struct backend_fn_attrs, local_size_bytes), true},
		{HIP_FUNC_ATTRIBUTE_PTX_VERSION, offsetof(struct backend_fn_attrs, ptx_version),
			false},
		{HIP_FUNC_ATTRIBUTE_BINARY_VERSION,
			offsetof(struct backend_fn_attrs, binary_version), false},
	};
	struct backend_fn_attrs a = {0};

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		char *at = (char *)&a + fields[i].offset;
		int v = 0;
		hipError_t e = hipFuncGetAttribute(&v, fields[i].attr, (hipFunction_t)function);

		/* Some attributes are not reported on every ROCm: leave those 0. */
		if (e != hipSuccess)
			continue;
		if (fields[i].wide) {
			uint64_t w = (uint64_t)(unsigned)v;

			memcpy(at, &w, sizeof(w));
		} else {
			uint32_t n = (uint32_t)v;

			memcpy(at, &n, sizeof(n));
		}
	}
	*attrs = a;
	return 0;
}

/* AMD has no opt-in: a launch may use the block's whole LDS. */
int hip__function_max_shared(void *ctx, void *function, uint64_t bytes)
{
	struct hip *h = ctx;

	return h->shared_optin && bytes > h->shared_optin ? -EINVAL : 0;
}
#endif

/* ---- a function's parameters, for the daemon's check of a launch's arguments ---- */

int hip__function_param(void *ctx, void *function, unsigned index, size_t *offset, size_t *size)
{
#ifdef SSEQ_HIP_NVIDIA
	hipError_t e = hipFuncGetParamInfo((hipFunction_t)function, index, offset, size);

	if (e == hipSuccess)
		return 0;
	/* Past the last parameter; anything else (an old driver, a function the runtime
	 * cannot describe) leaves the parameters unknown. */
	if (e == hipErrorInvalidValue)
		return -ENOENT;
	log_debug("hip", "function %p: parameter %u unknown: %s", function, index,
		hipGetErrorName(e));
	return -ENOTSUP;
#else
	/* HIP 5.2 has no call that describes a function's parameters. */
	return -ENOTSUP;
#endif
}

/* ---- occupancy, for the daemon's check of a cooperative grid ---- */

int hip__function_occupancy(
	void *ctx, void *function, uint32_t threads, uint64_t shared, uint32_t *blocks)
{
	int n = 0;
	hipError_t e = hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(
		&n, (hipFunction_t)function, (int)threads, (size_t)shared);

	(void)ctx;
	if (e != hipSuccess)
		return hip__errno(e);
	*blocks = n > 0 ? (uint32_t)n : 0;
	return 0;
}
