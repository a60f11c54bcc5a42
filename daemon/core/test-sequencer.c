/* Unit tests for the sequencer core (sequencer.h): a recording backend logs every
 * command the core emits as one text line, and each test pins one invariant of DESIGN.md.
 *
 * Mutation check: each check broken in a private copy of sequencer.c, and (a sample of)
 * the tests that then fail. Every mutation below was caught.
 *   I1 H2D def taken as a compute point      -> i1_h2d_defines..., seed_..._still_waits (+25)
 *   I2 reads never wait                      -> i2_one_wait_per_stream..., seed_... (+24)
 *   I2 same-stream order not trusted         -> i2_same_stream_elides_wait (+7)
 *   I2 observed completion not used          -> i2_observed_complete_elides_wait (+3)
 *   I2 wait names an unrecorded point        -> i2_existing_event_is_reused, i3_full_window...
 *   I3 H2D complete once compute is past it  -> seed_..._still_waits, i3_completion_of_other...
 *   I3 no window check                       -> i3_full_window_backpressure_then_resumes
 *   I3 cross-stream report not held back     -> i3_cross_stream_completion_held_until...
 *   I3 later event does not cover earlier    -> i3_later_event_completes_earlier_points (+6)
 *   I4 writes ignore readers                 -> i4_write_waits_for_readers..., d2d_... (+4)
 *   I4 write-only ignores previous writer    -> i4_write_waits_for_previous_writer (+4)
 *   I5 free never deferred / idle ignores readers / released twice
 *                                            -> i5_free_while_kernel_reads_is_deferred (+4)
 *   I6 slice has own state / no base ref / offsets not composed
 *                                            -> i6_slice_of_h2d..., i6_slice_keeps_base_alive,
 *                                               i6_slice_of_slice_composes_offsets
 *   I7 double definition accepted            -> i7_double_definition_refused (+1)
 *   I8 await answers done at once            -> i8_await_and_sync_return_at_once (+2)
 *   I9 input errors ignored                  -> i9_failed_h2d_fails_dependent..., chain (+1)
 *   I9 failed op's outputs left clean        -> i9_failure_flows_through_chain (+5)
 *   I9 device error not spread along waits   -> i9_device_error_fails_stream_and_waiters
 *   I9 partial write clears error            -> i9_partial_write_keeps_error
 *   I9 slice write forgets def's device error -> slice_overwrite_keeps_base_device_error,
 *                                               slice_overwrite_by_d2d_keeps_base_...
 *   I9 spread skips a point already reported -> failure_spread_to_point_reported_before_...
 *   I9 failed launch uses up a point         -> i9_launch_failure_does_not_consume_point (+2)
 *   copies ignore their pool's pending deps -> copies_follow_their_pending_dependency...
 *   eager events / legacy switches inert     -> lazy_events_only_when_needed,
 *                                               legacy_sync_window_elides_wait,
 *                                               i5_legacy_early_free_releases_at_once
 */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sequencer.h"

/* Stream indices under the default config: compute, H2D, one D2H, one D2D. */
enum { S_COMPUTE = 0, S_H2D = 1, S_D2H = 2, S_D2D = 3 };

#define N_DECISIONS (SEQ_TRACE_RELEASE + 1)

/* One test's world: the core under test and everything the backend saw. */
struct fixture {
	struct seq *seq;
	char **lines;
	size_t nlines, cap;
	uint64_t next_addr;
	int fail_alloc; /* mem_alloc returns this when non-zero */
	unsigned launches; /* launch attempts so far */
	unsigned fail_launch; /* the 1-based attempt that fails; 0: none */
	int fail_status;
	int fail_wait; /* wait returns this when non-zero */
	unsigned traces[N_DECISIONS];
	struct seq_trace last_trace[N_DECISIONS];
};

static struct fixture F;

/* ---- the log ---- */

