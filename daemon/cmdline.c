/* sseqd's command line: its own options around the backends' (the registry's groups),
 * each written once as a row (option.h), with the defaults --help shows. */
#include "cmdline.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sseq-frame.h"
#include <sseq/sseq-socket.h>

/* What struct server_options holds before the options (cmdline_parse): --help's defaults. */
static struct server_options cmdline_defaults;

/* --help and --version print and exit where they stand among the options. */
static const struct option_set *cmdline_help_set;

static int cmdline_help(void *cfg, const char *arg, const char **why)
{
	option_usage(cmdline_help_set, stdout);
	exit(0);
}

static int cmdline_version(void *cfg, const char *arg, const char **why)
{
	printf("sseqd %s\n", SSEQ_VERSION);
	exit(0);
}

static int cmdline_log_level(void *cfg, const char *arg, const char **why)
{
	int level = log_parse_level(arg);

	if (level < 0)
		return -EINVAL;
	log_set_level((enum log_level)level);
	return 0;
}

/* --inject SPEC, the faults of the core (any backend): a value that is none of them is
 * left to the backends' rows of the same name. */
static int cmdline_inject(void *cfg, const char *arg, const char **why)
{
	struct server_options *o = cfg;
	const struct {
		const char *name, *form;
		unsigned *to;
	} counted[] = {
		{"legacy-sync-window",
			"expected legacy-sync-window=N (N: the compute window tied to H2D "
			"readiness, 1 .. 1048576)",
			&o->seq.legacy_sync_window},
		{"drop-wait",
			"expected drop-wait=N (N: every Nth wait decided is dropped, 1 .. 1048576)",
			&o->seq.drop_wait},
	};

	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++) {
		const size_t len = strlen(counted[i].name);
		unsigned long n;
		char *end;

		if (strncmp(arg, counted[i].name, len) || (arg[len] != '=' && arg[len]))
			continue;
		errno = 0;
		n = arg[len] ? strtoul(arg + len + 1, &end, 10) : 0;
		if (!arg[len] || errno || end == arg + len + 1 || *end || n < 1 || n > 1u << 20) {
			*why = counted[i].form;
			return -EINVAL;
		}
		*counted[i].to = (unsigned)n;
		return 0;
	}
	if (strcmp(arg, "slice-outlives-base") == 0)
		o->seq.legacy_slice_outlives_base = true;
	else if (strcmp(arg, "early-free") == 0)
		o->seq.legacy_early_free = true;
	else
		return -ENOENT;
	return 0;
}

#define SRV(field) .offset = offsetof(struct server_options, field)

/* sseqd's own options, before --backend and the backends' options. */
static const struct option_row cmdline_head[] = {
	{.name = "socket",
		.short_name = 's',
		.arg = "PATH",
		.kind = OPTION_STRING,
		SRV(socket_path),
		.help = "listen on PATH (default " SSEQ_SOCKET_DIR "/gpu<N>.sock, or the socket "
			"passed by systemd)"},
	{.name = "device",
		.short_name = 'd',
		.arg = "N",
		.kind = OPTION_UINT,
		SRV(device),
		.max = 1023,
		.help = "GPU index (default {default})"},
	{0},
};

