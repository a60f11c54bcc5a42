/* A CPU stand-in for the CUDA runtime calls hip-nvidia.h maps HIP onto, so CI
 * without a GPU runs test-hip through the hip backend's own threads, pool and error
 * flow (-Dfake_cuda=true). Each stream is a worker thread running its queue in order
 * with small random delays; events complete when their stream reaches the record; the
 * built-in kernels run their CPU versions from kernels/. Device memory is host memory.
 * A fake user module (a text file, see fake_module_parse) stands for a user code object
 * whose functions the tests launch through LoadModule. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels.h"

/* The image cudaLibraryLoadFromFile accepts: nvcc's fatbin (its magic) or the
 * placeholder a -Dfake_cuda build writes. Either stands for the built-in kernels. */
#define FAKE_FATBIN_MAGIC 0xba55ed50u
#define FAKE_IMAGE_TEXT "sseq-fakecuda"
/* What a launch of more elements than this stands for: a kernel running off the end of
 * its buffers, which on a GPU is an illegal address, sticky for the process. */
#define FAKE_FAULT_ELEMENTS (1ull << 32)
#define FAKE_MAX_BLOCK 1024u
/* sm_90's launch limits: block dimensions, grid dimensions, shared memory per block by
 * default and at most (opt-in, cudaFuncAttributeMaxDynamicSharedMemorySize). */
#define FAKE_MAX_BLOCK_Z 64u
#define FAKE_MAX_GRID_X 2147483647u
#define FAKE_MAX_GRID_YZ 65535u
#define FAKE_SHARED_DEFAULT 49152u
#define FAKE_SHARED_OPTIN (227u << 10)
#define FAKE_MEMORY (64ull << 30)
/* Co-residency, for cooperative launches: multiprocessors, threads and shared memory one
 * of them holds, and its most blocks (sm_90's). */
#define FAKE_SMS 132u
#define FAKE_SM_THREADS 2048u
#define FAKE_SM_SHARED (228u << 10)
#define FAKE_SM_BLOCKS 32u
/* The portable thread-block cluster size. */
#define FAKE_MAX_CLUSTER 8u

/* A device fault: every later call returns it, as CUDA's context does. */
static _Atomic int fake_sticky = cudaSuccess;

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;

struct fake_range {
	struct fake_range *next;
	char *addr;
	size_t size;
};

/* Under fake_mu: device allocations and registered host ranges. */
static struct fake_range *fake_allocs, *fake_registered;
static uint64_t fake_allocated;

struct CUevent_st {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	uint64_t recorded; /* generation of the latest cudaEventRecord */
	uint64_t reached; /* latest generation its stream has run */
	uint64_t reached_ns; /* host time the stream ran it */
	bool timing;
};

enum fake_op_type { FAKE_COPY, FAKE_KERNEL, FAKE_RECORD, FAKE_WAIT, FAKE_MARK };

/* ---- fake user modules ----
 *
 * A text file whose first line is "@FAKE-MODULE@", then one line per function:
 *
 *	function NAME SIZE[:ALIGN]... [key=value]...
 *
 * the size in bytes of each parameter in order (its alignment: ALIGN, else the size's
 * natural one, its lowest set bit up to 16), then attributes. Blank lines and lines
 * starting with '#' are skipped; unknown keys are kept for fake_fn_attr and ignored
 * here. The one key read here is behavior=echo: a launch copies the bytes of every
 * parameter after the first, each at its offset in the parameter space (parameter 0,
 * the pointer, at [0, 8)), into the memory parameter 0 points to, at the same offset;
 * the bytes between and before are left as they were. behavior=read_global:G copies
 * the bytes of the module's global G into the memory parameter 0 points to (a kernel
 * reading a constant). Without behavior the launch does nothing.
 *
 *	global NAME SIZE
 *
 * declares a global (a __constant__ or __device__ variable) of SIZE bytes, zeroed at
 * load, in host memory the library owns (fake device memory is host memory):
 * cudaLibraryGetGlobal hands it out. */
#define FAKE_MODULE_MAGIC "@FAKE-MODULE@"
#define FAKE_FN_NAME 128
#define FAKE_FN_PARAMS KERNEL_MAX_ARGS
#define FAKE_FN_ATTRS 16
#define FAKE_PARAM_SPACE 32764 /* CUDA 12.1+ on Volta and later */

enum fake_behavior { FAKE_NOTHING, FAKE_ECHO, FAKE_READ_GLOBAL, FAKE_LAUNCHINFO };

/* What a behavior=launchinfo launch writes through its first parameter: how it was
 * launched, so a test sees the launch went the cooperative or the cluster path. */
struct fake_launchinfo {
	uint32_t cooperative;
	uint32_t cluster[3];
	uint32_t grid[3];
	uint32_t block[3];
};

struct fake_fn;

struct CUkern_st {
	const struct kernel_desc *k; /* a built-in kernel, or NULL */
	const struct fake_fn *fn; /* a fake module's function, or NULL */
};

struct fake_fn {
	char name[FAKE_FN_NAME];
	unsigned nparams;
	uint32_t size[FAKE_FN_PARAMS], offset[FAKE_FN_PARAMS];
	uint32_t param_bytes; /* the end of the last parameter */
	unsigned nattrs;
	struct {
		char key[32], value[64];
	} attrs[FAKE_FN_ATTRS];
	enum fake_behavior behavior;
	const struct fake_global *global; /* read_global's, resolved once the module is read */
	struct CUkern_st handle; /* what cudaLibraryGetKernel hands out */
	/* cudaFuncSetAttribute's maximum dynamic shared memory; 0: the maxdyn= attribute. */
	_Atomic uint32_t max_dynamic_shared;
};

#define FAKE_GLOBALS 16

struct fake_global {
	char name[FAKE_FN_NAME];
	size_t size;
	void *mem;
};

struct CUlib_st {
	unsigned nfns; /* 0: the built-in image */
	struct fake_fn *fns;
	unsigned nglobals;
	struct fake_global globals[FAKE_GLOBALS];
};

/* The fake module function k stands for, NULL for a built-in kernel. */
static const struct fake_fn *fake_fn_of(cudaKernel_t k)
{
	return k ? k->fn : NULL;
}

/* An attribute's value as the file spells it, NULL when the line has none. */
static const char *fake_fn_attr(const struct fake_fn *fn, const char *key)
{
	for (unsigned i = 0; i < fn->nattrs; i++)
		if (strcmp(fn->attrs[i].key, key) == 0)
			return fn->attrs[i].value;
	return NULL;
}

static uint32_t fake_natural_align(uint32_t size)
{
	uint32_t a = size & -size;

	return a > 16 ? 16 : a;
}

