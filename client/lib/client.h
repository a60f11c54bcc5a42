/* libsseq internals shared by its modules: the connection, the table of requests in
 * flight, and what each module offers the others. Not installed. The modules call one
 * way only: submit.c and query.c use conn.c, which uses ops.c; handles.c (for conn.c,
 * submit.c and modules.c) uses ops.c; frame.c, arenas.c and args.c use none of them. */
#ifndef SSEQ_CLIENT_CLIENT_H
#define SSEQ_CLIENT_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "arenas.h"
#include "done-word.h"
#include "frame.h"
#include "sseq-internal.h"

/* Soft and hard limits on bytes buffered for sending: past the soft one a submission
 * tries a non-blocking send, past the hard one it waits for the socket. */
#define CLIENT_SEND_SOFT (64u << 10)
#define CLIENT_SEND_HARD (4u << 20)
/* The first staging arena: the daemon pins it when it is registered (hipHostRegister),
 * which takes about 0.5 ms a MiB on an H200 and holds the daemon's loop meanwhile, so
 * it is small; a copy larger than it gets an arena of its own size. */
#define CLIENT_DEFAULT_STAGING (4u << 20)
/* While answers are due, how often a submission may look at the socket for one (a
 * recv that finds nothing costs more than packing a request): not sooner than 1 ms
 * after the last look or send, and while none comes, not sooner than an eighth of the
 * time since the send, so a slow batch costs a few dozen looks rather than one per
 * submission, and the daemon, once it has answered, waits at most about an eighth as
 * long again for the next batch. The 1 ms sets how small batches get when the daemon
 * answers faster than the program submits: on the H200 host (sim backend, paired runs)
 * a Python launch loop ran at 0.83x the rate of sending only at 64 KiB with 20 us,
 * 0.82x with 200 us and 1.01x with 1 ms; the C launch loop at 1.09x, 1.16x, 1.30x. */
#define CLIENT_LOOK_NS 1000000u
#define CLIENT_LOOK_BACKOFF 8u
/* Reported errors kept for a later sseq_wait on their tag. */
#define CLIENT_REPORTED_KEEP 4096

/* One request from submission until it is finished (its Completion, or the Reply
 * when no Completion follows) and, if someone waits for it, until they looked. */
struct op {
	uint64_t tag;
	struct op *hnext;
	Sseq__Request__BodyCase kind;
	bool want_completion;
	bool replied;
	bool completed;
	bool done;
	bool waited; /* a caller inside the library collects the result */
	bool user_tag; /* the application has the tag: the callback applies */
	bool follow; /* a trace query that keeps answering; never done */
	int status; /* 0 or the first error: -SSEQ_ERR_* or -errno */
	char *message; /* the daemon's detail for status, or NULL */
	uint64_t handle; /* from the Reply */
	uint64_t size; /* Reply.size (ModuleGlobal) */
	/* The staging range the request uses, released when it is finished; for a D2H
	 * through library staging, where to copy the result to. */
	struct staging_arena *arena;
	uint64_t staging_off;
	void *copy_out;
	uint64_t copy_len;
	/* A D2H's done word in the same arena (protocol 1.10), or an Await's, its only range
	 * (1.13): its offset + 1, 0 for none. While a wait watches it, the daemon writes the
	 * tag there once the bytes are in place (the buffer is complete), and then sends no
	 * Completion (ops.c, client_op_word_arm). */
	uint64_t word_off;
	/* Query results not yet collected, oldest first. */
	Sseq__QueryResult **results;
	size_t nresults, results_cap;
};

struct client_error {
	uint64_t tag;
	int code;
	char *message;
	bool tagged; /* the application holds the tag and may still sseq_wait on it */
	bool reported; /* sync, next_error or the callback already saw it */
};

/* A handle name of the connection's own (handles.c). */
struct client_name {
	uint32_t next_free;
	uint16_t gen;
	bool live;
};