/* ... and after them: the core's, the server's, the limits (sseqd(8), LIMITS). */
static const struct option_row cmdline_tail[] = {
	{.name = "inject",
		.arg = "SPEC",
		.kind = OPTION_CUSTOM,
		.parse = cmdline_inject,
		.values = "drop-wait=N, legacy-sync-window=N, early-free, slice-outlives-base",
		.what = "fault",
		.help = "fault injection (repeatable)"},
	{.name = "window",
		.arg = "N",
		.kind = OPTION_UINT,
		SRV(seq.window),
		.min = 2,
		.max = 1u << 20,
		.help = "incomplete points per stream before backpressure (default {default})"},
	{.name = "compute-streams",
		.arg = "N",
		.kind = OPTION_UINT,
		SRV(seq.n_compute),
		.min = 1,
		.max = 32,
		.help = "compute lanes: each session's kernels run on a lane of its own (default "
			"{default})"},
	{.name = "h2d-streams",
		.arg = "N",
		.kind = OPTION_UINT,
		SRV(seq.n_h2d),
		.min = 1,
		.max = 32,
		.help = "host-to-device streams (default {default})"},
	{.name = "d2h-streams",
		.arg = "N",
		.kind = OPTION_UINT,
		SRV(seq.n_d2h),
		.min = 1,
		.max = 32,
		.help = "device-to-host streams (default {default})"},
	{.name = "d2d-streams",
		.arg = "N",
		.kind = OPTION_UINT,
		SRV(seq.n_d2d),
		.min = 1,
		.max = 32,
		.help = "device-to-device streams (default {default})"},
	{.name = "device-reset",
		.arg = "MODE",
		.kind = OPTION_WORDS,
		SRV(reset_exec),
		.words = {"auto", "exec"},
		.hint = " (auto or exec)",
		.help = "after a fault that poisons the device context: auto (build it again in "
			"this process, else restart in place: exec, same PID, sessions kept) or "
			"exec"},
	{.name = "verify",
		.kind = OPTION_FLAG,
		SRV(verify),
		.negatable = true,
		.help = "the schedule checker between the core and the device: every access "
			"ordered after its producer, by happens-before (default: {default})"},
	{.name = "isolate-faults",
		.kind = OPTION_FLAG,
		SRV(isolate_faults),
		.help = "after a reset with several suspects, run each suspect session's kernels "
			"alone, so that its next fault is attributed exactly"},
	/* The server's, not a backend's: it checks and opens what LoadModule names, for
	 * whichever backend loads modules, and a user's SSEQD_OPTS keeps it across builds. */
	{.name = "module-dir",
		.arg = "DIR",
		.kind = OPTION_STRING,
		SRV(module_dir),
		.help = "where LoadModule may load code objects from (a backend that loads "
			"modules)"},
	{.name = "loops",
		.arg = "N",
		.kind = OPTION_UINT,
		SRV(nloops),
		.max = LOOPS_MAX,
		.help = "serve the sessions on N loops, each a thread with its own share of the "
			"streams and submit threads (default {default}: the backend's choice, "
			"which sseqd(8) gives; with more than one, a device fault restarts sseqd "
			"in place)"},
	{.name = "spin-us",
		.arg = "N",
		.kind = OPTION_UINT,
		SRV(spin_us),
		.max = 1000000,
		.help = "after answering, poll sockets and completions for N us before sleeping, "
			"while a core is free (default {default}; 0: never)"},
	{.name = "socket-mode",
		.arg = "MODE",
		.kind = OPTION_OCTAL,
		SRV(limits.socket_mode),
		.max = 0777,
		.hint = " (an octal mode such as 0660)",
		.help = "mode of the socket sseqd creates (octal, default {default})"},
	{.name = "max-clients",
		.arg = "N",
		.kind = OPTION_UINT,
		SRV(limits.max_clients),
		.min = 1,
		.max = 1u << 20,
		.help = "connections in total (default {default})",
		.heading = "Limits (sizes take k, M, G, T; times ms or s; see sseqd(8), LIMITS):"},
	{.name = "max-clients-per-uid",
		.arg = "N",
		.kind = OPTION_UINT,
		SRV(limits.max_clients_per_uid),
		.min = 1,
		.max = 1u << 20,
		.help = "connections of one user (default {default})"},
	{.name = "hello-timeout",
		.arg = "TIME",
		.kind = OPTION_MS,
		SRV(limits.hello_timeout_ms),
		.max = 86400000,
		.hint = " (500, 500ms or 5s; 0 .. 86400s)",
		.help = "close a connection that sends no Hello within TIME (default {default}; 0: "
			"never)"},
	{.name = "frame-timeout",
		.arg = "TIME",
		.kind = OPTION_MS,
		SRV(limits.frame_timeout_ms),
		.max = 86400000,
		.hint = " (500, 500ms or 5s; 0 .. 86400s)",
		.help = "close a connection whose frame stalls for TIME (default {default}; 0: "
			"never)"},
	{0},
};

/* After the limits account.c owns (account_options). */
static const struct option_row cmdline_end[] = {
	{.name = "log-level",
		.short_name = 'l',
		.arg = "LEVEL",
		.kind = OPTION_CUSTOM,
		.parse = cmdline_log_level,
		.hint = " (err, warning, notice, info or debug)",
		.help = "err, warning, notice, info (default), debug"},
	{.name = "help",
		.short_name = 'h',
		.kind = OPTION_CUSTOM,
		.parse = cmdline_help,
		.help = "show this help"},
	{.name = "version",
		.short_name = 'V',
		.kind = OPTION_CUSTOM,
		.parse = cmdline_version,
		.help = "show the version"},
	{0},
};

#undef SRV

/* sseqd's options, then the backends' (the registry's groups), then the rest of its own;
 * --help lists them in that order. */
int cmdline_parse(struct cmdline *o, int argc, char **argv)
{
	cmdline_defaults = (struct server_options){.listen_fd = -1,
		.spin_us = SERVER_DEFAULT_SPIN_US,
		.seq = SERVER_STREAMS_DEFAULT,
		.limits = SERVER_LIMITS_DEFAULT,
		.account = ACCOUNT_LIMITS_DEFAULT,
		.verify = true};
	/* The core's default (0 means it too), spelled out for --help. */
	cmdline_defaults.seq.window = SEQ_DEFAULT_WINDOW;
	o->srv = cmdline_defaults;
	o->set.intro = "Usage: sseqd [OPTIONS]\nPer-GPU event-sequencing daemon.\n\n";
	cmdline_help_set = &o->set;
	if (option_set_add(&o->set, cmdline_head, &o->srv, &cmdline_defaults) < 0 ||
		registry_init(&o->reg, &o->set) < 0 ||
		option_set_add(&o->set, cmdline_tail, &o->srv, &cmdline_defaults) < 0 ||
		option_set_add(
			&o->set, account_options, &o->srv.account, &cmdline_defaults.account) < 0 ||
		option_set_add(&o->set, cmdline_end, &o->srv, &cmdline_defaults) < 0) {
		fprintf(stderr, "sseqd: cannot build the option table\n");
		return -ENOMEM;
	}
	return option_parse(&o->set, argc, argv);
}
