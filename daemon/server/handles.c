/* A session's handle table: slots with a generation, reused through a free list; a handle
 * is the slot's index + 1 in its low 32 bits and the slot's generation in the high ones.
 * Handles a client names (bit 31 set) have their own array, indexed by the name's index
 * and holding the name's generation; the client picks a free index. Releasing what a
 * session held goes through each kind's registered release, so that the table knows no
 * kind's object. */
#include "handles.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A refused name holds only its message, which handles_drop frees. */
static bool refused_release(struct session *s, void *obj, unsigned pass)
{
	return true;
}

/* The other kinds' are set once when the server starts (server_init). */
static handles_release_fn *handles_release[HANDLE_KINDS] = {[HANDLE_REFUSED] = refused_release};

static uint64_t slot_handle(uint32_t index, uint32_t gen)
{
	return ((uint64_t)gen << 32) | (index + 1);
}

/* The slot `handle` falls in (of either array), whatever it holds, or NULL. */
static inline struct handle_slot *slot_of(const struct handle_table *t, uint64_t handle)
{
	uint32_t low = (uint32_t)handle;

	/* Unsigned: 0 wraps past every bound. A daemon-picked index is below 2^31
	 * (handles_new), so a name never falls in the first array, nor a daemon-picked
	 * handle (bit 31 clear, wrapping past 2^31) in the second. */
	if (low - 1 < t->nslots)
		return &t->slots[low - 1];
	low -= HANDLES_NAMED_BIT;
	if (low - 1 < t->nnamed)
		return &t->named[low - 1];
	return NULL;
}

int handles_new(struct handle_table *t, enum handle_kind kind, void *obj, uint64_t *handle)
{
	uint32_t i;

	if (t->free_slot) {
		i = t->free_slot - 1;
		t->free_slot = t->slots[i].next_free;
	} else {
		/* Bit 31 marks the handles clients name: the daemon's stay below it (no
		 * handle limit comes near). */
		if (t->nslots >= HANDLES_NAMED_BIT - 1)
			return -ENOMEM;
		/* The capacity is the next power of two from 16 (handles_adopt keeps it so). */
		if ((t->nslots & (t->nslots - 1)) == 0) {
			uint32_t cap = t->nslots ? t->nslots * 2 : 16;
			struct handle_slot *n = realloc(t->slots, cap * sizeof(*n));
			if (!n)
				return -ENOMEM;
			t->slots = n;
		}
		i = t->nslots++;
		t->slots[i].gen = 1;
	}
	t->slots[i].kind = kind;
	t->slots[i].obj = obj;
	t->nhandles++;
	*handle = slot_handle(i, t->slots[i].gen);
	return 0;
}

int handles_check_name(const struct handle_table *t, uint64_t name, uint32_t max_index)
{
	uint32_t low = (uint32_t)name, index = low & ~HANDLES_NAMED_BIT;

	if (!(low & HANDLES_NAMED_BIT) || (name >> 47) != 0 || index == 0 || index > max_index)
		return -EINVAL;
	if (index <= t->nnamed) {
		enum handle_kind kind = t->named[index - 1].kind;

		if (kind != HANDLE_FREE && kind != HANDLE_REFUSED)
			return -EEXIST;
	}
	return 0;
}

/* Room for index i in the named array: grown by doubling, never past max_index. */
static int named_grow(struct handle_table *t, uint32_t i, uint32_t max_index)
{
	uint32_t cap = t->nnamed ? t->nnamed : 16;
	struct handle_slot *n;

	if (i < t->nnamed)
		return 0;
	while (cap <= i)
		cap *= 2; /* i < 2^31: no overflow */
	if (cap > max_index)
		cap = max_index; /* i < max_index (handles_check_name) */
	n = realloc(t->named, (size_t)cap * sizeof(*n));
	if (!n)
		return -ENOMEM;
	memset(n + t->nnamed, 0, (size_t)(cap - t->nnamed) * sizeof(*n)); /* HANDLE_FREE */
	t->named = n;
	t->nnamed = cap;
	return 0;
}

int handles_claim(
	struct handle_table *t, enum handle_kind kind, void *obj, uint64_t name, uint32_t max_index)
{
	uint32_t i = ((uint32_t)name & ~HANDLES_NAMED_BIT) - 1;
	struct handle_slot *slot;
	int r;

	if ((r = handles_check_name(t, name, max_index)) < 0 ||
		(r = named_grow(t, i, max_index)) < 0)
		return r;
	slot = &t->named[i];
	if (slot->kind == HANDLE_REFUSED)
		free(slot->obj); /* named again: the refusal is forgotten */
	*slot = (struct handle_slot){.kind = kind, .gen = (uint32_t)(name >> 32), .obj = obj};
	if (kind != HANDLE_REFUSED)
		t->nhandles++;
	return 0;
}

