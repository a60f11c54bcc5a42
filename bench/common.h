/* What bench-client (through sseqd) and bench-native (HIP in one process) share, so that
 * both sides time, parse and report the same way. */
#ifndef SSEQ_BENCH_COMMON_H
#define SSEQ_BENCH_COMMON_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Copies per timed burst: $SSEQ_BENCH_BURST (1 to COPY_BURST_MAX), default 8. */
#define COPY_BURST_MAX 64

static inline int bench_copy_burst(void)
{
	const char *env = getenv("SSEQ_BENCH_BURST");
	int n = env ? atoi(env) : 8;

	return n >= 1 && n <= COPY_BURST_MAX ? n : 8;
}

static inline double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* "<side> latency ..." from `reps` round-trip times in seconds (sorted in place). */
static inline void print_latency(const char *side, double *t, int reps)
{
	qsort(t, (size_t)reps, sizeof(double), cmp_double);
	printf("%s latency bytes=4096 median_us=%.2f p10_us=%.2f p90_us=%.2f\n", side,
		t[reps / 2] * 1e6, t[reps / 10] * 1e6, t[reps * 9 / 10] * 1e6);
}

/* "<side> launch ..." for `count` launches that took since t0. */
static inline void print_launch(const char *side, long count, double t0)
{
	double seconds = now_s() - t0;

	printf("%s launch count=%ld seconds=%.4f launches_per_s=%.0f\n", side, count, seconds,
		(double)count / seconds);
}

/* The wall clock, comparable across processes: for when many start together. */
static inline double wall_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Many processes set up (connect, or create a context), say so, then start together:
 * each polls for the file $SSEQ_BENCH_GO, which the script creates once all are ready.
 * Returns the wall time it saw it. */
static inline double bench_wait_go(const char *side)
{
	const char *go = getenv("SSEQ_BENCH_GO");

	printf("%s burst ready\n", side);
	fflush(stdout);
	while (go && *go && access(go, F_OK) != 0)
		usleep(50);
	return wall_s();
}

/* "<side> burst ..." for `count` kernels of `us` microseconds each, between the start
 * (the go) and their completion, in wall time: the script aggregates across processes. */
static inline void print_burst(const char *side, long count, unsigned long us, double start)
{
	double end = wall_s();

	printf("%s burst count=%ld us=%lu start=%.6f end=%.6f kernels_per_s=%.0f\n", side, count,
		us, start, end, (double)count / (end - start));
}

/* A looping client that another process stops: SIGTERM ends the loop after the round in
 * progress (the loop tests bench_stopped), so that the client still reports what it did. */
static volatile sig_atomic_t bench_stopped;

static inline void bench_on_term(int sig)
{
	(void)sig;
	bench_stopped = 1;
}

static inline void bench_stop_on_term(void)
{
	struct sigaction sa = {0};

	sa.sa_handler = bench_on_term;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGTERM, &sa, NULL);
}

/* A client that runs at a set pace instead of flat out: with $SSEQ_BENCH_PACE_US > 0 each
 * round starts that long after the previous one started (or at once when the previous one
 * took longer). `next` holds the next start (0 before the first round). */
static inline void bench_pace(double *next)
{
	static double pace_s = -1;
	double now;

	if (pace_s < 0) {
		const char *env = getenv("SSEQ_BENCH_PACE_US");

		pace_s = env ? atof(env) * 1e-6 : 0;
	}
	if (pace_s <= 0)
		return;
	now = now_s();
	if (*next > now) {
		const double wait = *next - now;
		const struct timespec ts = {.tv_sec = (time_t)wait,
			.tv_nsec = (long)((wait - (double)(time_t)wait) * 1e9)};

		nanosleep(&ts, NULL);
		now = *next;
	}
	*next = now + pace_s;
}

/* Say `side` is ready, then block until stdin closes (device-memory figures). */
static inline void hold_until_stdin_closes(const char *side)
{
	char c;

	printf("%s hold ready\n", side);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
}

#endif
