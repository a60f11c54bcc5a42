/* Whether a thread that waits for something may spin instead of sleeping: only while a
 * core is free for it. A spinning waiter wakes in a microsecond and costs nobody when
 * the machine has idle cores; when it has none, the spinner holds a core that a thread
 * with work needs until the scheduler takes it off (milliseconds), and every hand-off of
 * a request (client, loop, submit thread, GPU, completion thread, loop, client) waits
 * that long. So every spin in the daemon asks here first, and stops asking once told no.
 *
 * The policy reads the machine's runnable threads (/proc/loadavg's fourth field, which
 * counts the running and the runnable, the caller included) against the CPUs this
 * process may run on: a core is free while the first is at most the second. The answer
 * is cached for SPIN_RECHECK_NS, so asking costs an atomic load. $SSEQ_SPIN_POLICY
 * (auto, always, never) overrides it, for comparisons. */
#ifndef SSEQ_SPIN_H
#define SSEQ_SPIN_H

#include <stdbool.h>
#include <stdint.h>

#define SPIN_RECHECK_NS 250000u

enum spin_policy {
	SPIN_AUTO, /* spin while a core is free */
	SPIN_ALWAYS,
	SPIN_NEVER,
};

/* CLOCK_MONOTONIC in ns. */
uint64_t spin_now_ns(void);

/* Whether a waiter may spin now. Thread-safe; reads /proc at most once per
 * SPIN_RECHECK_NS across all threads. */
bool spin_core_free(void);

/* The decision itself, for tests: runnable threads against usable CPUs. */
bool spin_decide(enum spin_policy policy, unsigned runnable, unsigned cpus);

/* /proc/loadavg's runnable count ("0.52 0.58 0.59 3/1234 5678" gives 3), or 0 when the
 * text is not in that form. */
unsigned spin_parse_loadavg(const char *text);

/* The policy from $SSEQ_SPIN_POLICY ("auto", "always", "never"; unset or anything else:
 * auto). */
enum spin_policy spin_policy_from(const char *value);

#endif
