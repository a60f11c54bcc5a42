/* libsseq's connection: connecting and saying Hello, the socket (sending what is
 * queued, reading and handing frames to ops.c, the spin-then-poll wait), submitting a
 * request and waiting for it, and the public calls that wait or look at the connection.
 * What each request carries is built in submit.c and query.c. */
#include <errno.h>
#include <limits.h>
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
#include "spin.h"

/* Why the calling thread's last sseq_connect failed: there is no connection to hold it. */
static _Thread_local char connect_errmsg[256];

const char *sseq_last_error_message(struct sseq *s)
{
	return s ? s->errmsg : connect_errmsg;
}

uint64_t sseq_last_error_tag(struct sseq *s)
{
	return s->errtag;
}

/* ---- the socket ---- */

/* The connection is unusable: finish everything with `err`, which every later call
 * returns, and `why` (NULL: the daemon's last word if it gave one before closing, else
 * that the connection was lost), which every later call says. */
static void client_break(struct sseq *s, int err, const char *why)
{
	if (s->broken)
		return;
	s->broken = err;
	if (why)
		snprintf(s->brokenmsg, sizeof(s->brokenmsg), "%s", why);
	else if (!s->fatal || err != s->fatal || !s->brokenmsg[0])
		snprintf(s->brokenmsg, sizeof(s->brokenmsg), "connection to sseqd lost: %s",
			sseq_strerror(err));
	client_set_error(s, "%s", s->brokenmsg);
	client_ops_fail_all(s, err);
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
				client_break(s, f == -EMSGSIZE ? -EPROTO : f,
					"oversized frame from sseqd");
				return s->broken;
			}
			f = client_dispatch(s, frame, len);
			if (f < 0) {
				client_break(s, f, s->errmsg); /* dispatch said why */
				return s->broken;
			}
			handled++;
		}
		if (r < 0) {
			client_break(s, r == -ECONNRESET && s->fatal ? s->fatal : r, NULL);
			return s->broken;
		}
		if (s->r.drained)
			break;
	}
	return handled;
}

static uint64_t client_now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Send what the socket takes now. Any failure but a full socket breaks the connection
 * (a closed peer reads as a reset). Returns 0, -EAGAIN or s->broken. */
static int client_send(struct sseq *s)
{
	int r = frame_writer_send_ring(&s->w, s->sock, &s->ring);
	if (r == 0) {
		s->nqueued = 0;
		s->sent_ns = s->looked_ns = client_now_ns();
	}
	if (r < 0 && r != -EAGAIN) {
		client_break(s, r == -EPIPE ? -ECONNRESET : r, NULL);
		return s->broken;
	}
	return r;
}

/* Nagle's rule: whether an answer to a request already sent is due. Requests still
 * queued cannot be answered, so more unanswered than queued means one is. A partial
 * send leaves nqueued too high, which errs towards sending. */
static bool client_answer_due(const struct sseq *s)
{
	return s->nunanswered > s->nqueued;
}

/* How long a waiting call may look for the daemon's answer before it sleeps in poll():
 * $SSEQ_SPIN_US, default 2 ms. Waking a sleeping thread costs tens of microseconds on
 * a GPU host; a native synchronize spins the same way. Within that limit each wait
 * spins for twice what the last wait took, not at all after a wait slower than
 * the limit, and only while the machine has a core free with some to spare for the
 * daemon's threads (spin.h; $SSEQ_SPIN_POLICY, $SSEQ_SPIN_SPARE): a
 * spin that outlasts the answers it waits for, or that holds a core someone else
 * needs, only takes it from the daemon and the other workers (a test waiting 100 ms
 * for its kernels would spin 2 ms for nothing each time, and sixteen such workers on
 * four cores starve the rest). */
#define CLIENT_DEFAULT_SPIN_US 2000L
/* A wait asleep on a D2H's done word (protocol 1.12) looks at its socket this often: the
 * daemon wakes it for the tag and for a Completion sent instead, so this bounds only a
 * lost race with the latter and the notice of a daemon gone. */
#define CLIENT_NAP_NS 5000000L
/* Requests held until the daemon takes its ring look again this often (the daemon's loop
 * takes it within a turn unless the session is held back). */
#define CLIENT_RING_LOOK_MS 1
/* The request ring's data bytes ($SSEQ_REQUEST_RING). */
#define CLIENT_RING_SIZE (64u << 10)

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

/* The next wait spins for twice what this answer took, or not at all after one slower
 * than the limit. Inside a wait for one request only its end teaches (client_op_collect). */
static void client_spin_learn(struct sseq *s, uint64_t t0, long most)
{
	const long took = (long)(client_now_ns() - t0);

	if (most > 0 && !s->wait_t0)
		s->spin_ns = took > most ? 0 : 2 * took;
}

