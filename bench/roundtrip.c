/* A worker's read-back round trip through sseqd, as a pytest test ends: allocate a small
 * buffer, fill it with the built-in kernel, copy it back into the staging arena, wait,
 * free. Times each step (alloc and free wait for the daemon's reply; the wait covers the
 * fill and the D2H), checks the value read back, and reports the client's own CPU time.
 * Many copies start together (bench_wait_go); bench/roundtrip.sh aggregates them.
 * Usage: SSEQ_SOCKET=... bench-roundtrip [ROUNDS [BYTES]]
 * With $SSEQ_BENCH_ASYNC=1 the same ops as a client of protocol 1.9 writes them:
 * sseq_alloc_async and sseq_free_async (the library names the buffer; one wait a round).
 * With $SSEQ_BENCH_RAW set, every round's total (us) goes to $SSEQ_BENCH_RAW.<pid>.
 * With $SSEQ_BENCH_PACE_US set, a round starts that long after the previous one (a paced
 * client, not one flat out). SIGTERM ends the loop; the line then says how many rounds. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <sseq/sseq.h>

#include "common.h"

static struct sseq *s;
static bool async_names;

static void check(int r, const char *what)
{
	if (r < 0) {
		fprintf(stderr, "bench-roundtrip: %s: %s: %s\n", what, sseq_strerror(r),
			sseq_last_error_message(s));
		exit(1);
	}
}

/* One round; the step times (seconds) into t[0..4]: alloc, submit, wait, free, total. */
static void round_trip(uint64_t bytes, float *dst, float value, double *t)
{
	const uint64_t n = bytes / sizeof(float);
	uint64_t buf, tag;
	double t0 = now_s(), t1, t2, t3, t4;

	check(async_names ? sseq_alloc_async(s, bytes, "rt", &buf)
			  : sseq_alloc(s, bytes, "rt", &buf),
		"alloc");
	t1 = now_s();
	check(sseq_execute(s, "fill",
		      (struct sseq_arg[]){SSEQ_OUT(buf), SSEQ_F32(value), SSEQ_U64(n)}, 3, NULL,
		      NULL),
		"fill");
	check(sseq_copy_d2h(s, buf, 0, dst, bytes, &tag), "d2h");
	t2 = now_s();
	check(sseq_wait(s, tag), "wait");
	t3 = now_s();
	check(async_names ? sseq_free_async(s, buf) : sseq_free(s, buf), "free");
	t4 = now_s();
	if (dst[0] != value || dst[n - 1] != value) {
		fprintf(stderr, "bench-roundtrip: read back %g, %g for %g\n", dst[0], dst[n - 1],
			value);
		exit(1);
	}
	t[0] = t1 - t0;
	t[1] = t2 - t1;
	t[2] = t3 - t2;
	t[3] = t4 - t3;
	t[4] = t4 - t0;
}

static double pct(double *v, int n, int p)
{
	qsort(v, (size_t)n, sizeof(double), cmp_double);
	return v[(long)n * p / 100 < n ? (long)n * p / 100 : n - 1] * 1e6;
}

int main(int argc, char **argv)
{
	const int rounds = argc > 1 ? atoi(argv[1]) : 1000;
	const uint64_t bytes = argc > 2 ? strtoull(argv[2], NULL, 0) : 1024;
	struct sseq_connect_options o = {.size = sizeof(o), .client_name = "bench-roundtrip"};
	const char *raw = getenv("SSEQ_BENCH_RAW"), *async = getenv("SSEQ_BENCH_ASYNC");
	double *t[5], start, end, cpu, next = 0;
	struct rusage ru;
	int done;
	float *dst;

	if (rounds < 1 || bytes < sizeof(float) || bytes % sizeof(float)) {
		fprintf(stderr, "usage: bench-roundtrip [ROUNDS [BYTES (a multiple of 4)]]\n");
		return 2;
	}
	for (int k = 0; k < 5; k++)
		t[k] = calloc((size_t)rounds, sizeof(double));
	async_names = async && strcmp(async, "1") == 0;
	check(sseq_connect(NULL, &o, &s), "connect");
	check(sseq_host_alloc(s, bytes, (void **)&dst), "host_alloc");
	for (int r = 0; r < 20; r++) { /* warm-up: the daemon's pool, the lane, the arena */
		double w[5];
		round_trip(bytes, dst, (float)-r, w);
	}
	bench_stop_on_term();
	start = bench_wait_go("daemon");
	for (done = 0; done < rounds && !bench_stopped; done++) {
		double w[5];

		bench_pace(&next);
		round_trip(bytes, dst, (float)(done + 1), w);
		for (int k = 0; k < 5; k++)
			t[k][done] = w[k];
	}
	if (done == 0) {
		fprintf(stderr, "bench-roundtrip: stopped before the first round\n");
		return 1;
	}
	/* Nothing refused on the way (a refusal not waited for is kept for this). */
	check(sseq_sync(s), "sync");
	end = wall_s();
	getrusage(RUSAGE_SELF, &ru);
	cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
		(double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
	if (raw && *raw) {
		char path[4096];
		FILE *f;

		snprintf(path, sizeof(path), "%s.%d", raw, (int)getpid());
		f = fopen(path, "w");
		for (int r = 0; f && r < done; r++)
			fprintf(f, "%.1f\n", t[4][r] * 1e6);
		if (f)
			fclose(f);
	}
	printf("daemon roundtrip rounds=%d bytes=%" PRIu64 " start=%.6f end=%.6f median_us=%.1f "
	       "p90_us=%.1f alloc_med_us=%.1f submit_med_us=%.1f wait_med_us=%.1f "
	       "free_med_us=%.1f alloc_p90_us=%.1f wait_p90_us=%.1f free_p90_us=%.1f "
	       "cpu_s=%.3f\n",
		done, bytes, start, end, pct(t[4], done, 50), pct(t[4], done, 90),
		pct(t[0], done, 50), pct(t[1], done, 50), pct(t[2], done, 50), pct(t[3], done, 50),
		pct(t[0], done, 90), pct(t[2], done, 90), pct(t[3], done, 90), cpu);
	sseq_close(s);
	for (int k = 0; k < 5; k++)
		free(t[k]);
	return 0;
}
