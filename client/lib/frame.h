/* Wire framing for libsseq: a 4-byte little-endian length, then one packed protobuf
 * message. The writer batches frames and can attach a descriptor to a frame's first
 * byte (SCM_RIGHTS); the reader cuts frames out of a byte stream, never trusting a
 * length. Message-agnostic, so both ends of a test can use it. */
#ifndef SSEQ_CLIENT_FRAME_H
#define SSEQ_CLIENT_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "sseq-frame.h"
#include "sseq-ring.h"

struct frame_fd {
	size_t offset; /* byte of the send buffer the descriptor travels with */
	int fd; /* borrowed: the owner keeps it open until frame_writer_pending_fds() drops */
};

struct frame_writer {
	uint8_t *data;
	size_t len; /* bytes queued */
	size_t sent; /* of which already sent */
	size_t cap;
	struct frame_fd *fds;
	size_t nfds, fds_sent, fds_cap;
	uint64_t sock_sent; /* bytes sent on the socket since the connection began */
};

/* A request ring (RequestRing, proto/sseq-ring.h) the writer puts bytes into instead of
 * the socket: the same stream, so a byte goes to the ring only once the daemon has read
 * every byte sent on the socket before it, and to the socket only once the daemon has
 * taken every byte written to the ring before it; a descriptor's frame goes on the
 * socket. */
struct frame_ring {
	struct sseq_ring_header *hdr; /* NULL: no ring */
	uint8_t *data;
	uint64_t size; /* a power of two */
	uint64_t tail; /* bytes written to it */
	uint64_t sock_fence; /* the writer's sock_sent after its last bytes but doorbells */
	uint64_t doorbells; /* frames of length 0 sent to wake the daemon */
	bool waiting; /* the last send stopped for the daemon to take or read (not the socket) */
};

struct frame_reader {
	uint8_t *data;
	size_t start; /* first unconsumed byte */
	size_t len; /* bytes held, from data[0] */
	size_t cap;
	/* The last fill read less than it had room for: the socket had nothing more then,
	 * and reading again at once would only be told so. */
	bool drained;
};

void frame_writer_init(struct frame_writer *w);
void frame_writer_finish(struct frame_writer *w);
/* Append one frame holding `msg`; with fd >= 0 the descriptor is sent along with the
 * frame's first byte. -EMSGSIZE if the packed message exceeds FRAME_MAX. */
int frame_writer_add(struct frame_writer *w, const ProtobufCMessage *msg, int fd);
/* Bytes still to send. */
size_t frame_writer_pending(const struct frame_writer *w);
/* Send as much as the socket takes without blocking. Returns 0 when everything was
 * sent, -EAGAIN when the socket is full, or a negative errno. */
int frame_writer_send(struct frame_writer *w, int sock);
/* The same through ring where it can (rg->hdr set): -EAGAIN with rg->waiting when it
 * stopped for the daemon (the ring full, or the other way not yet taken), with the
 * doorbell rung where the daemon may sleep. */
int frame_writer_send_ring(struct frame_writer *w, int sock, struct frame_ring *rg);

void frame_reader_init(struct frame_reader *r);
void frame_reader_finish(struct frame_reader *r);
/* Read what the socket has without blocking. Returns bytes read (> 0), -EAGAIN when
 * nothing is there, -ECONNRESET at end of stream, or a negative errno; r->drained tells
 * whether a read of > 0 bytes emptied the socket. */
int frame_reader_fill(struct frame_reader *r, int sock);
/* Take the next complete frame: 1 with *frame / *len set (valid until the next reader
 * call), 0 when more bytes are needed, -EMSGSIZE for a length over FRAME_MAX. */
int frame_reader_next(struct frame_reader *r, const uint8_t **frame, size_t *len);

#endif
