/* Backpressure with hysteresis (server.c, conn.c): a session stopped by a full stream
 * window waits on that stream and resumes only once the stream has drained below half its
 * window (knot-resolver's worker.c), not on every completion; other sessions and other
 * resume causes are not held up by it (I3: it never blocks the loop or guesses). */
#include <check.h>
#include <stdlib.h>

#include "conn.h"
#include "pause.h"
#include "session-limits.h"
#include "session.h"
#include "sseq-frame.h"
#include "test-loop.h"

#define WINDOW 8u

static uint32_t d2d_stream(struct tl *t)
{
	return seq_layout(t->srv.seq)->first[SEQ_STREAM_D2D];
}

/* A client that fills the D2D window: WINDOW copies run, the next one waits. Returns the
 * D2D stream. */
static uint32_t fill_window(struct tl *t, struct tl_client *c, unsigned copies)
{
	uint64_t h;

	tl_hello(t, c, "backpressure");
	h = tl_alloc(t, c, 4096, "buf");
	for (unsigned i = 0; i < copies; i++)
		tl_send_d2d(c, h, 64);
	tl_pump(t);
	return d2d_stream(t);
}

START_TEST(test_blocked_session_waits_on_the_stream_that_blocked_it)
{
	struct tl *t = tl_new(WINDOW);
	struct tl_client c;
	uint32_t x;

	tl_connect(t, &c);
	x = fill_window(t, &c, 3 * WINDOW);
	ck_assert_uint_eq(tl_issued(t, x), WINDOW);
	ck_assert(pause_has(&c.s->pause, PAUSE_WINDOW));
	ck_assert_uint_eq(c.s->pause.blocked_stream, x);
	ck_assert_ptr_eq(t->srv.blocked[x], c.s);
	ck_assert_uint_eq(t->srv.blocked_mask, 1u << x);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

START_TEST(test_blocked_session_resumes_only_below_half_the_window)
{
	struct tl *t = tl_new(WINDOW);
	struct tl_client c;
	uint32_t x;

	tl_connect(t, &c);
	x = fill_window(t, &c, 3 * WINDOW);
	ck_assert_uint_eq(tl_issued(t, x), WINDOW);

	/* 6 of 8 in flight: above half, the session stays paused (the old loop resumed it
	 * here, to submit two ops and block again). */
	tl_complete(t, x, 2);
	ck_assert_uint_eq(tl_completed(t, x), 2);
	ck_assert_uint_eq(tl_issued(t, x), WINDOW);
	ck_assert(pause_has(&c.s->pause, PAUSE_WINDOW));
	/* 4 of 8: exactly half is not below it. */
	tl_complete(t, x, 4);
	ck_assert_uint_eq(tl_issued(t, x), WINDOW);
	ck_assert(pause_has(&c.s->pause, PAUSE_WINDOW));
	/* 3 of 8: below half; it runs until the window is full again. */
	tl_complete(t, x, 5);
	ck_assert_uint_eq(tl_issued(t, x), 5 + WINDOW);
	ck_assert(pause_has(&c.s->pause, PAUSE_WINDOW));
	ck_assert_uint_eq(c.s->pause.blocked_stream, x);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

START_TEST(test_resumed_session_runs_what_it_buffered_and_answers_it)
{
	struct tl *t = tl_new(WINDOW);
	struct tl_client c;
	unsigned replies = 0;
	uint32_t x;

	tl_connect(t, &c);
	x = fill_window(t, &c, 2 * WINDOW);
	replies += tl_take_replies(&c);
	ck_assert_uint_eq(replies, WINDOW);
	tl_complete(t, x, WINDOW);
	ck_assert_uint_eq(tl_issued(t, x), 2 * WINDOW);
	ck_assert(!pause_has(&c.s->pause, PAUSE_WINDOW));
	ck_assert_ptr_null(t->srv.blocked[x]);
	ck_assert_uint_eq(t->srv.blocked_mask, 0);
	replies += tl_take_replies(&c);
	ck_assert_uint_eq(replies, 2 * WINDOW);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

/* Two sessions blocked on one stream both resume when it drains. */
START_TEST(test_every_session_on_the_stream_resumes)
{
	struct tl *t = tl_new(WINDOW);
	struct tl_client a, b;
	uint64_t hb;
	uint32_t x;

	tl_connect(t, &a);
	tl_connect(t, &b);
	fill_window(t, &a, 2 * WINDOW);
	tl_hello(t, &b, "second");
	hb = tl_alloc(t, &b, 4096, "b");
	tl_send_d2d(&b, hb, 64);
	tl_pump(t);
	x = d2d_stream(t);
	ck_assert(pause_has(&a.s->pause, PAUSE_WINDOW) && pause_has(&b.s->pause, PAUSE_WINDOW));
	ck_assert_uint_eq(tl_issued(t, x), WINDOW);
	tl_complete(t, x, WINDOW);
	/* a's eight more, or b's one and a's seven: both ran, the window is full again. */
	ck_assert_uint_eq(tl_issued(t, x), 2 * WINDOW);
	ck_assert(!pause_has(&b.s->pause, PAUSE_WINDOW) || !pause_has(&a.s->pause, PAUSE_WINDOW));
	tl_complete(t, x, 2 * WINDOW);
	ck_assert(!pause_has(&a.s->pause, PAUSE_WINDOW) && !pause_has(&b.s->pause, PAUSE_WINDOW));
	ck_assert_uint_eq(tl_issued(t, x), 2 * WINDOW + 1);
	tl_close(t, &a);
	tl_close(t, &b);
	tl_free(t);
}
END_TEST

/* A blocked session whose client goes away leaves its stream's list (ASan would see the
 * list reach freed memory otherwise), and the stream's later completion finds nobody. */
START_TEST(test_blocked_session_that_goes_away_leaves_the_list)
{
	struct tl *t = tl_new(WINDOW);
	struct tl_client c, other;
	uint32_t x;

	tl_connect(t, &c);
	tl_connect(t, &other);
	x = fill_window(t, &c, 2 * WINDOW);
	ck_assert_ptr_eq(t->srv.blocked[x], c.s);
	conn_close(c.s);
	ck_assert_ptr_null(t->srv.blocked[x]);
	ck_assert_uint_eq(t->srv.blocked_mask, 0);
	tl_close(t, &c);
	tl_complete(t, x, WINDOW);
	ck_assert_uint_eq(tl_issued(t, x), WINDOW);
	tl_close(t, &other);
	tl_free(t);
}
END_TEST

/* The in-flight cap's resume (pause_clear) still works beside the window's. */
START_TEST(test_inflight_cap_resumes_at_half)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	uint32_t x;

	t->srv.opts.account.client_inflight = 4;
	tl_connect(t, &c);
	x = fill_window(t, &c, 10);
	ck_assert_uint_eq(tl_issued(t, x), 4);
	ck_assert(pause_has(&c.s->pause, PAUSE_INFLIGHT));
	ck_assert(!pause_has(&c.s->pause, PAUSE_WINDOW));
	tl_complete(t, x, 2);
	ck_assert(!pause_has(&c.s->pause, PAUSE_TURN));
	ck_assert_uint_eq(tl_issued(t, x), 6);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

/* Round-robin reading: a session with many frames buffered has SESSION_TURN_FRAMES of
 * them run per loop turn and the rest in the turns after, without new input, so that the
 * other sessions' requests are read in between; nothing is lost or reordered. */
START_TEST(test_a_flooding_session_runs_a_bounded_share_per_turn)
{
	enum { FRAMES = 8 * SESSION_TURN_FRAMES };
	struct tl *t = tl_new(0);
	struct tl_client flood, quiet;
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Alloc a = SSEQ__ALLOC__INIT;
	Sseq__CopyD2D d = SSEQ__COPY_D2_D__INIT;
	unsigned replies, turns;
	uint8_t *buf;
	size_t len = 0;
	uint64_t tag, h;
	uint32_t x;

	tl_connect(t, &flood);
	tl_connect(t, &quiet);
	tl_hello(t, &quiet, "quiet");
	tl_hello(t, &flood, "flood");
	h = tl_alloc(t, &flood, 4096, "buf");
	x = d2d_stream(t);
	/* All of the flood's copies in one write, then the quiet client's Alloc, before the
	 * loop runs. */
	buf = malloc(FRAMES * 64);
	ck_assert_ptr_nonnull(buf);
	d.src = d.dst = h;
	d.dst_offset = d.length = 64;
	rq.body_case = SSEQ__REQUEST__BODY_COPY_D2D;
	rq.copy_d2d = &d;
	for (unsigned i = 0; i < FRAMES; i++) {
		rq.tag = flood.next_tag++;
		ck_assert_uint_le(sseq__request__get_packed_size(&rq) + FRAME_HEADER, 64);
		len += tl_frame(&rq, buf + len);
	}
	tl_write(&flood, buf, len, NULL, 0);
	free(buf);
	a.size = 4096;
	rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
	rq.alloc = &a;
	tag = tl_send(&quiet, &rq);

	uv_run(&t->loop, UV_RUN_NOWAIT);
	ck_assert_int_eq(tl_reply(&quiet, tag, NULL), SSEQ__STATUS__STATUS_OK);
	replies = tl_take_replies(&flood);
	ck_assert_uint_ge(replies, SESSION_TURN_FRAMES);
	ck_assert_uint_lt(replies, FRAMES);
	for (turns = 1; turns < 4 * FRAMES / SESSION_TURN_FRAMES && replies < FRAMES; turns++) {
		uv_run(&t->loop, UV_RUN_NOWAIT);
		replies += tl_take_replies(&flood);
	}
	ck_assert_uint_eq(replies, FRAMES);
	ck_assert_uint_eq(tl_issued(t, x), FRAMES);
	ck_assert_uint_ge(turns, FRAMES / SESSION_TURN_FRAMES / 2);
	tl_close(t, &flood);
	tl_close(t, &quiet);
	tl_free(t);
}
END_TEST

/* --client-inflight-limit holds inside a Batch: at the cap the batch stops, and it goes
 * on from where it stopped once half its work completed; every inner request is answered
 * once and the batch once, after the last. */
START_TEST(test_a_batch_stops_at_the_inflight_cap_and_resumes_where_it_left_off)
{
	enum { N = 10 };
	struct tl *t = tl_new(0);
	struct tl_client c;
	Sseq__Request outer = SSEQ__REQUEST__INIT, inner[N], *list[N];
	Sseq__Batch b = SSEQ__BATCH__INIT;
	Sseq__CopyD2D d = SSEQ__COPY_D2_D__INIT;
	unsigned answered[N] = {0}, batch_answered = 0;
	Sseq__Message *m;
	uint64_t h, tag;
	uint32_t x;

	t->srv.opts.account.client_inflight = 4;
	tl_connect(t, &c);
	tl_hello(t, &c, "batch");
	h = tl_alloc(t, &c, 4096, "buf");
	x = d2d_stream(t);
	d.src = d.dst = h;
	d.dst_offset = d.length = 64;
	for (unsigned i = 0; i < N; i++) {
		sseq__request__init(&inner[i]);
		inner[i].tag = 1000 + i;
		inner[i].body_case = SSEQ__REQUEST__BODY_COPY_D2D;
		inner[i].copy_d2d = &d;
		list[i] = &inner[i];
	}
	b.n_requests = N;
	b.requests = list;
	outer.body_case = SSEQ__REQUEST__BODY_BATCH;
	outer.batch = &b;
	tag = tl_send(&c, &outer);
	tl_pump(t);
	ck_assert_uint_eq(tl_issued(t, x), 4);
	ck_assert_uint_eq(c.s->counts.inflight, 4);
	ck_assert(pause_has(&c.s->pause, PAUSE_INFLIGHT));
	/* Half completed (here all): the next four, then the last two and the batch. */
	tl_complete(t, x, 4);
	ck_assert_uint_eq(tl_issued(t, x), 8);
	ck_assert_uint_le(c.s->counts.inflight, 4);
	tl_complete(t, x, 8);
	ck_assert_uint_eq(tl_issued(t, x), N);
	while ((m = tl_next(&c))) {
		ck_assert_int_eq(m->body_case, SSEQ__MESSAGE__BODY_REPLY);
		ck_assert_int_eq(m->reply->status, SSEQ__STATUS__STATUS_OK);
		if (m->reply->tag == tag) {
			batch_answered++;
		} else {
			ck_assert_uint_ge(m->reply->tag, 1000);
			ck_assert_uint_lt(m->reply->tag, 1000 + N);
			ck_assert_uint_eq(batch_answered, 0); /* the batch's Reply comes last */
			answered[m->reply->tag - 1000]++;
		}
		sseq__message__free_unpacked(m, NULL);
	}
	for (unsigned i = 0; i < N; i++)
		ck_assert_uint_eq(answered[i], 1);
	ck_assert_uint_eq(batch_answered, 1);
	ck_assert_uint_eq(c.s->pause.batch_resume, 0);
	tl_complete_all(t);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

/* A session paused at --client-inflight-limit is not a client stalling a frame: the
 * sweep leaves it alone however long its work takes, and its frame's deadline starts
 * again when it resumes (a partial frame then still times out). */
START_TEST(test_a_session_at_the_inflight_cap_is_not_timed_out)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	uint8_t part[2] = {0, 0};
	uint32_t x;

	t->srv.opts.account.client_inflight = 4;
	t->srv.opts.limits.frame_timeout_ms = 100;
	tl_connect(t, &c);
	x = fill_window(t, &c, 10);
	ck_assert(pause_has(&c.s->pause, PAUSE_INFLIGHT));
	ck_assert_uint_gt(c.s->in.len, 0); /* the copies it holds back */
	conn_sweep(c.s, server_loop_ns(&t->srv) + 60000000000u);
	ck_assert(!c.s->closing);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_FRAME_TIMEOUTS], 0);
	tl_complete(t, x, 4);
	tl_complete(t, x, 8);
	tl_complete(t, x, 10);
	ck_assert_uint_eq(tl_issued(t, x), 10);
	ck_assert(!pause_has(&c.s->pause, PAUSE_INFLIGHT) && !c.s->closing);
	/* The client's own stall still counts. */
	tl_write(&c, part, sizeof(part), NULL, 0);
	tl_pump(t);
	conn_sweep(c.s, server_loop_ns(&t->srv) + 1000000000u);
	ck_assert(c.s->closing);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_FRAME_TIMEOUTS], 1);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

