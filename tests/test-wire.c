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
		ck_assert_mem_eq(&w.rq.copy_h2d->staging, &ref->copy_h2d->staging,
				 5 * sizeof(uint64_t));
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
		len = (size_t)buf[0] | (size_t)buf[1] << 8 | (size_t)buf[2] << 16 |
		      (size_t)buf[3] << 24;
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
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
