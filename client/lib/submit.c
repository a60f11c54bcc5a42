/* libsseq requests: buffers, modules, staging and host memory, copies, kernels, and
 * the calls that wait on the daemon's side (await, sync). Each call packs one Request
 * and hands it to client_submit(); the ones that return a handle wait for their Reply.
 * The arenas themselves are arenas.c's; registering them with the daemon is here. */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

#define STAGING_ROUND (1u << 20)

/* ---- buffers ---- */

int sseq_alloc(struct sseq *s, uint64_t size, const char *label, uint64_t *buf)
{
	Sseq__Alloc al = SSEQ__ALLOC__INIT;
	al.size = size;
	al.label = (char *)(label ? label : "");
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_ALLOC;
	req.alloc = &al;
	int r = client_request_wait(s, &req, buf);
	if (r == 0)
		*buf = client_handle_out(s, *buf);
	return r;
}

/* Whether the daemon takes handles the client names (protocol 1.9). */
static bool names_taken(const struct sseq *s)
{
	return s->info.major == SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR && s->info.minor >= 9;
}

/* Queue req (an Alloc or Slice whose handle field is *wire, a fresh name) without
 * waiting: its refusal reaches the next sseq_sync(). */
static int submit_named(struct sseq *s, Sseq__Request *req, uint64_t wire, uint64_t *out)
{
	struct op *op = client_op_new();
	if (!op) {
		client_name_put(s, wire);
		return client_fail(s, -ENOMEM, "out of memory");
	}
	int r = client_submit(s, req, -1, op, NULL);
	if (r < 0) {
		client_name_put(s, wire);
		return r;
	}
	*out = client_handle_out(s, wire);
	return 0;
}

int sseq_alloc_async(struct sseq *s, uint64_t size, const char *label, uint64_t *buf)
{
	if (s->broken)
		return client_broken(s);
	if (!names_taken(s))
		return sseq_alloc(s, size, label, buf);
	Sseq__Alloc al = SSEQ__ALLOC__INIT;
	al.size = size;
	al.label = (char *)(label ? label : "");
	int r = client_name_take(s, &al.handle);
	if (r < 0)
		return r;
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_ALLOC;
	req.alloc = &al;
	return submit_named(s, &req, al.handle, buf);
}

/* A Free of buf, waited for or not. */
static int free_submit(struct sseq *s, uint64_t buf, const char *fn, bool wait)
{
	Sseq__Free fr = SSEQ__FREE__INIT;
	int r = client_handle_in(s, buf, fn, &fr.buffer);
	if (r < 0)
		return r;
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_FREE;
	req.free = &fr;
	if (wait) {
		r = client_request_wait(s, &req, NULL);
	} else {
		struct op *op = client_op_new();
		r = op ? client_submit(s, &req, -1, op, NULL)
		       : client_fail(s, -ENOMEM, "out of memory");
	}
	/* The handle is gone either way (a refusal means it named nothing); the daemon
	 * handles requests in order, so an Alloc naming it again comes after this Free. */
	client_name_put(s, fr.buffer);
	return r;
}

int sseq_free(struct sseq *s, uint64_t buf)
{
	return free_submit(s, buf, "sseq_free", true);
}

int sseq_free_async(struct sseq *s, uint64_t buf)
{
	return free_submit(s, buf, "sseq_free_async", false);
}

/* A Slice of buf: waited for (*slice from the Reply), or named here and queued. */
static int slice_submit(struct sseq *s, uint64_t buf, uint64_t offset, uint64_t length,
	const char *label, uint64_t *slice, const char *fn, bool wait)
{
	Sseq__Slice sl = SSEQ__SLICE__INIT;
	int r = client_handle_in(s, buf, fn, &sl.buffer);
	if (r < 0)
		return r;
	sl.offset = offset;
	sl.length = length;
	sl.label = (char *)(label ? label : "");
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_SLICE;
	req.slice = &sl;
	if (!wait) {
		r = client_name_take(s, &sl.handle);
		return r < 0 ? r : submit_named(s, &req, sl.handle, slice);
	}
	r = client_request_wait(s, &req, slice);
	if (r == 0)
		*slice = client_handle_out(s, *slice);
	return r;
}

