/* The sim's device memory: host memory handed out in SIM_ALIGN size classes, kept in an
 * address-sorted map for the detector to find any address in, and a cache of released
 * blocks that are reused newest first so that a use-after-free touches live data. */
#include "sim-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* What the core's addresses and kernels may assume of device memory. */
#define SIM_ALIGN 256
/* Blocks this large come from mmap: already zero and only committed when touched. */
#define SIM_MAP_MIN (64u << 10)
/* Released blocks stay cached for reuse (that is what makes a use-after-free visible);
 * past this many cached bytes the oldest idle ones go back to the host. */
#define SIM_CACHE_MAX (1ull << 30)

/* Whether a launched op on b has not run yet; names it in *p. */
static bool sim_block_pending(struct sim *sim, const struct sim_block *b, struct seq_point *p)
{
	for (uint32_t x = 0; x < sim->nstreams; x++) {
		struct seq_point u = {x, b->used[x]};

		if (u.seq && !sim_executed(sim, u)) {
			if (p)
				*p = u;
			return true;
		}
	}
	return false;
}

/* Index of the first block whose address is greater than addr. */
static size_t sim_block_upper(const struct sim *sim, uint64_t addr)
{
	size_t lo = 0, hi = sim->nblocks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (sim->blocks[mid]->addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The block holding [addr, addr + size), live or cached, or NULL. */
struct sim_block *sim_block_find(const struct sim *sim, uint64_t addr, uint64_t size)
{
	size_t i = sim_block_upper(sim, addr);
	struct sim_block *b;

	if (i == 0)
		return NULL;
	b = sim->blocks[i - 1];
	if (addr - b->addr > b->size || size > b->size - (addr - b->addr))
		return NULL;
	return b;
}

static unsigned sim_class_bucket(uint64_t size)
{
	return (unsigned)(((size / SIM_ALIGN) * 0x9e3779b97f4a7c15ull) >> 58) % SIM_CLASS_BUCKETS;
}

static void sim_cache_push(struct sim *sim, struct sim_block *b)
{
	struct sim_block **head = &sim->bucket[sim_class_bucket(b->size)];

	b->age_prev = NULL;
	b->age_next = sim->newest;
	if (sim->newest)
		sim->newest->age_prev = b;
	else
		sim->oldest = b;
	sim->newest = b;
	b->class_prev = NULL;
	b->class_next = *head;
	if (*head)
		(*head)->class_prev = b;
	*head = b;
	sim->cached_bytes += b->size;
}

static void sim_cache_remove(struct sim *sim, struct sim_block *b)
{
	if (b->age_prev)
		b->age_prev->age_next = b->age_next;
	else
		sim->newest = b->age_next;
	if (b->age_next)
		b->age_next->age_prev = b->age_prev;
	else
		sim->oldest = b->age_prev;
	if (b->class_prev)
		b->class_prev->class_next = b->class_next;
	else
		sim->bucket[sim_class_bucket(b->size)] = b->class_next;
	if (b->class_next)
		b->class_next->class_prev = b->class_prev;
	sim->cached_bytes -= b->size;
}

static void sim_block_free(struct sim_block *b)
{
	if (b->mapped)
		munmap((void *)(uintptr_t)b->addr, b->size);
	else
		free((void *)(uintptr_t)b->addr);
	free(b);
}

/* Hand the oldest cached blocks back to the host while the cache is over its limit; a
 * block an op still uses stays (its memory must outlive the op). */
static void sim_cache_trim(struct sim *sim)
{
	while (sim->cached_bytes > SIM_CACHE_MAX && sim->oldest &&
		!sim_block_pending(sim, sim->oldest, NULL)) {
		struct sim_block *b = sim->oldest;
		size_t i = sim_block_upper(sim, b->addr) - 1;

		sim_cache_remove(sim, b);
		memmove(&sim->blocks[i], &sim->blocks[i + 1],
			(sim->nblocks - i - 1) * sizeof(*sim->blocks));
		sim->nblocks--;
		sim_block_free(b);
	}
}

static int sim_block_new(struct sim *sim, uint64_t size, struct sim_block **out)
{
	struct sim_block *b;
	void *mem;
	size_t i;

	if (sim->nblocks == sim->cap) {
		size_t cap = sim->cap ? 2 * sim->cap : 64;
		struct sim_block **blocks = realloc(sim->blocks, cap * sizeof(*blocks));

		if (!blocks)
			return -ENOMEM;
		sim->blocks = blocks;
		sim->cap = cap;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	/* Fresh device memory reads as zeros, like the stale input of the seed bug. */
	if (size >= SIM_MAP_MIN) {
		mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED)
			mem = NULL;
		b->mapped = true;
	} else {
		mem = aligned_alloc(SIM_ALIGN, size);
		if (mem)
			memset(mem, 0, size);
	}
	if (!mem) {
		free(b);
		return -ENOMEM;
	}
	b->addr = (uint64_t)(uintptr_t)mem;
	b->size = size;
	i = sim_block_upper(sim, b->addr);
	memmove(&sim->blocks[i + 1], &sim->blocks[i], (sim->nblocks - i) * sizeof(*sim->blocks));
	sim->blocks[i] = b;
	sim->nblocks++;
	*out = b;
	return 0;
}

int sim_mem_alloc(void *ctx, uint64_t size, uint64_t *addr)
{
	struct sim *sim = ctx;
	struct sim_block *b;
	uint64_t class;
	int r = 0;

	if (size > sim->cfg.memory)
		return -ENOMEM;
	class = size ? (size + SIM_ALIGN - 1) & ~(uint64_t)(SIM_ALIGN - 1) : SIM_ALIGN;
	pthread_mutex_lock(&sim->lock);
	if (class > sim->cfg.memory - sim->used_bytes) {
		r = -ENOMEM;
		goto out;
	}
	/* Reuse the most recently released block of the class first: an op still touching
	 * it then scribbles over the new owner's data, as a reused GPU allocation would. */
	for (b = sim->bucket[sim_class_bucket(class)]; b; b = b->class_next)
		if (b->size == class)
			break;
	if (b) {
		sim_cache_remove(sim, b);
	} else {
		r = sim_block_new(sim, class, &b);
		if (r < 0)
			goto out;
	}
	b->live = true;
	b->base = 0; /* bound to its base by mem_owner, right after this */
	atomic_fetch_add(&b->gen, 1);
	b->writer = (struct seq_point){0, 0};
	memset(b->readers, 0, sizeof(b->readers));
	b->reader_mask = 0;
	sim->used_bytes += class;
	*addr = b->addr;
out:
	pthread_mutex_unlock(&sim->lock);
	return r;
}

void sim_mem_release(void *ctx, uint64_t addr, uint64_t size)
{
	struct sim *sim = ctx;
	struct sim_block *b;
	struct seq_point p;

	pthread_mutex_lock(&sim->lock);
	b = sim_block_find(sim, addr, 0);
	if (!b || b->addr != addr || !b->live) {
		sim_report(sim, (struct seq_point){0, 0}, addr,
			"release of memory %#" PRIx64 " that is not allocated", addr);
		goto out;
	}
	if (sim_block_pending(sim, b, &p))
		sim_report(sim, p, addr,
			"memory %#" PRIx64 " released while %" PRIu32 ":%" PRIu64 " still uses it",
			addr, p.stream, p.seq);
	b->live = false;
	atomic_fetch_add(&b->gen, 1);
	sim->used_bytes -= b->size;
	sim_cache_push(sim, b);
	sim_cache_trim(sim);
out:
	pthread_mutex_unlock(&sim->lock);
}

/* Bound at allocation: a stale view of an earlier owner is then found even when it is the
 * memory's first use (bound at first use, it would pass as the owner, and the new owner's
 * first op be reported instead). */
void sim_mem_owner(void *ctx, uint64_t addr, uint64_t base)
{
	struct sim *sim = ctx;
	struct sim_block *b;

	pthread_mutex_lock(&sim->lock);
	b = sim_block_find(sim, addr, 0);
	if (b && b->live && b->addr == addr)
		b->base = base;
	pthread_mutex_unlock(&sim->lock);
}

void sim_mem_finish(struct sim *sim)
{
	for (size_t i = 0; i < sim->nblocks; i++)
		sim_block_free(sim->blocks[i]);
	free(sim->blocks);
}
