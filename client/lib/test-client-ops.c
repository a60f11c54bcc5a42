/* libsseq's requests in flight against the scripted fake daemon: where a refusal or a late
 * failure surfaces (wait, sync, the completion callback), when requests leave, and what
 * sseq_last_error_message says about a refusal made before anything was sent. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "test-client-fake.h"
#include "test-client.h"

/* A rejected request nobody waits on surfaces at the next sync, exactly once. */
START_TEST(test_client_unwaited_reply_error_kept_for_sync)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	f->fail_reply_tag = 4; /* hello=1, alloc=2, then 3, 4, 5 */
	uint64_t b;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(sseq_copy_d2d(s, b, 0, b, 32, 32, NULL), 0);
	ck_assert_int_eq(sseq_sync(s), -SSEQ_ERR_UNKNOWN_HANDLE);
	ck_assert_str_eq(sseq_last_error_message(s), "scripted failure");
	ck_assert_int_eq(sseq_sync(s), 0);
	fake_stop(f, s);
}
END_TEST

/* An accepted request that fails later (Completion with an error, no want_completion). */
START_TEST(test_client_late_failure_kept_for_sync)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	f->fail_late_tag = 3;
	uint64_t b;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	ck_assert_int_eq(sseq_copy_d2d(s, b, 0, b, 32, 32, NULL), 0);
	ck_assert_int_eq(sseq_sync(s), -SSEQ_ERR_DEVICE_ERROR);
	ck_assert_int_eq(sseq_next_error(s, NULL), 0);
	fake_stop(f, s);
}
END_TEST

/* Waiting on a tag returns its error and takes it: sync does not report it again. */
START_TEST(test_client_wait_takes_error)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	f->fail_reply_tag = 3;
	uint64_t b, t;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	ck_assert_int_eq(sseq_copy_d2d(s, b, 0, b, 32, 32, &t), 0);
	ck_assert_uint_eq(t, 3);
	ck_assert_int_eq(sseq_wait(s, t), -SSEQ_ERR_UNKNOWN_HANDLE);
	ck_assert_int_eq(sseq_sync(s), 0);
	fake_stop(f, s);
}
END_TEST

/* Sync reporting an error must not make a later wait on its tag claim success: the
 * caller would read a D2H destination that was never written. */
START_TEST(test_client_wait_truthful_after_sync_reported)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	f->fail_reply_tag = 4; /* hello, alloc, staging register, then the copy */
	uint64_t b, t;
	float x[4];
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, x, sizeof(x), &t), 0);
	ck_assert_int_eq(sseq_sync(s), -SSEQ_ERR_UNKNOWN_HANDLE);
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert_int_eq(sseq_next_error(s, NULL), 0);
	ck_assert_int_eq(sseq_wait(s, t), -SSEQ_ERR_UNKNOWN_HANDLE);
	ck_assert_int_eq(sseq_wait(s, t), 0); /* collected: gone */
	fake_stop(f, s);
}
END_TEST

struct seen {
	uint64_t tags[16];
	int status[16];
	unsigned n;
};

static int record_completion(void *data, uint64_t tag, int status)
{
	struct seen *seen = data;
	seen->tags[seen->n] = tag;
	seen->status[seen->n++] = status;
	return 1; /* taken care of */
}

/* Completions after the Sync's own, newest first: sync still waits for all of them,
 * each result lands, and the callback sees each tag once. */
