/* The sseqd server loop: accepts clients, observes the core (its done and trace hooks; the
 * core issues to the backend itself), drains backend completions (pushed from other
 * threads, woken with uv_async_send), runs again the sessions whose pause ended (pause.c:
 * after completions and at the turn's end) and, at the end of every loop turn, records the
 * events it needs and writes coalesced replies. */
#include "server.h"
#include "sseq-frame.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "buffer.h"
#include "conn.h"
#include "finding.h"
#include "log.h"
#include "module.h"
#include "ops.h"
#include "out.h"
#include "pause.h"
#include "reset.h"
#include "ring.h"
#include "session.h"
#include "spin.h"
#include "staging.h"
#include "trace.h"
#include "verify.h"

/* ---- what the server observes of the core -------------------------------------------- */

static void srv_done(void *ctx, uint64_t cookie, int status)
{
	ops_done((struct op_rec *)(uintptr_t)cookie, status);
}

static void srv_trace(void *ctx, const struct seq_trace *t)
{
	struct server *srv = ctx;
	const struct sbuf *sb = t->buf ? (const struct sbuf *)(uintptr_t)t->buf->user : NULL;

	trace_push(&srv->trace,
		&(struct trace_ent){
			.time_ns = server_now_ns() - srv->started_ns,
			.session = sb	 ? session_id(sb->owner)
				: t->buf ? t->buf->owner
					 : 0,
			.uid = sb ? session_ident(sb->owner)->uid : 0,
			.buffer = sb ? sb->handle : 0,
			.at = t->at,
			.producer = t->producer,
			.decision = (uint8_t)t->decision,
			.op = (uint8_t)t->op,
		});
	/* The dependencies of the op being submitted, for its timeline entry. */
	if (srv->submitting) {
		if (t->decision == SEQ_TRACE_WAIT)
			timeline_op_dep(&srv->submitting->tl, t->producer, TIMELINE_DEP_WAIT);
		else if (t->decision == SEQ_TRACE_ELIDE_OBSERVED)
			timeline_op_dep(&srv->submitting->tl, t->producer, TIMELINE_DEP_OBSERVED);
		else if (t->decision == SEQ_TRACE_ELIDE_LEGACY)
			timeline_op_dep(&srv->submitting->tl, t->producer, TIMELINE_DEP_LEGACY);
	}
}

/* ---- completion from backend threads -------------------------------------------------- */

/* The completion queue's wake hook: a push found it empty (any thread). A spinning loop
 * takes the queue on its next turn anyway: waking it would cost the pusher a write and the
 * loop a read of the wake-up's eventfd and an empty drain, per completion. Sequentially
 * consistent against server_on_spin's store and take: either the loop's last take sees
 * the entry or this load sees it stopped. */
static void server_wake(void *arg)
{
	struct server *srv = arg;

	if (atomic_load(&srv->spinning))
		return;
	uv_async_send(&srv->wake);
}

/* ---- backpressure: who is paused, and when they resume -------------------------------- */

/* A paused session runs again (pause.c says which, and in what order). */
static void server_resume_one(struct session *s)
{
	/* The pause was the daemon's, not the client's: a frame it held back, or one the
	 * client could not send meanwhile, gets its whole --frame-timeout from now. */
	conn_frame_restart(s);
	conn_process(s); /* may pause it again, on a list of its own */
	conn_ring_take(s); /* what the client wrote to its ring meanwhile */
	conn_flush(s);
}

/* At the turn's end: the sessions on the resume list (PAUSE_TURN). */
static void server_resume_pending(struct server *srv)
{
	pause_run_turn(srv, server_resume_one);
}

/* After completions: the sessions of the streams that drained, then the resume list. */
static void server_resume_streams(struct server *srv)
{
	pause_run_streams(srv, server_resume_one);
}

static void server_drain(struct server *srv);

static void server_on_mail(struct server *srv);

/* Each follower its new trace entries. */
static void server_follow_all(struct server *srv)
{
	for (struct session *s = srv->nfollowing ? srv->sessions : NULL; s; s = session_next(s))
		trace_follow(s); /* only a follower's */
}

/* Several loops: every 10 ms while a session follows (the turn's end writes them). */
static void server_on_follow(uv_timer_t *t)
{
	struct server *srv = t->data;

	if (!srv->nfollowing) {
		uv_timer_stop(&srv->follow);
		return;
	}
	server_follow_all(srv);
}