int sseq_slice(struct sseq *s, uint64_t buf, uint64_t offset, uint64_t length, const char *label,
	uint64_t *slice)
{
	return slice_submit(s, buf, offset, length, label, slice, "sseq_slice", true);
}

int sseq_slice_async(struct sseq *s, uint64_t buf, uint64_t offset, uint64_t length,
	const char *label, uint64_t *slice)
{
	if (s->broken)
		return client_broken(s);
	return slice_submit(
		s, buf, offset, length, label, slice, "sseq_slice_async", !names_taken(s));
}

int sseq_load_module(struct sseq *s, const char *path, uint64_t *module)
{
	if (!path || !*path)
		return client_fail(s, -EINVAL, "sseq_load_module: the module path is empty");
	Sseq__LoadModule lm = SSEQ__LOAD_MODULE__INIT;
	lm.path = (char *)path;
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_LOAD_MODULE;
	req.load_module = &lm;
	int r = client_request_wait(s, &req, module);
	if (r == 0)
		*module = client_handle_out(s, *module);
	return r;
}

int sseq_module_global(struct sseq *s, uint64_t module, const char *name, int writable,
	uint64_t *buf, uint64_t *size)
{
	if (!name || !*name)
		return client_fail(s, -EINVAL, "sseq_module_global: the global's name is empty");
	Sseq__ModuleGlobal mg = SSEQ__MODULE_GLOBAL__INIT;
	int r = client_handle_in(s, module, "sseq_module_global", &mg.module);
	if (r < 0)
		return r;
	mg.name = (char *)name;
	mg.writable = writable;
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_MODULE_GLOBAL;
	req.module_global = &mg;
	r = client_request_wait_sized(s, &req, buf, size);
	if (r == 0)
		*buf = client_handle_out(s, *buf);
	return r;
}

/* ---- staging ---- */

/* Register a new arena able to hold `len` bytes. The first one gets the configured
 * size; later ones at least that, so one large request does not leave us with a
 * string of tiny arenas. */
static int staging_add_arena_pinned(struct sseq *s, uint64_t len, bool wait_pinned)
{
	uint64_t size = s->staging.size;
	if (len > size)
		size = (len + STAGING_ROUND - 1) / STAGING_ROUND * STAGING_ROUND;
	struct staging_arena *a;
	int r = staging_arena_create(size, "sseq-staging", &a);
	if (r < 0) {
		client_set_error(s, "cannot create a %llu-byte staging memfd: %s",
			(unsigned long long)size, sseq_strerror(r));
		return r;
	}
	Sseq__StagingRegister reg = SSEQ__STAGING_REGISTER__INIT;
	reg.size = size;
	reg.label = "sseq-staging";
	reg.wait_pinned = wait_pinned;
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_STAGING_REGISTER;
	req.staging_register = &reg;
	struct op *op = client_op_new();
	if (!op) {
		staging_arena_destroy(a);
		return client_fail(s, -ENOMEM, "out of memory");
	}
	op->waited = true;
	r = client_submit(s, &req, a->fd, op, NULL);
	if (r == 0)
		r = client_op_collect_handle(s, op, &a->handle);
	if (r < 0) {
		staging_arena_destroy(a);
		return r;
	}
	staging_set_add(&s->staging, a);
	return 0;
}

static int staging_add_arena(struct sseq *s, uint64_t len)
{
	return staging_add_arena_pinned(s, len, false);
}

int sseq_prepare_staging(struct sseq *s)
{
	if (s->broken)
		return client_broken(s);
	if (s->staging.arenas)
		return 0;
	return staging_add_arena_pinned(s, s->staging.size, true);
}

/* Reserve `len` bytes of staging, held by the application (user) or by one request
 * (refs = 1). When the arenas are full, wait for copies in flight to release space
 * before growing: that bounds memory under a steady stream of copies. */
