/* The sequencer core: for every operation on a buffer it decides which earlier operations
 * it must wait for, and emits commands to a backend. Pure C: no sockets, no threads, no
 * GPU; everything it knows about completion is told to it through seq_complete(). */
#ifndef SSEQ_SEQUENCER_H
#define SSEQ_SEQUENCER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SEQ_MAX_STREAMS 64 /* a bit each in a uint64_t mask */
#define SEQ_MAX_ACCESS 16
#define SEQ_DEFAULT_WINDOW 1024

enum seq_stream_kind {
	SEQ_STREAM_COMPUTE,
	SEQ_STREAM_H2D,
	SEQ_STREAM_D2H,
	SEQ_STREAM_D2D,
};
#define SEQ_STREAM_KINDS 4

/* A point is the seq-th operation issued on a stream; seq 0 is "before anything". */
struct seq_point {
	uint32_t stream;
	uint64_t seq;
};

enum seq_op_kind {
	SEQ_OP_H2D, /* runs on one of the H2D streams */
	SEQ_OP_D2H, /* on one of the D2H streams */
	SEQ_OP_D2D, /* on one of the D2D streams */
	SEQ_OP_EXEC, /* on one of the compute streams (lanes) */
};
/* Not an enumerator, so that a switch over the kinds without a default stays exhaustive
 * (-Wswitch); test-model ties it to the enum through such a switch. */
#define SEQ_OP_KINDS 4

/* The kind of stream an op of `kind` runs on: the one map from ops to pools, for the core
 * placing ops and the backends checking them. kind must be a valid enum seq_op_kind. */
static inline enum seq_stream_kind seq_op_stream_kind(enum seq_op_kind kind)
{
	switch (kind) {
	case SEQ_OP_H2D:
		return SEQ_STREAM_H2D;
	case SEQ_OP_D2H:
		return SEQ_STREAM_D2H;
	case SEQ_OP_D2D:
		return SEQ_STREAM_D2D;
	case SEQ_OP_EXEC:
	default:
		return SEQ_STREAM_COMPUTE;
	}
}

/* An op's lane: SEQ_LANE(n) for lane n, which puts it on stream n (mod the pool's size)
 * of its kind's pool; SEQ_LANE_NONE (0, as a zeroed op has it) for the first compute and
 * H2D stream and round robin in the D2H and D2D pools. Either way a D2H or D2D copy that
 * depends on an unfinished point of its pool goes to that point's stream. */
#define SEQ_LANE_NONE 0u
#define SEQ_LANE(n) ((uint32_t)(n) + 1u)

enum seq_access_mode {
	SEQ_READ = 1,
	SEQ_WRITE = 2,
	SEQ_READWRITE = 3,
};

struct seq_buffer;
struct seq_trace;

struct seq_access {
	struct seq_buffer *buf; /* a base or a slice, as the client named it */
	unsigned mode; /* enum seq_access_mode */
	/* Filled in by seq_submit() for the backend: the view's device address and size,
	 * and the number of the allocation it is a view of (each base gets the next one),
	 * by which a checker tells memory that changed hands from the memory a view names. */
	uint64_t addr;
	uint64_t size;
	uint64_t alloc;
};

struct seq_op {
	enum seq_op_kind kind;
	unsigned naccess;
	void *payload; /* opaque to the core: staging ranges, kernel, scalars */
	uint32_t lane; /* SEQ_LANE(n) or SEQ_LANE_NONE */
	bool want_done; /* call backend->done(cookie, status) when the op's point completes */
	/* Run alone on the device: after everything issued so far on every stream, and
	 * everything issued later waits for it (sseqd --isolate-faults, so that a fault in
	 * it is attributed exactly). */
	bool exclusive;
	uint64_t cookie;
	/* Set by seq_submit() when it fails the op: why, and the failed producer if any. */
	enum seq_fail_cause {
		SEQ_FAIL_NONE,
		SEQ_FAIL_INPUT, /* an input's producer failed (I9) */
		SEQ_FAIL_STREAM, /* the op's stream has a device error */
		SEQ_FAIL_LAUNCH, /* the backend refused the wait or the launch */
		SEQ_FAIL_LOST, /* a buffer it names was lost in a device reset (seq_reset) */
	} fail_cause;
	struct seq_point failed_producer;
	/* Last: only the first naccess are ever read, so a caller may zero just what comes
	 * before (offsetof) rather than the whole array. */
	struct seq_access access[SEQ_MAX_ACCESS];
};

