/* The device backends (sim, hip) as the server sees them: the core's device commands
 * plus staging registration, user modules and information. A backend learns completion
 * on its own threads and pushes it to the completion queue it was given (cq.h). Everyone
 * but the core reaches a backend through the backend_* calls below: one route. */
#ifndef SSEQ_BACKEND_H
#define SSEQ_BACKEND_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cq.h"
#include "done-word.h"
#include "kernels.h"
#include "option.h"
#include "sequencer.h"

/* The error an injected fault (sim --inject fail-op=N) fails its operation with, so the
 * server can tell it from a real device error. */
#define BACKEND_EINJECTED ECANCELED

/* Called from a backend thread when the sim's race detector or the HIP audit finds an
 * access that was not ordered after its producer. `what` is a one-line description. */
typedef void (*backend_finding_fn)(void *arg, const char *what);
/* The same, for an owner that can name the op and the memory a finding is about (the
 * server: the session, worker, kernel and buffer): the op launched at `at` (seq 0: none
 * known) and the device address it touched (0: none). From any thread. */
typedef void (*backend_finding_op_fn)(
	void *arg, struct seq_point at, uint64_t addr, const char *what);

/* What the server passes in seq_op.payload: the concrete work for the launch. */
struct op_payload {
	/* Copies: the staging side (already bounds-checked against its arena) and the
	 * offsets into the device views named by op->access[]. H2D: access[0] is the
	 * destination. D2H: access[0] is the source. D2D: access[0] source, access[1]
	 * destination (or access[0] alone, SEQ_READWRITE, when both are one base). */
	void *host;
	uint64_t src_offset;
	uint64_t dst_offset;
	uint64_t length;
	/* Execute: the kernel and its arguments; a buffer argument's `access` field is the
	 * index into op->access[] of its view, resolved to an address by the backend. */
	const struct kernel_desc *kernel;
	unsigned nargs;
	uint64_t elements;
	struct kernel_grid grid; /* all zero: derive from elements */
	/* The module function for user code objects (hip only), else NULL, and its name
	 * for log lines and audit findings. */
	void *function;
	const char *function_name;
	/* Launch attributes of a module function (the server checked them): all blocks
	 * co-resident (cudaLaunchCooperativeKernel), and a thread-block cluster's shape
	 * (all 0: none). */
	bool cooperative;
	uint32_t cluster[3];
	/* Only the first nargs are ever read, and the server zeroes only what comes before
	 * (offsetof), not 1 KiB of unused arguments per request. */
	struct karg args[KERNEL_MAX_ARGS];
	/* Copies only, set for every H2D and D2H (a kernel's payload leaves them unset, and
	 * a kernel's request pays nothing for them): a D2H's word in the client's arena
	 * (CopyD2H.done_word; NULL: none) and the request's tag. The backend writes the tag
	 * there, by compare-and-swap from 0 and only after the bytes are in place, where it
	 * can, before it reports the point; the server then sends no Completion. */
	_Atomic uint64_t *done_word;
	uint64_t done_tag;
	/* Set true where the tag went in (done_word_deliver; the server's record of the op). */
	_Atomic bool *done_written;
};

/* A D2H's bytes are in the client's arena: its word, if it named one, gets the tag, where
 * the word holds 0 (a client watching it) or the sleeping mark (a client asleep on it,
 * woken now); anything else (a client asleep on the socket) is left for the Completion
 * (done-word.h). Called before the point is reported. */
static inline void backend_done_word(_Atomic uint64_t *word, uint64_t tag, _Atomic bool *written)
{
	if (word)
		done_word_deliver(word, tag, written, NULL);
}

