/* Device memory for the hip backend: a caching pool by size class on the loop thread, and
 * the reaper thread that hands blocks (and unloaded modules) back to the device, since
 * hipFree synchronizes. Also the staging ranges registered for copies, and the pin thread
 * that pins them. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <sys/prctl.h>

#include "hip-internal.h"
#include "log.h"

/* ---- memory: a caching pool by size class ---- */

static uint64_t hip_class(uint64_t size, unsigned *cls)
{
	unsigned e;
	uint64_t step, c;

	if (size == 0)
		size = 1;
	if (size <= HIP_SMALL_MAX) {
		c = (size + HIP_ALIGN - 1) & ~(uint64_t)(HIP_ALIGN - 1);
		*cls = (unsigned)(c / HIP_ALIGN) - 1;
		return c;
	}
	/* size in (2^e, 2^(e+1)], e >= 12: steps of 2^(e-3). */
	e = 63u - (unsigned)__builtin_clzll(size - 1);
	step = 1ull << (e - 3);
	c = (size + step - 1) & ~(step - 1);
	*cls = HIP_SMALL_CLASSES + (e - 12) * HIP_CLASS_STEPS +
		(unsigned)((c - (1ull << e)) / step) - 1;
	return c;
}

static size_t hip_hash_slot(const struct hip *h, uint64_t addr)
{
	return (size_t)(((addr / HIP_ALIGN) * 0x9e3779b97f4a7c15ull) >> 20) & (h->nhash - 1);
}

struct hip_block *hip__block_find(const struct hip *h, uint64_t addr)
{
	struct hip_block *b;

	if (!h->nhash)
		return NULL;
	for (b = h->hash[hip_hash_slot(h, addr)]; b; b = b->hnext)
		if (b->addr == addr)
			return b;
	return NULL;
}

static int hip_block_insert(struct hip *h, struct hip_block *b)
{
	size_t slot;

	if (h->nblocks + 1 > h->nhash / 2) {
		size_t n = h->nhash ? 2 * h->nhash : 256;
		struct hip_block **t = calloc(n, sizeof(*t));

		if (!t)
			return -ENOMEM;
		for (size_t i = 0; i < h->nhash; i++) {
			struct hip_block *x = h->hash[i];

			while (x) {
				struct hip_block *next = x->hnext;
				size_t s =
					(size_t)(((x->addr / HIP_ALIGN) * 0x9e3779b97f4a7c15ull) >>
						20) &
					(n - 1);

				x->hnext = t[s];
				t[s] = x;
				x = next;
			}
		}
		free(h->hash);
		h->hash = t;
		h->nhash = n;
	}
	slot = hip_hash_slot(h, b->addr);
	b->hnext = h->hash[slot];
	h->hash[slot] = b;
	h->nblocks++;
	return 0;
}

static void hip_block_unlink(struct hip *h, struct hip_block *b)
{
	struct hip_block **p = &h->hash[hip_hash_slot(h, b->addr)];

	while (*p != b)
		p = &(*p)->hnext;
	*p = b->hnext;
	h->nblocks--;
}

/* Hand every cached block to the reaper: memory goes back to the device for a request
 * that no cached block can serve. */
static void hip_cache_reap(struct hip *h)
{
	struct hip_block *list = NULL;

	for (unsigned c = 0; c < HIP_NCLASSES; c++) {
		while (h->free_class[c]) {
			struct hip_block *b = h->free_class[c];

			h->free_class[c] = b->next_free;
			hip_block_unlink(h, b);
			b->next_free = list;
			list = b;
		}
	}
	h->cached_bytes = 0;
	if (!list)
		return;
	pthread_mutex_lock(&h->reap_mu);
	for (struct hip_block *b = list, *next; b; b = next) {
		next = b->next_free;
		b->next_free = h->reap_list;
		h->reap_list = b;
	}
	pthread_cond_signal(&h->reap_cond);
	pthread_mutex_unlock(&h->reap_mu);
}

