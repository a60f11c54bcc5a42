/* libsseq's framing without a daemon: frames over a socketpair, batched and byte by byte,
 * the size limit on both sides, and a descriptor riding the first byte of its frame. */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"
#include "test-client.h"

/* Queue a Free of buffer tag * 10 under tag (with fd unless -1); frame_writer_add's result. */
static int add_request(struct frame_writer *w, uint64_t tag, int fd)
{
	Sseq__Request req = SSEQ__REQUEST__INIT;
	Sseq__Free fr = SSEQ__FREE__INIT;

	fr.buffer = tag * 10;
	req.tag = tag;
	req.body_case = SSEQ__REQUEST__BODY_FREE;
	req.free = &fr;
	return frame_writer_add(w, &req.base, fd);
}

/* Read frames until `n` requests arrived (blocking), checking their tags count up from 1. */
static void expect_requests(int sock, unsigned n)
{
	struct frame_reader r;
	frame_reader_init(&r);
	unsigned got = 0;
	while (got < n) {
		const uint8_t *f;
		size_t len;
		int k = frame_reader_next(&r, &f, &len);
		ck_assert_int_ge(k, 0);
		if (k == 0) {
			int fl = frame_reader_fill(&r, sock);
			if (fl == -EAGAIN)
				usleep(1000);
			else
				ck_assert_int_gt(fl, 0);
			continue;
		}
		Sseq__Request *req = sseq__request__unpack(NULL, len, f);
		ck_assert_ptr_nonnull(req);
		ck_assert_uint_eq(req->tag, got + 1);
		ck_assert_uint_eq(req->free->buffer, (got + 1) * 10);
		sseq__request__free_unpacked(req, NULL);
		got++;
	}
	frame_reader_finish(&r);
}

START_TEST(test_frame_batch_roundtrip)
{
	int sv[2];
	make_pair(sv);
	struct frame_writer w;
	frame_writer_init(&w);
	for (uint64_t t = 1; t <= 100; t++)
		ck_assert_int_eq(add_request(&w, t, -1), 0);
	ck_assert_int_eq(frame_writer_send(&w, sv[0]), 0);
	ck_assert_uint_eq(frame_writer_pending(&w), 0);
	expect_requests(sv[1], 100);
	frame_writer_finish(&w);
	close_pair(sv);
}
END_TEST

/* A frame split across many reads is only handed out once it is whole. */
START_TEST(test_frame_reader_reassembles_byte_by_byte)
{
	int sv[2];
	make_pair(sv);
	struct frame_writer w;
	frame_writer_init(&w);
	for (uint64_t t = 1; t <= 3; t++)
		add_request(&w, t, -1);
	struct frame_reader r;
	frame_reader_init(&r);
	unsigned frames = 0;
	for (size_t i = 0; i < w.len; i++) {
		ck_assert_int_eq(write(sv[0], w.data + i, 1), 1);
		ck_assert_int_eq(frame_reader_fill(&r, sv[1]), 1);
		const uint8_t *f;
		size_t len;
		int k;
		while ((k = frame_reader_next(&r, &f, &len)) == 1) {
			Sseq__Request *req = sseq__request__unpack(NULL, len, f);
			ck_assert_ptr_nonnull(req);
			ck_assert_uint_eq(req->tag, ++frames);
			sseq__request__free_unpacked(req, NULL);
		}
		ck_assert_int_eq(k, 0);
	}
	ck_assert_uint_eq(frames, 3);
	frame_reader_finish(&r);
	frame_writer_finish(&w);
	close_pair(sv);
}
END_TEST

/* A length over the limit is refused from the header alone, before any allocation. */
START_TEST(test_frame_reader_rejects_oversized_length)
{
	int sv[2];
	make_pair(sv);
	uint8_t hdr[4] = {0x01, 0x00, 0x10, 0x00}; /* 1 MiB + 1 */
	ck_assert_int_eq(write(sv[0], hdr, 4), 4);
	struct frame_reader r;
	frame_reader_init(&r);
	ck_assert_int_eq(frame_reader_fill(&r, sv[1]), 4);
	const uint8_t *f;
	size_t len;
	ck_assert_int_eq(frame_reader_next(&r, &f, &len), -EMSGSIZE);
	ck_assert_uint_le(r.cap, 128 * 1024);
	frame_reader_finish(&r);

	/* Exactly the limit is fine: it only asks for room. */
	frame_reader_init(&r);
	uint8_t ok[4] = {0x00, 0x00, 0x10, 0x00};
	ck_assert_int_eq(write(sv[0], ok, 4), 4);
	ck_assert_int_eq(frame_reader_fill(&r, sv[1]), 4);
	ck_assert_int_eq(frame_reader_next(&r, &f, &len), 0);
	ck_assert_uint_ge(r.cap, FRAME_HEADER + FRAME_MAX);
	frame_reader_finish(&r);
	close_pair(sv);
}
END_TEST

