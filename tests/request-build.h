/* Requests built field by field, in place, for what has to write them out exactly as the proto
 * has them: the daemon-level suites (daemon-harness.h) and the fuzzers' seed corpus
 * (fuzz/gen-corpus.c). No test framework here, so that both can use it. */
#ifndef SSEQ_TESTS_REQUEST_BUILD_H
#define SSEQ_TESTS_REQUEST_BUILD_H

#include <stdint.h>
#include <string.h>

#include "sseq.pb-c.h"

/* The most arguments harness_req_exec builds. */
#define HARNESS_REQ_MAX_ARGS 32

/* One request and every part of its body, built in place by a harness_req_* builder that
 * returns &r->rq: sent at once (send_*, do_*), packed with others into one write
 * (test-daemon's frames_*) or into a seed file (gen-corpus), the same request either way. A
 * caller may change a field of the body (a lane, a flag, the tag) before packing it. */
struct harness_req {
	Sseq__Request rq;
	union {
		Sseq__Alloc alloc;
		Sseq__Free free;
		Sseq__Slice slice;
		Sseq__CopyH2D h2d;
		Sseq__CopyD2H d2h;
		Sseq__CopyD2D d2d;
		Sseq__Await await;
		Sseq__Sync sync;
		struct {
			Sseq__Execute e;
			Sseq__Arg args[HARNESS_REQ_MAX_ARGS], *argp[HARNESS_REQ_MAX_ARGS];
			Sseq__BufferArg bufs[HARNESS_REQ_MAX_ARGS];
		} exec;
	} body;
};

/* `handle`: the client's name for the buffer, or 0 for the daemon to pick one. */
static inline Sseq__Request *harness_req_alloc(
	struct harness_req *r, uint64_t size, const char *label, uint64_t handle)
{
	sseq__request__init(&r->rq);
	sseq__alloc__init(&r->body.alloc);
	r->body.alloc.size = size;
	r->body.alloc.label = (char *)label;
	r->body.alloc.handle = handle;
	r->rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
	r->rq.alloc = &r->body.alloc;
	return &r->rq;
}

static inline Sseq__Request *harness_req_free(struct harness_req *r, uint64_t buffer)
{
	sseq__request__init(&r->rq);
	sseq__free__init(&r->body.free);
	r->body.free.buffer = buffer;
	r->rq.body_case = SSEQ__REQUEST__BODY_FREE;
	r->rq.free = &r->body.free;
	return &r->rq;
}

/* `handle` as harness_req_alloc's. */
static inline Sseq__Request *harness_req_slice(
	struct harness_req *r, uint64_t buffer, uint64_t offset, uint64_t length, uint64_t handle)
{
	sseq__request__init(&r->rq);
	sseq__slice__init(&r->body.slice);
	r->body.slice.buffer = buffer;
	r->body.slice.offset = offset;
	r->body.slice.length = length;
	r->body.slice.handle = handle;
	r->rq.body_case = SSEQ__REQUEST__BODY_SLICE;
	r->rq.slice = &r->body.slice;
	return &r->rq;
}

static inline Sseq__Request *harness_req_h2d(struct harness_req *r, uint64_t staging, uint64_t soff,
	uint64_t dst, uint64_t doff, uint64_t len)
{
	Sseq__CopyH2D *c = &r->body.h2d;

	sseq__request__init(&r->rq);
	sseq__copy_h2_d__init(c);
	c->staging = staging;
	c->staging_offset = soff;
	c->dst = dst;
	c->dst_offset = doff;
	c->length = len;
	r->rq.body_case = SSEQ__REQUEST__BODY_COPY_H2D;
	r->rq.copy_h2d = c;
	return &r->rq;
}

static inline Sseq__Request *harness_req_d2h(struct harness_req *r, uint64_t src, uint64_t soff,
	uint64_t staging, uint64_t stoff, uint64_t len)
{
	Sseq__CopyD2H *c = &r->body.d2h;

	sseq__request__init(&r->rq);
	sseq__copy_d2_h__init(c);
	c->src = src;
	c->src_offset = soff;
	c->staging = staging;
	c->staging_offset = stoff;
	c->length = len;
	r->rq.body_case = SSEQ__REQUEST__BODY_COPY_D2H;
	r->rq.copy_d2h = c;
	return &r->rq;
}

