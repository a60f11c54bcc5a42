/* sseqd: the per-GPU event-sequencing daemon. Parses options, picks the backend, listens
 * (or takes the socket systemd passed), and runs the loop until SIGTERM/SIGINT, then
 * lets in-flight work drain before it exits. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "log.h"
#include "registry.h"
#include "server.h"
#include "sim.h"
#include "sseq-frame.h"

#define DRAIN_TIMEOUT_MS 10000
/* After the drain timed out and the work the device had not started was cancelled: how
 * long the ops it runs get to finish, and the cancelled requests' answers to go out.
 * Both together stay well inside systemd's TimeoutStopSec= (20 s in sseqd@.service). */
#define DRAIN_CANCEL_MS 1000

struct daemon_opts {
	struct server_options srv;
	struct backend_options be; /* --backend, --kernels, --audit, the sim's knobs */
	char socket_buf[108];
};

static void usage(FILE *f)
{
	const struct server_limits defaults = SERVER_LIMITS_DEFAULT;
	const struct seq_config streams = SERVER_STREAMS_DEFAULT;

	fprintf(f,
		"Usage: sseqd [OPTIONS]\n"
		"Per-GPU event-sequencing daemon.\n\n"
		"  -s, --socket PATH        listen on PATH (default /run/sseq/gpu<N>.sock, or the\n"
		"                           socket passed by systemd)\n"
		"  -d, --device N           GPU index (default 0)\n"
		"  -b, --backend KIND       sim, hip or auto (default auto: hip if a GPU is\n"
		"                           present, else sim)\n"
		"      --sim-delay SPEC     delay a stream kind in the sim: h2d=2ms,\n"
		"                           d2d=rand:0-500us, compute=script:1ms,0,5ms\n"
		"                           (repeatable)\n"
		"      --inject SPEC        fault injection (repeatable): fail-op=N,\n"
		"                           device-fail-op=N, device-lost-op=N,\n"
		"                           drop-wait=N, legacy-sync-window=N, early-free,\n"
		"                           slice-outlives-base\n"
		"      --window N           incomplete points per stream before backpressure\n"
		"                           (default %u)\n"
		"      --compute-streams N  compute lanes: each session's kernels run on a lane\n"
		"                           of its own (default %u)\n"
		"      --h2d-streams N      host-to-device streams (default %u)\n"
		"      --d2h-streams N      device-to-host streams (default %u)\n"
		"      --d2d-streams N      device-to-device streams (default %u)\n"
		"      --submit-threads N   threads that make the GPU enqueue calls, each for\n"
		"                           its own streams (hip; default %u, at most %u; 0:\n"
		"                           on the thread that reads requests)\n"
		"      --device-reset MODE  after a fault that poisons the device context:\n"
		"                           auto (build it again in this process, else restart\n"
		"                           in place: exec, same PID, sessions kept) or exec\n"
		"      --verify, --no-verify  the schedule checker between the core and the\n"
		"                           device: every access ordered after its producer,\n"
		"                           by happens-before (default: on)\n"
		"      --isolate-faults     after a reset with several suspects, run each\n"
		"                           suspect session's kernels alone, so that its next\n"
		"                           fault is attributed exactly\n"
		"      --module-dir DIR     where LoadModule may load code objects from (hip)\n"
		"      --audit              check on the GPU's timestamps that every operation\n"
		"                           started after its producers finished (hip)\n"
		"      --device-timeline on|off  time the timeline (sseqctl trace) by the GPU's\n"
		"                           own timestamps: two timing events per launch (hip;\n"
		"                           default %s)\n"
		"      --kernels PATH       the built-in kernels' code object for the hip backend\n"
		"                           (default: the build tree's, else the installed one)\n"
		"      --spin-us N          after answering, poll sockets and completions for\n"
		"                           N us before sleeping (default %u; 0: never)\n"
		"      --socket-mode MODE   mode of the socket sseqd creates (octal, default\n"
		"                           0660)\n",
		SEQ_DEFAULT_WINDOW, streams.n_compute, streams.n_h2d, streams.n_d2h, streams.n_d2d,
		BACKEND_DEFAULT_SUBMIT_THREADS, BACKEND_MAX_SUBMIT_THREADS,
		BACKEND_DEFAULT_DEVICE_TIMELINE ? "on" : "off", SERVER_DEFAULT_SPIN_US);
	/* Two strings: one would pass the 4095 characters C requires compilers to take. */
	fprintf(f,
		"Limits (sizes take k, M, G, T; times ms or s; see sseqd(8), LIMITS):\n"
		"      --max-clients N      connections in total (default %u)\n"
		"      --max-clients-per-uid N  connections of one user (default %u)\n"
		"      --hello-timeout TIME close a connection that sends no Hello within TIME\n"
		"                           (default %ums; 0: never)\n"
		"      --frame-timeout TIME close a connection whose frame stalls for TIME\n"
		"                           (default %ums; 0: never)\n"
		"      --max-input-memory SIZE  input buffered across connections (default %lluM)\n"
		"      --client-staging-limit SIZE  staging arenas per session (default %lluG)\n"
		"      --staging-limit SIZE staging arenas across sessions (default %lluG)\n"
		"      --client-memory-limit SIZE  device memory per session (default 0: none)\n"
		"      --client-handle-limit N  buffers, slices, arenas, modules per session\n"
		"                           (default %u)\n"
		"      --client-arena-limit N  staging arenas per session (default %u)\n"
		"      --arena-limit N      staging arenas across sessions (default %u)\n"
		"      --client-inflight-limit N  ops and waits in flight per session before\n"
		"                           its requests wait (default %u)\n"
		"  -l, --log-level LEVEL    err, warning, notice, info (default), debug\n"
		"  -h, --help               show this help\n"
		"  -V, --version            show the version\n",
		defaults.max_clients, defaults.max_clients_per_uid, defaults.hello_timeout_ms,
		defaults.frame_timeout_ms, (unsigned long long)(defaults.max_input_bytes >> 20),
		(unsigned long long)(defaults.client_staging_bytes >> 30),
		(unsigned long long)(defaults.staging_bytes >> 30), defaults.client_handles,
		defaults.client_arenas, defaults.arenas, defaults.client_inflight);
}

