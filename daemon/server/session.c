/* A client session: reads frames (and memfds) from its socket, runs each request through
 * the sequencer, and queues replies and completions for the end of the loop turn.
 * Handles are per-session numbers; another session's handle is simply unknown (I10). */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "modpath.h"
#include "pbcheck.h"
#include "wire.h"

#define SESSION_READ_CHUNK 65536u
/* Every connection may hold this much input outside --max-input-memory (so small frames
 * never wait on others' large ones): at most --max-clients times this in all. */
#define SESSION_INPUT_BASE (2 * SESSION_READ_CHUNK)
/* A trace follower's unsent output past which new entries are dropped (and counted). */
#define SESSION_FOLLOW_HIGH (1u << 20)
/* Stop reading a client that does not read its replies. */
#define SESSION_OUT_HIGH (8u << 20)
#define SESSION_MAX_ALLOC (1ull << 40)
/* Each module holds device memory for its code; functions are cached up to a bound (a
 * lookup past it still works, uncached). */
#define SESSION_MAX_MODULES 64
#define SESSION_MAX_MODULE_FNS 256
#define SESSION_MAX_FN_NAME 255

/* Decoding storage for the loop thread (the only thread that touches sessions). */
static struct wire_request session_wire;

/* ---- handles ---------------------------------------------------------------------- */

static uint64_t slot_handle(uint32_t index, uint32_t gen)
{
	return ((uint64_t)gen << 32) | (index + 1);
}

static int session_handle_new(struct session *s, enum handle_kind kind, void *obj, uint64_t *handle)
{
	uint32_t i;

	if (s->free_slot) {
		i = s->free_slot - 1;
		s->free_slot = s->slots[i].next_free;
	} else {
		if ((s->nslots & (s->nslots - 1)) == 0) {
			uint32_t cap = s->nslots ? s->nslots * 2 : 16;
			struct handle_slot *n = realloc(s->slots, cap * sizeof(*n));
			if (!n)
				return -ENOMEM;
			s->slots = n;
		}
		i = s->nslots++;
		s->slots[i].gen = 1;
	}
	s->slots[i].kind = kind;
	s->slots[i].obj = obj;
	s->nhandles++;
	*handle = slot_handle(i, s->slots[i].gen);
	return 0;
}

static void session_handle_drop(struct session *s, uint64_t handle)
{
	uint32_t i = (uint32_t)(handle & 0xffffffffu) - 1;

	s->slots[i].kind = HANDLE_FREE;
	s->slots[i].obj = NULL;
	s->slots[i].gen++;
	s->slots[i].next_free = s->free_slot;
	s->free_slot = i + 1;
	s->nhandles--;
}

/* A request that makes a handle, refused at --client-handle-limit (every handle holds
 * daemon memory, and a slice costs the client nothing): true when it was. */
static bool handle_over_limit(struct session *s, uint64_t tag);

void *session_lookup(const struct session *s, uint64_t handle, enum handle_kind kind)
{
	uint32_t low = (uint32_t)(handle & 0xffffffffu);
	const struct handle_slot *slot;

	if (low == 0 || low > s->nslots)
		return NULL;
	slot = &s->slots[low - 1];
	if (slot->kind != kind || slot->gen != (uint32_t)(handle >> 32))
		return NULL;
	return slot->obj;
}

/* ---- output ------------------------------------------------------------------------ */

static void session_mark_dirty(struct session *s)
{
	if (s->dirty)
		return;
	s->dirty = true;
	s->next_dirty = s->srv->dirty;
	s->srv->dirty = s;
}

/* Room for n more bytes of output, or NULL (the session is then closing). */
static uint8_t *session_out_reserve(struct session *s, size_t n)
{
	size_t need = s->out_len + n;

	if (need > s->out_cap) {
		size_t cap = s->out_cap ? s->out_cap : 4096;
		uint8_t *b;
		/* Reclaim what was written before growing. */
		if (s->out_off) {
			memmove(s->out, s->out + s->out_off, s->out_len - s->out_off);
			s->out_len -= s->out_off;
			s->out_off = 0;
			need = s->out_len + n;
		}
		while (cap < need)
			cap *= 2;
		if (cap > s->out_cap) {
			b = realloc(s->out, cap);
			if (!b) {
				log_err("session", "client %" PRIu64 ": out of memory for replies",
					s->id);
				s->closing = true;
				return NULL;
			}
			s->out = b;
			s->out_cap = cap;
		}
	}
	session_mark_dirty(s);
	return s->out + s->out_len;
}

static void session_send(struct session *s, const Sseq__Message *m)
{
	size_t len;
	uint8_t *o;

	if (!s->connected)
		return;
	len = sseq__message__get_packed_size(m);
	if (!(o = session_out_reserve(s, 4 + len)))
		return;
	o[0] = (uint8_t)len;
	o[1] = (uint8_t)(len >> 8);
	o[2] = (uint8_t)(len >> 16);
	o[3] = (uint8_t)(len >> 24);
	sseq__message__pack(m, o + 4);
	s->out_len += 4 + len;
}

static void session_reply_full(struct session *s, uint64_t tag, Sseq__Status status,
	const char *message, uint64_t handle, const struct seq_point *at, Sseq__Welcome *welcome)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__Reply r = SSEQ__REPLY__INIT;
	Sseq__Point p = SSEQ__POINT__INIT;

	if (!welcome) {
		/* The common reply, encoded by hand: see wire.c for why. */
		uint8_t *o;
		if (!s->connected ||
			!(o = session_out_reserve(
				  s, WIRE_REPLY_MAX + (message ? strlen(message) : 0))))
			return;
		s->out_len += wire_encode_reply(o, tag, (int)status, message, handle, at);
		return;
	}
	r.tag = tag;
	r.status = status;
	r.message = (char *)(message ? message : "");
	r.handle = handle;
	if (at) {
		p.stream = at->stream;
		p.seq = at->seq;
		r.point = &p;
	}
	r.welcome = welcome;
	m.body_case = SSEQ__MESSAGE__BODY_REPLY;
	m.reply = &r;
	session_send(s, &m);
}

static void session_reply(struct session *s, uint64_t tag, Sseq__Status status, const char *message)
{
	session_reply_full(s, tag, status, message, 0, NULL, NULL);
}

void session_notice(struct session *s, Sseq__Status status, const char *message)
{
	session_reply(s, 0, status, message);
}

static void session_complete(struct session *s, uint64_t tag, Sseq__Status status,
	const char *message, struct seq_point at)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__Completion c = SSEQ__COMPLETION__INIT;
	Sseq__Point p = SSEQ__POINT__INIT;

	c.tag = tag;
	c.status = status;
	c.message = (char *)(message ? message : "");
	if (at.seq) {
		p.stream = at.stream;
		p.seq = at.seq;
		c.point = &p;
	}
	m.body_case = SSEQ__MESSAGE__BODY_COMPLETION;
	m.completion = &c;
	session_send(s, &m);
}

void session_flush(struct session *s)
{
	while (s->connected && s->out_off < s->out_len) {
		ssize_t n = send(s->fd, s->out + s->out_off, s->out_len - s->out_off,
			MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			log_info("session", "client %" PRIu64 " (pid %u): write failed: %s", s->id,
				s->pid, strerror(errno));
			session_disconnect(s);
			return;
		}
		s->out_off += (size_t)n;
	}
	if (!s->connected)
		return;
	if (s->out_off == s->out_len) {
		s->out_off = s->out_len = 0;
		/* After EOF: once what was read has run and its work completed. */
		if (s->closing || (s->eof && !s->blocked && !s->inflight_capped && !s->inflight)) {
			session_disconnect(s);
			return;
		}
	}
	/* Poll for writability only while output is stuck; read unless paused. */
	int events = 0;
	if (s->out_off < s->out_len)
		events |= UV_WRITABLE;
	if (!s->blocked && !s->closing && !s->eof && !s->input_wait && !s->inflight_capped &&
		s->out_len - s->out_off < SESSION_OUT_HIGH)
		events |= UV_READABLE;
	if (events != s->poll_events) {
		s->poll_events = events;
		if (events)
			uv_poll_start(&s->poll, events, session_on_io);
		else
			uv_poll_stop(&s->poll);
	}
}

