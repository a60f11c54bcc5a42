/* The server's unit tests drive the server library in-process: its own libuv loop, a
 * device that completes nothing until the test says so (tl_complete pushes to the
 * completion queue, as a backend thread would), and clients on socketpairs. */
#ifndef SSEQ_TEST_LOOP_H
#define SSEQ_TEST_LOOP_H

#include <stdint.h>

#include "server.h"
#include "session-private.h"

struct tl {
	uv_loop_t loop;
	struct server srv;
	struct cq cq;
	struct backend be;
	uint64_t next_addr; /* the device's allocator */
	uint64_t launches; /* ops the device was given */
	int listen_pipe[2]; /* what the listener polls: nobody connects through it */
};

/* A client's end of its connection, and what it has read but not yet taken. */
struct tl_client {
	int fd;
	struct session *s; /* the daemon's end */
	uint8_t *rx;
	size_t rx_len, rx_cap;
	bool eof; /* the daemon closed */
	uint64_t next_tag;
};

/* A server whose streams have `window` points each (0: the default). */
struct tl *tl_new(unsigned window);
/* Everything completed and freed; the clients must have been closed. */
void tl_free(struct tl *t);
/* A connected session (Hello not yet sent). */
void tl_connect(struct tl *t, struct tl_client *c);
void tl_close(struct tl *t, struct tl_client *c);
/* A few loop turns: reads, requests, completions drained, replies written. */
void tl_pump(struct tl *t);
/* The device reports `stream` complete through `seq` (from the loop's point of view, a
 * backend thread pushed it), then the loop runs. */
void tl_complete(struct tl *t, uint32_t stream, uint64_t seq);
/* Every issued point on every stream completes. */
void tl_complete_all(struct tl *t);
uint64_t tl_issued(struct tl *t, uint32_t stream);
uint64_t tl_completed(struct tl *t, uint32_t stream);

/* rq framed into buf (FRAME_HEADER + its packed size); returns the length. */
size_t tl_frame(const Sseq__Request *rq, uint8_t *buf);
/* Write n bytes, with fds as SCM_RIGHTS when nfds > 0. */
void tl_write(struct tl_client *c, const void *p, size_t n, const int *fds, unsigned nfds);
/* Send rq under the client's next tag (which it returns). */
uint64_t tl_send(struct tl_client *c, Sseq__Request *rq);
/* The next message the daemon sent, or NULL (free with sseq__message__free_unpacked). */
Sseq__Message *tl_next(struct tl_client *c);
/* The next message must be a Reply to tag: its status, and its handle in *handle. */
Sseq__Status tl_reply(struct tl_client *c, uint64_t tag, uint64_t *handle);
/* Write n bytes (fds as tl_write), pump, and take the Reply to tag (as tl_reply). */
Sseq__Status tl_exchange(struct tl *t, struct tl_client *c, const void *p, size_t n, const int *fds,
	unsigned nfds, uint64_t tag, uint64_t *handle);
/* Take every message the daemon has sent so far: how many were Replies. */
unsigned tl_take_replies(struct tl_client *c);

/* Requests that answer at once; each pumps the loop and returns the Reply's handle. */
void tl_hello(struct tl *t, struct tl_client *c, const char *name);
uint64_t tl_alloc(struct tl *t, struct tl_client *c, uint64_t size, const char *label);
uint64_t tl_slice(struct tl *t, struct tl_client *c, uint64_t of, uint64_t off, uint64_t len);
/* A D2D copy within buffer h (sent, not pumped). */
uint64_t tl_send_d2d(struct tl_client *c, uint64_t h, uint64_t len);

#endif
