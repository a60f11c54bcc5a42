/* Integration: sseqd --backend hip through its socket and libsseq: user code objects
 * loaded and run (with the module-dir path rules on the daemon path), and the --audit
 * mode catching the injected legacy window. Skips (77) without a GPU; HIP is asked about
 * only in a forked child, and sseqd is a process of its own. The backend alone is
 * test-hip's and test-backend-hip's (daemon/backend/). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sseq/sseq.h>

#include "backend-harness.h"
#include "hip.h"
#include "hipd-harness.h"

/* The kernel image and the test module, found in the build tree relative to this
 * executable (the build tree's tests/, wherever it was moved to). */
#define HIP_DIR_FILE(name) SSEQ_HIP_DIR_REL "/" name

/* Start `sseqd --backend hip` with a fresh --module-dir holding the test module, a file
 * that is no code object, and a symlink that leads out of the directory. */
static void hipd_start(struct hipd *d, const char *const *extra)
{
	char mod[PATH_MAX], link[PATH_MAX + 16], copy[PATH_MAX + 16];
	char *image;
	size_t len;
	FILE *f;

	snprintf(d->dir, sizeof(d->dir), "/tmp/sseq-hip-mods.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(d->dir));
	hip_harness_module_path(mod, sizeof(mod), HIP_DIR_FILE(SSEQ_TEST_MODULE_NAME));
	f = fopen(mod, "rb");
	/* The fake runs no user code objects: none is built, and no test loads one. */
	ck_assert_msg(f != NULL || hip_harness_fake_cuda(), "%s: %s", mod, strerror(errno));
	if (f) {
		image = malloc(1 << 24);
		ck_assert_ptr_nonnull(image);
		len = fread(image, 1, 1 << 24, f);
		fclose(f);
		snprintf(copy, sizeof(copy), "%s/%s", d->dir, SSEQ_TEST_MODULE_NAME);
		hip_harness_write_file(copy, image, len);
		free(image);
	}
	/* The echo functions' module, where it is another file (the fake's). */
	if (strcmp(SSEQ_ECHO_MODULE_NAME, SSEQ_TEST_MODULE_NAME) != 0) {
		char echo[PATH_MAX], text[4096];

		hip_harness_module_path(echo, sizeof(echo), HIP_DIR_FILE(SSEQ_ECHO_MODULE_NAME));
		f = fopen(echo, "rb");
		ck_assert_msg(f != NULL, "%s: %s", echo, strerror(errno));
		len = fread(text, 1, sizeof(text), f);
		fclose(f);
		snprintf(copy, sizeof(copy), "%s/%s", d->dir, SSEQ_ECHO_MODULE_NAME);
		hip_harness_write_file(copy, text, len);
	}
	snprintf(copy, sizeof(copy), "%s/notcode.bin", d->dir);
	hip_harness_write_file(copy, "not a code object\n", 18);
	snprintf(link, sizeof(link), "%s/escape", d->dir);
	ck_assert_int_eq(symlink(mod, link), 0);

	snprintf(d->sock, sizeof(d->sock), "/tmp/sseq-hip-%d.sock", (int)getpid());
	hipd_spawn(d, "hip", extra);
}

static struct sseq *hipd_connect(const struct hipd *d, uint64_t staging)
{
	struct sseq_connect_options o = {
		.size = sizeof(o), .client_name = "test-hip", .staging_size = staging};
	struct sseq_info info;
	struct sseq *s = NULL;
	int r = sseq_connect(d->sock, &o, &s);

	ck_assert_msg(r == 0, "connect: %s", sseq_strerror(r));
	ck_assert_int_eq(sseq_get_info(s, &info), 0);
	ck_assert_str_eq(info.backend, "hip");
	return s;
}

static void hipd_stats(struct sseq *s, struct sseq_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->size = sizeof(*st);
	ck_assert_int_eq(sseq_stats(s, st), 0);
}

/* Run twice() over x (n floats) and check every element doubled. */
static void hipd_twice(struct sseq *s, uint64_t module, uint64_t n)
{
	const struct sseq_launch grid = {
		.grid = {(uint32_t)((n + 255) / 256), 1, 1}, .block = {256, 1, 1}};
	float *host, *back;
	uint64_t x;

	ck_assert_int_eq(sseq_host_alloc(s, n * 4, (void **)&host), 0);
	back = malloc(n * 4);
	ck_assert_ptr_nonnull(back);
	fill_pattern(host, n, 11);
	ck_assert_int_eq(sseq_alloc(s, n * 4, "x", &x), 0);
	ck_assert_int_eq(sseq_copy_h2d(s, x, 0, host, n * 4, NULL), 0);
	ck_assert_int_eq(sseq_execute_function(s, module, "twice",
				 (struct sseq_arg[]){SSEQ_INOUT(x), SSEQ_U64(n)}, 2, &grid, NULL),
		0);
	ck_assert_int_eq(sseq_copy_d2h(s, x, 0, back, n * 4, NULL), 0);
	ck_assert_msg(sseq_sync(s) == 0, "twice: %s", sseq_last_error_message(s));
	for (size_t i = 0; i < n; i++)
		if (back[i] != 2.0f * host[i])
			ck_abort_msg("[%zu] %g != 2 * %g", i, back[i], host[i]);
	free(back);
	ck_assert_int_eq(sseq_host_free(s, host), 0);
	ck_assert_int_eq(sseq_free(s, x), 0);
}

/* A request that the daemon refuses: its status, and its message in msg. */
static int hipd_refused(struct sseq *s, uint64_t module, const char *fn,
	const struct sseq_arg *args, size_t nargs, const struct sseq_launch *shape, char *msg,
	size_t size)
{
	uint64_t tag = 0;
	int r = sseq_execute_function(s, module, fn, args, nargs, shape, &tag);

	ck_assert_int_eq(r, 0);
	r = sseq_wait(s, tag);
	snprintf(msg, size, "%s", sseq_last_error_message(s));
	return r;
}

START_TEST(test_daemon_loads_and_runs_a_user_module)
{
	enum { N = (1 << 20) + 3 };
	const struct sseq_launch grid = {.grid = {1, 1, 1}, .block = {64, 1, 1}};
	struct hipd d;
	struct sseq_stats st;
	struct sseq *s;
	uint64_t m = 0, x, y;
	char path[PATH_MAX], msg[512];
	float *res, *host;

	hipd_start(&d, (const char *const[]){"--audit", NULL});
	s = hipd_connect(&d, 0);

	/* Path rules (the full set is test-modpath's): applied on the daemon path. */
	hip_harness_module_path(path, sizeof(path), HIP_DIR_FILE(SSEQ_TEST_MODULE_NAME));
	ck_assert_int_eq(sseq_load_module(s, path, &m), -SSEQ_ERR_PERMISSION_DENIED);
	ck_assert_int_eq(sseq_load_module(s, "../x.fatbin", &m), -SSEQ_ERR_PERMISSION_DENIED);
	ck_assert_int_eq(sseq_load_module(s, "escape", &m), -SSEQ_ERR_PERMISSION_DENIED);
	ck_assert_int_eq(sseq_load_module(s, "missing.bin", &m), -SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(sseq_last_error_message(s), "no such file"), "%s",
		sseq_last_error_message(s));
	/* Refused at load, not at the first launch, whatever the runtime's loading mode. */
	ck_assert_int_eq(sseq_load_module(s, "notcode.bin", &m), -SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(sseq_last_error_message(s), "not a code object for this device"), "%s",
		sseq_last_error_message(s));
	ck_assert_int_eq(sseq_load_module(s, SSEQ_TEST_MODULE_NAME, &m), 0);
	ck_assert_uint_ne(m, 0);

	hipd_twice(s, m, N);

	/* An input from an H2D copy on the other stream, through a second function. */
	ck_assert_int_eq(sseq_host_alloc(s, N * 4, (void **)&host), 0);
	fill_pattern(host, N, 12);
	res = malloc(N * 4);
	ck_assert_ptr_nonnull(res);
	ck_assert_int_eq(sseq_alloc(s, N * 4, "in", &x), 0);
	ck_assert_int_eq(sseq_alloc(s, N * 4, "out", &y), 0);
	ck_assert_int_eq(sseq_copy_h2d(s, x, 0, host, N * 4, NULL), 0);
	{
		const struct sseq_launch g = {
			.grid = {(N + 255) / 256, 1, 1}, .block = {256, 1, 1}};

		ck_assert_int_eq(sseq_execute_function(s, m, "scaled",
					 (struct sseq_arg[]){
						 SSEQ_IN(x), SSEQ_OUT(y), SSEQ_F32(3), SSEQ_U64(N)},
					 4, &g, NULL),
			0);
	}
	ck_assert_int_eq(sseq_copy_d2h(s, y, 0, res, N * 4, NULL), 0);
	ck_assert_msg(sseq_sync(s) == 0, "scaled: %s", sseq_last_error_message(s));
	for (size_t i = 0; i < N; i++)
		if (res[i] != 3.0f * host[i])
			ck_abort_msg("[%zu] %g != 3 * %g", i, res[i], host[i]);
	free(res);

	/* What the daemon refuses for module functions. */
	ck_assert_int_eq(
		hipd_refused(s, m, "twice", (struct sseq_arg[]){SSEQ_INOUT(x), SSEQ_U64(N)}, 2,
			NULL, msg, sizeof(msg)),
		-SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(msg, "grid"), "%s", msg);
	ck_assert_int_eq(hipd_refused(s, m, "nope", (struct sseq_arg[]){SSEQ_U64(1)}, 1, &grid, msg,
				 sizeof(msg)),
		-SSEQ_ERR_UNKNOWN_KERNEL);
	ck_assert_int_eq(hipd_refused(s, m ^ (1ull << 32), "twice",
				 (struct sseq_arg[]){SSEQ_INOUT(x), SSEQ_U64(1)}, 2, &grid, msg,
				 sizeof(msg)),
		-SSEQ_ERR_UNKNOWN_HANDLE);
	ck_assert_int_eq(sseq_sync(s), 0);

	/* Leave with launches in flight: the module stays loaded until they complete. */
	for (int i = 0; i < 20; i++) {
		const struct sseq_launch g = {
			.grid = {(N + 255) / 256, 1, 1}, .block = {256, 1, 1}};

		ck_assert_int_eq(
			sseq_execute_function(s, m, "twice",
				(struct sseq_arg[]){SSEQ_INOUT(x), SSEQ_U64(N)}, 2, &g, NULL),
			0);
	}
	ck_assert_int_eq(sseq_flush(s), 0);
	sseq_close(s);

	s = hipd_connect(&d, 0);
	ck_assert_int_eq(sseq_load_module(s, SSEQ_TEST_MODULE_NAME, &m), 0);
	hipd_twice(s, m, 1000);
	/* The checks run behind the work; give them a moment before the count is read. */
	usleep(200000);
	hipd_stats(s, &st);
	printf("hip: daemon with --audit, module functions: %" PRIu64 " audit findings\n",
		st.audit_findings);
	ck_assert_uint_eq(st.audit_findings, 0);
	sseq_close(s);
	hipd_stop(&d);
}
END_TEST

/* Launch echo function fn (its parameters after the first written at their offsets into
 * the first, out); back gets out's first `size` bytes, zero before the launch. */
static void hipd_echo(struct sseq *s, uint64_t m, const char *fn, uint64_t out,
	const struct sseq_arg *args, size_t nargs, unsigned char *back, size_t size)
{
	const struct sseq_launch one = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
	unsigned char zero[64] = {0};

	ck_assert_uint_le(size, sizeof(zero));
	ck_assert_int_eq(sseq_copy_h2d(s, out, 0, zero, size, NULL), 0);
	ck_assert_msg(sseq_execute_function(s, m, fn, args, nargs, &one, NULL) == 0, "%s: %s", fn,
		sseq_last_error_message(s));
	ck_assert_int_eq(sseq_copy_d2h(s, out, 0, back, size, NULL), 0);
	ck_assert_msg(sseq_sync(s) == 0, "%s: %s", fn, sseq_last_error_message(s));
}

/* Narrow scalars, a struct and a float4 by value, and pointers at offsets into a buffer
 * (slices) reach the function as it declares them: each argument's bytes at its
 * parameter's offset. What does not match is refused naming the argument. */
START_TEST(test_daemon_passes_narrow_scalars_structs_and_slices_by_their_bytes)
{
	struct vec12 {
		int32_t a, b, c;
	} v12 = {-7, 0x12345678, 99};
	struct f4 {
		_Alignas(16) float x;
		float y, z, w;
	} f4 = {1.5f, -2.0f, 3.25f, 1e-3f};
	const struct sseq_launch one = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
	unsigned char back[64];
	char msg[512];
	struct hipd d;
	struct sseq *s;
	uint64_t m, out, base, slice, pb, ps;
	int16_t i16;
	uint16_t u16;

	hipd_start(&d, NULL);
	s = hipd_connect(&d, 0);
	ck_assert_msg(sseq_load_module(s, SSEQ_ECHO_MODULE_NAME, &m) == 0, "%s",
		sseq_last_error_message(s));
	ck_assert_int_eq(sseq_alloc(s, 256, "out", &out), 0);
	ck_assert_int_eq(sseq_alloc(s, 4096, "base", &base), 0);
	ck_assert_int_eq(sseq_slice(s, base, 64, 128, "slice", &slice), 0);

	/* i8 at 8, u8 at 9, i16 at 10, u16 at 12, f16 (1.0) at 14, bf16 (1.0) at 16. */
	hipd_echo(s, m, "echo_narrow", out,
		(struct sseq_arg[]){SSEQ_INOUT(out), SSEQ_I8(-5), SSEQ_U8(250), SSEQ_I16(-30000),
			SSEQ_U16(65000), SSEQ_F16(0x3c00), SSEQ_BF16(0x3f80)},
		7, back, 24);
	ck_assert_int_eq((int8_t)back[8], -5);
	ck_assert_uint_eq(back[9], 250);
	memcpy(&i16, back + 10, 2);
	ck_assert_int_eq(i16, -30000);
	memcpy(&u16, back + 12, 2);
	ck_assert_uint_eq(u16, 65000);
	memcpy(&u16, back + 14, 2);
	ck_assert_uint_eq(u16, 0x3c00);
	memcpy(&u16, back + 16, 2);
	ck_assert_uint_eq(u16, 0x3f80);
	for (size_t i = 18; i < 24; i++)
		ck_assert_uint_eq(back[i], 0);

	/* The 12-byte struct at 8, the float4 at 32 (aligned 16), then two pointers: the
	 * slice's is the base's plus its offset. */
	hipd_echo(s, m, "echo_struct", out,
		(struct sseq_arg[]){SSEQ_INOUT(out),
			SSEQ_BYTES(&v12, sizeof(v12), _Alignof(struct vec12)),
			SSEQ_BYTES(&f4, sizeof(f4), _Alignof(struct f4)), SSEQ_IN(base),
			SSEQ_IN(slice)},
		5, back, 64);
	ck_assert_mem_eq(back + 8, &v12, sizeof(v12));
	for (size_t i = 20; i < 32; i++)
		ck_assert_uint_eq(back[i], 0);
	ck_assert_mem_eq(back + 32, &f4, sizeof(f4));
	memcpy(&pb, back + 48, 8);
	memcpy(&ps, back + 56, 8);
	ck_assert_uint_ne(pb, 0);
	ck_assert_uint_eq(ps, pb + 64);

	/* Refusals, each naming the argument. A count the function does not take: */
	ck_assert_int_eq(hipd_refused(s, m, "echo_narrow",
				 (struct sseq_arg[]){SSEQ_INOUT(out), SSEQ_I8(1), SSEQ_U8(2),
					 SSEQ_I16(3), SSEQ_U16(4), SSEQ_F16(0)},
				 6, &one, msg, sizeof(msg)),
		-SSEQ_ERR_BAD_ARGUMENT_TYPE);
	ck_assert_msg(strstr(msg, "6 arguments") && strstr(msg, "takes 7"), "%s", msg);
	ck_assert_int_eq(hipd_refused(s, m, "echo_struct",
				 (struct sseq_arg[]){SSEQ_INOUT(out), SSEQ_BYTES(&v12, 12, 4),
					 SSEQ_BYTES(&f4, 16, 16), SSEQ_IN(base), SSEQ_IN(slice),
					 SSEQ_U32(1)},
				 6, &one, msg, sizeof(msg)),
		-SSEQ_ERR_BAD_ARGUMENT_TYPE);
	ck_assert_msg(strstr(msg, "argument 5 (u32, 4 bytes)") && strstr(msg, "only 5"), "%s", msg);
	/* A size that is not the parameter's: */
	ck_assert_int_eq(hipd_refused(s, m, "echo_struct",
				 (struct sseq_arg[]){SSEQ_INOUT(out), SSEQ_BYTES(&v12, 12, 4),
					 SSEQ_BYTES(&v12, 12, 4), SSEQ_IN(base), SSEQ_IN(slice)},
				 5, &one, msg, sizeof(msg)),
		-SSEQ_ERR_BAD_ARGUMENT_TYPE);
	ck_assert_msg(strstr(msg,
			      "argument 2 (bytes, 12 bytes) does not match parameter 2 of "
			      "echo_struct (16 bytes)"),
		"%s", msg);
	ck_assert_int_eq(hipd_refused(s, m, "echo_narrow",
				 (struct sseq_arg[]){SSEQ_INOUT(out), SSEQ_I8(1), SSEQ_U8(2),
					 SSEQ_I32(3), SSEQ_U16(4), SSEQ_F16(0), SSEQ_BF16(0)},
				 7, &one, msg, sizeof(msg)),
		-SSEQ_ERR_BAD_ARGUMENT_TYPE);
	ck_assert_msg(
		strstr(msg, "argument 3 (i32, 4 bytes) does not match parameter 3"), "%s", msg);
	/* A value outside its type: */
	ck_assert_int_eq(hipd_refused(s, m, "echo_narrow",
				 (struct sseq_arg[]){SSEQ_INOUT(out), SSEQ_I8(300), SSEQ_U8(2),
					 SSEQ_I16(3), SSEQ_U16(4), SSEQ_F16(0), SSEQ_BF16(0)},
				 7, &one, msg, sizeof(msg)),
		-SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(
		strstr(msg, "argument 1 (i8) = 300 is out of its range [-128, 127]"), "%s", msg);
	ck_assert_int_eq(hipd_refused(s, m, "echo_narrow",
				 (struct sseq_arg[]){SSEQ_INOUT(out), SSEQ_I8(1), SSEQ_U8(2),
					 SSEQ_I16(3), SSEQ_U16(4), SSEQ_F16(0x10000), SSEQ_BF16(0)},
				 7, &one, msg, sizeof(msg)),
		-SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(msg, "argument 5 (f16)"), "%s", msg);
	/* Where the parameters are not known (the fake's stand-in for AMD), only the layout
	 * is checked: 8 + 4096 bytes do not fit in the parameter space, 8 + 16 + 16 do. */
	if (hip_harness_fake_cuda()) {
		static const char big[4096];

		ck_assert_int_eq(hipd_refused(s, m, "echo_unknown",
					 (struct sseq_arg[]){
						 SSEQ_INOUT(out), SSEQ_BYTES(big, sizeof(big), 1)},
					 2, &one, msg, sizeof(msg)),
			-SSEQ_ERR_INVALID_ARGUMENT);
		ck_assert_msg(
			strstr(msg, "argument 1 (bytes, 4096 bytes) ends at byte 4104"), "%s", msg);
		hipd_echo(s, m, "echo_unknown", out,
			(struct sseq_arg[]){SSEQ_INOUT(out), SSEQ_BYTES(&f4, 16, 16),
				SSEQ_BYTES(&v12, 12, 4) /* not checked: the fake echoes 16 */},
			3, back, 48);
		ck_assert_mem_eq(back + 16, &f4, sizeof(f4));
		ck_assert_mem_eq(back + 32, &v12, sizeof(v12));
	}
	/* The session goes on after the refusals. */
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert_int_eq(sseq_free(s, slice), 0);
	ck_assert_int_eq(sseq_free(s, base), 0);
	ck_assert_int_eq(sseq_free(s, out), 0);
	sseq_close(s);
	hipd_stop(&d);
}
END_TEST

/* The kernels a racing scenario uses, run once through the daemon first (see
 * h_warm_up: a first launch may synchronize the device). */
static void hipd_warm_up(struct sseq *s)
{
	uint64_t a, b;

	ck_assert_int_eq(sseq_alloc(s, 4096, "warm-a", &a), 0);
	ck_assert_int_eq(sseq_alloc(s, 4096, "warm-b", &b), 0);
	ck_assert_int_eq(sseq_execute(s, "fill",
				 (struct sseq_arg[]){SSEQ_OUT(a), SSEQ_F32(0.5f), SSEQ_U64(1024)},
				 3, NULL, NULL),
		0);
	ck_assert_int_eq(
		sseq_execute(s, "scale",
			(struct sseq_arg[]){SSEQ_IN(a), SSEQ_OUT(b), SSEQ_F32(1), SSEQ_U64(1024)},
			4, NULL, NULL),
		0);
	ck_assert_int_eq(
		sseq_execute(s, "spin", (struct sseq_arg[]){SSEQ_U64(0)}, 1, NULL, NULL), 0);
	ck_assert_msg(sseq_sync(s) == 0, "warm-up: %s", sseq_last_error_message(s));
	ck_assert_int_eq(sseq_free(s, a), 0);
	ck_assert_int_eq(sseq_free(s, b), 0);
}

START_TEST(test_daemon_audit_catches_the_injected_legacy_window)
{
	enum { N = 64 << 20 }; /* floats: 256 MiB, about 5 ms to copy */
	const uint64_t bytes = (uint64_t)N * 4;
	struct hipd d;
	struct sseq_stats st;
	struct sseq *s;
	uint64_t in, out;
	float *host, *back;
	size_t stale = 0;

	hipd_start(&d, (const char *const[]){"--audit", "--inject", "legacy-sync-window=4", NULL});
	s = hipd_connect(&d, 2 * bytes + (64u << 20));
	hipd_warm_up(s);
	ck_assert_int_eq(sseq_host_alloc(s, bytes, (void **)&host), 0);
	ck_assert_int_eq(sseq_host_alloc(s, bytes, (void **)&back), 0);
	fill_pattern(host, N, 13);
	ck_assert_int_eq(sseq_alloc(s, bytes, "in", &in), 0);
	ck_assert_int_eq(sseq_alloc(s, bytes, "out", &out), 0);
	/* One pipelined burst: the copy, four empty kernels that take the compute stream past
	 * the window, the kernel that reads the copy, and the read-back. */
	ck_assert_int_eq(sseq_copy_h2d(s, in, 0, host, bytes, NULL), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(
			sseq_execute(s, "spin", (struct sseq_arg[]){SSEQ_U64(0)}, 1, NULL, NULL),
			0);
	ck_assert_int_eq(
		sseq_execute(s, "scale",
			(struct sseq_arg[]){SSEQ_IN(in), SSEQ_OUT(out), SSEQ_F32(1), SSEQ_U64(N)},
			4, NULL, NULL),
		0);
	ck_assert_int_eq(sseq_copy_d2h(s, out, 0, back, bytes, NULL), 0);
	ck_assert_int_eq(sseq_sync(s), 0);
	for (size_t i = 0; i < N; i++)
		stale += back[i] != host[i];
	for (int i = 0; i < 100; i++) {
		hipd_stats(s, &st);
		if (st.audit_findings)
			break;
		usleep(50000);
	}
	printf("hip: daemon with --audit and legacy-sync-window=4: %" PRIu64
	       " legacy-elided waits, %" PRIu64 " audit findings, %" PRIu64
	       " race findings, %zu of %d elements stale\n",
		st.waits_elided_legacy, st.audit_findings, st.race_findings, stale, N);
	ck_assert_uint_eq(st.waits_elided_legacy, 1);
	ck_assert_uint_ge(st.audit_findings, 1);
	ck_assert_uint_ge(st.race_findings, st.audit_findings);
	/* The daemon logs what the finding names; here the data shows the same early read.
	 * Not with the fake: a CPU kernel that starts early trails the copy and may read only
	 * what already landed. */
	if (!hip_harness_fake_cuda())
		ck_assert_uint_gt(stale, 0);
	ck_assert_int_eq(sseq_host_free(s, host), 0);
	ck_assert_int_eq(sseq_host_free(s, back), 0);
	sseq_close(s);
	hipd_stop(&d);
}
END_TEST

/* A module's global (fake CUDA: a "global" line, and a function that copies it into its
 * first argument, as a kernel reading a constant would): set by H2D, read by a launch,
 * set again between launches. Each launch sees the value set before it and not the one
 * set after (the launch waited for the set, the next set for the launch), the checker
 * finds nothing, and an unknown name is refused naming it. */
START_TEST(test_daemon_module_global_is_sequenced_like_a_buffer)
{
	static const char text[] = "@FAKE-MODULE@\n"
				   "global c_filter 36\n"
				   "function read_filter 8 behavior=read_global:c_filter\n";
	const char *const extra[] = {"--verify", NULL};
	const struct sseq_launch one = {.grid = {1, 1, 1}, .block = {1, 1, 1}};
	float a[9], b[9], back1[9], back2[9];
	struct sseq_stats before, after;
	char path[PATH_MAX];
	struct hipd d;
	struct sseq *s;
	uint64_t m, g, g2, size = 0, out1, out2, decided;

	hipd_start(&d, extra);
	snprintf(path, sizeof(path), "%s/globals.txt", d.dir);
	hip_harness_write_file(path, text, sizeof(text) - 1);
	s = hipd_connect(&d, 0);
	ck_assert_msg(
		sseq_load_module(s, "globals.txt", &m) == 0, "%s", sseq_last_error_message(s));
	ck_assert_int_eq(
		sseq_module_global(s, m, "c_nope", 0, &g, &size), -SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(sseq_last_error_message(s), "no global 'c_nope'"), "%s",
		sseq_last_error_message(s));
	ck_assert_msg(sseq_module_global(s, m, "c_filter", 0, &g, &size) == 0, "%s",
		sseq_last_error_message(s));
	ck_assert_uint_eq(size, 36);
	/* Open once at a time. */
	ck_assert_int_eq(
		sseq_module_global(s, m, "c_filter", 0, &g2, NULL), -SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(sseq_alloc(s, 36, "out1", &out1), 0);
	ck_assert_int_eq(sseq_alloc(s, 36, "out2", &out2), 0);
	for (int i = 0; i < 9; i++) {
		a[i] = (float)i + 0.5f;
		b[i] = -10.0f * (float)i - 1.0f;
	}
	hipd_stats(s, &before);
	for (int round = 0; round < 20; round++) {
		ck_assert_int_eq(sseq_copy_h2d(s, g, 0, a, sizeof(a), NULL), 0);
		ck_assert_int_eq(sseq_execute_function(s, m, "read_filter",
					 (struct sseq_arg[]){SSEQ_OUT(out1)}, 1, &one, NULL),
			0);
		ck_assert_int_eq(sseq_copy_h2d(s, g, 0, b, sizeof(b), NULL), 0);
		ck_assert_int_eq(sseq_execute_function(s, m, "read_filter",
					 (struct sseq_arg[]){SSEQ_OUT(out2)}, 1, &one, NULL),
			0);
		ck_assert_int_eq(sseq_copy_d2h(s, out1, 0, back1, sizeof(back1), NULL), 0);
		ck_assert_int_eq(sseq_copy_d2h(s, out2, 0, back2, sizeof(back2), NULL), 0);
		ck_assert_msg(sseq_sync(s) == 0, "%s", sseq_last_error_message(s));
		ck_assert_mem_eq(back1, a, sizeof(a)); /* the first set, not the second */
		ck_assert_mem_eq(back2, b, sizeof(b));
	}
	hipd_stats(s, &after);
	/* Per round the launches' reads of the global and the second set's wait for the
	 * first launch (WAR) are decided (a wait, or the producer seen complete) besides
	 * the two D2H copies' waits for the launches. */
	decided = after.waits_enqueued + after.waits_elided_observed - before.waits_enqueued -
		before.waits_elided_observed;
	ck_assert_uint_ge(decided, 20 * 5);
	ck_assert_uint_gt(after.waits_enqueued, before.waits_enqueued);
	/* Back out through D2H, and D2D into another buffer. */
	ck_assert_int_eq(sseq_copy_d2d(s, g, 0, out1, 0, 36, NULL), 0);
	ck_assert_int_eq(sseq_copy_d2h(s, out1, 0, back1, sizeof(back1), NULL), 0);
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert_mem_eq(back1, b, sizeof(b));
	ck_assert_int_eq(sseq_free(s, g), 0);
	/* Free closes it: once idle it opens again. */
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert_msg(sseq_module_global(s, m, "c_filter", 1, &g, &size) == 0, "%s",
		sseq_last_error_message(s));
	ck_assert_int_eq(sseq_free(s, g), 0);
	ck_assert_int_eq(sseq_free(s, out1), 0);
	ck_assert_int_eq(sseq_free(s, out2), 0);
	hipd_stats(s, &after);
	ck_assert_uint_eq(after.race_findings, 0);

	/* The implicit reads count towards the accesses a launch may have: with 16 globals
	 * open, a launch with one buffer argument is refused saying why. */
	{
		char many[2048] = "@FAKE-MODULE@\nfunction read_filter 8 behavior=read_global:g0\n";
		uint64_t m2, gs[16];
		char msg[512];

		for (int i = 0; i < 16; i++)
			snprintf(many + strlen(many), sizeof(many) - strlen(many), "global g%d 4\n",
				i);
		snprintf(path, sizeof(path), "%s/many.txt", d.dir);
		hip_harness_write_file(path, many, strlen(many));
		ck_assert_msg(sseq_load_module(s, "many.txt", &m2) == 0, "%s",
			sseq_last_error_message(s));
		for (int i = 0; i < 16; i++) {
			char name[8];

			snprintf(name, sizeof(name), "g%d", i);
			ck_assert_int_eq(sseq_module_global(s, m2, name, 0, &gs[i], NULL), 0);
		}
		ck_assert_int_eq(sseq_alloc(s, 4, "out", &out1), 0);
		ck_assert_int_eq(
			hipd_refused(s, m2, "read_filter", (struct sseq_arg[]){SSEQ_OUT(out1)}, 1,
				&one, msg, sizeof(msg)),
			-SSEQ_ERR_INVALID_ARGUMENT);
		ck_assert_msg(strstr(msg, "1 buffer arguments and 16 open globals"), "%s", msg);
		ck_assert_int_eq(sseq_free(s, gs[15]), 0);
		ck_assert_int_eq(sseq_execute_function(s, m2, "read_filter",
					 (struct sseq_arg[]){SSEQ_OUT(out1)}, 1, &one, NULL),
			0);
		ck_assert_msg(sseq_sync(s) == 0, "%s", sseq_last_error_message(s));
		for (int i = 0; i < 15; i++)
			ck_assert_int_eq(sseq_free(s, gs[i]), 0);
		ck_assert_int_eq(sseq_free(s, out1), 0);
	}
	sseq_close(s);
	hipd_stop(&d);
}
END_TEST

/* What fakecuda's behavior=launchinfo writes through its first argument (struct
 * fake_launchinfo): the cooperative flag, the cluster's, the grid's and the block's
 * dimensions. */
struct hipd_launchinfo {
	uint32_t cooperative, cluster[3], grid[3], block[3];
};

/* Launch fn of m with attrs on grid (gx, 1, 1) of 64-thread blocks; the status, its
 * message in msg, and (launched) what the function wrote in *how. */
static int hipd_launch_attrs(struct sseq *s, uint64_t m, const char *fn, uint64_t out, uint32_t gx,
	const struct sseq_launch_attrs *attrs, struct hipd_launchinfo *how, char *msg, size_t size)
{
	const struct sseq_launch shape = {.grid = {gx, 1, 1}, .block = {64, 1, 1}};
	const struct sseq_arg args[] = {SSEQ_INOUT(out)};
	uint64_t tag = 0;
	int r;

	memset(how, 0xff, sizeof(*how));
	ck_assert_int_eq(sseq_copy_h2d(s, out, 0, how, sizeof(*how), NULL), 0);
	ck_assert_int_eq(sseq_execute_function_attrs(s, m, fn, args, 1, &shape, attrs, &tag), 0);
	r = sseq_wait(s, tag);
	snprintf(msg, size, "%s", r ? sseq_last_error_message(s) : "");
	ck_assert_int_eq(sseq_copy_d2h(s, out, 0, how, sizeof(*how), NULL), 0);
	ck_assert_int_eq(sseq_sync(s), 0);
	return r;
}

/* Cooperative launches and thread-block clusters (fake CUDA: a function that writes how
 * it was launched). Each goes through its own launch call and is seen there; what the
 * device cannot do is refused NOT_SUPPORTED, a shape that does not fit INVALID_ARGUMENT,
 * each naming why. $SSEQ_FAKE_CUDA_CC and $SSEQ_FAKE_CUDA_COOPERATIVE reach the daemon's
 * fake device through its environment. */
START_TEST(test_daemon_cooperative_and_cluster_launches)
{
	static const char text[] = "@FAKE-MODULE@\n"
				   "function launchinfo 8 behavior=launchinfo\n"
				   "function coop_small 8 behavior=launchinfo blocks_per_sm=4\n";
	const struct sseq_launch_attrs coop = {.size = sizeof(coop), .cooperative = 1};
	const struct sseq_launch_attrs cl2 = {.size = sizeof(cl2), .cluster = {2}};
	const struct sseq_launch_attrs cl9 = {.size = sizeof(cl9), .cluster = {9, 1, 1}};
	const struct sseq_launch_attrs both = {
		.size = sizeof(both), .cooperative = 1, .cluster = {2, 1, 1}};
	/* A caller's older struct (only .size): the attributes past it are not read. */
	const struct sseq_launch_attrs old = {.size = sizeof(size_t), .cooperative = 1};
	struct hipd_launchinfo how;
	char path[PATH_MAX], msg[512];
	struct hipd d;
	struct sseq *s;
	uint64_t m, out;

	for (int pass = 0; pass < 2; pass++) {
		/* Pass 1: an sm_80 device without cooperative launches. */
		if (pass == 1) {
			setenv("SSEQ_FAKE_CUDA_CC", "80", 1);
			setenv("SSEQ_FAKE_CUDA_COOPERATIVE", "0", 1);
		}
		hipd_start(&d, (const char *const[]){"--audit", "--verify", NULL});
		unsetenv("SSEQ_FAKE_CUDA_CC");
		unsetenv("SSEQ_FAKE_CUDA_COOPERATIVE");
		snprintf(path, sizeof(path), "%s/launch.txt", d.dir);
		hip_harness_write_file(path, text, sizeof(text) - 1);
		s = hipd_connect(&d, 0);
		ck_assert_msg(sseq_load_module(s, "launch.txt", &m) == 0, "%s",
			sseq_last_error_message(s));
		ck_assert_int_eq(sseq_alloc(s, 256, "out", &out), 0);

		/* A plain launch: neither path. */
		ck_assert_int_eq(
			hipd_launch_attrs(s, m, "launchinfo", out, 4, NULL, &how, msg, sizeof(msg)),
			0);
		ck_assert_uint_eq(how.cooperative, 0);
		ck_assert_uint_eq(how.cluster[0], 0);
		ck_assert_uint_eq(how.grid[0], 4);
		ck_assert_uint_eq(how.block[0], 64);
		ck_assert_int_eq(
			hipd_launch_attrs(s, m, "launchinfo", out, 4, &old, &how, msg, sizeof(msg)),
			0);
		ck_assert_uint_eq(how.cooperative, 0);
		if (pass == 1) {
			ck_assert_int_eq(hipd_launch_attrs(s, m, "launchinfo", out, 4, &coop, &how,
						 msg, sizeof(msg)),
				-SSEQ_ERR_NOT_SUPPORTED);
			ck_assert_msg(strstr(msg,
					      "cooperative launches are not supported by "
					      "this device"),
				"%s", msg);
			ck_assert_int_eq(hipd_launch_attrs(s, m, "launchinfo", out, 4, &cl2, &how,
						 msg, sizeof(msg)),
				-SSEQ_ERR_NOT_SUPPORTED);
			ck_assert_msg(strstr(msg, "compute capability 9.0") && strstr(msg, "sm_80"),
				"%s", msg);
			ck_assert_uint_eq(how.cluster[0], 0xffffffffu); /* not launched */
			sseq_close(s);
			hipd_stop(&d);
			continue;
		}
		/* Cooperative: through cudaLaunchCooperativeKernel. */
		ck_assert_int_eq(hipd_launch_attrs(
					 s, m, "launchinfo", out, 8, &coop, &how, msg, sizeof(msg)),
			0);
		ck_assert_uint_eq(how.cooperative, 1);
		ck_assert_uint_eq(how.cluster[0], 0);
		ck_assert_uint_eq(how.grid[0], 8);
		/* coop_small: 4 blocks a multiprocessor, 132 of them: 528 fit, 529 do not. */
		ck_assert_int_eq(hipd_launch_attrs(s, m, "coop_small", out, 528, &coop, &how, msg,
					 sizeof(msg)),
			0);
		ck_assert_uint_eq(how.cooperative, 1);
		ck_assert_uint_eq(how.grid[0], 528);
		ck_assert_int_eq(hipd_launch_attrs(s, m, "coop_small", out, 529, &coop, &how, msg,
					 sizeof(msg)),
			-SSEQ_ERR_INVALID_ARGUMENT);
		ck_assert_msg(strstr(msg, "cooperative grid of 529 blocks is over the 528") &&
				strstr(msg, "4 per multiprocessor") &&
				strstr(msg, "132 multiprocessors"),
			"%s", msg);
		ck_assert_uint_eq(how.grid[0], 0xffffffffu); /* not launched */
		/* Clusters of 2: through cudaLaunchKernelExC's cluster attribute. */
		ck_assert_int_eq(
			hipd_launch_attrs(s, m, "launchinfo", out, 4, &cl2, &how, msg, sizeof(msg)),
			0);
		ck_assert_uint_eq(how.cooperative, 0);
		ck_assert_uint_eq(how.cluster[0], 2);
		ck_assert_uint_eq(how.cluster[1], 1);
		ck_assert_uint_eq(how.cluster[2], 1);
		ck_assert_uint_eq(how.grid[0], 4);
		ck_assert_int_eq(
			hipd_launch_attrs(s, m, "launchinfo", out, 5, &cl2, &how, msg, sizeof(msg)),
			-SSEQ_ERR_INVALID_ARGUMENT);
		ck_assert_msg(
			strstr(msg, "grid_x 5 is not a multiple of the cluster's x 2"), "%s", msg);
		ck_assert_int_eq(hipd_launch_attrs(
					 s, m, "launchinfo", out, 18, &cl9, &how, msg, sizeof(msg)),
			-SSEQ_ERR_INVALID_ARGUMENT);
		ck_assert_msg(
			strstr(msg, "cluster of 9 blocks") && strstr(msg, "limit of 8"), "%s", msg);
		ck_assert_int_eq(hipd_launch_attrs(
					 s, m, "launchinfo", out, 4, &both, &how, msg, sizeof(msg)),
			-SSEQ_ERR_NOT_SUPPORTED);
		ck_assert_msg(
			strstr(msg, "cooperative launch of thread-block clusters"), "%s", msg);
		ck_assert_uint_eq(how.grid[0], 0xffffffffu);
		sseq_close(s);
		hipd_stop(&d);
	}
}
END_TEST

struct prepare_arg {
	struct sseq *s;
	atomic_int result; /* 1 until sseq_prepare_staging returned */
};

static void *prepare_thread(void *arg)
{
	struct prepare_arg *p = arg;

	atomic_store(&p->result, sseq_prepare_staging(p->s));
	return NULL;
}

/* sseq_prepare_staging returns once the daemon has pinned the arena (its pin thread, off
 * the loop: another client is served meanwhile), so the first copy waits for nothing;
 * then the arena is used as is. The fake holds the pin while the gate file is missing
 * (so the fake only). */
START_TEST(test_daemon_prepare_staging_answers_once_pinned)
{
	/* Without the small-copy pool, which would leave the arena unpinned. */
	const char *argv[] = {"--log-level", "warning", "--small-copy-pool", "0", NULL};
	struct prepare_arg p = {.result = 1};
	char gate[64];
	struct hipd d;
	struct sseq *other;
	struct sseq_stats st;
	pthread_t t;
	uint64_t buf, frames;
	float *host;

	snprintf(gate, sizeof(gate), "/tmp/sseq-prepare-gate.%d", (int)getpid());
	unlink(gate);
	setenv("SSEQ_FAKE_PIN_GATE", gate, 1);
	hipd_start(&d, argv);
	unsetenv("SSEQ_FAKE_PIN_GATE");
	p.s = hipd_connect(&d, 1 << 20);
	other = hipd_connect(&d, 1 << 20);
	ck_assert_int_eq(pthread_create(&t, NULL, prepare_thread, &p), 0);
	/* The pin is held: no answer, while the other client's requests are answered. */
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(sseq_alloc(other, 64, "other", &buf), 0);
		ck_assert_int_eq(sseq_free(other, buf), 0);
		usleep(10000);
	}
	ck_assert_int_eq(atomic_load(&p.result), 1);
	close(open(gate, O_CREAT | O_WRONLY, 0600));
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(atomic_load(&p.result), 0);
	hipd_stats(p.s, &st);
	ck_assert_uint_eq(st.arenas_pinned, 1); /* without the pool, pinned as it registered */
	ck_assert_uint_eq(st.small_copies, 0);
	/* The arena is there: a second call and a host allocation register none (the
	 * daemon gets no frame from them; the second stats query is the one frame). */
	hipd_stats(p.s, &st);
	frames = st.frames_in;
	ck_assert_int_eq(sseq_prepare_staging(p.s), 0);
	ck_assert_int_eq(sseq_host_alloc(p.s, 4096, (void **)&host), 0);
	hipd_stats(p.s, &st);
	ck_assert_uint_eq(st.frames_in, frames + 1);
	ck_assert_int_eq(sseq_host_free(p.s, host), 0);
	sseq_close(other);
	sseq_close(p.s);
	unlink(gate);
	hipd_stop(&d);
}
END_TEST

/* With the small-copy pool (sseqd's default), a worker's arena needs no pin: its
 * registration is answered at once and its short copies go through the pool, while any
 * pin would wait for a gate that is shut (and the fake fails a copy from memory not
 * pinned). Pinning stalls the GPU's other work: a pytest worker's first test paid for it
 * and held up the others' tests. A copy longer than a slot pins the arena then. Fake only
 * (its gate). */
START_TEST(test_daemon_short_copies_need_no_pin)
{
	enum { N = 256, LONG = 256 << 10 };
	/* One loop: its pool is pinned before the socket exists. Loops 1.. pin theirs after
	 * (main.c makes them once loop 0 listens), and a gate shut at the socket's appearing
	 * held their pins for the fake runtime's 60 s. */
	const char *argv[] = {"--log-level", "warning", "--loops", "1", NULL};
	struct prepare_arg p = {.result = 1};
	char gate[64];
	struct hipd d;
	pthread_t t;
	uint64_t buf;
	float back[N];
	unsigned char *in, *out;
	struct sseq_stats st;

	snprintf(gate, sizeof(gate), "/tmp/sseq-pool-gate.%d", (int)getpid());
	close(open(gate, O_CREAT | O_WRONLY, 0600)); /* open while sseqd pins its pool */
	setenv("SSEQ_FAKE_PIN_GATE", gate, 1);
	hipd_start(&d, argv);
	unsetenv("SSEQ_FAKE_PIN_GATE");
	unlink(gate); /* shut: a pin from now on waits */
	p.s = hipd_connect(&d, 1 << 20);
	ck_assert_int_eq(pthread_create(&t, NULL, prepare_thread, &p), 0);
	for (int i = 0; i < 300 && atomic_load(&p.result) == 1; i++)
		usleep(10000);
	ck_assert_msg(atomic_load(&p.result) == 0, "sseq_prepare_staging waited for a pin");
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	for (int round = 0; round < 20; round++) {
		ck_assert_int_eq(sseq_alloc(p.s, N * 4, "short", &buf), 0);
		ck_assert_int_eq(sseq_execute(p.s, "fill",
					 (struct sseq_arg[]){SSEQ_OUT(buf), SSEQ_F32((float)round),
						 SSEQ_U64(N)},
					 3, NULL, NULL),
			0);
		ck_assert_int_eq(sseq_copy_d2h(p.s, buf, 0, back, N * 4, NULL), 0);
		ck_assert_msg(sseq_sync(p.s) == 0, "%s", sseq_last_error_message(p.s));
		for (int i = 0; i < N; i++)
			ck_assert_msg(
				back[i] == (float)round, "round %d [%d] %g", round, i, back[i]);
		ck_assert_int_eq(sseq_free(p.s, buf), 0);
	}
	/* sseqctl stats says so: every download through the pool, no arena pinned. */
	hipd_stats(p.s, &st);
	ck_assert_uint_eq(st.small_copies, 20);
	ck_assert_uint_eq(st.small_copies_unpooled, 0);
	ck_assert_uint_eq(st.arenas_pinned, 0);
	/* A long copy through the arena pins it: the gate opens for that. */
	close(open(gate, O_CREAT | O_WRONLY, 0600));
	ck_assert_int_eq(sseq_host_alloc(p.s, LONG, (void **)&in), 0);
	ck_assert_int_eq(sseq_host_alloc(p.s, LONG, (void **)&out), 0);
	for (int i = 0; i < LONG; i++)
		in[i] = (unsigned char)(i * 13 + 1);
	ck_assert_int_eq(sseq_alloc(p.s, LONG, "long", &buf), 0);
	ck_assert_int_eq(sseq_copy_h2d(p.s, buf, 0, in, LONG, NULL), 0);
	ck_assert_int_eq(sseq_copy_d2h(p.s, buf, 0, out, LONG, NULL), 0);
	ck_assert_msg(sseq_sync(p.s) == 0, "%s", sseq_last_error_message(p.s));
	ck_assert_int_eq(memcmp(in, out, LONG), 0);
	hipd_stats(p.s, &st);
	ck_assert_uint_eq(st.small_copies, 20);
	ck_assert_uint_eq(st.arenas_pinned, 1);
	ck_assert_int_eq(sseq_free(p.s, buf), 0);
	sseq_close(p.s);
	unlink(gate);
	hipd_stop(&d);
}
END_TEST

/* Read-backs from several clients at once through several loops (--loops 3), each loop
 * with its own backend instance, submit threads and watcher on the one context: every
 * client gets its own bytes back, every time, and the small-copy counters are every
 * loop's. */
struct readback_arg {
	const struct hipd *d;
	int id, rounds;
	char err[160];
};

static void *readback_client(void *arg)
{
	enum { N = 256 };
	struct readback_arg *a = arg;
	struct sseq *s = hipd_connect(a->d, 1 << 20);
	float back[N];
	uint64_t buf;

	for (int round = 0; round < a->rounds && !a->err[0]; round++) {
		const float want = (float)(a->id * 1000 + round);

		if (sseq_alloc(s, N * 4, "rb", &buf) ||
			sseq_execute(s, "fill",
				(struct sseq_arg[]){SSEQ_OUT(buf), SSEQ_F32(want), SSEQ_U64(N)}, 3,
				NULL, NULL) ||
			sseq_copy_d2h(s, buf, 0, back, N * 4, NULL) || sseq_sync(s) ||
			sseq_free(s, buf)) {
			snprintf(a->err, sizeof(a->err), "client %d round %d: %s", a->id, round,
				sseq_last_error_message(s));
			break;
		}
		for (int i = 0; i < N; i++)
			if (back[i] != want) {
				snprintf(a->err, sizeof(a->err),
					"client %d round %d [%d]: %g, not %g", a->id, round, i,
					back[i], want);
				break;
			}
	}
	sseq_close(s);
	return NULL;
}

START_TEST(test_daemon_read_backs_through_several_loops)
{
	enum { CLIENTS = 6 };
	const char *argv[] = {"--log-level", "warning", "--loops", "3", NULL};
	struct readback_arg a[CLIENTS];
	pthread_t t[CLIENTS];
	struct sseq_stats st;
	struct sseq *s;
	struct hipd d;

	hipd_start(&d, argv);
	for (int i = 0; i < CLIENTS; i++) {
		a[i] = (struct readback_arg){.d = &d, .id = i, .rounds = 60};
		ck_assert_int_eq(pthread_create(&t[i], NULL, readback_client, &a[i]), 0);
	}
	for (int i = 0; i < CLIENTS; i++) {
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
		ck_assert_msg(!a[i].err[0], "%s", a[i].err);
	}
	s = hipd_connect(&d, 1 << 20);
	hipd_stats(s, &st);
	ck_assert_uint_eq(st.small_copies, CLIENTS * 60);
	sseq_close(s);
	hipd_stop(&d);
}
END_TEST

static Suite *hip_daemon_suite(void)
{
	Suite *s = suite_create("hip-daemon");
	TCase *daemon = tcase_create("daemon");

	/* sseqd takes a few seconds to open the GPU and a few more to drain. */
	tcase_set_timeout(daemon, 120);
	if (hip_harness_fake_cuda())
		printf("test-hip-daemon: fake CUDA runtime: user code object test skipped\n");
	else
		tcase_add_test(daemon, test_daemon_loads_and_runs_a_user_module);
	tcase_add_test(daemon, test_daemon_passes_narrow_scalars_structs_and_slices_by_their_bytes);
	tcase_add_test(daemon, test_daemon_audit_catches_the_injected_legacy_window);
	if (hip_harness_fake_cuda())
		tcase_add_test(daemon, test_daemon_module_global_is_sequenced_like_a_buffer);
	if (hip_harness_fake_cuda())
		tcase_add_test(daemon, test_daemon_cooperative_and_cluster_launches);
	if (hip_harness_fake_cuda())
		tcase_add_test(daemon, test_daemon_prepare_staging_answers_once_pinned);
	if (hip_harness_fake_cuda())
		tcase_add_test(daemon, test_daemon_short_copies_need_no_pin);
	tcase_add_test(daemon, test_daemon_read_backs_through_several_loops);
	suite_add_tcase(s, daemon);
	return s;
}

int main(void)
{
	if (!hip_harness_gpu_present()) {
		printf("test-hip-daemon: no GPU: skipped\n");
		return 77;
	}
	return hipd_run_suite(hip_daemon_suite());
}
