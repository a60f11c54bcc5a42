/* libFuzzer target for a whole session: the server library runs in-process on a libuv loop
 * against the checking device model (check-backend.c); the input's first bytes pick the
 * configuration and the device's schedule, the rest is the client's byte stream, written
 * frame by frame to a real socketpair (memfds ride along with StagingRegister). At the end
 * the client goes away and everything must run, complete and be given back. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "answers.h"
#include "check-backend.h"
#include "log.h"
#include "server.h"
#include "session.h"
#include "sseq-frame.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Input layout: a configuration byte, a fault seed, the schedule's length and bytes, then
 * the client's frames. */
enum {
	CFG_WINDOW = 7, /* window = 2 + these bits: a small one, so backpressure happens */
	CFG_TWO_D2H = 1 << 3,
	CFG_TWO_D2D = 1 << 4,
	CFG_FAULTS = 1 << 5, /* the device refuses and fails things */
	CFG_KILL = 1 << 6, /* the client goes away with its work in flight (kill -9) */
	CFG_LANES = 1 << 7, /* three compute and two H2D streams, for sessions' lanes */
};

#define harness_fail(...)                                                                          \
	do {                                                                                       \
		fprintf(stderr, "fuzz-session: " __VA_ARGS__);                                     \
		fputc('\n', stderr);                                                               \
		abort();                                                                           \
	} while (0)

struct fz {
	uv_loop_t loop;
	struct server srv;
	struct cq cq;
	struct backend be;
	struct check_backend *cb;
	struct fuzz_sched sched;
	int client; /* our end of the socketpair, -1 once closed */
	bool peer_closed; /* the daemon closed its end */
	uint8_t *rx;
	size_t rx_len, rx_cap;
	uint64_t rx_total;
	struct answers answers;
};

static char module_dir[256];
static bool log_on; /* SSEQ_FUZZ_LOG */
/* SSEQ_FUZZ_INJECT=early-free or sync-window=N brings back a legacy bug (seq_config), so a
 * run can show the checks catch it. */
static bool inject_early_free;
static unsigned inject_sync_window;

static void fz_remove_module_dir(void)
{
	char path[300];

	snprintf(path, sizeof(path), "%s/m.co", module_dir);
	unlink(path);
	rmdir(module_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *inject;
	char path[300];
	int fd;

	/* Quiet by default: a line per request costs more than the request. */
	log_on = getenv("SSEQ_FUZZ_LOG") != NULL;
	log_set_level(log_on ? LOG_LVL_DEBUG : (enum log_level)0);
	inject = getenv("SSEQ_FUZZ_INJECT");
	if (inject && strcmp(inject, "early-free") == 0)
		inject_early_free = true;
	else if (inject && strncmp(inject, "sync-window=", 12) == 0)
		inject_sync_window = (unsigned)strtoul(inject + 12, NULL, 10);
	else if (inject)
		harness_fail("SSEQ_FUZZ_INJECT=%s: early-free or sync-window=N", inject);
	/* LoadModule needs a --module-dir with a file in it; the model "loads" anything. */
	/* Under $TMPDIR: a crash skips the atexit clean-up, so .ci/fuzz points it at its own
	 * temporary directory. */
	snprintf(module_dir, sizeof(module_dir), "%s/sseq-fuzz-XXXXXX",
		getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(module_dir))
		harness_fail("mkdtemp: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/m.co", module_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		harness_fail("%s: %s", path, strerror(errno));
	close(fd);
	atexit(fz_remove_module_dir);
	return 0;
}

/* SSEQ_FUZZ_LOG: what the client heard, to read a reproducer by. */
static void fz_log_message(const Sseq__Message *m)
{
	if (m->body_case == SSEQ__MESSAGE__BODY_REPLY)
		fprintf(stderr, "fuzz-session: reply %" PRIu64 ": status %d %s\n", m->reply->tag,
			m->reply->status, m->reply->message);
	else if (m->body_case == SSEQ__MESSAGE__BODY_COMPLETION)
		fprintf(stderr, "fuzz-session: completion %" PRIu64 ": status %d %s\n",
			m->completion->tag, m->completion->status, m->completion->message);
	else
		fprintf(stderr, "fuzz-session: query result %" PRIu64 "\n", m->query_result->tag);
}

/* Everything the daemon sent must be a frame that unpacks as a Message. */
static void fz_client_read(struct fz *f)
{
	while (f->client >= 0 && !f->peer_closed) {
		ssize_t n;

		if (f->rx_cap - f->rx_len < 65536) {
			f->rx_cap = f->rx_cap ? f->rx_cap * 2 : 131072;
			if (!(f->rx = realloc(f->rx, f->rx_cap)))
				harness_fail("out of memory");
		}
		n = recv(f->client, f->rx + f->rx_len, f->rx_cap - f->rx_len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			f->peer_closed = true;
			break;
		}
		f->rx_len += (size_t)n;
		f->rx_total += (uint64_t)n;
	}
	size_t off = 0;
	while (f->rx_len - off >= 4) {
		const uint8_t *p = f->rx + off;
		uint32_t len = frame_get_len(p);
		Sseq__Message *m;

		if (len > FRAME_MAX)
			harness_fail("the daemon sent a frame of %" PRIu32 " bytes", len);
		if (f->rx_len - off - 4 < len)
			break;
		m = sseq__message__unpack(NULL, len, p + 4);
		if (!m || m->body_case == SSEQ__MESSAGE__BODY__NOT_SET)
			harness_fail("the daemon sent a frame that is not a Message");
		answers_receive(&f->answers, m);
		if (log_on)
			fz_log_message(m);
		sseq__message__free_unpacked(m, NULL);
		off += 4 + len;
	}
	memmove(f->rx, f->rx + off, f->rx_len - off);
	f->rx_len -= off;
}

/* A few loop turns: reads, sequencing, completions drained, replies written. */
static void fz_pump(struct fz *f)
{
	for (int i = 0; i < 2; i++) {
		uv_run(&f->loop, UV_RUN_NOWAIT);
		check_backend_loop_ran(f->cb);
	}
	fz_client_read(f);
}

/* Run the device until nothing more happens, as the fuzzer orders it. */
static void fz_settle(struct fz *f)
{
	unsigned quiet = 0;

	for (unsigned round = 0; quiet < 2; round++) {
		uint64_t commands = check_backend_commands(f->cb), rx = f->rx_total;
		uint64_t frames = f->srv.frames_in;
		unsigned sessions = f->srv.nsessions;
		bool moved = false;

		if (round == 100000)
			harness_fail("the server and device never settle");
		while (check_backend_step(f->cb, fuzz_sched_next(&f->sched)))
			moved = true;
		fz_pump(f);
		if (moved || commands != check_backend_commands(f->cb) || rx != f->rx_total ||
			frames != f->srv.frames_in || sessions != f->srv.nsessions)
			quiet = 0;
		else
			quiet++;
	}
}

static void fz_send(struct fz *f, const uint8_t *p, size_t n, const int *fds, unsigned nfds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * SESSION_MAX_FDS)];
	} ctl;

	for (unsigned tries = 0; n && f->client >= 0 && !f->peer_closed; tries++) {
		struct iovec iov = {(void *)p, n};
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
		ssize_t r;

		if (nfds) {
			struct cmsghdr *c;
			memset(&ctl, 0, sizeof(ctl));
			msg.msg_control = ctl.buf;
			msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
			c = CMSG_FIRSTHDR(&msg);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
			memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
		}
		r = sendmsg(f->client, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			/* The daemon is not reading (backpressure): let the device move. */
			if (tries == 1000)
				harness_fail("the daemon stopped reading for good");
			fz_settle(f);
			continue;
		}
		if (r < 0)
			return; /* it closed the connection */
		p += r;
		n -= (size_t)r;
		nfds = 0;
	}
}

