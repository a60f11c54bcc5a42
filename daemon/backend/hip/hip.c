/* The hip backend: the sequencer's commands as HIP stream operations on one GPU. The loop
 * thread only enqueues (copies, kernels, event records and waits); one thread per stream
 * waits for that stream's recorded events in order and reports them; device memory comes
 * from a caching pool so that no hipFree, which synchronizes the device, runs on the loop.
 * With --audit, timing events bracket every launch and an audit thread checks on the GPU's
 * timestamps that each operation started after the operations it depends on finished.
 * With SSEQ_HIP_SUBMIT=thread the enqueue calls run on a submit thread instead (see
 * hip_submit_*; not the default yet, see enum hip_submit). */
#include "hip.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#ifdef SSEQ_HIP_NVIDIA
#include "hip-nvidia.h"
#else
#include <hip/hip_runtime_api.h>
#endif

#include "log.h"

#define HIP_BLOCK 256
#define HIP_GRID_MAX 0x7fffffffu
/* Size classes: multiples of 256 up to 4 KiB, then 8 per power of two (at most 12.5%
 * slack), so released blocks fit the next request of about the same size. */
#define HIP_ALIGN 256
#define HIP_SMALL_MAX 4096
#define HIP_SMALL_CLASSES (HIP_SMALL_MAX / HIP_ALIGN)
#define HIP_CLASS_STEPS 8
#define HIP_MAX_ALLOC (1ull << 48)
#define HIP_NCLASSES (HIP_SMALL_CLASSES + (48 - 12) * HIP_CLASS_STEPS)
#define HIP_EVENTS_PRECREATED 64
#define HIP_MAX_KERNELS 32
/* Polling: a few queries back to back (1-2 us each) catch short ops; then sleep. */
#define HIP_POLL_SPINS 16
#define HIP_POLL_SLEEP_NS 20000
/* How long an idle completion thread keeps looking for new events before it sleeps. */
#define HIP_IDLE_SPIN_NS 1000000L
/* Commands the loop may queue ahead of the submit thread (a power of two). */
#define HIP_SUBMIT_QUEUE 4096
/* gfx90a and gfx94x run the wall clock behind wall_clock64() at 100 MHz; HIP 5.2 cannot
 * query it (hipDeviceAttributeWallClockRate came later). NVIDIA's %globaltimer is in ns. */
#define HIP_AMD_WALL_CLOCK_KHZ 100000ull
#define HIP_NV_GLOBALTIMER_KHZ 1000000ull

#ifndef SSEQ_KERNELS_INSTALL_PATH
#define SSEQ_KERNELS_INSTALL_PATH "/usr/local/lib/sseq/sseq-kernels"
#endif

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

struct hip_event_ent {
	uint64_t seq;
	hipEvent_t ev;
	/* Set by whoever records it: the stream's failure (reported instead of success), and
	 * whether the record itself failed (nothing to wait for on the event). */
	int status;
	bool unrecorded;
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
	struct hip_audit_op *next_free;
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
	int32_t i32;
	uint32_t u32;
	int64_t i64;
	uint64_t u64;
	float f32;
	double f64;
};

/* One enqueue for the submit thread, with everything it needs copied in: the caller's op
 * and payload are gone once launch returns. */
struct hip_cmd {
	enum { HIP_CMD_LAUNCH, HIP_CMD_WAIT, HIP_CMD_RECORD } kind;
	uint32_t stream; /* launch, record: the op's stream; wait: the waiting stream */
	struct seq_point at; /* launch, record: the point; wait: the event waited for */
	hipEvent_t ev; /* wait, record */
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
		} copy;
		struct {
			hipFunction_t f;
			uint32_t grid[3], block[3], shared;
			unsigned nv; /* values in v, then conv when has_conv */
			bool has_conv;
			union hip_karg v[KERNEL_MAX_ARGS + 2];
			struct kernel_conv2d conv;
			char what[48];
		} kernel;
	};
};

struct hip;

struct hip_stream {
	struct hip *h;
	uint32_t index;
	enum seq_stream_kind kind;
	hipStream_t stream;
	pthread_t thread;
	bool started;
	/* The loop thread's. */
	uint64_t launched;
	uint64_t recorded;
	uint64_t scratch; /* for overlapping D2D copies (D2D streams) */
	uint64_t scratch_size;
	struct hip_deferred *deferred;
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
	/* The submitting thread's: the error that failed the stream there (sticky). */
	int failed;
	bool sleeping;
	bool stop;
};

struct hip {
	backend_complete_fn complete;
	backend_finding_fn finding;
	void *arg;
	struct hip_config cfg;
	int device;
	bool device_open;
	char name[96];
	char arch[32];
	uint64_t memory_total;
	uint64_t clock_khz;
	_Atomic uint64_t findings;
	/* A device fault seen by a completion thread: later launches are refused. */
	_Atomic int device_error;
	unsigned nstreams;
	struct hip_stream streams[SEQ_MAX_STREAMS];
	hipModule_t module;
	bool module_loaded;
	const struct kernel_desc *const *kernels;
	struct hip_fn fn[HIP_MAX_KERNELS];
	unsigned nfn;
	/* Event pool: the loop thread's alone. */
	hipEvent_t *events;
	size_t nevents, capevents;
	unsigned event_flags;
	/* Memory pool: the loop thread's alone. */
	struct hip_block **hash;
	size_t nhash, nblocks;
	struct hip_block *free_class[HIP_NCLASSES];
	uint64_t used_bytes, cached_bytes;
	uint64_t scratch_bytes; /* of used_bytes, the D2D streams' scratch blocks */
	/* Registered staging ranges, unregistered at destroy if the server did not. */
	struct hip_staging {
		void *addr;
		size_t size;
	} * staging;
	size_t nstaging, capstaging;
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
	/* The submit queue (see hip_submit_*): the loop thread produces at q_tail, the
	 * submit thread consumes at q_head. */
	bool submit_thread;
	struct hip_cmd *q;
	_Atomic size_t q_head, q_tail;
	atomic_bool q_sleeping;
	bool q_stop;
	pthread_mutex_t q_mu;
	pthread_cond_t q_cond;
	pthread_t submitter;
	bool submitter_started;
};

/* ---- errors: translated once, here ---- */

static int hip_errno(hipError_t e)
{
	switch (e) {
	case hipSuccess:
		return 0;
	case hipErrorOutOfMemory:
		return -ENOMEM;
	case hipErrorInvalidValue:
	case hipErrorInvalidDevicePointer:
	case hipErrorInvalidResourceHandle:
	case hipErrorInvalidConfiguration:
		return -EINVAL;
	case hipErrorNoDevice:
	case hipErrorInvalidDevice:
	case hipErrorInsufficientDriver:
	case hipErrorInitializationError:
		return -ENODEV;
	case hipErrorFileNotFound:
	case hipErrorNotFound:
		return -ENOENT;
	case hipErrorInvalidImage:
	case hipErrorNoBinaryForGpu:
	case hipErrorSharedObjectInitFailed:
		return -ENOEXEC;
	case hipErrorHostMemoryAlreadyRegistered:
		return -EEXIST;
	case hipErrorHostMemoryNotRegistered:
		return -ENOENT;
	case hipErrorNotSupported:
		return -ENOTSUP;
	case hipErrorLaunchOutOfResources:
		return -E2BIG;
	case hipErrorNotReady:
		return -EAGAIN;
	default:
		/* Faults on the device (illegal address, launch failure, ECC, ...). */
		return -EIO;
	}
}

/* Log a failed call with what it was doing and return the translated error. */
static int hip_fail(hipError_t e, const char *call, const char *what, struct seq_point at)
{
	int r = hip_errno(e);

	log_err("hip", "%s for %s at %" PRIu32 ":%" PRIu64 " failed: %s (%s) -> %s", call, what,
		at.stream, at.seq, hipGetErrorName(e), hipGetErrorString(e), strerror(-r));
	return r;
}

/* ---- memory: a caching pool by size class ---- */

static uint64_t hip_class(uint64_t size, unsigned *cls)
{
	unsigned e;
	uint64_t step, c;

	if (size == 0)
		size = 1;
	if (size <= HIP_SMALL_MAX) {
		c = (size + HIP_ALIGN - 1) & ~(uint64_t)(HIP_ALIGN - 1);
		*cls = (unsigned)(c / HIP_ALIGN) - 1;
		return c;
	}
	/* size in (2^e, 2^(e+1)], e >= 12: steps of 2^(e-3). */
	e = 63u - (unsigned)__builtin_clzll(size - 1);
	step = 1ull << (e - 3);
	c = (size + step - 1) & ~(step - 1);
	*cls = HIP_SMALL_CLASSES + (e - 12) * HIP_CLASS_STEPS +
		(unsigned)((c - (1ull << e)) / step) - 1;
	return c;
}

static size_t hip_hash_slot(const struct hip *h, uint64_t addr)
{
	return (size_t)(((addr / HIP_ALIGN) * 0x9e3779b97f4a7c15ull) >> 20) & (h->nhash - 1);
}

