/* What every backend checks of an op before it touches the device: the point is the
 * next on a stream of the op's kind, copies stay inside their views, kernel buffer
 * arguments name a view. One definition, so the sim and hip refuse the same ops. */
#include "backend.h"

static bool range_ok(uint64_t offset, uint64_t length, uint64_t size)
{
	return offset <= size && length <= size - offset;
}

int backend_op_check(enum seq_stream_kind stream_kind, uint64_t launched, struct seq_point at,
	const struct seq_op *op)
{
	const struct op_payload *p = op->payload;
	const struct seq_access *a = op->access;

	if ((unsigned)op->kind >= SEQ_OP_KINDS || stream_kind != seq_op_stream_kind(op->kind) ||
		at.seq != launched + 1 || op->naccess > SEQ_MAX_ACCESS || !p)
		return -EINVAL;
	switch (op->kind) {
	case SEQ_OP_H2D:
		if (op->naccess < 1 || !range_ok(p->dst_offset, p->length, a[0].size) ||
			(p->length && !p->host))
			return -EINVAL;
		break;
	case SEQ_OP_D2H:
		if (op->naccess < 1 || !range_ok(p->src_offset, p->length, a[0].size) ||
			(p->length && !p->host))
			return -EINVAL;
		break;
	case SEQ_OP_D2D:
		if (op->naccess < 1 || !range_ok(p->src_offset, p->length, a[0].size) ||
			!range_ok(p->dst_offset, p->length, a[op->naccess > 1].size))
			return -EINVAL;
		break;
	case SEQ_OP_EXEC:
		if ((!p->kernel && !p->function) || p->nargs > KERNEL_MAX_ARGS)
			return -EINVAL;
		for (unsigned i = 0; i < p->nargs; i++)
			if (p->args[i].type == KARG_BUFFER && p->args[i].v.buf.index >= op->naccess)
				return -EINVAL;
		break;
	}
	return 0;
}
