/* What the daemon-level suites share: a real sseqd process on a real Unix socket, and raw
 * protobuf frames to drive it with, so that every request and every kind of bad input can
 * be sent exactly as written. */
#ifndef SSEQ_TESTS_DAEMON_HARNESS_H
#define SSEQ_TESTS_DAEMON_HARNESS_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "request-build.h"
#include "sseq-frame.h"
#include "sseq-ring.h"
#include "sseq.pb-c.h"
#include "sseqd-spawn.h"

static const char *sseqd_path;
/* The backend under test: $SSEQ_TEST_BACKEND (the GPU run sets hip), else sim. Tests
 * that need the sim's fault injection return early on other backends. */
static const char *backend = "sim";

#define SIM_ONLY()                                                                                 \
	do {                                                                                       \
		if (strcmp(backend, "sim") != 0) {                                                 \
			printf("%s: needs the sim backend's fault injection; not run on %s\n",     \
				__func__, backend);                                                \
			return;                                                                    \
		}                                                                                  \
	} while (0)

struct daemon {
	pid_t pid;
	char sock[108];
	/* Set before daemon_start, for one start: the daemon's stderr goes to this file,
	 * and its descriptor limit (soft and hard) is this. */
	const char *log_path;
	unsigned nofile;
};

static struct daemon D;

static inline void daemon_start(const char *const *extra)
{
	const char *level = getenv("SSEQ_TEST_LOG_LEVEL"); /* info or debug to look closer */
	const char *argv[32] = {sseqd_path, "--backend", backend, "--socket", D.sock, "--log-level",
		level && *level ? level : "notice"};
	int n = 7;

	snprintf(D.sock, sizeof(D.sock), "/tmp/sseq-test-%d-%ld.sock", (int)getpid(),
		(long)random());
	argv[4] = D.sock;
	for (; extra && *extra; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	D.pid = sseqd_spawn(argv, D.sock,
		&(struct sseqd_child){.log_path = D.log_path, .nofile = D.nofile, .wait_s = 5});
	D.log_path = NULL;
	D.nofile = 0;
}

/* Stop the daemon and check it exited cleanly. */
static inline void daemon_stop(void)
{
	sseqd_stop(D.pid);
	unlink(D.sock);
}

/* daemon_stop, and the socket file went with the daemon: it made the file (or the process
 * it restarted in place did), so it removed it at its exit. */
static inline void daemon_stop_owned(void)
{
	sseqd_stop(D.pid);
	ck_assert_msg(access(D.sock, F_OK) != 0, "sseqd left its socket file %s", D.sock);
}

static inline int conn_open(void)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	strcpy(addr.sun_path, D.sock);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	return fd;
}

static inline void send_raw(int fd, const void *data, size_t len, int passfd)
{
	struct iovec iov = {(void *)data, len};
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

	if (passfd >= 0) {
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &passfd, sizeof(int));
	}
	ck_assert_int_eq(sendmsg(fd, &msg, MSG_NOSIGNAL), (ssize_t)len);
}

/* rq as a frame in buf (room bytes): its length, the prefix included. */
static inline size_t frame_of(const Sseq__Request *rq, uint8_t *buf, size_t room)
{
	size_t len = sseq__request__get_packed_size(rq);

	ck_assert_uint_le(len + FRAME_HEADER, room);
	frame_put_len(buf, (uint32_t)len);
	sseq__request__pack(rq, buf + FRAME_HEADER);
	return len + FRAME_HEADER;
}

static inline void send_req_fd(int fd, const Sseq__Request *rq, int passfd)
{
	size_t room = sseq__request__get_packed_size(rq) + FRAME_HEADER;
	uint8_t *buf = malloc(room);

	send_raw(fd, buf, frame_of(rq, buf, room), passfd);
	free(buf);
}

static inline void send_req(int fd, const Sseq__Request *rq)
{
	send_req_fd(fd, rq, -1);
}

static uint64_t next_tag = 100;

/* Send rq under the next fresh tag, passing passfd with it if >= 0; returns the tag. */
static inline uint64_t send_tagged_fd(int fd, Sseq__Request *rq, int passfd)
{
	rq->tag = ++next_tag;
	send_req_fd(fd, rq, passfd);
	return rq->tag;
}

static inline uint64_t send_tagged(int fd, Sseq__Request *rq)
{
	return send_tagged_fd(fd, rq, -1);
}

/* Read exactly n bytes; false on EOF or after timeout_ms. */
static inline bool read_full(int fd, void *buf, size_t n, int timeout_ms)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd p = {fd, POLLIN, 0};
		ssize_t r;
		if (poll(&p, 1, timeout_ms) <= 0)
			return false;
		r = read(fd, (char *)buf + got, n - got);
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

