/* libsseq's connection against the scripted fake daemon: Hello and Welcome, the protocol
 * major, lanes asked for and set, a missing socket, and the daemon going away. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "client.h"
#include "test-client-fake.h"
#include "test-client.h"

START_TEST(test_client_hello_and_welcome)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	struct sseq_info info;
	sseq_get_info(s, &info);
	ck_assert_uint_eq(info.session, 42);
	ck_assert_str_eq(info.device_name, "fake");
	ck_assert_str_eq(info.backend, "sim");
	ck_assert_str_eq(info.daemon_version, "test");
	ck_assert_uint_eq(info.memory_total, 1 << 30);
	fake_stop(f, s);
}
END_TEST

/* Lanes asked for at connect travel in Hello; the Welcome's ids come back from
 * sseq_get_lanes; sseq_set_lane puts every later copy and kernel on its lane and refuses
 * one the connection lacks. */
START_TEST(test_client_lanes_asked_set_and_sent)
{
	struct fake *f = fake_start();
	int fd = fake_serve(f);
	struct sseq_connect_options o = {.size = sizeof(o), .worker_id = "gw7", .lanes = 3};
	struct sseq *s;
	uint32_t ids[4] = {0};
	uint64_t buf, tag;
	float x[4] = {1, 2, 3, 4};

	ck_assert_int_eq(sseq__connect_fd(fd, &o, &s), 0);
	ck_assert_uint_eq(f->hello_lanes, 3);
	ck_assert_int_eq(sseq_get_lanes(s, NULL, 0), 3);
	ck_assert_int_eq(sseq_get_lanes(s, ids, 2), 3);
	ck_assert_uint_eq(ids[0], 5);
	ck_assert_uint_eq(ids[1], 9);
	ck_assert_uint_eq(ids[2], 0); /* n = 2: no more written */
	ck_assert_uint_eq(sseq_get_lane(s), 0);
	ck_assert_int_eq(sseq_alloc(s, sizeof(x), "x", &buf), 0);
	ck_assert_int_eq(sseq_copy_h2d(s, buf, 0, x, sizeof(x), &tag), 0);
	ck_assert_int_eq(sseq_wait(s, tag), 0);
	ck_assert_int_eq(f->copy_lane, 0);

	ck_assert_int_eq(sseq_set_lane(s, 3), -EINVAL);
	ck_assert_ptr_nonnull(strstr(sseq_last_error_message(s), "3 lanes"));
	ck_assert_uint_eq(sseq_get_lane(s), 0);
	ck_assert_int_eq(sseq_set_lane(s, 2), 0);
	ck_assert_uint_eq(sseq_get_lane(s), 2);
	struct sseq_arg args[] = {SSEQ_OUT(buf), SSEQ_F32(1), SSEQ_U64(4)};
	ck_assert_int_eq(sseq_execute(s, "fill", args, 3, NULL, &tag), 0);
	ck_assert_int_eq(sseq_wait(s, tag), 0);
	ck_assert_int_eq(f->exec_lane, 2);
	ck_assert_int_eq(sseq_copy_d2h(s, buf, 0, x, sizeof(x), &tag), 0);
	ck_assert_int_eq(sseq_wait(s, tag), 0);
	ck_assert_int_eq(f->copy_lane, 2);
	ck_assert_int_eq(sseq_set_lane(s, 1), 0);
	ck_assert_int_eq(sseq_copy_d2d(s, buf, 0, buf, 8, 8, &tag), 0);
	ck_assert_int_eq(sseq_wait(s, tag), 0);
	ck_assert_int_eq(f->copy_lane, 1);
	fake_stop(f, s);
}
END_TEST

/* The first version of the options (.size 0, or a size before .lanes) asks for no lanes,
 * whatever lies past it; a daemon before protocol 1.2 (no Welcome.lanes) gives one. */
