/* The timeline (timeline.c): a bounded ring that keeps the newest entries and forgets
 * the oldest, one dependency per producer with the overflow counted, device times where
 * the backend had them and otherwise times no earlier than the stream's previous op; and
 * the server filling it in-process (test-loop.c): the wait the core decided at submit and
 * the completion the loop observed, answered by the TIMELINE query. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "query.h"
#include "test-loop.h"
#include "timeline.h"

static struct timeline_op op_at(uint64_t issue)
{
	struct timeline_op op;

	timeline_op_begin(&op, SEQ_OP_EXEC, issue);
	return op;
}

START_TEST(test_ring_keeps_the_newest_and_forgets_the_oldest)
{
	struct timeline t;
	struct timeline_op op = op_at(1);

	ck_assert_int_eq(timeline_init(&t, 7), 0);
	ck_assert_uint_eq(t.capacity, 8); /* rounded up to a power of two */
	ck_assert_ptr_null(timeline_get(&t, 0));
	ck_assert_ptr_null(timeline_get(&t, 1));
	ck_assert_uint_eq(timeline_first(&t), 1);
	for (uint64_t i = 1; i <= 20; i++) {
		struct timeline_ent *e =
			timeline_add(&t, (struct seq_point){3, i}, &op, 10 * i, NULL);
		ck_assert_uint_eq(e->seq, i);
		e->session = 100 + i;
	}
	ck_assert_uint_eq(t.last, 20);
	ck_assert_uint_eq(timeline_first(&t), 13);
	ck_assert_ptr_null(timeline_get(&t, 12)); /* overwritten */
	ck_assert_ptr_null(timeline_get(&t, 21)); /* not yet */
	for (uint64_t i = 13; i <= 20; i++) {
		const struct timeline_ent *e = timeline_get(&t, i);
		ck_assert_ptr_nonnull(e);
		ck_assert_uint_eq(e->seq, i);
		ck_assert_uint_eq(e->at.seq, i);
		ck_assert_uint_eq(e->session, 100 + i);
		ck_assert_uint_eq(e->complete_ns, 10 * i);
	}
	timeline_finish(&t);
}
END_TEST

START_TEST(test_one_dependency_per_producer_and_the_rest_counted)
{
	struct timeline t;
	struct timeline_op op = op_at(5);
	const struct timeline_ent *e;

	ck_assert_int_eq(timeline_init(&t, 0), 0);
	ck_assert_uint_eq(t.capacity, TIMELINE_RING);
	timeline_op_dep(&op, (struct seq_point){16, 4}, TIMELINE_DEP_WAIT);
	timeline_op_dep(&op, (struct seq_point){16, 4}, TIMELINE_DEP_WAIT); /* two buffers */
	timeline_op_dep(&op, (struct seq_point){20, 1}, TIMELINE_DEP_OBSERVED);
	ck_assert_uint_eq(op.ndeps, 2);
	for (uint64_t i = 0; i < TIMELINE_WAITS + 3; i++)
		timeline_op_dep(&op, (struct seq_point){30, 10 + i}, TIMELINE_DEP_WAIT);
	ck_assert_uint_eq(op.ndeps, TIMELINE_WAITS);
	ck_assert_uint_eq(op.deps_dropped, 5);
	e = timeline_add(&t, (struct seq_point){0, 1}, &op, 50, NULL);
	ck_assert_uint_eq(e->ndeps, TIMELINE_WAITS);
	ck_assert_uint_eq(e->deps_dropped, 5);
	ck_assert_uint_eq(e->deps[0].producer.stream, 16);
	ck_assert_uint_eq(e->deps[0].producer.seq, 4);
	ck_assert_uint_eq(e->deps[0].how, TIMELINE_DEP_WAIT);
	ck_assert_uint_eq(e->deps[1].producer.stream, 20);
	ck_assert_uint_eq(e->deps[1].how, TIMELINE_DEP_OBSERVED);
	ck_assert_str_eq(timeline_dep_how_name(TIMELINE_DEP_OBSERVED), "observed");
	/* A new op starts with none. */
	op = op_at(6);
	ck_assert_uint_eq(op.ndeps, 0);
	ck_assert_uint_eq(op.deps_dropped, 0);
	timeline_finish(&t);
}
END_TEST

