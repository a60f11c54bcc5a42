/* The scripted fake sseqd (test-client-fake.c): what a test sets before or while the
 * library talks to it, and what it counts. */
#ifndef SSEQ_TEST_CLIENT_FAKE_H
#define SSEQ_TEST_CLIENT_FAKE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "client.h"

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
	uint32_t minor; /* the Welcome's protocol minor (0 before client-named handles) */
	/* Set (atomically) to hold back the Replies to executes until a byte is written to
	 * release[1]; release is a pipe when a test holds replies, else {-1, -1}. */
	bool hold_replies;
	int release[2];
	/* A D2H's done word (minor 10): written by compare-and-swap as sseqd does, after the
	 * bytes and before the Reply, or word_delay_ms after the Reply; no Completion where
	 * the swap wrote the tag. From minor 12 over the sleeping mark too (done-word.h). */
	unsigned word_delay_ms;
	/* State. */
	uint32_t hello_lanes; /* what the Hello asked for */
	int64_t copy_lane, exec_lane; /* the last copy's and kernel's lane, -1 before one */
	uint8_t *buf[FAKE_MAX_HANDLES];
	uint64_t size[FAKE_MAX_HANDLES];
	uint64_t name[FAKE_MAX_HANDLES]; /* the client's name for the buffer, 0: none */
	unsigned nhandles;
	unsigned named_allocs, frees; /* Allocs that named their handle; Frees */
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
	uint64_t last_done_word; /* the last CopyD2H.done_word */
	uint64_t last_await_word; /* the last Await.done_word (minor 13) */
	unsigned words_written, words_refused; /* swaps that wrote the tag, that found a value */
	unsigned words_woken; /* of the written, those over the sleeping mark (minor 12) */
	unsigned requests, released; /* atomic: the test thread polls them */
	struct frame_writer w;
};

/* A fake with the default script (protocol major, session 42, handle generation 0). */
struct fake *fake_start(void);
/* Run the fake daemon on one end of a socketpair; returns the client's end. */
int fake_serve(struct fake *f);
/* fake_serve, then sseq__connect_fd as worker "gw7" with that staging size. */
struct sseq *fake_connect(struct fake *f, uint64_t staging_size);
/* Close s (may be NULL), join the fake's thread, free it. */
void fake_stop(struct fake *f, struct sseq *s);
/* Requests the fake has read so far. */
unsigned fake_requests(struct fake *f);
/* Wait up to 3 s (within check's default timeout) for *counter to reach n; whether it did. */
bool fake_wait_for(unsigned *counter, unsigned n);

#endif