static void server_on_wake(uv_async_t *h)
{
	struct server *srv = h->data;

	if (atomic_load_explicit(&srv->mail, memory_order_relaxed))
		server_on_mail(srv);
	server_drain(srv);
}

/* For a short while after it sent something (--spin-us), poll the socket and the
 * completion queue on each loop turn instead of sleeping: a waiting client then hears of
 * its completion, and its next request is read, without a sleep and wake-up in between
 * (latency-bound clients pay for every microsecond). The loop still never waits on the
 * GPU: it only looks at the queue. Only while a core is free (spin.h): on a machine
 * with none the spin would hold back the clients and the backend's threads. */
static void server_on_spin(uv_idle_t *h)
{
	struct server *srv = h->data;

	server_drain(srv);
	conn_rings_take(srv);
	/* Not stopped when the device goes idle: the client that sent the last request is
	 * likely to send the next one within the window, and then no wake-up is paid. */
	if (server_now_ns() > srv->spin_until_ns || !spin_core_free()) {
		/* From here a push wakes the loop, and a client that writes to its ring rings
		 * the doorbell; what came before is taken now (a client that wrote before it
		 * saw awake at 0 rang none: the fence orders the store before these looks, as
		 * the client's orders its tail before its look at awake), and if that left
		 * answers to write or sessions to resume the loop turns once more before it
		 * sleeps: the turn's end, after the poll, does both. */
		atomic_store(&srv->spinning, false);
		ring_awake_all(srv, false);
		atomic_thread_fence(memory_order_seq_cst);
		server_drain(srv);
		conn_rings_take(srv);
		if (srv->dirty || srv->resume) {
			atomic_store(&srv->spinning, true);
			ring_awake_all(srv, true);
			return;
		}
		uv_idle_stop(&srv->spin);
	}
}

static void server_drain_batch(struct server *srv, struct cq_batch b);

static void server_drain(struct server *srv)
{
	struct cq_batch b = cq_take(srv->cq);
	uint64_t t0;

	if (!b.n && !srv->found.n && !srv->pin_waits) {
		cq_done(srv->cq, b);
		return;
	}
	t0 = server_busy_begin(srv);
	server_drain_batch(srv, b);
	if (srv->pin_waits)
		staging_waits_answer(srv, false);
	server_busy_end(srv, t0);
}

static void server_drain_batch(struct server *srv, struct cq_batch b)
{
	/* After the take: a finding made before a completion taken here is named now,
	 * while its op is still in flight. */
	if (srv->found.n)
		finding_drain(srv);

	srv->drain_ns = b.n ? server_now_ns() : 0;
	for (size_t i = 0; i < b.n; i++) {
		const struct completion_ent *e = &b.ents[i];
		/* A cancel at the end of a drain fails every stream on purpose: main says so. */
		if (e->status < 0 && e->status != -ESHUTDOWN)
			log_err("device", "stream %u failed at or before %u:%" PRIu64 ": %s",
				e->p.stream, e->p.stream, e->p.seq, strerror(-e->status));
		/* A lost context: name the culprit before its failures complete anything. */
		if (e->status < 0 && backend_device_lost(&srv->backend)) {
			const uint32_t first_failed = e->p.stream;

			cq_done(srv->cq, b);
			srv->drain_ns = 0;
			reset_device(srv, first_failed);
			server_resume_streams(srv);
			return;
		}
		if (srv->verify)
			verify_complete(srv->verify, e->p);
		seq_complete(srv->seq, e->p, e->status);
	}
	srv->drain_ns = 0;
	cq_done(srv->cq, b);
	if (b.n)
		server_resume_streams(srv);
}

/* Nothing to do here: while this runs, the loop polls without sleeping, and the turn's
 * end processes the resumed sessions' next frames. */
static void server_on_backlog(uv_idle_t *h)
{
}