START_TEST(test_frame_reader_eof)
{
	int sv[2];
	make_pair(sv);
	close(sv[0]);
	struct frame_reader r;
	frame_reader_init(&r);
	ck_assert_int_eq(frame_reader_fill(&r, sv[1]), -ECONNRESET);
	frame_reader_finish(&r);
	close(sv[1]);
}
END_TEST

START_TEST(test_frame_writer_refuses_oversized_message)
{
	struct frame_writer w;
	frame_writer_init(&w);
	char *label = malloc(FRAME_MAX + 1);
	memset(label, 'x', FRAME_MAX);
	label[FRAME_MAX] = '\0';
	Sseq__Alloc al = SSEQ__ALLOC__INIT;
	al.size = 1;
	al.label = label;
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.tag = 1;
	req.body_case = SSEQ__REQUEST__BODY_ALLOC;
	req.alloc = &al;
	ck_assert_int_eq(frame_writer_add(&w, &req.base, -1), -EMSGSIZE);
	ck_assert_uint_eq(frame_writer_pending(&w), 0);
	free(label);
	frame_writer_finish(&w);
}
END_TEST

/* Read exactly `len` bytes, appending any descriptors that came with them to fds. */
static void recv_exact(int sock, uint8_t *buf, size_t len, int *fds, size_t *nfds)
{
	size_t got = 0;
	while (got < len) {
		struct iovec iov = {.iov_base = buf + got, .iov_len = len - got};
		union {
			char b[CMSG_SPACE(sizeof(int) * 4)];
			struct cmsghdr align;
		} ctl;
		struct msghdr mh = {
			.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = ctl.b,
			.msg_controllen = sizeof(ctl.b),
		};
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
		ck_assert_int_gt(n, 0);
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++)
				memcpy(&fds[(*nfds)++], CMSG_DATA(cm) + i * sizeof(int),
					sizeof(int));
		}
		got += (size_t)n;
	}
}

/* The daemon takes descriptors in arrival order, one per StagingRegister: each must
 * arrive with its own frame (not later, not earlier), even in the middle of a batch. */
START_TEST(test_frame_fd_rides_first_byte_of_its_frame)
{
	int sv[2];
	make_pair(sv);
	int fda = memfd_create("a", MFD_CLOEXEC), fdb = memfd_create("b", MFD_CLOEXEC);
	struct frame_writer w;
	frame_writer_init(&w);
	for (uint64_t t = 1; t <= 5; t++)
		ck_assert_int_eq(add_request(&w, t, t == 2 ? fda : t == 3 ? fdb : -1), 0);
	ck_assert_int_eq(frame_writer_send(&w, sv[0]), 0);
	int fds[5][4];
	size_t nfds[5] = {0};
	for (unsigned i = 0; i < 5; i++) {
		uint8_t buf[64];
		recv_exact(sv[1], buf, 4, fds[i], &nfds[i]);
		uint32_t len = buf[0] | (uint32_t)buf[1] << 8;
		recv_exact(sv[1], buf, len, fds[i], &nfds[i]);
		Sseq__Request *q = sseq__request__unpack(NULL, len, buf);
		ck_assert_uint_eq(q->tag, i + 1);
		sseq__request__free_unpacked(q, NULL);
	}
	ck_assert_uint_eq(nfds[0], 0);
	ck_assert_uint_eq(nfds[1], 1);
	ck_assert_uint_eq(nfds[2], 1);
	ck_assert_uint_eq(nfds[3], 0);
	ck_assert_uint_eq(nfds[4], 0);
	/* They are the same files, in order. */
	ck_assert_int_eq(ftruncate(fda, 111), 0);
	ck_assert_int_eq(lseek(fds[1][0], 0, SEEK_END), 111);
	ck_assert_int_eq(lseek(fds[2][0], 0, SEEK_END), 0);
	close(fds[1][0]);
	close(fds[2][0]);
	close(fda);
	close(fdb);
	frame_writer_finish(&w);
	close_pair(sv);
}
END_TEST

/* The request ring's writer, its daemon played here: bytes to the ring (and a doorbell on
 * the socket only while the daemon says it may sleep), a descriptor's frame on the socket
 * only once the ring was taken, and the ring again only once the daemon read the socket
 * that far; a full ring waits. */