/* Client-supplied text goes into log lines and tables: nothing that could forge or
 * break a line. */
static void printable(char *text)
{
	for (char *c = text; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
}

/* ---- lifetime ------------------------------------------------------------------------ */

struct session *session_new(struct server *srv, int fd)
{
	struct session *s = calloc(1, sizeof(*s));
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!s)
		return NULL;
	s->srv = srv;
	s->fd = fd;
	s->id = ++srv->next_session;
	s->refs = 1;
	s->connected = true;
	s->accepted_ns = server_now_ns();
	arena_init(&s->arena);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		s->pid = (uint32_t)cred.pid;
		s->uid = cred.uid;
	}
	if (uv_poll_init(srv->loop, &s->poll, fd) < 0) {
		free(s);
		return NULL;
	}
	s->poll.data = s;
	s->poll_events = UV_READABLE;
	uv_poll_start(&s->poll, UV_READABLE, session_on_io);
	s->next = srv->sessions;
	if (srv->sessions)
		srv->sessions->prev = s;
	srv->sessions = s;
	srv->nsessions++;
	srv->sessions_total++;
	return s;
}

void session_unref(struct session *s)
{
	if (--s->refs > 0)
		return;
	arena_finish(&s->arena);
	free(s->out);
	free(s->slots);
	free(s);
}

/* libuv has let go of the fd: only now may its number go to a new connection. */
static void session_poll_closed(uv_handle_t *h)
{
	struct session *s = h->data;

	close(s->fd);
	s->fd = -1;
	session_unref(s); /* the connection's */
}

/* What of an input buffer of `cap` bytes counts against --max-input-memory. */
static size_t input_large(size_t cap)
{
	return cap > SESSION_INPUT_BASE ? cap - SESSION_INPUT_BASE : 0;
}

/* Give the input buffer back (the session ended, or it sat idle). */
static void session_input_free(struct session *s)
{
	if (!s->in_cap)
		return;
	free(s->in);
	s->in = NULL;
	s->srv->limit.input_bytes -= s->in_cap;
	s->srv->limit.input_large_bytes -= input_large(s->in_cap);
	s->in_cap = s->in_len = 0;
	server_input_released(s->srv);
}

static void staging_unref(struct server *srv, struct staging *st)
{
	if (--st->refs > 0)
		return;
	if (srv->backend.ops->staging_unregister)
		srv->backend.ops->staging_unregister(srv->backend.ctx, st->addr, st->size);
	munmap(st->addr, st->size);
	free(st);
}

static void smodule_unref(struct server *srv, struct smodule *m)
{
	if (--m->refs > 0)
		return;
	while (m->fns) {
		struct smodule_fn *f = m->fns;

		m->fns = f->next;
		free(f->name);
		free(f);
	}
	srv->backend.ops->module_unload(srv->backend.ctx, m->module);
	free(m);
}

/* The function `name` of m, from the cache or looked up (and cached). */
static int smodule_function(struct server *srv, struct smodule *m, const char *name, void **fn)
{
	struct smodule_fn *f;
	int r;

	for (f = m->fns; f; f = f->next) {
		if (strcmp(f->name, name) == 0) {
			*fn = f->function;
			return 0;
		}
	}
	r = srv->backend.ops->module_function(srv->backend.ctx, m->module, name, fn);
	if (r < 0 || m->nfns >= SESSION_MAX_MODULE_FNS)
		return r;
	f = calloc(1, sizeof(*f));
	if (f && !(f->name = strdup(name))) {
		free(f);
		f = NULL;
	}
	if (!f)
		return 0; /* found; just not cached */
	f->function = *fn;
	f->next = m->fns;
	m->fns = f;
	m->nfns++;
	return 0;
}

static void sbuf_release(struct session *s, struct sbuf *sb)
{
	struct seq_buffer *b = sb->buf;

	if (!b->base) {
		s->buffers--;
		s->bytes -= b->size;
	}
	b->user = 0;
	seq_buffer_free(s->srv->seq, b);
	free(sb);
}

void session_disconnect(struct session *s)
{
	struct server *srv = s->srv;

	if (!s->connected)
		return;
	s->connected = false;
	if (s->following)
		srv->nfollowing--;
	s->following = false;
	log_info("session",
		"client %" PRIu64 " (pid %u, %s%s%s) disconnected: %" PRIu64 " buffers, %" PRIu64
		" ops in flight",
		s->id, s->pid, s->name[0] ? s->name : "unnamed", s->worker[0] ? " " : "", s->worker,
		s->buffers, s->inflight);
	/* The fd stays open until the poll handle is closed: closing it first would let
	 * accept() hand its number to a new client whose registration the late close of
	 * this handle then removes from epoll (the new client would never be read). */
	uv_close((uv_handle_t *)&s->poll, session_poll_closed);
	if (s->input_wait)
		s->srv->input_waiting--;
	s->input_wait = false;
	session_input_free(s);
	for (unsigned i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	s->nfds = 0;
	/* Slices first: a base outlives its slices only as long as they hold it (I6). */
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < s->nslots; i++) {
			struct handle_slot *slot = &s->slots[i];
			if (slot->kind == HANDLE_BUFFER) {
				struct sbuf *sb = slot->obj;
				if ((pass == 0) != (sb->buf->base != NULL))
					continue;
				sbuf_release(s, sb);
				session_handle_drop(s, slot_handle(i, slot->gen));
			} else if (slot->kind == HANDLE_MODULE && pass == 1) {
				/* Launches in flight keep it loaded until they complete. */
				s->modules--;
				smodule_unref(srv, slot->obj);
				session_handle_drop(s, slot_handle(i, slot->gen));
			} else if (slot->kind == HANDLE_STAGING && pass == 1) {
				struct staging *st = slot->obj;
				s->stagings--;
				s->staging_bytes -= st->size;
				srv->limit.staging_bytes -= st->size;
				srv->limit.arenas--;
				staging_unref(srv, st);
				session_handle_drop(s, slot_handle(i, slot->gen));
			}
		}
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		srv->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
	srv->nsessions--;
}

/* ---- op records ---------------------------------------------------------------------- */

static struct op_rec *op_rec_new(struct session *s, uint64_t tag, bool notify)
{
	struct server *srv = s->srv;
	struct op_rec *rec = srv->op_free;

	if (rec)
		srv->op_free = rec->next_free;
	else if (!(rec = malloc(sizeof(*rec))))
		return NULL;
	*rec = (struct op_rec){.session = s, .tag = tag, .notify = notify};
	s->refs++;
	/* Ops and watches in flight each hold a record: at the cap, stop taking requests
	 * until half have completed (the sequencer's windows bound ops, not watches). */
	if (++s->inflight >= srv->opts.limits.client_inflight && !s->inflight_capped) {
		s->inflight_capped = true;
		srv->limit.inflight_capped++;
	}
	return rec;
}

