/* libFuzzer target for the frame codecs: every frame the hand decoder (daemon/server/wire.c)
 * accepts must unpack with protobuf-c, which has the last word, to the same values in
 * every field the hot path reads; and wire_encode_reply's output must unpack to what it
 * was given. Any disagreement aborts. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sseq-frame.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define disagree(...)                                                                              \
	do {                                                                                       \
		fprintf(stderr, "fuzz-wire: " __VA_ARGS__);                                        \
		fputc('\n', stderr);                                                               \
		abort();                                                                           \
	} while (0)

/* The hand decoder declines unknown fields, so protobuf-c must not have seen any. */
static void no_unknown(const ProtobufCMessage *m, const char *what)
{
	if (m && m->n_unknown_fields)
		disagree("protobuf-c found %u unknown field(s) in the %s the hand decoder took",
			m->n_unknown_fields, what);
}

static void arg_agrees(size_t i, const Sseq__Arg *h, const Sseq__Arg *r)
{
	no_unknown(&r->base, "Arg");
	if (h->value_case != r->value_case)
		disagree("arg %zu: value case %d, protobuf-c %d", i, h->value_case, r->value_case);
	switch (r->value_case) {
	case SSEQ__ARG__VALUE_BUFFER:
		no_unknown(&r->buffer->base, "BufferArg");
		if (h->buffer->handle != r->buffer->handle ||
			h->buffer->access != r->buffer->access)
			disagree("arg %zu: buffer %#" PRIx64 "/%d, protobuf-c %#" PRIx64 "/%d", i,
				h->buffer->handle, h->buffer->access, r->buffer->handle,
				r->buffer->access);
		break;
	case SSEQ__ARG__VALUE_I64:
		if (h->i64 != r->i64)
			disagree(
				"arg %zu: i64 %" PRId64 ", protobuf-c %" PRId64, i, h->i64, r->i64);
		break;
	case SSEQ__ARG__VALUE_U64:
		if (h->u64 != r->u64)
			disagree(
				"arg %zu: u64 %" PRIu64 ", protobuf-c %" PRIu64, i, h->u64, r->u64);
		break;
	case SSEQ__ARG__VALUE_I32:
		if (h->i32 != r->i32)
			disagree(
				"arg %zu: i32 %" PRId32 ", protobuf-c %" PRId32, i, h->i32, r->i32);
		break;
	case SSEQ__ARG__VALUE_U32:
		if (h->u32 != r->u32)
			disagree(
				"arg %zu: u32 %" PRIu32 ", protobuf-c %" PRIu32, i, h->u32, r->u32);
		break;
	case SSEQ__ARG__VALUE_F32:
		/* Bits, not values: NaNs must survive as sent. */
		if (memcmp(&h->f32, &r->f32, sizeof(h->f32)) != 0)
			disagree("arg %zu: f32 bits differ", i);
		break;
	case SSEQ__ARG__VALUE_F64:
		if (memcmp(&h->f64, &r->f64, sizeof(h->f64)) != 0)
			disagree("arg %zu: f64 bits differ", i);
		break;
	default:
		break;
	}
}

/* A copy's five uint64 fields, then its lane (field 6). */
static void copy_agrees(
	const char *what, const uint64_t *h, const uint64_t *r, uint32_t hlane, uint32_t rlane)
{
	for (int i = 0; i < 5; i++)
		if (h[i] != r[i])
			disagree("%s field %d: %" PRIu64 ", protobuf-c %" PRIu64, what, i + 1, h[i],
				r[i]);
	if (hlane != rlane)
		disagree("%s lane %" PRIu32 ", protobuf-c %" PRIu32, what, hlane, rlane);
}

