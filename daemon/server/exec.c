/* Execute: typed arguments checked against a built-in kernel's signature, or passed in
 * order to a module function; buffer arguments become the accesses that drive the waits. */
#include "exec.h"

#include "buffer.h"
#include "handles.h"
#include "module.h"
#include "ops.h"
#include "outcome.h"
#include "session-limits.h"
#include "session.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

/* Add sb's view to op with `access` (in, out, inout are read, write, read-write) and
 * make ka the buffer argument naming it. */
static void op_add_buffer(
	struct seq_op *op, struct karg *ka, const struct sbuf *sb, unsigned access)
{
	ka->access = access;
	ka->v.buf.ptr = (void *)(uintptr_t)sb->buf->addr;
	ka->v.buf.size = sb->buf->size;
	ka->v.buf.index = op->naccess;
	op->access[op->naccess++] = (struct seq_access){sb->buf, access};
}

/* The wire's argument cases, each with its type and where protobuf-c keeps the value. */
static const struct {
	signed char type; /* enum karg_type, -1 for none */
	unsigned char offset;
} wire_args[] = {
	[SSEQ__ARG__VALUE__NOT_SET] = {-1, 0},
#define WIRE_ARG(T, name, ctype, size, wide, min, max)                                             \
	[SSEQ__ARG__VALUE_##T] = {KARG_##T, offsetof(Sseq__Arg, name)},
	KARG_TYPES(WIRE_ARG) /* kernels/karg.h */
#undef WIRE_ARG
};

static enum karg_type arg_type(const Sseq__Arg *a)
{
	if ((unsigned)a->value_case >= sizeof(wire_args) / sizeof(wire_args[0]))
		return (enum karg_type) - 1;
	return (enum karg_type)wire_args[a->value_case].type;
}

/* A scalar argument's value, by the type arg_type() found. */
static void arg_scalar(struct karg *ka, const Sseq__Arg *a)
{
	if (ka->type != KARG_BUFFER)
		karg_copy_scalar(
			&ka->v, (const char *)a + wire_args[a->value_case].offset, ka->type);
}

/* g's shape within f's limits (the device's, and the function's threads per block): 0,
 * or the refusal naming the dimension and the limit. */
static int exec_shape_check(
	struct session *s, const struct smodule_fn *f, const Sseq__Grid *g, const char *name)
{
	static const char axis[3] = {'x', 'y', 'z'};
	const uint32_t grid[3] = {g->grid_x, g->grid_y ? g->grid_y : 1, g->grid_z ? g->grid_z : 1};
	const uint32_t block[3] = {
		g->block_x, g->block_y ? g->block_y : 1, g->block_z ? g->block_z : 1};
	const uint64_t threads = (uint64_t)block[0] * block[1] * block[2];

	for (int i = 0; i < 3; i++) {
		if (f->max_grid[i] && grid[i] > f->max_grid[i])
			return outcome_error(s, -EINVAL,
				"grid_%c %u is over the device's limit of %u (grid limits x, y, "
				"z: %u, %u, %u)",
				axis[i], grid[i], f->max_grid[i], f->max_grid[0], f->max_grid[1],
				f->max_grid[2]);
		if (f->max_block[i] && block[i] > f->max_block[i])
			return outcome_error(s, -EINVAL,
				"block_%c %u is over the device's limit of %u (block limits x, y, "
				"z: %u, %u, %u)",
				axis[i], block[i], f->max_block[i], f->max_block[0],
				f->max_block[1], f->max_block[2]);
	}
	if (f->max_threads && threads > f->max_threads)
		return outcome_error(s, -EINVAL,
			"a block of %" PRIu64 " threads (block_x * block_y * block_z) is over "
			"the limit of %u for '%.64s' on this device",
			threads, f->max_threads, name);
	return 0;
}

/* Let f's launches use `bytes` of dynamic shared memory: beyond its current maximum
 * (48 KiB by default on NVIDIA) the maximum is raised, once; beyond what a block may
 * have, less the function's static shared memory, refused. */
static int exec_shared_mem(
	struct session *s, struct smodule_fn *f, uint64_t bytes, const char *name)
{
	const struct backend *b = &session_server(s)->backend;
	struct backend_fn_attrs a = {0};
	uint64_t limit;
	int r;

	if (bytes <= f->max_shared)
		return 0;
	/* Another name of the same function may have raised it meanwhile. */
	if (backend_function_attrs(b, f->function, &a) == 0) {
		f->static_shared = a.shared_size_bytes;
		if (a.max_dynamic_shared_size_bytes > f->max_shared)
			f->max_shared = a.max_dynamic_shared_size_bytes;
		if (bytes <= f->max_shared)
			return 0;
	}
	limit = f->shared_optin > f->static_shared ? f->shared_optin - f->static_shared : 0;
	if (f->shared_optin && bytes > limit)
		return outcome_error(s, -EINVAL,
			"shared_mem %" PRIu64 " bytes is over what '%.64s' may have on this "
			"device: %" PRIu64 " (%" PRIu64 " per block, less its %" PRIu64 " static)",
			bytes, name, limit, f->shared_optin, f->static_shared);
	r = backend_function_max_shared(b, f->function, bytes);
	if (r == -ENOMEM)
		return outcome_error(s, r, "out of memory");
	if (r < 0)
		return outcome_error(s, -EINVAL,
			"shared_mem %" PRIu64 " bytes: the device would not raise the maximum "
			"of '%.64s' (%s)",
			bytes, name, strerror(-r));
	f->max_shared = bytes;
	return 0;
}

/* Whether e asks for a thread-block cluster, and its shape (y and z: 0 is 1). */
static bool exec_cluster(const Sseq__Execute *e, uint32_t c[3])
{
	const Sseq__LaunchCluster *lc = e->cluster;

	if (!lc || (!lc->x && !lc->y && !lc->z))
		return false;
	c[0] = lc->x;
	c[1] = lc->y ? lc->y : 1;
	c[2] = lc->z ? lc->z : 1;
	return true;
}

/* e's launch attributes (cooperative, cluster) against what the device can do and the
 * grid g: 0, or the refusal naming the reason (-ENOTSUP: the device or platform cannot;
 * -EINVAL: a shape that does not fit). */
static int exec_launch_attrs(struct session *s, const struct smodule_fn *f, const Sseq__Execute *e,
	const Sseq__Grid *g, const char *name)
{
	static const char axis[3] = {'x', 'y', 'z'};
	const struct backend *b = &session_server(s)->backend;
	const uint32_t grid[3] = {g->grid_x, g->grid_y ? g->grid_y : 1, g->grid_z ? g->grid_z : 1};
	const uint64_t threads = (uint64_t)(g->block_x) * (g->block_y ? g->block_y : 1) *
		(g->block_z ? g->block_z : 1);
	struct backend_info info = {0};
	uint32_t c[3], per_sm = 0;
	bool cluster = exec_cluster(e, c);
	uint64_t blocks, fit;
	int r;

	if (!e->cooperative && !cluster)
		return 0;
	backend_info(b, &info);
	if (e->cooperative && cluster)
		return outcome_error(s, -ENOTSUP,
			"a cooperative launch of thread-block clusters is not supported: ask "
			"for one or the other");
	if (cluster) {
		if (!info.clusters)
			return outcome_error(s, -ENOTSUP,
				"thread-block clusters need an NVIDIA GPU of compute capability "
				"9.0 or later; this device is %s",
				info.arch[0] ? info.arch : "not one");
		if (!c[0])
			return outcome_error(s, -EINVAL, "cluster x must be at least 1");
		for (int i = 0; i < 3; i++)
			if (grid[i] % c[i])
				return outcome_error(s, -EINVAL,
					"grid_%c %u is not a multiple of the cluster's %c %u",
					axis[i], grid[i], axis[i], c[i]);
		if ((uint64_t)c[0] * c[1] * c[2] > SESSION_MAX_CLUSTER)
			return outcome_error(s, -EINVAL,
				"a cluster of %" PRIu64 " blocks (%u x %u x %u) is over the "
				"portable limit of %u",
				(uint64_t)c[0] * c[1] * c[2], c[0], c[1], c[2],
				SESSION_MAX_CLUSTER);
		return 0;
	}
	if (!info.cooperative)
		return outcome_error(s, -ENOTSUP, "cooperative launches are not supported %s",
			info.cc ? "by this device" : "for module functions on this platform");
	r = backend_function_occupancy(b, f->function, (uint32_t)threads, g->shared_mem, &per_sm);
	if (r < 0)
		return outcome_error(s, -ENOTSUP,
			"cooperative launch of '%.64s': the device cannot say how many of its "
			"blocks fit at once (%s)",
			name, strerror(-r));
	blocks = (uint64_t)grid[0] * grid[1] * grid[2];
	fit = (uint64_t)per_sm * info.multiprocessors;
	if (blocks > fit)
		return outcome_error(s, -EINVAL,
			"a cooperative grid of %" PRIu64 " blocks is over the %" PRIu64 " of "
			"'%.64s' this device holds at once (%u per multiprocessor at %" PRIu64
			" threads and %u bytes of dynamic shared memory, x %u multiprocessors)",
			blocks, fit, name, per_sm, threads, g->shared_mem, info.multiprocessors);
	return 0;
}

/* A module function's bytes argument i into ka: 1 to KERNEL_PARAM_SPACE bytes, aligned
 * to a power of two up to KARG_BYTES_MAX_ALIGN that divides the size (as C's sizeof is a
 * multiple of its alignof). The bytes stay the request's. */
static int arg_bytes(struct session *s, unsigned i, struct karg *ka, const Sseq__BytesArg *b)
{
	const size_t len = b ? b->data.len : 0;
	const uint32_t align = b && b->align ? b->align : 1;

	if (len == 0 || len > KERNEL_PARAM_SPACE)
		return outcome_error(s, -EINVAL,
			"argument %u (bytes, %zu bytes): must be 1 to %u bytes", i, len,
			KERNEL_PARAM_SPACE);
	if (align > KARG_BYTES_MAX_ALIGN || (align & (align - 1)) || len % align)
		return outcome_error(s, -EINVAL,
			"argument %u (bytes, %zu bytes): alignment %" PRIu32 " must be a power of "
			"two up to %u that divides the size",
			i, len, align, KARG_BYTES_MAX_ALIGN);
	ka->v.bytes.data = b->data.data;
	ka->v.bytes.size = (uint32_t)len;
	ka->v.bytes.align = align;
	return 0;
}

/* A module function's scalar or bytes argument i into ka; a narrow scalar, widened on the
 * wire, must be within its type's range (f16 and bf16: 16 bits). */
static int arg_value(struct session *s, unsigned i, struct karg *ka, const Sseq__Arg *a)
{
	static const struct {
		int32_t min;
		uint32_t max;
	} range[KARG_NTYPES] = {
#define ARG_RANGE(T, name, ctype, size, wide, min, max) [KARG_##T] = {min, max},
		KARG_TYPES(ARG_RANGE) /* kernels/karg.h */
#undef ARG_RANGE
	};
	const char *field = (const char *)a + wire_args[a->value_case].offset;
	int64_t v;

	/* A narrow type (a range in karg.h) travels in its wide carrier (the table's `wide`
	 * member), read here and checked; the others go as they are. */
#define ARG_CARRIER_i32 int32_t
#define ARG_CARRIER_u32 uint32_t
#define ARG_CARRIER_i64 int64_t
#define ARG_CARRIER_u64 uint64_t
#define ARG_CARRIER_f32 float
#define ARG_CARRIER_f64 double
	switch (ka->type) {
	case KARG_BYTES:
		return arg_bytes(s, i, ka, a->bytes);
#define ARG_READ(T, name, ctype, size, wide, min, max)                                             \
	case KARG_##T:                                                                             \
		if ((min) == (max)) {                                                              \
			arg_scalar(ka, a);                                                         \
			return 0;                                                                  \
		} else {                                                                           \
			ARG_CARRIER_##wide x;                                                      \
			memcpy(&x, field, sizeof(x));                                              \
			v = x;                                                                     \
		}                                                                                  \
		break;
		KARG_SCALAR_TYPES(ARG_READ) /* kernels/karg.h */
#undef ARG_READ
	default:
		arg_scalar(ka, a);
		return 0;
	}
	if (v < range[ka->type].min || v > (int64_t)range[ka->type].max)
		return outcome_error(s, -EINVAL,
			"argument %u (%s) = %" PRId64 " is out of its range [%" PRId32 ", %" PRIu32
			"]",
			i, karg_type_name(ka->type), v, range[ka->type].min, range[ka->type].max);
	switch (ka->type) {
#define ARG_STORE(T, name, ctype, size, wide, min, max)                                            \
	case KARG_##T:                                                                             \
		ka->v.name = (ctype)v;                                                             \
		break;
		KARG_SCALAR_TYPES(ARG_STORE)
#undef ARG_STORE
	default:
		break;
	}
	return 0;
}

/* The module function e names, and its launch shape checked: 0 with *m and *fn, or a
 * refusal. */
static int exec_function_target(
	struct session *s, const Sseq__Execute *e, struct smodule **m, struct smodule_fn **fn)
{
	const Sseq__ModuleFunction *mf = e->function;
	const Sseq__Grid *g = e->grid;
	struct smodule_fn *f = NULL;
	char why[220];
	int r;

	if (!backend_has_modules(&session_server(s)->backend)) {
		char text[128];

		return outcome_error(s, REQ_UNKNOWN_KERNEL, "%s",
			outcome_needs_modules(session_server(s),
				"module functions need LoadModule and", text, sizeof(text)));
	}
	if (!mf)
		return outcome_error(s, -EINVAL, "Execute without a module function");
	*m = handles_lookup(session_handles(s), mf->module, HANDLE_MODULE);
	if (!*m)
		return outcome_unknown_handle(s, mf->module, "module");
	if (!mf->name || !*mf->name || strlen(mf->name) > SESSION_MAX_FN_NAME)
		return outcome_error(s, -EINVAL, "a module function needs a name of 1 to %u bytes",
			SESSION_MAX_FN_NAME);
	if (e->launch_shape_case != SSEQ__EXECUTE__LAUNCH_SHAPE_GRID || !g)
		return outcome_error(s, -EINVAL,
			"module function '%.64s' needs an explicit grid: the daemon cannot "
			"derive one for code it does not know",
			mf->name);
	if (!g->grid_x || !g->block_x)
		return outcome_error(s, -EINVAL, "grid_x and block_x must be at least 1");
	if (e->n_args > KERNEL_MAX_ARGS)
		return outcome_error(
			s, -EINVAL, "%zu arguments: at most %u", e->n_args, KERNEL_MAX_ARGS);
	r = smodule_function(session_server(s), *m, mf->name, &f, why, sizeof(why));
	if (r == -ENOMEM)
		return outcome_error(s, r, "out of memory");
	if (r == -ENXIO)
		return outcome_lost(
			session_server(s), r, "the module (it did not load again after)");
	if (r < 0)
		return outcome_error(s, REQ_UNKNOWN_KERNEL, "module %s %s", (*m)->path, why);
	if ((r = exec_shape_check(s, f, g, mf->name)) ||
		(g->shared_mem && (r = exec_shared_mem(s, f, g->shared_mem, mf->name))) ||
		(r = exec_launch_attrs(s, f, e, g, mf->name)))
		return r;
	*fn = f;
	return 0;
}

/* A module function's arguments into op and pl, in order; each buffer marked. */
static int exec_function_args(
	struct session *s, const Sseq__Execute *e, struct seq_op *op, struct op_payload *pl)
{
	for (unsigned i = 0; i < e->n_args; i++) {
		const Sseq__Arg *a = e->args[i];
		struct karg *ka = &pl->args[i];
		enum karg_type t = arg_type(a);
		struct sbuf *sb;
		unsigned access;

		if ((int)t < 0)
			return outcome_error(
				s, REQ_BAD_ARGUMENT_TYPE, "argument %u has no value", i);
		*ka = (struct karg){.type = t};
		if (t != KARG_BUFFER) {
			int r = arg_value(s, i, ka, a);

			if (r)
				return r;
			continue;
		}
		sb = handles_lookup(session_handles(s), a->buffer->handle, HANDLE_BUFFER);
		if (!sb) {
			char what[32];

			snprintf(what, sizeof(what), "argument %u: buffer", i);
			return outcome_unknown_handle(s, a->buffer->handle, what);
		}
		access = (unsigned)a->buffer->access;
		if (access < KARG_IN || access > KARG_INOUT)
			return outcome_error(s, REQ_BAD_ARGUMENT_TYPE,
				"argument %u: a buffer must be marked in, out or inout", i);
		if (op->naccess == SEQ_MAX_ACCESS)
			return outcome_error(
				s, -EINVAL, "at most %u buffer arguments", SEQ_MAX_ACCESS);
		/* "out" is the client's word that the kernel defines the whole view (use
		 * inout for a partial write). */
		op_add_buffer(op, ka, sb, access);
	}
	return 0;
}

/* The n arguments in pl against what the launch can hold. Where the backend told f's
 * parameters (NVIDIA), there must be as many and each of the parameter's size; the
 * device then holds what its kernel declares. Where it did not (AMD), the arguments
 * laid out at their alignments must fit in KERNEL_PARAM_SPACE. */
static int exec_function_params(struct session *s, const char *name, const struct smodule_fn *f,
	const struct op_payload *pl, unsigned n)
{
	const bool known = f->nparams >= 0;
	const unsigned nparams = known ? (unsigned)f->nparams : 0;
	size_t off = 0;

	for (unsigned i = 0; i < n; i++) {
		const struct karg *a = &pl->args[i];
		const unsigned size = karg_size(a), align = karg_align(a);

		if (known && i >= nparams)
			return outcome_error(s, REQ_BAD_ARGUMENT_TYPE,
				"argument %u (%s, %u bytes): %.64s takes only %u parameters", i,
				karg_type_name(a->type), size, name, nparams);
		if (known && f->param_size[i] != size)
			return outcome_error(s, REQ_BAD_ARGUMENT_TYPE,
				"argument %u (%s, %u bytes) does not match parameter %u of %.64s "
				"(%u bytes)",
				i, karg_type_name(a->type), size, i, name, f->param_size[i]);
		off = ((off + align - 1) & ~(size_t)(align - 1)) + size;
		if (!known && off > KERNEL_PARAM_SPACE)
			return outcome_error(s, -EINVAL,
				"argument %u (%s, %u bytes) ends at byte %zu of the parameter "
				"space: the arguments take at most %u",
				i, karg_type_name(a->type), size, off, KERNEL_PARAM_SPACE);
	}
	if (known && n < nparams) {
		if (nparams > KERNEL_MAX_ARGS)
			return outcome_error(s, REQ_BAD_ARGUMENT_TYPE,
				"%u arguments: %.64s takes more than %u, more than a launch may "
				"pass",
				n, name, KERNEL_MAX_ARGS);
		return outcome_error(s, REQ_BAD_ARGUMENT_TYPE,
			"%u arguments: %.64s takes %u (parameter %u, %u bytes, is missing)", n,
			name, nparams, n, f->param_size[n]);
	}
	return 0;
}

/* A user kernel: no signature beyond its parameters' sizes (where the device gives
 * them), so every argument goes by value in order (a buffer as its view's device
 * address) and the access marks alone drive the waits. The daemon cannot bound what
 * the kernel touches: a kernel that writes past its views or through a buffer marked
 * in breaks the ordering, as it would anywhere. */
static int req_execute_function(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Execute *e = rq->execute;
	const Sseq__Grid *g = e->grid;
	struct op_payload pl;
	struct seq_op op;
	struct smodule *m = NULL;
	struct smodule_fn *fn = NULL;
	int r;

	if ((r = exec_function_target(s, e, &m, &fn)))
		return r;
	assert(m && fn); /* exec_function_target's 0 comes with both */
	ops_init(&op, &pl, SEQ_OP_EXEC);
	if ((r = ops_lane(s, e->lane, &op)) || (r = exec_function_args(s, e, &op, &pl)) ||
		(r = exec_function_params(s, e->function->name, fn, &pl, (unsigned)e->n_args)) ||
		(r = smodule_global_accesses(s, m, &op)))
		return r;
	pl.function = fn->function;
	pl.function_name = e->function->name;
	pl.nargs = (unsigned)e->n_args;
	pl.grid = (struct kernel_grid){
		.grid = {g->grid_x, g->grid_y ? g->grid_y : 1, g->grid_z ? g->grid_z : 1},
		.block = {g->block_x, g->block_y ? g->block_y : 1, g->block_z ? g->block_z : 1},
		.shared_mem = g->shared_mem,
	};
	pl.cooperative = e->cooperative;
	exec_cluster(e, pl.cluster);
	return ops_submit(s, rq, &op, NULL, m, rq->want_completion);
}

int exec_req_execute(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Execute *e = rq->execute;
	struct op_payload pl;
	struct seq_op op;
	const struct kernel_desc *k;
	const char *why = NULL;
	int r;

	if (e->target_case == SSEQ__EXECUTE__TARGET_FUNCTION)
		return req_execute_function(s, rq);
	if (e->target_case != SSEQ__EXECUTE__TARGET_KERNEL || !e->kernel)
		return outcome_error(s, REQ_UNKNOWN_KERNEL,
			"Execute names neither a kernel nor a module function");
	k = kernel_find(e->kernel);
	if (!k)
		return outcome_error(s, REQ_UNKNOWN_KERNEL, "unknown kernel '%s'", e->kernel);
	{
		uint32_t c[3];

		if (e->cooperative || exec_cluster(e, c))
			return outcome_error(s, -EINVAL,
				"%s is a built-in kernel: launch attributes (cooperative, "
				"cluster) are for module functions",
				k->name);
	}
	if (e->n_args != k->nargs)
		return outcome_error(s, REQ_BAD_ARGUMENT_TYPE, "%s takes %u arguments, got %zu",
			k->name, k->nargs, e->n_args);
	ops_init(&op, &pl, SEQ_OP_EXEC);
	if ((r = ops_lane(s, e->lane, &op)))
		return r;
	for (unsigned i = 0; i < k->nargs; i++) {
		const Sseq__Arg *a = e->args[i];
		struct karg *ka = &pl.args[i];
		enum karg_type t = arg_type(a);

		if (t != k->types[i])
			return outcome_error(s, REQ_BAD_ARGUMENT_TYPE,
				"%s argument %u must be %s, got %s", k->name, i,
				karg_type_name(k->types[i]),
				(int)t < 0 ? "nothing" : karg_type_name(t));
		*ka = (struct karg){.type = t};
		switch (t) {
		case KARG_BUFFER: {
			struct sbuf *sb = handles_lookup(
				session_handles(s), a->buffer->handle, HANDLE_BUFFER);
			if (!sb) {
				char what[64];

				snprintf(what, sizeof(what), "%s argument %u: buffer", k->name, i);
				return outcome_unknown_handle(s, a->buffer->handle, what);
			}
			if ((unsigned)a->buffer->access != k->access[i])
				return outcome_error(s, REQ_BAD_ARGUMENT_TYPE,
					"%s argument %u must be marked %s, got %s", k->name, i,
					karg_access_name(k->access[i]),
					karg_access_name((unsigned)a->buffer->access));
			/* The view's address lets kernel_validate check its alignment; the
			 * backend resolves the real pointer at launch. */
			op_add_buffer(&op, ka, sb, k->access[i]);
			break;
		}
		default:
			arg_scalar(ka, a);
			break;
		}
	}
	pl.kernel = k;
	pl.nargs = k->nargs;
	r = kernel_validate(k, pl.args, pl.nargs, &pl.elements, &why);
	if (r < 0) /* -ERANGE when a count overflows, -EINVAL otherwise */
		return outcome_error(s, r, "%s", why ? why : "invalid arguments");
	/* Every built-in kernel writes one float per element: an output it covers only in
	 * part keeps the rest of its old contents, so it is a read-write for sequencing and
	 * for error flow (I9), not a fresh definition. */
	for (unsigned i = 0; i < op.naccess; i++)
		if (op.access[i].mode == SEQ_WRITE)
			op.access[i].mode =
				ops_write_mode(op.access[i].buf, 0, pl.elements * sizeof(float));
	/* Built-in kernels cover exactly what check() validated, whatever shape was asked. */
	return ops_submit(s, rq, &op, NULL, NULL, rq->want_completion);
}
