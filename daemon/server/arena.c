/* A bump allocator for protobuf-c: the daemon unpacks every frame into one, so a
 * pipelined request costs no malloc in the steady state. */
#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_CHUNK 16384u

struct arena_chunk {
	struct arena_chunk *next;
	size_t size;
	max_align_t data[];
};

static void *arena_pb_alloc(void *data, size_t size)
{
	return arena_alloc(data, size);
}

static void arena_pb_free(void *data, void *ptr)
{
	/* Freed all at once by arena_reset(). */
}

void arena_init(struct arena *a)
{
	*a = (struct arena){
		.pb = {.alloc = arena_pb_alloc, .free = arena_pb_free, .allocator_data = a},
	};
}

void *arena_alloc(struct arena *a, size_t size)
{
	size_t need = (size + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	struct arena_chunk *c = a->head;

	if (!c || a->used + need > c->size) {
		size_t csize = need > ARENA_CHUNK ? need : ARENA_CHUNK;
		c = malloc(sizeof(*c) + csize);
		if (!c)
			return NULL;
		c->size = csize;
		c->next = a->head;
		a->head = c;
		a->used = 0;
	}
	void *p = (char *)c->data + a->used;
	a->used += need;
	return p;
}

char *arena_strdup(struct arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = arena_alloc(a, n);
	if (d)
		memcpy(d, s, n);
	return d;
}

char *arena_printf(struct arena *a, const char *fmt, ...)
{
	va_list ap;
	int n;
	char *d;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	d = arena_alloc(a, (size_t)n + 1);
	if (!d)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(d, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return d;
}

void arena_reset(struct arena *a)
{
	struct arena_chunk *c = a->head;

	if (!c)
		return;
	/* Keep the newest chunk (the largest one needed lately); free the rest. */
	while (c->next) {
		struct arena_chunk *old = c->next;
		c->next = old->next;
		free(old);
	}
	a->used = 0;
}

void arena_finish(struct arena *a)
{
	while (a->head) {
		struct arena_chunk *c = a->head;
		a->head = c->next;
		free(c);
	}
	a->used = 0;
}
