/* Packing of kernel arguments and launch shapes into the wire's Execute message.
 * Malformed arguments are refused here, before anything is sent, so the error points
 * at the caller's line rather than at a later Reply. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "karg.h"

void args_pack_finish(struct args_pack *p)
{
	free(p->args); /* the one block argv and bufs also point into */
	p->args = NULL;
	p->argv = NULL;
	p->bufs = NULL;
	p->bytes = NULL;
}

/* A bytes argument within what the daemon takes (KERNEL_PARAM_SPACE, its alignments). */
static int pack_bytes(Sseq__Arg *out, Sseq__BytesArg *bytes, const struct sseq_arg *a)
{
	const uint32_t size = a->v.bytes.size, align = a->v.bytes.align ? a->v.bytes.align : 1;

	if (!a->v.bytes.data || size == 0 || size > KERNEL_PARAM_SPACE ||
		align > KARG_BYTES_MAX_ALIGN || (align & (align - 1)) || size % align)
		return -EINVAL;
	sseq__bytes_arg__init(bytes);
	bytes->data.data = (uint8_t *)(uintptr_t)a->v.bytes.data;
	bytes->data.len = size;
	bytes->align = align;
	out->value_case = SSEQ__ARG__VALUE_BYTES;
	out->bytes = bytes;
	return 0;
}

/* The public header keeps its own copy of the types (it cannot include karg.h): one more
 * than the table's, each carried by a value member wide enough for it. */
#define ARG_MATCHES(T, name, ctype, size, wide, min, max)                                          \
	_Static_assert(SSEQ_ARG_##T == KARG_##T + 1, "sseq.h's SSEQ_ARG_" #T " is KARG_" #T);      \
	_Static_assert(sizeof(((struct sseq_arg *)0)->v.wide) >= (size),                           \
		"sseq.h's struct sseq_arg carries " #name);
KARG_TYPES(ARG_MATCHES)
#undef ARG_MATCHES
_Static_assert(SSEQ_ARG_BYTES == KARG_NTYPES, "sseq.h's enum sseq_arg_type ends with bytes");

static int pack_one(
	Sseq__Arg *out, Sseq__BufferArg *buf, Sseq__BytesArg *bytes, const struct sseq_arg *a)
{
	switch (a->type) {
	case SSEQ_ARG_BUFFER:
		if (a->v.buffer == 0 || a->access < SSEQ_ACCESS_IN || a->access > SSEQ_ACCESS_INOUT)
			return -EINVAL;
		sseq__buffer_arg__init(buf);
		buf->handle = a->v.buffer;
		/* The public enum mirrors the wire's Access values. */
		buf->access = (Sseq__Access)a->access;
		out->value_case = SSEQ__ARG__VALUE_BUFFER;
		out->buffer = buf;
		return 0;
		/* A scalar goes in its own field of the wire's Arg; the narrow ones travel widened
		 * and the daemon checks their range. */
#define PACK_SCALAR(T, name, ctype, size, wide, min, max)                                          \
	case SSEQ_ARG_##T:                                                                         \
		out->value_case = SSEQ__ARG__VALUE_##T;                                            \
		out->name = a->v.wide;                                                             \
		return 0;
		KARG_SCALAR_TYPES(PACK_SCALAR)
#undef PACK_SCALAR
	case SSEQ_ARG_BYTES:
		return pack_bytes(out, bytes, a);
	}
	return -EINVAL;
}

int args_pack(struct args_pack *p, const struct sseq_arg *args, size_t nargs,
	const struct sseq_launch *shape)
{
	memset(p, 0, sizeof(*p));
	sseq__execute__init(&p->ex);
	if (nargs > 0 && !args)
		return -EINVAL;
	if (nargs > 0) {
		_Static_assert(sizeof(Sseq__Arg) % _Alignof(Sseq__BufferArg) == 0 &&
				sizeof(Sseq__BufferArg) % _Alignof(Sseq__BytesArg) == 0 &&
				sizeof(Sseq__BytesArg) % _Alignof(Sseq__Arg *) == 0,
			"args, bufs, bytes and argv share one block");
		/* One allocation per launch, not four: the arrays all have nargs entries. */
		p->args = calloc(nargs,
			sizeof(*p->args) + sizeof(*p->bufs) + sizeof(*p->bytes) + sizeof(*p->argv));
		if (!p->args)
			return -ENOMEM;
		p->bufs = (Sseq__BufferArg *)(p->args + nargs);
		p->bytes = (Sseq__BytesArg *)(p->bufs + nargs);
		p->argv = (Sseq__Arg **)(p->bytes + nargs);
	}
	for (size_t i = 0; i < nargs; i++) {
		sseq__arg__init(&p->args[i]);
		int r = pack_one(&p->args[i], &p->bufs[i], &p->bytes[i], &args[i]);
		if (r < 0)
			return r;
		p->argv[i] = &p->args[i];
	}
	p->ex.n_args = nargs;
	p->ex.args = p->argv;
	if (shape && shape->grid[0]) {
		sseq__grid__init(&p->grid);
		p->grid.grid_x = shape->grid[0];
		p->grid.grid_y = shape->grid[1] ? shape->grid[1] : 1;
		p->grid.grid_z = shape->grid[2] ? shape->grid[2] : 1;
		p->grid.block_x = shape->block[0] ? shape->block[0] : 1;
		p->grid.block_y = shape->block[1] ? shape->block[1] : 1;
		p->grid.block_z = shape->block[2] ? shape->block[2] : 1;
		p->grid.shared_mem = shape->shared_mem;
		p->ex.launch_shape_case = SSEQ__EXECUTE__LAUNCH_SHAPE_GRID;
		p->ex.grid = &p->grid;
	} else if (shape && shape->elements) {
		p->ex.launch_shape_case = SSEQ__EXECUTE__LAUNCH_SHAPE_ELEMENTS;
		p->ex.elements = shape->elements;
	}
	return 0;
}
