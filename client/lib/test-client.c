/* libsseq without a daemon: framing over a socketpair, descriptor passing, argument
 * packing, the staging range allocator, and the library's request bookkeeping against a
 * scripted fake daemon (a thread on the other end of a socketpair). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client.h"

/* ---- helpers ---- */

static void make_pair(int sv[2])
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static void close_pair(int sv[2])
{
	close(sv[0]);
	close(sv[1]);
}

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

/* ---- framing ---- */

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

/* ---- argument packing ---- */

/* ex through the wire and back, as the daemon would see it. Free with
 * sseq__execute__free_unpacked. */
static Sseq__Execute *execute_roundtrip(const Sseq__Execute *ex)
{
	size_t n = sseq__execute__get_packed_size(ex);
	uint8_t *buf = malloc(n);
	sseq__execute__pack(ex, buf);
	Sseq__Execute *back = sseq__execute__unpack(NULL, n, buf);
	free(buf);
	return back;
}

START_TEST(test_args_pack_types_and_access)
{
	struct sseq_arg args[] = {
		SSEQ_IN(5),
		SSEQ_OUT(6),
		SSEQ_INOUT(7),
		SSEQ_F32(2.5),
		SSEQ_F64(-1.25),
		SSEQ_I32(-3),
		SSEQ_U32(4000000000u),
		SSEQ_I64(-5000000000ll),
		SSEQ_U64(1ull << 40),
	};
	struct args_pack p;
	ck_assert_int_eq(args_pack(&p, args, 9, NULL), 0);
	p.ex.target_case = SSEQ__EXECUTE__TARGET_KERNEL;
	p.ex.kernel = "axpy";
	Sseq__Execute *ex = execute_roundtrip(&p.ex);
	ck_assert_ptr_nonnull(ex);
	ck_assert_str_eq(ex->kernel, "axpy");
	ck_assert_uint_eq(ex->n_args, 9);
	ck_assert_int_eq(ex->launch_shape_case, SSEQ__EXECUTE__LAUNCH_SHAPE__NOT_SET);
	ck_assert_int_eq(ex->args[0]->value_case, SSEQ__ARG__VALUE_BUFFER);
	ck_assert_uint_eq(ex->args[0]->buffer->handle, 5);
	ck_assert_int_eq(ex->args[0]->buffer->access, SSEQ__ACCESS__ACCESS_IN);
	ck_assert_int_eq(ex->args[1]->buffer->access, SSEQ__ACCESS__ACCESS_OUT);
	ck_assert_int_eq(ex->args[2]->buffer->access, SSEQ__ACCESS__ACCESS_INOUT);
	ck_assert_int_eq(ex->args[3]->value_case, SSEQ__ARG__VALUE_F32);
	ck_assert(ex->args[3]->f32 == 2.5f);
	ck_assert_int_eq(ex->args[4]->value_case, SSEQ__ARG__VALUE_F64);
	ck_assert(ex->args[4]->f64 == -1.25);
	ck_assert_int_eq(ex->args[5]->value_case, SSEQ__ARG__VALUE_I32);
	ck_assert_int_eq(ex->args[5]->i32, -3);
	ck_assert_int_eq(ex->args[6]->value_case, SSEQ__ARG__VALUE_U32);
	ck_assert_uint_eq(ex->args[6]->u32, 4000000000u);
	ck_assert_int_eq(ex->args[7]->value_case, SSEQ__ARG__VALUE_I64);
	ck_assert_int_eq(ex->args[7]->i64, -5000000000ll);
	ck_assert_int_eq(ex->args[8]->value_case, SSEQ__ARG__VALUE_U64);
	ck_assert_uint_eq(ex->args[8]->u64, 1ull << 40);
	/* A zero scalar is still sent: the oneof case survives a default value. */
	sseq__execute__free_unpacked(ex, NULL);
	args_pack_finish(&p);
}
END_TEST

START_TEST(test_args_pack_narrow_scalars_travel_widened_and_bytes_by_value)
{
	const struct {
		int32_t a, b, c;
	} v12 = {1, -2, 3};
	struct sseq_arg args[] = {
		SSEQ_I8(-128),
		SSEQ_U8(255),
		SSEQ_I16(300000), /* out of range: sent as it is, for the daemon to refuse */
		SSEQ_U16(65535),
		SSEQ_F16(0x3c00),
		SSEQ_BF16(0x3f80),
		SSEQ_BYTES(&v12, sizeof(v12), 4),
	};
	struct args_pack p;

	ck_assert_int_eq(args_pack(&p, args, 7, NULL), 0);
	p.ex.target_case = SSEQ__EXECUTE__TARGET_KERNEL;
	p.ex.kernel = "k";
	Sseq__Execute *ex = execute_roundtrip(&p.ex);
	ck_assert_ptr_nonnull(ex);
	ck_assert_int_eq(ex->args[0]->value_case, SSEQ__ARG__VALUE_I8);
	ck_assert_int_eq(ex->args[0]->i8, -128);
	ck_assert_int_eq(ex->args[1]->value_case, SSEQ__ARG__VALUE_U8);
	ck_assert_uint_eq(ex->args[1]->u8, 255);
	ck_assert_int_eq(ex->args[2]->value_case, SSEQ__ARG__VALUE_I16);
	ck_assert_int_eq(ex->args[2]->i16, 300000);
	ck_assert_int_eq(ex->args[3]->value_case, SSEQ__ARG__VALUE_U16);
	ck_assert_uint_eq(ex->args[3]->u16, 65535);
	ck_assert_int_eq(ex->args[4]->value_case, SSEQ__ARG__VALUE_F16);
	ck_assert_uint_eq(ex->args[4]->f16, 0x3c00);
	ck_assert_int_eq(ex->args[5]->value_case, SSEQ__ARG__VALUE_BF16);
	ck_assert_uint_eq(ex->args[5]->bf16, 0x3f80);
	ck_assert_int_eq(ex->args[6]->value_case, SSEQ__ARG__VALUE_BYTES);
	ck_assert_uint_eq(ex->args[6]->bytes->data.len, 12);
	ck_assert_mem_eq(ex->args[6]->bytes->data.data, &v12, 12);
	ck_assert_uint_eq(ex->args[6]->bytes->align, 4);
	sseq__execute__free_unpacked(ex, NULL);
	args_pack_finish(&p);

	/* Bytes the daemon would refuse are refused here: none, too many, an alignment that
	 * is no power of two or does not divide the size. */
	{
		const char big[4097] = {0};
		const struct sseq_arg bad[] = {SSEQ_BYTES(NULL, 4, 4), SSEQ_BYTES(&v12, 0, 1),
			SSEQ_BYTES(big, sizeof(big), 1), SSEQ_BYTES(&v12, 12, 3),
			SSEQ_BYTES(&v12, 12, 8), SSEQ_BYTES(big, 512, 512)};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			ck_assert_msg(args_pack(&p, &bad[i], 1, NULL) == -EINVAL, "bad[%zu]", i);
			args_pack_finish(&p);
		}
	}
}
END_TEST

