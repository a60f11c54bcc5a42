/* Hostile and failing clients against a real sseqd: clients that vanish with work in
 * flight, half-close, nest batches, abuse tags and strings, hold connections or memory,
 * or never read. None may hang, crash or starve anyone else, and every refusal names
 * what was refused and why. */
#include "daemon-harness.h"

#include <sys/resource.h>
#include <sys/stat.h>

/* ---- helpers -------------------------------------------------------------------------- */

static uint64_t send_spin(int fd, uint64_t us)
{
	return send_exec(fd, "spin", "u", NULL, (double[]){(double)us});
}

static Sseq__QueryResult *status_of(int fd)
{
	return query(fd, SSEQ__QUERY_KIND__QUERY_KIND_STATUS);
}

/* Poll the daemon (through fd) until it holds exactly `clients` sessions, no buffers and
 * no device memory, for up to `ms`; true if it got there. */
static bool wait_clean(int fd, size_t clients, int ms)
{
	for (int waited = 0; waited <= ms; waited += 10) {
		Sseq__QueryResult *r = status_of(fd);
		bool clean = r->n_clients == clients && r->device->memory_used == 0;
		sseq__query_result__free_unpacked(r, NULL);
		if (clean) {
			r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS);
			clean = r->n_buffers == 0;
			sseq__query_result__free_unpacked(r, NULL);
			if (clean)
				return true;
		}
		usleep(10000);
	}
	return false;
}

/* The tag-0 notice the daemon sends before it closes a connection, and the close. */
static void expect_closed_with(int fd, Sseq__Status want, const char *needle)
{
	for (;;) {
		Sseq__Message *m = recv_msg(fd);
		ck_assert_msg(m != NULL, "connection closed without a notice (wanted %s)", needle);
		if (m->body_case == SSEQ__MESSAGE__BODY_REPLY && m->reply->tag == 0) {
			ck_assert_int_eq(m->reply->status, want);
			ck_assert_msg(strstr(m->reply->message, needle), "notice '%s' lacks '%s'",
				      m->reply->message, needle);
			sseq__message__free_unpacked(m, NULL);
			break;
		}
		sseq__message__free_unpacked(m, NULL);
	}
	ck_assert(conn_closed(fd));
}

/* ---- a disconnect never hurts the next client (I10) ---------------------------------- */

START_TEST(test_disconnect_with_work_in_flight_does_not_deafen_next_client)
{
	int a, b, c;
	uint64_t buf;
	char msg[256];

	daemon_start((const char *const[]){"--sim-delay", "compute=20ms", NULL});
	c = conn_hello(); /* an observer on its own fd number */
	a = conn_hello();
	ck_assert_int_eq(do_alloc(a, 4096, &buf), SSEQ__STATUS__STATUS_OK);
	uint64_t last = 0;
	for (int i = 0; i < 25; i++) /* ~500 ms of kernels */
		last = send_spin(a, 10);
	ck_assert_int_eq(reply_status(a, last), SSEQ__STATUS__STATUS_OK);
	close(a); /* no sync: Python's Session.close() waits for nothing */
	usleep(20000);
	b = conn_hello(); /* served once while A's work is still in flight */
	ck_assert_int_eq(do_alloc(b, 4096, &buf), SSEQ__STATUS__STATUS_OK);
	/* A's work drains and its session goes; B must still be heard. */
	usleep(700000);
	uint64_t t = send_slice(b, buf, 0, 1024);
	ck_assert_int_eq(expect_reply(b, t, NULL, msg, sizeof(msg)), SSEQ__STATUS__STATUS_OK);
	/* A's resources went once its work completed: B's buffer and slice are all. */
	Sseq__QueryResult *r = query(c, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS);
	ck_assert_uint_eq(r->n_buffers, 2);
	sseq__query_result__free_unpacked(r, NULL);
	r = status_of(c);
	ck_assert_uint_eq(r->n_clients, 2);
	sseq__query_result__free_unpacked(r, NULL);
	/* And B's own disconnect is seen: its buffer goes too. */
	close(b);
	ck_assert(wait_clean(c, 1, 3000));
	close(c);
	daemon_stop();
}
END_TEST

/* Dozens of clients killed at random moments, each followed at once by a new one: the
 * daemon then lists only live processes and holds no buffer. */