static void *hip_reaper(void *arg)
{
	struct hip *h = arg;

	hipSetDevice(h->device);
	prctl(PR_SET_NAME, "sseq-reap");
	pthread_mutex_lock(&h->reap_mu);
	for (;;) {
		struct hip_block *list;

		struct hip_reap_module *mods;

		while (!h->reap_list && !h->reap_modules && !h->reap_stop)
			pthread_cond_wait(&h->reap_cond, &h->reap_mu);
		if (!h->reap_list && !h->reap_modules)
			break;
		list = h->reap_list;
		h->reap_list = NULL;
		mods = h->reap_modules;
		h->reap_modules = NULL;
		pthread_mutex_unlock(&h->reap_mu);
		while (mods) {
			struct hip_reap_module *next = mods->next;
			hipError_t e = hipModuleUnload(mods->module);

			if (e != hipSuccess)
				log_warn("hip", "hipModuleUnload failed: %s", hipGetErrorName(e));
			free(mods);
			mods = next;
		}
		while (list) {
			struct hip_block *next = list->next_free;
			hipError_t e = hipFree((void *)(uintptr_t)list->addr);

			if (e != hipSuccess)
				log_warn("hip", "hipFree(%#" PRIx64 ") failed: %s", list->addr,
					hipGetErrorName(e));
			free(list);
			list = next;
		}
		pthread_mutex_lock(&h->reap_mu);
	}
	pthread_mutex_unlock(&h->reap_mu);
	return NULL;
}

int hip__reaper_start(struct hip *h)
{
	int r = -pthread_create(&h->reaper, NULL, hip_reaper, h);

	if (r < 0)
		return r;
	h->reaper_started = true;
	return 0;
}

/* It finishes what was handed to it first. */
void hip__reaper_stop(struct hip *h)
{
	if (h->reaper_started) {
		pthread_mutex_lock(&h->reap_mu);
		h->reap_stop = true;
		pthread_cond_signal(&h->reap_cond);
		pthread_mutex_unlock(&h->reap_mu);
		pthread_join(h->reaper, NULL);
	}
	pthread_cond_destroy(&h->reap_cond);
	pthread_mutex_destroy(&h->reap_mu);
}

int hip__mem_alloc(void *ctx, uint64_t size, uint64_t *addr)
{
	struct hip *h = ctx;
	struct hip_block *b;
	unsigned cls;
	uint64_t csize;
	hipError_t e;
	void *p = NULL;

	if (size > HIP_MAX_ALLOC)
		return -ENOMEM;
	csize = hip_class(size, &cls);
	b = h->free_class[cls];
	if (b) {
		h->free_class[cls] = b->next_free;
		h->cached_bytes -= b->size;
		goto found;
	}
	e = hipMalloc(&p, csize);
	if (e == hipErrorOutOfMemory) {
		/* A larger cached block serves the request (release goes by its own class);
		 * failing that, the cache goes back to the device for the next attempt. */
		for (unsigned c = cls + 1; c < HIP_NCLASSES; c++) {
			b = h->free_class[c];
			if (b) {
				h->free_class[c] = b->next_free;
				h->cached_bytes -= b->size;
				goto found;
			}
		}
		if (h->cached_bytes) {
			log_notice("hip",
				"out of device memory for %" PRIu64 " bytes; returning "
				"%" PRIu64 " cached bytes to the device",
				size, h->cached_bytes);
			hip_cache_reap(h);
		}
	}
	if (e != hipSuccess)
		return hip__errno(e);
	b = calloc(1, sizeof(*b));
	if (b) {
		b->addr = (uint64_t)(uintptr_t)p;
		b->size = csize;
		b->cls = cls;
	}
	if (!b || hip_block_insert(h, b) < 0) {
		free(b);
		/* hipFree synchronizes, but only on a host allocation failure. */
		hipFree(p);
		return -ENOMEM;
	}
found:
	b->live = true;
	b->next_free = NULL;
	h->used_bytes += b->size;
	*addr = b->addr;
	return 0;
}