/* The core's output is two interfaces. The device commands are what a backend
 * implements; they go straight from the core to it. Events are named by the point they
 * were recorded at; an event recorded at (s, n) completes once every operation on s up to
 * n has. `ctx` is the backend's own, given to seq_create beside the table. */
struct seq_device {
	int (*mem_alloc)(void *ctx, uint64_t size, uint64_t *addr);
	void (*mem_release)(void *ctx, uint64_t addr, uint64_t size);
	/* Optional: memory the core did not allocate (a module's global, seq_buffer_adopt)
	 * becomes a buffer, and later stops being one; it is never given to mem_release. */
	int (*mem_adopt)(void *ctx, uint64_t addr, uint64_t size);
	void (*mem_disown)(void *ctx, uint64_t addr, uint64_t size);
	/* Optional: the base number (seq_access.alloc) the memory at addr now holds, told
	 * right after mem_alloc or mem_adopt, before any op names it: a checker binds the
	 * memory to its owner here, so that a stale view of an earlier owner is caught
	 * even when it is the memory's first use, or the only one. */
	void (*mem_owner)(void *ctx, uint64_t addr, uint64_t base);
	/* Record an event on at.stream after everything issued there so far (at.seq is the
	 * stream's last issued point). The backend must report it through seq_complete(). */
	int (*record)(void *ctx, struct seq_point at);
	/* Make `stream` wait, on the device, for the event recorded at `event`. */
	int (*wait)(void *ctx, uint32_t stream, struct seq_point event);
	/* Enqueue op as point `at`. A failure here fails the op; `at` is then not used. */
	int (*launch)(void *ctx, struct seq_point at, const struct seq_op *op);
	/* The core will never name this event again (optional). */
	void (*retire)(void *ctx, struct seq_point event);
};

/* ... and what the core's owner (the server) observes; both hooks are optional. */
struct seq_observer {
	void *ctx;
	/* A watched point or op completed. */
	void (*done)(void *ctx, uint64_t cookie, int status);
	/* A sequencing decision, for the live trace. */
	void (*trace)(void *ctx, const struct seq_trace *t);
};

enum seq_decision {
	SEQ_TRACE_WAIT, /* a wait was enqueued */
	SEQ_TRACE_ELIDE_SAME_STREAM, /* same in-order stream, later */
	SEQ_TRACE_ELIDE_OBSERVED, /* producer seen complete */
	SEQ_TRACE_ELIDE_LEGACY, /* injected legacy bug: evicted from the compute window */
	SEQ_TRACE_FAIL_DEPENDENCY, /* an input's producer failed; op not launched */
	SEQ_TRACE_BACKPRESSURE, /* the op's stream window is full */
	SEQ_TRACE_DEFER_FREE, /* free deferred: the buffer is still in use */
	SEQ_TRACE_RELEASE, /* memory handed back */
};

struct seq_trace {
	enum seq_decision decision;
	struct seq_point at; /* the op (for decisions before launch: the point it will get) */
	enum seq_op_kind op;
	const struct seq_buffer *buf;
	struct seq_point producer; /* the point waited for or elided */
};

struct seq_config {
	unsigned n_compute; /* compute streams (lanes, 1..), default 1 */
	unsigned n_h2d; /* H2D streams (1..), default 1 */
	unsigned n_d2h; /* D2H streams (1..), default 1 */
	unsigned n_d2d; /* D2D streams (1..), default 1 */
	unsigned window; /* incomplete points allowed per stream */
	/* Fault injection, off by default: bring back the legacy bugs. */
	unsigned legacy_sync_window; /* H2D readiness tied to a compute window of N points */
	unsigned drop_wait; /* every Nth wait decided is not emitted (a lost wait, any backend) */
	bool legacy_early_free; /* frees hand memory back at once */
	/* A base freed while slices of it live hands its memory back at once: the slices
	 * then name memory that may already be someone else's (XLA's slice-outlives-base). */
	bool legacy_slice_outlives_base;
};

/* The streams, numbered once, here: the compute pool, then the H2D, D2H and D2D pools.
 * The core sequences on them and backends build theirs from the same layout. */
