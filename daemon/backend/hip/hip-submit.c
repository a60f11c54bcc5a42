/* Launches for the hip backend: the loop thread turns each op (a copy or a kernel) into a
 * fixed-size command, and the commands (launches, event records and waits) run in queue
 * order, inline on the loop or on the submit thread. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/prctl.h>

#include "hip-internal.h"
#include "log.h"
#include "spin.h"

#define HIP_BLOCK 256
#define HIP_GRID_MAX 0x7fffffffu

/* ---- launch ---- */

const char *hip__kernel_name(const struct op_payload *p)
{
	if (p->kernel && p->kernel->name)
		return p->kernel->name;
	return p->function_name ? p->function_name : "(module function)";
}

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

		r = hip__mem_alloc(h, len, &addr);
		if (r < 0)
			return r;
		if (st->scratch) {
			struct hip_deferred *d = malloc(sizeof(*d));

			if (!d) {
				hip__mem_release(h, addr, len);
				return -ENOMEM;
			}
			*d = (struct hip_deferred){
				st->scratch, st->scratch_size, st->launched, st->deferred};
			st->deferred = d;
		}
		st->scratch = addr;
		st->scratch_size = hip__block_find(h, addr)->size; /* the class, or more */
		h->scratch_bytes += st->scratch_size;
	}
	*scratch = st->scratch;
	return 0;
}

/* Scratch blocks whose last user is now known complete. */
void hip__scratch_retire(struct hip *h, struct hip_stream *st, uint64_t through)
{
	for (struct hip_deferred **p = &st->deferred; *p;) {
		struct hip_deferred *d = *p;

		if (d->seq <= through) {
			*p = d->next;
			hip__mem_release(h, d->addr, d->size);
			h->scratch_bytes -= d->size;
			free(d);
		} else {
			p = &d->next;
		}
	}
}

/* The function to launch: a module function as given, or a built-in kernel's from the
 * image (then also in *fnp, for its hidden arguments). */
static int hip_kernel_function(struct hip *h, struct seq_point at, const struct op_payload *p,
	const struct hip_fn **fnp, hipFunction_t *fp)
{
	const struct hip_fn *fn = NULL;
	hipFunction_t f = p->function;

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
	*fnp = fn;
	*fp = f;
	return 0;
}

/* A module function's arguments that do not fit their 8-byte slot into one block, each
 * at its alignment, and the slots pointing at them (the server bounded the layout by
 * KERNEL_PARAM_SPACE, so this is small). */
static int hip_kernel_blob(const struct op_payload *p, struct hip_cmd *c)
{
	size_t off = 0, align = 8;
	char *blob;

	for (unsigned i = 0; i < p->nargs; i++) {
		const struct karg *a = &p->args[i];

		if (karg_size(a) > 8 || karg_align(a) > 8) {
			off = (off + karg_align(a) - 1) & ~((size_t)karg_align(a) - 1);
			off += karg_size(a);
			if (karg_align(a) > align)
				align = karg_align(a);
		}
	}
	if (off == 0)
		return 0;
	blob = aligned_alloc(align, (off + align - 1) & ~(align - 1));
	if (!blob)
		return -ENOMEM;
	off = 0;
	for (unsigned i = 0; i < p->nargs; i++) {
		const struct karg *a = &p->args[i];

		if (karg_size(a) > 8 || karg_align(a) > 8) {
			off = (off + karg_align(a) - 1) & ~((size_t)karg_align(a) - 1);
			memcpy(blob + off, a->v.bytes.data, karg_size(a));
			c->kernel.v[i].ptr = blob + off;
			c->kernel.indirect |= 1u << i;
			off += karg_size(a);
		}
	}
	c->kernel.blob = blob;
	return 0;
}

/* The signature's argument values into c, a buffer's as its view's address; *n counts
 * them. A module function's go by their own sizes (narrow scalars and small bytes in the
 * low bytes of their slot, wider bytes through hip_kernel_blob). */
