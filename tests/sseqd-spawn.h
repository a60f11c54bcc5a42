/* sseqd as a child of the test: started from its argument list and waited for until its
 * socket exists, then stopped with SIGTERM and checked to exit 0. The suites that speak
 * raw frames (daemon-harness.h) and those that go through libsseq (hipd-harness.h) both
 * start it here. */
#ifndef SSEQ_TESTS_SSEQD_SPAWN_H
#define SSEQ_TESTS_SSEQD_SPAWN_H

#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the child gets besides its arguments. */
struct sseqd_child {
	const char *log_path; /* its stderr goes to this file */
	unsigned nofile; /* its descriptor limit, soft and hard (0: this process's) */
	/* SIGTERM when the test process ends: a failed check must not leave it holding a
	 * GPU. */
	bool die_with_parent;
	int wait_s; /* how long it may take to create its socket (opening a GPU takes a while) */
};

/* Run argv (argv[0] the daemon) as a child and wait until `sock` exists: the child's pid.
 * A child that exits first fails the test at once, with its status. */
static inline pid_t sseqd_spawn(
	const char *const *argv, const char *sock, const struct sseqd_child *c)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (c->die_with_parent)
			prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (c->log_path) {
			int lfd = open(c->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (lfd < 0 || dup2(lfd, 2) < 0)
				_exit(126);
		}
		if (c->nofile) {
			struct rlimit rl = {c->nofile, c->nofile};
			if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
				_exit(126);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	for (int waited_ms = 0; waited_ms < c->wait_s * 1000; waited_ms += 10) {
		int status = 0;

		if (access(sock, F_OK) == 0)
			return pid;
		ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0,
			"%s exited at start-up (status %#x)", argv[0], status);
		usleep(10000);
	}
	ck_abort_msg("%s did not create its socket in %d s", argv[0], c->wait_s);
	return -1;
}

/* SIGTERM, and the daemon exited with status 0 (the sanitizers make a leak fail it). */
static inline void sseqd_stop(pid_t pid)
{
	int status = 0;

	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "sseqd exited with status %#x",
		status);
}

#endif
