/* sseqctl's connection to one sseqd: connect with a deadline, the Hello, and one
 * request / answer exchange at a time over length-prefixed frames. Every wait is bounded
 * by CTL_TIMEOUT_MS, so a daemon that accepts but never answers cannot hang us. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			ctl_error(c,
				"the daemon at %s went away (it stopped or closed the connection)",
				c->socket);
			return -ECONNRESET;
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
		if (n == 0 || errno == ECONNRESET) {
			ctl_error(c,
				"the daemon at %s went away (it stopped or closed the connection)",
				c->socket);
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

static void ctl_user_name(uid_t uid, char *buf, size_t size)
{
	const struct passwd *pw = getpwuid(uid);

	if (pw)
		snprintf(buf, size, "%s", pw->pw_name);
	else
		snprintf(buf, size, "%u", (unsigned)uid);
}

static void ctl_group_name(gid_t gid, char *buf, size_t size)
{
	const struct group *gr = getgrgid(gid);

	if (gr)
		snprintf(buf, size, "%s", gr->gr_name);
	else
		snprintf(buf, size, "%u", (unsigned)gid);
}

/* Whether this process, or this user's next login, is in group gid. */
static void ctl_group_member(gid_t gid, bool *now, bool *added)
{
	gid_t groups[256];
	int n = getgroups(sizeof(groups) / sizeof(groups[0]), groups);
	const struct passwd *pw = getpwuid(getuid());
	const struct group *gr;

	*now = getegid() == gid;
	for (int i = 0; i < n && !*now; i++)
		*now = groups[i] == gid;
	*added = false;
	gr = pw ? getgrgid(gid) : NULL;
	for (char **m = gr ? gr->gr_mem : NULL; m && *m && !*added; m++)
		*added = strcmp(*m, pw->pw_name) == 0;
}

/* EACCES: who owns the socket, or the directory that is closed to us, and what lets us
 * in, as the pytest plugin says it. Being in the group is what sseqd@.socket intends
 * (SocketGroup=sseq, SocketMode=0660). */
static void ctl_permission_error(struct ctl *c)
{
	char dir[CTL_PATH_MAX], owner[64], group[64], what[CTL_PATH_MAX + 32];
	const char *slash = strrchr(c->socket, '/');
	struct stat st;
	bool now, added;

	if (stat(c->socket, &st) == 0) {
		snprintf(what, sizeof(what), "%s", c->socket);
	} else {
		/* Not even its attributes: a directory above is closed to us. */
		snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - c->socket) : 1,
			slash ? c->socket : ".");
		if (slash == c->socket)
			snprintf(dir, sizeof(dir), "/");
		if (stat(dir, &st) < 0) {
			ctl_error(c,
				"permission denied on %s (a directory above it is closed to you)",
				c->socket);
			return;
		}
		snprintf(what, sizeof(what), "%s: its directory %s", c->socket, dir);
	}
	ctl_user_name(st.st_uid, owner, sizeof(owner));
	ctl_group_name(st.st_gid, group, sizeof(group));
	ctl_group_member(st.st_gid, &now, &added);
	if (S_ISSOCK(st.st_mode) && (st.st_mode & 0060) != 0060)
		ctl_error(c,
			"permission denied on %s (owner %s, group %s, mode %04o): its mode does "
			"not let group %s read and write it (sseqd@.socket sets SocketMode=0660); "
			"ask the machine's administrator, or run as root",
			what, owner, group, (unsigned)(st.st_mode & 07777), group);
	else if (now)
		ctl_error(c,
			"permission denied on %s (owner %s, group %s, mode %04o): you are in group "
			"%s and still may not open it; run as root",
			what, owner, group, (unsigned)(st.st_mode & 07777), group);
	else if (added)
		ctl_error(c,
			"permission denied on %s (owner %s, group %s, mode %04o): you were added "
			"to "
			"group %s after this login; log in again (or run under 'newgrp %s'), or "
			"run as root",
			what, owner, group, (unsigned)(st.st_mode & 07777), group, group);
	else
		ctl_error(c,
			"permission denied on %s (owner %s, group %s, mode %04o): join group '%s' "
			"(sudo usermod -aG %s $USER, then log in again) or run as root",
			what, owner, group, (unsigned)(st.st_mode & 07777), group, group);
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
		if (r == -EACCES || r == -EPERM) {
			ctl_permission_error(c);
			return -EACCES;
		}
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
	/* Anything short of an error is a frame read: 0 always comes with *out set. */
	r = ctl_read_all(c, body, len, deadline);
	if (r >= 0) {
		*out = sseq__message__unpack(NULL, len, body);
		r = 0;
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
	if ((r = ctl_send(c, rq, deadline)) < 0)
		return r;
	for (;;) {
		Sseq__Message *m = NULL;
		const Sseq__QueryResult *qr;
		const Sseq__Reply *reply;
		Sseq__Status status;
		const char *message;
		char name[64];

		r = ctl_recv(c, &m, deadline);
		if (r < 0)
			return r;
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
		if (status == SSEQ__STATUS__STATUS_SHUTTING_DOWN) {
			/* Said to every client as the daemon stops (tag 0), or in answer. */
			ctl_error(c, "the daemon at %s went away: %s", c->socket,
				message && *message ? message : "it is stopping");
			sseq__message__free_unpacked(m, NULL);
			return -ESHUTDOWN;
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
		snprintf(c->daemon_version, sizeof(c->daemon_version), "%s",
			m->reply->welcome->daemon_version ? m->reply->welcome->daemon_version : "");
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