static void request_agrees(const uint8_t *data, size_t size)
{
	static struct wire_request w;
	const Sseq__Request *h = &w.rq;
	Sseq__Request *r;

	if (!wire_decode_request(data, size, &w))
		return; /* declined: protobuf-c decides, so nothing can disagree */
	r = sseq__request__unpack(NULL, size, data);
	if (!r)
		disagree(
			"the hand decoder took a frame of %zu bytes that protobuf-c refuses", size);
	no_unknown(&r->base, "Request");
	if (h->tag != r->tag)
		disagree("tag %" PRIu64 ", protobuf-c %" PRIu64, h->tag, r->tag);
	if (!h->want_completion != !r->want_completion)
		disagree("want_completion %d, protobuf-c %d", h->want_completion,
			r->want_completion);
	if (h->body_case != r->body_case)
		disagree("body %d, protobuf-c %d", h->body_case, r->body_case);
	switch (r->body_case) {
	case SSEQ__REQUEST__BODY_COPY_H2D:
		no_unknown(&r->copy_h2d->base, "CopyH2D");
		copy_agrees("CopyH2D", &h->copy_h2d->staging, &r->copy_h2d->staging,
			h->copy_h2d->lane, r->copy_h2d->lane);
		break;
	case SSEQ__REQUEST__BODY_COPY_D2H:
		no_unknown(&r->copy_d2h->base, "CopyD2H");
		copy_agrees("CopyD2H", &h->copy_d2h->src, &r->copy_d2h->src, h->copy_d2h->lane,
			r->copy_d2h->lane);
		break;
	case SSEQ__REQUEST__BODY_COPY_D2D:
		no_unknown(&r->copy_d2d->base, "CopyD2D");
		copy_agrees("CopyD2D", &h->copy_d2d->src, &r->copy_d2d->src, h->copy_d2d->lane,
			r->copy_d2d->lane);
		break;
	case SSEQ__REQUEST__BODY_EXECUTE: {
		const Sseq__Execute *he = h->execute, *re = r->execute;
		no_unknown(&re->base, "Execute");
		if (he->target_case != re->target_case ||
			re->target_case != SSEQ__EXECUTE__TARGET_KERNEL)
			disagree("execute target %d, protobuf-c %d", he->target_case,
				re->target_case);
		if (strcmp(he->kernel, re->kernel) != 0)
			disagree("kernel '%s', protobuf-c '%s'", he->kernel, re->kernel);
		if (he->n_args != re->n_args)
			disagree("%zu args, protobuf-c %zu", he->n_args, re->n_args);
		for (size_t i = 0; i < re->n_args; i++)
			arg_agrees(i, he->args[i], re->args[i]);
		if (he->launch_shape_case != re->launch_shape_case)
			disagree("launch shape %d, protobuf-c %d", he->launch_shape_case,
				re->launch_shape_case);
		if (re->launch_shape_case == SSEQ__EXECUTE__LAUNCH_SHAPE_ELEMENTS &&
			he->elements != re->elements)
			disagree("elements %" PRIu64 ", protobuf-c %" PRIu64, he->elements,
				re->elements);
		if (he->lane != re->lane)
			disagree("execute lane %" PRIu32 ", protobuf-c %" PRIu32, he->lane,
				re->lane);
		break;
	}
	default:
		disagree("the hand decoder took body %d, which is not on the hot path",
			r->body_case);
	}
	sseq__request__free_unpacked(r, NULL);
}

/* Little-endian bytes from the input, zero past its end. */
static uint64_t take(const uint8_t *data, size_t size, size_t *off, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++, (*off)++)
		if (*off < size)
			v |= (uint64_t)data[*off] << (8 * i);
	return v;
}

/* The same bytes read as the reply's fields: tag, status, handle, point, message. */
static void reply_round_trips(const uint8_t *data, size_t size)
{
	uint8_t out[WIRE_REPLY_MAX + 64];
	char msg[64];
	size_t off = 0, mlen, n, len;
	uint64_t flags = take(data, size, &off, 1);
	uint64_t tag = take(data, size, &off, 8);
	int status = (int)(int32_t)take(data, size, &off, 4);
	uint64_t handle = flags & 1 ? take(data, size, &off, 8) : 0;
	struct seq_point at = {(uint32_t)take(data, size, &off, 4), take(data, size, &off, 8)};
	bool with_point = flags & 2;
	Sseq__Message *m;

	/* Whatever is left, up to a NUL, as the message. */
	mlen = off < size ? size - off : 0;
	if (mlen > sizeof(msg) - 1)
		mlen = sizeof(msg) - 1;
	memcpy(msg, data + (off < size ? off : 0), mlen);
	msg[mlen] = '\0';
	mlen = strlen(msg);

	n = wire_encode_reply(out, tag, status, msg, handle, with_point ? &at : NULL);
	len = frame_get_len(out);
	if (n != len + 4 || n > WIRE_REPLY_MAX + mlen)
		disagree("encoded %zu bytes under a prefix of %zu (limit %zu)", n, len,
			(size_t)WIRE_REPLY_MAX + mlen);
	m = sseq__message__unpack(NULL, len, out + 4);
	if (!m)
		disagree("protobuf-c refuses the encoded reply");
	if (m->body_case != SSEQ__MESSAGE__BODY_REPLY || m->base.n_unknown_fields ||
		m->reply->base.n_unknown_fields || m->reply->welcome)
		disagree("the encoded reply is not a plain Reply");
	if (m->reply->tag != tag || (int)m->reply->status != status || m->reply->handle != handle ||
		strcmp(m->reply->message, msg) != 0)
		disagree("reply tag %" PRIu64 " status %d handle %" PRIu64 " came back as %" PRIu64
			 " %d %" PRIu64,
			tag, status, handle, m->reply->tag, (int)m->reply->status,
			m->reply->handle);
	if (!with_point != !m->reply->point)
		disagree("point %s, came back %s", with_point ? "sent" : "not sent",
			m->reply->point ? "present" : "absent");
	if (with_point && (m->reply->point->stream != at.stream || m->reply->point->seq != at.seq))
		disagree("point %" PRIu32 ":%" PRIu64 " came back as %" PRIu32 ":%" PRIu64,
			at.stream, at.seq, m->reply->point->stream, m->reply->point->seq);
	sseq__message__free_unpacked(m, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* libFuzzer's buffer is exactly `size` bytes, so ASan sees any read past the frame. */
	request_agrees(data, size);
	reply_round_trips(data, size);
	return 0;
}