/* What the client is about to send: the answers it is owed, and a sealed memfd for each
 * StagingRegister in the frame (a Batch may hold several). */
static unsigned fz_inspect(struct fz *f, const uint8_t *p, size_t len, int *fds)
{
	Sseq__Request *rq = len <= FRAME_MAX ? sseq__request__unpack(NULL, len, p) : NULL;
	const Sseq__Request *const *list;
	size_t n;
	unsigned nfds = 0;

	if (!rq) {
		answers_give_up(&f->answers); /* the daemon refuses it and closes */
		return 0;
	}
	answers_expect(&f->answers, rq);
	list = (const Sseq__Request *const *)&rq;
	n = 1;
	if (rq->body_case == SSEQ__REQUEST__BODY_BATCH) {
		list = (const Sseq__Request *const *)rq->batch->requests;
		n = rq->batch->n_requests;
	}
	for (size_t i = 0; i < n && nfds < SESSION_MAX_FDS; i++) {
		uint64_t size;
		int fd;

		if (list[i]->body_case != SSEQ__REQUEST__BODY_STAGING_REGISTER)
			continue;
		size = list[i]->staging_register->size;
		fd = memfd_create("fuzz-staging", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd < 0)
			harness_fail("memfd_create: %s", strerror(errno));
		/* Too big to map cheaply: a small one, which the daemon must refuse. */
		if (ftruncate(fd, size && size <= (1u << 20) ? (off_t)size : 4096) < 0)
			harness_fail("ftruncate: %s", strerror(errno));
		/* Now and then unsealed, which the daemon must refuse. */
		if (fuzz_sched_next(&f->sched) % 8 != 7 &&
			fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)
			harness_fail("F_ADD_SEALS: %s", strerror(errno));
		fds[nfds++] = fd;
	}
	sseq__request__free_unpacked(rq, NULL);
	return nfds;
}

static void fz_walk(uv_handle_t *h, void *arg)
{
	fprintf(stderr, "fuzz-session: handle left open: %s%s\n", uv_handle_type_name(h->type),
		uv_is_closing(h) ? " (closing)" : "");
}

