/* When a waiter may spin (spin.c): the decision from runnable threads and CPUs, the
 * /proc/loadavg parse, the $SSEQ_SPIN_POLICY override, and, on this machine, that a
 * process whose own busy threads outnumber its CPUs is told not to spin. Each test runs
 * in its own process (Check's fork mode): the policy is read once per process. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "spin.h"

START_TEST(test_loadavg_parse)
{
	ck_assert_uint_eq(spin_parse_loadavg("0.52 0.58 0.59 3/1234 5678\n"), 3);
	ck_assert_uint_eq(spin_parse_loadavg("12.00 9.10 8.00 17/2048 1\n"), 17);
	ck_assert_uint_eq(spin_parse_loadavg("0.52 0.58 0.59"), 0);
	ck_assert_uint_eq(spin_parse_loadavg("0.52 0.58 0.59 x/1234 5678"), 0);
	ck_assert_uint_eq(spin_parse_loadavg("0.52 0.58 0.59 3 5678"), 0);
	ck_assert_uint_eq(spin_parse_loadavg(""), 0);
}
END_TEST

START_TEST(test_decide_spins_only_on_a_free_core)
{
	ck_assert(spin_decide(SPIN_AUTO, 1, 1, 0));
	ck_assert(spin_decide(SPIN_AUTO, 4, 4, 0));
	ck_assert(!spin_decide(SPIN_AUTO, 5, 4, 0));
	ck_assert(!spin_decide(SPIN_AUTO, 65, 16, 0));
	ck_assert(!spin_decide(SPIN_AUTO, 0, 16, 0)); /* unknown: sleep */
	ck_assert(spin_decide(SPIN_ALWAYS, 65, 16, 0));
	ck_assert(!spin_decide(SPIN_NEVER, 1, 16, 0));
	/* A client leaves spare cores: 12 runnable of 16 with 4 to spare is the last yes. */
	ck_assert(spin_decide(SPIN_AUTO, 12, 16, 4));
	ck_assert(!spin_decide(SPIN_AUTO, 13, 16, 4));
	ck_assert(!spin_decide(SPIN_AUTO, 1, 1, 1));
	ck_assert(!spin_decide(SPIN_AUTO, 1, 16, UINT32_MAX));
	ck_assert(spin_decide(SPIN_ALWAYS, 16, 16, 4));
	ck_assert_int_eq(spin_policy_from(NULL), SPIN_AUTO);
	ck_assert_int_eq(spin_policy_from("auto"), SPIN_AUTO);
	ck_assert_int_eq(spin_policy_from("always"), SPIN_ALWAYS);
	ck_assert_int_eq(spin_policy_from("never"), SPIN_NEVER);
	ck_assert_int_eq(spin_policy_from("sometimes"), SPIN_AUTO);
}
END_TEST

START_TEST(test_override_never_and_always)
{
	setenv("SSEQ_SPIN_POLICY", _i ? "always" : "never", 1);
	for (int k = 0; k < 3; k++)
		ck_assert(spin_core_free() == (_i == 1));
}
END_TEST

static atomic_bool busy_stop;

static void *busy(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&busy_stop, memory_order_relaxed))
		;
	return NULL;
}

/* The CPUs this process may use. */
static unsigned usable_cpus(void)
{
	cpu_set_t set;

	ck_assert_int_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	return (unsigned)CPU_COUNT(&set);
}

/* What ask() says after n busy threads ran long enough for a few rechecks to see them: it
 * stops asking at the first no. */
static bool asked_under_busy_threads(unsigned n, bool (*ask)(void))
{
	pthread_t th[66];
	bool free_core = true;

	ck_assert_uint_le(n, 66);
	atomic_store(&busy_stop, false);
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, busy, NULL), 0);
	for (int k = 0; k < 2000 && free_core; k++) {
		struct timespec nap = {0, 2 * SPIN_RECHECK_NS};

		nanosleep(&nap, NULL);
		free_core = ask();
	}
	atomic_store(&busy_stop, true);
	for (unsigned i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	return free_core;
}

