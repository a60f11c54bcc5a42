/* A bump allocator for one frame's worth of protobuf-c objects: unpacking a request or
 * building a reply allocates from it, and one reset frees everything at once. */
#ifndef SSEQ_ARENA_H
#define SSEQ_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

struct arena_chunk;

struct arena {
	struct arena_chunk *head; /* current chunk; older ones follow */
	size_t used;
	ProtobufCAllocator pb; /* hands out arena memory to protobuf-c */
};

void arena_init(struct arena *a);
void *arena_alloc(struct arena *a, size_t size);
char *arena_strdup(struct arena *a, const char *s);
char *arena_printf(struct arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Free every chunk but the newest, which is kept for the next frame. */
void arena_reset(struct arena *a);
void arena_finish(struct arena *a);

#endif