/* End of a loop turn: make completion of this turn's work observable, then write. */
static void server_on_turn_end(uv_check_t *h)
{
	struct server *srv = h->data;
	const uint64_t t0 = srv->dirty || srv->resume ? server_busy_begin(srv) : 0;

	if (srv->resume)
		server_resume_pending(srv);
	seq_flush(srv->seq);
	if (srv->dirty && srv->opts.spin_us) {
		srv->spin_until_ns = server_now_ns() + (uint64_t)srv->opts.spin_us * 1000u;
		if (!atomic_load(&srv->spinning)) {
			atomic_store(&srv->spinning, true);
			ring_awake_all(srv, true);
			uv_idle_start(&srv->spin, server_on_spin);
		}
	}
	if (srv->loops->n == 1)
		server_follow_all(srv);
	else if (srv->nfollowing && !uv_is_active((uv_handle_t *)&srv->follow))
		uv_timer_start(&srv->follow, server_on_follow, 10, 10);
	for (struct session *s; (s = out_next_dirty(srv));)
		conn_flush(s);
	/* Frames left for the next turn: that turn comes without a sleep in poll. */
	if (srv->resume)
		uv_idle_start(&srv->backlog, server_on_backlog);
	else
		uv_idle_stop(&srv->backlog);
	server_busy_end(srv, t0);
}

/* ---- listening ------------------------------------------------------------------------ */

/* A refusal before there is a session: a tag-0 notice, which the client reads as the
 * answer to its Hello. The socket is new and empty, so the send fits. */
static void server_refuse(int fd, Sseq__Status status, const char *why)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__Reply r = SSEQ__REPLY__INIT;
	uint8_t buf[512];
	size_t len;

	r.status = status;
	r.message = (char *)why;
	m.body_case = SSEQ__MESSAGE__BODY_REPLY;
	m.reply = &r;
	len = sseq__message__get_packed_size(&m);
	if (len + 4 <= sizeof(buf)) {
		frame_put_len(buf, (uint32_t)len);
		sseq__message__pack(&m, buf + 4);
		(void)!send(fd, buf, len + 4, MSG_DONTWAIT | MSG_NOSIGNAL);
	}
}

static void server_refused_close(struct server *srv, unsigned i)
{
	char scratch[4096];
	int fd = srv->refused[i].fd;

	for (int n = 0; n < 16 && recv(fd, scratch, sizeof(scratch), MSG_DONTWAIT) > 0; n++)
		;
	close(fd);
	srv->refused[i] = srv->refused[--srv->nrefused];
}

static void server_on_refused_timer(uv_timer_t *t)
{
	struct server *srv = t->data;
	uint64_t now = server_now_ns();

	for (unsigned i = srv->nrefused; i-- > 0;)
		if (srv->refused[i].until_ns <= now)
			server_refused_close(srv, i);
	if (!srv->nrefused)
		uv_timer_stop(&srv->refused_timer);
}

/* Close a refused connection 100 ms from now, once its Hello is in. */
static void server_refused_hold(struct server *srv, int fd)
{
	if (srv->nrefused == sizeof(srv->refused) / sizeof(srv->refused[0]))
		server_refused_close(srv, 0);
	srv->refused[srv->nrefused].fd = fd;
	srv->refused[srv->nrefused].until_ns = server_now_ns() + 100000000u;
	srv->nrefused++;
	shutdown(fd, SHUT_WR); /* the notice is all it gets */
	if (!uv_is_active((uv_handle_t *)&srv->refused_timer))
		uv_timer_start(&srv->refused_timer, server_on_refused_timer, 20, 20);
}

/* A refused connection, in the log: the first at once, then one line a second at most
 * with how many more were refused (a client reconnecting in a loop would otherwise fill
 * the journal and push out what matters). The sweep reports the rest. */
static void server_refused_log(struct server *srv, int pid, uint32_t uid, const char *why)
{
	uint64_t now = server_now_ns();

	if (srv->refused_logged_ns && now - srv->refused_logged_ns < 1000000000u) {
		srv->refused_unlogged++;
		return;
	}
	if (srv->refused_unlogged)
		log_notice("server",
			"refused a connection from pid %d uid %u: %s (and %" PRIu64
			" more since the last report)",
			pid, uid, why, srv->refused_unlogged);
	else
		log_notice("server", "refused a connection from pid %d uid %u: %s", pid, uid, why);
	srv->refused_logged_ns = now;
	srv->refused_unlogged = 0;
}

/* The refusals no line told of yet: from the sweep once their second is over, and at
 * exit (force). */
