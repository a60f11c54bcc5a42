/* The in-process server the unit tests drive (test-loop.h). */
#include "test-loop.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"
#include "sseq-frame.h"

static int tl_mem_alloc(void *ctx, uint64_t size, uint64_t *addr)
{
	struct tl *t = ctx;

	*addr = t->next_addr;
	t->next_addr += (size + 255) & ~255ull;
	return 0;
}

static void tl_mem_release(void *ctx, uint64_t addr, uint64_t size)
{
}

static int tl_record(void *ctx, struct seq_point at)
{
	return 0;
}

static int tl_wait(void *ctx, uint32_t stream, struct seq_point event)
{
	return 0;
}

static int tl_launch(void *ctx, struct seq_point at, const struct seq_op *op)
{
	((struct tl *)ctx)->launches++;
	return 0;
}

static void tl_info(void *ctx, struct backend_info *info)
{
	*info = (struct backend_info){.backend = "test", .memory_total = 1ull << 30};
	strcpy(info->name, "test device");
	strcpy(info->arch, "none");
}

static const struct backend_ops tl_ops = {
	.dev =
		{
			.mem_alloc = tl_mem_alloc,
			.mem_release = tl_mem_release,
			.record = tl_record,
			.wait = tl_wait,
			.launch = tl_launch,
		},
	.info = tl_info,
};

struct tl *tl_new(unsigned window)
{
	struct tl *t = calloc(1, sizeof(*t));
	struct server_options opts = {
		.socket_path = "test",
		.module_dir = "/nonexistent",
		.seq = {.n_d2h = 1, .n_d2d = 1, .window = window ? window : SEQ_DEFAULT_WINDOW},
		.limits = SERVER_LIMITS_DEFAULT,
		.account = ACCOUNT_LIMITS_DEFAULT,
	};

	ck_assert_ptr_nonnull(t);
	log_set_level((enum log_level)0);
	ck_assert_int_eq(pipe2(t->listen_pipe, O_CLOEXEC | O_NONBLOCK), 0);
	opts.listen_fd = t->listen_pipe[0];
	opts.limits.hello_timeout_ms = 0;
	opts.limits.frame_timeout_ms = 0;
	t->next_addr = 1 << 20;
	t->be = (struct backend){.ops = &tl_ops, .ctx = t};
	ck_assert_int_eq(uv_loop_init(&t->loop), 0);
	cq_init(&t->cq);
	ck_assert_int_eq(server_init(&t->srv, &t->loop, &opts, &t->be, &t->cq), 0);
	return t;
}

void tl_free(struct tl *t)
{
	tl_complete_all(t);
	ck_assert(server_idle(&t->srv));
	server_finish(&t->srv);
	server_close_handles(&t->srv);
	uv_run(&t->loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&t->loop), 0); /* every session was freed */
	cq_finish(&t->cq);
	close(t->listen_pipe[0]);
	close(t->listen_pipe[1]);
	free(t);
}

void tl_connect(struct tl *t, struct tl_client *c)
{
	int sv[2];

	*c = (struct tl_client){.next_tag = 1};
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	c->s = conn_accept(&t->srv, sv[0]);
	ck_assert_ptr_nonnull(c->s);
	c->fd = sv[1];
}

void tl_close(struct tl *t, struct tl_client *c)
{
	close(c->fd);
	c->fd = -1;
	free(c->rx);
	c->rx = NULL;
	c->rx_len = c->rx_cap = 0;
	tl_pump(t);
}

void tl_pump(struct tl *t)
{
	for (int i = 0; i < 4; i++)
		uv_run(&t->loop, UV_RUN_NOWAIT);
}

void tl_complete(struct tl *t, uint32_t stream, uint64_t seq)
{
	cq_push(&t->cq, (struct seq_point){stream, seq}, 0);
	tl_pump(t);
}

void tl_complete_all(struct tl *t)
{
	for (int round = 0; round < 1000 && !server_idle(&t->srv); round++)
		for (uint32_t x = 0; x < seq_stream_count(t->srv.seq); x++)
			tl_complete(t, x, tl_issued(t, x));
}

uint64_t tl_issued(struct tl *t, uint32_t stream)
{
	struct seq_stream_info si;

	seq_stream_info(t->srv.seq, stream, &si);
	return si.issued;
}

uint64_t tl_completed(struct tl *t, uint32_t stream)
{
	struct seq_stream_info si;

	seq_stream_info(t->srv.seq, stream, &si);
	return si.completed;
}

size_t tl_frame(const Sseq__Request *rq, uint8_t *buf)
{
	size_t len = sseq__request__get_packed_size(rq);

	frame_put_len(buf, (uint32_t)len);
	sseq__request__pack(rq, buf + FRAME_HEADER);
	return FRAME_HEADER + len;
}

void tl_write(struct tl_client *c, const void *p, size_t n, const int *fds, unsigned nfds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * SESSION_MAX_FDS)];
	} ctl;
	struct iovec iov = {.iov_base = (void *)p, .iov_len = n};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

	ck_assert_uint_le(nfds, SESSION_MAX_FDS);
	if (nfds) {
		struct cmsghdr *cm;
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	}
	/* The socket buffer is large enough for what the tests send at once, or the daemon
	 * reads in between (the caller pumps). */
	while (iov.iov_len) {
		ssize_t w = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
		if (w < 0 && errno == EAGAIN) {
			usleep(1000);
			continue;
		}
		ck_assert_int_gt(w, 0);
		iov.iov_base = (uint8_t *)iov.iov_base + w;
		iov.iov_len -= (size_t)w;
		msg.msg_control = NULL;
		msg.msg_controllen = 0;
	}
}

