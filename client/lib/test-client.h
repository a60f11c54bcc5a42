/* What libsseq's unit suites share: a socketpair, and running one Check suite. */
#ifndef SSEQ_TEST_CLIENT_H
#define SSEQ_TEST_CLIENT_H

#include <check.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static inline void make_pair(int sv[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static inline void close_pair(int sv[2])
{
	close(sv[0]);
	close(sv[1]);
}

/* Runs the suite (CK_RUN_CASE and the like apply); the process's exit status. */
static inline int client_test_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