START_TEST(test_kill_storm_leaves_only_live_clients)
{
	enum { ROUNDS = 40 };
	int obs, ready[2];

	daemon_start((const char *const[]){"--sim-delay", "compute=rand:0-2ms", NULL});
	obs = conn_hello();
	ck_assert_int_eq(pipe(ready), 0);
	for (int round = 0; round < ROUNDS; round++) {
		pid_t child = fork();
		char x;

		ck_assert_int_ge(child, 0);
		if (child == 0) {
			/* A worker as pytest runs one: buffers held, kernels queued, a sync
			 * now and then, until the kill. */
			int fd = conn_hello();
			uint64_t bufs[8];
			for (int i = 0; i < 3; i++)
				send_spin(fd, 10000); /* ~30 ms to drain after the kill */
			for (int i = 0;; i++) {
				do_alloc(fd, 4096, &bufs[i % 8]);
				send_exec(fd, "fill", "ofu", &bufs[i % 8], (double[]){1, 1024});
				send_spin(fd, 500);
				if (i % 4 == 3)
					sync_all(fd);
				if (i == 1 && write(ready[1], "x", 1) != 1)
					_exit(1);
			}
		}
		/* A client that is never answered (deafened) never says it is ready. */
		struct pollfd p = {ready[0], POLLIN, 0};
		ck_assert_msg(poll(&p, 1, 3000) == 1, "round %d: a new client was never served",
			      round);
		ck_assert_int_eq(read(ready[0], &x, 1), 1);
		usleep((useconds_t)(random() % 20000));
		/* Killed with work in flight, and the next client connects at once: it gets
		 * the same fd number in the daemon while the dead one's work drains. */
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		usleep((useconds_t)(random() % 4000)); /* the daemon sees the EOF meanwhile */
	}
	/* The dead are gone from the list at once; their memory once the one compute stream
	 * has drained their work (~40 x 30 ms at most). */
	Sseq__QueryResult *r = query(obs, SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS);
	ck_assert_uint_eq(r->n_clients, 1);
	ck_assert_uint_eq(r->clients[0]->pid, (uint32_t)getpid());
	sseq__query_result__free_unpacked(r, NULL);
	ck_assert_msg(wait_clean(obs, 1, 5000), "dead clients or their buffers remain");
	/* And a fresh client is served. */
	int fresh = conn_hello();
	uint64_t h;
	ck_assert_int_eq(do_alloc(fresh, 4096, &h), SSEQ__STATUS__STATUS_OK);
	sync_all(fresh);
	close(fresh);
	ck_assert(wait_clean(obs, 1, 2000));
	r = query(obs, SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS);
	ck_assert_uint_eq(r->n_clients, 1);
	ck_assert_uint_eq(r->clients[0]->pid, (uint32_t)getpid());
	sseq__query_result__free_unpacked(r, NULL);
	close(obs);
	close(ready[0]);
	close(ready[1]);
	daemon_stop();
}
END_TEST

/* A client that sends its requests and then shutdown(SHUT_WR) still gets every reply and
 * completion: EOF on read ends the input, not the session. */
START_TEST(test_half_close_gets_its_completions)
{
	int fd;
	struct staging st;
	uint64_t buf, d2h, sync;

	daemon_start((const char *const[]){"--sim-delay", "compute=20ms", NULL});
	fd = conn_hello();
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 4096, &buf), SSEQ__STATUS__STATUS_OK);
	send_spin(fd, 10);
	send_exec(fd, "fill", "ofu", &buf, (double[]){7, 1024});
	d2h = send_d2h(fd, buf, 0, st.handle, 0, 4096);
	{
		Sseq__Request rq = SSEQ__REQUEST__INIT;
		Sseq__Sync s = SSEQ__SYNC__INIT;
		rq.body_case = SSEQ__REQUEST__BODY_SYNC;
		rq.sync = &s;
		sync = send_tagged(fd, &rq);
	}
	ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
	ASSERT_OK_AND_COMPLETED(fd, d2h);
	ck_assert_int_eq(expect_completion(fd, sync), SSEQ__STATUS__STATUS_OK);
	ck_assert(st.map[0] == 7.0f && st.map[1023] == 7.0f);
	/* Then the daemon closes its side, and the session is gone. */
	ck_assert(conn_closed(fd));
	close(fd);
	munmap(st.map, st.size);
	fd = conn_hello();
	ck_assert(wait_clean(fd, 1, 3000));
	close(fd);
	daemon_stop();
}
END_TEST

/* ---- frames of any shape ------------------------------------------------------------- */

