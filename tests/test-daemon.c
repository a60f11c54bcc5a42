/* Integration tests for sseqd: a real daemon process on a real Unix socket, driven with
 * raw protobuf frames so that every request type and every kind of bad input (garbage,
 * oversize frames, unsealed memfds, foreign handles) can be sent exactly as written. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "daemon-harness.h"
#include "done-word.h"

/* ---- the tests ------------------------------------------------------------------------ */

START_TEST(test_hello_welcomes_with_device)
{
	int fd;
	Sseq__Message *m;

	daemon_start(NULL);
	fd = conn_open();
	hello_as(fd, SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR, "gw3");
	m = recv_msg(fd);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(m->body_case, SSEQ__MESSAGE__BODY_REPLY);
	ck_assert_int_eq(m->reply->status, SSEQ__STATUS__STATUS_OK);
	ck_assert_ptr_nonnull(m->reply->welcome);
	ck_assert_str_eq(m->reply->welcome->device->backend, backend);
	ck_assert_uint_gt(m->reply->welcome->session, 0);
	sseq__message__free_unpacked(m, NULL);

	Sseq__QueryResult *r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS);
	ck_assert_uint_eq(r->n_clients, 1);
	ck_assert_str_eq(r->clients[0]->worker_id, "gw3");
	ck_assert_uint_eq(r->clients[0]->pid, (uint32_t)getpid());
	sseq__query_result__free_unpacked(r, NULL);
	close(fd);
	daemon_stop();
}
END_TEST

START_TEST(test_roundtrip_h2d_exec_d2d_d2h)
{
	struct staging st;
	uint64_t a, b, c;
	int fd;
	const size_t n = 1024;

	daemon_start((const char *const[]){"--sim-delay", "h2d=rand:0-300us", NULL});
	fd = conn_hello();
	ck_assert_int_eq(
		staging_register(fd, &st, 4 * n * sizeof(float), true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, n * 4, &a), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, n * 4, &b), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, n * 4, &c), SSEQ__STATUS__STATUS_OK);
	for (size_t i = 0; i < n; i++) {
		st.map[i] = (float)i;
		st.map[n + i] = 2.0f * (float)i;
	}
	/* Pipelined: nothing waits for a reply before the next request goes out. */
	uint64_t t1 = send_h2d(fd, st.handle, 0, a, 0, n * 4);
	send_h2d(fd, st.handle, n * 4, b, 0, n * 4);
	send_exec(fd, "add", "iiou", (uint64_t[]){a, b, c}, (double[]){(double)n});
	send_d2d(fd, c, 0, a, 0, n * 4);
	uint64_t t5 = send_d2h(fd, a, 0, st.handle, 2 * n * 4, n * 4);
	for (uint64_t tt = t1; tt <= t5; tt++)
		ck_assert_int_eq(reply_status(fd, tt), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(expect_completion(fd, t5), SSEQ__STATUS__STATUS_OK);
	for (size_t i = 0; i < n; i++)
		ck_assert_float_eq(st.map[2 * n + i], 3.0f * (float)i);
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

START_TEST(test_slice_await_sync_batch)
{
	struct staging st;
	uint64_t a, s1, s2;
	int fd;
	Sseq__Request rq = SSEQ__REQUEST__INIT, *innerp[2];
	Sseq__Batch batch = SSEQ__BATCH__INIT;
	struct harness_req inner[2], aw;

	daemon_start((const char *const[]){"--sim-delay", "h2d=1ms", NULL});
	fd = conn_hello();
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1024, &a), SSEQ__STATUS__STATUS_OK);
	/* Two slices in one batch. */
	for (int i = 0; i < 2; i++) {
		innerp[i] = harness_req_slice(&inner[i], a, (uint64_t)i * 512, 512, 0);
		innerp[i]->tag = 200 + (uint64_t)i;
	}
	batch.n_requests = 2;
	batch.requests = innerp;
	rq.tag = 199;
	rq.body_case = SSEQ__REQUEST__BODY_BATCH;
	rq.batch = &batch;
	send_req(fd, &rq);
	ck_assert_int_eq(expect_reply(fd, 200, &s1, NULL, 0), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(expect_reply(fd, 201, &s2, NULL, 0), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, 199), SSEQ__STATUS__STATUS_OK);

	for (int i = 0; i < 128; i++)
		st.map[i] = 7.0f;
	ck_assert_int_eq(
		reply_status(fd, send_h2d(fd, st.handle, 0, s2, 0, 512)), SSEQ__STATUS__STATUS_OK);
	/* Await on the base: the slice's H2D defines it (I6). */
	ASSERT_OK_AND_COMPLETED(fd, send_tagged(fd, harness_req_await(&aw, a)));
	ASSERT_OK_AND_COMPLETED(fd, send_d2h(fd, a, 512, st.handle, 2048, 512));
	ck_assert_float_eq(st.map[512], 7.0f);
	ck_assert_float_eq(st.map[512 + 127], 7.0f);
	sync_all(fd);
	(void)s1;
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

START_TEST(test_bad_handles_and_ranges_get_clear_errors)
{
	struct staging st;
	uint64_t a, other_buf;
	int fd, fd2;
	char msg[256];

	daemon_start(NULL);
	fd = conn_hello();
	fd2 = conn_hello();
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1024, &a), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd2, 1024, &other_buf), SSEQ__STATUS__STATUS_OK);

	/* Unknown handle. */
	ck_assert_int_eq(
		expect_reply(fd, send_h2d(fd, st.handle, 0, 0x999, 0, 16), NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_UNKNOWN_HANDLE);
	ck_assert_ptr_nonnull(strstr(msg, "unknown"));
	/* Another session's handle is simply unknown here (I10). */
	ck_assert_int_eq(reply_status(fd, send_d2d(fd, a, 0, other_buf, 0, 16)),
		SSEQ__STATUS__STATUS_UNKNOWN_HANDLE);
	/* Out-of-range copies, on both sides. */
	ck_assert_int_eq(
		expect_reply(fd, send_h2d(fd, st.handle, 0, a, 1000, 100), NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_OUT_OF_RANGE);
	ck_assert_ptr_nonnull(strstr(msg, "outside"));
	ck_assert_int_eq(reply_status(fd, send_h2d(fd, st.handle, 4000, a, 0, 200)),
		SSEQ__STATUS__STATUS_OUT_OF_RANGE);
	ck_assert_int_eq(reply_status(fd, send_d2h(fd, a, 0, st.handle, UINT64_MAX - 2, 16)),
		SSEQ__STATUS__STATUS_OUT_OF_RANGE);
	/* Unknown kernel, wrong argument count, type and access. */
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "no_such_kernel", "i", &a, NULL)),
		SSEQ__STATUS__STATUS_UNKNOWN_KERNEL);
	ck_assert_int_eq(expect_reply(fd, send_exec(fd, "fill", "of", &a, (double[]){1}), NULL, msg,
				 sizeof(msg)),
		SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE);
	ck_assert_int_eq(expect_reply(fd, send_exec(fd, "fill", "odu", &a, (double[]){1, 4}), NULL,
				 msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE);
	ck_assert_ptr_nonnull(strstr(msg, "f32"));
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "fill", "ifu", &a, (double[]){1, 4})),
		SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE);
	/* A kernel whose element count overruns its buffer is refused before launch. */
	ck_assert_int_eq(expect_reply(fd, send_exec(fd, "fill", "ofu", &a, (double[]){1, 1000}),
				 NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	/* A slice starting off a float boundary cannot be a kernel argument. */
	{
		uint64_t odd;
		ck_assert_int_eq(expect_reply(fd, send_slice(fd, a, 2, 64), &odd, NULL, 0),
			SSEQ__STATUS__STATUS_OK);
		ck_assert_int_eq(
			expect_reply(fd, send_exec(fd, "fill", "ofu", &odd, (double[]){1, 4}), NULL,
				msg, sizeof(msg)),
			SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	}
	/* Still serving both sessions. */
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "fill", "ofu", &a, (double[]){1, 256})),
		SSEQ__STATUS__STATUS_OK);
	sync_all(fd2);
	close(fd);
	close(fd2);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