START_TEST(test_frame_ring_keeps_one_stream_with_the_socket)
{
	enum { SIZE = 4096 };
	static _Alignas(64) uint8_t mem[SSEQ_RING_HEADER + SIZE];
	struct sseq_ring_header *h = (struct sseq_ring_header *)(void *)mem;
	struct frame_ring rg = {.hdr = h, .data = mem + SSEQ_RING_HEADER, .size = SIZE};
	struct frame_writer w;
	uint8_t buf[64];
	int sv[2], fds[4], memfd = memfd_create("a", MFD_CLOEXEC);
	size_t nfds = 0;
	uint64_t tail;

	make_pair(sv);
	frame_writer_init(&w);
	/* Awake: into the ring, nothing on the socket. */
	atomic_store(&h->awake, 1);
	ck_assert_int_eq(add_request(&w, 1, -1), 0);
	ck_assert_int_eq(frame_writer_send_ring(&w, sv[0], &rg), 0);
	tail = atomic_load(&h->tail);
	ck_assert_uint_gt(tail, 4);
	ck_assert_int_eq(recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT), -1);
	ck_assert_uint_eq(rg.doorbells, 0);
	/* Asleep: the doorbell, a frame of length 0. */
	atomic_store(&h->awake, 0);
	ck_assert_int_eq(add_request(&w, 2, -1), 0);
	ck_assert_int_eq(frame_writer_send_ring(&w, sv[0], &rg), 0);
	ck_assert_uint_eq(rg.doorbells, 1);
	ck_assert_int_eq(recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT), 4);
	ck_assert_uint_eq(buf[0] | buf[1] | buf[2] | buf[3], 0);
	/* A descriptor's frame waits for the ring to be taken. */
	atomic_store(&h->awake, 1);
	ck_assert_int_eq(add_request(&w, 3, memfd), 0);
	ck_assert_int_eq(add_request(&w, 4, -1), 0);
	ck_assert_int_eq(frame_writer_send_ring(&w, sv[0], &rg), -EAGAIN);
	ck_assert(rg.waiting);
	ck_assert_int_eq(recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT), -1);
	atomic_store(&h->head, atomic_load(&h->tail));
	/* Then on the socket, with the frames after it, since the daemon has not read it. */
	ck_assert_int_eq(frame_writer_send_ring(&w, sv[0], &rg), 0);
	for (uint64_t t = 3; t <= 4; t++) {
		recv_exact(sv[1], buf, 4, fds, &nfds);
		const uint32_t len = buf[0];
		recv_exact(sv[1], buf, len, fds, &nfds);
		Sseq__Request *q = sseq__request__unpack(NULL, len, buf);
		ck_assert_ptr_nonnull(q);
		ck_assert_uint_eq(q->tag, t);
		sseq__request__free_unpacked(q, NULL);
	}
	ck_assert_uint_eq(nfds, 1);
	ck_assert_uint_eq(rg.sock_fence, w.sock_sent);
	/* Until the daemon says it read that far, the ring waits. */
	ck_assert_int_eq(add_request(&w, 5, -1), 0);
	ck_assert_int_eq(frame_writer_send_ring(&w, sv[0], &rg), -EAGAIN);
	ck_assert(rg.waiting);
	atomic_store(&h->sock_read, w.sock_sent);
	tail = atomic_load(&h->tail);
	ck_assert_int_eq(frame_writer_send_ring(&w, sv[0], &rg), 0);
	ck_assert_uint_gt(atomic_load(&h->tail), tail);
	/* A full ring waits, and goes on once taken, wrapping. */
	for (uint64_t t = 6; t < 6 + SIZE / 8; t++)
		ck_assert_int_eq(add_request(&w, t, -1), 0);
	ck_assert_int_eq(frame_writer_send_ring(&w, sv[0], &rg), -EAGAIN);
	ck_assert(rg.waiting);
	ck_assert_uint_eq(atomic_load(&h->tail) - atomic_load(&h->head), SIZE);
	atomic_store(&h->head, atomic_load(&h->tail));
	ck_assert_int_eq(frame_writer_send_ring(&w, sv[0], &rg), 0);
	ck_assert_uint_eq(frame_writer_pending(&w), 0);
	close(fds[0]);
	close(memfd);
	frame_writer_finish(&w);
	close_pair(sv);
}
END_TEST

static Suite *frame_suite(void)
{
	Suite *s = suite_create("client-frame");
	TCase *tc = tcase_create("frame");

	tcase_add_test(tc, test_frame_batch_roundtrip);
	tcase_add_test(tc, test_frame_reader_reassembles_byte_by_byte);
	tcase_add_test(tc, test_frame_reader_rejects_oversized_length);
	tcase_add_test(tc, test_frame_reader_eof);
	tcase_add_test(tc, test_frame_writer_refuses_oversized_message);
	tcase_add_test(tc, test_frame_fd_rides_first_byte_of_its_frame);
	tcase_add_test(tc, test_frame_ring_keeps_one_stream_with_the_socket);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return client_test_run(frame_suite());
}
