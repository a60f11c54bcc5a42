/* The hip backend's insides, shared by its files and by nothing else: the state of one
 * device (struct hip) and its streams, the commands the loop hands to the submit thread,
 * and the hip__ functions one file of the backend calls in another. */
#ifndef SSEQ_HIP_INTERNAL_H
#define SSEQ_HIP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef SSEQ_HIP_NVIDIA
#include "hip-nvidia.h"
#else
#include <hip/hip_runtime_api.h>
#endif

#include "hip.h"
#include "word-notes.h"

/* Size classes: multiples of 256 up to 4 KiB, then 8 per power of two (at most 12.5%
 * slack), so released blocks fit the next request of about the same size. */
#define HIP_ALIGN 256
#define HIP_SMALL_MAX 4096
#define HIP_SMALL_CLASSES (HIP_SMALL_MAX / HIP_ALIGN)
#define HIP_CLASS_STEPS 8
#define HIP_MAX_ALLOC (1ull << 48)
#define HIP_NCLASSES (HIP_SMALL_CLASSES + (48 - 12) * HIP_CLASS_STEPS)
#define HIP_MAX_KERNELS 32
/* How long an idle completion thread (completion sync, poll) keeps looking for new events
 * before it sleeps. */
#define HIP_IDLE_SPIN_NS 1000000L
/* The watcher (completion watch): after a record or a completion it looks again at once
 * for HIP_WATCH_SPIN_NS (while a core is free, spin.h), outstanding events or not; then,
 * while something is outstanding, it naps, each nap 1/128 of
 * the time the oldest wait has lasted, from HIP_WATCH_NAP_MIN_NS to HIP_WATCH_NAP_MAX_NS,
 * so a completion is seen at most 1% late (1 ms at most) and a long wait costs few
 * wake-ups. */
#define HIP_WATCH_SPIN_NS 200000L
/* ... and, where $SSEQ_HIP_WATCH_LONG_SPIN_US sets it (default 0: not at all; not yet
 * measured on a GPU), the watcher of the backend that had the latest record of the whole
 * process stays awake that long with nothing outstanding, until another backend's record
 * comes: a lone pytest worker's next test comes 0.1-0.3 ms after its last answer, about
 * when the 200 us end, and its first record then has to wake the watcher. */
#define HIP_WATCH_LONG_SPIN_NS 0L
#define HIP_WATCH_NAP_MIN_NS 10000L
#define HIP_WATCH_NAP_MAX_NS 1000000L
/* A submit thread looks for its next command this long after its last (while a core is
 * free) before it sleeps. */
#define HIP_SUBMIT_SPIN_NS 50000L
/* ... and the thread the latest command went to looks on until HIP_SUBMIT_LONG_SPIN_NS
 * ($SSEQ_HIP_SUBMIT_LONG_SPIN_US; 0: never), or until a command goes to another thread:
 * a lone client's next request comes a few hundred microseconds after its last (a pytest
 * worker between two tests), after the short spin, while under many clients the latest
 * command moves from thread to thread and nobody spins long. On an H100 (BENCHMARKS.md,
 * 2026-12-07 09:19-09:38) it took 27-28% off a lone pytest worker's download test in
 * four of six rounds (14% over all six), and left -n 8, -n 16, 16 and 64 C clients and
 * the 4-core rows no slower; without the rule (the first thread to go idle spinning its
 * whole 1 ms) it had cost 5-8% at -n 8. */
#define HIP_SUBMIT_LONG_SPIN_NS 1000000L
/* --submit-idle inline (or copies): the loop makes the calls of a sleeping submit
 * thread's commands itself for at most HIP_SUBMIT_INLINE_RUN commands, each coming less
 * than HIP_SUBMIT_INLINE_GAP_NS after the call for the one before ended; the next one
 * wakes the thread. A
 * latency-bound request (a kernel and its read-back: five commands) runs on the loop
 * whole, while a flood of launches is handed to the thread after a few, so that the
 * thread, not the loop, makes its calls beside the loop's reads. */