static int staging_get(
	struct sseq *s, uint64_t len, bool user, struct staging_arena **out, uint64_t *off)
{
	for (;;) {
		bool could_fit;
		int r = staging_set_reserve(&s->staging, len, user, out, off, &could_fit);
		if (r != -ENOSPC)
			return r < 0 ? client_fail(s, r, "staging: %s", sseq_strerror(r)) : r;
		if (could_fit && s->staging.refs > 0) {
			r = client_flush(s);
			if (r == 0)
				r = client_pump(s, -1);
			if (r < 0 && r != -ETIMEDOUT)
				return s->broken
					? r
					: client_fail(s, r, "waiting for staging space: %s",
						  sseq_strerror(r));
		} else {
			r = staging_add_arena(s, len);
			if (r < 0)
				return r;
		}
	}
}

/* Unregister and unmap the empty extra arenas (at sync, a quiet point, so ranges are
 * not thrashed); the first one stays. */
static void staging_trim(struct sseq *s)
{
	if (!s->staging.arenas)
		return;
	struct staging_arena **p = &s->staging.arenas->next;
	while (*p) {
		struct staging_arena *a = *p;
		if (a->nranges > 0) {
			p = &a->next;
			continue;
		}
		Sseq__StagingUnregister un = SSEQ__STAGING_UNREGISTER__INIT;
		un.staging = a->handle;
		Sseq__Request req = SSEQ__REQUEST__INIT;
		req.body_case = SSEQ__REQUEST__BODY_STAGING_UNREGISTER;
		req.staging_unregister = &un;
		struct op *op = client_op_new();
		if (!op || client_submit(s, &req, -1, op, NULL) < 0)
			return; /* keep the arena; try again at the next sync */
		/* The daemon has its own mapping and drops it once no copy uses it. */
		*p = a->next;
		staging_arena_destroy(a);
	}
}

int sseq_host_alloc(struct sseq *s, uint64_t size, void **ptr)
{
	*ptr = NULL;
	if (size == 0)
		return client_fail(s, -EINVAL, "sseq_host_alloc: size 0");
	if (s->broken)
		return client_broken(s);
	struct staging_arena *a;
	uint64_t off;
	int r = staging_get(s, size, true, &a, &off);
	if (r < 0)
		return r;
	*ptr = a->base + off;
	return 0;
}

int sseq_host_free(struct sseq *s, void *ptr)
{
	if (!ptr)
		return 0;
	struct staging_arena *a = staging_set_find(&s->staging, ptr);
	struct staging_range *rg = NULL;
	uint64_t off = 0;
	if (a) {
		off = (uint64_t)((uint8_t *)ptr - a->base);
		rg = staging_arena_find(a, off, 0);
	}
	if (!rg || rg->offset != off || !rg->user)
		return client_fail(s, -EINVAL,
			"sseq_host_free: %p is not the start of a live sseq_host_alloc allocation",
			ptr);
	staging_range_unhold(a, rg);
	return 0;
}

/* Point op at the staging for host memory [p, p + len): in place if it lies in memory
 * from sseq_host_alloc, else in a fresh range (filled from p for H2D; for D2H copied to
 * p on completion). *copy_off is where the daemon reads or writes. */
static int staging_attach(
	struct sseq *s, struct op *op, void *p, uint64_t len, bool to_device, uint64_t *copy_off)
{
	struct staging_arena *a = staging_set_find(&s->staging, p);
	if (a) {
		uint64_t off = (uint64_t)((uint8_t *)p - a->base);
		struct staging_range *rg = staging_arena_find(a, off, len);
		if (!rg || !rg->user) {
			client_set_error(s,
				"host range is inside a staging arena but not inside "
				"one live sseq_host_alloc allocation");
			return -EINVAL;
		}
		rg->refs++;
		s->staging.refs++;
		op->arena = a;
		op->staging_off = rg->offset;
		*copy_off = off;
		return 0;
	}
	uint64_t off;
	int r = staging_get(s, len, false, &a, &off);
	if (r < 0)
		return r;
	op->arena = a;
	op->staging_off = off;
	if (to_device) {
		memcpy(a->base + off, p, len);
	} else {
		op->copy_out = p;
		op->copy_len = len;
	}
	*copy_off = off;
	return 0;
}

