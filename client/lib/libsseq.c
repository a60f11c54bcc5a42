/* libsseq core: connecting and saying Hello, the table of requests in flight, reading
 * and dispatching the daemon's messages, and the calls that wait (wait, sync, poll).
 * Submission of individual requests lives in submit.c. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

/* Why the calling thread's last sseq_connect failed: there is no connection to hold it. */
static _Thread_local char connect_errmsg[256];

static const char *const status_text[] = {
	[1] = "invalid argument (daemon)",
	[2] = "unknown handle",
	[3] = "offset or length out of range",
	[4] = "permission denied (daemon)",
	[5] = "unsupported protocol version",
	[6] = "unknown kernel",
	[7] = "kernel argument type or access mismatch",
	[8] = "device memory, staging or session limit exhausted",
	[9] = "device error",
	[10] = "an operation this one depends on failed",
	[11] = "injected fault",
	[12] = "double definition of a write",
	[13] = "staging memfd not sealed or wrong size",
	[14] = "frame too large",
	[15] = "daemon busy",
	[16] = "daemon shutting down",
	[17] = "daemon internal error",
	[18] = "protocol error",
};

const char *sseq_strerror(int code)
{
	if (code == 0)
		return "success";
	if (code > 0)
		return "invalid error code";
	if (SSEQ_IS_DAEMON_ERROR(code)) {
		int status = -code - SSEQ_ERR_BASE;
		if (status > 0 && (size_t)status < sizeof(status_text) / sizeof(*status_text))
			return status_text[status];
		return "unknown daemon status";
	}
	const char *d = strerrordesc_np(-code);
	return d ? d : "unknown error";
}

int client_status_code(int status)
{
	return status == 0 ? 0 : -(SSEQ_ERR_BASE + status);
}

void client_set_error(struct sseq *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
	va_end(ap);
	s->errtag = 0;
}

const char *sseq_last_error_message(struct sseq *s)
{
	return s ? s->errmsg : connect_errmsg;
}

uint64_t sseq_last_error_tag(struct sseq *s)
{
	return s->errtag;
}

/* ---- the table of requests in flight ---- */

static size_t bucket_of(const struct sseq *s, uint64_t tag)
{
	return (size_t)((tag * 0x9e3779b97f4a7c15ull) >> 32) & (s->nbuckets - 1);
}

static int table_grow(struct sseq *s)
{
	size_t n = s->nbuckets ? s->nbuckets * 2 : 64;
	struct op **b = calloc(n, sizeof(*b));
	if (!b)
		return -ENOMEM;
	struct op **old = s->buckets;
	size_t oldn = s->nbuckets;
	s->buckets = b;
	s->nbuckets = n;
	for (size_t i = 0; i < oldn; i++) {
		struct op *op = old[i];
		while (op) {
			struct op *next = op->hnext;
			size_t k = bucket_of(s, op->tag);
			op->hnext = b[k];
			b[k] = op;
			op = next;
		}
	}
	free(old);
	return 0;
}

struct op *client_op_find(struct sseq *s, uint64_t tag)
{
	if (!s->nbuckets)
		return NULL;
	for (struct op *op = s->buckets[bucket_of(s, tag)]; op; op = op->hnext)
		if (op->tag == tag)
			return op;
	return NULL;
}

static void table_remove(struct sseq *s, struct op *op)
{
	struct op **p = &s->buckets[bucket_of(s, op->tag)];
	while (*p != op)
		p = &(*p)->hnext;
	*p = op->hnext;
	s->nops--;
}

static void op_free(struct op *op)
{
	for (size_t i = 0; i < op->nresults; i++)
		sseq__query_result__free_unpacked(op->results[i], NULL);
	free(op->results);
	free(op->message);
	free(op);
}

/* ---- errors ----
 *
 * Every error of a request nobody collected is kept here until it has been reported:
 * by sseq_sync / sseq_next_error (oldest first, each once) or by sseq_wait on its tag.
 * An error of a request whose tag the application holds stays after sync reported it,
 * so a later sseq_wait on that tag still tells the truth; the oldest of those are
 * dropped past CLIENT_REPORTED_KEEP. */