/* The next message, or NULL on EOF/timeout. Free with sseq__message__free_unpacked. */
static inline Sseq__Message *recv_msg(int fd)
{
	uint8_t hdr[4];
	uint32_t len;
	uint8_t *buf;
	Sseq__Message *m;

	if (!read_full(fd, hdr, 4, 5000))
		return NULL;
	len = frame_get_len(hdr);
	ck_assert_uint_le(len, FRAME_MAX);
	buf = malloc(len ? len : 1);
	ck_assert(read_full(fd, buf, len, 5000));
	m = sseq__message__unpack(NULL, len, buf);
	free(buf);
	ck_assert_ptr_nonnull(m);
	return m;
}

/* The Reply for tag, skipping completions: its status, and (each out-pointer may be
 * NULL) its handle, its point and its message. */
static inline Sseq__Status expect_reply_at(
	int fd, uint64_t tag, uint64_t *handle, Sseq__Point *at, char *msg, size_t msglen)
{
	for (;;) {
		Sseq__Message *m = recv_msg(fd);
		ck_assert_msg(m != NULL, "no reply for tag %llu", (unsigned long long)tag);
		if (m->body_case == SSEQ__MESSAGE__BODY_REPLY && m->reply->tag == tag) {
			Sseq__Status st = m->reply->status;
			if (handle)
				*handle = m->reply->handle;
			if (at)
				*at = m->reply->point ? *m->reply->point
						      : (Sseq__Point)SSEQ__POINT__INIT;
			if (msg)
				snprintf(msg, msglen, "%s", m->reply->message);
			sseq__message__free_unpacked(m, NULL);
			return st;
		}
		sseq__message__free_unpacked(m, NULL);
	}
}

static inline Sseq__Status expect_reply(
	int fd, uint64_t tag, uint64_t *handle, char *msg, size_t msglen)
{
	return expect_reply_at(fd, tag, handle, NULL, msg, msglen);
}

/* The Completion for tag, skipping replies: its status, and its message in msg (may be
 * NULL). */
static inline Sseq__Status expect_completion_msg(int fd, uint64_t tag, char *msg, size_t size)
{
	for (;;) {
		Sseq__Message *m = recv_msg(fd);
		ck_assert_msg(m != NULL, "no completion for tag %llu", (unsigned long long)tag);
		if (m->body_case == SSEQ__MESSAGE__BODY_COMPLETION && m->completion->tag == tag) {
			Sseq__Status st = m->completion->status;
			if (msg)
				snprintf(msg, size, "%s", m->completion->message);
			sseq__message__free_unpacked(m, NULL);
			return st;
		}
		sseq__message__free_unpacked(m, NULL);
	}
}

static inline Sseq__Status expect_completion(int fd, uint64_t tag)
{
	return expect_completion_msg(fd, tag, NULL, 0);
}

/* Just the Reply's status, for the common case that wants nothing else from it. */
static inline Sseq__Status reply_status(int fd, uint64_t tag)
{
	return expect_reply(fd, tag, NULL, NULL, 0);
}

/* The request under tag was accepted and completed, both OK. A macro so that a failure
 * names the caller's line; tag is evaluated once. */
#define ASSERT_OK_AND_COMPLETED(fd, tag)                                                           \
	do {                                                                                       \
		uint64_t tag_ = (tag);                                                             \
		ck_assert_int_eq(reply_status(fd, tag_), SSEQ__STATUS__STATUS_OK);                 \
		ck_assert_int_eq(expect_completion(fd, tag_), SSEQ__STATUS__STATUS_OK);            \
	} while (0)

static inline void hello_as(int fd, uint32_t major, const char *worker)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Hello h = SSEQ__HELLO__INIT;

	h.protocol_major = major;
	h.client_name = (char *)"test-daemon";
	h.pid = (uint32_t)getpid();
	h.worker_id = (char *)worker;
	rq.tag = 1;
	rq.body_case = SSEQ__REQUEST__BODY_HELLO;
	rq.hello = &h;
	send_req(fd, &rq);
}

static inline int conn_hello(void)
{
	int fd = conn_open();
	hello_as(fd, SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR, "gw0");
	ck_assert_int_eq(reply_status(fd, 1), SSEQ__STATUS__STATUS_OK);
	return fd;
}

static inline Sseq__Status do_alloc(int fd, uint64_t size, uint64_t *handle)
{
	struct harness_req r;

	return expect_reply(
		fd, send_tagged(fd, harness_req_alloc(&r, size, "t", 0)), handle, NULL, 0);
}

struct staging {
	int memfd;
	float *map;
	size_t size;
	uint64_t handle;
};

