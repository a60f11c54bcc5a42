/* Writes the fuzzers' seed corpora from the proto with protobuf-c: corpus-wire/ holds single
 * packed Requests, corpus-session/ whole sessions (configuration, fault seed, schedule, frames) as
 * fuzz-session reads them, corpus-resume/ the same sessions behind the three bytes that say
 * where fuzz-resume loses the device. Run by hand after the protocol changes; the files are
 * checked in:
 *   gen-corpus tests/fuzz */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "request-build.h"
#include "sseq-frame.h"
#include "sseq.pb-c.h"

/* A session's handles are predictable: the n-th handle it creates, none freed, is slot n
 * of generation 1 (see slot_handle in daemon/server/session.c). */
#define H(n) ((1ull << 32) | (n))

struct out {
	uint8_t b[1 << 18]; /* a frame over SESSION_INPUT_BASE fits */
	size_t n;
};

static const char *dir;
static unsigned nwritten;

/* Every message comes from here and lives as long as the program: nothing to free. Room for
 * some 600 struct harness_req (3 KiB each: any of them may hold a whole Execute). */
static void *zalloc(size_t n)
{
	static max_align_t pool[(2 << 20) / sizeof(max_align_t)];
	static size_t used;
	size_t units = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t);

	if (units > sizeof(pool) / sizeof(pool[0]) - used) {
		fprintf(stderr, "gen-corpus: out of pool memory\n");
		exit(1);
	}
	used += units;
	return &pool[used - units];
}

static void out_write(const char *sub, const char *name, const struct out *o)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", dir, sub, name);
	f = fopen(path, "wb");
	if (!f || fwrite(o->b, 1, o->n, f) != o->n || fclose(f) != 0) {
		fprintf(stderr, "gen-corpus: %s: %s\n", path, strerror(errno));
		exit(1);
	}
	nwritten++;
}

/* ---- requests ------------------------------------------------------------------------- */

static uint64_t next_tag;
/* The next session's fault seed, when 0 derived from its name. */
static uint8_t next_fault_seed;

static Sseq__Request *rq_tag(Sseq__Request *r)
{
	r->tag = ++next_tag;
	return r;
}

static Sseq__Request *rq_new(void)
{
	Sseq__Request *r = zalloc(sizeof(*r));
	sseq__request__init(r);
	return rq_tag(r);
}

/* For request-build.h's builders, which set all but the tag. */
static struct harness_req *rq_room(void)
{
	return zalloc(sizeof(struct harness_req));
}

static Sseq__Request *rq_hello(void)
{
	Sseq__Request *r = rq_new();
	Sseq__Hello *h = zalloc(sizeof(*h));
	sseq__hello__init(h);
	h->protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	h->client_name = "fuzz";
	h->worker_id = "gw0";
	h->pid = 1;
	r->body_case = SSEQ__REQUEST__BODY_HELLO;
	r->hello = h;
	return r;
}

/* Hello asking for n lanes. */
static Sseq__Request *rq_hello_lanes(uint32_t n)
{
	Sseq__Request *r = rq_hello();
	r->hello->lanes = n;
	return r;
}

static Sseq__Request *rq_staging(uint64_t size)
{
	Sseq__Request *r = rq_new();
	Sseq__StagingRegister *s = zalloc(sizeof(*s));
	sseq__staging_register__init(s);
	s->size = size;
	s->label = "host";
	r->body_case = SSEQ__REQUEST__BODY_STAGING_REGISTER;
	r->staging_register = s;
	return r;
}

static Sseq__Request *rq_unstage(uint64_t h)
{
	Sseq__Request *r = rq_new();
	Sseq__StagingUnregister *s = zalloc(sizeof(*s));
	sseq__staging_unregister__init(s);
	s->staging = h;
	r->body_case = SSEQ__REQUEST__BODY_STAGING_UNREGISTER;
	r->staging_unregister = s;
	return r;
}

static Sseq__Request *rq_alloc(uint64_t size)
{
	return rq_tag(harness_req_alloc(rq_room(), size, "buf", 0));
}

