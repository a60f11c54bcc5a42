/* The kernel argument types, defined once: one row each in KARG_TYPES, from which the
 * enum, the names and sizes, the daemon's wire decoding and ranges, the values a launch
 * holds (struct karg, the hip backend's slots) and libsseq's packing are all expanded.
 * Header-only, so libsseq uses it without linking the kernels. */
#ifndef SSEQ_KARG_H
#define SSEQ_KARG_H

#include <stdint.h>

/* The scalar types, in the enum's order after KARG_BUFFER. Columns:
 *   T      the enum's suffix (KARG_T, and the public SSEQ_ARG_T, one more)
 *   name   its spelling in errors, sseqctl and the docs, and its field of the wire's Arg
 *          (so SSEQ__ARG__VALUE_T is its case)
 *   ctype  the C type of its value in struct karg
 *   size   bytes by value in a launch, and its alignment there
 *   wide   the member of the public struct sseq_arg's value that carries it: the narrow
 *          types (module functions only, protocol 1.5) travel widened, f16 and bf16 as
 *          their 16 bits
 *   min, max  a narrow type's range, checked by the daemon on the widened value (0, 0
 *          for the types that do not travel widened) */
#define KARG_SCALAR_TYPES(X)                                                                       \
	X(I32, i32, int32_t, 4, i32, 0, 0)                                                         \
	X(U32, u32, uint32_t, 4, u32, 0, 0)                                                        \
	X(I64, i64, int64_t, 8, i64, 0, 0)                                                         \
	X(U64, u64, uint64_t, 8, u64, 0, 0)                                                        \
	X(F32, f32, float, 4, f32, 0, 0)                                                           \
	X(F64, f64, double, 8, f64, 0, 0)                                                          \
	X(I8, i8, int8_t, 1, i32, INT8_MIN, INT8_MAX)                                              \
	X(U8, u8, uint8_t, 1, u32, 0, UINT8_MAX)                                                   \
	X(I16, i16, int16_t, 2, i32, INT16_MIN, INT16_MAX)                                         \
	X(U16, u16, uint16_t, 2, u32, 0, UINT16_MAX)                                               \
	X(F16, f16, uint16_t, 2, u32, 0, UINT16_MAX)                                               \
	X(BF16, bf16, uint16_t, 2, u32, 0, UINT16_MAX)

/* Every type, the same columns: a buffer (its view's device address by value; ctype and
 * wide name what it carries) first, bytes (a by-value struct of its own size, karg_size)
 * last. */
#define KARG_TYPES(X)                                                                              \
	X(BUFFER, buffer, void *, sizeof(void *), buffer, 0, 0)                                    \
	KARG_SCALAR_TYPES(X)                                                                       \
	X(BYTES, bytes, void, 0, bytes, 0, 0)

enum karg_type {
#define KARG_ENUM(T, name, ctype, size, wide, min, max) KARG_##T,
	KARG_TYPES(KARG_ENUM)
#undef KARG_ENUM
};
#define KARG_NTYPES (KARG_BYTES + 1)

/* One member per scalar type, named for it: the values of struct karg and of the hip
 * backend's argument slots. */
#define KARG_VALUE_MEMBER(T, name, ctype, size, wide, min, max) ctype name;
#define KARG_VALUE_MEMBERS KARG_SCALAR_TYPES(KARG_VALUE_MEMBER)

/* The most bytes a launch's arguments take, laid out at their alignments: CUDA's classic
 * parameter space (recent drivers allow 32764 bytes on NVIDIA; AMD's kernarg segment
 * takes 4 KiB everywhere). One bytes argument is at most this, aligned at most
 * KARG_BYTES_MAX_ALIGN. */
#define KERNEL_PARAM_SPACE 4096u
#define KARG_BYTES_MAX_ALIGN 256u

/* A type's name (in errors, sseqctl and the docs) and the bytes it takes by value in a
 * launch (a buffer: its device address; bytes: 0, each argument has its own, karg_size):
 * KARG_TYPES, as data. */
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
		struct {
			const void *data; /* the request's: valid while it is submitted */
			uint32_t size; /* 1 .. KERNEL_PARAM_SPACE */
			uint32_t align; /* a power of two, 1 .. KARG_BYTES_MAX_ALIGN */
		} bytes;
		/* A scalar's, by its name (f16 and bf16 are read as u16 too) */
		KARG_VALUE_MEMBERS
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

/* Copy a 32- or 64-bit scalar of type t, by value, from src to dst (each at least 8
 * bytes, as the launch's argument slots are); the two sizes are constants, so this
 * stays two moves. (The narrow types and bytes go by karg_size.) */
static inline void karg_copy_scalar(void *dst, const void *src, enum karg_type t)
{
	/* Callers pass a type they validated: said to the compiler, which otherwise (-O3,
	 * no LTO) finds an index past the table on a path the callers never take. */
	if ((unsigned)t >= KARG_NTYPES)
		__builtin_unreachable();
	if (karg_types[t].size == 4)
		__builtin_memcpy(dst, src, 4);
	else
		__builtin_memcpy(dst, src, 8);
}

const char *karg_type_name(enum karg_type type);
/* "in", "out" or "inout" (enum karg_access), "?" for anything else. */
const char *karg_access_name(unsigned access);

#endif
