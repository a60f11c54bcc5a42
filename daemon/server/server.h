/* The sseqd server: one libuv loop thread owns every session, the sequencer and the
 * backend's command side; backend threads only push completions to a locked queue. */
#ifndef SSEQ_SERVER_H
#define SSEQ_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <uv.h>

#include "account.h"
#include "backend.h"
#include "cq.h"
#include "finding.h"
#include "loops.h"
#include "sequencer.h"
#include "sseq-tables.h"
#include "sseq.pb-c.h"
#include "timeline.h"
#include "trace.h"
#include "wire.h"

#define SESSION_MAX_FDS 8
#define OP_FREE_MAX 4096 /* op records kept for reuse once done; the rest are freed */

struct session;

#define SERVER_MAIL_HANDOFF 1u
#define SERVER_MAIL_PARK 2u

static inline uint64_t server_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* What the loop remembers of an op or a watch until its point completes. */
struct op_rec {
	struct session *session;
	uint64_t tag;
	struct staging *staging; /* holds the arena while a copy uses it */
	struct smodule *module; /* holds the module while one of its functions runs */
	struct seq_point at;
	bool notify; /* send a Completion on success too */
	char what[32]; /* a kernel's name, for naming the culprit of a device fault */
	struct op_rec *next_free;
	/* Whether the tag went into done_word (below), set by its writer before the report
	 * that completes the op: then no Completion is sent. Not the word's value at the
	 * completion: a client that had the tag may have finished the op and named the same
	 * word for its next request by then. Here, before `tl`, for ops_rec_new to zero. */
	_Atomic bool word_written;
	/* An op's issue time and dependencies, for the timeline at its completion.
	 * ops_rec_new zeroes only what comes before it. */
	struct timeline_op tl;
	/* Set with `staging` (a copy; not zeroed, read only where staging is set): a D2H's
	 * or an Await's word in the client's arena (op_payload.done_word). */
	_Atomic uint64_t *done_word;
};

/* How long the loop polls for completions after it sent work (--spin-us): a sleeping
 * thread takes tens of microseconds to wake on a GPU host (deep idle states), which a
 * client waiting on a short operation pays in full. */
#define SERVER_DEFAULT_SPIN_US 2000u

/* The default streams, for a node of 16 workers: a compute lane each, and as many H2D
 * and D2H streams, so that no two of them share a copy stream. A shared one couples
 * them: a copy waiting on the device for its own session's kernels holds up the other
 * session's copies queued behind it (the H200's GPU-bound pytest suite ran -n 8 1.6x
 * faster than -n 1 with 4 streams per direction). 56 of the 64 streams (sseqd(8)). */
#define SERVER_STREAMS_DEFAULT                                                                     \
	{                                                                                          \
		.n_compute = 16, .n_h2d = 16, .n_d2h = 16, .n_d2d = 8,                             \
	}

/* The limits that keep one client from taking what the others need (sseqd(8), LIMITS).
 * 0 means no limit where a comment says so. */
struct server_limits {
	unsigned socket_mode; /* of the socket sseqd creates itself */
	unsigned max_clients; /* connections in total */
	unsigned max_clients_per_uid;
	unsigned hello_timeout_ms; /* from accept to Hello */
	unsigned frame_timeout_ms; /* from a frame's first byte to its last */
};

#define SERVER_LIMITS_DEFAULT                                                                      \
	{                                                                                          \
		.socket_mode = 0660, .max_clients = 1024, .max_clients_per_uid = 256,              \
		.hello_timeout_ms = 5000, .frame_timeout_ms = 10000,                               \
	}

struct server_options {
	unsigned spin_us;
	const char *socket_path;
	int listen_fd; /* from systemd, or -1 */
	unsigned device;
	const char *module_dir;
	struct seq_config seq;
	struct server_limits limits;
	struct account_limits account; /* what sessions hold (account.h, its options) */
	/* A device reset restarts the daemon in place (exec) at once, without trying to
	 * build the context again in this process (--device-reset exec); and the
	 * command line to exec. */
	bool reset_exec;
	/* After a reset with several suspects, run each suspect session's kernels alone
	 * (exclusive), so that its next fault is attributed exactly (--isolate-faults). */
	bool isolate_faults;
	/* Put the schedule checker (verify.h) between the core and the backend. */
	bool verify;
	char *const *argv;
	/* The daemon's loops (--loops: nloops) and this server's among them; NULL: a daemon
	 * of one loop, this one. Only loop 0 listens: it hands connections to the others. */
	unsigned nloops;
	struct loops *loops;
	unsigned loop_index;
};

