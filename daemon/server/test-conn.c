/* A connection (conn.c) over a real socketpair: frames split across writes or several in
 * one, the 1 MiB limit (FRAME_MAX) exactly and one byte over, memfds arriving with their
 * frame (SCM_RIGHTS), EOF in the middle of a frame, a connection paused for input
 * memory: its hang-up is still seen and its partial frame still times out, and one paused
 * while it does not read its replies. */
#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "out.h"
#include "pause.h"
#include "session-limits.h"
#include "sseq-frame.h"
#include "test-loop.h"

static size_t hello_frame(uint8_t *buf, uint64_t tag)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Hello h = SSEQ__HELLO__INIT;

	h.protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	h.protocol_minor = SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR;
	h.client_name = (char *)"conn";
	rq.tag = tag;
	rq.body_case = SSEQ__REQUEST__BODY_HELLO;
	rq.hello = &h;
	return tl_frame(&rq, buf);
}

/* A connected session whose Hello (tag 1, as a frame of its own) was answered. */
static void conn_open(struct tl *t, struct tl_client *c)
{
	uint8_t buf[256];

	tl_connect(t, c);
	ck_assert_int_eq(tl_exchange(t, c, buf, hello_frame(buf, 1), NULL, 0, 1, NULL),
		SSEQ__STATUS__STATUS_OK);
}

static size_t alloc_frame(uint8_t *buf, uint64_t tag, const char *label)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Alloc a = SSEQ__ALLOC__INIT;

	a.size = 64;
	a.label = (char *)label;
	rq.tag = tag;
	rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
	rq.alloc = &a;
	return tl_frame(&rq, buf);
}

START_TEST(test_a_frame_split_across_writes_runs_once_whole)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	uint8_t buf[256];
	size_t n = hello_frame(buf, 1);

	tl_connect(t, &c);
	for (size_t i = 0; i + 1 < n; i++) {
		tl_write(&c, buf + i, 1, NULL, 0);
		tl_pump(t);
		ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_FRAMES_IN], 0);
		ck_assert_ptr_null(tl_next(&c));
	}
	tl_write(&c, buf + n - 1, 1, NULL, 0);
	tl_pump(t);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_FRAMES_IN], 1);
	ck_assert_int_eq(tl_reply(&c, 1, NULL), SSEQ__STATUS__STATUS_OK);
	ck_assert(c.s->hello);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

START_TEST(test_several_frames_in_one_write_all_run_in_order)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	uint8_t buf[1024];
	size_t n = hello_frame(buf, 1);

	tl_connect(t, &c);
	for (uint64_t tag = 2; tag <= 5; tag++)
		n += alloc_frame(buf + n, tag, "x");
	n += hello_frame(buf + n, 6) / 2; /* and half of a sixth */
	tl_write(&c, buf, n, NULL, 0);
	const uint64_t busy0 = t->srv.busy_ns;
	tl_pump(t);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_FRAMES_IN], 5);
	/* Reading and running them is the loop's work (loop_busy_us), none of it left open. */
	ck_assert_uint_gt(t->srv.busy_ns, busy0);
	ck_assert_uint_eq(t->srv.busy_since, 0);
	ck_assert_int_eq(tl_reply(&c, 1, NULL), SSEQ__STATUS__STATUS_OK);
	for (uint64_t tag = 2; tag <= 5; tag++)
		ck_assert_int_eq(tl_reply(&c, tag, NULL), SSEQ__STATUS__STATUS_OK);
	ck_assert_ptr_null(tl_next(&c));
	ck_assert_uint_gt(c.s->in.len, 0); /* the half frame waits for the rest */
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

/* An Alloc whose frame body is exactly `body` bytes (its label fills it). */
static uint8_t *sized_frame(size_t body, size_t *len)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Alloc a = SSEQ__ALLOC__INIT;
	size_t label = body - 16;
	char *text = malloc(body);
	uint8_t *buf;

	ck_assert_ptr_nonnull(text);
	a.size = 64;
	a.label = text;
	rq.tag = 2;
	rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
	rq.alloc = &a;
	for (int i = 0; i < 8; i++) { /* the varint lengths settle in a step or two */
		memset(text, 'L', label);
		text[label] = 0;
		size_t got = sseq__request__get_packed_size(&rq);
		if (got == body)
			break;
		label = label + body - got;
	}
	ck_assert_uint_eq(sseq__request__get_packed_size(&rq), body);
	buf = malloc(FRAME_HEADER + body);
	ck_assert_ptr_nonnull(buf);
	*len = tl_frame(&rq, buf);
	free(text);
	return buf;
}

