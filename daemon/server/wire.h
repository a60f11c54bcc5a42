/* The hot path of the wire format: decoding the requests a pipelining client sends most
 * (execute and copies) and encoding their replies by hand, without protobuf-c's generic
 * reflection. Anything outside that path is declined and goes through protobuf-c. */
#ifndef SSEQ_WIRE_H
#define SSEQ_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "sequencer.h"
#include "sseq.pb-c.h"

#define WIRE_KERNEL_NAME_MAX 64
#define WIRE_REPLY_MAX 96 /* an encoded Reply without a message, framed */

/* Storage for one decoded request; the Sseq__ structs point into it. */
struct wire_request {
	Sseq__Request rq;
	union {
		Sseq__Execute execute;
		Sseq__CopyH2D copy_h2d;
		Sseq__CopyD2H copy_d2h;
		Sseq__CopyD2D copy_d2d;
	} body;
	Sseq__Arg args[KERNEL_MAX_ARGS];
	Sseq__Arg *argp[KERNEL_MAX_ARGS];
	Sseq__BufferArg bufs[KERNEL_MAX_ARGS];
	char kernel[WIRE_KERNEL_NAME_MAX];
};

/* Decode p[0..len) as a Request if it is an Execute of a named kernel or a copy, made
 * only of fields this decoder knows. Returns 1 and fills w->rq; 0 when the frame is not
 * on the hot path (or malformed): then decode it with protobuf-c, which has the last
 * word on what is valid. Never reads outside p[0..len). */
int wire_decode_request(const uint8_t *p, size_t len, struct wire_request *w);

/* Encode a framed Message{reply} (length prefix included) into out, which must hold
 * WIRE_REPLY_MAX + strlen(message) bytes. Returns the bytes written. */
size_t wire_encode_reply(uint8_t *out, uint64_t tag, int status, const char *message,
	uint64_t handle, const struct seq_point *at);

#endif