static Sseq__Request *rq_free(uint64_t h)
{
	return rq_tag(harness_req_free(rq_room(), h));
}

static Sseq__Request *rq_slice(uint64_t h, uint64_t off, uint64_t len)
{
	return rq_tag(harness_req_slice(rq_room(), h, off, len, 0));
}

static Sseq__Request *rq_h2d(
	uint64_t st, uint64_t st_off, uint64_t dst, uint64_t dst_off, uint64_t len)
{
	return rq_tag(harness_req_h2d(rq_room(), st, st_off, dst, dst_off, len));
}

static Sseq__Request *rq_d2h(
	uint64_t src, uint64_t src_off, uint64_t st, uint64_t st_off, uint64_t len)
{
	return rq_tag(harness_req_d2h(rq_room(), src, src_off, st, st_off, len));
}

static Sseq__Request *rq_d2d(
	uint64_t src, uint64_t src_off, uint64_t dst, uint64_t dst_off, uint64_t len)
{
	return rq_tag(harness_req_d2d(rq_room(), src, src_off, dst, dst_off, len));
}

/* sig, bufs and nums as harness_req_exec's. */
static Sseq__Request *rq_exec(
	const char *kernel, const char *sig, const uint64_t *bufs, const double *nums)
{
	return rq_tag(harness_req_exec(rq_room(), kernel, sig, bufs, nums));
}

/* r (a copy or an Execute) named on the session's lane `lane`. */
static Sseq__Request *on_lane(uint32_t lane, Sseq__Request *r)
{
	switch (r->body_case) {
	case SSEQ__REQUEST__BODY_COPY_H2D:
		r->copy_h2d->lane = lane;
		break;
	case SSEQ__REQUEST__BODY_COPY_D2H:
		r->copy_d2h->lane = lane;
		break;
	case SSEQ__REQUEST__BODY_COPY_D2D:
		r->copy_d2d->lane = lane;
		break;
	default:
		r->execute->lane = lane;
		break;
	}
	return r;
}

/* The lane a request names, for the wire corpus's keys (0 if it names none). */
static uint32_t lane_of(const Sseq__Request *r)
{
	switch (r->body_case) {
	case SSEQ__REQUEST__BODY_COPY_H2D:
		return r->copy_h2d->lane;
	case SSEQ__REQUEST__BODY_COPY_D2H:
		return r->copy_d2h->lane;
	case SSEQ__REQUEST__BODY_COPY_D2D:
		return r->copy_d2d->lane;
	case SSEQ__REQUEST__BODY_EXECUTE:
		return r->execute->lane;
	case SSEQ__REQUEST__BODY_HELLO:
		return r->hello->lanes;
	default:
		return 0;
	}
}

static Sseq__Request *rq_function(uint64_t module, const char *name, uint64_t buf)
{
	Sseq__Request *r = rq_exec("", "x", (uint64_t[]){buf}, NULL);
	Sseq__ModuleFunction *mf = zalloc(sizeof(*mf));
	Sseq__Grid *g = zalloc(sizeof(*g));

	sseq__module_function__init(mf);
	mf->module = module;
	mf->name = (char *)name;
	sseq__grid__init(g);
	g->grid_x = 4;
	g->block_x = 64;
	r->execute->target_case = SSEQ__EXECUTE__TARGET_FUNCTION;
	r->execute->function = mf;
	r->execute->launch_shape_case = SSEQ__EXECUTE__LAUNCH_SHAPE_GRID;
	r->execute->grid = g;
	return r;
}

static Sseq__Request *rq_load(const char *path)
{
	Sseq__Request *r = rq_new();
	Sseq__LoadModule *l = zalloc(sizeof(*l));
	sseq__load_module__init(l);
	l->path = (char *)path;
	r->body_case = SSEQ__REQUEST__BODY_LOAD_MODULE;
	r->load_module = l;
	return r;
}

static Sseq__Request *rq_await(uint64_t h)
{
	return rq_tag(harness_req_await(rq_room(), h));
}

