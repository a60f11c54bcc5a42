/* Inspection: answers sseqctl's queries from the daemon's state — device, streams,
 * clients, buffers, counters and a Prometheus text form; the trace ring, the timeline and
 * the modules in query-*.c — over every loop (--loops), the others parked meanwhile.
 * Sessions are read through their accessors (session_foreach, session_info,
 * session_foreach_buffer). */
#include "query.h"
#include "verify.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "arena.h"
#include "outcome.h"
#include "ring.h"
#include "server.h"
#include "session.h"
#include "sseq-tables.h"

static Sseq__DeviceInfo *query_device(struct server *srv, struct arena *a)
{
	Sseq__DeviceInfo *d = arena_alloc(a, sizeof(*d));
	struct backend_info info = {0};
	const struct loops_resets *r = &srv->loops->resets;

	sseq__device_info__init(d);
	backend_info(&srv->backend, &info);
	d->index = srv->opts.device;
	d->name = arena_strdup(a, info.name);
	d->backend = arena_strdup(a, info.backend ? info.backend : "");
	d->arch = arena_strdup(a, info.arch);
	d->memory_total = info.memory_total;
	/* Each loop's backend instance holds its own buffers on the one device. */
	for (unsigned i = 0; i < srv->loops->n; i++) {
		struct server *s = loops_server(srv->loops, i);
		struct backend_info other = {0};

		if (!s)
			continue;
		if (s == srv) {
			d->memory_used += info.memory_used;
			continue;
		}
		backend_info(&s->backend, &other);
		d->memory_used += other.memory_used;
	}
	d->resets = r->count;
	d->last_reset_at = arena_strdup(a, r->at);
	d->last_reset_cause = arena_strdup(a, r->cause);
	d->last_reset_ms = r->last_ms;
	d->max_threads_per_block = info.max_threads_per_block;
	if (info.max_grid[0]) {
		d->n_max_block = d->n_max_grid = 3;
		d->max_block = arena_alloc(a, sizeof(info.max_block));
		d->max_grid = arena_alloc(a, sizeof(info.max_grid));
		memcpy(d->max_block, info.max_block, sizeof(info.max_block));
		memcpy(d->max_grid, info.max_grid, sizeof(info.max_grid));
	}
	d->shared_per_block = info.shared_per_block;
	d->shared_optin = info.shared_optin;
	return d;
}

/* The daemon as `systemctl status` shows a service: its release, pid, start and
 * socket, loop 0's (which listens). A socket from systemd has no path of ours: ask the
 * socket itself (one we bound was bound under a temporary name and renamed, so only
 * then). */
static Sseq__DaemonInfo *query_daemon(struct server *asking, struct arena *a)
{
	struct server *srv =
		loops_server(asking->loops, 0) ? loops_server(asking->loops, 0) : asking;
	Sseq__DaemonInfo *d = arena_alloc(a, sizeof(*d));
	struct sockaddr_un addr = {0};
	socklen_t len = sizeof(addr);
	const char *path = srv->opts.socket_path;

	sseq__daemon_info__init(d);
	d->version = (char *)SSEQ_VERSION;
	d->pid = (uint32_t)getpid();
	d->started_unix_ns = srv->started_unix_ns;
	d->uptime_ns = server_now_ns() - srv->started_ns;
	d->started_monotonic_ns = srv->started_ns;
	if (srv->opts.listen_fd >= 0 || !path) {
		path = "";
		if (getsockname(srv->listen_fd, (struct sockaddr *)&addr, &len) == 0 &&
			addr.sun_family == AF_UNIX && len < sizeof(addr) && addr.sun_path[0])
			path = addr.sun_path;
	}
	d->socket = arena_strdup(a, path);
	return d;
}

/* Which sessions' lanes map to each stream: counted in one walk, filled in a second. */
struct query_lanes {
	const struct seq_layout *layout; /* the walked loop's */
	unsigned base; /* where its streams start in the answer */
	struct session_info asker;
	Sseq__StreamInfo **streams;
	bool fill;
};

