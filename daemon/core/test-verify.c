/* The schedule checker alone (verify.h), driven by hand-written command streams in front
 * of a device that does nothing: each rule reports what it must and nothing else, and
 * what it remembers stays bounded when memory is never handed out twice. */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify.h"

static struct {
	uint64_t next_addr; /* a bump allocator: no address is ever handed out twice */
	bool reuse; /* ... unless set: then every allocation gets the same address */
	unsigned reports;
	char last[320];
} W;

static int d_alloc(void *ctx, uint64_t size, uint64_t *addr)
{
	(void)ctx;
	*addr = W.reuse ? 0x10000 : W.next_addr;
	W.next_addr += (size + 255) & ~255ull;
	return 0;
}

static void d_release(void *ctx, uint64_t addr, uint64_t size)
{
	(void)ctx, (void)addr, (void)size;
}

static int d_record(void *ctx, struct seq_point at)
{
	(void)ctx, (void)at;
	return 0;
}

static int d_wait(void *ctx, uint32_t stream, struct seq_point event)
{
	(void)ctx, (void)stream, (void)event;
	return 0;
}

static int d_launch(void *ctx, struct seq_point at, const struct seq_op *op)
{
	(void)ctx, (void)at, (void)op;
	return 0;
}

static const struct seq_device nothing = {
	.mem_alloc = d_alloc,
	.mem_release = d_release,
	.record = d_record,
	.wait = d_wait,
	.launch = d_launch,
};

static void found(void *arg, const char *what)
{
	(void)arg;
	W.reports++;
	snprintf(W.last, sizeof(W.last), "%s", what);
}

static struct verify *checker(void)
{
	struct seq_config cfg = {.n_compute = 2, .n_h2d = 1, .n_d2h = 1, .n_d2d = 1};
	struct seq_layout layout;
	struct verify *v;

	memset(&W, 0, sizeof(W));
	W.next_addr = 0x10000;
	ck_assert_int_eq(seq_layout_init(&layout, &cfg), 0);
	ck_assert_int_eq(verify_create(&v, &layout, &nothing, NULL, found, NULL), 0);
	return v;
}

static uint64_t alloc(struct verify *v, uint64_t size)
{
	uint64_t addr;

	ck_assert_int_eq(verify_device()->mem_alloc(v, size, &addr), 0);
	return addr;
}

/* A kernel on `stream` at point `seq` that reads or writes [addr, addr+size). */
static void launch(struct verify *v, uint32_t stream, uint64_t seq, unsigned mode, uint64_t addr,
	uint64_t size)
{
	struct seq_op op = {.kind = SEQ_OP_EXEC, .naccess = 1};

	op.access[0] = (struct seq_access){.mode = mode, .addr = addr, .size = size};
	ck_assert_int_eq(verify_device()->launch(v, (struct seq_point){stream, seq}, &op), 0);
}

START_TEST(test_read_without_wait_is_reported_and_with_wait_is_not)
{
	struct verify *v = checker();
	const struct seq_device *d = verify_device();
	uint64_t a = alloc(v, 1024);

	launch(v, 0, 1, SEQ_WRITE, a, 1024);
	launch(v, 1, 1, SEQ_READ, a, 1024); /* no edge from 0:1 */
	ck_assert_uint_eq(W.reports, 1);
	ck_assert_msg(strstr(W.last, "without an edge from its writer 0:1"), "%s", W.last);

	ck_assert_int_eq(d->record(v, (struct seq_point){0, 1}), 0);
	ck_assert_int_eq(d->wait(v, 1, (struct seq_point){0, 1}), 0);
	launch(v, 1, 2, SEQ_READ, a, 1024);
	ck_assert_uint_eq(W.reports, 1);
	/* A write after that read needs an edge from it (WAR). */
	launch(v, 0, 2, SEQ_WRITE, a, 1024);
	ck_assert_uint_eq(W.reports, 2); /* the last reader there, 1:2 */
	ck_assert_msg(strstr(W.last, "without an edge from its reader 1:2"), "%s", W.last);
	verify_destroy(v);
}
END_TEST

/* A module's global (seq_buffer_adopt's mem_adopt) is checked like an allocation: unknown
 * before, sequenced while adopted, gone (use after free) once disowned. */
START_TEST(test_adopted_range_is_checked_like_an_allocation)
{
	struct verify *v = checker();
	const struct seq_device *d = verify_device();
	const uint64_t g = 0x900000;

	launch(v, 0, 1, SEQ_READ, g, 36);
	ck_assert_uint_eq(W.reports, 1);
	ck_assert_msg(strstr(W.last, "which is not allocated"), "%s", W.last);
	ck_assert_int_eq(d->mem_adopt(v, g, 36), 0);
	ck_assert_uint_eq(verify_tracked(v), 1);
	launch(v, 1, 1, SEQ_WRITE, g, 36);
	ck_assert_uint_eq(W.reports, 1);
	launch(v, 0, 2, SEQ_READ, g, 36); /* no edge from the set 1:1 */
	ck_assert_uint_eq(W.reports, 2);
	ck_assert_msg(strstr(W.last, "without an edge from its writer 1:1"), "%s", W.last);
	d->mem_disown(v, g, 36); /* while 1:1 and 0:2 may still run (I5) */
	ck_assert_uint_eq(W.reports, 4);
	ck_assert_msg(strstr(W.last, "released while its reader 0:2"), "%s", W.last);
	launch(v, 0, 3, SEQ_READ, g, 36);
	ck_assert_uint_eq(W.reports, 5);
	ck_assert_msg(strstr(W.last, "use after free"), "%s", W.last);
	verify_destroy(v);
}
END_TEST