START_TEST(test_args_pack_zero_scalar_keeps_its_type)
{
	struct sseq_arg args[] = {SSEQ_F32(0), SSEQ_U64(0)};
	struct args_pack p;
	ck_assert_int_eq(args_pack(&p, args, 2, NULL), 0);
	p.ex.target_case = SSEQ__EXECUTE__TARGET_KERNEL;
	p.ex.kernel = "fill";
	Sseq__Execute *ex = execute_roundtrip(&p.ex);
	ck_assert_int_eq(ex->args[0]->value_case, SSEQ__ARG__VALUE_F32);
	ck_assert_int_eq(ex->args[1]->value_case, SSEQ__ARG__VALUE_U64);
	sseq__execute__free_unpacked(ex, NULL);
	args_pack_finish(&p);
}
END_TEST

START_TEST(test_args_pack_launch_shapes)
{
	struct sseq_arg a = SSEQ_OUT(1);
	struct args_pack p;
	struct sseq_launch el = {.elements = 1000};
	ck_assert_int_eq(args_pack(&p, &a, 1, &el), 0);
	ck_assert_int_eq(p.ex.launch_shape_case, SSEQ__EXECUTE__LAUNCH_SHAPE_ELEMENTS);
	ck_assert_uint_eq(p.ex.elements, 1000);
	args_pack_finish(&p);

	struct sseq_launch g = {.grid = {4}, .block = {256}, .shared_mem = 64};
	ck_assert_int_eq(args_pack(&p, &a, 1, &g), 0);
	ck_assert_int_eq(p.ex.launch_shape_case, SSEQ__EXECUTE__LAUNCH_SHAPE_GRID);
	ck_assert_uint_eq(p.ex.grid->grid_x, 4);
	ck_assert_uint_eq(p.ex.grid->grid_y, 1);
	ck_assert_uint_eq(p.ex.grid->block_x, 256);
	ck_assert_uint_eq(p.ex.grid->block_z, 1);
	ck_assert_uint_eq(p.ex.grid->shared_mem, 64);
	args_pack_finish(&p);

	struct sseq_launch none = {0};
	ck_assert_int_eq(args_pack(&p, &a, 1, &none), 0);
	ck_assert_int_eq(p.ex.launch_shape_case, SSEQ__EXECUTE__LAUNCH_SHAPE__NOT_SET);
	args_pack_finish(&p);
}
END_TEST

START_TEST(test_args_pack_refuses_malformed)
{
	struct args_pack p;
	struct sseq_arg zero = SSEQ_IN(0);
	ck_assert_int_eq(args_pack(&p, &zero, 1, NULL), -EINVAL);
	args_pack_finish(&p);
	struct sseq_arg noaccess = sseq_arg_buffer(3, (enum sseq_access)0);
	ck_assert_int_eq(args_pack(&p, &noaccess, 1, NULL), -EINVAL);
	args_pack_finish(&p);
	struct sseq_arg badtype = {.type = (enum sseq_arg_type)99};
	ck_assert_int_eq(args_pack(&p, &badtype, 1, NULL), -EINVAL);
	args_pack_finish(&p);
}
END_TEST

/* ---- staging range allocator ---- */

static uint8_t arena_mem[4096];

START_TEST(test_staging_reserve_aligned_until_exhausted)
{
	struct staging_arena a;
	staging_arena_init(&a, arena_mem, sizeof(arena_mem));
	uint64_t off, prev = 0;
	for (int i = 0; i < 32; i++) {
		ck_assert_int_eq(staging_arena_reserve(&a, 100, &off), 0);
		ck_assert_uint_eq(off % STAGING_ALIGN, 0);
		if (i > 0)
			ck_assert_uint_ge(off, prev + 100);
		prev = off;
		staging_arena_find(&a, off, 100)->refs = 1;
	}
	/* 32 * 128 = 4096: full. */
	ck_assert_int_eq(staging_arena_reserve(&a, 1, &off), -ENOSPC);
	ck_assert_int_eq(staging_arena_reserve(&a, 8192, &off), -ENOSPC);
	staging_arena_finish(&a);
}
END_TEST

/* Space comes back only when the copies using it completed, and is then reused. */
START_TEST(test_staging_reuses_range_after_last_ref)
{
	struct staging_arena a;
	staging_arena_init(&a, arena_mem, sizeof(arena_mem));
	uint64_t x, y, z;
	ck_assert_int_eq(staging_arena_reserve(&a, 2048, &x), 0);
	struct staging_range *rx = staging_arena_find(&a, x, 2048);
	rx->refs = 2;
	ck_assert_int_eq(staging_arena_reserve(&a, 2048, &y), 0);
	staging_arena_find(&a, y, 2048)->refs = 1;
	ck_assert_int_eq(staging_arena_reserve(&a, 64, &z), -ENOSPC);

	ck_assert(!staging_range_unref(&a, staging_arena_find(&a, x, 0)));
	ck_assert_int_eq(staging_arena_reserve(&a, 64, &z), -ENOSPC);
	ck_assert(staging_range_unref(&a, staging_arena_find(&a, x, 0)));
	ck_assert_uint_eq(a.used, 2048);
	ck_assert_int_eq(staging_arena_reserve(&a, 1024, &z), 0);
	ck_assert_uint_eq(z, x);
	staging_arena_find(&a, z, 0)->refs = 1;
	/* The gap after z fits 1024 more; 1025 does not. */
	ck_assert_int_eq(staging_arena_reserve(&a, 1025, &z), -ENOSPC);
	ck_assert_int_eq(staging_arena_reserve(&a, 1024, &z), 0);
	ck_assert_uint_eq(z, x + 1024);
	staging_arena_finish(&a);
}
END_TEST

/* sseq_host_free while a copy still reads the range must not free it. */
START_TEST(test_staging_user_hold_and_refs_both_count)
{
	struct staging_arena a;
	staging_arena_init(&a, arena_mem, sizeof(arena_mem));
	uint64_t x;
	ck_assert_int_eq(staging_arena_reserve(&a, 4096, &x), 0);
	struct staging_range *r = staging_arena_find(&a, x, 4096);
	r->user = true;
	r->refs = 1;
	ck_assert(!staging_range_unhold(&a, r));
	ck_assert_uint_eq(a.nranges, 1);
	ck_assert(staging_range_unref(&a, staging_arena_find(&a, x, 0)));
	ck_assert_uint_eq(a.nranges, 0);
	ck_assert_uint_eq(a.used, 0);
	staging_arena_finish(&a);
}
END_TEST