static int hip_kernel_args(
	const struct seq_op *op, const struct op_payload *p, struct hip_cmd *c, unsigned *n)
{
	int r;

	if (p->function && (r = hip_kernel_blob(p, c)) < 0)
		return r;
	for (unsigned i = 0; i < p->nargs; i++) {
		const struct karg *a = &p->args[i];
		union hip_karg *v = &c->kernel.v[(*n)++];

		if ((unsigned)a->type >= KARG_NTYPES)
			return -EINVAL;
		if (a->type == KARG_BUFFER)
			v->ptr = (void *)(uintptr_t)op->access[a->v.buf.index].addr;
		else if (c->kernel.indirect & (1u << i))
			continue; /* hip_kernel_blob's */
		else if (a->type == KARG_BYTES)
			memcpy(v, a->v.bytes.data, a->v.bytes.size);
		else if (karg_size(a) < 4)
			memcpy(v, &a->v, karg_size(a));
		else
			karg_copy_scalar(v, &a->v, a->type);
	}
	return 0;
}

/* A built-in kernel's hidden arguments after its signature's (enum hip_extra). */
static int hip_kernel_extra(struct hip *h, const struct hip_fn *fn, const struct op_payload *p,
	struct hip_cmd *c, unsigned *n)
{
	c->kernel.v[(*n)++].u64 = p->elements;
	if (fn->extra == HIP_EXTRA_CLOCK) {
		c->kernel.v[(*n)++].u64 = h->clock_khz;
	} else if (fn->extra == HIP_EXTRA_CONV2D) {
		/* The output extent from its one definition, not recomputed per thread. */
		kernel_conv2d_from_args(p->args, &c->kernel.conv);
		if (kernel_conv2d_out_shape(&c->kernel.conv, NULL) < 0)
			return -EINVAL;
		c->kernel.has_conv = true;
	}
	return 0;
}

