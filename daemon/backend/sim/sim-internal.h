/* What the parts of the sim share (sim.c, sim-mem.c, sim-detect.c, sim-worker.c,
 * sim-config.c): the device's structs and the functions one part calls in another. Not
 * for use outside daemon/backend/sim. */
#ifndef SSEQ_SIM_INTERNAL_H
#define SSEQ_SIM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim.h"
#include "word-notes.h"

#define SIM_CLASS_BUCKETS 64
/* Run entries a stream keeps for reuse; the worker frees the rest of a batch. Kept all, a
 * stream held as many (some 4 KiB each) as its deepest queue had ever been. */
#define SIM_SPARE_MAX 16
#define SIM_HOST_USES 64

enum sim_entry_type {
	SIM_ENTRY_OP,
	SIM_ENTRY_WAIT, /* at: the event waited for */
	SIM_ENTRY_RECORD,
};

enum sim_race {
	SIM_RACE_RAW, /* read before its producer */
	SIM_RACE_WAR, /* write before a pending reader */
	SIM_RACE_WAW, /* write before the previous writer */
};

/* An allocation: its memory and its shadow. The shadow and the cache links belong to
 * whoever holds sim.lock; workers only read `gen`. */
struct sim_block {
	uint64_t addr;
	uint64_t size; /* the size class: a multiple of SIM_ALIGN */
	bool live;
	bool mapped;
	/* The core's number of the base it was allocated for (seq_access.alloc, told by
	 * mem_owner), or 0 until told or first used. */
	uint64_t base;
	/* Bumped at release and at reuse: an op that sees it change while in flight touched
	 * memory that changed hands. */
	_Atomic uint64_t gen;
	struct seq_point writer; /* last launched writer */
	uint64_t readers[SEQ_MAX_STREAMS]; /* launched readers since that writer, or 0 */
	uint64_t reader_mask; /* bit x: readers[x] is not 0 */
	uint64_t used[SEQ_MAX_STREAMS]; /* last launched op touching it, for the release check */
	struct sim_block *age_prev, *age_next; /* free cache, newest first */
	struct sim_block *class_prev, *class_next; /* free cache bucket, newest first */
};

/* A point an op must run after, found at launch and checked when the op runs. */
struct sim_need {
	struct seq_point p;
	enum sim_race race;
	uint64_t addr;
};

struct sim_view {
	uint64_t addr;
	uint64_t size;
	struct sim_block *block;
	uint64_t gen; /* block->gen at launch */
	bool reported; /* already a use-after-free at launch */
};

/* A queued command. Launch copies everything it needs: the caller's op and payload are
 * gone once launch returns. */
struct sim_entry {
	struct sim_entry *next;
	enum sim_entry_type type;
	struct seq_point at;
	enum seq_op_kind kind;
	bool device_fault; /* injected device-fail-op: runs without doing its work */
	bool device_lost; /* injected device-lost-op: ... and poisons every stream */
	unsigned naccess;
	unsigned nneed;
	struct sim_view view[SEQ_MAX_ACCESS];
	struct sim_need need[SEQ_MAX_STREAMS];
	struct op_payload payload;
};

/* A host range an in-flight copy reads (H2D source) or writes (D2H destination): the
 * staging shadow, so that two copies touching one range unordered are found too. */
struct sim_host_use {
	uintptr_t lo, hi;
	struct seq_point at;
	bool write;
};

/* The device's clock (CLOCK_MONOTONIC) around each op, for the timeline: a ring of
 * SIM_TIMES slots per stream, written by the stream's worker and read by the loop
 * (sim_op_times) as a seqlock. A slot reused while it was read is not reported. */
#define SIM_TIMES 4096
struct sim_times {
	_Atomic uint64_t seq, start_ns, end_ns;
};

struct sim;

struct sim_stream {
	struct sim *sim;
	enum seq_stream_kind kind;
	pthread_t thread;
	bool started;
	/* The worker's own. */
	uint64_t rng;
	uint64_t script_pos;
	int fault; /* once an op faulted: what every later event reports (sticky) */
	/* The submitting side's, under sim.lock. */
	uint64_t launched;
	struct sim_entry *cache; /* entries to reuse, taken from `spare` in bulk */
	/* Under mu. */
	pthread_mutex_t mu;
	pthread_cond_t work; /* the worker sleeps here for entries */
	pthread_cond_t progress; /* other workers sleep here for `executed` */
	struct sim_entry *head, *tail;
	struct sim_entry *spare; /* run entries handed back by the worker */
	unsigned nspare; /* how many: at most SIM_SPARE_MAX */
	/* Await words, written at the report through their point (sim_point_word). */
	struct word_notes notes;
	bool sleeping;
	bool stop;
	/* Written by the worker only. `waiters` is raised under mu before sleeping on
	 * progress, so the worker locks and broadcasts only when somebody sleeps. */
	_Atomic uint64_t executed;
	_Atomic unsigned waiters;
};