void hip__mem_release(void *ctx, uint64_t addr, uint64_t size)
{
	struct hip *h = ctx;
	struct hip_block *b = hip__block_find(h, addr);

	if (!b || !b->live) {
		char what[128];

		snprintf(what, sizeof(what),
			"release of device memory %#" PRIx64 " (%" PRIu64
			" bytes) that is not allocated",
			addr, size);
		log_err("hip", "%s", what);
		atomic_fetch_add(&h->findings, 1);
		if (h->finding)
			h->finding(h->finding_arg, what);
		return;
	}
	/* Newest first: a just-released block is the most likely to be warm. */
	b->live = false;
	b->next_free = h->free_class[b->cls];
	h->free_class[b->cls] = b;
	h->used_bytes -= b->size;
	h->cached_bytes += b->size;
}

/* At destroy, after the reaper stopped. */
void hip__mem_finish(struct hip *h)
{
	/* Live blocks too (scratch, or buffers the core still held): the device is idle. */
	for (size_t i = 0; i < h->nhash; i++) {
		struct hip_block *b = h->hash[i];

		while (b) {
			struct hip_block *next = b->hnext;

			hipFree((void *)(uintptr_t)b->addr);
			free(b);
			b = next;
		}
	}
	free(h->hash);
}

/* ---- staging: pinned off the loop ---- */

/* Pinned pages let copies run at DMA speed and keep hipMemcpyAsync asynchronous (from
 * pageable memory it stages, and blocks its caller until the copy is done). Pinning
 * takes about 0.5 ms a MiB; on the loop thread every session would wait for it, so the
 * pin thread does it and a copy through a range not pinned yet waits where it is
 * enqueued. With staging_mu held: the range holding p, or NULL. */
static struct hip_staging *hip_staging_find(struct hip *h, const void *p)
{
	for (size_t i = 0; i < h->nstaging; i++) {
		const char *a = h->staging[i].addr;

		if ((const char *)p >= a && (const char *)p < a + h->staging[i].size)
			return &h->staging[i];
	}
	return NULL;
}

static void *hip_pinner(void *arg)
{
	struct hip *h = arg;

	prctl(PR_SET_NAME, "sseq-pin");
	hipSetDevice(h->device);
	pthread_mutex_lock(&h->staging_mu);
	for (;;) {
		struct hip_staging *x = NULL;
		void *addr;
		size_t size;
		hipError_t e;

		for (size_t i = 0; i < h->nstaging && !x; i++)
			if (h->staging[i].state == HIP_PIN_PENDING)
				x = &h->staging[i];
		if (!x) {
			if (h->pin_stop)
				break;
			pthread_cond_wait(&h->staging_cond, &h->staging_mu);
			continue;
		}
		x->state = HIP_PIN_BUSY;
		addr = x->addr;
		size = x->size;
		pthread_mutex_unlock(&h->staging_mu);
		e = hipHostRegister(addr, size, hipHostRegisterDefault);
		if (e != hipSuccess)
			log_warn("hip",
				"hipHostRegister(%p, %zu): %s (%s): copies through this staging "
				"arena run from pageable memory",
				addr, size, hipGetErrorName(e), hipGetErrorString(e));
		pthread_mutex_lock(&h->staging_mu);
		/* Still there: an unregister waits for a busy pin. */
		x = hip_staging_find(h, addr);
		x->state = e == hipSuccess ? HIP_PIN_DONE : HIP_PIN_FAILED;
		atomic_fetch_sub(&h->pins_pending, 1);
		pthread_cond_broadcast(&h->staging_cond);
		/* A registration may be waiting for its answer (staging_ready). */
		cq_kick(h->cq);
	}
	pthread_mutex_unlock(&h->staging_mu);
	return NULL;
}

int hip__pinner_start(struct hip *h)
{
	int r = -pthread_create(&h->pinner, NULL, hip_pinner, h);

	if (r == 0)
		h->pinner_started = true;
	return r;
}