/* The grid the op names, or one thread per element in blocks of HIP_BLOCK. */
static int hip_kernel_grid(const struct op_payload *p, struct hip_cmd *c)
{
	uint64_t elements = p->elements;

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

/* A kernel launch's function, grid and argument values into its command; the refusals
 * that need no HIP call (not in the image, a grid too large) are made here. */
static int hip_kernel_prepare(
	struct hip *h, struct seq_point at, const struct seq_op *op, struct hip_cmd *c)
{
	const struct op_payload *p = op->payload;
	const struct hip_fn *fn;
	unsigned n = 0;
	int r;

	r = hip_kernel_function(h, at, p, &fn, &c->kernel.f);
	if (r < 0)
		return r;
	c->kernel.has_conv = false;
	c->kernel.indirect = 0;
	c->kernel.blob = NULL;
	r = hip_kernel_args(op, p, c, &n);
	if (r == 0 && fn)
		r = hip_kernel_extra(h, fn, p, c, &n);
	c->kernel.nv = n;
	snprintf(c->kernel.what, sizeof(c->kernel.what), "kernel %s", hip__kernel_name(p));
	c->kernel.shared = p->grid.shared_mem;
	c->kernel.cooperative = p->cooperative;
	memcpy(c->kernel.cluster, p->cluster, sizeof(c->kernel.cluster));
	if (r == 0)
		r = hip_kernel_grid(p, c);
	if (r < 0) { /* not published: nothing will run it */
		free(c->kernel.blob);
		c->kernel.blob = NULL;
	}
	return r;
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
		c->copy.pooled = false;
		c->empty = !p->length;
		return 0;
	case SEQ_OP_D2H:
		c->copy.dst = p->host;
		c->copy.src = (void *)(uintptr_t)(op->access[0].addr + p->src_offset);
		c->copy.len = p->length;
		c->copy.pooled = false;
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

/* A short H2D or D2H goes through a small-copy pool slot when one is free: the slot
 * (0: none, the client's arena as it is). */
static int32_t hip_launch_pool(struct hip *h, struct hip_cmd *c, const struct op_payload *p)
{
	int32_t slot;

	if ((c->op != SEQ_OP_H2D && c->op != SEQ_OP_D2H) || c->empty)
		return 0;
	slot = hip__pool_take(h, c->copy.len);
	if (!slot)
		return 0;
	c->copy.pooled = true;
	if (c->op == SEQ_OP_H2D) {
		c->copy.pool_in = c->copy.src;
		c->copy.src = hip__pool_addr(h, slot);
	} else {
		h->pool_slots[slot - 1].out = c->copy.dst;
		h->pool_slots[slot - 1].len = c->copy.len;
		h->pool_slots[slot - 1].done_word = p->done_word;
		h->pool_slots[slot - 1].done_tag = p->done_tag;
		h->pool_slots[slot - 1].done_written = p->done_written;
		c->copy.dst = hip__pool_addr(h, slot);
	}
	return slot;
}

int hip__launch(void *ctx, struct seq_point at, const struct seq_op *op)
{
	struct hip *h = ctx;
	struct hip_stream *st;
	struct hip_cmd local, *c;
	int32_t slot;
	int r;

	r = hip_op_check(h, at, op);
	if (r < 0)
		return r;
	/* After a device fault every HIP call fails: refuse at once, as inline would. */
	r = atomic_load_explicit(&h->device_error, memory_order_relaxed);
	if (r < 0)
		return r;
	st = &h->streams[at.stream];
	c = hip__submit_begin(h, at.stream, &local);
	r = hip_launch_prepare(h, st, at, op, c);
	if (r < 0)
		return r; /* the slot is not published: the next command takes it */
	slot = hip_launch_pool(h, c, op->payload);
	if (hip__stamped(h)) {
		c->audit = hip__audit_prepare(h, at, op);
		c->checks = hip__audit_table(h, st, at, op, c->audit);
	}
	r = hip__submit_end(h, c);
	if (r < 0) {
		/* Inline only: not launched, the point is not used. */
		if (hip__stamped(h))
			hip__audit_unpush(h, st, at);
		if (slot)
			hip__pool_put(h, slot);
		return r;
	}
	if (slot)
		hip__pool_append(h, st, slot, at.seq);
	st->launched = at.seq;
	return 0;
}

/* ---- submission: the enqueue calls, off the loop thread ----
 *
 * An enqueue (cudaLaunchKernel, cudaMemcpyAsync, ...) costs microseconds, about what the
 * loop spends on everything else for a request, so with the calls on the loop a daemon
 * launches at most half as fast as its clients, and all of them through one thread. The
 * loop queues fixed-size commands instead, each to the submit thread that owns the
 * command's stream (stream i: thread i % nsubmitters). A thread runs its queue strictly
 * in order, which keeps every order within a stream (its launches by seq, a record after
 * the launch it marks, a wait before the launches after it). Across threads one order
 * matters: a wait after the record it names. The loop queued the record first, so a wait
 * that finds the record not yet run (the event's `recorded` serial behind the one it
 * names) holds its thread until it has. That cannot deadlock: the oldest command not yet
 * run anywhere heads its thread's queue, and what it can wait for is older, so it has run.
 * An event goes back to the pool once its point is retired and is then recorded again: a
 * wait that finds a newer serial drops itself (its point is complete), and the check and
 * the wait are made under the event's lock, which its records also take, so a wait never
 * binds to a later record than the one it names.
 *
 * Two consequences shape the rest of the backend: an event enters the completion
 * thread's view only once its record command ran (I3: an unrecorded event reads as
 * complete), and an enqueue error surfaces here, after launch returned, so it fails the
 * stream forward: the stream's next event is reported with the error (I9). */

static pthread_mutex_t *hip_event_lock(struct hip *h, const struct hip_ev *ev)
{
	uintptr_t k = (uintptr_t)ev;

	return &h->event_lock[(k >> 4 ^ k >> 12) % HIP_EVENT_LOCKS];
}

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
		if (c->copy.pooled)
			memcpy((void *)c->copy.src, c->copy.pool_in, c->copy.len);
		else
			hip__staging_wait(st->h, c->copy.src);
		e = hipMemcpyAsync(
			c->copy.dst, c->copy.src, c->copy.len, hipMemcpyHostToDevice, st->stream);
		break;
	case SEQ_OP_D2H:
		if (!c->copy.pooled)
			hip__staging_wait(st->h, c->copy.dst);
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
				return hip__fail(e, "hipMemcpyAsync", "overlapping d2d", c->at);
			return 0;
		}
		e = hipMemcpyAsync(
			c->copy.dst, c->copy.src, c->copy.len, hipMemcpyDeviceToDevice, st->stream);
		break;
	}
	if (e != hipSuccess)
		return hip__fail(e, "hipMemcpyAsync", seq_op_kind_name(c->op), c->at);
	return 0;
}

