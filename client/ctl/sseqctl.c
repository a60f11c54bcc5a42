/* sseqctl: asks one sseqd what it is doing (device, streams, clients, buffers, counters,
 * the trace of sequencing decisions, Prometheus metrics) over one short synchronous
 * exchange on its socket, and prints tables or JSON. Independent of libsseq on purpose. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl-json.h"
#include "sseq.pb-c.h"

#define CTL_DEFAULT_SOCKET "/run/sseq/gpu0.sock"
#define CTL_TIMEOUT_MS 5000
#define CTL_FOLLOW_MS 200

/* Exit codes are part of the interface: scripts tell "no daemon" from "daemon said no". */
enum {
	EXIT_DAEMON = 1, /* the daemon refused, or answered something unreadable */
	EXIT_USAGE = 2,
	EXIT_UNREACHABLE = 3, /* nothing answers at the socket, or not in time */
};

struct ctl {
	const char *socket;
	int fd;
	bool json;
	uint64_t next_tag;
	uint64_t session; /* ours, from the Welcome: left out of client lists */
	char err[512]; /* why the last call failed */
};

static volatile sig_atomic_t ctl_stop;

static void ctl_on_signal(int sig)
{
	ctl_stop = 1;
}

static void ctl_error(struct ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void ctl_error(struct ctl *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
}

static int64_t ctl_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for the socket until the exchange's deadline, so a daemon that accepts but
 * never answers costs at most CTL_TIMEOUT_MS in total, not per byte. */
static int ctl_wait(struct ctl *c, short events, int64_t deadline)
{
	struct pollfd p = {.fd = c->fd, .events = events};

	for (;;) {
		int64_t left = deadline - ctl_now_ms();
		int r;

		if (left <= 0) {
			ctl_error(c, "no answer from the daemon at %s within %d s", c->socket,
				CTL_TIMEOUT_MS / 1000);
			return -ETIMEDOUT;
		}
		r = poll(&p, 1, (int)left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (ctl_stop)
			return -EINTR;
	}
}

static int ctl_write_all(struct ctl *c, const uint8_t *buf, size_t len, int64_t deadline)
{
	while (len > 0) {
		ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
		int r;

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			ctl_error(c, "sending to %s: %s", c->socket, strerror(errno));
			return -errno;
		}
		r = ctl_wait(c, POLLOUT, deadline);
		if (r < 0)
			return r;
	}
	return 0;
}

static int ctl_read_all(struct ctl *c, uint8_t *buf, size_t len, int64_t deadline)
{
	while (len > 0) {
		ssize_t n = recv(c->fd, buf, len, 0);
		int r;

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0) {
			ctl_error(c, "the daemon at %s closed the connection", c->socket);
			return -ECONNRESET;
		}
		if (errno != EAGAIN && errno != EINTR) {
			ctl_error(c, "reading from %s: %s", c->socket, strerror(errno));
			return -errno;
		}
		r = ctl_wait(c, POLLIN, deadline);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Connects with a send timeout so that even a full listen backlog cannot hang us;
 * afterwards the socket is non-blocking and every wait goes through ctl_wait. */
static int ctl_connect(struct ctl *c)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = CTL_TIMEOUT_MS / 1000};
	int r;

	if (strlen(c->socket) >= sizeof(addr.sun_path)) {
		ctl_error(c, "socket path too long: %s", c->socket);
		return -ENAMETOOLONG;
	}
	memcpy(addr.sun_path, c->socket, strlen(c->socket) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		r = -errno;
		ctl_error(c, "socket: %s", strerror(errno));
		return r;
	}
	if (setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
		connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
		fcntl(c->fd, F_SETFL, O_NONBLOCK) < 0) {
		r = -errno;
		if (r == -EAGAIN || r == -EINPROGRESS)
			r = -ETIMEDOUT;
		ctl_error(c,
			"no daemon answers at %s: %s (is sseqd running? set --socket or "
			"SSEQ_SOCKET)",
			c->socket, strerror(-r));
		return r;
	}
	return 0;
}