START_TEST(test_unsealed_memfd_refused)
{
	struct staging st;
	int fd;

	daemon_start(NULL);
	fd = conn_hello();
	ck_assert_int_eq(
		staging_register(fd, &st, 4096, false), SSEQ__STATUS__STATUS_STAGING_UNSEALED);
	munmap(st.map, st.size);
	/* Claiming more than the memfd holds is refused too. */
	{
		Sseq__Request rq = SSEQ__REQUEST__INIT;
		Sseq__StagingRegister sr = SSEQ__STAGING_REGISTER__INIT;
		int mfd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		ck_assert_int_eq(ftruncate(mfd, 4096), 0);
		ck_assert_int_eq(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
		sr.size = 1 << 20;
		rq.body_case = SSEQ__REQUEST__BODY_STAGING_REGISTER;
		rq.staging_register = &sr;
		uint64_t t = send_tagged_fd(fd, &rq, mfd);
		close(mfd);
		ck_assert_int_eq(reply_status(fd, t), SSEQ__STATUS__STATUS_STAGING_UNSEALED);
		/* And a registration with no fd at all. */
		ck_assert_int_eq(reply_status(fd, send_tagged(fd, &rq)),
			SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	}
	close(fd);
	daemon_stop();
}
END_TEST

START_TEST(test_framing_errors_disconnect_cleanly)
{
	int fd, good;
	uint8_t huge[4] = {0xff, 0xff, 0xff, 0x7f};
	uint8_t garbage[16] = {8, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

	daemon_start(NULL);
	good = conn_hello();
	/* An oversize length: refused before allocating, then the connection closes. */
	fd = conn_hello();
	send_raw(fd, huge, 4, -1);
	ck_assert_int_eq(reply_status(fd, 0), SSEQ__STATUS__STATUS_FRAME_TOO_LARGE);
	ck_assert(conn_closed(fd));
	close(fd);
	/* Bytes that do not decode. */
	fd = conn_hello();
	send_raw(fd, garbage, 12, -1);
	ck_assert_int_eq(reply_status(fd, 0), SSEQ__STATUS__STATUS_PROTOCOL_ERROR);
	ck_assert(conn_closed(fd));
	close(fd);
	/* A request before Hello. */
	fd = conn_open();
	{
		struct harness_req r;
		Sseq__Request *rq = harness_req_sync(&r);

		rq->tag = 5;
		send_req(fd, rq);
		ck_assert_int_eq(reply_status(fd, 5), SSEQ__STATUS__STATUS_PROTOCOL_ERROR);
		ck_assert(conn_closed(fd));
	}
	close(fd);
	/* A wrong protocol major. */
	fd = conn_open();
	hello_as(fd, 99, "gw1");
	ck_assert_int_eq(reply_status(fd, 1), SSEQ__STATUS__STATUS_UNSUPPORTED_VERSION);
	ck_assert(conn_closed(fd));
	close(fd);
	/* The first client never noticed. */
	sync_all(good);
	Sseq__QueryResult *r = query(good, SSEQ__QUERY_KIND__QUERY_KIND_STATS);
	ck_assert_uint_ge(r->counters->frames_bad, 2);
	sseq__query_result__free_unpacked(r, NULL);
	close(good);
	daemon_stop();
}
END_TEST

START_TEST(test_killed_client_leaves_nothing_behind)
{
	int fd, status;
	pid_t child;
	int ready[2];

	daemon_start((const char *const[]){"--sim-delay", "compute=2ms", NULL});
	ck_assert_int_eq(pipe(ready), 0);
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		/* A client mid-work: buffers held, kernels queued, then kill -9. */
		int c = conn_hello();
		uint64_t bufs[16];
		for (int i = 0; i < 16; i++) {
			do_alloc(c, 4096, &bufs[i]);
			send_exec(c, "fill", "ofu", &bufs[i], (double[]){1, 1024});
			send_exec(c, "spin", "u", NULL, (double[]){500});
		}
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	char x;
	ck_assert_int_eq(read(ready[0], &x, 1), 1);
	usleep(20000);
	fd = conn_hello();
	Sseq__QueryResult *r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS);
	ck_assert_uint_eq(r->n_buffers, 16);
	sseq__query_result__free_unpacked(r, NULL);
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	/* Its handles go at once; its memory once its in-flight work completes (I10, I5). */
	wait_released(fd, 1, 5000);
	r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_STATUS);
	ck_assert_uint_eq(r->n_clients, 1);
	ck_assert_uint_eq(r->device->memory_used, 0);
	ck_assert_uint_eq(r->counters->releases, 16);
	sseq__query_result__free_unpacked(r, NULL);
	r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS);
	ck_assert_uint_eq(r->n_buffers, 0);
	sseq__query_result__free_unpacked(r, NULL);
	close(fd);
	close(ready[0]);
	close(ready[1]);
	daemon_stop();
}
END_TEST

START_TEST(test_full_window_applies_backpressure)
{
	int fd;
	uint64_t a, first = 0, last = 0;

	daemon_start((const char *const[]){"--window", "4", "--sim-delay", "compute=1ms", NULL});
	fd = conn_hello();
	ck_assert_int_eq(do_alloc(fd, 4096, &a), SSEQ__STATUS__STATUS_OK);
	/* Kernels slow on any backend (1 ms each), so the window of 4 fills. */
	for (int i = 0; i < 40; i++) {
		last = send_exec(fd, "spin", "u", NULL, (double[]){1000});
		if (!first)
			first = last;
	}
	/* Every request is answered, in order, none refused: the daemon paused instead. */
	for (uint64_t t = first; t <= last; t++)
		ck_assert_int_eq(reply_status(fd, t), SSEQ__STATUS__STATUS_OK);
	Sseq__QueryResult *r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_STATS);
	ck_assert_uint_gt(r->counters->backpressure_events, 0);
	sseq__query_result__free_unpacked(r, NULL);
	sync_all(fd);
	close(fd);
	daemon_stop();
}
END_TEST

START_TEST(test_injected_fault_flows_to_dependents)
{
	struct staging st;
	uint64_t a, b;
	int fd;
	char msg[256];

	SIM_ONLY();
	/* Launches: 1 = H2D into a (fails), 2 = fill b. */
	daemon_start((const char *const[]){"--inject", "fail-op=1", NULL});
	fd = conn_hello();
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1024, &a), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1024, &b), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, send_h2d(fd, st.handle, 0, a, 0, 1024)),
		SSEQ__STATUS__STATUS_INJECTED_FAULT);
	/* An execute reading a fails without launch, and so does the D2H of its output. */
	ck_assert_int_eq(
		expect_reply(fd,
			send_exec(fd, "scale", "iofu", (uint64_t[]){a, b}, (double[]){2, 256}),
			NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_DEPENDENCY_FAILED);
	ck_assert_int_eq(reply_status(fd, send_d2h(fd, b, 0, st.handle, 0, 1024)),
		SSEQ__STATUS__STATUS_DEPENDENCY_FAILED);
	/* A full rewrite makes b good again. */
	fill_and_read_back(fd, b, &st, 3.0f);
	Sseq__QueryResult *r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_STATS);
	/* The H2D, the execute reading it and the D2H of the execute's output. */
	ck_assert_uint_eq(r->counters->ops_failed, 3);
	sseq__query_result__free_unpacked(r, NULL);
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

START_TEST(test_metrics_and_trace_answer)
{
	int fd;
	uint64_t a;

	daemon_start(NULL);
	fd = conn_hello();
	ck_assert_int_eq(do_alloc(fd, 4096, &a), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "fill", "ofu", &a, (double[]){1, 8})),
		SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "fill", "ofu", &a, (double[]){2, 8})),
		SSEQ__STATUS__STATUS_OK);
	Sseq__QueryResult *r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_METRICS);
	ck_assert_ptr_nonnull(strstr(r->metrics_text, "sseq_ops_submitted_total{"));
	ck_assert_ptr_nonnull(strstr(r->metrics_text, "# TYPE sseq_waits_enqueued_total counter"));
	sseq__query_result__free_unpacked(r, NULL);
	r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_TRACE);
	ck_assert_uint_ge(r->n_trace, 1);
	ck_assert_str_eq(r->trace[r->n_trace - 1]->decision, "elided: same stream");
	sseq__query_result__free_unpacked(r, NULL);
	close(fd);
	daemon_stop();
}
END_TEST

START_TEST(test_copy_between_slices_of_freed_base)
{
	struct staging st;
	uint64_t a, lo, hi;
	int fd;

	daemon_start(NULL);
	fd = conn_hello();
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1024, &a), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		expect_reply(fd, send_slice(fd, a, 0, 512), &lo, NULL, 0), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(expect_reply(fd, send_slice(fd, a, 512, 512), &hi, NULL, 0),
		SSEQ__STATUS__STATUS_OK);
	for (int i = 0; i < 128; i++)
		st.map[i] = (float)i;
	ck_assert_int_eq(
		reply_status(fd, send_h2d(fd, st.handle, 0, lo, 0, 512)), SSEQ__STATUS__STATUS_OK);
	/* The base's own handle goes; its slices keep it alive and usable (I6). */
	ck_assert_int_eq(do_free(fd, a), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		reply_status(fd, send_d2d(fd, lo, 0, hi, 0, 512)), SSEQ__STATUS__STATUS_OK);
	ASSERT_OK_AND_COMPLETED(fd, send_d2h(fd, hi, 0, st.handle, 2048, 512));
	for (int i = 0; i < 128; i++)
		ck_assert_float_eq(st.map[512 + i], (float)i);
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

START_TEST(test_slice_overwrite_keeps_device_error)
{
	struct staging st;
	uint64_t y, half;
	int fd;

	SIM_ONLY();
	/* Launch 1, the H2D defining y, fails on the device (reported by completion). */
	daemon_start((const char *const[]){"--inject", "device-fail-op=1", NULL});
	fd = conn_hello();
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1024, &y), SSEQ__STATUS__STATUS_OK);
	uint64_t h2d = send_h2d(fd, st.handle, 0, y, 0, 1024);
	ck_assert_int_eq(reply_status(fd, h2d), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(expect_completion(fd, h2d), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	/* A kernel writes all of one half: the other half still holds the failed copy's
	 * output, so a read of the whole buffer must fail (I9). */
	ck_assert_int_eq(expect_reply(fd, send_slice(fd, y, 0, 512), &half, NULL, 0),
		SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "fill", "ofu", &half, (double[]){5, 128})),
		SSEQ__STATUS__STATUS_OK);
	ck_assert_int_ne(
		reply_status(fd, send_d2h(fd, y, 0, st.handle, 0, 1024)), SSEQ__STATUS__STATUS_OK);
	/* Writing all of it defines it anew. */
	fill_and_read_back(fd, y, &st, 6.0f);
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