START_TEST(test_client_completions_out_of_order)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	struct seen seen = {0};
	sseq_set_completion_callback(s, record_completion, &seen);
	uint64_t b;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	f->hold_completions = true;
	/* Set before the copies: requests may leave as soon as they are submitted. Tags:
	 * hello, alloc, the staging arena's register, the H2D, then the D2Hs. */
	f->fail_late_tag = 6;
	float one[4] = {1, 2, 3, 4}, out[3][4];
	uint64_t tags[4];
	ck_assert_int_eq(sseq_copy_h2d(s, b, 0, one, sizeof(one), &tags[0]), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(sseq_copy_d2h(s, b, 0, out[i], sizeof(one), &tags[i + 1]), 0);
	ck_assert_uint_eq(tags[2], 6);
	ck_assert_uint_eq(sseq_outstanding(s), 4);
	ck_assert_int_eq(sseq_sync(s), 0); /* the callback took the error */
	ck_assert_uint_eq(sseq_outstanding(s), 0);
	ck_assert_uint_eq(seen.n, 4);
	for (unsigned i = 0; i < 4; i++) {
		ck_assert_uint_eq(seen.tags[i], tags[3 - i]);
		ck_assert_int_eq(
			seen.status[i], tags[3 - i] == tags[2] ? -SSEQ_ERR_DEVICE_ERROR : 0);
	}
	ck_assert(out[0][3] == 4.0f);
	ck_assert(out[2][0] == 1.0f);
	ck_assert_int_eq(sseq_wait(s, tags[2]), -SSEQ_ERR_DEVICE_ERROR);
	fake_stop(f, s);
}
END_TEST

/* Nagle's rule: with no answer due a request leaves at once, so the daemon starts on it
 * while the application does other work; while answers are due later requests are held
 * back and batched, and they leave once an answer has come, with no wait call. */
START_TEST(test_client_sends_at_once_when_idle_batches_while_answers_due)
{
	struct fake *f = fake_start();
	ck_assert_int_eq(pipe2(f->release, O_CLOEXEC), 0);
	struct sseq *s = fake_connect(f, 0);
	uint64_t b;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	unsigned base = fake_requests(f); /* hello, alloc */
	__atomic_store_n(&f->hold_replies, true, __ATOMIC_SEQ_CST);
	const struct sseq_arg args[] = {SSEQ_OUT(b), SSEQ_F32(1), SSEQ_U64(16)};
	ck_assert_int_eq(sseq_execute(s, "fill", args, 3, NULL, NULL), 0);
	ck_assert_msg(fake_wait_for(&f->requests, base + 1),
		"an execute with nothing in flight was not sent");
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(sseq_execute(s, "fill", args, 3, NULL, NULL), 0);
	usleep(100 * 1000);
	ck_assert_msg(fake_requests(f) == base + 1, "%u requests sent while an answer was due",
		fake_requests(f) - base - 1);
	__atomic_store_n(&f->hold_replies, false, __ATOMIC_SEQ_CST);
	ck_assert_int_eq(write(f->release[1], "", 1), 1);
	ck_assert(fake_wait_for(&f->released, 1));
	/* The answer is in the socket: the next submission reads it and sends the batch. */
	ck_assert_int_eq(sseq_execute(s, "fill", args, 3, NULL, NULL), 0);
	ck_assert_msg(fake_wait_for(&f->requests, base + 6),
		"the held requests were not sent after the answer came (%u of 5)",
		fake_requests(f) - base - 1);
	ck_assert_int_eq(sseq_sync(s), 0);
	fake_stop(f, s);
}
END_TEST

/* A call refused before anything is sent describes its own failure, never the daemon's
 * message about an earlier request (sseq_last_error_message would blame the wrong one). */