static int ctl_send(struct ctl *c, Sseq__Request *rq, int64_t deadline)
{
	size_t len = sseq__request__get_packed_size(rq);
	uint8_t *frame;
	int r;

	if (len > SSEQ__FRAME_LIMITS__MAX_FRAME_SIZE) {
		ctl_error(c, "request of %zu bytes exceeds the frame limit", len);
		return -EMSGSIZE;
	}
	frame = malloc(SSEQ__FRAME_LIMITS__FRAME_HEADER_SIZE + len);
	if (!frame) {
		ctl_error(c, "out of memory");
		return -ENOMEM;
	}
	for (unsigned i = 0; i < SSEQ__FRAME_LIMITS__FRAME_HEADER_SIZE; i++)
		frame[i] = (uint8_t)(len >> (8 * i));
	sseq__request__pack(rq, frame + SSEQ__FRAME_LIMITS__FRAME_HEADER_SIZE);
	r = ctl_write_all(c, frame, SSEQ__FRAME_LIMITS__FRAME_HEADER_SIZE + len, deadline);
	free(frame);
	return r;
}

static int ctl_recv(struct ctl *c, Sseq__Message **out, int64_t deadline)
{
	uint8_t hdr[SSEQ__FRAME_LIMITS__FRAME_HEADER_SIZE];
	uint8_t *body;
	uint32_t len = 0;
	int r;

	r = ctl_read_all(c, hdr, sizeof(hdr), deadline);
	if (r < 0)
		return r;
	for (unsigned i = 0; i < sizeof(hdr); i++)
		len |= (uint32_t)hdr[i] << (8 * i);
	/* Checked before allocating: a bogus length must not make us allocate 4 GiB. */
	if (len > SSEQ__FRAME_LIMITS__MAX_FRAME_SIZE) {
		ctl_error(c, "the daemon sent a frame of %" PRIu32 " bytes, over the limit", len);
		return -EPROTO;
	}
	body = malloc(len ? len : 1);
	if (!body) {
		ctl_error(c, "out of memory");
		return -ENOMEM;
	}
	r = ctl_read_all(c, body, len, deadline);
	if (r == 0) {
		*out = sseq__message__unpack(NULL, len, body);
		if (!*out) {
			ctl_error(c, "the daemon sent a message that does not decode");
			r = -EPROTO;
		}
	}
	free(body);
	return r;
}

/* The daemon's own spelling of an enum value, shortened for people: STATUS_BUSY is
 * "busy", STREAM_KIND_H2D is "h2d". */
static const char *ctl_enum_name(
	const ProtobufCEnumDescriptor *desc, int value, const char *prefix, char *buf, size_t size)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(desc, value);
	const char *name;
	size_t i;

	if (!v) {
		snprintf(buf, size, "%d", value);
		return buf;
	}
	name = v->name;
	if (strncmp(name, prefix, strlen(prefix)) == 0)
		name += strlen(prefix);
	for (i = 0; name[i] && i + 1 < size; i++)
		buf[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
	buf[i] = '\0';
	return buf;
}

static const char *ctl_status_name(int status, char *buf, size_t size)
{
	return ctl_enum_name(&sseq__status__descriptor, status, "STATUS_", buf, size);
}

/* Sends one request and returns the message that answers it: a Reply or QueryResult
 * under its tag. Anything else (a Completion, a stray Reply) is not ours and skipped,
 * except a tag-0 error: the daemon refusing the connection or shutting down. */
static int ctl_exchange(struct ctl *c, Sseq__Request *rq, Sseq__Message **out)
{
	int64_t deadline = ctl_now_ms() + CTL_TIMEOUT_MS;
	int r;

	rq->tag = ++c->next_tag;
	r = ctl_send(c, rq, deadline);
	while (r == 0) {
		Sseq__Message *m = NULL;
		const Sseq__QueryResult *qr;
		const Sseq__Reply *reply;
		Sseq__Status status;
		const char *message;
		char name[64];

		r = ctl_recv(c, &m, deadline);
		if (r < 0)
			break;
		qr = m->body_case == SSEQ__MESSAGE__BODY_QUERY_RESULT ? m->query_result : NULL;
		reply = m->body_case == SSEQ__MESSAGE__BODY_REPLY ? m->reply : NULL;
		if (qr && qr->tag == rq->tag) {
			status = qr->status;
			message = qr->message;
		} else if (reply &&
			(reply->tag == rq->tag ||
				(reply->tag == 0 && reply->status != SSEQ__STATUS__STATUS_OK))) {
			status = reply->status;
			message = reply->message;
		} else {
			sseq__message__free_unpacked(m, NULL);
			continue;
		}
		if (status != SSEQ__STATUS__STATUS_OK) {
			ctl_error(c, "daemon: %s: %s", ctl_status_name(status, name, sizeof(name)),
				message ? message : "");
			sseq__message__free_unpacked(m, NULL);
			return -EREMOTEIO;
		}
		*out = m;
		return 0;
	}
	return r;
}

