/* sseqctl: asks one sseqd what it is doing (device, streams, clients, buffers, counters,
 * the trace of sequencing decisions, Prometheus metrics) over one short synchronous
 * exchange on its socket, and prints tables or JSON. Independent of libsseq on purpose.
 * This file holds the options and the commands; ctl.h names the other parts. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl-json.h"
#include "ctl.h"

volatile sig_atomic_t ctl_stop;

static void ctl_on_signal(int sig)
{
	ctl_stop = 1;
}

/* ---- commands ---- */

struct command {
	const char *name;
	Sseq__QueryKind kind;
};

static const struct command commands[] = {
	{"status", SSEQ__QUERY_KIND__QUERY_KIND_STATUS},
	{"clients", SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS},
	{"buffers", SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS},
	{"streams", SSEQ__QUERY_KIND__QUERY_KIND_STREAMS},
	{"stats", SSEQ__QUERY_KIND__QUERY_KIND_STATS},
	{"trace", SSEQ__QUERY_KIND__QUERY_KIND_TRACE},
	{"metrics", SSEQ__QUERY_KIND__QUERY_KIND_METRICS},
	{"modules", SSEQ__QUERY_KIND__QUERY_KIND_MODULES},
};

static void ctl_print(
	const struct ctl *c, Sseq__QueryKind kind, const Sseq__QueryResult *res, bool pretty)
{
	if (c->metrics && kind == SSEQ__QUERY_KIND__QUERY_KIND_METRICS) {
		if (ctl_metrics_add(c->metrics, res->metrics_text) < 0)
			fprintf(stderr, "sseqctl: out of memory merging %s's metrics\n", c->socket);
		return;
	}
	if (!c->json) {
		ctl_text_print(c, kind, res);
		return;
	}
	ctl_json_print(c, kind, res, pretty);
}

/* Pages past which a BUFFERS listing is taken to be a daemon going round in circles: the
 * daemon fills a page to about 512 KiB, so this is past any real listing. */
#define CTL_MAX_BUFFER_PAGES 65536

/* BUFFERS answers in pages (Query.buffers_from, QueryResult.buffers_next): every page,
 * printed as one answer. */
static int ctl_buffers(struct ctl *c)
{
	Sseq__Query q = SSEQ__QUERY__INIT;
	Sseq__Message **pages = NULL;
	Sseq__BufferInfo **all = NULL;
	Sseq__QueryResult res;
	size_t npages = 0, total = 0;
	int r = 0;

	q.kind = SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS;
	for (;;) {
		Sseq__Message *m = NULL, **grown;

		if (npages == CTL_MAX_BUFFER_PAGES) {
			snprintf(c->err, sizeof(c->err),
				"the daemon at %s sent %d pages of buffers and says more follow",
				c->socket, CTL_MAX_BUFFER_PAGES);
			r = -EPROTO;
			goto out;
		}
		r = ctl_query(c, &q, &m);
		if (r < 0)
			goto out;
		grown = realloc(pages, (npages + 1) * sizeof(*pages));
		if (!grown) {
			sseq__message__free_unpacked(m, NULL);
			r = -ENOMEM;
			goto out;
		}
		pages = grown;
		pages[npages++] = m;
		total += m->query_result->n_buffers;
		if (!m->query_result->buffers_next)
			break;
		/* Points into the page kept above, alive until the end. */
		q.buffers_from = m->query_result->buffers_next;
	}
	all = calloc(total + 1, sizeof(*all));
	if (!all) {
		r = -ENOMEM;
		goto out;
	}
	total = 0;
	for (size_t p = 0; p < npages; p++) {
		const Sseq__QueryResult *pr = pages[p]->query_result;

		if (pr->n_buffers) /* an empty page has no array: memcpy from NULL is undefined */
			memcpy(all + total, pr->buffers, pr->n_buffers * sizeof(*all));
		total += pr->n_buffers;
	}
	res = *pages[0]->query_result;
	res.buffers = all;
	res.n_buffers = total;
	res.buffers_next = NULL;
	ctl_print(c, q.kind, &res, true);
out:
	free(all);
	for (size_t p = 0; p < npages; p++)
		sseq__message__free_unpacked(pages[p], NULL);
	free(pages);
	return r;
}

