/* sseqctl's connection to one sseqd: connect with a deadline, the Hello, and one
 * request / answer exchange at a time over length-prefixed frames. Every wait is bounded
 * by CTL_TIMEOUT_MS, so a daemon that accepts but never answers cannot hang us. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "sseq-frame.h"

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
int ctl_connect(struct ctl *c)
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

	if (len > FRAME_MAX) {
		ctl_error(c, "request of %zu bytes exceeds the frame limit", len);
		return -EMSGSIZE;
	}
	frame = malloc(FRAME_HEADER + len);
	if (!frame) {
		ctl_error(c, "out of memory");
		return -ENOMEM;
	}
	frame_put_len(frame, (uint32_t)len);
	sseq__request__pack(rq, frame + FRAME_HEADER);
	r = ctl_write_all(c, frame, FRAME_HEADER + len, deadline);
	free(frame);
	return r;
}

static int ctl_recv(struct ctl *c, Sseq__Message **out, int64_t deadline)
{
	uint8_t hdr[FRAME_HEADER];
	uint8_t *body;
	uint32_t len;
	int r;

	r = ctl_read_all(c, hdr, sizeof(hdr), deadline);
	if (r < 0)
		return r;
	len = frame_get_len(hdr);
	/* Checked before allocating: a bogus length must not make us allocate 4 GiB. */
	if (len > FRAME_MAX) {
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
const char *ctl_enum_name(
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

const char *ctl_status_name(int status, char *buf, size_t size)
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

int ctl_hello(struct ctl *c)
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
		c->daemon_minor = m->reply->welcome->protocol_minor;
	}
	sseq__message__free_unpacked(m, NULL);
	return r;
}

int ctl_query(struct ctl *c, Sseq__Query *q, Sseq__Message **out)
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