static int ctl_hello(struct ctl *c)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Hello hello = SSEQ__HELLO__INIT;
	Sseq__Message *m = NULL;
	int r;

	hello.protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	hello.protocol_minor = SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR;
	hello.client_name = (char *)"sseqctl";
	hello.pid = (uint32_t)getpid();
	rq.body_case = SSEQ__REQUEST__BODY_HELLO;
	rq.hello = &hello;
	r = ctl_exchange(c, &rq, &m);
	if (r < 0)
		return r;
	if (m->body_case != SSEQ__MESSAGE__BODY_REPLY || !m->reply->welcome) {
		ctl_error(c, "the daemon answered Hello without a Welcome");
		r = -EPROTO;
	} else {
		c->session = m->reply->welcome->session;
	}
	sseq__message__free_unpacked(m, NULL);
	return r;
}

static int ctl_query(struct ctl *c, Sseq__Query *q, Sseq__Message **out)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	int r;

	rq.body_case = SSEQ__REQUEST__BODY_QUERY;
	rq.query = q;
	r = ctl_exchange(c, &rq, out);
	if (r == 0 && (*out)->body_case != SSEQ__MESSAGE__BODY_QUERY_RESULT) {
		ctl_error(c, "the daemon answered a query with a plain Reply");
		sseq__message__free_unpacked(*out, NULL);
		*out = NULL;
		r = -EPROTO;
	}
	return r;
}

/* ---- human-readable output ---- */

/* A text table: cells are collected first so every column gets the width it needs. */
#define TABLE_MAX_COLS 16

struct table {
	const char *align; /* 'l' or 'r' per column, at most TABLE_MAX_COLS */
	unsigned ncols;
	char **cells; /* row-major; the first row is the header */
	size_t n, cap;
};

/* Labels and names come from clients: a newline or escape sequence in one must not
 * break the table or the terminal, so control bytes are shown C-style. */
static char *table_clean(char *cell)
{
	char *out, *o;

	if (!cell)
		return NULL;
	for (o = cell; *o && (unsigned char)*o >= 0x20 && *o != 0x7f; o++)
		;
	if (!*o)
		return cell;
	out = malloc(strlen(cell) * 4 + 1);
	if (out) {
		o = out;
		for (const unsigned char *p = (const unsigned char *)cell; *p; p++) {
			if (*p == '\n')
				o += sprintf(o, "\\n");
			else if (*p == '\t')
				o += sprintf(o, "\\t");
			else if (*p < 0x20 || *p == 0x7f)
				o += sprintf(o, "\\x%02x", *p);
			else
				*o++ = (char)*p;
		}
		*o = '\0';
	}
	free(cell);
	return out;
}

/* Takes ownership of cell; a cell that could not be formatted prints as "?". */
static void table_push(struct table *t, char *cell)
{
	cell = table_clean(cell);
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		char **cells = realloc(t->cells, cap * sizeof(*cells));
		if (!cells) {
			free(cell);
			return;
		}
		t->cells = cells;
		t->cap = cap;
	}
	t->cells[t->n++] = cell;
}

static void table_init(struct table *t, const char *align, ...)
{
	va_list ap;

	*t = (struct table){.align = align, .ncols = (unsigned)strlen(align)};
	va_start(ap, align);
	for (unsigned i = 0; i < t->ncols; i++)
		table_push(t, strdup(va_arg(ap, const char *)));
	va_end(ap);
}

static void table_cell(struct table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void table_cell(struct table *t, const char *fmt, ...)
{
	va_list ap;
	char *cell = NULL;

	va_start(ap, fmt);
	if (vasprintf(&cell, fmt, ap) < 0)
		cell = NULL;
	va_end(ap);
	table_push(t, cell);
}

static void table_print(const struct table *t, FILE *f)
{
	size_t width[TABLE_MAX_COLS] = {0};

	for (size_t i = 0; i < t->n; i++) {
		size_t len = t->cells[i] ? strlen(t->cells[i]) : 1;
		if (len > width[i % t->ncols])
			width[i % t->ncols] = len;
	}
	for (size_t i = 0; i < t->n; i++) {
		unsigned col = (unsigned)(i % t->ncols);
		const char *s = t->cells[i] ? t->cells[i] : "?";
		bool last = col + 1 == t->ncols || i + 1 == t->n;

		if (t->align[col] == 'r')
			fprintf(f, "%*s", (int)width[col], s);
		else if (last)
			fputs(s, f); /* no trailing blanks */
		else
			fprintf(f, "%-*s", (int)width[col], s);
		fputs(last ? "\n" : "  ", f);
	}
}

static void table_finish(struct table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->cells[i]);
	free(t->cells);
}