#define HIP_SUBMIT_INLINE_RUN 8u
#define HIP_SUBMIT_INLINE_GAP_NS 20000u
/* A process-wide note of which one (a submit thread, a backend's watcher) had the latest
 * of something, so that only it spins long (HIP_SUBMIT_LONG_SPIN_NS,
 * HIP_WATCH_LONG_SPIN_NS): written only when it changes, so that a run of the same one
 * leaves the cache line alone; only ever compared, never followed. */
typedef _Atomic(const void *) hip_latest;

static inline void hip__latest_note(hip_latest *latest, const void *me)
{
	if (atomic_load_explicit(latest, memory_order_relaxed) != me)
		atomic_store_explicit(latest, me, memory_order_relaxed);
}

static inline bool hip__latest_is(hip_latest *latest, const void *me)
{
	return atomic_load_explicit(latest, memory_order_relaxed) == me;
}

/* Commands the loop may queue ahead of each submit thread (a power of two). */
#define HIP_SUBMIT_QUEUE 4096
/* Locks that order an event's record against another thread's wait on it (a power of
 * two): an event takes the one its address hashes to. */
#define HIP_EVENT_LOCKS 64

/* Hidden arguments a built-in kernel's device wrapper takes after its signature's. */
enum hip_extra {
	HIP_EXTRA_NONE,
	HIP_EXTRA_CLOCK, /* spin: the device clock's rate in kHz */
	HIP_EXTRA_CONV2D, /* conv2d: struct kernel_conv2d with the output extent */
};

struct hip_fn {
	hipFunction_t f; /* NULL: not in the image */
	enum hip_extra extra;
};

/* One device allocation, live or cached; found by address for release and destroy. */
struct hip_block {
	uint64_t addr;
	uint64_t size; /* its class size */
	unsigned cls;
	bool live;
	struct hip_block *next_free; /* in its class's free list */
	struct hip_block *hnext; /* hash chain */
};

/* A pooled event. Each record the loop queues on it gets the next serial (`issued`, the
 * loop thread's); the thread that runs the record publishes it in `recorded` under the
 * event's lock, so a wait queued for serial s on another submit thread knows when the
 * record it names has run (recorded >= s) and whether the event was recorded again since
 * (recorded > s: then the point it waited for was retired, so it is complete and the wait
 * is not needed). */
struct hip_ev {
	hipEvent_t ev;
	uint64_t issued;
	_Atomic uint64_t recorded;
};

struct hip_event_ent {
	uint64_t seq;
	struct hip_ev *ev;
	uint64_t serial; /* of the record at seq */
	/* Set by whoever records it: the stream's failure (reported instead of success), and
	 * whether the record itself failed (nothing to wait for on the event). */
	int status;
	bool unrecorded;
	/* The small-copy pool's slots used by copies up to this point (after the previous
	 * record): a list through hip_pool_slot.next, 0 for none. Whoever reports the event
	 * finishes them (hip__pool_finish) before the core hears of it. */
	int32_t pool;
};

/* The small-copy pool (hip-mem.c): pinned memory of the daemon's own in slots of
 * HIP_POOL_SLOT bytes. A copy of up to a slot goes through one: an H2D's bytes are copied
 * into it where the copy is enqueued, a D2H's out of it once its event is reported, and
 * the slot is free again then. So no client arena needs pinning for small copies, and
 * pinning (hipHostRegister) stalls the device's other work for milliseconds. */
#define HIP_POOL_SLOT (64u << 10)

struct hip_pool_slot {
	void *out; /* D2H: where the bytes go once the copy is complete; NULL: an H2D */
	uint64_t len;
	_Atomic uint64_t *done_word; /* D2H: the client's word for the tag, or NULL */
	uint64_t done_tag;
	_Atomic bool *done_written; /* set where the tag went in (op_payload) */
	uint64_t seq; /* the copy's point on its stream */
	int32_t next;
};

/* Audit: the timestamps around one launched point. Its stream's table holds one reference
 * until the core retires the point (it is then known complete, so later consumers need no
 * check); each queued check holds one more, so the end event outlives the table entry for
 * as long as a consumer still has to be compared with it. At zero the op and its events go
 * back to a free list for reuse. */
