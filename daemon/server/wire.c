/* Hand-written protobuf wire decoding for Execute and copy requests, and encoding for
 * plain replies: protobuf-c's table-driven unpack cost ~3,700 instructions per pipelined
 * execute, most of the daemon's budget. Anything unexpected declines to protobuf-c. */
#include "wire.h"
#include "sseq-frame.h"

#include <limits.h>
#include <stdbool.h>
#include <string.h>

/* proto wire types */
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

struct rd {
	const uint8_t *p, *end;
};

/* A varint of at most `max` bytes; *any, when asked for, says whether any of its 7-bit
 * groups is nonzero, which is how protobuf-c reads a bool (even one whose bits lie past
 * the 64 a uint64 keeps). */
static int rd_varint_max(struct rd *r, unsigned max, uint64_t *v, bool *any)
{
	uint64_t x = 0;
	uint8_t bits = 0;

	for (unsigned i = 0; i < max; i++) {
		if (r->p == r->end)
			return -1;
		uint8_t b = *r->p++;
		x |= (uint64_t)(b & 0x7f) << (7 * i);
		bits |= b & 0x7f;
		if (!(b & 0x80)) {
			*v = x;
			if (any)
				*any = bits != 0;
			return 0;
		}
	}
	return -1;
}

/* Values: protobuf-c scans at most 10 bytes and keeps the low 64 bits. */
static int rd_varint(struct rd *r, uint64_t *v)
{
	return rd_varint_max(r, 10, v, NULL);
}

/* Keys: protobuf-c's parse_tag_and_wiretype reads at most 5 bytes and refuses the frame
 * when they do not end the key, so a field number always fits 32 bits. */
static int rd_key(struct rd *r, uint32_t *field, uint32_t *wt)
{
	uint64_t k;

	if (rd_varint_max(r, 5, &k, NULL) < 0 || (k >> 3) == 0)
		return -1;
	*field = (uint32_t)(k >> 3);
	*wt = (uint32_t)(k & 7);
	return 0;
}

/* Length prefixes: at most 5 bytes and at most INT_MAX (scan_length_prefixed_data). */
static int rd_len(struct rd *r, struct rd *sub)
{
	uint64_t n;

	if (rd_varint_max(r, 5, &n, NULL) < 0 || n > INT_MAX || n > (uint64_t)(r->end - r->p))
		return -1;
	sub->p = r->p;
	sub->end = r->p + n;
	r->p += n;
	return 0;
}

static int rd_fixed(struct rd *r, void *out, size_t n)
{
	if ((size_t)(r->end - r->p) < n)
		return -1;
	memcpy(out, r->p, n); /* little-endian on the wire, as on every supported host */
	r->p += n;
	return 0;
}

static int decode_buffer_arg(struct rd *r, Sseq__BufferArg *b)
{
	uint32_t f, wt;
	uint64_t v;

	sseq__buffer_arg__init(b);
	while (r->p < r->end) {
		if (rd_key(r, &f, &wt) < 0 || wt != WT_VARINT || rd_varint(r, &v) < 0)
			return -1;
		if (f == 1)
			b->handle = v;
		else if (f == 2 && v <= SSEQ__ACCESS__ACCESS_INOUT)
			b->access = (Sseq__Access)v;
		else
			return -1;
	}
	return 0;
}

/* A scalar argument of wire type `want` into out, `size` bytes: a varint's low bytes (the
 * int32 and uint32 fields keep its low 32 bits, as protobuf-c does) or a fixed field's. */
static inline int rd_scalar(struct rd *r, uint32_t wt, uint32_t want, void *out, size_t size)
{
	uint64_t v;

	if (wt != want)
		return -1;
	if (want != WT_VARINT)
		return rd_fixed(r, out, size);
	if (rd_varint(r, &v) < 0)
		return -1;
	memcpy(out, &v, size); /* little-endian, as rd_fixed assumes */
	return 0;
}

/* The wire type of a scalar argument carried as ctype: floats are fixed, integers varints. */
#define WIRE_ARG_TYPE(ctype)                                                                       \
	_Generic((ctype)0, float : WT_I32, double : WT_I64, default : WT_VARINT)

/* One case per scalar of karg.h's table: its field of Arg is its name, SSEQ__ARG__VALUE_T
 * the field's number. The narrow types travel widened (sint32 or uint32, a range to check:
 * min != max) and only for module functions, which this decoder leaves to protobuf-c. */