static const char *fmt_bytes(uint64_t bytes, char *buf, size_t size)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	unsigned u = 0;

	if (bytes < 1024) {
		snprintf(buf, size, "%" PRIu64 " B", bytes);
		return buf;
	}
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	snprintf(buf, size, "%.1f %s", v, units[u]);
	return buf;
}

static const char *fmt_point(const Sseq__Point *p, char *buf, size_t size)
{
	if (!p || p->seq == 0)
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, "%" PRIu32 ":%" PRIu64, p->stream, p->seq);
	return buf;
}

static bool client_visible(const struct ctl *c, const Sseq__ClientInfo *ci)
{
	return ci->session != c->session;
}

static size_t clients_count(const struct ctl *c, const Sseq__QueryResult *res)
{
	size_t n = 0;

	for (size_t i = 0; i < res->n_clients; i++)
		n += client_visible(c, res->clients[i]);
	return n;
}

static void text_streams(const Sseq__QueryResult *res)
{
	struct table t;
	char kind[32];

	table_init(&t, "rlrrrr", "ID", "KIND", "INDEX", "LAST ISSUED", "LAST COMPLETED", "WINDOW");
	for (size_t i = 0; i < res->n_streams; i++) {
		const Sseq__StreamInfo *s = res->streams[i];
		table_cell(&t, "%" PRIu32, s->id);
		table_cell(&t, "%s",
			ctl_enum_name(&sseq__stream_kind__descriptor, s->kind, "STREAM_KIND_", kind,
				sizeof(kind)));
		table_cell(&t, "%" PRIu32, s->index);
		table_cell(&t, "%" PRIu64, s->last_issued);
		table_cell(&t, "%" PRIu64, s->last_completed);
		table_cell(&t, "%" PRIu32 "/%" PRIu32, s->window_used, s->window_capacity);
	}
	table_print(&t, stdout);
	table_finish(&t);
}

static void text_clients(const struct ctl *c, const Sseq__QueryResult *res)
{
	struct table t;
	char b1[32], b2[32];

	if (clients_count(c, res) == 0) {
		puts("no clients");
		return;
	}
	table_init(&t, "rrrllrrrl", "SESSION", "PID", "UID", "WORKER", "NAME", "BUFFERS", "BYTES",
		"IN-FLIGHT", "STAGING");
	for (size_t i = 0; i < res->n_clients; i++) {
		const Sseq__ClientInfo *ci = res->clients[i];
		if (!client_visible(c, ci))
			continue;
		table_cell(&t, "%" PRIu64, ci->session);
		table_cell(&t, "%" PRIu32, ci->pid);
		table_cell(&t, "%" PRIu32, ci->uid);
		table_cell(&t, "%s", ci->worker_id && *ci->worker_id ? ci->worker_id : "-");
		table_cell(&t, "%s", ci->name && *ci->name ? ci->name : "-");
		table_cell(&t, "%" PRIu64, ci->buffers);
		table_cell(&t, "%s", fmt_bytes(ci->bytes, b1, sizeof(b1)));
		table_cell(&t, "%" PRIu64, ci->inflight);
		table_cell(&t, "%" PRIu64 " (%s)", ci->staging_arenas,
			fmt_bytes(ci->staging_bytes, b2, sizeof(b2)));
	}
	table_print(&t, stdout);
	table_finish(&t);
}

static void text_status(const struct ctl *c, const Sseq__QueryResult *res)
{
	const Sseq__DeviceInfo *d = res->device;
	const Sseq__Counters *k = res->counters;
	char used[32], total[32];

	if (d)
		printf("device %" PRIu32 ": %s (backend %s%s%s), memory %s / %s used\n", d->index,
			d->name && *d->name ? d->name : "?", d->backend ? d->backend : "?",
			d->arch && *d->arch ? ", " : "", d->arch ? d->arch : "",
			fmt_bytes(d->memory_used, used, sizeof(used)),
			fmt_bytes(d->memory_total, total, sizeof(total)));
	printf("clients: %zu\n\n", clients_count(c, res));
	text_streams(res);
	if (!k)
		return;
	printf("\n");
	printf("waits         %" PRIu64 " enqueued; elided %" PRIu64 " by same stream, %" PRIu64
	       " by observed completion; %" PRIu64 " legacy-elided\n",
		k->waits_enqueued, k->waits_elided_same_stream, k->waits_elided_observed,
		k->waits_elided_legacy);
	printf("ops           %" PRIu64 " submitted, %" PRIu64 " completed, %" PRIu64 " failed\n",
		k->ops_submitted, k->ops_completed, k->ops_failed);
	printf("backpressure  %" PRIu64 "\n", k->backpressure_events);
	printf("races         %" PRIu64 " findings\n", k->race_findings);
	printf("frees         %" PRIu64 " deferred, %" PRIu64 " released\n", k->frees_deferred,
		k->releases);
}