struct backend_info {
	const char *backend; /* "sim" or "hip" */
	char name[96]; /* device name */
	char arch[32];
	uint64_t memory_total;
	uint64_t memory_used;
	/* Launch limits (cudaDeviceProp / hipDeviceProp_t); 0 where the backend has none (the
	 * sim runs no module functions). shared_optin: the most shared memory, static and
	 * dynamic together, one block may have once its function opts in. */
	uint32_t max_threads_per_block;
	uint32_t max_block[3];
	uint32_t max_grid[3];
	uint64_t shared_per_block;
	uint64_t shared_optin;
	/* Launch attributes the device supports: cooperative launches (the device
	 * attribute; false where the platform cannot launch a module function so: HIP 5.2),
	 * thread-block clusters (NVIDIA compute capability 9.0 and later). multiprocessors
	 * bounds a cooperative grid; cc is major * 10 + minor (NVIDIA), else 0. */
	bool cooperative;
	bool clusters;
	uint32_t multiprocessors;
	uint32_t cc;
};

/* A module function's attributes (cudaFuncGetAttributes, hipFuncGetAttribute): what a
 * client needs to pick a block size. Versions are major * 10 + minor, as CUDA's. */
struct backend_fn_attrs {
	uint32_t max_threads_per_block;
	uint32_t num_regs;
	uint64_t shared_size_bytes; /* static */
	uint64_t max_dynamic_shared_size_bytes; /* the current maximum for a launch */
	uint64_t const_size_bytes;
	uint64_t local_size_bytes; /* per thread */
	uint32_t ptx_version;
	uint32_t binary_version;
};

struct backend {
	const struct backend_ops *ops;
	void *ctx;
};

/* What every backend is given at creation: the streams to build (the core's layout),
 * where completions go, and who hears findings. */
struct backend_env {
	const struct seq_layout *layout;
	struct cq *cq; /* every recorded event reached, pushed from the backend's threads */
	backend_finding_fn finding; /* may be NULL; must not call back into the backend */
	/* May be NULL; where set, a backend that knows the op of a finding calls it instead
	 * of `finding` (same arg, same rules). */
	backend_finding_op_fn finding_op;
	void *finding_arg;
};

/* Copies, pinned memory and enqueue calls (hip): copies through the small-copy pool,
 * copies short enough for it that found every slot busy (they went through their arena,
 * pinning it), staging arenas pinned; commands the loop made itself for a sleeping submit
 * thread, and submit threads woken from sleep for a command. */
struct backend_counters {
	uint64_t small_copies;
	uint64_t small_copies_unpooled;
	uint64_t arenas_pinned;
	uint64_t calls_on_loop;
	uint64_t submit_wakeups;
};

