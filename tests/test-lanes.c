/* Compute lanes on the sim, through a real sseqd: sessions that share nothing run side
 * by side, and a device fault in one session's lane leaves the others working. With every kernel
 * sleeping 1 ms in the sim (--sim-delay compute=1ms, a sleep, so two cores run sixteen of them at
 * once), sixteen clients of 100 kernels each finish in about the time one client takes for its 100,
 * where one compute stream would take sixteen times that; and each client's kernels ran on a
 * compute stream of its own. */
#include "daemon-harness.h"

#include <sys/wait.h>

enum { KERNELS = 100, CLIENTS = 16 };

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A client process: Hello, wait for the go byte on `go`, KERNELS pipelined spin(0)
 * kernels, Sync. Exits 0 when every reply and the Sync came back OK. */
static void client(int go)
{
	const double zero = 0;
	int fd = conn_hello();
	char c;

	if (read(go, &c, 1) != 1)
		_exit(3);
	for (int i = 0; i < KERNELS; i++)
		send_exec(fd, "spin", "u", NULL, &zero);
	sync_all(fd);
	close(fd);
	_exit(0);
}

/* n clients started together: the seconds from the go to the last one's Sync. */
static double run_clients(unsigned n)
{
	int go[2];
	pid_t pids[CLIENTS];
	double t0;

	ck_assert_int_eq(pipe(go), 0);
	for (unsigned i = 0; i < n; i++) {
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0) {
			close(go[1]);
			client(go[0]);
		}
	}
	close(go[0]);
	usleep(200000); /* every client connected and said Hello */
	t0 = now_s();
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(write(go[1], "g", 1), 1);
	for (unsigned i = 0; i < n; i++) {
		int status;

		ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			"client %u exited with status %#x", i, status);
	}
	close(go[1]);
	return now_s() - t0;
}

/* Compute streams with at least `min` points issued. */
static unsigned busy_compute_streams(uint64_t min)
{
	int fd = conn_hello();
	Sseq__QueryResult *r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_STREAMS);
	unsigned n = 0;

	for (size_t i = 0; i < r->n_streams; i++)
		if (r->streams[i]->kind == SSEQ__STREAM_KIND__STREAM_KIND_COMPUTE &&
			r->streams[i]->last_issued >= min)
			n++;
	sseq__query_result__free_unpacked(r, NULL);
	close(fd);
	return n;
}

START_TEST(test_sixteen_sessions_run_side_by_side_on_their_lanes)
{
	const char *const args[] = {"--sim-delay", "compute=1ms", "--compute-streams", "16", NULL};
	double one, sixteen;

	SIM_ONLY();
	daemon_start(args);
	one = run_clients(1);
	sixteen = run_clients(CLIENTS);
	printf("test-lanes: 1 client x %d kernels of 1 ms: %.0f ms; %d clients: %.0f ms\n", KERNELS,
		one * 1e3, CLIENTS, sixteen * 1e3);
	/* The delay is applied: one client's kernels run one after another. */
	ck_assert_msg(one >= KERNELS * 1e-3, "one client took %.3f s", one);
	/* Side by side: one compute stream would take CLIENTS times `one`; a generous bound
	 * for a loaded CI machine, still far below that. */
	ck_assert_msg(sixteen < 4 * one, "%d clients took %.3f s, one %.3f s: not side by side",
		CLIENTS, sixteen, one);
	/* ... because each client had a compute stream of its own. */
	ck_assert_uint_eq(busy_compute_streams(KERNELS), CLIENTS);
	daemon_stop();
}
END_TEST

START_TEST(test_a_device_fault_stays_in_its_lane)
{
	/* Launch 1, session A's kernel, faults on the device: A's lane fails from there on.
	 * B, on a lane of its own, and C, connecting after A left, keep working. */
	const char *const args[] = {"--inject", "device-fail-op=1", NULL};
	uint64_t ya, k;
	int a, b, c;

	SIM_ONLY();
	daemon_start(args);
	a = conn_hello();
	b = conn_hello();
	ck_assert_int_eq(do_alloc(a, 1024, &ya), SSEQ__STATUS__STATUS_OK);
	k = send_exec(a, "fill", "ofu", &ya, (double[]){1, 256});
	ck_assert_int_eq(reply_status(a, k), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(expect_completion(a, k), SSEQ__STATUS__STATUS_DEVICE_ERROR);
	fill_and_check(b, 2.0f);
	/* A leaves: its lane is the least held, but it has failed, so C gets another. */
	close(a);
	usleep(100000);
	c = conn_hello();
	fill_and_check(c, 3.0f);
	close(b);
	close(c);
	daemon_stop();
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, test_sixteen_sessions_run_side_by_side_on_their_lanes);
	tcase_add_test(tc, test_a_device_fault_stays_in_its_lane);
}

int main(int argc, char **argv)
{
	return harness_main(argc, argv, "lanes", 120, add_tests);
}
