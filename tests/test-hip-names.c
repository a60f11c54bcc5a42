/* Integration: module functions by name (mangled, demangled signature, unique short
 * name), their listing and attributes, dynamic shared memory past 48 KiB and the launch
 * limits, through sseqd --backend hip on the fake CUDA runtime, whose fake user modules
 * (text files) name functions as nvcc would; and the sim refusing the new questions.
 * Skips (77) on a real GPU: the fake module is no code object there. */
#include <check.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sseq/sseq.h>

#include "hipd-harness.h"

#define MODULE_NAME "names.fatbin"
#define SIG_REDUCE "void reduce<256>(float const*, float*, int)"
#define SIG_SCALE_F "scale(float*, int, float)"
#define SIG_SCALE_D "scale(double*, int, double)"

/* A template and two overloads, as nvcc names them; echo writes each parameter after the
 * first at its offset into the memory the first points to, so a test sees which ran. */
static const char fake_module[] =
	"@FAKE-MODULE@\n"
	"function _Z6reduceILi256EEvPKfPfi 8 8 4 maxthreads=256 regs=32 shared=1024 "
	"const=16 local=8 ptx=86 binary=90\n"
	"function _Z5scalePfif 8 4 4 behavior=echo regs=16 ptx=90 binary=90\n"
	"function _Z5scalePdid 8 4 8 behavior=echo regs=20\n";