static void op_rec_free(struct op_rec *rec)
{
	struct session *s = rec->session;
	struct server *srv = s->srv;

	if (rec->staging)
		staging_unref(srv, rec->staging);
	if (rec->module)
		smodule_unref(srv, rec->module);
	s->inflight--;
	if (s->inflight_capped && s->inflight <= srv->opts.limits.client_inflight / 2 &&
		s->connected) {
		s->inflight_capped = false;
		session_mark_dirty(s); /* its flush polls for input again */
		server_resume_session(srv, s);
	}
	if (s->eof && s->connected)
		session_mark_dirty(s); /* its flush closes it once the last op is done */
	rec->next_free = srv->op_free;
	srv->op_free = rec;
	session_unref(s);
}

static const char *status_text(int status)
{
	if (status == -BACKEND_EINJECTED)
		return "injected fault";
	return strerror(-status);
}

void session_op_done(struct op_rec *rec, int status)
{
	struct session *s = rec->session;

	if (status < 0 || rec->notify) {
		char msg[128] = "";
		/* A watch (Await, Sync) has no point of its own: what it waited for failed. */
		if (status < 0 && rec->at.seq)
			snprintf(msg, sizeof(msg), "operation at %u:%" PRIu64 " failed: %s",
				rec->at.stream, rec->at.seq, status_text(status));
		else if (status < 0)
			snprintf(msg, sizeof(msg), "an operation it waited for failed: %s",
				status_text(status));
		session_complete(s, rec->tag, server_status_from_errno(status), msg, rec->at);
	}
	op_rec_free(rec);
}

/* ---- requests ------------------------------------------------------------------------ */

static int req_fail(struct session *s, uint64_t tag, Sseq__Status status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int req_fail(struct session *s, uint64_t tag, Sseq__Status status, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_debug("session", "client %" PRIu64 " (pid %u) tag %" PRIu64 ": %s", s->id, s->pid, tag,
		msg);
	session_reply(s, tag, status, msg);
	return 0;
}

static bool handle_over_limit(struct session *s, uint64_t tag)
{
	const unsigned limit = s->srv->opts.limits.client_handles;

	if (s->nhandles < limit)
		return false;
	s->srv->limit.handles_refused++;
	req_fail(s, tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED,
		"this session holds %u handles (buffers, slices, arenas, modules), the most "
		"allowed (--client-handle-limit): free some",
		limit);
	return true;
}

static int req_hello(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Hello *h = rq->hello;
	struct backend_info info = {0};
	Sseq__Welcome w = SSEQ__WELCOME__INIT;
	Sseq__DeviceInfo d = SSEQ__DEVICE_INFO__INIT;

	if (s->hello)
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, "Hello sent twice");
	if (h->protocol_major != SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR) {
		req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNSUPPORTED_VERSION,
			"protocol major %u not supported: this daemon speaks %u.%u",
			h->protocol_major, SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR,
			SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR);
		s->closing = true;
		return 0;
	}
	s->hello = true;
	snprintf(s->name, sizeof(s->name), "%s", h->client_name ? h->client_name : "");
	snprintf(s->worker, sizeof(s->worker), "%s", h->worker_id ? h->worker_id : "");
	printable(s->name);
	printable(s->worker);
	log_info("session", "client %" PRIu64 " connected: %s pid %u uid %u%s%s", s->id,
		s->name[0] ? s->name : "unnamed", s->pid, s->uid, s->worker[0] ? " worker " : "",
		s->worker);
	s->srv->backend.ops->info(s->srv->backend.ctx, &info);
	d.index = s->srv->opts.device;
	d.name = info.name;
	d.backend = (char *)info.backend;
	d.arch = info.arch;
	d.memory_total = info.memory_total;
	d.memory_used = info.memory_used;
	w.protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	w.protocol_minor = SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR;
	w.session = s->id;
	w.device = &d;
	w.daemon_version = (char *)SSEQ_VERSION;
	session_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", 0, NULL, &w);
	return 0;
}

/* Each arena is mapped into the daemon and pinned: a few hundred sparse ones would take
 * its address space, and the host's memory, from everyone. */
static bool staging_over_limit(struct session *s, uint64_t tag, uint64_t size)
{
	const struct server_limits *lim = &s->srv->opts.limits;
	struct server_limit_counters *c = &s->srv->limit;

	if (size > lim->client_staging_bytes - s->staging_bytes ||
		s->staging_bytes > lim->client_staging_bytes) {
		c->staging_refused++;
		req_fail(s, tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED,
			"staging arena of %" PRIu64 " bytes refused: this session maps %" PRIu64
			" of its %" PRIu64 " (--client-staging-limit)",
			size, s->staging_bytes, lim->client_staging_bytes);
		return true;
	}
	if (s->stagings >= lim->client_arenas || c->arenas >= lim->arenas) {
		bool mine = s->stagings >= lim->client_arenas;
		c->staging_refused++;
		req_fail(s, tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED,
			"staging arena refused: %s %" PRIu64 " arenas, the most allowed (%s)",
			mine ? "this session holds" : "all sessions hold",
			mine ? s->stagings : c->arenas,
			mine ? "--client-arena-limit" : "--arena-limit");
		return true;
	}
	if (size > lim->staging_bytes - c->staging_bytes || c->staging_bytes > lim->staging_bytes) {
		c->staging_refused++;
		req_fail(s, tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED,
			"staging arena of %" PRIu64 " bytes refused: all sessions map %" PRIu64
			" of the daemon's %" PRIu64 " (--staging-limit)",
			size, c->staging_bytes, lim->staging_bytes);
		return true;
	}
	return false;
}

static int req_staging_register(struct session *s, const Sseq__Request *rq)
{
	const Sseq__StagingRegister *sr = rq->staging_register;
	struct staging *st = NULL;
	struct stat sb;
	int fd, seals, r;
	void *addr;

	if (s->nfds == 0)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"StagingRegister without a memfd (send it with SCM_RIGHTS)");
	fd = s->fds[0];
	memmove(s->fds, s->fds + 1, --s->nfds * sizeof(int));
	if (handle_over_limit(s, rq->tag)) {
		close(fd);
		return 0;
	}
	if (sr->size == 0 || sr->size > SESSION_MAX_ALLOC) {
		close(fd);
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"staging size %" PRIu64 " out of range", sr->size);
	}
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		close(fd);
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_STAGING_UNSEALED,
			"staging memfd is not sealed with F_SEAL_SHRINK (seals %#x)",
			seals < 0 ? 0 : seals);
	}
	if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) {
		close(fd);
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"staging memfd is sealed with %s: D2H writes its results into the "
			"arena, so it must stay writable",
			seals & F_SEAL_WRITE ? "F_SEAL_WRITE" : "F_SEAL_FUTURE_WRITE");
	}
	if (staging_over_limit(s, rq->tag, sr->size)) {
		close(fd);
		return 0;
	}
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size < sr->size) {
		close(fd);
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_STAGING_UNSEALED,
			"staging memfd holds %lld bytes, less than the %" PRIu64 " registered",
			(long long)sb.st_size, sr->size);
	}
	addr = mmap(NULL, sr->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (addr == MAP_FAILED)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED,
			"cannot map staging arena: %s", strerror(errno));
	st = calloc(1, sizeof(*st));
	if (!st) {
		munmap(addr, sr->size);
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED, "out of memory");
	}
	*st = (struct staging){.owner = s, .addr = addr, .size = sr->size, .refs = 1};
	snprintf(st->label, sizeof(st->label), "%s", sr->label ? sr->label : "");
	r = s->srv->backend.ops->staging_register
		? s->srv->backend.ops->staging_register(s->srv->backend.ctx, addr, sr->size)
		: 0;
	if (r < 0 || session_handle_new(s, HANDLE_STAGING, st, &st->handle) < 0) {
		if (r >= 0 && s->srv->backend.ops->staging_unregister)
			s->srv->backend.ops->staging_unregister(
				s->srv->backend.ctx, addr, sr->size);
		munmap(addr, sr->size);
		free(st);
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED,
			"cannot register staging arena: %s", strerror(-r));
	}
	s->stagings++;
	s->staging_bytes += sr->size;
	s->srv->limit.staging_bytes += sr->size;
	s->srv->limit.arenas++;
	session_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", st->handle, NULL, NULL);
	return 0;
}