/* One "SIZE[:ALIGN]" into fn's next parameter, laid out after the previous one. */
static int fake_fn_param(struct fake_fn *fn, const char *tok)
{
	char *end;
	unsigned long size = strtoul(tok, &end, 10), align;
	uint32_t off;

	if (end == tok || size == 0 || size > FAKE_PARAM_SPACE || fn->nparams == FAKE_FN_PARAMS)
		return -EINVAL;
	align = fake_natural_align((uint32_t)size);
	if (*end == ':') {
		tok = end + 1;
		align = strtoul(tok, &end, 10);
		if (end == tok || !align || align > 4096 || (align & (align - 1)))
			return -EINVAL;
	}
	if (*end)
		return -EINVAL;
	off = (fn->param_bytes + (uint32_t)align - 1) & ~((uint32_t)align - 1);
	if (off + size > FAKE_PARAM_SPACE)
		return -EINVAL;
	fn->size[fn->nparams] = (uint32_t)size;
	fn->offset[fn->nparams++] = off;
	fn->param_bytes = off + (uint32_t)size;
	return 0;
}

static int fake_fn_keyval(struct fake_fn *fn, const char *tok, const char *eq)
{
	const size_t klen = (size_t)(eq - tok);

	if (!klen || klen >= sizeof(fn->attrs[0].key) ||
		strlen(eq + 1) >= sizeof(fn->attrs[0].value) || fn->nattrs == FAKE_FN_ATTRS)
		return -EINVAL;
	memcpy(fn->attrs[fn->nattrs].key, tok, klen);
	fn->attrs[fn->nattrs].key[klen] = 0;
	strcpy(fn->attrs[fn->nattrs].value, eq + 1);
	fn->nattrs++;
	return 0;
}

/* "function NAME SIZE... key=value..." (already split at blanks) into fn. */
static int fake_fn_parse(struct fake_fn *fn, char *line)
{
	char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
	const char *behavior;
	int r = 0;

	memset(fn, 0, sizeof(*fn));
	if (!tok || strcmp(tok, "function") != 0)
		return -EINVAL;
	tok = strtok_r(NULL, " \t\r\n", &save);
	if (!tok || strlen(tok) >= sizeof(fn->name))
		return -EINVAL;
	strcpy(fn->name, tok);
	while (r == 0 && (tok = strtok_r(NULL, " \t\r\n", &save))) {
		const char *eq = strchr(tok, '=');

		if (eq)
			r = fake_fn_keyval(fn, tok, eq);
		else if (fn->nattrs) /* sizes come before attributes */
			r = -EINVAL;
		else
			r = fake_fn_param(fn, tok);
	}
	if (r == 0 && (behavior = fake_fn_attr(fn, "behavior"))) {
		if (strcmp(behavior, "echo") == 0)
			fn->behavior = FAKE_ECHO;
		else if (strcmp(behavior, "launchinfo") == 0)
			fn->behavior = FAKE_LAUNCHINFO;
		else if (strncmp(behavior, "read_global:", 12) == 0 && behavior[12])
			fn->behavior = FAKE_READ_GLOBAL;
		else
			r = -EINVAL;
	}
	if (r == 0 && fn->behavior != FAKE_NOTHING && (fn->nparams == 0 || fn->size[0] != 8))
		r = -EINVAL; /* echo and read_global write through their first parameter */
	fn->handle.fn = fn;
	return r;
}

static const struct fake_global *fake_global_find(const struct CUlib_st *lib, const char *name)
{
	for (unsigned i = 0; i < lib->nglobals; i++)
		if (strcmp(lib->globals[i].name, name) == 0)
			return &lib->globals[i];
	return NULL;
}

/* "global NAME SIZE" into lib's next global. */
static int fake_global_parse(struct CUlib_st *lib, char *line)
{
	char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save), *name, *end;
	struct fake_global *g = &lib->globals[lib->nglobals];
	unsigned long size;

	name = tok ? strtok_r(NULL, " \t\r\n", &save) : NULL;
	tok = name ? strtok_r(NULL, " \t\r\n", &save) : NULL;
	if (!tok || strlen(name) >= sizeof(g->name) || lib->nglobals == FAKE_GLOBALS ||
		fake_global_find(lib, name) || strtok_r(NULL, " \t\r\n", &save))
		return -EINVAL;
	size = strtoul(tok, &end, 10);
	if (end == tok || *end || size == 0 || size > (1ul << 20))
		return -EINVAL;
	g->mem = calloc(1, size);
	if (!g->mem)
		return -ENOMEM;
	strcpy(g->name, name);
	g->size = size;
	lib->nglobals++;
	return 0;
}

/* The fake module in f (past its magic line) into *lib: 0, or -EINVAL for a line that
 * does not parse, a name twice or no function at all, -ENOMEM. */
static int fake_module_parse(FILE *f, struct CUlib_st *lib)
{
	char line[1024];
	int r = 0;

	while (r == 0 && fgets(line, sizeof(line), f)) {
		const char *p = line + strspn(line, " \t\r\n");
		struct fake_fn *fns;

		if (!*p || *p == '#')
			continue;
		if (!strchr(line, '\n') && !feof(f))
			return -EINVAL; /* longer than a line may be */
		if (strncmp(p, "global", 6) == 0 && (p[6] == ' ' || p[6] == '\t')) {
			r = fake_global_parse(lib, line);
			continue;
		}
		fns = realloc(lib->fns, (lib->nfns + 1) * sizeof(*fns));
		if (!fns)
			return -ENOMEM;
		lib->fns = fns;
		r = fake_fn_parse(&fns[lib->nfns], line);
		for (unsigned i = 0; r == 0 && i < lib->nfns; i++)
			if (strcmp(fns[i].name, fns[lib->nfns].name) == 0)
				r = -EINVAL;
		lib->nfns++;
	}
	if (r == 0 && lib->nfns == 0)
		r = -EINVAL;
	/* realloc moved the functions: their handles point at themselves again. */
	for (unsigned i = 0; i < lib->nfns; i++) {
		struct fake_fn *fn = &lib->fns[i];

		fn->handle.fn = fn;
		if (r == 0 && fn->behavior == FAKE_READ_GLOBAL) {
			fn->global = fake_global_find(lib, fake_fn_attr(fn, "behavior") + 12);
			if (!fn->global)
				r = -EINVAL;
		}
	}
	return r;
}

/* What an echo launch writes: parameters 1.. at their offsets from params[0]'s pointer. */
static void fake_echo(const struct fake_fn *fn, void *const *params)
{
	char *dst;

	if (fn->nparams == 0)
		return; /* no destination pointer to write through */
	memcpy(&dst, params[0], sizeof(dst));
	for (unsigned i = 1; i < fn->nparams; i++)
		memcpy(dst + fn->offset[i], params[i], fn->size[i]);
}