START_TEST(test_a_frame_of_exactly_the_limit_is_taken)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	size_t n;
	uint8_t *big = sized_frame(FRAME_MAX, &n);

	conn_open(t, &c);
	ck_assert_uint_eq(frame_get_len(big), FRAME_MAX);
	/* In pieces, as the socket takes them, the daemon reading in between. */
	for (size_t off = 0; off < n;) {
		size_t part = n - off < 65536 ? n - off : 65536;
		tl_write(&c, big + off, part, NULL, 0);
		off += part;
		tl_pump(t);
	}
	ck_assert_int_eq(tl_reply(&c, 2, NULL), SSEQ__STATUS__STATUS_OK);
	ck_assert(c.s->connected && !c.s->closing);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_FRAMES_BAD], 0);
	free(big);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

START_TEST(test_a_frame_over_the_limit_closes_the_connection)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	uint8_t head[FRAME_HEADER + 16] = {0};
	Sseq__Message *m;

	conn_open(t, &c);
	/* Refused from its length alone: nobody waits for a megabyte to come first. */
	frame_put_len(head, FRAME_MAX + 1);
	tl_write(&c, head, sizeof(head), NULL, 0);
	tl_pump(t);
	m = tl_next(&c);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(m->body_case, SSEQ__MESSAGE__BODY_REPLY);
	ck_assert_uint_eq(m->reply->tag, 0);
	ck_assert_int_eq(m->reply->status, SSEQ__STATUS__STATUS_FRAME_TOO_LARGE);
	sseq__message__free_unpacked(m, NULL);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_FRAMES_BAD], 1);
	tl_pump(t);
	ck_assert_ptr_null(tl_next(&c));
	ck_assert(c.eof); /* the daemon closed once the notice was out */
	ck_assert_uint_eq(t->srv.nsessions, 0);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

static int sealed_memfd(size_t size)
{
	int fd = memfd_create("test-conn", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	return fd;
}

static size_t register_frame(uint8_t *buf, uint64_t tag, uint64_t size)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__StagingRegister sr = SSEQ__STAGING_REGISTER__INIT;

	sr.size = size;
	sr.label = (char *)"arena";
	rq.tag = tag;
	rq.body_case = SSEQ__REQUEST__BODY_STAGING_REGISTER;
	rq.staging_register = &sr;
	return tl_frame(&rq, buf);
}

START_TEST(test_a_memfd_arrives_with_its_frame)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	uint8_t buf[512];
	size_t n;
	int fd = sealed_memfd(8192), fds[2];
	uint64_t h = 0;

	conn_open(t, &c);
	n = register_frame(buf, 2, 8192);
	ck_assert_int_eq(tl_exchange(t, &c, buf, n, &fd, 1, 2, &h), SSEQ__STATUS__STATUS_OK);
	ck_assert_ptr_nonnull(handles_lookup(session_handles(c.s), h, HANDLE_STAGING));
	ck_assert_uint_eq(c.s->in.nfds, 0); /* taken by its registration */
	/* Two memfds on the first half of two frames: each registration takes one. */
	fds[0] = sealed_memfd(4096);
	fds[1] = sealed_memfd(4096);
	n = register_frame(buf, 3, 4096);
	n += register_frame(buf + n, 4, 4096);
	tl_write(&c, buf, 5, fds, 2);
	tl_pump(t);
	ck_assert_uint_eq(c.s->in.nfds, 2); /* held until their frames are whole */
	ck_assert_ptr_null(tl_next(&c));
	ck_assert_int_eq(
		tl_exchange(t, &c, buf + 5, n - 5, NULL, 0, 3, &h), SSEQ__STATUS__STATUS_OK);
	ck_assert_ptr_nonnull(handles_lookup(session_handles(c.s), h, HANDLE_STAGING));
	ck_assert_int_eq(tl_reply(&c, 4, &h), SSEQ__STATUS__STATUS_OK);
	ck_assert_ptr_nonnull(handles_lookup(session_handles(c.s), h, HANDLE_STAGING));
	ck_assert_uint_eq(c.s->in.nfds, 0);
	ck_assert_uint_eq(c.s->counts.stagings, 3);
	close(fd);
	close(fds[0]);
	close(fds[1]);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