struct seq_layout {
	unsigned nstreams;
	unsigned first[SEQ_STREAM_KINDS]; /* the first stream of each kind */
	unsigned count[SEQ_STREAM_KINDS]; /* ... and how many there are */
	enum seq_stream_kind kind[SEQ_MAX_STREAMS];
	unsigned index[SEQ_MAX_STREAMS]; /* a stream's place among those of its kind */
};

/* The layout config asks for (pool sizes of 0 mean 1): 0, or -EINVAL when the streams
 * do not fit in SEQ_MAX_STREAMS. */
int seq_layout_init(struct seq_layout *layout, const struct seq_config *config);

struct seq_counters {
	uint64_t ops_submitted;
	uint64_t ops_completed;
	uint64_t ops_failed;
	uint64_t waits_enqueued;
	uint64_t waits_elided_same_stream;
	uint64_t waits_elided_observed;
	uint64_t waits_elided_legacy;
	uint64_t events_recorded;
	uint64_t backpressure;
	uint64_t frees_deferred;
	uint64_t releases;
	uint64_t double_definitions;
	uint64_t placed_by_affinity; /* D2H/D2D ops put on the pool stream they depend on */
	uint64_t waits_dropped; /* injected: waits decided but not emitted (drop_wait) */
};

/* A buffer is a base (owns memory) or a slice (a view of its base, I6). Fields are
 * readable by the server for inspection; only the core writes them. */
struct seq_buffer {
	struct seq_buffer *base; /* NULL for a base */
	uint64_t offset; /* within the base (0 for a base) */
	uint64_t size;
	uint64_t addr; /* device address of this view */
	uint64_t user; /* opaque for the owner of the handle */
	uint64_t alloc; /* base: its allocation's number (from 1); slice: its base's */
	uint64_t owner; /* opaque: who held it, kept after the handle is gone (inspection) */
	/* Base only: */
	unsigned refs; /* the owner's + one per live slice */
	bool freed; /* the owner let go; memory goes back at refs 0 and no use pending */
	/* A failure readers fail with, besides def's own (a device error learned through
	 * seq_complete): the last write failed before launch, or it wrote only part of a
	 * base already failed, which a write of the whole base alone clears (I9). */
	int error;
	struct seq_point def; /* the point that wrote the contents (I1) */
	uint64_t legacy_mark; /* injected bug only: compute progress at definition + 1 ... */
	uint32_t legacy_stream; /* ... on this compute stream (the H2D's lane's) */
	uint64_t readers[SEQ_MAX_STREAMS]; /* last reading seq per stream since def, or 0 */
	uint64_t reader_mask; /* bit x: readers[x] is not 0 */
	bool pending; /* on the deferred-free list */
	/* Base only: its memory was on a device context that seq_reset declared gone. Every
	 * op naming it fails with -ENXIO (nothing clears that), and freeing it hands nothing
	 * back. */
	bool lost;
	bool early_released; /* injected slice-outlives-base: memory already handed back */
	/* Base only, from seq_buffer_adopt: the memory is someone else's (mem_disown, never
	 * mem_release). gone(gone_arg) is called once the base is released (adopt or
	 * seq_buffer_on_gone sets it). */
	bool adopted;
	void (*gone)(void *arg);
	void *gone_arg;
	/* Core bookkeeping: every live buffer object, for seq_destroy(). */
	struct seq_buffer *all_prev, *all_next;
};

struct seq_stream_info {
	enum seq_stream_kind kind;
	unsigned index; /* among streams of its kind */
	uint64_t issued;
	uint64_t completed;
	uint64_t recorded; /* last point with an event */
	unsigned window_used;
	unsigned window_capacity;
	int error; /* the stream failed on the device (sticky) */
};

struct seq;

/* A core issuing to `device` (with its ctx) and telling `observer` (may be NULL). */
int seq_create(struct seq **out, const struct seq_config *config, const struct seq_device *device,
	void *device_ctx, const struct seq_observer *observer);
const struct seq_layout *seq_layout(const struct seq *seq);
/* Releases every buffer still held, whatever is pending: call only once the device is idle. */
void seq_destroy(struct seq *seq);

unsigned seq_stream_count(const struct seq *seq);
void seq_stream_info(const struct seq *seq, uint32_t stream, struct seq_stream_info *info);
const struct seq_counters *seq_counters(const struct seq *seq);
const char *seq_stream_kind_name(enum seq_stream_kind kind);
/* "h2d", "d2h", "d2d" or "execute": the one spelling of an op's kind, for logs, findings
 * and the trace (the wire's request names). */