struct fake_op {
	struct fake_op *next;
	enum fake_op_type type;
	void *dst;
	const void *src;
	size_t len;
	struct CUevent_st *ev;
	uint64_t gen;
	const struct kernel_desc *k;
	struct karg args[KERNEL_MAX_ARGS];
	uint64_t elements;
	bool fault;
	/* A fake module function: its parameters' bytes, copied at launch as CUDA does,
	 * in `params` at their offsets. */
	const struct fake_fn *fn;
	char *params;
	struct fake_launchinfo how; /* for behavior=launchinfo */
};

struct CUstream_st {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct fake_op *head, *tail;
	uint64_t queued, ran; /* ops pushed, ops finished (for cudaStreamSynchronize) */
	bool stop;
	unsigned seed;
	pthread_t thread;
	struct CUstream_st *next; /* all streams, under fake_mu */
};

static struct CUstream_st *fake_streams;

static struct CUkern_st fake_kernels[64];
static unsigned fake_nkernels;
static pthread_once_t fake_kernels_once = PTHREAD_ONCE_INIT;

/* Tests read it to relax what depends on a real GPU's timing. */
__attribute__((constructor)) static void fake_announce(void)
{
	setenv("SSEQ_FAKE_CUDA", "1", 1);
}

static uint64_t fake_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static cudaError_t fake_error(void)
{
	return (cudaError_t)atomic_load(&fake_sticky);
}

static void fake_reach(struct CUevent_st *ev, uint64_t gen)
{
	pthread_mutex_lock(&ev->mu);
	if (gen > ev->reached) {
		ev->reached = gen;
		ev->reached_ns = fake_now_ns();
	}
	pthread_cond_broadcast(&ev->cond);
	pthread_mutex_unlock(&ev->mu);
}

static void fake_wait_reached(struct CUevent_st *ev, uint64_t gen)
{
	pthread_mutex_lock(&ev->mu);
	while (ev->reached < gen)
		pthread_cond_wait(&ev->cond, &ev->mu);
	pthread_mutex_unlock(&ev->mu);
}

/* The generation of the event's latest record as of now (0: never recorded). */
static uint64_t fake_recorded(struct CUevent_st *ev)
{
	uint64_t gen;

	pthread_mutex_lock(&ev->mu);
	gen = ev->recorded;
	pthread_mutex_unlock(&ev->mu);
	return gen;
}

/* Whether the event's latest record has run (never recorded: no); *ns gets when. */
static bool fake_reached_at(struct CUevent_st *ev, uint64_t *ns)
{
	bool ready;

	pthread_mutex_lock(&ev->mu);
	ready = ev->recorded && ev->reached >= ev->recorded;
	*ns = ev->reached_ns;
	pthread_mutex_unlock(&ev->mu);
	return ready;
}

/* Copies and kernels touch device memory: a race there is the device's (the audit's and
 * the sim's business), not the host's, and the tests make such races on purpose. */
#if defined(__SANITIZE_THREAD__)
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
#define FAKE_DEVICE_ACCESS_BEGIN() __tsan_ignore_thread_begin()
#define FAKE_DEVICE_ACCESS_END() __tsan_ignore_thread_end()
#else
#define FAKE_DEVICE_ACCESS_BEGIN() ((void)0)
#define FAKE_DEVICE_ACCESS_END() ((void)0)
#endif

static void fake_run(struct CUstream_st *s, struct fake_op *o)
{
	/* Copies and kernels take a while, and not always the same while: the orders a
	 * missing wait allows show up. */
	if (o->type == FAKE_COPY || o->type == FAKE_KERNEL) {
		unsigned r = (unsigned)rand_r(&s->seed) % 100;

		if (r < 30)
			usleep(r * 10);
	}
	switch (o->type) {
	case FAKE_COPY:
		if (!fake_error()) {
			FAKE_DEVICE_ACCESS_BEGIN();
			memcpy(o->dst, o->src, o->len);
			FAKE_DEVICE_ACCESS_END();
		}
		break;
	case FAKE_KERNEL:
		if (o->fault) {
			int ok = cudaSuccess;

			atomic_compare_exchange_strong(&fake_sticky, &ok, cudaErrorIllegalAddress);
		} else if (!fake_error() && o->k) {
			FAKE_DEVICE_ACCESS_BEGIN();
			o->k->cpu(o->args, o->elements);
			FAKE_DEVICE_ACCESS_END();
		} else if (!fake_error() && o->fn->behavior == FAKE_ECHO) {
			void *params[FAKE_FN_PARAMS];

			for (unsigned i = 0; i < o->fn->nparams; i++)
				params[i] = o->params + o->fn->offset[i];
			FAKE_DEVICE_ACCESS_BEGIN();
			fake_echo(o->fn, params);
			FAKE_DEVICE_ACCESS_END();
		} else if (!fake_error() && o->fn->behavior == FAKE_READ_GLOBAL) {
			char *dst;

			memcpy(&dst, o->params + o->fn->offset[0], sizeof(dst));
			FAKE_DEVICE_ACCESS_BEGIN();
			memcpy(dst, o->fn->global->mem, o->fn->global->size);
			FAKE_DEVICE_ACCESS_END();
		} else if (!fake_error() && o->fn->behavior == FAKE_LAUNCHINFO) {
			char *dst;

			memcpy(&dst, o->params, sizeof(dst));
			FAKE_DEVICE_ACCESS_BEGIN();
			memcpy(dst, &o->how, sizeof(o->how));
			FAKE_DEVICE_ACCESS_END();
		}
		break;
	case FAKE_RECORD:
		fake_reach(o->ev, o->gen);
		break;
	case FAKE_WAIT:
		fake_wait_reached(o->ev, o->gen);
		break;
	case FAKE_MARK:
		break;
	}
}

