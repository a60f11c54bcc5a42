/* libsseq's kernel argument packing: every argument type through the wire and back as the
 * daemon sees it, launch shapes, and what the daemon would refuse refused here first. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "client.h"
#include "test-client.h"

/* ex through the wire and back, as the daemon would see it. Free with
 * sseq__execute__free_unpacked. */
static Sseq__Execute *execute_roundtrip(const Sseq__Execute *ex)
{
	size_t n = sseq__execute__get_packed_size(ex);
	uint8_t *buf = malloc(n);
	sseq__execute__pack(ex, buf);
	Sseq__Execute *back = sseq__execute__unpack(NULL, n, buf);
	free(buf);
	return back;
}

START_TEST(test_args_pack_types_and_access)
{
	struct sseq_arg args[] = {
		SSEQ_IN(5),
		SSEQ_OUT(6),
		SSEQ_INOUT(7),
		SSEQ_F32(2.5),
		SSEQ_F64(-1.25),
		SSEQ_I32(-3),
		SSEQ_U32(4000000000u),
		SSEQ_I64(-5000000000ll),
		SSEQ_U64(1ull << 40),
	};
	struct args_pack p;
	ck_assert_int_eq(args_pack(&p, args, 9, NULL), 0);
	p.ex.target_case = SSEQ__EXECUTE__TARGET_KERNEL;
	p.ex.kernel = "axpy";
	Sseq__Execute *ex = execute_roundtrip(&p.ex);
	ck_assert_ptr_nonnull(ex);
	ck_assert_str_eq(ex->kernel, "axpy");
	ck_assert_uint_eq(ex->n_args, 9);
	ck_assert_int_eq(ex->launch_shape_case, SSEQ__EXECUTE__LAUNCH_SHAPE__NOT_SET);
	ck_assert_int_eq(ex->args[0]->value_case, SSEQ__ARG__VALUE_BUFFER);
	ck_assert_uint_eq(ex->args[0]->buffer->handle, 5);
	ck_assert_int_eq(ex->args[0]->buffer->access, SSEQ__ACCESS__ACCESS_IN);
	ck_assert_int_eq(ex->args[1]->buffer->access, SSEQ__ACCESS__ACCESS_OUT);
	ck_assert_int_eq(ex->args[2]->buffer->access, SSEQ__ACCESS__ACCESS_INOUT);
	ck_assert_int_eq(ex->args[3]->value_case, SSEQ__ARG__VALUE_F32);
	ck_assert(ex->args[3]->f32 == 2.5f);
	ck_assert_int_eq(ex->args[4]->value_case, SSEQ__ARG__VALUE_F64);
	ck_assert(ex->args[4]->f64 == -1.25);
	ck_assert_int_eq(ex->args[5]->value_case, SSEQ__ARG__VALUE_I32);
	ck_assert_int_eq(ex->args[5]->i32, -3);
	ck_assert_int_eq(ex->args[6]->value_case, SSEQ__ARG__VALUE_U32);
	ck_assert_uint_eq(ex->args[6]->u32, 4000000000u);
	ck_assert_int_eq(ex->args[7]->value_case, SSEQ__ARG__VALUE_I64);
	ck_assert_int_eq(ex->args[7]->i64, -5000000000ll);
	ck_assert_int_eq(ex->args[8]->value_case, SSEQ__ARG__VALUE_U64);
	ck_assert_uint_eq(ex->args[8]->u64, 1ull << 40);
	/* A zero scalar is still sent: the oneof case survives a default value. */
	sseq__execute__free_unpacked(ex, NULL);
	args_pack_finish(&p);
}
END_TEST

START_TEST(test_args_pack_narrow_scalars_travel_widened_and_bytes_by_value)
{
	const struct {
		int32_t a, b, c;
	} v12 = {1, -2, 3};
	struct sseq_arg args[] = {
		SSEQ_I8(-128),
		SSEQ_U8(255),
		SSEQ_I16(300000), /* out of range: sent as it is, for the daemon to refuse */
		SSEQ_U16(65535),
		SSEQ_F16(0x3c00),
		SSEQ_BF16(0x3f80),
		SSEQ_BYTES(&v12, sizeof(v12), 4),
	};
	struct args_pack p;

	ck_assert_int_eq(args_pack(&p, args, 7, NULL), 0);
	p.ex.target_case = SSEQ__EXECUTE__TARGET_KERNEL;
	p.ex.kernel = "k";
	Sseq__Execute *ex = execute_roundtrip(&p.ex);
	ck_assert_ptr_nonnull(ex);
	ck_assert_int_eq(ex->args[0]->value_case, SSEQ__ARG__VALUE_I8);
	ck_assert_int_eq(ex->args[0]->i8, -128);
	ck_assert_int_eq(ex->args[1]->value_case, SSEQ__ARG__VALUE_U8);
	ck_assert_uint_eq(ex->args[1]->u8, 255);
	ck_assert_int_eq(ex->args[2]->value_case, SSEQ__ARG__VALUE_I16);
	ck_assert_int_eq(ex->args[2]->i16, 300000);
	ck_assert_int_eq(ex->args[3]->value_case, SSEQ__ARG__VALUE_U16);
	ck_assert_uint_eq(ex->args[3]->u16, 65535);
	ck_assert_int_eq(ex->args[4]->value_case, SSEQ__ARG__VALUE_F16);
	ck_assert_uint_eq(ex->args[4]->f16, 0x3c00);
	ck_assert_int_eq(ex->args[5]->value_case, SSEQ__ARG__VALUE_BF16);
	ck_assert_uint_eq(ex->args[5]->bf16, 0x3f80);
	ck_assert_int_eq(ex->args[6]->value_case, SSEQ__ARG__VALUE_BYTES);
	ck_assert_uint_eq(ex->args[6]->bytes->data.len, 12);
	ck_assert_mem_eq(ex->args[6]->bytes->data.data, &v12, 12);
	ck_assert_uint_eq(ex->args[6]->bytes->align, 4);
	sseq__execute__free_unpacked(ex, NULL);
	args_pack_finish(&p);

	/* Bytes the daemon would refuse are refused here: none, too many, an alignment that
	 * is no power of two or does not divide the size. */
	{
		const char big[4097] = {0};
		const struct sseq_arg bad[] = {SSEQ_BYTES(NULL, 4, 4), SSEQ_BYTES(&v12, 0, 1),
			SSEQ_BYTES(big, sizeof(big), 1), SSEQ_BYTES(&v12, 12, 3),
			SSEQ_BYTES(&v12, 12, 8), SSEQ_BYTES(big, 512, 512)};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			ck_assert_msg(args_pack(&p, &bad[i], 1, NULL) == -EINVAL, "bad[%zu]", i);
			args_pack_finish(&p);
		}
	}
}
END_TEST