#define WIRE_ARG_CASE(T, name, ctype, size, wide, min, max)                                        \
	case SSEQ__ARG__VALUE_##T:                                                                 \
		if ((min) != (max) ||                                                              \
			rd_scalar(r, wt, WIRE_ARG_TYPE(ctype), &a->name, sizeof(a->name)) < 0)     \
			return -1;                                                                 \
		a->value_case = SSEQ__ARG__VALUE_##T;                                              \
		break;

static int decode_arg(struct rd *r, Sseq__Arg *a, Sseq__BufferArg *b)
{
	uint32_t f, wt;
	struct rd sub;

	sseq__arg__init(a);
	while (r->p < r->end) {
		if (rd_key(r, &f, &wt) < 0)
			return -1;
		switch (f) {
		case SSEQ__ARG__VALUE_BUFFER:
			/* A second buffer merges by the spec but replaces in protobuf-c 1.4.1:
			 * leave it to protobuf-c. */
			if (wt != WT_LEN || a->value_case == SSEQ__ARG__VALUE_BUFFER ||
				rd_len(r, &sub) < 0 || decode_buffer_arg(&sub, b) < 0)
				return -1;
			a->value_case = SSEQ__ARG__VALUE_BUFFER;
			a->buffer = b;
			break;
			KARG_SCALAR_TYPES(WIRE_ARG_CASE)
		default:
			return -1; /* bytes: protobuf-c */
		}
	}
	return 0;
}

static int decode_execute(struct rd *r, struct wire_request *w)
{
	Sseq__Execute *e = &w->body.execute;
	uint32_t f, wt;
	uint64_t v;
	struct rd sub;

	sseq__execute__init(e);
	e->args = w->argp;
	while (r->p < r->end) {
		if (rd_key(r, &f, &wt) < 0)
			return -1;
		switch (f) {
		case 1:
			if (wt != WT_LEN || rd_len(r, &sub) < 0 ||
				(size_t)(sub.end - sub.p) >= sizeof(w->kernel) ||
				memchr(sub.p, 0, (size_t)(sub.end - sub.p)))
				return -1;
			memcpy(w->kernel, sub.p, (size_t)(sub.end - sub.p));
			w->kernel[sub.end - sub.p] = '\0';
			e->target_case = SSEQ__EXECUTE__TARGET_KERNEL;
			e->kernel = w->kernel;
			break;
		case 3:
			if (wt != WT_LEN || e->n_args == KERNEL_MAX_ARGS || rd_len(r, &sub) < 0 ||
				decode_arg(&sub, &w->args[e->n_args], &w->bufs[e->n_args]) < 0)
				return -1;
			w->argp[e->n_args] = &w->args[e->n_args];
			e->n_args++;
			break;
		case 5:
		case 6:
			if (wt != WT_VARINT || rd_varint(r, &v) < 0)
				return -1;
			if (f == 6) {
				e->lane = (uint32_t)v; /* protobuf-c keeps a uint32's low bits */
				break;
			}
			e->launch_shape_case = SSEQ__EXECUTE__LAUNCH_SHAPE_ELEMENTS;
			e->elements = v;
			break;
		default:
			return -1; /* module functions, grids: protobuf-c */
		}
	}
	return e->target_case == SSEQ__EXECUTE__TARGET_KERNEL ? 0 : -1;
}

/* Copies are five uint64 varints each, `fields` pointing at them in field-number order,
 * then their uint32 lane (field 6), of which protobuf-c keeps the low 32 bits. */
static int decode_copy(struct rd *r, uint64_t *fields[5], uint32_t *lane)
{
	uint32_t f, wt;
	uint64_t v;

	while (r->p < r->end) {
		if (rd_key(r, &f, &wt) < 0 || wt != WT_VARINT || f > 6 || rd_varint(r, &v) < 0)
			return -1;
		if (f == 6)
			*lane = (uint32_t)v;
		else
			*fields[f - 1] = v;
	}
	return 0;
}