static void query_lanes_of(const struct session *s, void *arg)
{
	struct query_lanes *q = arg;
	struct session_info si;

	session_info(s, &si);
	if (!session_may_see(&q->asker, &si))
		return;
	for (unsigned k = 0; k < SEQ_STREAM_KINDS; k++) {
		for (uint32_t i = 0; i < si.nlanes; i++) {
			unsigned x =
				q->base + q->layout->first[k] + si.lanes[i] % q->layout->count[k];
			Sseq__StreamInfo *st = q->streams[x];
			/* A session's lanes are walked together: one entry per stream. */
			bool dup = false;
			for (uint32_t j = 0; j < i && !dup; j++)
				dup = si.lanes[j] % q->layout->count[k] ==
					si.lanes[i] % q->layout->count[k];
			if (dup)
				continue;
			if (q->fill)
				st->sessions[st->n_sessions] = si.id;
			st->n_sessions++;
		}
	}
}

/* Every loop's sessions onto its own streams. */
static void query_lanes_walk(struct server *srv, struct query_lanes *q)
{
	for (unsigned k = 0, base = 0; k < srv->loops->n; k++) {
		struct server *s = loops_server(srv->loops, k);

		if (!s)
			continue;
		q->layout = seq_layout(s->seq);
		q->base = base;
		session_foreach(s, query_lanes_of, q);
		base += seq_stream_count(s->seq);
	}
}

static void query_stream_sessions(
	struct server *srv, const struct session *asker, Sseq__QueryResult *res, struct arena *a)
{
	struct query_lanes q = {.streams = res->streams};

	session_info(asker, &q.asker);
	query_lanes_walk(srv, &q);
	for (size_t i = 0; i < res->n_streams; i++) {
		Sseq__StreamInfo *st = res->streams[i];
		st->sessions = st->n_sessions
			? arena_alloc(a, st->n_sessions * sizeof(*st->sessions))
			: NULL;
		st->n_sessions = 0;
	}
	q.fill = true;
	query_lanes_walk(srv, &q);
}

/* Every loop's streams, one after another (loops_stream_base). */
static void query_streams(
	struct server *srv, const struct session *asker, Sseq__QueryResult *res, struct arena *a)
{
	unsigned n = loops_stream_base(srv->loops, srv->loops->n);

	res->streams = arena_alloc(a, (n + 1) * sizeof(*res->streams));
	res->n_streams = 0;
	for (unsigned k = 0; k < srv->loops->n; k++) {
		struct server *s = loops_server(srv->loops, k);

		for (unsigned i = 0; s && i < seq_stream_count(s->seq); i++) {
			Sseq__StreamInfo *si = arena_alloc(a, sizeof(*si));
			struct seq_stream_info info;

			sseq__stream_info__init(si);
			seq_stream_info(s->seq, i, &info);
			si->id = (uint32_t)res->n_streams;
			si->kind = (Sseq__StreamKind)(info.kind + 1);
			si->index = info.index;
			si->last_issued = info.issued;
			si->last_completed = info.completed;
			si->window_used = info.window_used;
			si->window_capacity = info.window_capacity;
			res->streams[res->n_streams++] = si;
		}
	}
	query_stream_sessions(srv, asker, res, a);
}

/* Each counter's field number in Counters, in SSEQ_COUNTERS' order. */
static const unsigned query_counter_field[SSEQ_COUNTER_COUNT] = {
#define QUERY_COUNTER_FIELD(name, number, help, label) number,
	SSEQ_COUNTERS(QUERY_COUNTER_FIELD)
#undef QUERY_COUNTER_FIELD
};

/* One loop's counters into c: every slot of its count[], then those the core and the
 * backend keep. */
