/* The sim in the backend conformance suite (../test-backend.c includes this as its
 * factory): how to make one, and where it differs by design. Not a header to include
 * anywhere else. */
#include "sim.h"

static const struct conf_backend B = {.name = "sim", .cannot_run = -EINVAL, .runs_cpu = true};

static bool conf_present(void)
{
	return true;
}

/* CPU threads: the long loops and big buffers run smaller. */
static unsigned conf_scaled(unsigned n, unsigned divisor)
{
	return (n + divisor - 1) / divisor;
}

/* The sim builds its device again in place. */
static bool conf_reset_in_process(void)
{
	return true;
}

static int conf_create(struct backend *be, const struct backend_env *env, const void *opts)
{
	const struct conf_opts *o = opts;
	struct sim_config cfg = {0};
	const char *why = NULL;

	if (o->jitter)
		ck_assert_int_eq(sim_parse_delay(&cfg, "all=rand:0-300us", &why), 0);
	if (o->slow_h2d)
		ck_assert_int_eq(sim_parse_delay(&cfg, "h2d=20ms", &why), 0);
	if (o->fault)
		ck_assert_int_eq(sim_parse_inject(&cfg,
					 o->lost ? "device-lost-op=1" : "device-fail-op=1", &why),
			0);
	return sim_create(be, &cfg, env);
}

/* The sim faults the launch it was told to (device-fail-op=1): an ordinary fill. */
static void conf_fault_payload(struct op_payload *p)
{
	(void)p;
}
