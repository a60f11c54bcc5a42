/* What the loops of one sseqd share (loops.c): admission counted across every loop, a new
 * connection placed on the loop with the fewest sessions, a hand-off to a loop that has
 * stopped serving closed rather than lost, and a stop of the world that holds every other
 * loop until it ends. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "loops.h"
#include "server.h"

/* Stand-ins: loops.c only stores and compares the servers' addresses. */
static struct server fake[LOOPS_MAX];

static void no_wake(struct server *srv)
{
	(void)srv;
}

static void (*park_wake)(struct server *) = no_wake;

static void attach_all(struct loops *l)
{
	for (unsigned i = 0; i < l->n; i++)
		loops_attach(l, i, &fake[i], no_wake, park_wake);
}

START_TEST(test_admission_counts_connections_across_loops)
{
	const struct server_limits lim = {.max_clients = 5, .max_clients_per_uid = 3};
	struct loops l;
	char why[160];

	ck_assert_int_eq(loops_init(&l, 4), 0);
	attach_all(&l);
	/* One user's connections, wherever they are served, count together. */
	for (unsigned i = 0; i < 3; i++) {
		ck_assert_ptr_null(loops_admit(&l, &lim, 1000, why, sizeof(why)));
		ck_assert_uint_eq(loops_place(&l), i);
	}
	ck_assert_ptr_nonnull(loops_admit(&l, &lim, 1000, why, sizeof(why)));
	ck_assert_msg(strstr(why, "uid 1000 already holds 3 connections"), "%s", why);
	/* Another user still may, up to the total. */
	ck_assert_ptr_null(loops_admit(&l, &lim, 1001, why, sizeof(why)));
	ck_assert_uint_eq(loops_place(&l), 3);
	ck_assert_ptr_null(loops_admit(&l, &lim, 1001, why, sizeof(why)));
	ck_assert_uint_eq(loops_place(&l), 0);
	ck_assert_ptr_nonnull(loops_admit(&l, &lim, 1002, why, sizeof(why)));
	ck_assert_msg(strstr(why, "at most 5 connections"), "%s", why);
	/* A session gone on loop 1 gives its user and that loop a place back. */
	loops_leave(&l, 1, 1000);
	ck_assert_ptr_null(loops_admit(&l, &lim, 1000, why, sizeof(why)));
	ck_assert_uint_eq(loops_place(&l), 1);
	loops_finish(&l);
}
END_TEST

START_TEST(test_a_new_connection_goes_to_the_loop_with_fewest_sessions)
{
	struct loops l;

	ck_assert_int_eq(loops_init(&l, 3), 0);
	attach_all(&l);
	for (unsigned i = 0; i < 6; i++)
		ck_assert_uint_eq(loops_place(&l), i % 3);
	loops_leave(&l, 2, 7);
	loops_leave(&l, 2, 7);
	ck_assert_uint_eq(loops_place(&l), 2);
	/* A loop that no longer serves gets none. */
	loops_detach(&l, 2);
	ck_assert_uint_ne(loops_place(&l), 2);
	ck_assert_uint_ne(loops_place(&l), 2);
	loops_finish(&l);
}
END_TEST

START_TEST(test_a_hand_off_to_a_loop_gone_closes_the_connection)
{
	const struct server_limits lim = {.max_clients = 1, .max_clients_per_uid = 1};
	struct loops l;
	struct loops_conn c;
	char why[160];
	int p[2];

	ck_assert_int_eq(pipe(p), 0);
	ck_assert_int_eq(loops_init(&l, 2), 0);
	attach_all(&l);
	ck_assert_ptr_null(loops_admit(&l, &lim, 5, why, sizeof(why)));
	ck_assert_uint_eq(loops_place(&l), 0);
	/* Served: loop 1 takes what was posted, in order. */
	loops_post(&l, 1, p[0], 5);
	ck_assert(loops_take(&l, 1, &c));
	ck_assert_int_eq(c.fd, p[0]);
	ck_assert(!loops_take(&l, 1, &c));
	/* Gone: the connection is closed and its place given back. */
	loops_detach(&l, 1);
	loops_post(&l, 1, p[0], 5);
	ck_assert_int_eq(fcntl(p[0], F_GETFD), -1);
	ck_assert_int_eq(errno, EBADF);
	ck_assert_ptr_null(loops_admit(&l, &lim, 5, why, sizeof(why)));
	close(p[1]);
	loops_finish(&l);
}
END_TEST