static void query_counters_of(struct server *srv, Sseq__Counters *c)
{
	const struct seq_counters *sc = seq_counters(srv->seq);
	struct backend_counters bc;

	sseq__counters__init(c);
	for (unsigned i = 0; i < SSEQ_COUNTER_COUNT; i++) {
		const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(
			&sseq__counters__descriptor, query_counter_field[i]);

		memcpy((char *)c + f->offset, &srv->count[i], sizeof(srv->count[i]));
	}
	c->waits_enqueued = sc->waits_enqueued;
	c->waits_elided_same_stream = sc->waits_elided_same_stream;
	c->waits_elided_observed = sc->waits_elided_observed;
	c->waits_elided_legacy = sc->waits_elided_legacy;
	c->backpressure_events = sc->backpressure;
	c->ops_submitted = sc->ops_submitted;
	c->ops_completed = sc->ops_completed;
	c->ops_failed = sc->ops_failed;
	c->events_recorded = sc->events_recorded;
	c->frees_deferred = sc->frees_deferred;
	c->releases = sc->releases;
	c->double_definitions = sc->double_definitions;
	c->placed_by_affinity = sc->placed_by_affinity;
	c->verify_findings = srv->verify ? verify_violations(srv->verify) : 0;
	c->race_findings = backend_findings(&srv->backend) + c->verify_findings;
	c->waits_dropped = sc->waits_dropped;
	/* Of those, the hip audit's (also counted in race_findings); 0 on the sim. */
	c->audit_findings = backend_audit_findings(&srv->backend);
	c->loop_busy_us = srv->busy_ns / 1000u;
	backend_counters(&srv->backend, &bc);
	c->small_copies = bc.small_copies;
	c->small_copies_unpooled = bc.small_copies_unpooled;
	c->arenas_pinned = bc.arenas_pinned;
	c->calls_on_loop = bc.calls_on_loop;
	c->submit_wakeups = bc.submit_wakeups;
}

/* Every loop's counters summed, field by field over the schema (all are uint64), but
 * device_resets: the one device's. */
static Sseq__Counters *query_counters(struct server *srv, struct arena *a)
{
	const ProtobufCMessageDescriptor *d = &sseq__counters__descriptor;
	Sseq__Counters *c = arena_alloc(a, sizeof(*c));
	Sseq__Counters one;

	query_counters_of(srv, c);
	for (unsigned k = 0; k < srv->loops->n; k++) {
		struct server *s = loops_server(srv->loops, k);

		if (!s || s == srv)
			continue;
		query_counters_of(s, &one);
		for (unsigned i = 0; i < d->n_fields; i++) {
			const ProtobufCFieldDescriptor *f = &d->fields[i];
			uint64_t sum, v;

			if (f->type != PROTOBUF_C_TYPE_UINT64 ||
				f->label == PROTOBUF_C_LABEL_REPEATED)
				continue;
			memcpy(&sum, (const char *)c + f->offset, sizeof(sum));
			memcpy(&v, (const char *)&one + f->offset, sizeof(v));
			sum += v;
			memcpy((char *)c + f->offset, &sum, sizeof(sum));
		}
	}
	c->device_resets = srv->loops->resets.count;
	return c;
}

/* What a walk over the sessions collects into. */
struct query_walk {
	struct server *srv;
	struct session_info asker;
	uint64_t only; /* one session's id, or 0 */
	Sseq__QueryResult *res;
	struct arena *a;
};

static bool query_walk_wants(struct query_walk *w, const struct session *s, struct session_info *si)
{
	session_info(s, si);
	return session_may_see(&w->asker, si) && (!w->only || si->id == w->only);
}

static void query_client(const struct session *s, void *arg)
{
	struct query_walk *w = arg;
	struct session_info si;
	const struct session_ring *rg;
	Sseq__ClientInfo *ci;

	if (!query_walk_wants(w, s, &si))
		return;
	ci = arena_alloc(w->a, sizeof(*ci));
	sseq__client_info__init(ci);
	ci->session = si.id;
	ci->pid = si.pid;
	ci->uid = si.uid;
	ci->worker_id = arena_strdup(w->a, si.worker);
	ci->name = arena_strdup(w->a, si.name);
	ci->buffers = si.buffers;
	ci->bytes = si.bytes;
	ci->inflight = si.inflight;
	ci->staging_arenas = si.stagings;
	ci->staging_bytes = si.staging_bytes;
	if ((rg = ring_get(s))) {
		ci->ring_size = rg->size;
		ci->ring_bytes = rg->head;
	}
	ci->n_lanes = si.nlanes;
	ci->lanes = arena_alloc(w->a, (si.nlanes + 1) * sizeof(*ci->lanes));
	memcpy(ci->lanes, si.lanes, si.nlanes * sizeof(*ci->lanes));
	w->res->clients[w->res->n_clients++] = ci;
}

/* Every loop's sessions. */
static unsigned query_nsessions(struct server *srv)
{
	unsigned n = 0;

	for (unsigned k = 0; k < srv->loops->n; k++) {
		struct server *s = loops_server(srv->loops, k);

		n += s ? s->nsessions : 0;
	}
	return n;
}

