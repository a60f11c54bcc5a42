/* The handles libsseq gives applications. Daemon handles are per-session numbers, so two
 * connections hold the same ones; each connection XORs a tag of its own into the top 16
 * bits of the handles it returns and takes it out of those it sends, so another
 * connection's handle is told apart without a lookup and the wire keeps the daemon's. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#include "client.h"

#define TAG_SHIFT 48

/* The live connections of the process, for naming the owner of a handle given to the
 * wrong one. Only connect and close write it; a refusal reads it. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sseq *registry;
static uint16_t registry_next = 1;

static struct sseq *registry_find(uint16_t tag)
{
	for (struct sseq *o = registry; o; o = o->handle_next)
		if (o->handle_tag == tag)
			return o;
	return NULL;
}

void handles_register(struct sseq *s)
{
	pthread_mutex_lock(&registry_lock);
	/* The first tag no live connection has; tag 0 (handles as the daemon gave them,
	 * nothing checked) only with all 65535 in use. */
	for (unsigned tries = 0; tries < UINT16_MAX; tries++) {
		uint16_t tag = registry_next++;
		if (registry_next == 0)
			registry_next = 1;
		if (!registry_find(tag)) {
			s->handle_tag = tag;
			break;
		}
	}
	s->handle_next = registry;
	registry = s;
	s->handle_registered = true;
	pthread_mutex_unlock(&registry_lock);
}

void handles_unregister(struct sseq *s)
{
	if (!s->handle_registered)
		return;
	pthread_mutex_lock(&registry_lock);
	for (struct sseq **p = &registry; *p; p = &(*p)->handle_next)
		if (*p == s) {
			*p = s->handle_next;
			break;
		}
	pthread_mutex_unlock(&registry_lock);
	s->handle_registered = false;
}

uint64_t client_handle_out(struct sseq *s, uint64_t wire)
{
	if (wire == 0)
		return 0;
	/* A slot reused 65536 times: its handle's top bits are no longer just the tag, so
	 * a mismatch there no longer proves a handle foreign (see client_handle_in). */
	if (wire >> TAG_SHIFT)
		s->handle_wide = true;
	return wire ^ ((uint64_t)s->handle_tag << TAG_SHIFT);
}

int client_handle_in(struct sseq *s, uint64_t handle, const char *fn, uint64_t *wire)
{
	const uint16_t tag = (uint16_t)(handle >> TAG_SHIFT);

	if (tag != s->handle_tag && handle != 0 && tag != 0 && !s->handle_wide) {
		uint64_t session = 0;
		uint32_t device = 0;
		bool found;

		pthread_mutex_lock(&registry_lock);
		const struct sseq *o = registry_find(tag);
		found = o != NULL && o != s;
		if (found) {
			/* Set before it was registered and never changed after. */
			session = o->info.session;
			device = o->info.device_index;
		}
		pthread_mutex_unlock(&registry_lock);
		if (found)
			return client_fail(s, -EINVAL,
				"%s: handle %" PRIu64
				" belongs to another connection (session %" PRIu64
				" on device %u), not to this one (session %" PRIu64
				" on device %u)",
				fn, handle, session, device, s->info.session, s->info.device_index);
	}
	*wire = handle == 0 ? 0 : handle ^ ((uint64_t)s->handle_tag << TAG_SHIFT);
	return 0;
}

/* ---- names this connection gives new buffers itself (protocol 1.9) ----
 * A client-named handle on the wire: bit 31 set, the index (1 ..) in bits 0..30, a
 * generation in bits 32..46. The last index freed is named first, so indexes stay within
 * the most buffers held at once (the daemon refuses one past its handle limit); each
 * reuse bumps the index's generation, so a handle kept after its free names nothing. */

#define NAME_BIT 0x80000000u
#define NAME_GEN_MASK 0x7fffu

int client_name_take(struct sseq *s, uint64_t *wire)
{
	uint32_t i;

	if (s->name_free) {
		i = s->name_free - 1;
		s->name_free = s->names[i].next_free;
	} else {
		if (s->nnames == s->names_cap) {
			uint32_t cap = s->names_cap ? s->names_cap * 2 : 64;
			struct client_name *n = realloc(s->names, cap * sizeof(*n));
			if (!n)
				return client_fail(s, -ENOMEM, "out of memory naming a handle");
			s->names = n;
			s->names_cap = cap;
		}
		if (s->nnames >= NAME_BIT - 1)
			return client_fail(s, -ENOSPC, "every handle name is in use");
		i = s->nnames++;
		s->names[i].gen = 0;
	}
	s->names[i].gen = (uint16_t)((s->names[i].gen + 1) & NAME_GEN_MASK);
	s->names[i].live = true;
	*wire = ((uint64_t)s->names[i].gen << 32) | NAME_BIT | (i + 1);
	return 0;
}

void client_name_put(struct sseq *s, uint64_t wire)
{
	const uint32_t low = (uint32_t)wire;
	const uint32_t i = (low & ~NAME_BIT) - 1;

	/* Only a live name of this connection, once: a second free of the same handle must
	 * not put its index on the free list twice. */
	if (!(low & NAME_BIT) || (wire >> 47) || i >= s->nnames || !s->names[i].live ||
		s->names[i].gen != (uint16_t)(wire >> 32))
		return;
	s->names[i].live = false;
	s->names[i].next_free = s->name_free;
	s->name_free = i + 1;
}

void client_names_free(struct sseq *s)
{
	free(s->names);
	s->names = NULL;
	s->nnames = s->names_cap = s->name_free = 0;
}