START_TEST(test_args_pack_zero_scalar_keeps_its_type)
{
	struct sseq_arg args[] = {SSEQ_F32(0), SSEQ_U64(0)};
	struct args_pack p;
	ck_assert_int_eq(args_pack(&p, args, 2, NULL), 0);
	p.ex.target_case = SSEQ__EXECUTE__TARGET_KERNEL;
	p.ex.kernel = "fill";
	Sseq__Execute *ex = execute_roundtrip(&p.ex);
	ck_assert_int_eq(ex->args[0]->value_case, SSEQ__ARG__VALUE_F32);
	ck_assert_int_eq(ex->args[1]->value_case, SSEQ__ARG__VALUE_U64);
	sseq__execute__free_unpacked(ex, NULL);
	args_pack_finish(&p);
}
END_TEST

START_TEST(test_args_pack_launch_shapes)
{
	struct sseq_arg a = SSEQ_OUT(1);
	struct args_pack p;
	struct sseq_launch el = {.elements = 1000};
	ck_assert_int_eq(args_pack(&p, &a, 1, &el), 0);
	ck_assert_int_eq(p.ex.launch_shape_case, SSEQ__EXECUTE__LAUNCH_SHAPE_ELEMENTS);
	ck_assert_uint_eq(p.ex.elements, 1000);
	args_pack_finish(&p);

	struct sseq_launch g = {.grid = {4}, .block = {256}, .shared_mem = 64};
	ck_assert_int_eq(args_pack(&p, &a, 1, &g), 0);
	ck_assert_int_eq(p.ex.launch_shape_case, SSEQ__EXECUTE__LAUNCH_SHAPE_GRID);
	ck_assert_uint_eq(p.ex.grid->grid_x, 4);
	ck_assert_uint_eq(p.ex.grid->grid_y, 1);
	ck_assert_uint_eq(p.ex.grid->block_x, 256);
	ck_assert_uint_eq(p.ex.grid->block_z, 1);
	ck_assert_uint_eq(p.ex.grid->shared_mem, 64);
	args_pack_finish(&p);

	struct sseq_launch none = {0};
	ck_assert_int_eq(args_pack(&p, &a, 1, &none), 0);
	ck_assert_int_eq(p.ex.launch_shape_case, SSEQ__EXECUTE__LAUNCH_SHAPE__NOT_SET);
	args_pack_finish(&p);
}
END_TEST

START_TEST(test_args_pack_refuses_malformed)
{
	struct args_pack p;
	struct sseq_arg zero = SSEQ_IN(0);
	ck_assert_int_eq(args_pack(&p, &zero, 1, NULL), -EINVAL);
	args_pack_finish(&p);
	struct sseq_arg noaccess = sseq_arg_buffer(3, (enum sseq_access)0);
	ck_assert_int_eq(args_pack(&p, &noaccess, 1, NULL), -EINVAL);
	args_pack_finish(&p);
	struct sseq_arg badtype = {.type = (enum sseq_arg_type)99};
	ck_assert_int_eq(args_pack(&p, &badtype, 1, NULL), -EINVAL);
	args_pack_finish(&p);
}
END_TEST

static Suite *args_suite(void)
{
	Suite *s = suite_create("client-args");
	TCase *tc = tcase_create("args");

	tcase_add_test(tc, test_args_pack_types_and_access);
	tcase_add_test(tc, test_args_pack_zero_scalar_keeps_its_type);
	tcase_add_test(tc, test_args_pack_narrow_scalars_travel_widened_and_bytes_by_value);
	tcase_add_test(tc, test_args_pack_launch_shapes);
	tcase_add_test(tc, test_args_pack_refuses_malformed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return client_test_run(args_suite());
}