/* Staging arenas one uid has mapped (its share of --arena-limit). */
struct server_uid_arenas {
	uint32_t uid;
	uint32_t arenas;
};

/* What is held against the daemon-wide limits now that no counter reports (the others,
 * input_bytes and staging_bytes among them, are in struct server's count[]). */
struct server_limit_counters {
	uint64_t arenas; /* staging arenas mapped now, across sessions */
	uint64_t input_large_bytes; /* of input_bytes, what --max-input-memory bounds */
	/* Staging arenas mapped now by uid, sessions gone included (staging.c): one user's
	 * share of --arena-limit. An entry goes with its uid's last arena. */
	struct server_uid_arenas *uid_arenas;
	unsigned n_uid_arenas, cap_uid_arenas;
};

struct server {
	uv_loop_t *loop;
	struct server_options opts;
	struct loops *loops; /* opts.loops, or own_loops */
	struct loops own_loops;
	unsigned loop_index;
	/* What other threads ask of the loop besides completions, on the same wake-up
	 * (SERVER_MAIL_*): connections loop 0 handed over (loops_post), a stop of the world
	 * to park for (loops_stop_world). One handle, so that each wake-up checks one word. */
	atomic_uint mail;
	int listen_fd; /* loop 0's; -1 on the others */
	bool listening; /* listen_poll was made */
	/* The socket file sseqd made (0: none): unlinked at exit only while still that one. */
	uint64_t socket_dev, socket_ino;
	uv_poll_t listen_poll;
	/* Once a second: Hello and partial-frame deadlines, idle input buffers. */
	uv_timer_t sweep;
	/* Several loops: trace followers get every loop's new entries on this timer, not
	 * each turn, as each answer parks the other loops. */
	uv_timer_t follow;
	/* accept() failed for want of descriptors: the listener rests, then retries. */
	uv_timer_t accept_rest;
	uint64_t accept_logged_ns, accept_unlogged;
	uint64_t refused_logged_ns, refused_unlogged; /* refused connections, in the log */
	/* Refused connections, held open a moment after their notice so the client's Hello
	 * is read (closing over unread input reaches the client as ECONNRESET, before it
	 * reads why). Bounded: when full, the oldest is closed at once. */
	struct {
		int fd;
		uint64_t until_ns;
	} refused[16];
	unsigned nrefused;
	uv_timer_t refused_timer;
	uv_async_t wake;
	uv_check_t turn_end;
	/* Busy-polls the completion queue for a moment after work was issued, instead of
	 * sleeping until uv_async wakes the loop: see server_on_turn_end. */
	uv_idle_t spin;
	/* Set while it does; read by the completion queue's pushers (server_wake), since a
	 * loop that looks at the queue on every turn needs no wake-up. */
	atomic_bool spinning;
	/* Active while sessions have frames left for the next turn: the loop does not sleep
	 * in poll while work is buffered. */
	uv_idle_t backlog;
	uint64_t spin_until_ns;
	/* Time the loop spent working (server_busy_begin/end), and when the piece under
	 * way began (0: none; a nested piece adds nothing of its own). */
	uint64_t busy_ns, busy_since;
	bool stopping;
	/* The drain ended with ops still running on the device: server_finish keeps the
	 * core, and with it the memory those ops may touch, instead of releasing it. */
	bool abandoned;
	uint64_t started_ns;
	/* The same moment on the wall clock (CLOCK_REALTIME, ns since the epoch), for
	 * status's uptime and the start-time gauge. */
	uint64_t started_unix_ns;

	struct seq *seq;
	struct verify *verify; /* --verify: between the core and the backend, or NULL */
	struct backend backend; /* the server's copy of main's; main destroys it */

	/* Backend threads push here; the loop drains it all on each wake. main.c creates it
	 * before the backend and the server and finishes it after both. */
	struct cq *cq;

	struct session *sessions;
	struct session *dirty; /* sessions with output to write this turn */
	/* Registrations answered once their arena is ready (staging_waits_answer). */
	struct staging *pin_waits;
	unsigned nsessions;
	unsigned nrings; /* of which name a request ring (conn.c): the spin looks at them */
	unsigned nfollowing; /* sessions following the trace: the turn's loop skips them at 0 */
	struct op_rec *op_free; /* for reuse: at most OP_FREE_MAX */
	unsigned nop_free;