uint64_t tl_send(struct tl_client *c, Sseq__Request *rq)
{
	size_t len;
	uint8_t *buf;

	rq->tag = c->next_tag++;
	len = sseq__request__get_packed_size(rq) + FRAME_HEADER;
	buf = malloc(len);
	ck_assert_ptr_nonnull(buf);
	tl_frame(rq, buf);
	tl_write(c, buf, len, NULL, 0);
	free(buf);
	return rq->tag;
}

static void tl_read(struct tl_client *c)
{
	while (!c->eof) {
		ssize_t n;
		if (c->rx_cap - c->rx_len < 65536) {
			c->rx_cap = c->rx_cap ? c->rx_cap * 2 : 131072;
			c->rx = realloc(c->rx, c->rx_cap);
			ck_assert_ptr_nonnull(c->rx);
		}
		n = recv(c->fd, c->rx + c->rx_len, c->rx_cap - c->rx_len, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (n <= 0) {
			c->eof = true;
			break;
		}
		c->rx_len += (size_t)n;
	}
}

Sseq__Message *tl_next(struct tl_client *c)
{
	Sseq__Message *m;
	uint32_t len;

	tl_read(c);
	if (c->rx_len < FRAME_HEADER)
		return NULL;
	len = frame_get_len(c->rx);
	ck_assert_uint_le(len, FRAME_MAX);
	if (c->rx_len - FRAME_HEADER < len)
		return NULL;
	m = sseq__message__unpack(NULL, len, c->rx + FRAME_HEADER);
	ck_assert_ptr_nonnull(m);
	memmove(c->rx, c->rx + FRAME_HEADER + len, c->rx_len - FRAME_HEADER - len);
	c->rx_len -= FRAME_HEADER + len;
	return m;
}

Sseq__Status tl_reply(struct tl_client *c, uint64_t tag, uint64_t *handle)
{
	Sseq__Message *m = tl_next(c);
	Sseq__Status st;

	ck_assert_msg(m != NULL, "no message for tag %llu", (unsigned long long)tag);
	ck_assert_int_eq(m->body_case, SSEQ__MESSAGE__BODY_REPLY);
	ck_assert_uint_eq(m->reply->tag, tag);
	st = m->reply->status;
	if (handle)
		*handle = m->reply->handle;
	sseq__message__free_unpacked(m, NULL);
	return st;
}

Sseq__Status tl_exchange(struct tl *t, struct tl_client *c, const void *p, size_t n, const int *fds,
	unsigned nfds, uint64_t tag, uint64_t *handle)
{
	tl_write(c, p, n, fds, nfds);
	tl_pump(t);
	return tl_reply(c, tag, handle);
}

unsigned tl_take_replies(struct tl_client *c)
{
	unsigned replies = 0;
	Sseq__Message *m;

	while ((m = tl_next(c))) {
		replies += m->body_case == SSEQ__MESSAGE__BODY_REPLY;
		sseq__message__free_unpacked(m, NULL);
	}
	return replies;
}

void tl_hello(struct tl *t, struct tl_client *c, const char *name)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Hello h = SSEQ__HELLO__INIT;
	uint64_t tag;

	h.protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	h.protocol_minor = SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR;
	h.client_name = (char *)name;
	h.worker_id = (char *)"gw0";
	rq.body_case = SSEQ__REQUEST__BODY_HELLO;
	rq.hello = &h;
	tag = tl_send(c, &rq);
	tl_pump(t);
	ck_assert_int_eq(tl_reply(c, tag, NULL), SSEQ__STATUS__STATUS_OK);
}

uint64_t tl_alloc(struct tl *t, struct tl_client *c, uint64_t size, const char *label)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Alloc a = SSEQ__ALLOC__INIT;
	uint64_t tag, h = 0;

	a.size = size;
	a.label = (char *)label;
	rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
	rq.alloc = &a;
	tag = tl_send(c, &rq);
	tl_pump(t);
	ck_assert_int_eq(tl_reply(c, tag, &h), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_ne(h, 0);
	return h;
}

uint64_t tl_slice(struct tl *t, struct tl_client *c, uint64_t of, uint64_t off, uint64_t len)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Slice sl = SSEQ__SLICE__INIT;
	uint64_t tag, h = 0;

	sl.buffer = of;
	sl.offset = off;
	sl.length = len;
	sl.label = (char *)"slice";
	rq.body_case = SSEQ__REQUEST__BODY_SLICE;
	rq.slice = &sl;
	tag = tl_send(c, &rq);
	tl_pump(t);
	ck_assert_int_eq(tl_reply(c, tag, &h), SSEQ__STATUS__STATUS_OK);
	return h;
}

uint64_t tl_send_d2d(struct tl_client *c, uint64_t h, uint64_t len)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__CopyD2D d = SSEQ__COPY_D2_D__INIT;

	d.src = h;
	d.src_offset = 0;
	d.dst = h;
	d.dst_offset = len;
	d.length = len;
	rq.body_case = SSEQ__REQUEST__BODY_COPY_D2D;
	rq.copy_d2d = &d;
	return tl_send(c, &rq);
}
