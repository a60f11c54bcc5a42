/* A fault that poisons the device context, through a real sseqd on the sim
 * (--inject device-lost-op=N: from that launch on every stream's work fails, as on a GPU
 * after an illegal address). The daemon names the culprit, fails what was in flight,
 * builds the device again and keeps serving: the culprit hears it caused the reset, a
 * bystander's buffers answer with the reset that lost them instead of wrong data and
 * work again once allocated anew, a new session is served at once, the status and the
 * counters record the reset, and the daemon never exits for it. */
#include <inttypes.h>

#include "daemon-harness.h"

static int conn_worker(const char *worker)
{
	int fd = conn_open();

	hello_as(fd, SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR, worker);
	ck_assert_int_eq(reply_status(fd, 1), SSEQ__STATUS__STATUS_OK);
	return fd;
}

#define ck_has(text, part) ck_assert_msg(strstr(text, part), "no '%s' in: %s", part, text)

/* The culprit a: its buffer *ya filled fine, then a spin that poisons the context, whose
 * Completion (in msg) names the reset and the culprit's worker. */
static void culprit_poisons(int a, uint64_t *ya, const char *worker, char *msg, size_t size)
{
	uint64_t k;

	ck_assert_int_eq(do_alloc(a, 1024, ya), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(a, send_exec(a, "fill", "ofu", ya, (double[]){1, 256})),
		SSEQ__STATUS__STATUS_OK);
	sync_all(a);
	k = send_exec(a, "spin", "u", NULL, (double[]){0});
	ck_assert_int_eq(reply_status(a, k), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(expect_completion_msg(a, k, msg, size), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	ck_has(msg, "device reset 1");
	ck_has(msg, worker);
}

/* The request under tag used a buffer of the old context: refused, saying how it was
 * lost (the message in msg), not run on wrong data. */
static void refused_as_lost(int fd, uint64_t tag, char *msg, size_t size)
{
	ck_assert_int_eq(expect_reply(fd, tag, NULL, msg, size), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	ck_has(msg, "lost in a device reset");
}

/* After the reset everyone is served again: the bystander b frees its lost buffer *yb,
 * allocates and fills it anew and reads it back through its staging arena sb, which
 * survived; the culprit a works; a new session (worker `newcomer`, returned) is served
 * at once. */
static int served_again(int a, int b, uint64_t *yb, const struct staging *sb, const char *newcomer)
{
	int c;

	ck_assert_int_eq(do_free(b, *yb), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(b, 1024, yb), SSEQ__STATUS__STATUS_OK);
	fill_and_read_back(b, *yb, sb, 5.0f);
	fill_and_check(a, 6.0f);
	c = conn_worker(newcomer);
	fill_and_check(c, 3.0f);
	return c;
}

/* The status query q records the one reset, caused by `culprit`, and the two buffers it
 * lost (the culprit's and the bystander's). */
static void reset_recorded(const Sseq__QueryResult *q, const char *culprit)
{
	ck_assert_uint_eq(q->device->resets, 1);
	ck_has(q->device->last_reset_cause, culprit);
	ck_assert_uint_eq(q->counters->device_resets, 1);
	ck_assert_uint_eq(q->counters->buffers_lost, 2);
}

/* The scenario, with the daemon's extra arguments `args` (the injection and the mode). */
static void poisoned_context_scenario(const char *const *args)
{
	struct staging sb;
	Sseq__QueryResult *q;
	char msg[1024];
	uint64_t ya, yb, up0, t0, t1;
	struct timespec ts;
	int a, b, c;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw3");
	b = conn_worker("gw4");
	/* The bystander's data, launch 1, read back fine before the fault. */
	ck_assert_int_eq(staging_register(b, &sb, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(b, 1024, &yb), SSEQ__STATUS__STATUS_OK);
	fill_and_read_back(b, yb, &sb, 2.0f);
	/* The daemon's uptime, to compare after the reset. */
	q = query(b, SSEQ__QUERY_KIND__QUERY_KIND_STATUS);
	up0 = q->daemon->uptime_ns;
	sseq__query_result__free_unpacked(q, NULL);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	/* The culprit: launch 3 (fill) is fine, launch 4 (spin) poisons the context (the
	 * bystander's fill and download were 1 and 2). */
	culprit_poisons(a, &ya, "gw3", msg, sizeof(msg));
	ck_has(msg, "kernel spin");

	/* Every buffer of the old context says how it was lost, the culprit's and the
	 * bystander's alike: no wrong data. */
	refused_as_lost(b, send_d2h(b, yb, 0, sb.handle, 0, 1024), msg, sizeof(msg));
	ck_has(msg, "gw3");
	ck_has(msg, "kernel spin");
	refused_as_lost(a, send_exec(a, "fill", "ofu", &ya, (double[]){7, 256}), msg, sizeof(msg));
	/* A slice of a lost buffer too, not "out of memory". */
	refused_as_lost(b, send_slice(b, yb, 0, 512), msg, sizeof(msg));

	c = served_again(a, b, &yb, &sb, "gw5");

	clock_gettime(CLOCK_MONOTONIC, &ts);
	t1 = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	q = query(c, SSEQ__QUERY_KIND__QUERY_KIND_STATUS);
	/* The same daemon all along, a restart in place too: its uptime counts from its
	 * start, not from the exec. */
	ck_assert_msg(q->daemon->uptime_ns >= up0 + (t1 - t0),
		"uptime %" PRIu64 " ns, less than %" PRIu64 " + %" PRIu64 " ns",
		q->daemon->uptime_ns, up0, t1 - t0);
	reset_recorded(q, "gw3");
	sseq__query_result__free_unpacked(q, NULL);
	munmap(sb.map, sb.size);
	close(a);
	close(b);
	close(c);
	/* Still the process that was started (a restart in place keeps the PID), and it
	 * exits 0: a reset is not a failure of the daemon. The socket file is still its own
	 * after a restart in place, so it goes at the exit. */
	ck_assert_int_eq(kill(D.pid, 0), 0);
	daemon_stop_owned();
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

/* With several loops the context is every loop's: the loop that sees the fault parks the
 * others, fails every loop's work in flight and restarts the daemon in place with every
 * loop's sessions. The culprit (on loop 0) hears what it caused, the bystander (on loop
 * 1) finds its buffer lost and works again, and the PID stays. */
START_TEST(test_a_poisoned_context_restarts_every_loop_in_place)
{
	const char *const args[] = {"--loops", "2", "--inject", "device-lost-op=2", NULL};
	struct staging sb;
	Sseq__QueryResult *q;
	char msg[1024];
	uint64_t ya, yb, kb;
	int a, b, c;

	SIM_ONLY();
	daemon_start(args);
	/* Connections go to the loop with the fewest sessions: a to loop 0, b to loop 1.
	 * Each loop's sim counts its own launches; b launches nothing before the fault. */
	a = conn_worker("gw6");
	b = conn_worker("gw7");
	ck_assert_int_eq(staging_register(b, &sb, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(b, 1024, &yb), SSEQ__STATUS__STATUS_OK);
	/* The bystander's kernel, its loop's first launch, still runs when the fault comes:
	 * a suspect on the other loop. */
	kb = send_exec(b, "spin", "u", NULL, (double[]){2000000});
	ck_assert_int_eq(reply_status(b, kb), SSEQ__STATUS__STATUS_OK);
	culprit_poisons(a, &ya, "gw6", msg, sizeof(msg));
	ck_has(msg, "also running then: (loop 1) session 2 (gw7");
	ck_assert_int_eq(
		expect_completion_msg(b, kb, msg, sizeof(msg)), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	ck_has(msg, "device reset 1");

	/* The bystander's buffer, on the other loop, went with the context; that loop
	 * names the reset as the one that saw it did. */
	refused_as_lost(b, send_d2h(b, yb, 0, sb.handle, 0, 1024), msg, sizeof(msg));
	ck_has(msg, "lost in a device reset (the last, reset 1 at ");
	ck_has(msg, "gw6");
	c = served_again(a, b, &yb, &sb, "gw8");
	q = query(a, SSEQ__QUERY_KIND__QUERY_KIND_STATUS);
	reset_recorded(q, "gw6");
	sseq__query_result__free_unpacked(q, NULL);
	munmap(sb.map, sb.size);
	close(a);
	close(b);
	close(c);
	ck_assert_int_eq(kill(D.pid, 0), 0);
	daemon_stop();
}
END_TEST

/* A restart in place hands over what a session sent but the daemon has not run yet: here
 * half a frame, whose second half comes after the exec, and the request then runs. */
START_TEST(test_a_restart_in_place_keeps_a_half_sent_frame)
{
	const char *const args[] = {"--inject", "device-lost-op=1", "--device-reset", "exec", NULL};
	struct harness_req r;
	uint8_t frame[256];
	uint64_t ya, k, h = 0;
	char msg[1024];
	size_t len;
	int a, b;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw1");
	b = conn_worker("gw2");
	harness_req_alloc(&r, 4096, "after", 0);
	r.rq.tag = 777;
	len = frame_of(&r.rq, frame, sizeof(frame));
	send_raw(b, frame, 3, -1); /* part of the length prefix */
	usleep(100000);
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	k = send_exec(a, "fill", "ofu", &ya, (double[]){1, 256}); /* launch 1: poisons */
	ck_assert_int_eq(reply_status(a, k), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		expect_completion_msg(a, k, msg, sizeof(msg)), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	usleep(200000); /* the new process is serving */
	send_raw(b, frame + 3, len - 3, -1);
	ck_assert_int_eq(expect_reply(b, 777, &h, NULL, 0), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_ne(h, 0);
	close(a);
	close(b);
	daemon_stop();
}
END_TEST

/* Poison the context from session a, whose buffer ya it fills (the launch the daemon was
 * told to fail with device-lost-op), and wait until the failure reached a: the daemon
 * hands over and execs in the turn that fails it, so whatever is sent from here on is
 * read by the new process. */
static void poison_from(int a, uint64_t ya)
{
	char msg[1024];
	uint64_t k = send_exec(a, "fill", "ofu", &ya, (double[]){1, 256});

	ck_assert_int_eq(reply_status(a, k), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		expect_completion_msg(a, k, msg, sizeof(msg)), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	ck_has(msg, "device reset 1");
}

/* A session's request ring is handed over: the new process reads on from where the old
 * one stopped, and a frame written there after the exec runs. */
START_TEST(test_a_restart_in_place_reads_on_from_a_request_ring)
{
	const char *const args[] = {"--inject", "device-lost-op=1", "--device-reset", "exec", NULL};
	struct staging rs;
	struct harness_req r;
	struct sseq_ring_header *h;
	uint64_t ya, yb = 0, head;
	int a, b;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw1");
	b = conn_worker("gw2");
	h = ring_named(b, &rs, SSEQ_RING_MIN);
	ck_assert_int_eq(reply_status(b, ring_send(b, h, SSEQ_RING_MIN, harness_req_sync(&r))),
		SSEQ__STATUS__STATUS_OK);
	head = atomic_load(&h->head);
	ck_assert_uint_gt(head, 0);
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	poison_from(a, ya);
	usleep(200000); /* the new process is serving */
	ck_assert_uint_eq(atomic_load(&h->head), head);
	ck_assert_int_eq(
		expect_reply(b,
			ring_send(b, h, SSEQ_RING_MIN, harness_req_alloc(&r, 4096, "after", 0)),
			&yb, NULL, 0),
		SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_ne(yb, 0);
	ck_assert_uint_eq(atomic_load(&h->head), atomic_load(&h->tail));
	close(a);
	close(b);
	daemon_stop();
}
END_TEST

/* Replies and completions not yet written at the exec are handed over: a client that is
 * not reading when the context is poisoned still gets every Reply, once and in order,
 * and its Sync's Completion (libsseq would otherwise wait for ever). */
START_TEST(test_a_restart_in_place_hands_over_unwritten_replies)
{
	enum { N = 30000 };
	const char *const args[] = {"--inject", "device-lost-op=1", "--device-reset", "exec", NULL};
	struct harness_req r;
	uint8_t *frames, *seen;
	uint64_t ya, first, sync_tag, frames_in;
	bool sync_done = false;
	unsigned got = 0;
	size_t len = 0;
	int a, b;

	SIM_ONLY();
	frames = malloc((N + 1) * 32);
	seen = calloc(N + 1, 1);
	ck_assert(frames && seen);
	daemon_start(args);
	a = conn_worker("gw1");
	b = conn_worker("gw2");
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	/* N requests answered at once (an unknown handle each: a Reply with a message),
	 * about 1.5 MB of replies, far more than the socket holds, then a Sync. */
	first = next_tag + 1;
	harness_req_free(&r, 0xdead);
	for (int i = 0; i < N; i++) {
		r.rq.tag = ++next_tag;
		len += frame_of(&r.rq, frames + len, 32);
	}
	harness_req_sync(&r);
	r.rq.tag = sync_tag = ++next_tag;
	len += frame_of(&r.rq, frames + len, 32);
	frames_in = stats_of(a).frames_in;
	send_raw(b, frames, len, -1);
	/* Until the daemon has answered them all (b reads nothing yet). */
	for (int waited = 0; stats_of(a).frames_in < frames_in + N + 1; waited += 10) {
		ck_assert_msg(waited < 30000, "the daemon did not read b's frames");
		usleep(10000);
	}
	poison_from(a, ya);
	/* Now b reads: every tag answered exactly once, and the Sync completed. */
	while (!sync_done) {
		Sseq__Message *m = recv_msg(b);

		ck_assert_msg(m != NULL, "b's messages stop after %u replies of %u", got, N + 1);
		if (m->body_case == SSEQ__MESSAGE__BODY_REPLY) {
			uint64_t t = m->reply->tag;

			ck_assert_msg(t >= first && t <= sync_tag, "a reply under tag %llu",
				(unsigned long long)t);
			ck_assert_msg(!seen[t - first]++, "tag %llu answered twice",
				(unsigned long long)t);
			ck_assert_msg(t == first + got, "tag %llu answered out of order",
				(unsigned long long)t);
			got++;
		} else if (m->body_case == SSEQ__MESSAGE__BODY_COMPLETION) {
			ck_assert_uint_eq(m->completion->tag, sync_tag);
			ck_assert_int_eq(m->completion->status, SSEQ__STATUS__STATUS_OK);
			sync_done = true;
		}
		sseq__message__free_unpacked(m, NULL);
	}
	for (int i = 0; i <= N; i++)
		ck_assert_msg(seen[i], "tag %llu never answered", (unsigned long long)(first + i));
	free(frames);
	free(seen);
	close(a);
	close(b);
	daemon_stop();
}
END_TEST

/* An Alloc request whose frame body is exactly `body` bytes (its label fills it). */
static uint8_t *alloc_frame_sized(uint64_t tag, size_t body, size_t *len)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Alloc al = SSEQ__ALLOC__INIT;
	char *text = malloc(body);
	uint8_t *buf = malloc(body + FRAME_HEADER);
	size_t label = body - 16;

	al.size = 64;
	al.label = text;
	rq.tag = tag;
	rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
	rq.alloc = &al;
	for (int i = 0; i < 8; i++) { /* the varint lengths settle in a step or two */
		size_t got;

		memset(text, 'L', label);
		text[label] = 0;
		got = sseq__request__get_packed_size(&rq);
		if (got == body)
			break;
		label = label + body - got;
	}
	*len = frame_of(&rq, buf, body + FRAME_HEADER);
	ck_assert_uint_eq(*len, body + FRAME_HEADER);
	free(text);
	return buf;
}

/* A frame part-way read at the exec is counted against --max-input-memory as a live
 * read's is: once it has run and its connection closed, the budget is whole again, and
 * a large frame from anyone is read at once, not paused for good. */
START_TEST(test_a_restart_in_place_keeps_the_input_budget_exact)
{
	/* b's frame most of the way in at the exec: the more of it, the further a budget
	 * that did not count it would fall below zero when it went back. */
	enum { BODY = 1000 << 10, PART = 900 << 10, SMALLER = 300 << 10 };
	const char *const args[] = {"--inject", "device-lost-op=1", "--device-reset", "exec", NULL};
	uint64_t ya, tag = ++next_tag, tag2 = ++next_tag, h = 0;
	size_t len;
	uint8_t *big = alloc_frame_sized(tag, BODY, &len), *big2;
	Sseq__Counters c;
	int a, b, d, status;
	pid_t child;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw1");
	b = conn_worker("gw2");
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	send_raw(b, big, PART, -1);
	for (int waited = 0; stats_of(a).input_bytes < PART; waited += 10) {
		ck_assert_msg(waited < 10000, "the daemon did not read b's partial frame");
		usleep(10000);
	}
	usleep(200000); /* the rest of what the socket held */
	poison_from(a, ya);
	send_raw(b, big + PART, len - PART, -1);
	ck_assert_int_eq(expect_reply(b, tag, &h, NULL, 0), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_ne(h, 0);
	close(b);
	/* Once b's input went back: no connection buffers anything but a's small frames. */
	for (int waited = 0; (c = stats_of(a)).input_bytes > (256u << 10); waited += 10) {
		ck_assert_msg(waited < 10000, "%llu bytes of input still held",
			(unsigned long long)c.input_bytes);
		usleep(10000);
	}
	/* A large frame from a new client is read and answered, never paused. */
	d = conn_worker("gw3");
	big2 = alloc_frame_sized(tag2, SMALLER, &len);
	/* From a child: more than the socket holds, which a paused daemon would not read. */
	child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0)
		_exit(send(d, big2, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : 1);
	ck_assert_int_eq(expect_reply(d, tag2, &h, NULL, 0), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_uint_eq(stats_of(a).input_paused, 0);
	free(big);
	free(big2);
	close(a);
	close(d);
	daemon_stop();
}
END_TEST

/* A Batch held back by a full window when the context is poisoned goes on where it
 * stopped in the new process: each of its requests answered once, its Alloc run once. */
START_TEST(test_a_restart_in_place_resumes_a_held_batch)
{
	/* Launches: b's first two spins fill its window of 2, a's fill (3) poisons. */
	const char *const args[] = {
		"--inject", "device-lost-op=3", "--device-reset", "exec", "--window", "2", NULL};
	enum { INNER = 6 };
	Sseq__Request rq = SSEQ__REQUEST__INIT, inner[INNER], *innerp[INNER];
	Sseq__Batch bt = SSEQ__BATCH__INIT;
	Sseq__Alloc al = SSEQ__ALLOC__INIT;
	Sseq__Execute slow = SSEQ__EXECUTE__INIT, quick;
	Sseq__Arg slow_us = SSEQ__ARG__INIT, quick_us, *slow_argp = &slow_us,
		  *quick_argp = &quick_us;
	Sseq__Sync sy = SSEQ__SYNC__INIT;
	unsigned answered[INNER] = {0};
	Sseq__QueryResult *q;
	int buffers = -1;
	uint64_t ya, first;
	bool poisoned = false, done = false;
	int a, b;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw1");
	b = conn_worker("gw2");
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	/* Alloc, two spins of 2 s each (the window stays full while the context is
	 * poisoned, however loaded the machine), two short ones, Sync. */
	al.size = 1024;
	al.label = (char *)"once";
	slow_us.value_case = SSEQ__ARG__VALUE_U64;
	slow_us.u64 = 2000000;
	quick_us = slow_us;
	quick_us.u64 = 1000;
	slow.target_case = SSEQ__EXECUTE__TARGET_KERNEL;
	slow.kernel = (char *)"spin";
	slow.n_args = 1;
	quick = slow;
	slow.args = &slow_argp;
	quick.args = &quick_argp;
	first = next_tag + 1;
	for (int i = 0; i < INNER; i++) {
		sseq__request__init(&inner[i]);
		inner[i].tag = ++next_tag;
		innerp[i] = &inner[i];
		if (i == 0) {
			inner[i].body_case = SSEQ__REQUEST__BODY_ALLOC;
			inner[i].alloc = &al;
		} else if (i < INNER - 1) {
			inner[i].body_case = SSEQ__REQUEST__BODY_EXECUTE;
			inner[i].execute = i < 3 ? &slow : &quick;
		} else {
			inner[i].body_case = SSEQ__REQUEST__BODY_SYNC;
			inner[i].sync = &sy;
		}
	}
	bt.n_requests = INNER;
	bt.requests = innerp;
	rq.body_case = SSEQ__REQUEST__BODY_BATCH;
	rq.batch = &bt;
	send_tagged(b, &rq);
	while (!done) {
		Sseq__Message *m = recv_msg(b);

		ck_assert_msg(m != NULL, "the batch was never answered");
		if (m->body_case == SSEQ__MESSAGE__BODY_REPLY) {
			uint64_t t = m->reply->tag;

			if (t == rq.tag) {
				ck_assert_int_eq(m->reply->status, SSEQ__STATUS__STATUS_OK);
				done = true;
			} else {
				ck_assert_msg(t >= first && t < first + INNER,
					"a reply under tag %llu", (unsigned long long)t);
				ck_assert_msg(!answered[t - first]++,
					"inner request %llu answered twice",
					(unsigned long long)(t - first));
				ck_assert_int_eq(m->reply->status, SSEQ__STATUS__STATUS_OK);
			}
			/* Its first spin answered: the batch is held at the third. */
			if (t == first + 1 && !poisoned) {
				usleep(100000);
				poison_from(a, ya);
				poisoned = true;
			}
		}
		sseq__message__free_unpacked(m, NULL);
	}
	ck_assert(poisoned);
	for (int i = 0; i < INNER; i++)
		ck_assert_msg(
			answered[i] == 1, "inner request %d answered %u times", i, answered[i]);
	/* The Alloc ran once, before the exec, which lost its buffer: none was allocated
	 * again. */
	q = query(b, SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS);
	for (size_t i = 0; i < q->n_clients; i++)
		if (strcmp(q->clients[i]->worker_id, "gw2") == 0)
			buffers = (int)q->clients[i]->buffers;
	sseq__query_result__free_unpacked(q, NULL);
	ck_assert_int_eq(buffers, 0);
	close(a);
	close(b);
	daemon_stop();
}
END_TEST

/* A memfd that came ahead of its StagingRegister frame is handed over with the frame's
 * first bytes: the register is taken after the exec, and the arena is the client's. */
START_TEST(test_a_restart_in_place_keeps_a_memfd_ahead_of_its_register)
{
	const char *const args[] = {"--inject", "device-lost-op=1", "--device-reset", "exec", NULL};
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__StagingRegister sr = SSEQ__STAGING_REGISTER__INIT;
	struct staging st = {.size = 4096};
	uint8_t frame[128];
	uint64_t ya, y;
	size_t len;
	int a, b;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw1");
	b = conn_worker("gw2");
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	st.memfd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(st.memfd, 0);
	ck_assert_int_eq(ftruncate(st.memfd, (off_t)st.size), 0);
	ck_assert_int_eq(fcntl(st.memfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	st.map = mmap(NULL, st.size, PROT_READ | PROT_WRITE, MAP_SHARED, st.memfd, 0);
	ck_assert(st.map != MAP_FAILED);
	sr.size = st.size;
	rq.tag = ++next_tag;
	rq.body_case = SSEQ__REQUEST__BODY_STAGING_REGISTER;
	rq.staging_register = &sr;
	len = frame_of(&rq, frame, sizeof(frame));
	send_raw(b, frame, 3, st.memfd); /* the memfd, with part of the length prefix */
	close(st.memfd);
	usleep(100000);
	poison_from(a, ya);
	send_raw(b, frame + 3, len - 3, -1);
	ck_assert_int_eq(expect_reply(b, rq.tag, &st.handle, NULL, 0), SSEQ__STATUS__STATUS_OK);
	/* The arena is the one the client maps. */
	ck_assert_int_eq(do_alloc(b, 1024, &y), SSEQ__STATUS__STATUS_OK);
	fill_and_read_back(b, y, &st, 9.0f);
	munmap(st.map, st.size);
	close(a);
	close(b);
	daemon_stop();
}
END_TEST

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A connection that had not finished its Hello is handed over as such: a Hello half sent
 * before the exec is answered after it (not "Hello sent twice"), with the lanes asked
 * for. */
START_TEST(test_a_restart_in_place_answers_a_half_sent_hello)
{
	const char *const args[] = {"--inject", "device-lost-op=1", "--device-reset", "exec", NULL};
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Hello hl = SSEQ__HELLO__INIT;
	Sseq__Message *m = NULL;
	uint8_t frame[256];
	uint64_t ya;
	size_t len;
	int a, c;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw1");
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	c = conn_open();
	hl.protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	hl.worker_id = (char *)"gw2";
	hl.lanes = 2;
	rq.tag = 1;
	rq.body_case = SSEQ__REQUEST__BODY_HELLO;
	rq.hello = &hl;
	len = frame_of(&rq, frame, sizeof(frame));
	send_raw(c, frame, 5, -1);
	usleep(100000);
	poison_from(a, ya);
	send_raw(c, frame + 5, len - 5, -1);
	while (!m || m->body_case != SSEQ__MESSAGE__BODY_REPLY) {
		if (m)
			sseq__message__free_unpacked(m, NULL);
		m = recv_msg(c);
		ck_assert_msg(m != NULL, "the Hello was never answered");
	}
	ck_assert_msg(m->reply->status == SSEQ__STATUS__STATUS_OK, "Hello: %s", m->reply->message);
	ck_assert_ptr_nonnull(m->reply->welcome);
	ck_assert_uint_eq(m->reply->welcome->n_lanes, 2);
	sseq__message__free_unpacked(m, NULL);
	fill_and_check(c, 4.0f);
	close(a);
	close(c);
	daemon_stop();
}
END_TEST

/* A connection that has said nothing is still closed at its --hello-timeout, counted
 * from its connect: not from the exec, nor never (holding a client slot, with no
 * lanes). */
START_TEST(test_a_restart_in_place_keeps_the_hello_deadline)
{
	const char *const args[] = {"--inject", "device-lost-op=1", "--device-reset", "exec",
		"--hello-timeout", "5s", NULL};
	Sseq__Message *m;
	uint64_t ya;
	double t0;
	int a, d;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw1");
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	d = conn_open(); /* says nothing */
	t0 = now_s();
	usleep(4000000);
	poison_from(a, ya);
	m = recv_msg(d);
	ck_assert_msg(m != NULL, "the silent connection was never told (%.1f s)", now_s() - t0);
	ck_assert_int_eq(m->body_case, SSEQ__MESSAGE__BODY_REPLY);
	ck_has(m->reply->message, "--hello-timeout");
	sseq__message__free_unpacked(m, NULL);
	ck_assert(conn_closed(d));
	/* The sweep runs once a second, the new process's a second after it starts: about
	 * 6 s. A deadline counted from the exec would close it after 9 s. */
	ck_assert_msg(now_s() - t0 < 8.5, "closed %.1f s after its connect", now_s() - t0);
	close(a);
	close(d);
	daemon_stop();
}
END_TEST

/* A TRACE follow is a request answered for as long as the connection lasts: it goes on
 * under its tag after the exec, with the new process's entries. */
START_TEST(test_a_restart_in_place_keeps_a_trace_follower)
{
	const char *const args[] = {"--inject", "device-lost-op=1", "--device-reset", "exec", NULL};
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Query q = SSEQ__QUERY__INIT;
	Sseq__TraceOptions t = SSEQ__TRACE_OPTIONS__INIT;
	uint64_t ya, bufs[2], tag;
	bool followed = false;
	int a, c;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw1");
	c = conn_worker("gw2");
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	t.follow = true;
	q.kind = SSEQ__QUERY_KIND__QUERY_KIND_TRACE;
	q.trace = &t;
	rq.body_case = SSEQ__REQUEST__BODY_QUERY;
	rq.query = &q;
	tag = send_tagged(c, &rq);
	poison_from(a, ya);
	/* What the follower was sent up to the exec, read and set aside. */
	for (struct pollfd p = {c, POLLIN, 0}; poll(&p, 1, 500) > 0;) {
		Sseq__Message *m = recv_msg(c);

		ck_assert_ptr_nonnull(m);
		sseq__message__free_unpacked(m, NULL);
	}
	/* Work in the new process: its entries reach the follower under its tag. */
	ck_assert_int_eq(do_alloc(a, 4096, &bufs[0]), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(a, 4096, &bufs[1]), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(a, send_exec(a, "fill", "ofu", bufs, (double[]){1, 1024})),
		SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(a, send_exec(a, "scale", "iofu", bufs, (double[]){2, 1024})),
		SSEQ__STATUS__STATUS_OK);
	sync_all(a);
	while (!followed) {
		Sseq__Message *m = recv_msg(c);

		ck_assert_msg(m != NULL, "the follower hears nothing after the exec");
		followed = m->body_case == SSEQ__MESSAGE__BODY_QUERY_RESULT &&
			m->query_result->tag == tag && m->query_result->n_trace > 0;
		sseq__message__free_unpacked(m, NULL);
	}
	close(a);
	close(c);
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
	/* Both run before the next is sent: the sim counts launches as they start, and gw2's
	 * fill, held while gw1's ran alone, could otherwise start fifth. */
	sync_all(a);
	sync_all(b);
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

/* The copy-first fault of the two tests below: the bystander b uploads into a buffer of its
 * own (its upload begun before the fault, failing 150 ms in: --sim-delay h2d=150ms), then
 * the culprit a's spin loses the context as it starts and reports 600 ms later
 * (--sim-delay compute=600ms, the injection on the spin's launch). Both hear of the reset,
 * which names a's spin (`culprit`: "session N (gwA, pid ") and b's copy as a suspect
 * (`suspect`, likewise). b's staging arena in *sb. */
static void upload_fails_before_the_spin(
	int a, int b, struct staging *sb, const char *culprit, const char *suspect)
{
	char msg[1024], want[128];
	uint64_t yb, h, k;

	ck_assert_int_eq(staging_register(b, sb, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(b, 1024, &yb), SSEQ__STATUS__STATUS_OK);
	h = send_h2d(b, sb->handle, 0, yb, 0, 1024);
	ck_assert_int_eq(reply_status(b, h), SSEQ__STATUS__STATUS_OK);
	k = send_exec(a, "spin", "u", NULL, (double[]){0});
	ck_assert_int_eq(reply_status(a, k), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		expect_completion_msg(b, h, msg, sizeof(msg)), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	snprintf(want, sizeof(want), "caused by %s", culprit);
	ck_has(msg, want);
	ck_has(msg, "kernel spin at point");
	snprintf(want, sizeof(want), "also running then: %s", suspect);
	ck_has(msg, want);
	ck_assert_int_eq(
		expect_completion_msg(a, k, msg, sizeof(msg)), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	snprintf(want, sizeof(want), "caused by %s", culprit);
	ck_has(msg, want);
}

/* A fault is a kernel's: when the first event to fail is a bystander's copy (its stream
 * saw the poisoned context before the faulting kernel's own stream reported, as on an
 * H200 on 2026-12-07, where the bystander was blamed), the culprit named is the kernel
 * then running, and the copy a suspect. */
START_TEST(test_a_reset_first_seen_on_a_copy_names_the_kernel_then_running)
{
	const char *const args[] = {"--sim-delay", "compute=600ms", "--sim-delay", "h2d=150ms",
		"--inject", "device-lost-op=2", NULL};
	struct staging sb;
	int a, b;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw1");
	b = conn_worker("gw2");
	upload_fails_before_the_spin(a, b, &sb, "session 1 (gw1, pid ", "session 2 (gw2, pid ");
	munmap(sb.map, sb.size);
	close(a);
	close(b);
	daemon_stop();
}
END_TEST

/* The same across loops: the context is every loop's, so the loop that sees the fault
 * first may be a bystander's, with no kernel of its own running. The culprit named is the
 * kernel then running on another loop (here loop 1's spin), the bystander's copy a
 * suspect (the H200 case of 2026-12-07 exactly: there the bystander was blamed). */
START_TEST(test_a_reset_seen_first_on_another_loop_names_the_kernel_there)
{
	const char *const args[] = {"--loops", "2", "--sim-delay", "compute=600ms", "--sim-delay",
		"h2d=150ms", "--inject", "device-lost-op=2", NULL};
	struct staging sb;
	uint64_t ya;
	int a, b;

	SIM_ONLY();
	daemon_start(args);
	/* Connections go to the loop with the fewest sessions: b to loop 0, a to loop 1.
	 * Each loop's sim counts its own launches: a's fill is loop 1's first, so that its
	 * spin is the second; b's upload is loop 0's first. */
	b = conn_worker("gw2");
	a = conn_worker("gw1");
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(a, send_exec(a, "fill", "ofu", &ya, (double[]){1, 256})),
		SSEQ__STATUS__STATUS_OK);
	sync_all(a);
	upload_fails_before_the_spin(a, b, &sb, "session 2 (gw1, pid ", "session 1 (gw2, pid ");
	/* Both served again by the restarted process. */
	fill_and_check(a, 6.0f);
	fill_and_check(b, 7.0f);
	munmap(sb.map, sb.size);
	close(a);
	close(b);
	daemon_stop();
}
END_TEST

/* A stop asked for right after a restart in place (here as soon as the culprit hears of
 * the reset, while the new process may still be starting) waits for the new process's
 * handlers and drains: exit 0. Before, the exec'ing thread had SIGTERM unblocked, and a
 * SIGTERM in the new process's first moments ended it with no drain. */
START_TEST(test_a_stop_right_after_a_restart_in_place_drains_and_exits_0)
{
	const char *const args[] = {"--inject", "device-lost-op=2", "--device-reset", "exec", NULL};
	uint64_t ya;
	char msg[1024];
	int a;

	SIM_ONLY();
	daemon_start(args);
	a = conn_worker("gw1");
	culprit_poisons(a, &ya, "gw1", msg, sizeof(msg));
	daemon_stop(); /* exit 0, or it fails */
	close(a);
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, test_a_poisoned_context_is_reset_and_the_daemon_serves_again);
	tcase_add_test(tc, test_a_poisoned_context_restarts_the_daemon_in_place);
	tcase_add_test(tc, test_isolate_faults_attributes_the_next_fault_exactly);
	tcase_add_test(tc, test_a_reset_first_seen_on_a_copy_names_the_kernel_then_running);
	tcase_add_test(tc, test_a_reset_seen_first_on_another_loop_names_the_kernel_there);
	tcase_add_test(tc, test_a_stop_right_after_a_restart_in_place_drains_and_exits_0);
	tcase_add_test(tc, test_a_poisoned_context_restarts_every_loop_in_place);
	tcase_add_test(tc, test_a_restart_in_place_keeps_a_half_sent_frame);
	tcase_add_test(tc, test_a_restart_in_place_hands_over_unwritten_replies);
	tcase_add_test(tc, test_a_restart_in_place_reads_on_from_a_request_ring);
	tcase_add_test(tc, test_a_restart_in_place_keeps_the_input_budget_exact);
	tcase_add_test(tc, test_a_restart_in_place_resumes_a_held_batch);
	tcase_add_test(tc, test_a_restart_in_place_keeps_a_memfd_ahead_of_its_register);
	tcase_add_test(tc, test_a_restart_in_place_answers_a_half_sent_hello);
	tcase_add_test(tc, test_a_restart_in_place_keeps_the_hello_deadline);
	tcase_add_test(tc, test_a_restart_in_place_keeps_a_trace_follower);
}

int main(int argc, char **argv)
{
	return harness_main(argc, argv, "reset", 60, add_tests);
}
