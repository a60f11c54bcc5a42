/* Inspection (query.c) reads sessions through their accessors (session_foreach,
 * session_info, session_foreach_buffer): what they report, and who may see it (I10: a
 * user sees its own sessions, root sees all). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "conn.h"
#include "query.h"
#include "sseq-frame.h"
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
	conn_close(a.s);
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
	ck_assert_uint_eq(si.id, c.s->ident.id);
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
		c[i].s->ident.uid = uids[i];
	}
	ask(t, c[0].s, SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS, &res, &a);
	ck_assert_uint_eq(res.n_clients, 2);
	for (size_t i = 0; i < res.n_clients; i++)
		ck_assert_uint_eq(res.clients[i]->uid, 1000);
	ask(t, c[0].s, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS, &res, &a);
	ck_assert_uint_eq(res.n_buffers, 2);
	ask(t, c[2].s, SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS, &res, &a);
	ck_assert_uint_eq(res.n_clients, 1);
	ck_assert_uint_eq(res.clients[0]->session, c[2].s->ident.id);
	ck_assert_str_eq(res.clients[0]->name, "user");
	ck_assert_uint_eq(res.clients[0]->buffers, 1);
	ck_assert_uint_eq(res.clients[0]->bytes, 64);
	ask(t, c[2].s, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS, &res, &a);
	ck_assert_uint_eq(res.n_buffers, 1);
	ck_assert_uint_eq(res.buffers[0]->session, c[2].s->ident.id);
	ck_assert_str_eq(res.buffers[0]->label, "mine");
	c[2].s->ident.uid = 0;
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

static void buffer_free(struct tl *t, struct tl_client *c, uint64_t h)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Free f = SSEQ__FREE__INIT;
	uint64_t tag;

	f.buffer = h;
	rq.body_case = SSEQ__REQUEST__BODY_FREE;
	rq.free = &f;
	tag = tl_send(c, &rq);
	tl_pump(t);
	ck_assert_int_eq(tl_reply(c, tag, NULL), SSEQ__STATUS__STATUS_OK);
}

#define MANY 20000

/* Every page of a listing as `asker` asks for `session`'s (0: all it may see): each page
 * must fit a frame with room to spare; how many pages it took. seen[i] counts how often
 * the many-buffer session's i-th buffer was listed, *others the other sessions' buffers
 * and *freed the freed bases. */
static unsigned list_pages(struct tl *t, const struct session *asker, uint64_t session,
	uint64_t many, unsigned *seen, unsigned *others, unsigned *freed)
{
	Sseq__Query q = SSEQ__QUERY__INIT;
	Sseq__BufferCursor from = SSEQ__BUFFER_CURSOR__INIT;
	Sseq__QueryResult res;
	struct arena a;
	unsigned pages = 0;

	arena_init(&a);
	q.kind = SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS;
	q.session = session;
	for (;;) {
		sseq__query_result__init(&res);
		query_answer(&t->srv, asker, &q, &res, &a);
		ck_assert_int_eq(res.status, SSEQ__STATUS__STATUS_OK);
		ck_assert_uint_le(sseq__query_result__get_packed_size(&res), FRAME_MAX - 4096);
		ck_assert_uint_gt(res.n_buffers, 0);
		pages++;
		for (size_t i = 0; i < res.n_buffers; i++) {
			const Sseq__BufferInfo *b = res.buffers[i];
			unsigned n;

			if (!strcmp(b->label, "(freed)"))
				(*freed)++;
			else if (b->session == many) {
				ck_assert_int_eq(sscanf(b->label, "many-%u-", &n), 1);
				ck_assert_uint_lt(n, MANY);
				seen[n]++;
			} else
				(*others)++;
		}
		if (!res.buffers_next)
			break;
		from = *res.buffers_next;
		q.buffers_from = &from;
		arena_reset(&a);
		ck_assert_uint_lt(pages, 1000);
	}
	arena_finish(&a);
	return pages;
}

/* A session with 20,000 long-labelled buffers (about 1.3 MB listed): the listing comes in
 * pages that each fit a frame, and together carry every buffer once, the other sessions'
 * and the freed bases too. */
START_TEST(test_buffers_come_in_pages_that_each_fit_a_frame)
{
	struct tl *t = tl_new(0);
	struct tl_client c[2];
	static unsigned seen[MANY];
	unsigned others = 0, freed = 0;
	char label[48];
	uint64_t h;

	tl_connect(t, &c[0]);
	tl_hello(t, &c[0], "many");
	/* Sent 500 in one write, a pump for each 500: a round trip each would take long. */
	for (unsigned i = 0; i < MANY;) {
		static uint8_t frames[500 * 128];
		unsigned sent = 0, replies = 0;
		size_t len = 0;

		for (; sent < 500 && i < MANY; sent++, i++) {
			Sseq__Request rq = SSEQ__REQUEST__INIT;
			Sseq__Alloc al = SSEQ__ALLOC__INIT;

			snprintf(label, sizeof(label), "many-%06u-%s", i,
				"LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL");
			al.size = 16;
			al.label = label;
			rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
			rq.alloc = &al;
			rq.tag = c[0].next_tag++;
			len += tl_frame(&rq, frames + len);
		}
		tl_write(&c[0], frames, len, NULL, 0);
		for (int round = 0; round < 100 && replies < sent; round++) {
			tl_pump(t);
			replies += tl_take_replies(&c[0]);
		}
		ck_assert_uint_eq(replies, sent);
	}
	ck_assert_uint_eq(c[0].s->counts.buffers, MANY);
	tl_connect(t, &c[1]);
	tl_hello(t, &c[1], "few");
	for (int i = 0; i < 3; i++)
		tl_alloc(t, &c[1], 16, "few");
	/* A freed base a copy still reads: listed to root, without a handle. */
	h = tl_alloc(t, &c[1], 64, "gone");
	tl_send_d2d(&c[1], h, 32);
	tl_pump(t);
	ck_assert_uint_eq(tl_take_replies(&c[1]), 1);
	buffer_free(t, &c[1], h);
	ck_assert_uint_eq(seq_pending_count(t->srv.seq), 1);
	c[1].s->ident.uid = 0;
	ck_assert_uint_gt(list_pages(t, c[1].s, 0, c[0].s->ident.id, seen, &others, &freed), 1);
	for (unsigned i = 0; i < MANY; i++)
		ck_assert_uint_eq(seen[i], 1);
	ck_assert_uint_eq(others, 3);
	ck_assert_uint_eq(freed, 1);
	/* One session's alone, asked by its own. */
	memset(seen, 0, sizeof(seen));
	others = freed = 0;
	ck_assert_uint_gt(
		list_pages(t, c[0].s, c[0].s->ident.id, c[0].s->ident.id, seen, &others, &freed),
		1);
	for (unsigned i = 0; i < MANY; i++)
		ck_assert_uint_eq(seen[i], 1);
	ck_assert_uint_eq(others + freed, 0);
	tl_complete_all(t);
	tl_close(t, &c[0]);
	tl_close(t, &c[1]);
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
	tcase_add_test(tc, test_buffers_come_in_pages_that_each_fit_a_frame);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