int client_pump(struct sseq *s, int timeout_ms)
{
	if (s->broken)
		return client_broken(s);
	if (frame_writer_pending(&s->w)) {
		client_send(s);
		if (s->broken)
			return s->broken;
	}
	/* Requests waiting for the daemon to take the ring (or to read the socket before
	 * the ring goes on) are not waiting for the socket: look again after a while. */
	const bool ring_wait = frame_writer_pending(&s->w) && s->ring.waiting;
	struct pollfd pfd = {
		.fd = s->sock,
		.events = POLLIN | (frame_writer_pending(&s->w) && !ring_wait ? POLLOUT : 0),
	};
	int n = 0;
	/* An answer usually comes within tens of microseconds: look for it for a moment
	 * before sleeping, since waking from poll() costs about as much again (the native
	 * alternative, a synchronize on the GPU, spins as well). */
	const long most = timeout_ms != 0 ? client_spin_ns() : 0;
	const long spin_ns = s->spin_ns < most ? s->spin_ns : most;
	const uint64_t t0 = s->wait_t0 ? s->wait_t0 : client_now_ns();
	if (spin_ns > 0 && spin_client_core_free()) {
		for (unsigned i = 1;; i++) {
			/* The D2H waited for may be answered in its word (ops.c). */
			if (s->watching && client_op_word_done(s, s->watching)) {
				client_spin_learn(s, t0, most);
				return 0;
			}
			/* With nothing to send, the look is the read itself: an answer that is
			 * there is taken by the call that finds it, where a poll() first would
			 * cost a second system call per answer. */
			if (!(pfd.events & POLLOUT)) {
				int got = read_input(s);
				if (got != 0) {
					client_spin_learn(s, t0, most);
					return got;
				}
			} else {
				n = poll(&pfd, 1, 0);
				if (n != 0)
					break;
			}
			if ((long)(client_now_ns() - t0) >= spin_ns)
				break;
			/* The machine may have filled up meanwhile (spin.h). */
			if (i % 64 == 0 && !spin_client_core_free())
				break;
		}
	}
	if (n == 0 || (n < 0 && errno == EINTR)) {
		/* Asleep on the word where the daemon wakes it (nothing to send, no end to the
		 * wait: the socket is looked at after each nap, for what else came). */
		if (timeout_ms < 0 && s->watching && s->word_sleeps && !(pfd.events & POLLOUT) &&
			!ring_wait) {
			switch (client_op_word_nap(s, s->watching, CLIENT_NAP_NS)) {
			case CLIENT_NAP_DONE:
				return 0;
			case CLIENT_NAP_AGAIN:
				return read_input(s);
			default:
				break; /* sleep on the socket */
			}
		}
		/* Asleep, only the Completion can wake us: tell the daemon to send it. */
		if (timeout_ms != 0 && s->watching && !client_op_word_sleep(s, s->watching))
			return 0;
		do
			n = poll(&pfd, 1,
				ring_wait && (timeout_ms < 0 || timeout_ms > CLIENT_RING_LOOK_MS)
					? CLIENT_RING_LOOK_MS
					: timeout_ms);
		while (n < 0 && errno == EINTR);
		if (n == 0 && ring_wait && timeout_ms != 0)
			return 0; /* the caller sends again, and waits again */
	}
	if (n > 0)
		client_spin_learn(s, t0, most);
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
			return client_broken(s);
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
	return s->broken ? client_broken(s) : 0;
}

/* ---- one request ---- */

int client_submit(struct sseq *s, Sseq__Request *req, int fd, struct op *op, uint64_t *tag)
{
	int r = s->broken ? client_broken(s) : 0;
	if (r == 0)
		r = client_ops_reserve(s);
	if (r == 0) {
		req->tag = s->next_tag;
		r = frame_writer_add(&s->w, &req->base, fd);
		if (r == -EMSGSIZE)
			client_set_error(s, "request does not fit in a frame");
	}
	if (r == -ENOMEM)
		client_set_error(s, "out of memory queueing a request");
	if (r < 0) {
		client_op_release_staging(s, op);
		client_op_free(op);
		return r;
	}
	op->tag = s->next_tag++;
	client_op_insert(s, op, req);
	s->nqueued++;
	if (tag)
		*tag = op->tag;

	/* From here on the op may finish (and, unless waited, be freed) at any time.
	 * A send failure breaks the connection, which every later call reports.
	 *
	 * When to send is Nagle's rule: at once if no answer is due, so the daemon starts
	 * on the request while the application does other work; else it is held back and
	 * leaves with the ones after it, in one send, once everything sent is answered. A
	 * later submission's look at the socket (no waiting, see CLIENT_LOOK_NS) tells. What
	 * is still held when the application stops calling leaves with a later call,
	 * sseq_flush() or a wait. */
	size_t pending = frame_writer_pending(&s->w);
	if (pending >= CLIENT_SEND_HARD) {
		client_flush(s);
	} else if (pending >= CLIENT_SEND_SOFT || !client_answer_due(s)) {
		client_send(s);
	} else {
		uint64_t now = client_now_ns(), since_look = now - s->looked_ns;
		if (since_look >= CLIENT_LOOK_NS &&
			since_look * CLIENT_LOOK_BACKOFF >= now - s->sent_ns) {
			s->looked_ns = now;
			read_input(s);
			if (!s->broken && !client_answer_due(s))
				client_send(s);
		}
	}
	return 0;
}

