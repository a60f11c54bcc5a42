/* libsseq's handles against the scripted fake daemon: each connection's handles its own,
 * refused on another before anything is sent, and the daemon's generation bits kept. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "client.h"
#include "test-client-fake.h"
#include "test-client.h"

/* Two connections get the same handle numbers from their daemons; the handles the
 * library returns differ, and one connection refuses the other's before sending
 * anything, naming both sessions, where it used to act on its own buffer of that number. */
START_TEST(test_client_handle_of_other_connection_refused)
{
	struct fake *fa = fake_start(), *fb = fake_start();
	fb->session = 43;
	struct sseq *a = fake_connect(fa, 0), *b = fake_connect(fb, 0);
	uint64_t ha, hb, sl, t;
	float x[4] = {1, 2, 3, 4}, y[4] = {0};

	ck_assert_int_eq(sseq_alloc(a, sizeof(x), "a", &ha), 0);
	ck_assert_int_eq(sseq_alloc(b, sizeof(x), "b", &hb), 0);
	ck_assert_uint_ne(ha, hb);
	/* The daemon's number is in the low bits, as sseqctl shows it. */
	ck_assert_uint_eq(ha & 0xffffffffffffu, 1);
	ck_assert_uint_eq(hb & 0xffffffffffffu, 1);
	ck_assert_int_eq(sseq_sync(a), 0);
	const unsigned before = fake_requests(fa);
	struct sseq_arg args[] = {SSEQ_OUT(hb), SSEQ_F32(1), SSEQ_U64(4)};
	for (int k = 0;; k++) {
		int r;
		switch (k) {
		case 0:
			r = sseq_copy_h2d(a, hb, 0, x, sizeof(x), &t);
			break;
		case 1:
			r = sseq_copy_d2h(a, hb, 0, y, sizeof(y), &t);
			break;
		case 2:
			r = sseq_copy_d2d(a, ha, 0, hb, 0, 4, &t);
			break;
		case 3:
			r = sseq_copy_d2d(a, hb, 0, ha, 0, 4, &t);
			break;
		case 4:
			r = sseq_execute(a, "fill", args, 3, NULL, &t);
			break;
		case 5:
			r = sseq_slice(a, hb, 0, 4, "s", &sl);
			break;
		case 6:
			r = sseq_await(a, hb);
			break;
		case 7:
			r = sseq_free(a, hb);
			break;
		case 8:
			r = sseq_execute_function(a, hb, "f", args, 3, NULL, &t);
			break;
		default:
			r = 1;
			break;
		}
		if (r == 1)
			break;
		const char *msg = sseq_last_error_message(a);
		ck_assert_msg(r == -EINVAL, "case %d returned %d", k, r);
		ck_assert_msg(strstr(msg, "another connection (session 43") &&
				strstr(msg, "this one (session 42"),
			"case %d: '%s'", k, msg);
	}
	ck_assert_uint_eq(fake_requests(fa), before);
	/* Its own handles still reach the daemon as the daemon's numbers. */
	ck_assert_int_eq(sseq_copy_h2d(a, ha, 0, x, sizeof(x), &t), 0);
	ck_assert_int_eq(sseq_copy_d2h(a, ha, 0, y, sizeof(y), &t), 0);
	ck_assert_int_eq(sseq_wait(a, t), 0);
	ck_assert(y[3] == 4);
	ck_assert_int_eq(sseq_sync(a), 0);
	fake_stop(fb, b);
	fake_stop(fa, a);
}
END_TEST

/* A daemon handle with its top 16 bits set (a slot reused 65536 times) still comes and
 * goes exactly. */
START_TEST(test_client_handle_with_high_generation_round_trips)
{
	struct fake *f = fake_start();
	f->handle_gen = 0x12345u << 8;
	struct sseq *s = fake_connect(f, 0);
	uint64_t h, t;
	float x[4] = {1, 2, 3, 4}, y[4] = {0};

	ck_assert_int_eq(sseq_alloc(s, sizeof(x), "h", &h), 0);
	ck_assert_int_eq(sseq_copy_h2d(s, h, 0, x, sizeof(x), &t), 0);
	ck_assert_int_eq(sseq_copy_d2h(s, h, 0, y, sizeof(y), &t), 0);
	ck_assert_int_eq(sseq_wait(s, t), 0);
	ck_assert(y[2] == 3);
	fake_stop(f, s);
}
END_TEST

