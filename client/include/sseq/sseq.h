/* libsseq: the C client of sseqd, the per-GPU event-sequencing daemon. A client holds no
 * GPU context; it submits allocations, copies and kernels to the daemon over a Unix
 * socket and moves bulk data through shared-memory staging arenas. See libsseq(3). */
#ifndef SSEQ_SSEQ_H
#define SSEQ_SSEQ_H

#include <stddef.h>
#include <stdint.h>

/* The release this header belongs to, for #if tests at compile time; sseq_version() is
 * the library the program runs with. Kept equal to meson.build's project version (the
 * library's build stops with an #error where they differ). */
#define SSEQ_VERSION_MAJOR 0
#define SSEQ_VERSION_MINOR 1
#define SSEQ_VERSION_PATCH 0
#define SSEQ_VERSION "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Conventions
 * -----------
 * Every fallible function returns 0 (or a documented non-negative value) on success and
 * a negative code on failure:
 *
 *   - a negative errno for system and library errors (-ENOMEM, -ECONNRESET when the
 *     daemon went away, -EPROTO when it broke the protocol, -EINVAL for bad arguments
 *     caught before anything is sent, -ETIMEDOUT for an expired poll);
 *   - -SSEQ_ERR_* (below) for a status the daemon returned for a request.
 *
 * sseq_strerror() names any of them; sseq_last_error_message() gives the daemon's own
 * detail text for the most recent daemon error returned on a connection.
 *
 * Threads: a struct sseq must be used by one thread at a time (callers serialise; the
 * library locks nothing of a connection's, only, briefly, its process-wide list of
 * connections at connect, close and when refusing another connection's handle).
 * Different connections are fully independent and may be used
 * from different threads concurrently. Callbacks run on the thread that called into the
 * library and must not call libsseq functions on the same connection.
 *
 * Submission is non-blocking and follows Nagle's rule: a copy or kernel request leaves
 * at once when no answer to an earlier request is due, so the daemon starts on it while
 * the program does other work; while answers are due it is held back and leaves with
 * the ones after it in one send once an answer has come (later submissions look for one
 * without waiting, from 1 ms after the last send), when 64 KiB are queued, on sseq_flush(), or on
 * any call that waits (sseq_wait, sseq_sync, sseq_alloc, ...). What a burst left held
 * back goes with a later call on the connection: call sseq_flush() before long host
 * work that follows one (an H2D copy then a kernel is such a burst). Each request gets
 * a tag; sseq_wait(tag) blocks until that request is finished. An error for a request
 * nobody waits on is never lost: it is kept and returned, once, by a later sseq_sync()
 * (or sseq_next_error()).
 *
 * Handles (buffers, slices, modules) are per-connection numbers assigned by the daemon;
 * 0 is never a valid handle. Two connections get the same numbers from their daemons, so
 * the library marks each handle it returns with its connection (a tag in the top 16
 * bits; the low 48 are the daemon's number, what sseqctl and the daemon's messages show)
 * and a call given a handle of another live connection of the process fails with -EINVAL
 * before sending anything, sseq_last_error_message() naming both sessions. (A connection
 * whose daemon handed it a handle with its own top bits set, a slot reused 65536 times,
 * leaves such handles to the daemon, which refuses them as unknown.)
 */

/* Daemon statuses, as returned negated (-SSEQ_ERR_UNKNOWN_HANDLE). The value minus
 * SSEQ_ERR_BASE is the wire protocol's Status; errno values never reach this range. */
enum sseq_error {
	SSEQ_ERR_BASE = 4000,
	SSEQ_ERR_INVALID_ARGUMENT = SSEQ_ERR_BASE + 1,
	SSEQ_ERR_UNKNOWN_HANDLE = SSEQ_ERR_BASE + 2,
	SSEQ_ERR_OUT_OF_RANGE = SSEQ_ERR_BASE + 3,
	SSEQ_ERR_PERMISSION_DENIED = SSEQ_ERR_BASE + 4,
	SSEQ_ERR_UNSUPPORTED_VERSION = SSEQ_ERR_BASE + 5,
	SSEQ_ERR_UNKNOWN_KERNEL = SSEQ_ERR_BASE + 6,
	SSEQ_ERR_BAD_ARGUMENT_TYPE = SSEQ_ERR_BASE + 7,
	SSEQ_ERR_RESOURCE_EXHAUSTED = SSEQ_ERR_BASE + 8,
	SSEQ_ERR_DEVICE_ERROR = SSEQ_ERR_BASE + 9,
	SSEQ_ERR_DEPENDENCY_FAILED = SSEQ_ERR_BASE + 10,
	SSEQ_ERR_INJECTED_FAULT = SSEQ_ERR_BASE + 11,
	SSEQ_ERR_DOUBLE_DEFINITION = SSEQ_ERR_BASE + 12,
	SSEQ_ERR_STAGING_UNSEALED = SSEQ_ERR_BASE + 13,
	SSEQ_ERR_FRAME_TOO_LARGE = SSEQ_ERR_BASE + 14,
	SSEQ_ERR_BUSY = SSEQ_ERR_BASE + 15,
	SSEQ_ERR_SHUTTING_DOWN = SSEQ_ERR_BASE + 16,
	SSEQ_ERR_INTERNAL = SSEQ_ERR_BASE + 17,
	SSEQ_ERR_PROTOCOL_ERROR = SSEQ_ERR_BASE + 18,
	SSEQ_ERR_NOT_SUPPORTED = SSEQ_ERR_BASE + 19, /* protocol 1.5 */
	/* One past the last status this header knows; a newer daemon may send more. */
	SSEQ_ERR_END,
};

/* True for a (negative) code that carries a daemon status rather than an errno. */
#define SSEQ_IS_DAEMON_ERROR(code) ((code) <= -SSEQ_ERR_BASE && (code) > -(SSEQ_ERR_BASE + 1000))

/* A readable description of 0, any negative errno or any -SSEQ_ERR_*. Never NULL; the
 * string is static. */
const char *sseq_strerror(int code);

/* The release of the libsseq this program runs with, "MAJOR.MINOR.PATCH" (SSEQ_VERSION
 * is the one it was compiled against). Never NULL; the string is static. */
const char *sseq_version(void);

struct sseq;

/* Optional settings for sseq_connect(). Zero-initialise, set .size to sizeof the struct
 * (0 is read as this first version's size), and fill what you need; zero or NULL fields
 * take the defaults. Fields are only ever appended. */
struct sseq_connect_options {
	size_t size;
	/* Shown by sseqctl. Default: the program's short name. */
	const char *client_name;
	/* Grouping label, e.g. a pytest-xdist worker id. Default: $PYTEST_XDIST_WORKER. */
	const char *worker_id;
	/* Bytes of the first staging arena, created on first use. More arenas are added on
	 * demand (a request larger than this gets one of its own). Default: 64 MiB. */
	uint64_t staging_size;
	/* Compute lanes to ask for, 1 .. SSEQ_MAX_LANES (0: one). Each lane is a stream of
	 * the daemon's own for independent work (see sseq_set_lane); the daemon gives the
	 * least-loaded ones, distinct while it has enough. More than SSEQ_MAX_LANES fails
	 * the connect with -SSEQ_ERR_INVALID_ARGUMENT. Read only when .size covers it (a
	 * .size of 0 means the first version, which had no lanes); a daemon older than
	 * protocol 1.2 gives one lane whatever is asked. */
	uint32_t lanes;
};

/* The most lanes a connection may ask for. */
#define SSEQ_MAX_LANES 8

/* SSEQ_DEFAULT_SOCKET, "/run/sseq/gpu0.sock": the socket sseq_connect() uses when given no
 * path and $SSEQ_SOCKET is unset or empty; SSEQ_SOCKET_DIR, the sockets' directory. */
#include "sseq-socket.h"

/* SSEQ_DEFAULT_SOCKET of the libsseq the program runs with, for bindings that would
 * otherwise repeat it (protocol 1.6). Never NULL; the string is static. */
const char *sseq_default_socket(void);

/* Connect to the daemon at `path` and say Hello. path NULL: $SSEQ_SOCKET if set and not
 * empty, else SSEQ_DEFAULT_SOCKET. opts may be NULL. Waits for the Welcome. On success
 * *out is the connection (free it with sseq_close). On failure *out is NULL and
 * sseq_last_error_message(NULL) says why on this thread. Returns 0, a negative errno
 * (-ENOENT / -ECONNREFUSED: no daemon there) or -SSEQ_ERR_UNSUPPORTED_VERSION. */
int sseq_connect(const char *path, const struct sseq_connect_options *opts, struct sseq **out);

/* Close the connection and free everything the library holds for it, including staging
 * arenas and memory from sseq_host_alloc(). Requests still buffered are sent first, but
 * nothing is waited for: the daemon frees the session's buffers once its in-flight work
 * is complete. Call sseq_sync() first to learn how that work ended. NULL is a no-op. */
void sseq_close(struct sseq *s);

/* What the daemon said in its Welcome. The strings belong to the connection. */
struct sseq_info {
	uint64_t session;
	uint32_t protocol_major;
	uint32_t protocol_minor;
	const char *daemon_version;
	uint32_t device_index;
	const char *device_name;
	const char *backend; /* "sim" or "hip" */
	const char *arch; /* "gfx90a", "sm_90", "" for sim */
	uint64_t memory_total;
};

/* Fill *info from the Welcome (no I/O). Returns 0. */
int sseq_get_info(struct sseq *s, struct sseq_info *info);

/*
 * Lanes
 * -----
 * A connection has one or more lanes (sseq_connect_options.lanes): streams of the daemon
 * that run its work, its own unless the daemon has more connections than streams.
 * Copies and kernels go on the current lane, lane 0 until sseq_set_lane() picks
 * another. Work on different lanes may run concurrently, but ordering between
 * operations on the same buffers holds across lanes exactly as within one: a kernel on
 * lane 1 that reads a buffer an H2D copy on lane 0 wrote runs after that copy.
 */

/* Put the copies and kernels submitted from now on on lane `lane` (0 .. count-1).
 * Returns 0, or -EINVAL (nothing changes) when the connection has no such lane. */
int sseq_set_lane(struct sseq *s, unsigned lane);

/* The current lane, as sseq_set_lane() set it (0 at first). */
unsigned sseq_get_lane(struct sseq *s);

/* How many lanes the connection has (1 or more), no I/O. With ids not NULL, the first
 * min(n, count) of them are filled with the daemon's stream number of each lane, in lane
 * order (what sseqctl streams and Reply points show); a daemon older than protocol 1.2
 * gives every connection one lane, reported as stream 0. */
int sseq_get_lanes(struct sseq *s, uint32_t *ids, size_t n);

/* The daemon's detail text for the last daemon error (-SSEQ_ERR_*) a function returned
 * on this connection, or a description of the last local failure; "" if none. A call
 * that fails before sending anything (-EINVAL, -ENOMEM, a lost connection) replaces it
 * with its own, never leaving an earlier request's message to be taken for its. With
 * s == NULL: the calling thread's last failed sseq_connect(). Valid until the next call
 * on the connection (or the next sseq_connect on this thread). */
const char *sseq_last_error_message(struct sseq *s);

/* The tag of the request whose error a function last returned on this connection (from
 * sseq_sync, sseq_next_error or sseq_wait), or 0 when that error was not a tagged
 * request's. Lets a caller of sseq_sync tell which request failed. */
uint64_t sseq_last_error_tag(struct sseq *s);

/*
 * Device buffers
 * --------------
 * These wait for the daemon's Reply (one round trip; queued requests are sent first).
 */

/* Allocate `size` bytes of device memory; *buf is its handle. label is shown by sseqctl
 * and in leak reports (NULL: none). The contents are undefined until written. */
int sseq_alloc(struct sseq *s, uint64_t size, const char *label, uint64_t *buf);

/* Release a buffer or slice handle. The daemon defers the actual free until every
 * operation submitted before it that uses the buffer is complete, and keeps a base alive
 * while slices of it exist, so it is safe to free right after submitting a kernel that
 * reads the buffer. Waits for the Reply only. */
int sseq_free(struct sseq *s, uint64_t buf);

/* A view of bytes [offset, offset + length) of buffer `buf` (a base or a slice); *slice
 * is its handle. A slice shares its base's contents and ordering and keeps the base
 * alive; free it with sseq_free(). label may be NULL. */
int sseq_slice(struct sseq *s, uint64_t buf, uint64_t offset, uint64_t length, const char *label,
	uint64_t *slice);

/* The same without waiting (protocol 1.9): the library names the new handle itself and
 * returns it at once, so that the requests using it leave in the same send as the Alloc
 * (alloc, kernel, download, free: one wait instead of three). The daemon's verdict comes
 * as for an asynchronous operation: a refusal (out of memory, a limit) is returned by
 * the next sseq_sync() or sseq_next_error(), and every request that uses the handle
 * fails with -SSEQ_ERR_DEPENDENCY_FAILED, its message quoting the refusal; the handle
 * is still to be freed. They return a negative code only for what is found before
 * sending. With a daemon older than 1.9 they wait, as sseq_alloc and sseq_slice. */
int sseq_alloc_async(struct sseq *s, uint64_t size, const char *label, uint64_t *buf);
int sseq_slice_async(struct sseq *s, uint64_t buf, uint64_t offset, uint64_t length,
	const char *label, uint64_t *slice);
/* sseq_free without waiting for the Reply: a refusal (an unknown handle) is returned by
 * the next sseq_sync(). */
int sseq_free_async(struct sseq *s, uint64_t buf);

/*
 * Host memory
 * -----------
 * Bulk data moves through staging arenas: memfd mappings shared with the daemon. Memory
 * from sseq_host_alloc() lies inside an arena, so copies from and to it need no extra
 * host copy. Any other host memory works too; the library stages it.
 */

/* Allocate `size` bytes of host memory inside a staging arena, 64-byte aligned, valid
 * until sseq_host_free() or sseq_close(). May wait for earlier copies to release arena
 * space, or register a new arena with the daemon. */
int sseq_host_alloc(struct sseq *s, uint64_t size, void **ptr);

/* Create and register the first staging arena now if there is none, and return once the
 * daemon has it ready (pinned, where the daemon pins arenas as they register), so that
 * the first copy pays neither (protocol 1.7; an older daemon answers at once). 0 at once
 * when the arena exists. */
int sseq_prepare_staging(struct sseq *s);

/* Give back memory from sseq_host_alloc(). Copies still in flight from or to it keep
 * the space reserved until they complete, so this never waits. Returns -EINVAL if ptr is
 * not the start of a live host allocation. */
int sseq_host_free(struct sseq *s, void *ptr);

/*
 * Asynchronous operations
 * -----------------------
 * These queue a request and return without waiting for the daemon. If `tag` is not NULL
 * it receives the request's tag for sseq_wait() and the daemon is asked to report the
 * operation's completion; with NULL nobody waits, but a failure still reaches the next
 * sseq_sync(). They return a negative code only for problems found before sending
 * (bad arguments, a lost connection, no memory); the daemon's verdict comes from
 * sseq_wait() or sseq_sync().
 */

/* Copy `len` bytes from host `src` to bytes [dst_off, dst_off + len) of buffer `dst`.
 * If src lies inside memory from sseq_host_alloc() the copy reads it in place: do not
 * modify that range until the copy is finished (sseq_wait). Otherwise src is copied into
 * staging before this returns and may be reused at once. */
int sseq_copy_h2d(struct sseq *s, uint64_t dst, uint64_t dst_off, const void *src, uint64_t len,
	uint64_t *tag);

/* Copy `len` bytes from buffer `src` at src_off to host `dst`. dst is written only when
 * the completion is processed, during a later call on the connection (sseq_wait,
 * sseq_sync, sseq_poll, any other waiting call, or a submission, which reads what the
 * daemon sent): do not read it before sseq_wait(tag) or sseq_sync() returned 0, and keep
 * it valid until then. If the copy fails, dst is left untouched. */
int sseq_copy_d2h(
	struct sseq *s, uint64_t src, uint64_t src_off, void *dst, uint64_t len, uint64_t *tag);

/* Copy `len` bytes between device buffers (they may be views of one base if the ranges
 * do not overlap). */
int sseq_copy_d2d(struct sseq *s, uint64_t src, uint64_t src_off, uint64_t dst, uint64_t dst_off,
	uint64_t len, uint64_t *tag);

enum sseq_arg_type {
	SSEQ_ARG_BUFFER = 1,
	SSEQ_ARG_I32,
	SSEQ_ARG_U32,
	SSEQ_ARG_I64,
	SSEQ_ARG_U64,
	SSEQ_ARG_F32,
	SSEQ_ARG_F64,
	/* Module functions only (protocol 1.5): narrow scalars, f16 and bf16 as their 16
	 * bits, and a by-value plain-old-data value (struct, float4, dim3) as its bytes. */
	SSEQ_ARG_I8,
	SSEQ_ARG_U8,
	SSEQ_ARG_I16,
	SSEQ_ARG_U16,
	SSEQ_ARG_F16,
	SSEQ_ARG_BF16,
	SSEQ_ARG_BYTES,
};

/* How a kernel uses a buffer argument; the daemon orders the launch from it. */
enum sseq_access {
	SSEQ_ACCESS_IN = 1,
	SSEQ_ACCESS_OUT = 2,
	SSEQ_ACCESS_INOUT = 3,
};

/* One kernel argument: a buffer with its access, a typed scalar, or bytes by value.
 * Build them with the SSEQ_IN/SSEQ_F32/SSEQ_BYTES/... macros below. A pointer at an
 * offset into a buffer is a slice of it (sseq_slice()) passed as a buffer. */
struct sseq_arg {
	enum sseq_arg_type type;
	enum sseq_access access; /* buffers only */
	union {
		uint64_t buffer;
		int32_t i32;
		uint32_t u32;
		int64_t i64;
		uint64_t u64;
		float f32;
		double f64;
		struct {
			const void *data; /* read when the launch is sent */
			uint32_t size; /* 1 .. 4096 */
			uint32_t align; /* a power of two up to 256 dividing size; 0: 1 */
		} bytes;
	} v;
};

static inline struct sseq_arg sseq_arg_buffer(uint64_t buf, enum sseq_access access)
{
	struct sseq_arg a;
	a.type = SSEQ_ARG_BUFFER;
	a.access = access;
	a.v.buffer = buf;
	return a;
}

#define SSEQ__ARG_SCALAR(name, ctype, kind)                                                        \
	static inline struct sseq_arg sseq_arg_##name(ctype x)                                     \
	{                                                                                          \
		struct sseq_arg a;                                                                 \
		a.type = kind;                                                                     \
		a.access = (enum sseq_access)0;                                                    \
		a.v.name = x;                                                                      \
		return a;                                                                          \
	}
SSEQ__ARG_SCALAR(i32, int32_t, SSEQ_ARG_I32)
SSEQ__ARG_SCALAR(u32, uint32_t, SSEQ_ARG_U32)
SSEQ__ARG_SCALAR(i64, int64_t, SSEQ_ARG_I64)
SSEQ__ARG_SCALAR(u64, uint64_t, SSEQ_ARG_U64)
SSEQ__ARG_SCALAR(f32, float, SSEQ_ARG_F32)
SSEQ__ARG_SCALAR(f64, double, SSEQ_ARG_F64)
#undef SSEQ__ARG_SCALAR

/* The narrow scalars travel widened, in v.i32 (i8, i16) or v.u32 (u8, u16, and f16 and
 * bf16 as their 16 bits: the IEEE half; bfloat16, float32's upper half). A value outside
 * the type's range is refused by the daemon (-SSEQ_ERR_INVALID_ARGUMENT naming the
 * argument), not cut to fit. */
static inline struct sseq_arg sseq_arg_narrow(enum sseq_arg_type type, int64_t x)
{
	struct sseq_arg a;
	a.type = type;
	a.access = (enum sseq_access)0;
	if (type == SSEQ_ARG_I8 || type == SSEQ_ARG_I16)
		a.v.i32 = x < INT32_MIN ? INT32_MIN : x > INT32_MAX ? INT32_MAX : (int32_t)x;
	else
		a.v.u32 = x < 0 || x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
	return a;
}

/* size bytes at data, aligned to align in the kernel's parameters (C's _Alignof). */
static inline struct sseq_arg sseq_arg_bytes(const void *data, uint32_t size, uint32_t align)
{
	struct sseq_arg a;
	a.type = SSEQ_ARG_BYTES;
	a.access = (enum sseq_access)0;
	a.v.bytes.data = data;
	a.v.bytes.size = size;
	a.v.bytes.align = align;
	return a;
}

#define SSEQ_IN(buf) sseq_arg_buffer((buf), SSEQ_ACCESS_IN)
#define SSEQ_OUT(buf) sseq_arg_buffer((buf), SSEQ_ACCESS_OUT)
#define SSEQ_INOUT(buf) sseq_arg_buffer((buf), SSEQ_ACCESS_INOUT)
#define SSEQ_I32(x) sseq_arg_i32((int32_t)(x))
#define SSEQ_U32(x) sseq_arg_u32((uint32_t)(x))
#define SSEQ_I64(x) sseq_arg_i64((int64_t)(x))
#define SSEQ_U64(x) sseq_arg_u64((uint64_t)(x))
#define SSEQ_F32(x) sseq_arg_f32((float)(x))
#define SSEQ_F64(x) sseq_arg_f64((double)(x))
#define SSEQ_I8(x) sseq_arg_narrow(SSEQ_ARG_I8, (int64_t)(x))
#define SSEQ_U8(x) sseq_arg_narrow(SSEQ_ARG_U8, (int64_t)(x))
#define SSEQ_I16(x) sseq_arg_narrow(SSEQ_ARG_I16, (int64_t)(x))
#define SSEQ_U16(x) sseq_arg_narrow(SSEQ_ARG_U16, (int64_t)(x))
#define SSEQ_F16(bits) sseq_arg_narrow(SSEQ_ARG_F16, (int64_t)(bits))
#define SSEQ_BF16(bits) sseq_arg_narrow(SSEQ_ARG_BF16, (int64_t)(bits))
/* A value by its bytes: SSEQ_BYTES(&v, sizeof(v), _Alignof(T)) for a struct T or float4. */
#define SSEQ_BYTES(ptr, size, align) sseq_arg_bytes((ptr), (uint32_t)(size), (uint32_t)(align))

/* The launch shape: an explicit grid (grid[0] != 0), else an element count
 * (elements != 0) from which the daemon derives the grid. A NULL shape, or one with
 * both zero, lets the daemon derive the count from the arguments. */
struct sseq_launch {
	uint64_t elements;
	uint32_t grid[3];
	uint32_t block[3];
	uint32_t shared_mem; /* dynamic shared memory, bytes */
};

/* Launch the built-in kernel `kernel` (e.g. "axpy") with `nargs` arguments. It runs after
 * every earlier operation that writes a buffer it reads, and after earlier readers and
 * writers of buffers it writes, whatever stream those ran on. Fails with -EINVAL before
 * sending if an argument is malformed; the daemon checks the signature
 * (-SSEQ_ERR_UNKNOWN_KERNEL, -SSEQ_ERR_BAD_ARGUMENT_TYPE). */
int sseq_execute(struct sseq *s, const char *kernel, const struct sseq_arg *args, size_t nargs,
	const struct sseq_launch *shape, uint64_t *tag);

/* Load a code object (a path inside the daemon's --module-dir; HIP backend only) and wait
 * for its handle. */
int sseq_load_module(struct sseq *s, const char *path, uint64_t *module);

/* A module's global (a __constant__ or __device__ variable, by its symbol: mangled for
 * C++, as written for extern "C") as a buffer handle in *buf, its size in *size (may be
 * NULL): copy into and out of it with sseq_copy_h2d()/d2h()/d2d(), slice it, free it with
 * sseq_free(). While the handle is open, every launch of a function of the module counts
 * as reading the global (read-write when `writable`, for variables kernels write), so a
 * launch waits for the copy that set it and the next copy into it waits for launches
 * still reading it (writable: non-zero). An unknown name or a global already open is
 * -SSEQ_ERR_INVALID_ARGUMENT. */
int sseq_module_global(struct sseq *s, uint64_t module, const char *name, int writable,
	uint64_t *buf, uint64_t *size);

/* Like sseq_execute(), for function `name` of a module from sseq_load_module(). `name` is
 * the function's symbol (for C++ its mangled name, "_Z5scalePfif") or, containing '(', its
 * demangled signature ("scale(float*, int, float)"; blanks, and const before or after its
 * type, aside), or a short name ("scale", "reduce<256>") that only one function has; a
 * name several functions match is refused (-SSEQ_ERR_UNKNOWN_KERNEL) naming them.
 * Signatures and short names need the module's functions listed (sseq_module_functions),
 * which HIP on AMD cannot do: use the symbol there. The shape must be an explicit grid
 * within the device's limits (see libsseq(3)): a block over max_threads_per_block threads
 * or a dimension over its limit is -SSEQ_ERR_INVALID_ARGUMENT naming it. shape->shared_mem
 * over the function's maximum (48 KiB by default on NVIDIA) raises that maximum first;
 * over what the device allows a block, less the function's static shared memory, is
 * -SSEQ_ERR_INVALID_ARGUMENT. */
int sseq_execute_function(struct sseq *s, uint64_t module, const char *name,
	const struct sseq_arg *args, size_t nargs, const struct sseq_launch *shape, uint64_t *tag);

/* Launch attributes of a module function (protocol 1.5). Zero-initialise, set .size to
 * sizeof the struct (0 is read as this first version's size); fields are only ever
 * appended. cooperative: all blocks co-resident, so the kernel may synchronise the
 * whole grid (cooperative_groups' grid.sync()); the device must support it (NVIDIA;
 * not AMD with HIP 5.2: -SSEQ_ERR_NOT_SUPPORTED) and the grid fit at once (at most the
 * function's active blocks per multiprocessor, at this block size and shared memory,
 * times the multiprocessors; else -SSEQ_ERR_INVALID_ARGUMENT with the numbers).
 * cluster: thread-block clusters of x * y * z blocks (all 0: none; y, z 0 read as 1),
 * NVIDIA compute capability 9.0 and later only (else -SSEQ_ERR_NOT_SUPPORTED); each
 * grid dimension a multiple of the cluster's and at most 8 blocks a cluster (else
 * -SSEQ_ERR_INVALID_ARGUMENT). Not both at once (-SSEQ_ERR_NOT_SUPPORTED). */
struct sseq_launch_attrs {
	size_t size;
	uint32_t cooperative; /* nonzero: a cooperative launch */
	uint32_t cluster[3];
};

/* sseq_execute_function() with launch attributes; attrs NULL is none. */
int sseq_execute_function_attrs(struct sseq *s, uint64_t module, const char *name,
	const struct sseq_arg *args, size_t nargs, const struct sseq_launch *shape,
	const struct sseq_launch_attrs *attrs, uint64_t *tag);

/* A module function as the device reports it, for picking block sizes. */
struct sseq_function_info {
	char name[256]; /* its symbol (mangled for C++) */
	char demangled[512]; /* its signature, "" where it is no C++ name (cut to fit) */
	uint32_t max_threads_per_block; /* for this function on this device */
	uint32_t num_regs; /* per thread */
	uint64_t shared_size_bytes; /* static shared memory per block */
	uint64_t max_dynamic_shared_size_bytes; /* the current maximum for a launch */
	uint64_t const_size_bytes;
	uint64_t local_size_bytes; /* per thread */
	uint32_t ptx_version; /* major * 10 + minor (NVIDIA) */
	uint32_t binary_version;
};

/* The functions of a module from sseq_load_module(): up to n into fns (which may be NULL
 * when n is 0), their number in *count (which may exceed n). -SSEQ_ERR_INVALID_ARGUMENT
 * where the platform cannot list a module's functions (HIP on AMD) or the daemon runs no
 * modules (the sim); sseq_last_error_message() says so. */
int sseq_module_functions(
	struct sseq *s, uint64_t module, struct sseq_function_info *fns, size_t n, size_t *count);

/* One function's attributes, `name` as sseq_execute_function() takes it: 0, or
 * -SSEQ_ERR_UNKNOWN_KERNEL (none, or several, match). */
int sseq_function_attributes(
	struct sseq *s, uint64_t module, const char *name, struct sseq_function_info *info);

/* The device's launch limits for module functions (all 0 on the sim). */
struct sseq_device_limits {
	uint32_t max_threads_per_block;
	uint32_t max_block[3]; /* x, y, z */
	uint32_t max_grid[3];
	uint64_t shared_per_block; /* by default */
	uint64_t shared_optin; /* at most, static and dynamic together */
};

/* The device's limits (asks the daemon). */
int sseq_device_limits(struct sseq *s, struct sseq_device_limits *limits);

/*
 * Waiting
 * -------
 */

/* Send every queued request now, those Nagle's rule holds back while answers are due
 * included. Waits only for the socket to take them (processing any replies that arrive
 * meanwhile), for nothing from the daemon. Call it when host work follows a burst of
 * submissions. Returns 0 or the connection's error. */
int sseq_flush(struct sseq *s);

/* Wait until request `tag` is finished: its Completion, or the Reply that rejected it.
 * Returns its status: 0 or its error, also when sseq_sync, sseq_next_error or the
 * callback already saw that error (the library remembers the last 4096 failures of
 * tagged requests until they are waited on). Collecting an error here means sseq_sync
 * will not report it. -EINVAL for a tag this connection never issued. */
int sseq_wait(struct sseq *s, uint64_t tag);

/* Wait until the buffer's contents are defined: its producing operation completed.
 * Returns 0 or that operation's error (e.g. -SSEQ_ERR_DEPENDENCY_FAILED). */
int sseq_await(struct sseq *s, uint64_t buf);

/* Wait until everything submitted on this connection is complete and every outstanding
 * request is finished. Returns 0, or the oldest error not yet reported (the detail is
 * in sseq_last_error_message). Each error is reported once; further ones stay queued
 * for the next call or sseq_next_error(). */
int sseq_sync(struct sseq *s);

/* Report the oldest unreported error without any I/O: returns it (0 if none) and its
 * request's tag in *tag (may be NULL). Only messages already processed count: call
 * sseq_poll() or sseq_sync() to process more. */
int sseq_next_error(struct sseq *s, uint64_t *tag);

/* Send buffered requests, then process messages from the daemon, waiting at most
 * timeout_ms for the first one (0: do not wait, -1: wait indefinitely). Returns the
 * number of requests that finished (>= 0), -ETIMEDOUT if nothing arrived in time, or a
 * negative error. */
int sseq_poll(struct sseq *s, int timeout_ms);

/* Requests submitted and not yet finished. */
uint64_t sseq_outstanding(struct sseq *s);

/* The socket, for use in an event loop: when it is readable call sseq_poll(s, 0). */
int sseq_get_fd(struct sseq *s);

/* Called when a request that returned a tag finishes, with its status. Return nonzero to
 * take charge of an error: sseq_sync will then not report it (sseq_wait on the tag still
 * returns it); return 0 to leave it for sseq_sync. A D2H destination is already written
 * when the callback runs. */
typedef int (*sseq_completion_fn)(void *userdata, uint64_t tag, int status);

/* Set (or clear, with NULL) the completion callback. */
void sseq_set_completion_callback(struct sseq *s, sseq_completion_fn fn, void *userdata);

/*
 * Counters
 * --------
 */

/* The daemon's counters since it started, for the whole daemon (every session, not
 * just this connection): what `sseqctl stats` shows. Set .size to sizeof the struct
 * before the call (0 is read as this first version's size); fields are only ever
 * appended, and those beyond .size are left alone. */
struct sseq_stats {
	size_t size;
	uint64_t waits_enqueued; /* a stream was made to wait on another's event */
	uint64_t waits_elided_same_stream; /* no wait: same in-order stream */
	uint64_t waits_elided_observed; /* no wait: producer seen complete */
	uint64_t waits_elided_legacy; /* skipped by the injected legacy bug; else 0 */
	uint64_t backpressure_events;
	uint64_t race_findings; /* the sim's race detector, or the hip backend's audit */
	uint64_t ops_submitted;
	uint64_t ops_completed;
	uint64_t ops_failed;
	uint64_t events_recorded;
	uint64_t frees_deferred;
	uint64_t releases; /* buffers whose memory went back to the device */
	uint64_t double_definitions;
	uint64_t audit_findings; /* of those, sseqd --audit's (hip: GPU timestamps) */
	uint64_t sessions_total;
	uint64_t frames_in;
	uint64_t frames_bad;
	uint64_t placed_by_affinity; /* copies put on the D2H/D2D stream they depend on */
	/* Protocol 1.8 (0 from an older daemon): copies through the hip small-copy pool,
	 * short copies that found it full, staging arenas pinned. */
	uint64_t small_copies;
	uint64_t small_copies_unpooled;
	uint64_t arenas_pinned;
	/* Protocol 1.10: D2H (from 1.13 also Await) completions written into the client's
	 * done word instead of sent (sseq(7)); what a wait that spins reads there. */
	uint64_t completions_written;
	/* Protocol 1.14 (0 from an older daemon): on hip, enqueue commands the daemon's loop
	 * made itself for a sleeping submit thread, and submit threads woken for a command
	 * (each a wake-up a request paid). */
	uint64_t calls_on_loop;
	uint64_t submit_wakeups;
};

/* Ask the daemon for its counters (one round trip; queued requests are sent first) and
 * fill *stats. Returns 0, -EINVAL for a .size too small to hold any counter, or the
 * error of the query. */
int sseq_stats(struct sseq *s, struct sseq_stats *stats);

#ifdef __cplusplus
}
#endif

#endif