static void *fake_worker(void *arg)
{
	struct CUstream_st *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		struct fake_op *o;

		while (!s->head && !s->stop)
			pthread_cond_wait(&s->cond, &s->mu);
		if (!s->head)
			break;
		o = s->head;
		s->head = o->next;
		if (!s->head)
			s->tail = NULL;
		pthread_mutex_unlock(&s->mu);
		fake_run(s, o);
		free(o->params);
		free(o);
		pthread_mutex_lock(&s->mu);
		s->ran++;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static cudaError_t fake_push(cudaStream_t s, struct fake_op *o)
{
	if (!s) {
		free(o->params);
		free(o);
		return cudaErrorInvalidResourceHandle;
	}
	pthread_mutex_lock(&s->mu);
	o->next = NULL;
	if (s->tail)
		s->tail->next = o;
	else
		s->head = o;
	s->tail = o;
	s->queued++;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
	return cudaSuccess;
}

/* A zeroed stream or event for a create call; NULL with *e saying why when the device
 * has failed or memory ran out. */
static void *fake_object_new(size_t size, cudaError_t *e)
{
	void *p = NULL;

	*e = fake_error();
	if (*e == cudaSuccess && !(p = calloc(1, size)))
		*e = cudaErrorMemoryAllocation;
	return p;
}

static struct fake_op *fake_op_new(enum fake_op_type type)
{
	struct fake_op *o = calloc(1, sizeof(*o));

	if (o)
		o->type = type;
	return o;
}

static void fake_stream_drain(struct CUstream_st *s)
{
	pthread_mutex_lock(&s->mu);
	{
		const uint64_t want = s->queued;

		while (s->ran < want)
			pthread_cond_wait(&s->cond, &s->mu);
	}
	pthread_mutex_unlock(&s->mu);
}

/* ---- errors and the device ---- */

const char *cudaGetErrorName(cudaError_t e)
{
	switch (e) {
#define FAKE_NAME(x)                                                                               \
	case x:                                                                                    \
		return #x;
		FAKE_NAME(cudaSuccess)
		FAKE_NAME(cudaErrorInvalidValue)
		FAKE_NAME(cudaErrorMemoryAllocation)
		FAKE_NAME(cudaErrorInvalidConfiguration)
		FAKE_NAME(cudaErrorInvalidDevicePointer)
		FAKE_NAME(cudaErrorInvalidResourceHandle)
		FAKE_NAME(cudaErrorNotReady)
		FAKE_NAME(cudaErrorFileNotFound)
		FAKE_NAME(cudaErrorSymbolNotFound)
		FAKE_NAME(cudaErrorInvalidKernelImage)
		FAKE_NAME(cudaErrorIllegalAddress)
		FAKE_NAME(cudaErrorHostMemoryAlreadyRegistered)
		FAKE_NAME(cudaErrorHostMemoryNotRegistered)
		FAKE_NAME(cudaErrorInvalidDevice)
		FAKE_NAME(cudaErrorInvalidDeviceFunction)
		FAKE_NAME(cudaErrorNotSupported)
		FAKE_NAME(cudaErrorCooperativeLaunchTooLarge)
		FAKE_NAME(cudaErrorInvalidClusterSize)
#undef FAKE_NAME
	default:
		return "cudaErrorUnknown";
	}
}

const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaSuccess ? "no error" : "fake CUDA runtime error";
}

cudaError_t cudaGetDeviceCount(int *count)
{
	*count = 1;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
	return device == 0 ? fake_error() : cudaErrorInvalidDevice;
}

/* The fake device's compute capability, major * 10 + minor: $SSEQ_FAKE_CUDA_CC ("80"
 * for an A100's), else 90. Below 90 it has no thread-block clusters. */
static int fake_cc(void)
{
	const char *v = getenv("SSEQ_FAKE_CUDA_CC");
	int cc = v && *v ? atoi(v) : 90;

	return cc >= 10 && cc < 1000 ? cc : 90;
}

/* Whether it launches cooperatively: $SSEQ_FAKE_CUDA_COOPERATIVE=0 says no. */
static bool fake_cooperative(void)
{
	const char *v = getenv("SSEQ_FAKE_CUDA_COOPERATIVE");

	return !v || strcmp(v, "0") != 0;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
	if (device != 0)
		return cudaErrorInvalidDevice;
	memset(prop, 0, sizeof(*prop));
	snprintf(prop->name, sizeof(prop->name), "fake CUDA device (CPU threads)");
	prop->major = fake_cc() / 10;
	prop->minor = fake_cc() % 10;
	prop->multiProcessorCount = FAKE_SMS;
	prop->cooperativeLaunch = fake_cooperative();
	prop->clusterLaunch = prop->major >= 9;
	prop->totalGlobalMem = FAKE_MEMORY;
	prop->maxThreadsPerBlock = FAKE_MAX_BLOCK;
	prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = FAKE_MAX_BLOCK;
	prop->maxThreadsDim[2] = FAKE_MAX_BLOCK_Z;
	prop->maxGridSize[0] = FAKE_MAX_GRID_X;
	prop->maxGridSize[1] = prop->maxGridSize[2] = FAKE_MAX_GRID_YZ;
	prop->sharedMemPerBlock = FAKE_SHARED_DEFAULT;
	prop->sharedMemPerBlockOptin = FAKE_SHARED_OPTIN;
	return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
	pthread_mutex_lock(&fake_mu);
	for (struct CUstream_st *s = fake_streams; s; s = s->next)
		fake_stream_drain(s);
	pthread_mutex_unlock(&fake_mu);
	return fake_error();
}

/* As CUDA's: the context goes, with every allocation and host registration, and so does
 * its sticky error; the next call makes a fresh one. The caller has destroyed its
 * streams and events first (the hip backend's reset does). */
cudaError_t cudaDeviceReset(void)
{
	pthread_mutex_lock(&fake_mu);
	for (struct CUstream_st *s = fake_streams; s; s = s->next)
		fake_stream_drain(s);
	while (fake_allocs) {
		struct fake_range *r = fake_allocs;

		fake_allocs = r->next;
		free(r->addr);
		free(r);
	}
	fake_allocated = 0;
	while (fake_registered) {
		struct fake_range *r = fake_registered;

		fake_registered = r->next;
		free(r);
	}
	atomic_store(&fake_sticky, cudaSuccess);
	pthread_mutex_unlock(&fake_mu);
	return cudaSuccess;
}

/* ---- streams ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *out, unsigned int flags)
{
	static unsigned seeds;
	cudaError_t e;
	struct CUstream_st *s = fake_object_new(sizeof(*s), &e);

	if (!s)
		return e;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cond, NULL);
	pthread_mutex_lock(&fake_mu);
	s->seed = ++seeds;
	if (pthread_create(&s->thread, NULL, fake_worker, s) != 0) {
		pthread_mutex_unlock(&fake_mu);
		pthread_cond_destroy(&s->cond);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return cudaErrorMemoryAllocation;
	}
	s->next = fake_streams;
	fake_streams = s;
	pthread_mutex_unlock(&fake_mu);
	*out = s;
	return cudaSuccess;
}

/* As CUDA: returns at once, the work queued so far still runs (here: before the
 * worker is joined). */
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
	pthread_mutex_lock(&fake_mu);
	for (struct CUstream_st **p = &fake_streams; *p; p = &(*p)->next) {
		if (*p == s) {
			*p = s->next;
			break;
		}
	}
	pthread_mutex_unlock(&fake_mu);
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->mu);
	free(s);
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	if (!s)
		return cudaErrorInvalidResourceHandle;
	fake_stream_drain(s);
	return fake_error();
}