START_TEST(test_partial_kernel_output_keeps_failure)
{
	struct staging st;
	uint64_t y;
	int fd;

	SIM_ONLY();
	/* Launch 1, the H2D defining y, fails. */
	daemon_start((const char *const[]){"--inject", "fail-op=1", NULL});
	fd = conn_hello();
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1024, &y), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, send_h2d(fd, st.handle, 0, y, 0, 1024)),
		SSEQ__STATUS__STATUS_INJECTED_FAULT);
	/* fill covers 1 of 256 floats: the other 255 are still the failed copy's (I9). */
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "fill", "ofu", &y, (double[]){5, 1})),
		SSEQ__STATUS__STATUS_DEPENDENCY_FAILED);
	/* Covering all of it defines it anew. */
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "fill", "ofu", &y, (double[]){5, 256})),
		SSEQ__STATUS__STATUS_OK);
	sync_all(fd);
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

START_TEST(test_staging_unregister_and_load_module)
{
	struct staging st;
	uint64_t a;
	int fd;
	char msg[256];
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__StagingUnregister su = SSEQ__STAGING_UNREGISTER__INIT;
	Sseq__LoadModule lm = SSEQ__LOAD_MODULE__INIT;

	daemon_start(NULL);
	fd = conn_hello();
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1024, &a), SSEQ__STATUS__STATUS_OK);
	/* A copy in flight keeps the arena mapped after its handle goes. */
	uint64_t t = send_h2d(fd, st.handle, 0, a, 0, 1024);
	su.staging = st.handle;
	rq.body_case = SSEQ__REQUEST__BODY_STAGING_UNREGISTER;
	rq.staging_unregister = &su;
	uint64_t tu = send_tagged(fd, &rq);
	ck_assert_int_eq(reply_status(fd, t), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, tu), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, send_h2d(fd, st.handle, 0, a, 0, 16)),
		SSEQ__STATUS__STATUS_UNKNOWN_HANDLE);
	/* The sim cannot load code objects, and says so; hip needs a --module-dir. */
	lm.path = (char *)"kernels.hsaco";
	rq.body_case = SSEQ__REQUEST__BODY_LOAD_MODULE;
	rq.load_module = &lm;
	send_tagged(fd, &rq);
	if (strcmp(backend, "sim") == 0) {
		ck_assert_int_eq(expect_reply(fd, rq.tag, NULL, msg, sizeof(msg)),
			SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
		ck_assert_ptr_nonnull(strstr(msg, "a backend that loads code modules"));
	} else {
		/* hip loads code objects, but only from a --module-dir: none was given. */
		ck_assert_int_eq(expect_reply(fd, rq.tag, NULL, msg, sizeof(msg)),
			SSEQ__STATUS__STATUS_PERMISSION_DENIED);
	}
	sync_all(fd);
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

/* ---- compute lanes ----------------------------------------------------------------- */

/* Hello asking for `lanes`; the Welcome's status, and its lanes in ids (up to 8). */
static Sseq__Status hello_lanes(int fd, uint32_t lanes, uint32_t *ids, size_t *nids)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Hello h = SSEQ__HELLO__INIT;
	Sseq__Message *m;
	Sseq__Status st;

	h.protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	h.protocol_minor = SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR;
	h.client_name = (char *)"test-daemon";
	h.lanes = lanes;
	rq.body_case = SSEQ__REQUEST__BODY_HELLO;
	rq.hello = &h;
	send_tagged(fd, &rq);
	m = recv_msg(fd);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(m->body_case, SSEQ__MESSAGE__BODY_REPLY);
	ck_assert_uint_eq(m->reply->tag, rq.tag);
	st = m->reply->status;
	*nids = 0;
	if (st == SSEQ__STATUS__STATUS_OK) {
		ck_assert_ptr_nonnull(m->reply->welcome);
		ck_assert_uint_le(m->reply->welcome->n_lanes, 8);
		*nids = m->reply->welcome->n_lanes;
		memcpy(ids, m->reply->welcome->lanes, *nids * sizeof(*ids));
	}
	sseq__message__free_unpacked(m, NULL);
	return st;
}

/* A fill of buf (n floats with v) on the session's lane `lane`, built in r. */
static Sseq__Request *fill_on(
	struct harness_req *r, uint32_t lane, uint64_t buf, float v, uint64_t n)
{
	Sseq__Request *rq = harness_req_exec(r, "fill", "ofu", &buf, (double[]){v, (double)n});

	r->body.exec.e.lane = lane;
	return rq;
}

/* A fill of buf on the session's lane `lane`; returns the tag. */
static uint64_t send_fill_on(int fd, uint32_t lane, uint64_t buf, float v, uint64_t n)
{
	struct harness_req r;

	return send_tagged(fd, fill_on(&r, lane, buf, v, n));
}

