/* A restart in place within one process: the exec is caught (the hand-over's memfd and the
 * descriptors it keeps are set aside while the old server goes) and a fresh server adopts
 * the hand-over, as the new process would. A session that cannot be taken over is closed
 * and its descriptors with it; the sessions after it are still taken over; a flush before
 * the exec that ends one session leaves the others flushed. */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "handles.h"
#include "out.h"
#include "resume.h"
#include "session.h"
#include "staging.h"
#include "test-loop.h"

#define FD_MAX 1024

static bool inherited[FD_MAX]; /* without FD_CLOEXEC before the test began */
static int aside[FD_MAX]; /* a descriptor the exec keeps: its copy, else -1 */
static int handover = -1;
static char *exec_argv[] = {(char *)"sseqd", NULL};
static int fail_poll_fd = -1;

static bool fd_kept(int fd)
{
	int flags = fcntl(fd, F_GETFD);

	return flags >= 0 && !(flags & FD_CLOEXEC);
}

/* The exec caught: what it would keep is copied aside, and it "fails" (resume.c then closes
 * its own copy of the hand-over and marks the old server fatal). */
int execv(const char *path, char *const argv[])
{
	const char *env = getenv("SSEQD_RESUME_FD");

	(void)path;
	(void)argv;
	ck_assert_ptr_nonnull(env);
	handover = fcntl(atoi(env), F_DUPFD_CLOEXEC, FD_MAX);
	ck_assert_int_ge(handover, 0);
	for (int fd = 3; fd < FD_MAX; fd++) {
		aside[fd] = -1;
		if (!inherited[fd] && fd_kept(fd))
			ck_assert_int_ge(aside[fd] = fcntl(fd, F_DUPFD_CLOEXEC, FD_MAX), 0);
	}
	errno = ENOEXEC;
	return -1;
}

/* libuv's, except that the test can make it fail for one descriptor: a session the new
 * process cannot make. */
int uv_poll_init(uv_loop_t *loop, uv_poll_t *handle, int fd)
{
	static int (*real)(uv_loop_t *, uv_poll_t *, int);

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "uv_poll_init");
	if (fd == fail_poll_fd)
		return UV_ENOMEM;
	return real(loop, handle, fd);
}