static int req_staging_unregister(struct session *s, const Sseq__Request *rq)
{
	uint64_t h = rq->staging_unregister->staging;
	struct staging *st = session_lookup(s, h, HANDLE_STAGING);

	if (!st)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE,
			"unknown staging handle %#" PRIx64, h);
	session_handle_drop(s, h);
	s->stagings--;
	s->staging_bytes -= st->size;
	s->srv->limit.staging_bytes -= st->size;
	s->srv->limit.arenas--;
	staging_unref(s->srv, st); /* copies in flight keep it mapped */
	session_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	return 0;
}

static int sbuf_new(struct session *s, struct seq_buffer *b, const char *label, uint64_t *handle)
{
	struct sbuf *sb = calloc(1, sizeof(*sb));

	if (!sb)
		return -ENOMEM;
	sb->buf = b;
	sb->owner = s;
	snprintf(sb->label, sizeof(sb->label), "%s", label ? label : "");
	if (session_handle_new(s, HANDLE_BUFFER, sb, &sb->handle) < 0) {
		free(sb);
		return -ENOMEM;
	}
	b->user = (uint64_t)(uintptr_t)sb;
	b->owner = s->id;
	*handle = sb->handle;
	return 0;
}

static int req_alloc(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Alloc *a = rq->alloc;
	const uint64_t quota = s->srv->opts.limits.client_memory_bytes;
	struct seq_buffer *b;
	uint64_t handle;
	int r;

	if (a->size == 0 || a->size > SESSION_MAX_ALLOC)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"alloc size %" PRIu64 " out of range (1 .. 2^40)", a->size);
	if (handle_over_limit(s, rq->tag))
		return 0;
	if (quota && (a->size > quota || s->bytes > quota - a->size)) {
		s->srv->limit.quota_refused++;
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED,
			"cannot allocate %" PRIu64 " bytes: this session holds %" PRIu64
			" of its device memory quota of %" PRIu64 " (--client-memory-limit)",
			a->size, s->bytes, quota);
	}
	r = seq_buffer_alloc(s->srv->seq, a->size, &b);
	if (r < 0)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED,
			"cannot allocate %" PRIu64 " bytes: %s", a->size, strerror(-r));
	if (sbuf_new(s, b, a->label, &handle) < 0) {
		seq_buffer_free(s->srv->seq, b);
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED, "out of memory");
	}
	s->buffers++;
	s->bytes += a->size;
	session_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", handle, NULL, NULL);
	return 0;
}

static int req_free(struct session *s, const Sseq__Request *rq)
{
	uint64_t h = rq->free->buffer;
	struct sbuf *sb = session_lookup(s, h, HANDLE_BUFFER);

	if (!sb)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE,
			"unknown buffer handle %#" PRIx64, h);
	session_handle_drop(s, h);
	sbuf_release(s, sb); /* the sequencer defers the memory until it is idle (I5) */
	session_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	return 0;
}

static int req_slice(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Slice *sl = rq->slice;
	struct sbuf *sb = session_lookup(s, sl->buffer, HANDLE_BUFFER);
	struct seq_buffer *b;
	uint64_t handle;

	if (!sb)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE,
			"unknown buffer handle %#" PRIx64, sl->buffer);
	if (sl->length == 0 || sl->offset > sb->buf->size ||
		sl->length > sb->buf->size - sl->offset)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_OUT_OF_RANGE,
			"slice [%" PRIu64 ", +%" PRIu64 ") outside buffer of %" PRIu64 " bytes",
			sl->offset, sl->length, sb->buf->size);
	if (handle_over_limit(s, rq->tag))
		return 0;
	if (seq_buffer_slice(s->srv->seq, sb->buf, sl->offset, sl->length, &b) < 0)
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED, "out of memory");
	if (sbuf_new(s, b, sl->label, &handle) < 0) {
		seq_buffer_free(s->srv->seq, b);
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED, "out of memory");
	}
	session_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", handle, NULL, NULL);
	return 0;
}

/* Sequence op and answer it: the Reply now, a Completion when its point completes. The
 * staging arena or module the op uses, if any, stays alive until then. */
static int session_submit(struct session *s, const Sseq__Request *rq, struct seq_op *op,
	struct staging *st, struct smodule *mod, bool notify)
{
	struct op_rec *rec = op_rec_new(s, rq->tag, notify);
	struct seq_point at = {0, 0};
	int r;

	if (!rec)
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED, "out of memory");
	op->want_done = true;
	op->cookie = (uint64_t)(uintptr_t)rec;
	r = seq_submit(s->srv->seq, op, &at);
	if (r == -EAGAIN) {
		/* The stream's window is full of incomplete points: pause this client (I3). */
		op_rec_free(rec);
		return -EAGAIN;
	}
	if (r < 0) {
		op_rec_free(rec);
		switch (op->fail_cause) {
		case SEQ_FAIL_INPUT:
			return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_DEPENDENCY_FAILED,
				"not launched: an input's producer %u:%" PRIu64 " failed: %s",
				op->failed_producer.stream, op->failed_producer.seq,
				status_text(r));
		case SEQ_FAIL_STREAM:
			return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_DEVICE_ERROR,
				"not launched: stream %u failed: %s", op->failed_producer.stream,
				status_text(r));
		default:
			break;
		}
		if (r == -EEXIST)
			return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_DOUBLE_DEFINITION,
				"one operation writes the same buffer twice (I7)");
		return req_fail(s, rq->tag, server_status_from_errno(r), "launch failed: %s",
			status_text(r));
	}
	rec->at = at;
	s->last_point[at.stream] = at.seq;
	if (st) {
		rec->staging = st;
		st->refs++;
	}
	if (mod) {
		rec->module = mod;
		mod->refs++;
	}
	session_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, NULL, 0, &at, NULL);
	return 0;
}

/* An empty op of `kind` with an empty payload. Only the first naccess of op->access[]
 * and the first nargs of pl->args[] are ever read, and both arrays come last: zeroing
 * them whole cost ~220 instructions a request. */
static void op_init(struct seq_op *op, struct op_payload *pl, enum seq_op_kind kind)
{
	memset(op, 0, offsetof(struct seq_op, access));
	memset(pl, 0, offsetof(struct op_payload, args));
	op->kind = kind;
	op->payload = pl;
}

/* Add sb's view to op with `access` (in, out, inout are read, write, read-write) and
 * make ka the buffer argument naming it. */
static void op_add_buffer(
	struct seq_op *op, struct karg *ka, const struct sbuf *sb, unsigned access)
{
	ka->access = access;
	ka->v.buf.ptr = (void *)(uintptr_t)sb->buf->addr;
	ka->v.buf.size = sb->buf->size;
	ka->v.buf.index = op->naccess;
	op->access[op->naccess++] = (struct seq_access){sb->buf, access};
}

/* Look up a buffer and check [off, off + len) lies in it. */
static struct sbuf *req_range(struct session *s, uint64_t tag, uint64_t handle, uint64_t off,
	uint64_t len, const char *what)
{
	struct sbuf *sb = session_lookup(s, handle, HANDLE_BUFFER);

	if (!sb) {
		req_fail(s, tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE,
			"unknown %s buffer handle %#" PRIx64, what, handle);
		return NULL;
	}
	if (off > sb->buf->size || len > sb->buf->size - off) {
		req_fail(s, tag, SSEQ__STATUS__STATUS_OUT_OF_RANGE,
			"%s range [%" PRIu64 ", +%" PRIu64 ") outside buffer of %" PRIu64 " bytes",
			what, off, len, sb->buf->size);
		return NULL;
	}
	return sb;
}