/* Whether everything queued on s so far has run; never blocks. */
cudaError_t cudaStreamQuery(cudaStream_t s)
{
	bool done;
	cudaError_t e = fake_error();

	if (!s)
		return cudaErrorInvalidResourceHandle;
	if (e != cudaSuccess)
		return e;
	pthread_mutex_lock(&s->mu);
	done = s->ran >= s->queued;
	pthread_mutex_unlock(&s->mu);
	return done ? cudaSuccess : cudaErrorNotReady;
}

/* Waits for the event's latest record as of this call; an event never recorded is no
 * wait at all, as in CUDA. */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
	struct fake_op *o;
	uint64_t gen;
	cudaError_t e = fake_error();

	if (e != cudaSuccess)
		return e;
	gen = fake_recorded(ev);
	if (gen == 0)
		return cudaSuccess;
	o = fake_op_new(FAKE_WAIT);
	if (!o)
		return cudaErrorMemoryAllocation;
	o->ev = ev;
	o->gen = gen;
	return fake_push(s, o);
}

/* ---- events ---- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *out, unsigned int flags)
{
	cudaError_t e;
	struct CUevent_st *ev = fake_object_new(sizeof(*ev), &e);

	if (!ev)
		return e;
	pthread_mutex_init(&ev->mu, NULL);
	pthread_cond_init(&ev->cond, NULL);
	ev->timing = !(flags & cudaEventDisableTiming);
	*out = ev;
	return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
	if (!ev)
		return cudaErrorInvalidResourceHandle;
	/* CUDA defers the release until a pending record ran; so does this. */
	fake_wait_reached(ev, fake_recorded(ev));
	pthread_cond_destroy(&ev->cond);
	pthread_mutex_destroy(&ev->mu);
	free(ev);
	return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
	struct fake_op *o;
	cudaError_t e = fake_error();

	if (e != cudaSuccess)
		return e;
	o = fake_op_new(FAKE_RECORD);
	if (!o)
		return cudaErrorMemoryAllocation;
	o->ev = ev;
	pthread_mutex_lock(&ev->mu);
	o->gen = ++ev->recorded;
	pthread_mutex_unlock(&ev->mu);
	return fake_push(s, o);
}

/* Both ask about the latest record as of the call; never recorded is complete. */
cudaError_t cudaEventQuery(cudaEvent_t ev)
{
	bool done;
	cudaError_t e = fake_error();

	if (e != cudaSuccess)
		return e;
	pthread_mutex_lock(&ev->mu);
	done = ev->reached >= ev->recorded;
	pthread_mutex_unlock(&ev->mu);
	return done ? cudaSuccess : cudaErrorNotReady;
}

/* As CUDA's default scheduling (cudaDeviceScheduleAuto, which spins while the process
 * has no more contexts than the machine has cores): the caller spins on the event until
 * its record ran, holding a core, unless cudaSetDeviceFlags asked for blocking sync. */
static atomic_uint fake_device_flags;

cudaError_t cudaSetDeviceFlags(unsigned int flags)
{
	atomic_store(&fake_device_flags, flags);
	return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
	const uint64_t gen = fake_recorded(ev);
	cudaError_t e = fake_error();

	if (e != cudaSuccess)
		return e;
	if (atomic_load(&fake_device_flags) & cudaDeviceScheduleBlockingSync) {
		fake_wait_reached(ev, gen);
		return fake_error();
	}
	for (;;) {
		bool reached;

		pthread_mutex_lock(&ev->mu);
		reached = ev->reached >= gen;
		pthread_mutex_unlock(&ev->mu);
		if (reached || fake_error() != cudaSuccess)
			break;
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
	return fake_error();
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
	uint64_t t0 = 0, t1 = 0;
	bool ready, timed = start->timing && end->timing;
	cudaError_t e = fake_error();

	if (e != cudaSuccess)
		return e;
	ready = fake_reached_at(start, &t0);
	ready = fake_reached_at(end, &t1) && ready;
	if (!timed)
		return cudaErrorInvalidResourceHandle;
	if (!ready)
		return cudaErrorNotReady;
	*ms = (float)((double)((int64_t)t1 - (int64_t)t0) / 1e6);
	return cudaSuccess;
}

/* ---- memory ---- */

static bool fake_range_add(struct fake_range **list, void *addr, size_t size)
{
	struct fake_range *r = malloc(sizeof(*r));

	if (!r)
		return false;
	r->addr = addr;
	r->size = size;
	r->next = *list;
	*list = r;
	return true;
}

static struct fake_range *fake_range_take(struct fake_range **list, void *addr)
{
	for (struct fake_range **p = list; *p; p = &(*p)->next) {
		if ((*p)->addr == addr) {
			struct fake_range *r = *p;

			*p = r->next;
			return r;
		}
	}
	return NULL;
}

cudaError_t cudaMalloc(void **out, size_t size)
{
	const size_t rounded = (size + 255) & ~(size_t)255;
	void *p;
	cudaError_t e = fake_error();

	if (e != cudaSuccess)
		return e;
	pthread_mutex_lock(&fake_mu);
	if (size == 0 || fake_allocated + rounded > FAKE_MEMORY) {
		pthread_mutex_unlock(&fake_mu);
		return size ? cudaErrorMemoryAllocation : cudaErrorInvalidValue;
	}
	p = aligned_alloc(256, rounded);
	if (!p || !fake_range_add(&fake_allocs, p, rounded)) {
		pthread_mutex_unlock(&fake_mu);
		free(p);
		return cudaErrorMemoryAllocation;
	}
	fake_allocated += rounded;
	pthread_mutex_unlock(&fake_mu);
	/* Fresh device memory is not zero: a read before the write shows. */
	memset(p, 0xab, rounded);
	*out = p;
	return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
	struct fake_range *r;

	if (!p)
		return cudaSuccess;
	/* Frees wait for the device, as CUDA's do. */
	cudaDeviceSynchronize();
	pthread_mutex_lock(&fake_mu);
	r = fake_range_take(&fake_allocs, p);
	if (r)
		fake_allocated -= r->size;
	pthread_mutex_unlock(&fake_mu);
	if (!r)
		return cudaErrorInvalidDevicePointer;
	free(r->addr);
	free(r);
	return fake_error();
}

/* $SSEQ_FAKE_PIN_GATE=PATH, for tests of pinning: cudaHostRegister waits until PATH exists
 * (as a slow pin would take its time), and a copy from or to host memory that is not
 * registered fails (as the caller promised itself never to copy from pageable memory). */
static bool fake_pin_gated(void)
{
	const char *g = getenv("SSEQ_FAKE_PIN_GATE");

	return g && *g;
}

static bool fake_host_registered(const void *p, size_t size)
{
	bool in = false;

	pthread_mutex_lock(&fake_mu);
	for (struct fake_range *r = fake_registered; r && !in; r = r->next)
		in = (const char *)p >= r->addr && (const char *)p + size <= r->addr + r->size;
	pthread_mutex_unlock(&fake_mu);
	return in;
}

cudaError_t cudaMemcpyAsync(
	void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t s)
{
	struct fake_op *o;
	cudaError_t e = fake_error();

	if (e != cudaSuccess)
		return e;
	if (fake_pin_gated() && count &&
		((kind == cudaMemcpyHostToDevice && !fake_host_registered(src, count)) ||
			(kind == cudaMemcpyDeviceToHost && !fake_host_registered(dst, count))))
		return cudaErrorInvalidValue;
	/* Overlap is undefined in CUDA: the hip backend must never ask for it. */
	if ((const char *)src < (char *)dst + count && (char *)dst < (const char *)src + count) {
		fprintf(stderr, "fakecuda: overlapping cudaMemcpyAsync(%p, %p, %zu)\n", dst, src,
			count);
		abort();
	}
	if (count == 0)
		return cudaSuccess;
	o = fake_op_new(FAKE_COPY);
	if (!o)
		return cudaErrorMemoryAllocation;
	o->dst = dst;
	o->src = src;
	o->len = count;
	return fake_push(s, o);
}

cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags)
{
	cudaError_t e = fake_error();
	/* Read once: the file it names is what is waited for. */
	const char *gate = getenv("SSEQ_FAKE_PIN_GATE");

	for (int i = 0; gate && *gate && i < 60000; i++) {
		if (access(gate, F_OK) == 0)
			break;
		usleep(1000);
	}

	if (e != cudaSuccess)
		return e;
	pthread_mutex_lock(&fake_mu);
	for (struct fake_range *r = fake_registered; r; r = r->next) {
		if ((char *)p < r->addr + r->size && r->addr < (char *)p + size) {
			pthread_mutex_unlock(&fake_mu);
			return cudaErrorHostMemoryAlreadyRegistered;
		}
	}
	e = fake_range_add(&fake_registered, p, size) ? cudaSuccess : cudaErrorMemoryAllocation;
	pthread_mutex_unlock(&fake_mu);
	return e;
}