struct backend_ops {
	/* The core's device commands (seq_create gets them straight); ctx is the backend's. */
	struct seq_device dev;
	/* Make a staging arena's mapping fast to copy from (hipHostRegister). */
	int (*staging_register)(void *ctx, void *addr, size_t size);
	void (*staging_unregister)(void *ctx, void *addr, size_t size);
	/* Whether the registered arena at addr is ready for copies at full speed (its pin
	 * done, or failed: copies then run from pageable memory; or no pin asked for yet,
	 * where small copies go through pinned memory of the backend's own and the first
	 * larger one pins the arena). NULL: always. A backend that pins later kicks the
	 * completion queue (cq_kick) when a pin is done. */
	bool (*staging_ready)(void *ctx, void *addr);
	/* Race-detector / audit findings so far (every finding the backend reported). */
	uint64_t (*findings)(void *ctx);
	/* Of those, the GPU-timestamp audit's (hip --audit); NULL where there is none. */
	uint64_t (*audit_findings)(void *ctx);
	/* How copies met host memory and where the enqueue calls were made, so far
	 * (struct backend_counters); NULL: all zero. */
	void (*counters)(void *ctx, struct backend_counters *out);
	/* User code objects (LoadModule); NULL where the backend cannot run them (sim).
	 * module_load reads the file at `path` (already checked against --module-dir);
	 * module_function looks up a kernel by name (-ENOENT when there is none);
	 * module_unload may be called only once no launch of the module is in flight. */
	int (*module_load)(void *ctx, const char *path, void **module);
	int (*module_function)(void *ctx, void *module, const char *name, void **function);
	void (*module_unload)(void *ctx, void *module);
	/* A module's global (__constant__ or __device__ variable) by its (mangled) name:
	 * 0 with its device address and size, -ENOENT when there is none. The memory is the
	 * module's: valid until module_unload. NULL where there are no modules. */
	int (*module_global)(
		void *ctx, void *module, const char *name, uint64_t *addr, uint64_t *size);
	/* Parameter `index` of a module function as the device lays it out: 0 with its
	 * offset and size in bytes, -ENOENT past the last parameter, -ENOTSUP where the
	 * platform does not say (HIP on AMD). NULL: never known. On the loop thread. */
	int (*function_param)(
		void *ctx, void *function, unsigned index, size_t *offset, size_t *size);
	/* A module's functions by their (mangled) names: *names gets an array of *n strings,
	 * each malloc'd, as is the array. -ENOTSUP where the platform cannot list them (HIP
	 * on AMD has no call for it). NULL where there are no modules. */
	int (*module_functions)(void *ctx, void *module, char ***names, size_t *n);
	/* A function's attributes; on the loop thread. */
	int (*function_attrs)(void *ctx, void *function, struct backend_fn_attrs *attrs);
	/* Let launches of the function use up to `bytes` of dynamic shared memory (above the
	 * default 48 KiB on NVIDIA): 0, or -EINVAL beyond what the device allows. */
	int (*function_max_shared)(void *ctx, void *function, uint64_t bytes);
	/* How many blocks of `threads` threads with `shared` bytes of dynamic shared memory
	 * one multiprocessor holds at once (cudaOccupancyMaxActiveBlocksPerMultiprocessor):
	 * 0 with *blocks, or a negative errno. On the loop thread. */
	int (*function_occupancy)(
		void *ctx, void *function, uint32_t threads, uint64_t shared, uint32_t *blocks);
	void (*info)(void *ctx, struct backend_info *info);
	/* The device's own start and end of the op launched at `at` (CLOCK_MONOTONIC ns),
	 * asked once its completion was reported: 0, or -ENOENT when the backend no longer
	 * (or never) kept them. *error_ns: how far the two may lie from the host clock's
	 * true instants (0: read from the host clock itself). NULL: no device timestamps
	 * (the timeline then shows what the daemon observed). Called on the loop thread;
	 * must not block. */
	int (*op_times)(void *ctx, struct seq_point at, uint64_t *start_ns, uint64_t *end_ns,
		uint64_t *error_ns);
	/* An Await's word (protocol 1.13): once the device has reached `at`, when the report
	 * of at.stream's event at or after it comes without an error, write `tag` into `word`
	 * (done_word_write) before that report goes to the completion queue, so that the
	 * loop, handling it, finds the tag there; a failed report drops it unwritten, as do
	 * reset and destroy (word-notes.h); *written (may be NULL) is set where the tag
	 * went in. 0; 1 when the stream already reported through `at` (its report may still
	 * be queued) with no error so far: the tag is written now; -EALREADY when a report
	 * came with an error (the Completion answers); -ENOMEM.
	 * The word stays mapped until the loop has handled that report. On the loop thread,
	 * right after the core recorded the event (seq_await). NULL: never (the Completion
	 * answers). */
	int (*point_word)(void *ctx, struct seq_point at, _Atomic uint64_t *word, uint64_t tag,
		_Atomic bool *written);
	/* Whether a fault poisoned the device context: every later call on it fails, on
	 * every stream, until reset (hip: an illegal address, a trap, ...; the sim:
	 * --inject device-lost-op=N). NULL: never. */
	bool (*device_lost)(void *ctx);
	/* Tear the lost context down and build it again: queued and running work is
	 * dropped (its completions, pushed while the threads stop, are the old context's),
	 * memory, events and loaded modules are gone; the streams keep their numbering and
	 * registered staging ranges are registered again. 0, or a negative errno when the
	 * device cannot be brought back (it stays lost). NULL: no recovery. */
	int (*reset)(void *ctx);
	/* Shutting down: fail every op the device has not started (hip: not yet enqueued on
	 * a HIP stream, i.e. still in a submit thread's queue; the sim: not yet begun by its
	 * stream's worker) without running it. Its stream's events then report -ESHUTDOWN,
	 * in stream order, so only ops the device already runs are left to wait for. Sticky.
	 * On the loop thread. NULL: nothing is held back from the device. */
	void (*cancel)(void *ctx);
	/* Stop threads and free everything; the device must be idle. */
	void (*destroy)(void *ctx);
};