int handles_refuse(struct handle_table *t, uint64_t name, uint32_t max_index, const char *message)
{
	size_t n = strnlen(message, HANDLES_REFUSED_MAX - 1);
	char *copy = malloc(n + 1);
	int r;

	if (!copy)
		return -ENOMEM;
	memcpy(copy, message, n);
	copy[n] = '\0';
	if ((r = handles_claim(t, HANDLE_REFUSED, copy, name, max_index)) < 0)
		free(copy);
	return r;
}

void handles_drop(struct handle_table *t, uint64_t handle)
{
	uint32_t i = (uint32_t)(handle & 0xffffffffu) - 1;

	if (i & HANDLES_NAMED_BIT) {
		struct handle_slot *slot = &t->named[i & ~HANDLES_NAMED_BIT];

		/* The generation stays: the client picks the next one. */
		if (slot->kind == HANDLE_REFUSED)
			free(slot->obj);
		else
			t->nhandles--;
		slot->kind = HANDLE_FREE;
		slot->obj = NULL;
		return;
	}
	t->slots[i].kind = HANDLE_FREE;
	t->slots[i].obj = NULL;
	t->slots[i].gen++;
	t->slots[i].next_free = t->free_slot;
	t->free_slot = i + 1;
	t->nhandles--;
}

uint64_t handles_count(const struct handle_table *t)
{
	return t->nhandles;
}

void *handles_lookup(const struct handle_table *t, uint64_t handle, enum handle_kind kind)
{
	const struct handle_slot *slot = slot_of(t, handle);

	if (!slot || slot->kind != kind || slot->gen != (uint32_t)(handle >> 32))
		return NULL;
	return slot->obj;
}

bool handles_lost(const struct handle_table *t, uint64_t handle)
{
	const struct handle_slot *slot = slot_of(t, handle);

	return slot && slot->kind == HANDLE_LOST && slot->gen == (uint32_t)(handle >> 32);
}

void handles_on_release(enum handle_kind kind, handles_release_fn *release)
{
	handles_release[kind] = release;
}

void handles_foreach(const struct handle_table *t, enum handle_kind kind,
	void (*fn)(void *obj, void *arg), void *arg)
{
	for (uint32_t i = 0; i < t->nslots; i++)
		if (t->slots[i].kind == kind)
			fn(t->slots[i].obj, arg);
	for (uint32_t i = 0; i < t->nnamed; i++)
		if (t->named[i].kind == kind)
			fn(t->named[i].obj, arg);
}

/* One pass of handles_release_all over one array of t; handle() makes a slot's handle. */
static void release_pass(struct handle_table *t, struct session *s, struct handle_slot *slots,
	uint32_t n, uint64_t (*handle)(uint32_t index, uint32_t gen), unsigned pass)
{
	for (uint32_t i = 0; i < n; i++) {
		handles_release_fn *release = handles_release[slots[i].kind];

		if (release && release(s, slots[i].obj, pass))
			handles_drop(t, handle(i, slots[i].gen));
	}
}

void handles_release_all(struct handle_table *t, struct session *s)
{
	/* A slice and its base may be in either array: each pass covers both. */
	for (unsigned pass = 0; pass < 2; pass++) {
		release_pass(t, s, t->slots, t->nslots, slot_handle, pass);
		release_pass(t, s, t->named, t->nnamed, handles_name, pass);
	}
}

void handles_finish(struct handle_table *t)
{
	for (uint32_t i = 0; i < t->nnamed; i++)
		if (t->named[i].kind == HANDLE_REFUSED)
			free(t->named[i].obj);
	free(t->named);
	free(t->slots);
	t->named = t->slots = NULL;
	t->nnamed = t->nslots = 0;
}

const struct handle_slot *handles_picked(const struct handle_table *t, uint32_t *n)
{
	*n = t->nslots;
	return t->slots;
}

const struct handle_slot *handles_named(const struct handle_table *t, uint32_t *n)
{
	*n = t->nnamed;
	return t->named;
}

int handles_adopt(struct handle_table *t, uint32_t n)
{
	uint32_t cap = 16;

	/* As handles_new grows it: the next power of two from 16. */
	while (cap < n)
		cap *= 2;
	t->slots = calloc(cap, sizeof(*t->slots));
	if (!t->slots)
		return -ENOMEM;
	t->nslots = n;
	return 0;
}

uint64_t handles_adopt_slot(
	struct handle_table *t, uint32_t i, enum handle_kind kind, uint32_t gen, void *obj)
{
	struct handle_slot *sl = &t->slots[i];

	sl->gen = gen;
	sl->kind = kind;
	sl->obj = obj;
	if (kind == HANDLE_FREE) {
		sl->next_free = t->free_slot;
		t->free_slot = i + 1;
	} else {
		t->nhandles++;
	}
	return slot_handle(i, gen);
}
