/* Device resets: a fault that poisons the GPU context (an illegal address, a trap) is
 * contained here. The loop names the culprit from the ops in flight, has the backend
 * tear the context down and build it again, fails what was in flight with DEVICE_ERROR
 * (seq_reset), loads the sessions' modules again and keeps serving: new sessions work at
 * once, and a buffer that lived on the old context answers every later use with the
 * reset that lost it instead of wrong data. With several loops (--loops) the loop that
 * saw the fault does it for all of them, the others parked meanwhile. */
#include "reset.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handles.h"
#include "log.h"
#include "module.h"
#include "ops.h"
#include "resume.h"
#include "server.h"
#include "session.h"
#include "verify.h"

/* "session 5 (gw3, pid 1234), kernel oob_write at point (3, 17)" for the op at p. */
static int describe_point(struct server *srv, struct seq_point p, char *out, size_t size)
{
	const struct op_rec *rec = ops_point_op(srv, p);
	const struct session_ident *s;

	if (!rec)
		return snprintf(
			out, size, "an operation at point (%u, %" PRIu64 ")", p.stream, p.seq);
	s = session_ident(rec->session);
	return snprintf(out, size,
		"session %" PRIu64 " (%s, pid %u), %s%s at point (%u, %" PRIu64 ")", s->id,
		s->worker[0]	     ? s->worker
			: s->name[0] ? s->name
				     : "no name",
		s->pid, rec->what[0] ? "kernel " : "", rec->what[0] ? rec->what : "an operation",
		p.stream, p.seq);
}

static struct session *point_session(struct server *srv, struct seq_point p)
{
	const struct op_rec *rec = ops_point_op(srv, p);

	return rec ? rec->session : NULL;
}

/* With --isolate-faults, a suspect's kernels run alone from now on. */
static void isolate(struct server *srv, struct session *s)
{
	if (!srv->opts.isolate_faults || !s || session_work(s)->isolated)
		return;
	session_work(s)->isolated = true;
	log_about(LOG_LVL_NOTICE, "reset", SESSION_WHO(s),
		"client %" PRIu64 " (%s, pid %u): a suspect: its kernels run alone "
		"from now on (--isolate-faults)",
		session_id(s), session_ident(s)->worker, session_ident(s)->pid);
}

/* The op running on stream x of o (its first incomplete point): false when none is. */
static bool running_point(struct server *o, uint32_t x, struct seq_point *p)
{
	struct seq_stream_info si;

	seq_stream_info(o->seq, x, &si);
	*p = (struct seq_point){x, si.completed + 1};
	return si.completed < si.issued;
}

/* Every op running on o's streams but `skip`, as suspects after the n bytes of out
 * written so far (with its loop's number when loop >= 0): they may have caused the fault
 * as well. Returns the new length. */
static size_t name_suspects(struct server *o, uint32_t skip, int loop, char *out, size_t n,
	size_t size, unsigned *others)
{
	for (uint32_t x = 0; x < seq_stream_count(o->seq) && n < size; x++) {
		struct seq_point p;

		if (x == skip || !running_point(o, x, &p))
			continue;
		n += (size_t)snprintf(
			out + n, size - n, "%s", (*others)++ ? "; " : "; also running then: ");
		if (n < size && loop >= 0)
			n += (size_t)snprintf(out + n, size - n, "(loop %d) ", loop);
		if (n < size)
			n += (size_t)describe_point(o, p, out + n, size - n);
		isolate(o, point_session(o, p));
	}
	return n;
}

/* Whether the op at p is a kernel (its record names one). */
static bool point_is_kernel(struct server *o, struct seq_point p)
{
	const struct op_rec *rec = ops_point_op(o, p);

	return rec && rec->what[0];
}

/* A kernel running on one of o's streams (the lowest stream's), if any. */
static bool running_kernel(struct server *o, struct seq_point *p)
{
	for (uint32_t x = 0; x < seq_stream_count(o->seq); x++)
		if (running_point(o, x, p) && point_is_kernel(o, *p))
			return true;
	return false;
}

/* The culprit: the op that stream `first` (whose event failed first) was running, and
 * beside it every other op then running (the first incomplete point of each stream, on
 * every loop), as suspects: a poisoned context fails every stream's events at once, so the
 * first failure is a strong hint, exact only when nothing else ran, as for a session
 * whose kernels run alone (--isolate-faults). But a fault that poisons the context (an
 * illegal address, a trap) is a kernel's: when the first failure was a copy's, the
 * culprit is a kernel then running, on this loop if one ran here, else on another (an
 * H200 run blamed a bystander's copy on the loop that saw the fault first while the
 * faulting kernel ran on another loop). Returns the culprit's session, if known. */
static struct session *name_culprit(struct server *srv, uint32_t first, char *out, size_t size)
{
	struct server *at = srv; /* the culprit's loop */
	struct seq_point p, k;
	struct session *culprit;
	size_t n;
	unsigned others = 0;