static int ctl_run(struct ctl *c, Sseq__QueryKind kind, uint32_t max_entries)
{
	Sseq__Query q = SSEQ__QUERY__INIT;
	Sseq__TraceOptions trace = SSEQ__TRACE_OPTIONS__INIT;
	Sseq__Message *m = NULL;
	int r;

	if (kind == SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS)
		return ctl_buffers(c);
	q.kind = kind;
	if (kind == SSEQ__QUERY_KIND__QUERY_KIND_TRACE) {
		trace.max_entries = max_entries;
		q.trace = &trace;
	}
	r = ctl_query(c, &q, &m);
	if (r < 0)
		return r;
	if (!c->json && kind == SSEQ__QUERY_KIND__QUERY_KIND_TRACE)
		ctl_text_trace_header();
	ctl_print(c, kind, m->query_result, true);
	sseq__message__free_unpacked(m, NULL);
	return 0;
}

/* Whether standard output's reader is gone (`| head` done): then --follow ends, quietly,
 * without waiting for an entry to write, as tail -f does. A pipe's writing end polls
 * POLLERR once its reader closed it; a file or terminal never does. */
static bool ctl_stdout_closed(void)
{
	struct pollfd p = {.fd = STDOUT_FILENO};

	if (ferror(stdout))
		return true;
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP | POLLNVAL));
}

/* Polls rather than setting TraceOptions.follow: each answer is one complete
 * QueryResult, and an interrupted sseqctl leaves nothing running in the daemon.
 * --json prints one compact document per poll that found entries (JSON lines). */
