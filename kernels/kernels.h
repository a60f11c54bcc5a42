/* The built-in kernels: names, argument signatures and the CPU versions used by the sim
 * backend. The element bodies live in kernels-impl.h, shared with the HIP versions. */
#ifndef SSEQ_KERNELS_H
#define SSEQ_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "karg.h"

#define KERNEL_MAX_ARGS 32

struct kernel_grid {
	uint32_t grid[3];
	uint32_t block[3];
	uint32_t shared_mem;
};

struct kernel_desc {
	const char *name;
	unsigned nargs;
	enum karg_type types[KERNEL_MAX_ARGS];
	unsigned access[KERNEL_MAX_ARGS]; /* for buffer arguments */
	/* Validate scalars and buffer sizes (buf.size) before launch; on success set the
	 * element count the launch covers. Returns 0 or -EINVAL / -ERANGE with a reason. */
	int (*check)(const struct karg *args, uint64_t *elements, const char **why);
	/* The CPU version: run the whole launch. */
	void (*cpu)(const struct karg *args, uint64_t elements);
};

/* conv2d's parameters (lax.conv_general_dilated, NCHW / OIHW / NCHW), in argument order,
 * plus the output extent derived by kernel_conv2d_out_shape. */
struct kernel_conv2d {
	int32_t n, c, h, w, o, kh, kw;
	int32_t stride_h, stride_w;
	int32_t pad_top, pad_bottom, pad_left, pad_right;
	int32_t lhs_dil_h, lhs_dil_w, rhs_dil_h, rhs_dil_w;
	int32_t groups;
	int64_t oh, ow; /* set by kernel_conv2d_out_shape */
};

/* Validate p's dimensions (all >= 1 except padding, groups dividing C and O) and set
 * p->oh, p->ow = floor((dilated extent + pads - dilated kernel extent) / stride) + 1.
 * Returns 0, or -EINVAL (bad dimension, output < 1) / -ERANGE with a reason. The one
 * definition of conv2d's output shape for the daemon, clients and tests. */
int kernel_conv2d_out_shape(struct kernel_conv2d *p, const char **why);
/* Copy conv2d's scalar arguments (args[3..20]) into *p; oh/ow are left 0. */
void kernel_conv2d_from_args(const struct karg *args, struct kernel_conv2d *p);

/* The daemon's entry point for untrusted arguments: checks the argument count and
 * types against k's signature, that every buffer is marked with at least the access the
 * kernel makes (args[i].access as enum karg_access), then k->check. Once it returns 0 the
 * launch over *elements cannot touch memory outside the buffers. Reasons point into a
 * thread-local buffer that stays valid until the next check on the same thread. */
int kernel_validate(const struct kernel_desc *k, const struct karg *args, unsigned nargs,
	uint64_t *elements, const char **why);

const struct kernel_desc *kernel_find(const char *name);
/* Every built-in kernel, NULL-terminated. */
const struct kernel_desc *const *kernel_list(void);

#endif