static int hip_submit_kernel(struct hip_stream *st, struct hip_cmd *c)
{
	void *params[KERNEL_MAX_ARGS + 3];
	const char *call = "hipModuleLaunchKernel";
	unsigned n;
	hipError_t e;

	for (n = 0; n < c->kernel.nv; n++)
		params[n] = c->kernel.indirect & (1u << n) ? c->kernel.v[n].ptr : &c->kernel.v[n];
	if (c->kernel.has_conv)
		params[n++] = &c->kernel.conv;
	if (c->kernel.cooperative) {
#ifdef SSEQ_HIP_NVIDIA
		call = "hipModuleLaunchCooperativeKernel";
		e = hipModuleLaunchCooperativeKernel(c->kernel.f, c->kernel.grid[0],
			c->kernel.grid[1], c->kernel.grid[2], c->kernel.block[0],
			c->kernel.block[1], c->kernel.block[2], c->kernel.shared, st->stream,
			params);
#else
		return -ENOTSUP; /* HIP 5.2: the server refuses it first */
#endif
	} else if (c->kernel.cluster[0]) {
#ifdef SSEQ_HIP_NVIDIA
		call = "hipModuleLaunchKernelCluster";
		e = hipModuleLaunchKernelCluster(c->kernel.f, c->kernel.grid, c->kernel.block,
			c->kernel.cluster, c->kernel.shared, st->stream, params);
#else
		return -ENOTSUP; /* no clusters on AMD: the server refuses them first */
#endif
	} else {
		e = hipModuleLaunchKernel(c->kernel.f, c->kernel.grid[0], c->kernel.grid[1],
			c->kernel.grid[2], c->kernel.block[0], c->kernel.block[1],
			c->kernel.block[2], c->kernel.shared, st->stream, params, NULL);
	}
	if (e != hipSuccess)
		return hip__fail(e, call, c->kernel.what, c->at);
	return 0;
}

/* The op between its timestamps. A stream that already failed enqueues nothing more:
 * its events report the failure, and what depends on it fails in the core. */
static int hip_submit_launch(struct hip *h, struct hip_cmd *c)
{
	struct hip_stream *st = &h->streams[c->stream];
	struct hip_audit_op *a = c->audit;
	bool skip;
	hipError_t e;
	int r = 0;

	/* Cancelled at shutdown: what the device was not given yet never will be, and the
	 * stream's events say so (I9), as after a failed enqueue. */
	if (!st->failed && atomic_load_explicit(&h->cancelled, memory_order_relaxed))
		st->failed = -ESHUTDOWN;
	skip = st->failed != 0;

	if (a && !skip) {
		e = hipEventRecord(a->start, st->stream);
		if (e != hipSuccess) {
			hip__audit_warn(h, "cannot record a start event", e);
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
				hip__audit_warn(h, "cannot record an end event", e);
				a->bad = true;
			}
		}
		atomic_store_explicit(&a->settled, true, memory_order_release);
		hip__audit_queue(h, a, c->checks);
		hip__audit_op_put(h, a);
	}
	/* The launch copied the arguments (or never came). */
	if (c->op == SEQ_OP_EXEC) {
		free(c->kernel.blob);
		c->kernel.blob = NULL;
	}
	return r;
}

