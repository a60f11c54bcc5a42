/* SIGTERM with more queued work than the drain allows (sim backend, --sim-delay): at the
 * drain's deadline what the device has not started is cancelled and answered with
 * SHUTTING_DOWN, the daemon exits within the documented time with status 0, and no memory
 * an op may still touch is released (the schedule checker finds nothing; under
 * LeakSanitizer, what is left to a running op is no leak). */
#include "daemon-harness.h"

/* The drain's documented bound plus the time a running op is given after the cancel,
 * with a margin for a loaded machine: when the connections close. The process ends
 * soon after, later under LeakSanitizer (its check at exit scans what an op left running
 * keeps: a second or two on a loaded machine); systemd's TimeoutStopSec= is 20 s. */
#define CLOSED_WITHIN_S 12.5
#define EXIT_WITHIN_S 16.0

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A fill of buffer `a` that asks for its Completion. */
static uint64_t send_fill(int fd, uint64_t a, float v)
{
	struct harness_req r;

	harness_req_exec(&r, "fill", "ofu", &a, (double[]){v, 1024});
	r.rq.want_completion = true;
	return send_tagged(fd, &r.rq);
}

/* The next message before `deadline` (now_s), or NULL at EOF or the deadline. */
static Sseq__Message *recv_before(int fd, double deadline)
{
	struct pollfd p = {fd, POLLIN, 0};
	int ms = (int)((deadline - now_s()) * 1000);

	if (ms <= 0 || poll(&p, 1, ms) <= 0)
		return NULL;
	return recv_msg(fd);
}

/* The daemon's exit status, waiting until `deadline`; -1 (and the daemon killed) when it
 * had not exited by then. */
static int exit_status_before(double deadline)
{
	int status;

	while (now_s() < deadline) {
		pid_t r = waitpid(D.pid, &status, WNOHANG);

		ck_assert_int_ge(r, 0);
		if (r == D.pid)
			return status;
		usleep(20000);
	}
	kill(D.pid, SIGKILL);
	waitpid(D.pid, &status, 0);
	return -1;
}

/* The log's lines that contain `what`, counted. */
static unsigned log_count(const char *path, const char *what)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	unsigned n = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, what)) {
			n++;
			fprintf(stderr, "  log: %s", line);
		}
	fclose(f);
	return n;
}

struct outcome {
	unsigned ok, shutting_down, other;
	double last_answer; /* seconds from SIGTERM to the last Completion, */
	double closed_after; /* to the connection's end */
	double exited_after; /* and to the exit */
	int status;
	char log[64]; /* the daemon's stderr */
};

/* n fills of one buffer queued behind each other (each takes the --sim-delay given), the
 * buffer freed while they are queued, then SIGTERM: what each tag was answered, how the
 * daemon ended, and its log. */
static void queue_then_stop(const char *delay, unsigned n, struct outcome *o)
{
	uint64_t a, tags[32];
	double sent;
	int fd;

	ck_assert_uint_le(n, 32);
	memset(o, 0, sizeof(*o));
	snprintf(o->log, sizeof(o->log), "/tmp/sseq-shutdown-%d.log", (int)getpid());
	D.log_path = o->log;
	daemon_start((const char *const[]){"--sim-delay", delay, "--verify", NULL});
	D.log_path = NULL;
	fd = conn_hello();
	ck_assert_int_eq(do_alloc(fd, 4096, &a), SSEQ__STATUS__STATUS_OK);
	for (unsigned i = 0; i < n; i++)
		tags[i] = send_fill(fd, a, (float)i);
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(reply_status(fd, tags[i]), SSEQ__STATUS__STATUS_OK);
	/* Its memory goes back only once the last fill is done (I5), or never. */
	ck_assert_int_eq(do_free(fd, a), SSEQ__STATUS__STATUS_OK);

	ck_assert_int_eq(kill(D.pid, SIGTERM), 0);
	sent = now_s();
	for (;;) {
		Sseq__Message *m = recv_before(fd, sent + 30);

		if (!m)
			break;
		if (m->body_case == SSEQ__MESSAGE__BODY_COMPLETION) {
			o->last_answer = now_s() - sent;
			if (m->completion->status == SSEQ__STATUS__STATUS_OK)
				o->ok++;
			else if (m->completion->status == SSEQ__STATUS__STATUS_SHUTTING_DOWN)
				o->shutting_down++;
			else
				o->other++;
		}
		sseq__message__free_unpacked(m, NULL);
	}
	o->closed_after = now_s() - sent;
	close(fd);
	o->status = exit_status_before(sent + 30);
	o->exited_after = now_s() - sent;
	unlink(D.sock);
}

