/* A session's pause: its reasons (pause.h), the lists that hold it (a stream's for
 * PAUSE_WINDOW, the resume list for PAUSE_TURN), the one way back when a reason ends, and
 * the order in which the server's resume runs the paused sessions again. */
#include "pause.h"

#include "out.h"
#include "server.h"
#include "session.h"

/* Off its stream's list (it may be on a detached one being run: its pprev says). */
static void pause_unblock(struct server *srv, struct session_pause *p)
{
	if (!p->blocked_pprev)
		return;
	*p->blocked_pprev = p->blocked_next;
	if (p->blocked_next)
		session_pause(p->blocked_next)->blocked_pprev = p->blocked_pprev;
	if (p->blocked_stream < SEQ_MAX_STREAMS && !srv->blocked[p->blocked_stream])
		srv->blocked_mask &= ~(1ull << p->blocked_stream);
	p->blocked_next = NULL;
	p->blocked_pprev = NULL;
}

/* Onto the list of the stream blocked_stream names: SEQ_MAX_STREAMS (none named) waits
 * for any completion. */
static void pause_block(struct server *srv, struct session *s, struct session_pause *p)
{
	struct session **head = &srv->blocked[p->blocked_stream];

	p->blocked_next = *head;
	if (*head)
		session_pause(*head)->blocked_pprev = &p->blocked_next;
	*head = s;
	p->blocked_pprev = head;
	if (p->blocked_stream < SEQ_MAX_STREAMS)
		srv->blocked_mask |= 1ull << p->blocked_stream;
}

static void pause_unresume(struct session_pause *p)
{
	if (!p->resume_pprev)
		return;
	*p->resume_pprev = p->resume_next;
	if (p->resume_next)
		session_pause(p->resume_next)->resume_pprev = p->resume_pprev;
	p->resume_next = NULL;
	p->resume_pprev = NULL;
}

static void pause_enqueue(struct server *srv, struct session *s, struct session_pause *p)
{
	p->resume_next = srv->resume;
	if (srv->resume)
		session_pause(srv->resume)->resume_pprev = &p->resume_next;
	srv->resume = s;
	p->resume_pprev = &srv->resume;
}

bool pause_set(struct session *s, enum pause_reason r)
{
	struct server *srv = session_server(s);
	struct session_pause *p = session_pause(s);
	const bool was = pause_has(p, r);

	p->reasons |= (unsigned)r;
	switch (r) {
	case PAUSE_WINDOW:
		/* The stream it waits for may be another now. */
		pause_unblock(srv, p);
		pause_block(srv, s, p);
		break;
	case PAUSE_TURN:
		/* Once: this may run inside the sequencer's done callback, or while the resume
		 * list it is on is being run (then it runs in that pass). */
		if (!was)
			pause_enqueue(srv, s, p);
		break;
	case PAUSE_INPUT:
		if (!was)
			srv->input_waiting++;
		break;
	default:
		break;
	}
	return !was;
}

void pause_clear(struct session *s, enum pause_reason r)
{
	struct server *srv = session_server(s);
	struct session_pause *p = session_pause(s);

	if (!pause_has(p, r))
		return;
	switch (r) {
	case PAUSE_WINDOW:
		pause_unblock(srv, p);
		break;
	case PAUSE_TURN:
		return; /* it ends when the session runs, or goes (pause_forget) */
	case PAUSE_INPUT:
		srv->input_waiting--;
		break;
	default:
		break;
	}
	p->reasons &= ~(unsigned)r;
	if ((unsigned)r & PAUSE_HELD) {
		/* The frames the daemon held back run at the turn, with their whole deadline. */
		if (!pause_gated(p))
			pause_set(s, PAUSE_TURN);
	} else {
		/* Nothing was held back, only its reads stopped: its flush polls for input
		 * again, unless another reason is left. */
		out_mark_dirty(s);
	}
}

void pause_forget(struct session *s)
{
	struct server *srv = session_server(s);
	struct session_pause *p = session_pause(s);

	pause_unblock(srv, p);
	pause_unresume(p);
	if (pause_has(p, PAUSE_INPUT))
		srv->input_waiting--;
	p->reasons = 0;
}

/* Its waits end (a frame the window held back is tried again), then it runs. */
static void pause_run_one(struct server *srv, struct session *s, void (*run)(struct session *))
{
	struct session_pause *p = session_pause(s);

	pause_unblock(srv, p);
	pause_unresume(p);
	p->reasons &= ~(unsigned)(PAUSE_WINDOW | PAUSE_TURN);
	run(s);
}

/* Every session on the stream list *list, detached first: one that blocks again goes on
 * the live list, not this one. */
static void pause_run_blocked(
	struct server *srv, struct session **list, void (*run)(struct session *))
{
	struct session *detached = *list;

	*list = NULL;
	if (detached)
		session_pause(detached)->blocked_pprev = &detached;
	while (detached)
		pause_run_one(srv, detached, run);
}

void pause_run_turn(struct server *srv, void (*run)(struct session *s))
{
	/* Detached first: one that used up its turn's frames again goes on the live list,
	 * for the next turn, so that the others' sockets are read in between. */
	struct session *detached = srv->resume;

	srv->resume = NULL;
	if (detached)
		session_pause(detached)->resume_pprev = &detached;
	while (detached)
		pause_run_one(srv, detached, run);
}

void pause_run_streams(struct server *srv, void (*run)(struct session *s))
{
	for (uint64_t mask = srv->blocked_mask; mask; mask &= mask - 1) {
		uint32_t x = (uint32_t)__builtin_ctzll(mask);
		struct seq_stream_info si;

		seq_stream_info(srv->seq, x, &si);
		if (2 * (si.issued - si.completed) >= si.window_capacity)
			continue;
		srv->blocked_mask &= ~(1ull << x);
		pause_run_blocked(srv, &srv->blocked[x], run);
	}
	pause_run_blocked(srv, &srv->blocked[SEQ_MAX_STREAMS], run);
	pause_run_turn(srv, run);
}