static inline Sseq__Status staging_register(int fd, struct staging *st, size_t size, bool seal)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__StagingRegister sr = SSEQ__STAGING_REGISTER__INIT;
	Sseq__Status status;

	st->size = size;
	st->memfd = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(st->memfd, 0);
	ck_assert_int_eq(ftruncate(st->memfd, (off_t)size), 0);
	if (seal)
		ck_assert_int_eq(fcntl(st->memfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	st->map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, st->memfd, 0);
	ck_assert(st->map != MAP_FAILED);
	sr.size = size;
	rq.body_case = SSEQ__REQUEST__BODY_STAGING_REGISTER;
	rq.staging_register = &sr;
	status = expect_reply(fd, send_tagged_fd(fd, &rq, st->memfd), &st->handle, NULL, 0);
	close(st->memfd);
	return status;
}

static inline uint64_t send_h2d(
	int fd, uint64_t staging, uint64_t soff, uint64_t dst, uint64_t doff, uint64_t len)
{
	struct harness_req r;

	return send_tagged(fd, harness_req_h2d(&r, staging, soff, dst, doff, len));
}

static inline uint64_t send_d2h(
	int fd, uint64_t src, uint64_t soff, uint64_t staging, uint64_t stoff, uint64_t len)
{
	struct harness_req r;

	return send_tagged(fd, harness_req_d2h(&r, src, soff, staging, stoff, len));
}

static inline uint64_t send_d2d(
	int fd, uint64_t src, uint64_t soff, uint64_t dst, uint64_t doff, uint64_t len)
{
	struct harness_req r;

	return send_tagged(fd, harness_req_d2d(&r, src, soff, dst, doff, len));
}

static inline uint64_t send_slice(int fd, uint64_t buffer, uint64_t offset, uint64_t length)
{
	struct harness_req r;

	return send_tagged(fd, harness_req_slice(&r, buffer, offset, length, 0));
}

/* harness_req_exec's request, sent. */
static inline uint64_t send_exec(
	int fd, const char *kernel, const char *sig, const uint64_t *bufs, const double *nums)
{
	struct harness_req r;

	ck_assert_uint_le(strlen(sig), HARNESS_REQ_MAX_ARGS);
	return send_tagged(fd, harness_req_exec(&r, kernel, sig, bufs, nums));
}

/* A query's result; `seen` (may be NULL) looks at each message read before it. */
static inline Sseq__QueryResult *query_seeing(
	int fd, Sseq__QueryKind kind, void (*seen)(const Sseq__Message *m, void *ctx), void *ctx)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Query q = SSEQ__QUERY__INIT;

	q.kind = kind;
	rq.body_case = SSEQ__REQUEST__BODY_QUERY;
	rq.query = &q;
	send_tagged(fd, &rq);
	for (;;) {
		Sseq__Message *m = recv_msg(fd);
		ck_assert_ptr_nonnull(m);
		if (m->body_case == SSEQ__MESSAGE__BODY_QUERY_RESULT &&
			m->query_result->tag == rq.tag) {
			Sseq__QueryResult *r = m->query_result;
			m->query_result = NULL;
			m->body_case = SSEQ__MESSAGE__BODY__NOT_SET;
			sseq__message__free_unpacked(m, NULL);
			return r;
		}
		if (seen)
			seen(m, ctx);
		sseq__message__free_unpacked(m, NULL);
	}
}

static inline Sseq__QueryResult *query(int fd, Sseq__QueryKind kind)
{
	return query_seeing(fd, kind, NULL, NULL);
}

/* The daemon's counters now (stats, as sseqctl stats shows them). */
static inline Sseq__Counters stats_of(int fd)
{
	Sseq__QueryResult *r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_STATS);
	Sseq__Counters c;

	ck_assert_ptr_nonnull(r->counters);
	c = *r->counters;
	sseq__query_result__free_unpacked(r, NULL);
	return c;
}

/* Poll the daemon (through fd) until it holds `clients` sessions and no device memory, or
 * for ms at most: what goes once the work in flight completes. The caller checks what it
 * finds then. */
static inline void wait_released(int fd, size_t clients, int ms)
{
	for (int waited = 0; waited < ms; waited += 10) {
		Sseq__QueryResult *r = query(fd, SSEQ__QUERY_KIND__QUERY_KIND_STATUS);
		bool released = r->n_clients == clients && r->device->memory_used == 0;

		sseq__query_result__free_unpacked(r, NULL);
		if (released)
			return;
		usleep(10000);
	}
}

