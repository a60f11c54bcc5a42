/* A client session's lifetime: created at accept, its handle table (per-session numbers
 * with a generation, so another session's handle, or a stale one, is simply unknown: I10),
 * its op records, and the release of everything it owned when the connection goes. */
#include "session-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

static uint64_t slot_handle(uint32_t index, uint32_t gen)
{
	return ((uint64_t)gen << 32) | (index + 1);
}

int session_handle_new(struct session *s, enum handle_kind kind, void *obj, uint64_t *handle)
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

void session_handle_drop(struct session *s, uint64_t handle)
{
	uint32_t i = (uint32_t)(handle & 0xffffffffu) - 1;

	s->slots[i].kind = HANDLE_FREE;
	s->slots[i].obj = NULL;
	s->slots[i].gen++;
	s->slots[i].next_free = s->free_slot;
	s->free_slot = i + 1;
	s->nhandles--;
}

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

bool session_handle_lost(const struct session *s, uint64_t handle)
{
	uint32_t low = (uint32_t)(handle & 0xffffffffu);

	return low && low <= s->nslots && s->slots[low - 1].kind == HANDLE_LOST &&
		s->slots[low - 1].gen == (uint32_t)(handle >> 32);
}

void session_info(const struct session *s, struct session_info *info)
{
	*info = (struct session_info){
		.id = s->id,
		.pid = s->pid,
		.uid = s->uid,
		.name = s->name,
		.worker = s->worker,
		.buffers = s->buffers,
		.bytes = s->bytes,
		.inflight = s->inflight,
		.stagings = s->stagings,
		.staging_bytes = s->staging_bytes,
		.handles = s->nhandles,
		.lanes = s->lanes,
		.nlanes = s->nlanes,
	};
}

void session_foreach(struct server *srv, void (*fn)(const struct session *s, void *arg), void *arg)
{
	for (const struct session *s = srv->sessions; s; s = s->next)
		fn(s, arg);
}

void session_foreach_buffer(
	const struct session *s, void (*fn)(const struct session_buffer *b, void *arg), void *arg)
{
	for (uint32_t i = 0; i < s->nslots; i++) {
		const struct sbuf *sb;
		const struct seq_buffer *base;
		struct session_buffer b;

		if (s->slots[i].kind != HANDLE_BUFFER)
			continue;
		sb = s->slots[i].obj;
		base = sb->buf->base;
		b = (struct session_buffer){
			.handle = sb->handle,
			.label = sb->label,
			.buf = sb->buf,
			.base_handle = base && base->user
				? ((const struct sbuf *)(uintptr_t)base->user)->handle
				: 0,
		};
		fn(&b, arg);
	}
}

/* Client-supplied text goes into log lines and tables: nothing that could forge or
 * break a line. */