struct hip_audit_op {
	atomic_uint refs;
	struct seq_point at;
	hipEvent_t start, end;
	char what[48]; /* "kernel scale", "h2d", ... */
	/* A timestamp is missing or the op did not run: checks naming it are skipped. */
	bool bad;
	/* Set (release) once the launch command ran, timestamps and `bad` final: the audit
	 * thread waits for it, since the producer of a check may be another submit
	 * thread's and not have run yet. */
	atomic_bool settled;
	struct hip_audit_op *next_free;
};

/* The device timeline's anchor (hip-timeline.c): `cur` is an event whose device time maps
 * to host_ns on CLOCK_MONOTONIC, later device times at `slope` host ns per device ns.
 * The anchor thread measures a new one (best, trial) and swaps it in under mu; op_times
 * reads cur under mu. */
struct hip_timeline {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	hipStream_t stream;
	hipEvent_t cur, best, trial;
	uint64_t host_ns;
	double slope;
	bool anchored;
	/* The anchor thread's: the last measured host time (meas_ok: narrow enough to
	 * learn the rate from), the clocks' rate. */
	uint64_t meas_ns;
	bool meas_ok;
	double rate;
	/* The latest anchor's error bound: how far a mapped time may lie from the host
	 * clock's true instant. Changes with the mapping, under mu. */
	_Atomic uint64_t error_ns;
	pthread_t thread;
	bool made, started, stop;
};

/* One check for the audit thread: consumer must have started after producer finished. */
struct hip_audit_check {
	struct hip_audit_op *consumer, *producer;
	bool war; /* producer is a reader of what the consumer overwrites */
	uint64_t addr, size; /* the base buffer, for the report */
	struct hip_audit_check *next;
};

/* A module whose last launch is complete, unloaded off the loop thread. */
struct hip_reap_module {
	hipModule_t module;
	struct hip_reap_module *next;
};

/* A scratch block retired from an overlapping D2D; back to the pool once `seq` is done. */
struct hip_deferred {
	uint64_t addr;
	uint64_t size;
	uint64_t seq;
	struct hip_deferred *next;
};

/* One kernel argument's value, as the launch call takes it by address. */
union hip_karg {
	void *ptr;
	KARG_VALUE_MEMBERS /* kernels/karg.h */
};

/* One enqueue for the submit thread, with everything it needs copied in: the caller's op
 * and payload are gone once launch returns. */
struct hip_cmd {
	enum { HIP_CMD_LAUNCH, HIP_CMD_WAIT, HIP_CMD_RECORD } kind;
	uint32_t stream; /* launch, record: the op's stream; wait: the waiting stream */
	struct seq_point at; /* launch, record: the point; wait: the event waited for */
	struct hip_ev *ev; /* wait, record */
	uint64_t serial; /* wait, record: of the record */
	/* Launch: */
	enum seq_op_kind op;
	bool empty; /* nothing to enqueue (zero length, zero elements) */
	struct hip_audit_op *audit; /* holds one reference for the command */
	struct hip_audit_check *checks; /* queued once the timestamps are recorded */
	union {
		struct {
			void *dst;
			const void *src;
			uint64_t len;
			uint64_t scratch; /* overlapping D2D: through this block */
			/* Through a small-copy pool slot (an H2D's src, a D2H's dst); an H2D's
			 * bytes are copied from pool_in into the slot just before the enqueue. */
			bool pooled;
			const void *pool_in;
		} copy;
		struct {
			hipFunction_t f;
			uint32_t grid[3], block[3], shared;
			/* A module function's launch attributes (the server checked them). */
			bool cooperative;
			uint32_t cluster[3]; /* all 0: none */
			unsigned nv; /* values in v, then conv when has_conv */
			bool has_conv;
			/* A module function's arguments too wide for their slot of v (bytes
			 * over 8, or aligned over 8) live in blob, at their alignment, and
			 * their slot holds the address (bit i of indirect set). The
			 * command's own: freed once it ran. */
			uint32_t indirect;
			void *blob;
			union hip_karg v[KERNEL_MAX_ARGS + 2];
			struct kernel_conv2d conv;
			char what[48];
		} kernel;
	};
};

