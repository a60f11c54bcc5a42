/* Code objects for the hip backend: the built-in kernels' image, loaded at create with
 * each kernel's function looked up once, and users' modules (LoadModule), loaded and
 * looked up on the loop thread and unloaded by the reaper. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
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