struct sseq {
	int sock;
	struct frame_writer w;
	struct frame_reader r;
	uint64_t next_tag;
	/* Requests in flight, by tag (chained hash). */
	struct op **buckets;
	size_t nbuckets, nops;
	size_t nactive; /* not yet finished, follow queries aside */
	/* For Nagle's rule (conn.c): requests not yet answered (no Reply or first
	 * QueryResult), and of those the ones queued since the send buffer was last empty.
	 * More unanswered than queued: an answer to something sent is due. */
	size_t nunanswered, nqueued;
	uint64_t sent_ns, looked_ns; /* CLOCK_MONOTONIC of the last send, and of the last
					send or look for answers */
	uint64_t finished; /* requests finished so far, for sseq_poll */
	/* How long the next wait spins before it sleeps (conn.c): twice what the last
	 * wait (or, outside a wait for one request, answer) took, within $SSEQ_SPIN_US; 0
	 * after one slower than that. */
	long spin_ns;
	/* When the wait for one request (client_op_collect) began, 0 outside one: its
	 * spin counts from there, and it learns once, from the whole wait, not from each
	 * answer on the way (a Reply comes long before a copy's Completion). */
	uint64_t wait_t0;
	/* The D2H or Await a caller waits for, whose done word the wait watches beside the socket
	 * (conn.c), or NULL. */
	struct op *watching;
	/* Whether a wait that sleeps sleeps on that word, which the daemon wakes (protocol
	 * 1.12, $SSEQ_SLEEP_ON_WORD), rather than on the socket; the sleeps on it so far,
	 * and those that ran to their end unwoken (tests). */
	bool word_sleeps;
	uint64_t word_naps, word_naps_unwoken;
	bool no_words; /* $SSEQ_DONE_WORDS=0: no request names a done word */
	/* $SSEQ_REQUEST_RING=1 with a daemon of protocol 1.15: the requests go through a
	 * ring in an arena of its own (conn.c) once it is named. */
	bool want_ring;
	struct frame_ring ring;
	struct staging_arena *ring_arena;
	struct staging_set staging;
	/* Errors not yet collected, oldest first (see ops.c). */
	struct client_error *errors;
	size_t nerrors, errors_cap, nreported;
	int broken; /* 0, or why the connection is unusable */
	int fatal; /* a tag-0 status the daemon sent before closing */
	sseq_completion_fn cb;
	void *cb_data;
	char errmsg[256];
	uint64_t errtag; /* the request errmsg is about, or 0 */
	/* Why the connection is unusable (set with broken; before that, the reason a
	 * tag-0 Reply gave), said again by every call refused for it. */
	char brokenmsg[256];
	struct {
		uint64_t session;
		uint32_t major, minor;
		char *daemon_version;
		uint32_t device_index;
		char *device_name, *backend, *arch;
		uint64_t memory_total;
		uint32_t lanes[SSEQ_MAX_LANES]; /* Welcome.lanes */
		uint32_t nlanes; /* at least 1 once connected */
	} info;
	uint32_t lane; /* the current lane, an index into info.lanes */
	/* handles.c: this connection's tag in the handles it returns, and its place among
	 * the process's live connections. */
	uint16_t handle_tag;
	bool handle_wide; /* the daemon gave a handle with its top 16 bits set */
	bool handle_registered;
	struct sseq *handle_next;
	/* handles.c: the names this connection gives new buffers (sseq_alloc_async), by
	 * index - 1; name_free: a freed one's index, 0 = none. */
	struct client_name *names;
	uint32_t nnames, names_cap, name_free;
};

/* ---- ops.c: requests in flight, the daemon's messages about them, errors ---- */