/* Record: then, and only then, the completion thread may wait for the event, and a wait
 * on another thread may bind to it. */
static void hip_submit_record(struct hip *h, const struct hip_cmd *c)
{
	struct hip_stream *st = &h->streams[c->stream];
	pthread_mutex_t *lock = hip_event_lock(h, c->ev);
	struct hip_event_ent *x;
	hipError_t e;
	int r;

	pthread_mutex_lock(lock);
	e = hipEventRecord(c->ev->ev, st->stream);
	atomic_store_explicit(&c->ev->recorded, c->serial, memory_order_release);
	pthread_mutex_unlock(lock);
	r = e == hipSuccess ? st->failed : hip__fail(e, "hipEventRecord", "event", c->at);
	pthread_mutex_lock(&st->mu);
	x = hip__ring_at(st, st->nsubmitted);
	x->status = r;
	x->unrecorded = e != hipSuccess;
	st->nsubmitted++;
	pthread_mutex_unlock(&st->mu);
	hip__complete_kick(h, st);
}

/* The waiting stream after the record c names: once that record has run (on its own
 * thread, perhaps still behind), and only if the event was not recorded again since. */
static int hip_submit_wait(struct hip *h, const struct hip_cmd *c)
{
	pthread_mutex_t *lock = hip_event_lock(h, c->ev);
	hipError_t e = hipSuccess;

	for (unsigned i = 1;
		atomic_load_explicit(&c->ev->recorded, memory_order_acquire) < c->serial; i++) {
		if (i % 64)
			hip__cpu_relax();
		else
			sched_yield();
	}
	pthread_mutex_lock(lock);
	if (atomic_load_explicit(&c->ev->recorded, memory_order_relaxed) == c->serial)
		e = hipStreamWaitEvent(h->streams[c->stream].stream, c->ev->ev, 0);
	pthread_mutex_unlock(lock);
	if (e != hipSuccess)
		return hip__fail(e, "hipStreamWaitEvent", "wait", c->at);
	return 0;
}

/* One command: 0 or the error of the enqueue (a record's goes into its event). */
static int hip_submit_run(struct hip *h, struct hip_cmd *c)
{
	switch (c->kind) {
	case HIP_CMD_LAUNCH:
		return hip_submit_launch(h, c);
	case HIP_CMD_WAIT:
		return hip_submit_wait(h, c);
	case HIP_CMD_RECORD:
		hip_submit_record(h, c);
		return 0;
	}
	return -EINVAL;
}

/* Where the loop builds its next command for `stream`: its thread's free slot (waiting,
 * as a full launch queue would make the enqueue call wait, while that thread is a whole
 * queue behind), or `local` when commands run inline. */
struct hip_cmd *hip__submit_begin(struct hip *h, uint32_t stream, struct hip_cmd *local)
{
	struct hip_submitter *sub = h->streams[stream].sub;
	size_t tail;

	if (!sub)
		return local;
	tail = atomic_load_explicit(&sub->tail, memory_order_relaxed);
	while (tail - atomic_load_explicit(&sub->head, memory_order_acquire) >= HIP_SUBMIT_QUEUE)
		sched_yield();
	return &sub->q[tail % HIP_SUBMIT_QUEUE];
}

/* Whether c may be a small copy's command (--submit-idle copies): a copy through the
 * small-copy pool, a wait on a copy stream (whose ops are copies) and the record of a
 * copy that ran here. */
static bool hip_copy_command(const struct hip *h, const struct hip_cmd *c)
{
	switch (c->kind) {
	case HIP_CMD_WAIT:
		return h->streams[c->stream].kind != SEQ_STREAM_COMPUTE;
	case HIP_CMD_LAUNCH:
		return (c->op == SEQ_OP_H2D || c->op == SEQ_OP_D2H) && c->copy.pooled;
	default:
		return h->streams[c->stream].launched_here;
	}
}

