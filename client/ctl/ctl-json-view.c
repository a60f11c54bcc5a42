/* sseqctl --json: the same answers as documents for machines, written through the
 * streaming writer in ctl-json.c. One representation per field: handles, sessions and
 * streams are numbers, points {stream, seq} objects, and what is absent is null. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-json.h"
#include "ctl.h"

/* Sequence 0 is no point: a buffer never written has no producer. */
static void json_point(struct json *j, const char *key, const Sseq__Point *p)
{
	if (!p || p->seq == 0) {
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
	json_text(j, key, text);
}

/* A handle or stream the trace sends as text, as the number it is; null for none. */
static void json_number_text(struct json *j, const char *key, const char *text)
{
	uint64_t v;

	if (trace_number(text, &v))
		json_uint(j, key, v);
	else
		json_null(j, key);
}

/* Handle 0 is no handle (a base whose own handle was freed). */
static void json_handle(struct json *j, const char *key, uint64_t handle)
{
	if (handle)
		json_uint(j, key, handle);
	else
		json_null(j, key);
}

static void json_device(struct json *j, const Sseq__DeviceInfo *d)
{
	if (!d) {
		json_null(j, "device");
		return;
	}
	json_object_begin(j, "device");
	json_uint(j, "index", d->index);
	json_text(j, "name", d->name);
	json_text(j, "backend", d->backend);
	json_text(j, "arch", d->arch);
	json_uint(j, "memory_used", d->memory_used);
	json_uint(j, "memory_total", d->memory_total);
	json_uint(j, "resets", d->resets);
	if (d->resets) {
		json_text(j, "last_reset_at", d->last_reset_at);
		json_text(j, "last_reset_cause", d->last_reset_cause);
		json_uint(j, "last_reset_ms", d->last_reset_ms);
	} else {
		json_null(j, "last_reset_at");
		json_null(j, "last_reset_cause");
		json_null(j, "last_reset_ms");
	}
	json_object_end(j);
}

/* The daemon (protocol 1.6): what a daemon older than that does not say is null; its
 * version comes from the Welcome then, the socket is the one asked. */
static void json_daemon(struct json *j, const struct ctl *c, const Sseq__DaemonInfo *d)
{
	char protocol[32];

	snprintf(protocol, sizeof(protocol), "%d.%u", SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR,
		(unsigned)c->daemon_minor);
	json_object_begin(j, "daemon");
	json_text(j, "version", d && d->version && *d->version ? d->version : c->daemon_version);
	json_string(j, "protocol", protocol);
	if (d && d->pid) {
		json_uint(j, "pid", d->pid);
		json_uint(j, "started_unix_ns", d->started_unix_ns);
		json_uint(j, "uptime_ns", d->uptime_ns);
		if (d->started_monotonic_ns)
			json_uint(j, "started_monotonic_ns", d->started_monotonic_ns);
		else
			json_null(j, "started_monotonic_ns");
	} else {
		json_null(j, "pid");
		json_null(j, "started_unix_ns");
		json_null(j, "uptime_ns");
		json_null(j, "started_monotonic_ns");
	}
	json_string(j, "socket", d && d->socket && *d->socket ? d->socket : c->socket);
	json_object_end(j);
}

static void json_streams(struct json *j, const struct ctl *c, const Sseq__QueryResult *res)
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
		json_array_begin(j, "sessions");
		for (size_t k = 0; k < s->n_sessions; k++)
			if (s->sessions[k] != c->session) /* sseqctl's own, as in clients */
				json_uint(j, NULL, s->sessions[k]);
		json_array_end(j);
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
		json_text(j, "worker_id", ci->worker_id);
		json_text(j, "name", ci->name);
		json_uint(j, "buffers", ci->buffers);
		json_uint(j, "bytes", ci->bytes);
		json_uint(j, "inflight", ci->inflight);
		json_uint(j, "staging_arenas", ci->staging_arenas);
		json_uint(j, "staging_bytes", ci->staging_bytes);
		json_uint(j, "ring_size", ci->ring_size);
		json_uint(j, "ring_bytes", ci->ring_bytes);
		json_array_begin(j, "lanes");
		for (size_t k = 0; k < ci->n_lanes; k++)
			json_uint(j, NULL, ci->lanes[k]);
		json_array_end(j);
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
		json_handle(j, "handle", b->handle);
		json_text(j, "label", b->label);
		json_uint(j, "size", b->size);
		json_bool(j, "is_slice", b->is_slice);
		if (b->is_slice) {
			json_handle(j, "base_handle", b->base_handle);
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
		json_text(j, "op", e->op);
		json_number_text(j, "stream", e->stream);
		json_point_text(j, "point", e->point);
		json_text(j, "decision", e->decision);
		json_number_text(j, "buffer", e->buffer);
		json_point_text(j, "producer", e->producer);
		json_object_end(j);
	}
	json_array_end(j);
}

static void json_modules(struct json *j, const Sseq__QueryResult *res)
{
	json_array_begin(j, "modules");
	for (size_t i = 0; i < res->n_modules; i++) {
		const Sseq__ModuleInfo *m = res->modules[i];

		json_object_begin(j, NULL);
		json_uint(j, "session", m->session);
		json_uint(j, "handle", m->handle);
		json_string(j, "path", m->path);
		json_text(j, "functions_error", m->functions_error);
		json_array_begin(j, "functions");
		for (size_t f = 0; f < m->n_functions; f++) {
			const Sseq__FunctionInfo *fi = m->functions[f];

			json_object_begin(j, NULL);
			json_string(j, "name", fi->name);
			json_text(j, "demangled", fi->demangled);
			json_uint(j, "max_threads_per_block", fi->max_threads_per_block);
			json_uint(j, "num_regs", fi->num_regs);
			json_uint(j, "shared_size_bytes", fi->shared_size_bytes);
			json_uint(j, "max_dynamic_shared_size_bytes",
				fi->max_dynamic_shared_size_bytes);
			json_uint(j, "const_size_bytes", fi->const_size_bytes);
			json_uint(j, "local_size_bytes", fi->local_size_bytes);
			json_uint(j, "ptx_version", fi->ptx_version);
			json_uint(j, "binary_version", fi->binary_version);
			json_object_end(j);
		}
		json_array_end(j);
		json_object_end(j);
	}
	json_array_end(j);
}

void ctl_json_print(
	const struct ctl *c, Sseq__QueryKind kind, const Sseq__QueryResult *res, bool pretty)
{
	struct json own, *j = c->into ? c->into : &own;

	if (!c->into)
		json_init(&own, stdout, pretty);
	json_object_begin(j, c->into ? c->socket : NULL);
	switch (kind) {
	case SSEQ__QUERY_KIND__QUERY_KIND_STATUS:
		json_daemon(j, c, res->daemon);
		json_device(j, res->device);
		json_streams(j, c, res);
		json_counters(j, res->counters);
		json_clients(j, c, res);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_CLIENTS:
		json_clients(j, c, res);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_BUFFERS:
		json_buffers(j, res);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_STREAMS:
		json_streams(j, c, res);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_STATS:
		json_counters(j, res->counters);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_TRACE:
		json_trace(j, res);
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_METRICS:
		json_string(j, "metrics", res->metrics_text ? res->metrics_text : "");
		break;
	case SSEQ__QUERY_KIND__QUERY_KIND_MODULES:
		json_modules(j, res);
		break;
	default:
		break;
	}
	json_object_end(j);
	if (!c->into)
		json_finish(j);
}