static void server_refused_log_rest(struct server *srv, bool force)
{
	if (!srv->refused_unlogged ||
		(!force && server_now_ns() - srv->refused_logged_ns < 1000000000u))
		return;
	log_notice("server", "refused %" PRIu64 " more connections since the last report",
		srv->refused_unlogged);
	srv->refused_logged_ns = server_now_ns();
	srv->refused_unlogged = 0;
}

static void server_on_accept(uv_poll_t *h, int status, int events);

static void server_on_accept_rest(uv_timer_t *t)
{
	struct server *srv = t->data;

	if (!srv->stopping)
		uv_poll_start(&srv->listen_poll, UV_READABLE, server_on_accept);
}

/* accept() failed for a reason that another try now would only repeat (no descriptors,
 * no memory): rest the listener for a moment instead of spinning on it, and log once
 * per ten seconds, with the count of the failures in between. */
static void server_accept_failed(struct server *srv, int err)
{
	uint64_t now = server_now_ns();

	srv->count[SSEQ_COUNTER_ACCEPT_ERRORS]++;
	if (now - srv->accept_logged_ns > 10000000000u || !srv->accept_logged_ns) {
		log_warn("server",
			"accept failed: %s; not accepting for 100 ms (%" PRIu64
			" more failures since the last report)",
			strerror(err), srv->accept_unlogged);
		srv->accept_logged_ns = now;
		srv->accept_unlogged = 0;
	} else {
		srv->accept_unlogged++;
	}
	uv_poll_stop(&srv->listen_poll);
	uv_timer_start(&srv->accept_rest, server_on_accept_rest, 100, 0);
}

/* An admitted connection, served on this loop. */
static void server_serve(struct server *srv, int fd, uint32_t uid)
{
	struct session *s = conn_accept(srv, fd);

	if (s) {
		session_admitted(s);
	} else {
		close(fd);
		loops_leave(srv->loops, srv->loop_index, uid);
	}
}

static void server_on_accept(uv_poll_t *h, int status, int events)
{
	struct server *srv = h->data;
	unsigned target;

	for (int i = 0; i < 64; i++) {
		int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ucred cred = {0};
		socklen_t len = sizeof(cred);
		char why[160];

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
				errno == ENOMEM)
				server_accept_failed(srv, errno);
			else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				log_warn("server", "accept failed: %s", strerror(errno));
			return;
		}
		if (srv->stopping) {
			close(fd);
			continue;
		}
		getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
		if (loops_admit(srv->loops, &srv->opts.limits, cred.uid, why, sizeof(why))) {
			srv->count[SSEQ_COUNTER_CONNECTIONS_REFUSED]++;
			server_refused_log(srv, (int)cred.pid, cred.uid, why);
			server_refuse(fd, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED, why);
			server_refused_hold(srv, fd);
			continue;
		}
		target = loops_place(srv->loops);
		if (target == srv->loop_index)
			server_serve(srv, fd, cred.uid);
		else
			loops_post(srv->loops, target, fd, cred.uid);
	}
}

static void server_mail(struct server *srv, unsigned what)
{
	atomic_fetch_or(&srv->mail, what);
	uv_async_send(&srv->wake);
}

static void server_handoff_wake(struct server *srv)
{
	server_mail(srv, SERVER_MAIL_HANDOFF);
}

static void server_park_wake(struct server *srv)
{
	server_mail(srv, SERVER_MAIL_PARK);
}

/* Another loop stopped the world: park until it resumes. Then the connections loop 0
 * accepted for this loop. */
static void server_on_mail(struct server *srv)
{
	const unsigned mail = atomic_exchange(&srv->mail, 0);
	struct loops_conn c;

	if (mail & SERVER_MAIL_PARK)
		loops_park(srv->loops, srv->loop_index);
	while ((mail & SERVER_MAIL_HANDOFF) && loops_take(srv->loops, srv->loop_index, &c)) {
		if (srv->stopping) {
			close(c.fd);
			loops_leave(srv->loops, srv->loop_index, c.uid);
		} else {
			server_serve(srv, c.fd, c.uid);
		}
	}
}

static void server_on_sweep(uv_timer_t *t)
{
	struct server *srv = t->data;
	uint64_t now = server_loop_ns(srv);

	for (struct session *s = srv->sessions, *next; s; s = next) {
		next = session_next(s);
		conn_sweep(s, now);
	}
	server_refused_log_rest(srv, false);
}