/* An Await or D2H that names a done word (protocol 1.10, 1.13): the word's offset + 1 in
 * arena st. */
static Sseq__Request *rq_word(Sseq__Request *r, uint64_t st, uint64_t word)
{
	if (r->body_case == SSEQ__REQUEST__BODY_AWAIT) {
		r->await->staging = st;
		r->await->done_word = word;
	} else {
		r->copy_d2h->done_word = word;
	}
	return r;
}

static Sseq__Request *rq_sync(void)
{
	return rq_tag(harness_req_sync(rq_room()));
}

static Sseq__Request *rq_query(Sseq__QueryKind kind, bool follow)
{
	Sseq__Request *r = rq_new();
	Sseq__Query *q = zalloc(sizeof(*q));
	sseq__query__init(q);
	q->kind = kind;
	if (kind == SSEQ__QUERY_KIND__QUERY_KIND_TRACE) {
		Sseq__TraceOptions *t = zalloc(sizeof(*t));
		sseq__trace_options__init(t);
		t->max_entries = 8;
		t->follow = follow;
		q->trace = t;
	}
	r->body_case = SSEQ__REQUEST__BODY_QUERY;
	r->query = q;
	return r;
}

/* The requests, in order, inside one Batch. */
static Sseq__Request *rq_batch(unsigned n, Sseq__Request **inner)
{
	Sseq__Request *r = rq_new();
	Sseq__Batch *b = zalloc(sizeof(*b));
	sseq__batch__init(b);
	b->n_requests = n;
	b->requests = inner;
	r->body_case = SSEQ__REQUEST__BODY_BATCH;
	r->batch = b;
	return r;
}

/* ---- sessions ------------------------------------------------------------------------- */

static void put_frame(struct out *o, const Sseq__Request *r)
{
	size_t len = sseq__request__get_packed_size(r);

	frame_put_len(o->b + o->n, (uint32_t)len);
	o->n += FRAME_HEADER;
	o->n += sseq__request__pack(r, o->b + o->n);
}

static void put_raw(struct out *o, const void *p, size_t n)
{
	memcpy(o->b + o->n, p, n);
	o->n += n;
}

/* Whether r is the first request of its kind (body, and kernel for Execute): the wire
 * corpus keeps one of each, the session corpus all. */
static bool wire_new(const Sseq__Request *r)
{
	static char seen[64][32];
	static unsigned nseen;
	char key[32];

	snprintf(key, sizeof(key), "%d %s%s", (int)r->body_case,
		r->body_case == SSEQ__REQUEST__BODY_EXECUTE &&
				r->execute->target_case == SSEQ__EXECUTE__TARGET_KERNEL
			? r->execute->kernel
			: "",
		lane_of(r) ? " lane" : "");
	for (unsigned i = 0; i < nseen; i++)
		if (strcmp(seen[i], key) == 0)
			return false;
	if (nseen < 64)
		memcpy(seen[nseen++], key, sizeof(key));
	return true;
}

/* Where fuzz-resume loses the device: before frame `frame` (past the last: after it), with
 * split/64 of that frame sent; mode: the stream seen failing first << 1, and in bit 0 a
 * client that reads nothing until then. */
struct resume_at {
	uint8_t frame, split, mode;
};

static void resume_write(const char *name, const struct out *o, struct resume_at at)
{
	static struct out r;

	r.b[0] = at.frame;
	r.b[1] = at.split;
	r.b[2] = at.mode;
	memcpy(r.b + 3, o->b, o->n);
	r.n = o->n + 3;
	out_write("corpus-resume", name, &r);
}

/* Set: the next session goes to corpus-resume alone, with its reset there. */
static const struct resume_at *resume_only;

/* A session file: configuration, fault seed, schedule, then the requests, each its own frame. The
 * wire corpus gets each request alone; the resume corpus the session with the device lost
 * half-way between frames, half-way through a frame, and at the end with the replies unread. */