static struct staging *req_staging_range(
	struct session *s, uint64_t tag, uint64_t handle, uint64_t off, uint64_t len)
{
	struct staging *st = session_lookup(s, handle, HANDLE_STAGING);

	if (!st) {
		req_fail(s, tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE,
			"unknown staging handle %#" PRIx64, handle);
		return NULL;
	}
	if (off > st->size || len > st->size - off) {
		req_fail(s, tag, SSEQ__STATUS__STATUS_OUT_OF_RANGE,
			"staging range [%" PRIu64 ", +%" PRIu64 ") outside arena of %" PRIu64
			" bytes",
			off, len, st->size);
		return NULL;
	}
	return st;
}

/* A write covering the whole view defines it anew; a partial one keeps the rest. */
static unsigned write_mode(const struct seq_buffer *b, uint64_t off, uint64_t len)
{
	return (off == 0 && len == b->size) ? SEQ_WRITE : SEQ_READWRITE;
}

static int req_copy_h2d(struct session *s, const Sseq__Request *rq)
{
	const Sseq__CopyH2D *c = rq->copy_h2d;
	struct op_payload pl;
	struct seq_op op;
	struct staging *st;
	struct sbuf *dst;

	if (c->length == 0)
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT, "copy of 0 bytes");
	if (!(st = req_staging_range(s, rq->tag, c->staging, c->staging_offset, c->length)) ||
		!(dst = req_range(s, rq->tag, c->dst, c->dst_offset, c->length, "destination")))
		return 0;
	op_init(&op, &pl, SEQ_OP_H2D);
	op.naccess = 1;
	op.access[0] =
		(struct seq_access){dst->buf, write_mode(dst->buf, c->dst_offset, c->length)};
	pl.host = (char *)st->addr + c->staging_offset;
	pl.dst_offset = c->dst_offset;
	pl.length = c->length;
	return session_submit(s, rq, &op, st, NULL, rq->want_completion);
}

static int req_copy_d2h(struct session *s, const Sseq__Request *rq)
{
	const Sseq__CopyD2H *c = rq->copy_d2h;
	struct op_payload pl;
	struct seq_op op;
	struct staging *st;
	struct sbuf *src;

	if (c->length == 0)
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT, "copy of 0 bytes");
	if (!(src = req_range(s, rq->tag, c->src, c->src_offset, c->length, "source")) ||
		!(st = req_staging_range(s, rq->tag, c->staging, c->staging_offset, c->length)))
		return 0;
	op_init(&op, &pl, SEQ_OP_D2H);
	op.naccess = 1;
	op.access[0] = (struct seq_access){src->buf, SEQ_READ};
	pl.host = (char *)st->addr + c->staging_offset;
	pl.src_offset = c->src_offset;
	pl.length = c->length;
	return session_submit(s, rq, &op, st, NULL, true);
}

static int req_copy_d2d(struct session *s, const Sseq__Request *rq)
{
	const Sseq__CopyD2D *c = rq->copy_d2d;
	struct op_payload pl;
	struct seq_op op;
	struct sbuf *src, *dst;
	struct seq_buffer *sbase, *dbase;

	if (c->length == 0)
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT, "copy of 0 bytes");
	if (!(src = req_range(s, rq->tag, c->src, c->src_offset, c->length, "source")) ||
		!(dst = req_range(s, rq->tag, c->dst, c->dst_offset, c->length, "destination")))
		return 0;
	op_init(&op, &pl, SEQ_OP_D2D);
	sbase = src->buf->base ? src->buf->base : src->buf;
	dbase = dst->buf->base ? dst->buf->base : dst->buf;
	pl.length = c->length;
	if (sbase == dbase) {
		/* Within one buffer: one read-write access on the base, offsets rebased. */
		op.naccess = 1;
		op.access[0] = (struct seq_access){sbase, SEQ_READWRITE};
		pl.src_offset = src->buf->offset + c->src_offset;
		pl.dst_offset = dst->buf->offset + c->dst_offset;
	} else {
		op.naccess = 2;
		op.access[0] = (struct seq_access){src->buf, SEQ_READ};
		op.access[1] = (struct seq_access){
			dst->buf, write_mode(dst->buf, c->dst_offset, c->length)};
		pl.src_offset = c->src_offset;
		pl.dst_offset = c->dst_offset;
	}
	return session_submit(s, rq, &op, NULL, NULL, rq->want_completion);
}

static enum karg_type arg_type(const Sseq__Arg *a)
{
	switch (a->value_case) {
	case SSEQ__ARG__VALUE_BUFFER:
		return KARG_BUFFER;
	case SSEQ__ARG__VALUE_I64:
		return KARG_I64;
	case SSEQ__ARG__VALUE_U64:
		return KARG_U64;
	case SSEQ__ARG__VALUE_F64:
		return KARG_F64;
	case SSEQ__ARG__VALUE_F32:
		return KARG_F32;
	case SSEQ__ARG__VALUE_I32:
		return KARG_I32;
	case SSEQ__ARG__VALUE_U32:
		return KARG_U32;
	default:
		return (enum karg_type) - 1;
	}
}

static const char *access_name(unsigned access)
{
	static const char *const names[] = {"?", "in", "out", "inout"};
	return names[access & 3];
}

/* A scalar argument's value, by the type arg_type() found. */
static void arg_scalar(struct karg *ka, const Sseq__Arg *a)
{
	switch (ka->type) {
	case KARG_I32:
		ka->v.i32 = a->i32;
		break;
	case KARG_U32:
		ka->v.u32 = a->u32;
		break;
	case KARG_I64:
		ka->v.i64 = a->i64;
		break;
	case KARG_U64:
		ka->v.u64 = a->u64;
		break;
	case KARG_F32:
		ka->v.f32 = a->f32;
		break;
	case KARG_F64:
		ka->v.f64 = a->f64;
		break;
	case KARG_BUFFER:
		break;
	}
}

/* A path as the client sent it, fit for a reply and a log line. */
static void shown_path(char *out, size_t size, const char *path)
{
	snprintf(out, size, "%s", path ? path : "");
	printable(out);
}

static int req_load_module(struct session *s, const Sseq__Request *rq)
{
	const struct backend_ops *ops = s->srv->backend.ops;
	const char *path = rq->load_module->path;
	char real[PATH_MAX], shown[96];
	const char *why = NULL;
	struct smodule *m;
	void *mod = NULL;
	int r;

	if (!ops->module_load) {
		struct backend_info info = {0};

		ops->info(s->srv->backend.ctx, &info);
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"LoadModule needs the hip backend (this daemon runs the %s backend)",
			info.backend ? info.backend : "?");
	}
	if (!s->srv->opts.module_dir)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_PERMISSION_DENIED,
			"no --module-dir configured");
	shown_path(shown, sizeof(shown), path);
	r = module_path_resolve(s->srv->opts.module_dir, path, real, sizeof(real), &why);
	if (r == -EPERM || r == -EACCES)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_PERMISSION_DENIED,
			"module '%s': %s", shown, why);
	if (r < 0)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"module '%s': %s", shown, why);
	if (handle_over_limit(s, rq->tag))
		return 0;
	if (s->modules >= SESSION_MAX_MODULES)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED,
			"this session already holds %u modules", SESSION_MAX_MODULES);
	r = ops->module_load(s->srv->backend.ctx, real, &mod);
	if (r == -ENOMEM)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED,
			"cannot load module '%s': out of memory", shown);
	if (r < 0)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"module '%s' does not load: not a code object for this device (%s)", shown,
			strerror(-r));
	m = calloc(1, sizeof(*m));
	if (!m || session_handle_new(s, HANDLE_MODULE, m, &m->handle) < 0) {
		free(m);
		ops->module_unload(s->srv->backend.ctx, mod);
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED, "out of memory");
	}
	m->module = mod;
	m->refs = 1;
	memcpy(m->path, shown, sizeof(m->path));
	s->modules++;
	log_info("session", "client %" PRIu64 " (pid %u) loaded module %s as %#" PRIx64, s->id,
		s->pid, m->path, m->handle);
	session_reply_full(s, rq->tag, SSEQ__STATUS__STATUS_OK, "", m->handle, NULL, NULL);
	return 0;
}

