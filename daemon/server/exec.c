/* Execute: typed arguments checked against a built-in kernel's signature, or passed in
 * order to a module function; buffer arguments become the accesses that drive the waits. */
#include "session-internal.h"

#include <errno.h>
#include <inttypes.h>
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

static enum karg_type arg_type(const Sseq__Arg *a)
{
	switch (a->value_case) {
	case SSEQ__ARG__VALUE_BUFFER:
		return KARG_BUFFER;
	case SSEQ__ARG__VALUE_I64:
		return KARG_I64;
	case SSEQ__ARG__VALUE_U64:
		return KARG_U64;
	case SSEQ__ARG__VALUE_F64:
		return KARG_F64;
	case SSEQ__ARG__VALUE_F32:
		return KARG_F32;
	case SSEQ__ARG__VALUE_I32:
		return KARG_I32;
	case SSEQ__ARG__VALUE_U32:
		return KARG_U32;
	default:
		return (enum karg_type) - 1;
	}
}

static const char *access_name(unsigned access)
{
	static const char *const names[] = {"?", "in", "out", "inout"};
	return names[access & 3];
}

/* A scalar argument's value, by the type arg_type() found. */
static void arg_scalar(struct karg *ka, const Sseq__Arg *a)
{
	switch (ka->type) {
	case KARG_I32:
		ka->v.i32 = a->i32;
		break;
	case KARG_U32:
		ka->v.u32 = a->u32;
		break;
	case KARG_I64:
		ka->v.i64 = a->i64;
		break;
	case KARG_U64:
		ka->v.u64 = a->u64;
		break;
	case KARG_F32:
		ka->v.f32 = a->f32;
		break;
	case KARG_F64:
		ka->v.f64 = a->f64;
		break;
	case KARG_BUFFER:
		break;
	}
}

/* A user kernel: no signature to check against, so every argument goes by value in
 * order (a buffer as its view's device address) and the access marks alone drive the
 * waits. The daemon cannot bound what the kernel touches: a kernel that writes past its
 * views or through a buffer marked in breaks the ordering, as it would anywhere. */
static int req_execute_function(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Execute *e = rq->execute;
	const Sseq__ModuleFunction *mf = e->function;
	struct op_payload pl;
	struct seq_op op;
	const Sseq__Grid *g = e->grid;
	struct smodule *m;
	void *fn = NULL;
	int r;

	if (!backend_has_modules(&s->srv->backend))
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_KERNEL,
			"module functions need the hip backend and LoadModule");
	if (!mf)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"Execute without a module function");
	m = session_lookup(s, mf->module, HANDLE_MODULE);
	if (!m)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE,
			"unknown module handle %#" PRIx64, mf->module);
	if (!mf->name || !*mf->name || strlen(mf->name) > SESSION_MAX_FN_NAME)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"a module function needs a name of 1 to %u bytes", SESSION_MAX_FN_NAME);
	if (e->launch_shape_case != SSEQ__EXECUTE__LAUNCH_SHAPE_GRID || !g)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"module function '%.64s' needs an explicit grid: the daemon cannot "
			"derive one for code it does not know",
			mf->name);
	if (!g->grid_x || !g->block_x)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"grid_x and block_x must be at least 1");
	if (e->n_args > KERNEL_MAX_ARGS)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"%zu arguments: at most %u", e->n_args, KERNEL_MAX_ARGS);
	r = smodule_function(s->srv, m, mf->name, &fn);
	if (r == -ENOMEM)
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED, "out of memory");
	if (r < 0)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_KERNEL,
			"module %s has no function '%.64s'", m->path, mf->name);
	op_init(&op, &pl, SEQ_OP_EXEC);
	for (unsigned i = 0; i < e->n_args; i++) {
		const Sseq__Arg *a = e->args[i];
		struct karg *ka = &pl.args[i];
		enum karg_type t = arg_type(a);
		struct sbuf *sb;
		unsigned access;

		if ((int)t < 0)
			return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE,
				"argument %u has no value", i);
		*ka = (struct karg){.type = t};
		if (t != KARG_BUFFER) {
			arg_scalar(ka, a);
			continue;
		}
		sb = session_lookup(s, a->buffer->handle, HANDLE_BUFFER);
		if (!sb)
			return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE,
				"argument %u: unknown buffer handle %#" PRIx64, i,
				a->buffer->handle);
		access = (unsigned)a->buffer->access;
		if (access < KARG_IN || access > KARG_INOUT)
			return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE,
				"argument %u: a buffer must be marked in, out or inout", i);
		if (op.naccess == SEQ_MAX_ACCESS)
			return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
				"at most %u buffer arguments", SEQ_MAX_ACCESS);
		/* "out" is the client's word that the kernel defines the whole view (use
		 * inout for a partial write). */
		op_add_buffer(&op, ka, sb, access);
	}
	pl.function = fn;
	pl.function_name = mf->name;
	pl.nargs = (unsigned)e->n_args;
	pl.grid = (struct kernel_grid){
		.grid = {g->grid_x, g->grid_y ? g->grid_y : 1, g->grid_z ? g->grid_z : 1},
		.block = {g->block_x, g->block_y ? g->block_y : 1, g->block_z ? g->block_z : 1},
		.shared_mem = g->shared_mem,
	};
	return session_submit(s, rq, &op, NULL, m, rq->want_completion);
}

int req_execute(struct session *s, const Sseq__Request *rq)
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
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_KERNEL,
			"Execute names neither a kernel nor a module function");
	k = kernel_find(e->kernel);
	if (!k)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_KERNEL,
			"unknown kernel '%s'", e->kernel);
	if (e->n_args != k->nargs)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE,
			"%s takes %u arguments, got %zu", k->name, k->nargs, e->n_args);
	op_init(&op, &pl, SEQ_OP_EXEC);
	for (unsigned i = 0; i < k->nargs; i++) {
		const Sseq__Arg *a = e->args[i];
		struct karg *ka = &pl.args[i];
		enum karg_type t = arg_type(a);

		if (t != k->types[i])
			return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE,
				"%s argument %u must be %s, got %s", k->name, i,
				karg_type_name(k->types[i]),
				(int)t < 0 ? "nothing" : karg_type_name(t));
		*ka = (struct karg){.type = t};
		switch (t) {
		case KARG_BUFFER: {
			struct sbuf *sb = session_lookup(s, a->buffer->handle, HANDLE_BUFFER);
			if (!sb)
				return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE,
					"%s argument %u: unknown buffer handle %#" PRIx64, k->name,
					i, a->buffer->handle);
			if ((unsigned)a->buffer->access != k->access[i])
				return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE,
					"%s argument %u must be marked %s, got %s", k->name, i,
					access_name(k->access[i]),
					access_name((unsigned)a->buffer->access));
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
	if (r < 0)
		return req_fail(s, rq->tag,
			r == -ERANGE ? SSEQ__STATUS__STATUS_OUT_OF_RANGE
				     : SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"%s", why ? why : "invalid arguments");
	/* Every built-in kernel writes one float per element: an output it covers only in
	 * part keeps the rest of its old contents, so it is a read-write for sequencing and
	 * for error flow (I9), not a fresh definition. */
	for (unsigned i = 0; i < op.naccess; i++)
		if (op.access[i].mode == SEQ_WRITE)
			op.access[i].mode =
				write_mode(op.access[i].buf, 0, pl.elements * sizeof(float));
	/* Built-in kernels cover exactly what check() validated, whatever shape was asked. */
	return session_submit(s, rq, &op, NULL, NULL, rq->want_completion);
}
