/* The built-in kernels: names, argument signatures and the CPU versions used by the sim
 * backend. The element bodies live in kernels-impl.h, shared with the HIP versions. */
#ifndef SSEQ_KERNELS_H
#define SSEQ_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#define KERNEL_MAX_ARGS 32

enum karg_type {
	KARG_BUFFER,
	KARG_I32,
	KARG_U32,
	KARG_I64,
	KARG_U64,
	KARG_F32,
	KARG_F64,
	/* Module functions only: no built-in kernel takes them. f16 and bf16 are the
	 * 16 bits of the value; bytes are a by-value struct of its own size. */
	KARG_I8,
	KARG_U8,
	KARG_I16,
	KARG_U16,
	KARG_F16,
	KARG_BF16,
	KARG_BYTES,
};
#define KARG_NTYPES (KARG_BYTES + 1)

/* The most bytes a launch's arguments take, laid out at their alignments: CUDA's classic
 * parameter space (recent drivers allow 32764 bytes on NVIDIA; AMD's kernarg segment
 * takes 4 KiB everywhere). One bytes argument is at most this, aligned at most
 * KARG_BYTES_MAX_ALIGN. */
#define KERNEL_PARAM_SPACE 4096u
#define KARG_BYTES_MAX_ALIGN 256u

/* Every argument type, defined once: its name (in errors, sseqctl and the docs) and the
 * bytes it takes by value in a launch (a buffer: its device address; bytes: 0, each
 * argument has its own, karg_size). */
struct karg_type_info {
	const char *name;
	unsigned size;
};

extern const struct karg_type_info karg_types[KARG_NTYPES];

/* How a kernel uses a buffer argument; matches enum seq_access_mode. */
enum karg_access {
	KARG_IN = 1,
	KARG_OUT = 2,
	KARG_INOUT = 3,
};

struct karg {
	enum karg_type type;
	unsigned access; /* buffers: enum karg_access */
	union {
		struct {
			void *ptr; /* device (sim: host) address of the view */
			uint64_t size; /* bytes in the view */
			unsigned index; /* the view's index in the op's access list */
		} buf;
		int32_t i32;
		uint32_t u32;
		int64_t i64;
		uint64_t u64;
		float f32;
		double f64;
		int8_t i8;
		uint8_t u8;
		int16_t i16;
		uint16_t u16; /* also f16 and bf16, as their bits */
		struct {
			const void *data; /* the request's: valid while it is submitted */
			uint32_t size; /* 1 .. KERNEL_PARAM_SPACE */
			uint32_t align; /* a power of two, 1 .. KARG_BYTES_MAX_ALIGN */
		} bytes;
	} v;
};

/* The bytes a's value takes by value in a launch, and their alignment. */
static inline unsigned karg_size(const struct karg *a)
{
	return a->type == KARG_BYTES ? a->v.bytes.size : karg_types[a->type].size;
}

static inline unsigned karg_align(const struct karg *a)
{
	return a->type == KARG_BYTES ? a->v.bytes.align : karg_types[a->type].size;
}

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
const char *karg_type_name(enum karg_type type);
/* "in", "out" or "inout" (enum karg_access), "?" for anything else. */
const char *karg_access_name(unsigned access);
/* Copy a 32- or 64-bit scalar of type t, by value, from src to dst (each at least 8
 * bytes, as the launch's argument slots are); the two sizes are constants, so this
 * stays two moves. (The narrow types and bytes go by karg_size.) */
static inline void karg_copy_scalar(void *dst, const void *src, enum karg_type t)
{
	if (karg_types[t].size == 4)
		__builtin_memcpy(dst, src, 4);
	else
		__builtin_memcpy(dst, src, 8);
}

#endif
