/* Pipelined execute throughput over one connection: keeps up to --depth requests in
 * flight (no waiting for replies), counts replies, prints requests/s. Frames are built
 * by hand once and replayed with new tags, so the client costs almost nothing. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sseq-frame.h"
#include "sseq.pb-c.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t frame(const Sseq__Request *rq, uint8_t *out)
{
	size_t len = sseq__request__pack(rq, out + 4);
	frame_put_len(out, (uint32_t)len);
	return len + 4;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read one message synchronously (set-up only). */
static Sseq__Message *read_msg(int fd)
{
	uint8_t hdr[4], *buf;
	uint32_t len;
	size_t got = 0;
	Sseq__Message *m;

	while (got < 4) {
		ssize_t r = read(fd, hdr + got, 4 - got);
		if (r <= 0)
			return NULL;
		got += (size_t)r;
	}
	len = frame_get_len(hdr);
	buf = malloc(len + 1);
	for (got = 0; got < len;) {
		ssize_t r = read(fd, buf + got, len - got);
		if (r <= 0) {
			free(buf);
			return NULL;
		}
		got += (size_t)r;
	}
	m = sseq__message__unpack(NULL, len, buf);
	free(buf);
	return m;
}

int main(int argc, char **argv)
{
	const char *path = getenv("SSEQ_SOCKET");
	uint64_t count = 100000, depth = 512;
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	/* Static: a 1 MiB read buffer for the process's lifetime, no error path to free it. */
	static uint8_t rbuf[1 << 20];
	uint8_t buf[4096];
	size_t rlen = 0, rcap = sizeof(rbuf);
	uint64_t sent = 0, replied = 0, bad = 0, handle;
	int fd;
	double t0, t1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--socket") && i + 1 < argc)
			path = argv[++i];
		else if (!strcmp(argv[i], "--count") && i + 1 < argc)
			count = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--depth") && i + 1 < argc)
			depth = strtoull(argv[++i], NULL, 10);
		else {
			fprintf(stderr,
				"usage: bench-pipeline --socket PATH [--count N] [--depth N]\n");
			return 2;
		}
	}
	if (!path || strlen(path) >= sizeof(addr.sun_path)) {
		fprintf(stderr, "bench-pipeline: give --socket PATH or SSEQ_SOCKET\n");
		return 2;
	}
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		perror("bench-pipeline: connect");
		return 1;
	}

	/* Hello and one small buffer, synchronously. */
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Hello h = SSEQ__HELLO__INIT;
	h.protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	h.client_name = (char *)"bench-pipeline";
	h.pid = (uint32_t)getpid();
	rq.tag = 1;
	rq.body_case = SSEQ__REQUEST__BODY_HELLO;
	rq.hello = &h;
	write_all(fd, buf, frame(&rq, buf));
	Sseq__Message *m = read_msg(fd);
	if (!m || m->reply->status) {
		fprintf(stderr, "bench-pipeline: hello refused\n");
		return 1;
	}
	sseq__message__free_unpacked(m, NULL);
	Sseq__Alloc al = SSEQ__ALLOC__INIT;
	al.size = 256;
	rq.tag = 2;
	rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
	rq.alloc = &al;
	write_all(fd, buf, frame(&rq, buf));
	m = read_msg(fd);
	if (!m || m->reply->status) {
		fprintf(stderr, "bench-pipeline: alloc refused\n");
		return 1;
	}
	handle = m->reply->handle;
	sseq__message__free_unpacked(m, NULL);

	/* The execute: fill(out buf, 1.0, 64) — the smallest real kernel. */
	Sseq__Execute e = SSEQ__EXECUTE__INIT;
	Sseq__Arg a0 = SSEQ__ARG__INIT, a1 = SSEQ__ARG__INIT, a2 = SSEQ__ARG__INIT;
	Sseq__Arg *args[3] = {&a0, &a1, &a2};
	Sseq__BufferArg ba = SSEQ__BUFFER_ARG__INIT;
	ba.handle = handle;
	ba.access = SSEQ__ACCESS__ACCESS_OUT;
	a0.value_case = SSEQ__ARG__VALUE_BUFFER;
	a0.buffer = &ba;
	a1.value_case = SSEQ__ARG__VALUE_F32;
	a1.f32 = 1.0f;
	a2.value_case = SSEQ__ARG__VALUE_U64;
	a2.u64 = 64;
	e.target_case = SSEQ__EXECUTE__TARGET_KERNEL;
	e.kernel = (char *)"fill";
	e.n_args = 3;
	e.args = args;
	rq.body_case = SSEQ__REQUEST__BODY_EXECUTE;
	rq.execute = &e;

	t0 = now_s();
	while (replied < count) {
		/* Send a burst, as a real pipelined client does, then read what came back. */
		uint8_t out[65536];
		size_t olen = 0;
		while (sent < count && sent - replied < depth && olen + 256 < sizeof(out)) {
			rq.tag = 1000 + sent++;
			olen += frame(&rq, out + olen);
		}
		if (olen && write_all(fd, out, olen) < 0) {
			perror("bench-pipeline: write");
			return 1;
		}
		ssize_t r = read(fd, rbuf + rlen, rcap - rlen);
		if (r <= 0) {
			fprintf(stderr, "bench-pipeline: daemon closed the connection\n");
			return 1;
		}
		rlen += (size_t)r;
		size_t off = 0;
		while (rlen - off >= 4) {
			uint32_t len = frame_get_len(rbuf + off);
			if (rlen - off - 4 < len)
				break;
			m = sseq__message__unpack(NULL, len, rbuf + off + 4);
			if (m && m->body_case == SSEQ__MESSAGE__BODY_REPLY) {
				replied++;
				bad += m->reply->status != 0;
			}
			sseq__message__free_unpacked(m, NULL);
			off += 4 + len;
		}
		memmove(rbuf, rbuf + off, rlen - off);
		rlen -= off;
	}
	t1 = now_s();
	printf("requests=%" PRIu64 " depth=%" PRIu64 " seconds=%.3f rate=%.0f/s errors=%" PRIu64
	       "\n",
		count, depth, t1 - t0, (double)count / (t1 - t0), bad);
	close(fd);
	return bad ? 1 : 0;
}