/* Three loops that count their turns and park when woken; loop 0 stops the world. */
struct world {
	struct loops l;
	atomic_bool woken[LOOPS_MAX];
	atomic_ulong turns[LOOPS_MAX];
	atomic_bool done;
};

static struct world W;

static void wake_loop(struct server *srv)
{
	atomic_store(&W.woken[srv - fake], true);
}

static void *loop_run(void *arg)
{
	const unsigned me = (unsigned)(uintptr_t)arg;

	while (!atomic_load(&W.done)) {
		if (atomic_exchange(&W.woken[me], false))
			loops_park(&W.l, me);
		atomic_fetch_add(&W.turns[me], 1);
		usleep(100);
	}
	loops_detach(&W.l, me);
	return NULL;
}

START_TEST(test_the_stopped_world_holds_every_other_loop)
{
	pthread_t t[3];
	unsigned long at[4];

	ck_assert_int_eq(loops_init(&W.l, 4), 0);
	park_wake = wake_loop;
	attach_all(&W.l);
	for (unsigned i = 1; i < 4; i++)
		ck_assert_int_eq(
			pthread_create(&t[i - 1], NULL, loop_run, (void *)(uintptr_t)i), 0);
	usleep(5000);
	for (int round = 0; round < 20; round++) {
		loops_stop_world(&W.l, 0);
		for (unsigned i = 1; i < 4; i++)
			at[i] = atomic_load(&W.turns[i]);
		usleep(2000);
		/* Parked: not one more turn while the world is stopped. */
		for (unsigned i = 1; i < 4; i++)
			ck_assert_uint_eq(atomic_load(&W.turns[i]), at[i]);
		loops_resume_world(&W.l);
		usleep(1000);
	}
	/* Each loop moves again once resumed. */
	for (unsigned i = 1; i < 4; i++)
		at[i] = atomic_load(&W.turns[i]);
	usleep(20000);
	for (unsigned i = 1; i < 4; i++)
		ck_assert_uint_gt(atomic_load(&W.turns[i]), at[i]);
	atomic_store(&W.done, true);
	for (unsigned i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	loops_finish(&W.l);
}
END_TEST

/* Two loops stopping the world at once: one waits, parked, for the other's turn to end. */
static void *stopper(void *arg)
{
	const unsigned me = (unsigned)(uintptr_t)arg;

	for (int i = 0; i < 200; i++) {
		if (atomic_exchange(&W.woken[me], false))
			loops_park(&W.l, me);
		loops_stop_world(&W.l, me);
		atomic_fetch_add(&W.turns[me], 1);
		loops_resume_world(&W.l);
	}
	/* No longer serving: the other's stops no longer wait for this loop. */
	loops_detach(&W.l, me);
	return NULL;
}

START_TEST(test_two_loops_stopping_the_world_take_turns)
{
	pthread_t t[2];

	memset(&W, 0, sizeof(W));
	ck_assert_int_eq(loops_init(&W.l, 2), 0);
	park_wake = wake_loop;
	attach_all(&W.l);
	for (unsigned i = 0; i < 2; i++)
		ck_assert_int_eq(pthread_create(&t[i], NULL, stopper, (void *)(uintptr_t)i), 0);
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	ck_assert_uint_eq(atomic_load(&W.turns[0]), 200);
	ck_assert_uint_eq(atomic_load(&W.turns[1]), 200);
	loops_finish(&W.l);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("loops");
	TCase *tc = tcase_create("loops");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_admission_counts_connections_across_loops);
	tcase_add_test(tc, test_a_new_connection_goes_to_the_loop_with_fewest_sessions);
	tcase_add_test(tc, test_a_hand_off_to_a_loop_gone_closes_the_connection);
	tcase_add_test(tc, test_the_stopped_world_holds_every_other_loop);
	tcase_add_test(tc, test_two_loops_stopping_the_world_take_turns);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
