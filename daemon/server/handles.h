/* A session's handle table: per-session numbers with a generation, so that another
 * session's handle, or a stale one, is simply unknown (I10). Each kind of object registers
 * what releases it when its session goes. */
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
	HANDLE_KINDS
};

struct handle_slot {
	enum handle_kind kind;
	uint32_t gen;
	uint32_t next_free;
	void *obj;
};

/* A new handle of s for obj: 0 with *handle, or -ENOMEM. */
int handles_new(struct session *s, enum handle_kind kind, void *obj, uint64_t *handle);
/* The handle names nothing from now on; its slot goes to a later handles_new(). */
void handles_drop(struct session *s, uint64_t handle);
/* Live handles: each holds one against --client-handle-limit (account.c checks). */
uint64_t handles_count(const struct session *s);
/* The object `handle` of s names if it is of `kind`, or NULL. */
void *handles_lookup(const struct session *s, uint64_t handle, enum handle_kind kind);
/* Whether `handle` names a HANDLE_LOST slot of s. */
bool handles_lost(const struct session *s, uint64_t handle);

/* What releases an object of a kind when its session goes (obj's handle is dropped after).
 * Called on pass 0, then on pass 1 for what is left: false keeps obj for the next pass (a
 * buffer's base outlives its slices only as long as they hold it, I6). */
typedef bool handles_release_fn(struct session *s, void *obj, unsigned pass);
void handles_on_release(enum handle_kind kind, handles_release_fn *release);
/* Release every object s holds a handle of, each by its kind's release (lost handles
 * only stay unknown). */
void handles_release_all(struct session *s);
/* fn(obj, arg) for every handle of `kind` that s holds, in handle order. */
void handles_foreach(const struct session *s, enum handle_kind kind,
	void (*fn)(void *obj, void *arg), void *arg);

#endif