	struct trace_ring trace; /* trace.h's: the sequencer's recent decisions */
	/* conn.c's decoding storage for the hot-path requests: each loop decodes its own
	 * connections (a thread-local one cost ~100 instructions per request). */
	struct wire_request wire;

	/* Completed ops (sseqctl trace --chrome). While seq_submit runs for an op, its
	 * record is `submitting`, so that the trace hook adds the waits decided for it; a
	 * drain's completions share its one clock read, drain_ns (0 outside a drain). */
	struct timeline timeline;
	struct op_rec *submitting;
	uint64_t drain_ns;

	/* The backend's findings about ops, named on the loop (finding.h). */
	struct finding_queue found;

	/* The counters this loop keeps itself, one slot per field of sseq.proto's Counters
	 * (SSEQ_COUNTER_<NAME>; the core's and the backend's are read from them instead and
	 * their slots stay 0): a module counts with count[SSEQ_COUNTER_<NAME>]++, and the
	 * STATS query reports every slot, so a new counter is its field in sseq.proto and the
	 * line that counts it. */
	uint64_t count[SSEQ_COUNTER_COUNT];
	struct server_limit_counters limit;
	unsigned input_waiting; /* sessions paused until input memory frees (PAUSE_INPUT) */

	/* The paused sessions' lists (pause.c). Backpressure with hysteresis (knot-resolver's
	 * worker.c): a session stopped by a full stream window (PAUSE_WINDOW) waits on that
	 * stream's list and is resumed only once the stream has drained below half its
	 * window, not on every completion. blocked[SEQ_MAX_STREAMS] holds those whose stream
	 * the core did not name (resumed on any completion). */
	struct session *blocked[SEQ_MAX_STREAMS + 1];
	uint64_t blocked_mask; /* bit x: blocked[x] is not empty */
	struct session *resume; /* to run again at the next chance (PAUSE_TURN) */

	/* The op at each point in flight (ops.c: stream x, point n at
	 * points[x * point_window + n % point_window]), to name a fault's culprit (reset.c)
	 * or a finding's op. Device resets (reset.c; their history is the device's, in
	 * loops->resets): */
	struct op_rec **points;
	unsigned point_window;
	bool resetting; /* inside seq_reset: failed ops name the reset */
	int fatal; /* a reset failed: the daemon stops, and exits with a failure */
};

/* Around a piece of the loop's work (reading a connection, draining completions, the
 * turn's writes), for loop_busy_us. A piece begun inside another adds nothing of its own:
 * begin gives 0 and end ignores it. */
static inline uint64_t server_busy_begin(struct server *srv)
{
	if (srv->busy_since)
		return 0;
	return srv->busy_since = server_now_ns();
}

static inline void server_busy_end(struct server *srv, uint64_t t0)
{
	if (!t0)
		return;
	srv->busy_ns += server_now_ns() - t0;
	srv->busy_since = 0;
}

/* Serve with `backend`, whose completions arrive on `cq` (both made by the caller, which
 * destroys them after server_finish). */
int server_init(struct server *srv, uv_loop_t *loop, const struct server_options *opts,
	const struct backend *backend, struct cq *cq);
/* The loop's clock, read once per loop turn: exact enough for the deadlines the sweep
 * enforces (seconds), and free on the request path, where a clock read per socket read
 * would not be. */
static inline uint64_t server_loop_ns(const struct server *srv)
{
	return uv_now(srv->loop) * 1000000u;
}

/* Stop accepting, tell every client, refuse new work; in-flight work still completes. */
void server_stop(struct server *srv);
/* Write what is pending and close every connection (the end of a drain). */
void server_drop_clients(struct server *srv);
/* One line for STATUS= and the log: clients, ops in flight, totals. */
void server_summary(const struct server *srv, char *buf, size_t size);
/* Every issued point has been observed complete. */
bool server_idle(const struct server *srv);
/* Release the sequencer (and the memory it holds through the backend); after
 * server_abandon, keep it. */
void server_finish(struct server *srv);
/* The drain timed out with ops still on the device: the process is about to exit without
 * waiting for them, so nothing they may touch is to be released. */
void server_abandon(struct server *srv);
void server_close_handles(struct server *srv);
/* The socket at opts.socket_path is this daemon's own (it made it, or the process it
 * restarted in place did: resume_adopt says so): server_finish unlinks it, if it is still
 * that socket. */
void server_own_socket(struct server *srv);

#endif