/* ---- copies and kernels ---- */

/* The op of a copy between host memory [p, p + len) and the device, with its staging
 * attached (*out NULL on failure); *copy_off as for staging_attach. */
static int copy_op_new(
	struct sseq *s, void *p, uint64_t len, bool to_device, struct op **out, uint64_t *copy_off)
{
	*out = NULL;
	if (!p || len == 0)
		return client_fail(s, -EINVAL, "%s: %s",
			to_device ? "sseq_copy_h2d" : "sseq_copy_d2h",
			!p ? "the host pointer is NULL" : "length 0");
	if (s->broken)
		return client_broken(s);
	struct op *op = client_op_new();
	if (!op)
		return client_fail(s, -ENOMEM, "out of memory");
	int r = staging_attach(s, op, p, len, to_device, copy_off);
	if (r < 0) {
		free(op);
		return r;
	}
	*out = op;
	return 0;
}

int sseq_copy_h2d(struct sseq *s, uint64_t dst, uint64_t dst_off, const void *src, uint64_t len,
	uint64_t *tag)
{
	struct op *op;
	uint64_t off;
	Sseq__CopyH2D c = SSEQ__COPY_H2_D__INIT;
	int r = client_handle_in(s, dst, "sseq_copy_h2d", &c.dst);
	if (r < 0 || (r = copy_op_new(s, (void *)src, len, true, &op, &off)) < 0)
		return r;
	assert(op); /* copy_op_new's 0 comes with the op */
	c.staging = op->arena->handle;
	c.staging_offset = off;
	c.dst_offset = dst_off;
	c.length = len;
	c.lane = s->lane;
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_COPY_H2D;
	req.copy_h2d = &c;
	/* The staging range may be reused only once the copy is complete. */
	req.want_completion = true;
	op->user_tag = tag != NULL;
	return client_submit(s, &req, -1, op, tag);
}

/* A done word in arena a for a daemon of protocol 1.`minor` or later: reserved (released
 * with the op's staging) and marked unwatched until a wait arms it; its offset + 1, the
 * request's done_word, or 0 without one (an older daemon, $SSEQ_DONE_WORDS=0, no room:
 * the Completion answers as always). */
static uint64_t done_word_reserve(
	struct sseq *s, struct staging_arena *a, uint32_t minor, uint64_t initial)
{
	uint64_t off;

	if (s->no_words || s->info.major != SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR ||
		s->info.minor < minor ||
		staging_set_reserve_in(&s->staging, a, sizeof(uint64_t), false, &off) < 0)
		return 0;
	atomic_store_explicit(
		(_Atomic uint64_t *)(void *)(a->base + off), initial, memory_order_relaxed);
	return off + 1;
}

/* A D2H's done word (protocol 1.10): a range of the op's arena where the daemon writes the
 * tag once the bytes are in place, if a wait has armed it by then, so that the wait needs
 * no Completion (ops.c). */
static uint64_t copy_done_word(struct sseq *s, struct op *op)
{
	op->word_off = done_word_reserve(s, op->arena, 10, CLIENT_WORD_UNWATCHED);
	return op->word_off;
}

int sseq_copy_d2h(
	struct sseq *s, uint64_t src, uint64_t src_off, void *dst, uint64_t len, uint64_t *tag)
{
	struct op *op;
	uint64_t off;
	Sseq__CopyD2H c = SSEQ__COPY_D2_H__INIT;
	int r = client_handle_in(s, src, "sseq_copy_d2h", &c.src);
	if (r < 0 || (r = copy_op_new(s, dst, len, false, &op, &off)) < 0)
		return r;
	assert(op); /* copy_op_new's 0 comes with the op */
	c.src_offset = src_off;
	c.staging = op->arena->handle;
	c.staging_offset = off;
	c.length = len;
	c.lane = s->lane;
	c.done_word = copy_done_word(s, op);
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_COPY_D2H;
	req.copy_d2h = &c;
	req.want_completion = true;
	op->user_tag = tag != NULL;
	return client_submit(s, &req, -1, op, tag);
}