/* A Request holding Batch{Request{Batch{...}}} `depth` levels deep, framed. */
static uint8_t *nested_batch_frame(unsigned depth, size_t *len)
{
	/* Built inside out: each level wraps the previous bytes as Request.batch(23) ->
	 * Batch.requests(1). Varint lengths grow by at most 3 bytes a level here. */
	size_t cap = 16 + (size_t)depth * 12;
	uint8_t *buf = malloc(cap), *end = buf + cap, *p = end;
	size_t inner = 0;

	for (unsigned i = 0; i < depth; i++) {
		/* Batch { requests = <inner Request> } */
		uint8_t tmp[16];
		size_t n = 0, v = inner;
		tmp[n++] = 0x0a; /* field 1, length-delimited */
		do {
			tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
			v >>= 7;
		} while (v);
		p -= n;
		memcpy(p, tmp, n);
		inner += n;
		/* Request { tag = 7, batch = <Batch> } */
		n = 0;
		v = inner;
		tmp[n++] = 0x08;
		tmp[n++] = 7;
		tmp[n++] = 0xba; /* field 23 (batch), length-delimited: two key bytes */
		tmp[n++] = 0x01;
		do {
			tmp[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
			v >>= 7;
		} while (v);
		p -= n;
		memcpy(p, tmp, n);
		inner += n;
	}
	p -= 4;
	p[0] = (uint8_t)inner;
	p[1] = (uint8_t)(inner >> 8);
	p[2] = (uint8_t)(inner >> 16);
	p[3] = (uint8_t)(inner >> 24);
	*len = inner + 4;
	memmove(buf, p, *len);
	return buf;
}

START_TEST(test_deep_batch_nesting_is_refused_without_recursing)
{
	static const unsigned depths[] = {2, 3, 5000, 100000};

	daemon_start(NULL);
	for (size_t i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
		size_t len;
		uint8_t *frame = nested_batch_frame(depths[i], &len);
		int fd = conn_hello();

		if (len - 4 > (1u << 20)) {
			/* Over the frame limit: refused by size before anything is unpacked. */
			free(frame);
			frame = nested_batch_frame(80000, &len);
		}
		ck_assert_uint_le(len - 4, 1u << 20);
		send_raw(fd, frame, len, -1);
		free(frame);
		expect_closed_with(fd, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, "nest");
		close(fd);
	}
	/* The daemon is alive and serves the next client. */
	int fd = conn_hello();
	uint64_t h;
	ck_assert_int_eq(do_alloc(fd, 64, &h), SSEQ__STATUS__STATUS_OK);
	close(fd);
	daemon_stop();
}
END_TEST

START_TEST(test_tag_zero_is_refused)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Alloc a = SSEQ__ALLOC__INIT;
	int fd;

	daemon_start(NULL);
	fd = conn_hello();
	a.size = 64;
	rq.tag = 0;
	rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
	rq.alloc = &a;
	send_req(fd, &rq);
	expect_closed_with(fd, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, "tag 0");
	close(fd);
	/* Nothing was allocated under it. */
	fd = conn_hello();
	ck_assert(wait_clean(fd, 1, 1000));
	close(fd);
	daemon_stop();
}
END_TEST

/* A frame with one string field replaced by `bad` (len bytes, NULs allowed). */
static void send_with_string(int fd, Sseq__Request *rq, char **field, const char *bad,
			     size_t badlen)
{
	/* Pack with a placeholder of the same length, then patch the bytes in place. */
	char *ph = malloc(badlen + 1);
	memset(ph, 'Z', badlen);
	ph[badlen] = '\0';
	*field = ph;
	size_t len = sseq__request__get_packed_size(rq);
	uint8_t *buf = malloc(len + 4);
	sseq__request__pack(rq, buf + 4);
	buf[0] = (uint8_t)len;
	buf[1] = (uint8_t)(len >> 8);
	buf[2] = (uint8_t)(len >> 16);
	buf[3] = (uint8_t)(len >> 24);
	uint8_t *at = memmem(buf + 4, len, ph, badlen);
	ck_assert_ptr_nonnull(at);
	memcpy(at, bad, badlen);
	send_raw(fd, buf, len + 4, -1);
	free(buf);
	free(ph);
}