static void text_buffers(const Sseq__QueryResult *res)
{
	struct table t;

	if (res->n_buffers == 0) {
		puts("no buffers");
		return;
	}
	table_init(&t, "rlllllrlll", "SESSION", "HANDLE", "LABEL", "SIZE", "SLICE OF", "PRODUCER",
		"SLICES", "PENDING READERS", "PENDING FREE", "STATUS");
	for (size_t i = 0; i < res->n_buffers; i++) {
		const Sseq__BufferInfo *b = res->buffers[i];
		char size[32], point[48], readers[256], status[48];
		size_t off = 0;

		table_cell(&t, "%" PRIu64, b->session);
		table_cell(&t, "%#" PRIx64, b->handle);
		table_cell(&t, "%s", b->label && *b->label ? b->label : "-");
		table_cell(&t, "%s", fmt_bytes(b->size, size, sizeof(size)));
		if (b->is_slice)
			table_cell(&t, "%#" PRIx64 "+%" PRIu64, b->base_handle, b->offset);
		else
			table_cell(&t, "-");
		fmt_point(b->producer, point, sizeof(point));
		if (b->producer && b->producer->seq)
			table_cell(
				&t, "%s %s", point, b->producer_complete ? "complete" : "pending");
		else
			table_cell(&t, "-");
		table_cell(&t, "%" PRIu32, b->slices);
		readers[0] = '\0';
		for (size_t r = 0; r < b->n_readers && off < sizeof(readers); r++) {
			int n = snprintf(readers + off, sizeof(readers) - off, "%s%s", r ? "," : "",
				fmt_point(b->readers[r], point, sizeof(point)));
			if (n > 0)
				off += (size_t)n;
		}
		table_cell(&t, "%s", readers[0] ? readers : "-");
		table_cell(&t, "%s", b->pending_free ? "yes" : "no");
		table_cell(&t, "%s", ctl_status_name(b->producer_status, status, sizeof(status)));
	}
	table_print(&t, stdout);
	table_finish(&t);
}

/* Labels for counters whose field name alone reads badly; the rest are spelled from
 * the schema, so a counter added in a later minor version still shows up. */
static const char *counter_label(const char *field, char *buf, size_t size)
{
	static const struct {
		const char *field, *label;
	} labels[] = {
		{"waits_elided_same_stream", "waits elided: same stream"},
		{"waits_elided_observed", "waits elided: observed complete"},
		{"waits_elided_legacy", "waits elided: legacy (injected bug)"},
		{"frames_in", "frames received"},
		{"frames_bad", "frames refused"},
	};
	size_t i;

	for (i = 0; i < sizeof(labels) / sizeof(labels[0]); i++)
		if (strcmp(field, labels[i].field) == 0)
			return labels[i].label;
	for (i = 0; field[i] && i + 1 < size; i++)
		buf[i] = field[i] == '_' ? ' ' : field[i];
	buf[i] = '\0';
	return buf;
}

static uint64_t counter_value(const Sseq__Counters *k, const ProtobufCFieldDescriptor *f)
{
	uint64_t v;

	memcpy(&v, (const char *)k + f->offset, sizeof(v));
	return v;
}

static bool counter_is_u64(const ProtobufCFieldDescriptor *f)
{
	return f->type == PROTOBUF_C_TYPE_UINT64 && f->label != PROTOBUF_C_LABEL_REPEATED;
}

static void text_stats(const Sseq__QueryResult *res)
{
	const ProtobufCMessageDescriptor *desc = &sseq__counters__descriptor;
	struct table t;
	char buf[64];

	if (!res->counters) {
		puts("no counters");
		return;
	}
	table_init(&t, "lr", "COUNTER", "VALUE");
	for (unsigned i = 0; i < desc->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &desc->fields[i];
		if (!counter_is_u64(f))
			continue;
		table_cell(&t, "%s", counter_label(f->name, buf, sizeof(buf)));
		table_cell(&t, "%" PRIu64, counter_value(res->counters, f));
	}
	table_print(&t, stdout);
	table_finish(&t);
}

