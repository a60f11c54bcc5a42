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

#include <string.h>
#include <sys/mman.h>
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

/* ---- the small-copy pool ---- */

/* Pinned at bring-up, before any client: one hipHostRegister for the daemon's life (and
 * one again after a reset). Without it (no memory, no pin) every copy goes through the
 * client's arena, pinned as before. */
int hip__pool_start(struct hip *h)
{
	const size_t bytes = (size_t)h->cfg.small_copy_pool_mib << 20;
	const unsigned n = (unsigned)(bytes / HIP_POOL_SLOT);
	hipError_t e;
	void *p;

	if (!n)
		return 0;
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		-1, 0);
	h->pool_slots = calloc(n, sizeof(*h->pool_slots));
	h->pool_free = calloc(n, sizeof(*h->pool_free));
	if (p == MAP_FAILED || !h->pool_slots || !h->pool_free) {
		log_warn("hip",
			"no small-copy pool (%zu bytes): out of memory; every staging "
			"arena is pinned as it registers",
			bytes);
		goto none;
	}
	e = hipHostRegister(p, bytes, hipHostRegisterDefault);
	if (e != hipSuccess) {
		log_warn("hip",
			"no small-copy pool: hipHostRegister(%zu bytes): %s (%s); every staging "
			"arena is pinned as it registers",
			bytes, hipGetErrorName(e), hipGetErrorString(e));
		goto none;
	}
	h->pool = p;
	h->pool_bytes = bytes;
	h->pool_nslots = h->pool_nfree = n;
	for (unsigned i = 0; i < n; i++)
		h->pool_free[i] = (int32_t)(n - i); /* slot 1 on top */
	return 0;
none:
	if (p != MAP_FAILED)
		munmap(p, bytes);
	free(h->pool_slots);
	free(h->pool_free);
	h->pool_slots = NULL;
	h->pool_free = NULL;
	return 0;
}

/* At teardown, the device idle: whatever the lists still hold is dropped with them. */
void hip__pool_stop(struct hip *h)
{
	if (h->pool) {
		hipHostUnregister(h->pool); /* fails on a poisoned context: unmapped anyway */
		munmap(h->pool, h->pool_bytes);
	}
	free(h->pool_slots);
	free(h->pool_free);
	h->pool = NULL;
	h->pool_slots = NULL;
	h->pool_free = NULL;
	h->pool_nslots = h->pool_nfree = 0;
}

int32_t hip__pool_take(struct hip *h, uint64_t len)
{
	int32_t slot = 0;

	if (!h->pool || !len || len > HIP_POOL_SLOT)
		return 0;
	pthread_mutex_lock(&h->pool_mu);
	if (h->pool_nfree)
		slot = h->pool_free[--h->pool_nfree];
	pthread_mutex_unlock(&h->pool_mu);
	if (slot) {
		h->pool_slots[slot - 1] = (struct hip_pool_slot){0};
		atomic_fetch_add_explicit(&h->pool_copies, 1, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&h->pool_misses, 1, memory_order_relaxed);
	}
	return slot;
}

void hip__pool_put(struct hip *h, int32_t slot)
{
	pthread_mutex_lock(&h->pool_mu);
	h->pool_free[h->pool_nfree++] = slot;
	pthread_mutex_unlock(&h->pool_mu);
}

/* Loop thread: the slot of a copy launched at seq, for st's next record. */
void hip__pool_append(struct hip *h, struct hip_stream *st, int32_t slot, uint64_t seq)
{
	h->pool_slots[slot - 1].seq = seq;
	h->pool_slots[slot - 1].next = 0;
	if (st->pool_tail)
		h->pool_slots[st->pool_tail - 1].next = slot;
	else
		st->pool_head = slot;
	st->pool_tail = slot;
}

/* Loop thread, at a record at `through`: st's slots of copies up to it, as a list. */
int32_t hip__pool_cut(struct hip *h, struct hip_stream *st, uint64_t through)
{
	int32_t head = st->pool_head, last = 0, x = head;

	while (x && h->pool_slots[x - 1].seq <= through) {
		last = x;
		x = h->pool_slots[x - 1].next;
	}
	if (!last)
		return 0;
	h->pool_slots[last - 1].next = 0;
	st->pool_head = x;
	if (!x)
		st->pool_tail = 0;
	return head;
}

