/* What the loops of one sseqd share (loops.h): admission, session ids, the hand-off of
 * accepted connections (h2o's pattern: a locked list, a wake-up on empty to non-empty),
 * and the stop of the world a query reads every loop under. */
#include "loops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server.h"

int loops_init(struct loops *l, unsigned n)
{
	if (n < 1 || n > LOOPS_MAX)
		return -EINVAL;
	memset(l, 0, sizeof(*l));
	l->n = n;
	l->owner = -1;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	for (unsigned i = 0; i < n; i++)
		pthread_mutex_init(&l->m[i].inbox_lock, NULL);
	return 0;
}

void loops_finish(struct loops *l)
{
	for (unsigned i = 0; i < l->n; i++) {
		for (unsigned k = 0; k < l->m[i].ninbox; k++)
			close(l->m[i].inbox[k].fd);
		pthread_mutex_destroy(&l->m[i].inbox_lock);
		free(l->m[i].inbox);
	}
	free(l->uids);
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
	memset(l, 0, sizeof(*l));
}

/* Under l->lock, with another loop owning the world: wait for it as one parked. */
static void loops_park_locked(struct loops *l)
{
	const uint64_t epoch = l->epoch;

	l->parked++;
	pthread_cond_broadcast(&l->cond);
	while (l->epoch == epoch)
		pthread_cond_wait(&l->cond, &l->lock);
}

void loops_attach(struct loops *l, unsigned i, struct server *srv,
	void (*wake_handoff)(struct server *), void (*wake_park)(struct server *))
{
	pthread_mutex_lock(&l->lock);
	l->m[i].srv = srv;
	l->m[i].wake_handoff = wake_handoff;
	l->m[i].wake_park = wake_park;
	pthread_mutex_unlock(&l->lock);
}

void loops_detach(struct loops *l, unsigned i)
{
	struct loops_conn c;

	pthread_mutex_lock(&l->lock);
	while (l->owner >= 0 && (unsigned)l->owner != i)
		loops_park_locked(l);
	l->m[i].srv = NULL;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	while (loops_take(l, i, &c)) {
		close(c.fd);
		loops_leave(l, i, c.uid);
	}
}

static struct loops_uid *loops_uid(struct loops *l, uint32_t uid)
{
	for (unsigned i = 0; i < l->nuids; i++)
		if (l->uids[i].uid == uid)
			return &l->uids[i];
	return NULL;
}

/* Under l->lock: one more connection of uid; -ENOMEM when it cannot be counted. */
static int loops_count(struct loops *l, uint32_t uid)
{
	struct loops_uid *u = loops_uid(l, uid);

	if (!u) {
		if (l->nuids == l->capuids) {
			unsigned cap = l->capuids ? 2 * l->capuids : 8;
			struct loops_uid *p = realloc(l->uids, cap * sizeof(*p));

			if (!p)
				return -ENOMEM;
			l->uids = p;
			l->capuids = cap;
		}
		u = &l->uids[l->nuids++];
		*u = (struct loops_uid){.uid = uid};
	}
	u->n++;
	l->clients++;
	return 0;
}

const char *loops_admit(
	struct loops *l, const struct server_limits *lim, uint32_t uid, char *why, size_t size)
{
	const struct loops_uid *u;
	const char *no = NULL;

	pthread_mutex_lock(&l->lock);
	u = loops_uid(l, uid);
	if (l->clients >= lim->max_clients) {
		snprintf(why, size,
			"sseqd serves at most %u connections (--max-clients): try again later",
			lim->max_clients);
		no = why;
	} else if (u && u->n >= lim->max_clients_per_uid) {
		snprintf(why, size,
			"uid %u already holds %u connections, the most one user may "
			"(--max-clients-per-uid)",
			uid, u->n);
		no = why;
	} else if (loops_count(l, uid) < 0) {
		snprintf(why, size, "sseqd is out of memory: try again later");
		no = why;
	}
	pthread_mutex_unlock(&l->lock);
	return no;
}

void loops_join(struct loops *l, unsigned i, uint32_t uid)
{
	atomic_fetch_add(&l->m[i].sessions, 1);
	pthread_mutex_lock(&l->lock);
	/* Not counted for want of memory: loops_leave then finds no entry and lets it be. */
	(void)loops_count(l, uid);
	pthread_mutex_unlock(&l->lock);
}