static int ctl_follow(struct ctl *c, uint32_t max_entries)
{
	Sseq__Query q = SSEQ__QUERY__INIT;
	Sseq__TraceOptions trace = SSEQ__TRACE_OPTIONS__INIT;
	struct sigaction sa = {.sa_handler = ctl_on_signal};
	uint64_t last = 0;
	bool first = true;
	int r = 0;

	/* No SA_RESTART: the signal must cut the 200 ms sleep and any wait short. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	q.kind = SSEQ__QUERY_KIND__QUERY_KIND_TRACE;
	q.trace = &trace;
	if (!c->json)
		ctl_text_trace_header();
	while (!ctl_stop && !ctl_stdout_closed()) {
		Sseq__Message *m = NULL;
		const Sseq__QueryResult *res;
		struct timespec ts = {.tv_nsec = CTL_FOLLOW_MS * 1000000L};

		/* After the first answer ask for everything new: the daemon caps this at
		 * its trace ring, so a burst between polls is not cut to a default. */
		trace.max_entries = first ? max_entries : UINT32_MAX;
		trace.since_seq = last;
		r = ctl_query(c, &q, &m);
		if (r < 0)
			break;
		res = m->query_result;
		for (size_t i = 0; i < res->n_trace; i++)
			if (res->trace[i]->seq > last)
				last = res->trace[i]->seq;
		if (res->trace_dropped)
			fprintf(stderr,
				"sseqctl: %" PRIu64
				" trace entries went by unseen (sseqd keeps the "
				"last 4096; poll faster with fewer other clients' decisions)\n",
				res->trace_dropped);
		if (first || res->n_trace > 0) {
			ctl_print(c, q.kind, res, false);
			fflush(stdout);
		}
		sseq__message__free_unpacked(m, NULL);
		first = false;
		nanosleep(&ts, NULL);
	}
	return ctl_stop ? 0 : r;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: sseqctl [--socket PATH | -i N] [--json] COMMAND\n"
		"\n"
		"Ask a running sseqd what it is doing.\n"
		"\n"
		"Commands:\n"
		"  status    the daemon (version, pid, uptime, socket), device, busy\n"
		"            streams, key counters, clients\n"
		"  clients   connected sessions: pid, uid, worker, buffers, bytes, in flight,\n"
		"            staging, lanes\n"
		"  buffers   buffers with their producer point, pending readers, slices\n"
		"  streams   streams with last issued / completed points, window use\n"
		"            and sessions\n"
		"  stats     every counter\n"
		"  trace     recent sequencing decisions [-n N] [--follow]; with\n"
		"            --chrome FILE, the timeline of completed operations [-n N]\n"
		"  metrics   counters in the Prometheus text format\n"
		"  modules   loaded modules and their functions: signatures, threads,\n"
		"            registers, shared memory\n"
		"\n"
		"Options:\n"
		"  -s, --socket PATH  daemon socket (default $SSEQ_SOCKET; else status,\n"
		"                     clients, stats and metrics ask every\n"
		"                     $SSEQ_SOCKET_DIR/gpu*.sock, --json keyed by socket;\n"
		"                     the other commands %s)\n"
		"  -i, --gpu N        GPU N's daemon: $SSEQ_SOCKET_DIR/gpuN.sock\n"
		"                     ($SSEQ_SOCKET_DIR: default %s)\n"
		"  -j, --json         print JSON instead of tables\n"
		"  -n N               trace: at most N most recent entries\n"
		"  -f, --follow       trace: keep printing new entries until interrupted\n"
		"  --chrome FILE      trace: write the timeline as Chrome trace-event JSON\n"
		"                     (Perfetto, chrome://tracing; FILE - is stdout)\n"
		"  --perfetto FILE    the same\n"
		"  --session N        trace --chrome: only session N's operations\n"
		"  --worker NAME      trace --chrome: only worker NAME's (its worker id,\n"
		"                     else its client name)\n"
		"  --since MS         trace --chrome: only those that ended MS ms or more\n"
		"                     after the daemon started (0 or more)\n"
		"  --last MS          trace --chrome: only those that ended in the MS ms\n"
		"                     up to the newest one's end (1 or more)\n"
		"  -h, --help         show this help\n"
		"  -V, --version      show the version\n"
		"\n"
		"Exit status: 0 ok, 1 the daemon reported an error, 2 bad usage,\n"
		"3 no daemon answers at the socket or it went away, 4 permission denied\n"
		"on the socket (with several daemons: the worst).\n",
		SSEQ_DEFAULT_SOCKET, SSEQ_SOCKET_DIR);
}

/* What the command line asked for. */
struct invocation {
	const struct command *cmd;
	uint32_t max_entries;
	bool follow, have_n;
	const char *chrome; /* trace --chrome / --perfetto FILE */
	struct ctl_chrome_filter filter; /* and which operations it keeps */
	bool filtered; /* --session, --worker, --since or --last given */
	bool socket_given; /* --socket, -i or $SSEQ_SOCKET: one daemon, no discovery */
	int socket_opt; /* 's' or 'i', whichever was given */
	char gpu_socket[CTL_PATH_MAX]; /* -i N's */
};

/* Returned by the parsing steps when there is more to do; any other value is the exit
 * status to leave with at once. */
#define CTL_GO_ON (-1)

/* -n: a positive count that fits TraceOptions.max_entries. */
static bool ctl_parse_count(const char *arg, uint32_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || v == 0 || v > UINT32_MAX || arg[0] == '-')
		return false;
	*out = (uint32_t)v;
	return true;
}

/* Long options of trace --chrome's filter, past every character getopt could return. */
enum {
	CTL_OPT_SESSION = 0x100,
	CTL_OPT_WORKER,
	CTL_OPT_SINCE,
	CTL_OPT_LAST,
};

