/* Hostile and failing clients against a real sseqd: clients that vanish with work in
 * flight, half-close, nest batches, abuse tags and strings, hold connections or memory,
 * or never read. None may hang, crash or starve anyone else, and every refusal names
 * what was refused and why. */
#include "daemon-harness.h"

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

/* Poll the daemon (through fd) until it lists exactly `clients` sessions and `buffers`
 * buffers, for up to `ms`; true if it got there. What a disconnect frees goes when the
 * daemon has read the connection to its end and the session's work completed, which a
 * loaded machine delays by seconds: tests wait for it, never for a fixed time. */
static bool wait_counts(int fd, size_t clients, size_t buffers, int ms)
{
	for (int waited = 0; waited <= ms; waited += 10) {
		Sseq__QueryResult *r = status_of(fd);
		bool there = r->n_clients == clients;
		sseq__query_result__free_unpacked(r, NULL);
		if (there) {
			r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS);
			there = r->n_buffers == buffers;
			sseq__query_result__free_unpacked(r, NULL);
			if (there)
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

/* A connection that got a tag-0 refusal instead of a Welcome. */
static void expect_refused(const char *needle)
{
	int fd = conn_open();
	hello_as(fd, SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR, "gw9");
	expect_closed_with(fd, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED, needle);
	close(fd);
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
	/* A's work drains (~500 ms unloaded) and its session goes: the observer and B are
	 * left, with B's buffer. Waited for, not slept on: a loaded machine takes longer. */
	ck_assert_msg(wait_counts(c, 2, 1, 20000), "A's session or buffer never went");
	/* B must still be heard. */
	uint64_t t = send_slice(b, buf, 0, 1024);
	ck_assert_int_eq(expect_reply(b, t, NULL, msg, sizeof(msg)), SSEQ__STATUS__STATUS_OK);
	/* B's buffer and slice are all. */
	Sseq__QueryResult *r = query(c, SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS);
	ck_assert_uint_eq(r->n_buffers, 2);
	sseq__query_result__free_unpacked(r, NULL);
	r = status_of(c);
	ck_assert_uint_eq(r->n_clients, 2);
	sseq__query_result__free_unpacked(r, NULL);
	/* And B's own disconnect is seen: its buffer goes too. */
	close(b);
	ck_assert(wait_clean(c, 1, 20000));
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
		/* A client that is never answered (deafened) never says it is ready; a slow
		 * one on a loaded machine does, within seconds. */
		struct pollfd p = {ready[0], POLLIN, 0};
		ck_assert_msg(
			poll(&p, 1, 15000) == 1, "round %d: a new client was never served", round);
		ck_assert_int_eq(read(ready[0], &x, 1), 1);
		usleep((useconds_t)(random() % 20000));
		/* Killed with work in flight, and the next client connects at once: it gets
		 * the same fd number in the daemon while the dead one's work drains. */
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		usleep((useconds_t)(random() % 4000)); /* the daemon sees the EOF meanwhile */
	}
	/* The dead leave the list once the daemon reads their connection to its end: the
	 * requests a worker wrote before it died are read first (a few turns of the loop,
	 * longer when its session is paused on a full window), so this is not at once and a
	 * loaded machine stretches it to seconds. Their memory goes once the one compute
	 * stream has drained their work (~40 x 30 ms unloaded). */
	ck_assert_msg(wait_clean(obs, 1, 20000), "dead clients or their buffers remain");
	Sseq__QueryResult *r = query(obs, SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS);
	ck_assert_uint_eq(r->n_clients, 1);
	ck_assert_uint_eq(r->clients[0]->pid, (uint32_t)getpid());
	sseq__query_result__free_unpacked(r, NULL);
	/* And a fresh client is served. */
	int fresh = conn_hello();
	uint64_t h;
	ck_assert_int_eq(do_alloc(fresh, 4096, &h), SSEQ__STATUS__STATUS_OK);
	sync_all(fresh);
	close(fresh);
	ck_assert(wait_clean(obs, 1, 20000));
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
	struct harness_req r;

	daemon_start((const char *const[]){"--sim-delay", "compute=20ms", NULL});
	fd = conn_hello();
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 4096, &buf), SSEQ__STATUS__STATUS_OK);
	send_spin(fd, 10);
	send_exec(fd, "fill", "ofu", &buf, (double[]){7, 1024});
	d2h = send_d2h(fd, buf, 0, st.handle, 0, 4096);
	sync = send_tagged(fd, harness_req_sync(&r));
	ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
	ASSERT_OK_AND_COMPLETED(fd, d2h);
	ck_assert_int_eq(expect_completion(fd, sync), SSEQ__STATUS__STATUS_OK);
	ck_assert(st.map[0] == 7.0f && st.map[1023] == 7.0f);
	/* Then the daemon closes its side, and the session is gone. */
	ck_assert(conn_closed(fd));
	close(fd);
	munmap(st.map, st.size);
	fd = conn_hello();
	ck_assert(wait_clean(fd, 1, 20000));
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
	frame_put_len(p, (uint32_t)inner);
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

		if (len - 4 > FRAME_MAX) {
			/* Over the frame limit: refused by size before anything is unpacked. */
			free(frame);
			frame = nested_batch_frame(80000, &len);
		}
		ck_assert_uint_le(len - 4, FRAME_MAX);
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
	struct harness_req r;
	Sseq__Request *rq = harness_req_alloc(&r, 64, "", 0);
	int fd;

	daemon_start(NULL);
	fd = conn_hello();
	rq->tag = 0;
	send_req(fd, rq);
	expect_closed_with(fd, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, "tag 0");
	close(fd);
	/* Nothing was allocated under it. */
	fd = conn_hello();
	ck_assert(wait_clean(fd, 1, 20000));
	close(fd);
	daemon_stop();
}
END_TEST

