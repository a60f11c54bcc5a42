/* Restarting in place after a device reset the backend cannot make in this process: on
 * CUDA a sticky fault (an illegal address, a trap) leaves the process unable to create
 * a context again, whatever cudaDeviceReset says; only a new process can. So the daemon
 * execs itself: same PID (systemd sees no restart), the listening socket and every
 * client's connection kept open across the exec, and the sessions handed over in a
 * memfd: a header (the server's reset history, the listening socket), then each
 * session's record (session-handover.c). Written and read by the same binary. */
#include "resume.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"
#include "server.h"
#include "session-handover.h"
#include "session.h"
#include "staging.h"

#define RESUME_MAGIC 0x5345515352455331ull /* "SEQSRES1" */
#define RESUME_ENV "SSEQD_RESUME_FD"

struct resume_header {
	uint64_t magic;
	uint64_t next_session, sessions_total;
	uint64_t resets, buffers_lost, last_ms, fault_ns;
	/* When the first process started (CLOCK_MONOTONIC, the realtime clock): the daemon's
	 * uptime counts from there across restarts in place. */
	uint64_t started_ns, started_unix_ns;
	char at[32];
	char cause[512];
	int32_t listen_fd;
	int32_t owns_socket; /* sseqd made the socket file: the last process unlinks it */
	uint32_t nsessions;
};

/* Replies written out as far as the clients take them now, without waiting: what a
 * client does not read yet goes into the hand-over, and the new process writes it. */
static void flush_all(struct server *srv)
{
	/* A flush may end its session (written out and closing, a write failed, the peer
	 * gone), which unlinks it: the next one is taken first. */
	for (struct session *s = srv->sessions, *next; s; s = next) {
		next = session_next(s);
		conn_flush(s);
	}
}

void resume_restart(struct server *srv)
{
	/* Every loop's sessions go (the others are parked: see reset_device); loop 0 holds
	 * the listening socket. */
	struct loops *l = srv->loops;
	const struct server *first = loops_server(l, 0) ? loops_server(l, 0) : srv;
	struct resume_header h = {.magic = RESUME_MAGIC,
		.next_session = atomic_load(&l->next_session),
		.resets = l->resets.count,
		.last_ms = l->resets.last_ms,
		.fault_ns = l->resets.fault_ns,
		.started_ns = srv->started_ns,
		.started_unix_ns = srv->started_unix_ns,
		.listen_fd = first->listen_fd,
		.owns_socket = first->opts.listen_fd < 0};
	char env[32];
	int out;

	for (unsigned i = 0; i < l->n; i++) {
		struct server *o = loops_server(l, i);

		if (!o)
			continue;
		staging_waits_answer(o, true);
		flush_all(o);
		h.sessions_total += o->count[SSEQ_COUNTER_SESSIONS_TOTAL];
		h.buffers_lost +=
			o->count[SSEQ_COUNTER_BUFFERS_LOST]; /* each counts what it lost */
		for (struct session *s = o->sessions; s; s = session_next(s))
			h.nsessions += session_is_connected(s);
	}
	memcpy(h.at, l->resets.at, sizeof(h.at));
	memcpy(h.cause, l->resets.cause, sizeof(h.cause));
	out = memfd_create("sseqd-resume", 0);
	if (out < 0 || !session_handover_put(out, &h, sizeof(h)))
		goto fail;
	for (unsigned i = 0; i < l->n; i++) {
		struct server *o = loops_server(l, i);

		for (struct session *s = o ? o->sessions : NULL; s; s = session_next(s))
			if (session_is_connected(s) && !session_handover_write(out, s))
				goto fail;
	}
	if (lseek(out, 0, SEEK_SET) < 0)
		goto fail;
	if (first->listen_fd >= 0)
		session_handover_keep(first->listen_fd);
	snprintf(env, sizeof(env), "%d", out);
	setenv(RESUME_ENV, env, 1);
	log_notice("reset",
		"restarting in place (exec, same PID) with %u sessions: this process "
		"cannot make a new device context",
		h.nsessions);
	/* Every thread blocks the stop signals (main.c reads them from a signalfd): one that
	 * came since loop 0 last looked stays pending through the exec, for the new process. */
	execv("/proc/self/exe", srv->opts.argv);
	log_err("reset", "cannot exec /proc/self/exe: %s", strerror(errno));
fail:
	log_err("reset",
		"cannot restart in place: %s; stopping so that the service manager "
		"restarts sseqd",
		strerror(errno));
	unsetenv(RESUME_ENV);
	if (out >= 0)
		close(out);
	srv->fatal = -EIO;
}

