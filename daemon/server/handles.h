/* A session's handle table: per-session numbers with a generation, so that another
 * session's handle, or a stale one, is simply unknown (I10). Each kind of object registers
 * what releases it when its session goes. Two arrays: the slots the daemon picks, and the
 * ones a client names itself (sseq.proto's Alloc.handle), so that it can use a new buffer
 * in the same send as its Alloc. */
#ifndef SSEQ_HANDLES_H
#define SSEQ_HANDLES_H

#include <stdbool.h>
#include <stdint.h>

struct session;

enum handle_kind {
	HANDLE_FREE,
	HANDLE_BUFFER,
	HANDLE_STAGING,
	HANDLE_MODULE,
	/* A buffer, slice or module that lived on a device context that is gone (a device
	 * reset restarted the daemon in place): using it says so; freeing it just drops it. */
	HANDLE_LOST,
	/* A client-named handle whose Alloc or Slice was refused: its object is the refusal's
	 * message (at most HANDLES_REFUSED_MAX bytes, the slot's own copy), which every use
	 * quotes; freeing it, or naming it again, drops it. Not a live handle: it counts
	 * against no limit. */
	HANDLE_REFUSED,
	HANDLE_KINDS
};

/* Bit 31 of a handle's low word marks a client-named one: bits 0..30 are its index
 * (1..the session's handle limit), bits 32..46 a generation of the client's choosing, bits
 * 47..63 zero. A daemon-picked handle never has bit 31 set. */
#define HANDLES_NAMED_BIT 0x80000000u
#define HANDLES_NAMED_GEN_MAX 0x7fffu
/* The client-named handle of index (0 ..) and generation gen. */
static inline uint64_t handles_name(uint32_t index, uint32_t gen)
{
	return ((uint64_t)gen << 32) | HANDLES_NAMED_BIT | (index + 1);
}
/* The highest index a client may name under a handle limit of `limit` (31 bits). */
static inline uint32_t handles_name_max(unsigned limit)
{
	return limit < HANDLES_NAMED_BIT - 1 ? (uint32_t)limit : HANDLES_NAMED_BIT - 1;
}
/* The most of a refusal's message a refused name keeps (with its NUL). */
#define HANDLES_REFUSED_MAX 200u

struct handle_slot {
	enum handle_kind kind;
	uint32_t gen;
	uint32_t next_free;
	void *obj;
};

/* A session's handle table, embedded in its session (session.c) and changed by this
 * module alone: the slots the daemon picks, reused through a free list, and the ones the
 * client names, by index - 1, grown to the highest index named so far (never past the
 * session's handle limit). A zeroed table is an empty one. */
struct handle_table {
	struct handle_slot *slots;
	uint32_t nslots, free_slot; /* free_slot: index + 1, 0 = none */
	struct handle_slot *named;
	uint32_t nnamed;
	uint32_t nhandles; /* live ones, for --client-handle-limit */
};

/* A new handle in t for obj: 0 with *handle, or -ENOMEM. */
int handles_new(struct handle_table *t, enum handle_kind kind, void *obj, uint64_t *handle);
/* Whether `name` may name a new object in t: 0; -EINVAL if it is not of a client-named
 * handle's form or its index is above max_index; -EEXIST if its index names a live
 * handle (a lost one included; a refused name may be named again). */
int handles_check_name(const struct handle_table *t, uint64_t name, uint32_t max_index);
/* The client-named handle `name` in t for obj (handles_check_name's refusals, or
 * -ENOMEM): a refused name it replaces is dropped. */
int handles_claim(struct handle_table *t, enum handle_kind kind, void *obj, uint64_t name,
	uint32_t max_index);
/* `name` (of a client-named handle's form, its index free) is held as refused, with a
 * copy of `message` cut to HANDLES_REFUSED_MAX: 0, or as handles_claim. */
int handles_refuse(struct handle_table *t, uint64_t name, uint32_t max_index, const char *message);
/* The handle names nothing from now on; its slot goes to a later handles_new(), or its
 * index may be named again. */
void handles_drop(struct handle_table *t, uint64_t handle);
/* Live handles: each holds one against --client-handle-limit (account.c checks). Refused
 * names are none. */
uint64_t handles_count(const struct handle_table *t);
/* The object `handle` names in t if it is of `kind`, or NULL (HANDLE_REFUSED: the
 * refusal's message). */
void *handles_lookup(const struct handle_table *t, uint64_t handle, enum handle_kind kind);
/* Whether `handle` names a HANDLE_LOST slot of t. */
bool handles_lost(const struct handle_table *t, uint64_t handle);

/* What releases an object of a kind when its session s goes (obj's handle is dropped
 * after). Called on pass 0, then on pass 1 for what is left: false keeps obj for the next
 * pass (a buffer's base outlives its slices only as long as they hold it, I6). */
typedef bool handles_release_fn(struct session *s, void *obj, unsigned pass);
void handles_on_release(enum handle_kind kind, handles_release_fn *release);
/* Release every object t holds a handle of, each by its kind's release, as session s's
 * (lost handles only stay unknown; refused names are dropped). */
void handles_release_all(struct handle_table *t, struct session *s);
/* The table's memory freed (the session's last reference went). */
void handles_finish(struct handle_table *t);
/* fn(obj, arg) for every handle of `kind` that t holds, in handle order (daemon-picked
 * ones first). */
void handles_foreach(const struct handle_table *t, enum handle_kind kind,
	void (*fn)(void *obj, void *arg), void *arg);

/* The restart in place (session-handover.c) carries a table across as it is: the slots
 * the daemon picked, free ones included (their generations go on), and the client-named
 * ones in use. */
/* The daemon-picked slots, in index order: *n of them. */
const struct handle_slot *handles_picked(const struct handle_table *t, uint32_t *n);
/* The client-named slots, by index - 1 (those not in use HANDLE_FREE): *n of them. */
const struct handle_slot *handles_named(const struct handle_table *t, uint32_t *n);
/* Room in an empty t for n daemon-picked slots, free and of generation 0 until each is
 * set by handles_adopt_slot: 0 or -ENOMEM. */
int handles_adopt(struct handle_table *t, uint32_t n);
/* Slot i (below handles_adopt's n, each once, in increasing order) as it was: of kind
 * (HANDLE_FREE: onto the free list) and generation gen, holding obj. Its handle. */
uint64_t handles_adopt_slot(
	struct handle_table *t, uint32_t i, enum handle_kind kind, uint32_t gen, void *obj);

#endif