struct sim {
	struct cq *cq;
	backend_finding_fn finding;
	backend_finding_op_fn finding_op;
	void *finding_arg;
	struct sim_config cfg;
	unsigned nstreams; /* the core's layout's; each stream knows its kind */
	_Atomic uint64_t findings;
	/* A device-lost-op ran: every op does no work and every event reports -EIO, on
	 * every stream, until reset. Set by a worker, read by all: the process's one flag
	 * (sim.c), which every loop's sim shares, as a GPU's loops share one context. */
	atomic_bool *lost;
	/* Shutting down (sim_cancel): every op a worker has not begun is skipped, its
	 * stream's events report -ESHUTDOWN, and no worker waits for another. Sticky. */
	atomic_bool cancelled;
	struct sim_stream streams[SEQ_MAX_STREAMS];
	struct sim_times *times; /* nstreams * SIM_TIMES; kept across resets */
	/* The shadow, the memory map and every stream's submitting side. Taken by the
	 * thread driving the core, never by workers. */
	pthread_mutex_t lock;
	uint64_t launches;
	struct sim_block **blocks; /* every block, live or cached, by address */
	size_t nblocks, cap;
	struct sim_block *bucket[SIM_CLASS_BUCKETS];
	struct sim_block *newest, *oldest;
	uint64_t used_bytes;
	uint64_t cached_bytes;
	/* The staging shadow: the host ranges of the last SIM_HOST_USES copies launched (a
	 * ring; those already run are skipped), which bounds its cost per copy. */
	struct sim_host_use host[SIM_HOST_USES];
	size_t nhost; /* copies entered so far: the next goes to nhost % SIM_HOST_USES */
};

static inline bool sim_executed(struct sim *sim, struct seq_point p)
{
	return atomic_load(&sim->streams[p.stream].executed) >= p.seq;
}

/* sim-mem.c: alloc and release are backend ops and take sim.lock; sim_block_find needs it
 * held; sim_mem_finish runs once no worker is left. */
int sim_mem_alloc(void *ctx, uint64_t size, uint64_t *addr);
void sim_mem_release(void *ctx, uint64_t addr, uint64_t size);
void sim_mem_owner(void *ctx, uint64_t addr, uint64_t base);
struct sim_block *sim_block_find(const struct sim *sim, uint64_t addr, uint64_t size);
void sim_mem_finish(struct sim *sim);

/* sim-detect.c: at launch under sim.lock (views, needs, note), then on the worker. */
/* A finding about the op at `at` (seq 0: none) touching memory at addr (0: none). */
__attribute__((format(printf, 4, 5))) void sim_report(
	struct sim *sim, struct seq_point at, uint64_t addr, const char *fmt, ...);
int sim_detect_views(struct sim *sim, struct sim_entry *e, const struct seq_op *op);
void sim_detect_needs(struct sim *sim, struct sim_entry *e, const struct seq_op *op);
void sim_detect_note(struct sim_entry *e, const struct seq_op *op);
int sim_detect_staging(struct sim *sim, struct sim_entry *e, const struct seq_op *op);
void sim_detect_races(struct sim *sim, const struct sim_entry *e);
void sim_detect_released(struct sim *sim, const struct sim_entry *e);

/* sim-worker.c */
int sim_record(void *ctx, struct seq_point at);
int sim_wait(void *ctx, uint32_t stream, struct seq_point event);
int sim_launch(void *ctx, struct seq_point at, const struct seq_op *op);
int sim_streams_start(struct sim *sim, const enum seq_stream_kind *kinds);
int sim_op_times(
	void *ctx, struct seq_point at, uint64_t *start_ns, uint64_t *end_ns, uint64_t *error_ns);
void sim_streams_stop(struct sim *sim);
void sim_cancel(void *ctx);
int sim_point_word(void *ctx, struct seq_point at, _Atomic uint64_t *word, uint64_t tag,
	_Atomic bool *written);

/* sim-config.c */
int sim_config_check(const struct sim_config *cfg);
/* sseqd's options for the sim (sim-config.c), in its descriptor (sim.c). */
extern const struct option_row sim_options[];

#endif