static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* A byte count with an optional binary suffix: 4096, 64k, 16M, 2G, 1T. */
static int parse_size(const char *s, uint64_t *out)
{
	static const char suffixes[] = "kMGT";
	unsigned long long v;
	const char *at;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	if (*end) {
		if (end[1] || !(at = strchr(suffixes, *end == 'K' ? 'k' : *end)))
			return -EINVAL;
		for (int shift = (int)(at - suffixes + 1) * 10; shift > 0; shift -= 10) {
			if (v > (UINT64_MAX >> 10))
				return -EINVAL;
			v <<= 10;
		}
	}
	*out = v;
	return 0;
}

/* Milliseconds, written 500, 500ms or 5s. */
static int parse_ms(const char *s, unsigned *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -EINVAL;
	if (strcmp(end, "s") == 0)
		v *= 1000;
	else if (*end && strcmp(end, "ms") != 0)
		return -EINVAL;
	if (v > 86400000ul)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

/* The core's injected faults that take an N, and what N is. */
static int parse_inject_core(struct daemon_opts *o, const char *spec, bool *matched)
{
	const struct {
		const char *name, *n;
		unsigned *to;
	} counted[] = {
		{"legacy-sync-window", "the compute window tied to H2D readiness, 1 .. 1048576",
			&o->srv.seq.legacy_sync_window},
		{"drop-wait", "every Nth wait decided is dropped, 1 .. 1048576",
			&o->srv.seq.drop_wait},
	};

	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++) {
		const size_t len = strlen(counted[i].name);

		if (strncmp(spec, counted[i].name, len) || (spec[len] != '=' && spec[len]))
			continue;
		*matched = true;
		if (!spec[len] || parse_uint(spec + len + 1, 1, 1u << 20, counted[i].to) < 0) {
			fprintf(stderr, "sseqd: --inject %s: expected %s=N (N: %s)\n", spec,
				counted[i].name, counted[i].n);
			return -EINVAL;
		}
		return 0;
	}
	return 0;
}

static int parse_inject(struct daemon_opts *o, const char *spec)
{
	const char *why = NULL;
	bool matched = false;
	int r = parse_inject_core(o, spec, &matched);

	if (matched)
		return r;
	if (strcmp(spec, "slice-outlives-base") == 0) {
		o->srv.seq.legacy_slice_outlives_base = true;
		return 0;
	}
	if (strcmp(spec, "early-free") == 0) {
		o->srv.seq.legacy_early_free = true;
		return 0;
	}
	if (sim_parse_inject(&o->be.sim, spec, &why) < 0) {
		/* An unknown name hears the list; a known one its =N form (in why). */
		if (why && strncmp(why, "unknown fault", 13))
			fprintf(stderr, "sseqd: --inject %s: %s\n", spec, why);
		else
			fprintf(stderr,
				"sseqd: --inject %s: unknown fault (known: fail-op=N, "
				"device-fail-op=N, device-lost-op=N, drop-wait=N, "
				"legacy-sync-window=N, early-free, slice-outlives-base)\n",
				spec);
		return -EINVAL;
	}
	return 0;
}

