/* sseq-stress: random workloads through libsseq, several clients (threads, each with
 * its own connection) at once, every device-to-host result checked against a host model
 * that applies each operation in program order. Values are small integers, so every
 * float result is exact and any difference is a sequencing bug, not rounding.
 * This file: the options, the threads, the daemon's race counter and the report. */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "stress.h"

struct options opt = {.ops = 10000, .clients = 4, .lanes = 2, .seed = 1};

static int race_findings(uint64_t *out)
{
	struct sseq *s;
	struct sseq_connect_options o = {.size = sizeof(o), .client_name = "sseq-stress"};
	int r = sseq_connect(opt.socket, &o, &s);
	if (r < 0) {
		fprintf(stderr, "sseq-stress: connect: %s\n", sseq_last_error_message(NULL));
		return r;
	}
	Sseq__QueryResult *qr;
	r = sseq__query(s, SSEQ__QUERY_KIND__QUERY_KIND_STATS, 0, &qr);
	if (r == 0) {
		*out = qr->counters ? qr->counters->race_findings : 0;
		sseq__query_result_free(qr);
	} else {
		fprintf(stderr, "sseq-stress: STATS query: %s\n", sseq_last_error_message(s));
	}
	sseq_close(s);
	return r;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: sseq-stress [OPTIONS]\n"
		"Random workloads through libsseq, checked against a host model.\n\n"
		"  -s, --socket PATH   daemon socket (default $SSEQ_SOCKET or " SSEQ_DEFAULT_SOCKET
		")\n"
		"  -n, --ops N         operations in total, split across clients (default 10000)\n"
		"  -c, --clients N     concurrent clients, each its own connection (default 4)\n"
		"  -l, --lanes N       compute lanes per client, each op on one at random\n"
		"                      (1..8, default 2)\n"
		"  -S, --seed S        random seed; client i uses S + i (default 1)\n"
		"  -v, --verbose       print errors and the first mismatches\n"
		"  -h, --help\n\n"
		"The last line is 'ops=N wrong=N errors=N races=N'; the exit status is 1 when\n"
		"wrong or races is not 0. Progress goes to stderr: a line updated in place on a\n"
		"terminal, else a line every 10 seconds.\n");
}

/* What all clients did together, and how long it took. */
struct totals {
	uint64_t ops, wrong, errors, checked;
	double secs;
};

/* Returns -1 to go on, else the exit status: --help ends the run here, as does a bad
 * option or client count. */
static int parse_options(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"socket", required_argument, NULL, 's'},
		{"ops", required_argument, NULL, 'n'},
		{"clients", required_argument, NULL, 'c'},
		{"lanes", required_argument, NULL, 'l'},
		{"seed", required_argument, NULL, 'S'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "s:n:c:l:S:vh", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			opt.socket = optarg;
			break;
		case 'n':
			opt.ops = strtoull(optarg, NULL, 0);
			break;
		case 'c':
			opt.clients = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'l':
			opt.lanes = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'S':
			opt.seed = strtoull(optarg, NULL, 0);
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (opt.lanes == 0 || opt.lanes > SSEQ_MAX_LANES) {
		fprintf(stderr, "sseq-stress: --lanes must be 1..%d\n", SSEQ_MAX_LANES);
		return 2;
	}
	if (opt.clients == 0 || opt.clients > 1024) {
		fprintf(stderr, "sseq-stress: --clients must be 1..1024\n");
		return 2;
	}
	return -1;
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static void *client_thread(void *arg)
{
	struct client *c = arg;

	client_main(c);
	atomic_store(&c->finished, true);
	return NULL;
}

/* While the clients run: their ops so far on stderr, updated in place on a terminal
 * (twice a second), else a line every 10 seconds (so a long run in a CI log shows it is
 * alive; a short one prints nothing). stdout keeps only the report. */
static void show_progress(const struct client *cl, const struct timespec *t0)
{
	const bool tty = isatty(STDERR_FILENO);
	const double every = tty ? 0.5 : 10.0;
	double next = every;
	bool shown = false;

	for (;;) {
		uint64_t done = 0;
		bool all = true;
		double secs;

		for (unsigned i = 0; i < opt.clients; i++) {
			done += atomic_load_explicit(&cl[i].progress, memory_order_relaxed);
			all = all && atomic_load(&cl[i].finished);
		}
		if (all)
			break;
		secs = seconds_since(t0);
		/* A step may do a few ops past a client's share: the total is approximate. */
		done = done < opt.ops ? done : opt.ops;
		if (secs >= next) {
			fprintf(stderr,
				"%ssseq-stress: %" PRIu64 "/%" PRIu64 " ops (%.0f%%), %.0f s%s",
				tty ? "\r" : "", done, opt.ops,
				opt.ops ? 100.0 * (double)done / (double)opt.ops : 100.0, secs,
				tty ? "\033[K" : "\n");
			shown = true;
			next = secs + every;
		}
		nanosleep(&(struct timespec){.tv_nsec = 10000000}, NULL);
	}
	if (shown && tty)
		fputs("\r\033[K", stderr); /* the terminal's line, cleared for the report */
}

/* One thread per client, each with its share of the operations; returns when all are
 * done. */
static void run_clients(struct totals *t)
{
	struct client *cl = calloc(opt.clients, sizeof(*cl));
	pthread_t *th = calloc(opt.clients, sizeof(*th));
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0; i < opt.clients; i++) {
		cl[i].id = i;
		cl[i].rng.s = opt.seed + i;
		cl[i].lane_rng.s = (opt.seed + i) ^ 0x1a9e5ull;
		cl[i].budget = opt.ops / opt.clients + (i < opt.ops % opt.clients);
		pthread_create(&th[i], NULL, client_thread, &cl[i]);
	}
	show_progress(cl, &t0);
	for (unsigned i = 0; i < opt.clients; i++) {
		pthread_join(th[i], NULL);
		t->ops += cl[i].ops;
		t->wrong += cl[i].wrong;
		t->errors += cl[i].errors;
		t->checked += cl[i].checked;
	}
	t->secs = seconds_since(&t0);
	free(cl);
	free(th);
}

int main(int argc, char **argv)
{
	int status = parse_options(argc, argv);
	if (status >= 0)
		return status;

	uint64_t races_before = 0, races_after = 0;
	if (race_findings(&races_before) < 0)
		return 2;
	struct totals t = {0};
	run_clients(&t);
	if (race_findings(&races_after) < 0)
		t.errors++;
	uint64_t races = races_after - races_before;
	printf("clients=%u seed=%" PRIu64 " checks=%" PRIu64 " seconds=%.2f ops/s=%.0f\n",
		opt.clients, opt.seed, t.checked, t.secs,
		t.secs > 0 ? (double)t.ops / t.secs : 0.0);
	printf("ops=%" PRIu64 " wrong=%" PRIu64 " errors=%" PRIu64 " races=%" PRIu64 "\n", t.ops,
		t.wrong, t.errors, races);
	return t.wrong || races ? 1 : 0;
}
