/* sseqd: the per-GPU event-sequencing daemon. Parses options (cmdline.c), picks the
 * backend, listens (or takes the socket systemd passed), and runs the loop until
 * SIGTERM/SIGINT, then lets in-flight work drain before it exits. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "cmdline.h"
#include "finding.h"
#include "log.h"
#include "registry.h"
#include "resume.h"
#include "server.h"
#include "sseq-frame.h"
#include <sseq/sseq-socket.h>

#define DRAIN_TIMEOUT_MS 10000
/* After the drain timed out and the work the device had not started was cancelled: how
 * long the ops it runs get to finish, and the cancelled requests' answers to go out.
 * Both together stay well inside systemd's TimeoutStopSec= (20 s in sseqd@.service). */
#define DRAIN_CANCEL_MS 1000

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
static void raise_fd_limit(const struct server_options *o)
{
	const struct server_limits *lim = &o->limits;
	const rlim_t want =
		(rlim_t)lim->max_clients * (1 + SESSION_MAX_FDS) + o->account.arenas + 64;
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
			o->account.arenas, (unsigned long long)want);
}

struct daemon_state;

/* One loop (--loops): its thread (loop 0 runs on main's), completion queue, backend
 * instance and server, and its drain. */
struct daemon_loop {
	struct daemon_state *d;
	unsigned index;
	uv_loop_t own, *loop;
	struct cq cq;
	struct backend be;
	struct server srv;
	uv_timer_t drain;
	uv_async_t stop; /* main asks the loop to drain */
	uint64_t drain_started;
	bool cancelled; /* the drain timed out: what the device had not started was cancelled */
	bool made; /* its backend and server were made (and are to be finished) */
	bool threaded;
	pthread_t thread;
};