/* The copies on the list are complete (their event was reached, or failed): each D2H's
 * bytes go to the client's range, then the slots are free. Before the completion queue
 * hears of the event, so a client never sees its copy complete before its bytes. After a
 * failure (status < 0: the core fails them all) the client's range is left as it was.
 * A client asleep on a D2H's word goes in `wakes`, woken once the report is pushed. */
void hip__pool_finish(struct hip *h, int32_t list, int status, struct done_wakes *wakes)
{
	int32_t x = list;

	while (x) {
		const struct hip_pool_slot *s = &h->pool_slots[x - 1];

		if (s->out && status == 0) {
			memcpy(s->out, hip__pool_addr(h, x), s->len);
			if (s->done_word)
				done_word_deliver(
					s->done_word, s->done_tag, s->done_written, wakes);
		}
		x = s->next;
	}
	pthread_mutex_lock(&h->pool_mu);
	for (x = list; x; x = h->pool_slots[x - 1].next)
		h->pool_free[h->pool_nfree++] = x;
	pthread_mutex_unlock(&h->pool_mu);
}

void hip__counters(void *ctx, struct backend_counters *out)
{
	struct hip *h = ctx;

	out->small_copies = atomic_load_explicit(&h->pool_copies, memory_order_relaxed);
	out->small_copies_unpooled = atomic_load_explicit(&h->pool_misses, memory_order_relaxed);
	out->arenas_pinned = atomic_load_explicit(&h->pins_done, memory_order_relaxed);
	out->calls_on_loop = atomic_load_explicit(&h->calls_here, memory_order_relaxed);
	out->submit_wakeups = atomic_load_explicit(&h->thread_wakes, memory_order_relaxed);
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
		if (e == hipSuccess)
			atomic_fetch_add_explicit(&h->pins_done, 1, memory_order_relaxed);
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
	/* With the small-copy pool, nothing needs the pin yet: pinning stalls the device's
	 * other work, so it waits for a copy too large for the pool. */
	if (h->pool) {
		h->staging[h->nstaging++] = (struct hip_staging){addr, size, HIP_PIN_LAZY};
		atomic_fetch_add(&h->pins_lazy, 1);
	} else {
		h->staging[h->nstaging++] = (struct hip_staging){addr, size, HIP_PIN_PENDING};
		atomic_fetch_add(&h->pins_pending, 1);
		pthread_cond_broadcast(&h->staging_cond);
	}
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

	if (!atomic_load_explicit(&h->pins_pending, memory_order_acquire) &&
		!atomic_load_explicit(&h->pins_lazy, memory_order_acquire))
		return;
	pthread_mutex_lock(&h->staging_mu);
	x = hip_staging_find(h, p);
	if (x && x->state == HIP_PIN_LAZY) {
		/* The range's first copy the pool does not take: pin it now. */
		x->state = HIP_PIN_PENDING;
		atomic_fetch_sub(&h->pins_lazy, 1);
		atomic_fetch_add(&h->pins_pending, 1);
		pthread_cond_broadcast(&h->staging_cond);
	}
	while ((x = hip_staging_find(h, p)) &&
		(x->state == HIP_PIN_PENDING || x->state == HIP_PIN_BUSY))
		pthread_cond_wait(&h->staging_cond, &h->staging_mu);
	pthread_mutex_unlock(&h->staging_mu);
}

void hip__staging_repin(struct hip *h)
{
	unsigned lazy = 0;

	pthread_mutex_lock(&h->staging_mu);
	/* One never pinned stays so: it waits for its first large copy as before. */
	for (size_t i = 0; i < h->nstaging; i++)
		if (h->staging[i].state == HIP_PIN_LAZY)
			lazy++;
		else
			h->staging[i].state = HIP_PIN_PENDING;
	atomic_store(&h->pins_lazy, lazy);
	atomic_store(&h->pins_pending, (unsigned)h->nstaging - lazy);
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
	else if (x->state == HIP_PIN_LAZY)
		atomic_fetch_sub(&h->pins_lazy, 1);
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