START_TEST(test_string_with_nul_is_refused)
{
	static const char evil[] = "fill\0evil";
	int fd;
	uint64_t buf;

	daemon_start(NULL);
	/* A kernel name: on the hot path (hand decoder) and off it. */
	fd = conn_hello();
	ck_assert_int_eq(do_alloc(fd, 4096, &buf), SSEQ__STATUS__STATUS_OK);
	{
		Sseq__Request rq = SSEQ__REQUEST__INIT;
		Sseq__Execute e = SSEQ__EXECUTE__INIT;
		Sseq__Arg args[3] = {SSEQ__ARG__INIT, SSEQ__ARG__INIT, SSEQ__ARG__INIT};
		Sseq__Arg *argp[3] = {&args[0], &args[1], &args[2]};
		Sseq__BufferArg ba = SSEQ__BUFFER_ARG__INIT;
		ba.handle = buf;
		ba.access = SSEQ__ACCESS__ACCESS_OUT;
		args[0].value_case = SSEQ__ARG__VALUE_BUFFER;
		args[0].buffer = &ba;
		args[1].value_case = SSEQ__ARG__VALUE_F32;
		args[1].f32 = 1;
		args[2].value_case = SSEQ__ARG__VALUE_U64;
		args[2].u64 = 1024;
		e.target_case = SSEQ__EXECUTE__TARGET_KERNEL;
		e.n_args = 3;
		e.args = argp;
		rq.tag = 9;
		rq.body_case = SSEQ__REQUEST__BODY_EXECUTE;
		rq.execute = &e;
		send_with_string(fd, &rq, &e.kernel, evil, sizeof(evil) - 1);
	}
	expect_closed_with(fd, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, "NUL");
	close(fd);
	/* A module path, and a label. */
	fd = conn_hello();
	{
		Sseq__Request rq = SSEQ__REQUEST__INIT;
		Sseq__LoadModule lm = SSEQ__LOAD_MODULE__INIT;
		rq.tag = 9;
		rq.body_case = SSEQ__REQUEST__BODY_LOAD_MODULE;
		rq.load_module = &lm;
		send_with_string(fd, &rq, &lm.path, "ok.fatbin\0../../etc/x", 22);
	}
	expect_closed_with(fd, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, "NUL");
	close(fd);
	fd = conn_hello();
	{
		Sseq__Request rq = SSEQ__REQUEST__INIT;
		Sseq__Alloc a = SSEQ__ALLOC__INIT;
		a.size = 64;
		rq.tag = 9;
		rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
		rq.alloc = &a;
		send_with_string(fd, &rq, &a.label, "x\0y", 3);
	}
	expect_closed_with(fd, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, "NUL");
	close(fd);
	fd = conn_hello();
	ck_assert(wait_clean(fd, 1, 1000));
	close(fd);
	daemon_stop();
}
END_TEST

START_TEST(test_write_sealed_memfd_names_the_seal)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__StagingRegister sr = SSEQ__STAGING_REGISTER__INIT;
	char msg[256];
	int fd, mfd;

	daemon_start(NULL);
	fd = conn_hello();
	mfd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_eq(ftruncate(mfd, 4096), 0);
	ck_assert_int_eq(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_WRITE), 0);
	sr.size = 4096;
	rq.body_case = SSEQ__REQUEST__BODY_STAGING_REGISTER;
	rq.staging_register = &sr;
	ck_assert_int_eq(expect_reply(fd, send_tagged_fd(fd, &rq, mfd), NULL, msg, sizeof(msg)),
			 SSEQ__STATUS__STATUS_INVALID_ARGUMENT);
	ck_assert_msg(strstr(msg, "F_SEAL_WRITE") && strstr(msg, "writable"), "message: %s", msg);
	close(mfd);
	close(fd);
	daemon_stop();
}
END_TEST

START_TEST(test_socket_mode_is_set_not_inherited)
{
	struct stat sb;
	mode_t old = umask(0);

	daemon_start(NULL);
	umask(old);
	ck_assert_int_eq(stat(D.sock, &sb), 0);
	ck_assert_msg((sb.st_mode & 0777) == 0660, "socket mode %o", sb.st_mode & 0777);
	daemon_stop();
	daemon_start((const char *const[]){"--socket-mode", "0600", NULL});
	ck_assert_int_eq(stat(D.sock, &sb), 0);
	ck_assert_msg((sb.st_mode & 0777) == 0600, "socket mode %o", sb.st_mode & 0777);
	daemon_stop();
}
END_TEST

static void add_tests(TCase *tc)
{
	tcase_add_test(tc, test_disconnect_with_work_in_flight_does_not_deafen_next_client);
	tcase_add_test(tc, test_kill_storm_leaves_only_live_clients);
	tcase_add_test(tc, test_half_close_gets_its_completions);
	tcase_add_test(tc, test_deep_batch_nesting_is_refused_without_recursing);
	tcase_add_test(tc, test_tag_zero_is_refused);
	tcase_add_test(tc, test_string_with_nul_is_refused);
	tcase_add_test(tc, test_write_sealed_memfd_names_the_seal);
	tcase_add_test(tc, test_socket_mode_is_set_not_inherited);
}

int main(int argc, char **argv)
{
	return harness_main(argc, argv, "hostile", 60, add_tests);
}