struct daemon_state {
	struct loops loops;
	unsigned n;
	struct daemon_loop l[LOOPS_MAX];
	/* SIGTERM, SIGINT and SIGHUP, blocked in every thread, read from this signalfd on
	 * loop 0 (see loop_start). */
	int sigfd;
	uv_poll_t sigpoll;
	uv_timer_t watchdog, status;
	bool stopping;
	char last_status[640];
	/* How long the loops took to make (each its backend: streams, threads, pinned
	 * memory, the kernel image), while clients that connected waited. */
	double made_ms;
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

/* Wait for the loop's work in flight; at DRAIN_TIMEOUT_MS cancel what the device has not
 * started (its requests fail with SHUTTING_DOWN); DRAIN_CANCEL_MS later, leave whatever
 * still runs on the device: its memory is never released under it, but left allocated
 * until the process is gone. */
static void on_drain_tick(uv_timer_t *t)
{
	struct daemon_loop *dl = t->data;
	const uint64_t waited = uv_now(t->loop) - dl->drain_started;

	if (server_idle(&dl->srv)) {
		char which[24] = "";

		if (dl->d->n > 1)
			snprintf(which, sizeof(which), " loop %u", dl->index);
		log_notice("main", "drained%s: %s", which,
			dl->cancelled ? "the work the device had not started was cancelled"
				      : "all work in flight completed");
	} else if (!dl->cancelled && waited > DRAIN_TIMEOUT_MS) {
		log_warn("main",
			"%" PRIu64 " operations still in flight after %u ms: cancelling those "
			"the device has not started (their requests fail with SHUTTING_DOWN)",
			daemon_ops_running(&dl->srv), DRAIN_TIMEOUT_MS);
		dl->cancelled = true;
		backend_cancel(&dl->be);
		return;
	} else if (dl->cancelled && waited > DRAIN_TIMEOUT_MS + DRAIN_CANCEL_MS) {
		log_warn("main",
			"%" PRIu64 " operations still in flight %u ms after the cancel: exiting "
			"without them; the memory they may touch is left allocated, not released",
			daemon_ops_running(&dl->srv), DRAIN_CANCEL_MS);
		server_abandon(&dl->srv);
	} else {
		return;
	}
	server_drop_clients(&dl->srv);
	uv_stop(t->loop);
}

/* On the loop's own thread. */
static void loop_begin_drain(struct daemon_loop *dl)
{
	if (dl->drain_started)
		return;
	server_stop(&dl->srv);
	dl->drain_started = uv_now(dl->loop);
	uv_timer_start(&dl->drain, on_drain_tick, 0, 5);
}

static void on_loop_stop(uv_async_t *h)
{
	loop_begin_drain(h->data);
}

/* Stop taking work, let what is in flight drain, then leave the loops. */
static void daemon_begin_stop(struct daemon_state *d, const char *why)
{
	if (d->stopping)
		return;
	d->stopping = true;
	log_notice("main", "%s: stopping; draining work in flight (at most %u ms)", why,
		DRAIN_TIMEOUT_MS);
	sd_notify(0, "STOPPING=1");
	loop_begin_drain(&d->l[0]);
	for (unsigned i = 1; i < d->n; i++)
		uv_async_send(&d->l[i].stop);
}

/* Where things stand over every loop, and whether one of them met a fault it cannot
 * recover from (the others parked meanwhile). */
static int daemon_summary(struct daemon_state *d, char *buf, size_t size)
{
	int fatal = 0;

	loops_stop_world(&d->loops, 0);
	server_summary(&d->l[0].srv, buf, size);
	for (unsigned i = 0; i < d->n; i++) {
		const struct server *srv = loops_server(&d->loops, i);

		if (srv && srv->fatal)
			fatal = srv->fatal;
	}
	loops_resume_world(&d->loops);
	return fatal;
}

static void on_signal(struct daemon_state *d, int signum)
{
	char summary[640];

	if (signum == SIGHUP) {
		/* Nothing is read from disk after start-up; SIGHUP reports where things stand
		 * (the journal keeps stderr, so there is no log file to reopen). */
		daemon_summary(d, summary, sizeof(summary));
		log_notice("main", "SIGHUP: %s", summary);
		return;
	}
	daemon_begin_stop(d, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

static void on_sigfd(uv_poll_t *h, int status, int events)
{
	struct daemon_state *d = h->data;
	struct signalfd_siginfo si;

	while (read(d->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		on_signal(d, (int)si.ssi_signo);
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
	if (daemon_summary(d, status, sizeof(status)))
		daemon_begin_stop(d, "the device could not be reset");
	if (strcmp(status, d->last_status) == 0)
		return;
	memcpy(d->last_status, status, sizeof(status));
	sd_notifyf(0, "STATUS=%s", status);
}

static void on_close(uv_handle_t *h)
{
}

/* Where to listen: the socket systemd passed, --socket, or /run/sseq/gpu<N>.sock. */
static int socket_prepare(struct cmdline *o, int resume)
{
	/* Restarted in place: the socket the last process listened on, whatever it was. */
	int r = resume >= 0 ? resume_listen_fd(resume) : take_listen_fd();

	if (r < -1)
		return r;
	o->srv.listen_fd = r;
	if (o->srv.listen_fd < 0 && !o->srv.socket_path) {
		snprintf(o->socket_buf, sizeof(o->socket_buf), SSEQ_SOCKET_DIR "/" SSEQ_SOCKET_NAME,
			o->srv.device);
		o->srv.socket_path = o->socket_buf;
		/* Only root (or the unit's RuntimeDirectory=) may make it: a user's sseqd
		 * fails here, and must hear that, not the bind's "No such file". */
		if (mkdir(SSEQ_SOCKET_DIR, 0755) < 0 && errno != EEXIST) {
			r = -errno;
			log_err("main",
				"cannot create " SSEQ_SOCKET_DIR " (the directory of the default "
				"socket %s): %s; %s",
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

static void log_serving(
	const struct cmdline *o, const struct backend *be, unsigned loops, double made_ms)
{
	struct backend_info info = {0};
	char backend_on[128], loops_on[64] = "";

	backend_info(be, &info);
	registry_describe(&o->reg, be, backend_on, sizeof(backend_on));
	if (loops > 1)
		snprintf(loops_on, sizeof(loops_on), "; %u loops, made in %.0f ms", loops, made_ms);
	log_notice("main",
		"sseqd %s serving device %u (%s, backend %s) on %s; window %u%s%s%s%s%s%s",
		SSEQ_VERSION, o->srv.device, info.name, info.backend, o->srv.socket_path,
		o->srv.seq.window ? o->srv.seq.window : SEQ_DEFAULT_WINDOW, loops_on, backend_on,
		o->srv.verify ? "; schedule checker on" : "",
		o->srv.seq.legacy_sync_window ? "; INJECTED legacy-sync-window" : "",
		o->srv.seq.drop_wait ? "; INJECTED drop-wait" : "",
		o->srv.seq.legacy_early_free			? "; INJECTED early-free"
			: o->srv.seq.legacy_slice_outlives_base ? "; INJECTED slice-outlives-base"
								: "");
}

/* Signals, the watchdog and status timers, on loop 0. The stop signals stay blocked in
 * every thread (see main) and are read from a signalfd: one that came while starting is
 * read now, and one that comes while loop 0 restarts the daemon in place stays pending
 * through the exec, for the new process (a handler would have taken it into the old
 * process's loop, to be lost with it). */
static int loop_start(struct daemon_state *d, uv_loop_t *loop, const sigset_t *stop_signals)
{
	uint64_t usec = 0;
	int r;

	d->sigfd = signalfd(-1, stop_signals, SFD_NONBLOCK | SFD_CLOEXEC);
	if (d->sigfd < 0) {
		r = -errno;
		log_err("main", "signalfd: %s", strerror(-r));
		return r;
	}
	r = uv_poll_init(loop, &d->sigpoll, d->sigfd);
	if (r < 0) {
		log_err("main", "the signal poll: %s", uv_strerror(r));
		close(d->sigfd);
		d->sigfd = -1;
		return r;
	}
	d->sigpoll.data = d;
	uv_poll_start(&d->sigpoll, UV_READABLE, on_sigfd);
	uv_timer_init(loop, &d->watchdog);
	uv_timer_init(loop, &d->status);
	d->watchdog.data = d->status.data = d;
	signal(SIGPIPE, SIG_IGN);
	if (sd_watchdog_enabled(0, &usec) > 0 && usec >= 2000) {
		uv_timer_start(&d->watchdog, on_watchdog, 0, usec / 2000);
		log_info("main", "watchdog: pinging every %" PRIu64 " ms", usec / 2000);
	}
	uv_timer_start(&d->status, on_status, 0, 1000);
	return 0;
}

/* After its loop ran: the server, then the backend that pushes to the queue, then the
 * queue, then the loop's handles. */
static void loop_finish(struct daemon_loop *dl)
{
	const bool abandoned = dl->srv.abandoned;

	server_finish(&dl->srv);
	/* Abandoned: the backend's threads still run ops on memory it holds, and push their
	 * completions to the queue. Both stay, reachable from d (no leak, no use after
	 * free); the exit ends the threads. */
	if (!abandoned) {
		backend_destroy(&dl->be);
		cq_finish(&dl->cq);
	}
	server_close_handles(&dl->srv);
	uv_close((uv_handle_t *)&dl->drain, on_close);
	uv_close((uv_handle_t *)&dl->stop, on_close);
	if (dl->index == 0) {
		struct daemon_state *d = dl->d;

		if (d->sigfd >= 0)
			uv_close((uv_handle_t *)&d->sigpoll, on_close);
		uv_close((uv_handle_t *)&d->watchdog, on_close);
		uv_close((uv_handle_t *)&d->status, on_close);
	}
	uv_run(dl->loop, UV_RUN_DEFAULT);
	if (dl->index == 0 && dl->d->sigfd >= 0) {
		close(dl->d->sigfd);
		dl->d->sigfd = -1;
	}
	/* Abandoned ops' completions may still be pushed, and wake the loop's eventfd: it
	 * stays open until the process is gone. */
	if (!abandoned)
		uv_loop_close(dl->loop);
}

/* Loop i's share of a daemon-wide amount, rounded up: streams of each kind. */
static unsigned share_up(unsigned total, unsigned n)
{
	return (total + n - 1) / n;
}

/* What loop i serves with: its share of the streams and of the daemon-wide limits that
 * are held against memory the loop's own sessions take (input, staging bytes, arenas;
 * the connection limits are counted across the loops). */
static int loop_options(
	const struct cmdline *o, struct daemon_state *d, unsigned i, struct server_options *out)
{
	const unsigned n = d->n;

	*out = o->srv;
	out->loops = &d->loops;
	out->loop_index = i;
	if (n == 1)
		return 0;
	out->seq.n_compute = share_up(o->srv.seq.n_compute, n);
	out->seq.n_h2d = share_up(o->srv.seq.n_h2d, n);
	out->seq.n_d2h = share_up(o->srv.seq.n_d2h, n);
	out->seq.n_d2d = share_up(o->srv.seq.n_d2d, n);
	out->account.max_input_bytes = o->srv.account.max_input_bytes / n;
	out->account.staging_bytes = o->srv.account.staging_bytes / n;
	out->account.arenas = o->srv.account.arenas / n ? o->srv.account.arenas / n : 1;
	if (out->account.max_input_bytes < 4u * FRAME_MAX) {
		log_err("main",
			"--max-input-memory %" PRIu64 " is shared by --loops %u: each loop needs "
			"at least 4M",
			o->srv.account.max_input_bytes, n);
		return -EINVAL;
	}
	return 0;
}

/* Loop i: the completion queue first, then the backend that pushes to it, then the
 * server that drains it; the backend builds the streams the core will number. */
static int loop_make(struct daemon_state *d, struct cmdline *o, unsigned i, bool resumed)
{
	struct daemon_loop *dl = &d->l[i];
	const struct backend_args args = {
		.device = o->srv.device, .resumed = resumed, .loops = d->n, .loop = i};
	struct server_options so;
	struct seq_layout layout;
	/* The server is not made yet, but its findings queue is ready before any op runs. */
	const struct backend_env env = {.layout = &layout,
		.cq = &dl->cq,
		.finding = finding_log,
		.finding_op = finding_queue_op,
		.finding_arg = &dl->srv};
	int r = loop_options(o, d, i, &so);

	if (r < 0)
		return r;
	r = seq_layout_init(&layout, &so.seq);
	if (r < 0) {
		log_err("main", "the --*-streams options: at most %u streams in all",
			SEQ_MAX_STREAMS);
		return r;
	}
	dl->d = d;
	dl->index = i;
	dl->loop = i == 0 ? uv_default_loop() : &dl->own;
	if (i > 0 && uv_loop_init(dl->loop) < 0)
		return -ENOMEM;
	uv_timer_init(dl->loop, &dl->drain);
	dl->drain.data = dl;
	uv_async_init(dl->loop, &dl->stop, on_loop_stop);
	dl->stop.data = dl;
	cq_init(&dl->cq);
	/* it said why not */
	r = i == 0 ? registry_start(&o->reg, &args, &env, &dl->be)
		   : registry_start_another(&o->reg, &args, &env, &dl->be);
	if (r < 0)
		return r;
	dl->made = true;
	return server_init(&dl->srv, dl->loop, &so, &dl->be, &dl->cq);
}

static void *loop_thread(void *arg)
{
	struct daemon_loop *dl = arg;

	uv_run(dl->loop, UV_RUN_DEFAULT);
	/* No longer parks for a query, nor takes connections: the others go on without. */
	loops_detach(&dl->d->loops, dl->index);
	return NULL;
}

/* --loops 0: as many as the backend that will run asks for the CPUs sseqd may use. */
static unsigned daemon_loops(const struct cmdline *o)
{
	cpu_set_t set;
	unsigned cpus =
		sched_getaffinity(0, sizeof(set), &set) == 0 ? (unsigned)CPU_COUNT(&set) : 1;

	return o->srv.nloops ? o->srv.nloops : registry_auto_loops(&o->reg, o->srv.device, cpus);
}

/* One loop made on a thread of its own (see daemon_start). */
struct loop_maker {
	struct daemon_state *d;
	struct cmdline *o;
	unsigned index;
	bool resumed, threaded;
	int r;
	pthread_t thread;
};

static void *loop_maker_run(void *arg)
{
	struct loop_maker *m = arg;

	m->r = loop_make(m->d, m->o, m->index, m->resumed);
	return NULL;
}

/* Loop 0 first (it opens the device), then the others side by side: each makes its own
 * streams, threads, pinned pool and kernel image, so n loops take about as long as two
 * rather than n times one while the clients that already connected wait. */
static int daemon_start(struct daemon_state *d, struct cmdline *o, bool resumed)
{
	struct loop_maker makers[LOOPS_MAX];
	struct timespec t0, t1;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	d->n = daemon_loops(o);
	r = loops_init(&d->loops, d->n);
	if (r == 0)
		r = loop_make(d, o, 0, resumed);
	if (r == 0) {
		for (unsigned i = 1; i < d->n; i++) {
			struct loop_maker *m = &makers[i];

			*m = (struct loop_maker){.d = d, .o = o, .index = i, .resumed = resumed};
			m->threaded = pthread_create(&m->thread, NULL, loop_maker_run, m) == 0;
			if (!m->threaded)
				loop_maker_run(m);
		}
		for (unsigned i = 1; i < d->n; i++) {
			if (makers[i].threaded)
				pthread_join(makers[i].thread, NULL);
			if (r == 0)
				r = makers[i].r;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	d->made_ms =
		(double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	return r;
}

/* Loops 1.. on threads of their own, once the sessions a restart in place handed over
 * are theirs. */
static int daemon_threads(struct daemon_state *d)
{
	sigset_t all, old;
	int r = 0;

	/* The loops' threads take no signal: loop 0's handlers do. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (unsigned i = 1; i < d->n && r == 0; i++) {
		r = -pthread_create(&d->l[i].thread, NULL, loop_thread, &d->l[i]);
		d->l[i].threaded = r == 0;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

/* Every loop's thread joined, then each loop finished; loop 0's ran on main's. */
static void daemon_finish(struct daemon_state *d)
{
	loops_detach(&d->loops, 0);
	for (unsigned i = 1; i < d->n; i++) {
		if (!d->l[i].threaded)
			continue;
		pthread_join(d->l[i].thread, NULL);
	}
	for (unsigned i = 0; i < d->n; i++)
		if (d->l[i].made)
			loop_finish(&d->l[i]);
}

/* A start that failed: the loops already running drain (they have no clients yet) and
 * stop; what was made is released. */
static void daemon_abort(struct daemon_state *d)
{
	for (unsigned i = 1; i < d->n; i++) {
		if (!d->l[i].threaded)
			continue;
		uv_async_send(&d->l[i].stop);
		pthread_join(d->l[i].thread, NULL);
	}
	for (unsigned i = 0; i < d->n; i++) {
		if (!d->l[i].made)
			continue;
		server_finish(&d->l[i].srv);
		backend_destroy(&d->l[i].be);
	}
}

int main(int argc, char **argv)
{
	static struct daemon_state d;
	/* Static, as d: what the options point to stays reachable until the exit. */
	static struct cmdline o;
	sigset_t stop_signals;
	bool abandoned = false;
	int resume, fatal = 0;

	d.sigfd = -1;
	if (cmdline_parse(&o, argc, argv) < 0)
		return 2;
	raise_fd_limit(&o.srv);
	/* A stop asked for while starting (the socket already shows) is held until loop 0
	 * reads it (loop_start), then handled as any other; every thread keeps these
	 * blocked. */
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
	o.srv.argv = argv;
	resume = resume_handover_fd();
	if (socket_prepare(&o, resume) < 0)
		return 1;
	if (daemon_start(&d, &o, resume >= 0) < 0) {
		daemon_abort(&d);
		return 1;
	}
	log_serving(&o, &d.l[0].be, d.n, d.made_ms);
	if (resume >= 0) {
		bool owns_socket;

		resume_adopt(&d.l[0].srv, resume, &owns_socket);
		/* The first process made the socket file: server_finish unlinks it, as
		 * that process would have. */
		if (owns_socket)
			server_own_socket(&d.l[0].srv);
	}
	if (daemon_threads(&d) < 0) {
		log_err("main", "cannot start the loops' threads");
		daemon_abort(&d);
		return 1;
	}
	if (loop_start(&d, d.l[0].loop, &stop_signals) < 0) {
		daemon_abort(&d);
		return 1;
	}
	/* The device is initialised and the socket listens: clients can be served. */
	sd_notify(0, "READY=1");
	uv_run(d.l[0].loop, UV_RUN_DEFAULT);

	for (unsigned i = 0; i < d.n; i++) {
		abandoned |= d.l[i].srv.abandoned;
		if (d.l[i].srv.fatal)
			fatal = d.l[i].srv.fatal;
	}
	daemon_finish(&d);
	/* Abandoned: the backend's threads still run (see loop_finish); what they use of
	 * the options stays. */
	if (!abandoned) {
		registry_finish(&o.reg);
		loops_finish(&d.loops);
	}
	log_notice("main", "stopped");
	return fatal ? 1 : 0;
}