struct hip;

/* A submit thread and its queue: the loop thread produces at tail, the thread consumes at
 * head, strictly in order. It owns a fixed set of streams (stream i belongs to thread
 * i % nsubmitters), so each stream's commands keep their order. */
struct hip_submitter {
	struct hip *h;
	unsigned index;
	struct hip_cmd *q;
	_Atomic size_t head, tail;
	atomic_bool sleeping;
	_Atomic uint64_t sleeps; /* times it went to sleep with nothing queued (tests) */
	atomic_bool long_spinning; /* in the long spin now (tests) */
	/* The loop's own: the commands it ran here in a row for this sleeping thread, and
	 * when the call for the last of them ended (HIP_SUBMIT_INLINE_RUN). */
	unsigned inline_run;
	uint64_t inline_last_ns;
	bool stop;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	pthread_t thread;
	bool started;
};

struct hip_stream {
	struct hip *h;
	uint32_t index;
	enum seq_stream_kind kind;
	hipStream_t stream;
	struct hip_submitter *sub; /* the thread that enqueues for it; NULL: inline */
	pthread_t thread;
	bool started;
	/* The loop thread's. */
	uint64_t launched;
	uint64_t recorded;
	/* Its last launch ran on the loop (--submit-idle copies): its record does too. */
	bool launched_here;
	uint64_t scratch; /* for overlapping D2D copies (D2D streams) */
	uint64_t scratch_size;
	struct hip_deferred *deferred;
	/* Small-copy pool slots launched since the last record, oldest first (0: none):
	 * the next record takes those up to its point (hip_pool_slot.next links them). */
	int32_t pool_head, pool_tail;
	/* Audit (loop thread only): the launched, unretired points' timestamps, a ring
	 * [ahead, ahead + acount) whose first entry is point afirst. An entry is NULL when the
	 * timestamps could not be recorded. */
	struct hip_audit_op **aops;
	size_t acap, ahead, acount;
	uint64_t afirst;
	/* Events in ascending order: a ring [head, head + count) the loop thread pushes to
	 * when it picks an event for a point. The first `nsubmitted` were recorded on the
	 * device (by whoever runs the commands: the completion thread must not look at an
	 * event before, I3); of those the first `nreported` were reported and wait for
	 * retire. Only the loop thread changes the ring's shape; it does so, and the others
	 * read it, under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct hip_event_ent *ring;
	size_t cap, head, count, nsubmitted, nreported;
	/* Await words written at the report through their point (backend_ops.point_word):
	 * the loop adds, the reporting thread writes them in hip_completer_take, under mu. */
	struct word_notes notes;
	/* The submitting thread's: the error that failed the stream there (sticky). */
	int failed;
	bool sleeping;
	bool stop;
};

