/* Staging arenas: memfd mappings shared with the daemon, the range allocator that
 * hands out space in them, and a connection's set of arenas. A range stays reserved
 * while copies in flight use it (refs) or while the application holds it
 * (sseq_host_alloc), and is reused only after both. Nothing here talks to the daemon:
 * registering an arena is a request (submit.c). */
#ifndef SSEQ_CLIENT_ARENAS_H
#define SSEQ_CLIENT_ARENAS_H

#include <stdbool.h>
#include <stdint.h>

#define STAGING_ALIGN 64

struct staging_range {
	uint64_t offset;
	uint64_t size;
	unsigned refs; /* copies in flight that read or write it */
	bool user; /* held by the application (sseq_host_alloc) */
};

struct staging_arena {
	struct staging_arena *next;
	uint8_t *base;
	uint64_t size;
	int fd; /* the memfd, or -1 for an arena over plain memory (tests) */
	uint64_t handle; /* the daemon's staging handle, 0 until registered */
	struct staging_range *ranges; /* sorted by offset, never overlapping */
	size_t nranges, cap;
	uint64_t used;
};

/* Set up the allocator over [base, base + size) without any memfd (tests, or a caller
 * that maps memory itself). */
void staging_arena_init(struct staging_arena *a, void *base, uint64_t size);
/* Create a sealed (F_SEAL_SHRINK) memfd of `size` bytes, map it shared and set up the
 * allocator over it. */
int staging_arena_create(uint64_t size, const char *label, struct staging_arena **out);
/* Unmap and close what staging_arena_create made, and free the range table. */
void staging_arena_destroy(struct staging_arena *a);
/* Free the range table of an arena from staging_arena_init. */
void staging_arena_finish(struct staging_arena *a);

/* Reserve `size` bytes (first fit, STAGING_ALIGN-aligned); *off is where. -ENOSPC if no
 * gap is large enough. The new range has no refs and is not user-held: the caller sets
 * one of them before it can be released. */
int staging_arena_reserve(struct staging_arena *a, uint64_t size, uint64_t *off);
/* The range containing [off, off + len), or NULL. */
struct staging_range *staging_arena_find(struct staging_arena *a, uint64_t off, uint64_t len);
/* Drop one reference or the user hold; the space becomes free when neither is left.
 * Returns true when it did. */
bool staging_range_unref(struct staging_arena *a, struct staging_range *r);
bool staging_range_unhold(struct staging_arena *a, struct staging_range *r);
/* Does [p, p + len) start inside this arena's mapping? */
bool staging_arena_contains(const struct staging_arena *a, const void *p);

/* One connection's arenas, in the order they were registered; the first is kept for
 * the connection's life. */
struct staging_set {
	struct staging_arena *arenas;
	uint64_t size; /* bytes of the first arena, and the least of any later one */
	uint64_t refs; /* range references held by requests in flight */
};

/* Reserve `len` bytes in the first arena with room, held by the application (user) or
 * by one request (refs = 1). -ENOSPC when none has room; *could_fit then says whether
 * one is large enough, so that waiting for copies in flight may free the space. */
int staging_set_reserve(struct staging_set *set, uint64_t len, bool user,
	struct staging_arena **out, uint64_t *off, bool *could_fit);
/* The same in arena a of the set only (-ENOSPC: no room there). */
int staging_set_reserve_in(
	struct staging_set *set, struct staging_arena *a, uint64_t len, bool user, uint64_t *off);
/* Append an arena (registered with the daemon) to the set, which then owns it. */
void staging_set_add(struct staging_set *set, struct staging_arena *a);
/* The arena whose mapping holds p, or NULL. */
struct staging_arena *staging_set_find(struct staging_set *set, const void *p);
/* Drop the reference a request held on the range starting at `off` of arena a. */
void staging_set_unref(struct staging_set *set, struct staging_arena *a, uint64_t off);
/* Unmap every arena (the daemon drops its own mappings with the session). */
void staging_set_destroy(struct staging_set *set);

#endif
