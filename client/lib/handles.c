/* The handles libsseq gives applications. Daemon handles are per-session numbers, so two
 * connections hold the same ones; each connection XORs a tag of its own into the top 16
 * bits of the handles it returns and takes it out of those it sends, so another
 * connection's handle is told apart without a lookup and the wire keeps the daemon's. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>

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