/* queue_then_stop, and what every SIGTERM must end in whatever was queued: the daemon
 * exited in time with status 0 (under LeakSanitizer a leak would end it with another),
 * and neither the schedule checker nor the release check (I5) found anything. The log is
 * left for the test's own checks; the test unlinks it. */
static void stop_in_time(const char *delay, unsigned n, struct outcome *o)
{
	queue_then_stop(delay, n, o);
	fprintf(stderr,
		"completions: %u OK, %u SHUTTING_DOWN, %u other, the last after %.2f s; "
		"closed after %.2f s, exit after %.2f s\n",
		o->ok, o->shutting_down, o->other, o->last_answer, o->closed_after,
		o->exited_after);
	ck_assert_msg(o->status != -1, "sseqd still running 30 s after SIGTERM");
	ck_assert_msg(
		WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0, "exit status %#x", o->status);
	ck_assert_msg(
		o->closed_after < CLOSED_WITHIN_S, "closed %.1f s after SIGTERM", o->closed_after);
	ck_assert_msg(
		o->exited_after < EXIT_WITHIN_S, "exited %.1f s after SIGTERM", o->exited_after);
	ck_assert_uint_eq(log_count(o->log, "verify:"), 0);
	ck_assert_uint_eq(log_count(o->log, "(I5)"), 0);
}

/* 10 fills of 2.1 s each: at the deadline (10 s) the fifth runs and ends before the
 * daemon gives up on it; the five after it are cancelled. Every tag is answered. */
START_TEST(test_sigterm_cancels_queued_work_at_the_deadline)
{
	struct outcome o;

	stop_in_time("compute=2100ms", 10, &o);
	ck_assert_uint_ge(log_count(o.log, "cancelling those the device has not started"), 1);
	ck_assert_uint_eq(o.other, 0);
	ck_assert_uint_ge(o.ok, 4);
	ck_assert_uint_ge(o.shutting_down, 1);
	ck_assert_uint_eq(o.ok + o.shutting_down, 10);
	unlink(o.log);
}
END_TEST

/* A fill that runs for a minute is still on the device after the cancel: the daemon
 * exits without it, its memory left allocated, not released under it. */
START_TEST(test_sigterm_leaves_an_op_still_running_without_freeing_its_memory)
{
	struct outcome o;

	stop_in_time("compute=60s", 3, &o);
	ck_assert_uint_eq(log_count(o.log, "still uses it"), 0);
	ck_assert_uint_ge(log_count(o.log, "left allocated, not released"), 1);
	ck_assert_uint_eq(o.ok + o.shutting_down + o.other, 0);
	unlink(o.log);
}
END_TEST

static void add(TCase *tc)
{
	tcase_add_test(tc, test_sigterm_cancels_queued_work_at_the_deadline);
	tcase_add_test(tc, test_sigterm_leaves_an_op_still_running_without_freeing_its_memory);
}

int main(int argc, char **argv)
{
	const char *test_backend = getenv("SSEQ_TEST_BACKEND");

	/* The sim's delays are what is tested: nothing to do on a GPU. */
	if (test_backend && *test_backend && strcmp(test_backend, "sim") != 0)
		return 77;
	return harness_main(argc, argv, "shutdown", 60, add);
}