START_TEST(test_a_frame_without_its_memfd_is_refused)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	uint8_t buf[512];

	conn_open(t, &c);
	ck_assert_int_eq(tl_exchange(t, &c, buf, register_frame(buf, 2, 4096), NULL, 0, 2, NULL),
		SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert(c.s->connected);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

START_TEST(test_eof_in_the_middle_of_a_frame_ends_the_session)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	uint8_t buf[512];
	size_t n = hello_frame(buf, 1);

	tl_connect(t, &c);
	n += alloc_frame(buf + n, 2, "torn");
	tl_write(&c, buf, n - 3, NULL, 0);
	shutdown(c.fd, SHUT_WR);
	tl_pump(t);
	/* What was whole ran and was answered; the torn frame never runs. */
	ck_assert_int_eq(tl_reply(&c, 1, NULL), SSEQ__STATUS__STATUS_OK);
	ck_assert_ptr_null(tl_next(&c));
	ck_assert(c.eof);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_FRAMES_IN], 1);
	ck_assert_uint_eq(t->srv.nsessions, 0);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

/* A client part-way through a large frame, paused at --max-input-memory (here its own
 * frame fills the budget). Returns once the daemon stopped reading it. */
static void conn_pause_for_input(struct tl *t, struct tl_client *c)
{
	uint8_t *part = calloc(1, 65536);

	ck_assert_ptr_nonnull(part);
	t->srv.opts.account.max_input_bytes = 256u << 10;
	conn_open(t, c);
	frame_put_len(part, FRAME_MAX);
	for (int i = 0; i < 16 && !pause_has(&c->s->pause, PAUSE_INPUT); i++) {
		tl_write(c, part, 65536, NULL, 0);
		tl_pump(t);
	}
	free(part);
	ck_assert(pause_has(&c->s->pause, PAUSE_INPUT));
	ck_assert_uint_gt(t->srv.limit.input_large_bytes, 0);
}

/* A client that dies while its connection is paused for input memory is gone at once,
 * with the memory it held: a pause must not stop the daemon seeing the hang-up, or dead
 * sessions would hold the budget, and every large frame would wait, for ever. */
START_TEST(test_a_client_gone_while_paused_for_input_memory_is_dropped)
{
	struct tl *t = tl_new(0);
	struct tl_client c;

	conn_pause_for_input(t, &c);
	close(c.fd);
	c.fd = -1;
	tl_pump(t);
	ck_assert_uint_eq(t->srv.nsessions, 0);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_INPUT_BYTES], 0);
	ck_assert_uint_eq(t->srv.limit.input_large_bytes, 0);
	ck_assert_uint_eq(t->srv.input_waiting, 0);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

/* A half-close while paused is no hang-up: the session stays, for what the client sent
 * is still to be read once the pause ends; its partial frame's deadline bounds it. */
START_TEST(test_a_half_close_while_paused_keeps_the_session)
{
	struct tl *t = tl_new(0);
	struct tl_client c;

	t->srv.opts.limits.frame_timeout_ms = 100;
	conn_pause_for_input(t, &c);
	shutdown(c.fd, SHUT_WR);
	tl_pump(t);
	ck_assert_uint_eq(t->srv.nsessions, 1);
	ck_assert(pause_has(&c.s->pause, PAUSE_INPUT) && !c.s->closing);
	ck_assert_int_eq(c.s->in.poll_events, 0); /* not woken again and again by the half-close */
	conn_sweep(c.s, server_loop_ns(&t->srv) + 1000000000u);
	tl_close(t, &c);
	ck_assert_uint_eq(t->srv.nsessions, 0);
	ck_assert_uint_eq(t->srv.limit.input_large_bytes, 0);
	tl_free(t);
}
END_TEST