/* A user kernel: no signature to check against, so every argument goes by value in
 * order (a buffer as its view's device address) and the access marks alone drive the
 * waits. The daemon cannot bound what the kernel touches: a kernel that writes past its
 * views or through a buffer marked in breaks the ordering, as it would anywhere. */
static int req_execute_function(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Execute *e = rq->execute;
	const Sseq__ModuleFunction *mf = e->function;
	struct op_payload pl;
	struct seq_op op;
	const Sseq__Grid *g = e->grid;
	struct smodule *m;
	void *fn = NULL;
	int r;

	if (!s->srv->backend.ops->module_function)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_KERNEL,
			"module functions need the hip backend and LoadModule");
	if (!mf)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"Execute without a module function");
	m = session_lookup(s, mf->module, HANDLE_MODULE);
	if (!m)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE,
			"unknown module handle %#" PRIx64, mf->module);
	if (!mf->name || !*mf->name || strlen(mf->name) > SESSION_MAX_FN_NAME)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"a module function needs a name of 1 to %u bytes", SESSION_MAX_FN_NAME);
	if (e->launch_shape_case != SSEQ__EXECUTE__LAUNCH_SHAPE_GRID || !g)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"module function '%.64s' needs an explicit grid: the daemon cannot "
			"derive one for code it does not know",
			mf->name);
	if (!g->grid_x || !g->block_x)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"grid_x and block_x must be at least 1");
	if (e->n_args > KERNEL_MAX_ARGS)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"%zu arguments: at most %u", e->n_args, KERNEL_MAX_ARGS);
	r = smodule_function(s->srv, m, mf->name, &fn);
	if (r == -ENOMEM)
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED, "out of memory");
	if (r < 0)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_KERNEL,
			"module %s has no function '%.64s'", m->path, mf->name);
	op_init(&op, &pl, SEQ_OP_EXEC);
	for (unsigned i = 0; i < e->n_args; i++) {
		const Sseq__Arg *a = e->args[i];
		struct karg *ka = &pl.args[i];
		enum karg_type t = arg_type(a);
		struct sbuf *sb;
		unsigned access;

		if ((int)t < 0)
			return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE,
				"argument %u has no value", i);
		*ka = (struct karg){.type = t};
		if (t != KARG_BUFFER) {
			arg_scalar(ka, a);
			continue;
		}
		sb = session_lookup(s, a->buffer->handle, HANDLE_BUFFER);
		if (!sb)
			return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE,
				"argument %u: unknown buffer handle %#" PRIx64, i,
				a->buffer->handle);
		access = (unsigned)a->buffer->access;
		if (access < KARG_IN || access > KARG_INOUT)
			return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE,
				"argument %u: a buffer must be marked in, out or inout", i);
		if (op.naccess == SEQ_MAX_ACCESS)
			return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
				"at most %u buffer arguments", SEQ_MAX_ACCESS);
		/* "out" is the client's word that the kernel defines the whole view (use
		 * inout for a partial write). */
		op_add_buffer(&op, ka, sb, access);
	}
	pl.function = fn;
	pl.function_name = mf->name;
	pl.nargs = (unsigned)e->n_args;
	pl.grid = (struct kernel_grid){
		.grid = {g->grid_x, g->grid_y ? g->grid_y : 1, g->grid_z ? g->grid_z : 1},
		.block = {g->block_x, g->block_y ? g->block_y : 1, g->block_z ? g->block_z : 1},
		.shared_mem = g->shared_mem,
	};
	return session_submit(s, rq, &op, NULL, m, rq->want_completion);
}

static int req_execute(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Execute *e = rq->execute;
	struct op_payload pl;
	struct seq_op op;
	const struct kernel_desc *k;
	const char *why = NULL;
	int r;

	if (e->target_case == SSEQ__EXECUTE__TARGET_FUNCTION)
		return req_execute_function(s, rq);
	if (e->target_case != SSEQ__EXECUTE__TARGET_KERNEL || !e->kernel)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_KERNEL,
			"Execute names neither a kernel nor a module function");
	k = kernel_find(e->kernel);
	if (!k)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_KERNEL,
			"unknown kernel '%s'", e->kernel);
	if (e->n_args != k->nargs)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE,
			"%s takes %u arguments, got %zu", k->name, k->nargs, e->n_args);
	op_init(&op, &pl, SEQ_OP_EXEC);
	for (unsigned i = 0; i < k->nargs; i++) {
		const Sseq__Arg *a = e->args[i];
		struct karg *ka = &pl.args[i];
		enum karg_type t = arg_type(a);

		if (t != k->types[i])
			return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE,
				"%s argument %u must be %s, got %s", k->name, i,
				karg_type_name(k->types[i]),
				(int)t < 0 ? "nothing" : karg_type_name(t));
		*ka = (struct karg){.type = t};
		switch (t) {
		case KARG_BUFFER: {
			struct sbuf *sb = session_lookup(s, a->buffer->handle, HANDLE_BUFFER);
			if (!sb)
				return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE,
					"%s argument %u: unknown buffer handle %#" PRIx64, k->name,
					i, a->buffer->handle);
			if ((unsigned)a->buffer->access != k->access[i])
				return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_BAD_ARGUMENT_TYPE,
					"%s argument %u must be marked %s, got %s", k->name, i,
					access_name(k->access[i]),
					access_name((unsigned)a->buffer->access));
			/* The view's address lets kernel_validate check its alignment; the
			 * backend resolves the real pointer at launch. */
			op_add_buffer(&op, ka, sb, k->access[i]);
			break;
		}
		default:
			arg_scalar(ka, a);
			break;
		}
	}
	pl.kernel = k;
	pl.nargs = k->nargs;
	r = kernel_validate(k, pl.args, pl.nargs, &pl.elements, &why);
	if (r < 0)
		return req_fail(s, rq->tag,
			r == -ERANGE ? SSEQ__STATUS__STATUS_OUT_OF_RANGE
				     : SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"%s", why ? why : "invalid arguments");
	/* Every built-in kernel writes one float per element: an output it covers only in
	 * part keeps the rest of its old contents, so it is a read-write for sequencing and
	 * for error flow (I9), not a fresh definition. */
	for (unsigned i = 0; i < op.naccess; i++)
		if (op.access[i].mode == SEQ_WRITE)
			op.access[i].mode =
				write_mode(op.access[i].buf, 0, pl.elements * sizeof(float));
	/* Built-in kernels cover exactly what check() validated, whatever shape was asked. */
	return session_submit(s, rq, &op, NULL, NULL, rq->want_completion);
}