START_TEST(test_device_times_are_used_and_observed_ones_follow_the_stream)
{
	struct timeline t;
	struct timeline_op a = op_at(100), b = op_at(110), c = op_at(500);
	const uint64_t dev[3] = {120, 130, 4};
	const uint64_t backwards[3] = {140, 135, 0};
	const struct timeline_ent *e;

	ck_assert_int_eq(timeline_init(&t, 16), 0);
	e = timeline_add(&t, (struct seq_point){2, 1}, &a, 200, dev);
	ck_assert_uint_eq(e->timing, TIMELINE_DEVICE);
	ck_assert_uint_eq(e->start_ns, 120);
	ck_assert_uint_eq(e->end_ns, 130);
	ck_assert_uint_eq(e->clock_error_ns, 4);
	ck_assert_uint_eq(e->issue_ns, 100);
	ck_assert_uint_eq(e->complete_ns, 200);
	/* Issued before the previous op on its stream ended: it started after that end. */
	e = timeline_add(&t, (struct seq_point){2, 2}, &b, 300, NULL);
	ck_assert_uint_eq(e->timing, TIMELINE_OBSERVED);
	ck_assert_uint_eq(e->start_ns, 130);
	ck_assert_uint_eq(e->end_ns, 300);
	ck_assert_uint_eq(e->clock_error_ns, 0);
	/* Times that run backwards are not device times. */
	e = timeline_add(&t, (struct seq_point){2, 3}, &c, 600, backwards);
	ck_assert_uint_eq(e->timing, TIMELINE_OBSERVED);
	ck_assert_uint_eq(e->start_ns, 500);
	ck_assert_uint_eq(e->end_ns, 600);
	/* Another stream has its own order. */
	e = timeline_add(&t, (struct seq_point){3, 1}, &b, 150, NULL);
	ck_assert_uint_eq(e->start_ns, 110);
	timeline_finish(&t);
}
END_TEST

/* Execute fill on buffer h (sent, not pumped). */
static uint64_t send_fill(struct tl_client *c, uint64_t h)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Execute ex = SSEQ__EXECUTE__INIT;
	Sseq__Arg a0 = SSEQ__ARG__INIT, a1 = SSEQ__ARG__INIT, a2 = SSEQ__ARG__INIT;
	Sseq__BufferArg ba = SSEQ__BUFFER_ARG__INIT;
	Sseq__Arg *args[3] = {&a0, &a1, &a2};

	ba.handle = h;
	ba.access = SSEQ__ACCESS__ACCESS_OUT;
	a0.value_case = SSEQ__ARG__VALUE_BUFFER;
	a0.buffer = &ba;
	a1.value_case = SSEQ__ARG__VALUE_F32;
	a1.f32 = 1.0f;
	a2.value_case = SSEQ__ARG__VALUE_U64;
	a2.u64 = 16;
	ex.target_case = SSEQ__EXECUTE__TARGET_KERNEL;
	ex.kernel = (char *)"fill";
	ex.n_args = 3;
	ex.args = args;
	ex.launch_shape_case = SSEQ__EXECUTE__LAUNCH_SHAPE_ELEMENTS;
	ex.elements = 16;
	rq.body_case = SSEQ__REQUEST__BODY_EXECUTE;
	rq.execute = &ex;
	return tl_send(c, &rq);
}