/* Fixed widths rather than a table: --follow prints rows as they come. */
static void text_trace_header(void)
{
	printf("%8s  %12s  %7s  %-7s  %-10s  %-12s  %-10s  %s\n", "SEQ", "TIME(s)", "SESSION", "OP",
		"POINT", "BUFFER", "PRODUCER", "DECISION");
}

static void text_trace(const Sseq__QueryResult *res)
{
	for (size_t i = 0; i < res->n_trace; i++) {
		const Sseq__TraceEntry *e = res->trace[i];
		printf("%8" PRIu64 "  %12.6f  %7" PRIu64 "  %-7s  %-10s  %-12s  %-10s  %s\n",
			e->seq, (double)e->time_ns / 1e9, e->session, e->op ? e->op : "",
			e->point ? e->point : "", e->buffer ? e->buffer : "",
			e->producer ? e->producer : "", e->decision ? e->decision : "");
	}
	fflush(stdout);
}

/* ---- JSON output ---- */

static void json_point(struct json *j, const char *key, const Sseq__Point *p)
{
	if (!p) {
		json_null(j, key);
		return;
	}
	json_object_begin(j, key);
	json_uint(j, "stream", p->stream);
	json_uint(j, "seq", p->seq);
	json_object_end(j);
}

/* Trace points arrive pre-rendered ("stream:seq", or "-" for none); machines get them
 * back as points. Text in any other shape is passed on unchanged rather than lost. */
static void json_point_text(struct json *j, const char *key, const char *text)
{
	Sseq__Point p = SSEQ__POINT__INIT;
	char *end;
	unsigned long stream;

	if (!text || !*text || strcmp(text, "-") == 0) {
		json_null(j, key);
		return;
	}
	errno = 0;
	stream = strtoul(text, &end, 10);
	if (end != text && *end == ':' && stream <= UINT32_MAX && end[1] >= '0' && end[1] <= '9') {
		char *tail;
		unsigned long long seq = strtoull(end + 1, &tail, 10);
		if (*tail == '\0' && errno == 0) {
			p.stream = (uint32_t)stream;
			p.seq = seq;
			json_point(j, key, &p);
			return;
		}
	}
	json_string(j, key, text);
}

static void json_device(struct json *j, const Sseq__DeviceInfo *d)
{
	if (!d) {
		json_null(j, "device");
		return;
	}
	json_object_begin(j, "device");
	json_uint(j, "index", d->index);
	json_string(j, "name", d->name);
	json_string(j, "backend", d->backend);
	json_string(j, "arch", d->arch);
	json_uint(j, "memory_used", d->memory_used);
	json_uint(j, "memory_total", d->memory_total);
	json_object_end(j);
}

static void json_streams(struct json *j, const Sseq__QueryResult *res)
{
	char kind[32];

	json_array_begin(j, "streams");
	for (size_t i = 0; i < res->n_streams; i++) {
		const Sseq__StreamInfo *s = res->streams[i];
		json_object_begin(j, NULL);
		json_uint(j, "id", s->id);
		json_string(j, "kind",
			ctl_enum_name(&sseq__stream_kind__descriptor, s->kind, "STREAM_KIND_", kind,
				sizeof(kind)));
		json_uint(j, "index", s->index);
		json_uint(j, "last_issued", s->last_issued);
		json_uint(j, "last_completed", s->last_completed);
		json_uint(j, "window_used", s->window_used);
		json_uint(j, "window_capacity", s->window_capacity);
		json_object_end(j);
	}
	json_array_end(j);
}

static void json_counters(struct json *j, const Sseq__Counters *k)
{
	const ProtobufCMessageDescriptor *desc = &sseq__counters__descriptor;

	if (!k) {
		json_null(j, "counters");
		return;
	}
	json_object_begin(j, "counters");
	for (unsigned i = 0; i < desc->n_fields; i++)
		if (counter_is_u64(&desc->fields[i]))
			json_uint(j, desc->fields[i].name, counter_value(k, &desc->fields[i]));
	json_object_end(j);
}