static struct hip_block *hip_block_find(const struct hip *h, uint64_t addr)
{
	struct hip_block *b;

	if (!h->nhash)
		return NULL;
	for (b = h->hash[hip_hash_slot(h, addr)]; b; b = b->hnext)
		if (b->addr == addr)
			return b;
	return NULL;
}

static int hip_block_insert(struct hip *h, struct hip_block *b)
{
	size_t slot;

	if (h->nblocks + 1 > h->nhash / 2) {
		size_t n = h->nhash ? 2 * h->nhash : 256;
		struct hip_block **t = calloc(n, sizeof(*t));

		if (!t)
			return -ENOMEM;
		for (size_t i = 0; i < h->nhash; i++) {
			struct hip_block *x = h->hash[i];

			while (x) {
				struct hip_block *next = x->hnext;
				size_t s =
					(size_t)(((x->addr / HIP_ALIGN) * 0x9e3779b97f4a7c15ull) >>
						20) &
					(n - 1);

				x->hnext = t[s];
				t[s] = x;
				x = next;
			}
		}
		free(h->hash);
		h->hash = t;
		h->nhash = n;
	}
	slot = hip_hash_slot(h, b->addr);
	b->hnext = h->hash[slot];
	h->hash[slot] = b;
	h->nblocks++;
	return 0;
}

static void hip_block_unlink(struct hip *h, struct hip_block *b)
{
	struct hip_block **p = &h->hash[hip_hash_slot(h, b->addr)];

	while (*p != b)
		p = &(*p)->hnext;
	*p = b->hnext;
	h->nblocks--;
}

/* Hand every cached block to the reaper: memory goes back to the device for a request
 * that no cached block can serve. */
static void hip_cache_reap(struct hip *h)
{
	struct hip_block *list = NULL;

	for (unsigned c = 0; c < HIP_NCLASSES; c++) {
		while (h->free_class[c]) {
			struct hip_block *b = h->free_class[c];

			h->free_class[c] = b->next_free;
			hip_block_unlink(h, b);
			b->next_free = list;
			list = b;
		}
	}
	h->cached_bytes = 0;
	if (!list)
		return;
	pthread_mutex_lock(&h->reap_mu);
	for (struct hip_block *b = list, *next; b; b = next) {
		next = b->next_free;
		b->next_free = h->reap_list;
		h->reap_list = b;
	}
	pthread_cond_signal(&h->reap_cond);
	pthread_mutex_unlock(&h->reap_mu);
}

static void *hip_reaper(void *arg)
{
	struct hip *h = arg;

	hipSetDevice(h->device);
	pthread_mutex_lock(&h->reap_mu);
	for (;;) {
		struct hip_block *list;

		struct hip_reap_module *mods;

		while (!h->reap_list && !h->reap_modules && !h->reap_stop)
			pthread_cond_wait(&h->reap_cond, &h->reap_mu);
		if (!h->reap_list && !h->reap_modules)
			break;
		list = h->reap_list;
		h->reap_list = NULL;
		mods = h->reap_modules;
		h->reap_modules = NULL;
		pthread_mutex_unlock(&h->reap_mu);
		while (mods) {
			struct hip_reap_module *next = mods->next;
			hipError_t e = hipModuleUnload(mods->module);

			if (e != hipSuccess)
				log_warn("hip", "hipModuleUnload failed: %s", hipGetErrorName(e));
			free(mods);
			mods = next;
		}
		while (list) {
			struct hip_block *next = list->next_free;
			hipError_t e = hipFree((void *)(uintptr_t)list->addr);

			if (e != hipSuccess)
				log_warn("hip", "hipFree(%#" PRIx64 ") failed: %s", list->addr,
					hipGetErrorName(e));
			free(list);
			list = next;
		}
		pthread_mutex_lock(&h->reap_mu);
	}
	pthread_mutex_unlock(&h->reap_mu);
	return NULL;
}

static int hip_mem_alloc(void *ctx, uint64_t size, uint64_t *addr)
{
	struct hip *h = ctx;
	struct hip_block *b;
	unsigned cls;
	uint64_t csize;
	hipError_t e;
	void *p = NULL;

	if (size > HIP_MAX_ALLOC)
		return -ENOMEM;
	csize = hip_class(size, &cls);
	b = h->free_class[cls];
	if (b) {
		h->free_class[cls] = b->next_free;
		h->cached_bytes -= b->size;
		goto found;
	}
	e = hipMalloc(&p, csize);
	if (e == hipErrorOutOfMemory) {
		/* A larger cached block serves the request (release goes by its own class);
		 * failing that, the cache goes back to the device for the next attempt. */
		for (unsigned c = cls + 1; c < HIP_NCLASSES; c++) {
			b = h->free_class[c];
			if (b) {
				h->free_class[c] = b->next_free;
				h->cached_bytes -= b->size;
				goto found;
			}
		}
		if (h->cached_bytes) {
			log_notice("hip",
				"out of device memory for %" PRIu64 " bytes; returning "
				"%" PRIu64 " cached bytes to the device",
				size, h->cached_bytes);
			hip_cache_reap(h);
		}
	}
	if (e != hipSuccess)
		return hip_errno(e);
	b = calloc(1, sizeof(*b));
	if (b) {
		b->addr = (uint64_t)(uintptr_t)p;
		b->size = csize;
		b->cls = cls;
	}
	if (!b || hip_block_insert(h, b) < 0) {
		free(b);
		/* hipFree synchronizes, but only on a host allocation failure. */
		hipFree(p);
		return -ENOMEM;
	}
found:
	b->live = true;
	b->next_free = NULL;
	h->used_bytes += b->size;
	*addr = b->addr;
	return 0;
}

static void hip_mem_release(void *ctx, uint64_t addr, uint64_t size)
{
	struct hip *h = ctx;
	struct hip_block *b = hip_block_find(h, addr);

	if (!b || !b->live) {
		char what[128];

		snprintf(what, sizeof(what),
			"release of device memory %#" PRIx64 " (%" PRIu64
			" bytes) that is not allocated",
			addr, size);
		log_err("hip", "%s", what);
		atomic_fetch_add(&h->findings, 1);
		if (h->finding)
			h->finding(h->arg, what);
		return;
	}
	/* Newest first: a just-released block is the most likely to be warm. */
	b->live = false;
	b->next_free = h->free_class[b->cls];
	h->free_class[b->cls] = b;
	h->used_bytes -= b->size;
	h->cached_bytes += b->size;
}

/* ---- events ---- */

static int hip_event_get(struct hip *h, hipEvent_t *ev)
{
	hipError_t e;

	if (h->nevents) {
		*ev = h->events[--h->nevents];
		return 0;
	}
	e = hipEventCreateWithFlags(ev, h->event_flags);
	if (e != hipSuccess)
		return hip_fail(e, "hipEventCreateWithFlags", "event", (struct seq_point){0, 0});
	return 0;
}

static void hip_event_put(struct hip *h, hipEvent_t ev)
{
	if (h->nevents == h->capevents) {
		size_t cap = h->capevents ? 2 * h->capevents : 64;
		hipEvent_t *v = realloc(h->events, cap * sizeof(*v));

		if (!v) {
			hipEventDestroy(ev);
			return;
		}
		h->events = v;
		h->capevents = cap;
	}
	h->events[h->nevents++] = ev;
}

static struct hip_event_ent *hip_ring_at(struct hip_stream *st, size_t i)
{
	return &st->ring[(st->head + i) % st->cap];
}

static struct hip_cmd *hip_submit_begin(struct hip *h, struct hip_cmd *local);
static int hip_submit_end(struct hip *h, struct hip_cmd *c);

static int hip_record(void *ctx, struct seq_point at)
{
	struct hip *h = ctx;
	struct hip_stream *st;
	struct hip_cmd local, *c;
	hipEvent_t ev;
	int r;

	if (at.stream >= h->nstreams)
		return -EINVAL;
	st = &h->streams[at.stream];
	if (at.seq > st->launched || at.seq <= st->recorded)
		return -EINVAL;
	r = hip_event_get(h, &ev);
	if (r < 0)
		return r;
	pthread_mutex_lock(&st->mu);
	if (st->count == st->cap) {
		size_t cap = st->cap ? 2 * st->cap : 64;
		struct hip_event_ent *ring = malloc(cap * sizeof(*ring));

		if (!ring) {
			pthread_mutex_unlock(&st->mu);
			hip_event_put(h, ev);
			return -ENOMEM;
		}
		for (size_t i = 0; i < st->count; i++)
			ring[i] = *hip_ring_at(st, i);
		free(st->ring);
		st->ring = ring;
		st->cap = cap;
		st->head = 0;
	}
	*hip_ring_at(st, st->count) = (struct hip_event_ent){at.seq, ev, 0, false};
	st->count++;
	st->recorded = at.seq;
	pthread_mutex_unlock(&st->mu);
	/* The completion thread sees the event once the command has recorded it. */
	c = hip_submit_begin(h, &local);
	c->kind = HIP_CMD_RECORD;
	c->stream = at.stream;
	c->at = at;
	c->ev = ev;
	return hip_submit_end(h, c);
}