/* The limit options (sseqd(8), LIMITS), parsed from one table. */
enum limit_kind {
	LIMIT_COUNT, /* unsigned, min .. max */
	LIMIT_MS, /* unsigned milliseconds: 500, 500ms or 5s */
	LIMIT_SIZE, /* uint64_t bytes with a binary suffix, at least min */
	LIMIT_MODE, /* unsigned, octal */
};

struct limit_opt {
	const char *name;
	enum limit_kind kind;
	size_t offset; /* into struct server_limits */
	uint64_t min, max;
	const char *hint; /* for the error message */
};

#define LIMIT(name, kind, field, min, max, hint)                                                   \
	{                                                                                          \
		name, kind, offsetof(struct server_limits, field), min, max, hint                  \
	}

static const struct limit_opt limit_opts[] = {
	LIMIT("socket-mode", LIMIT_MODE, socket_mode, 0, 0777, " (an octal mode such as 0660)"),
	LIMIT("max-clients", LIMIT_COUNT, max_clients, 1, 1u << 20, ""),
	LIMIT("max-clients-per-uid", LIMIT_COUNT, max_clients_per_uid, 1, 1u << 20, ""),
	LIMIT("hello-timeout", LIMIT_MS, hello_timeout_ms, 0, 86400000,
		" (500, 500ms or 5s; 0 .. 86400s)"),
	LIMIT("frame-timeout", LIMIT_MS, frame_timeout_ms, 0, 86400000,
		" (500, 500ms or 5s; 0 .. 86400s)"),
	/* At least a few frames of the largest size must fit. */
	LIMIT("max-input-memory", LIMIT_SIZE, max_input_bytes, 4u * FRAME_MAX, UINT64_MAX,
		" (a size of at least 4M)"),
	LIMIT("client-staging-limit", LIMIT_SIZE, client_staging_bytes, 0, UINT64_MAX,
		" (a size: 4096, 64k, 16M, 2G or 1T)"),
	LIMIT("staging-limit", LIMIT_SIZE, staging_bytes, 0, UINT64_MAX,
		" (a size: 4096, 64k, 16M, 2G or 1T)"),
	LIMIT("client-memory-limit", LIMIT_SIZE, client_memory_bytes, 0, UINT64_MAX,
		" (a size: 4096, 64k, 16M, 2G or 1T; 0: none)"),
	LIMIT("client-handle-limit", LIMIT_COUNT, client_handles, 1, 1u << 30, ""),
	LIMIT("client-arena-limit", LIMIT_COUNT, client_arenas, 1, 1u << 20, ""),
	LIMIT("arena-limit", LIMIT_COUNT, arenas, 1, 1u << 20, ""),
	LIMIT("client-inflight-limit", LIMIT_COUNT, client_inflight, 2, 1u << 24, ""),
};

#define NLIMITS (sizeof(limit_opts) / sizeof(limit_opts[0]))

static int parse_limit(struct server_limits *lim, const struct limit_opt *l, const char *arg)
{
	char *field = (char *)lim + l->offset, *end;
	unsigned long mode;
	unsigned u;
	uint64_t v;

	switch (l->kind) {
	case LIMIT_COUNT:
		if (parse_uint(arg, (unsigned)l->min, (unsigned)l->max, &u) < 0)
			goto bad;
		memcpy(field, &u, sizeof(u));
		return 0;
	case LIMIT_MS:
		if (parse_ms(arg, &u) < 0)
			goto bad;
		memcpy(field, &u, sizeof(u));
		return 0;
	case LIMIT_SIZE:
		if (parse_size(arg, &v) < 0 || v < l->min)
			goto bad;
		memcpy(field, &v, sizeof(v));
		return 0;
	case LIMIT_MODE:
		mode = strtoul(arg, &end, 8);
		if (end == arg || *end || mode > l->max)
			goto bad;
		u = (unsigned)mode;
		memcpy(field, &u, sizeof(u));
		return 0;
	}
bad:
	if (l->kind == LIMIT_COUNT)
		fprintf(stderr, "sseqd: invalid value '%s' for --%s: must be %llu..%llu\n", arg,
			l->name, (unsigned long long)l->min, (unsigned long long)l->max);
	else
		fprintf(stderr, "sseqd: invalid value '%s' for --%s%s\n", arg, l->name, l->hint);
	return -EINVAL;
}