/* Whether a daemon answers on path (then it is not ours to replace). */
static bool server_path_live(const struct sockaddr_un *addr)
{
	int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool live = probe >= 0 && connect(probe, (const struct sockaddr *)addr, sizeof(*addr)) == 0;

	if (probe >= 0)
		close(probe);
	return live;
}

/* What a non-socket at a path is, for the refusal. */
static const char *server_file_kind(mode_t mode)
{
	return S_ISREG(mode)	? "a regular file"
		: S_ISDIR(mode) ? "a directory"
		: S_ISLNK(mode) ? "a symbolic link"
				: "not a socket";
}

/* Only a socket (a dead daemon's) may be replaced at path: anything else there is
 * someone's file, named by mistake, and is kept. 0 when path is free or a socket. */
static int server_path_replaceable(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return 0; /* absent, or unreachable: bind and rename say why */
	if (S_ISSOCK(st.st_mode))
		return 0;
	log_err("server",
		"%s exists and is %s: refusing to replace it with the socket (remove it, or "
		"pass another --socket PATH)",
		path, server_file_kind(st.st_mode));
	return -EEXIST;
}

void server_own_socket(struct server *srv)
{
	struct stat st;

	srv->opts.listen_fd = -1;
	srv->socket_dev = srv->socket_ino = 0;
	if (lstat(srv->opts.socket_path, &st) == 0 && S_ISSOCK(st.st_mode)) {
		srv->socket_dev = (uint64_t)st.st_dev;
		srv->socket_ino = (uint64_t)st.st_ino;
	}
}

/* At exit: unlink the path only while it is still the socket this daemon made (it may
 * have been replaced by someone else's file or socket since). */
static void server_unlink_socket(const struct server *srv)
{
	struct stat st;

	if (srv->socket_ino && lstat(srv->opts.socket_path, &st) == 0 && S_ISSOCK(st.st_mode) &&
		(uint64_t)st.st_dev == srv->socket_dev && (uint64_t)st.st_ino == srv->socket_ino)
		unlink(srv->opts.socket_path);
}

/* The socket appears at its path only once it listens with its mode set: bound under a
 * temporary name with a tight umask (the umask alone could let any local user connect),
 * given its mode, listening, then renamed over the path (which replaces a stale socket
 * from a dead daemon, and nothing else). A client that finds the path can connect at
 * once. */
