/* Why a session reads no more of its input: one set of reasons per session, each set and
 * cleared by the module that decides it, and one way back (pause_clear): a pause of the
 * daemon's that ends queues the session for the server's turn, which runs its buffered
 * frames (server.c says what a run is, pause.c in which order the paused sessions run);
 * one of the client's that ends has it polled for input again. A session's share of
 * frames per turn is kept here too. */
#ifndef SSEQ_PAUSE_H
#define SSEQ_PAUSE_H

#include <stdbool.h>
#include <stdint.h>

#include "session-limits.h"

struct server;
struct session;

/* Why a session is paused: each a bit of struct session_pause's reasons. */
enum pause_reason {
	/* A frame found its stream's window full (-EAGAIN, I3; ops.c names the stream in
	 * blocked_stream): the session waits on that stream's list until it drains below
	 * half its window, and the frame is tried again whenever the session runs. */
	PAUSE_WINDOW = 1u << 0,
	/* At --client-inflight-limit (account.c): no frame runs, between frames or inside a
	 * Batch, until half of its work in flight completed. */
	PAUSE_INFLIGHT = 1u << 1,
	/* On the resume list: its buffered frames run at the server's next turn (its turn's
	 * frames were used up, a restart in place handed them over, or a pause ended). */
	PAUSE_TURN = 1u << 2,
	/* At --max-input-memory (conn.c): not read until input memory is given back. */
	PAUSE_INPUT = 1u << 3,
	/* At its last flush its unwritten output was past SESSION_OUT_HIGH (conn.c): a client
	 * that does not read its replies is not read either. */
	PAUSE_OUTPUT = 1u << 4,
};

/* The daemon's pauses, not the client stalling: the session's frame deadline does not run
 * (conn_sweep), and a frame held back gets the whole deadline from when it runs again;
 * a session at EOF stays until they end. The others count against the deadline: a frame
 * paused at input memory holds memory that others wait for, and only the client can
 * finish it. */
#define PAUSE_HELD (PAUSE_WINDOW | PAUSE_INFLIGHT | PAUSE_TURN)
/* Those that stop the session's frames even when it runs; when the last of them ends, the
 * session is queued for the turn (PAUSE_TURN). The other reasons of the daemon's are
 * waits, which end when the session runs; the client's only stop its reads, and when one
 * ends the session's flush polls for input again, unless another reason is left. */
#define PAUSE_GATES (PAUSE_INFLIGHT)

/* A session's pause: its reasons, the lists that hold it until it runs again, and where a
 * Batch held back goes on. */
struct session_pause {
	unsigned reasons; /* enum pause_reason bits */
	uint32_t blocked_stream; /* PAUSE_WINDOW's stream (SEQ_MAX_STREAMS: not named) */
	struct session *blocked_next, **blocked_pprev; /* on srv->blocked[blocked_stream] */
	struct session *resume_next, **resume_pprev; /* on srv->resume (PAUSE_TURN) */
	uint32_t batch_resume; /* inner requests of the held batch already done */
};

/* Paused for reason r. */
static inline bool pause_has(const struct session_pause *p, enum pause_reason r)
{
	return (p->reasons & (unsigned)r) != 0;
}

/* Paused for any reason: nothing more of its input is read. */
static inline bool pause_any(const struct session_pause *p)
{
	return p->reasons != 0;
}

/* Paused by the daemon (PAUSE_HELD): its frame deadline does not run. */
static inline bool pause_held(const struct session_pause *p)
{
	return (p->reasons & PAUSE_HELD) != 0;
}

/* Its frames stop here, even while it runs (PAUSE_GATES). */
static inline bool pause_gated(const struct session_pause *p)
{
	return (p->reasons & PAUSE_GATES) != 0;
}

/* s is paused for r too: true if it was not before (for the caller's count and log).
 * PAUSE_WINDOW puts it on the list of the stream blocked_stream names (again, if it was
 * on one), PAUSE_TURN on the resume list. Its next flush stops polling for its input:
 * set while its input is processed (or in its flush), one follows; set from anywhere
 * else, out_mark_dirty(s) asks for one. */
bool pause_set(struct session *s, enum pause_reason r);
/* The pause for r ended (nothing if there was none): s is let go the one way there is.
 * Was r the daemon's and no gate holds s, its frames run at the server's next turn
 * (PAUSE_TURN, which itself ends only when they run); was it the client's, its flush
 * polls for input again unless another reason is left. */
void pause_clear(struct session *s, enum pause_reason r);
/* s is going away: no reason left, off every list, and nothing runs. */
void pause_forget(struct session *s);

/* Whether s may run one more frame this turn, *frames of them having run (counted from 0
 * by the caller): once SESSION_TURN_FRAMES have, the rest wait for the next turn
 * (PAUSE_TURN), after every other session's, so that one busy client cannot starve the
 * others. */
static inline bool pause_turn_frame(struct session *s, unsigned *frames)
{
	if ((*frames)++ < SESSION_TURN_FRAMES)
		return true;
	pause_set(s, PAUSE_TURN);
	return false;
}

/* The server's resume: run(s) for each paused session whose wait ended, after its waits
 * (PAUSE_WINDOW, PAUSE_TURN) are cleared; run processes its buffered frames, which may
 * pause it again, on a live list (each list is detached before it runs, so a session runs
 * at most once per list). After completions: the sessions of each stream that drained
 * below half its window, stream by stream (one still above half keeps them, so that a
 * session is not woken to submit one op and pause again on every completion), then those
 * whose stream was not named (on any completion), then the resume list. */
void pause_run_streams(struct server *srv, void (*run)(struct session *s));
/* At the turn's end: the resume list (newest first). */
void pause_run_turn(struct server *srv, void (*run)(struct session *s));

#endif