int wire_decode_request(const uint8_t *p, size_t len, struct wire_request *w)
{
	struct rd r = {p, p + len}, sub;
	Sseq__Request *rq = &w->rq;
	uint32_t f, wt;
	uint64_t v;

	sseq__request__init(rq);
	while (r.p < r.end) {
		if (rd_key(&r, &f, &wt) < 0)
			return 0;
		if (f == 1 || f == 2) {
			bool any;
			if (wt != WT_VARINT || rd_varint_max(&r, 10, &v, &any) < 0)
				return 0;
			if (f == 1)
				rq->tag = v;
			else
				rq->want_completion = any;
			continue;
		}
		/* One body, once: a second one replaces the first in protobuf-c (1.4.1 frees
		 * it, no merge), which is rare enough to leave to it. */
		if (wt != WT_LEN || rq->body_case != SSEQ__REQUEST__BODY__NOT_SET ||
			rd_len(&r, &sub) < 0)
			return 0;
		switch (f) {
		case 16: {
			Sseq__CopyH2D *c = &w->body.copy_h2d;
			sseq__copy_h2_d__init(c);
			if (decode_copy(&sub,
				    (uint64_t *[]){&c->staging, &c->staging_offset, &c->dst,
					    &c->dst_offset, &c->length},
				    &c->lane) < 0)
				return 0;
			rq->body_case = SSEQ__REQUEST__BODY_COPY_H2D;
			rq->copy_h2d = c;
			break;
		}
		case 17: {
			Sseq__CopyD2H *c = &w->body.copy_d2h;
			sseq__copy_d2_h__init(c);
			if (decode_copy(&sub,
				    (uint64_t *[]){&c->src, &c->src_offset, &c->staging,
					    &c->staging_offset, &c->length},
				    &c->lane) < 0)
				return 0;
			rq->body_case = SSEQ__REQUEST__BODY_COPY_D2H;
			rq->copy_d2h = c;
			break;
		}
		case 18: {
			Sseq__CopyD2D *c = &w->body.copy_d2d;
			sseq__copy_d2_d__init(c);
			if (decode_copy(&sub,
				    (uint64_t *[]){&c->src, &c->src_offset, &c->dst, &c->dst_offset,
					    &c->length},
				    &c->lane) < 0)
				return 0;
			rq->body_case = SSEQ__REQUEST__BODY_COPY_D2D;
			rq->copy_d2d = c;
			break;
		}
		case 19:
			if (decode_execute(&sub, w) < 0)
				return 0;
			rq->body_case = SSEQ__REQUEST__BODY_EXECUTE;
			rq->execute = &w->body.execute;
			break;
		default:
			return 0;
		}
	}
	return rq->body_case != SSEQ__REQUEST__BODY__NOT_SET;
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static uint8_t *put_varint(uint8_t *o, uint64_t v)
{
	while (v >= 0x80) {
		*o++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*o++ = (uint8_t)v;
	return o;
}

size_t wire_encode_reply(uint8_t *out, uint64_t tag, int status, const char *message,
	uint64_t handle, const struct seq_point *at)
{
	size_t mlen = message ? strlen(message) : 0;
	size_t point_len = 0, reply_len, msg_len;
	uint8_t *o;

	/* proto3: zero scalars and empty strings are not sent. */
	if (at)
		point_len = (at->stream ? 1 + varint_len(at->stream) : 0) +
			(at->seq ? 1 + varint_len(at->seq) : 0);
	reply_len = (tag ? 1 + varint_len(tag) : 0) +
		(status ? 1 + varint_len((uint64_t)status) : 0) +
		(mlen ? 1 + varint_len(mlen) + mlen : 0) + (handle ? 1 + varint_len(handle) : 0) +
		(at ? 1 + varint_len(point_len) + point_len : 0);
	msg_len = 1 + varint_len(reply_len) + reply_len;

	o = out + 4;
	*o++ = (1 << 3) | WT_LEN; /* Message.reply */
	o = put_varint(o, reply_len);
	if (tag) {
		*o++ = (1 << 3) | WT_VARINT;
		o = put_varint(o, tag);
	}
	if (status) {
		*o++ = (2 << 3) | WT_VARINT;
		o = put_varint(o, (uint64_t)status);
	}
	if (mlen) {
		*o++ = (3 << 3) | WT_LEN;
		o = put_varint(o, mlen);
		memcpy(o, message, mlen);
		o += mlen;
	}
	if (handle) {
		*o++ = (4 << 3) | WT_VARINT;
		o = put_varint(o, handle);
	}
	if (at) {
		*o++ = (5 << 3) | WT_LEN;
		o = put_varint(o, point_len);
		if (at->stream) {
			*o++ = (1 << 3) | WT_VARINT;
			o = put_varint(o, at->stream);
		}
		if (at->seq) {
			*o++ = (2 << 3) | WT_VARINT;
			o = put_varint(o, at->seq);
		}
	}
	frame_put_len(out, (uint32_t)msg_len);
	return (size_t)(o - out);
}