int client_op_collect(struct sseq *s, struct op *op)
{
	return client_op_collect_handle(s, op, NULL);
}

int client_op_collect_handle(struct sseq *s, struct op *op, uint64_t *handle)
{
	return client_op_collect_handle_sized(s, op, handle, NULL);
}

int client_op_collect_handle_sized(struct sseq *s, struct op *op, uint64_t *handle, uint64_t *size)
{
	op->waited = true;
	if (!op->done) {
		/* A wait inside this one (a completion callback's) hands both back. */
		struct op *const outer = s->watching;
		const uint64_t outer_t0 = s->wait_t0, t0 = client_now_ns();

		/* Armed before the request leaves: the daemon may write the tag as soon as it
		 * reads it (a copy already done), and finding the word unarmed it answers by
		 * a Completion instead. */
		s->watching = client_op_word_arm(op) ? op : NULL;
		client_flush(s);
		s->wait_t0 = t0;
		while (!op->done) {
			int r = client_pump(s, -1);
			if (r < 0 && r != -ETIMEDOUT && !op->done) {
				/* Not a lost connection (that finishes every op): a poll failure.
				 */
				client_op_fail(op, r, NULL);
				break;
			}
		}
		s->watching = outer;
		s->wait_t0 = outer_t0;
		client_spin_learn(s, t0, client_spin_ns());
	}
	int status = op->status;
	if (handle)
		*handle = op->handle;
	if (size)
		*size = op->size;
	if (status != 0) {
		client_set_error(s, "%s", op->message ? op->message : sseq_strerror(status));
		s->errtag = op->user_tag ? op->tag : 0;
	}
	client_op_drop(s, op);
	return status;
}

int client_request_wait_sized(struct sseq *s, Sseq__Request *req, uint64_t *handle, uint64_t *size)
{
	struct op *op = client_op_new();
	if (!op)
		return client_fail(s, -ENOMEM, "out of memory");
	op->waited = true;
	int r = client_submit(s, req, -1, op, NULL);
	if (r < 0)
		return r;
	uint64_t h = 0, n = op->size;
	/* The size is there once the op is done; collecting drops it. */
	op->size = 0;
	r = client_op_collect_handle_sized(s, op, &h, &n);
	if (handle)
		*handle = r == 0 ? h : 0;
	if (size)
		*size = r == 0 ? n : 0;
	return r;
}

int client_request_wait(struct sseq *s, Sseq__Request *req, uint64_t *handle)
{
	return client_request_wait_sized(s, req, handle, NULL);
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
	handles_unregister(s);
	client_names_free(s);
	client_ops_free_all(s);
	staging_set_destroy(&s->staging);
	frame_writer_finish(&s->w);
	frame_reader_finish(&s->r);
	if (s->sock >= 0)
		close(s->sock);
	if (s->ring_arena)
		staging_arena_destroy(s->ring_arena);
	free(s->info.daemon_version);
	free(s->info.device_name);
	free(s->info.backend);
	free(s->info.arch);
	free(s);
}

/* Send the Hello and wait for the Welcome, which ops.c saves in s->info. */
static int client_hello(struct sseq *s, const struct sseq_connect_options *o)
{
	const char *name = o->client_name ? o->client_name : program_invocation_short_name;
	const char *worker = o->worker_id ? o->worker_id : getenv("PYTEST_XDIST_WORKER");
	Sseq__Hello hello = SSEQ__HELLO__INIT;
	hello.protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	hello.protocol_minor = SSEQ__PROTOCOL_VERSION__PROTOCOL_MINOR;
	hello.client_name = (char *)name;
	hello.pid = (uint32_t)getpid();
	hello.worker_id = (char *)(worker ? worker : "");
	hello.lanes = o->lanes;
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_HELLO;
	req.hello = &hello;

	struct op *op = client_op_new();
	if (!op)
		return -ENOMEM;
	op->waited = true;
	int r = client_submit(s, &req, -1, op, NULL);
	if (r == 0)
		r = client_op_collect(s, op);
	if (r == 0 && s->info.major != SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR) {
		r = -SSEQ_ERR_UNSUPPORTED_VERSION;
		client_set_error(s, "sseqd speaks protocol %u, this libsseq %u", s->info.major,
			SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR);
	}
	return r;
}