/* sseqd --backend `backend` with the fake module in its --module-dir. */
static void named_start(struct hipd *d, const char *backend)
{
	char mod[PATH_MAX];

	snprintf(d->dir, sizeof(d->dir), "/tmp/sseq-names.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(d->dir));
	snprintf(mod, sizeof(mod), "%s/%s", d->dir, MODULE_NAME);
	hip_harness_write_file(mod, fake_module, strlen(fake_module));
	snprintf(d->sock, sizeof(d->sock), "%s/sock", d->dir);
	hipd_spawn(d, backend, NULL);
}

/* Connected to a fresh hip daemon with the module loaded. */
static struct sseq *named_open(struct hipd *d, uint64_t *module)
{
	struct sseq_connect_options o = {.size = sizeof(o), .client_name = "test-hip-names"};
	struct sseq *s = NULL;

	named_start(d, "hip");
	ck_assert_int_eq(sseq_connect(d->sock, &o, &s), 0);
	ck_assert_msg(sseq_load_module(s, MODULE_NAME, module) == 0, "load: %s",
		sseq_last_error_message(s));
	return s;
}

static const struct sseq_launch one = {.grid = {1, 1, 1}, .block = {32, 1, 1}};

/* Launch `name` (as sseq_execute_function takes it) and wait: its status, message in msg. */
static int named_run(struct sseq *s, uint64_t module, const char *name, const struct sseq_arg *args,
	size_t nargs, const struct sseq_launch *shape, char *msg, size_t size)
{
	uint64_t tag = 0;
	int r = sseq_execute_function(s, module, name, args, nargs, shape, &tag);

	if (r == 0)
		r = sseq_wait(s, tag);
	snprintf(msg, size, "%s", r ? sseq_last_error_message(s) : "");
	return r;
}

/* Which overload of scale ran on x: 'f', 'd', or 0 (neither wrote). */
static char scale_ran(struct sseq *s, uint64_t x)
{
	char back[24];
	int32_t i;
	float f;
	double dv;

	ck_assert_int_eq(sseq_copy_d2h(s, x, 0, back, sizeof(back), NULL), 0);
	ck_assert_int_eq(sseq_sync(s), 0);
	memcpy(&i, back + 8, 4);
	memcpy(&f, back + 12, 4);
	memcpy(&dv, back + 16, 8);
	if (i == 7 && dv == 0.25)
		return 'd';
	if (i == 7 && f == 2.5f)
		return 'f';
	return 0;
}

static uint64_t zeroed(struct sseq *s)
{
	const char zero[24] = {0};
	uint64_t x;

	ck_assert_int_eq(sseq_alloc(s, sizeof(zero), "x", &x), 0);
	ck_assert_int_eq(sseq_copy_h2d(s, x, 0, zero, sizeof(zero), NULL), 0);
	return x;
}

START_TEST(test_functions_launch_by_mangled_name_and_by_signature)
{
	struct hipd d;
	uint64_t m, x, out;
	char msg[256];
	struct sseq *s = named_open(&d, &m);

	x = zeroed(s);
	ck_assert_msg(named_run(s, m, "_Z5scalePfif",
			      (struct sseq_arg[]){SSEQ_INOUT(x), SSEQ_I32(7), SSEQ_F32(2.5)}, 3,
			      &one, msg, sizeof(msg)) == 0,
		"%s", msg);
	ck_assert_int_eq(scale_ran(s, x), 'f');
	sseq_free(s, x);
	/* The other overload by its signature, spelled with other spaces. */
	x = zeroed(s);
	ck_assert_msg(named_run(s, m, "scale( double *,int,  double )",
			      (struct sseq_arg[]){SSEQ_INOUT(x), SSEQ_I32(7), SSEQ_F64(0.25)}, 3,
			      &one, msg, sizeof(msg)) == 0,
		"%s", msg);
	ck_assert_int_eq(scale_ran(s, x), 'd');
	/* The template by the signature __cxa_demangle prints, by its short names too. */
	ck_assert_int_eq(sseq_alloc(s, 4096, "out", &out), 0);
	const struct sseq_arg rargs[] = {SSEQ_IN(x), SSEQ_INOUT(out), SSEQ_I32(3)};
	ck_assert_msg(
		named_run(s, m, SIG_REDUCE, rargs, 3, &one, msg, sizeof(msg)) == 0, "%s", msg);
	/* const before the type, as people write it. */
	ck_assert_msg(named_run(s, m, "void reduce<256>(const float *, float*, int)", rargs, 3,
			      &one, msg, sizeof(msg)) == 0,
		"%s", msg);
	ck_assert_msg(
		named_run(s, m, "reduce<256>", rargs, 3, &one, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_msg(named_run(s, m, "reduce", rargs, 3, &one, msg, sizeof(msg)) == 0, "%s", msg);
	sseq_close(s);
	hipd_stop(&d);
}
END_TEST

START_TEST(test_functions_ambiguous_or_unknown_names_are_refused_naming_candidates)
{
	struct hipd d;
	uint64_t m, x;
	char msg[256];
	struct sseq *s = named_open(&d, &m);
	const struct sseq_arg args[] = {SSEQ_INOUT(0), SSEQ_I32(7), SSEQ_F32(2.5)};

	x = zeroed(s);
	struct sseq_arg a[3] = {args[0], args[1], args[2]};
	a[0] = SSEQ_INOUT(x);
	ck_assert_int_eq(
		named_run(s, m, "scale", a, 3, &one, msg, sizeof(msg)), -SSEQ_ERR_UNKNOWN_KERNEL);
	ck_assert_msg(
		strstr(msg, SIG_SCALE_F) && strstr(msg, SIG_SCALE_D) && strstr(msg, "2 functions"),
		"%s", msg);
	ck_assert_int_eq(named_run(s, m, "scale(float*, int)", a, 3, &one, msg, sizeof(msg)),
		-SSEQ_ERR_UNKNOWN_KERNEL);
	ck_assert_msg(strstr(msg, "has no function 'scale(float*, int)'") &&
			strstr(msg, "its functions:") && strstr(msg, SIG_REDUCE),
		"%s", msg);
	ck_assert_int_eq(named_run(s, m, "_Z5scalePcic", a, 3, &one, msg, sizeof(msg)),
		-SSEQ_ERR_UNKNOWN_KERNEL);
	/* Nothing ran. */
	ck_assert_int_eq(scale_ran(s, x), 0);
	sseq_close(s);
	hipd_stop(&d);
}
END_TEST

START_TEST(test_functions_list_with_demangled_names_and_declared_attributes)
{
	struct hipd d;
	uint64_t m;
	struct sseq_function_info fns[4], one_fn;
	size_t count = 0;
	bool seen[3] = {false};
	struct sseq *s = named_open(&d, &m);

	ck_assert_msg(
		sseq_module_functions(s, m, fns, 4, &count) == 0, "%s", sseq_last_error_message(s));
	ck_assert_uint_eq(count, 3);
	for (size_t i = 0; i < count; i++) {
		if (strcmp(fns[i].name, "_Z6reduceILi256EEvPKfPfi") == 0) {
			seen[0] = true;
			ck_assert_str_eq(fns[i].demangled, SIG_REDUCE);
			ck_assert_uint_eq(fns[i].max_threads_per_block, 256);
			ck_assert_uint_eq(fns[i].num_regs, 32);
			ck_assert_uint_eq(fns[i].shared_size_bytes, 1024);
			ck_assert_uint_eq(fns[i].const_size_bytes, 16);
			ck_assert_uint_eq(fns[i].local_size_bytes, 8);
			ck_assert_uint_eq(fns[i].ptx_version, 86);
			ck_assert_uint_eq(fns[i].binary_version, 90);
			/* 48 KiB less its static shared memory. */
			ck_assert_uint_eq(fns[i].max_dynamic_shared_size_bytes, 49152 - 1024);
		} else if (strcmp(fns[i].name, "_Z5scalePfif") == 0) {
			seen[1] = true;
			ck_assert_str_eq(fns[i].demangled, SIG_SCALE_F);
			ck_assert_uint_eq(fns[i].num_regs, 16);
			ck_assert_uint_eq(fns[i].max_threads_per_block, 1024);
		} else if (strcmp(fns[i].name, "_Z5scalePdid") == 0) {
			seen[2] = true;
			ck_assert_str_eq(fns[i].demangled, SIG_SCALE_D);
			ck_assert_uint_eq(fns[i].num_regs, 20);
		}
	}
	ck_assert(seen[0] && seen[1] && seen[2]);
	/* Less room than functions: the count still says how many. */
	ck_assert_int_eq(sseq_module_functions(s, m, fns, 1, &count), 0);
	ck_assert_uint_eq(count, 3);
	/* One function, named as Execute names it. */
	ck_assert_int_eq(sseq_function_attributes(s, m, "reduce<256>", &one_fn), 0);
	ck_assert_str_eq(one_fn.name, "_Z6reduceILi256EEvPKfPfi");
	ck_assert_str_eq(one_fn.demangled, SIG_REDUCE);
	ck_assert_uint_eq(one_fn.num_regs, 32);
	ck_assert_int_eq(sseq_function_attributes(s, m, "_Z5scalePdid", &one_fn), 0);
	ck_assert_str_eq(one_fn.demangled, SIG_SCALE_D);
	ck_assert_int_eq(
		sseq_function_attributes(s, m, "scale", &one_fn), -SSEQ_ERR_UNKNOWN_KERNEL);
	ck_assert_msg(
		strstr(sseq_last_error_message(s), SIG_SCALE_F), "%s", sseq_last_error_message(s));
	ck_assert_int_eq(
		sseq_module_functions(s, m + 1000, fns, 4, &count), -SSEQ_ERR_UNKNOWN_HANDLE);
	sseq_close(s);
	hipd_stop(&d);
}
END_TEST

START_TEST(test_functions_shared_memory_past_48k_raises_the_maximum_within_the_device)
{
	struct hipd d;
	uint64_t m, x;
	char msg[256];
	struct sseq_function_info fi;
	struct sseq_device_limits lim;
	struct sseq *s = named_open(&d, &m);
	struct sseq_launch big = one;

	ck_assert_int_eq(sseq_device_limits(s, &lim), 0);
	ck_assert_uint_eq(lim.shared_optin, 227 << 10);
	ck_assert_uint_eq(lim.shared_per_block, 48 << 10);
	x = zeroed(s);
	const struct sseq_arg a[] = {SSEQ_INOUT(x), SSEQ_I32(7), SSEQ_F32(2.5)};
	big.shared_mem = 64 << 10;
	ck_assert_msg(
		named_run(s, m, "_Z5scalePfif", a, 3, &big, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_int_eq(scale_ran(s, x), 'f');
	ck_assert_int_eq(sseq_function_attributes(s, m, "_Z5scalePfif", &fi), 0);
	ck_assert_uint_eq(fi.max_dynamic_shared_size_bytes, 64 << 10);
	/* The whole opt-in is allowed; a byte more is not. */
	big.shared_mem = 227 << 10;
	ck_assert_msg(named_run(s, m, SIG_SCALE_F, a, 3, &big, msg, sizeof(msg)) == 0, "%s", msg);
	big.shared_mem = (227 << 10) + 1;
	ck_assert_int_eq(named_run(s, m, SIG_SCALE_F, a, 3, &big, msg, sizeof(msg)),
		-SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(msg, "shared_mem 232449") && strstr(msg, "232448"), "%s", msg);
	/* reduce has 1 KiB of static shared memory: its limit is 1 KiB less. */
	const struct sseq_arg r[] = {SSEQ_IN(x), SSEQ_INOUT(x), SSEQ_I32(1)};
	big.shared_mem = 227 << 10;
	ck_assert_int_eq(named_run(s, m, SIG_REDUCE, r, 3, &big, msg, sizeof(msg)),
		-SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(msg, "231424") && strstr(msg, "1024 static"), "%s", msg);
	sseq_close(s);
	hipd_stop(&d);
}
END_TEST

START_TEST(test_functions_launch_shapes_beyond_the_limits_are_refused_naming_the_dimension)
{
	struct hipd d;
	uint64_t m, x;
	char msg[256];
	struct sseq_device_limits lim;
	struct sseq *s = named_open(&d, &m);
	struct sseq_launch shape;

	ck_assert_int_eq(sseq_device_limits(s, &lim), 0);
	ck_assert_uint_eq(lim.max_threads_per_block, 1024);
	ck_assert_uint_eq(lim.max_block[2], 64);
	ck_assert_uint_eq(lim.max_grid[1], 65535);
	x = zeroed(s);
	const struct sseq_arg a[] = {SSEQ_INOUT(x), SSEQ_I32(7), SSEQ_F32(2.5)};
	shape = (struct sseq_launch){.grid = {1, 1, 1}, .block = {1025, 1, 1}};
	ck_assert_int_eq(named_run(s, m, "_Z5scalePfif", a, 3, &shape, msg, sizeof(msg)),
		-SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(msg, "block_x 1025") && strstr(msg, "1024"), "%s", msg);
	shape = (struct sseq_launch){.grid = {1, 1, 1}, .block = {32, 32, 2}};
	ck_assert_int_eq(named_run(s, m, "_Z5scalePfif", a, 3, &shape, msg, sizeof(msg)),
		-SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(msg, "2048 threads") && strstr(msg, "1024"), "%s", msg);
	shape = (struct sseq_launch){.grid = {1, 1, 1}, .block = {1, 1, 65}};
	ck_assert_int_eq(named_run(s, m, "_Z5scalePfif", a, 3, &shape, msg, sizeof(msg)),
		-SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(msg, "block_z 65") && strstr(msg, "limit of 64"), "%s", msg);
	shape = (struct sseq_launch){.grid = {1, 65536, 1}, .block = {32, 1, 1}};
	ck_assert_int_eq(named_run(s, m, "_Z5scalePfif", a, 3, &shape, msg, sizeof(msg)),
		-SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(msg, "grid_y 65536") && strstr(msg, "limit of 65535"), "%s", msg);
	/* The function's own limit (its maxthreads=256) is below the device's. */
	const struct sseq_arg r[] = {SSEQ_IN(x), SSEQ_INOUT(x), SSEQ_I32(1)};
	shape = (struct sseq_launch){.grid = {1, 1, 1}, .block = {512, 1, 1}};
	ck_assert_int_eq(named_run(s, m, "reduce", r, 3, &shape, msg, sizeof(msg)),
		-SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(msg, "512 threads") && strstr(msg, "limit of 256"), "%s", msg);
	/* 3-D within the limits runs. */
	shape = (struct sseq_launch){.grid = {2, 3, 4}, .block = {8, 8, 4}};
	ck_assert_msg(
		named_run(s, m, "_Z5scalePfif", a, 3, &shape, msg, sizeof(msg)) == 0, "%s", msg);
	ck_assert_int_eq(scale_ran(s, x), 'f');
	sseq_close(s);
	hipd_stop(&d);
}
END_TEST

/* The fake itself, as CUDA behaves: a launch over the function's current maximum fails
 * until cudaFuncSetAttribute raises it, and that refuses past the device's opt-in. */
START_TEST(test_fake_refuses_shared_memory_over_the_functions_maximum)
{
	char dir[] = "/tmp/sseq-fakemod.XXXXXX", path[64];
	cudaLibrary_t lib;
	cudaKernel_t k;
	cudaStream_t st;
	void *dev;
	int32_t i = 1;
	float f = 1;
	void *params[] = {&dev, &i, &f};
	const dim3 g = {1, 1, 1}, b = {1, 1, 1};

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/m", dir);
	hip_harness_write_file(path, fake_module, strlen(fake_module));
	ck_assert_int_eq(cudaLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0), 0);
	ck_assert_int_eq(cudaLibraryGetKernel(&k, lib, "_Z5scalePfif"), 0);
	ck_assert_int_eq(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), 0);
	ck_assert_int_eq(cudaMalloc(&dev, 64), 0);
	ck_assert_int_eq(cudaLaunchKernel((const void *)k, g, b, params, 49152, st), 0);
	ck_assert_int_eq(
		cudaLaunchKernel((const void *)k, g, b, params, 65536, st), cudaErrorInvalidValue);
	ck_assert_int_eq(cudaFuncSetAttribute((const void *)k,
				 cudaFuncAttributeMaxDynamicSharedMemorySize, 65536),
		0);
	ck_assert_int_eq(cudaLaunchKernel((const void *)k, g, b, params, 65536, st), 0);
	ck_assert_int_eq(cudaFuncSetAttribute((const void *)k,
				 cudaFuncAttributeMaxDynamicSharedMemorySize, (227 << 10) + 1),
		cudaErrorInvalidValue);
	ck_assert_int_eq(cudaStreamSynchronize(st), 0);
	ck_assert_int_eq(cudaFree(dev), 0);
	ck_assert_int_eq(cudaStreamDestroy(st), 0);
	ck_assert_int_eq(cudaLibraryUnload(lib), 0);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* What `sseqctl ARGS` on d's socket printed (stdout), into out; its exit status. */
static int named_ctl(const struct hipd *d, const char *args, char *out, size_t size)
{
	char dir[PATH_MAX], cmd[PATH_MAX + 256];
	size_t n = 0;
	FILE *p;

	hip_harness_exe_dir(dir, sizeof(dir));
	snprintf(cmd, sizeof(cmd), "'%s/../client/ctl/sseqctl' --socket '%s' %s", dir, d->sock,
		args);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (n + 1 < size && !feof(p) && !ferror(p))
		n += fread(out + n, 1, size - n - 1, p);
	out[n] = 0;
	return pclose(p);
}

START_TEST(test_sseqctl_modules_lists_functions_as_a_table_and_valid_json)
{
	static char out[1 << 16];
	struct hipd d;
	uint64_t m;
	char path[PATH_MAX], cmd[PATH_MAX + 512];
	struct sseq *s = named_open(&d, &m);
	FILE *f;

	ck_assert_int_eq(named_ctl(&d, "modules", out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "FUNCTION") && strstr(out, MODULE_NAME) &&
			strstr(out, SIG_REDUCE) && strstr(out, SIG_SCALE_D) &&
			strstr(out, "_Z5scalePfif"),
		"%s", out);
	/* reduce's row: 256 threads, 32 registers, 1 KiB static. */
	ck_assert_msg(strstr(out, "256    32"), "%s", out);
	ck_assert_int_eq(named_ctl(&d, "--json modules", out, sizeof(out)), 0);
	snprintf(path, sizeof(path), "%s/modules.json", d.dir);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(out, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		"/usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); "
		"fs = {f[\"name\"]: f for m in d[\"modules\"] for f in m[\"functions\"]}; "
		"r = fs[\"_Z6reduceILi256EEvPKfPfi\"]; "
		"assert r[\"demangled\"] == \"%s\", r; "
		"assert r[\"num_regs\"] == 32 and r[\"shared_size_bytes\"] == 1024, r; "
		"assert len(fs) == 3 and d[\"modules\"][0][\"path\"] == \"%s\"' '%s'",
		SIG_REDUCE, MODULE_NAME, path);
	ck_assert_msg(system(cmd) == 0, "%s", out);
	sseq_close(s);
	/* Its session gone, the module is too. */
	for (int i = 0; i < 100; i++) {
		ck_assert_int_eq(named_ctl(&d, "modules", out, sizeof(out)), 0);
		if (strstr(out, "no modules"))
			break;
		usleep(20000);
	}
	ck_assert_msg(strstr(out, "no modules"), "%s", out);
	hipd_stop(&d);
}
END_TEST

/* The sim runs no modules: asking about one says so. */
START_TEST(test_sim_refuses_module_questions_naming_the_backend)
{
	struct hipd d;
	struct sseq_connect_options o = {.size = sizeof(o), .client_name = "test-hip-names"};
	struct sseq_function_info fi;
	struct sseq_device_limits lim;
	struct sseq *s = NULL;
	size_t count = 1;
	uint64_t m = 0;

	named_start(&d, "sim");
	ck_assert_int_eq(sseq_connect(d.sock, &o, &s), 0);
	ck_assert_int_eq(sseq_load_module(s, MODULE_NAME, &m), -SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(sseq_module_functions(s, 1, NULL, 0, &count), -SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(sseq_last_error_message(s), "a backend that loads code modules"), "%s",
		sseq_last_error_message(s));
	ck_assert_uint_eq(count, 0);
	ck_assert_int_eq(sseq_function_attributes(s, 1, "f", &fi), -SSEQ_ERR_INVALID_ARGUMENT);
	ck_assert_int_eq(sseq_device_limits(s, &lim), 0);
	ck_assert_uint_eq(lim.max_threads_per_block, 0);
	sseq_close(s);
	hipd_stop(&d);
}
END_TEST

static Suite *names_suite(void)
{
	Suite *s = suite_create("hip-names");
	TCase *tc = tcase_create("names");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_functions_launch_by_mangled_name_and_by_signature);
	tcase_add_test(tc, test_functions_ambiguous_or_unknown_names_are_refused_naming_candidates);
	tcase_add_test(tc, test_functions_list_with_demangled_names_and_declared_attributes);
	tcase_add_test(
		tc, test_functions_shared_memory_past_48k_raises_the_maximum_within_the_device);
	tcase_add_test(tc,
		test_functions_launch_shapes_beyond_the_limits_are_refused_naming_the_dimension);
	tcase_add_test(tc, test_fake_refuses_shared_memory_over_the_functions_maximum);
	tcase_add_test(tc, test_sseqctl_modules_lists_functions_as_a_table_and_valid_json);
	tcase_add_test(tc, test_sim_refuses_module_questions_naming_the_backend);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (!hip_harness_fake_cuda()) {
		printf("test-hip-names: needs the fake CUDA runtime (-Dfake_cuda=true): skipped\n");
		return 77;
	}
	return hipd_run_suite(names_suite());
}
