/* sseqctl metrics with several daemons: their texts merged into one exposition, each
 * family's HELP and TYPE once and all of its samples together, whatever the families
 * are (histograms' series included), and nothing lost at a text's last line. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

static const char gpu0[] = "# HELP sseq_clients Clients.\n"
			   "# TYPE sseq_clients gauge\n"
			   "sseq_clients{device=\"0\"} 1\n"
			   "# HELP sseq_lat Latency.\n"
			   "# TYPE sseq_lat histogram\n"
			   "sseq_lat_bucket{device=\"0\",le=\"+Inf\"} 2\n"
			   "sseq_lat_sum{device=\"0\"} 3\n"
			   "sseq_lat_count{device=\"0\"} 2\n"
			   "# HELP sseq_ops_total Ops.\n"
			   "# TYPE sseq_ops_total counter\n"
			   "sseq_ops_total{device=\"0\"} 7\n";

/* A newer daemon: one family more, in the middle, and no newline at its end. */
static const char gpu1[] = "# HELP sseq_clients Clients.\n"
			   "# TYPE sseq_clients gauge\n"
			   "sseq_clients{device=\"1\"} 0\n"
			   "# HELP sseq_up_new New.\n"
			   "# TYPE sseq_up_new gauge\n"
			   "sseq_up_new{device=\"1\"} 1\n"
			   "# HELP sseq_lat Latency.\n"
			   "# TYPE sseq_lat histogram\n"
			   "sseq_lat_bucket{device=\"1\",le=\"+Inf\"} 5\n"
			   "sseq_lat_sum{device=\"1\"} 9\n"
			   "sseq_lat_count{device=\"1\"} 5\n"
			   "# HELP sseq_ops_total Ops.\n"
			   "# TYPE sseq_ops_total counter\n"
			   "sseq_ops_total{device=\"1\"} 8";

static char *merge(const char *const *texts, size_t n)
{
	struct ctl_metrics *m = ctl_metrics_new();
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(f);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(ctl_metrics_add(m, texts[i]), 0);
	ctl_metrics_print(m, f);
	fclose(f);
	ctl_metrics_free(m);
	return out;
}

START_TEST(test_metrics_merge_groups_each_family_once)
{
	const char *const texts[] = {gpu0, gpu1};
	char *out = merge(texts, 2);
	static const char want[] = "# HELP sseq_clients Clients.\n"
				   "# TYPE sseq_clients gauge\n"
				   "sseq_clients{device=\"0\"} 1\n"
				   "sseq_clients{device=\"1\"} 0\n"
				   "# HELP sseq_lat Latency.\n"
				   "# TYPE sseq_lat histogram\n"
				   "sseq_lat_bucket{device=\"0\",le=\"+Inf\"} 2\n"
				   "sseq_lat_sum{device=\"0\"} 3\n"
				   "sseq_lat_count{device=\"0\"} 2\n"
				   "sseq_lat_bucket{device=\"1\",le=\"+Inf\"} 5\n"
				   "sseq_lat_sum{device=\"1\"} 9\n"
				   "sseq_lat_count{device=\"1\"} 5\n"
				   "# HELP sseq_ops_total Ops.\n"
				   "# TYPE sseq_ops_total counter\n"
				   "sseq_ops_total{device=\"0\"} 7\n"
				   "sseq_ops_total{device=\"1\"} 8\n"
				   "# HELP sseq_up_new New.\n"
				   "# TYPE sseq_up_new gauge\n"
				   "sseq_up_new{device=\"1\"} 1\n";

	ck_assert_str_eq(out, want);
	free(out);
}
END_TEST

/* Samples with no HELP or TYPE before them are a family of their own, not the one
 * above's. */
START_TEST(test_metrics_merge_untyped_samples_keep_their_name)
{
	const char *const texts[] = {"# TYPE a gauge\na 1\nb 2\n", "# TYPE a gauge\na 3\nb 4\n"};
	char *out = merge(texts, 2);

	ck_assert_str_eq(out, "# TYPE a gauge\na 1\na 3\nb 2\nb 4\n");
	free(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ctl-metrics");
	TCase *tc = tcase_create("merge");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_metrics_merge_groups_each_family_once);
	tcase_add_test(tc, test_metrics_merge_untyped_samples_keep_their_name);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