struct hip {
	struct cq *cq;
	backend_finding_fn finding;
	void *finding_arg;
	struct hip_config cfg;
	int device;
	bool device_open;
	char name[96];
	char arch[32];
	uint64_t memory_total;
	uint64_t clock_khz;
	/* Launch limits from the device's properties (backend_info's). */
	uint32_t max_threads_per_block, max_block[3], max_grid[3];
	uint64_t shared_per_block, shared_optin;
	/* Launch attributes (backend_info's): cooperative launches, clusters, the
	 * multiprocessors, compute capability major * 10 + minor (NVIDIA; 0 on AMD). */
	bool cooperative, clusters;
	uint32_t multiprocessors, cc;
	_Atomic uint64_t findings;
	/* A device fault seen by a completion thread: later launches are refused. */
	_Atomic int device_error;
	/* Shutting down (hip__cancel): launches still in a submit thread's queue are not
	 * enqueued; their streams fail with -ESHUTDOWN. Sticky. */
	atomic_bool cancelled;
	unsigned nstreams;
	struct hip_stream streams[SEQ_MAX_STREAMS];
	hipModule_t module;
	bool module_loaded;
	const struct kernel_desc *const *kernels;
	struct hip_fn fn[HIP_MAX_KERNELS];
	unsigned nfn;
	/* Event pool: the loop thread's alone. */
	struct hip_ev **events;
	size_t nevents, capevents;
	unsigned event_flags;
	/* Memory pool: the loop thread's alone. */
	struct hip_block **hash;
	size_t nhash, nblocks;
	struct hip_block *free_class[HIP_NCLASSES];
	uint64_t used_bytes, cached_bytes;
	uint64_t scratch_bytes; /* of used_bytes, the D2D streams' scratch blocks */
	/* Registered staging ranges, unregistered at destroy if the server did not. The
	 * pin thread pins them (hipHostRegister) off the loop; a copy through a range not
	 * pinned yet waits where it is enqueued (hip__staging_wait). The array and states
	 * under staging_mu; pins_pending counts ranges waiting for or in their pin. */
	struct hip_staging {
		void *addr;
		size_t size;
		/* LAZY: registered while a small-copy pool serves the small copies; pinned
		 * (PENDING) when a larger copy first goes through it. */
		enum {
			HIP_PIN_LAZY,
			HIP_PIN_PENDING,
			HIP_PIN_BUSY,
			HIP_PIN_DONE,
			HIP_PIN_FAILED
		} state;
	} * staging;
	size_t nstaging, capstaging;
	pthread_mutex_t staging_mu;
	pthread_cond_t staging_cond;
	_Atomic unsigned pins_pending, pins_lazy;
	/* The small-copy pool: slots, their records, the free ones (a stack under pool_mu:
	 * the loop thread takes, whoever reports an event gives back). NULL: no pool. */
	char *pool;
	size_t pool_bytes;
	struct hip_pool_slot *pool_slots; /* [slot - 1] */
	int32_t *pool_free;
	unsigned pool_nslots, pool_nfree;
	pthread_mutex_t pool_mu;
	_Atomic uint64_t pool_copies; /* copies that went through the pool */
	_Atomic uint64_t pool_misses; /* short enough for it, every slot busy */
	_Atomic uint64_t pins_done; /* staging ranges pinned (not counting again after a reset) */
	pthread_t pinner;
	bool pinner_started, pin_stop;
	/* Cached blocks handed back to the device off the loop thread (hipFree syncs). */
	pthread_t reaper;
	bool reaper_started;
	pthread_mutex_t reap_mu;
	pthread_cond_t reap_cond;
	struct hip_block *reap_list;
	struct hip_reap_module *reap_modules;
	bool reap_stop;
	/* Audit: checks queued by the loop thread for the audit thread, and spent ops; both
	 * under audit_mu. */
	pthread_t auditor;
	bool auditor_started;
	pthread_mutex_t audit_mu;
	pthread_cond_t audit_cond;
	struct hip_audit_check *aq_head, *aq_tail;
	struct hip_audit_op *afree;
	bool audit_stop;
	atomic_bool audit_warned;
	_Atomic uint64_t audit_queued; /* checks queued, */
	_Atomic uint64_t audit_done; /* taken off the queue, */
	_Atomic uint64_t audit_checks; /* of which timed, */
	_Atomic uint64_t audit_findings; /* of which found a missing wait */
	struct hip_timeline tl; /* --device-timeline only */
	/* The watcher (completion watch): one thread that reports every stream's events.
	 * A record bumps watch_gen and, when watch_sleeping, signals watch_cond. */
	pthread_t watcher;
	bool watcher_started;
	pthread_mutex_t watch_mu;
	pthread_cond_t watch_cond;
	_Atomic uint64_t watch_gen;
	atomic_bool watch_sleeping;
	bool watch_stop;
	uint64_t watch_long_spin_ns; /* HIP_WATCH_LONG_SPIN_NS, $SSEQ_HIP_WATCH_LONG_SPIN_US */
	uint64_t watch_nap_min_ns; /* HIP_WATCH_NAP_MIN_NS, $SSEQ_HIP_WATCH_NAP_MIN_US */
	_Atomic uint64_t watch_sleeps; /* times it slept with nothing outstanding (tests) */
	/* The submit threads (see hip-submit.c); none: the commands run inline. How long an
	 * idle one looks for its next command before it sleeps (HIP_SUBMIT_SPIN_NS, or
	 * $SSEQ_HIP_SUBMIT_SPIN_US for comparisons), and how long the one the latest command
	 * of the whole process went to goes on looking (HIP_SUBMIT_LONG_SPIN_NS,
	 * $SSEQ_HIP_SUBMIT_LONG_SPIN_US; hip-submit.c). */
	unsigned nsubmitters;
	uint64_t submit_spin_ns;
	uint64_t submit_long_spin_ns;
	/* HIP_SUBMIT_INLINE_GAP_NS, or $SSEQ_HIP_SUBMIT_INLINE_GAP_US (tests, comparisons). */
	uint64_t submit_inline_gap_ns;
	/* Commands the loop made itself for a sleeping submit thread, and submit threads
	 * woken for a command (Counters.calls_on_loop, submit_wakeups): the loop's to
	 * write, any loop's query to read. */
	_Atomic uint64_t calls_here, thread_wakes;
	struct hip_submitter sub[HIP_MAX_SUBMIT_THREADS];
	pthread_mutex_t event_lock[HIP_EVENT_LOCKS];
};

