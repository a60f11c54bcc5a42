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
 * is cached for SPIN_RECHECK_NS, so asking costs an atomic load. A client of the daemon
 * asks for a core with spare ones beside it (spin_client_core_free). $SSEQ_SPIN_POLICY
 * (auto, always, never) overrides both, for comparisons. */
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

/* The same for a client of the daemon, which leaves spin_client_spare() cores free
 * beside it: a request's answer is handed on by three or four daemon threads in turn,
 * each of which must find a core at once. Sixteen Python workers on sixteen CPUs each
 * spinning while one core looked free took those cores (the H100, 2026-12-07: the
 * download-only test's body 174 us a test at 16 workers, 132 us with the clients never
 * spinning), while a lone worker still spins. */
bool spin_client_core_free(void);
/* The cores a client leaves free: $SSEQ_SPIN_SPARE (a number, 0 and up), else a quarter
 * of the cpus it may use, at least one. */
unsigned spin_client_spare(const char *value, unsigned cpus);

/* The decision itself, for tests: runnable threads, the caller included, against usable
 * CPUs, with `spare` of them left free beside the caller. */
bool spin_decide(enum spin_policy policy, unsigned runnable, unsigned cpus, unsigned spare);

/* /proc/loadavg's runnable count ("0.52 0.58 0.59 3/1234 5678" gives 3), or 0 when the
 * text is not in that form. */
unsigned spin_parse_loadavg(const char *text);

/* The policy from $SSEQ_SPIN_POLICY ("auto", "always", "never"; unset or anything else:
 * auto). */
enum spin_policy spin_policy_from(const char *value);

#endif