/* On a new connection, rq with one string field replaced by `bad` (len bytes, NULs
 * allowed): refused as a protocol error that names the NUL, and the connection closed. */
static void expect_string_refused(Sseq__Request *rq, char **field, const char *bad, size_t badlen)
{
	int fd = conn_hello();

	/* Pack with a placeholder of the same length, then patch the bytes in place. */
	char *ph = malloc(badlen + 1);
	memset(ph, 'Z', badlen);
	ph[badlen] = '\0';
	*field = ph;
	size_t room = sseq__request__get_packed_size(rq) + FRAME_HEADER;
	uint8_t *buf = malloc(room);
	size_t len = frame_of(rq, buf, room);
	uint8_t *at = memmem(buf + FRAME_HEADER, len - FRAME_HEADER, ph, badlen);
	ck_assert_ptr_nonnull(at);
	memcpy(at, bad, badlen);
	send_raw(fd, buf, len, -1);
	free(buf);
	free(ph);
	expect_closed_with(fd, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, "NUL");
	close(fd);
}

START_TEST(test_string_with_nul_is_refused)
{
	static const char evil[] = "fill\0evil";
	int fd;

	daemon_start(NULL);
	/* A kernel name: the hot path's (the hand decoder declines it to the check). */
	{
		struct harness_req r;
		/* Buffer 1: refused before any handle is looked up. */
		Sseq__Request *rq =
			harness_req_exec(&r, "", "ofu", (uint64_t[]){1}, (double[]){1, 1024});

		rq->tag = 9;
		expect_string_refused(rq, &r.body.exec.e.kernel, evil, sizeof(evil) - 1);
	}
	/* A module path, and a label. */
	{
		Sseq__Request rq = SSEQ__REQUEST__INIT;
		Sseq__LoadModule lm = SSEQ__LOAD_MODULE__INIT;
		rq.tag = 9;
		rq.body_case = SSEQ__REQUEST__BODY_LOAD_MODULE;
		rq.load_module = &lm;
		expect_string_refused(&rq, &lm.path, "ok.fatbin\0../../etc/x", 22);
	}
	{
		struct harness_req r;
		Sseq__Request *rq = harness_req_alloc(&r, 64, "", 0);

		rq->tag = 9;
		expect_string_refused(rq, &r.body.alloc.label, "x\0y", 3);
	}
	fd = conn_hello();
	ck_assert(wait_clean(fd, 1, 20000));
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

/* ---- the hand decoder declines what protobuf-c declines ------------------------------ */

static void send_bytes_framed(int fd, const uint8_t *body, size_t len)
{
	uint8_t frame[256];

	ck_assert_uint_le(len + 4, sizeof(frame));
	frame_put_len(frame, (uint32_t)len);
	memcpy(frame + 4, body, len);
	send_raw(fd, frame, len + 4, -1);
}

START_TEST(test_overlong_keys_and_prefixes_are_protocol_errors)
{
	/* tag 1 under a 6-byte key, then an empty CopyD2H. */
	static const uint8_t long_key[] = {
		0x88, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01, 0x8a, 0x01, 0x00};
	/* tag 5, then a CopyD2H whose length prefix 0 is written in 6 bytes. */
	static const uint8_t long_prefix[] = {
		0x08, 0x05, 0x8a, 0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
	const uint8_t *frames[] = {long_key, long_prefix};
	const size_t lens[] = {sizeof(long_key), sizeof(long_prefix)};

	daemon_start(NULL);
	for (int i = 0; i < 2; i++) {
		int fd = conn_hello();
		send_bytes_framed(fd, frames[i], lens[i]);
		expect_closed_with(fd, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, "decode");
		close(fd);
	}
	daemon_stop();
}
END_TEST

/* want_completion written as a 10-byte varint (2^63): protobuf-c reads true. */
START_TEST(test_want_completion_in_ten_bytes_is_true)
{
	struct staging st;
	uint64_t buf;
	uint8_t body[64];
	size_t n = 0;
	int fd;

	daemon_start(NULL);
	fd = conn_hello();
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 4096, &buf), SSEQ__STATUS__STATUS_OK);
	body[n++] = 0x08; /* tag 77 */
	body[n++] = 77;
	body[n++] = 0x10; /* want_completion = 2^63 */
	for (int i = 0; i < 9; i++)
		body[n++] = 0x80;
	body[n++] = 0x01;
	body[n++] = 0x82; /* copy_h2d (16) */
	body[n++] = 0x01;
	size_t at = n++;
	uint64_t fields[][2] = {{1, st.handle}, {3, buf}, {5, 4096}};
	for (int f = 0; f < 3; f++) {
		body[n++] = (uint8_t)(fields[f][0] << 3);
		for (uint64_t v = fields[f][1];; v >>= 7) {
			body[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
			if (v <= 0x7f)
				break;
		}
	}
	body[at] = (uint8_t)(n - at - 1);
	send_bytes_framed(fd, body, n);
	ck_assert_int_eq(reply_status(fd, 77), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(expect_completion(fd, 77), SSEQ__STATUS__STATUS_OK);
	munmap(st.map, st.size);
	close(fd);
	daemon_stop();
}
END_TEST

/* ---- bounded resources ------------------------------------------------------------- */

/* A session that has sent a frame's length prefix, announcing FRAME_MAX bytes, and none
 * of them yet. */
static int conn_mid_frame(void)
{
	uint8_t hdr[4];
	int fd = conn_hello();

	frame_put_len(hdr, FRAME_MAX);
	send_raw(fd, hdr, 4, -1);
	return fd;
}

START_TEST(test_connections_are_capped_in_total_and_per_uid)
{
	int fds[4];

	daemon_start((const char *const[]){
		"--max-clients", "4", "--max-clients-per-uid", "3", "--socket-mode", "0666", NULL});
	for (int i = 0; i < 3; i++)
		fds[i] = conn_hello();
	expect_refused("--max-clients-per-uid");
	/* Another user still gets in, up to the total. */
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(3);
		int fd = conn_hello();
		uint64_t h;
		if (do_alloc(fd, 64, &h) != SSEQ__STATUS__STATUS_OK)
			_exit(1);
		pause();
		_exit(0);
	}
	fds[3] = -1;
	for (int i = 0; i < 200; i++) {
		Sseq__QueryResult *r = status_of(fds[0]);
		bool in = r->n_clients == 4;
		sseq__query_result__free_unpacked(r, NULL);
		if (in)
			break;
		usleep(10000);
	}
	expect_refused("--max-clients");
	Sseq__Counters c = stats_of(fds[0]);
	ck_assert_uint_eq(c.connections_refused, 2);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	/* A place freed is a place taken. */
	ck_assert(wait_clean(fds[0], 3, 20000));
	close(fds[2]);
	/* Once the daemon has seen the close (not after a fixed sleep: under load it may not
	 * have, and the new connection would still be over --max-clients-per-uid). */
	ck_assert(wait_clean(fds[0], 2, 20000));
	fds[2] = conn_hello();
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	daemon_stop();
}
END_TEST

START_TEST(test_silent_connection_is_closed_after_hello_timeout)
{
	int quiet, fd;

	daemon_start((const char *const[]){"--hello-timeout", "300ms", NULL});
	quiet = conn_open();
	fd = conn_hello();
	usleep(1500000); /* the sweep runs once a second */
	expect_closed_with(quiet, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, "--hello-timeout");
	close(quiet);
	/* The one that said Hello stays. */
	ck_assert_uint_eq(stats_of(fd).hello_timeouts, 1);
	close(fd);
	daemon_stop();
}
END_TEST

/* Pinned partial frames: each connection sends most of a 1 MiB frame and stops. Large
 * frames share --max-input-memory (the rest wait), small ones are never held up, and a
 * frame that stalls past --frame-timeout closes its connection. */
START_TEST(test_partial_frames_are_bounded_and_time_out)
{
	enum { PINNERS = 10, PART = 900 << 10 };
	int pin[PINNERS], fd;
	pid_t kids[PINNERS];
	uint8_t *junk = calloc(1, PART);
	uint64_t h;

	daemon_start(
		(const char *const[]){"--max-input-memory", "4M", "--frame-timeout", "2s", NULL});
	fd = conn_hello();
	for (int i = 0; i < PINNERS; i++) {
		pin[i] = conn_mid_frame();
		/* The daemon stops reading those past the limit: a child each blocks. */
		kids[i] = fork();
		ck_assert_int_ge(kids[i], 0);
		if (kids[i] == 0) {
			(void)!send(pin[i], junk, PART, MSG_NOSIGNAL);
			_exit(0);
		}
	}
	/* Until the children's sends have reached the limit (~300 ms unloaded). */
	Sseq__Counters c = stats_of(fd);
	for (int waited = 0; waited < 20000 && !c.input_paused; waited += 10) {
		usleep(10000);
		c = stats_of(fd);
	}
	ck_assert_uint_ge(c.input_paused, 1);
	ck_assert_msg(c.input_bytes <= (4u << 20) + (PINNERS + 1) * (128u << 10),
		"%llu bytes of input buffered", (unsigned long long)c.input_bytes);
	/* Small frames are served meanwhile, from a new client too. */
	ck_assert_int_eq(do_alloc(fd, 64, &h), SSEQ__STATUS__STATUS_OK);
	int fresh = conn_hello();
	ck_assert_int_eq(do_alloc(fresh, 64, &h), SSEQ__STATUS__STATUS_OK);
	close(fresh);
	/* Then the stalled frames time out, each connection told why. A frame paused at the
	 * limit is timed too (it holds memory the others wait for), so all go about
	 * --frame-timeout after their first bytes, in the order the sweep finds them: not
	 * pin[0] first. */
	for (int left = PINNERS; left > 0;) {
		struct pollfd p[PINNERS];
		int n = 0;

		for (int i = 0; i < PINNERS; i++)
			if (pin[i] >= 0)
				p[n++] = (struct pollfd){pin[i], POLLIN, 0};
		ck_assert_msg(
			poll(p, (nfds_t)n, 30000) > 0, "%d stalled frames never timed out", left);
		for (int i = 0; i < PINNERS; i++) {
			bool ready = false;
			for (int j = 0; j < n; j++)
				ready |= p[j].fd == pin[i] && p[j].revents;
			if (!ready)
				continue;
			expect_closed_with(
				pin[i], SSEQ__STATUS__STATUS_PROTOCOL_ERROR, "--frame-timeout");
			close(pin[i]);
			pin[i] = -1;
			kill(kids[i], SIGKILL);
			waitpid(kids[i], NULL, 0);
			left--;
		}
	}
	c = stats_of(fd);
	ck_assert_uint_eq(c.frame_timeouts, PINNERS);
	free(junk);
	close(fd);
	daemon_stop();
}
END_TEST

/* A trace follower that never reads: its output stays bounded, entries past the bound
 * are dropped and counted, and when it reads again it hears how many. */
START_TEST(test_trace_follower_that_never_reads_is_bounded)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Query q = SSEQ__QUERY__INIT;
	Sseq__TraceOptions t = SSEQ__TRACE_OPTIONS__INIT;
	int follower, fd;
	uint64_t bufs[2], tag;
	uint64_t dropped_seen = 0;

	daemon_start(NULL);
	follower = conn_hello();
	t.follow = true;
	q.kind = SSEQ__QUERY_KIND__QUERY_KIND_TRACE;
	q.trace = &t;
	rq.body_case = SSEQ__REQUEST__BODY_QUERY;
	rq.query = &q;
	tag = send_tagged(follower, &rq);
	fd = conn_hello();
	ck_assert_int_eq(do_alloc(fd, 4096, &bufs[0]), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 4096, &bufs[1]), SSEQ__STATUS__STATUS_OK);
	for (int i = 0; i < 40000 && !stats_of(fd).trace_entries_dropped; i += 500) {
		for (int j = 0; j < 500; j++)
			send_exec(fd, "scale", "iofu", bufs, (double[]){2, 1024});
		sync_all(fd);
	}
	ck_assert_uint_gt(stats_of(fd).trace_entries_dropped, 0);
	/* Now it reads: a later answer says how many it missed. */
	send_exec(fd, "scale", "iofu", bufs, (double[]){2, 1024});
	sync_all(fd);
	for (int i = 0; i < 100000 && !dropped_seen; i++) {
		Sseq__Message *m = recv_msg(follower);
		ck_assert_ptr_nonnull(m);
		if (m->body_case == SSEQ__MESSAGE__BODY_QUERY_RESULT && m->query_result->tag == tag)
			dropped_seen = m->query_result->trace_dropped;
		sseq__message__free_unpacked(m, NULL);
		if (i % 64 == 63) {
			send_exec(fd, "scale", "iofu", bufs, (double[]){2, 1024});
			sync_all(fd);
		}
	}
	ck_assert_uint_gt(dropped_seen, 0);
	close(follower);
	close(fd);
	daemon_stop();
}
END_TEST