/* The requests from here on through a ring in an arena of its own (RequestRing): its
 * registration and naming go on the socket, and a daemon that refuses it (or memory that
 * runs short) leaves them there. */
static void client_ring_start(struct sseq *s)
{
	const uint64_t size = SSEQ_RING_HEADER + CLIENT_RING_SIZE;
	struct staging_arena *a;
	struct op *op;

	if (staging_arena_create(size, "sseq-ring", &a) < 0)
		return;
	Sseq__StagingRegister reg = SSEQ__STAGING_REGISTER__INIT;
	reg.size = size;
	reg.label = "sseq-ring";
	Sseq__Request req = SSEQ__REQUEST__INIT;
	req.body_case = SSEQ__REQUEST__BODY_STAGING_REGISTER;
	req.staging_register = &reg;
	int r = (op = client_op_new()) ? 0 : -ENOMEM;
	if (r == 0) {
		op->waited = true;
		r = client_submit(s, &req, a->fd, op, NULL);
	}
	if (r == 0)
		r = client_op_collect_handle(s, op, &a->handle);
	if (r == 0) {
		Sseq__RequestRing rr = SSEQ__REQUEST_RING__INIT;
		rr.staging = a->handle;
		rr.size = CLIENT_RING_SIZE;
		req = (Sseq__Request)SSEQ__REQUEST__INIT;
		req.body_case = SSEQ__REQUEST__BODY_REQUEST_RING;
		req.request_ring = &rr;
		r = client_request_wait(s, &req, NULL);
	}
	if (r < 0) {
		/* Registered or not, the arena is the daemon's to drop with the session. */
		staging_arena_destroy(a);
		s->errmsg[0] = '\0';
		return;
	}
	s->ring_arena = a;
	s->ring = (struct frame_ring){.hdr = (struct sseq_ring_header *)(void *)a->base,
		.data = a->base + SSEQ_RING_HEADER,
		.size = CLIENT_RING_SIZE,
		.sock_fence = s->w.sock_sent};
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
	s->spin_ns = LONG_MAX; /* the whole limit until an answer says better */
	s->next_tag = 1;
	s->staging.size = CLIENT_DEFAULT_STAGING;
	frame_writer_init(&s->w);
	frame_reader_init(&s->r);

	/* Only read the fields the caller's version of the struct has: a .size of 0 is the
	 * first version's, which ended before .lanes. */
	struct sseq_connect_options o = {0};
	if (opts) {
		size_t n = opts->size ? opts->size : offsetof(struct sseq_connect_options, lanes);
		memcpy(&o, opts, n < sizeof(o) ? n : sizeof(o));
	}
	if (o.staging_size)
		s->staging.size = o.staging_size;

	int r = client_hello(s, &o);
	if (r < 0) {
		connect_error("%s", s->errmsg[0] ? s->errmsg : sseq_strerror(r));
		client_free(s);
		return r;
	}
	s->errmsg[0] = '\0';
	if (s->want_ring)
		client_ring_start(s);
	handles_register(s);
	*out = s;
	return 0;
}

const char *sseq_default_socket(void)
{
	return SSEQ_DEFAULT_SOCKET;
}

int sseq_connect(const char *path, const struct sseq_connect_options *opts, struct sseq **out)
{
	*out = NULL;
	if (!path) {
		path = getenv("SSEQ_SOCKET");
		if (!path || !*path)
			path = sseq_default_socket();
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

int sseq_set_lane(struct sseq *s, unsigned lane)
{
	if (lane >= s->info.nlanes) {
		client_set_error(s, "lane %u: this connection has %u lane%s", lane, s->info.nlanes,
			s->info.nlanes == 1 ? "" : "s");
		return -EINVAL;
	}
	s->lane = lane;
	return 0;
}

unsigned sseq_get_lane(struct sseq *s)
{
	return s->lane;
}

int sseq_get_lanes(struct sseq *s, uint32_t *ids, size_t n)
{
	for (size_t i = 0; ids && i < n && i < s->info.nlanes; i++)
		ids[i] = s->info.lanes[i];
	return (int)s->info.nlanes;
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
	int code;
	if (client_error_collect(s, tag, &code))
		return code;
	if (tag == 0 || tag >= s->next_tag || op) {
		client_set_error(
			s, "tag %llu was not issued on this connection", (unsigned long long)tag);
		return -EINVAL;
	}
	return 0;
}

int sseq_poll(struct sseq *s, int timeout_ms)
{
	int r = client_flush(s);
	if (r < 0)
		return r;
	uint64_t before = s->finished;
	r = client_pump(s, timeout_ms);
	if (r == -ETIMEDOUT)
		return client_fail(s, r, "nothing from sseqd within %d ms", timeout_ms);
	if (r < 0 && !s->broken)
		return client_fail(s, r, "poll: %s", sseq_strerror(r));
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