START_TEST(test_completion_orders_like_a_wait)
{
	struct verify *v = checker();
	uint64_t a = alloc(v, 64);

	launch(v, 0, 1, SEQ_WRITE, a, 64);
	ck_assert_int_eq(verify_device()->record(v, (struct seq_point){0, 1}), 0);
	verify_complete(v, (struct seq_point){0, 1});
	launch(v, 1, 1, SEQ_READ, a, 64);
	ck_assert_uint_eq(W.reports, 0);
	verify_destroy(v);
}
END_TEST

START_TEST(test_release_while_reader_runs_and_use_after_release)
{
	struct verify *v = checker();
	const struct seq_device *d = verify_device();
	uint64_t a = alloc(v, 4096);

	launch(v, 1, 1, SEQ_READ, a, 4096);
	d->mem_release(v, a, 4096);
	ck_assert_uint_eq(W.reports, 1);
	ck_assert_msg(strstr(W.last, "released while its reader 1:1 may still run"), "%s", W.last);
	launch(v, 0, 1, SEQ_READ, a, 16);
	ck_assert_uint_eq(W.reports, 2);
	ck_assert_msg(strstr(W.last, "which was released (use after free)"), "%s", W.last);
	verify_destroy(v);
}
END_TEST

/* Memory that is never handed out again must not be remembered forever, and what is
 * forgotten is still reported when used. */
START_TEST(test_released_records_stay_bounded)
{
	struct verify *v = checker();
	const struct seq_device *d = verify_device();
	uint64_t first = 0, last = 0;

	for (unsigned i = 0; i < 20000; i++) {
		uint64_t a = alloc(v, 256);

		if (!first)
			first = a;
		last = a;
		d->mem_release(v, a, 256);
	}
	ck_assert_uint_le(verify_tracked(v), 4096);
	ck_assert_uint_eq(W.reports, 0);
	launch(v, 0, 1, SEQ_READ, last, 256);
	ck_assert_msg(strstr(W.last, "which was released"), "%s", W.last);
	launch(v, 0, 2, SEQ_READ, first, 256);
	ck_assert_msg(strstr(W.last, "which is not allocated"), "%s", W.last);
	ck_assert_uint_eq(W.reports, 2);
	verify_destroy(v);
}
END_TEST

/* Memory handed out again replaces the record of what it overlaps; a live overlap is
 * the device's own bug and is reported. */
START_TEST(test_reuse_replaces_released_and_reports_live_overlap)
{
	struct verify *v = checker();
	const struct seq_device *d = verify_device();
	uint64_t a, b;

	W.reuse = true;
	a = alloc(v, 512);
	d->mem_release(v, a, 512);
	b = alloc(v, 256);
	ck_assert_uint_eq(a, b);
	ck_assert_uint_eq(verify_tracked(v), 1);
	launch(v, 0, 1, SEQ_WRITE, b, 256);
	ck_assert_uint_eq(W.reports, 0);
	(void)alloc(v, 128);
	ck_assert_uint_eq(W.reports, 1);
	ck_assert_msg(strstr(W.last, "overlaps live allocation #2"), "%s", W.last);
	verify_destroy(v);
}
END_TEST

/* The core tells the checker each allocation's owner when it makes it: a stale view of an
 * earlier owner (here a slice kept past its base's early release) is reported naming that
 * owner even when the memory's new owner never touches it, the stale access being the
 * memory's first use. Bound at first use instead, the stale view would become the owner
 * and go unreported (and the new owner's first op be blamed). */
START_TEST(test_stale_view_of_earlier_owner_is_reported_at_first_use)
{
	struct verify *v = checker();
	struct seq_config cfg = {.n_compute = 2,
		.n_h2d = 1,
		.n_d2h = 1,
		.n_d2d = 1,
		.legacy_slice_outlives_base = true};
	struct seq *seq;
	struct seq_buffer *a, *slice, *b;
	struct seq_op op = {.kind = SEQ_OP_EXEC, .naccess = 1};

	W.reuse = true; /* the next allocation gets the released memory */
	ck_assert_int_eq(seq_create(&seq, &cfg, verify_device(), v, NULL), 0);
	ck_assert_int_eq(seq_buffer_alloc(seq, 256, &a), 0); /* base #1 */
	ck_assert_int_eq(seq_buffer_slice(seq, a, 0, 64, &slice), 0);
	seq_buffer_free(seq, a); /* injected: its memory goes back now */
	ck_assert_int_eq(seq_buffer_alloc(seq, 256, &b), 0); /* base #2, same memory */
	ck_assert_uint_eq(W.reports, 0);
	op.access[0] = (struct seq_access){.buf = slice, .mode = SEQ_READ};
	ck_assert_int_eq(seq_submit(seq, &op, NULL), 0);
	ck_assert_uint_eq(W.reports, 1);
	ck_assert_msg(strstr(W.last, "as base #1, but that memory is allocation #2 of base #2"),
		"%s", W.last);
	seq_buffer_free(seq, slice);
	seq_buffer_free(seq, b);
	seq_destroy(seq);
	verify_destroy(v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("verify");
	TCase *tc = tcase_create("checker");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_read_without_wait_is_reported_and_with_wait_is_not);
	tcase_add_test(tc, test_completion_orders_like_a_wait);
	tcase_add_test(tc, test_adopted_range_is_checked_like_an_allocation);
	tcase_add_test(tc, test_release_while_reader_runs_and_use_after_release);
	tcase_add_test(tc, test_released_records_stay_bounded);
	tcase_add_test(tc, test_reuse_replaces_released_and_reports_live_overlap);
	tcase_add_test(tc, test_stale_view_of_earlier_owner_is_reported_at_first_use);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
