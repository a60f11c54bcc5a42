/* sseqctl's tables for people: one view per command, every column as wide as its
 * widest cell, and client-supplied text made safe for a terminal. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wchar.h>

#include "ctl.h"
#include "sseq-tables.h"
#include "sseq-utf8.h"

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

/* The columns a cell takes on a terminal, not its bytes: labels are UTF-8 whatever the
 * locale (the wire's strings are), so characters are decoded here and measured with
 * wcwidth (main picks a UTF-8 LC_CTYPE for it): "é" takes one column, "漢" two, a
 * combining accent none. A byte that is no character, or one wcwidth does not know,
 * counts one, as a terminal draws one replacement for it. */
static size_t text_width(const char *s)
{
	size_t w = 0, n;

	for (; *s; s += n) {
		const unsigned char *p = (const unsigned char *)s;
		wchar_t wc;
		int cw;

		n = utf8_char_len(s);
		if (n <= 1) {
			w++;
			n = 1;
			continue;
		}
		wc = (wchar_t)(p[0] & (0xff >> (n + 1)));
		for (size_t i = 1; i < n; i++)
			wc = (wchar_t)((wc << 6) | (p[i] & 0x3f));
		cw = wcwidth(wc);
		w += cw >= 0 ? (size_t)cw : 1;
	}
	return w;
}

static void text_pad(FILE *f, size_t n)
{
	while (n--)
		fputc(' ', f);
}

static void table_print(const struct table *t, FILE *f)
{
	size_t width[TABLE_MAX_COLS] = {0};

	for (size_t i = 0; i < t->n; i++) {
		size_t len = t->cells[i] ? text_width(t->cells[i]) : 1;
		if (len > width[i % t->ncols])
			width[i % t->ncols] = len;
	}
	for (size_t i = 0; i < t->n; i++) {
		unsigned col = (unsigned)(i % t->ncols);
		const char *s = t->cells[i] ? t->cells[i] : "?";
		size_t pad = width[col] - text_width(s);
		bool last = col + 1 == t->ncols || i + 1 == t->n;

		if (t->align[col] == 'r')
			text_pad(f, pad);
		fputs(s, f);
		if (t->align[col] != 'r' && !last)
			text_pad(f, pad); /* no trailing blanks after the last column */
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

/* "0,3,5": a lane or session list, "-" when empty, cut with "..." where it would not fit. */
static const char *fmt_list(
	const uint32_t *u32, const uint64_t *u64, size_t n, char *buf, size_t size)
{
	size_t len = 0;

	snprintf(buf, size, "-");
	/* protobuf-c leaves a repeated field's array NULL only when it is empty. */
	if (!u32 && !u64)
		n = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t v = u32 ? u32[i] : u64[i];
		int w = snprintf(buf + len, size - len, "%s%" PRIu64, i ? "," : "", v);
		if (w < 0 || (size_t)w >= size - len) {
			snprintf(buf + (len < size - 4 ? len : size - 4), 4, "...");
			break;
		}
		len += (size_t)w;
	}
	return buf;
}

/* The sessions holding a stream, sseqctl's own left out as in clients. */
static const char *fmt_sessions(
	const struct ctl *c, const Sseq__StreamInfo *s, char *buf, size_t size)
{
	uint64_t ids[64];
	size_t n = 0;

	for (size_t i = 0; i < s->n_sessions && n < 64; i++)
		if (s->sessions[i] != c->session)
			ids[n++] = s->sessions[i];
	return fmt_list(NULL, ids, n, buf, size);
}

static size_t clients_count(const struct ctl *c, const Sseq__QueryResult *res)
{
	size_t n = 0;

	for (size_t i = 0; i < res->n_clients; i++)
		n += client_visible(c, res->clients[i]);
	return n;
}

/* Every stream, or (status) only those with points in flight. */
static void text_streams(const struct ctl *c, const Sseq__QueryResult *res, bool busy_only)
{
	struct table t;
	char kind[32], sessions[128];

	table_init(&t, "rlrrrrl", "ID", "KIND", "INDEX", "LAST ISSUED", "LAST COMPLETED", "WINDOW",
		"SESSIONS");
	for (size_t i = 0; i < res->n_streams; i++) {
		const Sseq__StreamInfo *s = res->streams[i];
		if (busy_only && s->window_used == 0)
			continue;
		table_cell(&t, "%" PRIu32, s->id);
		table_cell(&t, "%s",
			ctl_enum_name(&sseq__stream_kind__descriptor, s->kind, "STREAM_KIND_", kind,
				sizeof(kind)));
		table_cell(&t, "%" PRIu32, s->index);
		table_cell(&t, "%" PRIu64, s->last_issued);
		table_cell(&t, "%" PRIu64, s->last_completed);
		table_cell(&t, "%" PRIu32 "/%" PRIu32, s->window_used, s->window_capacity);
		table_cell(&t, "%s", fmt_sessions(c, s, sessions, sizeof(sessions)));
	}
	table_print(&t, stdout);
	table_finish(&t);
}

static void text_clients(const struct ctl *c, const Sseq__QueryResult *res)
{
	struct table t;
	char b1[32], b2[32], lanes[64];

	if (clients_count(c, res) == 0) {
		puts("no clients");
		return;
	}
	table_init(&t, "rrrllrrrll", "SESSION", "PID", "UID", "WORKER", "NAME", "BUFFERS", "BYTES",
		"IN-FLIGHT", "STAGING", "LANES");
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
		/* One of them holds its request ring, if it named one. */
		table_cell(&t, "%" PRIu64 " (%s)%s", ci->staging_arenas,
			fmt_bytes(ci->staging_bytes, b2, sizeof(b2)),
			ci->ring_size ? ", ring" : "");
		table_cell(&t, "%s", fmt_list(ci->lanes, NULL, ci->n_lanes, lanes, sizeof(lanes)));
	}
	table_print(&t, stdout);
	table_finish(&t);
}