__attribute__((format(printf, 1, 2))) static void log_add(const char *fmt, ...)
{
	char line[128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (F.nlines == F.cap) {
		size_t cap = F.cap ? 2 * F.cap : 64;
		char **lines = realloc(F.lines, cap * sizeof(*lines));

		ck_assert_ptr_nonnull(lines);
		F.lines = lines;
		F.cap = cap;
	}
	F.lines[F.nlines] = strdup(line);
	ck_assert_ptr_nonnull(F.lines[F.nlines]);
	F.nlines++;
}

static void log_clear(void)
{
	for (size_t i = 0; i < F.nlines; i++)
		free(F.lines[i]);
	F.nlines = 0;
}

static long log_index(const char *line)
{
	for (size_t i = 0; i < F.nlines; i++)
		if (strcmp(F.lines[i], line) == 0)
			return (long)i;
	return -1;
}

static bool log_has(const char *line)
{
	return log_index(line) >= 0;
}

static unsigned log_count(const char *prefix)
{
	size_t len = strlen(prefix);
	unsigned n = 0;

	for (size_t i = 0; i < F.nlines; i++)
		n += strncmp(F.lines[i], prefix, len) == 0;
	return n;
}

/* The whole log, for failure messages: a failing test shows what the core did. */
static const char *log_text(void)
{
	static char text[4096];
	size_t used = 0;

	text[0] = '\0';
	for (size_t i = 0; i < F.nlines && used + 1 < sizeof(text); i++) {
		int n = snprintf(text + used, sizeof(text) - used, "  %s\n", F.lines[i]);

		if (n < 0)
			break;
		used += (size_t)n;
	}
	return text;
}

#define ck_log_has(line)                                                                           \
	ck_assert_msg(log_has(line), "missing \"%s\" in log:\n%s", line, log_text())
#define ck_log_lacks(line)                                                                         \
	ck_assert_msg(!log_has(line), "unexpected \"%s\" in log:\n%s", line, log_text())
#define ck_log_count(prefix, n)                                                                    \
	ck_assert_msg(log_count(prefix) == (n), "expected %u \"%s\" lines, got %u; log:\n%s",      \
		(unsigned)(n), prefix, log_count(prefix), log_text())
#define ck_log_before(a, b)                                                                        \
	ck_assert_msg(log_has(a) && log_has(b) && log_index(a) < log_index(b),                     \
		"expected \"%s\" before \"%s\" in log:\n%s", a, b, log_text())

/* a, then b, then c: e.g. an event recorded, a wait on it, then the launch behind it. */
#define ck_log_order(a, b, c)                                                                      \
	do {                                                                                       \
		ck_log_before(a, b);                                                               \
		ck_log_before(b, c);                                                               \
	} while (0)

/* ---- the recording backend ---- */

static const char *op_name(enum seq_op_kind kind)
{
	switch (kind) {
	case SEQ_OP_H2D:
		return "h2d";
	case SEQ_OP_D2H:
		return "d2h";
	case SEQ_OP_D2D:
		return "d2d";
	case SEQ_OP_EXEC:
		return "exec";
	}
	return "?";
}

static int rec_mem_alloc(void *ctx, uint64_t size, uint64_t *addr)
{
	struct fixture *f = ctx;

	if (f->fail_alloc)
		return f->fail_alloc;
	/* 0x1000 apart so that each buffer's range is recognisable in the log. */
	*addr = f->next_addr;
	f->next_addr += size <= 0x1000 ? 0x1000 : (size + 0xfff) & ~(uint64_t)0xfff;
	log_add("alloc %#" PRIx64 " %" PRIu64, *addr, size);
	return 0;
}

static void rec_mem_release(void *ctx, uint64_t addr, uint64_t size)
{
	(void)ctx;
	log_add("release %#" PRIx64 " %" PRIu64, addr, size);
}

static int rec_record(void *ctx, struct seq_point at)
{
	(void)ctx;
	log_add("record %" PRIu32 ":%" PRIu64, at.stream, at.seq);
	return 0;
}

static int rec_wait(void *ctx, uint32_t stream, struct seq_point event)
{
	struct fixture *f = ctx;

	if (f->fail_wait)
		return f->fail_wait;
	log_add("wait %" PRIu32 " %" PRIu32 ":%" PRIu64, stream, event.stream, event.seq);
	return 0;
}

static int rec_launch(void *ctx, struct seq_point at, const struct seq_op *op)
{
	struct fixture *f = ctx;

	if (++f->launches == f->fail_launch) {
		log_add("fail-launch %" PRIu32 ":%" PRIu64 " %s", at.stream, at.seq,
			op_name(op->kind));
		return f->fail_status;
	}
	log_add("launch %" PRIu32 ":%" PRIu64 " %s", at.stream, at.seq, op_name(op->kind));
	return 0;
}

static void rec_retire(void *ctx, struct seq_point event)
{
	(void)ctx;
	log_add("retire %" PRIu32 ":%" PRIu64, event.stream, event.seq);
}

static void rec_done(void *ctx, uint64_t cookie, int status)
{
	(void)ctx;
	log_add("done %" PRIu64 " %d", cookie, status);
}

static void rec_trace(void *ctx, const struct seq_trace *t)
{
	struct fixture *f = ctx;

	/* Traces are counted, not logged, so that they never disturb the order checks. */
	ck_assert_uint_lt(t->decision, N_DECISIONS);
	f->traces[t->decision]++;
	f->last_trace[t->decision] = *t;
}

static const struct seq_device rec_device = {
	.mem_alloc = rec_mem_alloc,
	.mem_release = rec_mem_release,
	.record = rec_record,
	.wait = rec_wait,
	.launch = rec_launch,
	.retire = rec_retire,
};

static const struct seq_observer rec_observer = {
	.ctx = &F,
	.done = rec_done,
	.trace = rec_trace,
};

/* ---- fixture and helpers ---- */

static void fx_setup(void)
{
	memset(&F, 0, sizeof(F));
	F.next_addr = 0x1000;
}

static void fx_teardown(void)
{
	if (F.seq)
		seq_destroy(F.seq);
	log_clear();
	free(F.lines);
	memset(&F, 0, sizeof(F));
}

/* Each test picks its config, so the core is made in the test and destroyed in teardown. */
static void fx_start(const struct seq_config *config)
{
	struct seq_config zero;

	memset(&zero, 0, sizeof(zero));
	ck_assert_int_eq(
		seq_create(&F.seq, config ? config : &zero, &rec_device, &F, &rec_observer), 0);
	ck_assert_ptr_nonnull(F.seq);
}

static void fx_destroy(void)
{
	seq_destroy(F.seq);
	F.seq = NULL;
}

static const struct seq_counters *counters(void)
{
	return seq_counters(F.seq);
}

static struct seq_stream_info stream_info(uint32_t stream)
{
	struct seq_stream_info info;

	memset(&info, 0, sizeof(info));
	seq_stream_info(F.seq, stream, &info);
	return info;
}

static struct seq_buffer *buf_new(uint64_t size)
{
	struct seq_buffer *b = NULL;

	ck_assert_int_eq(seq_buffer_alloc(F.seq, size, &b), 0);
	ck_assert_ptr_nonnull(b);
	return b;
}

/* 64-byte buffers into each pointer given, in order (so at 0x1000, 0x2000, ... in a
 * fresh core); the list ends with NULL. */
__attribute__((sentinel)) static void bufs_new(struct seq_buffer **first, ...)
{
	va_list ap;

	va_start(ap, first);
	for (struct seq_buffer **b = first; b; b = va_arg(ap, struct seq_buffer **))
		*b = buf_new(64);
	va_end(ap);
}

static struct seq_buffer *slice_new(struct seq_buffer *of, uint64_t offset, uint64_t size)
{
	struct seq_buffer *s = NULL;

	ck_assert_int_eq(seq_buffer_slice(F.seq, of, offset, size, &s), 0);
	ck_assert_ptr_nonnull(s);
	return s;
}

static struct seq_op op_vmake(enum seq_op_kind kind, unsigned naccess, va_list ap)
{
	struct seq_op op;

	memset(&op, 0, sizeof(op));
	op.kind = kind;
	op.naccess = naccess;
	for (unsigned i = 0; i < naccess && i < SEQ_MAX_ACCESS; i++) {
		op.access[i].buf = va_arg(ap, struct seq_buffer *);
		op.access[i].mode = va_arg(ap, unsigned);
	}
	return op;
}

/* An op from (buffer, mode) pairs. */
static struct seq_op op_make(enum seq_op_kind kind, unsigned naccess, ...)
{
	struct seq_op op;
	va_list ap;

	va_start(ap, naccess);
	op = op_vmake(kind, naccess, ap);
	va_end(ap);
	return op;
}

/* Submit an op made from (buffer, mode) pairs; its point goes to *at when at is set. */
static int submit(enum seq_op_kind kind, struct seq_point *at, unsigned naccess, ...)
{
	struct seq_op op;
	va_list ap;

	va_start(ap, naccess);
	op = op_vmake(kind, naccess, ap);
	va_end(ap);
	return seq_submit(F.seq, &op, at);
}

/* Submit an op that must be accepted and return its point. Check reports a refusal at this
 * helper's line, so the message names the caller's line, the op and the log. */
#define submit_ok(kind, ...) submit_ok_at(__LINE__, kind, __VA_ARGS__)

static struct seq_point submit_ok_at(int line, enum seq_op_kind kind, unsigned naccess, ...)
{
	struct seq_point at = {0, 0};
	struct seq_op op;
	va_list ap;
	int r;

	va_start(ap, naccess);
	op = op_vmake(kind, naccess, ap);
	va_end(ap);
	r = seq_submit(F.seq, &op, &at);
	ck_assert_msg(r == 0, "line %d: %s op with %u accesses refused: %d; log:\n%s", line,
		op_name(kind), naccess, r, log_text());
	return at;
}

/* The ops most tests are built from, each accepted: a copy in (writes buf), a copy out
 * (reads buf), a device copy (reads src, writes dst), a kernel that writes buf, and a
 * kernel that reads in and writes out. */
#define h2d(buf) submit_ok(SEQ_OP_H2D, 1, buf, SEQ_WRITE)
#define d2h(buf) submit_ok(SEQ_OP_D2H, 1, buf, SEQ_READ)
#define d2d(src, dst) submit_ok(SEQ_OP_D2D, 2, src, SEQ_READ, dst, SEQ_WRITE)
#define exec_write(buf) submit_ok(SEQ_OP_EXEC, 1, buf, SEQ_WRITE)
#define exec_in_out(in, out) submit_ok(SEQ_OP_EXEC, 2, in, SEQ_READ, out, SEQ_WRITE)

/* op, asking for a done report under cookie. */
static struct seq_op want_done(struct seq_op op, uint64_t cookie)
{
	op.want_done = true;
	op.cookie = cookie;
	return op;
}

/* The backend's nth launch attempt of the test (1-based, counting those already made)
 * fails with status. */
static void fail_launch_attempt(unsigned nth, int status)
{
	F.fail_launch = nth;
	F.fail_status = status;
}

#define ck_point(p, s, n)                                                                          \
	do {                                                                                       \
		ck_assert_uint_eq((p).stream, (s));                                                \
		ck_assert_uint_eq((p).seq, (n));                                                   \
	} while (0)

static void complete(uint32_t stream, uint64_t seq, int status)
{
	seq_complete(F.seq, (struct seq_point){stream, seq}, status);
}

/* Record what every stream has issued and report it all complete, in stream order. */
static void settle_all(void)
{
	seq_flush(F.seq);
	for (uint32_t s = 0; s < seq_stream_count(F.seq); s++) {
		struct seq_stream_info info = stream_info(s);

		if (info.issued > info.completed)
			complete(s, info.issued, 0);
	}
}

/* Move the compute stream `n` ops on by rewriting `scratch`, completing it every `batch`
 * ops. Completion is learned through seq_await on the compute stream alone, so that no
 * event is recorded on any other stream behind the test's back. */
static void compute_advance(struct seq_buffer *scratch, unsigned n, unsigned batch)
{
	for (unsigned i = 0; i < n; i++) {
		struct seq_point at;

		at = exec_write(scratch);
		ck_assert_uint_eq(at.stream, S_COMPUTE);
		if ((i + 1) % batch == 0 || i + 1 == n) {
			ck_assert_int_eq(seq_await(F.seq, scratch, 1000 + at.seq, NULL), 0);
			complete(S_COMPUTE, at.seq, 0);
			ck_assert_uint_eq(stream_info(S_COMPUTE).completed, at.seq);
		}
	}
}

/* ---- adopted memory (a module's globals) ---- */

static unsigned adopted_gone;

static void adopted_gone_count(void *arg)
{
	ck_assert_ptr_eq(arg, &adopted_gone);
	adopted_gone++;
}

/* A global set by H2D, read by a kernel, set again: the kernel waits for the first set,
 * the second set for the kernel (I4), and the deferred free releases nothing (I5). */
START_TEST(test_adopted_global_sequenced_and_never_released)
{
	struct seq_buffer *g, *out;

	fx_start(NULL);
	adopted_gone = 0;
	ck_assert_int_eq(
		seq_buffer_adopt(F.seq, 0x900000, 36, adopted_gone_count, &adopted_gone, &g), 0);
	ck_assert_uint_eq(g->addr, 0x900000);
	ck_assert(g->adopted);
	out = buf_new(64);
	h2d(g);
	log_clear();
	exec_in_out(g, out);
	ck_log_order("record 1:1", "wait 0 1:1", "launch 0:1 exec");
	log_clear();
	h2d(g);
	ck_log_order("record 0:1", "wait 1 0:1", "launch 1:2 h2d");
	seq_buffer_free(F.seq, g);
	ck_assert_uint_eq(adopted_gone, 0); /* still in use: deferred (I5) */
	settle_all();
	ck_assert_uint_eq(adopted_gone, 1);
	ck_log_lacks("release 0x900000");
	ck_assert_int_eq(seq_buffer_adopt(F.seq, 0x900000, 0, NULL, NULL, &g), -EINVAL);
}
END_TEST

/* ---- I1: definition on the true producer ---- */

START_TEST(test_i1_h2d_defines_buffer_on_h2d_stream)
{
	struct seq_point at;
	struct seq_buffer *in, *out;

	fx_start(NULL);
	bufs_new(&in, &out, NULL);
	ck_log_has("alloc 0x1000 64");
	ck_log_has("alloc 0x2000 64");
	ck_assert_uint_eq(in->addr, 0x1000);

	at = h2d(in);
	ck_point(at, S_H2D, 1);
	ck_log_has("launch 1:1 h2d");
	ck_point(in->def, S_H2D, 1);
	ck_assert_uint_eq(in->legacy_mark, 0);

	log_clear();
	at = exec_in_out(in, out);
	ck_point(at, S_COMPUTE, 1);
	ck_log_order("record 1:1", "wait 0 1:1", "launch 0:1 exec");
	/* Reading does not move the definition; the kernel's output is defined on compute. */
	ck_point(in->def, S_H2D, 1);
	ck_point(out->def, S_COMPUTE, 1);
	ck_assert_uint_eq(in->readers[S_COMPUTE], 1);
}
END_TEST

START_TEST(test_i1_launch_gets_view_addresses)
{
	struct seq_buffer *a, *s;
	struct seq_op op;

	fx_start(NULL);
	a = buf_new(64);
	s = slice_new(a, 16, 32);
	op = op_make(SEQ_OP_EXEC, 2, a, SEQ_READ, s, SEQ_WRITE);
	/* Reading and writing one base through different accesses is not a double write. */
	ck_assert_int_eq(seq_submit(F.seq, &op, NULL), 0);
	ck_assert_uint_eq(op.access[0].addr, 0x1000);
	ck_assert_uint_eq(op.access[0].size, 64);
	ck_assert_uint_eq(op.access[1].addr, 0x1000 + 16);
	ck_assert_uint_eq(op.access[1].size, 32);
	seq_buffer_free(F.seq, s);
}
END_TEST

START_TEST(test_seed_h2d_past_compute_window_still_waits)
{
	struct seq_config cfg = {.window = 4};
	struct seq_buffer *in, *scratch, *out;
	struct seq_point at;

	fx_start(&cfg);
	bufs_new(&in, &scratch, &out, NULL);
	at = h2d(in);
	ck_point(at, S_H2D, 1);

	/* Three windows' worth of compute work, all seen complete: the old code's sync point
	 * for the copy has long left the window. */
	compute_advance(scratch, 12, 4);
	ck_assert_uint_eq(stream_info(S_COMPUTE).completed, 12);
	ck_assert_uint_eq(stream_info(S_COMPUTE).window_used, 0);
	ck_assert_uint_eq(stream_info(S_H2D).completed, 0);
	ck_assert_uint_eq(stream_info(S_H2D).window_used, 1);
	ck_assert(!seq_buffer_idle(F.seq, in));

	log_clear();
	at = exec_in_out(in, out);
	ck_point(at, S_COMPUTE, 13);
	ck_log_order("record 1:1", "wait 0 1:1", "launch 0:13 exec");
	ck_log_count("wait ", 1);
	ck_assert_uint_eq(counters()->waits_enqueued, 1);
	ck_assert_uint_eq(counters()->waits_elided_observed, 0);
	ck_assert_uint_eq(counters()->waits_elided_legacy, 0);
	ck_assert_uint_eq(F.traces[SEQ_TRACE_WAIT], 1);
	ck_point(F.last_trace[SEQ_TRACE_WAIT].producer, S_H2D, 1);
}
END_TEST

START_TEST(test_seed_h2d_observed_complete_elides_wait)
{
	struct seq_config cfg = {.window = 4};
	struct seq_buffer *in, *scratch, *out;
	struct seq_point at;

	fx_start(&cfg);
	bufs_new(&in, &scratch, &out, NULL);
	h2d(in);
	seq_flush(F.seq);
	ck_log_has("record 1:1");
	complete(S_H2D, 1, 0);
	ck_assert(seq_buffer_idle(F.seq, in));
	compute_advance(scratch, 12, 4);

	log_clear();
	at = exec_in_out(in, out);
	ck_point(at, S_COMPUTE, 13);
	ck_log_count("wait ", 0);
	ck_log_count("record ", 0);
	ck_log_has("launch 0:13 exec");
	ck_assert_uint_eq(counters()->waits_enqueued, 0);
	ck_assert_uint_eq(counters()->waits_elided_observed, 1);
}
END_TEST

/* ---- I2: wait or prove ---- */

START_TEST(test_i2_same_stream_elides_wait)
{
	struct seq_buffer *a, *b;
	struct seq_point at;

	fx_start(NULL);
	bufs_new(&a, &b, NULL);
	exec_write(a);
	at = exec_in_out(a, b);
	ck_point(at, S_COMPUTE, 2);
	ck_log_count("wait ", 0);
	ck_log_count("record ", 0);
	ck_assert_uint_eq(counters()->waits_elided_same_stream, 1);
	ck_assert_uint_eq(counters()->waits_enqueued, 0);
	ck_assert_uint_eq(F.traces[SEQ_TRACE_ELIDE_SAME_STREAM], 1);
}
END_TEST

START_TEST(test_i2_observed_complete_elides_wait)
{
	struct seq_buffer *a, *b;

	fx_start(NULL);
	bufs_new(&a, &b, NULL);
	h2d(a);
	seq_flush(F.seq);
	complete(S_H2D, 1, 0);
	log_clear();
	exec_in_out(a, b);
	ck_log_count("wait ", 0);
	ck_log_count("record ", 0);
	ck_assert_uint_eq(counters()->waits_elided_observed, 1);
	ck_assert_uint_eq(F.traces[SEQ_TRACE_ELIDE_OBSERVED], 1);
	ck_point(F.last_trace[SEQ_TRACE_ELIDE_OBSERVED].producer, S_H2D, 1);
}
END_TEST

START_TEST(test_i2_one_wait_per_stream_for_latest_point)
{
	struct seq_buffer *a, *b, *c;

	fx_start(NULL);
	bufs_new(&a, &b, &c, NULL);
	h2d(a);
	h2d(b);
	log_clear();
	submit_ok(SEQ_OP_EXEC, 3, a, SEQ_READ, b, SEQ_READ, c, SEQ_WRITE);
	/* The in-order H2D stream at 2 covers 1: one event, one wait. */
	ck_log_count("record ", 1);
	ck_log_before("record 1:2", "wait 0 1:2");
	ck_log_count("wait ", 1);
	ck_log_before("wait 0 1:2", "launch 0:1 exec");
	ck_assert_uint_eq(counters()->waits_enqueued, 1);
}
END_TEST

START_TEST(test_i2_existing_event_is_reused)
{
	struct seq_buffer *a, *b, *c, *out;

	fx_start(NULL);
	bufs_new(&a, &b, &c, &out, NULL);
	h2d(a);
	exec_in_out(a, out);
	ck_log_has("record 1:1");
	h2d(b);
	h2d(c);
	seq_flush(F.seq);
	ck_log_has("record 1:3");
	ck_log_has("record 0:1");

	/* b is at 1:2: the earliest event covering it is 1:3, already recorded. */
	log_clear();
	exec_in_out(b, out);
	ck_log_count("record ", 0);
	ck_log_has("wait 0 1:3");
	/* a again, from compute: still not seen complete, so another wait on its event. */
	log_clear();
	exec_in_out(a, out);
	ck_log_count("record ", 0);
	ck_log_has("wait 0 1:1");
	ck_assert_uint_eq(counters()->events_recorded, 3);
}
END_TEST

/* ---- I3: completion is observed, never inferred ---- */

START_TEST(test_i3_completion_of_other_stream_is_not_inferred)
{
	struct seq_buffer *in, *c, *out;

	fx_start(NULL);
	bufs_new(&in, &c, &out, NULL);
	h2d(in);
	exec_write(c);
	seq_flush(F.seq);
	complete(S_COMPUTE, 1, 0);
	ck_assert_uint_eq(stream_info(S_COMPUTE).completed, 1);
	ck_assert_uint_eq(stream_info(S_H2D).completed, 0);
	ck_assert(seq_buffer_idle(F.seq, c));
	ck_assert(!seq_buffer_idle(F.seq, in));
	ck_assert_int_eq(seq_await(F.seq, in, 3, NULL), 0);

	log_clear();
	exec_in_out(in, out);
	ck_log_before("wait 0 1:1", "launch 0:2 exec");
	ck_log_count("done ", 0);
}
END_TEST

START_TEST(test_i3_cross_stream_completion_held_until_producer_reported)
{
	struct seq_buffer *in, *out;
	struct seq_op op;
	struct seq_point at;

	fx_start(NULL);
	bufs_new(&in, &out, NULL);
	h2d(in);
	op = want_done(op_make(SEQ_OP_EXEC, 2, in, SEQ_READ, out, SEQ_WRITE), 9);
	ck_assert_int_eq(seq_submit(F.seq, &op, &at), 0);
	seq_flush(F.seq);
	ck_log_has("record 0:1");

	/* The compute report may overtake the H2D report it waited on: hold it back. */
	log_clear();
	complete(S_COMPUTE, 1, 0);
	ck_log_count("done ", 0);
	ck_assert_uint_eq(counters()->ops_completed, 0);
	complete(S_H2D, 1, 0);
	ck_log_has("done 9 0");
	ck_assert_uint_eq(counters()->ops_completed, 2);
	ck_assert(seq_buffer_idle(F.seq, out));
}
END_TEST

START_TEST(test_i3_full_window_backpressure_then_resumes)
{
	struct seq_config cfg = {.window = 4};
	struct seq_buffer *in, *c, *out, *h;
	struct seq_point at;

	fx_start(&cfg);
	bufs_new(&in, &c, &out, &h, NULL);
	h2d(in);
	for (unsigned i = 0; i < 4; i++)
		at = exec_write(c);
	ck_point(at, S_COMPUTE, 4);
	ck_assert_uint_eq(stream_info(S_COMPUTE).window_used, 4);
	ck_assert_uint_eq(stream_info(S_COMPUTE).window_capacity, 4);

	/* This op would need a wait: the refusal must emit none of it, only the event that
	 * lets the stream's completion be learned. */
	log_clear();
	ck_assert_int_eq(submit(SEQ_OP_EXEC, &at, 2, in, SEQ_READ, out, SEQ_WRITE), -EAGAIN);
	ck_log_has("record 0:4");
	ck_assert_uint_eq(F.nlines, 1);
	ck_assert_uint_eq(counters()->backpressure, 1);
	ck_assert_uint_eq(counters()->ops_submitted, 5);
	ck_assert_uint_eq(F.traces[SEQ_TRACE_BACKPRESSURE], 1);
	ck_assert_uint_eq(out->def.seq, 0);

	/* Another stream's window is its own. */
	at = h2d(h);
	ck_point(at, S_H2D, 2);

	complete(S_COMPUTE, 4, 0);
	ck_assert_uint_eq(stream_info(S_COMPUTE).window_used, 0);
	log_clear();
	at = exec_in_out(in, out);
	ck_point(at, S_COMPUTE, 5);
	/* The H2D stream moved on meanwhile: one event at its tail covers the copy. */
	ck_log_order("record 1:2", "wait 0 1:2", "launch 0:5 exec");
	ck_assert_uint_eq(counters()->backpressure, 1);
}
END_TEST

START_TEST(test_i3_later_event_completes_earlier_points)
{
	struct seq_buffer *a, *b, *out;

	fx_start(NULL);
	bufs_new(&a, &b, &out, NULL);
	h2d(a);
	h2d(b);
	seq_flush(F.seq);
	ck_log_count("record ", 1);
	ck_log_has("record 1:2");
	complete(S_H2D, 2, 0);
	ck_assert_uint_eq(stream_info(S_H2D).completed, 2);
	ck_assert_uint_eq(stream_info(S_H2D).window_used, 0);
	ck_assert(seq_buffer_idle(F.seq, a));
	ck_assert(seq_buffer_idle(F.seq, b));
	ck_assert_uint_eq(counters()->ops_completed, 2);
	ck_log_has("retire 1:2");

	log_clear();
	exec_in_out(a, out);
	ck_log_count("wait ", 0);
	ck_assert_uint_eq(counters()->waits_elided_observed, 1);
}
END_TEST

START_TEST(test_i3_every_recorded_event_is_retired_once)
{
	struct seq_buffer *a, *b, *out;

	fx_start(NULL);
	bufs_new(&a, &b, &out, NULL);
	h2d(a);
	exec_in_out(a, out);
	h2d(b);
	d2h(out);
	settle_all();
	ck_assert_uint_ge(log_count("record "), 3);
	ck_log_count("retire ", log_count("record "));
	ck_log_has("retire 1:1");
	ck_log_has("retire 1:2");
}
END_TEST

/* ---- I4: write after read or write ---- */

START_TEST(test_i4_write_waits_for_readers_on_other_streams)
{
	struct seq_buffer *a;
	struct seq_point at;

	fx_start(NULL);
	a = buf_new(64);
	exec_write(a);
	at = d2h(a);
	ck_point(at, S_D2H, 1);
	ck_log_before("wait 2 0:1", "launch 2:1 d2h");
	ck_assert_uint_eq(a->readers[S_D2H], 1);

	log_clear();
	at = exec_write(a);
	ck_point(at, S_COMPUTE, 2);
	ck_log_order("record 2:1", "wait 0 2:1", "launch 0:2 exec");
	ck_log_count("wait ", 1);
	ck_assert_uint_eq(a->readers[S_D2H], 0);
}
END_TEST

START_TEST(test_i4_write_waits_for_previous_writer)
{
	struct seq_buffer *a;

	fx_start(NULL);
	a = buf_new(64);
	h2d(a);
	log_clear();
	/* Write-only: nothing is read, yet the copy must land before it is overwritten. */
	exec_write(a);
	ck_log_before("wait 0 1:1", "launch 0:1 exec");
	ck_point(a->def, S_COMPUTE, 1);
}
END_TEST

START_TEST(test_i4_write_forgets_old_readers)
{
	struct seq_buffer *a;
	struct seq_point at;

	fx_start(NULL);
	a = buf_new(64);
	exec_write(a);
	d2h(a);
	exec_write(a);
	log_clear();
	/* The D2H read came before the compute rewrite; waiting for compute covers it. */
	at = submit_ok(SEQ_OP_D2D, 1, a, SEQ_WRITE);
	ck_point(at, S_D2D, 1);
	ck_log_count("wait ", 1);
	ck_log_has("wait 3 0:2");
}
END_TEST

START_TEST(test_i4_readwrite_waits_for_writer_and_readers)
{
	struct seq_buffer *a;

	fx_start(NULL);
	a = buf_new(64);
	h2d(a);
	d2h(a);
	log_clear();
	/* In-place update on compute: after the copy in, and after the copy out read it. */
	submit_ok(SEQ_OP_EXEC, 1, a, SEQ_READWRITE);
	ck_log_before("wait 0 1:1", "launch 0:1 exec");
	ck_log_before("wait 0 2:1", "launch 0:1 exec");
	ck_log_count("wait ", 2);
	ck_point(a->def, S_COMPUTE, 1);
}
END_TEST

START_TEST(test_d2d_waits_for_source_producer_and_destination_readers)
{
	struct seq_buffer *src, *dst;
	struct seq_point at;

	fx_start(NULL);
	bufs_new(&src, &dst, NULL);
	h2d(src);
	exec_write(dst);
	d2h(dst);
	log_clear();
	at = d2d(src, dst);
	ck_point(at, S_D2D, 1);
	ck_log_before("wait 3 1:1", "launch 3:1 d2d");
	ck_log_before("wait 3 0:1", "launch 3:1 d2d");
	ck_log_before("wait 3 2:1", "launch 3:1 d2d");
	ck_log_count("wait ", 3);
	ck_point(dst->def, S_D2D, 1);
	ck_assert_uint_eq(src->readers[S_D2D], 1);
}
END_TEST

/* ---- I5: free after last use ---- */

START_TEST(test_i5_free_while_kernel_reads_is_deferred)
{
	struct seq_buffer *a, *b, *c;

	fx_start(NULL);
	bufs_new(&a, &b, &c, NULL);
	h2d(a);
	seq_flush(F.seq);
	complete(S_H2D, 1, 0);
	exec_in_out(a, b);
	ck_assert(!seq_buffer_idle(F.seq, a));

	log_clear();
	seq_buffer_free(F.seq, a);
	ck_log_count("release ", 0);
	ck_assert_uint_eq(counters()->frees_deferred, 1);
	ck_assert_uint_eq(counters()->releases, 0);
	ck_assert_uint_eq(F.traces[SEQ_TRACE_DEFER_FREE], 1);
	ck_assert_ptr_eq(F.last_trace[SEQ_TRACE_DEFER_FREE].buf, a);
	/* The kernel's completion must be learned for the memory ever to come back. */
	ck_log_has("record 0:1");

	/* Unrelated progress does not release it. */
	h2d(c);
	seq_flush(F.seq);
	complete(S_H2D, 2, 0);
	ck_log_count("release ", 0);

	complete(S_COMPUTE, 1, 0);
	ck_log_count("release ", 1);
	ck_log_has("release 0x1000 64");
	ck_assert_uint_eq(counters()->releases, 1);
	ck_assert_uint_eq(F.traces[SEQ_TRACE_RELEASE], 1);
	settle_all();
	ck_log_count("release ", 1);
}
END_TEST

START_TEST(test_i5_free_waits_for_pending_definition)
{
	struct seq_buffer *a;

	fx_start(NULL);
	a = buf_new(64);
	h2d(a);
	seq_buffer_free(F.seq, a);
	ck_log_count("release ", 0);
	ck_log_has("record 1:1");
	complete(S_H2D, 1, 0);
	ck_log_count("release ", 1);
	ck_log_has("release 0x1000 64");
}
END_TEST

START_TEST(test_i5_free_idle_releases_at_once)
{
	struct seq_buffer *a, *b;

	fx_start(NULL);
	a = buf_new(64);
	b = buf_new(128);
	seq_buffer_free(F.seq, a);
	ck_log_has("release 0x1000 64");
	h2d(b);
	settle_all();
	seq_buffer_free(F.seq, b);
	ck_log_has("release 0x2000 128");
	ck_assert_uint_eq(counters()->frees_deferred, 0);
	ck_assert_uint_eq(counters()->releases, 2);
}
END_TEST

START_TEST(test_i5_legacy_early_free_releases_at_once)
{
	struct seq_config cfg = {.legacy_early_free = true};
	struct seq_buffer *a, *b;

	fx_start(&cfg);
	bufs_new(&a, &b, NULL);
	h2d(a);
	exec_in_out(a, b);
	log_clear();
	/* The injected bug: the kernel may still read it, yet the memory goes back now. */
	seq_buffer_free(F.seq, a);
	ck_log_has("release 0x1000 64");
	ck_assert_uint_eq(counters()->releases, 1);
	ck_assert_uint_eq(counters()->frees_deferred, 0);
	settle_all();
	ck_log_count("release ", 1);
}
END_TEST

/* ---- I6: slices are views ---- */

START_TEST(test_i6_slice_of_h2d_buffer_waits_for_h2d)
{
	struct seq_buffer *a, *s, *out;
	struct seq_point at;
	struct seq_op op;

	fx_start(NULL);
	bufs_new(&a, &out, NULL);
	h2d(a);
	s = slice_new(a, 16, 32);
	ck_assert_ptr_eq(s->base, a);
	ck_assert_uint_eq(s->addr, 0x1000 + 16);
	ck_assert(!seq_buffer_idle(F.seq, s));

	log_clear();
	op = op_make(SEQ_OP_EXEC, 2, s, SEQ_READ, out, SEQ_WRITE);
	ck_assert_int_eq(seq_submit(F.seq, &op, &at), 0);
	ck_log_order("record 1:1", "wait 0 1:1", "launch 0:1 exec");
	ck_assert_uint_eq(op.access[0].addr, 0x1000 + 16);
	ck_assert_uint_eq(op.access[0].size, 32);
	/* The read through the view is the base's reader. */
	ck_assert_uint_eq(a->readers[S_COMPUTE], 1);
	seq_buffer_free(F.seq, s);
}
END_TEST

START_TEST(test_i6_slice_read_counts_as_base_reader)
{
	struct seq_buffer *a, *s;

	fx_start(NULL);
	a = buf_new(64);
	s = slice_new(a, 0, 32);
	h2d(a);
	settle_all();
	d2h(s);
	log_clear();
	exec_write(a);
	ck_log_before("wait 0 2:1", "launch 0:1 exec");
	seq_buffer_free(F.seq, s);
}
END_TEST

START_TEST(test_i6_slice_keeps_base_alive)
{
	struct seq_buffer *a, *s;

	fx_start(NULL);
	a = buf_new(64);
	s = slice_new(a, 0, 32);
	ck_assert_uint_eq(a->refs, 2);
	exec_write(s);
	ck_point(a->def, S_COMPUTE, 1);

	log_clear();
	seq_buffer_free(F.seq, a);
	ck_log_count("release ", 0);
	ck_assert(a->freed);
	ck_assert_uint_eq(a->refs, 1);
	ck_assert_ptr_eq(s->base, a);
	ck_assert(seq_buffer_idle(F.seq, s) == seq_buffer_idle(F.seq, a));

	/* The last view goes, but the write through it is still in flight. */
	seq_buffer_free(F.seq, s);
	ck_log_count("release ", 0);
	seq_flush(F.seq);
	complete(S_COMPUTE, 1, 0);
	ck_log_count("release ", 1);
	ck_log_has("release 0x1000 64");
}
END_TEST

START_TEST(test_i6_slice_idle_base_released_with_last_view)
{
	struct seq_buffer *a, *s;

	fx_start(NULL);
	a = buf_new(64);
	s = slice_new(a, 8, 8);
	seq_buffer_free(F.seq, a);
	ck_log_count("release ", 0);
	seq_buffer_free(F.seq, s);
	ck_log_count("release ", 1);
	ck_log_has("release 0x1000 64");
	ck_assert_uint_eq(counters()->frees_deferred, 0);
}
END_TEST

START_TEST(test_i6_slice_write_redefines_base)
{
	struct seq_buffer *a, *s;

	fx_start(NULL);
	a = buf_new(64);
	h2d(a);
	s = slice_new(a, 32, 32);
	log_clear();
	exec_write(s);
	ck_log_before("wait 0 1:1", "launch 0:1 exec");
	ck_point(a->def, S_COMPUTE, 1);

	/* A reader of the base now waits for the kernel, which itself waited for the copy. */
	log_clear();
	d2h(a);
	ck_log_has("wait 2 0:1");
	ck_log_lacks("wait 2 1:1");
	seq_buffer_free(F.seq, s);
}
END_TEST

START_TEST(test_i6_slice_of_slice_composes_offsets)
{
	struct seq_buffer *a, *s1, *s2, *bad = NULL;
	struct seq_point at;
	struct seq_op op;

	fx_start(NULL);
	a = buf_new(64);
	s1 = slice_new(a, 16, 32);
	s2 = slice_new(s1, 8, 8);
	ck_assert_ptr_eq(s2->base, a);
	ck_assert_uint_eq(s2->offset, 24);
	ck_assert_uint_eq(s2->size, 8);
	ck_assert_uint_eq(s2->addr, 0x1000 + 24);
	ck_assert_uint_eq(a->refs, 3);
	/* Bounds are those of the view sliced, not of the base. */
	ck_assert_int_eq(seq_buffer_slice(F.seq, s1, 30, 8, &bad), -EINVAL);
	ck_assert_ptr_null(bad);

	h2d(a);
	op = op_make(SEQ_OP_D2H, 1, s2, SEQ_READ);
	ck_assert_int_eq(seq_submit(F.seq, &op, &at), 0);
	ck_assert_uint_eq(op.access[0].addr, 0x1000 + 24);
	ck_assert_uint_eq(op.access[0].size, 8);
	ck_log_has("wait 2 1:1");

	seq_buffer_free(F.seq, s1);
	ck_assert_uint_eq(a->refs, 2);
	seq_buffer_free(F.seq, s2);
	ck_assert_uint_eq(a->refs, 1);
}
END_TEST

/* ---- I7: one definition per write ---- */

START_TEST(test_i7_double_definition_refused)
{
	struct seq_buffer *a, *s;
	struct seq_point at;

	fx_start(NULL);
	a = buf_new(64);
	s = slice_new(a, 0, 16);
	log_clear();
	ck_assert_int_eq(submit(SEQ_OP_EXEC, &at, 2, a, SEQ_WRITE, a, SEQ_WRITE), -EEXIST);
	ck_assert_uint_eq(counters()->double_definitions, 1);
	/* Through a view it is still the same base. */
	ck_assert_int_eq(submit(SEQ_OP_EXEC, &at, 2, a, SEQ_READWRITE, s, SEQ_WRITE), -EEXIST);
	ck_assert_uint_eq(counters()->double_definitions, 2);
	ck_assert_uint_eq(F.nlines, 0);
	ck_assert_uint_eq(counters()->ops_submitted, 0);
	ck_assert_uint_eq(a->def.seq, 0);
	ck_assert_int_eq(seq_buffer_error(F.seq, a), 0);
	seq_buffer_free(F.seq, s);
}
END_TEST

START_TEST(test_i7_two_slices_of_one_base_written_refused)
{
	struct seq_buffer *a, *s1, *s2;
	struct seq_point at;

	fx_start(NULL);
	a = buf_new(64);
	s1 = slice_new(a, 0, 32);
	s2 = slice_new(a, 32, 32);
	log_clear();
	/* Disjoint ranges, but the base has one definition point: two writes would set it twice. */
	ck_assert_int_eq(submit(SEQ_OP_EXEC, &at, 2, s1, SEQ_WRITE, s2, SEQ_WRITE), -EEXIST);
	ck_assert_uint_eq(F.nlines, 0);
	/* Reading twice, or reading and writing separately, is fine. */
	exec_in_out(s1, s2);
	submit_ok(SEQ_OP_EXEC, 2, s1, SEQ_READ, s2, SEQ_READ);
	ck_assert_uint_eq(counters()->double_definitions, 1);
	seq_buffer_free(F.seq, s1);
	seq_buffer_free(F.seq, s2);
}
END_TEST

/* ---- I8: the core never blocks ---- */

START_TEST(test_i8_await_and_sync_return_at_once)
{
	struct seq_buffer *a;

	fx_start(NULL);
	a = buf_new(64);
	h2d(a);
	/* Neither call may wait for the device, nor pretend it has finished. */
	ck_assert_int_eq(seq_await(F.seq, a, 1, NULL), 0);
	ck_assert_int_eq(seq_sync(F.seq, 2), 0);
	ck_log_count("done ", 0);
	ck_log_has("record 1:1");
	complete(S_H2D, 1, 0);
	ck_log_has("done 1 0");
	ck_log_has("done 2 0");
}
END_TEST

/* ---- I9: errors flow forward ---- */

START_TEST(test_i9_failed_h2d_fails_dependent_exec_not_launched)
{
	struct seq_buffer *in, *out;
	struct seq_point at = {99, 99};
	struct seq_op op;

	fx_start(NULL);
	bufs_new(&in, &out, NULL);
	fail_launch_attempt(1, -EIO);
	op = op_make(SEQ_OP_H2D, 1, in, SEQ_WRITE);
	ck_assert_int_eq(seq_submit(F.seq, &op, &at), -EIO);
	ck_assert_int_eq(op.fail_cause, SEQ_FAIL_LAUNCH);
	ck_assert_int_eq(in->error, -EIO);
	ck_assert_int_eq(seq_buffer_error(F.seq, in), -EIO);
	ck_assert_uint_eq(stream_info(S_H2D).issued, 0);

	log_clear();
	op = op_make(SEQ_OP_EXEC, 2, in, SEQ_READ, out, SEQ_WRITE);
	ck_assert_int_eq(seq_submit(F.seq, &op, &at), -EIO);
	ck_assert_int_eq(op.fail_cause, SEQ_FAIL_INPUT);
	ck_assert_uint_eq(F.nlines, 0);
	ck_assert_int_eq(seq_buffer_error(F.seq, out), -EIO);
	ck_assert_uint_eq(stream_info(S_COMPUTE).issued, 0);
	ck_assert_uint_eq(counters()->ops_failed, 2);
	ck_assert_uint_eq(counters()->ops_submitted, 0);
	ck_assert_uint_ge(F.traces[SEQ_TRACE_FAIL_DEPENDENCY], 1);
}
END_TEST

START_TEST(test_i9_failure_flows_through_chain)
{
	struct seq_buffer *in, *mid, *other;
	struct seq_op op;

	fx_start(NULL);
	bufs_new(&in, &mid, &other, NULL);
	fail_launch_attempt(1, -EIO);
	ck_assert_int_eq(submit(SEQ_OP_H2D, NULL, 1, in, SEQ_WRITE), -EIO);
	ck_assert_int_eq(submit(SEQ_OP_EXEC, NULL, 2, in, SEQ_READ, mid, SEQ_WRITE), -EIO);
	op = want_done(op_make(SEQ_OP_D2H, 1, mid, SEQ_READ), 42);
	ck_assert_int_eq(seq_submit(F.seq, &op, NULL), -EIO);
	/* An in-out access reads too, so it fails even where the op also writes. */
	ck_assert_int_eq(submit(SEQ_OP_EXEC, NULL, 2, mid, SEQ_READWRITE, other, SEQ_WRITE), -EIO);
	ck_assert_int_eq(seq_buffer_error(F.seq, other), -EIO);
	ck_log_count("launch ", 0);
	ck_log_count("wait ", 0);
	ck_assert_uint_eq(counters()->ops_failed, 4);
	ck_assert_int_eq(seq_await(F.seq, mid, 7, NULL), -EIO);
	ck_assert_int_eq(seq_await(F.seq, in, 8, NULL), -EIO);
	ck_log_count("done 7", 0);
}
END_TEST

START_TEST(test_i9_full_rewrite_clears_error)
{
	struct seq_buffer *a, *out;
	struct seq_point at;

	fx_start(NULL);
	bufs_new(&a, &out, NULL);
	fail_launch_attempt(1, -EIO);
	ck_assert_int_eq(submit(SEQ_OP_H2D, &at, 1, a, SEQ_WRITE), -EIO);
	at = h2d(a);
	/* The failed launch did not use up a point. */
	ck_point(at, S_H2D, 1);
	ck_assert_int_eq(seq_buffer_error(F.seq, a), 0);
	exec_in_out(a, out);
	ck_log_before("wait 0 1:1", "launch 0:1 exec");
}
END_TEST

START_TEST(test_i9_partial_write_keeps_error)
{
	struct seq_buffer *a, *s, *out;
	struct seq_point at;

	fx_start(NULL);
	bufs_new(&a, &out, NULL);
	s = slice_new(a, 0, 32);
	fail_launch_attempt(1, -EIO);
	ck_assert_int_eq(submit(SEQ_OP_H2D, &at, 1, a, SEQ_WRITE), -EIO);
	/* Half the buffer is rewritten; the other half is still what the failed copy left. */
	h2d(s);
	ck_assert_int_eq(seq_buffer_error(F.seq, a), -EIO);
	ck_assert_int_eq(submit(SEQ_OP_EXEC, &at, 2, a, SEQ_READ, out, SEQ_WRITE), -EIO);
	/* A full-size view is the whole buffer. */
	seq_buffer_free(F.seq, s);
	s = slice_new(a, 0, 64);
	h2d(s);
	ck_assert_int_eq(seq_buffer_error(F.seq, a), 0);
	seq_buffer_free(F.seq, s);
}
END_TEST

START_TEST(test_i9_launch_failure_does_not_consume_point)
{
	struct seq_buffer *a, *b;
	struct seq_point at;

	fx_start(NULL);
	bufs_new(&a, &b, NULL);
	exec_write(a);
	fail_launch_attempt(2, -ENOMEM);
	ck_assert_int_eq(submit(SEQ_OP_EXEC, &at, 2, a, SEQ_READ, b, SEQ_WRITE), -ENOMEM);
	ck_log_has("fail-launch 0:2 exec");
	ck_assert_int_eq(seq_buffer_error(F.seq, b), -ENOMEM);
	/* The failed op read a but did not become its reader. */
	ck_assert_uint_eq(a->readers[S_COMPUTE], 0);
	ck_assert_int_eq(seq_buffer_error(F.seq, a), 0);
	at = exec_in_out(a, b);
	ck_point(at, S_COMPUTE, 2);
	ck_assert_uint_eq(stream_info(S_COMPUTE).issued, 2);
	ck_assert_int_eq(seq_buffer_error(F.seq, b), 0);
}
END_TEST

START_TEST(test_i9_wait_failure_fails_op_not_launched)
{
	struct seq_buffer *in, *out;
	struct seq_op op;

	fx_start(NULL);
	bufs_new(&in, &out, NULL);
	h2d(in);
	F.fail_wait = -ENOMEM;
	op = op_make(SEQ_OP_EXEC, 2, in, SEQ_READ, out, SEQ_WRITE);
	ck_assert_int_eq(seq_submit(F.seq, &op, NULL), -ENOMEM);
	ck_assert_int_eq(op.fail_cause, SEQ_FAIL_LAUNCH);
	/* Without its wait the kernel would race the copy: it must not run at all. */
	ck_log_count("launch 0:", 0);
	ck_assert_int_eq(seq_buffer_error(F.seq, out), -ENOMEM);
	ck_assert_int_eq(seq_buffer_error(F.seq, in), 0);
	ck_assert_uint_eq(stream_info(S_COMPUTE).issued, 0);
	F.fail_wait = 0;
	exec_in_out(in, out);
	ck_log_before("wait 0 1:1", "launch 0:1 exec");
}
END_TEST

START_TEST(test_i9_device_error_fails_stream_and_waiters)
{
	struct seq_buffer *ok, *in, *out, *later, *x;
	struct seq_op op;
	struct seq_point at;

	fx_start(NULL);
	bufs_new(&ok, &in, &out, &later, &x, NULL);
	h2d(ok);
	settle_all();
	h2d(in);
	op = want_done(op_make(SEQ_OP_EXEC, 2, in, SEQ_READ, out, SEQ_WRITE), 5);
	ck_assert_int_eq(seq_submit(F.seq, &op, &at), 0);
	ck_log_has("wait 0 1:2");
	seq_flush(F.seq);
	ck_log_has("record 0:1");
	ck_assert_int_eq(seq_await(F.seq, in, 66, NULL), 0);
	ck_assert_int_eq(seq_sync(F.seq, 77), 0);

	log_clear();
	complete(S_H2D, 2, -EIO);
	complete(S_COMPUTE, 1, 0);
	/* The kernel waited on a failed copy: it fails too, though compute reported success. */
	ck_log_has("done 5 -5");
	ck_log_has("done 66 -5");
	ck_log_has("done 77 -5");
	ck_assert_int_eq(seq_buffer_error(F.seq, ok), 0);
	ck_assert_int_eq(seq_buffer_error(F.seq, in), -EIO);
	ck_assert_int_eq(seq_buffer_error(F.seq, out), -EIO);
	ck_assert_int_eq(stream_info(S_H2D).error, -EIO);
	ck_assert_int_eq(stream_info(S_COMPUTE).error, -EIO);
	ck_assert_int_eq(seq_await(F.seq, out, 6, NULL), -EIO);

	/* Both streams stay failed; a stream that saw no failure does not. */
	log_clear();
	op = op_make(SEQ_OP_H2D, 1, later, SEQ_WRITE);
	ck_assert_int_eq(seq_submit(F.seq, &op, &at), -EIO);
	ck_assert_int_eq(op.fail_cause, SEQ_FAIL_STREAM);
	ck_point(op.failed_producer, S_H2D, 2);
	ck_assert_int_eq(seq_buffer_error(F.seq, later), -EIO);
	ck_assert_int_eq(submit(SEQ_OP_EXEC, &at, 1, x, SEQ_WRITE), -EIO);
	ck_log_count("launch ", 0);
	op = op_make(SEQ_OP_D2H, 1, ok, SEQ_READ);
	ck_assert_int_eq(seq_submit(F.seq, &op, &at), 0);
	ck_assert_int_eq(op.fail_cause, SEQ_FAIL_NONE);
	ck_point(at, S_D2H, 1);
}
END_TEST

/* A device reset (seq_reset): what was in flight completes with the error, recorded or
 * not; every live base is lost for good (its ops fail with -ENXIO before anything is
 * emitted, a full rewrite does not clear it, its free releases nothing); a pending free is
 * dropped without a release; no retire names an old event; the streams take new work at
 * once, their numbering going on, and new buffers work. */
START_TEST(test_reset_fails_in_flight_work_and_loses_every_buffer)
{
	struct seq_buffer *a, *b, *held, *fresh;
	struct seq_point at;
	struct seq_op op;

	fx_start(NULL);
	bufs_new(&a, &b, &held, NULL);
	h2d(a);
	seq_flush(F.seq); /* 1:1 recorded */
	op = want_done(op_make(SEQ_OP_EXEC, 2, a, SEQ_READ, b, SEQ_WRITE), 9);
	ck_assert_int_eq(seq_submit(F.seq, &op, &at), 0); /* 0:1, not recorded */
	ck_assert_int_eq(seq_await(F.seq, b, 10, NULL), 0);
	seq_buffer_free(F.seq, a); /* pending: the kernel reads it */
	ck_assert_uint_eq(seq_pending_count(F.seq), 1);

	log_clear();
	ck_assert_uint_eq(seq_reset(F.seq, -EIO), 2); /* b and held; a was freed */
	ck_log_has("done 9 -5");
	ck_log_has("done 10 -5");
	ck_log_count("retire ", 0);
	ck_log_count("release ", 0);
	ck_assert_uint_eq(seq_pending_count(F.seq), 0);
	ck_assert_int_eq(stream_info(S_COMPUTE).error, 0);
	ck_assert_int_eq(stream_info(S_H2D).error, 0);
	ck_assert_uint_eq(stream_info(S_COMPUTE).completed, 1);

	/* Lost: refused before anything is emitted, whether read or written in full. */
	log_clear();
	ck_assert_int_eq(seq_buffer_error(F.seq, held), -ENXIO);
	op = op_make(SEQ_OP_H2D, 1, held, SEQ_WRITE);
	ck_assert_int_eq(seq_submit(F.seq, &op, &at), -ENXIO);
	ck_assert_int_eq(op.fail_cause, SEQ_FAIL_LOST);
	ck_assert_int_eq(seq_buffer_error(F.seq, held), -ENXIO);
	ck_assert_int_eq(submit(SEQ_OP_D2H, &at, 1, b, SEQ_READ), -ENXIO);
	ck_assert_int_eq(seq_await(F.seq, b, 11, NULL), -ENXIO);
	{
		struct seq_buffer *sl = NULL;

		ck_assert_int_eq(seq_buffer_slice(F.seq, held, 0, 8, &sl), -ENXIO);
	}
	ck_log_count("launch ", 0);
	ck_log_count("wait ", 0);

	/* The streams go on from where they were; a new buffer works as ever. */
	fresh = buf_new(64);
	at = h2d(fresh);
	ck_point(at, S_H2D, 2);
	op = op_make(SEQ_OP_EXEC, 1, fresh, SEQ_READ);
	ck_assert_int_eq(seq_submit(F.seq, &op, &at), 0);
	ck_point(at, S_COMPUTE, 2);
	ck_log_has("wait 0 1:2");
	/* Freeing a lost buffer hands nothing back; a live one's release is as before. */
	log_clear();
	seq_buffer_free(F.seq, held);
	seq_buffer_free(F.seq, b);
	ck_log_count("release ", 0);
	settle_all();
	seq_buffer_free(F.seq, fresh);
	ck_log_count("release ", 1);
}
END_TEST

/* An exclusive op (--isolate-faults) runs alone: after the last point issued on every
 * other stream, and every op issued after it, on any stream and whatever it touches,
 * waits for it until it is complete. */
START_TEST(test_exclusive_op_runs_alone)
{
	struct seq_buffer *a, *b, *c, *d;
	struct seq_point at;
	struct seq_op op;

	fx_start(NULL);
	bufs_new(&a, &b, &c, &d, NULL);
	h2d(a); /* 1:1, unrelated to what follows */
	ck_assert_int_eq(submit(SEQ_OP_D2H, &at, 1, b, SEQ_READ), 0); /* 2:1 */
	log_clear();
	op = op_make(SEQ_OP_EXEC, 1, c, SEQ_WRITE);
	op.exclusive = true;
	ck_assert_int_eq(seq_submit(F.seq, &op, &at), 0);
	ck_point(at, S_COMPUTE, 1);
	ck_log_has("wait 0 1:1");
	ck_log_has("wait 0 2:1");
	/* Later ops on other streams wait for it, though they share nothing with it. */
	log_clear();
	ck_assert_int_eq(submit(SEQ_OP_H2D, &at, 1, d, SEQ_WRITE), 0);
	ck_log_has("wait 1 0:1");
	/* Once it is complete nothing waits for it any more. */
	settle_all();
	log_clear();
	ck_assert_int_eq(submit(SEQ_OP_D2H, &at, 1, a, SEQ_READ), 0);
	ck_log_count("wait ", 0);
}
END_TEST

/* An op that waits on more streams than a point record holds in place (an exclusive op
 * after work on eleven lanes) keeps every wait: it is acknowledged only once the last of
 * the streams it waited on has completed. */
START_TEST(test_exclusive_op_waits_on_more_streams_than_a_record_holds)
{
	const struct seq_config cfg = {.n_compute = 12};
	struct seq_point at[11], x;
	struct seq_op op;

	fx_start(&cfg);
	for (unsigned i = 0; i < 11; i++) {
		op = op_make(SEQ_OP_EXEC, 1, buf_new(64), SEQ_WRITE);
		op.lane = SEQ_LANE(i + 1);
		ck_assert_int_eq(seq_submit(F.seq, &op, &at[i]), 0);
		ck_assert_uint_eq(at[i].stream, i + 1);
	}
	log_clear();
	op = op_make(SEQ_OP_EXEC, 1, buf_new(64), SEQ_WRITE);
	op.lane = SEQ_LANE(0);
	op.exclusive = true;
	ck_assert_int_eq(seq_submit(F.seq, &op, &x), 0);
	ck_assert_uint_eq(x.stream, 0);
	ck_log_count("wait ", 11);
	seq_flush(F.seq);
	complete(x.stream, x.seq, 0);
	for (unsigned i = 0; i < 11; i++) {
		ck_assert_uint_eq(stream_info(x.stream).completed, x.seq - 1);
		complete(at[i].stream, at[i].seq, 0);
	}
	ck_assert_uint_eq(stream_info(x.stream).completed, x.seq);
}
END_TEST

/* A copy that fails on the device: launched, then its event completes with -EIO. */
static void h2d_fails_on_device(struct seq_buffer *buf)
{
	struct seq_point at = h2d(buf);

	seq_flush(F.seq);
	complete(S_H2D, at.seq, -EIO);
	ck_assert_int_eq(seq_buffer_error(F.seq, buf), -EIO);
}

/* A reader of buf is refused with its producer's failure, nothing emitted. */
#define ck_read_fails(buf, error)                                                                  \
	do {                                                                                       \
		struct seq_op rop = op_make(SEQ_OP_D2H, 1, buf, SEQ_READ);                         \
                                                                                                   \
		log_clear();                                                                       \
		ck_assert_int_eq(seq_submit(F.seq, &rop, NULL), error);                            \
		ck_assert_int_eq(rop.fail_cause, SEQ_FAIL_INPUT);                                  \
		ck_log_count("launch ", 0);                                                        \
	} while (0)

START_TEST(test_slice_overwrite_keeps_base_device_error)
{
	struct seq_buffer *a, *lo, *hi, *whole;

	fx_start(NULL);
	a = buf_new(64);
	lo = slice_new(a, 0, 32);
	hi = slice_new(a, 32, 32);
	h2d_fails_on_device(a);
	/* The kernel rewrites all of lo and becomes a's producer, but hi still holds what
	 * the failed copy left: the base stays failed, whichever view is read. */
	exec_write(lo);
	ck_point(a->def, S_COMPUTE, 1);
	ck_assert_int_eq(seq_buffer_error(F.seq, a), -EIO);
	ck_read_fails(a, -EIO);
	ck_read_fails(hi, -EIO);
	ck_read_fails(lo, -EIO);
	ck_assert_int_eq(seq_await(F.seq, a, 9, NULL), -EIO);
	/* Once the kernel completes, the failure is still there. */
	settle_all();
	ck_assert_int_eq(seq_buffer_error(F.seq, a), -EIO);
	/* Every slice rewritten, one after the other, is still not one write of the base. */
	exec_write(hi);
	ck_assert_int_eq(seq_buffer_error(F.seq, a), -EIO);

	/* A write of the whole base (here a full-size view) defines all of it again. */
	whole = slice_new(a, 0, 64);
	exec_write(whole);
	ck_assert_int_eq(seq_buffer_error(F.seq, a), 0);
	d2h(hi);
	seq_buffer_free(F.seq, whole);
	seq_buffer_free(F.seq, hi);
	seq_buffer_free(F.seq, lo);
}
END_TEST

START_TEST(test_slice_overwrite_by_d2d_keeps_base_device_error)
{
	struct seq_buffer *a, *src, *lo;

	fx_start(NULL);
	bufs_new(&a, &src, NULL);
	lo = slice_new(a, 0, 32);
	h2d(src);
	settle_all(); /* a stream fails from its first point not reported complete */
	h2d_fails_on_device(a);
	d2d(src, lo);
	ck_assert_int_eq(seq_buffer_error(F.seq, a), -EIO);
	ck_read_fails(a, -EIO);
	/* The H2D stream is failed for good; a kernel writing all of a clears it. */
	exec_write(a);
	ck_assert_int_eq(seq_buffer_error(F.seq, a), 0);
	d2h(a);
	seq_buffer_free(F.seq, lo);
}
END_TEST

START_TEST(test_readwrite_of_device_failed_base_fails_not_launched)
{
	struct seq_buffer *a, *lo, *out;
	struct seq_op op;

	fx_start(NULL);
	bufs_new(&a, &out, NULL);
	lo = slice_new(a, 0, 32);
	h2d_fails_on_device(a);
	/* An in-out access reads what the failed copy left, through the base or a slice. */
	log_clear();
	op = op_make(SEQ_OP_EXEC, 1, a, SEQ_READWRITE);
	ck_assert_int_eq(seq_submit(F.seq, &op, NULL), -EIO);
	ck_assert_int_eq(op.fail_cause, SEQ_FAIL_INPUT);
	ck_point(op.failed_producer, S_H2D, 1);
	op = op_make(SEQ_OP_EXEC, 2, lo, SEQ_READWRITE, out, SEQ_WRITE);
	ck_assert_int_eq(seq_submit(F.seq, &op, NULL), -EIO);
	ck_log_count("launch ", 0);
	ck_assert_int_eq(seq_buffer_error(F.seq, a), -EIO);
	ck_assert_int_eq(seq_buffer_error(F.seq, out), -EIO);
	seq_buffer_free(F.seq, lo);
}
END_TEST

START_TEST(test_d2d_within_device_failed_base_fails_not_launched)
{
	struct seq_buffer *a, *lo, *hi;
	struct seq_op op;

	fx_start(NULL);
	a = buf_new(64);
	lo = slice_new(a, 0, 32);
	hi = slice_new(a, 32, 32);
	h2d_fails_on_device(a);
	/* One base as source and destination: one in-out access, or a read and a write. */
	log_clear();
	op = op_make(SEQ_OP_D2D, 1, a, SEQ_READWRITE);
	ck_assert_int_eq(seq_submit(F.seq, &op, NULL), -EIO);
	ck_assert_int_eq(op.fail_cause, SEQ_FAIL_INPUT);
	op = op_make(SEQ_OP_D2D, 2, hi, SEQ_READ, lo, SEQ_WRITE);
	ck_assert_int_eq(seq_submit(F.seq, &op, NULL), -EIO);
	ck_assert_int_eq(op.fail_cause, SEQ_FAIL_INPUT);
	ck_log_count("launch ", 0);
	ck_assert_int_eq(seq_buffer_error(F.seq, a), -EIO);
	seq_buffer_free(F.seq, lo);
	seq_buffer_free(F.seq, hi);
}
END_TEST

START_TEST(test_failure_after_slice_overwrite_launched_fails_base_readers)
{
	struct seq_buffer *a, *lo, *out;
	struct seq_op op;

	fx_start(NULL);
	bufs_new(&a, &out, NULL);
	lo = slice_new(a, 0, 32);
	h2d(a);
	/* Launched while the copy is in flight: it waits for it on the device. */
	op = want_done(op_make(SEQ_OP_EXEC, 1, lo, SEQ_WRITE), 5);
	ck_assert_int_eq(seq_submit(F.seq, &op, NULL), 0);
	ck_log_before("wait 0 1:1", "launch 0:1 exec");
	/* Before the failure is known a reader is launched, behind the kernel. */
	exec_in_out(a, out);
	seq_flush(F.seq);
	complete(S_COMPUTE, 2, 0);
	complete(S_H2D, 1, -EIO);
	ck_log_has("done 5 -5");
	ck_assert_int_eq(seq_buffer_error(F.seq, a), -EIO);
	ck_assert_int_eq(seq_buffer_error(F.seq, out), -EIO);
	ck_read_fails(a, -EIO);
	ck_read_fails(lo, -EIO);
	seq_buffer_free(F.seq, lo);
}
END_TEST

START_TEST(test_failure_spread_to_point_reported_before_own_failure_marks_it)
{
	struct seq_buffer *a, *lo, *x;
	struct seq_op op;

	fx_start(NULL);
	bufs_new(&a, &x, NULL);
	lo = slice_new(a, 0, 32);
	h2d(a);
	op = want_done(op_make(SEQ_OP_EXEC, 1, lo, SEQ_WRITE), 5);
	ck_assert_int_eq(seq_submit(F.seq, &op, NULL), 0);
	seq_flush(F.seq);
	exec_write(x);
	seq_flush(F.seq);
	ck_log_has("record 0:1");
	ck_log_has("record 0:2");
	/* Compute reports the kernel done, which cannot be acknowledged before the copy it
	 * waited for; then compute fails from its next point on; then the copy fails. */
	complete(S_COMPUTE, 1, 0);
	complete(S_COMPUTE, 2, -EFAULT);
	ck_assert_int_eq(seq_buffer_error(F.seq, a), 0);
	ck_assert_int_eq(seq_buffer_error(F.seq, x), -EFAULT);
	complete(S_H2D, 1, -EIO);
	/* The kernel waited on the failed copy: its point, a's producer, failed with it. */
	ck_log_has("done 5 -5");
	ck_assert_int_eq(seq_buffer_error(F.seq, a), -EIO);
	ck_read_fails(a, -EIO);
	/* The stream is failed from that point on, with that point's error. */
	ck_assert_int_eq(stream_info(S_COMPUTE).error, -EIO);
	ck_assert_int_eq(seq_buffer_error(F.seq, x), -EIO);
	seq_buffer_free(F.seq, lo);
}
END_TEST

/* ---- lazy events, legacy injection, await/sync, counters ---- */

START_TEST(test_lazy_events_only_when_needed)
{
	struct seq_buffer *a, *b, *d;

	fx_start(NULL);
	bufs_new(&a, &b, &d, NULL);
	h2d(a);
	exec_write(b);
	exec_write(b);
	submit_ok(SEQ_OP_D2D, 1, d, SEQ_WRITE);
	ck_log_count("record ", 0);
	ck_assert_uint_eq(counters()->events_recorded, 0);

	seq_flush(F.seq);
	ck_log_count("record ", 3);
	ck_log_has("record 0:2");
	ck_log_has("record 1:1");
	ck_log_has("record 3:1");
	ck_assert_uint_eq(stream_info(S_COMPUTE).recorded, 2);
	seq_flush(F.seq);
	ck_log_count("record ", 3);
	ck_assert_uint_eq(counters()->events_recorded, 3);
}
END_TEST

/* The injected legacy bug must really be the bug: the seed scenario, and no wait. */
START_TEST(test_legacy_sync_window_elides_wait)
{
	struct seq_config cfg = {.window = 4, .legacy_sync_window = 4};
	struct seq_buffer *in, *scratch, *out;

	fx_start(&cfg);
	bufs_new(&in, &scratch, &out, NULL);
	h2d(in);
	ck_assert_uint_eq(in->legacy_mark, 1);
	compute_advance(scratch, 12, 4);
	ck_assert_uint_eq(stream_info(S_H2D).completed, 0);

	log_clear();
	exec_in_out(in, out);
	ck_log_has("launch 0:13 exec");
	ck_log_count("wait ", 0);
	ck_log_count("record 1:", 0);
	ck_assert_uint_eq(counters()->waits_elided_legacy, 1);
	ck_assert_uint_eq(counters()->waits_enqueued, 0);
	ck_assert_uint_eq(F.traces[SEQ_TRACE_ELIDE_LEGACY], 1);
}
END_TEST

START_TEST(test_legacy_sync_window_waits_inside_window)
{
	struct seq_config cfg = {.legacy_sync_window = 4};
	struct seq_buffer *in, *scratch, *out;

	fx_start(&cfg);
	bufs_new(&in, &scratch, &out, NULL);
	h2d(in);
	exec_write(scratch);
	exec_write(scratch);
	log_clear();
	exec_in_out(in, out);
	ck_log_before("wait 0 1:1", "launch 0:3 exec");
	ck_assert_uint_eq(counters()->waits_elided_legacy, 0);
}
END_TEST

START_TEST(test_await_and_sync_report_completion)
{
	struct seq_buffer *a, *b, *never;
	struct seq_op op;
	struct seq_point at;

	fx_start(NULL);
	bufs_new(&a, &b, &never, NULL);
	ck_assert_int_eq(seq_await(F.seq, never, 1, NULL), 1);
	ck_assert_int_eq(seq_sync(F.seq, 2), 1);

	h2d(a);
	ck_assert_int_eq(seq_await(F.seq, a, 11, NULL), 0);
	ck_log_has("record 1:1");
	op = want_done(op_make(SEQ_OP_EXEC, 1, b, SEQ_WRITE), 30);
	ck_assert_int_eq(seq_submit(F.seq, &op, &at), 0);
	ck_assert_int_eq(seq_sync(F.seq, 20), 0);
	ck_log_has("record 0:1");

	complete(S_H2D, 1, 0);
	ck_log_has("done 11 0");
	ck_log_count("done 20", 0);
	ck_log_count("done 30", 0);
	ck_assert_int_eq(seq_await(F.seq, a, 12, NULL), 1);
	complete(S_COMPUTE, 1, 0);
	ck_log_has("done 20 0");
	ck_log_has("done 30 0");
	ck_log_count("done ", 3);
	ck_assert_int_eq(seq_sync(F.seq, 21), 1);
	ck_assert_int_eq(seq_await(F.seq, b, 13, NULL), 1);
	ck_log_count("done ", 3);
}
END_TEST

START_TEST(test_sync_points_waits_only_for_the_sessions_ops)
{
	struct seq_buffer *a, *b;
	struct seq_point mine, theirs;
	uint64_t upto[SEQ_MAX_STREAMS] = {0};

	fx_start(NULL);
	bufs_new(&a, &b, NULL);
	mine = exec_write(a);
	theirs = h2d(b);
	/* One client's sync names its own last point per stream: compute 1 only. */
	upto[mine.stream] = mine.seq;
	ck_assert_int_eq(seq_sync_points(F.seq, upto, 40), 0);
	complete(S_COMPUTE, 1, 0);
	ck_log_has("done 40 0");
	/* The other client's H2D is still running; a full sync would still wait for it. */
	ck_assert_int_eq(seq_sync(F.seq, 41), 0);
	ck_log_count("done 41", 0);
	complete(S_H2D, 1, 0);
	ck_log_has("done 41 0");
	(void)theirs;
}
END_TEST

START_TEST(test_counters_match_decisions)
{
	struct seq_config cfg = {.window = 2};
	const struct seq_counters *c;
	struct seq_buffer *a, *b, *d;
	struct seq_point at;

	fx_start(&cfg);
	bufs_new(&a, &b, &d, NULL);
	h2d(a); /* 1:1 */
	exec_in_out(a, b); /* wait */
	exec_in_out(b, d); /* same */
	ck_assert_int_eq(submit(SEQ_OP_EXEC, &at, 1, d, SEQ_READ), -EAGAIN);
	complete(S_H2D, 1, 0);
	complete(S_COMPUTE, 2, 0);
	/* d's def, b's def and b's reader are all on compute: three same-stream elisions. */
	exec_in_out(d, b);
	d2h(a); /* observed */
	seq_buffer_free(F.seq, a); /* deferred: the D2H still reads it */
	complete(S_D2H, 1, 0);

	c = counters();
	ck_assert_uint_eq(c->ops_submitted, 5);
	ck_assert_uint_eq(c->ops_completed, 4);
	ck_assert_uint_eq(c->ops_failed, 0);
	ck_assert_uint_eq(c->waits_enqueued, 1);
	ck_assert_uint_eq(c->waits_elided_same_stream, 4);
	ck_assert_uint_eq(c->waits_elided_observed, 1);
	ck_assert_uint_eq(c->waits_elided_legacy, 0);
	ck_assert_uint_eq(c->events_recorded, 3);
	ck_assert_uint_eq(c->backpressure, 1);
	ck_assert_uint_eq(c->frees_deferred, 1);
	ck_assert_uint_eq(c->releases, 1);
	ck_assert_uint_eq(c->double_definitions, 0);

	ck_assert_uint_eq(c->ops_submitted, log_count("launch "));
	ck_assert_uint_eq(c->waits_enqueued, log_count("wait "));
	ck_assert_uint_eq(c->events_recorded, log_count("record "));
	ck_assert_uint_eq(c->releases, log_count("release "));
	ck_assert_uint_eq(c->waits_enqueued, F.traces[SEQ_TRACE_WAIT]);
	ck_assert_uint_eq(c->waits_elided_same_stream, F.traces[SEQ_TRACE_ELIDE_SAME_STREAM]);
	ck_assert_uint_eq(c->waits_elided_observed, F.traces[SEQ_TRACE_ELIDE_OBSERVED]);
	ck_assert_uint_eq(c->backpressure, F.traces[SEQ_TRACE_BACKPRESSURE]);
	ck_assert_uint_eq(c->frees_deferred, F.traces[SEQ_TRACE_DEFER_FREE]);
	ck_assert_uint_eq(c->releases, F.traces[SEQ_TRACE_RELEASE]);
}
END_TEST

/* ---- configuration and streams ---- */

START_TEST(test_streams_layout_and_round_robin)
{
	struct seq_config cfg = {.n_d2h = 2, .n_d2d = 2};
	struct seq_buffer *a;
	struct seq_point at;
	static const enum seq_stream_kind kinds[] = {
		SEQ_STREAM_COMPUTE,
		SEQ_STREAM_H2D,
		SEQ_STREAM_D2H,
		SEQ_STREAM_D2H,
		SEQ_STREAM_D2D,
		SEQ_STREAM_D2D,
	};
	static const unsigned index[] = {0, 0, 0, 1, 0, 1};

	fx_start(&cfg);
	ck_assert_uint_eq(seq_stream_count(F.seq), 6);
	for (uint32_t s = 0; s < 6; s++) {
		struct seq_stream_info info = stream_info(s);

		ck_assert_int_eq(info.kind, kinds[s]);
		ck_assert_uint_eq(info.index, index[s]);
		ck_assert_uint_eq(info.window_capacity, SEQ_DEFAULT_WINDOW);
		ck_assert_ptr_nonnull(seq_stream_kind_name(info.kind));
	}
	a = buf_new(64);
	at = d2h(a);
	ck_point(at, 2, 1);
	at = d2h(a);
	ck_point(at, 3, 1);
	at = d2h(a);
	ck_point(at, 2, 2);
	at = submit_ok(SEQ_OP_D2D, 1, a, SEQ_READ);
	ck_point(at, 4, 1);
	at = submit_ok(SEQ_OP_D2D, 1, a, SEQ_READ);
	ck_point(at, 5, 1);
	/* Writing after readers on four streams: one wait for each. */
	log_clear();
	exec_write(a);
	ck_log_count("wait 0 ", 4);
	ck_log_has("wait 0 2:2");
}
END_TEST

/* A copy that depends on an unfinished copy of its own pool goes on that copy's stream:
 * stream order instead of an event wait. Independent copies still spread round robin. */
START_TEST(test_copies_follow_their_pending_dependency_in_the_pool)
{
	struct seq_config cfg = {.n_d2h = 2, .n_d2d = 2};
	struct seq_buffer *a, *b, *c;
	struct seq_point at;

	fx_start(&cfg);
	bufs_new(&a, &b, &c, NULL);
	log_clear();
	/* A burst of copies into b: each redefines b, so each depends on the one before. */
	for (uint64_t i = 1; i <= 4; i++) {
		at = d2d(a, b);
		ck_point(at, 4, i);
	}
	ck_log_count("wait ", 0);
	ck_assert_uint_eq(seq_counters(F.seq)->placed_by_affinity, 3);
	ck_assert_uint_eq(seq_counters(F.seq)->waits_elided_same_stream, 3);
	/* An independent copy takes the pool's next stream. */
	at = d2d(a, c);
	ck_point(at, 5, 1);
	/* Writing a buffer still being read on stream 5 goes there too (its other reads,
	 * on stream 4, are seen complete). */
	complete(4, 4, 0);
	at = d2d(b, a);
	ck_point(at, 5, 2);
	ck_log_count("wait ", 0);
	/* Once everything it depends on is seen complete, round robin again. */
	complete(5, 2, 0);
	at = d2d(a, b);
	ck_point(at, 4, 5);
	/* The D2H pool is another pool: a D2H of b waits for the D2D stream's event. */
	at = d2h(b);
	ck_point(at, 2, 1);
	ck_log_has("wait 2 4:5");
	ck_assert_uint_eq(seq_counters(F.seq)->placed_by_affinity, 4);
}
END_TEST

START_TEST(test_default_config)
{
	fx_start(NULL);
	ck_assert_uint_eq(seq_stream_count(F.seq), 4);
	ck_assert_int_eq(stream_info(S_COMPUTE).kind, SEQ_STREAM_COMPUTE);
	ck_assert_int_eq(stream_info(S_H2D).kind, SEQ_STREAM_H2D);
	ck_assert_int_eq(stream_info(S_D2H).kind, SEQ_STREAM_D2H);
	ck_assert_int_eq(stream_info(S_D2D).kind, SEQ_STREAM_D2D);
	ck_assert_uint_eq(stream_info(S_COMPUTE).window_capacity, SEQ_DEFAULT_WINDOW);
}
END_TEST

/* A point record per window slot of every stream, all of it touched once each stream has
 * issued a window of points: with the daemon's default layout (56 streams of 1024 slots)
 * a few MiB, not the 60 MiB that room for SEQ_MAX_STREAMS waits in every record took.
 * Measured by the heap (mallinfo2), which a sanitizer's allocator leaves at 0. */
START_TEST(test_a_window_on_every_stream_costs_a_few_mib)
{
	const struct seq_config cfg = {.n_compute = 16, .n_h2d = 16, .n_d2h = 16, .n_d2d = 8};
	struct mallinfo2 before = mallinfo2(), after;
	size_t grown;

	fx_start(&cfg);
	ck_assert_uint_eq(seq_stream_count(F.seq), 56);
	ck_assert_uint_eq(stream_info(0).window_capacity, SEQ_DEFAULT_WINDOW);
	after = mallinfo2();
	grown = (after.uordblks + after.hblkhd) - (before.uordblks + before.hblkhd);
	ck_assert_msg(grown < (16u << 20), "the core took %zu bytes for 56 windows", grown);
}
END_TEST

START_TEST(test_destroy_releases_everything_held)
{
	struct seq_buffer *a, *b, *s;

	fx_start(NULL);
	bufs_new(&a, &b, NULL);
	s = slice_new(a, 0, 8);
	(void)s;
	h2d(a);
	seq_buffer_free(F.seq, b);
	ck_log_count("release ", 1);
	/* A pending write, a live slice: destroy takes them all (LSan checks the objects). */
	fx_destroy();
	ck_log_count("release ", 2);
	ck_log_has("release 0x1000 64");
}
END_TEST

/* ---- bad input ---- */

START_TEST(test_bad_input_naccess)
{
	struct seq_buffer *a;
	struct seq_op op;

	fx_start(NULL);
	a = buf_new(64);
	log_clear();
	op = op_make(SEQ_OP_EXEC, 1, a, SEQ_READ);
	op.naccess = SEQ_MAX_ACCESS + 1;
	ck_assert_int_eq(seq_submit(F.seq, &op, NULL), -EINVAL);
	ck_assert_uint_eq(F.nlines, 0);
	ck_assert_uint_eq(counters()->ops_failed, 0);
	/* An op touching no buffer (a spin kernel) is valid and needs no wait. */
	op = op_make(SEQ_OP_EXEC, 0);
	ck_assert_int_eq(seq_submit(F.seq, &op, NULL), 0);
	ck_assert(log_has("launch 0:1 exec"));
	ck_assert_uint_eq(log_count("wait"), 0);
}
END_TEST

START_TEST(test_bad_input_null_buf_or_mode)
{
	struct seq_buffer *a, *b;

	fx_start(NULL);
	bufs_new(&a, &b, NULL);
	log_clear();
	ck_assert_int_eq(submit(SEQ_OP_EXEC, NULL, 2, a, SEQ_READ, NULL, SEQ_WRITE), -EINVAL);
	ck_assert_int_eq(submit(SEQ_OP_EXEC, NULL, 2, a, SEQ_READ, b, 0u), -EINVAL);
	ck_assert_int_eq(submit(SEQ_OP_EXEC, NULL, 2, a, SEQ_READ, b, 4u), -EINVAL);
	ck_assert_uint_eq(F.nlines, 0);
	ck_assert_uint_eq(counters()->ops_failed, 0);
	ck_assert_uint_eq(counters()->ops_submitted, 0);
	/* Nothing half-done: a was not made a reader. */
	ck_assert_uint_eq(a->readers[S_COMPUTE], 0);
}
END_TEST

START_TEST(test_bad_input_freed_buf)
{
	struct seq_buffer *a, *b, *s;

	fx_start(NULL);
	bufs_new(&a, &b, NULL);
	h2d(a);
	seq_buffer_free(F.seq, a); /* deferred, so the object is still there to name */
	s = slice_new(b, 0, 8);
	seq_buffer_free(F.seq, b); /* held by the slice */
	log_clear();
	ck_assert_int_eq(submit(SEQ_OP_D2H, NULL, 1, a, SEQ_READ), -EINVAL);
	ck_assert_uint_eq(F.nlines, 0);
	ck_assert_uint_eq(counters()->ops_failed, 0);
	/* A freed base that a live slice still holds may be named (the server does, for a
	 * copy between two slices of it): it is alive until the slice goes (I6). */
	exec_write(b);
	ck_assert(log_has("launch 0:1 exec"));
	seq_buffer_free(F.seq, s);
}
END_TEST

START_TEST(test_bad_input_slice_out_of_bounds)
{
	struct seq_buffer *a, *s = NULL;

	fx_start(NULL);
	a = buf_new(64);
	ck_assert_int_eq(seq_buffer_slice(F.seq, a, 60, 8, &s), -EINVAL);
	ck_assert_int_eq(seq_buffer_slice(F.seq, a, 65, 0, &s), -EINVAL);
	/* offset + size wraps around: must not pass as small. */
	ck_assert_int_eq(seq_buffer_slice(F.seq, a, 8, UINT64_MAX - 4, &s), -EINVAL);
	ck_assert_ptr_null(s);
	ck_assert_uint_eq(a->refs, 1);
	s = slice_new(a, 0, 64);
	ck_assert_uint_eq(a->refs, 2);
	seq_buffer_free(F.seq, s);
}
END_TEST

START_TEST(test_alloc_failure_reported)
{
	struct seq_buffer *a = NULL;

	fx_start(NULL);
	F.fail_alloc = -ENOMEM;
	ck_assert_int_eq(seq_buffer_alloc(F.seq, 64, &a), -ENOMEM);
	ck_assert_ptr_null(a);
	F.fail_alloc = 0;
	a = buf_new(64);
	ck_assert_uint_eq(a->refs, 1);
}
END_TEST

/* ---- the suite ---- */

struct test_entry {
	const char *tcase;
	const TTest *test;
};

static Suite *sequencer_suite(void)
{
	/* Not static: the test names are pointers, not constant expressions. */
	const struct test_entry tests[] = {
		{"i1", test_i1_h2d_defines_buffer_on_h2d_stream},
		{"i1", test_i1_launch_gets_view_addresses},
		{"i1", test_seed_h2d_past_compute_window_still_waits},
		{"i1", test_seed_h2d_observed_complete_elides_wait},
		{"i2", test_i2_same_stream_elides_wait},
		{"i2", test_i2_observed_complete_elides_wait},
		{"i2", test_i2_one_wait_per_stream_for_latest_point},
		{"i2", test_i2_existing_event_is_reused},
		{"i3", test_i3_completion_of_other_stream_is_not_inferred},
		{"i3", test_i3_cross_stream_completion_held_until_producer_reported},
		{"i3", test_i3_full_window_backpressure_then_resumes},
		{"i3", test_i3_later_event_completes_earlier_points},
		{"i3", test_i3_every_recorded_event_is_retired_once},
		{"i4", test_i4_write_waits_for_readers_on_other_streams},
		{"i4", test_i4_write_waits_for_previous_writer},
		{"i4", test_i4_write_forgets_old_readers},
		{"i4", test_i4_readwrite_waits_for_writer_and_readers},
		{"i4", test_d2d_waits_for_source_producer_and_destination_readers},
		{"i5", test_i5_free_while_kernel_reads_is_deferred},
		{"i5", test_i5_free_waits_for_pending_definition},
		{"i5", test_i5_free_idle_releases_at_once},
		{"i5", test_i5_legacy_early_free_releases_at_once},
		{"i6", test_i6_slice_of_h2d_buffer_waits_for_h2d},
		{"i6", test_i6_slice_read_counts_as_base_reader},
		{"i6", test_i6_slice_keeps_base_alive},
		{"i6", test_i6_slice_idle_base_released_with_last_view},
		{"i6", test_i6_slice_write_redefines_base},
		{"i6", test_i6_slice_of_slice_composes_offsets},
		{"i7", test_i7_double_definition_refused},
		{"i7", test_i7_two_slices_of_one_base_written_refused},
		{"i8", test_i8_await_and_sync_return_at_once},
		{"i9", test_i9_failed_h2d_fails_dependent_exec_not_launched},
		{"i9", test_i9_failure_flows_through_chain},
		{"i9", test_i9_full_rewrite_clears_error},
		{"i9", test_i9_partial_write_keeps_error},
		{"i9", test_i9_launch_failure_does_not_consume_point},
		{"i9", test_i9_wait_failure_fails_op_not_launched},
		{"i9", test_i9_device_error_fails_stream_and_waiters},
		{"i9", test_slice_overwrite_keeps_base_device_error},
		{"i9", test_slice_overwrite_by_d2d_keeps_base_device_error},
		{"i9", test_readwrite_of_device_failed_base_fails_not_launched},
		{"i9", test_d2d_within_device_failed_base_fails_not_launched},
		{"i9", test_failure_after_slice_overwrite_launched_fails_base_readers},
		{"i9", test_failure_spread_to_point_reported_before_own_failure_marks_it},
		{"reset", test_reset_fails_in_flight_work_and_loses_every_buffer},
		{"reset", test_exclusive_op_runs_alone},
		{"reset", test_exclusive_op_waits_on_more_streams_than_a_record_holds},
		{"events", test_lazy_events_only_when_needed},
		{"events", test_await_and_sync_report_completion},
		{"events", test_counters_match_decisions},
		{"legacy", test_legacy_sync_window_elides_wait},
		{"legacy", test_legacy_sync_window_waits_inside_window},
		{"config", test_streams_layout_and_round_robin},
		{"config", test_copies_follow_their_pending_dependency_in_the_pool},
		{"config", test_default_config},
		{"config", test_destroy_releases_everything_held},
		{"config", test_a_window_on_every_stream_costs_a_few_mib},
		{"input", test_bad_input_naccess},
		{"input", test_sync_points_waits_only_for_the_sessions_ops},
		{"input", test_bad_input_null_buf_or_mode},
		{"input", test_bad_input_freed_buf},
		{"input", test_bad_input_slice_out_of_bounds},
		{"input", test_alloc_failure_reported},
		{"adopt", test_adopted_global_sequenced_and_never_released},
	};
	Suite *s = suite_create("sequencer");
	TCase *tc = NULL;
	const char *name = NULL;

	/* One tcase per invariant: the table is grouped, so a new name starts a new tcase. */
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
		if (!name || strcmp(name, tests[i].tcase) != 0) {
			name = tests[i].tcase;
			tc = tcase_create(name);
			tcase_add_checked_fixture(tc, fx_setup, fx_teardown);
			suite_add_tcase(s, tc);
		}
		tcase_add_test(tc, tests[i].test);
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sequencer_suite());
	int failed;

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
