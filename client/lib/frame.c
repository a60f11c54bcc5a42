/* Wire framing for libsseq: batching writer with descriptor passing, and a bounded
 * frame reader. Everything here is non-blocking; waiting is the caller's business. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"

void frame_writer_init(struct frame_writer *w)
{
	memset(w, 0, sizeof(*w));
}

void frame_writer_finish(struct frame_writer *w)
{
	free(w->data);
	free(w->fds);
	memset(w, 0, sizeof(*w));
}

static int grow(void **data, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap : 16;
	while (ncap < need)
		ncap *= 2;
	void *p = realloc(*data, ncap * elem);
	if (!p)
		return -ENOMEM;
	*data = p;
	*cap = ncap;
	return 0;
}

/* Drop what was already sent so the buffer does not grow while the peer lags. */
static void writer_compact(struct frame_writer *w)
{
	if (w->sent == 0)
		return;
	memmove(w->data, w->data + w->sent, w->len - w->sent);
	for (size_t i = w->fds_sent; i < w->nfds; i++)
		w->fds[i - w->fds_sent] = (struct frame_fd){
			.offset = w->fds[i].offset - w->sent,
			.fd = w->fds[i].fd,
		};
	w->nfds -= w->fds_sent;
	w->fds_sent = 0;
	w->len -= w->sent;
	w->sent = 0;
}

int frame_writer_add(struct frame_writer *w, const ProtobufCMessage *msg, int fd)
{
	size_t size = protobuf_c_message_get_packed_size(msg);
	if (size > FRAME_MAX)
		return -EMSGSIZE;
	if (w->sent > 0 && (w->sent == w->len || w->sent >= 65536))
		writer_compact(w);
	int r = grow((void **)&w->data, &w->cap, w->len + FRAME_HEADER + size, 1);
	if (r < 0)
		return r;
	if (fd >= 0) {
		r = grow((void **)&w->fds, &w->fds_cap, w->nfds + 1, sizeof(*w->fds));
		if (r < 0)
			return r;
		w->fds[w->nfds++] = (struct frame_fd){.offset = w->len, .fd = fd};
	}
	uint8_t *p = w->data + w->len;
	frame_put_len(p, (uint32_t)size);
	protobuf_c_message_pack(msg, p + FRAME_HEADER);
	w->len += FRAME_HEADER + size;
	return 0;
}

size_t frame_writer_pending(const struct frame_writer *w)
{
	return w->len - w->sent;
}

/* One sendmsg of [sent, end), with `fd` as SCM_RIGHTS when fd >= 0. */
static ssize_t send_chunk(int sock, const uint8_t *data, size_t len, int fd)
{
	struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(&control, 0, sizeof(control));
		mh.msg_control = control.buf;
		mh.msg_controllen = sizeof(control.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

int frame_writer_send(struct frame_writer *w, int sock)
{
	while (w->sent < w->len) {
		size_t end = w->len;
		int fd = -1;
		if (w->fds_sent < w->nfds) {
			const struct frame_fd *next = &w->fds[w->fds_sent];
			if (next->offset == w->sent)
				fd = next->fd;
			else
				end = next->offset; /* stop before it: it must ride its own first
						       byte */
			if (fd >= 0 && w->fds_sent + 1 < w->nfds)
				end = w->fds[w->fds_sent + 1].offset;
		}
		ssize_t n = send_chunk(sock, w->data + w->sent, end - w->sent, fd);
		if (n == -EWOULDBLOCK)
			return -EAGAIN;
		if (n < 0)
			return (int)n;
		if (fd >= 0)
			w->fds_sent++;
		w->sent += (size_t)n;
		w->sock_sent += (uint64_t)n;
	}
	w->len = w->sent = 0;
	w->nfds = w->fds_sent = 0;
	return 0;
}

/* Copy n bytes, at most the ring's room, to the ring at its tail, and publish them. */
static void ring_put(struct frame_ring *rg, const uint8_t *p, uint64_t n)
{
	sseq_ring_put(rg->data, rg->size, rg->tail, p, n);
	rg->tail += n;
	atomic_store_explicit(&rg->hdr->tail, rg->tail, memory_order_release);
}

/* Wake a daemon that may sleep: a frame of length 0 on the socket. Its tail was published
 * before the look at awake (the fence; the daemon stores awake 0 before its last look at
 * the tail), so one of the two sees the other. A full socket needs none: the daemon has
 * unread bytes there and will read them. 0, or the socket's error (a daemon gone, which
 * the write to the ring could not tell). */
static int ring_doorbell(struct frame_writer *w, int sock, struct frame_ring *rg)
{
	static const uint8_t zero[FRAME_HEADER];
	size_t done = 0;

	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&rg->hdr->awake, memory_order_relaxed))
		return 0;
	while (done < sizeof(zero)) {
		ssize_t n = send_chunk(sock, zero + done, sizeof(zero) - done, -1);

		if (n == -EWOULDBLOCK && !done)
			return 0; /* full: the daemon has reading to do */
		if (n < 0 && n != -EWOULDBLOCK)
			return (int)n;
		if (n > 0) {
			done += (size_t)n;
			w->sock_sent += (uint64_t)n;
		}
	}
	rg->doorbells++;
	return 0;
}

