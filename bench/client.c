/* The daemon's side of the native comparisons: the same work as bench-native, done by a
 * client with no GPU context through libsseq and sseqd. Each mode prints one line of
 * key=value figures. Modes: copy, latency, launch, first-kernel, burst, copy-flood, hold,
 * overlap. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sseq/sseq.h>

#include "common.h"

/* Copies per timed burst (bench_copy_burst). */
static int COPY_BURST;

static struct sseq *s;

static void check(int r, const char *what)
{
	if (r < 0) {
		fprintf(stderr, "bench-client: %s: %s: %s\n", what, sseq_strerror(r),
			sseq_last_error_message(s));
		exit(1);
	}
}

static void open_session(uint64_t staging)
{
	struct sseq_connect_options o = {
		.size = sizeof(o), .client_name = "bench-client", .staging_size = staging};
	check(sseq_connect(NULL, &o, &s), "connect");
}

/* H2D, D2H, D2D of `size` bytes, staged zero-copy in the registered memfd arena. */
static void mode_copy(uint64_t size, int reps)
{
	void *up, *down;
	uint64_t a, b;
	double best[3] = {1e9, 1e9, 1e9};

	open_session(size);
	check(sseq_host_alloc(s, size, &up), "host_alloc");
	check(sseq_host_alloc(s, size, &down), "host_alloc");
	memset(up, 1, size);
	check(sseq_alloc(s, size, "a", &a), "alloc");
	check(sseq_alloc(s, size, "b", &b), "alloc");
	/* COPY_BURST copies back to back, then wait for them: bandwidth, not latency. */
	for (int r = 0; r < reps + 1; r++) {
		for (int k = 0; k < 3; k++) {
			uint64_t tags[COPY_BURST_MAX];
			double t0 = now_s(), t;
			for (int i = 0; i < COPY_BURST; i++) {
				if (k == 0)
					check(sseq_copy_h2d(s, a, 0, up, size, &tags[i]), "h2d");
				else if (k == 1)
					check(sseq_copy_d2h(s, a, 0, down, size, &tags[i]), "d2h");
				else
					check(sseq_copy_d2d(s, a, 0, b, 0, size, &tags[i]), "d2d");
			}
			for (int i = 0; i < COPY_BURST; i++)
				check(sseq_wait(s, tags[i]), "wait");
			t = now_s() - t0;
			if (r > 0 && t < best[k])
				best[k] = t;
		}
	}
	printf("daemon copy bytes=%" PRIu64 " burst=%d h2d_GBps=%.2f d2h_GBps=%.2f d2d_GBps=%.2f\n",
		size, COPY_BURST, COPY_BURST * (double)size / best[0] / 1e9,
		COPY_BURST * (double)size / best[1] / 1e9,
		COPY_BURST * (double)size / best[2] / 1e9);
}

/* 4 KiB H2D followed by await on the buffer, median of `reps`. With $SSEQ_BENCH_STAMPS
 * set, each round's H2D tag, start and end (CLOCK_MONOTONIC ns, the daemon's timeline
 * clock) go to that file as "tag t0_ns t1_ns" lines, to be joined with
 * `sseqctl trace --chrome` (bench/latency-parts.sh). */
static void mode_latency(int reps)
{
	const char *stamps = getenv("SSEQ_BENCH_STAMPS");
	void *up;
	uint64_t a;
	double *t = calloc((size_t)reps, sizeof(double));
	uint64_t(*st)[3] = stamps ? calloc((size_t)reps, sizeof(*st)) : NULL;

	if (!t || (stamps && !st)) {
		fprintf(stderr, "bench-client: out of memory\n");
		exit(1);
	}
	open_session(0);
	check(sseq_host_alloc(s, 4096, &up), "host_alloc");
	memset(up, 1, 4096);
	check(sseq_alloc(s, 4096, "a", &a), "alloc");
	for (int r = 0; r < reps; r++) {
		uint64_t tag = 0;
		double t0 = now_s();
		check(sseq_copy_h2d(s, a, 0, up, 4096, &tag), "h2d");
		check(sseq_await(s, a), "await");
		t[r] = now_s() - t0;
		if (st) {
			st[r][0] = tag;
			st[r][1] = (uint64_t)(t0 * 1e9);
			st[r][2] = (uint64_t)((t0 + t[r]) * 1e9);
		}
	}
	if (st) {
		FILE *f = fopen(stamps, "w");
		if (!f) {
			perror(stamps);
			exit(1);
		}
		for (int r = 0; r < reps; r++)
			fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", st[r][0], st[r][1],
				st[r][2]);
		fclose(f);
		free(st);
	}
	print_latency("daemon", t, reps);
	free(t);
}

/* Another client's load for the quiet client's latency (bench/concurrency.sh): 256 MiB
 * H2D copies, four in flight, for `seconds`. */
static void mode_copy_flood(double seconds)
{
	const uint64_t size = 256ull << 20;
	void *up;
	uint64_t a, copies = 0;
	double t0;

	open_session(size);
	check(sseq_host_alloc(s, size, &up), "host_alloc");
	memset(up, 1, size);
	check(sseq_alloc(s, size, "flood", &a), "alloc");
	printf("daemon flood ready\n");
	fflush(stdout);
	t0 = now_s();
	while (now_s() - t0 < seconds) {
		for (int i = 0; i < 4; i++)
			check(sseq_copy_h2d(s, a, 0, up, size, NULL), "h2d");
		check(sseq_await(s, a), "await");
		copies += 4;
	}
	printf("daemon flood copies=%" PRIu64 " seconds=%.2f GBps=%.2f\n", copies, now_s() - t0,
		(double)copies * (double)size / (now_s() - t0) / 1e9);
}