static inline Sseq__Request *harness_req_d2d(struct harness_req *r, uint64_t src, uint64_t soff,
	uint64_t dst, uint64_t doff, uint64_t len)
{
	Sseq__CopyD2D *c = &r->body.d2d;

	sseq__request__init(&r->rq);
	sseq__copy_d2_d__init(c);
	c->src = src;
	c->src_offset = soff;
	c->dst = dst;
	c->dst_offset = doff;
	c->length = len;
	r->rq.body_case = SSEQ__REQUEST__BODY_COPY_D2D;
	r->rq.copy_d2d = c;
	return &r->rq;
}

static inline Sseq__Request *harness_req_await(struct harness_req *r, uint64_t buffer)
{
	sseq__request__init(&r->rq);
	sseq__await__init(&r->body.await);
	r->body.await.buffer = buffer;
	r->rq.body_case = SSEQ__REQUEST__BODY_AWAIT;
	r->rq.await = &r->body.await;
	return &r->rq;
}

static inline Sseq__Request *harness_req_sync(struct harness_req *r)
{
	sseq__request__init(&r->rq);
	sseq__sync__init(&r->body.sync);
	r->rq.body_case = SSEQ__REQUEST__BODY_SYNC;
	r->rq.sync = &r->body.sync;
	return &r->rq;
}

/* Execute `kernel` with args described by `sig`: 'i' in, 'o' out, 'x' inout buffer
 * (from bufs in order), 'f' f32, 'u' u64, 'n' i32, 'd' f64 (from nums in order). Past
 * HARNESS_REQ_MAX_ARGS the signature is cut short: the arrays hold no more, and a
 * builder has no way to fail (send_exec checks its callers' signatures). */
static inline Sseq__Request *harness_req_exec(struct harness_req *r, const char *kernel,
	const char *sig, const uint64_t *bufs, const double *nums)
{
	Sseq__Execute *e = &r->body.exec.e;
	Sseq__Arg *args = r->body.exec.args;
	Sseq__BufferArg *ba = r->body.exec.bufs;
	size_t n = strlen(sig);

	if (n > HARNESS_REQ_MAX_ARGS)
		n = HARNESS_REQ_MAX_ARGS;
	sseq__request__init(&r->rq);
	sseq__execute__init(e);
	for (size_t i = 0; i < n; i++) {
		sseq__arg__init(&args[i]);
		r->body.exec.argp[i] = &args[i];
		switch (sig[i]) {
		case 'i':
		case 'o':
		case 'x':
			sseq__buffer_arg__init(&ba[i]);
			ba[i].handle = *bufs++;
			ba[i].access = sig[i] == 'i' ? SSEQ__ACCESS__ACCESS_IN
				: sig[i] == 'o'	     ? SSEQ__ACCESS__ACCESS_OUT
						     : SSEQ__ACCESS__ACCESS_INOUT;
			args[i].value_case = SSEQ__ARG__VALUE_BUFFER;
			args[i].buffer = &ba[i];
			break;
		case 'f':
			args[i].value_case = SSEQ__ARG__VALUE_F32;
			args[i].f32 = (float)*nums++;
			break;
		case 'u':
			args[i].value_case = SSEQ__ARG__VALUE_U64;
			args[i].u64 = (uint64_t)*nums++;
			break;
		case 'n':
			args[i].value_case = SSEQ__ARG__VALUE_I32;
			args[i].i32 = (int32_t)*nums++;
			break;
		case 'd':
			args[i].value_case = SSEQ__ARG__VALUE_F64;
			args[i].f64 = *nums++;
			break;
		}
	}
	e->target_case = SSEQ__EXECUTE__TARGET_KERNEL;
	e->kernel = (char *)kernel;
	e->n_args = n;
	e->args = r->body.exec.argp;
	r->rq.body_case = SSEQ__REQUEST__BODY_EXECUTE;
	r->rq.execute = e;
	return &r->rq;
}

#endif