static int session_watch(struct session *s, const Sseq__Request *rq, const struct seq_buffer *b)
{
	struct op_rec *rec = op_rec_new(s, rq->tag, true);
	int r;

	if (!rec)
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED, "out of memory");
	/* Sync covers this session's own work, not other clients'. */
	r = b ? seq_await(s->srv->seq, b, (uint64_t)(uintptr_t)rec)
	      : seq_sync_points(s->srv->seq, s->last_point, (uint64_t)(uintptr_t)rec);
	if (r < 0) {
		/* The Reply carries the error; no Completion repeats it. */
		session_reply(s, rq->tag, server_status_from_errno(r), status_text(r));
		op_rec_free(rec);
		return 0;
	}
	session_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	if (r == 0)
		return 0; /* the Completion comes with the point */
	session_op_done(rec, 0);
	return 0;
}

static int req_await(struct session *s, const Sseq__Request *rq)
{
	struct sbuf *sb = session_lookup(s, rq->await->buffer, HANDLE_BUFFER);

	if (!sb)
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE,
			"unknown buffer handle %#" PRIx64, rq->await->buffer);
	return session_watch(s, rq, sb->buf);
}

static int req_query(struct session *s, const Sseq__Request *rq)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__QueryResult res = SSEQ__QUERY_RESULT__INIT;

	res.tag = rq->tag;
	query_answer(s->srv, s, rq->query, &res, &s->arena);
	m.body_case = SSEQ__MESSAGE__BODY_QUERY_RESULT;
	m.query_result = &res;
	session_send(s, &m);
	if (rq->query->kind == SSEQ__QUERY_KIND__QUERY_KIND_TRACE && rq->query->trace &&
		rq->query->trace->follow) {
		if (!s->following)
			s->srv->nfollowing++;
		s->following = true;
		s->follow_tag = rq->tag;
		s->follow_since = res.n_trace ? res.trace[res.n_trace - 1]->seq
					      : (rq->query->trace->since_seq > s->srv->trace_seq
								? s->srv->trace_seq
								: rq->query->trace->since_seq);
		if (s->follow_since < s->srv->trace_seq && !res.n_trace)
			s->follow_since = s->srv->trace_seq;
	}
	return 0;
}

void session_follow_trace(struct session *s)
{
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	Sseq__QueryResult res = SSEQ__QUERY_RESULT__INIT;
	Sseq__Query q = SSEQ__QUERY__INIT;
	Sseq__TraceOptions t = SSEQ__TRACE_OPTIONS__INIT;
	struct server *srv = s->srv;

	if (!s->connected || !s->following || srv->trace_seq <= s->follow_since)
		return;
	if (s->out_len - s->out_off >= SESSION_FOLLOW_HIGH) {
		/* It does not read: its output stays bounded, and it hears what it missed. */
		s->follow_dropped += srv->trace_seq - s->follow_since;
		srv->limit.trace_entries_dropped += srv->trace_seq - s->follow_since;
		s->follow_since = srv->trace_seq;
		return;
	}
	t.max_entries = 256;
	t.since_seq = s->follow_since;
	q.kind = SSEQ__QUERY_KIND__QUERY_KIND_TRACE;
	q.trace = &t;
	res.tag = s->follow_tag;
	query_answer(srv, s, &q, &res, &s->arena);
	srv->limit.trace_entries_dropped += res.trace_dropped;
	res.trace_dropped += s->follow_dropped;
	s->follow_dropped = 0;
	if (res.n_trace)
		s->follow_since = res.trace[res.n_trace - 1]->seq;
	m.body_case = SSEQ__MESSAGE__BODY_QUERY_RESULT;
	m.query_result = &res;
	session_send(s, &m);
	arena_reset(&s->arena);
}

static int session_request(struct session *s, const Sseq__Request *rq, bool nested);

static int req_batch(struct session *s, const Sseq__Request *rq)
{
	const Sseq__Batch *b = rq->batch;

	/* After backpressure the batch is unpacked again: skip what already ran. */
	for (size_t i = s->batch_resume; i < b->n_requests; i++) {
		int r = session_request(s, b->requests[i], true);
		if (r == -EAGAIN) {
			s->batch_resume = (uint32_t)i;
			return -EAGAIN;
		}
		if (r < 0)
			return r;
	}
	s->batch_resume = 0;
	session_reply(s, rq->tag, SSEQ__STATUS__STATUS_OK, "");
	return 0;
}

/* 0: answered; -EAGAIN: window full, retry later; -EPROTO: close the connection. */
static int session_request(struct session *s, const Sseq__Request *rq, bool nested)
{
	if (s->srv->stopping && rq->body_case != SSEQ__REQUEST__BODY_QUERY)
		return req_fail(
			s, rq->tag, SSEQ__STATUS__STATUS_SHUTTING_DOWN, "the daemon is stopping");
	if (rq->tag == 0) {
		/* A reply under tag 0 would read as the daemon's own notice. */
		session_reply(s, 0, SSEQ__STATUS__STATUS_PROTOCOL_ERROR,
			"tag 0 is reserved for the daemon's own messages: tag every request "
			"with a number of your own");
		s->srv->frames_bad++;
		return -EPROTO;
	}
	if (!s->hello && rq->body_case != SSEQ__REQUEST__BODY_HELLO) {
		req_fail(s, rq->tag, SSEQ__STATUS__STATUS_PROTOCOL_ERROR,
			"the first request must be Hello");
		return -EPROTO;
	}
	switch (rq->body_case) {
	case SSEQ__REQUEST__BODY_HELLO:
		return req_hello(s, rq);
	case SSEQ__REQUEST__BODY_STAGING_REGISTER:
		return req_staging_register(s, rq);
	case SSEQ__REQUEST__BODY_STAGING_UNREGISTER:
		return req_staging_unregister(s, rq);
	case SSEQ__REQUEST__BODY_ALLOC:
		return req_alloc(s, rq);
	case SSEQ__REQUEST__BODY_FREE:
		return req_free(s, rq);
	case SSEQ__REQUEST__BODY_SLICE:
		return req_slice(s, rq);
	case SSEQ__REQUEST__BODY_COPY_H2D:
		return req_copy_h2d(s, rq);
	case SSEQ__REQUEST__BODY_COPY_D2H:
		return req_copy_d2h(s, rq);
	case SSEQ__REQUEST__BODY_COPY_D2D:
		return req_copy_d2d(s, rq);
	case SSEQ__REQUEST__BODY_EXECUTE:
		return req_execute(s, rq);
	case SSEQ__REQUEST__BODY_LOAD_MODULE:
		return req_load_module(s, rq);
	case SSEQ__REQUEST__BODY_AWAIT:
		return req_await(s, rq);
	case SSEQ__REQUEST__BODY_SYNC:
		return session_watch(s, rq, NULL);
	case SSEQ__REQUEST__BODY_BATCH:
		if (nested) {
			req_fail(s, rq->tag, SSEQ__STATUS__STATUS_PROTOCOL_ERROR,
				"batches do not nest");
			return -EPROTO;
		}
		return req_batch(s, rq);
	case SSEQ__REQUEST__BODY_QUERY:
		return req_query(s, rq);
	default:
		return req_fail(s, rq->tag, SSEQ__STATUS__STATUS_INVALID_ARGUMENT,
			"request without a known body (%d)", (int)rq->body_case);
	}
}

/* ---- input --------------------------------------------------------------------------- */

/* Tell the client why (a tag-0 notice), then close once that is written. */
static void session_close_with(struct session *s, Sseq__Status status, const char *why)
{
	log_notice("session", "client %" PRIu64 " (pid %u): %s; closing", s->id, s->pid, why);
	session_reply(s, 0, status, why);
	s->closing = true;
	s->in_len = 0;
	s->frame_started_ns = 0;
}

static void session_protocol_error(struct session *s, Sseq__Status status, const char *why)
{
	s->srv->frames_bad++;
	session_close_with(s, status, why);
}