static void query_clients(struct server *srv, const struct session *asker, uint64_t only,
	Sseq__QueryResult *res, struct arena *a)
{
	struct query_walk w = {.srv = srv, .only = only, .res = res, .a = a};

	session_info(asker, &w.asker);
	res->clients = arena_alloc(a, (query_nsessions(srv) + 1) * sizeof(*res->clients));
	for (unsigned k = 0; k < srv->loops->n; k++) {
		struct server *s = loops_server(srv->loops, k);

		if (s)
			session_foreach(s, query_client, &w);
	}
}

/* p of a loop whose streams start at base in the answer. */
static Sseq__Point *query_point(struct arena *a, struct seq_point p, unsigned base)
{
	Sseq__Point *pt = arena_alloc(a, sizeof(*pt));
	sseq__point__init(pt);
	pt->stream = base + p.stream;
	pt->seq = p.seq;
	return pt;
}

/* What the sequencer knows of a base: its producer, pending readers, failure (I1, I4, I9).
 * srv is the loop that holds it, whose streams start at `streams` in the answer. */
static void query_buffer_state(struct server *srv, unsigned streams, struct arena *a,
	const struct seq_buffer *base, Sseq__BufferInfo *bi)
{
	unsigned nstreams = seq_stream_count(srv->seq);
	struct seq_stream_info si;

	bi->producer = query_point(a, base->def, streams);
	seq_stream_info(srv->seq, base->def.stream, &si);
	bi->producer_complete = base->def.seq <= si.completed;
	bi->readers = arena_alloc(a, nstreams * sizeof(*bi->readers));
	for (unsigned x = 0; x < nstreams; x++) {
		seq_stream_info(srv->seq, x, &si);
		if (base->readers[x] > si.completed)
			bi->readers[bi->n_readers++] =
				query_point(a, (struct seq_point){x, base->readers[x]}, streams);
	}
	bi->pending_free = base->pending;
	bi->producer_status = outcome_status(seq_buffer_error(srv->seq, base));
}

/* Packed bytes of BufferInfo entries past which a BUFFERS answer stops and says where to go
 * on (buffers_next): a page stays well inside MAX_FRAME_SIZE however many buffers there are. */
#define BUFFERS_PAGE_BYTES (512u << 10)

/* One page of the BUFFERS listing: sessions by id, each one's handles by slot, then the
 * freed bases. */
struct query_bufs {
	struct server *srv; /* the walked session's loop */
	unsigned streams; /* where that loop's streams start in the answer */
	Sseq__QueryResult *res;
	struct arena *a;
	size_t cap, bytes;
	uint64_t session; /* the session being walked */
	uint32_t from_slot; /* its first slot to list (a handle's low 32 bits) */
	bool full; /* the page is full: next says where the rest starts */
	Sseq__BufferCursor *next;
};

/* Whether bi still fits this page; once one does not, the page ends where it starts. */
static bool query_bufs_add(struct query_bufs *w, Sseq__BufferInfo *bi, uint64_t session,
	uint64_t handle, uint64_t freed)
{
	size_t n = sseq__buffer_info__get_packed_size(bi) + 8;

	if (w->res->n_buffers > 0 && w->bytes + n > BUFFERS_PAGE_BYTES) {
		w->full = true;
		w->next = arena_alloc(w->a, sizeof(*w->next));
		sseq__buffer_cursor__init(w->next);
		w->next->session = session;
		w->next->handle = handle;
		w->next->freed = freed;
		return false;
	}
	if (w->res->n_buffers == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64;
		Sseq__BufferInfo **grown = arena_alloc(w->a, cap * sizeof(*grown));

		if (w->cap)
			memcpy(grown, w->res->buffers, w->cap * sizeof(*grown));
		w->res->buffers = grown;
		w->cap = cap;
	}
	w->res->buffers[w->res->n_buffers++] = bi;
	w->bytes += n;
	return true;
}

static void query_buffer(const struct session_buffer *sb, void *arg)
{
	struct query_bufs *w = arg;
	const struct seq_buffer *b = sb->buf, *base = b->base ? b->base : b;
	Sseq__BufferInfo *bi;

	if (w->full || (uint32_t)sb->handle < w->from_slot)
		return;
	bi = arena_alloc(w->a, sizeof(*bi));
	sseq__buffer_info__init(bi);
	bi->session = w->session;
	bi->handle = sb->handle;
	bi->label = arena_strdup(w->a, sb->label);
	bi->size = b->size;
	bi->is_slice = b->base != NULL;
	bi->base_handle = sb->base_handle;
	bi->offset = b->offset;
	bi->slices = base->refs - (base->freed ? 0 : 1);
	query_buffer_state(w->srv, w->streams, w->a, base, bi);
	query_bufs_add(w, bi, w->session, sb->handle, 0);
}

