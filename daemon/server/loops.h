/* The loops of one sseqd (--loops N): each serves its own sessions on a libuv loop and
 * thread of its own, with its own server, sequencer core and backend streams, so that
 * round trips from many clients are not all served by one thread. A session stays on the
 * loop that accepted it; sessions share no buffers, so the loops are independent for
 * the invariants (DESIGN.md). What they share is here: admission (connections in all
 * and per uid), session ids, the hand-off of an accepted connection to the loop with the
 * fewest sessions, and stopping the other loops while a query reads their state. */
#ifndef SSEQ_LOOPS_H
#define SSEQ_LOOPS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOOPS_MAX 16

struct server;
struct server_limits;

/* A connection accepted by loop 0 for another loop, admitted already. */
struct loops_conn {
	int fd;
	uint32_t uid;
};

struct loops_uid {
	uint32_t uid;
	unsigned n;
};

struct loops_member {
	struct server *srv; /* NULL once its loop no longer serves */
	/* Wake the loop (libuv handles of its server's, thread-safe): for a posted
	 * connection, and to park for a stopped world. */
	void (*wake_handoff)(struct server *);
	void (*wake_park)(struct server *);
	atomic_uint sessions; /* placed on it and not yet gone */
	pthread_mutex_t inbox_lock;
	struct loops_conn *inbox;
	unsigned ninbox, capinbox;
};

/* The device's reset history (reset.c): one device, so one history for every loop.
 * Written by the loop that resets while the others are parked, and by a restart in place
 * before the loops' threads start; read by any loop. */
struct loops_resets {
	uint64_t count;
	uint64_t last_ms; /* how long the last one took, fault seen to serving again */
	char at[32]; /* when the last one happened (UTC) */
	char cause[512]; /* who caused it, as far as can be known */
	uint64_t fault_ns; /* CLOCK_MONOTONIC when the last fault was seen */
};

struct loops {
	unsigned n;
	struct loops_member m[LOOPS_MAX];
	atomic_uint_fast64_t next_session;
	pthread_mutex_t lock; /* what follows */
	pthread_cond_t cond;
	unsigned clients; /* admitted, on any loop, and not yet gone */
	struct loops_uid *uids;
	unsigned nuids, capuids;
	int owner; /* the loop that stopped the others, or -1 */
	unsigned parked; /* loops parked for it */
	uint64_t epoch; /* one more each time the world resumes */
	struct loops_resets resets;
};

int loops_init(struct loops *l, unsigned n);
void loops_finish(struct loops *l);

/* Loop i serves with srv from now on, woken by the two functions given; detach: no more
 * (it parks first if the world is stopped, and closes what its inbox still holds). */
void loops_attach(struct loops *l, unsigned i, struct server *srv,
	void (*wake_handoff)(struct server *), void (*wake_park)(struct server *));
void loops_detach(struct loops *l, unsigned i);

/* A new connection from uid: NULL and counted, or why not (--max-clients,
 * --max-clients-per-uid) in why. */
const char *loops_admit(
	struct loops *l, const struct server_limits *lim, uint32_t uid, char *why, size_t size);
/* Counted on loop i without a check (a session taken over by a restart in place). */
void loops_join(struct loops *l, unsigned i, uint32_t uid);
/* A session on loop i (or an admitted connection never served) is gone. */
void loops_leave(struct loops *l, unsigned i, uint32_t uid);
uint64_t loops_session_id(struct loops *l);

/* The loop a new connection goes to (the serving one with the fewest sessions), counted
 * on it. */
unsigned loops_place(struct loops *l);
/* Give loop i an admitted connection, waking it when its inbox was empty; a loop that
 * no longer serves closes it. */
void loops_post(struct loops *l, unsigned i, int fd, uint32_t uid);
/* Loop i's next posted connection: false when none is left. */
bool loops_take(struct loops *l, unsigned i, struct loops_conn *out);

/* Loop `me` reads every loop's state between these two: the others are parked at a
 * turn's end (each woken with its wake_park) until loops_resume_world. Nothing to do
 * with one loop. */
void loops_stop_world(struct loops *l, unsigned me);
void loops_resume_world(struct loops *l);
/* From loop me's turn, when woken: park while another loop has stopped the world. */
void loops_park(struct loops *l, unsigned me);
/* Loop i's server while its loop serves, else NULL (read with the world stopped). */
struct server *loops_server(struct loops *l, unsigned i);
/* Where loop k's streams start when every loop's are numbered one after another (loop k's
 * stream x is this + x), so that ids stay unique across loops (read with the world
 * stopped). */
unsigned loops_stream_base(struct loops *l, unsigned k);

#endif