void hip__pinner_stop(struct hip *h)
{
	if (h->pinner_started) {
		pthread_mutex_lock(&h->staging_mu);
		h->pin_stop = true;
		pthread_cond_broadcast(&h->staging_cond);
		pthread_mutex_unlock(&h->staging_mu);
		pthread_join(h->pinner, NULL);
		h->pinner_started = false;
	}
	pthread_cond_destroy(&h->staging_cond);
	pthread_mutex_destroy(&h->staging_mu);
}

int hip__staging_register(void *ctx, void *addr, size_t size)
{
	struct hip *h = ctx;

	pthread_mutex_lock(&h->staging_mu);
	if (h->nstaging == h->capstaging) {
		size_t cap = h->capstaging ? 2 * h->capstaging : 16;
		struct hip_staging *v = realloc(h->staging, cap * sizeof(*v));

		if (!v) {
			pthread_mutex_unlock(&h->staging_mu);
			return -ENOMEM;
		}
		h->staging = v;
		h->capstaging = cap;
	}
	h->staging[h->nstaging++] = (struct hip_staging){addr, size, HIP_PIN_PENDING};
	atomic_fetch_add(&h->pins_pending, 1);
	pthread_cond_broadcast(&h->staging_cond);
	pthread_mutex_unlock(&h->staging_mu);
	return 0;
}

bool hip__staging_ready(void *ctx, void *addr)
{
	struct hip *h = ctx;
	struct hip_staging *x;
	bool ready;

	if (!atomic_load_explicit(&h->pins_pending, memory_order_acquire))
		return true;
	pthread_mutex_lock(&h->staging_mu);
	x = hip_staging_find(h, addr);
	ready = !x || (x->state != HIP_PIN_PENDING && x->state != HIP_PIN_BUSY);
	pthread_mutex_unlock(&h->staging_mu);
	return ready;
}

void hip__staging_wait(struct hip *h, const void *p)
{
	struct hip_staging *x;

	if (!atomic_load_explicit(&h->pins_pending, memory_order_acquire))
		return;
	pthread_mutex_lock(&h->staging_mu);
	while ((x = hip_staging_find(h, p)) &&
		(x->state == HIP_PIN_PENDING || x->state == HIP_PIN_BUSY))
		pthread_cond_wait(&h->staging_cond, &h->staging_mu);
	pthread_mutex_unlock(&h->staging_mu);
}

void hip__staging_repin(struct hip *h)
{
	pthread_mutex_lock(&h->staging_mu);
	for (size_t i = 0; i < h->nstaging; i++)
		h->staging[i].state = HIP_PIN_PENDING;
	atomic_store(&h->pins_pending, (unsigned)h->nstaging);
	pthread_cond_broadcast(&h->staging_cond);
	pthread_mutex_unlock(&h->staging_mu);
}

void hip__staging_unregister(void *ctx, void *addr, size_t size)
{
	struct hip *h = ctx;
	struct hip_staging *x;
	bool pinned;
	hipError_t e;

	pthread_mutex_lock(&h->staging_mu);
	while ((x = hip_staging_find(h, addr)) && x->addr == addr && x->state == HIP_PIN_BUSY)
		pthread_cond_wait(&h->staging_cond, &h->staging_mu);
	if (!x || x->addr != addr) {
		pthread_mutex_unlock(&h->staging_mu);
		log_warn("hip", "staging range %p (%zu bytes) was not registered", addr, size);
		return;
	}
	if (x->state == HIP_PIN_PENDING)
		atomic_fetch_sub(&h->pins_pending, 1); /* never pinned: nothing to undo */
	pinned = x->state == HIP_PIN_DONE;
	*x = h->staging[--h->nstaging];
	pthread_mutex_unlock(&h->staging_mu);
	if (!pinned)
		return;
	e = hipHostUnregister(addr);
	if (e != hipSuccess)
		log_warn("hip", "hipHostUnregister(%p, %zu) failed: %s", addr, size,
			hipGetErrorName(e));
}

/* At destroy: the ranges the server did not unregister. */
void hip__staging_finish(struct hip *h)
{
	for (size_t i = 0; i < h->nstaging; i++)
		if (h->staging[i].state == HIP_PIN_DONE)
			hipHostUnregister(h->staging[i].addr);
	free(h->staging);
}