const char *seq_op_kind_name(enum seq_op_kind kind);

int seq_buffer_alloc(struct seq *seq, uint64_t size, struct seq_buffer **out);
/* A base over memory the core did not allocate (a module's global): an ordinary base in
 * every way (definition, readers, slices, I5-deferred free) except that its release hands
 * the memory to nobody (mem_disown) and then calls gone(arg) (may be NULL), once, also when
 * a reset drops it or seq_destroy releases it. 0, -EINVAL, -ENOMEM or mem_adopt's error. */
int seq_buffer_adopt(struct seq *seq, uint64_t addr, uint64_t size, void (*gone)(void *arg),
	void *arg, struct seq_buffer **out);
/* A view of `of` (a base or a slice) at [offset, offset + size) of it. */
int seq_buffer_slice(struct seq *seq, struct seq_buffer *of, uint64_t offset, uint64_t size,
	struct seq_buffer **out);
/* The owner lets go. A slice goes at once; a base's memory goes back once no slice
 * holds it and every point that used or defined it is complete (I5). */
void seq_buffer_free(struct seq *seq, struct seq_buffer *buf);
/* Call gone(arg) once, when the base's memory has gone back: after seq_buffer_free, once no
 * slice holds it and its last use is complete (within that call, if it already is). For
 * an owner that counts memory until then. Not for an adopted base (its gone is set). */
void seq_buffer_on_gone(struct seq_buffer *base, void (*gone)(void *arg), void *arg);
/* Whether every point that defines or reads buf's base is known complete. */
bool seq_buffer_idle(const struct seq *seq, const struct seq_buffer *buf);
/* Bases freed by their owner whose memory waits for their last use (I5), for
 * inspection: the count, and the i-th. */
size_t seq_pending_count(const struct seq *seq);
const struct seq_buffer *seq_pending_get(const struct seq *seq, size_t i);
/* The base's failure (-ENXIO once lost in a reset), or 0. */
int seq_buffer_error(const struct seq *seq, const struct seq_buffer *buf);

/* Decide the waits for op, emit them and launch it. Returns 0 (and the op's point in *at
 * when at is not NULL); -EAGAIN when its stream's window is full (nothing was emitted:
 * retry after completions; at->stream names that stream, at->seq is 0); -EINVAL for a malformed op;
 * -EEXIST when it would define a buffer twice (I7); or the error that failed it: an input's failure
 * (I9), the stream's device error, or the backend's launch error. A failed op is not launched and
 * the buffers it would have written carry its error. */
int seq_submit(struct seq *seq, struct seq_op *op, struct seq_point *at);

/* Call backend->done(cookie, status) once buf's producer is complete. Returns 1 when it
 * already is (done is not called), 0 when done will be called (with the producer's point
 * in *at when at is not NULL: done follows the report of its stream's event at or after
 * it), or the buffer's error. */
int seq_await(struct seq *seq, const struct seq_buffer *buf, uint64_t cookie, struct seq_point *at);
/* Likewise for everything issued on every stream so far. */
int seq_sync(struct seq *seq, uint64_t cookie);
/* Likewise for every point up to upto[stream] on each stream (one client's last ops). */
int seq_sync_points(struct seq *seq, const uint64_t *upto, uint64_t cookie);

/* Record events on streams whose issued work has none yet, so that its completion will
 * be learned. The server calls it once per loop turn; recording is otherwise lazy. */
void seq_flush(struct seq *seq);

/* The backend saw the event recorded at `through` complete, with 0 or a device error,
 * which fails the stream from its first point not yet reported complete on (sticky). An
 * op that waited on a failed point fails with its error, and so does its stream from
 * that op on; what a failed point wrote reads as failed until a write of the whole
 * buffer (I9). */
void seq_complete(struct seq *seq, struct seq_point through, int status);

/* The device context is gone (a fault poisoned it) and the backend has been built again:
 * every point issued and not yet complete completes with `status` (done callbacks and
 * watches fire), events are forgotten without a retire, every live base is lost (its
 * ops fail with -ENXIO, its free releases nothing), bases waiting to be released are
 * dropped without a release, and the streams take new work again, their numbering
 * continuing. Returns how many buffers were lost. Completions the old backend still
 * reports must not reach seq_complete afterwards. */
uint64_t seq_reset(struct seq *seq, int status);

#endif