/* The sessions the asker may list, to be put in id order. */
struct query_bufs_session {
	uint64_t id;
	const struct session *s;
};

struct query_bufs_sessions {
	struct session_info asker;
	uint64_t only, from;
	struct query_bufs_session *v;
	size_t n, cap;
};

static void query_bufs_session(const struct session *s, void *arg)
{
	struct query_bufs_sessions *l = arg;
	struct session_info si;

	session_info(s, &si);
	if (!session_may_see(&l->asker, &si) || (l->only && si.id != l->only) || si.id < l->from)
		return;
	if (l->n < l->cap)
		l->v[l->n++] = (struct query_bufs_session){si.id, s};
}

static int query_bufs_session_cmp(const void *x, const void *y)
{
	const struct query_bufs_session *a = x, *b = y;

	return a->id < b->id ? -1 : a->id > b->id;
}

static void query_buffers(struct server *srv, const struct session *asker, const Sseq__Query *q,
	Sseq__QueryResult *res, struct arena *a)
{
	const Sseq__BufferCursor *from = q->buffers_from;
	struct query_bufs w = {.srv = srv, .res = res, .a = a};
	struct query_bufs_sessions l = {.only = q->session, .from = from ? from->session : 0};
	size_t np, at = 0;
	unsigned streams = 0;

	session_info(asker, &l.asker);
	res->buffers = NULL;
	res->n_buffers = 0; /* the page grows from empty, with w.cap */
	l.cap = query_nsessions(srv);
	l.v = arena_alloc(a, (l.cap + 1) * sizeof(*l.v));
	/* Session 0 in a cursor: the sessions are done (ids start at 1). */
	for (unsigned k = 0; k < srv->loops->n && (!from || from->session); k++)
		if (loops_server(srv->loops, k))
			session_foreach(loops_server(srv->loops, k), query_bufs_session, &l);
	/* By id (unique across loops), so that where a page ends is a place the next page
	 * can start from. */
	qsort(l.v, l.n, sizeof(*l.v), query_bufs_session_cmp);
	for (size_t i = 0; i < l.n && !w.full; i++) {
		w.srv = session_server(l.v[i].s);
		w.streams = loops_stream_base(srv->loops, w.srv->loop_index);
		w.session = l.v[i].id;
		w.from_slot = from && l.v[i].id == from->session ? (uint32_t)from->handle : 0;
		session_foreach_buffer(l.v[i].s, query_buffer, &w);
	}
	/* Freed bases whose memory waits for their last use (I5) have no handle any more:
	 * root sees them too. Numbered over the loops one after another, for the cursor. */
	for (unsigned k = 0; k < srv->loops->n && l.asker.uid == 0 && !q->session; k++) {
		struct server *s = loops_server(srv->loops, k);
		size_t skip = from && !from->session ? from->freed : 0;

		if (!s)
			continue;
		np = seq_pending_count(s->seq);
		for (size_t i = skip > at ? skip - at : 0; i < np && !w.full; i++) {
			const struct seq_buffer *b = seq_pending_get(s->seq, i);
			Sseq__BufferInfo *bi = arena_alloc(a, sizeof(*bi));

			sseq__buffer_info__init(bi);
			bi->session = b->owner;
			bi->label = (char *)"(freed)";
			bi->size = b->size;
			query_buffer_state(s, streams, a, b, bi);
			query_bufs_add(&w, bi, 0, 0, at + i);
		}
		at += np;
		streams += seq_stream_count(s->seq);
	}
	if (!res->buffers)
		res->buffers = arena_alloc(a, sizeof(*res->buffers));
	res->buffers_next = w.next;
}

struct metrics_buf {
	char *text;
	size_t len, cap;
	struct arena *a;
};

/* One sample, its value already in the text format's words; under a HELP and TYPE when
 * help is given (a family's first sample). */