/* Entry i of st's event ring, counted from its head. */
static inline struct hip_event_ent *hip__ring_at(struct hip_stream *st, size_t i)
{
	return &st->ring[(st->head + i) % st->cap];
}

/* A pause between looks at shared state while spinning: tells the CPU (and a sibling
 * hyperthread) that this is a wait loop. */
static inline void hip__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* hip.c: errors, translated once, there. */
int hip__errno(hipError_t e);
/* Log a failed call with what it was doing and return the translated error. */
int hip__fail(hipError_t e, const char *call, const char *what, struct seq_point at);

/* hip-mem.c: the caching pool, its reaper thread, staging registration. */
int hip__mem_alloc(void *ctx, uint64_t size, uint64_t *addr);
void hip__mem_release(void *ctx, uint64_t addr, uint64_t size);
struct hip_block *hip__block_find(const struct hip *h, uint64_t addr);
int hip__reaper_start(struct hip *h);
/* The pin thread: started at bring-up, stopped (pending pins done first) at teardown. */
int hip__pinner_start(struct hip *h);
void hip__pinner_stop(struct hip *h);
/* Before a copy through host memory p: wait until the staging range holding it, if any,
 * is no longer being pinned. On the thread that enqueues the copy. */
void hip__staging_wait(struct hip *h, const void *p);
/* The small-copy pool (bring-up, teardown); a slot for a copy of len bytes (slots count
 * from 1; 0: none: too long, no pool, or every slot busy), given back unused, appended to
 * st's list for its next record; the slots of a reported event's list finished. */
void hip__counters(void *ctx, struct backend_counters *out);
int hip__pool_start(struct hip *h);
void hip__pool_stop(struct hip *h);
int32_t hip__pool_take(struct hip *h, uint64_t len);
void hip__pool_put(struct hip *h, int32_t slot);
void hip__pool_append(struct hip *h, struct hip_stream *st, int32_t slot, uint64_t seq);
int32_t hip__pool_cut(struct hip *h, struct hip_stream *st, uint64_t through);
void hip__pool_finish(struct hip *h, int32_t list, int status, struct done_wakes *wakes);
static inline void *hip__pool_addr(const struct hip *h, int32_t slot)
{
	return h->pool + (size_t)(slot - 1) * HIP_POOL_SLOT;
}
/* After a reset: every range pinned again, by the pin thread. */
void hip__staging_repin(struct hip *h);
void hip__reaper_stop(struct hip *h);
void hip__mem_finish(struct hip *h);
int hip__staging_register(void *ctx, void *addr, size_t size);
void hip__staging_unregister(void *ctx, void *addr, size_t size);
bool hip__staging_ready(void *ctx, void *addr);
void hip__staging_finish(struct hip *h);

/* hip-event.c: the event pool, record, wait, retire. */
int hip__event_pool_fill(struct hip *h);
void hip__event_pool_finish(struct hip *h);
void hip__event_destroy(struct hip_ev *ev);
int hip__record(void *ctx, struct seq_point at);
int hip__wait(void *ctx, uint32_t stream, struct seq_point event);
void hip__retire(void *ctx, struct seq_point event);