/* More busy threads than this process may use CPUs: the machine has no free core for
 * them, so within a few rechecks the answer is no (whatever else the machine runs: the
 * count only grows with it). */
START_TEST(test_no_free_core_under_more_busy_threads_than_cpus)
{
	const unsigned cpus = usable_cpus(), n = cpus + 2 < 66 ? cpus + 2 : 66;

	unsetenv("SSEQ_SPIN_POLICY");
	ck_assert_msg(!asked_under_busy_threads(n, spin_core_free),
		"%u busy threads on %u CPUs, and still told to spin", n, cpus);
}
END_TEST

START_TEST(test_client_spare_cores)
{
	ck_assert_uint_eq(spin_client_spare(NULL, 16), 4);
	ck_assert_uint_eq(spin_client_spare("", 64), 16);
	ck_assert_uint_eq(spin_client_spare(NULL, 2), 1);
	ck_assert_uint_eq(spin_client_spare(NULL, 1), 1);
	ck_assert_uint_eq(spin_client_spare("0", 16), 0);
	ck_assert_uint_eq(spin_client_spare("6", 16), 6);
	ck_assert_uint_eq(spin_client_spare("x", 16), 4);
	ck_assert_uint_eq(spin_client_spare("-1", 16), 4);
	ck_assert_uint_eq(spin_client_spare("3k", 16), 4);
}
END_TEST

/* Busy threads that leave fewer than the client's spare cores idle: a client is told not
 * to spin (within a few rechecks; other load only adds to the count), though a core is
 * still free for the daemon's own waiters. */
START_TEST(test_client_leaves_spare_cores_to_the_daemon)
{
	const unsigned cpus = usable_cpus(), spare = spin_client_spare(NULL, cpus);
	const unsigned n = cpus - spare < 66 ? cpus - spare : 66;

	unsetenv("SSEQ_SPIN_POLICY");
	unsetenv("SSEQ_SPIN_SPARE");
	ck_assert_msg(!asked_under_busy_threads(n, spin_client_core_free),
		"%u busy threads on %u CPUs (%u to spare), and a client still told to spin", n,
		cpus, spare);
}
END_TEST

/* $SSEQ_SPIN_SPARE reaches the client's answer: with every core to spare a client never
 * spins, checked whenever the daemon's rule, on the same cached count, would (a machine
 * with no free core for the whole second tells nothing, and this test says so). */
START_TEST(test_client_spare_from_the_environment)
{
	const unsigned cpus = usable_cpus();
	struct timespec nap = {0, 2 * SPIN_RECHECK_NS};
	char value[16];
	int seen = 0;

	unsetenv("SSEQ_SPIN_POLICY");
	snprintf(value, sizeof(value), "%u", cpus);
	setenv("SSEQ_SPIN_SPARE", value, 1);
	for (int k = 0; k < 2000 && seen < 20; k++) {
		if (spin_core_free()) {
			seen++;
			ck_assert_msg(!spin_client_core_free(),
				"SSEQ_SPIN_SPARE=%u on %u CPUs, and a client told to spin", cpus,
				cpus);
		}
		nanosleep(&nap, NULL);
	}
	if (!seen)
		printf("test-spin: no free core seen in a second: the spare setting not checked\n");
}
END_TEST

int main(void)
{
	Suite *suite = suite_create("spin");
	TCase *tc = tcase_create("spin");
	SRunner *sr;
	int failed;

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_loadavg_parse);
	tcase_add_test(tc, test_decide_spins_only_on_a_free_core);
	tcase_add_loop_test(tc, test_override_never_and_always, 0, 2);
	tcase_add_test(tc, test_no_free_core_under_more_busy_threads_than_cpus);
	tcase_add_test(tc, test_client_spare_cores);
	tcase_add_test(tc, test_client_leaves_spare_cores_to_the_daemon);
	tcase_add_test(tc, test_client_spare_from_the_environment);
	suite_add_tcase(suite, tc);
	sr = srunner_create(suite);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