cudaError_t cudaHostUnregister(void *p)
{
	struct fake_range *r;

	pthread_mutex_lock(&fake_mu);
	r = fake_range_take(&fake_registered, p);
	pthread_mutex_unlock(&fake_mu);
	free(r);
	return r ? cudaSuccess : cudaErrorHostMemoryNotRegistered;
}

/* ---- the kernel library ---- */

static void fake_kernels_init(void)
{
	const struct kernel_desc *const *list = kernel_list();

	for (fake_nkernels = 0; list[fake_nkernels] && fake_nkernels < 64; fake_nkernels++)
		fake_kernels[fake_nkernels].k = list[fake_nkernels];
}

/* A library and what it holds: cudaLibraryUnload's work, and a failed load's. Ours, not
 * the runtime header's, so that a static analyzer sees the memory go. */
static void fake_lib_free(struct CUlib_st *lib)
{
	if (lib) {
		free(lib->fns);
		for (unsigned i = 0; i < lib->nglobals; i++)
			free(lib->globals[i].mem);
	}
	free(lib);
}

cudaError_t cudaLibraryLoadFromFile(cudaLibrary_t *out, const char *path, enum cudaJitOption *jit,
	void **jit_values, unsigned int njit, enum cudaLibraryOption *opt, void **opt_values,
	unsigned int nopt)
{
	char head[sizeof(FAKE_MODULE_MAGIC) + 1] = {0};
	struct CUlib_st *lib;
	uint32_t magic;
	cudaError_t e = cudaSuccess;
	FILE *f;

	f = fopen(path, "rb");
	if (!f)
		return cudaErrorFileNotFound;
	lib = calloc(1, sizeof(*lib));
	if (!lib) {
		e = cudaErrorMemoryAllocation;
	} else if (fgets(head, sizeof(head), f) && strcmp(head, FAKE_MODULE_MAGIC "\n") == 0) {
		int r = fake_module_parse(f, lib);

		if (r < 0)
			e = r == -ENOMEM ? cudaErrorMemoryAllocation : cudaErrorInvalidKernelImage;
	} else {
		memcpy(&magic, head, sizeof(magic));
		if (magic != FAKE_FATBIN_MAGIC &&
			strncmp(head, FAKE_IMAGE_TEXT, strlen(FAKE_IMAGE_TEXT)) != 0)
			e = cudaErrorInvalidKernelImage;
		pthread_once(&fake_kernels_once, fake_kernels_init);
	}
	fclose(f);
	if (e != cudaSuccess) {
		fake_lib_free(lib);
		return e;
	}
	*out = lib;
	return cudaSuccess;
}

cudaError_t cudaLibraryUnload(cudaLibrary_t lib)
{
	fake_lib_free(lib);
	return cudaSuccess;
}

cudaError_t cudaLibraryGetGlobal(void **dptr, size_t *bytes, cudaLibrary_t lib, const char *name)
{
	const struct fake_global *g = fake_global_find(lib, name);

	if (!g)
		return cudaErrorSymbolNotFound;
	*dptr = g->mem;
	*bytes = g->size;
	return cudaSuccess;
}

cudaError_t cudaLibraryGetKernelCount(unsigned int *count, cudaLibrary_t lib)
{
	*count = lib->nfns ? lib->nfns : fake_nkernels;
	return cudaSuccess;
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t *out, cudaLibrary_t lib, const char *name)
{
	for (unsigned i = 0; i < lib->nfns; i++) {
		if (strcmp(lib->fns[i].name, name) == 0) {
			*out = &lib->fns[i].handle;
			return cudaSuccess;
		}
	}
	if (!lib->nfns && strncmp(name, "sseq_", 5) == 0) {
		for (unsigned i = 0; i < fake_nkernels; i++) {
			if (strcmp(fake_kernels[i].k->name, name + 5) == 0) {
				*out = &fake_kernels[i];
				return cudaSuccess;
			}
		}
	}
	return cudaErrorSymbolNotFound;
}

/* From the module's sizes; the built-in kernels' layout (with their hidden arguments) is
 * not described here, as the daemon never asks. A function with paraminfo=no is not
 * described either: it stands for a platform that cannot say (HIP on AMD). */
cudaError_t cudaFuncGetParamInfo(const void *func, size_t index, size_t *offset, size_t *size)
{
	const struct fake_fn *fn = fake_fn_of((cudaKernel_t)func);

	if (!func)
		return cudaErrorInvalidResourceHandle;
	if (!fn || (fake_fn_attr(fn, "paraminfo") && !strcmp(fake_fn_attr(fn, "paraminfo"), "no")))
		return cudaErrorNotSupported;
	if (index >= fn->nparams)
		return cudaErrorInvalidValue;
	*offset = fn->offset[index];
	*size = fn->size[index];
	return cudaSuccess;
}

