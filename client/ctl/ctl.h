/* sseqctl's private interface: the state of one invocation, the connection
 * (ctl-conn.c), the daemons found when none is named (ctl-discover.c), and the two ways
 * of printing an answer (ctl-text.c, ctl-json-view.c). */
#ifndef SSEQ_CTL_H
#define SSEQ_CTL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sseq.pb-c.h"

#define CTL_TIMEOUT_MS 5000
#define CTL_FOLLOW_MS 200
/* Where sseq-enable-gpus's sockets are (SSEQ_DEFAULT_SOCKET is its gpu0.sock);
 * $SSEQ_SOCKET_DIR overrides it. */
#define CTL_SOCKET_DIR "/run/sseq"
#define CTL_PATH_MAX 4096

struct json;

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
	uint32_t daemon_minor; /* the daemon's protocol minor, from the Welcome */
	char err[512]; /* why the last call failed */
	/* Set when several daemons answer one command: the JSON document they go into, as
	 * members keyed by socket (NULL: one document of our own). */
	struct json *into;
};

/* Set by SIGINT / SIGTERM during --follow; cuts any wait on the socket short. */
extern volatile sig_atomic_t ctl_stop;

/* ---- the connection (ctl-conn.c); failures leave their reason in c->err ---- */

int ctl_connect(struct ctl *c);
int ctl_hello(struct ctl *c);
/* On success *out is a QueryResult message; the caller frees it. */
int ctl_query(struct ctl *c, Sseq__Query *q, Sseq__Message **out);

/* ---- finding the daemons (ctl-discover.c) ---- */

struct ctl_sockets {
	char **path;
	size_t n;
};

/* $SSEQ_SOCKET_DIR when set and not empty, else CTL_SOCKET_DIR. */
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

/* trace --chrome FILE ("-": stdout): the timeline as Chrome trace-event JSON, the newest
 * max_entries operations (0: all the daemon holds) (ctl-chrome.c). */
int ctl_chrome(struct ctl *c, const char *path, uint32_t max_entries);

/* Tables for people (ctl-text.c). */
void ctl_text_print(const struct ctl *c, Sseq__QueryKind kind, const Sseq__QueryResult *res);
/* Printed once before the first trace rows, also by --follow. */
void ctl_text_trace_header(void);
/* One JSON document per answer (ctl-json-view.c); compact when not pretty. */
void ctl_json_print(
	const struct ctl *c, Sseq__QueryKind kind, const Sseq__QueryResult *res, bool pretty);

#endif