/* "3d 4h", "2h 5min", "4min 10s", "12s": the two largest units, as systemctl does. */
static const char *fmt_duration(uint64_t ns, char *buf, size_t size)
{
	uint64_t s = ns / 1000000000u;
	uint64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60;

	if (d)
		snprintf(buf, size, "%" PRIu64 "d %" PRIu64 "h", d, h);
	else if (h)
		snprintf(buf, size, "%" PRIu64 "h %" PRIu64 "min", h, m);
	else if (m)
		snprintf(buf, size, "%" PRIu64 "min %" PRIu64 "s", m, sec);
	else
		snprintf(buf, size, "%" PRIu64 "s", sec);
	return buf;
}

/* The daemon as `systemctl status` shows a service: what runs, since when, where. A
 * daemon older than protocol 1.6 does not say its pid and start; its version and our
 * socket still show. */
static void text_daemon(const struct ctl *c, const Sseq__QueryResult *res)
{
	const Sseq__DaemonInfo *dm = res->daemon;
	const char *version = dm && dm->version && *dm->version ? dm->version : c->daemon_version;
	char up[32], since[64] = "";

	printf("     Daemon: sseqd %s (protocol %d.%" PRIu32 ")", *version ? version : "?",
		SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR, c->daemon_minor);
	if (dm && dm->pid)
		printf(", pid %" PRIu32, dm->pid);
	printf("\n");
	if (dm && dm->started_unix_ns) {
		time_t t = (time_t)(dm->started_unix_ns / 1000000000u);
		struct tm tm;
		if (gmtime_r(&t, &tm))
			strftime(since, sizeof(since), " (since %Y-%m-%d %H:%M:%S UTC)", &tm);
		printf("     Uptime: %s%s\n", fmt_duration(dm->uptime_ns, up, sizeof(up)), since);
	}
	printf("     Socket: %s\n", dm && dm->socket && *dm->socket ? dm->socket : c->socket);
}

/* One line for the streams: how many have points in flight (listed below it), and those
 * with nothing in flight by kind, "12 compute, 4 h2d idle", rather than a row each. */
static void text_streams_summary(const Sseq__QueryResult *res)
{
	/* By wire number; 0 also holds a kind newer than this sseqctl. */
	size_t idle[SSEQ_STREAM_KIND_COUNT + 1] = {0}, busy = 0, n = 0;
	char kind[32];

	for (size_t i = 0; i < res->n_streams; i++) {
		const Sseq__StreamInfo *s = res->streams[i];
		unsigned k = (unsigned)s->kind <= SSEQ_STREAM_KIND_COUNT ? (unsigned)s->kind : 0;
		if (s->window_used)
			busy++;
		else
			idle[k]++;
	}
	printf("    Streams: %zu%s", res->n_streams, res->n_streams ? ", " : "\n");
	if (busy)
		printf("%zu busy (below)%s", busy, busy < res->n_streams ? "; " : "\n");
	if (busy == res->n_streams)
		return;
	printf("%s", busy ? "" : "all ");
	for (unsigned k = 0; k < sizeof(idle) / sizeof(idle[0]); k++) {
		if (!idle[k])
			continue;
		printf("%s%zu %s", n++ ? ", " : "", idle[k],
			ctl_enum_name(&sseq__stream_kind__descriptor, (int)k, "STREAM_KIND_", kind,
				sizeof(kind)));
	}
	printf(" idle\n");
}