START_TEST(test_server_records_the_wait_and_the_completion)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	struct session_info si;
	struct arena a;
	Sseq__Query q = SSEQ__QUERY__INIT;
	Sseq__QueryResult res = SSEQ__QUERY_RESULT__INIT;
	const struct timeline_ent *copy, *fill;
	const struct seq_layout *layout;
	uint64_t h, d2d_stream = 0;

	tl_connect(t, &c);
	tl_hello(t, &c, "timeline");
	h = tl_alloc(t, &c, 128, "b");
	tl_send_d2d(&c, h, 64); /* reads and writes h on a D2D stream */
	tl_pump(t);
	send_fill(&c, h); /* writes h on a compute stream: waits for the copy (I4) */
	tl_pump(t);
	ck_assert_uint_eq(t->srv.timeline.last, 0); /* nothing completed yet */
	layout = seq_layout(t->srv.seq);
	for (uint32_t x = 0; x < layout->nstreams; x++)
		if (layout->kind[x] == SEQ_STREAM_D2D && tl_issued(t, x))
			d2d_stream = x;
	ck_assert_uint_gt(d2d_stream, 0);
	tl_complete_all(t);
	ck_assert_uint_eq(t->srv.timeline.last, 2);
	copy = timeline_get(&t->srv.timeline, 1);
	fill = timeline_get(&t->srv.timeline, 2);
	if (copy->kind == SEQ_OP_EXEC) { /* completions may come in either order */
		const struct timeline_ent *x = copy;
		copy = fill;
		fill = x;
	}
	session_info(c.s, &si);
	ck_assert_uint_eq(copy->kind, SEQ_OP_D2D);
	ck_assert_uint_eq(copy->at.stream, d2d_stream);
	ck_assert_uint_eq(copy->ndeps, 0);
	ck_assert_uint_eq(fill->kind, SEQ_OP_EXEC);
	ck_assert_str_eq(fill->kernel, "fill");
	ck_assert_str_eq(fill->worker, "gw0");
	ck_assert_uint_eq(fill->session, si.id);
	ck_assert_uint_eq(fill->ndeps, 1);
	ck_assert_uint_eq(fill->deps[0].how, TIMELINE_DEP_WAIT);
	ck_assert_uint_eq(fill->deps[0].producer.stream, copy->at.stream);
	ck_assert_uint_eq(fill->deps[0].producer.seq, copy->at.seq);
	/* The test device keeps no timestamps: observed times, in order. */
	ck_assert_uint_eq(fill->timing, TIMELINE_OBSERVED);
	ck_assert_uint_le(fill->issue_ns, fill->start_ns);
	ck_assert_uint_le(fill->start_ns, fill->end_ns);
	ck_assert_uint_eq(fill->end_ns, fill->complete_ns);
	ck_assert_uint_le(copy->issue_ns, fill->issue_ns);

	/* The query pages through the ring as the client may see it. */
	arena_init(&a);
	q.kind = SSEQ__QUERY_KIND__QUERY_KIND_TIMELINE;
	query_answer(&t->srv, c.s, &q, &res, &a);
	ck_assert_int_eq(res.status, SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(res.n_timeline, 2);
	ck_assert_uint_eq(res.timeline_next, 0);
	ck_assert_str_eq(res.timeline[fill->seq - 1]->kernel, "fill");
	ck_assert_str_eq(res.timeline[fill->seq - 1]->stream_kind, "compute");
	ck_assert_str_eq(res.timeline[copy->seq - 1]->op, "d2d");
	ck_assert_uint_eq(res.timeline[fill->seq - 1]->n_waits, 1);
	ck_assert_str_eq(res.timeline[fill->seq - 1]->waits[0]->how, "wait");
	arena_reset(&a);
	{
		Sseq__TraceOptions o = SSEQ__TRACE_OPTIONS__INIT;
		Sseq__QueryResult r2 = SSEQ__QUERY_RESULT__INIT;

		o.max_entries = 1;
		q.trace = &o;
		query_answer(&t->srv, c.s, &q, &r2, &a);
		ck_assert_uint_eq(r2.n_timeline, 1);
		ck_assert_uint_eq(r2.timeline[0]->seq, 1);
		ck_assert_uint_eq(r2.timeline_next, 1);
		arena_reset(&a);
		o.since_seq = r2.timeline_next;
		r2 = (Sseq__QueryResult)SSEQ__QUERY_RESULT__INIT;
		query_answer(&t->srv, c.s, &q, &r2, &a);
		ck_assert_uint_eq(r2.n_timeline, 1);
		ck_assert_uint_eq(r2.timeline[0]->seq, 2);
		ck_assert_uint_eq(r2.timeline_next, 0);
	}
	arena_finish(&a);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("timeline");
	TCase *tc = tcase_create("timeline");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_ring_keeps_the_newest_and_forgets_the_oldest);
	tcase_add_test(tc, test_one_dependency_per_producer_and_the_rest_counted);
	tcase_add_test(tc, test_device_times_are_used_and_observed_ones_follow_the_stream);
	tcase_add_test(tc, test_server_records_the_wait_and_the_completion);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