/* `count` pipelined executes of spin(0): the empty kernel. */
static void mode_launch(long count)
{
	const struct sseq_arg args[] = {SSEQ_U64(0)};
	double t0;

	open_session(0);
	for (int i = 0; i < 1000; i++)
		check(sseq_execute(s, "spin", args, 1, NULL, NULL), "execute");
	check(sseq_sync(s), "sync");
	t0 = now_s();
	for (long i = 0; i < count; i++)
		check(sseq_execute(s, "spin", args, 1, NULL, NULL), "execute");
	check(sseq_sync(s), "sync");
	print_launch("daemon", count, t0);
}

/* `count` one-block spin(us) kernels, pipelined, started with the other processes of a
 * concurrency run (bench/concurrency.sh), then sync. */
static void mode_burst(long count, unsigned long us)
{
	const struct sseq_arg args[] = {SSEQ_U64(us)};
	double t0;

	open_session(0);
	for (int i = 0; i < 10; i++)
		check(sseq_execute(s, "spin", args, 1, NULL, NULL), "execute");
	check(sseq_sync(s), "sync");
	t0 = bench_wait_go("daemon");
	for (long i = 0; i < count; i++)
		check(sseq_execute(s, "spin", args, 1, NULL, NULL), "execute");
	check(sseq_sync(s), "sync");
	print_burst("daemon", count, us, t0);
}

/* Host work that makes no libsseq call, `us` long. */
static void host_work(double us)
{
	double t0 = now_s();
	while ((now_s() - t0) * 1e6 < us)
		;
}

/* Does queued work reach the device while the program does host work? A spin(us)
 * kernel, then `host_us` of host work, then a wait on the kernel: the wait is short if
 * the kernel ran meanwhile, and about `us` if it left the client only at the wait.
 * Three ways, each the median of `reps`: the kernel alone; after a 4 KiB H2D (whose
 * answer is due when the kernel is queued); the same with sseq_flush() after it. */
static void mode_overlap(unsigned long us, unsigned long host_us, int reps)
{
	const struct sseq_arg args[] = {SSEQ_U64(us)};
	double *t = calloc((size_t)reps, sizeof(double)), med[3];
	void *up;
	uint64_t a, tag;

	open_session(0);
	check(sseq_host_alloc(s, 4096, &up), "host_alloc");
	memset(up, 1, 4096);
	check(sseq_alloc(s, 4096, "a", &a), "alloc");
	for (int k = 0; k < 3; k++) {
		for (int r = 0; r < reps; r++) {
			check(sseq_sync(s), "sync");
			if (k > 0)
				check(sseq_copy_h2d(s, a, 0, up, 4096, NULL), "h2d");
			check(sseq_execute(s, "spin", args, 1, NULL, &tag), "execute");
			if (k == 2)
				check(sseq_flush(s), "flush");
			host_work((double)host_us);
			double t0 = now_s();
			check(sseq_wait(s, tag), "wait");
			t[r] = (now_s() - t0) * 1e6;
		}
		qsort(t, (size_t)reps, sizeof(double), cmp_double);
		med[k] = t[reps / 2];
	}
	printf("daemon overlap kernel_us=%lu host_us=%lu wait_us_alone=%.1f "
	       "wait_us_after_h2d=%.1f wait_us_after_h2d_flushed=%.1f\n",
		us, host_us, med[0], med[1], med[2]);
	free(t);
}

/* What a fresh worker does through the daemon: connect, allocate, one kernel, wait. */
static void mode_first_kernel(void)
{
	const struct sseq_arg args[] = {SSEQ_U64(0)};
	uint64_t a, tag;

	open_session(0);
	check(sseq_alloc(s, 4096, "a", &a), "alloc");
	check(sseq_execute(s, "spin", args, 1, NULL, &tag), "execute");
	check(sseq_wait(s, tag), "wait");
	printf("daemon first-kernel done\n");
}

/* Stay connected with a 4 KiB buffer until stdin closes: for device-memory figures. */
static void mode_hold(void)
{
	uint64_t a;

	open_session(0);
	check(sseq_alloc(s, 4096, "a", &a), "alloc");
	hold_until_stdin_closes("daemon");
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	COPY_BURST = bench_copy_burst();
	if (!strcmp(mode, "copy"))
		mode_copy(argc > 2 ? strtoull(argv[2], NULL, 0) : 256u << 20, 5);
	else if (!strcmp(mode, "latency"))
		mode_latency(argc > 2 ? atoi(argv[2]) : 2000);
	else if (!strcmp(mode, "launch"))
		mode_launch(argc > 2 ? atol(argv[2]) : 200000);
	else if (!strcmp(mode, "first-kernel"))
		mode_first_kernel();
	else if (!strcmp(mode, "copy-flood"))
		mode_copy_flood(argc > 2 ? atof(argv[2]) : 5.0);
	else if (!strcmp(mode, "burst"))
		mode_burst(
			argc > 2 ? atol(argv[2]) : 2000, argc > 3 ? strtoul(argv[3], NULL, 0) : 50);
	else if (!strcmp(mode, "hold"))
		mode_hold();
	else if (!strcmp(mode, "overlap"))
		mode_overlap(argc > 2 ? strtoul(argv[2], NULL, 0) : 20000,
			argc > 3 ? strtoul(argv[3], NULL, 0) : 40000, 21);
	else {
		fprintf(stderr,
			"usage: SSEQ_SOCKET=... bench-client copy [BYTES] | latency [N] |"
			" launch [N] | first-kernel | burst [N [US]] | copy-flood [SECONDS] | "
			"hold | overlap [KERNEL_US [HOST_US]]\n");
		return 2;
	}
	sseq_close(s);
	return 0;
}