static void session(
	const char *name, uint8_t cfg, const char *sched, unsigned n, Sseq__Request **rqs)
{
	static struct out o, w;
	char wname[96];

	o.n = 0;
	o.b[o.n++] = cfg;
	o.b[o.n++] = next_fault_seed ? next_fault_seed : (uint8_t)(name[0] + name[1]);
	o.b[o.n++] = (uint8_t)strlen(sched);
	put_raw(&o, sched, strlen(sched));
	for (unsigned i = 0; i < n; i++) {
		put_frame(&o, rqs[i]);
		if (resume_only || !wire_new(rqs[i]))
			continue;
		w.n = sseq__request__pack(rqs[i], w.b);
		snprintf(wname, sizeof(wname), "%s-%02u", name, i);
		out_write("corpus-wire", wname, &w);
	}
	if (resume_only) {
		resume_write(name, &o, *resume_only);
	} else {
		out_write("corpus-session", name, &o);
		snprintf(wname, sizeof(wname), "%s-between", name);
		resume_write(wname, &o, (struct resume_at){(uint8_t)(n / 2), 0, 0});
		snprintf(wname, sizeof(wname), "%s-torn", name);
		resume_write(wname, &o, (struct resume_at){(uint8_t)((n + 1) / 2), 40, 2});
		snprintf(wname, sizeof(wname), "%s-unread", name);
		resume_write(wname, &o, (struct resume_at){255, 0, 1});
	}
	resume_only = NULL;
	next_tag = 0;
	next_fault_seed = 0;
}

#define RESUME_AT(frame, split, mode) (resume_only = &(struct resume_at){frame, split, mode})

#define SESSION(name, cfg, sched, ...)                                                             \
	session(name, cfg, sched, sizeof((Sseq__Request *[]){__VA_ARGS__}) / sizeof(void *),       \
		(Sseq__Request *[]){__VA_ARGS__})
#define BATCH(...)                                                                                 \
	rq_batch(sizeof((Sseq__Request *[]){__VA_ARGS__}) / sizeof(void *),                        \
		(Sseq__Request *[]){__VA_ARGS__})

/* A Request with keys and length prefixes padded to 5 bytes, the most protobuf-c reads. */
static void wire_padded(void)
{
	static const uint8_t five_key[] = {
		0x88, 0x80, 0x80, 0x80, 0x00, 0x01, 0x8a, 0x01, 0x02, 0x28, 0x08};
	static const uint8_t five_len[] = {0x08, 0x07, 0x9a, 0x01, 0x80, 0x80, 0x80, 0x80, 0x00};
	static const uint8_t ten_bool[] = {0x08, 0x05, 0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
		0x80, 0x80, 0x80, 0x02, 0x8a, 0x01, 0x00};
	struct out o;

	o.n = 0;
	put_raw(&o, five_key, sizeof(five_key));
	out_write("corpus-wire", "padded-key", &o);
	o.n = 0;
	put_raw(&o, five_len, sizeof(five_len));
	out_write("corpus-wire", "padded-length", &o);
	o.n = 0;
	put_raw(&o, ten_bool, sizeof(ten_bool));
	out_write("corpus-wire", "bool-10-bytes", &o);
}