/* The event recorded at exactly `seq` on st. Loop thread only: it is the ring's only
 * writer, so reading without the lock is safe. */
static struct hip_event_ent *hip_event_find(struct hip_stream *st, uint64_t seq)
{
	size_t lo = 0, hi = st->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct hip_event_ent *x = hip_ring_at(st, mid);

		if (x->seq == seq)
			return x;
		if (x->seq < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int hip_wait(void *ctx, uint32_t stream, struct seq_point event)
{
	struct hip *h = ctx;
	struct hip_event_ent *x;
	struct hip_cmd local, *c;

	if (stream >= h->nstreams || event.stream >= h->nstreams)
		return -EINVAL;
	if (stream == event.stream)
		return 0; /* an in-order stream already waits for itself */
	x = hip_event_find(&h->streams[event.stream], event.seq);
	if (!x)
		return -EINVAL; /* not recorded, or retired: nothing to wait on */
	/* Queued after the command that records it: the queue runs in order. */
	c = hip_submit_begin(h, &local);
	c->kind = HIP_CMD_WAIT;
	c->stream = stream;
	c->at = event;
	c->ev = x->ev;
	return hip_submit_end(h, c);
}

/* ---- audit: timestamps around every launch ---- */

static void hip_audit_op_put(struct hip *h, struct hip_audit_op *a)
{
	if (!a || atomic_fetch_sub(&a->refs, 1) != 1)
		return;
	pthread_mutex_lock(&h->audit_mu);
	a->next_free = h->afree;
	h->afree = a;
	pthread_mutex_unlock(&h->audit_mu);
}

/* A spent op with its two timing events, or a new one. */
static struct hip_audit_op *hip_audit_op_get(struct hip *h)
{
	struct hip_audit_op *a;
	hipError_t e;

	pthread_mutex_lock(&h->audit_mu);
	a = h->afree;
	if (a)
		h->afree = a->next_free;
	pthread_mutex_unlock(&h->audit_mu);
	if (a)
		return a;
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	/* Timing on, whatever cfg.timing says: the audit is about the timestamps. */
	e = hipEventCreateWithFlags(&a->start, hipEventDefault);
	if (e == hipSuccess) {
		e = hipEventCreateWithFlags(&a->end, hipEventDefault);
		if (e != hipSuccess)
			hipEventDestroy(a->start);
	}
	if (e != hipSuccess) {
		free(a);
		return NULL;
	}
	return a;
}

static void hip_audit_op_destroy(struct hip_audit_op *a)
{
	hipEventDestroy(a->start);
	hipEventDestroy(a->end);
	free(a);
}

/* Timestamps are best effort: an op whose start or end cannot be recorded still runs, it
 * just goes unchecked, and the log says so once. */
static void hip_audit_warn(struct hip *h, const char *why, hipError_t e)
{
	if (atomic_exchange(&h->audit_warned, true))
		return;
	log_warn("hip", "audit: %s (%s): some operations go unchecked", why,
		e == hipSuccess ? "out of memory" : hipGetErrorName(e));
}

/* The op's timestamps, with one reference for the launch command, which records them
 * around the op (the start after the waits the core enqueued). */
static struct hip_audit_op *hip_audit_prepare(
	struct hip *h, struct seq_point at, const struct seq_op *op)
{
	const struct op_payload *p = op->payload;
	struct hip_audit_op *a = hip_audit_op_get(h);

	if (!a) {
		hip_audit_warn(h, "cannot create timing events", hipSuccess);
		return NULL;
	}
	atomic_store(&a->refs, 1);
	a->bad = false;
	a->at = at;
	if (op->kind == SEQ_OP_EXEC)
		snprintf(a->what, sizeof(a->what), "kernel %s",
			p->kernel && p->kernel->name ? p->kernel->name
				: p->function_name   ? p->function_name
						     : "(module function)");
	else
		snprintf(a->what, sizeof(a->what), "%s", backend_op_name(op->kind));
	return a;
}

/* The entry for point seq of st: NULL when retired (known complete) or unrecorded. */
static struct hip_audit_op *hip_audit_lookup(struct hip_stream *st, uint64_t seq)
{
	if (seq < st->afirst || seq - st->afirst >= st->acount)
		return NULL;
	return st->aops[(st->ahead + (seq - st->afirst)) % st->acap];
}

static int hip_audit_push(struct hip_stream *st, struct seq_point at, struct hip_audit_op *a)
{
	if (st->acount == 0)
		st->afirst = at.seq;
	if (at.seq != st->afirst + st->acount)
		return -EINVAL; /* launches are consecutive; anything else is a bug */
	if (st->acount == st->acap) {
		size_t cap = st->acap ? 2 * st->acap : 256;
		struct hip_audit_op **v = malloc(cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < st->acount; i++)
			v[i] = st->aops[(st->ahead + i) % st->acap];
		free(st->aops);
		st->aops = v;
		st->acap = cap;
		st->ahead = 0;
	}
	st->aops[(st->ahead + st->acount) % st->acap] = a;
	st->acount++;
	return 0;
}

/* On the loop thread, as the op is launched: its table entry, and the checks against the
 * newest producer on each other stream that is not yet known complete, for the launch
 * command to queue once the timestamps are recorded. The core calls launch before it
 * updates the buffers, so a base's def and readers still name what this op must come
 * after: the writer of everything it touches (read after write, write after write) and,
 * for what it writes, the readers since (write after read). */
static struct hip_audit_check *hip_audit_table(struct hip *h, struct hip_stream *st,
	struct seq_point at, const struct seq_op *op, struct hip_audit_op *a)
{
	struct hip_audit_check *checks = NULL, *last = NULL;
	uint64_t need[SEQ_MAX_STREAMS] = {0};
	const struct seq_buffer *need_buf[SEQ_MAX_STREAMS] = {0};
	bool need_war[SEQ_MAX_STREAMS] = {0};

	/* Keep the table consecutive even for an unchecked point. */
	if (hip_audit_push(st, at, a) < 0) {
		hip_audit_warn(h, "cannot grow the audit table", hipSuccess);
		return NULL;
	}
	if (!a)
		return NULL;
	atomic_fetch_add(&a->refs, 1); /* the table's */
	for (unsigned i = 0; i < op->naccess; i++) {
		const struct seq_buffer *b = op->access[i].buf;

		if (!b)
			continue;
		b = b->base ? b->base : b;
		if (b->def.seq && b->def.stream != at.stream && b->def.stream < h->nstreams &&
			need[b->def.stream] < b->def.seq) {
			need[b->def.stream] = b->def.seq;
			need_buf[b->def.stream] = b;
			need_war[b->def.stream] = false;
		}
		if (!(op->access[i].mode & SEQ_WRITE))
			continue;
		for (uint32_t x = 0; x < h->nstreams; x++) {
			if (x == at.stream || need[x] >= b->readers[x])
				continue;
			need[x] = b->readers[x];
			need_buf[x] = b;
			need_war[x] = true;
		}
	}
	for (uint32_t x = 0; x < h->nstreams; x++) {
		struct hip_audit_op *prod;
		struct hip_audit_check *c;

		if (!need[x] || !(prod = hip_audit_lookup(&h->streams[x], need[x])))
			continue;
		c = malloc(sizeof(*c));
		if (!c) {
			hip_audit_warn(h, "cannot queue a check", hipSuccess);
			continue;
		}
		atomic_fetch_add(&a->refs, 1);
		atomic_fetch_add(&prod->refs, 1);
		atomic_fetch_add(&h->audit_queued, 1);
		*c = (struct hip_audit_check){
			a, prod, need_war[x], need_buf[x]->addr, need_buf[x]->size, NULL};
		if (last)
			last->next = c;
		else
			checks = c;
		last = c;
	}
	return checks;
}

/* A launch the inline path could not enqueue: its table entry goes again. */
static void hip_audit_unpush(struct hip *h, struct hip_stream *st, struct seq_point at)
{
	if (!st->acount || st->afirst + st->acount - 1 != at.seq)
		return;
	st->acount--;
	hip_audit_op_put(h, st->aops[(st->ahead + st->acount) % st->acap]);
}

/* Hand a launch's checks to the audit thread once its timestamps are recorded (every
 * producer they name was recorded earlier, in queue order); a bad op's are dropped. */
static void hip_audit_queue(struct hip *h, struct hip_audit_op *a, struct hip_audit_check *checks)
{
	struct hip_audit_check *last = checks;

	if (!checks)
		return;
	if (!a || a->bad) {
		while (checks) {
			struct hip_audit_check *next = checks->next;

			hip_audit_op_put(h, checks->consumer);
			hip_audit_op_put(h, checks->producer);
			free(checks);
			atomic_fetch_add(&h->audit_done, 1);
			checks = next;
		}
		return;
	}
	while (last->next)
		last = last->next;
	pthread_mutex_lock(&h->audit_mu);
	if (h->aq_tail)
		h->aq_tail->next = checks;
	else
		h->aq_head = checks;
	h->aq_tail = last;
	pthread_cond_signal(&h->audit_cond);
	pthread_mutex_unlock(&h->audit_mu);
}

/* The core retired `through`: every point up to it on the stream is known complete. */
static void hip_audit_retire(struct hip *h, struct hip_stream *st, uint64_t through)
{
	while (st->acount && st->afirst <= through) {
		hip_audit_op_put(h, st->aops[st->ahead]);
		st->ahead = (st->ahead + 1) % st->acap;
		st->acount--;
		st->afirst++;
	}
}

static void hip_retire(void *ctx, struct seq_point event)
{
	struct hip *h = ctx;
	struct hip_stream *st;
	hipEvent_t done[32];
	unsigned n;

	if (event.stream >= h->nstreams)
		return;
	st = &h->streams[event.stream];
	do {
		n = 0;
		pthread_mutex_lock(&st->mu);
		while (n < 32 && st->nreported && st->ring[st->head].seq <= event.seq) {
			done[n++] = st->ring[st->head].ev;
			st->head = (st->head + 1) % st->cap;
			st->count--;
			st->nsubmitted--;
			st->nreported--;
		}
		pthread_mutex_unlock(&st->mu);
		for (unsigned i = 0; i < n; i++)
			hip_event_put(h, done[i]);
	} while (n == 32);
	hip_audit_retire(h, st, event.seq);
	/* Scratch blocks whose last user is now known complete. */
	for (struct hip_deferred **p = &st->deferred; *p;) {
		struct hip_deferred *d = *p;

		if (d->seq <= event.seq) {
			*p = d->next;
			hip_mem_release(h, d->addr, d->size);
			h->scratch_bytes -= d->size;
			free(d);
		} else {
			p = &d->next;
		}
	}
}

/* ---- launch ---- */

static int hip_op_check(const struct hip *h, struct seq_point at, const struct seq_op *op)
{
	if (at.stream >= h->nstreams)
		return -EINVAL;
	return backend_op_check(h->streams[at.stream].kind, h->streams[at.stream].launched, at, op);
}

/* A D2D copy within one allocation whose ranges overlap goes through the stream's
 * scratch block (cudaMemcpy leaves overlap undefined). The stream is in order, so the
 * scratch is free for the next copy once this one is enqueued; a smaller one it replaces
 * goes back to the pool when the last copy that used it is retired. The block comes from
 * the pool here, on the loop thread; the copies are the command's. */
static int hip_d2d_scratch(struct hip *h, struct hip_stream *st, uint64_t len, uint64_t *scratch)
{
	int r;

	if (st->scratch_size < len) {
		uint64_t addr;

		r = hip_mem_alloc(h, len, &addr);
		if (r < 0)
			return r;
		if (st->scratch) {
			struct hip_deferred *d = malloc(sizeof(*d));

			if (!d) {
				hip_mem_release(h, addr, len);
				return -ENOMEM;
			}
			*d = (struct hip_deferred){
				st->scratch, st->scratch_size, st->launched, st->deferred};
			st->deferred = d;
		}
		st->scratch = addr;
		st->scratch_size = hip_block_find(h, addr)->size; /* the class, or more */
		h->scratch_bytes += st->scratch_size;
	}
	*scratch = st->scratch;
	return 0;
}

/* A kernel launch's function, grid and argument values into its command; the refusals
 * that need no HIP call (not in the image, a grid too large) are made here. */
static int hip_kernel_prepare(
	struct hip *h, struct seq_point at, const struct seq_op *op, struct hip_cmd *c)
{
	const struct op_payload *p = op->payload;
	const struct hip_fn *fn = NULL;
	hipFunction_t f = p->function;
	uint64_t elements = p->elements;
	unsigned n = 0;

	if (!f) {
		for (unsigned i = 0; i < h->nfn; i++)
			if (h->kernels[i] == p->kernel)
				fn = &h->fn[i];
		if (!fn || !fn->f) {
			log_err("hip", "kernel %s at %" PRIu32 ":%" PRIu64 " is not in the image",
				p->kernel->name ? p->kernel->name : "?", at.stream, at.seq);
			return -ENOSYS;
		}
		f = fn->f;
	}
	c->kernel.f = f;
	c->kernel.has_conv = false;
	for (unsigned i = 0; i < p->nargs; i++) {
		const struct karg *a = &p->args[i];
		union hip_karg *v = &c->kernel.v[n++];

		switch (a->type) {
		case KARG_BUFFER:
			v->ptr = (void *)(uintptr_t)op->access[a->v.buf.index].addr;
			break;
		case KARG_I32:
			v->i32 = a->v.i32;
			break;
		case KARG_U32:
			v->u32 = a->v.u32;
			break;
		case KARG_I64:
			v->i64 = a->v.i64;
			break;
		case KARG_U64:
			v->u64 = a->v.u64;
			break;
		case KARG_F32:
			v->f32 = a->v.f32;
			break;
		case KARG_F64:
			v->f64 = a->v.f64;
			break;
		default:
			return -EINVAL;
		}
	}
	if (fn) {
		c->kernel.v[n++].u64 = elements;
		if (fn->extra == HIP_EXTRA_CLOCK) {
			c->kernel.v[n++].u64 = h->clock_khz;
		} else if (fn->extra == HIP_EXTRA_CONV2D) {
			/* The output extent from its one definition, not recomputed per thread. */
			kernel_conv2d_from_args(p->args, &c->kernel.conv);
			if (kernel_conv2d_out_shape(&c->kernel.conv, NULL) < 0)
				return -EINVAL;
			c->kernel.has_conv = true;
		}
	}
	c->kernel.nv = n;
	snprintf(c->kernel.what, sizeof(c->kernel.what), "kernel %s",
		p->kernel && p->kernel->name ? p->kernel->name
			: p->function_name   ? p->function_name
					     : "(module function)");
	c->kernel.shared = p->grid.shared_mem;
	if (p->grid.grid[0]) {
		memcpy(c->kernel.grid, p->grid.grid, sizeof(c->kernel.grid));
		memcpy(c->kernel.block, p->grid.block, sizeof(c->kernel.block));
	} else {
		uint64_t blocks;

		/* Nothing to run; the point still counts (its event completes in order). */
		if (elements == 0) {
			c->empty = true;
			return 0;
		}
		blocks = elements / HIP_BLOCK + (elements % HIP_BLOCK != 0);
		if (blocks > HIP_GRID_MAX)
			return -E2BIG;
		c->kernel.grid[0] = (uint32_t)blocks;
		c->kernel.grid[1] = c->kernel.grid[2] = 1;
		c->kernel.block[0] = HIP_BLOCK;
		c->kernel.block[1] = c->kernel.block[2] = 1;
	}
	return 0;
}

/* Everything launch needs into c: addresses, sizes, the kernel's argument values. */
static int hip_launch_prepare(struct hip *h, struct hip_stream *st, struct seq_point at,
	const struct seq_op *op, struct hip_cmd *c)
{
	const struct op_payload *p = op->payload;
	uint64_t src, dst;

	c->kind = HIP_CMD_LAUNCH;
	c->stream = at.stream;
	c->at = at;
	c->op = op->kind;
	c->empty = false;
	c->audit = NULL;
	c->checks = NULL;
	switch (op->kind) {
	case SEQ_OP_H2D:
		c->copy.dst = (void *)(uintptr_t)(op->access[0].addr + p->dst_offset);
		c->copy.src = p->host;
		c->copy.len = p->length;
		c->empty = !p->length;
		return 0;
	case SEQ_OP_D2H:
		c->copy.dst = p->host;
		c->copy.src = (void *)(uintptr_t)(op->access[0].addr + p->src_offset);
		c->copy.len = p->length;
		c->empty = !p->length;
		return 0;
	case SEQ_OP_D2D:
		src = op->access[0].addr + p->src_offset;
		dst = op->access[op->naccess > 1].addr + p->dst_offset;
		c->copy.dst = (void *)(uintptr_t)dst;
		c->copy.src = (void *)(uintptr_t)src;
		c->copy.len = p->length;
		c->copy.scratch = 0;
		c->empty = !p->length || src == dst;
		if (!c->empty && src < dst + p->length && dst < src + p->length)
			return hip_d2d_scratch(h, st, p->length, &c->copy.scratch);
		return 0;
	case SEQ_OP_EXEC:
		return hip_kernel_prepare(h, at, op, c);
	}
	return -EINVAL;
}

static int hip_launch(void *ctx, struct seq_point at, const struct seq_op *op)
{
	struct hip *h = ctx;
	struct hip_stream *st;
	struct hip_cmd local, *c;
	int r;

	r = hip_op_check(h, at, op);
	if (r < 0)
		return r;
	/* After a device fault every HIP call fails: refuse at once, as inline would. */
	r = atomic_load_explicit(&h->device_error, memory_order_relaxed);
	if (r < 0)
		return r;
	st = &h->streams[at.stream];
	c = hip_submit_begin(h, &local);
	r = hip_launch_prepare(h, st, at, op, c);
	if (r < 0)
		return r; /* the slot is not published: the next command takes it */
	if (h->cfg.audit) {
		c->audit = hip_audit_prepare(h, at, op);
		c->checks = hip_audit_table(h, st, at, op, c->audit);
	}
	r = hip_submit_end(h, c);
	if (r < 0) {
		/* Inline only: not launched, the point is not used. */
		if (h->cfg.audit)
			hip_audit_unpush(h, st, at);
		return r;
	}
	st->launched = at.seq;
	return 0;
}

/* ---- submission: the enqueue calls, off the loop thread ----
 *
 * An enqueue (cudaLaunchKernel, cudaMemcpyAsync, ...) costs microseconds, about what the
 * loop spends on everything else for a request, so with the calls on the loop a daemon
 * launches at most half as fast as its clients. The loop queues fixed-size commands
 * instead; one thread per device runs them strictly in queue order, which keeps every
 * order the core relies on (a wait after the record it names, a stream's launches by
 * seq). Two consequences shape the rest of the file: an event enters the completion
 * thread's view only once its record command ran (I3: an unrecorded event reads as
 * complete), and an enqueue error surfaces here, after launch returned, so it fails the
 * stream forward: the stream's next event is reported with the error (I9). */

static void hip_submit_fail(struct hip_stream *st, const struct hip_cmd *c, int r)
{
	if (st->failed)
		return;
	st->failed = r;
	log_err("hip",
		"stream %" PRIu32 " failed at %" PRIu32 ":%" PRIu64 " (%s): its later operations "
		"are not enqueued and its events report the error",
		st->index, c->at.stream, c->at.seq, strerror(-r));
}

static int hip_submit_copy(struct hip_stream *st, const struct hip_cmd *c)
{
	hipError_t e;

	switch (c->op) {
	case SEQ_OP_H2D:
		e = hipMemcpyAsync(
			c->copy.dst, c->copy.src, c->copy.len, hipMemcpyHostToDevice, st->stream);
		break;
	case SEQ_OP_D2H:
		e = hipMemcpyAsync(
			c->copy.dst, c->copy.src, c->copy.len, hipMemcpyDeviceToHost, st->stream);
		break;
	default:
		if (c->copy.scratch) {
			void *scratch = (void *)(uintptr_t)c->copy.scratch;

			e = hipMemcpyAsync(scratch, c->copy.src, c->copy.len,
				hipMemcpyDeviceToDevice, st->stream);
			if (e == hipSuccess)
				e = hipMemcpyAsync(c->copy.dst, scratch, c->copy.len,
					hipMemcpyDeviceToDevice, st->stream);
			if (e != hipSuccess)
				return hip_fail(e, "hipMemcpyAsync", "overlapping d2d", c->at);
			return 0;
		}
		e = hipMemcpyAsync(
			c->copy.dst, c->copy.src, c->copy.len, hipMemcpyDeviceToDevice, st->stream);
		break;
	}
	if (e != hipSuccess)
		return hip_fail(e, "hipMemcpyAsync", backend_op_name(c->op), c->at);
	return 0;
}

static int hip_submit_kernel(struct hip_stream *st, struct hip_cmd *c)
{
	void *params[KERNEL_MAX_ARGS + 3];
	unsigned n;
	hipError_t e;

	for (n = 0; n < c->kernel.nv; n++)
		params[n] = &c->kernel.v[n];
	if (c->kernel.has_conv)
		params[n++] = &c->kernel.conv;
	e = hipModuleLaunchKernel(c->kernel.f, c->kernel.grid[0], c->kernel.grid[1],
		c->kernel.grid[2], c->kernel.block[0], c->kernel.block[1], c->kernel.block[2],
		c->kernel.shared, st->stream, params, NULL);
	if (e != hipSuccess)
		return hip_fail(e, "hipModuleLaunchKernel", c->kernel.what, c->at);
	return 0;
}

/* The op between its timestamps. A stream that already failed enqueues nothing more:
 * its events report the failure, and what depends on it fails in the core. */
static int hip_submit_launch(struct hip *h, struct hip_cmd *c)
{
	struct hip_stream *st = &h->streams[c->stream];
	struct hip_audit_op *a = c->audit;
	const bool skip = st->failed != 0;
	hipError_t e;
	int r = 0;

	if (a && !skip) {
		e = hipEventRecord(a->start, st->stream);
		if (e != hipSuccess) {
			hip_audit_warn(h, "cannot record a start event", e);
			a->bad = true;
		}
	}
	if (!skip && !c->empty)
		r = c->op == SEQ_OP_EXEC ? hip_submit_kernel(st, c) : hip_submit_copy(st, c);
	if (a) {
		if (skip || r < 0) {
			a->bad = true;
		} else if (!a->bad) {
			e = hipEventRecord(a->end, st->stream);
			if (e != hipSuccess) {
				hip_audit_warn(h, "cannot record an end event", e);
				a->bad = true;
			}
		}
		hip_audit_queue(h, a, c->checks);
		hip_audit_op_put(h, a);
	}
	return r;
}

/* Record: then, and only then, the completion thread may wait for the event. */
static void hip_submit_record(struct hip *h, const struct hip_cmd *c)
{
	struct hip_stream *st = &h->streams[c->stream];
	hipError_t e = hipEventRecord(c->ev, st->stream);
	int r = e == hipSuccess ? st->failed : hip_fail(e, "hipEventRecord", "event", c->at);
	struct hip_event_ent *x;

	pthread_mutex_lock(&st->mu);
	x = hip_ring_at(st, st->nsubmitted);
	x->status = r;
	x->unrecorded = e != hipSuccess;
	st->nsubmitted++;
	/* Only a sleeping thread needs the wake-up; a busy one finds the entry itself. */
	if (st->sleeping)
		pthread_cond_signal(&st->cond);
	pthread_mutex_unlock(&st->mu);
}

/* One command: 0 or the error of the enqueue (a record's goes into its event). */
static int hip_submit_run(struct hip *h, struct hip_cmd *c)
{
	hipError_t e;

	switch (c->kind) {
	case HIP_CMD_LAUNCH:
		return hip_submit_launch(h, c);
	case HIP_CMD_WAIT:
		e = hipStreamWaitEvent(h->streams[c->stream].stream, c->ev, 0);
		if (e != hipSuccess)
			return hip_fail(e, "hipStreamWaitEvent", "wait", c->at);
		return 0;
	case HIP_CMD_RECORD:
		hip_submit_record(h, c);
		return 0;
	}
	return -EINVAL;
}

/* Where the loop builds its next command: the queue's free slot (waiting, as a full
 * launch queue would make the enqueue call wait, while the submit thread is a whole
 * queue behind), or `local` when commands run inline. */
static struct hip_cmd *hip_submit_begin(struct hip *h, struct hip_cmd *local)
{
	size_t tail = atomic_load_explicit(&h->q_tail, memory_order_relaxed);

	if (!h->submit_thread)
		return local;
	while (tail - atomic_load_explicit(&h->q_head, memory_order_acquire) >= HIP_SUBMIT_QUEUE)
		sched_yield();
	return &h->q[tail % HIP_SUBMIT_QUEUE];
}

/* Run c (inline: its error comes back) or hand it to the submit thread. */
static int hip_submit_end(struct hip *h, struct hip_cmd *c)
{
	if (!h->submit_thread)
		return hip_submit_run(h, c);
	/* Sequentially consistent, with the load of q_sleeping after it, against the submit
	 * thread's store of q_sleeping and load of q_tail: one of the two sees the other. */
	atomic_fetch_add(&h->q_tail, 1);
	if (atomic_load(&h->q_sleeping)) {
		pthread_mutex_lock(&h->q_mu);
		pthread_cond_signal(&h->q_cond);
		pthread_mutex_unlock(&h->q_mu);
	}
	return 0;
}

static void *hip_submitter(void *arg)
{
	struct hip *h = arg;
	size_t head = atomic_load(&h->q_head);

	hipSetDevice(h->device);
	for (;;) {
		struct timespec t0, t;
		struct hip_cmd *c;
		int r;

		if (head == atomic_load_explicit(&h->q_tail, memory_order_acquire)) {
			/* Requests come in bursts: look again for a while before sleeping, since
			 * a futex wake-up costs more than a launch. */
			clock_gettime(CLOCK_MONOTONIC, &t0);
			for (unsigned i = 1;; i++) {
				if (head != atomic_load_explicit(&h->q_tail, memory_order_acquire))
					break;
				if (i % 64)
					continue;
				clock_gettime(CLOCK_MONOTONIC, &t);
				if ((t.tv_sec - t0.tv_sec) * 1000000000L +
						(t.tv_nsec - t0.tv_nsec) >=
					HIP_IDLE_SPIN_NS)
					break;
			}
			if (head != atomic_load_explicit(&h->q_tail, memory_order_acquire))
				continue;
			pthread_mutex_lock(&h->q_mu);
			atomic_store(&h->q_sleeping, true);
			while (head == atomic_load(&h->q_tail) && !h->q_stop)
				pthread_cond_wait(&h->q_cond, &h->q_mu);
			atomic_store(&h->q_sleeping, false);
			pthread_mutex_unlock(&h->q_mu);
			if (head == atomic_load_explicit(&h->q_tail, memory_order_acquire))
				break; /* stopped, and drained */
			continue;
		}
		c = &h->q[head % HIP_SUBMIT_QUEUE];
		r = hip_submit_run(h, c);
		if (r < 0)
			hip_submit_fail(&h->streams[c->stream], c, r);
		atomic_store_explicit(&h->q_head, ++head, memory_order_release);
	}
	return NULL;
}

/* ---- completion threads ---- */

static hipError_t hip_event_poll(hipEvent_t ev)
{
	const struct timespec nap = {0, HIP_POLL_SLEEP_NS};

	for (unsigned i = 0;; i++) {
		hipError_t e = hipEventQuery(ev);

		if (e != hipErrorNotReady)
			return e;
		if (i >= HIP_POLL_SPINS)
			nanosleep(&nap, NULL);
	}
}

/* A pause between looks at shared state while spinning: tells the CPU (and a sibling
 * hyperthread) that this is a wait loop. */
static inline void hip_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Waits for the oldest unreported event, then takes every later one already complete
 * along, and reports the newest: on an in-order stream that covers them all. */
static void *hip_completer(void *arg)
{
	struct hip_stream *st = arg;
	struct hip *h = st->h;
	const bool poll = h->cfg.completion == HIP_COMPLETION_POLL;

	hipSetDevice(h->device);
	if (poll)
		prctl(PR_SET_TIMERSLACK, 1000ul); /* the naps are short; keep them so */
	pthread_mutex_lock(&st->mu);
	for (;;) {
		struct hip_event_ent x;
		hipError_t e;
		size_t taken = 1;
		int status;

		/* Work tends to come in bursts: look again for a short while before sleeping,
		 * since a futex wake-up costs more than the copy a latency-bound client waits
		 * for. */
		if (st->nreported == st->nsubmitted && !st->stop) {
			struct timespec t0, t;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			do {
				pthread_mutex_unlock(&st->mu);
				for (int i = 0; i < 64; i++)
					hip_cpu_relax();
				clock_gettime(CLOCK_MONOTONIC, &t);
				pthread_mutex_lock(&st->mu);
			} while (st->nreported == st->nsubmitted && !st->stop &&
				(t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) <
					HIP_IDLE_SPIN_NS);
		}
		while (st->nreported == st->nsubmitted && !st->stop) {
			st->sleeping = true;
			pthread_cond_wait(&st->cond, &st->mu);
			st->sleeping = false;
		}
		if (st->nreported == st->nsubmitted)
			break;
		x = *hip_ring_at(st, st->nreported);
		pthread_mutex_unlock(&st->mu);

		/* An event whose record failed marks nothing: wait for the stream instead, so
		 * that what ran before is done before the core hears of the failure. */
		if (x.unrecorded)
			e = hipStreamSynchronize(st->stream);
		else
			e = poll ? hip_event_poll(x.ev) : hipEventSynchronize(x.ev);
		status = e == hipSuccess ? x.status : hip_errno(e);
		pthread_mutex_lock(&st->mu);
		while (status == 0 && st->nreported + taken < st->nsubmitted) {
			struct hip_event_ent next = *hip_ring_at(st, st->nreported + taken);

			if (next.status)
				break; /* reported on its own, with its error */
			pthread_mutex_unlock(&st->mu);
			if (hipEventQuery(next.ev) != hipSuccess) {
				pthread_mutex_lock(&st->mu);
				break;
			}
			x = next;
			taken++;
			pthread_mutex_lock(&st->mu);
		}
		st->nreported += taken;
		pthread_mutex_unlock(&st->mu);

		if (e != hipSuccess) {
			/* A device fault: this point and, through the core, all that depends on
			 * it fail with it (I9); so does every later launch. */
			int none = 0;

			log_err("hip",
				"stream %" PRIu32 ": event at %" PRIu32 ":%" PRIu64
				" completed with %s (%s)",
				st->index, st->index, x.seq, hipGetErrorName(e),
				hipGetErrorString(e));
			if (status == -EIO)
				atomic_compare_exchange_strong(&h->device_error, &none, status);
		}
		h->complete(h->arg, (struct seq_point){st->index, x.seq}, status);
		pthread_mutex_lock(&st->mu);
	}
	pthread_mutex_unlock(&st->mu);
	return NULL;
}

/* ---- the audit thread ---- */

/* Compare one consumer's start with its producer's end, both read off the GPU's clock.
 * A negative gap is a consumer that started before its producer finished: a missing
 * wait, whatever the data turned out to be. */
static void hip_audit_check_one(struct hip *h, const struct hip_audit_check *c)
{
	const bool poll = h->cfg.completion == HIP_COMPLETION_POLL;
	const struct hip_audit_op *con = c->consumer, *prod = c->producer;
	char what[320];
	float ms = 0;
	hipError_t e;

	e = poll ? hip_event_poll(con->start) : hipEventSynchronize(con->start);
	if (e == hipSuccess)
		e = poll ? hip_event_poll(prod->end) : hipEventSynchronize(prod->end);
	if (e == hipSuccess)
		e = hipEventElapsedTime(&ms, prod->end, con->start);
	if (e == hipSuccess && ms <= 0) {
		float back = 0;

		/* Measured the other way round too, whichever way a runtime reports an
		 * interval that ends before it starts (negative, or clamped to 0). */
		if (hipEventElapsedTime(&back, con->start, prod->end) == hipSuccess && back > 0)
			ms = -back;
	}
	if (e != hipSuccess) {
		/* A device fault: the completion threads report it; nothing to time. */
		log_debug("hip", "audit: %s at %" PRIu32 ":%" PRIu64 " not checked: %s", con->what,
			con->at.stream, con->at.seq, hipGetErrorName(e));
		return;
	}
	atomic_fetch_add(&h->audit_checks, 1);
	if (ms >= 0)
		return;
	if (c->war)
		snprintf(what, sizeof(what),
			"audit: %s at %" PRIu32 ":%" PRIu64 " started %.3f ms before its reader "
			"%" PRIu32 ":%" PRIu64 " (%s) finished (missing wait: it overwrites what "
			"that reads, buffer %#" PRIx64 ", %" PRIu64 " bytes)",
			con->what, con->at.stream, con->at.seq, -ms, prod->at.stream, prod->at.seq,
			prod->what, c->addr, c->size);
	else
		snprintf(what, sizeof(what),
			"audit: %s at %" PRIu32 ":%" PRIu64 " started %.3f ms before its producer "
			"%" PRIu32 ":%" PRIu64 " (%s) finished (missing wait, buffer %#" PRIx64
			", %" PRIu64 " bytes)",
			con->what, con->at.stream, con->at.seq, -ms, prod->at.stream, prod->at.seq,
			prod->what, c->addr, c->size);
	atomic_fetch_add(&h->audit_findings, 1);
	atomic_fetch_add(&h->findings, 1);
	if (h->finding)
		h->finding(h->arg, what);
	else
		log_err("hip", "%s", what);
}

/* Checks in the order they were queued; it may block on one event at a time, which only
 * delays the audit, never the loop or the completion threads. */
static void *hip_auditor(void *arg)
{
	struct hip *h = arg;

	hipSetDevice(h->device);
	pthread_mutex_lock(&h->audit_mu);
	for (;;) {
		struct hip_audit_check *c;

		while (!h->aq_head && !h->audit_stop)
			pthread_cond_wait(&h->audit_cond, &h->audit_mu);
		if (!h->aq_head)
			break;
		c = h->aq_head;
		h->aq_head = c->next;
		if (!h->aq_head)
			h->aq_tail = NULL;
		pthread_mutex_unlock(&h->audit_mu);
		if (!c->consumer->bad && !c->producer->bad)
			hip_audit_check_one(h, c);
		hip_audit_op_put(h, c->consumer);
		hip_audit_op_put(h, c->producer);
		free(c);
		atomic_fetch_add(&h->audit_done, 1);
		pthread_mutex_lock(&h->audit_mu);
	}
	pthread_mutex_unlock(&h->audit_mu);
	return NULL;
}

/* ---- staging, info, destroy ---- */

static int hip_staging_register(void *ctx, void *addr, size_t size)
{
	struct hip *h = ctx;
	hipError_t e;

	if (h->nstaging == h->capstaging) {
		size_t cap = h->capstaging ? 2 * h->capstaging : 16;
		struct hip_staging *v = realloc(h->staging, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->staging = v;
		h->capstaging = cap;
	}
	/* Pinned pages let copies run at DMA speed and keep hipMemcpyAsync asynchronous
	 * (from pageable memory it would stage, and can block, the loop). */
	e = hipHostRegister(addr, size, hipHostRegisterDefault);
	if (e != hipSuccess) {
		int r = hip_errno(e);

		log_err("hip", "hipHostRegister(%p, %zu) failed: %s (%s)", addr, size,
			hipGetErrorName(e), hipGetErrorString(e));
		return r;
	}
	h->staging[h->nstaging++] = (struct hip_staging){addr, size};
	return 0;
}

static void hip_staging_unregister(void *ctx, void *addr, size_t size)
{
	struct hip *h = ctx;
	hipError_t e;

	for (size_t i = 0; i < h->nstaging; i++) {
		if (h->staging[i].addr != addr)
			continue;
		h->staging[i] = h->staging[--h->nstaging];
		e = hipHostUnregister(addr);
		if (e != hipSuccess)
			log_warn("hip", "hipHostUnregister(%p, %zu) failed: %s", addr, size,
				hipGetErrorName(e));
		return;
	}
	log_warn("hip", "staging range %p (%zu bytes) was not registered", addr, size);
}

static uint64_t hip_findings(void *ctx)
{
	struct hip *h = ctx;

	return atomic_load(&h->findings);
}

static uint64_t hip_audit_findings(void *ctx)
{
	struct hip *h = ctx;

	return atomic_load(&h->audit_findings);
}

uint64_t hip_audit_checks(void *ctx, uint64_t *pending)
{
	struct hip *h = ctx;
	uint64_t done = atomic_load(&h->audit_done);

	if (pending)
		*pending = atomic_load(&h->audit_queued) - done;
	return atomic_load(&h->audit_checks);
}

/* ---- user code objects ---- */

/* On the loop thread: loading reads a file and may take milliseconds, which is why
 * clients load modules once per session, not per launch. */
static int hip_module_load(void *ctx, const char *path, void **module)
{
	hipModule_t m;
	hipError_t e = hipModuleLoad(&m, path);
	int r;

	if (e != hipSuccess) {
		r = hip_errno(e);
		log_info("hip", "cannot load module %s: %s (%s)", path, hipGetErrorName(e),
			hipGetErrorString(e));
		/* The file is there (the caller checked): it is not code for this GPU. */
		return r == -EIO || r == -EINVAL || r == -ENOENT ? -ENOEXEC : r;
	}
	*module = (void *)m;
	return 0;
}

static int hip_module_function(void *ctx, void *module, const char *name, void **function)
{
	hipFunction_t f;
	hipError_t e = hipModuleGetFunction(&f, (hipModule_t)module, name);

	if (e != hipSuccess) {
		log_debug(
			"hip", "no function %s in module %p: %s", name, module, hipGetErrorName(e));
		return hip_errno(e) == -ENOMEM ? -ENOMEM : -ENOENT;
	}
	*function = (void *)f;
	return 0;
}

/* Unloading may synchronize; the reaper does it, as it does hipFree. */
static void hip_module_unload(void *ctx, void *module)
{
	struct hip *h = ctx;
	struct hip_reap_module *m = malloc(sizeof(*m));

	if (!m) {
		/* Better a module left loaded than a blocked loop. */
		log_warn("hip", "out of memory unloading module %p: it stays loaded", module);
		return;
	}
	m->module = (hipModule_t)module;
	pthread_mutex_lock(&h->reap_mu);
	m->next = h->reap_modules;
	h->reap_modules = m;
	pthread_cond_signal(&h->reap_cond);
	pthread_mutex_unlock(&h->reap_mu);
}

/* Used is what the daemon's buffers hold (as the sim counts it, and as sseqctl and the
 * metrics mean it), not the device-wide figure, which includes the context and the pool's
 * cached blocks; the loop thread must not need a driver call to answer it either. */
static void hip_info(void *ctx, struct backend_info *info)
{
	struct hip *h = ctx;

	memset(info, 0, sizeof(*info));
	info->backend = "hip";
	snprintf(info->name, sizeof(info->name), "%s", h->name);
	snprintf(info->arch, sizeof(info->arch), "%s", h->arch);
	info->memory_total = h->memory_total;
	info->memory_used = h->used_bytes - h->scratch_bytes;
}

static void hip_destroy(void *ctx)
{
	struct hip *h = ctx;

	/* The queued commands run first: they hold events and audit references. */
	if (h->submitter_started) {
		pthread_mutex_lock(&h->q_mu);
		h->q_stop = true;
		pthread_cond_signal(&h->q_cond);
		pthread_mutex_unlock(&h->q_mu);
		pthread_join(h->submitter, NULL);
	}
	free(h->q);
	pthread_cond_destroy(&h->q_cond);
	pthread_mutex_destroy(&h->q_mu);
	/* The caller promised an idle device; make sure before anything goes away. */
	if (h->device_open)
		hipDeviceSynchronize();
	for (unsigned i = 0; i < h->nstreams; i++) {
		struct hip_stream *st = &h->streams[i];

		if (!st->started)
			continue;
		pthread_mutex_lock(&st->mu);
		st->stop = true;
		pthread_cond_signal(&st->cond);
		pthread_mutex_unlock(&st->mu);
	}
	if (h->auditor_started) {
		/* It finishes the queued checks first: the device is idle, so they are quick. */
		pthread_mutex_lock(&h->audit_mu);
		h->audit_stop = true;
		pthread_cond_signal(&h->audit_cond);
		pthread_mutex_unlock(&h->audit_mu);
		pthread_join(h->auditor, NULL);
	}
	if (h->cfg.audit)
		log_info("hip", "audit: %" PRIu64 " checks, %" PRIu64 " findings",
			atomic_load(&h->audit_checks), atomic_load(&h->audit_findings));
	for (unsigned i = 0; i < h->nstreams; i++) {
		struct hip_stream *st = &h->streams[i];

		if (st->started)
			pthread_join(st->thread, NULL);
		hip_audit_retire(h, st, UINT64_MAX);
		free(st->aops);
		for (size_t j = 0; j < st->count; j++)
			hipEventDestroy(hip_ring_at(st, j)->ev);
		free(st->ring);
		while (st->deferred) {
			struct hip_deferred *d = st->deferred;

			st->deferred = d->next;
			free(d);
		}
		if (st->stream)
			hipStreamDestroy(st->stream);
	}
	for (unsigned i = 0; i < SEQ_MAX_STREAMS; i++) {
		pthread_cond_destroy(&h->streams[i].cond);
		pthread_mutex_destroy(&h->streams[i].mu);
	}
	if (h->reaper_started) {
		pthread_mutex_lock(&h->reap_mu);
		h->reap_stop = true;
		pthread_cond_signal(&h->reap_cond);
		pthread_mutex_unlock(&h->reap_mu);
		pthread_join(h->reaper, NULL);
	}
	pthread_cond_destroy(&h->reap_cond);
	pthread_mutex_destroy(&h->reap_mu);
	/* Checks never processed (the auditor did not start) still hold their ops. */
	while (h->aq_head) {
		struct hip_audit_check *c = h->aq_head;

		h->aq_head = c->next;
		hip_audit_op_put(h, c->consumer);
		hip_audit_op_put(h, c->producer);
		free(c);
	}
	while (h->afree) {
		struct hip_audit_op *a = h->afree;

		h->afree = a->next_free;
		hip_audit_op_destroy(a);
	}
	pthread_cond_destroy(&h->audit_cond);
	pthread_mutex_destroy(&h->audit_mu);
	for (size_t i = 0; i < h->nevents; i++)
		hipEventDestroy(h->events[i]);
	free(h->events);
	/* Live blocks too (scratch, or buffers the core still held): the device is idle. */
	for (size_t i = 0; i < h->nhash; i++) {
		struct hip_block *b = h->hash[i];

		while (b) {
			struct hip_block *next = b->hnext;

			hipFree((void *)(uintptr_t)b->addr);
			free(b);
			b = next;
		}
	}
	free(h->hash);
	for (size_t i = 0; i < h->nstaging; i++)
		hipHostUnregister(h->staging[i].addr);
	free(h->staging);
	if (h->module_loaded)
		hipModuleUnload(h->module);
	free(h);
}

static const struct backend_ops hip_ops = {
	.seq =
		{
			.mem_alloc = hip_mem_alloc,
			.mem_release = hip_mem_release,
			.record = hip_record,
			.wait = hip_wait,
			.launch = hip_launch,
			.retire = hip_retire,
		},
	.staging_register = hip_staging_register,
	.staging_unregister = hip_staging_unregister,
	.findings = hip_findings,
	.audit_findings = hip_audit_findings,
	.module_load = hip_module_load,
	.module_function = hip_module_function,
	.module_unload = hip_module_unload,
	.info = hip_info,
	.destroy = hip_destroy,
};

/* ---- set-up ---- */

/* Load every kernel when its module loads, not at its first launch: CUDA's lazy
 * loading may synchronize the whole device at that first launch, stalling every
 * client's work in flight. Must run before the runtime starts. */
static void hip_runtime_setup(void)
{
#ifdef SSEQ_HIP_NVIDIA
	setenv("CUDA_MODULE_LOADING", "EAGER", 0);
#endif
}

int hip_device_count(void)
{
	int n = 0;
	hipError_t e;

	hip_runtime_setup();
	e = hipGetDeviceCount(&n);

	if (e == hipErrorNoDevice)
		return 0;
	if (e != hipSuccess) {
		log_info("hip", "hipGetDeviceCount: %s (%s)", hipGetErrorName(e),
			hipGetErrorString(e));
		return hip_errno(e) ? hip_errno(e) : -ENODEV;
	}
	return n;
}

const char *hip_kernels_path(void)
{
#ifdef SSEQ_KERNELS_BUILD_PATH
	if (access(SSEQ_KERNELS_BUILD_PATH, R_OK) == 0)
		return SSEQ_KERNELS_BUILD_PATH;
#endif
	return SSEQ_KERNELS_INSTALL_PATH;
}

static enum seq_stream_kind hip_stream_kind(const struct hip_config *cfg, unsigned i)
{
	if (i == 0)
		return SEQ_STREAM_COMPUTE;
	if (i == 1)
		return SEQ_STREAM_H2D;
	return i < 2 + cfg->n_d2h ? SEQ_STREAM_D2H : SEQ_STREAM_D2D;
}

static int hip_device_open(struct hip *h)
{
	hipDeviceProp_t prop;
	hipError_t e;
	int n = hip_device_count();

	if (n < 0) {
		log_err("hip", "the HIP runtime cannot start (no driver?): %s", strerror(-n));
		return -ENODEV;
	}
	if ((unsigned)n <= h->cfg.device) {
		log_err("hip", "no GPU %u: the HIP runtime sees %d device%s", h->cfg.device, n,
			n == 1 ? "" : "s");
		return -ENODEV;
	}
	h->device = (int)h->cfg.device;
	e = hipSetDevice(h->device);
	if (e == hipSuccess)
		e = hipGetDeviceProperties(&prop, h->device);
	if (e != hipSuccess) {
		log_err("hip", "GPU %d: %s (%s)", h->device, hipGetErrorName(e),
			hipGetErrorString(e));
		return hip_errno(e);
	}
	h->device_open = true;
	h->memory_total = prop.totalGlobalMem;
	snprintf(h->name, sizeof(h->name), "%.*s", (int)sizeof(h->name) - 1, prop.name);
#ifdef SSEQ_HIP_NVIDIA
	snprintf(h->arch, sizeof(h->arch), "sm_%d%d", prop.major, prop.minor);
	h->clock_khz = HIP_NV_GLOBALTIMER_KHZ;
#else
	snprintf(h->arch, sizeof(h->arch), "%.*s", (int)sizeof(h->arch) - 1, prop.gcnArchName);
	h->clock_khz = HIP_AMD_WALL_CLOCK_KHZ;
#endif
	return 0;
}

static int hip_kernels_load(struct hip *h)
{
	const char *path = h->cfg.kernels ? h->cfg.kernels : hip_kernels_path();
	hipError_t e = hipModuleLoad(&h->module, path);
	unsigned missing = 0;

	if (e != hipSuccess) {
		const bool readable = access(path, R_OK) == 0;
		int r = hip_errno(e);

		log_err("hip", "cannot load the kernel image %s: %s (%s)%s", path,
			hipGetErrorName(e), hipGetErrorString(e),
			readable ? "" : "; the file is not readable (use --kernels PATH)");
		/* A file that is there but does not load is not a code object for this GPU. */
		if (!readable)
			return -ENOENT;
		return r == -EIO || r == -EINVAL ? -ENOEXEC : r;
	}
	h->module_loaded = true;
	h->kernels = kernel_list();
	for (h->nfn = 0; h->kernels[h->nfn] && h->nfn < HIP_MAX_KERNELS; h->nfn++) {
		const char *kname = h->kernels[h->nfn]->name;
		struct hip_fn *fn = &h->fn[h->nfn];
		char sym[64];

		snprintf(sym, sizeof(sym), "sseq_%s", kname);
		e = hipModuleGetFunction(&fn->f, h->module, sym);
		if (e != hipSuccess) {
			log_warn(
				"hip", "%s: no %s in the image: %s", path, sym, hipGetErrorName(e));
			fn->f = NULL;
			missing++;
		}
		if (strcmp(kname, "spin") == 0)
			fn->extra = HIP_EXTRA_CLOCK;
		else if (strcmp(kname, "conv2d") == 0)
			fn->extra = HIP_EXTRA_CONV2D;
	}
	log_info("hip", "loaded %u kernels from %s%s", h->nfn - missing, path,
		missing ? " (some missing: an image from another version?)" : "");
	return 0;
}

int hip_create(struct backend *out, const struct hip_config *cfg, backend_complete_fn complete,
	backend_finding_fn finding, void *arg)
{
	struct hip *h;
	const char *submit;
	hipError_t e;
	int r;

	if (!complete)
		return -EINVAL;
	hip_runtime_setup();
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	if (cfg)
		h->cfg = *cfg;
	submit = getenv("SSEQ_HIP_SUBMIT");
	if (submit && strcmp(submit, "inline") == 0)
		h->cfg.submit = HIP_SUBMIT_INLINE;
	else if (submit && strcmp(submit, "thread") == 0)
		h->cfg.submit = HIP_SUBMIT_THREAD;
	else if (submit && *submit)
		log_warn("hip", "SSEQ_HIP_SUBMIT=%s is neither thread nor inline: ignored", submit);
	if (!h->cfg.n_d2h)
		h->cfg.n_d2h = 1;
	if (!h->cfg.n_d2d)
		h->cfg.n_d2d = 1;
	h->complete = complete;
	h->finding = finding;
	h->arg = arg;
	h->event_flags = h->cfg.timing ? hipEventDefault : hipEventDisableTiming;
	pthread_mutex_init(&h->reap_mu, NULL);
	pthread_cond_init(&h->reap_cond, NULL);
	pthread_mutex_init(&h->audit_mu, NULL);
	pthread_cond_init(&h->audit_cond, NULL);
	pthread_mutex_init(&h->q_mu, NULL);
	pthread_cond_init(&h->q_cond, NULL);
	for (unsigned i = 0; i < SEQ_MAX_STREAMS; i++) {
		pthread_mutex_init(&h->streams[i].mu, NULL);
		pthread_cond_init(&h->streams[i].cond, NULL);
	}
	if (2 + h->cfg.n_d2h + h->cfg.n_d2d > SEQ_MAX_STREAMS ||
		(h->cfg.completion != HIP_COMPLETION_SYNC &&
			h->cfg.completion != HIP_COMPLETION_POLL) ||
		(h->cfg.submit != HIP_SUBMIT_THREAD && h->cfg.submit != HIP_SUBMIT_INLINE)) {
		r = -EINVAL;
		goto fail;
	}
	h->nstreams = 2 + h->cfg.n_d2h + h->cfg.n_d2d;
	r = hip_device_open(h);
	if (r < 0)
		goto fail;
	r = hip_kernels_load(h);
	if (r < 0)
		goto fail;
	for (unsigned i = 0; i < h->nstreams; i++) {
		struct hip_stream *st = &h->streams[i];

		st->h = h;
		st->index = i;
		st->kind = hip_stream_kind(&h->cfg, i);
		/* Non-blocking: no implicit ordering with the legacy default stream. */
		e = hipStreamCreateWithFlags(&st->stream, hipStreamNonBlocking);
		if (e != hipSuccess) {
			r = hip_fail(
				e, "hipStreamCreateWithFlags", "stream", (struct seq_point){i, 0});
			goto fail;
		}
	}
	for (unsigned i = 0; i < HIP_EVENTS_PRECREATED; i++) {
		hipEvent_t ev;

		e = hipEventCreateWithFlags(&ev, h->event_flags);
		if (e != hipSuccess) {
			r = hip_fail(e, "hipEventCreateWithFlags", "event pool",
				(struct seq_point){0, 0});
			goto fail;
		}
		hip_event_put(h, ev);
	}
	for (unsigned i = 0; i < h->nstreams; i++) {
		struct hip_stream *st = &h->streams[i];

		r = -pthread_create(&st->thread, NULL, hip_completer, st);
		if (r < 0)
			goto fail;
		st->started = true;
	}
	r = -pthread_create(&h->reaper, NULL, hip_reaper, h);
	if (r < 0)
		goto fail;
	h->reaper_started = true;
	if (h->cfg.audit) {
		r = -pthread_create(&h->auditor, NULL, hip_auditor, h);
		if (r < 0)
			goto fail;
		h->auditor_started = true;
	}
	if (h->cfg.submit == HIP_SUBMIT_THREAD) {
		h->q = malloc(HIP_SUBMIT_QUEUE * sizeof(*h->q));
		if (!h->q) {
			r = -ENOMEM;
			goto fail;
		}
		r = -pthread_create(&h->submitter, NULL, hip_submitter, h);
		if (r < 0)
			goto fail;
		h->submitter_started = true;
		h->submit_thread = true;
	}
	log_info("hip", "GPU %d: %s (%s), %u streams, enqueued %s, completion by %s%s", h->device,
		h->name, h->arch, h->nstreams,
		h->submit_thread ? "by a submit thread" : "inline on the loop thread",
		h->cfg.completion == HIP_COMPLETION_POLL ? "hipEventQuery polling"
							 : "hipEventSynchronize",
		h->cfg.audit ? "; audit on: every launch is timestamped and checked against "
			       "its producers"
			     : "");
	out->ops = &hip_ops;
	out->ctx = h;
	return 0;
fail:
	/* What was never created is NULL or zero, as calloc left it. */
	hip_destroy(h);
	return r;
}