static void json_clients(struct json *j, const struct ctl *c, const Sseq__QueryResult *res)
{
	json_array_begin(j, "clients");
	for (size_t i = 0; i < res->n_clients; i++) {
		const Sseq__ClientInfo *ci = res->clients[i];
		if (!client_visible(c, ci))
			continue;
		json_object_begin(j, NULL);
		json_uint(j, "session", ci->session);
		json_uint(j, "pid", ci->pid);
		json_uint(j, "uid", ci->uid);
		json_string(j, "worker_id", ci->worker_id);
		json_string(j, "name", ci->name);
		json_uint(j, "buffers", ci->buffers);
		json_uint(j, "bytes", ci->bytes);
		json_uint(j, "inflight", ci->inflight);
		json_uint(j, "staging_arenas", ci->staging_arenas);
		json_uint(j, "staging_bytes", ci->staging_bytes);
		json_object_end(j);
	}
	json_array_end(j);
}

static void json_buffers(struct json *j, const Sseq__QueryResult *res)
{
	char status[48];

	json_array_begin(j, "buffers");
	for (size_t i = 0; i < res->n_buffers; i++) {
		const Sseq__BufferInfo *b = res->buffers[i];
		json_object_begin(j, NULL);
		json_uint(j, "session", b->session);
		json_uint(j, "handle", b->handle);
		json_string(j, "label", b->label);
		json_uint(j, "size", b->size);
		json_bool(j, "is_slice", b->is_slice);
		if (b->is_slice) {
			json_uint(j, "base_handle", b->base_handle);
			json_uint(j, "offset", b->offset);
		} else {
			json_null(j, "base_handle");
			json_null(j, "offset");
		}
		json_point(j, "producer", b->producer);
		json_bool(j, "producer_complete", b->producer_complete);
		json_string(j, "producer_status",
			ctl_status_name(b->producer_status, status, sizeof(status)));
		json_array_begin(j, "readers");
		for (size_t r = 0; r < b->n_readers; r++)
			json_point(j, NULL, b->readers[r]);
		json_array_end(j);
		json_uint(j, "slices", b->slices);
		json_bool(j, "pending_free", b->pending_free);
		json_object_end(j);
	}
	json_array_end(j);
}

static void json_trace(struct json *j, const Sseq__QueryResult *res)
{
	json_array_begin(j, "trace");
	for (size_t i = 0; i < res->n_trace; i++) {
		const Sseq__TraceEntry *e = res->trace[i];
		json_object_begin(j, NULL);
		json_uint(j, "seq", e->seq);
		json_uint(j, "time_ns", e->time_ns);
		json_uint(j, "session", e->session);
		json_string(j, "op", e->op);
		json_string(j, "stream", e->stream);
		json_point_text(j, "point", e->point);
		json_string(j, "decision", e->decision);
		json_string(j, "buffer", e->buffer);
		json_point_text(j, "producer", e->producer);
		json_object_end(j);
	}
	json_array_end(j);
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
};

static void ctl_print(
	const struct ctl *c, Sseq__QueryKind kind, const Sseq__QueryResult *res, bool pretty)
{
	struct json j;

	if (!c->json) {
		switch (kind) {
		case SSEQ__QUERY_KIND__QUERY_KIND_STATUS:
			text_status(c, res);
			break;
		case SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS:
			text_clients(c, res);
			break;
		case SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS:
			text_buffers(res);
			break;
		case SSEQ__QUERY_KIND__QUERY_KIND_STREAMS:
			text_streams(res);
			break;
		case SSEQ__QUERY_KIND__QUERY_KIND_STATS:
			text_stats(res);
			break;
		case SSEQ__QUERY_KIND__QUERY_KIND_TRACE:
			text_trace(res);
			break;
		case SSEQ__QUERY_KIND__QUERY_KIND_METRICS:
			fputs(res->metrics_text ? res->metrics_text : "", stdout);
			break;
		default:
			break;
		}
		return;
	}
	json_init(&j, stdout, pretty);
	json_object_begin(&j, NULL);
	switch (kind) {
	case SSEQ__QUERY_KIND__QUERY_KIND_STATUS:
		json_device(&j, res->device);
		json_streams(&j, res);
		json_counters(&j, res->counters);
		json_clients(&j, c, res);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS:
		json_clients(&j, c, res);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS:
		json_buffers(&j, res);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_STREAMS:
		json_streams(&j, res);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_STATS:
		json_counters(&j, res->counters);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_TRACE:
		json_trace(&j, res);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_METRICS:
		json_string(&j, "metrics", res->metrics_text ? res->metrics_text : "");
		break;
	default:
		break;
	}
	json_object_end(&j);
	json_finish(&j);
}