START_TEST(test_client_lanes_old_options_and_old_daemon)
{
	struct fake *f = fake_start();
	int fd = fake_serve(f);
	struct sseq_connect_options o = {.worker_id = "gw7", .lanes = 4}; /* .size 0 */
	struct sseq *s;
	uint32_t id = 77;

	ck_assert_int_eq(sseq__connect_fd(fd, &o, &s), 0);
	ck_assert_uint_eq(f->hello_lanes, 0);
	ck_assert_int_eq(sseq_get_lanes(s, &id, 1), 1);
	ck_assert_uint_eq(id, 5);
	fake_stop(f, s);

	f = fake_start();
	f->old_daemon = true;
	fd = fake_serve(f);
	o.size = sizeof(o);
	ck_assert_int_eq(sseq__connect_fd(fd, &o, &s), 0);
	ck_assert_uint_eq(f->hello_lanes, 4);
	ck_assert_int_eq(sseq_get_lanes(s, &id, 1), 1);
	ck_assert_uint_eq(id, 0);
	ck_assert_int_eq(sseq_set_lane(s, 1), -EINVAL);
	fake_stop(f, s);
}
END_TEST

START_TEST(test_client_refuses_other_major)
{
	struct fake *f = fake_start();
	f->major = 99;
	int fd = fake_serve(f);
	struct sseq_connect_options o = {.worker_id = "gw7"};
	struct sseq *s;
	ck_assert_int_eq(sseq__connect_fd(fd, &o, &s), -SSEQ_ERR_UNSUPPORTED_VERSION);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(strstr(sseq_last_error_message(NULL), "99"));
	fake_stop(f, NULL);
}
END_TEST

START_TEST(test_client_connect_missing_socket)
{
	struct sseq *s;
	ck_assert_int_eq(sseq_connect("/nonexistent/sseq.sock", NULL, &s), -ENOENT);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(strstr(sseq_last_error_message(NULL), "/nonexistent/sseq.sock"));
}
END_TEST

/* The daemon going away fails what is in flight and everything after it. */
START_TEST(test_client_connection_loss)
{
	struct fake *f = fake_start();
	f->fail_alloc_size = 13;
	struct sseq *s = fake_connect(f, 0);
	uint64_t b, t;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	f->hold_completions = true;
	float x[4];
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, x, sizeof(x), &t), 0);
	/* An earlier request's refusal is not why the connection went. */
	ck_assert_int_eq(sseq_alloc(s, 13, NULL, &b), -SSEQ_ERR_UNKNOWN_HANDLE);
	ck_assert_int_eq(sseq_flush(s), 0);
	shutdown(f->sock, SHUT_RDWR);
	ck_assert_int_eq(sseq_wait(s, t), -ECONNRESET);
	ck_assert_str_eq(
		sseq_last_error_message(s), "connection to sseqd lost: Connection reset by peer");
	ck_assert_int_eq(sseq_sync(s), -ECONNRESET);
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), -ECONNRESET);
	ck_assert_str_eq(
		sseq_last_error_message(s), "connection to sseqd lost: Connection reset by peer");
	ck_assert_int_eq(sseq_load_module(s, "", &b), -EINVAL);
	ck_assert_int_eq(sseq_execute(s, "spin", NULL, 0, NULL, NULL), -ECONNRESET);
	ck_assert_str_eq(
		sseq_last_error_message(s), "connection to sseqd lost: Connection reset by peer");
	ck_assert_uint_eq(sseq_outstanding(s), 0);
	fake_stop(f, s);
}
END_TEST

static Suite *conn_suite(void)
{
	Suite *s = suite_create("client-conn");
	TCase *tc = tcase_create("conn");

	tcase_add_test(tc, test_client_hello_and_welcome);
	tcase_add_test(tc, test_client_refuses_other_major);
	tcase_add_test(tc, test_client_lanes_asked_set_and_sent);
	tcase_add_test(tc, test_client_lanes_old_options_and_old_daemon);
	tcase_add_test(tc, test_client_connect_missing_socket);
	tcase_add_test(tc, test_client_connection_loss);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return client_test_run(conn_suite());
}