START_TEST(test_staging_find_interior_and_bounds)
{
	struct staging_arena a;
	staging_arena_init(&a, arena_mem, sizeof(arena_mem));
	uint64_t x, y;
	staging_arena_reserve(&a, 100, &x);
	staging_arena_reserve(&a, 100, &y);
	ck_assert_ptr_eq(staging_arena_find(&a, x + 10, 90), &a.ranges[0]);
	ck_assert_ptr_null(staging_arena_find(&a, x + 10, 91));
	ck_assert_ptr_eq(staging_arena_find(&a, y + 99, 1), &a.ranges[1]);
	ck_assert_ptr_null(staging_arena_find(&a, x + 100, 1)); /* the alignment gap */
	ck_assert_ptr_null(staging_arena_find(&a, y + 200, 1));
	ck_assert(staging_arena_contains(&a, arena_mem + 4095));
	ck_assert(!staging_arena_contains(&a, arena_mem + 4096));
	staging_arena_finish(&a);
}
END_TEST

START_TEST(test_staging_memfd_is_sealed_against_shrink)
{
	struct staging_arena *a;
	ck_assert_int_eq(staging_arena_create(1 << 20, "test", &a), 0);
	int seals = fcntl(a->fd, F_GET_SEALS);
	ck_assert(seals & F_SEAL_SHRINK);
	ck_assert_int_eq(lseek(a->fd, 0, SEEK_END), 1 << 20);
	ck_assert_int_ne(ftruncate(a->fd, 4096), 0);
	a->base[(1 << 20) - 1] = 7; /* mapped shared and writable */
	staging_arena_destroy(a);
}
END_TEST

/* ---- the library against a scripted fake daemon ---- */

#define FAKE_MAX_HANDLES 64

struct fake {
	int sock;
	pthread_t thread;
	/* Script. */
	uint64_t fail_reply_tag; /* Reply with UNKNOWN_HANDLE */
	uint64_t fail_late_tag; /* Reply OK, then a failed Completion */
	bool hold_completions; /* send them only at Sync, newest first, after its own */
	uint32_t major;
	bool old_daemon; /* a Welcome without lanes (protocol 1.1) */
	uint64_t fail_alloc_size; /* an Alloc of this size gets a Reply with UNKNOWN_HANDLE */
	uint64_t session; /* the Welcome's (0: 42) */
	uint32_t handle_gen; /* the generation in the upper 32 bits of the handles it gives */
	/* Set (atomically) to hold back the Replies to executes until a byte is written to
	 * release[1]; release is a pipe when a test holds replies, else {-1, -1}. */
	bool hold_replies;
	int release[2];
	/* State. */
	uint32_t hello_lanes; /* what the Hello asked for */
	int64_t copy_lane, exec_lane; /* the last copy's and kernel's lane, -1 before one */
	uint8_t *buf[FAKE_MAX_HANDLES];
	uint64_t size[FAKE_MAX_HANDLES];
	unsigned nhandles;
	uint8_t *staging[8];
	uint64_t staging_size[8];
	unsigned nstaging;
	int fds[8];
	unsigned nfds;
	uint64_t held[256];
	int held_status[256];
	unsigned nheld;
	uint64_t held_replies[64];
	unsigned nheld_replies;
	unsigned registers;
	unsigned requests, released; /* atomic: the test thread polls them */
	struct frame_writer w;
};

/* Requests the fake has read so far. */
static unsigned fake_requests(struct fake *f)
{
	return __atomic_load_n(&f->requests, __ATOMIC_SEQ_CST);
}

/* Wait up to 3 s (within check's default timeout) for *counter to reach n; whether it did. */
static bool fake_wait_for(unsigned *counter, unsigned n)
{
	for (int i = 0; i < 3000; i++) {
		if (__atomic_load_n(counter, __ATOMIC_SEQ_CST) >= n)
			return true;
		usleep(1000);
	}
	return false;
}

static void fake_send(struct fake *f, Sseq__Message *m)
{
	frame_writer_add(&f->w, &m->base, -1);
	while (frame_writer_send(&f->w, f->sock) == -EAGAIN)
		usleep(100);
}

static void fake_reply(
	struct fake *f, uint64_t tag, int status, uint64_t handle, Sseq__Welcome *welcome)
{
	Sseq__Reply rep = SSEQ__REPLY__INIT;
	rep.tag = tag;
	rep.status = (Sseq__Status)status;
	rep.message = status ? "scripted failure" : "";
	rep.handle = handle;
	rep.welcome = welcome;
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	m.body_case = SSEQ__MESSAGE__BODY_REPLY;
	m.reply = &rep;
	fake_send(f, &m);
}

static void fake_complete(struct fake *f, uint64_t tag, int status)
{
	Sseq__Completion c = SSEQ__COMPLETION__INIT;
	c.tag = tag;
	c.status = (Sseq__Status)status;
	c.message = status ? "scripted late failure" : "";
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	m.body_case = SSEQ__MESSAGE__BODY_COMPLETION;
	m.completion = &c;
	fake_send(f, &m);
}

static void fake_maybe_complete(struct fake *f, uint64_t tag, int status)
{
	if (f->hold_completions && f->nheld < 256) {
		f->held[f->nheld] = tag;
		f->held_status[f->nheld++] = status;
	} else {
		fake_complete(f, tag, status);
	}
}

static uint8_t *fake_buf(struct fake *f, uint64_t h)
{
	ck_assert_uint_eq(h >> 32, f->handle_gen);
	h &= 0xffffffffu;
	ck_assert(h >= 1 && h <= f->nhandles);
	return f->buf[h - 1];
}