/* Whether c may run here by the run's length: at most HIP_SUBMIT_INLINE_RUN commands in a
 * row, each coming within HIP_SUBMIT_INLINE_GAP_NS of the end of the call made here for
 * the one before (hip__submit_end notes it: a call that itself takes long, a launch
 * waiting for the runtime's lock, does not break the run), so that a flood goes to the
 * thread (it counts the command as run here). */
static bool hip_submit_run_here(const struct hip *h, struct hip_submitter *sub)
{
	if (spin_now_ns() - sub->inline_last_ns >= h->submit_inline_gap_ns)
		sub->inline_run = 0;
	return ++sub->inline_run <= HIP_SUBMIT_INLINE_RUN;
}

/* Whether c, built in its thread's free slot, runs here instead (--submit-idle copies or
 * inline): when that thread sleeps with nothing queued, waking it costs the loop a futex
 * call and c a wake-up (tens of microseconds on a busy host), more than the enqueue call
 * itself, and a client waiting for one copy or kernel pays all of it. Measured on an H100,
 * one client's read-back round trip 53 -> 47 us and a 4 KiB H2D + await 27 -> 21 us, but
 * the loop, the thread that serves its share of the clients, then spends about 6 us of
 * enqueue calls a round trip, which holds up the other clients it serves (with one loop
 * for all: 16 clients 22% fewer round trips/s, and 16 launching clients a third of the
 * launches). Hence at most HIP_SUBMIT_INLINE_RUN commands in a row run here
 * (hip_submit_run_here), so that the thread takes a flood. With 16 loops on an H200
 * (BENCHMARKS.md, 2026-12-07 17:33-18:12) inline was ahead of waking the thread for pytest
 * at -n 8 and -n 16, 16 C clients, 16 on 4 cores and copy bursts, and 9-14% behind for 64
 * C clients (four to a loop); waking the threads for 2 ms after any loop turn that served
 * several clients did not win that back and lost elsewhere. With copies only a copy
 * through the small-copy pool runs here (an enqueue call of about a microsecond, never
 * waiting for a pin), with the stream waits before it and its record after it
 * (launched_here): the read-back and upload a latency-bound client waits for skip the
 * wake-up, a flood of launches keeps its thread. Everything queued before c on its streams
 * has run (the queue is empty), and the thread stays asleep while nothing is published, so
 * c keeps its order. Not here: a wait whose record has not run yet (on another thread),
 * and a copy outside the small-copy pool while an arena is not pinned yet (it may have to
 * wait for, or start, the pin); both would hold the loop. */
static bool hip_submit_here(struct hip *h, struct hip_submitter *sub, const struct hip_cmd *c)
{
	const enum hip_submit_idle mode = h->cfg.submit_idle;

	if (mode == HIP_SUBMIT_IDLE_WAKE)
		return false;
	/* With copies, a command that could not run here is told apart before the look at
	 * the thread's state, whose cache line the busy thread writes at every command it
	 * takes: a flood of launches would pay that line's transfer on each. */
	if (mode == HIP_SUBMIT_IDLE_COPIES && !hip_copy_command(h, c))
		return false;
	if (!atomic_load(&sub->sleeping))
		return false;
	if (atomic_load_explicit(&sub->head, memory_order_acquire) !=
		atomic_load_explicit(&sub->tail, memory_order_relaxed))
		return false;
	switch (c->kind) {
	case HIP_CMD_WAIT:
		if (atomic_load_explicit(&c->ev->recorded, memory_order_acquire) < c->serial)
			return false;
		break;
	case HIP_CMD_LAUNCH:
		if (mode == HIP_SUBMIT_IDLE_COPIES)
			break; /* a pooled copy (hip_copy_command) */
		if (!(c->op == SEQ_OP_EXEC || c->op == SEQ_OP_D2D || c->copy.pooled ||
			    (!atomic_load_explicit(&h->pins_pending, memory_order_acquire) &&
				    !atomic_load_explicit(&h->pins_lazy, memory_order_acquire))))
			return false;
		break;
	default:
		break; /* with copies, the record of a copy that ran here */
	}
	return hip_submit_run_here(h, sub);
}