/* --session N, --worker NAME, --since MS, --last MS; a bad value says what would do. */
static bool ctl_parse_filter(int opt, const char *arg, struct ctl_chrome_filter *f)
{
	const char *name = opt == CTL_OPT_SINCE ? "--since" : "--last";
	const uint64_t min = opt == CTL_OPT_SINCE ? 0 : 1;
	const uint64_t max = opt == CTL_OPT_SESSION ? UINT64_MAX : UINT64_MAX / 1000000;
	unsigned long long v;
	char *end;

	if (opt == CTL_OPT_WORKER) {
		if (!arg[0]) {
			fprintf(stderr, "sseqctl: --worker wants a worker id or client name\n");
			return false;
		}
		f->worker = arg;
		return true;
	}
	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] < '0' || arg[0] > '9' || v < min || v > max) {
		if (opt == CTL_OPT_SESSION)
			fprintf(stderr,
				"sseqctl: --session wants a session number (1 or more, as "
				"sseqctl clients shows), not '%s'\n",
				arg);
		else
			fprintf(stderr,
				"sseqctl: %s wants whole milliseconds, %" PRIu64 " to %" PRIu64
				", not '%s'\n",
				name, min, max, arg);
		return false;
	}
	if (opt == CTL_OPT_SESSION) {
		f->session = v;
	} else if (opt == CTL_OPT_SINCE) {
		f->have_since = true;
		f->since_ns = v * 1000000;
	} else {
		f->have_last = true;
		f->last_ns = v * 1000000;
	}
	return true;
}

/* -i N: GPU N's socket in the socket directory. */
static bool ctl_parse_gpu(const char *arg, char *buf, size_t size)
{
	uint32_t n = 0;

	if (strcmp(arg, "0") != 0 && !ctl_parse_count(arg, &n)) {
		fprintf(stderr, "sseqctl: -i wants a GPU number from 0 to %" PRIu32 ", not '%s'\n",
			UINT32_MAX, arg);
		return false;
	}
	if (ctl_gpu_socket(n, buf, size) < 0) {
		fprintf(stderr, "sseqctl: $SSEQ_SOCKET_DIR is too long\n");
		return false;
	}
	return true;
}