void loops_leave(struct loops *l, unsigned i, uint32_t uid)
{
	struct loops_uid *u;

	atomic_fetch_sub(&l->m[i].sessions, 1);
	pthread_mutex_lock(&l->lock);
	u = loops_uid(l, uid);
	if (u) {
		l->clients--;
		if (--u->n == 0)
			*u = l->uids[--l->nuids];
	}
	pthread_mutex_unlock(&l->lock);
}

uint64_t loops_session_id(struct loops *l)
{
	return atomic_fetch_add(&l->next_session, 1) + 1;
}

unsigned loops_place(struct loops *l)
{
	unsigned best = 0, fewest = ~0u;

	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < l->n; i++) {
		unsigned n = atomic_load(&l->m[i].sessions);

		if (l->m[i].srv && n < fewest) {
			fewest = n;
			best = i;
		}
	}
	pthread_mutex_unlock(&l->lock);
	atomic_fetch_add(&l->m[best].sessions, 1);
	return best;
}

void loops_post(struct loops *l, unsigned i, int fd, uint32_t uid)
{
	struct loops_member *m = &l->m[i];
	bool first = false, kept = false;

	/* Under l->lock, so that the loop cannot detach (and close its wake-up) meanwhile. */
	pthread_mutex_lock(&l->lock);
	pthread_mutex_lock(&m->inbox_lock);
	if (m->srv && m->ninbox == m->capinbox) {
		unsigned cap = m->capinbox ? 2 * m->capinbox : 16;
		struct loops_conn *p = realloc(m->inbox, cap * sizeof(*p));

		if (p) {
			m->inbox = p;
			m->capinbox = cap;
		}
	}
	if (m->srv && m->ninbox < m->capinbox) {
		first = m->ninbox == 0;
		m->inbox[m->ninbox++] = (struct loops_conn){.fd = fd, .uid = uid};
		kept = true;
	}
	pthread_mutex_unlock(&m->inbox_lock);
	if (first)
		m->wake_handoff(m->srv);
	pthread_mutex_unlock(&l->lock);
	if (!kept) {
		close(fd);
		loops_leave(l, i, uid);
	}
}

bool loops_take(struct loops *l, unsigned i, struct loops_conn *out)
{
	struct loops_member *m = &l->m[i];
	bool any;

	pthread_mutex_lock(&m->inbox_lock);
	any = m->ninbox > 0;
	if (any) {
		*out = m->inbox[0];
		memmove(m->inbox, m->inbox + 1, --m->ninbox * sizeof(*m->inbox));
	}
	pthread_mutex_unlock(&m->inbox_lock);
	return any;
}

/* Under l->lock: the loops other than me that serve, each of which must park. */
static unsigned loops_others(const struct loops *l, unsigned me)
{
	unsigned n = 0;

	for (unsigned i = 0; i < l->n; i++)
		n += i != me && l->m[i].srv;
	return n;
}

void loops_stop_world(struct loops *l, unsigned me)
{
	if (l->n == 1)
		return;
	pthread_mutex_lock(&l->lock);
	/* Another loop got there first: be one of its parked, then take our turn. */
	while (l->owner >= 0)
		loops_park_locked(l);
	l->owner = (int)me;
	l->parked = 0;
	for (unsigned i = 0; i < l->n; i++)
		if (i != me && l->m[i].srv)
			l->m[i].wake_park(l->m[i].srv);
	while (l->parked < loops_others(l, me))
		pthread_cond_wait(&l->cond, &l->lock);
	pthread_mutex_unlock(&l->lock);
}

void loops_resume_world(struct loops *l)
{
	if (l->n == 1)
		return;
	pthread_mutex_lock(&l->lock);
	l->owner = -1;
	l->epoch++;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
}

void loops_park(struct loops *l, unsigned me)
{
	pthread_mutex_lock(&l->lock);
	if (l->owner >= 0 && (unsigned)l->owner != me)
		loops_park_locked(l);
	pthread_mutex_unlock(&l->lock);
}

struct server *loops_server(struct loops *l, unsigned i)
{
	return i < l->n ? l->m[i].srv : NULL;
}

unsigned loops_stream_base(struct loops *l, unsigned k)
{
	unsigned base = 0;

	for (unsigned i = 0; i < k && i < l->n; i++)
		base += l->m[i].srv ? seq_stream_count(l->m[i].srv->seq) : 0;
	return base;
}