START_TEST(test_staging_is_capped_per_session_and_in_total)
{
	struct staging a1, a2, b1, c1;
	char msg[256];
	int a, b, c;

	daemon_start((const char *const[]){
		"--client-staging-limit", "1M", "--staging-limit", "1536k", NULL});
	a = conn_hello();
	b = conn_hello();
	c = conn_hello();
	ck_assert_int_eq(staging_register(a, &a1, 768 << 10, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		staging_register(a, &a2, 512 << 10, true), SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
	ck_assert_int_eq(staging_register(b, &b1, 768 << 10, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		staging_register(c, &c1, 64 << 10, true), SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
	Sseq__Counters k = stats_of(a);
	ck_assert_uint_eq(k.staging_refused, 2);
	ck_assert_uint_eq(k.staging_bytes, 1536 << 10);
	/* The messages name the limit. */
	{
		Sseq__Request rq = SSEQ__REQUEST__INIT;
		Sseq__StagingRegister sr = SSEQ__STAGING_REGISTER__INIT;
		int mfd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		ck_assert_int_eq(ftruncate(mfd, 4096), 0);
		ck_assert_int_eq(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
		sr.size = 4096;
		rq.body_case = SSEQ__REQUEST__BODY_STAGING_REGISTER;
		rq.staging_register = &sr;
		ck_assert_int_eq(
			expect_reply(c, send_tagged_fd(c, &rq, mfd), NULL, msg, sizeof(msg)),
			SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
		ck_assert_msg(strstr(msg, "--staging-limit"), "message: %s", msg);
		close(mfd);
	}
	/* A session's arenas go with it. */
	close(a);
	for (int i = 0; i < 100 && stats_of(b).staging_bytes != 768 << 10; i++)
		usleep(10000);
	ck_assert_uint_eq(stats_of(b).staging_bytes, 768 << 10);
	ck_assert_int_eq(staging_register(c, &c1, 64 << 10, true), SSEQ__STATUS__STATUS_OK);
	munmap(a1.map, a1.size);
	munmap(a2.map, a2.size);
	munmap(b1.map, b1.size);
	munmap(c1.map, c1.size);
	close(b);
	close(c);
	daemon_stop();
}
END_TEST

START_TEST(test_handles_and_arenas_are_capped_per_session)
{
	struct staging a1, a2;
	uint64_t b, h;
	char msg[256];
	int fd;

	daemon_start((const char *const[]){
		"--client-handle-limit", "4", "--client-arena-limit", "1", NULL});
	fd = conn_hello();
	ck_assert_int_eq(staging_register(fd, &a1, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		staging_register(fd, &a2, 4096, true), SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
	ck_assert_int_eq(do_alloc(fd, 4096, &b), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		expect_reply(fd, send_slice(fd, b, 0, 64), &h, NULL, 0), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(
		expect_reply(fd, send_slice(fd, b, 64, 64), &h, NULL, 0), SSEQ__STATUS__STATUS_OK);
	/* A fifth handle: refused, named. */
	ck_assert_int_eq(expect_reply(fd, send_slice(fd, b, 128, 64), NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
	ck_assert_msg(strstr(msg, "--client-handle-limit"), "message: %s", msg);
	Sseq__Counters c = stats_of(fd);
	ck_assert_uint_eq(c.handles_refused, 1);
	ck_assert_uint_eq(c.staging_refused, 1);
	munmap(a1.map, a1.size);
	munmap(a2.map, a2.size);
	close(fd);
	daemon_stop();
}
END_TEST

/* An arena unregistered while a copy still uses it stays mapped in the daemon: it counts
 * against the arena limits until the copy completes. Register, queue a D2H behind a slow
 * kernel, unregister, repeat: refused at the session's limit, not mapped without end. */
START_TEST(test_arenas_in_use_count_after_unregister)
{
	struct staging st;
	uint64_t y, tags[4];
	unsigned mapped = 0;
	char msg[256] = "";
	int fd;

	daemon_start((const char *const[]){"--client-arena-limit", "4", "--arena-limit", "8",
		"--sim-delay", "compute=1s", NULL});
	fd = conn_hello();
	ck_assert_int_eq(do_alloc(fd, 1024, &y), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "fill", "ofu", &y, (double[]){1, 256})),
		SSEQ__STATUS__STATUS_OK);
	for (; mapped < 100; mapped++) {
		Sseq__Request rq = SSEQ__REQUEST__INIT;
		Sseq__StagingUnregister su = SSEQ__STAGING_UNREGISTER__INIT;
		Sseq__StagingRegister sr = SSEQ__STAGING_REGISTER__INIT;
		int mfd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);

		ck_assert_int_ge(mfd, 0);
		ck_assert_int_eq(ftruncate(mfd, 1ll << 30), 0); /* sparse */
		ck_assert_int_eq(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
		sr.size = 1ull << 30;
		rq.body_case = SSEQ__REQUEST__BODY_STAGING_REGISTER;
		rq.staging_register = &sr;
		Sseq__Status r = expect_reply(
			fd, send_tagged_fd(fd, &rq, mfd), &st.handle, msg, sizeof(msg));
		close(mfd);
		if (r != SSEQ__STATUS__STATUS_OK) {
			ck_assert_int_eq(r, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
			break;
		}
		tags[mapped % 4] = send_d2h(fd, y, 0, st.handle, 0, 4);
		ck_assert_int_eq(reply_status(fd, tags[mapped % 4]), SSEQ__STATUS__STATUS_OK);
		su.staging = st.handle;
		rq = (Sseq__Request)SSEQ__REQUEST__INIT;
		rq.body_case = SSEQ__REQUEST__BODY_STAGING_UNREGISTER;
		rq.staging_unregister = &su;
		ck_assert_int_eq(reply_status(fd, send_tagged(fd, &rq)), SSEQ__STATUS__STATUS_OK);
	}
	ck_assert_uint_eq(mapped, 4);
	ck_assert_msg(strstr(msg, "--client-arena-limit"), "message: %s", msg);
	ck_assert_uint_eq(stats_of(fd).staging_bytes, 4ull << 30);
	/* The copies complete: the arenas go, and their charge with them. */
	for (unsigned i = 0; i < 4; i++)
		ck_assert_int_eq(expect_completion(fd, tags[i]), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(stats_of(fd).staging_bytes, 0);
	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	munmap(st.map, st.size);
	close(fd);
	daemon_stop();
}
END_TEST

/* Waits pile up without a stream window to stop them: at --client-inflight-limit the
 * daemon stops taking a session's requests until half completed; none is lost. */
START_TEST(test_inflight_cap_pauses_a_session_and_loses_nothing)
{
	enum { N = 40 };
	uint64_t buf, tags[2 * N];
	int fd, obs;
	uint64_t most = 0;

	daemon_start((const char *const[]){
		"--client-inflight-limit", "8", "--sim-delay", "compute=10ms", NULL});
	fd = conn_hello();
	obs = conn_hello();
	ck_assert_int_eq(do_alloc(fd, 4096, &buf), SSEQ__STATUS__STATUS_OK);
	for (int i = 0; i < N; i++) {
		struct harness_req r;

		tags[2 * i] = send_exec(fd, "fill", "ofu", &buf, (double[]){(double)i, 1024});
		tags[2 * i + 1] = send_tagged(fd, harness_req_await(&r, buf));
	}
	for (int i = 0; i < 30; i++) {
		Sseq__QueryResult *r = query(obs, SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS);
		for (size_t c = 0; c < r->n_clients; c++)
			if (r->clients[c]->inflight > most)
				most = r->clients[c]->inflight;
		sseq__query_result__free_unpacked(r, NULL);
		usleep(10000);
	}
	ck_assert_msg(most >= 4 && most <= 8, "%llu in flight at most", (unsigned long long)most);
	for (int i = 0; i < 2 * N; i++)
		ck_assert_int_eq(reply_status(fd, tags[i]), SSEQ__STATUS__STATUS_OK);
	sync_all(fd);
	ck_assert_uint_ge(stats_of(obs).inflight_capped, 1);
	close(fd);
	close(obs);
	daemon_stop();
}
END_TEST

START_TEST(test_device_memory_quota_per_session)
{
	struct harness_req r;
	uint64_t h1, h2;
	char msg[256];
	int fd;

	daemon_start((const char *const[]){"--client-memory-limit", "1M", NULL});
	fd = conn_hello();
	ck_assert_int_eq(do_alloc(fd, 768 << 10, &h1), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(expect_reply(fd, send_tagged(fd, harness_req_alloc(&r, 512 << 10, "", 0)),
				 NULL, msg, sizeof(msg)),
		SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
	ck_assert_msg(strstr(msg, "--client-memory-limit") && strstr(msg, "786432") &&
			strstr(msg, "1048576"),
		"message: %s", msg);
	ck_assert_uint_eq(stats_of(fd).quota_refused, 1);
	/* Another session has a quota of its own. */
	int other = conn_hello();
	ck_assert_int_eq(do_alloc(other, 768 << 10, &h2), SSEQ__STATUS__STATUS_OK);
	close(other);
	/* Freed memory counts no more. */
	ck_assert_int_eq(do_free(fd, h1), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1 << 20, &h2), SSEQ__STATUS__STATUS_OK);
	close(fd);
	daemon_stop();
}
END_TEST

static unsigned long cpu_ticks(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	/* Fields 14 and 15 (utime, stime), after the parenthesised command name. */
	const char *p = strrchr(buf, ')');
	ck_assert_int_eq(
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st), 2);
	return ut + st;
}

/* Out of descriptors: the listener rests instead of spinning on accept(), logs once,
 * and serves again once descriptors are back. */
START_TEST(test_out_of_descriptors_does_not_spin)
{
	enum { HOLD = 80 };
	char log[64], line[512];
	int fds[HOLD], obs, lines = 0;
	unsigned long before;
	FILE *f;

	snprintf(log, sizeof(log), "/tmp/sseq-test-%d.log", (int)getpid());
	D.log_path = log;
	D.nofile = 48;
	daemon_start((const char *const[]){"--max-clients", "200", NULL});
	obs = conn_hello();
	for (int i = 0; i < HOLD; i++)
		fds[i] = conn_open(); /* past the limit they wait in the listen queue */
	usleep(200000);
	before = cpu_ticks(D.pid);
	usleep(1000000);
	ck_assert_msg(cpu_ticks(D.pid) - before < 30, "sseqd spun: %lu ticks in 1 s",
		cpu_ticks(D.pid) - before);
	ck_assert_uint_ge(stats_of(obs).accept_errors, 1);
	for (int i = 0; i < HOLD; i++)
		close(fds[i]);
	/* Served again once descriptors are back. */
	usleep(300000);
	int fd = conn_hello();
	uint64_t h;
	ck_assert_int_eq(do_alloc(fd, 64, &h), SSEQ__STATUS__STATUS_OK);
	close(fd);
	close(obs);
	daemon_stop();
	f = fopen(log, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		lines += strstr(line, "accept failed") != NULL;
	fclose(f);
	unlink(log);
	ck_assert_msg(lines >= 1 && lines <= 2, "%d accept-failure lines logged", lines);
}
END_TEST

/* Connections part-way through large frames take all of --max-input-memory and are
 * all paused (each frame needs more than any of them could get); then their clients close
 * them all. The daemon still sees them go (a pause does not stop it watching for a
 * hang-up): their sessions leave at once with the input they held, and a large frame is
 * served again. */
START_TEST(test_closed_connections_paused_mid_frame_give_input_memory_back)
{
	enum { PINNERS = 12, PART = FRAME_MAX - 16, LABEL = 600 << 10 };
	int pin[PINNERS], fd, go[2];
	pid_t kids[PINNERS];
	uint8_t *junk = calloc(1, PART);
	char *label = malloc(LABEL + 1);
	struct harness_req r;

	/* The default --frame-timeout (10 s): none of them times out meanwhile. */
	daemon_start((const char *const[]){"--max-input-memory", "4M", NULL});
	fd = conn_hello();
	ck_assert_int_eq(pipe(go), 0);
	for (int i = 0; i < PINNERS; i++) {
		pin[i] = conn_mid_frame();
		kids[i] = fork();
		ck_assert_int_ge(kids[i], 0);
		if (kids[i] == 0) {
			char x;
			/* All at once, so that they grow together and all stop short. */
			if (read(go[0], &x, 1) == 1)
				(void)!send(pin[i], junk, PART, MSG_NOSIGNAL);
			_exit(0);
		}
	}
	for (int i = 0; i < PINNERS; i++)
		ck_assert_int_eq(write(go[1], "x", 1), 1);
	close(go[0]);
	close(go[1]);
	Sseq__Counters c = stats_of(fd);
	for (int waited = 0; waited < 20000 && !c.input_paused; waited += 10) {
		usleep(10000);
		c = stats_of(fd);
	}
	ck_assert_uint_ge(c.input_paused, 1);
	usleep(300000); /* until every pinner stopped where it could not go on */
	for (int i = 0; i < PINNERS; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
		close(pin[i]);
	}
	ck_assert_msg(wait_counts(fd, 1, 0, 3000),
		"closed connections paused for input memory are still listed");
	c = stats_of(fd);
	ck_assert_msg(c.input_bytes <= (256u << 10), "%llu bytes of input still buffered",
		(unsigned long long)c.input_bytes);
	/* A frame over 128 KiB is read and answered (its label is refused or cut, as may be). */
	memset(label, 'x', LABEL);
	label[LABEL] = '\0';
	ck_assert_int_ne(expect_reply(fd, send_tagged(fd, harness_req_alloc(&r, 64, label, 0)),
				 NULL, NULL, 0),
		-1);
	free(label);
	free(junk);
	close(fd);
	daemon_stop();
}
END_TEST

/* Memfds parked ahead of their frame count against the descriptors sseqd raises its limit
 * to: one user holding every connection it may, each with all the descriptors it may
 * park, leaves another user served. The daemon starts with a low soft limit (and a high
 * hard one), so it holds what it asks for itself. */
START_TEST(test_parked_descriptors_leave_another_user_served)
{
	enum { PARK = 8 /* SESSION_MAX_FDS */, PER_UID = 12 };
	int fds[PER_UID], memfds[PARK], obs, status;
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * PARK)];
	} ctl;
	struct rlimit saved, low;
	uint8_t byte = 0;

	for (int i = 0; i < PARK; i++) {
		memfds[i] = memfd_create("park", MFD_CLOEXEC);
		ck_assert_int_ge(memfds[i], 0);
	}
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
	ck_assert_uint_ge(saved.rlim_max, 4096);
	low = saved;
	low.rlim_cur = 32;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	daemon_start((const char *const[]){"--max-clients", "16", "--max-clients-per-uid", "12",
		"--arena-limit", "4", "--socket-mode", "0666", NULL});
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &saved), 0);
	obs = conn_hello();
	/* The rest of this user's connections, each with a frame's first byte and 8 memfds. */
	for (int i = 1; i < PER_UID; i++) {
		struct iovec iov = {&byte, 1};
		struct msghdr msg = {.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = ctl.buf,
			.msg_controllen = sizeof(ctl.buf)};
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

		fds[i] = conn_hello();
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * PARK);
		memcpy(CMSG_DATA(cm), memfds, sizeof(memfds));
		ck_assert_int_eq(sendmsg(fds[i], &msg, MSG_NOSIGNAL), 1);
	}
	usleep(200000); /* the daemon reads them */
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		alarm(5); /* never served: killed, and the test fails */
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(3);
		int fd = conn_hello();
		uint64_t h;
		_exit(do_alloc(fd, 64, &h) == SSEQ__STATUS__STATUS_OK ? 0 : 1);
	}
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		"another user was not served (status 0x%x)", (unsigned)status);
	ck_assert_uint_eq(stats_of(obs).accept_errors, 0);
	for (int i = 1; i < PER_UID; i++)
		close(fds[i]);
	for (int i = 0; i < PARK; i++)
		close(memfds[i]);
	close(obs);
	daemon_stop();
}
END_TEST

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A client reconnecting in a loop past --max-clients: every refusal is counted, but the
 * log gets a line a second at most, which says how many more were refused; what no line
 * told of yet is told at exit. */
START_TEST(test_refused_connections_are_logged_at_most_once_a_second)
{
	enum { TRIES = 300 };
	char log[64], line[512];
	int obs, lines = 0;
	unsigned long long told = 0;
	double t0;
	FILE *f;

	snprintf(log, sizeof(log), "/tmp/sseq-test-refused-%d.log", (int)getpid());
	D.log_path = log;
	daemon_start((const char *const[]){"--max-clients", "1", NULL});
	obs = conn_hello();
	t0 = now_s();
	for (int i = 0; i < TRIES; i++)
		close(conn_open());
	Sseq__Counters c = stats_of(obs);
	for (int waited = 0; waited < 10000 && c.connections_refused < TRIES; waited += 10) {
		usleep(10000);
		c = stats_of(obs);
	}
	ck_assert_uint_eq(c.connections_refused, TRIES);
	close(obs);
	daemon_stop();
	const int seconds = (int)(now_s() - t0) + 1;
	f = fopen(log, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		const char *more;
		unsigned long long n;

		if (strstr(line, "refused a connection")) {
			lines++;
			told++;
			if ((more = strstr(line, "(and ")) && sscanf(more, "(and %llu", &n) == 1)
				told += n;
		} else if ((more = strstr(line, "refused ")) &&
			sscanf(more, "refused %llu more connections", &n) == 1) {
			lines++;
			told += n;
		}
	}
	fclose(f);
	unlink(log);
	/* The first, one a second after, and the rest at exit. */
	ck_assert_msg(lines >= 1 && lines <= seconds + 2, "%d lines for %d refusals in %d s", lines,
		TRIES, seconds);
	ck_assert_uint_eq(told, TRIES);
}
END_TEST

START_TEST(test_bad_limit_values_are_refused)
{
	static const char *const bad[][2] = {
		{"--max-input-memory", "1k"},
		{"--client-memory-limit", "12Q"},
		{"--hello-timeout", "soon"},
		{"--socket-mode", "0999"},
		{"--max-clients", "0"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char cmd[512];
		snprintf(cmd, sizeof(cmd),
			"'%s' %s %s --socket /tmp/sseq-never.sock 2>&1 | grep -q -- '%s'",
			sseqd_path, bad[i][0], bad[i][1], bad[i][0]);
		ck_assert_msg(system(cmd) == 0, "%s %s: no error naming the option", bad[i][0],
			bad[i][1]);
	}
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
	tcase_add_test(tc, test_overlong_keys_and_prefixes_are_protocol_errors);
	tcase_add_test(tc, test_want_completion_in_ten_bytes_is_true);
	tcase_add_test(tc, test_connections_are_capped_in_total_and_per_uid);
	tcase_add_test(tc, test_silent_connection_is_closed_after_hello_timeout);
	tcase_add_test(tc, test_partial_frames_are_bounded_and_time_out);
	tcase_add_test(tc, test_trace_follower_that_never_reads_is_bounded);
	tcase_add_test(tc, test_staging_is_capped_per_session_and_in_total);
	tcase_add_test(tc, test_arenas_in_use_count_after_unregister);
	tcase_add_test(tc, test_device_memory_quota_per_session);
	tcase_add_test(tc, test_handles_and_arenas_are_capped_per_session);
	tcase_add_test(tc, test_inflight_cap_pauses_a_session_and_loses_nothing);
	tcase_add_test(tc, test_out_of_descriptors_does_not_spin);
	tcase_add_test(tc, test_bad_limit_values_are_refused);
	tcase_add_test(tc, test_closed_connections_paused_mid_frame_give_input_memory_back);
	tcase_add_test(tc, test_parked_descriptors_leave_another_user_served);
	tcase_add_test(tc, test_refused_connections_are_logged_at_most_once_a_second);
}

int main(int argc, char **argv)
{
	return harness_main(argc, argv, "hostile", 60, add_tests);
}