/* hip-submit.c: launch, and the commands that run inline or on the submit thread. */
int hip__launch(void *ctx, struct seq_point at, const struct seq_op *op);
struct hip_cmd *hip__submit_begin(struct hip *h, uint32_t stream, struct hip_cmd *local);
int hip__submit_end(struct hip *h, struct hip_cmd *c);
int hip__submit_start(struct hip *h);
void hip__submit_stop(struct hip *h);
void hip__cancel(void *ctx);
void hip__submit_finish(struct hip *h);
void hip__scratch_retire(struct hip *h, struct hip_stream *st, uint64_t through);
/* What a kernel launch is called in logs and audit reports. */
const char *hip__kernel_name(const struct op_payload *p);

/* hip-complete.c: the completion threads. */
hipError_t hip__event_poll(hipEvent_t ev);
int hip__complete_start(struct hip *h);
/* Each completion thread reports what its streams hold, then stops; joined here (watch)
 * or in the stream's teardown (sync, poll). */
void hip__complete_stop(struct hip *h);
/* After a record ran on st (its entry counted in nsubmitted, st->mu released): wake
 * whoever reports st's events. */
void hip__complete_kick(struct hip *h, struct hip_stream *st);
/* backend_ops.point_word: the word goes on at.stream's notes. */
int hip__point_word(void *ctx, struct seq_point at, _Atomic uint64_t *word, uint64_t tag,
	_Atomic bool *written);

/* hip-audit.c: timestamps around every launch, checked on the audit thread. */
void hip__audit_op_put(struct hip *h, struct hip_audit_op *a);
void hip__audit_warn(struct hip *h, const char *why, hipError_t e);
struct hip_audit_op *hip__audit_prepare(
	struct hip *h, struct seq_point at, const struct seq_op *op);
struct hip_audit_check *hip__audit_table(struct hip *h, struct hip_stream *st, struct seq_point at,
	const struct seq_op *op, struct hip_audit_op *a);
void hip__audit_unpush(struct hip *h, struct hip_stream *st, struct seq_point at);
void hip__audit_queue(struct hip *h, struct hip_audit_op *a, struct hip_audit_check *checks);
void hip__audit_retire(struct hip *h, struct hip_stream *st, uint64_t through);
uint64_t hip__audit_findings(void *ctx);
struct hip_audit_op *hip__audit_lookup(struct hip_stream *st, uint64_t seq);
int hip__audit_start(struct hip *h);
void hip__audit_stop(struct hip *h);
void hip__audit_finish(struct hip *h);

/* hip-timeline.c: the device timeline, the audit table's timestamps on the host clock. */
int hip__timeline_start(struct hip *h);
void hip__timeline_stop(struct hip *h);
int hip__op_times(
	void *ctx, struct seq_point at, uint64_t *start_ns, uint64_t *end_ns, uint64_t *error_ns);

/* Whether launches are bracketed by timing events (the audit table): for the audit or
 * the device timeline. */
static inline bool hip__stamped(const struct hip *h)
{
	return h->cfg.audit || h->cfg.device_timeline;
}

/* hip-module.c: the built-in kernel image and users' code objects. */
int hip__kernels_load(struct hip *h);
int hip__module_load(void *ctx, const char *path, void **module);
int hip__module_function(void *ctx, void *module, const char *name, void **function);
void hip__module_unload(void *ctx, void *module);
int hip__module_global(void *ctx, void *module, const char *name, uint64_t *addr, uint64_t *size);
int hip__function_param(void *ctx, void *function, unsigned index, size_t *offset, size_t *size);
int hip__module_functions(void *ctx, void *module, char ***names, size_t *n);
int hip__function_attrs(void *ctx, void *function, struct backend_fn_attrs *attrs);
int hip__function_max_shared(void *ctx, void *function, uint64_t bytes);
int hip__function_occupancy(
	void *ctx, void *function, uint32_t threads, uint64_t shared, uint32_t *blocks);

#endif