static void text_status(const struct ctl *c, const Sseq__QueryResult *res)
{
	const Sseq__DeviceInfo *d = res->device;
	const Sseq__Counters *k = res->counters;
	char used[32], total[32];
	bool busy = false;

	text_daemon(c, res);
	if (d) {
		printf("     Device: %" PRIu32 ", %s (backend %s%s%s)\n", d->index,
			d->name && *d->name ? d->name : "?", d->backend ? d->backend : "?",
			d->arch && *d->arch ? ", " : "", d->arch ? d->arch : "");
		printf("     Memory: %s / %s used\n", fmt_bytes(d->memory_used, used, sizeof(used)),
			fmt_bytes(d->memory_total, total, sizeof(total)));
	}
	if (d && d->resets)
		printf("     Resets: %" PRIu64 "; the last at %s took %" PRIu64
		       " ms, caused by %s\n",
			d->resets, d->last_reset_at ? d->last_reset_at : "?", d->last_reset_ms,
			d->last_reset_cause ? d->last_reset_cause : "?");
	printf("    Clients: %zu\n", clients_count(c, res));
	text_streams_summary(res);
	for (size_t i = 0; i < res->n_streams; i++)
		busy |= res->streams[i]->window_used > 0;
	if (busy) {
		printf("\n");
		text_streams(c, res, true);
	}
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
		if (b->handle)
			table_cell(&t, "%" PRIu64, b->handle);
		else
			table_cell(&t, "-");
		table_cell(&t, "%s", b->label && *b->label ? b->label : "-");
		table_cell(&t, "%s", fmt_bytes(b->size, size, sizeof(size)));
		if (b->is_slice)
			table_cell(&t, "%" PRIu64 "+%" PRIu64, b->base_handle, b->offset);
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

/* A counter's label, from the schema (sseq-tables.h); one the schema does not know (a
 * newer daemon's) is spelled from its field name, so it still shows up. */
static const char *counter_label(const char *field, char *buf, size_t size)
{
	static const struct {
		const char *field, *label;
	} labels[] = {
#define COUNTER_LABEL(name, number, help, label) {#name, label},
		SSEQ_COUNTERS(COUNTER_LABEL)
#undef COUNTER_LABEL
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
void ctl_text_trace_header(void)
{
	printf("%8s  %12s  %7s  %-7s  %-10s  %-12s  %-10s  %s\n", "SEQ", "TIME(s)", "SESSION", "OP",
		"POINT", "BUFFER", "PRODUCER", "DECISION");
}

static void text_trace(const Sseq__QueryResult *res)
{
	for (size_t i = 0; i < res->n_trace; i++) {
		const Sseq__TraceEntry *e = res->trace[i];
		char buffer[24];
		uint64_t h;

		/* Decimal, as in buffers, whichever way the daemon wrote it. */
		if (trace_number(e->buffer, &h))
			snprintf(buffer, sizeof(buffer), "%" PRIu64, h);
		else
			snprintf(buffer, sizeof(buffer), "-");
		printf("%8" PRIu64 "  %12.6f  %7" PRIu64 "  %-7s  %-10s  %-12s  %-10s  %s\n",
			e->seq, (double)e->time_ns / 1e9, e->session, e->op ? e->op : "",
			e->point ? e->point : "", buffer, e->producer ? e->producer : "",
			e->decision ? e->decision : "");
	}
	fflush(stdout);
}

/* A version as CUDA gives it (major * 10 + minor), "-" for none. */
static void table_version(struct table *t, uint32_t v)
{
	if (v)
		table_cell(t, "%u.%u", v / 10, v % 10);
	else
		table_cell(t, "-");
}

/* One row per function of every module: its signature where it demangles, its symbol,
 * and what picking a block size needs. */
static void text_modules(const Sseq__QueryResult *res)
{
	struct table t;
	char a[32], b[32];

	if (res->n_modules == 0) {
		puts("no modules");
		return;
	}
	table_init(&t, "rrllrrrrll", "SESSION", "MODULE", "PATH", "FUNCTION", "THREADS", "REGS",
		"SHARED", "DYN MAX", "PTX", "SYMBOL");
	for (size_t i = 0; i < res->n_modules; i++) {
		const Sseq__ModuleInfo *m = res->modules[i];

		if (m->n_functions == 0) {
			table_cell(&t, "%" PRIu64, m->session);
			table_cell(&t, "%" PRIu64, m->handle);
			table_cell(&t, "%s", m->path);
			table_cell(&t, "(%s)",
				m->functions_error && *m->functions_error ? m->functions_error
									  : "no functions");
			for (int k = 0; k < 6; k++)
				table_cell(&t, "-");
			continue;
		}
		for (size_t f = 0; f < m->n_functions; f++) {
			const Sseq__FunctionInfo *fi = m->functions[f];

			table_cell(&t, "%" PRIu64, m->session);
			table_cell(&t, "%" PRIu64, m->handle);
			table_cell(&t, "%s", m->path);
			table_cell(&t, "%s",
				fi->demangled && *fi->demangled ? fi->demangled : fi->name);
			table_cell(&t, "%u", fi->max_threads_per_block);
			table_cell(&t, "%u", fi->num_regs);
			table_cell(&t, "%s", fmt_bytes(fi->shared_size_bytes, a, sizeof(a)));
			table_cell(&t, "%s",
				fmt_bytes(fi->max_dynamic_shared_size_bytes, b, sizeof(b)));
			table_version(&t, fi->ptx_version);
			table_cell(&t, "%s", fi->name);
		}
	}
	table_print(&t, stdout);
	table_finish(&t);
}

void ctl_text_print(const struct ctl *c, Sseq__QueryKind kind, const Sseq__QueryResult *res)
{
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
		text_streams(c, res, false);
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
	case SSEQ__QUERY_KIND__QUERY_KIND_MODULES:
		text_modules(res);
		break;
	default:
		break;
	}
}