static uint64_t register_arena(struct tl *t, struct tl_client *c, int *fd)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__StagingRegister sr = SSEQ__STAGING_REGISTER__INIT;
	uint8_t buf[256];
	uint64_t h = 0;
	size_t len;

	*fd = memfd_create("test-resume", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(*fd, 0);
	ck_assert_int_eq(ftruncate(*fd, 4096), 0);
	ck_assert_int_eq(fcntl(*fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	sr.size = 4096;
	rq.tag = c->next_tag++;
	rq.body_case = SSEQ__REQUEST__BODY_STAGING_REGISTER;
	rq.staging_register = &sr;
	len = tl_frame(&rq, buf);
	tl_write(c, buf, len, fd, 1);
	tl_pump(t);
	ck_assert_int_eq(tl_reply(c, rq.tag, &h), SSEQ__STATUS__STATUS_OK);
	return h;
}

/* A client's end closed without the old server's loop running (tl_close pumps it). */
static void client_drop(struct tl_client *c)
{
	close(c->fd);
	free(c->rx);
	c->rx = NULL;
}

static struct session *session_of(struct server *srv, uint64_t id)
{
	for (struct session *s = srv->sessions; s; s = s->next)
		if (s->ident.id == id)
			return s;
	return NULL;
}

/* Sessions a, b, c; b's cannot be made again after the exec (its record comes between
 * c's and a's, newest first): b is closed, its arena's memfd with it, and a and c are
 * still taken over and served. */
/* The old process's part of a restart in place, and the new one's start: resume_restart
 * (which execs nothing here, see the hooks above), the old sessions and loop gone, the
 * descriptors the exec keeps back at their numbers; the new process's loop. */
static struct tl *restart_in_place(struct tl *t)
{
	struct session *s, *next;

	t->srv.opts.argv = exec_argv;
	resume_restart(&t->srv);
	ck_assert_int_ge(handover, 0);
	for (s = t->srv.sessions; s; s = next) {
		next = s->next;
		conn_close(s);
	}
	tl_free(t);
	for (int fd = 3; fd < FD_MAX; fd++)
		if (aside[fd] >= 0) {
			ck_assert_int_eq(dup2(aside[fd], fd), fd);
			close(aside[fd]);
		}
	return tl_new(0);
}

START_TEST(test_a_session_not_taken_over_leaves_the_others_taken_over)
{
	struct tl *t, *t2;
	struct tl_client a, b, c;
	uint64_t ida, idb, idc, h;
	int mine, arena_fd = -1;
	const struct handle_slot *slots;
	uint32_t nslots;
	bool owns_socket;
	char byte;

	for (int fd = 0; fd < FD_MAX; fd++)
		inherited[fd] = fd_kept(fd);
	t = tl_new(0);
	tl_connect(t, &a);
	tl_hello(t, &a, "first");
	tl_connect(t, &b);
	tl_hello(t, &b, "middle");
	register_arena(t, &b, &mine);
	close(mine);
	tl_connect(t, &c);
	tl_hello(t, &c, "last");
	ida = a.s->ident.id;
	idb = b.s->ident.id;
	idc = c.s->ident.id;
	slots = handles_picked(session_handles(b.s), &nslots);
	for (uint32_t i = 0; i < nslots; i++)
		if (slots[i].kind == HANDLE_STAGING)
			arena_fd = ((struct staging *)slots[i].obj)->fd;
	ck_assert_int_ge(arena_fd, 0);
	fail_poll_fd = b.s->fd;

	/* The old process goes; what the exec kept comes back at the same numbers. */
	t2 = restart_in_place(t);
	ck_assert_int_lt(resume_adopt(&t2->srv, handover, &owns_socket), 0);
	/* The first server was handed its socket (opts.listen_fd): not its own to unlink. */
	ck_assert(!owns_socket);
	ck_assert_uint_eq(t2->srv.nsessions, 2);
	ck_assert_ptr_null(session_of(&t2->srv, idb));
	ck_assert_ptr_nonnull(a.s = session_of(&t2->srv, ida));
	ck_assert_ptr_nonnull(c.s = session_of(&t2->srv, idc));
	/* b's connection and arena are closed, not left open and unowned. */
	ck_assert_int_eq(recv(b.fd, &byte, 1, MSG_DONTWAIT), 0);
	ck_assert_int_eq(fcntl(arena_fd, F_GETFD), -1);
	ck_assert_uint_eq(t2->srv.limit.arenas, 0);
	/* The others are served. */
	tl_pump(t2);
	ck_assert_uint_ne(h = tl_alloc(t2, &a, 64, "after"), 0);
	ck_assert_uint_ne(tl_alloc(t2, &c, 64, "after"), 0);
	tl_close(t2, &a);
	tl_close(t2, &c);
	client_drop(&b);
	tl_free(t2);
}
END_TEST

/* Before the exec each session's output is written as far as its client takes it. A
 * flush that ends a session (here one closing once its output is out) unlinks it, and the
 * sessions after it, older, were once left unwritten. */
START_TEST(test_a_session_ended_by_the_last_flush_leaves_the_others_flushed)
{
	struct tl *t;
	struct tl_client old, closing;
	uint8_t buf[64];

	for (int fd = 0; fd < FD_MAX; fd++)
		inherited[fd] = fd_kept(fd);
	t = tl_new(0);
	tl_connect(t, &old);
	tl_hello(t, &old, "old");
	tl_connect(t, &closing);
	tl_hello(t, &closing, "closing");
	out_reply(old.s, 77, SSEQ__STATUS__STATUS_OK, "");
	closing.s->closing = true;

	t->srv.opts.argv = exec_argv;
	resume_restart(&t->srv);
	ck_assert_int_ge(handover, 0);
	ck_assert(!closing.s->connected);
	ck_assert_int_gt(recv(old.fd, buf, sizeof(buf), MSG_DONTWAIT), 0);
	ck_assert_uint_eq(old.s->out.len, 0);
	/* No new process here: the old one goes with what the exec would have kept. */
	close(handover);
	for (int fd = 3; fd < FD_MAX; fd++)
		if (aside[fd] >= 0)
			close(aside[fd]);
	conn_close(old.s);
	client_drop(&old);
	client_drop(&closing);
	tl_free(t);
}
END_TEST

/* An Alloc of c's (named `name`, 0: none), answered at once: its status and handle. */
static Sseq__Status named_alloc(
	struct tl *t, struct tl_client *c, uint64_t size, uint64_t name, uint64_t *handle)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Alloc a = SSEQ__ALLOC__INIT;
	uint64_t tag;

	a.size = size;
	a.handle = name;
	rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
	rq.alloc = &a;
	tag = tl_send(c, &rq);
	tl_pump(t);
	return tl_reply(c, tag, handle);
}

/* An Await (or a Free) of buffer h, answered at once: its status. */
static Sseq__Status await_or_free(struct tl *t, struct tl_client *c, uint64_t h, bool free_it)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Await aw = SSEQ__AWAIT__INIT;
	Sseq__Free fr = SSEQ__FREE__INIT;
	uint64_t tag;

	aw.buffer = fr.buffer = h;
	rq.body_case = free_it ? SSEQ__REQUEST__BODY_FREE : SSEQ__REQUEST__BODY_AWAIT;
	rq.await = &aw;
	if (free_it)
		rq.free = &fr;
	tag = tl_send(c, &rq);
	tl_pump(t);
	return tl_reply(c, tag, NULL);
}