/* Queue a request that returns at once; with a tag the caller can wait for it. */
static int submit_async(struct sseq *s, Sseq__Request *req, uint64_t *tag)
{
	struct op *op = client_op_new();
	if (!op)
		return client_fail(s, -ENOMEM, "out of memory");
	req->want_completion = tag != NULL;
	op->user_tag = tag != NULL;
	return client_submit(s, req, -1, op, tag);
}

int sseq_copy_d2d(struct sseq *s, uint64_t src, uint64_t src_off, uint64_t dst, uint64_t dst_off,
	uint64_t len, uint64_t *tag)
{
	if (len == 0)
		return client_fail(s, -EINVAL, "sseq_copy_d2d: length 0");
	Sseq__CopyD2D c = SSEQ__COPY_D2_D__INIT;
	int r = client_handle_in(s, src, "sseq_copy_d2d", &c.src);
	if (r < 0 || (r = client_handle_in(s, dst, "sseq_copy_d2d", &c.dst)) < 0)
		return r;
	c.src_offset = src_off;
	c.dst_offset = dst_off;
	c.length = len;
	c.lane = s->lane;
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_COPY_D2D;
	req.copy_d2d = &c;
	return submit_async(s, &req, tag);
}

static int execute(struct sseq *s, const char *kernel, uint64_t module, const char *name,
	const struct sseq_arg *args, size_t nargs, const struct sseq_launch *shape,
	const struct sseq_launch_attrs *attrs, uint64_t *tag)
{
	struct args_pack p;
	int r = args_pack(&p, args, nargs, shape);
	/* The daemon's numbers go on the wire; packing kept the application's. */
	for (size_t i = 0; r == 0 && i < p.ex.n_args; i++)
		if (p.ex.args[i]->value_case == SSEQ__ARG__VALUE_BUFFER) {
			Sseq__BufferArg *b = p.ex.args[i]->buffer;
			if ((r = client_handle_in(s, b->handle,
				     kernel ? "sseq_execute" : "sseq_execute_function",
				     &b->handle)) < 0) {
				args_pack_finish(&p);
				return r;
			}
		}
	if (r == 0 && !kernel &&
		(r = client_handle_in(s, module, "sseq_execute_function", &module)) < 0) {
		args_pack_finish(&p);
		return r;
	}
	/* Fields past .size are the caller's older struct's end: not read. */
	size_t asize = attrs ? (attrs->size ? attrs->size : sizeof(*attrs)) : 0;
	if (r == 0 && attrs &&
		asize >= offsetof(struct sseq_launch_attrs, cooperative) +
				sizeof(attrs->cooperative))
		p.ex.cooperative = attrs->cooperative != 0;
	if (r == 0 && attrs &&
		asize >= offsetof(struct sseq_launch_attrs, cluster) + sizeof(attrs->cluster) &&
		(attrs->cluster[0] || attrs->cluster[1] || attrs->cluster[2])) {
		sseq__launch_cluster__init(&p.cluster);
		p.cluster.x = attrs->cluster[0];
		p.cluster.y = attrs->cluster[1];
		p.cluster.z = attrs->cluster[2];
		p.ex.cluster = &p.cluster;
	}
	if (r == 0) {
		if (kernel) {
			p.ex.target_case = SSEQ__EXECUTE__TARGET_KERNEL;
			p.ex.kernel = (char *)kernel;
		} else {
			sseq__module_function__init(&p.fn);
			p.fn.module = module;
			p.fn.name = (char *)name;
			p.ex.target_case = SSEQ__EXECUTE__TARGET_FUNCTION;
			p.ex.function = &p.fn;
		}
		p.ex.lane = s->lane;
		Sseq__Request req = SSEQ__REQUEST__INIT;
		req.body_case = SSEQ__REQUEST__BODY_EXECUTE;
		req.execute = &p.ex;
		r = submit_async(s, &req, tag);
	} else if (r == -EINVAL) {
		client_set_error(s, "malformed kernel argument (type, access or zero handle)");
	} else {
		client_set_error(s, "out of memory packing kernel arguments");
	}
	args_pack_finish(&p);
	return r;
}