static int server_listen(struct server *srv)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX}, tmp = {.sun_family = AF_UNIX};
	const char *path = srv->opts.socket_path;
	mode_t old;
	int fd, r;

	if (snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path) >=
			(int)sizeof(addr.sun_path) ||
		snprintf(tmp.sun_path, sizeof(tmp.sun_path), "%s.%d", path, (int)getpid()) >=
			(int)sizeof(tmp.sun_path)) {
		log_err("server", "socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	if (server_path_live(&addr)) {
		log_err("server", "another daemon is serving %s", path);
		return -EADDRINUSE;
	}
	if ((r = server_path_replaceable(path)) < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	unlink(tmp.sun_path);
	old = umask(0177);
	r = bind(fd, (const struct sockaddr *)&tmp, sizeof(tmp)) < 0 ? -errno : 0;
	umask(old);
	if (r == 0 &&
		(chmod(tmp.sun_path, (mode_t)srv->opts.limits.socket_mode) < 0 ||
			listen(fd, 128) < 0 || rename(tmp.sun_path, path) < 0))
		r = -errno;
	if (r < 0) {
		unlink(tmp.sun_path);
		close(fd);
		return r;
	}
	srv->listen_fd = fd;
	server_own_socket(srv);
	return 0;
}

static pthread_once_t kinds_once = PTHREAD_ONCE_INIT;

static void server_register_kinds(void)
{
	buffer_register_kind();
	staging_register_kind();
	smodule_register_kind();
}

int server_init(struct server *srv, uv_loop_t *loop, const struct server_options *opts,
	const struct backend *backend, struct cq *cq)
{
	const struct seq_observer observer = {.ctx = srv, .done = srv_done, .trace = srv_trace};
	int r;

	memset(srv, 0, sizeof(*srv));
	srv->loop = loop;
	srv->opts = *opts;
	if (opts->loops) {
		srv->loops = opts->loops;
		srv->loop_index = opts->loop_index;
	} else {
		loops_init(&srv->own_loops, 1);
		srv->loops = &srv->own_loops;
	}
	srv->backend = *backend;
	srv->cq = cq;
	srv->listen_fd = -1;
	srv->started_ns = server_now_ns();
	finding_init(&srv->found);
	/* What each kind of handle releases when its session goes: once, as the loops
	 * are made side by side. */
	pthread_once(&kinds_once, server_register_kinds);
	{
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		srv->started_unix_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	}

	/* The core issues to the backend directly (through the checker with --verify); the
	 * server only observes. */
	if (opts->verify) {
		struct seq_layout layout;

		r = seq_layout_init(&layout, &opts->seq);
		if (r == 0)
			r = verify_create(&srv->verify, &layout, &backend->ops->dev, backend->ctx,
				finding_log_verify, srv);
		if (r < 0) {
			log_err("server", "cannot create the schedule checker: %s", strerror(-r));
			return r;
		}
		r = seq_create(&srv->seq, &opts->seq, verify_device(), srv->verify, &observer);
	} else {
		r = seq_create(&srv->seq, &opts->seq, &backend->ops->dev, backend->ctx, &observer);
	}
	if (r < 0) {
		log_err("server", "cannot create the sequencer: %s", strerror(-r));
		return r;
	}
	/* Room for every completion that can be outstanding: a backend thread's push then
	 * never allocates. */
	r = cq_reserve(cq,
		cq_room(seq_layout(srv->seq)->nstreams,
			opts->seq.window ? opts->seq.window : SEQ_DEFAULT_WINDOW));
	if (r < 0)
		return r;
	r = ops_points_init(srv);
	if (r < 0)
		return r;
	r = timeline_init(&srv->timeline, 0);
	if (r < 0)
		return r;

	if (srv->loop_index > 0) {
		/* Loop 0 accepts for every loop. */
	} else if (opts->listen_fd >= 0) {
		srv->listen_fd = opts->listen_fd;
	} else {
		r = server_listen(srv);
		if (r < 0) {
			log_err("server", "cannot listen on %s: %s%s", opts->socket_path,
				strerror(-r),
				r == -EACCES || r == -EPERM || r == -EROFS
					? " (pass --socket PATH to listen where you may create "
					  "files)"
					: "");
			return r;
		}
	}
	uv_async_init(loop, &srv->wake, server_on_wake);
	srv->wake.data = srv;
	finding_open(&srv->found);
	cq_set_wake(cq, server_wake, srv);
	uv_idle_init(loop, &srv->spin);
	srv->spin.data = srv;
	uv_idle_init(loop, &srv->backlog);
	srv->backlog.data = srv;
	uv_check_init(loop, &srv->turn_end);
	srv->turn_end.data = srv;
	uv_check_start(&srv->turn_end, server_on_turn_end);
	uv_timer_init(loop, &srv->sweep);
	srv->sweep.data = srv;
	uv_timer_init(loop, &srv->follow);
	srv->follow.data = srv;
	uv_timer_start(&srv->sweep, server_on_sweep, 1000, 1000);
	uv_timer_init(loop, &srv->accept_rest);
	srv->accept_rest.data = srv;
	uv_timer_init(loop, &srv->refused_timer);
	srv->refused_timer.data = srv;
	loops_attach(srv->loops, srv->loop_index, srv, server_handoff_wake, server_park_wake);
	if (srv->listen_fd >= 0) {
		uv_poll_init(loop, &srv->listen_poll, srv->listen_fd);
		srv->listen_poll.data = srv;
		uv_poll_start(&srv->listen_poll, UV_READABLE, server_on_accept);
		srv->listening = true;
	}
	return 0;
}

void server_finish(struct server *srv)
{
	/* The other loops no longer read this one's state, nor hand it connections. */
	if (srv->loops)
		loops_detach(srv->loops, srv->loop_index);
	/* Backend threads may still report until the backend is destroyed: from now on
	 * they log directly (the lock is never destroyed for that reason). */
	finding_close(&srv->found);
	while (srv->nrefused)
		server_refused_close(srv, 0);
	server_refused_log_rest(srv, true);
	while (srv->sessions)
		conn_close(srv->sessions);
	/* Abandoned: the core still holds what ops on the device use (their buffers, and
	 * through their records the staging and modules); releasing it would free memory
	 * under the device. It stays, reachable from srv, until the process exits. */
	if (srv->seq && !srv->abandoned)
		seq_destroy(srv->seq);
	if (!srv->abandoned)
		srv->seq = NULL;
	free(srv->points);
	srv->points = NULL;
	timeline_finish(&srv->timeline);
	if (!srv->abandoned) {
		verify_destroy(srv->verify); /* the abandoned core's device table */
		srv->verify = NULL;
	}
	while (srv->op_free) {
		struct op_rec *r = srv->op_free;
		srv->op_free = r->next_free;
		free(r);
	}
	if (srv->listen_fd >= 0 && srv->opts.listen_fd < 0) {
		close(srv->listen_fd);
		server_unlink_socket(srv);
	}
	if (srv->loops == &srv->own_loops)
		loops_finish(&srv->own_loops);
	srv->loops = NULL;
}

bool server_idle(const struct server *srv)
{
	for (unsigned x = 0; x < seq_stream_count(srv->seq); x++) {
		struct seq_stream_info si;
		seq_stream_info(srv->seq, x, &si);
		if (si.completed < si.issued)
			return false;
	}
	return true;
}

void server_stop(struct server *srv)
{
	if (srv->stopping)
		return;
	srv->stopping = true;
	if (srv->listening)
		uv_poll_stop(&srv->listen_poll);
	uv_timer_stop(&srv->accept_rest);
	/* Clients hear it now; their work in flight still completes and is reported, and
	 * new requests are refused with SHUTTING_DOWN until the drain ends. */
	for (struct session *s = srv->sessions; s; s = session_next(s))
		out_notice(s, SSEQ__STATUS__STATUS_SHUTTING_DOWN,
			"sseqd is stopping: work in flight completes, new work is refused");
}

void server_abandon(struct server *srv)
{
	srv->abandoned = true;
}

void server_drop_clients(struct server *srv)
{
	/* A flush may end its session (a write failed, the client hung up): next first. */
	for (struct session *s = srv->sessions, *next; s; s = next) {
		next = session_next(s);
		conn_flush(s);
	}
	while (srv->sessions)
		conn_close(srv->sessions);
}

/* Over every loop (main asks with the world stopped); with one loop, srv's own. */
void server_summary(const struct server *srv, char *buf, size_t size)
{
	uint64_t inflight = 0, done = 0, waits = 0;
	unsigned clients = 0;
	const struct loops_resets *r = &srv->loops->resets;

	for (unsigned i = 0; i < srv->loops->n; i++) {
		const struct server *l = srv->loops->n == 1 ? srv : loops_server(srv->loops, i);
		const struct seq_counters *c;

		if (!l)
			continue;
		c = seq_counters(l->seq);
		for (struct session *s = l->sessions; s; s = session_next(s))
			inflight += session_counts(s)->inflight;
		clients += l->nsessions;
		done += c->ops_completed;
		waits += c->waits_enqueued;
	}
	int n = snprintf(buf, size,
		"%u clients, %" PRIu64 " ops in flight, %" PRIu64 " ops done, %" PRIu64
		" waits enqueued",
		clients, inflight, done, waits);

	if (r->count && n >= 0 && (size_t)n < size)
		snprintf(buf + n, size - (size_t)n,
			"; device resets: %" PRIu64 ", the last at %s caused by %s", r->count,
			r->at, r->cause);
}

static void server_close_cb(uv_handle_t *h)
{
}

void server_close_handles(struct server *srv)
{
	uv_close((uv_handle_t *)&srv->wake, server_close_cb);
	uv_close((uv_handle_t *)&srv->turn_end, server_close_cb);
	uv_close((uv_handle_t *)&srv->spin, server_close_cb);
	uv_close((uv_handle_t *)&srv->backlog, server_close_cb);
	if (srv->listening)
		uv_close((uv_handle_t *)&srv->listen_poll, server_close_cb);
	uv_close((uv_handle_t *)&srv->sweep, server_close_cb);
	uv_close((uv_handle_t *)&srv->follow, server_close_cb);
	uv_close((uv_handle_t *)&srv->accept_rest, server_close_cb);
	uv_close((uv_handle_t *)&srv->refused_timer, server_close_cb);
}