enum {
	OPT_SIM_DELAY = 256,
	OPT_INJECT,
	OPT_WINDOW,
	OPT_COMPUTE,
	OPT_H2D,
	OPT_D2H,
	OPT_D2D,
	OPT_SUBMIT,
	OPT_DEVICE_RESET,
	OPT_ISOLATE,
	OPT_VERIFY,
	OPT_NO_VERIFY,
	OPT_MODULE_DIR,
	OPT_KERNELS,
	OPT_AUDIT,
	OPT_DEVICE_TIMELINE,
	OPT_SPIN,
	OPT_LIMIT, /* OPT_LIMIT + i: limit_opts[i] */
};

static const struct option fixed_opts[] = {
	{"socket", required_argument, NULL, 's'},
	{"device", required_argument, NULL, 'd'},
	{"backend", required_argument, NULL, 'b'},
	{"sim-delay", required_argument, NULL, OPT_SIM_DELAY},
	{"inject", required_argument, NULL, OPT_INJECT},
	{"window", required_argument, NULL, OPT_WINDOW},
	{"compute-streams", required_argument, NULL, OPT_COMPUTE},
	{"h2d-streams", required_argument, NULL, OPT_H2D},
	{"d2h-streams", required_argument, NULL, OPT_D2H},
	{"d2d-streams", required_argument, NULL, OPT_D2D},
	{"submit-threads", required_argument, NULL, OPT_SUBMIT},
	{"device-reset", required_argument, NULL, OPT_DEVICE_RESET},
	{"isolate-faults", no_argument, NULL, OPT_ISOLATE},
	{"verify", no_argument, NULL, OPT_VERIFY},
	{"no-verify", no_argument, NULL, OPT_NO_VERIFY},
	{"module-dir", required_argument, NULL, OPT_MODULE_DIR},
	{"kernels", required_argument, NULL, OPT_KERNELS},
	{"audit", no_argument, NULL, OPT_AUDIT},
	{"device-timeline", required_argument, NULL, OPT_DEVICE_TIMELINE},
	{"spin-us", required_argument, NULL, OPT_SPIN},
	{"log-level", required_argument, NULL, 'l'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, 'V'},
	{0},
};

/* One option of the fixed set (the limits have their own table): 0 or -EINVAL; -h and
 * -V exit. A case per option is the clearest shape for this, hence its length. */
static int bad_value(int c)
{
	for (const struct option *lo = fixed_opts; lo->name; lo++) {
		if (lo->val == c) {
			fprintf(stderr, "sseqd: invalid value '%s' for --%s%s\n", optarg, lo->name,
				c == 'b'			   ? " (sim, hip or auto)"
					: c == OPT_DEVICE_RESET	   ? " (auto or exec)"
					: c == OPT_DEVICE_TIMELINE ? " (on or off)"
					: c == 'l' ? " (err, warning, notice, info or debug)"
						   : "");
			return -EINVAL;
		}
	}
	fprintf(stderr, "sseqd: invalid value '%s'\n", optarg);
	return -EINVAL;
}

/* A number outside its range: the option and the range it takes. */
static int bad_range(int c, unsigned min, unsigned max)
{
	for (const struct option *lo = fixed_opts; lo->name; lo++)
		if (lo->val == c)
			fprintf(stderr, "sseqd: invalid value '%s' for --%s: must be %u..%u\n",
				optarg, lo->name, min, max);
	return -EINVAL;
}

/* The options that take a number in a range: 1 when c is one of them (0 or -EINVAL in
 * *r), else 0. */
static int parse_number_option(struct daemon_opts *o, int c, int *r)
{
	const struct {
		int c;
		unsigned lo, hi;
		unsigned *to;
	} numbers[] = {
		{'d', 0, 1023, &o->srv.device},
		{OPT_WINDOW, 2, 1u << 20, &o->srv.seq.window},
		{OPT_COMPUTE, 1, 32, &o->srv.seq.n_compute},
		{OPT_H2D, 1, 32, &o->srv.seq.n_h2d},
		{OPT_D2H, 1, 32, &o->srv.seq.n_d2h},
		{OPT_D2D, 1, 32, &o->srv.seq.n_d2d},
		{OPT_SUBMIT, 0, BACKEND_MAX_SUBMIT_THREADS, &o->be.submit_threads},
		{OPT_SPIN, 0, 1000000, &o->srv.spin_us},
	};

	for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
		if (numbers[i].c != c)
			continue;
		*r = 0;
		if (parse_uint(optarg, numbers[i].lo, numbers[i].hi, numbers[i].to) < 0)
			*r = bad_range(c, numbers[i].lo, numbers[i].hi);
		return 1;
	}
	return 0;
}