static void fake_handle(struct fake *f, Sseq__Request *q)
{
	int late = q->tag == f->fail_late_tag ? SSEQ__STATUS__STATUS_DEVICE_ERROR : 0;
	bool want = q->want_completion;
	__atomic_fetch_add(&f->requests, 1, __ATOMIC_SEQ_CST);
	if (q->tag == f->fail_reply_tag ||
		(q->body_case == SSEQ__REQUEST__BODY_ALLOC && f->fail_alloc_size &&
			q->alloc->size == f->fail_alloc_size)) {
		fake_reply(f, q->tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE, 0, NULL);
		return;
	}
	switch (q->body_case) {
	case SSEQ__REQUEST__BODY_HELLO: {
		Sseq__DeviceInfo d = SSEQ__DEVICE_INFO__INIT;
		d.name = "fake";
		d.backend = "sim";
		d.memory_total = 1 << 30;
		Sseq__Welcome w = SSEQ__WELCOME__INIT;
		w.protocol_major = f->major;
		w.session = f->session ? f->session : 42;
		w.device = &d;
		w.daemon_version = "test";
		/* Lane k is stream 5 + 4k: ids that are not indexes. */
		uint32_t lanes[16];
		f->hello_lanes = q->hello->lanes;
		w.n_lanes = f->old_daemon ? 0 : q->hello->lanes ? q->hello->lanes : 1;
		for (size_t k = 0; k < w.n_lanes && k < 16; k++)
			lanes[k] = 5 + 4 * (uint32_t)k;
		w.lanes = lanes;
		ck_assert_uint_eq(q->hello->protocol_major, SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR);
		ck_assert_str_eq(q->hello->worker_id, "gw7");
		fake_reply(f, q->tag, 0, 0, &w);
		return;
	}
	case SSEQ__REQUEST__BODY_STAGING_REGISTER: {
		/* Descriptors are taken in arrival order, one per StagingRegister. */
		ck_assert_uint_gt(f->nfds, 0);
		int fd = f->fds[0];
		memmove(&f->fds[0], &f->fds[1], --f->nfds * sizeof(int));
		ck_assert(fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK);
		uint64_t size = q->staging_register->size;
		void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		ck_assert(p != MAP_FAILED);
		close(fd);
		f->staging[f->nstaging] = p;
		f->staging_size[f->nstaging++] = size;
		f->registers++;
		fake_reply(f, q->tag, 0, f->nstaging, NULL);
		return;
	}
	case SSEQ__REQUEST__BODY_ALLOC:
		f->buf[f->nhandles] = calloc(1, q->alloc->size);
		f->size[f->nhandles++] = q->alloc->size;
		fake_reply(f, q->tag, 0, (uint64_t)f->handle_gen << 32 | f->nhandles, NULL);
		return;
	case SSEQ__REQUEST__BODY_COPY_H2D: {
		const Sseq__CopyH2D *c = q->copy_h2d;
		f->copy_lane = c->lane;
		ck_assert_uint_le(c->staging_offset + c->length, f->staging_size[c->staging - 1]);
		memcpy(fake_buf(f, c->dst) + c->dst_offset,
			f->staging[c->staging - 1] + c->staging_offset, c->length);
		fake_reply(f, q->tag, 0, 0, NULL);
		if (want || late)
			fake_maybe_complete(f, q->tag, late);
		return;
	}
	case SSEQ__REQUEST__BODY_COPY_D2H: {
		const Sseq__CopyD2H *c = q->copy_d2h;
		f->copy_lane = c->lane;
		memcpy(f->staging[c->staging - 1] + c->staging_offset,
			fake_buf(f, c->src) + c->src_offset, c->length);
		fake_reply(f, q->tag, 0, 0, NULL);
		fake_maybe_complete(f, q->tag, late);
		return;
	}
	case SSEQ__REQUEST__BODY_SYNC: {
		fake_reply(f, q->tag, 0, 0, NULL);
		fake_complete(f, q->tag, 0);
		/* Completions in any order, even after the Sync's own. */
		while (f->nheld > 0) {
			f->nheld--;
			fake_complete(f, f->held[f->nheld], f->held_status[f->nheld]);
		}
		return;
	}
	default:
		if (q->body_case == SSEQ__REQUEST__BODY_EXECUTE && !want &&
			__atomic_load_n(&f->hold_replies, __ATOMIC_SEQ_CST)) {
			ck_assert_uint_lt(f->nheld_replies, 64);
			f->held_replies[f->nheld_replies++] = q->tag;
			return;
		}
		if (q->body_case == SSEQ__REQUEST__BODY_EXECUTE)
			f->exec_lane = q->execute->lane;
		if (q->body_case == SSEQ__REQUEST__BODY_COPY_D2D)
			f->copy_lane = q->copy_d2d->lane;
		fake_reply(f, q->tag, 0, 0, NULL);
		if (want || late)
			fake_maybe_complete(f, q->tag, late);
		return;
	}
}

/* A byte on the release pipe: answer the executes held back. */
static void fake_release(struct fake *f)
{
	char c;
	ck_assert_int_eq(read(f->release[0], &c, 1), 1);
	for (unsigned i = 0; i < f->nheld_replies; i++)
		fake_reply(f, f->held_replies[i], 0, 0, NULL);
	__atomic_fetch_add(&f->released, f->nheld_replies, __ATOMIC_SEQ_CST);
	f->nheld_replies = 0;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	struct frame_reader r;
	frame_reader_init(&r);
	frame_writer_init(&f->w);
	for (;;) {
		const uint8_t *fr;
		size_t len;
		int k = frame_reader_next(&r, &fr, &len);
		if (k == 1) {
			Sseq__Request *q = sseq__request__unpack(NULL, len, fr);
			ck_assert_ptr_nonnull(q);
			fake_handle(f, q);
			sseq__request__free_unpacked(q, NULL);
			continue;
		}
		if (f->release[0] >= 0) {
			struct pollfd p[2] = {
				{.fd = f->sock, .events = POLLIN},
				{.fd = f->release[0], .events = POLLIN},
			};
			ck_assert_int_gt(poll(p, 2, -1), 0);
			if (p[1].revents & POLLIN)
				fake_release(f);
			if (!p[0].revents)
				continue;
		}
		/* Read with recvmsg so descriptors are collected in arrival order. */
		if (r.start > 0) {
			memmove(r.data, r.data + r.start, r.len - r.start);
			r.len -= r.start;
			r.start = 0;
		}
		if (r.cap - r.len < 65536) {
			r.cap = r.len + 65536 + FRAME_MAX;
			r.data = realloc(r.data, r.cap);
		}
		struct iovec iov = {.iov_base = r.data + r.len, .iov_len = r.cap - r.len};
		union {
			char b[CMSG_SPACE(sizeof(int) * 4)];
			struct cmsghdr align;
		} ctl;
		struct msghdr mh = {.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = ctl.b,
			.msg_controllen = sizeof(ctl.b)};
		ssize_t n = recvmsg(f->sock, &mh, MSG_CMSG_CLOEXEC);
		if (n <= 0)
			break;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
			if (cm->cmsg_type == SCM_RIGHTS)
				memcpy(&f->fds[f->nfds++], CMSG_DATA(cm), sizeof(int));
		r.len += (size_t)n;
	}
	frame_reader_finish(&r);
	frame_writer_finish(&f->w);
	for (unsigned i = 0; i < f->nhandles; i++)
		free(f->buf[i]);
	for (unsigned i = 0; i < f->nstaging; i++)
		munmap(f->staging[i], f->staging_size[i]);
	close(f->sock);
	return NULL;
}

static struct fake *fake_start(void)
{
	struct fake *f = calloc(1, sizeof(*f));
	f->major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	f->copy_lane = f->exec_lane = -1;
	f->release[0] = f->release[1] = -1;
	return f;
}

/* Run the fake daemon on one end of a socketpair; returns the client's end. */
static int fake_serve(struct fake *f)
{
	int sv[2];
	make_pair(sv);
	f->sock = sv[1];
	pthread_create(&f->thread, NULL, fake_main, f);
	return sv[0];
}

static struct sseq *fake_connect(struct fake *f, uint64_t staging_size)
{
	int fd = fake_serve(f);
	struct sseq_connect_options o = {
		.size = sizeof(o),
		.worker_id = "gw7",
		.staging_size = staging_size,
	};
	struct sseq *s;
	int r = sseq__connect_fd(fd, &o, &s);
	ck_assert_msg(r == 0, "connect: %s", sseq_strerror(r));
	return s;
}

static void fake_stop(struct fake *f, struct sseq *s)
{
	sseq_close(s);
	pthread_join(f->thread, NULL);
	for (int i = 0; i < 2; i++)
		if (f->release[i] >= 0)
			close(f->release[i]);
	free(f);
}