static void errors_remove(struct sseq *s, size_t i)
{
	free(s->errors[i].message);
	if (s->errors[i].reported)
		s->nreported--;
	memmove(&s->errors[i], &s->errors[i + 1], (s->nerrors - i - 1) * sizeof(*s->errors));
	s->nerrors--;
}

static void errors_push(
	struct sseq *s, uint64_t tag, int code, const char *message, bool tagged, bool reported)
{
	if (reported && !tagged)
		return;
	if (reported && s->nreported >= CLIENT_REPORTED_KEEP) {
		for (size_t i = 0; i < s->nerrors; i++)
			if (s->errors[i].reported) {
				errors_remove(s, i);
				break;
			}
	}
	if (s->nerrors == s->errors_cap) {
		size_t ncap = s->errors_cap ? s->errors_cap * 2 : 16;
		struct client_error *n = realloc(s->errors, ncap * sizeof(*n));
		if (!n)
			return; /* keep the older errors: the first one matters most */
		s->errors = n;
		s->errors_cap = ncap;
	}
	s->errors[s->nerrors++] = (struct client_error){
		.tag = tag,
		.code = code,
		.message = message && *message ? strdup(message) : NULL,
		.tagged = tagged,
		.reported = reported,
	};
	if (reported)
		s->nreported++;
}

/* Report error i: its code, with its text in errmsg. Once reported it is gone unless
 * its tag may still be waited on. */
static int errors_report(struct sseq *s, size_t i, bool waited)
{
	struct client_error *e = &s->errors[i];
	int code = e->code;
	client_set_error(s, "%s", e->message ? e->message : sseq_strerror(code));
	s->errtag = e->tag;
	if (waited || !e->tagged) {
		errors_remove(s, i);
	} else {
		e->reported = true;
		s->nreported++;
	}
	return code;
}

/* The oldest error not yet reported, or 0. */
static int errors_next(struct sseq *s, uint64_t *tag)
{
	for (size_t i = 0; i < s->nerrors; i++) {
		if (s->errors[i].reported)
			continue;
		if (tag)
			*tag = s->errors[i].tag;
		return errors_report(s, i, false);
	}
	if (tag)
		*tag = 0;
	return 0;
}

int sseq_next_error(struct sseq *s, uint64_t *tag)
{
	return errors_next(s, tag);
}

/* ---- finishing requests ---- */

void client_staging_unref(struct sseq *s, struct staging_arena *a, uint64_t off)
{
	struct staging_range *r = staging_arena_find(a, off, 0);
	if (r && r->offset == off)
		staging_range_unref(a, r);
	s->staging_refs--;
}

/* The request is finished: deliver a D2H result, release its staging, tell the
 * callback, and either leave it for its waiter or retire it (keeping an error). */
static void op_finish(struct sseq *s, struct op *op, bool keep_error)
{
	if (!op->done && !op->follow)
		s->nactive--;
	op->done = true;
	s->finished++;
	if (op->arena) {
		if (op->status == 0 && op->copy_out)
			memcpy(op->copy_out, op->arena->base + op->staging_off, op->copy_len);
		client_staging_unref(s, op->arena, op->staging_off);
		op->arena = NULL;
	}
	bool consumed = false;
	if (op->user_tag && s->cb)
		consumed = s->cb(s->cb_data, op->tag, op->status) != 0;
	if (op->waited)
		return;
	if (op->status != 0 && keep_error)
		errors_push(s, op->tag, op->status, op->message, op->user_tag, consumed);
	table_remove(s, op);
	op_free(op);
}

static void op_fail(struct op *op, int code, const char *message)
{
	if (op->status != 0)
		return;
	op->status = code;
	free(op->message);
	op->message = message && *message ? strdup(message) : NULL;
}

/* The connection is unusable: finish everything with `err`. Those errors are not kept:
 * every later call returns err itself. */