/* Translate a wire status into the library's code (0 or -SSEQ_ERR_*). */
int client_status_code(int status);
/* Record a message for sseq_last_error_message. */
void client_set_error(struct sseq *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A call failing before anything is sent: record why (so no earlier request's message
 * is left to be taken for this failure's) and return code. */
int client_fail(struct sseq *s, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* s->broken, with its reason recorded again for sseq_last_error_message. */
int client_broken(struct sseq *s);

struct op *client_op_new(void);
/* Free an op that is not (or no longer) in the table. */
void client_op_free(struct op *op);
struct op *client_op_find(struct sseq *s, uint64_t tag);
/* Make room in the table for one more op, so that client_op_insert cannot fail. */
int client_ops_reserve(struct sseq *s);
/* Track op under op->tag; its kind and whether a Completion follows come from req. */
void client_op_insert(struct sseq *s, struct op *op, const Sseq__Request *req);
/* The op has its answer (Reply or first QueryResult). */
void client_op_answered(struct sseq *s, struct op *op);
/* Take op out of the table and free it. */
void client_op_drop(struct sseq *s, struct op *op);
/* Record the op's first error; later ones do not replace it. */
void client_op_fail(struct op *op, int code, const char *message);
/* Finish every op still in flight with err (the connection is lost). */
void client_ops_fail_all(struct sseq *s, int err);
/* Free every op and every kept error (the connection is closing). */
void client_ops_free_all(struct sseq *s);
/* Decode one frame from the daemon and apply it to the ops. -EPROTO if undecodable. */
int client_dispatch(struct sseq *s, const uint8_t *frame, size_t len);

/* Keep an error nobody collected (see ops.c for which are kept, and how long). */
void client_error_push(
	struct sseq *s, uint64_t tag, int code, const char *message, bool tagged, bool reported);
/* Report the oldest error not yet reported (its tag in *tag, may be NULL), or 0. */
int client_error_next(struct sseq *s, uint64_t *tag);
/* If an error is kept for tag, report it for good into *code and return true. */
bool client_error_collect(struct sseq *s, uint64_t tag, int *code);

/* ---- conn.c: the socket, and submitting and waiting for requests ---- */

/* Give `req` a fresh tag (also in *tag if not NULL), track `op` for it and queue it (fd
 * >= 0 travels with it). Set op's fields (waited, user_tag, staging) first: from here on
 * the table owns it, and unless waited it is freed once finished, possibly before this
 * returns. On failure op and its staging reference are released. */
int client_submit(struct sseq *s, Sseq__Request *req, int fd, struct op *op, uint64_t *tag);
/* Wait until a waited op is done and return its status (and Reply handle); drop it. */
int client_op_collect(struct sseq *s, struct op *op);
/* The word a D2H's wait watches (op->word_off): CLIENT_WORD_UNWATCHED until a wait arms
 * it (0: the daemon may write the tag), and again once the wait sleeps; arm says whether
 * it is armed (an Await's starts armed) or holds the tag already. */
#define CLIENT_WORD_UNWATCHED DONE_WORD_UNWATCHED
bool client_op_word_arm(struct op *op);
/* A wait's sleep on the word (protocol 1.12): marked DONE_WORD_SLEEPING, for at most
 * timeout_ns. DONE: the tag came (the op is completed); AGAIN: the time is up, the word
 * is armed again; SOCKET: woken without the tag (the daemon answers by a Completion:
 * the word is marked, sleep on the socket); NONE: the word was not armed. */
enum client_nap { CLIENT_NAP_NONE, CLIENT_NAP_DONE, CLIENT_NAP_AGAIN, CLIENT_NAP_SOCKET };
enum client_nap client_op_word_nap(struct sseq *s, struct op *op, long timeout_ns);
/* Whether the word holds the tag, which completes the op (it finishes once its Reply is
 * here too). */
bool client_op_word_done(struct sseq *s, struct op *op);
/* Before a wait sleeps on the socket: the word is marked so that the daemon answers
 * with a Completion after all (false: too late, the tag is there, the op completed). */
bool client_op_word_sleep(struct sseq *s, struct op *op);
/* Release the staging an op holds (its range and its done word). */
void client_op_release_staging(struct sseq *s, struct op *op);
int client_op_collect_handle(struct sseq *s, struct op *op, uint64_t *handle);
/* ... and *size (may be NULL) from Reply.size. */
int client_op_collect_handle_sized(struct sseq *s, struct op *op, uint64_t *handle, uint64_t *size);
/* Submit a request and wait for it to finish; *handle (may be NULL) from its Reply. */
int client_request_wait(struct sseq *s, Sseq__Request *req, uint64_t *handle);
/* ... and *size (may be NULL) from Reply.size. */
int client_request_wait_sized(struct sseq *s, Sseq__Request *req, uint64_t *handle, uint64_t *size);
/* Send everything buffered, processing input meanwhile. */
int client_flush(struct sseq *s);
/* Process input, waiting up to timeout_ms for it (-1: forever). Returns messages
 * handled, -ETIMEDOUT, or the connection's error. */
int client_pump(struct sseq *s, int timeout_ms);

/* ---- handles.c: the handles applications hold ---- */

/* Give the connection its tag (once connected: the Welcome names its session). */
void handles_register(struct sseq *s);
void handles_unregister(struct sseq *s);
/* The handle to return for the daemon's `wire` (0 stays 0). */
uint64_t client_handle_out(struct sseq *s, uint64_t wire);
/* The daemon's number for an application's handle into *wire; -EINVAL, with a message
 * naming both sessions for function `fn`, for a handle of another live connection. */
int client_handle_in(struct sseq *s, uint64_t handle, const char *fn, uint64_t *wire);
/* A fresh client-named handle (the wire's form) for a new buffer or slice; -ENOMEM. */
int client_name_take(struct sseq *s, uint64_t *wire);
/* The wire handle was freed: if it is a live name of the connection, its index may be
 * named again (with the next generation). Any other handle: nothing. */
void client_name_put(struct sseq *s, uint64_t wire);
void client_names_free(struct sseq *s);

/* ---- args.c: Execute packing, kept separate so tests can check it without a daemon ---- */

struct args_pack {
	Sseq__Execute ex;
	Sseq__ModuleFunction fn;
	Sseq__Grid grid;
	Sseq__LaunchCluster cluster;
	Sseq__Arg *args;
	Sseq__Arg **argv;
	Sseq__BufferArg *bufs;
	Sseq__BytesArg *bytes;
};

/* Fill p->ex from the arguments and shape (the target is the caller's). -EINVAL for a
 * malformed argument, -ENOMEM. Free with args_pack_finish() either way. */
int args_pack(struct args_pack *p, const struct sseq_arg *args, size_t nargs,
	const struct sseq_launch *shape);
void args_pack_finish(struct args_pack *p);

#endif
