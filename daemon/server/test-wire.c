/* The hand-written hot-path decoder must agree with protobuf-c: on every request it
 * accepts it must read exactly what protobuf-c reads, and the hand-encoded replies must
 * unpack with protobuf-c to the same values. Random and mutated frames, seeded. */
#include <check.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sseq-frame.h"
#include "wire.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A random value biased to the edges (0, small, huge) where varints break. */
static uint64_t rnd_val(void)
{
	switch (rnd() % 4) {
	case 0:
		return 0;
	case 1:
		return rnd() % 300;
	case 2:
		return UINT64_MAX - rnd() % 3;
	default:
		return rnd();
	}
}

static void args_equal(const Sseq__Arg *a, const Sseq__Arg *b)
{
	ck_assert_int_eq(a->value_case, b->value_case);
	switch (a->value_case) {
	case SSEQ__ARG__VALUE_BUFFER:
		ck_assert_uint_eq(a->buffer->handle, b->buffer->handle);
		ck_assert_int_eq(a->buffer->access, b->buffer->access);
		break;
	case SSEQ__ARG__VALUE_I64:
		ck_assert_int_eq(a->i64, b->i64);
		break;
	case SSEQ__ARG__VALUE_U64:
		ck_assert_uint_eq(a->u64, b->u64);
		break;
	case SSEQ__ARG__VALUE_I32:
		ck_assert_int_eq(a->i32, b->i32);
		break;
	case SSEQ__ARG__VALUE_U32:
		ck_assert_uint_eq(a->u32, b->u32);
		break;
	case SSEQ__ARG__VALUE_F32:
		ck_assert(memcmp(&a->f32, &b->f32, 4) == 0);
		break;
	case SSEQ__ARG__VALUE_F64:
		ck_assert(memcmp(&a->f64, &b->f64, 8) == 0);
		break;
	default:
		break;
	}
}

/* If the hand decoder accepts the frame, protobuf-c must read the same request. */
static void check_agrees(const uint8_t *buf, size_t len, unsigned *accepted)
{
	static struct wire_request w;
	Sseq__Request *ref;

	if (!wire_decode_request(buf, len, &w))
		return;
	(*accepted)++;
	ref = sseq__request__unpack(NULL, len, buf);
	ck_assert_msg(ref != NULL, "hand decoder accepted a frame protobuf-c rejects");
	ck_assert_uint_eq(w.rq.tag, ref->tag);
	ck_assert_int_eq(w.rq.want_completion, ref->want_completion);
	ck_assert_int_eq(w.rq.body_case, ref->body_case);
	switch (ref->body_case) {
	case SSEQ__REQUEST__BODY_EXECUTE:
		ck_assert_int_eq(ref->execute->target_case, SSEQ__EXECUTE__TARGET_KERNEL);
		ck_assert_str_eq(w.rq.execute->kernel, ref->execute->kernel);
		ck_assert_uint_eq(w.rq.execute->n_args, ref->execute->n_args);
		for (size_t i = 0; i < ref->execute->n_args; i++)
			args_equal(w.rq.execute->args[i], ref->execute->args[i]);
		ck_assert_int_eq(w.rq.execute->launch_shape_case, ref->execute->launch_shape_case);
		if (ref->execute->launch_shape_case == SSEQ__EXECUTE__LAUNCH_SHAPE_ELEMENTS)
			ck_assert_uint_eq(w.rq.execute->elements, ref->execute->elements);
		break;
	case SSEQ__REQUEST__BODY_COPY_H2D:
		ck_assert_mem_eq(
			&w.rq.copy_h2d->staging, &ref->copy_h2d->staging, 5 * sizeof(uint64_t));
		break;
	case SSEQ__REQUEST__BODY_COPY_D2H:
		ck_assert_mem_eq(&w.rq.copy_d2h->src, &ref->copy_d2h->src, 5 * sizeof(uint64_t));
		break;
	case SSEQ__REQUEST__BODY_COPY_D2D:
		ck_assert_mem_eq(&w.rq.copy_d2d->src, &ref->copy_d2d->src, 5 * sizeof(uint64_t));
		break;
	default:
		ck_abort_msg("hand decoder accepted body %d", ref->body_case);
	}
	sseq__request__free_unpacked(ref, NULL);
}

