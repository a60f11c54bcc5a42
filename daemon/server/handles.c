/* A session's handle table: slots with a generation, reused through a free list; a handle
 * is the slot's index + 1 in its low 32 bits and the slot's generation in the high ones.
 * Releasing what a session held goes through each kind's registered release, so that the
 * table knows no kind's object. */
#include "handles.h"

#include <errno.h>
#include <stdlib.h>

#include "session-private.h"

/* Set once when the server starts (server_init), on the loop thread. */
static handles_release_fn *handles_release[HANDLE_KINDS];

static uint64_t slot_handle(uint32_t index, uint32_t gen)
{
	return ((uint64_t)gen << 32) | (index + 1);
}

int handles_new(struct session *s, enum handle_kind kind, void *obj, uint64_t *handle)
{
	uint32_t i;

	if (s->free_slot) {
		i = s->free_slot - 1;
		s->free_slot = s->slots[i].next_free;
	} else {
		if ((s->nslots & (s->nslots - 1)) == 0) {
			uint32_t cap = s->nslots ? s->nslots * 2 : 16;
			struct handle_slot *n = realloc(s->slots, cap * sizeof(*n));
			if (!n)
				return -ENOMEM;
			s->slots = n;
		}
		i = s->nslots++;
		s->slots[i].gen = 1;
	}
	s->slots[i].kind = kind;
	s->slots[i].obj = obj;
	s->nhandles++;
	*handle = slot_handle(i, s->slots[i].gen);
	return 0;
}

void handles_drop(struct session *s, uint64_t handle)
{
	uint32_t i = (uint32_t)(handle & 0xffffffffu) - 1;

	s->slots[i].kind = HANDLE_FREE;
	s->slots[i].obj = NULL;
	s->slots[i].gen++;
	s->slots[i].next_free = s->free_slot;
	s->free_slot = i + 1;
	s->nhandles--;
}

uint64_t handles_count(const struct session *s)
{
	return s->nhandles;
}

void *handles_lookup(const struct session *s, uint64_t handle, enum handle_kind kind)
{
	uint32_t low = (uint32_t)(handle & 0xffffffffu);
	const struct handle_slot *slot;

	if (low == 0 || low > s->nslots)
		return NULL;
	slot = &s->slots[low - 1];
	if (slot->kind != kind || slot->gen != (uint32_t)(handle >> 32))
		return NULL;
	return slot->obj;
}

bool handles_lost(const struct session *s, uint64_t handle)
{
	uint32_t low = (uint32_t)(handle & 0xffffffffu);

	return low && low <= s->nslots && s->slots[low - 1].kind == HANDLE_LOST &&
		s->slots[low - 1].gen == (uint32_t)(handle >> 32);
}

void handles_on_release(enum handle_kind kind, handles_release_fn *release)
{
	handles_release[kind] = release;
}

void handles_foreach(
	const struct session *s, enum handle_kind kind, void (*fn)(void *obj, void *arg), void *arg)
{
	for (uint32_t i = 0; i < s->nslots; i++)
		if (s->slots[i].kind == kind)
			fn(s->slots[i].obj, arg);
}

void handles_release_all(struct session *s)
{
	for (unsigned pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < s->nslots; i++) {
			struct handle_slot *slot = &s->slots[i];
			handles_release_fn *release = handles_release[slot->kind];

			if (release && release(s, slot->obj, pass))
				handles_drop(s, slot_handle(i, slot->gen));
		}
	}
}