static int parse_option(struct daemon_opts *o, int c)
{
	const char *why = NULL;
	int level, r;

	if (parse_number_option(o, c, &r))
		return r;
	switch (c) {
	case 's':
		o->srv.socket_path = optarg;
		break;
	case 'b':
		if (strcmp(optarg, "sim") && strcmp(optarg, "hip") && strcmp(optarg, "auto"))
			return bad_value(c);
		o->be.name = optarg;
		break;
	case OPT_SIM_DELAY:
		if (sim_parse_delay(&o->be.sim, optarg, &why) < 0) {
			fprintf(stderr, "sseqd: --sim-delay %s: %s\n", optarg,
				why ? why : "invalid");
			return -EINVAL;
		}
		break;
	case OPT_INJECT:
		return parse_inject(o, optarg) < 0 ? -EINVAL : 0;
	case OPT_MODULE_DIR:
		o->srv.module_dir = optarg;
		break;
	case OPT_KERNELS:
		o->be.kernels = optarg;
		break;
	case OPT_AUDIT:
		o->be.audit = true;
		break;
	case OPT_DEVICE_TIMELINE:
		if (strcmp(optarg, "on") && strcmp(optarg, "off"))
			return bad_value(c);
		o->be.device_timeline = strcmp(optarg, "on") == 0;
		break;
	case OPT_ISOLATE:
		o->srv.isolate_faults = true;
		break;
	case OPT_VERIFY:
	case OPT_NO_VERIFY:
		o->srv.verify = c == OPT_VERIFY;
		break;
	case OPT_DEVICE_RESET:
		if (strcmp(optarg, "auto") && strcmp(optarg, "exec"))
			return bad_value(c);
		o->srv.reset_exec = strcmp(optarg, "exec") == 0;
		break;
	case 'l':
		level = log_parse_level(optarg);
		if (level < 0)
			return bad_value(c);
		log_set_level((enum log_level)level);
		break;
	case 'h':
		usage(stdout);
		exit(0);
	case 'V':
		printf("sseqd %s\n", SSEQ_VERSION);
		exit(0);
	default:
		usage(stderr);
		return -EINVAL;
	}
	return 0;
}