static void metric_text(struct metrics_buf *m, const char *name, const char *type, const char *help,
	const char *labels, const char *value)
{
	char line[768];
	int n = 0;

	if (help)
		n = snprintf(line, sizeof(line), "# HELP sseq_%s %s\n# TYPE sseq_%s %s\n", name,
			help, name, type);
	n += snprintf(line + n, sizeof(line) - (size_t)n, "sseq_%s{%s} %s\n", name, labels, value);
	if (n >= (int)sizeof(line))
		return; /* cut short it would break the format; no labels here come near */
	if (m->len + (size_t)n + 1 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 8192;
		char *t;
		while (cap < m->len + (size_t)n + 1)
			cap *= 2;
		t = arena_alloc(m->a, cap);
		if (!t)
			return;
		if (m->len)
			memcpy(t, m->text, m->len);
		m->text = t;
		m->cap = cap;
	}
	memcpy(m->text + m->len, line, (size_t)n + 1);
	m->len += (size_t)n;
}

static void metric(struct metrics_buf *m, const char *name, const char *type, const char *help,
	const char *labels, uint64_t value)
{
	char v[24];

	snprintf(v, sizeof(v), "%" PRIu64, value);
	metric_text(m, name, type, help, labels, v);
}

/* The HELP line of a Counters field (the schema, sseq.proto, is the list of counters and
 * their help: one added there shows up here without a line of its own). */
static const char *counter_help(const char *field)
{
	static const struct {
		const char *field, *help;
	} help[] = {
#define COUNTER_HELP(name, number, text, label) {#name, text},
		SSEQ_COUNTERS(COUNTER_HELP) /* sseq-tables.h, from sseq.proto */
#undef COUNTER_HELP
	};

	for (size_t i = 0; i < sizeof(help) / sizeof(help[0]); i++)
		if (strcmp(help[i].field, field) == 0)
			return help[i].help;
	return "See sseq(7), COUNTERS.";
}

/* Every uint64 field of Counters: a *_bytes field is a gauge, the rest are counters
 * (named *_total, as Prometheus wants). */
static void metric_counters(struct metrics_buf *m, const Sseq__Counters *c, const char *labels)
{
	const ProtobufCMessageDescriptor *d = &sseq__counters__descriptor;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		size_t len = strlen(f->name);
		bool gauge = len > 6 && strcmp(f->name + len - 6, "_bytes") == 0;
		bool total = len > 6 && strcmp(f->name + len - 6, "_total") == 0;
		bool micros = len > 3 && strcmp(f->name + len - 3, "_us") == 0;
		char name[96];
		uint64_t v;

		if (f->type != PROTOBUF_C_TYPE_UINT64 || f->label == PROTOBUF_C_LABEL_REPEATED)
			continue;
		memcpy(&v, (const char *)c + f->offset, sizeof(v));
		/* A time in microseconds goes out in seconds, Prometheus's base unit. */
		if (micros) {
			char text[48];

			snprintf(name, sizeof(name), "%.*s_seconds_total", (int)(len - 3), f->name);
			snprintf(text, sizeof(text), "%" PRIu64 ".%06" PRIu64, v / 1000000u,
				v % 1000000u);
			metric_text(m, name, "counter", counter_help(f->name), labels, text);
			continue;
		}
		snprintf(name, sizeof(name), "%s%s", f->name, gauge || total ? "" : "_total");
		metric(m, name, gauge ? "gauge" : "counter", counter_help(f->name), labels, v);
	}
}

static uint64_t stream_window_used(const struct seq_stream_info *si)
{
	return si->window_used;
}

static uint64_t stream_last_issued(const struct seq_stream_info *si)
{
	return si->issued;
}

static uint64_t stream_last_completed(const struct seq_stream_info *si)
{
	return si->completed;
}

/* The per-stream gauges, labelled with stream and kind. */
static const struct {
	const char *name, *help;
	uint64_t (*value)(const struct seq_stream_info *si);
} stream_families[] = {
	{"stream_window_used", "Incomplete points in the stream's window.", stream_window_used},
	{"stream_last_issued", "Last issued point.", stream_last_issued},
	{"stream_last_completed", "Last point observed complete.", stream_last_completed},
};

/* sseq_clients leaves out the session asking: a scrape through sseqctl is a connection of
 * its own, and counting it would make every scrape see one client more than there is. */