static void client_break(struct sseq *s, int err)
{
	if (s->broken)
		return;
	s->broken = err;
	if (!s->errmsg[0])
		client_set_error(s, "connection to sseqd lost: %s", sseq_strerror(err));
	for (size_t i = 0; i < s->nbuckets; i++) {
		struct op *op = s->buckets[i];
		while (op) {
			struct op *next = op->hnext;
			if (!op->done) {
				/* With the daemon's last word (a refusal, why it closed). */
				op_fail(op, err, s->errmsg);
				op_finish(s, op, false);
			}
			op = next;
		}
	}
}

static void save_welcome(struct sseq *s, const Sseq__Welcome *w)
{
	s->info.session = w->session;
	s->info.major = w->protocol_major;
	s->info.minor = w->protocol_minor;
	free(s->info.daemon_version);
	s->info.daemon_version = strdup(w->daemon_version ? w->daemon_version : "");
	if (w->device) {
		const Sseq__DeviceInfo *d = w->device;
		s->info.device_index = d->index;
		s->info.memory_total = d->memory_total;
		free(s->info.device_name);
		free(s->info.backend);
		free(s->info.arch);
		s->info.device_name = strdup(d->name ? d->name : "");
		s->info.backend = strdup(d->backend ? d->backend : "");
		s->info.arch = strdup(d->arch ? d->arch : "");
	}
}

static void on_reply(struct sseq *s, const Sseq__Reply *rep)
{
	int code = client_status_code((int)rep->status);
	struct op *op = client_op_find(s, rep->tag);
	if (!op || op->replied) {
		/* Tag 0: the daemon speaks for itself (a frame it rejected) and is about to
		 * close; remember why. Anything else unknown must still not be lost. */
		if (rep->tag == 0 && code != 0) {
			s->fatal = code;
			client_set_error(
				s, "%s", rep->message[0] ? rep->message : sseq_strerror(code));
		} else if (code != 0) {
			errors_push(s, rep->tag, code, rep->message, false, false);
		}
		return;
	}
	op->replied = true;
	op->handle = rep->handle;
	if (op->kind == SSEQ__REQUEST__BODY_HELLO && rep->welcome)
		save_welcome(s, rep->welcome);
	if (code != 0) {
		/* Rejected: no Completion follows. */
		op_fail(op, code, rep->message);
		op_finish(s, op, true);
	} else if (!op->want_completion || op->completed) {
		op_finish(s, op, true);
	}
}

static void on_completion(struct sseq *s, const Sseq__Completion *c)
{
	int code = client_status_code((int)c->status);
	struct op *op = client_op_find(s, c->tag);
	if (!op || op->done) {
		/* A request that finished at its Reply failed later (I9): keep the error. */
		if (code != 0)
			errors_push(s, c->tag, code, c->message, false, false);
		return;
	}
	op->completed = true;
	if (code != 0)
		op_fail(op, code, c->message);
	if (op->replied)
		op_finish(s, op, true);
}

static void on_query_result(struct sseq *s, Sseq__Message *m)
{
	Sseq__QueryResult *qr = m->query_result;
	struct op *op = client_op_find(s, qr->tag);
	if (!op || op->done)
		return;
	if (op->nresults == op->results_cap) {
		size_t ncap = op->results_cap ? op->results_cap * 2 : 4;
		Sseq__QueryResult **n = realloc(op->results, ncap * sizeof(*n));
		if (!n) {
			op_fail(op, -ENOMEM, NULL);
			op_finish(s, op, true);
			return;
		}
		op->results = n;
		op->results_cap = ncap;
	}
	/* Take the result out of the message so freeing the message leaves it alone:
	 * protobuf-c frees a oneof member only when its case is set. */
	op->results[op->nresults++] = qr;
	m->query_result = NULL;
	m->body_case = SSEQ__MESSAGE__BODY__NOT_SET;
	op->replied = true;
	if (!op->follow)
		op_finish(s, op, true);
}