/* The one route to a backend for everything but the core's commands. */
static inline int backend_staging_register(const struct backend *b, void *addr, size_t size)
{
	return b->ops->staging_register ? b->ops->staging_register(b->ctx, addr, size) : 0;
}

static inline bool backend_staging_ready(const struct backend *b, void *addr)
{
	return !b->ops->staging_ready || b->ops->staging_ready(b->ctx, addr);
}

static inline void backend_staging_unregister(const struct backend *b, void *addr, size_t size)
{
	if (b->ops->staging_unregister)
		b->ops->staging_unregister(b->ctx, addr, size);
}

static inline bool backend_device_lost(const struct backend *b)
{
	return b->ops->device_lost && b->ops->device_lost(b->ctx);
}

static inline int backend_reset(const struct backend *b)
{
	return b->ops->reset ? b->ops->reset(b->ctx) : -ENOTSUP;
}

static inline void backend_cancel(const struct backend *b)
{
	if (b->ops->cancel)
		b->ops->cancel(b->ctx);
}

static inline uint64_t backend_findings(const struct backend *b)
{
	return b->ops->findings ? b->ops->findings(b->ctx) : 0;
}

/* Whether the backend has a GPU-timestamp audit (hip), and its findings (0 without). */
static inline bool backend_has_audit(const struct backend *b)
{
	return b->ops->audit_findings != NULL;
}

static inline void backend_counters(const struct backend *b, struct backend_counters *out)
{
	*out = (struct backend_counters){0};
	if (b->ops->counters)
		b->ops->counters(b->ctx, out);
}

static inline uint64_t backend_audit_findings(const struct backend *b)
{
	return b->ops->audit_findings ? b->ops->audit_findings(b->ctx) : 0;
}

/* Whether the backend runs user code objects. */
static inline bool backend_has_modules(const struct backend *b)
{
	return b->ops->module_load != NULL;
}

static inline int backend_module_load(const struct backend *b, const char *path, void **module)
{
	return b->ops->module_load ? b->ops->module_load(b->ctx, path, module) : -ENOTSUP;
}

static inline int backend_module_function(
	const struct backend *b, void *module, const char *name, void **function)
{
	return b->ops->module_function(b->ctx, module, name, function);
}

static inline int backend_module_global(
	const struct backend *b, void *module, const char *name, uint64_t *addr, uint64_t *size)
{
	return b->ops->module_global ? b->ops->module_global(b->ctx, module, name, addr, size)
				     : -ENOTSUP;
}

static inline void backend_module_unload(const struct backend *b, void *module)
{
	b->ops->module_unload(b->ctx, module);
}

static inline int backend_function_param(
	const struct backend *b, void *function, unsigned index, size_t *offset, size_t *size)
{
	return b->ops->function_param
		? b->ops->function_param(b->ctx, function, index, offset, size)
		: -ENOTSUP;
}

static inline int backend_module_functions(
	const struct backend *b, void *module, char ***names, size_t *n)
{
	return b->ops->module_functions ? b->ops->module_functions(b->ctx, module, names, n)
					: -ENOTSUP;
}