/* Op records go back to a free list for reuse once their op is done, but only up to
 * OP_FREE_MAX of them: a burst of more in flight at once gives the rest back, where the
 * list once kept every record the daemon's busiest moment had needed. */
START_TEST(test_op_records_kept_for_reuse_are_bounded_after_a_burst)
{
	const unsigned n = OP_FREE_MAX + 2000;
	struct tl *t = tl_new(n);
	struct tl_client c;
	unsigned kept = 0;
	uint64_t h;

	tl_connect(t, &c);
	tl_hello(t, &c, "burst");
	h = tl_alloc(t, &c, 4096, "buf");
	for (unsigned i = 0; i < n; i++) {
		tl_send_d2d(&c, h, 64);
		if (i % 256 == 255)
			tl_pump(t); /* not more at once than the socket holds */
	}
	tl_pump(t);
	ck_assert_uint_eq(tl_issued(t, d2d_stream(t)), n);
	tl_complete_all(t);
	tl_pump(t);
	ck_assert_uint_eq(c.s->counts.inflight, 0);
	for (struct op_rec *r = t->srv.op_free; r; r = r->next_free)
		kept++;
	ck_assert_uint_gt(kept, 0);
	ck_assert_msg(kept <= OP_FREE_MAX, "%u op records kept after %u in flight", kept, n);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

static Suite *backpressure_suite(void)
{
	Suite *s = suite_create("backpressure");
	TCase *tc = tcase_create("hysteresis");

	tcase_add_test(tc, test_blocked_session_waits_on_the_stream_that_blocked_it);
	tcase_add_test(tc, test_blocked_session_resumes_only_below_half_the_window);
	tcase_add_test(tc, test_resumed_session_runs_what_it_buffered_and_answers_it);
	tcase_add_test(tc, test_every_session_on_the_stream_resumes);
	tcase_add_test(tc, test_blocked_session_that_goes_away_leaves_the_list);
	tcase_add_test(tc, test_inflight_cap_resumes_at_half);
	tcase_add_test(tc, test_a_flooding_session_runs_a_bounded_share_per_turn);
	tcase_add_test(tc, test_a_batch_stops_at_the_inflight_cap_and_resumes_where_it_left_off);
	tcase_add_test(tc, test_a_session_at_the_inflight_cap_is_not_timed_out);
	tcase_add_test(tc, test_op_records_kept_for_reuse_are_bounded_after_a_burst);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(backpressure_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