static int dispatch(struct sseq *s, const uint8_t *frame, size_t len)
{
	Sseq__Message *m = sseq__message__unpack(NULL, len, frame);
	if (!m) {
		client_set_error(s, "undecodable message from sseqd (%zu bytes)", len);
		return -EPROTO;
	}
	switch (m->body_case) {
	case SSEQ__MESSAGE__BODY_REPLY:
		on_reply(s, m->reply);
		break;
	case SSEQ__MESSAGE__BODY_COMPLETION:
		on_completion(s, m->completion);
		break;
	case SSEQ__MESSAGE__BODY_QUERY_RESULT:
		on_query_result(s, m);
		break;
	default:
		/* A newer daemon's message kind: nothing here asked for it. */
		break;
	}
	sseq__message__free_unpacked(m, NULL);
	return 0;
}

/* Read whatever is there and dispatch every complete frame. Returns frames handled. */
static int read_input(struct sseq *s)
{
	int handled = 0;
	for (int round = 0; round < 64; round++) {
		int r = frame_reader_fill(&s->r, s->sock);
		if (r == -EAGAIN)
			break;
		for (;;) {
			const uint8_t *frame;
			size_t len;
			int f = frame_reader_next(&s->r, &frame, &len);
			if (f == 0)
				break;
			if (f < 0) {
				client_set_error(s, "oversized frame from sseqd");
				client_break(s, f == -EMSGSIZE ? -EPROTO : f);
				return s->broken;
			}
			f = dispatch(s, frame, len);
			if (f < 0) {
				client_break(s, f);
				return s->broken;
			}
			handled++;
		}
		if (r < 0) {
			client_break(s, r == -ECONNRESET && s->fatal ? s->fatal : r);
			return s->broken;
		}
	}
	return handled;
}

/* Send what the socket takes now. Any failure but a full socket breaks the connection
 * (a closed peer reads as a reset). Returns 0, -EAGAIN or s->broken. */
static int client_send(struct sseq *s)
{
	int r = frame_writer_send(&s->w, s->sock);
	if (r < 0 && r != -EAGAIN) {
		client_break(s, r == -EPIPE ? -ECONNRESET : r);
		return s->broken;
	}
	return r;
}

/* How long a waiting call looks for the daemon's answer before it sleeps in poll():
 * $SSEQ_SPIN_US, default 2 ms. Waking a sleeping thread costs tens of microseconds on
 * a GPU host; a native synchronize spins the same way. */
#define CLIENT_DEFAULT_SPIN_US 2000L

static long client_spin_ns(void)
{
	const char *e = getenv("SSEQ_SPIN_US");
	char *end;
	long us;

	if (!e || !*e)
		return CLIENT_DEFAULT_SPIN_US * 1000L;
	us = strtol(e, &end, 10);
	return *end || us < 0 ? CLIENT_DEFAULT_SPIN_US * 1000L : us * 1000L;
}

int client_pump(struct sseq *s, int timeout_ms)
{
	if (s->broken)
		return s->broken;
	if (frame_writer_pending(&s->w)) {
		client_send(s);
		if (s->broken)
			return s->broken;
	}
	struct pollfd pfd = {
		.fd = s->sock,
		.events = POLLIN | (frame_writer_pending(&s->w) ? POLLOUT : 0),
	};
	int n = 0;
	/* An answer usually comes within tens of microseconds: look for it for a moment
	 * before sleeping, since waking from poll() costs about as much again (the native
	 * alternative, a synchronize on the GPU, spins as well). */
	long spin_ns = timeout_ms != 0 ? client_spin_ns() : 0;
	if (spin_ns > 0) {
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		do {
			n = poll(&pfd, 1, 0);
			if (n != 0)
				break;
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < spin_ns);
	}
	if (n == 0 || (n < 0 && errno == EINTR)) {
		do
			n = poll(&pfd, 1, timeout_ms);
		while (n < 0 && errno == EINTR);
	}
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ETIMEDOUT;
	if (pfd.revents & POLLOUT) {
		client_send(s);
		if (s->broken)
			return s->broken;
	}
	if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
		return read_input(s);
	return 0;
}

int client_flush(struct sseq *s)
{
	while (frame_writer_pending(&s->w)) {
		if (s->broken)
			return s->broken;
		int r = client_send(s);
		if (r == 0)
			break;
		if (r != -EAGAIN)
			return r;
		/* The socket is full: read while waiting so the daemon is never stuck
		 * writing to us while we are stuck writing to it. */
		r = client_pump(s, -1);
		if (r < 0 && r != -ETIMEDOUT)
			return r;
	}
	return s->broken;
}

struct op *client_op_new(void)
{
	return calloc(1, sizeof(struct op));
}

int client_submit(struct sseq *s, Sseq__Request *req, int fd, struct op *op, uint64_t *tag)
{
	int r = s->broken;
	if (r == 0 && s->nops >= s->nbuckets)
		r = table_grow(s);
	if (r == 0) {
		req->tag = s->next_tag;
		r = frame_writer_add(&s->w, &req->base, fd);
		if (r == -EMSGSIZE)
			client_set_error(s, "request does not fit in a frame");
	}
	if (r < 0) {
		if (op->arena)
			client_staging_unref(s, op->arena, op->staging_off);
		op_free(op);
		return r;
	}
	op->tag = s->next_tag++;
	op->kind = req->body_case;
	op->want_completion = req->want_completion || req->body_case == SSEQ__REQUEST__BODY_AWAIT ||
		req->body_case == SSEQ__REQUEST__BODY_SYNC ||
		req->body_case == SSEQ__REQUEST__BODY_COPY_D2H;
	size_t k = bucket_of(s, op->tag);
	op->hnext = s->buckets[k];
	s->buckets[k] = op;
	s->nops++;
	if (!op->follow)
		s->nactive++;
	if (tag)
		*tag = op->tag;

	/* From here on the op may finish (and, unless waited, be freed) at any time.
	 * A send failure breaks the connection, which every later call reports. */
	size_t pending = frame_writer_pending(&s->w);
	if (pending >= CLIENT_SEND_HARD) {
		client_flush(s);
	} else if (pending >= CLIENT_SEND_SOFT) {
		client_send(s);
	}
	return 0;
}

int client_op_collect(struct sseq *s, struct op *op)
{
	return client_op_collect_handle(s, op, NULL);
}

int client_op_collect_handle(struct sseq *s, struct op *op, uint64_t *handle)
{
	op->waited = true;
	if (!op->done) {
		client_flush(s);
		while (!op->done) {
			int r = client_pump(s, -1);
			if (r < 0 && r != -ETIMEDOUT && !op->done) {
				/* Not a lost connection (that finishes every op): a poll failure.
				 */
				op_fail(op, r, NULL);
				break;
			}
		}
	}
	int status = op->status;
	if (handle)
		*handle = op->handle;
	if (status != 0) {
		client_set_error(s, "%s", op->message ? op->message : sseq_strerror(status));
		s->errtag = op->user_tag ? op->tag : 0;
	}
	table_remove(s, op);
	op_free(op);
	return status;
}

int client_request_wait(struct sseq *s, Sseq__Request *req, uint64_t *handle)
{
	struct op *op = client_op_new();
	if (!op)
		return -ENOMEM;
	op->waited = true;
	int r = client_submit(s, req, -1, op, NULL);
	if (r < 0)
		return r;
	uint64_t h = 0;
	r = client_op_collect_handle(s, op, &h);
	if (handle)
		*handle = r == 0 ? h : 0;
	return r;
}

/* ---- connecting ---- */

static void connect_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void connect_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(connect_errmsg, sizeof(connect_errmsg), fmt, ap);
	va_end(ap);
}

static void client_free(struct sseq *s)
{
	for (size_t i = 0; i < s->nbuckets; i++) {
		struct op *op = s->buckets[i];
		while (op) {
			struct op *next = op->hnext;
			op_free(op);
			op = next;
		}
	}
	free(s->buckets);
	while (s->nerrors)
		errors_remove(s, s->nerrors - 1);
	free(s->errors);
	client_staging_destroy(s);
	frame_writer_finish(&s->w);
	frame_reader_finish(&s->r);
	if (s->sock >= 0)
		close(s->sock);
	free(s->info.daemon_version);
	free(s->info.device_name);
	free(s->info.backend);
	free(s->info.arch);
	free(s);
}

int sseq__connect_fd(int fd, const struct sseq_connect_options *opts, struct sseq **out)
{
	*out = NULL;
	connect_errmsg[0] = '\0';
	struct sseq *s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		connect_error("out of memory");
		return -ENOMEM;
	}
	s->sock = fd;
	s->next_tag = 1;
	s->staging_size = CLIENT_DEFAULT_STAGING;
	frame_writer_init(&s->w);
	frame_reader_init(&s->r);

	/* Only read the fields the caller's version of the struct has. */
	struct sseq_connect_options o = {0};
	if (opts) {
		size_t n = opts->size ? opts->size : sizeof(o);
		memcpy(&o, opts, n < sizeof(o) ? n : sizeof(o));
	}
	if (o.staging_size)
		s->staging_size = o.staging_size;
	const char *worker = o.worker_id ? o.worker_id : getenv("PYTEST_XDIST_WORKER");

	Sseq__Hello hello = SSEQ__HELLO__INIT;
	hello.protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	hello.protocol_minor = SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR;
	hello.client_name = (char *)(o.client_name ? o.client_name : program_invocation_short_name);
	hello.pid = (uint32_t)getpid();
	hello.worker_id = (char *)(worker ? worker : "");
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_HELLO;
	req.hello = &hello;

	struct op *op = client_op_new();
	int r = -ENOMEM;
	if (op) {
		op->waited = true;
		r = client_submit(s, &req, -1, op, NULL);
		if (r == 0)
			r = client_op_collect(s, op);
	}
	if (r == 0 && s->info.major != SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR) {
		r = -SSEQ_ERR_UNSUPPORTED_VERSION;
		client_set_error(s, "sseqd speaks protocol %u, this libsseq %u", s->info.major,
			SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR);
	}
	if (r < 0) {
		connect_error("%s", s->errmsg[0] ? s->errmsg : sseq_strerror(r));
		client_free(s);
		return r;
	}
	s->errmsg[0] = '\0';
	*out = s;
	return 0;
}

int sseq_connect(const char *path, const struct sseq_connect_options *opts, struct sseq **out)
{
	*out = NULL;
	if (!path) {
		path = getenv("SSEQ_SOCKET");
		if (!path || !*path)
			path = SSEQ_DEFAULT_SOCKET;
	}
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	size_t len = strlen(path);
	if (len == 0 || len >= sizeof(addr.sun_path)) {
		connect_error("socket path '%s' is empty or too long", path);
		return -ENAMETOOLONG;
	}
	memcpy(addr.sun_path, path, len);
	/* "@name" is the abstract namespace (handy for tests); it has no terminator. */
	socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
	if (path[0] == '@') {
		addr.sun_path[0] = '\0';
		alen--;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int r = -errno;
		connect_error("socket: %s", strerror(errno));
		return r;
	}
	if (connect(fd, (struct sockaddr *)&addr, alen) < 0) {
		int r = -errno;
		connect_error("connect %s: %s", path, strerror(errno));
		close(fd);
		return r;
	}
	return sseq__connect_fd(fd, opts, out);
}

void sseq_close(struct sseq *s)
{
	if (!s)
		return;
	/* Send what the application queued (frees, copies) but wait for nothing: the
	 * daemon cleans up after the session itself (I10). A full socket is not worth
	 * blocking close for, so only what fits goes. */
	if (!s->broken && frame_writer_pending(&s->w))
		frame_writer_send(&s->w, s->sock);
	client_free(s);
}

int sseq_get_info(struct sseq *s, struct sseq_info *info)
{
	*info = (struct sseq_info){
		.session = s->info.session,
		.protocol_major = s->info.major,
		.protocol_minor = s->info.minor,
		.daemon_version = s->info.daemon_version ? s->info.daemon_version : "",
		.device_index = s->info.device_index,
		.device_name = s->info.device_name ? s->info.device_name : "",
		.backend = s->info.backend ? s->info.backend : "",
		.arch = s->info.arch ? s->info.arch : "",
		.memory_total = s->info.memory_total,
	};
	return 0;
}

