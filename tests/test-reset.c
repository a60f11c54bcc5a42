/* A fault that poisons the device context, through a real sseqd on the sim
 * (--inject device-lost-op=N: from that launch on every stream's work fails, as on a GPU
 * after an illegal address). The daemon names the culprit, fails what was in flight,
 * builds the device again and keeps serving: the culprit hears it caused the reset, a
 * bystander's buffers answer with the reset that lost them instead of wrong data and
 * work again once allocated anew, a new session is served at once, the status and the
 * counters record the reset, and the daemon never exits for it. */
#include "daemon-harness.h"

static int conn_worker(const char *worker)
{
	int fd = conn_open();

	hello_as(fd, SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR, worker);
	ck_assert_int_eq(reply_status(fd, 1), SSEQ__STATUS__STATUS_OK);
	return fd;
}

#define ck_has(text, part) ck_assert_msg(strstr(text, part), "no '%s' in: %s", part, text)

/* The scenario, with the daemon's extra arguments `args` (the injection and the mode). */
static void poisoned_context_scenario(const char *const *args)
{
	struct staging sb;
	Sseq__QueryResult *q;
	char msg[1024];
	uint64_t ya, yb, k;
	int a, b, c;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw3");
	b = conn_worker("gw4");
	/* The bystander's data, launch 1, read back fine before the fault. */
	ck_assert_int_eq(staging_register(b, &sb, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(b, 1024, &yb), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(b, send_exec(b, "fill", "ofu", &yb, (double[]){2, 256})),
		SSEQ__STATUS__STATUS_OK);
	ASSERT_OK_AND_COMPLETED(b, send_d2h(b, yb, 0, sb.handle, 0, 1024));
	ck_assert_float_eq(sb.map[0], 2.0f);
	/* The culprit: launch 3 (fill) is fine, launch 4 (spin) poisons the context (the
	 * bystander's fill and download were 1 and 2). */
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(a, send_exec(a, "fill", "ofu", &ya, (double[]){1, 256})),
		SSEQ__STATUS__STATUS_OK);
	sync_all(a);
	k = send_exec(a, "spin", "u", NULL, (double[]){0});
	ck_assert_int_eq(reply_status(a, k), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		expect_completion_msg(a, k, msg, sizeof(msg)), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	ck_has(msg, "device reset 1");
	ck_has(msg, "gw3");
	ck_has(msg, "kernel spin");

	/* Every buffer of the old context says how it was lost, the culprit's and the
	 * bystander's alike: no wrong data. */
	k = send_d2h(b, yb, 0, sb.handle, 0, 1024);
	ck_assert_int_eq(
		expect_reply(b, k, NULL, msg, sizeof(msg)), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	ck_has(msg, "lost in a device reset");
	ck_has(msg, "gw3");
	ck_has(msg, "kernel spin");
	k = send_exec(a, "fill", "ofu", &ya, (double[]){7, 256});
	ck_assert_int_eq(
		expect_reply(a, k, NULL, msg, sizeof(msg)), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	ck_has(msg, "lost in a device reset");

	/* Free and allocate again: the bystander works, its staging arena too. */
	ck_assert_int_eq(do_free(b, yb), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(b, 1024, &yb), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(b, send_exec(b, "fill", "ofu", &yb, (double[]){5, 256})),
		SSEQ__STATUS__STATUS_OK);
	ASSERT_OK_AND_COMPLETED(b, send_d2h(b, yb, 0, sb.handle, 0, 1024));
	ck_assert_float_eq(sb.map[255], 5.0f);
	fill_and_check(a, 6.0f);
	/* A new session is served at once. */
	c = conn_worker("gw5");
	fill_and_check(c, 3.0f);

	q = query(c, SSEQ__QUERY_KIND__QUERY_KIND_STATUS);
	ck_assert_uint_eq(q->device->resets, 1);
	ck_has(q->device->last_reset_cause, "gw3");
	ck_assert_uint_eq(q->counters->device_resets, 1);
	ck_assert_uint_eq(q->counters->buffers_lost, 2);
	sseq__query_result__free_unpacked(q, NULL);
	munmap(sb.map, sb.size);
	close(a);
	close(b);
	close(c);
	/* Still the process that was started (a restart in place keeps the PID), and it
	 * exits 0: a reset is not a failure of the daemon. */
	ck_assert_int_eq(kill(D.pid, 0), 0);
	daemon_stop();
}

START_TEST(test_a_poisoned_context_is_reset_and_the_daemon_serves_again)
{
	const char *const args[] = {"--inject", "device-lost-op=4", NULL};

	poisoned_context_scenario(args);
}
END_TEST

/* What a CUDA context needs (it cannot be made again in the process after a sticky
 * fault), forced on the sim: sseqd execs itself, keeping its PID, its socket and the
 * sessions, whose staging arenas survive and whose buffers say how they were lost. */
START_TEST(test_a_poisoned_context_restarts_the_daemon_in_place)
{
	const char *const args[] = {"--inject", "device-lost-op=4", "--device-reset", "exec", NULL};

	poisoned_context_scenario(args);
}
END_TEST

/* A restart in place hands over what a session sent but the daemon has not run yet: here
 * half a frame, whose second half comes after the exec, and the request then runs. */
START_TEST(test_a_restart_in_place_keeps_a_half_sent_frame)
{
	const char *const args[] = {"--inject", "device-lost-op=1", "--device-reset", "exec", NULL};
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Alloc al = SSEQ__ALLOC__INIT;
	uint8_t frame[256];
	uint64_t ya, k, h = 0;
	char msg[1024];
	size_t len;
	int a, b;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw1");
	b = conn_worker("gw2");
	al.size = 4096;
	al.label = (char *)"after";
	rq.tag = 777;
	rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
	rq.alloc = &al;
	len = sseq__request__get_packed_size(&rq);
	ck_assert_uint_le(len + FRAME_HEADER, sizeof(frame));
	frame_put_len(frame, (uint32_t)len);
	sseq__request__pack(&rq, frame + FRAME_HEADER);
	send_raw(b, frame, 3, -1); /* part of the length prefix */
	usleep(100000);
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	k = send_exec(a, "fill", "ofu", &ya, (double[]){1, 256}); /* launch 1: poisons */
	ck_assert_int_eq(reply_status(a, k), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		expect_completion_msg(a, k, msg, sizeof(msg)), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	usleep(200000); /* the new process is serving */
	send_raw(b, frame + 3, len + FRAME_HEADER - 3, -1);
	ck_assert_int_eq(expect_reply(b, 777, &h, NULL, 0), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_ne(h, 0);
	close(a);
	close(b);
	daemon_stop();
}
END_TEST

/* --isolate-faults: two sessions' kernels running when the context is poisoned are both
 * suspects and named so; from then on each one's kernels run alone, so the next fault is
 * pinned on its session exactly. */
START_TEST(test_isolate_faults_attributes_the_next_fault_exactly)
{
	const char *const args[] = {"--sim-delay", "compute=100ms", "--inject", "device-lost-op=2",
		"--inject", "device-lost-op=5", "--isolate-faults", NULL};
	uint64_t ya, yb, ka, kb;
	char msg[1024];
	int a, b;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw1");
	b = conn_worker("gw2");
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(b, 1024, &yb), SSEQ__STATUS__STATUS_OK);
	kb = send_exec(b, "spin", "u", NULL, (double[]){400000}); /* launch 1: 0.5 s */
	ck_assert_int_eq(reply_status(b, kb), SSEQ__STATUS__STATUS_OK);
	ka = send_exec(a, "fill", "ofu", &ya, (double[]){2, 256}); /* launch 2: poisons */
	ck_assert_int_eq(reply_status(a, ka), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		expect_completion_msg(a, ka, msg, sizeof(msg)), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	ck_has(msg, "also running then:"); /* both ran: suspects */
	ck_assert_int_eq(
		expect_completion_msg(b, kb, msg, sizeof(msg)), SSEQ__STATUS__STATUS_DEVICE_ERROR);

	ck_assert_int_eq(do_free(a, ya), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_free(b, yb), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(b, 1024, &yb), SSEQ__STATUS__STATUS_OK);
	ka = send_exec(a, "fill", "ofu", &ya, (double[]){3, 256}); /* launch 3, alone */
	kb = send_exec(b, "fill", "ofu", &yb, (double[]){4, 256}); /* launch 4, alone */
	ck_assert_int_eq(reply_status(a, ka), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(b, kb), SSEQ__STATUS__STATUS_OK);
	ka = send_exec(a, "spin", "u", NULL, (double[]){0}); /* launch 5: poisons, alone */
	ck_assert_int_eq(reply_status(a, ka), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		expect_completion_msg(a, ka, msg, sizeof(msg)), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	ck_has(msg, "device reset 2");
	ck_has(msg, "gw1");
	ck_has(msg, "kernel spin");
	ck_has(msg, "it ran alone: exact");
	ck_assert_msg(!strstr(msg, "also running then"), "%s", msg);
	close(a);
	close(b);
	daemon_stop();
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, test_a_poisoned_context_is_reset_and_the_daemon_serves_again);
	tcase_add_test(tc, test_a_poisoned_context_restarts_the_daemon_in_place);
	tcase_add_test(tc, test_isolate_faults_attributes_the_next_fault_exactly);
	tcase_add_test(tc, test_a_restart_in_place_keeps_a_half_sent_frame);
}

int main(int argc, char **argv)
{
	return harness_main(argc, argv, "reset", 60, add_tests);
}