void session_process(struct session *s)
{
	size_t off = 0;

	while (s->connected && !s->closing && !s->inflight_capped && s->in_len - off >= 4) {
		const uint8_t *p = s->in + off;
		uint32_t len = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			(uint32_t)p[3] << 24;
		Sseq__Request *rq = NULL;
		char why[128];
		int r;

		if (len > SERVER_MAX_FRAME) {
			snprintf(why, sizeof(why), "frame of %u bytes exceeds the limit of %u", len,
				SERVER_MAX_FRAME);
			session_protocol_error(s, SSEQ__STATUS__STATUS_FRAME_TOO_LARGE, why);
			return;
		}
		if (s->in_len - off - 4 < len)
			break;
		/* The hot requests decode by hand; protobuf-c has the last word on the rest,
		 * after a look at the bytes that it cannot take safely itself. */
		if (wire_decode_request(p + 4, len, &session_wire))
			rq = &session_wire.rq;
		else if (pbcheck_request(p + 4, len, why, sizeof(why)) == 0 &&
			!(rq = sseq__request__unpack(&s->arena.pb, len, p + 4)))
			snprintf(why, sizeof(why), "frame does not decode as a Request");
		if (!rq) {
			session_protocol_error(s, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, why);
			return;
		}
		s->srv->frames_in++;
		r = session_request(s, rq, false);
		arena_reset(&s->arena);
		if (r == -EAGAIN) {
			s->blocked = true;
			break;
		}
		if (r == -EPROTO) {
			s->closing = true;
			s->in_len = 0;
			return;
		}
		off += 4 + len;
	}
	if (off && s->connected) { /* a disconnect gave the input buffer back */
		memmove(s->in, s->in + off, s->in_len - off);
		s->in_len -= off;
		/* What is left is a new frame's start: its deadline counts from now. */
		s->frame_started_ns = s->in_len ? server_now_ns() : 0;
	}
}

/* Room for SESSION_READ_CHUNK more input bytes, within --max-input-memory: 0, or
 * -EAGAIN when the session must wait for others to give input memory back. */
static int session_input_reserve(struct session *s)
{
	struct server *srv = s->srv;
	size_t cap, grow;
	uint8_t *b;

	if (s->in_cap - s->in_len >= SESSION_READ_CHUNK)
		return 0;
	cap = s->in_cap ? s->in_cap * 2 : SESSION_INPUT_BASE;
	while (cap - s->in_len < SESSION_READ_CHUNK)
		cap *= 2;
	grow = input_large(cap) - input_large(s->in_cap);
	if (grow && srv->limit.input_large_bytes + grow > srv->opts.limits.max_input_bytes) {
		if (!s->input_wait) {
			s->input_wait = true;
			srv->input_waiting++;
			srv->limit.input_paused++;
			log_info("session",
				"client %" PRIu64 " (pid %u): input paused: %" PRIu64
				" bytes of large frames buffered (--max-input-memory %" PRIu64 ")",
				s->id, s->pid, srv->limit.input_large_bytes,
				srv->opts.limits.max_input_bytes);
		}
		return -EAGAIN;
	}
	if (!(b = realloc(s->in, cap)))
		return -ENOMEM;
	srv->limit.input_bytes += cap - s->in_cap;
	srv->limit.input_large_bytes += grow;
	s->in = b;
	s->in_cap = cap;
	return 0;
}

void session_input_resume(struct session *s)
{
	if (!s->input_wait)
		return;
	s->input_wait = false;
	s->srv->input_waiting--;
	if (s->in_len)
		s->frame_started_ns = server_now_ns(); /* the wait was the daemon's, not its */
	session_mark_dirty(s); /* its flush polls for input again */
}

/* The client will send nothing more (EOF). If it only shut down its sending side, what
 * it sent still runs and its replies and completions still go out before the daemon
 * closes (session_flush). If it is gone altogether (closed, killed: a Unix socket then
 * reports POLLHUP), nobody will read them: end the session now. */
static void session_input_ended(struct session *s)
{
	struct pollfd p = {.fd = s->fd, .events = POLLOUT};

	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR))) {
		session_disconnect(s);
		return;
	}
	s->eof = true;
	if (s->following)
		s->srv->nfollowing--;
	s->following = false;
	s->frame_started_ns = 0; /* a partial frame at EOF can never finish */
	session_mark_dirty(s);
}

static void session_read(struct session *s)
{
	/* Bounded per turn so one busy client cannot starve the others. */
	for (int rounds = 0; rounds < 4 && s->connected && !s->blocked && !s->closing && !s->eof &&
		!s->inflight_capped;
		rounds++) {
		union {
			struct cmsghdr align;
			char buf[CMSG_SPACE(sizeof(int) * SESSION_MAX_FDS)];
		} ctl;
		struct iovec iov;
		struct msghdr msg = {0};
		ssize_t n;
		int r = session_input_reserve(s);

		if (r == -EAGAIN)
			return;
		if (r < 0) {
			session_disconnect(s);
			return;
		}
		iov.iov_base = s->in + s->in_len;
		iov.iov_len = s->in_cap - s->in_len;
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = ctl.buf;
		msg.msg_controllen = sizeof(ctl.buf);
		n = recvmsg(s->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			log_info("session", "client %" PRIu64 " (pid %u): read failed: %s", s->id,
				s->pid, strerror(errno));
			session_disconnect(s);
			return;
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			const int *fds = (const int *)(const void *)CMSG_DATA(c);
			for (size_t i = 0; i < nfd; i++) {
				if (s->nfds < SESSION_MAX_FDS)
					s->fds[s->nfds++] = fds[i];
				else
					close(fds[i]); /* more memfds than pending registrations */
			}
		}
		if (n == 0) {
			session_input_ended(s);
			return;
		}
		s->last_read_ns = server_now_ns();
		if (!s->in_len)
			s->frame_started_ns = s->last_read_ns;
		s->in_len += (size_t)n;
		session_process(s);
		if (!s->in_len && s->srv->input_waiting) {
			session_input_free(s); /* others wait for input memory */
			break;
		}
		if ((size_t)n < iov.iov_len)
			break;
	}
}

void session_sweep(struct session *s, uint64_t now)
{
	const struct server_limits *lim = &s->srv->opts.limits;
	char why[128];

	if (!s->connected || s->closing)
		return;
	if (!s->hello && lim->hello_timeout_ms &&
		now - s->accepted_ns > (uint64_t)lim->hello_timeout_ms * 1000000u) {
		s->srv->limit.hello_timeouts++;
		snprintf(why, sizeof(why), "no Hello within %u ms (--hello-timeout)",
			lim->hello_timeout_ms);
		session_close_with(s, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, why);
		return;
	}
	/* A frame held back by backpressure is whole: only the client can stall one. */
	if (s->frame_started_ns && !s->blocked && !s->input_wait && lim->frame_timeout_ms &&
		now - s->frame_started_ns > (uint64_t)lim->frame_timeout_ms * 1000000u) {
		s->srv->limit.frame_timeouts++;
		snprintf(why, sizeof(why),
			"a frame stalled: %zu bytes of it in %u ms "
			"(--frame-timeout)",
			s->in_len, lim->frame_timeout_ms);
		session_close_with(s, SSEQ__STATUS__STATUS_PROTOCOL_ERROR, why);
		return;
	}
	/* An idle connection holds no input memory. */
	if (!s->in_len && s->in_cap && now - s->last_read_ns > 1000000000u)
		session_input_free(s);
}

void session_on_io(uv_poll_t *poll, int status, int events)
{
	struct session *s = poll->data;

	if (status < 0) {
		session_disconnect(s);
		return;
	}
	if (events & UV_WRITABLE)
		session_mark_dirty(s);
	if (events & UV_READABLE)
		session_read(s);
	if (s->connected)
		session_mark_dirty(s);
}
