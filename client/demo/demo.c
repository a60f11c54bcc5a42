/* sseq-demo: the seed race, told step by step through libsseq. An H2D copy lands on the
 * H2D stream while kernels run on the compute stream; the daemon makes the kernel that
 * reads the copy wait for the copy's own event. Run against a daemon with the legacy bug
 * injected, the same program reads stale data, and the demo says so. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sseq/sseq.h>

#define N (1u << 20) /* floats: 4 MiB per buffer */

static int check(int r, const char *what, struct sseq *s)
{
	if (r < 0) {
		const char *detail = sseq_last_error_message(s);
		fprintf(stderr, "sseq-demo: %s: %s%s%s\n", what, sseq_strerror(r),
			detail && *detail ? ": " : "", detail ? detail : "");
		exit(1);
	}
	return r;
}

static void usage(FILE *to)
{
	fprintf(to,
		"Usage: sseq-demo [SOCKET]\n"
		"Tell the seed race step by step through a running sseqd: an H2D copy, unrelated\n"
		"kernels, then a kernel reading a slice of the copy, a free while it reads, a D2H\n"
		"and a check of every value. Against a daemon started with\n"
		"--inject legacy-sync-window=N the check finds the values the kernel read too\n"
		"early.\n"
		"\n"
		"  SOCKET      the daemon's socket (default: $SSEQ_SOCKET, else\n"
		"              " SSEQ_DEFAULT_SOCKET ")\n"
		"  -h, --help  this text\n"
		"\n"
		"Exit status: 0 when every value is right, 1 when a request failed, 2 for bad\n"
		"usage, 3 when values were wrong (the race).\n");
}

int main(int argc, char **argv)
{
	struct sseq_connect_options opts = {.size = sizeof(opts), .client_name = "sseq-demo"};
	const char *path = argc > 1 ? argv[1] : NULL;
	struct sseq *s = NULL;
	struct sseq_info info;
	uint64_t in, tmp, out, half;
	float *host, *result;
	unsigned wrong = 0;

	if (path && (!strcmp(path, "-h") || !strcmp(path, "--help"))) {
		usage(stdout);
		return 0;
	}
	if (argc > 2 || (path && path[0] == '-')) {
		if (argc > 2)
			fprintf(stderr, "sseq-demo: too many arguments\n");
		else
			fprintf(stderr, "sseq-demo: unknown option '%s'\n", path);
		usage(stderr);
		return 2;
	}
	check(sseq_connect(path, &opts, &s), "connect", NULL);
	check(sseq_get_info(s, &info), "info", s);
	printf("connected to sseqd: device %u (%s, backend %s)\n", info.device_index,
		info.device_name, info.backend);

	host = malloc(N * sizeof(float));
	result = malloc(N * sizeof(float));
	for (unsigned i = 0; i < N; i++)
		host[i] = (float)(i % 1000) + 1.0f; /* never zero: zeros mean "read too early" */

	check(sseq_alloc(s, N * sizeof(float), "input", &in), "alloc input", s);
	check(sseq_alloc(s, 4096, "scratch", &tmp), "alloc scratch", s);
	check(sseq_alloc(s, N * sizeof(float), "output", &out), "alloc output", s);
	check(sseq_execute(s, "fill", (struct sseq_arg[]){SSEQ_OUT(in), SSEQ_F32(0), SSEQ_U64(N)},
		      3, NULL, NULL),
		"fill", s);
	check(sseq_sync(s), "sync", s);
	printf("1. allocated input, scratch and output (4 MiB each); input filled with zeros\n");

	check(sseq_copy_h2d(s, in, 0, host, N * sizeof(float), NULL), "h2d", s);
	printf("2. H2D copy of 4 MiB into input         -> runs on the H2D stream\n");

	for (int i = 0; i < 8; i++)
		check(sseq_execute(s, "spin", (struct sseq_arg[]){SSEQ_U64(50)}, 1, NULL, NULL),
			"spin", s);
	check(sseq_execute(s, "fill",
		      (struct sseq_arg[]){SSEQ_OUT(tmp), SSEQ_F32(1), SSEQ_U64(1024)}, 3, NULL,
		      NULL),
		"fill", s);
	printf("3. 9 unrelated kernels                   -> the compute stream moves on\n");

	check(sseq_slice(s, in, N * sizeof(float) / 2, N * sizeof(float) / 2, "input-half", &half),
		"slice", s);
	check(sseq_execute(s, "scale",
		      (struct sseq_arg[]){
			      SSEQ_IN(half), SSEQ_OUT(out), SSEQ_F32(2), SSEQ_U64(N / 2)},
		      4, NULL, NULL),
		"scale", s);
	printf("4. scale(second half of input) -> output  -> compute stream; reads a slice of\n"
	       "   the H2D buffer, so it must wait for the H2D copy's event (I1, I2, I6)\n");

	check(sseq_free(s, half), "free slice", s);
	check(sseq_free(s, in), "free input", s);
	printf("5. free(slice), free(input) while the kernel may still read them\n"
	       "   -> the memory goes back only once the kernel is done (I5)\n");

	check(sseq_copy_d2h(s, out, 0, result, N / 2 * sizeof(float), NULL), "d2h", s);
	check(sseq_sync(s), "sync", s);
	for (unsigned i = 0; i < N / 2; i++)
		if (result[i] != 2.0f * host[N / 2 + i])
			wrong++;
	printf("6. D2H of the output and check: %u of %u values wrong\n", wrong, N / 2);
	if (wrong)
		printf("   => the kernel read the input before the copy landed: THE RACE\n");
	else
		printf("   => every value right: the kernel waited for the copy\n");
	/* Where to see it from outside: the rows of the daemon's own account. */
	printf("'sseqctl trace' shows the daemon's side: step 4 is the execute row whose\n"
	       "PRODUCER is the h2d row's POINT (DECISION wait; with the bug injected, elided:\n"
	       "LEGACY WINDOW), step 5 the free row 'free deferred: in use', then its 'memory\n"
	       "released'. In 'sseqctl trace --chrome FILE', the timeline, scale starts on its\n"
	       "compute track after the copy's end on the H2D track (with the bug, maybe "
	       "before).\n");

	sseq_free(s, tmp);
	sseq_free(s, out);
	check(sseq_sync(s), "sync", s);
	sseq_close(s);
	free(host);
	free(result);
	return wrong ? 3 : 0;
}