/* One more of a count only the loop writes: no locked add (others only read it). */
static void hip_count(_Atomic uint64_t *n)
{
	atomic_store_explicit(
		n, atomic_load_explicit(n, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* The submit thread the latest command went to, of every loop's backend in the process
 * (each loop has its own: with a loop per client, a per-backend note would name every
 * loop's thread), the one that may spin long (hip_submitter_spin). */
static hip_latest hip_submit_last;

/* Run c (inline: its error comes back) or hand it to its stream's submit thread. Run
 * here for a sleeping thread, c fails as it would there: forward, on its stream. */
int hip__submit_end(struct hip *h, struct hip_cmd *c)
{
	struct hip_submitter *sub = h->streams[c->stream].sub;
	bool here;
	int r;

	if (!sub)
		return hip_submit_run(h, c);
	hip__latest_note(&hip_submit_last, sub);
	here = hip_submit_here(h, sub, c);
	if (c->kind == HIP_CMD_LAUNCH)
		h->streams[c->stream].launched_here = here;
	if (here) {
		hip_count(&h->calls_here);
		r = hip_submit_run(h, c);
		sub->inline_last_ns = spin_now_ns();
		if (r < 0)
			hip_submit_fail(&h->streams[c->stream], c, r);
		return 0;
	}
	/* Sequentially consistent, with the load of sleeping after it, against the submit
	 * thread's store of sleeping and load of tail: one of the two sees the other. */
	atomic_fetch_add(&sub->tail, 1);
	if (atomic_load(&sub->sleeping)) {
		hip_count(&h->thread_wakes);
		pthread_mutex_lock(&sub->mu);
		pthread_cond_signal(&sub->cond);
		pthread_mutex_unlock(&sub->mu);
	}
	return 0;
}

/* Whether this thread had the latest command of all submit threads, every loop's. */
static bool hip_submitter_last(const struct hip_submitter *sub)
{
	return hip__latest_is(&hip_submit_last, sub);
}

/* Whether a command came within the spin: requests come in bursts, and a futex wake-up
 * costs more than a launch, so an idle thread looks again for HIP_SUBMIT_SPIN_NS first,
 * and, where it had the latest command of all, on until submit_long_spin_ns (the long
 * spin, HIP_SUBMIT_LONG_SPIN_NS) or until a command goes to another thread, of any loop
 * (a lone client's next request comes to it; with many clients, others' commands end
 * the spin at once); but only while a core is free for it (spin.h): with none, the spin
 * would hold back the thread that has the work. */
static bool hip_submitter_spin(struct hip_submitter *sub, size_t head)
{
	struct hip *h = sub->h;
	const uint64_t t0 = spin_now_ns();
	uint64_t budget = h->submit_spin_ns;
	bool found = false, long_spin = false;

	for (unsigned i = 0;; i++) {
		if (head != atomic_load_explicit(&sub->tail, memory_order_acquire)) {
			found = true;
			break;
		}
		if (i % 64) {
			hip__cpu_relax();
			continue;
		}
		if (!spin_core_free() || (long_spin && !hip_submitter_last(sub)))
			break;
		if (spin_now_ns() - t0 < budget)
			continue;
		if (long_spin || budget >= h->submit_long_spin_ns || !hip_submitter_last(sub))
			break;
		long_spin = true;
		budget = h->submit_long_spin_ns;
		atomic_store_explicit(&sub->long_spinning, true, memory_order_relaxed);
	}
	if (long_spin)
		atomic_store_explicit(&sub->long_spinning, false, memory_order_relaxed);
	return found;
}

static void *hip_submitter(void *arg)
{
	struct hip_submitter *sub = arg;
	struct hip *h = sub->h;
	size_t head = atomic_load(&sub->head);

	char name[16];

	snprintf(name, sizeof(name), "sseq-submit/%u", sub->index);
	prctl(PR_SET_NAME, name);
	hipSetDevice(h->device);
	for (;;) {
		struct hip_cmd *c;
		int r;

		if (head == atomic_load_explicit(&sub->tail, memory_order_acquire)) {
			if (hip_submitter_spin(sub, head))
				continue;
			pthread_mutex_lock(&sub->mu);
			atomic_store(&sub->sleeping, true);
			atomic_fetch_add_explicit(&sub->sleeps, 1, memory_order_relaxed);
			while (head == atomic_load(&sub->tail) && !sub->stop)
				pthread_cond_wait(&sub->cond, &sub->mu);
			atomic_store(&sub->sleeping, false);
			pthread_mutex_unlock(&sub->mu);
			if (head == atomic_load_explicit(&sub->tail, memory_order_acquire))
				break; /* stopped, and drained */
			continue;
		}
		c = &sub->q[head % HIP_SUBMIT_QUEUE];
		r = hip_submit_run(h, c);
		if (r < 0)
			hip_submit_fail(&h->streams[c->stream], c, r);
		atomic_store_explicit(&sub->head, ++head, memory_order_release);
	}
	return NULL;
}

/* The queues and the threads, and each stream's owner: commands go to a thread only once
 * it runs. Called with the streams created, before the first command. */
int hip__submit_start(struct hip *h)
{
	unsigned n = h->cfg.submit_threads;

	if (n > h->nstreams)
		n = h->nstreams;
	for (unsigned i = 0; i < n; i++) {
		struct hip_submitter *sub = &h->sub[i];
		int r;

		sub->h = h;
		sub->index = i;
		sub->q = malloc(HIP_SUBMIT_QUEUE * sizeof(*sub->q));
		if (!sub->q)
			return -ENOMEM;
		r = -pthread_create(&sub->thread, NULL, hip_submitter, sub);
		if (r < 0)
			return r;
		sub->started = true;
		h->nsubmitters++;
	}
	for (unsigned i = 0; n && i < h->nstreams; i++)
		h->streams[i].sub = &h->sub[i % n];
	return 0;
}

/* Each thread runs what is queued before it stops; the streams go back to inline. */
void hip__submit_stop(struct hip *h)
{
	for (unsigned i = 0; i < h->nstreams; i++)
		h->streams[i].sub = NULL;
	for (unsigned i = 0; i < h->nsubmitters; i++) {
		struct hip_submitter *sub = &h->sub[i];

		pthread_mutex_lock(&sub->mu);
		sub->stop = true;
		pthread_cond_signal(&sub->cond);
		pthread_mutex_unlock(&sub->mu);
	}
	for (unsigned i = 0; i < HIP_MAX_SUBMIT_THREADS; i++) {
		struct hip_submitter *sub = &h->sub[i];

		if (sub->started)
			pthread_join(sub->thread, NULL);
		sub->started = false;
		free(sub->q);
		sub->q = NULL;
	}
	h->nsubmitters = 0;
}

/* What a HIP stream already holds runs (nothing takes an enqueued launch back); what
 * waits in a submit thread's queue is dropped as each thread reaches it. Inline streams
 * hold nothing back. */
void hip__cancel(void *ctx)
{
	struct hip *h = ctx;

	atomic_store(&h->cancelled, true);
}

/* At destroy: the locks hip_locks_init made. */
void hip__submit_finish(struct hip *h)
{
	for (unsigned i = 0; i < HIP_MAX_SUBMIT_THREADS; i++) {
		pthread_cond_destroy(&h->sub[i].cond);
		pthread_mutex_destroy(&h->sub[i].mu);
	}
	for (unsigned i = 0; i < HIP_EVENT_LOCKS; i++)
		pthread_mutex_destroy(&h->event_lock[i]);
}