START_TEST(test_client_hello_and_welcome)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	struct sseq_info info;
	sseq_get_info(s, &info);
	ck_assert_uint_eq(info.session, 42);
	ck_assert_str_eq(info.device_name, "fake");
	ck_assert_str_eq(info.backend, "sim");
	ck_assert_str_eq(info.daemon_version, "test");
	ck_assert_uint_eq(info.memory_total, 1 << 30);
	fake_stop(f, s);
}
END_TEST

/* Lanes asked for at connect travel in Hello; the Welcome's ids come back from
 * sseq_get_lanes; sseq_set_lane puts every later copy and kernel on its lane and refuses
 * one the connection lacks. */
START_TEST(test_client_lanes_asked_set_and_sent)
{
	struct fake *f = fake_start();
	int fd = fake_serve(f);
	struct sseq_connect_options o = {.size = sizeof(o), .worker_id = "gw7", .lanes = 3};
	struct sseq *s;
	uint32_t ids[4] = {0};
	uint64_t buf, tag;
	float x[4] = {1, 2, 3, 4};

	ck_assert_int_eq(sseq__connect_fd(fd, &o, &s), 0);
	ck_assert_uint_eq(f->hello_lanes, 3);
	ck_assert_int_eq(sseq_get_lanes(s, NULL, 0), 3);
	ck_assert_int_eq(sseq_get_lanes(s, ids, 2), 3);
	ck_assert_uint_eq(ids[0], 5);
	ck_assert_uint_eq(ids[1], 9);
	ck_assert_uint_eq(ids[2], 0); /* n = 2: no more written */
	ck_assert_uint_eq(sseq_get_lane(s), 0);
	ck_assert_int_eq(sseq_alloc(s, sizeof(x), "x", &buf), 0);
	ck_assert_int_eq(sseq_copy_h2d(s, buf, 0, x, sizeof(x), &tag), 0);
	ck_assert_int_eq(sseq_wait(s, tag), 0);
	ck_assert_int_eq(f->copy_lane, 0);

	ck_assert_int_eq(sseq_set_lane(s, 3), -EINVAL);
	ck_assert_ptr_nonnull(strstr(sseq_last_error_message(s), "3 lanes"));
	ck_assert_uint_eq(sseq_get_lane(s), 0);
	ck_assert_int_eq(sseq_set_lane(s, 2), 0);
	ck_assert_uint_eq(sseq_get_lane(s), 2);
	struct sseq_arg args[] = {SSEQ_OUT(buf), SSEQ_F32(1), SSEQ_U64(4)};
	ck_assert_int_eq(sseq_execute(s, "fill", args, 3, NULL, &tag), 0);
	ck_assert_int_eq(sseq_wait(s, tag), 0);
	ck_assert_int_eq(f->exec_lane, 2);
	ck_assert_int_eq(sseq_copy_d2h(s, buf, 0, x, sizeof(x), &tag), 0);
	ck_assert_int_eq(sseq_wait(s, tag), 0);
	ck_assert_int_eq(f->copy_lane, 2);
	ck_assert_int_eq(sseq_set_lane(s, 1), 0);
	ck_assert_int_eq(sseq_copy_d2d(s, buf, 0, buf, 8, 8, &tag), 0);
	ck_assert_int_eq(sseq_wait(s, tag), 0);
	ck_assert_int_eq(f->copy_lane, 1);
	fake_stop(f, s);
}
END_TEST

/* The first version of the options (.size 0, or a size before .lanes) asks for no lanes,
 * whatever lies past it; a daemon before protocol 1.2 (no Welcome.lanes) gives one. */
START_TEST(test_client_lanes_old_options_and_old_daemon)
{
	struct fake *f = fake_start();
	int fd = fake_serve(f);
	struct sseq_connect_options o = {.worker_id = "gw7", .lanes = 4}; /* .size 0 */
	struct sseq *s;
	uint32_t id = 77;

	ck_assert_int_eq(sseq__connect_fd(fd, &o, &s), 0);
	ck_assert_uint_eq(f->hello_lanes, 0);
	ck_assert_int_eq(sseq_get_lanes(s, &id, 1), 1);
	ck_assert_uint_eq(id, 5);
	fake_stop(f, s);

	f = fake_start();
	f->old_daemon = true;
	fd = fake_serve(f);
	o.size = sizeof(o);
	ck_assert_int_eq(sseq__connect_fd(fd, &o, &s), 0);
	ck_assert_uint_eq(f->hello_lanes, 4);
	ck_assert_int_eq(sseq_get_lanes(s, &id, 1), 1);
	ck_assert_uint_eq(id, 0);
	ck_assert_int_eq(sseq_set_lane(s, 1), -EINVAL);
	fake_stop(f, s);
}
END_TEST

START_TEST(test_client_refuses_other_major)
{
	struct fake *f = fake_start();
	f->major = 99;
	int fd = fake_serve(f);
	struct sseq_connect_options o = {.worker_id = "gw7"};
	struct sseq *s;
	ck_assert_int_eq(sseq__connect_fd(fd, &o, &s), -SSEQ_ERR_UNSUPPORTED_VERSION);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(strstr(sseq_last_error_message(NULL), "99"));
	fake_stop(f, NULL);
}
END_TEST

START_TEST(test_client_connect_missing_socket)
{
	struct sseq *s;
	ck_assert_int_eq(sseq_connect("/nonexistent/sseq.sock", NULL, &s), -ENOENT);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(strstr(sseq_last_error_message(NULL), "/nonexistent/sseq.sock"));
}
END_TEST

/* H2D from plain memory and from sseq_host_alloc memory, and D2H into both, through a
 * memfd the fake daemon maps itself. */
START_TEST(test_client_copies_through_staging)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	uint64_t b;
	ck_assert_int_eq(sseq_alloc(s, 4096, "b", &b), 0);
	float src[1024], dst[1024];
	for (int i = 0; i < 1024; i++)
		src[i] = (float)i;
	uint64_t t1, t2, t3;
	ck_assert_int_eq(sseq_copy_h2d(s, b, 0, src, 2048, &t1), 0);
	memset(src, 0, sizeof(src)); /* staged already: the copy must not see this */
	float *host;
	ck_assert_int_eq(sseq_host_alloc(s, 2048, (void **)&host), 0);
	for (int i = 0; i < 512; i++)
		host[i] = (float)(1000 + i);
	ck_assert_int_eq(sseq_copy_h2d(s, b, 2048, host, 2048, &t2), 0);
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, dst, 4096, &t3), 0);
	ck_assert_int_eq(sseq_wait(s, t1), 0);
	ck_assert_int_eq(sseq_wait(s, t3), 0);
	for (int i = 0; i < 512; i++) {
		ck_assert(dst[i] == (float)i);
		ck_assert(dst[512 + i] == (float)(1000 + i));
	}
	/* D2H in place into host memory. */
	memset(host, 0, 2048);
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, host, 2048, &t3), 0);
	ck_assert_int_eq(sseq_wait(s, t3), 0);
	ck_assert(host[511] == 511.0f);
	ck_assert_int_eq(sseq_host_free(s, host), 0);
	ck_assert_int_eq(sseq_host_free(s, host), -EINVAL);
	ck_assert_int_eq(sseq_wait(s, t2), 0); /* finished long ago */
	ck_assert_int_eq(sseq_wait(s, 999), -EINVAL);
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert_uint_eq(f->registers, 1);
	fake_stop(f, s);
}
END_TEST

