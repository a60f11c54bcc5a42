/* What the hip tests share (test-hip, test-backend-hip, tests/test-hip-daemon): whether a
 * GPU is there, asked without starting HIP in this process; whether it is the fake CUDA
 * runtime; and the files they find relative to themselves, so the build tree can move to
 * the GPU machine. */
#ifndef SSEQ_TESTS_HIP_HARNESS_H
#define SSEQ_TESTS_HIP_HARNESS_H

#include <check.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hip.h"

/* Whether a GPU is there, asked in a child: this process must not start HIP before
 * Check forks the tests. */
static inline bool hip_harness_gpu_present(void)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return false;
	if (pid == 0)
		_exit(hip_device_count() > 0 ? 0 : 1);
	if (waitpid(pid, &status, 0) < 0)
		return false;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* fakecuda/ (a -Dfake_cuda build) sets SSEQ_FAKE_CUDA: CPU threads, not a GPU. */
static inline bool hip_harness_fake_cuda(void)
{
	const char *env = getenv("SSEQ_FAKE_CUDA");

	return env && *env && strcmp(env, "0") != 0;
}

/* With the fake, n / divisor (rounded up): the long loops run shorter. */
static inline unsigned hip_harness_scaled(unsigned n, unsigned divisor)
{
	return hip_harness_fake_cuda() ? (n + divisor - 1) / divisor : n;
}

/* This executable's directory, wherever the build tree was moved to. */
static inline void hip_harness_exe_dir(char *out, size_t size)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

	ck_assert_int_gt(n, 0);
	buf[n] = '\0';
	snprintf(out, size, "%s", dirname(buf));
}

/* The kernel image: $SSEQ_KERNELS, else `rel` (relative to this executable's directory)
 * when it is there, else NULL. */
static inline const char *hip_harness_kernels(const char *rel)
{
	static char path[PATH_MAX + 64];
	const char *env = getenv("SSEQ_KERNELS");
	char dir[PATH_MAX];

	if (env && *env)
		return env;
	hip_harness_exe_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	return access(path, R_OK) == 0 ? path : NULL;
}

/* The test module (gpu-module.cu as built): $SSEQ_TEST_MODULE, else `rel` relative to
 * this executable's directory. */
static inline void hip_harness_module_path(char *out, size_t size, const char *rel)
{
	const char *env = getenv("SSEQ_TEST_MODULE");
	char dir[PATH_MAX];

	if (env && *env) {
		snprintf(out, size, "%s", env);
		return;
	}
	hip_harness_exe_dir(dir, sizeof(dir));
	ck_assert_int_lt(snprintf(out, size, "%s/%s", dir, rel), (int)size);
}

static inline void hip_harness_write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

#endif