START_TEST(test_client_local_refusal_replaces_daemon_message)
{
	struct fake *f = fake_start();
	f->fail_alloc_size = 13;
	struct sseq *s = fake_connect(f, 0);
	uint64_t b, t, m, scratch;
	float x[4] = {0};
	void *p;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	const struct sseq_arg good[] = {SSEQ_OUT(b), SSEQ_F32(1), SSEQ_U64(16)};
	struct sseq_arg bad[] = {SSEQ_OUT(b)};
	bad[0].access = (enum sseq_access)0;
	struct sseq_stats st = {.size = 8};
	for (int k = 0;; k++) {
		ck_assert_int_eq(sseq_alloc(s, 13, NULL, &scratch), -SSEQ_ERR_UNKNOWN_HANDLE);
		ck_assert_str_eq(sseq_last_error_message(s), "scripted failure");
		int r;
		switch (k) {
		case 0:
			r = sseq_load_module(s, "", &m);
			break;
		case 1:
			r = sseq_load_module(s, NULL, &m);
			break;
		case 2:
			r = sseq_execute(s, "", good, 3, NULL, NULL);
			break;
		case 3:
			r = sseq_execute(s, "fill", bad, 1, NULL, NULL);
			break;
		case 4:
			r = sseq_execute_function(s, 0, "f", good, 3, NULL, NULL);
			break;
		case 5:
			r = sseq_execute_function(s, 1, "", good, 3, NULL, NULL);
			break;
		case 6:
			r = sseq_copy_h2d(s, b, 0, NULL, 4, &t);
			break;
		case 7:
			r = sseq_copy_d2h(s, b, 0, x, 0, &t);
			break;
		case 8:
			r = sseq_copy_d2d(s, b, 0, b, 32, 0, &t);
			break;
		case 9:
			r = sseq_host_alloc(s, 0, &p);
			break;
		case 10:
			r = sseq_host_free(s, x);
			break;
		case 11:
			r = sseq_set_lane(s, 5);
			break;
		case 12:
			r = sseq_wait(s, 9999);
			break;
		case 13:
			r = sseq_stats(s, &st);
			break;
		case 14:
			r = sseq_poll(s, 0);
			break;
		default:
			r = 1;
			break;
		}
		if (r == 1)
			break;
		const char *msg = sseq_last_error_message(s);
		ck_assert_msg(r < 0 && !SSEQ_IS_DAEMON_ERROR(r), "case %d returned %d", k, r);
		ck_assert_msg(!strstr(msg, "scripted"), "case %d (%s) reports '%s'", k,
			sseq_strerror(r), msg);
		ck_assert_msg(msg[0], "case %d (%s) says nothing", k, sseq_strerror(r));
		ck_assert_uint_eq(sseq_last_error_tag(s), 0);
	}
	ck_assert_int_eq(sseq_sync(s), 0);
	fake_stop(f, s);
}
END_TEST

START_TEST(test_client_strerror_covers_all)
{
	for (int st = 1; st < SSEQ_ERR_END - SSEQ_ERR_BASE; st++) {
		const char *m = sseq_strerror(-(SSEQ_ERR_BASE + st));
		ck_assert_ptr_nonnull(m);
		ck_assert_str_ne(m, "unknown daemon status");
	}
	ck_assert_str_eq(sseq_strerror(-(SSEQ_ERR_BASE + 500)), "unknown daemon status");
	ck_assert_str_eq(sseq_strerror(-ENOENT), "No such file or directory");
	ck_assert_str_eq(sseq_strerror(0), "success");
	ck_assert(SSEQ_IS_DAEMON_ERROR(-SSEQ_ERR_BUSY));
	ck_assert(!SSEQ_IS_DAEMON_ERROR(-ECONNRESET));
	ck_assert_int_eq(client_status_code(SSEQ__STATUS__STATUS_BUSY), -SSEQ_ERR_BUSY);
}
END_TEST

static Suite *ops_suite(void)
{
	Suite *s = suite_create("client-ops");
	TCase *tc = tcase_create("ops");

	tcase_add_test(tc, test_client_unwaited_reply_error_kept_for_sync);
	tcase_add_test(tc, test_client_late_failure_kept_for_sync);
	tcase_add_test(tc, test_client_wait_takes_error);
	tcase_add_test(tc, test_client_wait_truthful_after_sync_reported);
	tcase_add_test(tc, test_client_completions_out_of_order);
	tcase_add_test(tc, test_client_strerror_covers_all);
	tcase_add_test(tc, test_client_sends_at_once_when_idle_batches_while_answers_due);
	tcase_add_test(tc, test_client_local_refusal_replaces_daemon_message);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return client_test_run(ops_suite());
}