/* A staging arena much smaller than the traffic: ranges are reused once their copies
 * complete, so no second arena is needed. */
START_TEST(test_client_staging_reused_not_grown)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 8192);
	uint64_t b;
	ck_assert_int_eq(sseq_alloc(s, 3000 * 50, "b", &b), 0);
	uint8_t chunk[3000];
	for (int i = 0; i < 50; i++) {
		memset(chunk, i, sizeof(chunk));
		ck_assert_int_eq(sseq_copy_h2d(s, b, (uint64_t)i * 3000, chunk, 3000, NULL), 0);
	}
	static uint8_t all[3000 * 50];
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, all, 3000, NULL), 0);
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert_uint_eq(f->registers, 1);
	ck_assert_uint_eq(all[0], 0);
	ck_assert_uint_eq(all[2999], 0);
	/* One request larger than the arena gets an arena of its own. */
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, all, sizeof(all), NULL), 0);
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert_uint_eq(f->registers, 2);
	for (int i = 0; i < 50; i++)
		ck_assert_uint_eq(all[i * 3000 + 1234], i);
	fake_stop(f, s);
}
END_TEST

/* A rejected request nobody waits on surfaces at the next sync, exactly once. */
START_TEST(test_client_unwaited_reply_error_kept_for_sync)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	f->fail_reply_tag = 4; /* hello=1, alloc=2, then 3, 4, 5 */
	uint64_t b;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(sseq_copy_d2d(s, b, 0, b, 32, 32, NULL), 0);
	ck_assert_int_eq(sseq_sync(s), -SSEQ_ERR_UNKNOWN_HANDLE);
	ck_assert_str_eq(sseq_last_error_message(s), "scripted failure");
	ck_assert_int_eq(sseq_sync(s), 0);
	fake_stop(f, s);
}
END_TEST

/* An accepted request that fails later (Completion with an error, no want_completion). */
START_TEST(test_client_late_failure_kept_for_sync)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	f->fail_late_tag = 3;
	uint64_t b;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	ck_assert_int_eq(sseq_copy_d2d(s, b, 0, b, 32, 32, NULL), 0);
	ck_assert_int_eq(sseq_sync(s), -SSEQ_ERR_DEVICE_ERROR);
	ck_assert_int_eq(sseq_next_error(s, NULL), 0);
	fake_stop(f, s);
}
END_TEST

/* Waiting on a tag returns its error and takes it: sync does not report it again. */
START_TEST(test_client_wait_takes_error)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	f->fail_reply_tag = 3;
	uint64_t b, t;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	ck_assert_int_eq(sseq_copy_d2d(s, b, 0, b, 32, 32, &t), 0);
	ck_assert_uint_eq(t, 3);
	ck_assert_int_eq(sseq_wait(s, t), -SSEQ_ERR_UNKNOWN_HANDLE);
	ck_assert_int_eq(sseq_sync(s), 0);
	fake_stop(f, s);
}
END_TEST

/* Sync reporting an error must not make a later wait on its tag claim success: the
 * caller would read a D2H destination that was never written. */
START_TEST(test_client_wait_truthful_after_sync_reported)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	f->fail_reply_tag = 4; /* hello, alloc, staging register, then the copy */
	uint64_t b, t;
	float x[4];
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, x, sizeof(x), &t), 0);
	ck_assert_int_eq(sseq_sync(s), -SSEQ_ERR_UNKNOWN_HANDLE);
	ck_assert_int_eq(sseq_sync(s), 0);
	ck_assert_int_eq(sseq_next_error(s, NULL), 0);
	ck_assert_int_eq(sseq_wait(s, t), -SSEQ_ERR_UNKNOWN_HANDLE);
	ck_assert_int_eq(sseq_wait(s, t), 0); /* collected: gone */
	fake_stop(f, s);
}
END_TEST

struct seen {
	uint64_t tags[16];
	int status[16];
	unsigned n;
};

static int record_completion(void *data, uint64_t tag, int status)
{
	struct seen *seen = data;
	seen->tags[seen->n] = tag;
	seen->status[seen->n++] = status;
	return 1; /* taken care of */
}

/* Completions after the Sync's own, newest first: sync still waits for all of them,
 * each result lands, and the callback sees each tag once. */
START_TEST(test_client_completions_out_of_order)
{
	struct fake *f = fake_start();
	struct sseq *s = fake_connect(f, 0);
	struct seen seen = {0};
	sseq_set_completion_callback(s, record_completion, &seen);
	uint64_t b;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	f->hold_completions = true;
	/* Set before the copies: requests may leave as soon as they are submitted. Tags:
	 * hello, alloc, the staging arena's register, the H2D, then the D2Hs. */
	f->fail_late_tag = 6;
	float one[4] = {1, 2, 3, 4}, out[3][4];
	uint64_t tags[4];
	ck_assert_int_eq(sseq_copy_h2d(s, b, 0, one, sizeof(one), &tags[0]), 0);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(sseq_copy_d2h(s, b, 0, out[i], sizeof(one), &tags[i + 1]), 0);
	ck_assert_uint_eq(tags[2], 6);
	ck_assert_uint_eq(sseq_outstanding(s), 4);
	ck_assert_int_eq(sseq_sync(s), 0); /* the callback took the error */
	ck_assert_uint_eq(sseq_outstanding(s), 0);
	ck_assert_uint_eq(seen.n, 4);
	for (unsigned i = 0; i < 4; i++) {
		ck_assert_uint_eq(seen.tags[i], tags[3 - i]);
		ck_assert_int_eq(
			seen.status[i], tags[3 - i] == tags[2] ? -SSEQ_ERR_DEVICE_ERROR : 0);
	}
	ck_assert(out[0][3] == 4.0f);
	ck_assert(out[2][0] == 1.0f);
	ck_assert_int_eq(sseq_wait(s, tags[2]), -SSEQ_ERR_DEVICE_ERROR);
	fake_stop(f, s);
}
END_TEST

