/* Inspection (query.c) reads sessions through their accessors (session_foreach,
 * session_info, session_foreach_buffer): what they report, and who may see it (I10: a
 * user sees its own sessions, root sees all). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "query.h"
#include "test-loop.h"

struct seen {
	const struct session *s[8];
	unsigned n;
};

static void collect(const struct session *s, void *arg)
{
	struct seen *v = arg;

	ck_assert_uint_lt(v->n, 8);
	v->s[v->n++] = s;
}

START_TEST(test_foreach_visits_every_connected_session)
{
	struct tl *t = tl_new(0);
	struct tl_client a, b;
	struct seen v = {0};

	tl_connect(t, &a);
	tl_connect(t, &b);
	session_foreach(&t->srv, collect, &v);
	ck_assert_uint_eq(v.n, 2);
	ck_assert(v.s[0] != v.s[1]);
	ck_assert((v.s[0] == a.s && v.s[1] == b.s) || (v.s[0] == b.s && v.s[1] == a.s));
	session_disconnect(a.s);
	v.n = 0;
	session_foreach(&t->srv, collect, &v);
	ck_assert_uint_eq(v.n, 1);
	ck_assert_ptr_eq(v.s[0], b.s);
	tl_close(t, &a);
	tl_close(t, &b);
	tl_free(t);
}
END_TEST

START_TEST(test_info_reports_the_sessions_identity_and_holdings)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	struct session_info si;

	tl_connect(t, &c);
	tl_hello(t, &c, "inspector");
	tl_alloc(t, &c, 1000, "one");
	tl_slice(t, &c, tl_alloc(t, &c, 24, "two"), 8, 8);
	session_info(c.s, &si);
	ck_assert_uint_eq(si.id, c.s->id);
	ck_assert_uint_eq(si.uid, getuid());
	ck_assert_str_eq(si.name, "inspector");
	ck_assert_str_eq(si.worker, "gw0");
	ck_assert_uint_eq(si.buffers, 2); /* bases: the slice is a view */
	ck_assert_uint_eq(si.bytes, 1024);
	ck_assert_uint_eq(si.handles, 3);
	ck_assert_uint_eq(si.inflight, 0);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

struct bufs {
	struct session_buffer b[8];
	char labels[8][48];
	unsigned n;
};

static void collect_buffer(const struct session_buffer *b, void *arg)
{
	struct bufs *v = arg;

	ck_assert_uint_lt(v->n, 8);
	v->b[v->n] = *b;
	snprintf(v->labels[v->n], sizeof(v->labels[0]), "%s", b->label);
	v->n++;
}

START_TEST(test_foreach_buffer_names_slices_by_their_base)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	struct bufs v = {0};
	uint64_t base, slice;

	tl_connect(t, &c);
	tl_hello(t, &c, "inspector");
	base = tl_alloc(t, &c, 256, "base");
	slice = tl_slice(t, &c, base, 64, 32);
	session_foreach_buffer(c.s, collect_buffer, &v);
	ck_assert_uint_eq(v.n, 2);
	ck_assert_uint_eq(v.b[0].handle, base);
	ck_assert_str_eq(v.labels[0], "base");
	ck_assert_uint_eq(v.b[0].base_handle, 0);
	ck_assert_ptr_null(v.b[0].buf->base);
	ck_assert_uint_eq(v.b[1].handle, slice);
	ck_assert_uint_eq(v.b[1].base_handle, base);
	ck_assert_ptr_eq(v.b[1].buf->base, v.b[0].buf);
	ck_assert_uint_eq(v.b[1].buf->offset, 64);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

static void ask(struct tl *t, const struct session *asker, Sseq__QueryKind kind,
	Sseq__QueryResult *res, struct arena *a)
{
	Sseq__Query q = SSEQ__QUERY__INIT;

	q.kind = kind;
	sseq__query_result__init(res);
	query_answer(&t->srv, asker, &q, res, a);
	ck_assert_int_eq(res->status, SSEQ__STATUS__STATUS_OK);
}

/* Three users: 1000 twice, 2000 once; root asks too. */
START_TEST(test_a_user_sees_its_own_sessions_and_root_sees_all)
{
	struct tl *t = tl_new(0);
	struct tl_client c[3];
	const uint32_t uids[3] = {1000, 1000, 2000};
	Sseq__QueryResult res;
	struct arena a;

	arena_init(&a);
	for (int i = 0; i < 3; i++) {
		tl_connect(t, &c[i]);
		tl_hello(t, &c[i], "user");
		tl_alloc(t, &c[i], 64, "mine");
		c[i].s->uid = uids[i];
	}
	ask(t, c[0].s, SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS, &res, &a);
	ck_assert_uint_eq(res.n_clients, 2);
	for (size_t i = 0; i < res.n_clients; i++)
		ck_assert_uint_eq(res.clients[i]->uid, 1000);
	ask(t, c[0].s, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS, &res, &a);
	ck_assert_uint_eq(res.n_buffers, 2);
	ask(t, c[2].s, SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS, &res, &a);
	ck_assert_uint_eq(res.n_clients, 1);
	ck_assert_uint_eq(res.clients[0]->session, c[2].s->id);
	ck_assert_str_eq(res.clients[0]->name, "user");
	ck_assert_uint_eq(res.clients[0]->buffers, 1);
	ck_assert_uint_eq(res.clients[0]->bytes, 64);
	ask(t, c[2].s, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS, &res, &a);
	ck_assert_uint_eq(res.n_buffers, 1);
	ck_assert_uint_eq(res.buffers[0]->session, c[2].s->id);
	ck_assert_str_eq(res.buffers[0]->label, "mine");
	c[2].s->uid = 0;
	ask(t, c[2].s, SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS, &res, &a);
	ck_assert_uint_eq(res.n_clients, 3);
	ask(t, c[2].s, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS, &res, &a);
	ck_assert_uint_eq(res.n_buffers, 3);
	arena_finish(&a);
	for (int i = 0; i < 3; i++)
		tl_close(t, &c[i]);
	tl_free(t);
}
END_TEST

START_TEST(test_a_slice_is_reported_with_its_base)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	Sseq__QueryResult res;
	struct arena a;
	uint64_t base, slice;

	arena_init(&a);
	tl_connect(t, &c);
	tl_hello(t, &c, "slicer");
	base = tl_alloc(t, &c, 256, "base");
	slice = tl_slice(t, &c, base, 16, 16);
	ask(t, c.s, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS, &res, &a);
	ck_assert_uint_eq(res.n_buffers, 2);
	ck_assert_uint_eq(res.buffers[0]->handle, base);
	ck_assert_uint_eq(res.buffers[0]->slices, 1);
	ck_assert(!res.buffers[0]->is_slice);
	ck_assert_uint_eq(res.buffers[1]->handle, slice);
	ck_assert(res.buffers[1]->is_slice);
	ck_assert_uint_eq(res.buffers[1]->base_handle, base);
	ck_assert_uint_eq(res.buffers[1]->offset, 16);
	arena_finish(&a);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("query");
	TCase *tc = tcase_create("accessors");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_foreach_visits_every_connected_session);
	tcase_add_test(tc, test_info_reports_the_sessions_identity_and_holdings);
	tcase_add_test(tc, test_foreach_buffer_names_slices_by_their_base);
	tcase_add_test(tc, test_a_user_sees_its_own_sessions_and_root_sees_all);
	tcase_add_test(tc, test_a_slice_is_reported_with_its_base);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