static int parse_args(struct daemon_opts *o, int argc, char **argv)
{
	enum { NFIXED = sizeof(fixed_opts) / sizeof(fixed_opts[0]) - 1 };
	struct option longopts[NFIXED + NLIMITS + 1] = {{0}};
	int c;

	memcpy(longopts, fixed_opts, NFIXED * sizeof(fixed_opts[0]));
	for (size_t i = 0; i < NLIMITS; i++)
		longopts[NFIXED + i] = (struct option){
			limit_opts[i].name, required_argument, NULL, OPT_LIMIT + (int)i};
	while ((c = getopt_long(argc, argv, "s:d:b:l:hV", longopts, NULL)) != -1) {
		int r = c >= OPT_LIMIT && c < OPT_LIMIT + (int)NLIMITS
			? parse_limit(&o->srv.limits, &limit_opts[c - OPT_LIMIT], optarg)
			: parse_option(o, c);
		if (r < 0)
			return r;
	}
	if (optind < argc) {
		fprintf(stderr, "sseqd: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

/* The socket systemd passed (socket activation), or -1; < -1 on a bad hand-over. */
static int take_listen_fd(void)
{
	int n = sd_listen_fds(1);

	if (n <= 0)
		return -1;
	if (n > 1) {
		log_err("main", "systemd passed %d sockets; expected one", n);
		return -EINVAL;
	}
	if (sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0) <= 0) {
		log_err("main", "the socket systemd passed is not a listening Unix stream socket");
		return -EINVAL;
	}
	fcntl(SD_LISTEN_FDS_START, F_SETFL, fcntl(SD_LISTEN_FDS_START, F_GETFL) | O_NONBLOCK);
	return SD_LISTEN_FDS_START;
}

/* Every connection is a descriptor and may hold SESSION_MAX_FDS more (memfds received
 * ahead of their StagingRegister), and every staging arena is one (its memfd is kept, so
 * that a restart in place maps it again): raise the soft limit to what --max-clients and
 * --arena-limit need (the listener, the loop, the backend and refused connections take a
 * few dozen more), within the hard limit, and say so when even that is short. Counted
 * so, no user can take the descriptors another needs within the limits: one uid holds
 * at most --max-clients-per-uid connections with what they park. */
static void raise_fd_limit(const struct server_limits *lim)
{
	const rlim_t want = (rlim_t)lim->max_clients * (1 + SESSION_MAX_FDS) + lim->arenas + 64;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur < want)
		log_warn("main",
			"descriptor limit %llu is below --max-clients %u x %d + --arena-limit %u "
			"+ 64 = %llu: connections or arenas past it are refused or wait (raise "
			"LimitNOFILE= or lower the limits)",
			(unsigned long long)rl.rlim_cur, lim->max_clients, 1 + SESSION_MAX_FDS,
			lim->arenas, (unsigned long long)want);
}

struct daemon_state {
	struct cq cq;
	struct backend be;
	struct server srv;
	uv_signal_t sigint, sigterm, sighup;
	uv_timer_t drain, watchdog, status;
	uint64_t drain_started;
	bool cancelled; /* the drain timed out: what the device had not started was cancelled */
	char last_status[640];
};

/* The ops issued and not yet observed complete, on every stream. */
static uint64_t daemon_ops_running(const struct server *srv)
{
	uint64_t n = 0;

	for (unsigned x = 0; x < seq_stream_count(srv->seq); x++) {
		struct seq_stream_info si;

		seq_stream_info(srv->seq, x, &si);
		n += si.issued - si.completed;
	}
	return n;
}

/* Wait for the work in flight; at DRAIN_TIMEOUT_MS cancel what the device has not
 * started (its requests fail with SHUTTING_DOWN); DRAIN_CANCEL_MS later, leave whatever
 * still runs on the device: its memory is never released under it, but left allocated
 * until the process is gone. */
static void on_drain_tick(uv_timer_t *t)
{
	struct daemon_state *d = t->data;
	const uint64_t waited = uv_now(t->loop) - d->drain_started;

	if (server_idle(&d->srv)) {
		log_notice("main", "drained: %s",
			d->cancelled ? "the work the device had not started was cancelled"
				     : "all work in flight completed");
	} else if (!d->cancelled && waited > DRAIN_TIMEOUT_MS) {
		log_warn("main",
			"%" PRIu64 " operations still in flight after %u ms: cancelling those "
			"the device has not started (their requests fail with SHUTTING_DOWN)",
			daemon_ops_running(&d->srv), DRAIN_TIMEOUT_MS);
		d->cancelled = true;
		backend_cancel(&d->be);
		return;
	} else if (d->cancelled && waited > DRAIN_TIMEOUT_MS + DRAIN_CANCEL_MS) {
		log_warn("main",
			"%" PRIu64 " operations still in flight %u ms after the cancel: exiting "
			"without them; the memory they may touch is left allocated, not released",
			daemon_ops_running(&d->srv), DRAIN_CANCEL_MS);
		server_abandon(&d->srv);
	} else {
		return;
	}
	server_drop_clients(&d->srv);
	uv_stop(t->loop);
}

/* Stop taking work, let what is in flight drain, then leave the loop. */
static void daemon_begin_stop(struct daemon_state *d, const char *why)
{
	if (d->drain_started || uv_is_active((uv_handle_t *)&d->drain))
		return;
	log_notice("main", "%s: stopping; draining work in flight (at most %u ms)", why,
		DRAIN_TIMEOUT_MS);
	sd_notify(0, "STOPPING=1");
	server_stop(&d->srv);
	d->drain_started = uv_now(d->drain.loop);
	uv_timer_start(&d->drain, on_drain_tick, 0, 5);
}

static void on_signal(uv_signal_t *h, int signum)
{
	struct daemon_state *d = h->data;
	char summary[640];

	if (signum == SIGHUP) {
		/* Nothing is read from disk after start-up; SIGHUP reports where things stand
		 * (the journal keeps stderr, so there is no log file to reopen). */
		server_summary(&d->srv, summary, sizeof(summary));
		log_notice("main", "SIGHUP: %s", summary);
		return;
	}
	daemon_begin_stop(d, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

static void on_watchdog(uv_timer_t *t)
{
	/* The loop is alive if this timer fires: that is what the watchdog guards. */
	sd_notify(0, "WATCHDOG=1");
}

static void on_status(uv_timer_t *t)
{
	struct daemon_state *d = t->data;
	char status[640];

	/* A device that could not be reset: exit with a failure, so that the service
	 * manager restarts sseqd (Restart=on-failure). */
	if (d->srv.fatal)
		daemon_begin_stop(d, "the device could not be reset");
	server_summary(&d->srv, status, sizeof(status));
	if (strcmp(status, d->last_status) == 0)
		return;
	memcpy(d->last_status, status, sizeof(status));
	sd_notifyf(0, "STATUS=%s", status);
}

static void on_close(uv_handle_t *h)
{
}

/* Where to listen: the socket systemd passed, --socket, or /run/sseq/gpu<N>.sock. */
static int socket_prepare(struct daemon_opts *o, int resume)
{
	/* Restarted in place: the socket the last process listened on, whatever it was. */
	int r = resume >= 0 ? server_resume_listen_fd(resume) : take_listen_fd();

	if (r < -1)
		return r;
	o->srv.listen_fd = r;
	if (o->srv.listen_fd < 0 && !o->srv.socket_path) {
		snprintf(o->socket_buf, sizeof(o->socket_buf), "/run/sseq/gpu%u.sock",
			o->srv.device);
		o->srv.socket_path = o->socket_buf;
		/* Only root (or the unit's RuntimeDirectory=) may make it: a user's sseqd
		 * fails here, and must hear that, not the bind's "No such file". */
		if (mkdir("/run/sseq", 0755) < 0 && errno != EEXIST) {
			r = -errno;
			log_err("main",
				"cannot create /run/sseq (the directory of the default socket %s): "
				"%s; %s",
				o->socket_buf, strerror(-r),
				r == -EACCES || r == -EPERM || r == -EROFS
					? "run as root (the sseqd@ units do), or pass "
					  "--socket PATH to listen where you may create files"
					: "pass --socket PATH to listen elsewhere");
			return r;
		}
	}
	if (!o->srv.socket_path)
		o->srv.socket_path = "(systemd socket)";
	if (o->srv.module_dir) {
		struct stat sb;

		/* Not fatal: the directory may be mounted or filled later; say so now. */
		if (stat(o->srv.module_dir, &sb) < 0 || !S_ISDIR(sb.st_mode))
			log_warn("main",
				"--module-dir %s is not a directory: LoadModule finds "
				"nothing there",
				o->srv.module_dir);
	}
	return 0;
}

static void log_serving(const struct daemon_opts *o, const struct backend *be)
{
	struct backend_info info = {0};

	backend_info(be, &info);
	log_notice("main",
		"sseqd %s serving device %u (%s, backend %s) on %s; window %u%s%s%s%s%s%s",
		SSEQ_VERSION, o->srv.device, info.name, info.backend, o->srv.socket_path,
		o->srv.seq.window ? o->srv.seq.window : SEQ_DEFAULT_WINDOW,
		o->be.audit && backend_has_audit(be) ? "; audit on" : "",
		o->be.device_timeline && strcmp(info.backend, "hip") == 0 ? "; device timeline on"
									  : "",
		o->srv.verify ? "; schedule checker on" : "",
		o->srv.seq.legacy_sync_window ? "; INJECTED legacy-sync-window" : "",
		o->srv.seq.drop_wait ? "; INJECTED drop-wait" : "",
		o->srv.seq.legacy_early_free			? "; INJECTED early-free"
			: o->srv.seq.legacy_slice_outlives_base ? "; INJECTED slice-outlives-base"
								: "");
}

/* Signals (then unblocked: see main), the drain, watchdog and status timers. */
static void loop_start(struct daemon_state *d, uv_loop_t *loop, const sigset_t *stop_signals)
{
	uint64_t usec = 0;

	uv_signal_init(loop, &d->sigint);
	uv_signal_init(loop, &d->sigterm);
	uv_signal_init(loop, &d->sighup);
	d->sigint.data = d->sigterm.data = d->sighup.data = d;
	uv_signal_start(&d->sigint, on_signal, SIGINT);
	uv_signal_start(&d->sigterm, on_signal, SIGTERM);
	uv_signal_start(&d->sighup, on_signal, SIGHUP);
	pthread_sigmask(SIG_UNBLOCK, stop_signals, NULL);
	uv_timer_init(loop, &d->drain);
	uv_timer_init(loop, &d->watchdog);
	uv_timer_init(loop, &d->status);
	d->drain.data = d->watchdog.data = d->status.data = d;
	signal(SIGPIPE, SIG_IGN);
	if (sd_watchdog_enabled(0, &usec) > 0 && usec >= 2000) {
		uv_timer_start(&d->watchdog, on_watchdog, 0, usec / 2000);
		log_info("main", "watchdog: pinging every %" PRIu64 " ms", usec / 2000);
	}
	uv_timer_start(&d->status, on_status, 0, 1000);
}

static void loop_finish(struct daemon_state *d, uv_loop_t *loop)
{
	const bool abandoned = d->srv.abandoned;

	server_close_handles(&d->srv);
	uv_close((uv_handle_t *)&d->sigint, on_close);
	uv_close((uv_handle_t *)&d->sigterm, on_close);
	uv_close((uv_handle_t *)&d->sighup, on_close);
	uv_close((uv_handle_t *)&d->drain, on_close);
	uv_close((uv_handle_t *)&d->watchdog, on_close);
	uv_close((uv_handle_t *)&d->status, on_close);
	uv_run(loop, UV_RUN_DEFAULT);
	/* Abandoned ops' completions may still be pushed, and wake the loop's eventfd: it
	 * stays open until the process is gone. */
	if (!abandoned)
		uv_loop_close(loop);
}

/* The completion queue first, then the backend that pushes to it, then the server that
 * drains it; the backend builds the streams the core will number. */
static int daemon_start(struct daemon_state *d, struct daemon_opts *o, uv_loop_t *loop)
{
	struct seq_layout layout;
	/* The server is not made yet, but its findings queue is ready before any op runs. */
	const struct backend_env env = {.layout = &layout,
		.cq = &d->cq,
		.finding = server_finding,
		.finding_op = server_finding_op,
		.finding_arg = &d->srv};
	int r = seq_layout_init(&layout, &o->srv.seq);

	if (r < 0) {
		log_err("main", "the --*-streams options: at most %u streams in all",
			SEQ_MAX_STREAMS);
		return r;
	}
	cq_init(&d->cq);
	o->be.device = o->srv.device;
	r = backend_start(&o->be, &env, &d->be);
	if (r < 0) {
		/* -ENODEV: the registry said why (no such backend in this build, no device). */
		if (r != -ENODEV)
			log_err("main", "cannot start the %s backend: %s",
				o->be.name ? o->be.name : "auto", strerror(-r));
		return r;
	}
	r = server_init(&d->srv, loop, &o->srv, &d->be, &d->cq);
	if (r < 0) {
		server_finish(&d->srv);
		backend_destroy(&d->be);
	}
	return r;
}

int main(int argc, char **argv)
{
	static struct daemon_state d;
	struct daemon_opts o = {.srv = {.listen_fd = -1,
					.spin_us = SERVER_DEFAULT_SPIN_US,
					.seq = SERVER_STREAMS_DEFAULT,
					.limits = SERVER_LIMITS_DEFAULT,
					.verify = true},
		.be = {.submit_threads = BACKEND_DEFAULT_SUBMIT_THREADS,
			.device_timeline = BACKEND_DEFAULT_DEVICE_TIMELINE}};
	uv_loop_t *loop = uv_default_loop();
	sigset_t stop_signals;
	int resume;

	if (parse_args(&o, argc, argv) < 0)
		return 2;
	raise_fd_limit(&o.srv.limits);
	/* A stop asked for while starting (the socket already shows) is held until the
	 * loop's handlers are in place, then handled as any other. */
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
	o.srv.argv = argv;
	resume = server_resume_fd();
	/* The sim's injected faults count launches from the start: after a restart in place
	 * they would fire again on the new count, as a different experiment. */
	if (resume >= 0)
		o.be.sim.nfail = 0;
	if (socket_prepare(&o, resume) < 0)
		return 1;
	if (daemon_start(&d, &o, loop) < 0)
		return 1;
	log_serving(&o, &d.be);
	if (resume >= 0)
		server_adopt(&d.srv, resume);
	loop_start(&d, loop, &stop_signals);
	/* The device is initialised and the socket listens: clients can be served. */
	sd_notify(0, "READY=1");
	uv_run(loop, UV_RUN_DEFAULT);

	server_finish(&d.srv);
	/* Abandoned: the backend's threads still run ops on memory it holds, and push their
	 * completions to the queue. Both stay, reachable from d (no leak, no use after
	 * free); the exit ends the threads. */
	if (!d.srv.abandoned) {
		backend_destroy(&d.be);
		cq_finish(&d.cq);
	}
	loop_finish(&d, loop);
	log_notice("main", "stopped");
	return d.srv.fatal ? 1 : 0;
}
