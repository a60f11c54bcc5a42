/* What the suites that drive sseqd through libsseq on the hip backend share
 * (test-hip-daemon, test-hip-names): the daemon from the build tree, started with a module
 * directory of its own and the kernel image beside it, stopped, and its directory
 * removed. Each suite fills the directory with the modules it needs. */
#ifndef SSEQ_TESTS_HIPD_HARNESS_H
#define SSEQ_TESTS_HIPD_HARNESS_H

#include <check.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hip-harness.h"
#include "sseqd-spawn.h"

struct hipd {
	pid_t pid;
	char sock[108];
	char dir[64]; /* its --module-dir */
};

/* Start sseqd ($SSEQD, else the build tree's, relative to this executable) --backend
 * `backend` on d->sock with d->dir as its --module-dir (both the caller's), the kernel
 * image for the hip backend where one was built, and then `extra`. */
static inline void hipd_spawn(struct hipd *d, const char *backend, const char *const *extra)
{
	const char *kernels = hip_harness_kernels(SSEQ_HIP_DIR_REL "/" SSEQ_KERNELS_NAME);
	const char *env_sseqd = getenv("SSEQD");
	char sseqd[PATH_MAX];
	const char *argv[32] = {sseqd, "--backend", backend, "--socket", d->sock, "--module-dir",
		d->dir, "--log-level", "notice"};
	int n = 9;

	if (env_sseqd && *env_sseqd) {
		snprintf(sseqd, sizeof(sseqd), "%s", env_sseqd);
	} else {
		char dir[PATH_MAX];

		hip_harness_exe_dir(dir, sizeof(dir));
		ck_assert_int_lt(snprintf(sseqd, sizeof(sseqd), "%s/../daemon/sseqd", dir),
			(int)sizeof(sseqd));
	}
	if (kernels && strcmp(backend, "hip") == 0) {
		argv[n++] = "--kernels";
		argv[n++] = kernels;
	}
	for (; extra && *extra; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	d->pid = sseqd_spawn(
		argv, d->sock, &(struct sseqd_child){.die_with_parent = true, .wait_s = 30});
}

/* sseqd_stop, and the socket and the module directory removed. */
static inline void hipd_stop(struct hipd *d)
{
	char cmd[128];

	sseqd_stop(d->pid);
	unlink(d->sock);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* Run suite s in Check's default mode: the test program's exit status. */
static inline int hipd_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