static inline bool conn_closed(int fd)
{
	char c;
	struct pollfd p = {fd, POLLIN, 0};
	if (poll(&p, 1, 5000) <= 0)
		return false;
	/* A close with unread input reaches the peer as ECONNRESET. */
	ssize_t r = read(fd, &c, 1);
	return r == 0 || (r < 0 && errno == ECONNRESET);
}

static inline void sync_all(int fd)
{
	struct harness_req r;

	ASSERT_OK_AND_COMPLETED(fd, send_tagged(fd, harness_req_sync(&r)));
}

static inline Sseq__Status do_free(int fd, uint64_t buffer)
{
	struct harness_req r;

	return reply_status(fd, send_tagged(fd, harness_req_free(&r, buffer)));
}

/* Fill y (256 floats) with v and read it back through st: both OK, the data right. */
static inline void fill_and_read_back(int fd, uint64_t y, const struct staging *st, float v)
{
	ck_assert_int_eq(reply_status(fd, send_exec(fd, "fill", "ofu", &y, (double[]){v, 256})),
		SSEQ__STATUS__STATUS_OK);
	ASSERT_OK_AND_COMPLETED(fd, send_d2h(fd, y, 0, st->handle, 0, 1024));
	ck_assert_float_eq(st->map[0], v);
	ck_assert_float_eq(st->map[255], v);
}

/* A session fills a buffer with `v` and reads it back: everything OK, the data right. */
static inline void fill_and_check(int fd, float v)
{
	struct staging st;
	uint64_t y;

	ck_assert_int_eq(staging_register(fd, &st, 4096, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(do_alloc(fd, 1024, &y), SSEQ__STATUS__STATUS_OK);
	fill_and_read_back(fd, y, &st, v);
	munmap(st.map, st.size);
}

/* ---- the request ring (protocol 1.15) ---- */

/* RequestRing of `size` data bytes at `offset` of arena `staging`: its status. */
static inline Sseq__Status ring_request(int fd, uint64_t staging, uint64_t offset, uint64_t size)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__RequestRing rr = SSEQ__REQUEST_RING__INIT;

	rr.staging = staging;
	rr.offset = offset;
	rr.size = size;
	rq.body_case = SSEQ__REQUEST__BODY_REQUEST_RING;
	rq.request_ring = &rr;
	return reply_status(fd, send_tagged(fd, &rq));
}

/* A ring of `size` data bytes named at the start of a fresh arena: its header. */
static inline struct sseq_ring_header *ring_named(int fd, struct staging *st, uint64_t size)
{
	ck_assert_int_eq(
		staging_register(fd, st, SSEQ_RING_HEADER + size, true), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(ring_request(fd, st->handle, 0, size), SSEQ__STATUS__STATUS_OK);
	return (struct sseq_ring_header *)(void *)st->map;
}

/* rq, under a fresh tag, written into the ring as a client writes it: bytes at the tail
 * (wrapping), the tail published, the doorbell rung where the daemon said it may sleep. */
static inline uint64_t ring_send(
	int fd, struct sseq_ring_header *h, uint64_t size, Sseq__Request *rq)
{
	static const uint8_t doorbell[FRAME_HEADER];
	uint8_t buf[512], *data = (uint8_t *)h + SSEQ_RING_HEADER;
	const uint64_t tail = atomic_load(&h->tail);
	size_t n;

	rq->tag = ++next_tag;
	n = frame_of(rq, buf, sizeof(buf));
	ck_assert_uint_le(tail - atomic_load(&h->head) + n, size);
	sseq_ring_put(data, size, tail, buf, n);
	atomic_store(&h->tail, tail + n);
	if (!atomic_load(&h->awake))
		send_raw(fd, doorbell, sizeof(doorbell), -1);
	return rq->tag;
}

/* A suite's main: the daemon from argv[1] or $SSEQD, the backend from $SSEQ_TEST_BACKEND,
 * and the tests `add` registers, run in Check's fork mode. */
static inline int harness_main(
	int argc, char **argv, const char *name, int timeout_s, void (*add)(TCase *tc))
{
	Suite *s = suite_create(name);
	TCase *tc = tcase_create(name);
	SRunner *sr;
	int failed;

	const char *test_backend = getenv("SSEQ_TEST_BACKEND");

	sseqd_path = argc > 1 ? argv[1] : getenv("SSEQD");
	if (test_backend && *test_backend)
		backend = test_backend;
	if (!sseqd_path) {
		fprintf(stderr, "usage: %s PATH-TO-SSEQD\n", argv[0]);
		return 2;
	}
	srandom((unsigned)time(NULL) ^ (unsigned)getpid());
	signal(SIGPIPE, SIG_IGN);
	tcase_set_timeout(tc, timeout_s);
	add(tc);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif
