/* sseqctl's private interface: the state of one invocation, the connection
 * (ctl-conn.c), the daemons found when none is named (ctl-discover.c), and the two ways
 * of printing an answer (ctl-text.c, ctl-json-view.c). */
#ifndef SSEQ_CTL_H
#define SSEQ_CTL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sseq/sseq-socket.h>

#include "sseq.pb-c.h"

#define CTL_TIMEOUT_MS 5000
#define CTL_FOLLOW_MS 200
#define CTL_PATH_MAX 4096

struct json;

/* Exit codes are part of the interface: scripts tell "no daemon" from "daemon said no"
 * from "not allowed to ask". */
enum {
	EXIT_DAEMON = 1, /* the daemon refused, or answered something unreadable */
	EXIT_USAGE = 2,
	/* nothing answers at the socket, or not in time, or the daemon went away */
	EXIT_UNREACHABLE = 3,
	EXIT_DENIED = 4, /* the socket (or its directory) is closed to this user */
};

struct ctl_metrics;

struct ctl {
	const char *socket;
	int fd;
	bool json;
	uint64_t next_tag;
	uint64_t session; /* ours, from the Welcome: left out of client lists */
	uint32_t daemon_minor; /* the daemon's protocol minor, from the Welcome */
	char daemon_version[64]; /* its release, from the Welcome */
	char err[512]; /* why the last call failed */
	/* Set when several daemons answer one command: the JSON document they go into, as
	 * members keyed by socket (NULL: one document of our own). */
	struct json *into;
	/* Set when several daemons' metrics go out as one exposition: the text is kept
	 * there to be merged (ctl-metrics.c) instead of printed. */
	struct ctl_metrics *metrics;
};

/* Set by SIGINT / SIGTERM during --follow; cuts any wait on the socket short. */
extern volatile sig_atomic_t ctl_stop;

/* ---- the connection (ctl-conn.c); failures leave their reason in c->err ---- */

/* -EACCES leaves in c->err who owns the socket and what would let us in. */
int ctl_connect(struct ctl *c);
int ctl_hello(struct ctl *c);
/* On success *out is a QueryResult message; the caller frees it. */
int ctl_query(struct ctl *c, Sseq__Query *q, Sseq__Message **out);

/* ---- finding the daemons (ctl-discover.c) ---- */

struct ctl_sockets {
	char **path;
	size_t n;
};

/* Where sseq-enable-gpus's sockets are: $SSEQ_SOCKET_DIR when set and not empty, else
 * SSEQ_SOCKET_DIR (<sseq/sseq-socket.h>, SSEQ_DEFAULT_SOCKET is its gpu0.sock). */
const char *ctl_socket_dir(void);
/* GPU n's socket in that directory, into buf: 0 or -ENAMETOOLONG. */
int ctl_gpu_socket(unsigned gpu, char *buf, size_t size);
/* Every gpuN.sock there, in GPU order (none is not an error): 0 or a negative errno. */
int ctl_discover(struct ctl_sockets *out);
void ctl_sockets_free(struct ctl_sockets *s);

/* Enum values as the daemon spells them, shortened for people (into buf). */
const char *ctl_enum_name(
	const ProtobufCEnumDescriptor *desc, int value, const char *prefix, char *buf, size_t size);
const char *ctl_status_name(int status, char *buf, size_t size);

/* ---- several daemons' metrics as one exposition (ctl-metrics.c) ---- */

struct ctl_metrics *ctl_metrics_new(void);
/* Adds one daemon's text: 0 or -ENOMEM. */
int ctl_metrics_add(struct ctl_metrics *m, const char *text);
/* Each family once, its HELP and TYPE first, then every daemon's samples of it. */
void ctl_metrics_print(const struct ctl_metrics *m, FILE *f);
void ctl_metrics_free(struct ctl_metrics *m);

/* ---- reading a result, shared by both views ---- */

static inline bool client_visible(const struct ctl *c, const Sseq__ClientInfo *ci)
{
	return ci->session != c->session;
}

static inline uint64_t counter_value(const Sseq__Counters *k, const ProtobufCFieldDescriptor *f)
{
	uint64_t v;

	memcpy(&v, (const char *)k + f->offset, sizeof(v));
	return v;
}

static inline bool counter_is_u64(const ProtobufCFieldDescriptor *f)
{
	return f->type == PROTOBUF_C_TYPE_UINT64 && f->label != PROTOBUF_C_LABEL_REPEATED;
}

/* A number the trace sends as text (a stream, a buffer handle: decimal, or "0x..." hex
 * from older daemons); false for "-", empty or anything else. */
static inline bool trace_number(const char *text, uint64_t *out)
{
	char *end;

	if (!text || text[0] < '0' || text[0] > '9')
		return false;
	*out = strtoull(text, &end, 0);
	return *end == '\0';
}

/* ---- the views ---- */

/* Which operations trace --chrome keeps: all of them when zeroed. Times are the
 * timeline's own, nanoseconds since the daemon started. */
struct ctl_chrome_filter {
	uint64_t session; /* --session N: this session's only (0: every session) */
	const char *worker; /* --worker NAME: this worker id's (or client name's) only */
	bool have_since, have_last;
	uint64_t since_ns; /* --since MS: those that ended at or after it */
	uint64_t last_ns; /* --last MS: those that ended within it of the newest end */
};

/* trace --chrome FILE ("-": stdout): the timeline as Chrome trace-event JSON, the
 * operations filter keeps (NULL: all), the newest max_entries of them (0: all)
 * (ctl-chrome.c). */
int ctl_chrome(struct ctl *c, const char *path, uint32_t max_entries,
	const struct ctl_chrome_filter *filter);

/* Tables for people (ctl-text.c). */
void ctl_text_print(const struct ctl *c, Sseq__QueryKind kind, const Sseq__QueryResult *res);
/* Printed once before the first trace rows, also by --follow. */
void ctl_text_trace_header(void);
/* One JSON document per answer (ctl-json-view.c); compact when not pretty. */
void ctl_json_print(
	const struct ctl *c, Sseq__QueryKind kind, const Sseq__QueryResult *res, bool pretty);

#endif