/* ---- the new process's side ---- */

int resume_handover_fd(void)
{
	const char *env = getenv(RESUME_ENV);
	char *end;
	long fd;

	if (!env || !*env)
		return -1;
	fd = strtol(env, &end, 10);
	unsetenv(RESUME_ENV);
	return *end || fd < 0 ? -1 : (int)fd;
}

int resume_listen_fd(int in)
{
	struct resume_header h;

	if (pread(in, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || h.magic != RESUME_MAGIC)
		return -1;
	return h.listen_fd;
}

int resume_adopt(struct server *srv, int in, bool *owns_socket)
{
	struct loops_resets *res = &srv->loops->resets;
	const unsigned nloops = srv->loops->n > 1 ? srv->loops->n : 1;
	struct resume_header h;
	unsigned failed = 0;
	int r = 0;

	*owns_socket = false;
	if (!session_handover_get(in, &h, sizeof(h)) || h.magic != RESUME_MAGIC) {
		close(in);
		return -EINVAL;
	}
	/* Before any session is adopted: the timeline's times count from started_ns. */
	for (unsigned i = 0; i < nloops; i++) {
		struct server *o = loops_server(srv->loops, i) ? loops_server(srv->loops, i) : srv;

		o->started_ns = h.started_ns;
		o->started_unix_ns = h.started_unix_ns;
	}
	res->count = h.resets;
	res->last_ms = h.last_ms;
	memcpy(res->at, h.at, sizeof(h.at));
	memcpy(res->cause, h.cause, sizeof(h.cause));
	res->at[sizeof(h.at) - 1] = res->cause[sizeof(h.cause) - 1] = '\0';
	srv->count[SSEQ_COUNTER_BUFFERS_LOST] = h.buffers_lost; /* counted on loop 0 from now on */
	uv_update_time(srv->loop); /* the deadlines handed over count from now */
	/* One session that cannot be taken over is closed; the others still are, unless the
	 * hand-over itself ends early (then what it named next is not known). */
	for (uint32_t i = 0; i < h.nsessions; i++) {
		/* Spread over the loops (--loops), as new connections are. */
		struct server *to = loops_server(srv->loops, i % nloops);
		int e = session_handover_adopt(in, to ? to : srv);

		if (e < 0) {
			failed++;
			r = r < 0 ? r : e;
		}
		if (e == -EIO) {
			failed += h.nsessions - i - 1;
			break;
		}
	}
	/* The first turn writes what the old process could not and runs the frames it
	 * left, whether or not a client sends anything. */
	for (unsigned i = 0; i < srv->loops->n; i++)
		if (loops_server(srv->loops, i))
			uv_async_send(&loops_server(srv->loops, i)->wake);
	atomic_store(&srv->loops->next_session, h.next_session);
	srv->count[SSEQ_COUNTER_SESSIONS_TOTAL] = h.sessions_total;
	/* The caller takes the socket over (server_own_socket): the server is below this
	 * file, not called back from it. */
	*owns_socket = h.owns_socket != 0;
	close(in);
	{
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		res->fault_ns = h.fault_ns;
		res->last_ms =
			((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec - h.fault_ns) /
			1000000u;
	}
	log_notice("reset",
		"device reset %" PRIu64 " done in %" PRIu64 " ms: restarted in place, %u sessions "
		"kept (their buffers and modules lost, their staging arenas kept)",
		h.resets, res->last_ms, h.nsessions - failed);
	if (failed)
		log_err("reset", "%u sessions could not be taken over by the restart in place%s",
			failed,
			r == -EIO ? " (the hand-over ended early: some connections stay open "
				    "unused until sseqd restarts)"
				  : "");
	return r;
}
