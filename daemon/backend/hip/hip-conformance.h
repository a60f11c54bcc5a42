/* The hip backend in the backend conformance suite (../test-backend.c includes this as
 * its factory): how to make one, and where it differs by design. Not a header to include
 * anywhere else. */
#include "hip-harness.h"
#include "hip.h"

static const struct conf_backend B = {.name = "hip", .cannot_run = -ENOSYS, .fault_is_fatal = true};

static bool conf_present(void)
{
	return hip_harness_gpu_present();
}

static unsigned conf_scaled(unsigned n, unsigned divisor)
{
	return hip_harness_scaled(n, divisor);
}

/* The fake runtime can; CUDA cannot after a sticky fault (not known for ROCm). */
static bool conf_reset_in_process(void)
{
	return hip_harness_fake_cuda();
}

/* The kernel image: $SSEQ_KERNELS, else the one built beside this suite (the build tree
 * moves to the GPU machine). */
static int conf_create(struct backend *be, const struct backend_env *env, const void *opts)
{
	struct hip_config cfg = {.kernels = hip_harness_kernels(SSEQ_KERNELS_REL)};

	(void)opts;
	return hip_create(be, &cfg, env);
}

/* A fill run far past its buffer into unmapped memory: an illegal address. Unchecked on
 * purpose (the server would refuse it). */
static void conf_fault_payload(struct op_payload *p)
{
	p->elements = 1ull << 36;
	p->args[2] = U64(1ull << 36);
}