static size_t random_request(uint8_t *buf)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Execute e = SSEQ__EXECUTE__INIT;
	Sseq__CopyH2D h = SSEQ__COPY_H2_D__INIT;
	Sseq__CopyD2H d = SSEQ__COPY_D2_H__INIT;
	Sseq__CopyD2D dd = SSEQ__COPY_D2_D__INIT;
	Sseq__Sync sy = SSEQ__SYNC__INIT;
	Sseq__Arg args[8], *argp[8];
	Sseq__BufferArg ba[8];
	char name[16];

	rq.tag = rnd_val();
	rq.want_completion = rnd() & 1;
	switch (rnd() % 5) {
	case 0:
		h.staging = rnd_val();
		h.staging_offset = rnd_val();
		h.dst = rnd_val();
		h.dst_offset = rnd_val();
		h.length = rnd_val();
		rq.body_case = SSEQ__REQUEST__BODY_COPY_H2D;
		rq.copy_h2d = &h;
		break;
	case 1:
		d.src = rnd_val();
		d.src_offset = rnd_val();
		d.staging = rnd_val();
		d.staging_offset = rnd_val();
		d.length = rnd_val();
		rq.body_case = SSEQ__REQUEST__BODY_COPY_D2H;
		rq.copy_d2h = &d;
		break;
	case 2:
		dd.src = rnd_val();
		dd.src_offset = rnd_val();
		dd.dst = rnd_val();
		dd.dst_offset = rnd_val();
		dd.length = rnd_val();
		rq.body_case = SSEQ__REQUEST__BODY_COPY_D2D;
		rq.copy_d2d = &dd;
		break;
	case 3:
		rq.body_case = SSEQ__REQUEST__BODY_SYNC; /* not on the hot path: declined */
		rq.sync = &sy;
		break;
	default:
		snprintf(name, sizeof(name), "k%u", (unsigned)(rnd() % 1000));
		e.target_case = SSEQ__EXECUTE__TARGET_KERNEL;
		e.kernel = name;
		e.n_args = rnd() % 8;
		e.args = argp;
		for (size_t i = 0; i < e.n_args; i++) {
			sseq__arg__init(&args[i]);
			argp[i] = &args[i];
			switch (rnd() % 7) {
			case 0:
				sseq__buffer_arg__init(&ba[i]);
				ba[i].handle = rnd_val();
				ba[i].access = (Sseq__Access)(rnd() % 4);
				args[i].value_case = SSEQ__ARG__VALUE_BUFFER;
				args[i].buffer = &ba[i];
				break;
			case 1:
				args[i].value_case = SSEQ__ARG__VALUE_I64;
				args[i].i64 = (int64_t)rnd_val();
				break;
			case 2:
				args[i].value_case = SSEQ__ARG__VALUE_U64;
				args[i].u64 = rnd_val();
				break;
			case 3:
				args[i].value_case = SSEQ__ARG__VALUE_I32;
				args[i].i32 = (int32_t)rnd_val();
				break;
			case 4:
				args[i].value_case = SSEQ__ARG__VALUE_U32;
				args[i].u32 = (uint32_t)rnd_val();
				break;
			case 5:
				args[i].value_case = SSEQ__ARG__VALUE_F32;
				args[i].f32 = (float)(int64_t)rnd_val();
				break;
			default:
				args[i].value_case = SSEQ__ARG__VALUE_F64;
				args[i].f64 = (double)(int64_t)rnd_val();
				break;
			}
		}
		if (rnd() & 1) {
			e.launch_shape_case = SSEQ__EXECUTE__LAUNCH_SHAPE_ELEMENTS;
			e.elements = rnd_val();
		}
		rq.body_case = SSEQ__REQUEST__BODY_EXECUTE;
		rq.execute = &e;
		break;
	}
	return sseq__request__pack(&rq, buf);
}