/* ---- a module's functions and their attributes ---- */

/* The fake module function k stands for, as cudaFuncSetAttribute may change it. */
static struct fake_fn *fake_fn_mutable(const struct CUkern_st *k)
{
	return k && k->fn ? (struct fake_fn *)((char *)k - offsetof(struct fake_fn, handle)) : NULL;
}

/* An unsigned attribute of the module's line ("regs=16"), else `otherwise`. */
static uint64_t fake_fn_number(const struct fake_fn *fn, const char *key, uint64_t otherwise)
{
	const char *v = fake_fn_attr(fn, key);

	return v ? strtoull(v, NULL, 10) : otherwise;
}

/* What a launch of k may use: set by cudaFuncSetAttribute, else maxdyn=, else 48 KiB less
 * its static shared memory; a built-in kernel uses none. */
static uint64_t fake_fn_max_dynamic_shared(const struct CUkern_st *k)
{
	const struct fake_fn *fn = fake_fn_mutable(k);
	uint32_t set;

	if (!fn)
		return 0;
	set = atomic_load(&fn->max_dynamic_shared);
	if (set)
		return set;
	return fake_fn_number(fn, "maxdyn", FAKE_SHARED_DEFAULT - fake_fn_number(fn, "shared", 0));
}

/* A fake module's functions; the built-in image's are its kernels. */
cudaError_t cudaLibraryEnumerateKernels(cudaKernel_t *kernels, unsigned int n, cudaLibrary_t lib)
{
	const unsigned have = lib->nfns ? lib->nfns : fake_nkernels;

	if (!kernels || n > have)
		return cudaErrorInvalidValue;
	for (unsigned i = 0; i < n; i++)
		kernels[i] = lib->nfns ? &lib->fns[i].handle : &fake_kernels[i];
	return cudaSuccess;
}

/* The built-in kernels' symbols, as kernels-gpu.cu names them. */
static char fake_symbols[64][80];
static pthread_once_t fake_symbols_once = PTHREAD_ONCE_INIT;

static void fake_symbols_init(void)
{
	for (unsigned i = 0; i < fake_nkernels; i++)
		snprintf(fake_symbols[i], sizeof(fake_symbols[i]), "sseq_%s",
			fake_kernels[i].k->name);
}

static const char *fake_kernel_symbol(const struct CUkern_st *k)
{
	if (k < fake_kernels || k >= fake_kernels + fake_nkernels)
		return NULL;
	pthread_once(&fake_symbols_once, fake_symbols_init);
	return fake_symbols[k - fake_kernels];
}

cudaError_t cudaFuncGetName(const char **name, const void *func)
{
	const struct CUkern_st *k = func;

	if (!k || !name)
		return cudaErrorInvalidValue;
	*name = k->fn ? k->fn->name : fake_kernel_symbol(k);
	return *name ? cudaSuccess : cudaErrorInvalidValue;
}

/* From the line's attributes: maxthreads= (1024), regs=, shared= (static), maxdyn=,
 * const=, local=, ptx=, binary=. */
cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
	const struct CUkern_st *k = func;
	const struct fake_fn *fn = k ? k->fn : NULL;

	if (!k || !attr)
		return cudaErrorInvalidValue;
	memset(attr, 0, sizeof(*attr));
	attr->maxThreadsPerBlock = FAKE_MAX_BLOCK;
	attr->maxDynamicSharedSizeBytes = (int)fake_fn_max_dynamic_shared(k);
	attr->ptxVersion = attr->binaryVersion = 90;
	if (!fn)
		return cudaSuccess;
	attr->maxThreadsPerBlock = (int)fake_fn_number(fn, "maxthreads", FAKE_MAX_BLOCK);
	attr->numRegs = (int)fake_fn_number(fn, "regs", 0);
	attr->sharedSizeBytes = fake_fn_number(fn, "shared", 0);
	attr->constSizeBytes = fake_fn_number(fn, "const", 0);
	attr->localSizeBytes = fake_fn_number(fn, "local", 0);
	attr->ptxVersion = (int)fake_fn_number(fn, "ptx", 90);
	attr->binaryVersion = (int)fake_fn_number(fn, "binary", 90);
	return cudaSuccess;
}

/* Only the maximum dynamic shared memory, refused as CUDA does past the device's
 * opt-in limit less the function's static shared memory. */
cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
	struct fake_fn *fn = fake_fn_mutable(func);

	if (!func || attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
		return cudaErrorInvalidValue;
	if (!fn)
		return cudaErrorInvalidDeviceFunction;
	if (value <= 0 || (uint64_t)value + fake_fn_number(fn, "shared", 0) > FAKE_SHARED_OPTIN)
		return cudaErrorInvalidValue;
	atomic_store(&fn->max_dynamic_shared, (uint32_t)value);
	return cudaSuccess;
}

/* The GPU argument layout (kernels-gpu.cu) back into the CPU one: the signature, then
 * `elements`, then spin's clock rate or conv2d's parameters, which must agree with what
 * the arguments say. A mismatch is a hip backend bug: abort loudly. */
static void fake_args(struct fake_op *o, const struct kernel_desc *k, void **params)
{
	for (unsigned i = 0; i < k->nargs; i++) {
		o->args[i].type = k->types[i];
		o->args[i].access = k->access[i];
		/* By value, as many bytes as the type takes (a buffer: its address). */
		memcpy(&o->args[i].v, params[i], karg_types[k->types[i]].size);
	}
	memcpy(&o->elements, params[k->nargs], sizeof(o->elements));
	if (strcmp(k->name, "spin") == 0) {
		uint64_t khz;

		memcpy(&khz, params[k->nargs + 1], sizeof(khz));
		if (khz != 1000000) {
			fprintf(stderr, "fakecuda: spin's clock rate %lu, not 1e6 kHz\n",
				(unsigned long)khz);
			abort();
		}
	} else if (strcmp(k->name, "conv2d") == 0) {
		struct kernel_conv2d want = {0}, got;

		memcpy(&got, params[k->nargs + 1], sizeof(got));
		kernel_conv2d_from_args(o->args, &want);
		if (kernel_conv2d_out_shape(&want, NULL) < 0 || memcmp(&got, &want, sizeof(got))) {
			fprintf(stderr, "fakecuda: conv2d's parameters disagree with its args\n");
			abort();
		}
	}
}

/* A fake module function's launch: its parameters' bytes copied now, as CUDA copies
 * them at the call. */
static cudaError_t fake_launch_fn(
	struct fake_op *o, const struct fake_fn *fn, void **params, cudaStream_t s)
{
	o->fn = fn;
	o->params = calloc(1, fn->param_bytes ? fn->param_bytes : 1);
	if (!o->params) {
		free(o);
		return cudaErrorMemoryAllocation;
	}
	for (unsigned i = 0; i < fn->nparams; i++)
		memcpy(o->params + fn->offset[i], params[i], fn->size[i]);
	return fake_push(s, o);
}