/* The handles a client named cross the restart as the daemon's own do: a buffer's name is
 * lost (and stays in use until freed), a refused name stays refused with its message. */
START_TEST(test_named_handles_cross_the_restart_lost_or_refused)
{
	const uint64_t named = ((uint64_t)2 << 32) | 0x80000003u,
		       refused = ((uint64_t)1 << 32) | 0x80000005u;
	struct tl *t, *t2;
	struct tl_client a;
	uint64_t id, h = 0, picked;
	bool owns_socket;
	const char *why;

	for (int fd = 0; fd < FD_MAX; fd++)
		inherited[fd] = fd_kept(fd);
	t = tl_new(0);
	tl_connect(t, &a);
	tl_hello(t, &a, "named");
	ck_assert_int_eq(named_alloc(t, &a, 64, named, &h), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(h, named);
	picked = tl_alloc(t, &a, 64, "picked");
	ck_assert_int_eq(
		named_alloc(t, &a, 0, refused, NULL), SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	id = a.s->ident.id;

	t2 = restart_in_place(t);
	resume_adopt(&t2->srv, handover, &owns_socket);
	ck_assert_ptr_nonnull(a.s = session_of(&t2->srv, id));
	ck_assert(handles_lost(session_handles(a.s), named));
	ck_assert(handles_lost(session_handles(a.s), picked));
	ck_assert_uint_eq(handles_count(session_handles(a.s)), 2);
	ck_assert_ptr_nonnull(why = handles_lookup(session_handles(a.s), refused, HANDLE_REFUSED));
	ck_assert_ptr_nonnull(strstr(why, "its Alloc was refused: alloc size 0"));
	tl_pump(t2);
	/* Used: lost says so (a device error), refused a failed dependency. */
	ck_assert_int_eq(await_or_free(t2, &a, named, false), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	ck_assert_int_eq(
		await_or_free(t2, &a, refused, false), SSEQ__STATUS__STATUS_DEPENDENCY_FAILED);
	/* The lost name holds its index until freed. */
	ck_assert_int_eq(named_alloc(t2, &a, 64, named + (1ull << 32), NULL),
		SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_int_eq(await_or_free(t2, &a, named, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(await_or_free(t2, &a, refused, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		named_alloc(t2, &a, 64, named + (1ull << 32), &h), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(h, named + (1ull << 32));
	ck_assert_int_eq(named_alloc(t2, &a, 64, refused, &h), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(handles_count(session_handles(a.s)), 3); /* and picked, still lost */
	tl_close(t2, &a);
	tl_free(t2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("resume");
	TCase *tc = tcase_create("resume");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_a_session_not_taken_over_leaves_the_others_taken_over);
	tcase_add_test(tc, test_a_session_ended_by_the_last_flush_leaves_the_others_flushed);
	tcase_add_test(tc, test_named_handles_cross_the_restart_lost_or_refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