START_TEST(test_hand_decoder_agrees_with_protobuf_c)
{
	static uint8_t buf[4096];
	unsigned accepted = 0, accepted_mutated = 0;

	for (int i = 0; i < 20000; i++) {
		size_t len = random_request(buf);
		check_agrees(buf, len, &accepted);
		/* Flip, truncate or extend: the decoder must stay in bounds and agree or
		 * decline (ASan watches the bounds). */
		for (int m = 0; m < 4; m++) {
			uint8_t mut[4096];
			size_t mlen = len;
			memcpy(mut, buf, len);
			switch (rnd() % 3) {
			case 0:
				if (mlen)
					mut[rnd() % mlen] ^= (uint8_t)(1u << (rnd() % 8));
				break;
			case 1:
				mlen = mlen ? rnd() % mlen : 0;
				break;
			default:
				mut[mlen++] = (uint8_t)rnd();
				break;
			}
			uint8_t *exact = malloc(mlen ? mlen : 1);
			memcpy(exact, mut, mlen);
			check_agrees(exact, mlen, &accepted_mutated);
			free(exact);
		}
	}
	/* Most unmutated requests are hot-path ones (4 of 5 kinds). */
	ck_assert_uint_gt(accepted, 20000 * 7 / 10);
	printf("test-wire: accepted %u of 20000 random requests, %u of 80000 mutated ones\n",
		accepted, accepted_mutated);
}
END_TEST

/* ---- varints longer than they need be ---------------------------------------------
 * protobuf-c 1.4.1 reads a key in at most 5 bytes (parse_tag_and_wiretype), a length
 * prefix in at most 5 (scan_length_prefixed_data), a value in at most 10 keeping the low
 * 64 bits, and a bool as "any 7-bit group nonzero" of those 10. Encoders may pad any of
 * them with 0x80 groups, so the hand decoder must draw the same lines. */

/* The hand decoder must decline a frame protobuf-c refuses. */
static void check_refused(const uint8_t *buf, size_t len)
{
	static struct wire_request w;
	Sseq__Request *ref = sseq__request__unpack(NULL, len, buf);

	ck_assert_msg(ref == NULL, "premise: protobuf-c 1.4.1 refuses this frame");
	ck_assert_int_eq(wire_decode_request(buf, len, &w), 0);
}

/* Both decode it, to the same request. */
static void check_accepted(const uint8_t *buf, size_t len)
{
	static struct wire_request w;
	unsigned accepted = 0;

	ck_assert_int_eq(wire_decode_request(buf, len, &w), 1);
	check_agrees(buf, len, &accepted);
	ck_assert_uint_eq(accepted, 1);
}

START_TEST(test_key_of_6_bytes_declined)
{
	/* tag = 1 under a 6-byte key, then an empty CopyD2H. */
	static const uint8_t six[] = {0x88, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01, 0x8a, 0x01, 0x00};
	/* The same under a 5-byte key, which protobuf-c takes. */
	static const uint8_t five[] = {0x88, 0x80, 0x80, 0x80, 0x00, 0x01, 0x8a, 0x01, 0x00};
	/* Inside the body: CopyH2D{length (field 5) = 7} under a 6-byte key. */
	static const uint8_t nested[] = {
		0x82, 0x01, 0x07, 0xa8, 0x80, 0x80, 0x80, 0x80, 0x00, 0x07};

	check_refused(six, sizeof(six));
	check_accepted(five, sizeof(five));
	check_refused(nested, sizeof(nested));
}
END_TEST