	running_point(srv, first, &p);
	if (!point_is_kernel(srv, p)) {
		bool found = running_kernel(srv, &k);

		for (unsigned i = 0; !found && i < srv->loops->n; i++) {
			struct server *o = loops_server(srv->loops, i);

			if (o && o != srv && running_kernel(o, &k)) {
				at = o;
				found = true;
			}
		}
		if (found)
			p = k;
	}
	culprit = point_session(at, p);
	n = (size_t)describe_point(at, p, out, size);
	if (culprit && session_work(culprit)->isolated) {
		snprintf(out + n, size - n, " (it ran alone: exact)");
		return culprit;
	}
	n = name_suspects(srv, at == srv ? p.stream : UINT32_MAX, -1, out, n, size, &others);
	/* The other loops' ops ran on the same context (parked now: see reset_device). */
	for (unsigned i = 0; i < srv->loops->n && n < size; i++) {
		struct server *o = loops_server(srv->loops, i);

		if (o && o != srv)
			n = name_suspects(
				o, o == at ? p.stream : UINT32_MAX, (int)i, out, n, size, &others);
	}
	if (others)
		isolate(at, culprit);
	return culprit;
}

/* The sessions' modules, loaded again on the new context; their cached functions are
 * looked up afresh. A module that no longer loads stays lost: its launches say so. */
static void reload_module(struct smodule *m, void *arg)
{
	const struct session *s = arg;

	smodule_forget_functions(m);
	m->module = NULL;
	if (backend_module_load(&session_server(s)->backend, m->real, &m->module) < 0)
		log_warn("reset", "client %" PRIu64 ": module %s does not load again",
			session_id(s), m->path);
}

static void reload_modules(struct server *srv)
{
	for (struct session *s = srv->sessions; s; s = session_next(s))
		smodule_foreach(s, reload_module, s);
}

void reset_device(struct server *srv, uint32_t first_failed)
{
	struct timespec t0, t1;
	struct cq_batch b;
	time_t now = time(NULL);
	struct tm tm;
	struct session *culprit;
	struct loops_resets *h = &srv->loops->resets;
	const bool several = srv->loops->n > 1;
	int r;

	/* The other loops wait, parked, until the daemon serves again (or it execs). */
	loops_stop_world(srv->loops, srv->loop_index);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	h->fault_ns = (uint64_t)t0.tv_sec * 1000000000u + (uint64_t)t0.tv_nsec;
	h->count++;
	gmtime_r(&now, &tm);
	strftime(h->at, sizeof(h->at), "%Y-%m-%dT%H:%M:%SZ", &tm);
	culprit = name_culprit(srv, first_failed, h->cause, sizeof(h->cause));
	/* The journal's fields name the likely culprit's session and worker. */
	log_about(LOG_LVL_ERR, "reset", culprit ? SESSION_WHO(culprit) : NULL,
		"device reset %" PRIu64 ": a fault poisoned the GPU context, caused by %s; "
		"failing the work in flight and building the context again",
		h->count, h->cause);
	/* The context is every loop's: none may build it again under the others, so with
	 * several loops it is a restart in place, for all of them. */
	r = srv->opts.reset_exec || several ? -ENOTRECOVERABLE : backend_reset(&srv->backend);
	/* What the old context's threads reported while they stopped is moot: seq_reset
	 * fails all of it. */
	for (unsigned i = 0; i < srv->loops->n; i++) {
		struct server *o = loops_server(srv->loops, i);

		if (o) {
			b = cq_take(o->cq);
			cq_done(o->cq, b);
		}
	}
	if (r < 0 && r != -ENOTRECOVERABLE)
		log_warn("reset",
			"the device cannot be built again in this process (%s): "
			"restarting in place",
			strerror(-r));
	else if (r == 0)
		reload_modules(srv);
	for (unsigned i = 0; i < srv->loops->n; i++) {
		struct server *o = loops_server(srv->loops, i);

		if (!o)
			continue;
		o->resetting = true;
		o->count[SSEQ_COUNTER_BUFFERS_LOST] += seq_reset(o->seq, -EIO);
		o->resetting = false;
		if (o->verify)
			verify_reset(o->verify);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	h->last_ms = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000u +
		(uint64_t)(t1.tv_nsec - t0.tv_nsec) / 1000000;
	if (r == 0) {
		uint64_t lost = 0;

		for (unsigned i = 0; i < srv->loops->n; i++)
			if (loops_server(srv->loops, i))
				lost += loops_server(srv->loops, i)
						->count[SSEQ_COUNTER_BUFFERS_LOST];
		log_notice("reset",
			"device reset %" PRIu64 " done in %" PRIu64
			" ms: serving again (buffers lost so far: %" PRIu64 ")",
			h->count, h->last_ms, lost);
		loops_resume_world(srv->loops);
		return;
	}
	/* Only a new process can: exec, keeping the PID, the socket and the sessions. */
	resume_restart(srv); /* returns only if the exec failed: fatal is set */
	loops_resume_world(srv->loops);
}