static void fz_run(struct fz *f, uint8_t cfg, uint8_t fault_seed, const uint8_t *data, size_t size)
{
	int listen_pipe[2], sv[2];
	struct server_options opts = {
		.socket_path = "fuzz",
		.module_dir = module_dir,
		.seq = {.n_compute = cfg & CFG_LANES ? 3 : 1,
			.n_h2d = cfg & CFG_LANES ? 2 : 1,
			.n_d2h = cfg & CFG_TWO_D2H ? 2 : 1,
			.n_d2d = cfg & CFG_TWO_D2D ? 2 : 1,
			.window = 2 + (cfg & CFG_WINDOW),
			.legacy_sync_window = inject_sync_window,
			.legacy_early_free = inject_early_free},
	};
	struct seq_layout layout;
	size_t off = 0;

#ifdef SERVER_LIMITS_DEFAULT
	opts.limits = (struct server_limits)SERVER_LIMITS_DEFAULT;
	/* Timeouts would make a run depend on how fast the machine went. */
	opts.limits.hello_timeout_ms = 0;
	opts.limits.frame_timeout_ms = 0;
#endif
	/* Nothing connects: the server's listening poll watches a pipe nobody writes. */
	if (pipe2(listen_pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		harness_fail("pipe/socketpair: %s", strerror(errno));
	opts.listen_fd = listen_pipe[0];
	uv_loop_init(&f->loop);
	cq_init(&f->cq);
	if (seq_layout_init(&layout, &opts.seq) < 0 ||
		check_backend_create(
			&f->be, &layout, &f->sched, cfg & CFG_FAULTS, fault_seed, &f->cq) < 0)
		harness_fail("check_backend_create");
	f->cb = check_backend_get(&f->be);
	if (server_init(&f->srv, &f->loop, &opts, &f->be, &f->cq) < 0)
		harness_fail("server_init");
	if (!session_new(&f->srv, sv[0]))
		harness_fail("session_new");
	f->client = sv[1];

	while (size - off >= 4) {
		const uint8_t *p = data + off;
		uint32_t len = frame_get_len(p);
		int fds[SESSION_MAX_FDS];
		unsigned nfds;

		if (len > size - off - 4)
			break; /* the rest goes as it is: a torn or oversized frame */
		nfds = fz_inspect(f, p + 4, len, fds);
		fz_send(f, p, 4 + (size_t)len, fds, nfds);
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]);
		fz_pump(f);
		for (unsigned steps = fuzz_sched_next(&f->sched) % 8; steps; steps--)
			check_backend_step(f->cb, fuzz_sched_next(&f->sched));
		fz_pump(f);
		off += 4 + (size_t)len;
	}
	fz_send(f, data + off, size - off, NULL, 0);
	fz_pump(f);

	if (!(cfg & CFG_KILL)) {
		fz_settle(f);
		/* Everything sent has run: every promise to the client is due now. */
		if (!f->peer_closed)
			answers_check(&f->answers);
	}
	close(f->client);
	f->client = -1;
	/* Teardown must finish whatever the device does, so it no longer fails things. */
	check_backend_set_faults(f->cb, false);
	fz_settle(f);

	if (getenv("SSEQ_FUZZ_LOG"))
		fprintf(stderr,
			"fuzz-session: %" PRIu64 " device commands, %" PRIu64 " frames in, %" PRIu64
			" reply bytes\n",
			check_backend_commands(f->cb), f->srv.frames_in, f->rx_total);
	check_backend_settled(f->cb);
	if (f->srv.sessions)
		harness_fail("the session is still connected after its client left and the "
			     "device went idle");
	if (!server_idle(&f->srv))
		harness_fail("points were issued that never completed");
	server_finish(&f->srv);
	server_close_handles(&f->srv);
	uv_run(&f->loop, UV_RUN_DEFAULT);
	if (uv_loop_close(&f->loop) != 0) {
		uv_walk(&f->loop, fz_walk, NULL);
		harness_fail("a session was never freed: some op or watch never completed (a lost "
			     "completion)");
	}
	backend_destroy(&f->be);
	cq_finish(&f->cq);
	close(listen_pipe[0]);
	close(listen_pipe[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The server is large (its trace ring): one instance, reset by server_init. */
	static struct fz f;
	uint8_t cfg = size > 0 ? data[0] : 0;
	uint8_t fault_seed = size > 1 ? data[1] : 0;
	size_t head = size < 3 ? size : 3;
	size_t nsched = size > 2 ? data[2] : 0;

	if (nsched > size - head)
		nsched = size - head;
	f.sched = (struct fuzz_sched){.p = data + head, .n = nsched};
	f.peer_closed = false;
	f.rx_len = 0;
	f.rx_total = 0;
	answers_init(&f.answers);
	fz_run(&f, cfg, fault_seed, data + head + nsched, size - head - nsched);
	answers_finish(&f.answers);
	free(f.rx);
	f.rx = NULL;
	f.rx_cap = 0;
	return 0;
}