int main(int argc, char **argv)
{
	/* Handles in order of creation: H(1) is the first of the session. */
	enum { LANES = 1 << 7, KILL = 1 << 6, FAULTS = 1 << 5, TWO = 3 << 3 };

	if (argc != 2) {
		fprintf(stderr,
			"usage: gen-corpus DIR (writes DIR/corpus-wire, DIR/corpus-session, "
			"DIR/corpus-resume)\n");
		return 2;
	}
	dir = argv[1];
	for (int i = 0; i < 3; i++) {
		static const char *const sub[] = {"corpus-wire", "corpus-session", "corpus-resume"};
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", dir, sub[i]);
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			fprintf(stderr, "gen-corpus: %s: %s\n", path, strerror(errno));
			return 1;
		}
	}

	SESSION("hello", 7, "", rq_hello());
	SESSION("alloc-free", 7, "\x01", rq_hello(), rq_alloc(4096), rq_free(H(1)));
	/* staging H(1), buffers H(2), H(3) */
	SESSION("upload-fill-download", 7, "\x03\x01\x02", rq_hello(), rq_staging(8192),
		rq_alloc(4096), rq_h2d(H(1), 0, H(2), 0, 4096),
		rq_exec("fill", "ofu", (uint64_t[]){H(2)}, (double[]){1, 1024}),
		rq_d2h(H(2), 0, H(1), 4096, 4096), rq_free(H(2)), rq_sync());
	SESSION("h2d-scale-d2h", 2, "\x05\x00\x07\x02\x01\x04", rq_hello(), rq_staging(8192),
		rq_alloc(4096), rq_alloc(4096), rq_h2d(H(1), 0, H(2), 0, 4096),
		rq_exec("scale", "iofu", (uint64_t[]){H(2), H(3)}, (double[]){2, 1024}),
		rq_d2h(H(3), 0, H(1), 4096, 4096), rq_await(H(3)), rq_free(H(2)), rq_free(H(3)));
	/* The XLA bug's shape: H2D, unrelated kernels moving compute on, a kernel on a slice
	 * of the copied buffer, a free while it reads. */
	SESSION("slice-of-h2d", 2 | TWO, "\x07\x03\x00\x00\x05\x01", rq_hello(), rq_staging(8192),
		rq_alloc(8192), rq_alloc(4096), rq_h2d(H(1), 0, H(2), 0, 8192),
		rq_exec("fill", "ofu", (uint64_t[]){H(3)}, (double[]){3, 1024}),
		rq_exec("fill", "ofu", (uint64_t[]){H(3)}, (double[]){4, 1024}),
		rq_slice(H(2), 4096, 4096),
		rq_exec("scale", "iofu", (uint64_t[]){H(4), H(3)}, (double[]){2, 1024}),
		rq_free(H(2)), rq_d2h(H(3), 0, H(1), 0, 4096), rq_free(H(4)), rq_free(H(3)));
	/* Answered in done words: an Await on a buffer never written (the loop writes the
	 * word at once), Awaits while an H2D runs, a D2H; the words past the copies' ranges. */
	SESSION("done-words", 2, "\x01\x00\x02\x01\x03", rq_hello(), rq_staging(8192 + 64),
		rq_alloc(4096), rq_alloc(4096), rq_word(rq_await(H(3)), H(1), 8192 + 25),
		rq_h2d(H(1), 0, H(2), 0, 4096), rq_word(rq_await(H(2)), H(1), 8192 + 1),
		rq_word(rq_await(H(2)), H(1), 8192 + 9),
		rq_word(rq_d2h(H(2), 0, H(1), 4096, 4096), H(1), 8192 + 17), rq_sync());
	SESSION("d2d", 3, "\x00\x04\x01", rq_hello(), rq_staging(4096), rq_alloc(4096),
		rq_alloc(4096), rq_h2d(H(1), 0, H(2), 0, 4096), rq_d2d(H(2), 0, H(3), 0, 4096),
		rq_d2d(H(3), 0, H(3), 2048, 2048), rq_d2h(H(3), 0, H(1), 0, 4096), rq_sync());
	SESSION("add-axpy-reduce", 7, "\x01\x01\x04", rq_hello(), rq_alloc(4096), rq_alloc(4096),
		rq_alloc(4096), rq_alloc(64),
		rq_exec("iota", "offu", (uint64_t[]){H(1)}, (double[]){0, 1, 1024}),
		rq_exec("fill", "ofu", (uint64_t[]){H(2)}, (double[]){1, 1024}),
		rq_exec("add", "iiou", (uint64_t[]){H(1), H(2), H(3)}, (double[]){1024}),
		rq_exec("axpy", "fixu", (uint64_t[]){H(1), H(3)}, (double[]){2, 1024}),
		rq_exec("reduce_sum", "iou", (uint64_t[]){H(3), H(4)}, (double[]){1024}),
		rq_await(H(4)), rq_sync());
	SESSION("batch", 7, "\x01\x02", rq_hello(), rq_staging(4096),
		BATCH(rq_alloc(4096), rq_h2d(H(1), 0, H(2), 0, 4096),
			rq_exec("scale", "iofu", (uint64_t[]){H(2), H(2)}, (double[]){3, 1024}),
			rq_d2h(H(2), 0, H(1), 0, 4096)),
		rq_sync());
	SESSION("batch-staging", 7, "", rq_hello(),
		BATCH(rq_staging(4096), rq_staging(4096), rq_alloc(4096)),
		rq_h2d(H(1), 0, H(3), 0, 4096), rq_d2h(H(3), 0, H(2), 0, 4096));
	SESSION("queries", 7, "\x01", rq_hello(), rq_alloc(4096),
		rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){1, 1024}),
		rq_query(SSEQ__QUERY_KIND__QUERY_KIND_STATUS, false),
		rq_query(SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS, false),
		rq_query(SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS, false),
		rq_query(SSEQ__QUERY_KIND__QUERY_KIND_STREAMS, false),
		rq_query(SSEQ__QUERY_KIND__QUERY_KIND_STATS, false),
		rq_query(SSEQ__QUERY_KIND__QUERY_KIND_METRICS, false),
		rq_query(SSEQ__QUERY_KIND__QUERY_KIND_TRACE, true),
		rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){2, 1024}));
	/* module H(2), its function run on buffer H(1) */
	SESSION("module", 7, "\x01\x02", rq_hello(), rq_alloc(4096), rq_load("m.co"),
		rq_function(H(2), "kern", H(1)), rq_function(H(2), "kern", H(1)),
		rq_function(H(2), "_missing", H(1)), rq_load("../etc/passwd"), rq_sync());
	/* A window of 2 fills at once. */
	SESSION("backpressure", 0, "\x00", rq_hello(), rq_alloc(4096),
		rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){1, 1024}),
		rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){2, 1024}),
		rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){3, 1024}),
		rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){4, 1024}),
		rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){5, 1024}), rq_sync());
	SESSION("kill-in-flight", 7 | KILL, "\x00", rq_hello(), rq_staging(4096), rq_alloc(4096),
		rq_h2d(H(1), 0, H(2), 0, 4096), rq_d2h(H(2), 0, H(1), 0, 4096), rq_unstage(H(1)),
		rq_free(H(2)));
	SESSION("unstage-in-flight", 7, "\x00\x01", rq_hello(), rq_staging(4096), rq_alloc(4096),
		rq_h2d(H(1), 0, H(2), 0, 4096), rq_unstage(H(1)), rq_h2d(H(1), 0, H(2), 0, 4096),
		rq_await(H(2)));
	SESSION("faults", 7 | FAULTS, "\x00\x0f\x00\x1f\x00\x00\x3f\x00\x0f\x1f", rq_hello(),
		rq_staging(4096), rq_alloc(4096), rq_alloc(4096), rq_h2d(H(1), 0, H(2), 0, 4096),
		rq_exec("scale", "iofu", (uint64_t[]){H(2), H(3)}, (double[]){2, 1024}),
		rq_exec("scale", "iofu", (uint64_t[]){H(3), H(2)}, (double[]){2, 1024}),
		rq_d2h(H(2), 0, H(1), 0, 4096), rq_await(H(3)), rq_sync());
	SESSION("slice-faults", 2 | TWO | FAULTS | KILL, "\x01\x02\x03", rq_hello(),
		rq_staging(8192), rq_alloc(8192), rq_alloc(4096), rq_slice(H(2), 0, 4096),
		rq_h2d(H(1), 0, H(2), 0, 8192),
		rq_exec("scale", "iofu", (uint64_t[]){H(4), H(3)}, (double[]){2, 1024}),
		rq_d2d(H(3), 0, H(2), 4096, 4096), rq_d2h(H(2), 0, H(1), 0, 8192),
		rq_exec("fill", "ofu", (uint64_t[]){H(3)}, (double[]){1, 1024}), rq_await(H(2)),
		rq_sync());
	/* A step after each frame: the H2D fails on the device (fault seed 1) and is reported
	 * before its readers come, which must then fail unlaunched (I9). */
	next_fault_seed = 1;
	SESSION("device-fault", 7 | FAULTS,
		"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01"
		"\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01",
		rq_hello(), rq_staging(4096), rq_alloc(4096), rq_alloc(4096),
		rq_h2d(H(1), 0, H(2), 0, 4096), rq_sync(), rq_await(H(2)),
		rq_exec("scale", "iofu", (uint64_t[]){H(2), H(3)}, (double[]){2, 1024}),
		rq_d2d(H(2), 0, H(3), 0, 4096), rq_d2h(H(2), 0, H(1), 0, 4096), rq_await(H(3)));
	SESSION("bad-requests", 7, "", rq_hello(), rq_alloc(0), rq_alloc(4096), rq_free(77),
		rq_h2d(H(9), 0, H(1), 0, 16), rq_d2h(H(1), 4000, H(9), 0, 200),
		rq_d2d(H(1), 0, H(1), 0, 0), rq_slice(H(1), 4096, 1),
		rq_exec("nope", "", NULL, NULL),
		rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){1, 2048}),
		rq_exec("fill", "ifu", (uint64_t[]){H(1)}, (double[]){1, 16}), rq_await(5),
		rq_hello());
	SESSION("no-hello", 7, "", rq_alloc(4096));
	SESSION("nested-batch", 7, "", rq_hello(), BATCH(rq_sync(), BATCH(rq_sync())));
	SESSION("conv2d", 7, "\x01\x03", rq_hello(), rq_alloc(4 * 64), rq_alloc(4 * 9),
		rq_alloc(4 * 36),
		rq_exec("conv2d", "iionnnnnnnnnnnnnnnnnn", (uint64_t[]){H(1), H(2), H(3)},
			(double[]){1, 1, 8, 8, 1, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1}),
		rq_await(H(3)));
	SESSION("spin", 7, "\x02", rq_hello(), rq_exec("spin", "u", NULL, (double[]){1000}),
		rq_sync());
	/* Lanes (three compute streams): work on both of a session's lanes over the same
	 * buffers, so every hand-off between them is a wait between compute streams; then a
	 * lane it does not have, and a Hello asking for too many. */
	SESSION("lanes", 7 | LANES | TWO, "\x03\x01\x00\x02\x05", rq_hello_lanes(2),
		rq_staging(8192), rq_alloc(4096), rq_alloc(4096), rq_alloc(4096),
		on_lane(0, rq_h2d(H(1), 0, H(2), 0, 4096)),
		on_lane(1, rq_exec("scale", "iofu", (uint64_t[]){H(2), H(3)}, (double[]){2, 1024})),
		on_lane(0, rq_exec("scale", "iofu", (uint64_t[]){H(3), H(4)}, (double[]){3, 1024})),
		on_lane(1, rq_d2d(H(4), 0, H(2), 0, 4096)),
		on_lane(1, rq_exec("fill", "ofu", (uint64_t[]){H(3)}, (double[]){1, 1024})),
		on_lane(1, rq_d2h(H(2), 0, H(1), 4096, 4096)),
		on_lane(2, rq_exec("fill", "ofu", (uint64_t[]){H(3)}, (double[]){1, 1024})),
		on_lane(9, rq_h2d(H(1), 0, H(2), 0, 4096)), rq_free(H(3)), rq_sync());
	SESSION("lanes-refused", 7 | LANES, "", rq_hello_lanes(9), rq_hello_lanes(8),
		rq_alloc(4096),
		on_lane(7, rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){1, 1024})),
		rq_await(H(1)));
	SESSION("lanes-faults-kill", 2 | LANES | FAULTS | KILL, "\x01\x02\x03\x00\x01",
		rq_hello_lanes(3), rq_staging(4096), rq_alloc(4096), rq_alloc(4096),
		on_lane(2, rq_h2d(H(1), 0, H(2), 0, 4096)),
		on_lane(1, rq_exec("scale", "iofu", (uint64_t[]){H(2), H(3)}, (double[]){2, 1024})),
		on_lane(2, rq_exec("scale", "iofu", (uint64_t[]){H(3), H(2)}, (double[]){2, 1024})),
		on_lane(0, rq_d2h(H(2), 0, H(1), 0, 4096)), rq_sync());
	{
		/* Frames the daemon must refuse before it allocates: oversize, then torn. */
		struct out o = {.n = 0};
		static const uint8_t big[] = {7, 0, 0, 0x00, 0x00, 0x20, 0x00};
		static const uint8_t torn[] = {7, 0, 0, 0x10, 0x00, 0x00, 0x00, 0x08, 0x01};
		put_raw(&o, big, 3);
		put_frame(&o, rq_hello());
		put_raw(&o, big + 3, 4);
		out_write("corpus-session", "oversize-frame", &o);
		o.n = 0;
		put_raw(&o, torn, 3);
		put_frame(&o, rq_hello());
		put_raw(&o, torn + 3, sizeof(torn) - 3);
		out_write("corpus-session", "torn-frame", &o);
		next_tag = 0;
	}
	/* The hand-over's corners, for fuzz-resume alone. A connection that has said
	 * nothing, and one half-way through its Hello. */
	RESUME_AT(0, 0, 0);
	SESSION("resume-silent", 7, "", rq_hello(), rq_sync());
	RESUME_AT(0, 30, 0);
	SESSION("resume-half-hello", 7, "", rq_hello(), rq_sync());
	/* A frame over SESSION_INPUT_BASE (a module path the daemon refuses once it has all
	 * of it) almost all read: the unread input counts against --max-input-memory. */
	{
		static char path[150000];
		memset(path, 'm', sizeof(path) - 1);
		RESUME_AT(1, 60, 0);
		SESSION("resume-large-frame", 7, "", rq_hello(), rq_load(path), rq_sync());
	}
	/* Two memfds received ahead of their StagingRegisters (the Batch's first bytes). */
	RESUME_AT(1, 8, 0);
	SESSION("resume-memfds-ahead", 7, "", rq_hello(), BATCH(rq_staging(4096), rq_staging(8192)),
		rq_h2d(H(1), 0, H(3), 0, 16));
	/* A Batch held back by a full window (2) part-way through: the rest runs once. */
	RESUME_AT(3, 0, 0);
	SESSION("resume-held-batch", 0, "", rq_hello(), rq_alloc(4096),
		BATCH(rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){1, 1024}),
			rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){2, 1024}),
			rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){3, 1024}),
			rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){4, 1024}),
			rq_alloc(64), rq_sync()),
		rq_sync());
	/* A client that reads nothing: the queries' results fill its socket, so replies and
	 * the Sync's Completion are still unwritten at the exec. */
	RESUME_AT(255, 0, 1);
	SESSION("resume-unwritten", 7, "\x01", rq_hello(), rq_alloc(4096), rq_staging(4096),
		rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){1, 1024}),
		rq_query(SSEQ__QUERY_KIND__QUERY_KIND_METRICS, false),
		rq_query(SSEQ__QUERY_KIND__QUERY_KIND_METRICS, false),
		rq_query(SSEQ__QUERY_KIND__QUERY_KIND_METRICS, false),
		rq_query(SSEQ__QUERY_KIND__QUERY_KIND_STATUS, false),
		rq_query(SSEQ__QUERY_KIND__QUERY_KIND_METRICS, false),
		rq_exec("fill", "ofu", (uint64_t[]){H(1)}, (double[]){2, 1024}), rq_sync());
	wire_padded();
	printf("gen-corpus: wrote %u files under %s\n", nwritten, dir);
	/* The requests are left to the process's end: a generator, not a library. */
	return 0;
}