static inline int backend_function_attrs(
	const struct backend *b, void *function, struct backend_fn_attrs *attrs)
{
	return b->ops->function_attrs ? b->ops->function_attrs(b->ctx, function, attrs) : -ENOTSUP;
}

static inline int backend_function_max_shared(
	const struct backend *b, void *function, uint64_t bytes)
{
	return b->ops->function_max_shared ? b->ops->function_max_shared(b->ctx, function, bytes)
					   : -ENOTSUP;
}

static inline int backend_function_occupancy(const struct backend *b, void *function,
	uint32_t threads, uint64_t shared, uint32_t *blocks)
{
	return b->ops->function_occupancy
		? b->ops->function_occupancy(b->ctx, function, threads, shared, blocks)
		: -ENOTSUP;
}

static inline void backend_info(const struct backend *b, struct backend_info *info)
{
	b->ops->info(b->ctx, info);
}

static inline int backend_op_times(const struct backend *b, struct seq_point at, uint64_t *start_ns,
	uint64_t *end_ns, uint64_t *error_ns)
{
	return b->ops->op_times ? b->ops->op_times(b->ctx, at, start_ns, end_ns, error_ns)
				: -ENOENT;
}

static inline int backend_point_word(const struct backend *b, struct seq_point at,
	_Atomic uint64_t *word, uint64_t tag, _Atomic bool *written)
{
	return b->ops->point_word ? b->ops->point_word(b->ctx, at, word, tag, written)
				  : -EOPNOTSUPP;
}

static inline void backend_destroy(struct backend *b)
{
	if (b->ops)
		b->ops->destroy(b->ctx);
	b->ops = NULL;
	b->ctx = NULL;
}

/* What sseqd's own options tell whichever backend it starts. */
struct backend_args {
	unsigned device; /* --device */
	/* Restarted in place: what counts from the process's start (the sim's injected
	 * faults, numbered by launch) is not done again, as a different experiment. */
	bool resumed;
	/* The daemon's loops (--loops), each with an instance of the backend of its own on
	 * the one device, and this instance's loop: what the backend's options size for the
	 * daemon (threads, pinned memory) is shared out between them. */
	unsigned loops, loop;
};

/* A backend as sseqd knows it (seatd's impls[], XLA's platform registration): exported
 * by each backend at the bottom of its main file (sim.c; hip-config.c, which every build
 * has, with HIP or without), listed by registry.c in the order --backend auto tries
 * them. Its options are its own rows, parsed into a config of its own (config_size
 * bytes, starting as config_default) that probe and create are given. */
struct backend_desc {
	const char *name; /* --backend NAME */
	const char *title; /* in prose: "HIP" */
	const char *build_option; /* what builds it in: "-Dhip=enabled"; NULL: always built */
	/* 0 when it can run the device on this machine, else a negative errno with the
	 * reason in why; must not start the device. NULL (and create NULL): this sseqd was
	 * built without it, and takes its options only so that one configuration serves
	 * every build. */
	int (*probe)(const void *config, unsigned device, char *why, size_t size);
	int (*create)(struct backend *out, const void *config, const struct backend_args *args,
		const struct backend_env *env);
	size_t config_size;
	const void *config_default;
	const struct option_row *options; /* ending with a row named NULL */
	/* What its options turned on, for the start-up line ("; audit on"); may be NULL. */
	void (*describe)(const void *config, const struct backend *be, char *buf, size_t size);
	/* --loops 0 (auto) gives it one loop per this many CPUs sseqd may use, at most
	 * loops_max; 0: one loop (a backend for tests, whose behaviour should not depend
	 * on the machine). */
	unsigned cpus_per_loop, loops_max;
};

/* The checks every backend makes before launching op at `at` on a stream of kind
 * stream_kind whose last launched point is `launched`: 0 or -EINVAL. */
int backend_op_check(enum seq_stream_kind stream_kind, uint64_t launched, struct seq_point at,
	const struct seq_op *op);

#endif