/* The daemon going away fails what is in flight and everything after it. */
START_TEST(test_client_connection_loss)
{
	struct fake *f = fake_start();
	f->fail_alloc_size = 13;
	struct sseq *s = fake_connect(f, 0);
	uint64_t b, t;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	f->hold_completions = true;
	float x[4];
	ck_assert_int_eq(sseq_copy_d2h(s, b, 0, x, sizeof(x), &t), 0);
	/* An earlier request's refusal is not why the connection went. */
	ck_assert_int_eq(sseq_alloc(s, 13, NULL, &b), -SSEQ_ERR_UNKNOWN_HANDLE);
	ck_assert_int_eq(sseq_flush(s), 0);
	shutdown(f->sock, SHUT_RDWR);
	ck_assert_int_eq(sseq_wait(s, t), -ECONNRESET);
	ck_assert_str_eq(
		sseq_last_error_message(s), "connection to sseqd lost: Connection reset by peer");
	ck_assert_int_eq(sseq_sync(s), -ECONNRESET);
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), -ECONNRESET);
	ck_assert_str_eq(
		sseq_last_error_message(s), "connection to sseqd lost: Connection reset by peer");
	ck_assert_int_eq(sseq_load_module(s, "", &b), -EINVAL);
	ck_assert_int_eq(sseq_execute(s, "spin", NULL, 0, NULL, NULL), -ECONNRESET);
	ck_assert_str_eq(
		sseq_last_error_message(s), "connection to sseqd lost: Connection reset by peer");
	ck_assert_uint_eq(sseq_outstanding(s), 0);
	fake_stop(f, s);
}
END_TEST

/* Nagle's rule: with no answer due a request leaves at once, so the daemon starts on it
 * while the application does other work; while answers are due later requests are held
 * back and batched, and they leave once an answer has come, with no wait call. */
START_TEST(test_client_sends_at_once_when_idle_batches_while_answers_due)
{
	struct fake *f = fake_start();
	ck_assert_int_eq(pipe2(f->release, O_CLOEXEC), 0);
	struct sseq *s = fake_connect(f, 0);
	uint64_t b;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	unsigned base = fake_requests(f); /* hello, alloc */
	__atomic_store_n(&f->hold_replies, true, __ATOMIC_SEQ_CST);
	const struct sseq_arg args[] = {SSEQ_OUT(b), SSEQ_F32(1), SSEQ_U64(16)};
	ck_assert_int_eq(sseq_execute(s, "fill", args, 3, NULL, NULL), 0);
	ck_assert_msg(fake_wait_for(&f->requests, base + 1),
		"an execute with nothing in flight was not sent");
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(sseq_execute(s, "fill", args, 3, NULL, NULL), 0);
	usleep(100 * 1000);
	ck_assert_msg(fake_requests(f) == base + 1, "%u requests sent while an answer was due",
		fake_requests(f) - base - 1);
	__atomic_store_n(&f->hold_replies, false, __ATOMIC_SEQ_CST);
	ck_assert_int_eq(write(f->release[1], "", 1), 1);
	ck_assert(fake_wait_for(&f->released, 1));
	/* The answer is in the socket: the next submission reads it and sends the batch. */
	ck_assert_int_eq(sseq_execute(s, "fill", args, 3, NULL, NULL), 0);
	ck_assert_msg(fake_wait_for(&f->requests, base + 6),
		"the held requests were not sent after the answer came (%u of 5)",
		fake_requests(f) - base - 1);
	ck_assert_int_eq(sseq_sync(s), 0);
	fake_stop(f, s);
}
END_TEST

/* A call refused before anything is sent describes its own failure, never the daemon's
 * message about an earlier request (sseq_last_error_message would blame the wrong one). */
START_TEST(test_client_local_refusal_replaces_daemon_message)
{
	struct fake *f = fake_start();
	f->fail_alloc_size = 13;
	struct sseq *s = fake_connect(f, 0);
	uint64_t b, t, m, scratch;
	float x[4] = {0};
	void *p;
	ck_assert_int_eq(sseq_alloc(s, 64, NULL, &b), 0);
	const struct sseq_arg good[] = {SSEQ_OUT(b), SSEQ_F32(1), SSEQ_U64(16)};
	struct sseq_arg bad[] = {SSEQ_OUT(b)};
	bad[0].access = (enum sseq_access)0;
	struct sseq_stats st = {.size = 8};
	for (int k = 0;; k++) {
		ck_assert_int_eq(sseq_alloc(s, 13, NULL, &scratch), -SSEQ_ERR_UNKNOWN_HANDLE);
		ck_assert_str_eq(sseq_last_error_message(s), "scripted failure");
		int r;
		switch (k) {
		case 0:
			r = sseq_load_module(s, "", &m);
			break;
		case 1:
			r = sseq_load_module(s, NULL, &m);
			break;
		case 2:
			r = sseq_execute(s, "", good, 3, NULL, NULL);
			break;
		case 3:
			r = sseq_execute(s, "fill", bad, 1, NULL, NULL);
			break;
		case 4:
			r = sseq_execute_function(s, 0, "f", good, 3, NULL, NULL);
			break;
		case 5:
			r = sseq_execute_function(s, 1, "", good, 3, NULL, NULL);
			break;
		case 6:
			r = sseq_copy_h2d(s, b, 0, NULL, 4, &t);
			break;
		case 7:
			r = sseq_copy_d2h(s, b, 0, x, 0, &t);
			break;
		case 8:
			r = sseq_copy_d2d(s, b, 0, b, 32, 0, &t);
			break;
		case 9:
			r = sseq_host_alloc(s, 0, &p);
			break;
		case 10:
			r = sseq_host_free(s, x);
			break;
		case 11:
			r = sseq_set_lane(s, 5);
			break;
		case 12:
			r = sseq_wait(s, 9999);
			break;
		case 13:
			r = sseq_stats(s, &st);
			break;
		case 14:
			r = sseq_poll(s, 0);
			break;
		default:
			r = 1;
			break;
		}
		if (r == 1)
			break;
		const char *msg = sseq_last_error_message(s);
		ck_assert_msg(r < 0 && !SSEQ_IS_DAEMON_ERROR(r), "case %d returned %d", k, r);
		ck_assert_msg(!strstr(msg, "scripted"), "case %d (%s) reports '%s'", k,
			sseq_strerror(r), msg);
		ck_assert_msg(msg[0], "case %d (%s) says nothing", k, sseq_strerror(r));
		ck_assert_uint_eq(sseq_last_error_tag(s), 0);
	}
	ck_assert_int_eq(sseq_sync(s), 0);
	fake_stop(f, s);
}
END_TEST

/* Two connections get the same handle numbers from their daemons; the handles the
 * library returns differ, and one connection refuses the other's before sending
 * anything, naming both sessions, where it used to act on its own buffer of that number. */
