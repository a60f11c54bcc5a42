/* Staging arenas for libsseq: sealed memfd mappings the daemon maps too, a first-fit
 * range allocator over each, and the set of them a connection holds. Ranges are kept
 * sorted by offset so a pointer from the application resolves to its range by binary
 * search. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arenas.h"

void staging_arena_init(struct staging_arena *a, void *base, uint64_t size)
{
	memset(a, 0, sizeof(*a));
	a->base = base;
	a->size = size;
	a->fd = -1;
}

int staging_arena_create(uint64_t size, const char *label, struct staging_arena **out)
{
	int r;
	void *map = MAP_FAILED;
	struct staging_arena *a = NULL;
	int fd = memfd_create(label ? label : "sseq-staging", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) < 0 || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0) {
		r = -errno;
		goto fail;
	}
	/* Populated here, in the client: the daemon's pinning then finds the pages there
	 * instead of allocating and zeroing them while its loop waits. */
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (map == MAP_FAILED) {
		r = -errno;
		goto fail;
	}
	a = malloc(sizeof(*a));
	if (!a) {
		r = -ENOMEM;
		goto fail;
	}
	staging_arena_init(a, map, size);
	a->fd = fd;
	*out = a;
	return 0;
fail:
	if (map != MAP_FAILED)
		munmap(map, size);
	close(fd);
	return r;
}

void staging_arena_finish(struct staging_arena *a)
{
	free(a->ranges);
	a->ranges = NULL;
	a->nranges = a->cap = 0;
	a->used = 0;
}

void staging_arena_destroy(struct staging_arena *a)
{
	if (!a)
		return;
	staging_arena_finish(a);
	munmap(a->base, a->size);
	if (a->fd >= 0)
		close(a->fd);
	free(a);
}

static uint64_t align_up(uint64_t x)
{
	return (x + STAGING_ALIGN - 1) & ~(uint64_t)(STAGING_ALIGN - 1);
}

int staging_arena_reserve(struct staging_arena *a, uint64_t size, uint64_t *off)
{
	if (size == 0 || size > a->size)
		return -ENOSPC;
	if (a->nranges == a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : 32;
		struct staging_range *n = realloc(a->ranges, ncap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		a->ranges = n;
		a->cap = ncap;
	}
	uint64_t start = 0;
	size_t i;
	for (i = 0; i <= a->nranges; i++) {
		uint64_t end = i < a->nranges ? a->ranges[i].offset : a->size;
		start = align_up(start);
		if (start <= end && end - start >= size)
			break;
		if (i < a->nranges)
			start = a->ranges[i].offset + a->ranges[i].size;
	}
	if (i > a->nranges)
		return -ENOSPC;
	memmove(&a->ranges[i + 1], &a->ranges[i], (a->nranges - i) * sizeof(*a->ranges));
	a->ranges[i] = (struct staging_range){.offset = start, .size = size};
	a->nranges++;
	a->used += size;
	*off = start;
	return 0;
}

/* Index of the last range starting at or before off, or -1. */
static ssize_t range_index(const struct staging_arena *a, uint64_t off)
{
	size_t lo = 0, hi = a->nranges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (a->ranges[mid].offset <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (ssize_t)lo - 1;
}

struct staging_range *staging_arena_find(struct staging_arena *a, uint64_t off, uint64_t len)
{
	ssize_t i = range_index(a, off);
	if (i < 0)
		return NULL;
	struct staging_range *r = &a->ranges[i];
	if (off - r->offset > r->size || len > r->size - (off - r->offset))
		return NULL;
	return r;
}

static bool range_release_if_unused(struct staging_arena *a, struct staging_range *r)
{
	if (r->refs > 0 || r->user)
		return false;
	size_t i = (size_t)(r - a->ranges);
	a->used -= r->size;
	memmove(&a->ranges[i], &a->ranges[i + 1], (a->nranges - i - 1) * sizeof(*a->ranges));
	a->nranges--;
	return true;
}

bool staging_range_unref(struct staging_arena *a, struct staging_range *r)
{
	if (r->refs > 0)
		r->refs--;
	return range_release_if_unused(a, r);
}

bool staging_range_unhold(struct staging_arena *a, struct staging_range *r)
{
	r->user = false;
	return range_release_if_unused(a, r);
}

bool staging_arena_contains(const struct staging_arena *a, const void *p)
{
	uintptr_t b = (uintptr_t)p, base = (uintptr_t)a->base;
	return b >= base && b - base < a->size;
}

int staging_set_reserve_in(
	struct staging_set *set, struct staging_arena *a, uint64_t len, bool user, uint64_t *off)
{
	int r = staging_arena_reserve(a, len, off);
	if (r == 0) {
		struct staging_range *rg = staging_arena_find(a, *off, len);
		if (user) {
			rg->user = true;
		} else {
			rg->refs = 1;
			set->refs++;
		}
	}
	return r;
}

int staging_set_reserve(struct staging_set *set, uint64_t len, bool user,
	struct staging_arena **out, uint64_t *off, bool *could_fit)
{
	*could_fit = false;
	for (struct staging_arena *a = set->arenas; a; a = a->next) {
		int r = staging_set_reserve_in(set, a, len, user, off);
		if (r == 0) {
			*out = a;
			return 0;
		}
		if (r != -ENOSPC)
			return r;
		if (a->size >= len)
			*could_fit = true;
	}
	return -ENOSPC;
}

void staging_set_add(struct staging_set *set, struct staging_arena *a)
{
	struct staging_arena **tail = &set->arenas;
	while (*tail)
		tail = &(*tail)->next;
	*tail = a;
}

struct staging_arena *staging_set_find(struct staging_set *set, const void *p)
{
	for (struct staging_arena *a = set->arenas; a; a = a->next)
		if (staging_arena_contains(a, p))
			return a;
	return NULL;
}

void staging_set_unref(struct staging_set *set, struct staging_arena *a, uint64_t off)
{
	struct staging_range *r = staging_arena_find(a, off, 0);
	if (r && r->offset == off)
		staging_range_unref(a, r);
	set->refs--;
}

void staging_set_destroy(struct staging_set *set)
{
	while (set->arenas) {
		struct staging_arena *a = set->arenas;
		set->arenas = a->next;
		staging_arena_destroy(a);
	}
}