int sseq_execute(struct sseq *s, const char *kernel, const struct sseq_arg *args, size_t nargs,
	const struct sseq_launch *shape, uint64_t *tag)
{
	if (!kernel || !*kernel)
		return client_fail(s, -EINVAL, "sseq_execute: the kernel name is empty");
	return execute(s, kernel, 0, NULL, args, nargs, shape, NULL, tag);
}

int sseq_execute_function(struct sseq *s, uint64_t module, const char *name,
	const struct sseq_arg *args, size_t nargs, const struct sseq_launch *shape, uint64_t *tag)
{
	if (!name || !*name || module == 0)
		return client_fail(s, -EINVAL, "sseq_execute_function: %s",
			module == 0 ? "module 0 (no module)" : "the function name is empty");
	return execute(s, NULL, module, name, args, nargs, shape, NULL, tag);
}

int sseq_execute_function_attrs(struct sseq *s, uint64_t module, const char *name,
	const struct sseq_arg *args, size_t nargs, const struct sseq_launch *shape,
	const struct sseq_launch_attrs *attrs, uint64_t *tag)
{
	if (!name || !*name || module == 0)
		return client_fail(s, -EINVAL, "sseq_execute_function_attrs: %s",
			module == 0 ? "module 0 (no module)" : "the function name is empty");
	return execute(s, NULL, module, name, args, nargs, shape, attrs, tag);
}

/* ---- waiting on the daemon's side ---- */

/* An Await's done word (protocol 1.13): a word of the session's first arena, the op's
 * only staging range, where the daemon answers as it does a D2H's (copy_done_word). */
static uint64_t await_done_word(struct sseq *s, struct op *op, uint64_t *staging)
{
	struct staging_arena *a = s->staging.arenas;
	/* Armed from the start: its wait comes at once, and a daemon that reads the Await
	 * before that wait would arm it (its point already complete: the loop writes the
	 * word as it reads it) would otherwise find it unwatched and send a Completion. */
	const uint64_t word = a ? done_word_reserve(s, a, 13, 0) : 0;

	if (word) {
		op->arena = a;
		op->staging_off = word - 1;
		op->word_off = word;
		*staging = a->handle;
	}
	return word;
}

int sseq_await(struct sseq *s, uint64_t buf)
{
	Sseq__Await aw = SSEQ__AWAIT__INIT;
	int r = client_handle_in(s, buf, "sseq_await", &aw.buffer);
	if (r < 0)
		return r;
	struct op *op = client_op_new();
	if (!op)
		return client_fail(s, -ENOMEM, "out of memory");
	op->waited = true;
	aw.done_word = await_done_word(s, op, &aw.staging);
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_AWAIT;
	req.await = &aw;
	if ((r = client_submit(s, &req, -1, op, NULL)) < 0)
		return r;
	return client_op_collect(s, op);
}

int sseq_sync(struct sseq *s)
{
	Sseq__Sync sy = SSEQ__SYNC__INIT;
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_SYNC;
	req.sync = &sy;
	int r = client_request_wait(s, &req, NULL);
	/* The daemon saw everything complete, but completions may come in any order:
	 * let every earlier request's message arrive before answering. */
	while (!s->broken && s->nactive > 0) {
		int p = client_pump(s, -1);
		if (p < 0 && p != -ETIMEDOUT)
			break;
	}
	if (s->broken)
		return client_broken(s);
	staging_trim(s);
	/* The Sync itself failing is one more error; report it after older ones. */
	if (r < 0)
		client_error_push(s, 0, r, s->errmsg, false, false);
	return client_error_next(s, NULL);
}
