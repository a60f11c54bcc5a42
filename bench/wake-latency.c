/* How long a thread asleep on a condition variable takes to run after another thread
 * signals it, by how long it had slept: the cost of every hand-off in the daemon to a
 * thread that sleeps (loop -> submit thread, watcher -> loop, loop -> client). On a
 * virtual machine an idle vCPU halts, and its wake-up goes through the hypervisor.
 *
 * For each idle gap (20 us to 20 ms) the waker sleeps that long, so that the sleeper's
 * CPU goes idle, then takes the time and signals; the sleeper takes the time as it
 * returns from pthread_cond_wait. Prints one key=value line per gap: the median, p10 and
 * p90 of that difference in microseconds. No dependencies beyond libc.
 * Usage: bench-wake-latency [ROUNDS]   (default 200 per gap) */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static uint64_t signalled_ns, woke_ns;
static unsigned gen, seen;
static bool stop;

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *sleeper(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (seen == gen && !stop)
			pthread_cond_wait(&cond, &mu);
		if (stop)
			break;
		woke_ns = now_ns();
		seen = gen;
		pthread_cond_broadcast(&cond);
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	const int rounds = argc > 1 ? atoi(argv[1]) : 200;
	const long gaps_us[] = {20, 200, 2000, 20000};
	double *t = calloc((size_t)(rounds > 0 ? rounds : 1), sizeof(*t));
	pthread_t th;

	if (rounds <= 0 || !t || pthread_create(&th, NULL, sleeper, NULL)) {
		fprintf(stderr, "usage: bench-wake-latency [ROUNDS > 0]\n");
		free(t);
		return 2;
	}
	for (size_t g = 0; g < sizeof(gaps_us) / sizeof(gaps_us[0]); g++) {
		for (int r = 0; r < rounds; r++) {
			struct timespec gap = {gaps_us[g] / 1000000, gaps_us[g] % 1000000 * 1000};

			nanosleep(&gap, NULL);
			pthread_mutex_lock(&mu);
			signalled_ns = now_ns();
			gen++;
			pthread_cond_broadcast(&cond);
			while (seen != gen)
				pthread_cond_wait(&cond, &mu);
			t[r] = (double)(woke_ns - signalled_ns) / 1e3;
			pthread_mutex_unlock(&mu);
		}
		qsort(t, (size_t)rounds, sizeof(*t), cmp);
		printf("wake-latency idle_gap_us=%ld rounds=%d median_us=%.1f p10_us=%.1f "
		       "p90_us=%.1f\n",
			gaps_us[g], rounds, t[rounds / 2], t[rounds / 10], t[rounds * 9 / 10]);
		fflush(stdout);
	}
	pthread_mutex_lock(&mu);
	stop = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&mu);
	pthread_join(th, NULL);
	free(t);
	return 0;
}
