/* A look at a frame's wire bytes before protobuf-c unpacks it: unpack recurses once per
 * nested message and would follow Batch -> Request -> Batch ... as deep as a frame goes
 * (5,000 levels overflow the stack), and it cuts strings at their first NUL. This walk
 * keeps its own bounded stack, so no frame of any shape can make it, or unpack, recurse
 * without a bound. */
#include "pbcheck.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Request(0) -> Batch(1) -> Request(2) -> Execute(3) -> Arg(4) -> BufferArg(5): the
 * deepest a valid Request goes. */
#define PBCHECK_MAX_DEPTH 8

enum { PBC_VARINT = 0, PBC_I64 = 1, PBC_LEN = 2, PBC_I32 = 5 };

struct level {
	const ProtobufCMessageDescriptor *desc;
	const uint8_t *p, *end;
	bool in_batch; /* a Request inside a Batch */
};

/* Lenient on purpose (10-byte varints, any key): what it passes, protobuf-c still judges;
 * it refuses only what it can name. */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;

	for (unsigned shift = 0; shift < 70; shift += 7) {
		if (*p == end)
			return -1;
		uint8_t b = *(*p)++;
		if (shift < 64)
			x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -1;
}

int pbcheck_request(const uint8_t *p, size_t len, char *why, size_t why_size)
{
	struct level stack[PBCHECK_MAX_DEPTH];
	unsigned depth = 0;

	stack[0] = (struct level){&sseq__request__descriptor, p, p + len, false};
	for (;;) {
		struct level *l = &stack[depth];
		const ProtobufCFieldDescriptor *f;
		uint64_t key, n;

		if (l->p == l->end) {
			if (depth == 0)
				return 0;
			depth--;
			continue;
		}
		if (read_varint(&l->p, l->end, &key) < 0)
			goto malformed;
		switch (key & 7) {
		case PBC_VARINT:
			if (read_varint(&l->p, l->end, &n) < 0)
				goto malformed;
			continue;
		case PBC_I64:
		case PBC_I32:
			n = (key & 7) == PBC_I64 ? 8 : 4;
			if ((uint64_t)(l->end - l->p) < n)
				goto malformed;
			l->p += n;
			continue;
		case PBC_LEN:
			break;
		default:
			goto malformed; /* groups: protobuf-c declines them too */
		}
		if (read_varint(&l->p, l->end, &n) < 0 || n > (uint64_t)(l->end - l->p))
			goto malformed;
		const uint8_t *sub = l->p;
		l->p += n;
		f = key >> 3 <= UINT32_MAX
			? protobuf_c_message_descriptor_get_field(l->desc, (unsigned)(key >> 3))
			: NULL;
		if (!f)
			continue; /* unknown fields are skipped, as protobuf-c does */
		if (f->type == PROTOBUF_C_TYPE_STRING && memchr(sub, 0, n)) {
			snprintf(why, why_size, "string field %s.%s holds a NUL byte",
				l->desc->short_name, f->name);
			return -1;
		}
		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (l->in_batch && f->descriptor == &sseq__batch__descriptor) {
			snprintf(why, why_size, "batches do not nest (a Batch inside a Batch)");
			return -1;
		}
		if (depth + 1 == PBCHECK_MAX_DEPTH) {
			snprintf(why, why_size, "messages nested deeper than %u levels",
				PBCHECK_MAX_DEPTH);
			return -1;
		}
		stack[++depth] = (struct level){
			f->descriptor, sub, sub + n,
			l->desc == &sseq__batch__descriptor, /* a Batch's Requests */
		};
	}
malformed:
	snprintf(why, why_size, "frame does not decode as a Request");
	return -1;
}