START_TEST(test_length_prefix_of_6_bytes_declined)
{
	/* A CopyD2H whose length prefix 0 takes 6 bytes: the daemon answered "copy of 0
	 * bytes" where protobuf-c, and so the protocol, says PROTOCOL_ERROR and close. */
	static const uint8_t six[] = {0x8a, 0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
	static const uint8_t five[] = {0x8a, 0x01, 0x80, 0x80, 0x80, 0x80, 0x00};
	/* Execute{kernel "k", args: Arg{} whose prefix 0 takes 6 bytes}. */
	static const uint8_t nested[] = {
		0x9a, 0x01, 0x0a, 0x0a, 0x01, 'k', 0x1a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};

	check_refused(six, sizeof(six));
	check_accepted(five, sizeof(five));
	check_refused(nested, sizeof(nested));
}
END_TEST

START_TEST(test_want_completion_of_10_byte_varint)
{
	/* want_completion = a 10-byte varint whose last group is 2: past bit 63, so the low 64
	 * bits are 0, but protobuf-c's bool looks at every group and reads true. */
	static const uint8_t f[] = {0x08, 0x05, 0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
		0x80, 0x80, 0x02, 0x8a, 0x01, 0x00};
	static struct wire_request w;
	Sseq__Request *ref = sseq__request__unpack(NULL, sizeof(f), f);

	ck_assert_ptr_nonnull(ref);
	ck_assert_int_eq(ref->want_completion, 1);
	sseq__request__free_unpacked(ref, NULL);
	ck_assert_int_eq(wire_decode_request(f, sizeof(f), &w), 1);
	ck_assert_int_eq(w.rq.want_completion, 1);
}
END_TEST

/* An encoder of the hot-path requests that pads keys, length prefixes and values with
 * redundant 0x80 groups, sometimes past what protobuf-c reads. */
struct enc {
	uint8_t b[1024];
	size_t n;
};

/* v in its shortest form plus `pad` groups of nothing. */
static void enc_varint(struct enc *e, uint64_t v, unsigned pad)
{
	while (v >= 0x80) {
		e->b[e->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	if (!pad) {
		e->b[e->n++] = (uint8_t)v;
		return;
	}
	e->b[e->n++] = (uint8_t)(v | 0x80);
	while (--pad)
		e->b[e->n++] = 0x80;
	e->b[e->n++] = 0x00;
}

/* Mostly shortest; now and then 1 to 6 groups more. */
static unsigned rnd_pad(void)
{
	return rnd() % 4 ? 0 : 1 + (unsigned)(rnd() % 6);
}

static void enc_key(struct enc *e, unsigned field, unsigned wt)
{
	enc_varint(e, (uint64_t)field << 3 | wt, rnd_pad());
}

static void enc_uint(struct enc *e, unsigned field, uint64_t v)
{
	enc_key(e, field, 0);
	enc_varint(e, v, rnd_pad());
}

static void enc_sub(struct enc *e, unsigned field, const struct enc *sub)
{
	enc_key(e, field, 2);
	enc_varint(e, sub->n, rnd_pad());
	memcpy(e->b + e->n, sub->b, sub->n);
	e->n += sub->n;
}

/* A bool: shortest, padded, or 10 bytes of random groups (the last beyond bit 63). */
static void enc_bool(struct enc *e, unsigned field)
{
	enc_key(e, field, 0);
	if (rnd() % 3) {
		enc_varint(e, rnd() & 1, rnd_pad());
		return;
	}
	for (int i = 0; i < 9; i++)
		e->b[e->n++] = (uint8_t)(0x80 | (rnd() % 3 ? 0 : rnd() & 0x7f));
	e->b[e->n++] = (uint8_t)(rnd() & 0x7f);
}

static void enc_request(struct enc *e)
{
	struct enc body = {.n = 0};

	enc_uint(e, 1, rnd_val());
	if (rnd() & 1)
		enc_bool(e, 2);
	if (rnd() % 4) {
		for (unsigned f = 1; f <= 5; f++)
			if (rnd() % 4)
				enc_uint(&body, f, rnd_val());
		enc_sub(e, 16 + (unsigned)(rnd() % 3), &body);
		return;
	}
	enc_key(&body, 1, 2);
	enc_varint(&body, 2, rnd_pad());
	memcpy(body.b + body.n, "k1", 2);
	body.n += 2;
	for (unsigned i = rnd() % 5; i; i--) {
		struct enc arg = {.n = 0}, buf = {.n = 0};
		switch (rnd() % 4) {
		case 0:
			enc_uint(&buf, 1, rnd_val());
			enc_uint(&buf, 2, rnd() % 4);
			enc_sub(&arg, 1, &buf);
			break;
		case 1:
			enc_uint(&arg, 2 + (unsigned)(rnd() % 2) * 4, rnd_val()); /* i64, i32 */
			break;
		default:
			enc_uint(&arg, 3 + (unsigned)(rnd() % 2) * 4, rnd_val()); /* u64, u32 */
			break;
		}
		enc_sub(&body, 3, &arg);
	}
	if (rnd() & 1)
		enc_uint(&body, 5, rnd_val());
	enc_sub(e, 19, &body);
}

START_TEST(test_padded_varints_agree)
{
	unsigned accepted = 0;

	for (int i = 0; i < 20000; i++) {
		struct enc e = {.n = 0};
		enc_request(&e);
		check_agrees(e.b, e.n, &accepted);
	}
	/* Most frames stay inside protobuf-c's limits: the agreement was really checked. */
	ck_assert_uint_gt(accepted, 20000 / 10);
	printf("test-wire: accepted %u of 20000 padded requests\n", accepted);
}
END_TEST

START_TEST(test_hand_encoded_reply_unpacks)
{
	for (int i = 0; i < 20000; i++) {
		uint8_t buf[WIRE_REPLY_MAX + 64];
		char msg[40];
		struct seq_point at = {(uint32_t)(rnd() % 16), rnd_val()};
		uint64_t tag = rnd_val(), handle = rnd() & 1 ? rnd_val() : 0;
		int status = (int)(rnd() % 19);
		bool with_point = rnd() & 1;
		size_t n, len;
		Sseq__Message *m;

		snprintf(msg, sizeof(msg), "%s", rnd() & 1 ? "" : "out of range: 123");
		n = wire_encode_reply(buf, tag, status, msg, handle, with_point ? &at : NULL);
		len = frame_get_len(buf);
		ck_assert_uint_eq(n, len + 4);
		m = sseq__message__unpack(NULL, len, buf + 4);
		ck_assert_ptr_nonnull(m);
		ck_assert_int_eq(m->body_case, SSEQ__MESSAGE__BODY_REPLY);
		ck_assert_uint_eq(m->reply->tag, tag);
		ck_assert_int_eq(m->reply->status, status);
		ck_assert_str_eq(m->reply->message, msg);
		ck_assert_uint_eq(m->reply->handle, handle);
		if (with_point) {
			ck_assert_ptr_nonnull(m->reply->point);
			ck_assert_uint_eq(m->reply->point->stream, at.stream);
			ck_assert_uint_eq(m->reply->point->seq, at.seq);
		} else {
			ck_assert_ptr_null(m->reply->point);
		}
		sseq__message__free_unpacked(m, NULL);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("wire");
	TCase *tc = tcase_create("wire");
	SRunner *sr;
	const char *seed = getenv("SSEQ_WIRE_SEED");
	int failed;

	rng_state = seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL);
	printf("test-wire: seed=%" PRIu64 " (set SSEQ_WIRE_SEED to reproduce)\n", rng_state);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_hand_decoder_agrees_with_protobuf_c);
	tcase_add_test(tc, test_hand_encoded_reply_unpacks);
	tcase_add_test(tc, test_key_of_6_bytes_declined);
	tcase_add_test(tc, test_length_prefix_of_6_bytes_declined);
	tcase_add_test(tc, test_want_completion_of_10_byte_varint);
	tcase_add_test(tc, test_padded_varints_agree);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