void printable(char *text)
{
	for (char *c = text; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
}

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
	s->accepted_ns = server_loop_ns(srv);
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

void session_lanes_take(struct session *s, unsigned n)
{
	struct server *srv = s->srv;
	const struct seq_layout *layout = seq_layout(srv->seq);
	const unsigned pool = layout->count[SEQ_STREAM_COMPUTE];
	unsigned mine[SEQ_MAX_STREAMS] = {0}, load[SEQ_MAX_STREAMS] = {0};
	bool failed[SEQ_MAX_STREAMS];

	/* A lane whose stream a device fault failed (sticky) fails whatever runs there:
	 * a new session gets one only when every lane has failed. */
	for (unsigned l = 0; l < pool; l++) {
		struct seq_stream_info si;

		seq_stream_info(srv->seq, layout->first[SEQ_STREAM_COMPUTE] + l, &si);
		failed[l] = si.error != 0;
	}
	/* How many other sessions hold each lane (each counted once however often it holds
	 * it); s itself holds none yet. Hello is rare: counting beats keeping a tally. */
	for (const struct session *o = srv->sessions; o; o = o->next) {
		uint64_t held = 0;
		for (unsigned k = 0; k < o->nlanes; k++)
			held |= 1ull << o->lanes[k];
		for (; held; held &= held - 1)
			load[__builtin_ctzll(held)]++;
	}
	/* Each lane: a healthy one, then one this session does not hold yet, then the least
	 * held by others, then the lowest number. Sessions never share buffers, so nothing
	 * orders one session's lanes after another's: spreading them lets them overlap. */
	for (unsigned k = 0; k < n; k++) {
		unsigned best = 0;
		for (unsigned l = 1; l < pool; l++)
			if (failed[l] != failed[best]		? !failed[l]
					: mine[l] != mine[best] ? mine[l] < mine[best]
								: load[l] < load[best])
				best = l;
		mine[best]++;
		s->lanes[k] = best;
	}
	s->nlanes = n;
}

/* A base's memory went back (the core's gone hook): it counts against its session's
 * --client-memory-limit no more. The record and a ref on the session lived until now. */
static void sbuf_gone(void *arg)
{
	struct sbuf *sb = arg;
	struct session *s = sb->owner;

	s->bytes -= sb->size;
	free(sb);
	session_unref(s);
}

void sbuf_release(struct session *s, struct sbuf *sb)
{
	struct seq_buffer *b = sb->buf;

	b->user = 0;
	if (!b->base) {
		s->buffers--; /* a handle: its bytes are memory, counted as long as it is held */
		if (!b->adopted) {
			/* A freed base still holds its device memory while work uses it or
			 * slices name it: it counts until the core hands that memory back (at
			 * once when idle). */
			sb->size = b->size;
			sb->buf = NULL;
			s->refs++;
			seq_buffer_on_gone(b, sbuf_gone, sb);
			seq_buffer_free(s->srv->seq, b);
			return;
		}
		s->bytes -= b->size; /* a module's global is the module's memory */
	}
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
	server_forget_session(srv, s);
	log_about(LOG_LVL_INFO, "session", SESSION_WHO(s),
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
				/* Copies in flight keep it mapped, and counted against
				 * the daemon's limits, until they complete. */
				staging_unref(srv, slot->obj);
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

struct op_rec *op_rec_new(struct session *s, uint64_t tag, bool notify)
{
	struct server *srv = s->srv;
	struct op_rec *rec = srv->op_free;

	if (rec) {
		srv->op_free = rec->next_free;
		srv->nop_free--;
	} else if (!(rec = malloc(sizeof(*rec))))
		return NULL;
	/* Zeroed up to its timeline part, which session_submit sets before use (a watch never
	 * reads it): that part is as large as the rest. */
	memset(rec, 0, offsetof(struct op_rec, tl));
	rec->session = s;
	rec->tag = tag;
	rec->notify = notify;
	s->refs++;
	/* Ops and watches in flight each hold a record: at the cap, stop taking requests
	 * until half have completed (the sequencer's windows bound ops, not watches). */
	if (++s->inflight >= srv->opts.limits.client_inflight && !s->inflight_capped) {
		s->inflight_capped = true;
		srv->limit.inflight_capped++;
	}
	return rec;
}

void op_rec_free(struct op_rec *rec)
{
	struct session *s = rec->session;
	struct server *srv = s->srv;

	if (rec->at.seq)
		server_point_done(srv, rec);
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
	/* Kept for reuse up to a bound: kept all, the list held as many records as were ever
	 * in flight at once (65,536 a session at the default limit), for good. */
	if (srv->nop_free < OP_FREE_MAX) {
		rec->next_free = srv->op_free;
		srv->op_free = rec;
		srv->nop_free++;
	} else {
		free(rec);
	}
	session_unref(s);
}

const char *status_text(int status)
{
	if (status == -BACKEND_EINJECTED)
		return "injected fault";
	if (status == -ESHUTDOWN)
		return "cancelled: the daemon is stopping";
	return strerror(-status);
}

void session_op_done(struct op_rec *rec, int status)
{
	struct session *s = rec->session;

	if (status < 0 || rec->notify) {
		char msg[768] = "";
		/* A watch (Await, Sync) has no point of its own: what it waited for failed. */
		if (status < 0 && s->srv->resetting)
			snprintf(msg, sizeof(msg),
				"%s in flight when device reset %" PRIu64
				" at %s failed it; the reset "
				"was caused by %s",
				rec->at.seq ? "the operation was" : "what it waited for was",
				s->srv->resets.count, s->srv->resets.at, s->srv->resets.cause);
		else if (status < 0 && rec->at.seq)
			snprintf(msg, sizeof(msg), "operation at %u:%" PRIu64 " failed: %s",
				rec->at.stream, rec->at.seq, status_text(status));
		else if (status < 0)
			snprintf(msg, sizeof(msg), "an operation it waited for failed: %s",
				status_text(status));
		session_complete(s, rec->tag, server_status_from_errno(status), msg, rec->at);
	}
	if (rec->at.seq) /* an op, not a watch */
		server_timeline_done(s->srv, rec, status);
	op_rec_free(rec);
}

int handle_over_limit(struct session *s)
{
	const unsigned limit = s->srv->opts.limits.client_handles;

	if (s->nhandles < limit)
		return 0;
	s->srv->limit.handles_refused++;
	return req_error(s, -ENOSPC,
		"this session holds %u handles (buffers, slices, arenas, modules), the most "
		"allowed (--client-handle-limit): free some",
		limit);
}
