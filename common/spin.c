/* Spin only on a free core (spin.h says why). */
#include "spin.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_once_t spin_once = PTHREAD_ONCE_INIT;
static enum spin_policy spin_policy;
static unsigned spin_cpus, spin_spare;
static int spin_fd = -1;
/* The cached count of runnable threads and when it goes stale; a thread that finds it
 * stale claims the refresh by moving the deadline, so one thread reads /proc while the
 * others use the old count. */
static atomic_uint spin_runnable_now;
static _Atomic uint64_t spin_stale_ns;

uint64_t spin_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

enum spin_policy spin_policy_from(const char *value)
{
	if (value && strcmp(value, "always") == 0)
		return SPIN_ALWAYS;
	if (value && strcmp(value, "never") == 0)
		return SPIN_NEVER;
	return SPIN_AUTO;
}

bool spin_decide(enum spin_policy policy, unsigned runnable, unsigned cpus, unsigned spare)
{
	switch (policy) {
	case SPIN_ALWAYS:
		return true;
	case SPIN_NEVER:
		return false;
	case SPIN_AUTO:
		break;
	}
	/* Unknown (0): do not spin; the cost of a wrong no is one wake-up. */
	return runnable > 0 && (uint64_t)runnable + spare <= cpus;
}

unsigned spin_parse_loadavg(const char *text)
{
	const char *p = text;
	char *end;
	unsigned long n;

	for (int field = 0; field < 3; field++) {
		p = strchr(p, ' ');
		if (!p)
			return 0;
		p++;
	}
	n = strtoul(p, &end, 10);
	if (end == p || *end != '/' || n > 1u << 30)
		return 0;
	return (unsigned)n;
}

static void spin_init(void)
{
	cpu_set_t set;

	spin_policy = spin_policy_from(getenv("SSEQ_SPIN_POLICY"));
	spin_cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? (unsigned)CPU_COUNT(&set) : 1;
	spin_spare = spin_client_spare(getenv("SSEQ_SPIN_SPARE"), spin_cpus);
	if (spin_policy == SPIN_AUTO)
		spin_fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
}

static unsigned spin_runnable(void)
{
	char buf[128];
	ssize_t n;

	if (spin_fd < 0)
		return 0;
	n = pread(spin_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return spin_parse_loadavg(buf);
}

unsigned spin_client_spare(const char *value, unsigned cpus)
{
	char *end;
	unsigned long n;

	if (value && *value) {
		n = strtoul(value, &end, 10);
		if (!*end && *value != '-' && n <= 1u << 20)
			return (unsigned)n;
	}
	return cpus / 4 ? cpus / 4 : 1;
}

/* The runnable threads now, read at most once per SPIN_RECHECK_NS (0: not known). */
static unsigned spin_runnable_cached(void)
{
	const uint64_t now = spin_now_ns();
	uint64_t stale = atomic_load_explicit(&spin_stale_ns, memory_order_relaxed);

	if (now >= stale &&
		atomic_compare_exchange_strong(&spin_stale_ns, &stale, now + SPIN_RECHECK_NS))
		atomic_store_explicit(&spin_runnable_now, spin_runnable(), memory_order_relaxed);
	return atomic_load_explicit(&spin_runnable_now, memory_order_relaxed);
}

/* Whether a core is free for the caller, with the client's spare ones beside it. */
static bool spin_free_for(bool client)
{
	pthread_once(&spin_once, spin_init);
	if (spin_policy != SPIN_AUTO)
		return spin_policy == SPIN_ALWAYS;
	return spin_decide(SPIN_AUTO, spin_runnable_cached(), spin_cpus, client ? spin_spare : 0);
}

bool spin_core_free(void)
{
	return spin_free_for(false);
}

bool spin_client_core_free(void)
{
	return spin_free_for(true);
}