static char *query_metrics(struct server *srv, const struct session *asker, struct arena *a)
{
	struct metrics_buf m = {.a = a};
	Sseq__Counters *c = query_counters(srv, a);
	Sseq__DeviceInfo *d = query_device(srv, a);
	char dev[128];
	char labels[256];
	char started[40];
	struct server *s0 = loops_server(srv->loops, 0) ? loops_server(srv->loops, 0) : srv;
	unsigned nsessions = query_nsessions(srv);

	/* gpu beside device, as DCGM's exporter labels its samples, so the two join on it. */
	snprintf(dev, sizeof(dev), "device=\"%u\",gpu=\"%u\",backend=\"%s\"", srv->opts.device,
		srv->opts.device, d->backend);
	snprintf(labels, sizeof(labels), "%s,version=\"%s\"", dev, SSEQ_VERSION);
	metric(&m, "build_info", "gauge", "Always 1: the daemon's release in its version label.",
		labels, 1);
	/* In seconds since the epoch, fraction and all, as process_start_time_seconds is. */
	snprintf(started, sizeof(started), "%" PRIu64 ".%09" PRIu64,
		s0->started_unix_ns / 1000000000u, s0->started_unix_ns % 1000000000u);
	metric_text(&m, "start_time_seconds", "gauge",
		"When the daemon started serving, in seconds since the Unix epoch.", dev, started);
	metric(&m, "clients", "gauge", "Connected client sessions, the one asking not counted.",
		dev, nsessions - (asker && nsessions ? 1 : 0));
	metric(&m, "memory_total_bytes", "gauge", "Device memory in total.", dev, d->memory_total);
	metric(&m, "memory_used_bytes", "gauge", "Device memory held by buffers.", dev,
		d->memory_used);
	metric_counters(&m, c, dev);
	/* Family by family, every stream's sample together under its HELP and TYPE: the
	 * text format wants a family's lines in one group. Every loop's streams, numbered
	 * as STREAMS numbers them (loops_stream_base). */
	for (size_t f = 0; f < sizeof(stream_families) / sizeof(stream_families[0]); f++) {
		unsigned id = 0;

		for (unsigned k = 0; k < srv->loops->n; k++) {
			struct server *s = loops_server(srv->loops, k);

			for (unsigned i = 0; s && i < seq_stream_count(s->seq); i++, id++) {
				struct seq_stream_info si;
				seq_stream_info(s->seq, i, &si);
				snprintf(labels, sizeof(labels), "%s,stream=\"%u\",kind=\"%s\"",
					dev, id, seq_stream_kind_name(si.kind));
				metric(&m, stream_families[f].name, "gauge",
					id == 0 ? stream_families[f].help : NULL, labels,
					stream_families[f].value(&si));
			}
		}
	}
	return m.text ? m.text : arena_strdup(a, "");
}

void query_answer(struct server *srv, const struct session *asker, const Sseq__Query *q,
	Sseq__QueryResult *res, struct arena *a)
{
	uint64_t only = q->session;
	/* Several loops: every loop's state, read with the others parked (a trace follower's
	 * too, in the merged numbering: trace.c asks for it on a timer, not each turn). */
	bool world = srv->loops->n > 1;

	if (world)
		loops_stop_world(srv->loops, srv->loop_index);
	res->status = SSEQ__STATUS__STATUS_OK;
	res->message = (char *)"";
	switch (q->kind) {
	case SSEQ__QUERY_KIND__QUERY_KIND_STATUS:
		res->daemon = query_daemon(srv, a);
		res->device = query_device(srv, a);
		query_streams(srv, asker, res, a);
		res->counters = query_counters(srv, a);
		query_clients(srv, asker, only, res, a);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS:
		query_clients(srv, asker, only, res, a);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS:
		query_buffers(srv, asker, q, res, a);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_STREAMS:
		query_streams(srv, asker, res, a);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_STATS:
		res->counters = query_counters(srv, a);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_TRACE:
		query_trace(srv, asker, q, res, a);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_METRICS:
		res->metrics_text = query_metrics(srv, asker, a);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_TIMELINE:
		query_timeline(srv, asker, q, res, a);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_MODULES:
		query_modules(srv, asker, q, res, a);
		break;
	default:
		outcome_query(res, a, -EINVAL, "unknown query kind");
		break;
	}
	if (world)
		loops_resume_world(srv->loops);
}