/* The compute stream a fill on `lane` of this session was sequenced on. */
static uint32_t fill_stream(int fd, uint32_t lane, uint64_t buf)
{
	Sseq__Point at;

	ck_assert_int_eq(
		expect_reply_at(fd, send_fill_on(fd, lane, buf, 1.0f, 256), NULL, &at, NULL, 0),
		SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_gt(at.seq, 0);
	return at.stream;
}

static const Sseq__StreamInfo *stream_of(const Sseq__QueryResult *r, uint32_t id)
{
	for (size_t i = 0; i < r->n_streams; i++)
		if (r->streams[i]->id == id)
			return r->streams[i];
	ck_abort_msg("no stream %u", id);
	return NULL;
}

/* Sessions get the least-loaded lanes: two at once get different compute streams and
 * their kernels run there; the streams and clients queries say who holds which; a lane
 * goes back when its session ends. */
START_TEST(test_sessions_get_distinct_lanes)
{
	uint32_t l1[8], l2[8], l3[8];
	size_t n1, n2, n3;
	uint64_t b1, b2, b3, id1, id2;
	int fd1, fd2, fd3;
	Sseq__QueryResult *r;

	daemon_start((const char *const[]){"--compute-streams", "4", NULL});
	fd1 = conn_open();
	ck_assert_int_eq(hello_lanes(fd1, 0, l1, &n1), SSEQ__STATUS__STATUS_OK);
	fd2 = conn_open();
	ck_assert_int_eq(hello_lanes(fd2, 1, l2, &n2), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(n1, 1);
	ck_assert_uint_eq(n2, 1);
	ck_assert_uint_eq(l1[0], 0);
	ck_assert_uint_eq(l2[0], 1);
	ck_assert_int_eq(do_alloc(fd1, 1024, &b1), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd2, 1024, &b2), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(fill_stream(fd1, 0, b1), l1[0]);
	ck_assert_uint_eq(fill_stream(fd2, 0, b2), l2[0]);

	r = query(fd1, SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS);
	ck_assert_uint_eq(r->n_clients, 2);
	/* Newest first. */
	id2 = r->clients[0]->session;
	id1 = r->clients[1]->session;
	ck_assert_uint_eq(r->clients[0]->n_lanes, 1);
	ck_assert_uint_eq(r->clients[0]->lanes[0], l2[0]);
	ck_assert_uint_eq(r->clients[1]->n_lanes, 1);
	ck_assert_uint_eq(r->clients[1]->lanes[0], l1[0]);
	sseq__query_result__free_unpacked(r, NULL);
	r = query(fd1, SSEQ__QUERY_KIND__QUERY_KIND_STREAMS);
	ck_assert_uint_eq(stream_of(r, l1[0])->n_sessions, 1);
	ck_assert_uint_eq(stream_of(r, l1[0])->sessions[0], id1);
	ck_assert_uint_eq(stream_of(r, l2[0])->n_sessions, 1);
	ck_assert_uint_eq(stream_of(r, l2[0])->sessions[0], id2);
	ck_assert_uint_eq(stream_of(r, 2)->n_sessions, 0);
	sseq__query_result__free_unpacked(r, NULL);

	/* The first session's lane is free again once it is gone: the next one gets it. */
	close(fd1);
	usleep(100000);
	fd3 = conn_open();
	ck_assert_int_eq(hello_lanes(fd3, 0, l3, &n3), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(l3[0], l1[0]);
	ck_assert_int_eq(do_alloc(fd3, 1024, &b3), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(fill_stream(fd3, 0, b3), l1[0]);
	close(fd2);
	close(fd3);
	daemon_stop();
}
END_TEST

/* A session asking for two lanes gets two distinct ones, the least loaded: an op named
 * lane 1 runs on the second, lane 0 on the first. */
START_TEST(test_two_lanes_for_one_session)
{
	uint32_t l1[8], l2[8];
	size_t n1, n2;
	uint64_t b;
	int fd1, fd2;

	daemon_start((const char *const[]){"--compute-streams", "4", NULL});
	fd1 = conn_open();
	ck_assert_int_eq(hello_lanes(fd1, 1, l1, &n1), SSEQ__STATUS__STATUS_OK);
	fd2 = conn_open();
	ck_assert_int_eq(hello_lanes(fd2, 2, l2, &n2), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(n2, 2);
	ck_assert_uint_ne(l2[0], l2[1]);
	ck_assert_uint_ne(l2[0], l1[0]);
	ck_assert_uint_ne(l2[1], l1[0]);
	ck_assert_int_eq(do_alloc(fd2, 1024, &b), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(fill_stream(fd2, 1, b), l2[1]);
	ck_assert_uint_eq(fill_stream(fd2, 0, b), l2[0]);
	ck_assert_uint_eq(fill_stream(fd2, 1, b), l2[1]);
	sync_all(fd2);
	close(fd1);
	close(fd2);
	daemon_stop();
}
END_TEST

/* A lane index beyond the session's count is refused, naming the lane and the count, for
 * copies and kernels alike; so is a Hello asking for more than 8. */
START_TEST(test_lane_out_of_range_refused)
{
	uint32_t l[8];
	size_t n;
	uint64_t b, t;
	struct staging st;
	char msg[256];
	Sseq__Point at;
	struct harness_req r;
	int fd;

	daemon_start(NULL);
	fd = conn_open();
	ck_assert_int_eq(hello_lanes(fd, 9, l, &n), SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_int_eq(hello_lanes(fd, 2, l, &n), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1024, &b), SSEQ__STATUS__STATUS_OK);
	t = send_fill_on(fd, 2, b, 1.0f, 256);
	ck_assert_int_eq(expect_reply_at(fd, t, NULL, &at, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_msg(strstr(msg, "lane 2") && strstr(msg, "2 lanes"), "message: %s", msg);
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	harness_req_h2d(&r, st.handle, 0, b, 0, 1024);
	r.body.h2d.lane = 7;
	t = send_tagged(fd, &r.rq);
	ck_assert_int_eq(expect_reply_at(fd, t, NULL, &at, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_msg(strstr(msg, "lane 7") && strstr(msg, "2 lanes"), "message: %s", msg);
	/* Lane 1 exists. */
	ck_assert_int_eq(expect_reply_at(fd, send_fill_on(fd, 1, b, 1.0f, 256), NULL, &at, NULL, 0),
		SSEQ__STATUS__STATUS_OK);
	sync_all(fd);
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

/* Order holds across a session's lanes (I2): a slow H2D on lane 0, a kernel on lane 0
 * writing from it, a kernel on lane 1 reading that (a wait between two compute streams),
 * a D2H on lane 1. The data says each waited, and so does the race detector. */
START_TEST(test_order_holds_across_lanes)
{
	uint32_t l[8];
	size_t n;
	uint64_t a, b, c, t;
	struct staging st;
	Sseq__Point p1, p2;
	const size_t N = 4096;
	int fd;

	daemon_start((const char *const[]){
		"--sim-delay", "h2d=3ms", "--sim-delay", "compute=script:2ms,0", NULL});
	fd = conn_open();
	ck_assert_int_eq(hello_lanes(fd, 2, l, &n), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_ne(l[0], l[1]);
	ck_assert_int_eq(staging_register(fd, &st, 2 * N * 4, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, N * 4, &a), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, N * 4, &b), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, N * 4, &c), SSEQ__STATUS__STATUS_OK);
	for (size_t i = 0; i < N; i++) {
		st.map[i] = (float)i;
		st.map[N + i] = -1.0f;
	}
	send_h2d(fd, st.handle, 0, a, 0, N * 4); /* lane 0 */
	t = send_exec(fd, "scale", "iofu", (uint64_t[]){a, b}, (double[]){2, (double)N});
	ck_assert_int_eq(expect_reply_at(fd, t, NULL, &p1, NULL, 0), SSEQ__STATUS__STATUS_OK);
	{
		struct harness_req req;

		harness_req_exec(
			&req, "scale", "iofu", (uint64_t[]){b, c}, (double[]){3, (double)N});
		req.body.exec.e.lane = 1;
		t = send_tagged(fd, &req.rq);
		ck_assert_int_eq(
			expect_reply_at(fd, t, NULL, &p2, NULL, 0), SSEQ__STATUS__STATUS_OK);
	}
	ck_assert_uint_eq(p1.stream, l[0]);
	ck_assert_uint_eq(p2.stream, l[1]);
	{
		struct harness_req req;

		harness_req_d2h(&req, c, 0, st.handle, N * 4, N * 4);
		req.body.d2h.lane = 1;
		ASSERT_OK_AND_COMPLETED(fd, send_tagged(fd, &req.rq));
	}
	for (size_t i = 0; i < N; i++)
		ck_assert_msg(st.map[N + i] == 6.0f * (float)i, "c[%zu] = %g, want %g", i,
			(double)st.map[N + i], 6.0 * (double)i);
	Sseq__QueryResult *r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_STATS);
	ck_assert_uint_eq(r->counters->race_findings, 0);
	ck_assert_uint_gt(r->counters->waits_enqueued, 0);
	sseq__query_result__free_unpacked(r, NULL);
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

/* No Completion for the request whose tag is *ctx (the daemon wrote its word). */
static void no_completion_for(const Sseq__Message *m, void *ctx)
{
	const uint64_t tag = *(const uint64_t *)ctx;

	ck_assert_msg(
		!(m->body_case == SSEQ__MESSAGE__BODY_COMPLETION && m->completion->tag == tag),
		"a Completion for request %llu whose word the daemon wrote",
		(unsigned long long)tag);
}

/* completions_written from STATS queries, asked again every 10 ms for up to 2 s until it
 * reaches `want` (the backend writes the word before it reports the point, and the loop
 * counts the word only once it has taken that report: a query may come first), failing
 * if a Completion for `tag` comes meanwhile. */
static uint64_t written_reaching(int fd, uint64_t tag, uint64_t want)
{
	uint64_t written = 0;

	for (int i = 0; i < 200; i++) {
		Sseq__QueryResult *r = query_seeing(
			fd, SSEQ__QUERY_KIND__QUERY_KIND_STATS, no_completion_for, &tag);

		written = r->counters->completions_written;
		sseq__query_result__free_unpacked(r, NULL);
		if (written == want)
			break;
		usleep(10000);
	}
	return written;
}

/* Sleeps on the word's futex as a client does, for at most 5 s: the seconds it slept. */
static double sleep_on_word(_Atomic uint64_t *word)
{
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (atomic_load(word) == DONE_WORD_SLEEPING)
		done_word_sleep(word, 5000000000L);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
}

/* A staging arena of `size` bytes registered (sealed) on fd, and the done word at byte
 * `at` of it. */
static _Atomic uint64_t *word_arena(int fd, struct staging *st, size_t size, size_t at)
{
	ck_assert_int_eq(staging_register(fd, st, size, true), SSEQ__STATUS__STATUS_OK);
	return (_Atomic uint64_t *)(void *)((char *)st->map + at);
}

/* A client asleep on the word of request t (the sleeping mark written before t was sent)
 * is woken within 2 s: by the tag, with `written` words written so far, where `tagged`;
 * else by the refusal, and t's Completion carries a device error. */
static void expect_woken_on_word(
	int fd, _Atomic uint64_t *word, uint64_t t, bool tagged, uint64_t written, const char *what)
{
	const double slept = sleep_on_word(word);
	const char *how = atomic_load(word) == t ? "holding the tag" : "refused";

	printf("done word: a sleeper on %s woken after %.3f s, the word %s\n", what, slept, how);
	ck_assert_msg(slept < 2.0, "asleep %.3f s on the word", slept);
	if (tagged) {
		ck_assert_uint_eq(atomic_load(word), t);
		ck_assert_uint_eq(written_reaching(fd, t, written), written);
	} else {
		ck_assert_uint_eq(atomic_load(word), DONE_WORD_REFUSED);
		ck_assert_int_eq(expect_completion(fd, t), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	}
}

/* A batch of frames written by a thread of its own (larger than the socket's buffer: the
 * writer blocks while the loop reads). */
struct batch_send {
	int fd;
	const uint8_t *buf;
	size_t len;
	ssize_t sent;
};

static void *batch_send_run(void *arg)
{
	struct batch_send *b = arg;

	b->sent = 0;
	while ((size_t)b->sent < b->len) {
		const ssize_t n =
			send(b->fd, b->buf + b->sent, b->len - (size_t)b->sent, MSG_NOSIGNAL);

		if (n <= 0)
			break;
		b->sent += n;
	}
	return NULL;
}

/* A client that has its D2H's tag in the word finishes the op and may name the same word
 * for its next request at once, before the loop has taken the copy's report. The loop
 * then must not judge by the word's value (0 again, armed for the next request): it sent
 * a Completion for the finished request and refused the word under the next one, whose
 * answer then came the slow way (the H100's lone 4 KiB H2D + await moved between 18 and
 * 29 us by how often this happened). Made certain here: the D2H is followed, in one
 * stream of frames, by 60,000 Awaits that keep the loop busy in that turn while the copy
 * completes; the test sees the tag before any answer to the batch has
 * come (the loop writes answers at the turn's end), puts 0 back and expects no Completion
 * for the D2H and the word left alone. */
START_TEST(test_a_word_named_again_before_the_loop_took_the_report_is_left_alone)
{
	enum { AWAITS = 60000 };
	struct staging st;
	uint64_t a;
	const size_t W = 1024;
	_Atomic uint64_t *word;
	bool early = false;
	int fd;

	SIM_ONLY();
	daemon_start(NULL);
	fd = conn_hello();
	word = word_arena(fd, &st, 3 * W, W);
	ck_assert_int_eq(do_alloc(fd, W, &a), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		reply_status(fd, send_h2d(fd, st.handle, 0, a, 0, W)), SSEQ__STATUS__STATUS_OK);
	sync_all(fd);
	/* The copy completes within the batch's first turn unless this machine's scheduler
	 * says otherwise: a few tries. */
	for (int attempt = 0; attempt < 3 && !early; attempt++) {
		const size_t room = (size_t)AWAITS * 32 + 256;
		uint8_t *buf = malloc(room);
		struct harness_req req;
		uint64_t t, last = 0, written = stats_of(fd).completions_written;
		struct batch_send b = {.fd = fd, .buf = buf};
		bool seen = false;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		pthread_t sender;

		ck_assert_ptr_nonnull(buf);
		harness_req_d2h(&req, a, 0, st.handle, 2 * W, W);
		req.body.d2h.done_word = W + 1;
		req.rq.tag = t = next_tag++;
		b.len += frame_of(&req.rq, buf + b.len, room - b.len);
		for (int i = 0; i < AWAITS; i++) {
			harness_req_await(&req, a);
			req.rq.tag = last = next_tag++;
			b.len += frame_of(&req.rq, buf + b.len, room - b.len);
		}
		atomic_store(word, 0);
		ck_assert_int_eq(pthread_create(&sender, NULL, batch_send_run, &b), 0);
		/* The tag, looked for every 20 us (leaving this machine's cores to the loop
		 * and the sim's worker); whether any answer had come by then. */
		for (int i = 0; i < 250000 && !seen; i++) {
			seen = atomic_load(word) == t;
			if (!seen)
				nanosleep(&(struct timespec){0, 20000}, NULL);
		}
		early = poll(&pfd, 1, 0) == 0;
		atomic_store(word, 0); /* named for the next request */
		ck_assert_msg(seen, "the D2H's tag never came into its word");
		printf("done word: the tag seen %s the loop answered the batch (try %d)\n",
			early ? "before" : "after", attempt + 1);
		/* Every answer to the batch, and no Completion for the D2H among them. */
		for (bool end = false; !end;) {
			Sseq__Message *m = recv_msg(fd);

			ck_assert_ptr_nonnull(m);
			no_completion_for(m, &t);
			end = m->body_case == SSEQ__MESSAGE__BODY_COMPLETION &&
				m->completion->tag == last;
			sseq__message__free_unpacked(m, NULL);
		}
		pthread_join(sender, NULL);
		free(buf);
		ck_assert_uint_eq(b.sent, b.len);
		ck_assert_uint_eq(written_reaching(fd, t, written + 1), written + 1);
		ck_assert_uint_eq(atomic_load(word), 0);
	}
	ck_assert_msg(early,
		"the loop answered the batch before the copy completed, three "
		"times: the race was not made (a faster machine: more Awaits)");
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

/* Protocol 1.12: a client asleep on its done word (the sleeping mark, a futex on the upper
 * half) is woken by the daemon's write of the tag, with no Completion; where the copy
 * fails, the daemon refuses the word, wakes the sleeper and sends the Completion. Each copy
 * takes 200 ms on the sim, so the sleep begins first; without the wake-up the sleep
 * would last its whole 5 s. */
START_TEST(test_d2h_done_word_wakes_a_client_asleep_on_it)
{
	struct staging st;
	uint64_t a, t;
	const size_t N = 256, W = N * 4;
	_Atomic uint64_t *word;
	int fd;

	SIM_ONLY();
	/* Launch 1 the H2D, 2 the first D2H, 3 the second, which fails on the device. */
	daemon_start((const char *const[]){
		"--sim-delay", "d2h=200ms", "--inject", "device-fail-op=3", NULL});
	fd = conn_hello();
	word = word_arena(fd, &st, 3 * W, W);
	ck_assert_int_eq(do_alloc(fd, W, &a), SSEQ__STATUS__STATUS_OK);
	for (size_t i = 0; i < N; i++)
		st.map[i] = (float)(i + 7);
	ck_assert_int_eq(
		reply_status(fd, send_h2d(fd, st.handle, 0, a, 0, W)), SSEQ__STATUS__STATUS_OK);
	for (int round = 0; round < 2; round++) {
		struct harness_req req;

		atomic_store(word, DONE_WORD_SLEEPING);
		harness_req_d2h(&req, a, 0, st.handle, 2 * W, W);
		req.body.d2h.done_word = W + 1;
		t = send_tagged(fd, &req.rq);
		ck_assert_int_eq(reply_status(fd, t), SSEQ__STATUS__STATUS_OK);
		expect_woken_on_word(fd, word, t, round == 0, 1, round ? "a failed D2H" : "a D2H");
		for (size_t i = 0; round == 0 && i < N; i++)
			ck_assert(st.map[2 * N + i] == (float)(i + 7));
	}
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

/* CopyD2H.done_word: the tag lands in the word once the bytes are in place and no
 * Completion follows; a word that holds something else (a client about to sleep) gets
 * the Completion instead; a word misplaced is refused. */
/* ---- the request ring (protocol 1.15) ---- */

START_TEST(test_request_ring_carries_the_sockets_stream)
{
	const uint64_t size = SSEQ_RING_MIN;
	struct staging rs, st;
	struct harness_req r;
	struct sseq_ring_header *h;
	uint64_t a, bytes0, tags[8], bufs[8];
	int fd;

	daemon_start(NULL);
	fd = conn_hello();
	bytes0 = stats_of(fd).ring_bytes;
	h = ring_named(fd, &rs, size);
	ck_assert_uint_eq(atomic_load(&h->head), 0);
	/* Many times round the ring (it wraps in the middle of frames), eight frames at a
	 * time, answered in order. */
	for (int round = 0; round < 100; round++) {
		for (int i = 0; i < 8; i++)
			tags[i] = ring_send(fd, h, size, harness_req_alloc(&r, 64, "ring", 0));
		for (int i = 0; i < 8; i++)
			ck_assert_int_eq(expect_reply(fd, tags[i], &bufs[i], NULL, 0),
				SSEQ__STATUS__STATUS_OK);
		for (int i = 0; i < 8; i++)
			tags[i] = ring_send(fd, h, size, harness_req_free(&r, bufs[i]));
		for (int i = 0; i < 8; i++)
			ck_assert_int_eq(
				expect_reply(fd, tags[i], NULL, NULL, 0), SSEQ__STATUS__STATUS_OK);
	}
	ck_assert_uint_gt(atomic_load(&h->tail), 4 * size);
	ck_assert_uint_eq(atomic_load(&h->head), atomic_load(&h->tail));
	/* CLIENTS says so. */
	Sseq__QueryResult *q = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS);
	ck_assert_uint_eq(q->n_clients, 1);
	ck_assert_uint_eq(q->clients[0]->ring_size, size);
	ck_assert_uint_eq(q->clients[0]->ring_bytes, atomic_load(&h->head));
	sseq__query_result__free_unpacked(q, NULL);
	/* A descriptor's frame goes on the socket once the ring is taken; what follows it in
	 * the ring runs after it (the arena it registers is there), once the daemon has read
	 * it (its Reply says so). */
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_ge(atomic_load(&h->sock_read), 1);
	st.map[0] = 7.0f;
	ck_assert_int_eq(
		reply_status(fd, ring_send(fd, h, size, harness_req_alloc(&r, 4096, "b", 0))),
		SSEQ__STATUS__STATUS_OK);
	/* Asleep (the loop's spin is over): the daemon says so, and the doorbell wakes it. */
	usleep(200 * 1000);
	ck_assert_uint_eq(atomic_load(&h->awake), 0);
	ck_assert_int_eq(do_alloc(fd, 4096, &a), SSEQ__STATUS__STATUS_OK);
	usleep(200 * 1000);
	ck_assert_uint_eq(atomic_load(&h->awake), 0);
	ck_assert_int_eq(
		reply_status(
			fd, ring_send(fd, h, size, harness_req_h2d(&r, st.handle, 0, a, 0, 4096))),
		SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, ring_send(fd, h, size, harness_req_sync(&r))),
		SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_gt(stats_of(fd).ring_bytes, bytes0 + 4 * size);
	close(fd);
	daemon_stop();
}
END_TEST

START_TEST(test_request_ring_is_checked_and_a_bad_tail_closes_only_its_session)
{
	struct staging rs, other;
	struct harness_req r;
	struct sseq_ring_header *h;
	char msg[256];
	int fd, bystander;
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__StagingUnregister su = SSEQ__STAGING_UNREGISTER__INIT;

	daemon_start(NULL);
	fd = conn_hello();
	bystander = conn_hello();
	ck_assert_int_eq(staging_register(fd, &other, 3 * 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		ring_request(fd, other.handle, 0, 3000), SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_int_eq(
		ring_request(fd, other.handle, 0, 2048), SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_int_eq(
		ring_request(fd, other.handle, 8, 4096), SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_int_eq(
		ring_request(fd, other.handle, 2 * 4096, 4096), SSEQ__STATUS__STATUS_OUT_OF_RANGE);
	ck_assert_int_ne(ring_request(fd, other.handle + 1000, 0, 4096), SSEQ__STATUS__STATUS_OK);
	h = ring_named(fd, &rs, 4096);
	ck_assert_int_eq(
		ring_request(fd, other.handle, 0, 4096), SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	su.staging = rs.handle;
	rq.body_case = SSEQ__REQUEST__BODY_STAGING_UNREGISTER;
	rq.staging_unregister = &su;
	ck_assert_int_eq(expect_reply(fd, send_tagged(fd, &rq), NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_msg(strstr(msg, "request ring"), "%s", msg);
	ck_assert_int_eq(reply_status(fd, ring_send(fd, h, 4096, harness_req_sync(&r))),
		SSEQ__STATUS__STATUS_OK);
	/* A tail further ahead than the ring holds. */
	atomic_store(&h->tail, atomic_load(&h->head) + 4096 + 1);
	send_raw(fd, (const uint8_t[FRAME_HEADER]){0}, FRAME_HEADER, -1);
	ck_assert_int_eq(
		expect_reply(fd, 0, NULL, msg, sizeof(msg)), SSEQ__STATUS__STATUS_PROTOCOL_ERROR);
	ck_assert_msg(strstr(msg, "request ring"), "%s", msg);
	ck_assert(conn_closed(fd));
	/* Nobody looks at it any more: a write there rings, and hears of the close. */
	ck_assert_uint_eq(atomic_load(&h->awake), 0);
	close(fd);
	fill_and_check(bystander, 3.0f);
	close(bystander);
	daemon_stop();
}
END_TEST

START_TEST(test_d2h_done_word_answers_instead_of_a_completion)
{
	struct staging st;
	uint64_t a, t;
	const size_t N = 256, W = N * 4; /* H2D from [0, W), the word at W, D2H to 2W */
	_Atomic uint64_t *word;
	char msg[256];
	int fd;

	daemon_start((const char *const[]){"--sim-delay", "d2h=2ms", NULL});
	fd = conn_hello();
	word = word_arena(fd, &st, 3 * W, W);
	ck_assert_int_eq(do_alloc(fd, W, &a), SSEQ__STATUS__STATUS_OK);
	for (size_t i = 0; i < N; i++)
		st.map[i] = (float)i;
	/* The D2H waits for the H2D on the device (its input's producer), not here. */
	ck_assert_int_eq(
		reply_status(fd, send_h2d(fd, st.handle, 0, a, 0, W)), SSEQ__STATUS__STATUS_OK);
	{
		struct harness_req req;

		harness_req_d2h(&req, a, 0, st.handle, 2 * W, W);
		req.body.d2h.done_word = W + 1;
		t = send_tagged(fd, &req.rq);
	}
	ck_assert_int_eq(reply_status(fd, t), SSEQ__STATUS__STATUS_OK);
	uint64_t got = 0;
	for (int i = 0; i < 5000 && (got = atomic_load(word)) != t; i++)
		usleep(1000);
	ck_assert_uint_eq(got, t);
	for (size_t i = 0; i < N; i++)
		ck_assert_msg(st.map[2 * N + i] == (float)i, "[%zu] = %g after the word", i,
			(double)st.map[2 * N + i]);
	ck_assert_uint_eq(written_reaching(fd, t, 1), 1);

	/* Marked by a client that sleeps: the Completion comes, and the word says so (the
	 * refusal, protocol 1.12). */
	atomic_store(word, UINT64_MAX);
	{
		struct harness_req req;

		harness_req_d2h(&req, a, 0, st.handle, 2 * W, W);
		req.body.d2h.done_word = W + 1;
		ASSERT_OK_AND_COMPLETED(fd, send_tagged(fd, &req.rq));
	}
	got = atomic_load(word);
	ck_assert_uint_eq(got, DONE_WORD_REFUSED);
	ck_assert_uint_eq(written_reaching(fd, 0, 1), 1);

	/* Misaligned, inside the copy's range, past the arena's end. */
	const uint64_t bad[] = {W + 5, 2 * W + 8 + 1, 3 * W - 4 + 1, 3 * W + 1};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct harness_req req;

		harness_req_d2h(&req, a, 0, st.handle, 2 * W, W);
		req.body.d2h.done_word = bad[i];
		ck_assert_int_eq(expect_reply(fd, send_tagged(fd, &req.rq), NULL, msg, sizeof(msg)),
			SSEQ__STATUS__STATUS_OUT_OF_RANGE);
		ck_assert_msg(strstr(msg, "done word"), "%s", msg);
	}
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

/* An Await with its word (protocol 1.13): the buffer `a`, the word at offset w of arena
 * st (done_word w + 1). */
static uint64_t send_await_word(int fd, uint64_t a, const struct staging *st, uint64_t done_word)
{
	struct harness_req req;

	harness_req_await(&req, a);
	req.body.await.staging = st->handle;
	req.body.await.done_word = done_word;
	return send_tagged(fd, &req.rq);
}

/* Await.done_word (protocol 1.13): once the awaited buffer's producer completes (an H2D
 * of 200 ms on the sim), the tag lands in the word and no Completion follows; a buffer
 * already complete gets its tag before its Reply is read; a word the client marked
 * (asleep on its socket) gets the refusal and the Completion; a word misplaced, or in an
 * arena the session does not have, is refused. */
START_TEST(test_await_done_word_answers_instead_of_a_completion)
{
	struct staging st;
	uint64_t a, t, got = 0;
	const size_t N = 256, W = N * 4; /* H2D from [0, W), the word at W */
	_Atomic uint64_t *word;
	char msg[256];
	int fd;

	SIM_ONLY();
	daemon_start((const char *const[]){"--sim-delay", "h2d=200ms", NULL});
	fd = conn_hello();
	word = word_arena(fd, &st, 2 * W, W);
	ck_assert_int_eq(do_alloc(fd, W, &a), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		reply_status(fd, send_h2d(fd, st.handle, 0, a, 0, W)), SSEQ__STATUS__STATUS_OK);
	atomic_store(word, 0);
	t = send_await_word(fd, a, &st, W + 1);
	ck_assert_int_eq(reply_status(fd, t), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(atomic_load(word), 0); /* the H2D still runs */
	for (int i = 0; i < 5000 && (got = atomic_load(word)) != t; i++)
		usleep(1000);
	ck_assert_uint_eq(got, t);
	ck_assert_uint_eq(written_reaching(fd, t, 1), 1);

	/* Complete already: written by the loop as it answers. */
	atomic_store(word, 0);
	t = send_await_word(fd, a, &st, W + 1);
	ck_assert_int_eq(reply_status(fd, t), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(atomic_load(word), t);
	ck_assert_uint_eq(written_reaching(fd, t, 2), 2);

	/* Marked by a client asleep on its socket: the refusal, then the Completion. */
	ck_assert_int_eq(
		reply_status(fd, send_h2d(fd, st.handle, 0, a, 0, W)), SSEQ__STATUS__STATUS_OK);
	atomic_store(word, DONE_WORD_UNWATCHED);
	ASSERT_OK_AND_COMPLETED(fd, send_await_word(fd, a, &st, W + 1));
	ck_assert_uint_eq(atomic_load(word), DONE_WORD_REFUSED);
	ck_assert_uint_eq(written_reaching(fd, 0, 2), 2);

	/* Misaligned, past the arena's end, in an arena that is not the session's. */
	const uint64_t bad[] = {W + 5, 2 * W - 4 + 1, 2 * W + 1};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		ck_assert_int_eq(expect_reply(fd, send_await_word(fd, a, &st, bad[i]), NULL, msg,
					 sizeof(msg)),
			SSEQ__STATUS__STATUS_OUT_OF_RANGE);
		ck_assert_msg(strstr(msg, "done word"), "%s", msg);
	}
	{
		struct staging other = st;

		other.handle = st.handle + 1000;
		ck_assert_int_eq(reply_status(fd, send_await_word(fd, a, &other, W + 1)),
			SSEQ__STATUS__STATUS_UNKNOWN_HANDLE);
	}
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

/* A client asleep on its Await's word (the sleeping mark) is woken by the tag; where the
 * awaited producer fails on the device, by the refusal, and the Completion carries the
 * error. Each H2D takes 200 ms, so the sleep begins first; without a wake-up it would
 * last its whole 5 s. */
START_TEST(test_await_done_word_wakes_a_client_asleep_on_it)
{
	struct staging st;
	uint64_t a, t;
	const size_t W = 1024;
	_Atomic uint64_t *word;
	int fd;

	SIM_ONLY();
	/* Launch 1 the first H2D, 2 the second, which fails on the device. */
	daemon_start((const char *const[]){
		"--sim-delay", "h2d=200ms", "--inject", "device-fail-op=2", NULL});
	fd = conn_hello();
	word = word_arena(fd, &st, 2 * W, W);
	for (int round = 0; round < 2; round++) {
		ck_assert_int_eq(do_alloc(fd, W, &a), SSEQ__STATUS__STATUS_OK);
		ck_assert_int_eq(reply_status(fd, send_h2d(fd, st.handle, 0, a, 0, W)),
			SSEQ__STATUS__STATUS_OK);
		atomic_store(word, DONE_WORD_SLEEPING);
		t = send_await_word(fd, a, &st, W + 1);
		ck_assert_int_eq(reply_status(fd, t), SSEQ__STATUS__STATUS_OK);
		expect_woken_on_word(fd, word, t, round == 0, 1,
			round ? "an Await of a failed H2D" : "an Await");
	}
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

START_TEST(test_sigterm_drains_work_in_flight)
{
	int fd, status = 0;
	uint64_t first = 0, last = 0;
	bool notice = false, refused_seen = false;
	uint64_t refused = 0;
	unsigned done = 0;

	daemon_start((const char *const[]){"--sim-delay", "compute=20ms", NULL});
	fd = conn_hello();
	for (int i = 0; i < 10; i++) {
		Sseq__Request rq = SSEQ__REQUEST__INIT;
		Sseq__Execute e = SSEQ__EXECUTE__INIT;
		Sseq__Arg arg = SSEQ__ARG__INIT, *argp = &arg;
		arg.value_case = SSEQ__ARG__VALUE_U64;
		arg.u64 = 100;
		e.target_case = SSEQ__EXECUTE__TARGET_KERNEL;
		e.kernel = (char *)"spin";
		e.n_args = 1;
		e.args = &argp;
		rq.want_completion = true;
		rq.body_case = SSEQ__REQUEST__BODY_EXECUTE;
		rq.execute = &e;
		send_tagged(fd, &rq);
		if (!first)
			first = rq.tag;
		last = rq.tag;
	}
	for (uint64_t t = first; t <= last; t++)
		ck_assert_int_eq(reply_status(fd, t), SSEQ__STATUS__STATUS_OK);
	/* ~200 ms of work queued; stop now. */
	kill(D.pid, SIGTERM);
	for (;;) {
		Sseq__Message *m = recv_msg(fd);
		if (!m)
			break; /* the daemon closed the connection once drained */
		if (m->body_case == SSEQ__MESSAGE__BODY_REPLY && m->reply->tag == 0) {
			ck_assert_int_eq(m->reply->status, SSEQ__STATUS__STATUS_SHUTTING_DOWN);
			notice = true;
			/* New work is refused while the old drains. */
			refused = send_exec(fd, "spin", "u", NULL, (double[]){1});
		} else if (m->body_case == SSEQ__MESSAGE__BODY_REPLY && m->reply->tag == refused) {
			ck_assert_int_eq(m->reply->status, SSEQ__STATUS__STATUS_SHUTTING_DOWN);
			refused_seen = true;
		} else if (m->body_case == SSEQ__MESSAGE__BODY_COMPLETION) {
			ck_assert_int_eq(m->completion->status, SSEQ__STATUS__STATUS_OK);
			done++;
		}
		sseq__message__free_unpacked(m, NULL);
	}
	ck_assert(notice);
	ck_assert(refused_seen);
	ck_assert_uint_eq(done, 10);
	ck_assert_int_eq(waitpid(D.pid, &status, 0), D.pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %#x", status);
	close(fd);
	unlink(D.sock);
}
END_TEST

/* Launch attributes (cooperative, cluster) are for module functions: a built-in
 * kernel's Execute with either is refused naming it; the same Execute without them
 * runs. */
START_TEST(test_builtin_kernel_refuses_launch_attributes)
{
	Sseq__LaunchCluster lc = SSEQ__LAUNCH_CLUSTER__INIT;
	char msg[256];
	uint64_t b;
	int fd;

	daemon_start(NULL);
	fd = conn_hello();
	ck_assert_int_eq(do_alloc(fd, 1024, &b), SSEQ__STATUS__STATUS_OK);
	for (int i = 0; i < 3; i++) {
		struct harness_req r;
		Sseq__Execute *e = &r.body.exec.e;
		Sseq__Status st;

		harness_req_exec(&r, "fill", "ofu", &b, (double[]){1, 256});
		e->cooperative = i == 1;
		lc.x = 2;
		e->cluster = i == 2 ? &lc : NULL;
		msg[0] = 0;
		st = expect_reply(fd, send_tagged(fd, &r.rq), NULL, msg, sizeof(msg));
		if (i == 0) {
			ck_assert_int_eq(st, SSEQ__STATUS__STATUS_OK);
			continue;
		}
		ck_assert_int_eq(st, SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
		ck_assert_msg(strstr(msg, "fill is a built-in kernel") &&
				strstr(msg, "for module functions"),
			"message: %s", msg);
	}
	sync_all(fd);
	close(fd);
	daemon_stop();
}
END_TEST

/* ---- client-named handles (protocol 1.9) ------------------------------------------- */

/* A client's name for a handle: index in bits 0..30 with bit 31 set, generation in bits
 * 32..46. */
static uint64_t named(uint32_t index, uint32_t gen)
{
	return ((uint64_t)gen << 32) | 0x80000000u | index;
}

/* Requests packed one after another, to go in one write. */
struct frames {
	uint8_t buf[4096];
	size_t len;
};

static uint64_t frames_add(struct frames *f, Sseq__Request *rq)
{
	rq->tag = ++next_tag;
	f->len += frame_of(rq, f->buf + f->len, sizeof(f->buf) - f->len);
	return rq->tag;
}

static uint64_t frames_alloc(struct frames *f, uint64_t size, uint64_t name)
{
	struct harness_req r;

	return frames_add(f, harness_req_alloc(&r, size, "named", name));
}

static uint64_t frames_slice(
	struct frames *f, uint64_t of, uint64_t off, uint64_t len, uint64_t name)
{
	struct harness_req r;

	return frames_add(f, harness_req_slice(&r, of, off, len, name));
}

static uint64_t frames_fill(struct frames *f, uint64_t buf, float v, uint64_t n)
{
	struct harness_req r;

	return frames_add(f, fill_on(&r, 0, buf, v, n));
}

static uint64_t frames_d2d(struct frames *f, uint64_t src, uint64_t dst, uint64_t len)
{
	struct harness_req r;

	return frames_add(f, harness_req_d2d(&r, src, 0, dst, 0, len));
}

static uint64_t frames_d2h(struct frames *f, uint64_t src, uint64_t staging, uint64_t len)
{
	struct harness_req r;

	return frames_add(f, harness_req_d2h(&r, src, 0, staging, 0, len));
}

static uint64_t frames_await(struct frames *f, uint64_t buf)
{
	struct harness_req r;

	return frames_add(f, harness_req_await(&r, buf));
}

static uint64_t frames_free(struct frames *f, uint64_t buf)
{
	struct harness_req r;

	return frames_add(f, harness_req_free(&r, buf));
}

/* The frames sent in one write, and f emptied for the next. */
static void frames_send(int fd, struct frames *f)
{
	send_raw(fd, f->buf, f->len, -1);
	f->len = 0;
}

/* One request alone: its Reply's status, and its message in msg. */
static Sseq__Status named_alloc(int fd, uint64_t size, uint64_t name, uint64_t *handle, char *msg)
{
	struct frames f = {.len = 0};
	uint64_t tag = frames_alloc(&f, size, name);

	frames_send(fd, &f);
	return expect_reply(fd, tag, handle, msg, msg ? 256 : 0);
}

/* A buffer the client names is used in the same write as its Alloc, beside one the daemon
 * named: filled, copied to the other, read back and freed, all before any Reply came. */
START_TEST(test_named_alloc_is_used_in_the_same_write)
{
	struct staging st;
	struct frames f = {.len = 0};
	uint64_t a, h, n = named(1, 3), t_alloc, t_fill, t_d2d, t_d2h, t_free, t_fill2;
	int fd;

	daemon_start(NULL);
	fd = conn_hello();
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1024, &a), SSEQ__STATUS__STATUS_OK);
	t_alloc = frames_alloc(&f, 1024, n);
	t_fill = frames_fill(&f, n, 5.0f, 256);
	t_d2d = frames_d2d(&f, n, a, 1024);
	t_d2h = frames_d2h(&f, n, st.handle, 1024);
	t_free = frames_free(&f, n);
	t_fill2 = frames_fill(&f, a, 2.0f, 128); /* the daemon's own handle, after */
	frames_send(fd, &f);
	ck_assert_int_eq(expect_reply(fd, t_alloc, &h, NULL, 0), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(h, n); /* the Reply repeats the name */
	ck_assert_int_eq(reply_status(fd, t_fill), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, t_d2d), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, t_d2h), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, t_free), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, t_fill2), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(expect_completion(fd, t_d2h), SSEQ__STATUS__STATUS_OK);
	ck_assert_float_eq(st.map[0], 5.0f);
	ck_assert_float_eq(st.map[255], 5.0f);
	/* a holds the copy, then the fill's first 128 floats. */
	ASSERT_OK_AND_COMPLETED(fd, send_d2h(fd, a, 0, st.handle, 2048, 1024));
	ck_assert_float_eq(st.map[512], 2.0f);
	ck_assert_float_eq(st.map[512 + 127], 2.0f);
	ck_assert_float_eq(st.map[512 + 128], 5.0f);
	ck_assert_float_eq(st.map[512 + 255], 5.0f);
	/* Freed: the name is unknown, and its index may be named again. */
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "fill", "ofu", &n, (double[]){1, 4})),
		SSEQ__STATUS__STATUS_UNKNOWN_HANDLE);
	ck_assert_int_eq(named_alloc(fd, 64, named(1, 4), &h, NULL), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(h, named(1, 4));
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

/* A name of another form, an index in use or above --client-handle-limit: refused as an
 * invalid argument, and the name not taken; a stale generation names nothing. */
START_TEST(test_named_handle_of_bad_form_or_in_use_is_refused)
{
	uint64_t h = 0, n = named(2, 1), s1;
	struct frames f = {.len = 0};
	char msg[256];
	int fd;

	daemon_start((const char *const[]){"--client-handle-limit", "8", NULL});
	fd = conn_hello();
	ck_assert_int_eq(named_alloc(fd, 64, 5, &h, msg), SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(msg, "bit 31"));
	ck_assert_uint_eq(h, 0);
	ck_assert_int_eq(
		named_alloc(fd, 64, named(0, 1), NULL, msg), SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_int_eq(named_alloc(fd, 64, named(1, 1) | (1ull << 47), NULL, msg),
		SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_int_eq(
		named_alloc(fd, 64, named(9, 1), NULL, msg), SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(msg, "1 to 8"));
	/* None of those was taken as refused: using it is unknown, not a failed dependency. */
	ck_assert_int_eq(
		reply_status(fd,
			send_exec(fd, "fill", "ofu", (uint64_t[]){named(9, 1)}, (double[]){1, 4})),
		SSEQ__STATUS__STATUS_UNKNOWN_HANDLE);
	ck_assert_int_eq(named_alloc(fd, 64, named(8, 1), &h, NULL), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(h, named(8, 1));
	ck_assert_int_eq(named_alloc(fd, 64, n, NULL, NULL), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		named_alloc(fd, 64, named(2, 7), NULL, msg), SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(msg, "0x780000002 is in use"));
	/* A slice can be named too, not with a name in use. */
	frames_slice(&f, n, 0, 32, n);
	frames_send(fd, &f);
	ck_assert_int_eq(expect_reply(fd, next_tag, NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	frames_slice(&f, n, 32, 32, named(3, 1));
	frames_send(fd, &f);
	ck_assert_int_eq(expect_reply(fd, next_tag, &s1, NULL, 0), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(s1, named(3, 1));
	/* The first is still n's, and a stale generation of it names nothing. */
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "fill", "ofu", &n, (double[]){1, 16})),
		SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "fill", "ofu", &s1, (double[]){1, 8})),
		SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		reply_status(fd,
			send_exec(fd, "fill", "ofu", (uint64_t[]){named(2, 2)}, (double[]){1, 16})),
		SSEQ__STATUS__STATUS_UNKNOWN_HANDLE);
	sync_all(fd);
	close(fd);
	daemon_stop();
}
END_TEST

/* An Alloc refused (over --client-memory-limit) whose name the next requests of the same
 * write use: each fails as a failed dependency quoting the refusal; Free drops the name,
 * and its index can be named again. Refused names count against no limit. */
START_TEST(test_refused_named_alloc_fails_its_uses_with_the_refusal)
{
	struct staging st;
	struct frames f = {.len = 0};
	uint64_t n = named(1, 2), m = named(2, 1), h, t_alloc, t_fill, t_d2h, t_await, t_slice,
		 t_use_slice, t_free, t_after;
	char msg[256];
	int fd;

	daemon_start((const char *const[]){
		"--client-memory-limit", "65536", "--client-handle-limit", "5", NULL});
	fd = conn_hello();
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	t_alloc = frames_alloc(&f, 1 << 20, n);
	t_fill = frames_fill(&f, n, 5.0f, 256);
	t_d2h = frames_d2h(&f, n, st.handle, 1024);
	t_await = frames_await(&f, n);
	t_slice = frames_slice(&f, n, 0, 64, m);
	t_use_slice = frames_fill(&f, m, 1.0f, 16);
	t_free = frames_free(&f, n);
	t_after = frames_fill(&f, n, 5.0f, 256);
	frames_send(fd, &f);
	ck_assert_int_eq(expect_reply(fd, t_alloc, NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
	ck_assert_ptr_nonnull(strstr(msg, "--client-memory-limit"));
	ck_assert_int_eq(expect_reply(fd, t_fill, NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_DEPENDENCY_FAILED);
	ck_assert_ptr_nonnull(strstr(msg, "buffer handle 0x280000001: its Alloc was refused: "));
	ck_assert_ptr_nonnull(strstr(msg, "--client-memory-limit"));
	ck_assert_int_eq(expect_reply(fd, t_d2h, NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_DEPENDENCY_FAILED);
	ck_assert_ptr_nonnull(strstr(msg, "its Alloc was refused"));
	ck_assert_int_eq(reply_status(fd, t_await), SSEQ__STATUS__STATUS_DEPENDENCY_FAILED);
	ck_assert_int_eq(expect_reply(fd, t_slice, NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_DEPENDENCY_FAILED);
	/* The slice's name is refused in turn, quoting why. */
	ck_assert_int_eq(expect_reply(fd, t_use_slice, NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_DEPENDENCY_FAILED);
	ck_assert_ptr_nonnull(strstr(msg, "0x180000002: its Slice was refused: "));
	ck_assert_int_eq(reply_status(fd, t_free), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, t_after), SSEQ__STATUS__STATUS_UNKNOWN_HANDLE);
	/* Refused for its size: the same, quoting that. */
	ck_assert_int_eq(
		named_alloc(fd, 0, named(3, 1), NULL, msg), SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_int_eq(
		expect_reply(fd,
			send_exec(fd, "fill", "ofu", (uint64_t[]){named(3, 1)}, (double[]){1, 4}),
			NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_DEPENDENCY_FAILED);
	ck_assert_ptr_nonnull(strstr(msg, "its Alloc was refused: alloc size 0 out of range"));
	/* Two names refused (m, 3) count against no limit: with the arena, 5 handles still
	 * fit, 2 of them named again over refused names. */
	ck_assert_int_eq(named_alloc(fd, 1024, n, &h, NULL), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(h, n);
	ck_assert_int_eq(named_alloc(fd, 1024, named(3, 5), NULL, NULL), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1024, &h), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(named_alloc(fd, 1024, named(4, 1), NULL, NULL), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1024, &h), SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
	/* m is still refused. */
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "fill", "ofu", &m, (double[]){1, 4})),
		SSEQ__STATUS__STATUS_DEPENDENCY_FAILED);
	fill_and_read_back(fd, n, &st, 7.0f);
	close(fd);
	munmap(st.map, st.size);
	daemon_stop();
}
END_TEST

/* A session that ends holding named buffers (and a refused name) gives their memory back
 * like any other; the daemon exits clean (no refusal's message left, under LSan). */
START_TEST(test_session_end_releases_named_buffers)
{
	Sseq__QueryResult *r;
	struct frames f = {.len = 0};
	uint64_t last = 0;
	int fd, watcher;

	daemon_start((const char *const[]){"--client-memory-limit", "65536", NULL});
	fd = conn_hello();
	watcher = conn_hello();
	for (uint32_t i = 1; i <= 4; i++) {
		frames_alloc(&f, 4096, named(i, i));
		frames_fill(&f, named(i, i), 1.0f, 1024);
	}
	frames_alloc(&f, 1 << 20, named(5, 1)); /* refused */
	last = frames_slice(&f, named(1, 1), 0, 64, named(6, 1));
	frames_send(fd, &f);
	ck_assert_int_eq(reply_status(fd, last), SSEQ__STATUS__STATUS_OK);
	r = query(watcher, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS);
	ck_assert_uint_eq(r->n_buffers, 5);
	ck_assert_uint_eq(r->buffers[4]->handle, named(6, 1));
	ck_assert_uint_eq(r->buffers[4]->base_handle, named(1, 1));
	sseq__query_result__free_unpacked(r, NULL);
	r = query(watcher, SSEQ__QUERY_KIND__QUERY_KIND_STATUS);
	ck_assert_uint_eq(r->device->memory_used, 4 * 4096);
	sseq__query_result__free_unpacked(r, NULL);
	close(fd);
	wait_released(watcher, 1, 5000);
	r = query(watcher, SSEQ__QUERY_KIND__QUERY_KIND_STATUS);
	ck_assert_uint_eq(r->n_clients, 1);
	ck_assert_uint_eq(r->device->memory_used, 0);
	sseq__query_result__free_unpacked(r, NULL);
	r = query(watcher, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS);
	ck_assert_uint_eq(r->n_buffers, 0);
	sseq__query_result__free_unpacked(r, NULL);
	close(watcher);
	daemon_stop();
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, test_hello_welcomes_with_device);
	tcase_add_test(tc, test_roundtrip_h2d_exec_d2d_d2h);
	tcase_add_test(tc, test_request_ring_carries_the_sockets_stream);
	tcase_add_test(tc, test_request_ring_is_checked_and_a_bad_tail_closes_only_its_session);
	tcase_add_test(tc, test_d2h_done_word_answers_instead_of_a_completion);
	tcase_add_test(tc, test_a_word_named_again_before_the_loop_took_the_report_is_left_alone);
	tcase_add_test(tc, test_d2h_done_word_wakes_a_client_asleep_on_it);
	tcase_add_test(tc, test_await_done_word_answers_instead_of_a_completion);
	tcase_add_test(tc, test_await_done_word_wakes_a_client_asleep_on_it);
	tcase_add_test(tc, test_slice_await_sync_batch);
	tcase_add_test(tc, test_bad_handles_and_ranges_get_clear_errors);
	tcase_add_test(tc, test_unsealed_memfd_refused);
	tcase_add_test(tc, test_framing_errors_disconnect_cleanly);
	tcase_add_test(tc, test_killed_client_leaves_nothing_behind);
	tcase_add_test(tc, test_full_window_applies_backpressure);
	tcase_add_test(tc, test_injected_fault_flows_to_dependents);
	tcase_add_test(tc, test_metrics_and_trace_answer);
	tcase_add_test(tc, test_copy_between_slices_of_freed_base);
	tcase_add_test(tc, test_partial_kernel_output_keeps_failure);
	tcase_add_test(tc, test_slice_overwrite_keeps_device_error);
	tcase_add_test(tc, test_staging_unregister_and_load_module);
	tcase_add_test(tc, test_sigterm_drains_work_in_flight);
	tcase_add_test(tc, test_sessions_get_distinct_lanes);
	tcase_add_test(tc, test_two_lanes_for_one_session);
	tcase_add_test(tc, test_lane_out_of_range_refused);
	tcase_add_test(tc, test_order_holds_across_lanes);
	tcase_add_test(tc, test_builtin_kernel_refuses_launch_attributes);
	tcase_add_test(tc, test_named_alloc_is_used_in_the_same_write);
	tcase_add_test(tc, test_named_handle_of_bad_form_or_in_use_is_refused);
	tcase_add_test(tc, test_refused_named_alloc_fails_its_uses_with_the_refusal);
	tcase_add_test(tc, test_session_end_releases_named_buffers);
}

int main(int argc, char **argv)
{
	return harness_main(argc, argv, "daemon", 60, add_tests);
}