/* A partial frame paused at --max-input-memory still meets --frame-timeout: it holds
 * memory the others wait for, and only its client can finish it. */
START_TEST(test_a_partial_frame_paused_for_input_memory_still_times_out)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	Sseq__Message *m;

	t->srv.opts.limits.frame_timeout_ms = 100;
	conn_pause_for_input(t, &c);
	conn_sweep(c.s, server_loop_ns(&t->srv) + 1000000000u);
	ck_assert(c.s->closing);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_FRAME_TIMEOUTS], 1);
	tl_pump(t);
	/* Told why, then closed, and its input memory given back. */
	while ((m = tl_next(&c)) &&
		!(m->body_case == SSEQ__MESSAGE__BODY_REPLY && m->reply->tag == 0))
		sseq__message__free_unpacked(m, NULL);
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(strstr(m->reply->message, "--frame-timeout"));
	sseq__message__free_unpacked(m, NULL);
	ck_assert_uint_eq(t->srv.nsessions, 0);
	ck_assert_uint_eq(t->srv.limit.input_large_bytes, 0);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

/* A client that does not read its replies is not read either: past SESSION_OUT_HIGH of
 * output waiting, what it sends stays in its socket (a pause of the client's); once it has
 * read enough, it is read again and answered in order. */
START_TEST(test_a_client_that_does_not_read_its_replies_is_not_read)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Alloc a = SSEQ__ALLOC__INIT;
	char *text = malloc(65536);
	uint64_t frames, tag;
	Sseq__Message *m;
	bool answered = false;

	ck_assert_ptr_nonnull(text);
	memset(text, 'x', 65535);
	text[65535] = 0;
	conn_open(t, &c);
	while (out_pending(c.s) < SESSION_OUT_HIGH + (1u << 20))
		out_notice(c.s, SSEQ__STATUS__STATUS_OK, text);
	free(text);
	tl_pump(t);
	ck_assert_uint_ge(out_pending(c.s), SESSION_OUT_HIGH);
	ck_assert(pause_has(&c.s->pause, PAUSE_OUTPUT));
	ck_assert(!(c.s->in.poll_events & UV_READABLE));
	frames = t->srv.count[SSEQ_COUNTER_FRAMES_IN];
	a.size = 4096;
	rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
	rq.alloc = &a;
	tag = tl_send(&c, &rq);
	tl_pump(t);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_FRAMES_IN], frames); /* not read */
	/* It reads its replies: below the mark it is read again, and answered after them. */
	for (int i = 0; i < 10000 && !answered; i++) {
		while ((m = tl_next(&c))) {
			ck_assert_int_eq(m->body_case, SSEQ__MESSAGE__BODY_REPLY);
			answered = m->reply->tag == tag;
			sseq__message__free_unpacked(m, NULL);
			ck_assert(!answered || out_pending(c.s) == 0);
		}
		tl_pump(t);
	}
	ck_assert(answered);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_FRAMES_IN], frames + 1);
	ck_assert(!pause_any(&c.s->pause));
	ck_assert(c.s->in.poll_events & UV_READABLE);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("conn");
	TCase *tc = tcase_create("framing");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_a_frame_split_across_writes_runs_once_whole);
	tcase_add_test(tc, test_several_frames_in_one_write_all_run_in_order);
	tcase_add_test(tc, test_a_frame_of_exactly_the_limit_is_taken);
	tcase_add_test(tc, test_a_frame_over_the_limit_closes_the_connection);
	tcase_add_test(tc, test_a_memfd_arrives_with_its_frame);
	tcase_add_test(tc, test_a_frame_without_its_memfd_is_refused);
	tcase_add_test(tc, test_eof_in_the_middle_of_a_frame_ends_the_session);
	tcase_add_test(tc, test_a_client_gone_while_paused_for_input_memory_is_dropped);
	tcase_add_test(tc, test_a_half_close_while_paused_keeps_the_session);
	tcase_add_test(tc, test_a_partial_frame_paused_for_input_memory_still_times_out);
	tcase_add_test(tc, test_a_client_that_does_not_read_its_replies_is_not_read);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