/* --help and --version end the run here, as does the first bad option. */
static int ctl_parse_options(int argc, char **argv, struct ctl *c, struct invocation *inv)
{
	static const struct option longopts[] = {
		{"socket", required_argument, NULL, 's'},
		{"gpu", required_argument, NULL, 'i'},
		{"json", no_argument, NULL, 'j'},
		{"follow", no_argument, NULL, 'f'},
		{"chrome", required_argument, NULL, 'C'},
		{"perfetto", required_argument, NULL, 'C'},
		{"session", required_argument, NULL, CTL_OPT_SESSION},
		{"worker", required_argument, NULL, CTL_OPT_WORKER},
		{"since", required_argument, NULL, CTL_OPT_SINCE},
		{"last", required_argument, NULL, CTL_OPT_LAST},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	const char *env = getenv("SSEQ_SOCKET");
	int opt;

	c->socket = env && *env ? env : SSEQ_DEFAULT_SOCKET;
	inv->socket_given = env && *env;
	while ((opt = getopt_long(argc, argv, "s:i:jn:fhV", longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
		case 'i':
			if (inv->socket_opt && inv->socket_opt != opt) {
				fprintf(stderr, "sseqctl: --socket or -i, not both\n");
				return EXIT_USAGE;
			}
			c->socket = optarg;
			inv->socket_given = true;
			inv->socket_opt = opt;
			if (opt == 's')
				break;
			if (!ctl_parse_gpu(optarg, inv->gpu_socket, sizeof(inv->gpu_socket)))
				return EXIT_USAGE;
			c->socket = inv->gpu_socket;
			break;
		case 'j':
			c->json = true;
			break;
		case 'n':
			if (!ctl_parse_count(optarg, &inv->max_entries)) {
				fprintf(stderr,
					"sseqctl: -n wants a count from 1 to %" PRIu32
					" (the daemon keeps the last 4096), not '%s'\n",
					UINT32_MAX, optarg);
				return EXIT_USAGE;
			}
			inv->have_n = true;
			break;
		case 'f':
			inv->follow = true;
			break;
		case 'C':
			inv->chrome = optarg;
			break;
		case CTL_OPT_SESSION:
		case CTL_OPT_WORKER:
		case CTL_OPT_SINCE:
		case CTL_OPT_LAST:
			if (!ctl_parse_filter(opt, optarg, &inv->filter))
				return EXIT_USAGE;
			inv->filtered = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("sseqctl %s (protocol %d.%d)\n", SSEQ_VERSION,
				SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR,
				SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	return CTL_GO_ON;
}

/* Exactly one operand, a command from the table, and only options that apply to it. */
static int ctl_parse_command(int argc, char **argv, struct invocation *inv)
{
	if (optind == argc) {
		fprintf(stderr, "sseqctl: no command given\n");
		usage(stderr);
		return EXIT_USAGE;
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "sseqctl: one command at a time (try --help)\n");
		return EXIT_USAGE;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[optind], commands[i].name) == 0)
			inv->cmd = &commands[i];
	if (!inv->cmd) {
		fprintf(stderr, "sseqctl: unknown command '%s' (try --help)\n", argv[optind]);
		return EXIT_USAGE;
	}
	if ((inv->have_n || inv->follow) && inv->cmd->kind != SSEQ__QUERY_KIND__QUERY_KIND_TRACE) {
		fprintf(stderr, "sseqctl: -n and --follow only apply to trace\n");
		return EXIT_USAGE;
	}
	if (inv->chrome && (inv->cmd->kind != SSEQ__QUERY_KIND__QUERY_KIND_TRACE || inv->follow)) {
		fprintf(stderr,
			"sseqctl: --chrome and --perfetto apply to trace, without --follow\n");
		return EXIT_USAGE;
	}
	if (inv->filtered && !inv->chrome) {
		fprintf(stderr,
			"sseqctl: --session, --worker, --since and --last apply to "
			"trace --chrome FILE\n");
		return EXIT_USAGE;
	}
	return CTL_GO_ON;
}

/* Connects, says Hello and runs the command; the exit status tells a socket nobody
 * answers from a daemon that said no. */
static int ctl_execute(struct ctl *c, const struct invocation *inv)
{
	int r, status = 0;

	r = ctl_connect(c);
	if (r == -ENAMETOOLONG)
		status = EXIT_USAGE;
	else if (r == -EACCES)
		status = EXIT_DENIED;
	else if (r < 0)
		status = EXIT_UNREACHABLE;
	if (r == 0)
		r = ctl_hello(c);
	if (r == 0)
		r = inv->chrome	      ? ctl_chrome(c, inv->chrome, inv->max_entries, &inv->filter)
			: inv->follow ? ctl_follow(c, inv->max_entries)
				      : ctl_run(c, inv->cmd->kind, inv->max_entries);
	/* A daemon that stops mid-command (trace --follow) is gone, not refusing. */
	if (r < 0 && status == 0)
		status = r == -ETIMEDOUT || r == -ECONNRESET || r == -ESHUTDOWN ? EXIT_UNREACHABLE
										: EXIT_DAEMON;
	if (r < 0)
		fprintf(stderr, "sseqctl: %s\n", c->err[0] ? c->err : strerror(-r));
	if (c->fd >= 0)
		close(c->fd);
	return status;
}

/* Every daemon found, for status and clients when no socket was named: a section each,
 * headed by its socket (text), or one JSON object keyed by socket. One that does not
 * answer is reported in its place; the others are still shown. */
static int ctl_execute_all(struct ctl *base, const struct invocation *inv, struct ctl_sockets *all)
{
	bool merge = !base->json && inv->cmd->kind == SSEQ__QUERY_KIND__QUERY_KIND_METRICS;
	struct ctl_metrics *metrics = NULL;
	struct json j;
	int status = 0;

	if (base->json) {
		json_init(&j, stdout, true);
		json_object_begin(&j, NULL);
	}
	if (merge && !(metrics = ctl_metrics_new())) {
		fprintf(stderr, "sseqctl: out of memory\n");
		return EXIT_DAEMON;
	}
	for (size_t i = 0; i < all->n; i++) {
		struct ctl c = {.fd = -1, .json = base->json, .socket = all->path[i]};
		int st;

		if (base->json) {
			c.into = &j;
		} else if (merge) {
			c.metrics = metrics;
		} else if (all->n > 1) {
			printf("%s%s:\n", i ? "\n" : "", c.socket);
			fflush(stdout);
		}
		st = ctl_execute(&c, inv);
		if (st && base->json) {
			json_object_begin(&j, c.socket);
			json_string(&j, "error", c.err[0] ? c.err : "failed");
			json_uint(&j, "exit_status", (uint64_t)st);
			json_object_end(&j);
		} else if (st && !merge && all->n > 1) {
			printf("error: %s\n", c.err[0] ? c.err : "failed");
		}
		if (st > status)
			status = st;
	}
	if (base->json) {
		json_object_end(&j);
		json_finish(&j);
	}
	if (merge) {
		ctl_metrics_print(metrics, stdout);
		ctl_metrics_free(metrics);
	}
	return status;
}

/* Which daemons: the one named, else (status, clients, stats, metrics) every gpu*.sock
 * found, else the default socket as before. Whether the output is keyed by socket
 * depends on the command line alone, never on how many daemons were found: a script
 * reads one schema on a machine with one GPU, with several, and with none running. */
static int ctl_dispatch(struct ctl *c, const struct invocation *inv)
{
	struct ctl_sockets all = {0};
	Sseq__QueryKind kind = inv->cmd->kind;
	bool many = !inv->socket_given &&
		(kind == SSEQ__QUERY_KIND__QUERY_KIND_STATUS ||
			kind == SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS ||
			kind == SSEQ__QUERY_KIND__QUERY_KIND_STATS ||
			kind == SSEQ__QUERY_KIND__QUERY_KIND_METRICS);
	/* Static: c->socket keeps pointing at it after we return. */
	static char fallback[CTL_PATH_MAX];
	char *only[1] = {NULL};
	struct ctl_sockets one = {.path = only, .n = 1};
	int r, status;

	if (!inv->socket_given && getenv("SSEQ_SOCKET_DIR")) {
		/* The default socket lives in the directory asked for. */
		if (ctl_gpu_socket(0, fallback, sizeof(fallback)) == 0)
			c->socket = fallback;
	}
	if (!many)
		return ctl_execute(c, inv);
	r = ctl_discover(&all);
	if (r < 0) {
		fprintf(stderr, "sseqctl: cannot list %s: %s\n", ctl_socket_dir(), strerror(-r));
		return EXIT_UNREACHABLE;
	}
	only[0] = (char *)c->socket;
	status = ctl_execute_all(c, inv, all.n ? &all : &one);
	ctl_sockets_free(&all);
	return status;
}

int main(int argc, char **argv)
{
	struct ctl c = {.fd = -1};
	struct invocation inv = {0};
	int status;

	/* A reader that went away (`| head`) ends us quietly, as it does cat, even where
	 * the parent left SIGPIPE ignored; the socket sends with MSG_NOSIGNAL. */
	signal(SIGPIPE, SIG_DFL);
	/* Table widths measure labels with wcwidth, which knows widths only under a UTF-8
	 * LC_CTYPE: the user's, else C.UTF-8 (labels are UTF-8 whatever the locale). */
	if (!setlocale(LC_CTYPE, "") || strcmp(nl_langinfo(CODESET), "UTF-8") != 0)
		setlocale(LC_CTYPE, "C.UTF-8");
	status = ctl_parse_options(argc, argv, &c, &inv);
	if (status == CTL_GO_ON)
		status = ctl_parse_command(argc, argv, &inv);
	if (status == CTL_GO_ON)
		status = ctl_dispatch(&c, &inv);
	return status;
}