/* $SSEQ_FAKE_LAUNCH_US, for tests of who makes the calls: every launch call takes that
 * long before it returns, as one waiting for the runtime's lock does. */
static void fake_launch_delay(void)
{
	const char *v = getenv("SSEQ_FAKE_LAUNCH_US");
	const long us = v ? atol(v) : 0;

	if (us > 0)
		nanosleep(&(struct timespec){us / 1000000, us % 1000000 * 1000}, NULL);
}

/* A launch, plain, cooperative or in clusters; how is what a launchinfo function
 * writes. */
static cudaError_t fake_launch(const void *func, dim3 grid, dim3 block, void **params,
	size_t shared, cudaStream_t s, const struct fake_launchinfo *how)
{
	const struct CUkern_st *kern = func;
	const uint64_t threads = (uint64_t)block.x * block.y * block.z;
	struct fake_op *o;
	cudaError_t e = fake_error();

	fake_launch_delay();
	if (e != cudaSuccess)
		return e;
	if (!kern || (!kern->fn && (kern < fake_kernels || kern >= fake_kernels + fake_nkernels)))
		return cudaErrorInvalidResourceHandle;
	if (threads == 0 || threads > FAKE_MAX_BLOCK || !grid.x || !grid.y || !grid.z)
		return cudaErrorInvalidConfiguration;
	if (block.z > FAKE_MAX_BLOCK_Z || grid.y > FAKE_MAX_GRID_YZ || grid.z > FAKE_MAX_GRID_YZ ||
		grid.x > FAKE_MAX_GRID_X)
		return cudaErrorInvalidConfiguration;
	/* As CUDA: more dynamic shared memory than the function's maximum fails the launch. */
	if (shared > fake_fn_max_dynamic_shared(kern))
		return cudaErrorInvalidValue;
	o = fake_op_new(FAKE_KERNEL);
	if (!o)
		return cudaErrorMemoryAllocation;
	if (kern->fn) {
		o->how = *how;
		return fake_launch_fn(o, kern->fn, params, s);
	}
	o->k = kern->k;
	fake_args(o, kern->k, params);
	if ((uint64_t)grid.x * grid.y * grid.z * threads < o->elements) {
		fprintf(stderr, "fakecuda: %s: grid %ux%u of %lu threads misses elements %lu\n",
			kern->k->name, grid.x, grid.y, (unsigned long)threads,
			(unsigned long)o->elements);
		abort();
	}
	o->fault = o->elements > FAKE_FAULT_ELEMENTS;
	return fake_push(s, o);
}

cudaError_t cudaLaunchKernel(
	const void *func, dim3 grid, dim3 block, void **params, size_t shared, cudaStream_t s)
{
	const struct fake_launchinfo how = {
		0, {0, 0, 0}, {grid.x, grid.y, grid.z}, {block.x, block.y, block.z}};

	return fake_launch(func, grid, block, params, shared, s, &how);
}

/* From the function's blocks_per_sm= if it has one, else what threads, shared memory
 * (the function's static and this dynamic) and FAKE_SM_BLOCKS allow one multiprocessor. */
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(
	int *blocks, const void *func, int threads, size_t shared)
{
	const struct CUkern_st *k = func;
	const struct fake_fn *fn = k ? k->fn : NULL;
	uint64_t n = FAKE_SM_BLOCKS, bytes;

	if (!k || !blocks || threads <= 0 || (unsigned)threads > FAKE_MAX_BLOCK)
		return cudaErrorInvalidValue;
	if (fn && fake_fn_attr(fn, "blocks_per_sm")) {
		*blocks = (int)fake_fn_number(fn, "blocks_per_sm", 0);
		return cudaSuccess;
	}
	if (FAKE_SM_THREADS / (unsigned)threads < n)
		n = FAKE_SM_THREADS / (unsigned)threads;
	bytes = shared + (fn ? fake_fn_number(fn, "shared", 0) : 0);
	if (bytes && FAKE_SM_SHARED / bytes < n)
		n = FAKE_SM_SHARED / bytes;
	*blocks = (int)n;
	return cudaSuccess;
}

/* As CUDA: refused where the device has no cooperative launch, or for a grid larger
 * than what fits at once (the occupancy above, times FAKE_SMS). */
cudaError_t cudaLaunchCooperativeKernel(
	const void *func, dim3 grid, dim3 block, void **params, size_t shared, cudaStream_t s)
{
	const struct fake_launchinfo how = {
		1, {0, 0, 0}, {grid.x, grid.y, grid.z}, {block.x, block.y, block.z}};
	int per_sm = 0;
	cudaError_t e = fake_error();

	if (e != cudaSuccess)
		return e;
	if (!fake_cooperative())
		return cudaErrorNotSupported;
	e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
		&per_sm, func, (int)(block.x * block.y * block.z), shared);
	if (e != cudaSuccess)
		return e;
	if ((uint64_t)grid.x * grid.y * grid.z > (uint64_t)per_sm * FAKE_SMS)
		return cudaErrorCooperativeLaunchTooLarge;
	return fake_launch(func, grid, block, params, shared, s, &how);
}

/* Only the cluster attribute; clusters need cc 9.0, the portable size and a grid
 * they divide. */
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *cfg, const void *func, void **params)
{
	struct fake_launchinfo how = {0, {0, 0, 0},
		{cfg->gridDim.x, cfg->gridDim.y, cfg->gridDim.z},
		{cfg->blockDim.x, cfg->blockDim.y, cfg->blockDim.z}};

	for (unsigned i = 0; i < cfg->numAttrs; i++) {
		const cudaLaunchAttribute *a = &cfg->attrs[i];
		const unsigned c[3] = {
			a->val.clusterDim.x, a->val.clusterDim.y, a->val.clusterDim.z};
		const unsigned g[3] = {cfg->gridDim.x, cfg->gridDim.y, cfg->gridDim.z};

		if (a->id != cudaLaunchAttributeClusterDimension)
			return cudaErrorInvalidValue;
		if (fake_cc() < 90)
			return cudaErrorNotSupported;
		for (int d = 0; d < 3; d++)
			if (!c[d] || g[d] % c[d])
				return cudaErrorInvalidClusterSize;
		if (c[0] * c[1] * c[2] > FAKE_MAX_CLUSTER)
			return cudaErrorInvalidClusterSize;
		memcpy(how.cluster, c, sizeof(c));
	}
	return fake_launch(func, cfg->gridDim, cfg->blockDim, params, cfg->dynamicSmemBytes,
		cfg->stream, &how);
}