START_TEST(test_client_handle_of_other_connection_refused)
{
	struct fake *fa = fake_start(), *fb = fake_start();
	fb->session = 43;
	struct sseq *a = fake_connect(fa, 0), *b = fake_connect(fb, 0);
	uint64_t ha, hb, sl, t;
	float x[4] = {1, 2, 3, 4}, y[4] = {0};

	ck_assert_int_eq(sseq_alloc(a, sizeof(x), "a", &ha), 0);
	ck_assert_int_eq(sseq_alloc(b, sizeof(x), "b", &hb), 0);
	ck_assert_uint_ne(ha, hb);
	/* The daemon's number is in the low bits, as sseqctl shows it. */
	ck_assert_uint_eq(ha & 0xffffffffffffu, 1);
	ck_assert_uint_eq(hb & 0xffffffffffffu, 1);
	ck_assert_int_eq(sseq_sync(a), 0);
	const unsigned before = fake_requests(fa);
	struct sseq_arg args[] = {SSEQ_OUT(hb), SSEQ_F32(1), SSEQ_U64(4)};
	for (int k = 0;; k++) {
		int r;
		switch (k) {
		case 0:
			r = sseq_copy_h2d(a, hb, 0, x, sizeof(x), &t);
			break;
		case 1:
			r = sseq_copy_d2h(a, hb, 0, y, sizeof(y), &t);
			break;
		case 2:
			r = sseq_copy_d2d(a, ha, 0, hb, 0, 4, &t);
			break;
		case 3:
			r = sseq_copy_d2d(a, hb, 0, ha, 0, 4, &t);
			break;
		case 4:
			r = sseq_execute(a, "fill", args, 3, NULL, &t);
			break;
		case 5:
			r = sseq_slice(a, hb, 0, 4, "s", &sl);
			break;
		case 6:
			r = sseq_await(a, hb);
			break;
		case 7:
			r = sseq_free(a, hb);
			break;
		case 8:
			r = sseq_execute_function(a, hb, "f", args, 3, NULL, &t);
			break;
		default:
			r = 1;
			break;
		}
		if (r == 1)
			break;
		const char *msg = sseq_last_error_message(a);
		ck_assert_msg(r == -EINVAL, "case %d returned %d", k, r);
		ck_assert_msg(strstr(msg, "another connection (session 43") &&
				strstr(msg, "this one (session 42"),
			"case %d: '%s'", k, msg);
	}
	ck_assert_uint_eq(fake_requests(fa), before);
	/* Its own handles still reach the daemon as the daemon's numbers. */
	ck_assert_int_eq(sseq_copy_h2d(a, ha, 0, x, sizeof(x), &t), 0);
	ck_assert_int_eq(sseq_copy_d2h(a, ha, 0, y, sizeof(y), &t), 0);
	ck_assert_int_eq(sseq_wait(a, t), 0);
	ck_assert(y[3] == 4);
	ck_assert_int_eq(sseq_sync(a), 0);
	fake_stop(fb, b);
	fake_stop(fa, a);
}
END_TEST

/* A daemon handle with its top 16 bits set (a slot reused 65536 times) still comes and
 * goes exactly. */
START_TEST(test_client_handle_with_high_generation_round_trips)
{
	struct fake *f = fake_start();
	f->handle_gen = 0x12345u << 8;
	struct sseq *s = fake_connect(f, 0);
	uint64_t h, t;
	float x[4] = {1, 2, 3, 4}, y[4] = {0};

	ck_assert_int_eq(sseq_alloc(s, sizeof(x), "h", &h), 0);
	ck_assert_int_eq(sseq_copy_h2d(s, h, 0, x, sizeof(x), &t), 0);
	ck_assert_int_eq(sseq_copy_d2h(s, h, 0, y, sizeof(y), &t), 0);
	ck_assert_int_eq(sseq_wait(s, t), 0);
	ck_assert(y[2] == 3);
	fake_stop(f, s);
}
END_TEST

START_TEST(test_client_strerror_covers_all)
{
	for (int st = 1; st < SSEQ_ERR_END - SSEQ_ERR_BASE; st++) {
		const char *m = sseq_strerror(-(SSEQ_ERR_BASE + st));
		ck_assert_ptr_nonnull(m);
		ck_assert_str_ne(m, "unknown daemon status");
	}
	ck_assert_str_eq(sseq_strerror(-(SSEQ_ERR_BASE + 500)), "unknown daemon status");
	ck_assert_str_eq(sseq_strerror(-ENOENT), "No such file or directory");
	ck_assert_str_eq(sseq_strerror(0), "success");
	ck_assert(SSEQ_IS_DAEMON_ERROR(-SSEQ_ERR_BUSY));
	ck_assert(!SSEQ_IS_DAEMON_ERROR(-ECONNRESET));
	ck_assert_int_eq(client_status_code(SSEQ__STATUS__STATUS_BUSY), -SSEQ_ERR_BUSY);
}
END_TEST

static Suite *client_suite(void)
{
	Suite *s = suite_create("client");
	TCase *tc = tcase_create("frame");
	tcase_add_test(tc, test_frame_batch_roundtrip);
	tcase_add_test(tc, test_frame_reader_reassembles_byte_by_byte);
	tcase_add_test(tc, test_frame_reader_rejects_oversized_length);
	tcase_add_test(tc, test_frame_reader_eof);
	tcase_add_test(tc, test_frame_writer_refuses_oversized_message);
	tcase_add_test(tc, test_frame_fd_rides_first_byte_of_its_frame);
	suite_add_tcase(s, tc);

	tc = tcase_create("args");
	tcase_add_test(tc, test_args_pack_types_and_access);
	tcase_add_test(tc, test_args_pack_zero_scalar_keeps_its_type);
	tcase_add_test(tc, test_args_pack_narrow_scalars_travel_widened_and_bytes_by_value);
	tcase_add_test(tc, test_args_pack_launch_shapes);
	tcase_add_test(tc, test_args_pack_refuses_malformed);
	suite_add_tcase(s, tc);

	tc = tcase_create("staging");
	tcase_add_test(tc, test_staging_reserve_aligned_until_exhausted);
	tcase_add_test(tc, test_staging_reuses_range_after_last_ref);
	tcase_add_test(tc, test_staging_user_hold_and_refs_both_count);
	tcase_add_test(tc, test_staging_find_interior_and_bounds);
	tcase_add_test(tc, test_staging_memfd_is_sealed_against_shrink);
	suite_add_tcase(s, tc);

	tc = tcase_create("library");
	tcase_add_test(tc, test_client_hello_and_welcome);
	tcase_add_test(tc, test_client_refuses_other_major);
	tcase_add_test(tc, test_client_lanes_asked_set_and_sent);
	tcase_add_test(tc, test_client_lanes_old_options_and_old_daemon);
	tcase_add_test(tc, test_client_connect_missing_socket);
	tcase_add_test(tc, test_client_copies_through_staging);
	tcase_add_test(tc, test_client_staging_reused_not_grown);
	tcase_add_test(tc, test_client_unwaited_reply_error_kept_for_sync);
	tcase_add_test(tc, test_client_late_failure_kept_for_sync);
	tcase_add_test(tc, test_client_wait_takes_error);
	tcase_add_test(tc, test_client_wait_truthful_after_sync_reported);
	tcase_add_test(tc, test_client_completions_out_of_order);
	tcase_add_test(tc, test_client_connection_loss);
	tcase_add_test(tc, test_client_strerror_covers_all);
	tcase_add_test(tc, test_client_sends_at_once_when_idle_batches_while_answers_due);
	tcase_add_test(tc, test_client_local_refusal_replaces_daemon_message);
	tcase_add_test(tc, test_client_handle_of_other_connection_refused);
	tcase_add_test(tc, test_client_handle_with_high_generation_round_trips);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(client_suite());
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