/* A daemon of protocol 1.9 is sent names the library chose: an Alloc's handle is back at
 * once, used in the same burst, and after a free its index is named again with another
 * generation; freeing a handle twice does not give two buffers one name. */
START_TEST(test_client_alloc_async_names_handles)
{
	struct fake *f = fake_start();
	f->minor = 9;
	struct sseq *s = fake_connect(f, 0);
	uint64_t a, b, c, d, e, t;
	float x[4] = {1, 2, 3, 4}, y[4] = {0};

	ck_assert_int_eq(sseq_alloc_async(s, sizeof(x), "a", &a), 0);
	ck_assert_int_eq(sseq_alloc_async(s, sizeof(x), "b", &b), 0);
	ck_assert_uint_ne(a, b);
	ck_assert(a & 0x80000000u);
	ck_assert_int_eq(sseq_copy_h2d(s, a, 0, x, sizeof(x), &t), 0);
	ck_assert_int_eq(sseq_copy_d2h(s, a, 0, y, sizeof(y), &t), 0);
	ck_assert_int_eq(sseq_wait(s, t), 0);
	ck_assert(y[3] == 4);
	ck_assert_uint_eq(f->named_allocs, 2);
	ck_assert_int_eq(sseq_free_async(s, a), 0);
	ck_assert_int_eq(sseq_alloc_async(s, sizeof(x), "c", &c), 0);
	/* a's index again, under a new generation: a itself names nothing now. */
	ck_assert_uint_eq(c & 0x7fffffffu, a & 0x7fffffffu);
	ck_assert_uint_ne(c, a);
	ck_assert_int_eq(sseq_free_async(s, c), 0);
	ck_assert_int_eq(sseq_free_async(s, c), 0);
	ck_assert_int_eq(sseq_alloc_async(s, sizeof(x), "d", &d), 0);
	ck_assert_int_eq(sseq_alloc_async(s, sizeof(x), "e", &e), 0);
	ck_assert_uint_ne(d & 0x7fffffffu, e & 0x7fffffffu);
	ck_assert_uint_ne(d & 0x7fffffffu, b & 0x7fffffffu);
	ck_assert_uint_ne(e & 0x7fffffffu, b & 0x7fffffffu);
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert_uint_eq(f->frees, 3);
	fake_stop(f, s);
}
END_TEST

/* A daemon older than 1.9 ignores a name: the library waits for its handle instead, and a
 * refusal is returned at once, as sseq_alloc's. */
START_TEST(test_client_alloc_async_waits_on_older_daemon)
{
	struct fake *f = fake_start();
	f->fail_alloc_size = 12;
	struct sseq *s = fake_connect(f, 0);
	uint64_t h;

	ck_assert_int_eq(sseq_alloc_async(s, 16, "h", &h), 0);
	ck_assert_uint_eq(h & 0xffffffffffffu, 1);
	ck_assert_int_eq(sseq_alloc_async(s, 12, "refused", &h), -SSEQ_ERR_UNKNOWN_HANDLE);
	ck_assert_uint_eq(f->named_allocs, 0);
	fake_stop(f, s);
}
END_TEST

static Suite *handles_suite(void)
{
	Suite *s = suite_create("client-handles");
	TCase *tc = tcase_create("handles");

	tcase_add_test(tc, test_client_handle_of_other_connection_refused);
	tcase_add_test(tc, test_client_handle_with_high_generation_round_trips);
	tcase_add_test(tc, test_client_alloc_async_names_handles);
	tcase_add_test(tc, test_client_alloc_async_waits_on_older_daemon);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return client_test_run(handles_suite());
}