/* ---- waiting ---- */

int sseq_flush(struct sseq *s)
{
	return client_flush(s);
}

int sseq_wait(struct sseq *s, uint64_t tag)
{
	struct op *op = client_op_find(s, tag);
	if (op && !op->follow)
		return client_op_collect(s, op);
	for (size_t i = 0; i < s->nerrors; i++)
		if (s->errors[i].tag == tag)
			return errors_report(s, i, true);
	if (tag == 0 || tag >= s->next_tag || op) {
		client_set_error(
			s, "tag %llu was not issued on this connection", (unsigned long long)tag);
		return -EINVAL;
	}
	return 0;
}

int sseq_await(struct sseq *s, uint64_t buf)
{
	Sseq__Await aw = SSEQ__AWAIT__INIT;
	aw.buffer = buf;
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_AWAIT;
	req.await = &aw;
	return client_request_wait(s, &req, NULL);
}

int sseq_sync(struct sseq *s)
{
	Sseq__Sync sy = SSEQ__SYNC__INIT;
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_SYNC;
	req.sync = &sy;
	int r = client_request_wait(s, &req, NULL);
	/* The daemon saw everything complete, but completions may come in any order:
	 * let every earlier request's message arrive before answering. */
	while (!s->broken && s->nactive > 0) {
		int p = client_pump(s, -1);
		if (p < 0 && p != -ETIMEDOUT)
			break;
	}
	if (s->broken)
		return s->broken;
	client_staging_trim(s);
	/* The Sync itself failing is one more error; report it after older ones. */
	if (r < 0)
		errors_push(s, 0, r, s->errmsg, false, false);
	return errors_next(s, NULL);
}

int sseq_poll(struct sseq *s, int timeout_ms)
{
	int r = client_flush(s);
	if (r < 0)
		return r;
	uint64_t before = s->finished;
	r = client_pump(s, timeout_ms);
	if (r < 0)
		return r;
	return (int)(s->finished - before);
}

uint64_t sseq_outstanding(struct sseq *s)
{
	return s->nactive;
}

int sseq_get_fd(struct sseq *s)
{
	return s->sock;
}

void sseq_set_completion_callback(struct sseq *s, sseq_completion_fn fn, void *userdata)
{
	s->cb = fn;
	s->cb_data = userdata;
}

/* ---- counters ---- */

int sseq_stats(struct sseq *s, struct sseq_stats *stats)
{
	const size_t size = stats->size ? stats->size : sizeof(*stats);
	Sseq__QueryResult *qr = NULL;
	int r;

	if (size < offsetof(struct sseq_stats, waits_enqueued) + sizeof(uint64_t))
		return -EINVAL;
	r = sseq__query(s, SSEQ__QUERY_KIND__QUERY_KIND_STATS, 0, &qr);
	if (r < 0)
		return r;
	const Sseq__Counters *c = qr->counters;
	struct sseq_stats st = {.size = size};
	if (c) {
		st.waits_enqueued = c->waits_enqueued;
		st.waits_elided_same_stream = c->waits_elided_same_stream;
		st.waits_elided_observed = c->waits_elided_observed;
		st.waits_elided_legacy = c->waits_elided_legacy;
		st.backpressure_events = c->backpressure_events;
		st.race_findings = c->race_findings;
		st.ops_submitted = c->ops_submitted;
		st.ops_completed = c->ops_completed;
		st.ops_failed = c->ops_failed;
		st.events_recorded = c->events_recorded;
		st.frees_deferred = c->frees_deferred;
		st.releases = c->releases;
		st.double_definitions = c->double_definitions;
		st.audit_findings = c->audit_findings;
		st.sessions_total = c->sessions_total;
		st.frames_in = c->frames_in;
		st.frames_bad = c->frames_bad;
		st.placed_by_affinity = c->placed_by_affinity;
	}
	sseq__query_result_free(qr);
	/* A caller built against an older header passes a smaller struct. */
	memcpy(stats, &st, size < sizeof(st) ? size : sizeof(st));
	return 0;
}