static int ctl_run(struct ctl *c, Sseq__QueryKind kind, uint32_t max_entries)
{
	Sseq__Query q = SSEQ__QUERY__INIT;
	Sseq__TraceOptions trace = SSEQ__TRACE_OPTIONS__INIT;
	Sseq__Message *m = NULL;
	int r;

	q.kind = kind;
	if (kind == SSEQ__QUERY_KIND__QUERY_KIND_TRACE) {
		trace.max_entries = max_entries;
		q.trace = &trace;
	}
	r = ctl_query(c, &q, &m);
	if (r < 0)
		return r;
	if (!c->json && kind == SSEQ__QUERY_KIND__QUERY_KIND_TRACE)
		text_trace_header();
	ctl_print(c, kind, m->query_result, true);
	sseq__message__free_unpacked(m, NULL);
	return 0;
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
		text_trace_header();
	while (!ctl_stop) {
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
		if (first || res->n_trace > 0)
			ctl_print(c, q.kind, res, false);
		sseq__message__free_unpacked(m, NULL);
		first = false;
		nanosleep(&ts, NULL);
	}
	return ctl_stop ? 0 : r;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: sseqctl [--socket PATH] [--json] COMMAND\n"
		"\n"
		"Ask a running sseqd what it is doing.\n"
		"\n"
		"Commands:\n"
		"  status    device, streams, key counters, clients\n"
		"  clients   connected sessions: pid, uid, worker, buffers, bytes, in flight\n"
		"  buffers   buffers with their producer point, pending readers, slices\n"
		"  streams   streams with last issued / completed points and window use\n"
		"  stats     every counter\n"
		"  trace     recent sequencing decisions [-n N] [--follow]\n"
		"  metrics   counters in the Prometheus text format\n"
		"\n"
		"Options:\n"
		"  -s, --socket PATH  daemon socket (default $SSEQ_SOCKET, else %s)\n"
		"  -j, --json         print JSON instead of tables\n"
		"  -n N               trace: at most N most recent entries\n"
		"  -f, --follow       trace: keep printing new entries until interrupted\n"
		"  -h, --help         show this help\n"
		"  -V, --version      show the version\n"
		"\n"
		"Exit status: 0 ok, 1 the daemon reported an error, 2 bad usage,\n"
		"3 no daemon answers at the socket.\n",
		CTL_DEFAULT_SOCKET);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"socket", required_argument, NULL, 's'},
		{"json", no_argument, NULL, 'j'},
		{"follow", no_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	struct ctl c = {.fd = -1};
	const struct command *cmd = NULL;
	const char *env = getenv("SSEQ_SOCKET");
	uint32_t max_entries = 0;
	bool follow = false, have_n = false;
	int opt, r, status = 0;

	c.socket = env && *env ? env : CTL_DEFAULT_SOCKET;
	while ((opt = getopt_long(argc, argv, "s:jn:fhV", longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			c.socket = optarg;
			break;
		case 'j':
			c.json = true;
			break;
		case 'n': {
			char *end;
			unsigned long long v;
			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || v == 0 || v > UINT32_MAX ||
				optarg[0] == '-') {
				fprintf(stderr, "sseqctl: -n wants a positive count, not '%s'\n",
					optarg);
				return EXIT_USAGE;
			}
			max_entries = (uint32_t)v;
			have_n = true;
			break;
		}
		case 'f':
			follow = true;
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
			cmd = &commands[i];
	if (!cmd) {
		fprintf(stderr, "sseqctl: unknown command '%s' (try --help)\n", argv[optind]);
		return EXIT_USAGE;
	}
	if ((have_n || follow) && cmd->kind != SSEQ__QUERY_KIND__QUERY_KIND_TRACE) {
		fprintf(stderr, "sseqctl: -n and --follow only apply to trace\n");
		return EXIT_USAGE;
	}

	r = ctl_connect(&c);
	if (r == -ENAMETOOLONG)
		status = EXIT_USAGE;
	else if (r < 0)
		status = EXIT_UNREACHABLE;
	if (r == 0)
		r = ctl_hello(&c);
	if (r == 0)
		r = follow ? ctl_follow(&c, max_entries) : ctl_run(&c, cmd->kind, max_entries);
	if (r < 0 && status == 0)
		status = r == -ETIMEDOUT ? EXIT_UNREACHABLE : EXIT_DAEMON;
	if (r < 0)
		fprintf(stderr, "sseqctl: %s\n", c.err[0] ? c.err : strerror(-r));
	if (c.fd >= 0)
		close(c.fd);
	return status;
}