int frame_writer_send_ring(struct frame_writer *w, int sock, struct frame_ring *rg)
{
	bool wrote = false;
	int r = 0;

	if (!rg->hdr)
		return frame_writer_send(w, sock);
	rg->waiting = false;
	while (w->sent < w->len) {
		const struct frame_fd *next = w->fds_sent < w->nfds ? &w->fds[w->fds_sent] : NULL;

		if (!next || next->offset > w->sent) {
			const size_t end = next ? next->offset : w->len;
			const uint64_t read =
				atomic_load_explicit(&rg->hdr->sock_read, memory_order_acquire);
			const uint64_t head =
				atomic_load_explicit(&rg->hdr->head, memory_order_acquire);
			uint64_t n = end - w->sent;

			if (read < rg->sock_fence || rg->size - (rg->tail - head) == 0) {
				rg->waiting = true;
				r = -EAGAIN;
				break;
			}
			if (n > rg->size - (rg->tail - head))
				n = rg->size - (rg->tail - head);
			ring_put(rg, w->data + w->sent, n);
			w->sent += (size_t)n;
			wrote = true;
			continue;
		}
		/* A descriptor's frame, on the socket once the ring is taken: the bytes from it
		 * to the next descriptor's (or the end) go there, as frame_writer_send sends. */
		if (atomic_load_explicit(&rg->hdr->head, memory_order_acquire) != rg->tail) {
			rg->waiting = true;
			r = -EAGAIN;
			break;
		}
		const size_t end =
			w->fds_sent + 1 < w->nfds ? w->fds[w->fds_sent + 1].offset : w->len;
		ssize_t n = send_chunk(sock, w->data + w->sent, end - w->sent, next->fd);

		if (n == -EWOULDBLOCK) {
			r = -EAGAIN;
			break;
		}
		if (n < 0) {
			r = (int)n;
			break;
		}
		w->fds_sent++;
		w->sent += (size_t)n;
		w->sock_sent += (uint64_t)n;
		rg->sock_fence = w->sock_sent;
		/* What a partial send left is not at a descriptor: it goes to the ring, once
		 * the daemon has read the socket this far. */
	}
	if (wrote) {
		const int d = ring_doorbell(w, sock, rg);

		if (d < 0 && (r == 0 || r == -EAGAIN))
			r = d; /* what a send on the socket would have said */
	}
	if (r == 0) {
		w->len = w->sent = 0;
		w->nfds = w->fds_sent = 0;
	}
	return r;
}

void frame_reader_init(struct frame_reader *r)
{
	memset(r, 0, sizeof(*r));
}

void frame_reader_finish(struct frame_reader *r)
{
	free(r->data);
	memset(r, 0, sizeof(*r));
}

int frame_reader_fill(struct frame_reader *r, int sock)
{
	if (r->start > 0) {
		memmove(r->data, r->data + r->start, r->len - r->start);
		r->len -= r->start;
		r->start = 0;
	}
	/* Read in 64 KiB steps; the buffer only grows past that for a frame that needs it
	 * (frame_reader_next asks for the room once the length has been checked). */
	if (r->cap - r->len < 65536) {
		int g = grow((void **)&r->data, &r->cap, r->len + 65536, 1);
		if (g < 0)
			return g;
	}
	const size_t room = r->cap - r->len;
	ssize_t n;
	do
		n = recv(sock, r->data + r->len, room, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	r->drained = n > 0 && (size_t)n < room;
	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	r->len += (size_t)n;
	return (int)n;
}

int frame_reader_next(struct frame_reader *r, const uint8_t **frame, size_t *len)
{
	size_t avail = r->len - r->start;
	if (avail < FRAME_HEADER)
		return 0;
	const uint8_t *p = r->data + r->start;
	uint32_t size = frame_get_len(p);
	if (size > FRAME_MAX)
		return -EMSGSIZE;
	if (avail < FRAME_HEADER + (size_t)size) {
		/* Make sure the whole frame will fit once it arrives. */
		size_t need = FRAME_HEADER + (size_t)size;
		if (need > r->cap) {
			int g = grow((void **)&r->data, &r->cap, need, 1);
			if (g < 0)
				return g;
		}
		return 0;
	}
	*frame = p + FRAME_HEADER;
	*len = size;
	r->start += FRAME_HEADER + size;
	if (r->start == r->len)
		r->start = r->len = 0;
	return 1;
}
