/* libFuzzer target for a whole session: the server library runs in-process on a libuv loop
 * against the checking device model (check-backend.c); the input's first bytes pick the
 * configuration and the device's schedule, the rest is the client's byte stream, written
 * frame by frame to a real socketpair (memfds ride along with StagingRegister). At the end
 * the client goes away and everything must run, complete and be given back.
 *
 * Built with FUZZ_RESUME (fuzz-resume), the device is lost once, at a moment the input
 * picks (between frames, part-way through one, or when a client that stopped reading
 * fills its socket), and the daemon restarts in place within this process: execv is
 * caught below, the old server is torn down with what an exec would close, the
 * descriptors an exec keeps are kept at their numbers, and a fresh server on a fresh
 * device model adopts the hand-over. The client's ledger spans both: every tag answered
 * once; and nothing the session held, no descriptor and no budget count may be lost. */
#include <dirent.h>
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
#include "conn.h"
#include "log.h"
#include "reset.h"
#include "resume.h"
#include "server.h"
#include "session-limits.h" /* SESSION_INPUT_BASE, for the budget check */
#include "session-private.h" /* the budget check reads what each session holds */
#include "sseq-frame.h"
#include "staging.h"

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

/* A client's end of its connection, and what it heard. */
struct fz_peer {
	int fd; /* our end of the socketpair, -1 once closed */
	bool closed; /* the daemon closed its end */
	uint8_t *rx;
	size_t rx_len, rx_cap;
	uint64_t rx_total;
	struct answers answers;
	uint64_t tag; /* the bystander's last */
};

struct fz {
	struct server_options opts;
	uint8_t cfg, fault_seed;
	uv_loop_t loop;
	struct server srv;
	struct cq cq;
	struct backend be;
	struct check_backend *cb;
	struct fuzz_sched sched;
	/* The fuzzed client; and in fuzz-resume a bystander, another session holding an
	 * arena, with a Sync before the reset and one after. */
	struct fz_peer c, by;
	/* fuzz-resume: where the device is lost (frame index, how much of that frame goes
	 * first, the stream seen failing first), whether the client reads before it, and
	 * whether it has happened. */
	size_t reset_frame;
	uint8_t reset_split, reset_stream;
	bool no_read, reset_done;
};

static char module_dir[256];
static bool log_on; /* SSEQ_FUZZ_LOG */
/* SSEQ_FUZZ_INJECT=early-free or sync-window=N brings back a legacy bug (seq_config), so a
 * run can show the checks catch it. */
static bool inject_early_free;
static unsigned inject_sync_window;
/* fuzz-resume: drop-output or input-large brings back a legacy hand-over bug in the new
 * process (the replies not yet written are lost; the adopted input is not counted as
 * large), to show the checks catch it. */
static bool inject_drop_output, inject_input_large;

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
	else if (inject && strcmp(inject, "drop-output") == 0)
		inject_drop_output = true;
	else if (inject && strcmp(inject, "input-large") == 0)
		inject_input_large = true;
	else if (inject)
		harness_fail("SSEQ_FUZZ_INJECT=%s: early-free, sync-window=N, drop-output or "
			     "input-large",
			inject);
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
	/* libuv opens what it keeps for the process's life at its first loop: before the
	 * runs count descriptors. */
	{
		uv_loop_t loop;

		uv_loop_init(&loop);
		uv_loop_close(&loop);
	}
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
static void fz_peer_read(struct fz_peer *f)
{
	while (f->fd >= 0 && !f->closed) {
		ssize_t n;

		if (f->rx_cap - f->rx_len < 65536) {
			f->rx_cap = f->rx_cap ? f->rx_cap * 2 : 131072;
			if (!(f->rx = realloc(f->rx, f->rx_cap)))
				harness_fail("out of memory");
		}
		n = recv(f->fd, f->rx + f->rx_len, f->rx_cap - f->rx_len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			f->closed = true;
			break;
		}
		f->rx_len += (size_t)n;
		f->rx_total += (uint64_t)n;
	}
	if (!f->rx)
		return; /* nothing ever came */
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

static void fz_check_budget(const struct fz *f, bool arenas);

/* A few loop turns: reads, sequencing, completions drained, replies written. */
static void fz_pump(struct fz *f)
{
	for (int i = 0; i < 2; i++) {
		uv_run(&f->loop, UV_RUN_NOWAIT);
		check_backend_loop_ran(f->cb);
	}
	if (!f->no_read)
		fz_peer_read(&f->c);
	fz_peer_read(&f->by);
	fz_check_budget(f, false);
}

/* Run the device until nothing more happens, as the fuzzer orders it. */
static void fz_settle(struct fz *f)
{
	unsigned quiet = 0;

	for (unsigned round = 0; quiet < 2; round++) {
		uint64_t commands = check_backend_commands(f->cb);
		uint64_t rx = f->c.rx_total + f->by.rx_total;
		uint64_t frames = f->srv.count[SSEQ_COUNTER_FRAMES_IN];
		unsigned sessions = f->srv.nsessions;
		bool moved = false;

		if (round == 100000)
			harness_fail("the server and device never settle");
		while (check_backend_step(f->cb, fuzz_sched_next(&f->sched)))
			moved = true;
		fz_pump(f);
		if (moved || commands != check_backend_commands(f->cb) ||
			rx != f->c.rx_total + f->by.rx_total ||
			frames != f->srv.count[SSEQ_COUNTER_FRAMES_IN] ||
			sessions != f->srv.nsessions)
			quiet = 0;
		else
			quiet++;
	}
}

static void fz_reset(struct fz *f);

static void fz_send(struct fz *f, const uint8_t *p, size_t n, const int *fds, unsigned nfds)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * SESSION_MAX_FDS)];
	} ctl;

	for (unsigned tries = 0; n && f->c.fd >= 0 && !f->c.closed; tries++) {
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
		r = sendmsg(f->c.fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN && f->no_read) {
			/* Both ways full: the moment for the device to go, with replies
			 * unwritten. */
			fz_reset(f);
			continue;
		}
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
		answers_give_up(&f->c.answers); /* the daemon refuses it and closes */
		return 0;
	}
	answers_expect(&f->c.answers, rq);
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

#ifdef FUZZ_RESUME
/* One request from the bystander (with a sealed memfd for a StagingRegister). */
static void fz_bystander_send(struct fz *f, Sseq__Request *rq)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	uint8_t frame[256];
	size_t len;
	struct iovec iov = {frame, 0};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	int fd = -1;

	rq->tag = ++f->by.tag;
	len = sseq__request__get_packed_size(rq);
	iov.iov_len = 4 + len;
	frame_put_len(frame, (uint32_t)len);
	sseq__request__pack(rq, frame + 4);
	answers_expect(&f->by.answers, rq);
	if (rq->body_case == SSEQ__REQUEST__BODY_STAGING_REGISTER) {
		struct cmsghdr *c;

		fd = memfd_create("fuzz-bystander", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd < 0 || ftruncate(fd, (off_t)rq->staging_register->size) < 0 ||
			fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)
			harness_fail("bystander memfd: %s", strerror(errno));
		memset(&ctl, 0, sizeof(ctl));
		msg.msg_control = ctl.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int));
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	if (sendmsg(f->by.fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)(4 + len))
		harness_fail("the bystander's request was not taken: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
}

static void fz_bystander_sync(struct fz *f)
{
	Sseq__Sync sync = SSEQ__SYNC__INIT;
	Sseq__Request rq = SSEQ__REQUEST__INIT;

	rq.body_case = SSEQ__REQUEST__BODY_SYNC;
	rq.sync = &sync;
	fz_bystander_send(f, &rq);
}

/* The bystander connects, says Hello, registers an arena and syncs. */
static void fz_bystander_start(struct fz *f, int fd)
{
	Sseq__Hello hello = SSEQ__HELLO__INIT;
	Sseq__StagingRegister reg = SSEQ__STAGING_REGISTER__INIT;
	Sseq__Request rq = SSEQ__REQUEST__INIT;

	f->by.fd = fd;
	hello.protocol_major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	hello.client_name = "bystander";
	hello.worker_id = "gw1";
	hello.pid = 2;
	rq.body_case = SSEQ__REQUEST__BODY_HELLO;
	rq.hello = &hello;
	fz_bystander_send(f, &rq);
	reg.size = 4096;
	reg.label = "bystander";
	rq = (Sseq__Request)SSEQ__REQUEST__INIT;
	rq.body_case = SSEQ__REQUEST__BODY_STAGING_REGISTER;
	rq.staging_register = &reg;
	fz_bystander_send(f, &rq);
	fz_bystander_sync(f);
}
#endif

/* The server and its device model on a fresh loop, with f->opts. */
static void fz_start(struct fz *f)
{
	struct seq_layout layout;

	uv_loop_init(&f->loop);
	cq_init(&f->cq);
	if (seq_layout_init(&layout, &f->opts.seq) < 0 ||
		check_backend_create(
			&f->be, &layout, &f->sched, f->cfg & CFG_FAULTS, f->fault_seed, &f->cq) < 0)
		harness_fail("check_backend_create");
	f->cb = check_backend_get(&f->be);
	if (server_init(&f->srv, &f->loop, &f->opts, &f->be, &f->cq) < 0)
		harness_fail("server_init");
}

/* With its sessions gone: everything given back, every handle closed. */
static void fz_stop(struct fz *f)
{
	const struct server_limit_counters *c = &f->srv.limit;
	const uint64_t input = f->srv.count[SSEQ_COUNTER_INPUT_BYTES];
	const uint64_t staging = f->srv.count[SSEQ_COUNTER_STAGING_BYTES];

	check_backend_settled(f->cb);
	if (f->srv.sessions)
		harness_fail("the session is still connected after its client left and the "
			     "device went idle");
	if (!server_idle(&f->srv))
		harness_fail("points were issued that never completed");
	if (input || c->input_large_bytes || c->arenas || staging)
		harness_fail("with every session gone the budget still counts %" PRIu64
			     " input bytes (%" PRIu64 " large), %" PRIu64 " arenas, %" PRIu64
			     " staging bytes",
			input, c->input_large_bytes, c->arenas, staging);
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
}

/* As conn.c counts it: what of an input buffer --max-input-memory bounds. */
static uint64_t fz_input_large(size_t cap)
{
	return cap > SESSION_INPUT_BASE ? cap - SESSION_INPUT_BASE : 0;
}

static void fz_slot_stagings(const struct session *s, uint64_t *n, uint64_t *bytes)
{
	uint32_t nslots;
	const struct handle_slot *slots = handles_picked(&s->handles, &nslots);

	*n = *bytes = 0;
	for (uint32_t i = 0; i < nslots; i++) {
		if (slots[i].kind != HANDLE_STAGING)
			continue;
		++*n;
		*bytes += ((const struct staging *)slots[i].obj)->size;
	}
}

/* The budget counts what the sessions hold: their input buffers always; their arenas
 * when `arenas` (no copy in flight keeps an unregistered one mapped, or one of a
 * session gone). */
static void fz_check_budget(const struct fz *f, bool arenas)
{
	const struct server_limit_counters *c = &f->srv.limit;
	uint64_t in = 0, large = 0, n = 0, bytes = 0;

	for (const struct session *s = f->srv.sessions; s; s = s->next) {
		uint64_t sn, sbytes;

		in += s->in.cap;
		large += fz_input_large(s->in.cap);
		n += s->counts.stagings;
		bytes += s->counts.staging_bytes;
		if (!arenas)
			continue;
		fz_slot_stagings(s, &sn, &sbytes);
		if (sn != s->counts.stagings || sbytes != s->counts.staging_bytes)
			harness_fail("session %" PRIu64 " counts %" PRIu64 " arenas of %" PRIu64
				     " bytes; its handles hold %" PRIu64 " of %" PRIu64,
				s->ident.id, s->counts.stagings, s->counts.staging_bytes, sn,
				sbytes);
	}
	if (in != f->srv.count[SSEQ_COUNTER_INPUT_BYTES] || large != c->input_large_bytes)
		harness_fail("input budget: %" PRIu64 " bytes (%" PRIu64
			     " large) counted, the sessions hold %" PRIu64 " (%" PRIu64 ")",
			f->srv.count[SSEQ_COUNTER_INPUT_BYTES], c->input_large_bytes, in, large);
	if (arenas && (n != c->arenas || bytes != f->srv.count[SSEQ_COUNTER_STAGING_BYTES]))
		harness_fail("staging budget: %" PRIu64 " arenas of %" PRIu64
			     " bytes counted, the sessions hold %" PRIu64 " of %" PRIu64,
			c->arenas, f->srv.count[SSEQ_COUNTER_STAGING_BYTES], n, bytes);
}

/* Descriptors open now, and whether each of the first 1024 survives an exec. */
static unsigned fz_fds(bool *kept, size_t nkept)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned n = 0;

	if (!d)
		harness_fail("/proc/self/fd: %s", strerror(errno));
	if (kept)
		memset(kept, 0, nkept * sizeof(*kept));
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name), flags;

		if (e->d_name[0] == '.' || fd == dirfd(d))
			continue;
		n++;
		flags = fcntl(fd, F_GETFD);
		if (kept && (size_t)fd < nkept && flags >= 0 && !(flags & FD_CLOEXEC))
			kept[fd] = true;
	}
	closedir(d);
	return n;
}

#ifdef FUZZ_RESUME
/* The exec of a restart in place, caught: what it would keep (every descriptor without
 * FD_CLOEXEC that was not so at the run's start) is copied aside, to be put back at the
 * same numbers once the old server is gone; the hand-over is named in the environment.
 * The exec then "fails": resume.c closes its copy of the hand-over and marks the old
 * server fatal, which is torn down without running another turn. */
#define FZ_FD_MAX 1024
static bool exec_armed, exec_called;
static int exec_record;
static bool fd_kept_at_start[FZ_FD_MAX];
static struct {
	int fd, copy;
} exec_fds[256];
static unsigned nexec_fds;

int execv(const char *path, char *const argv[])
{
	static bool kept[FZ_FD_MAX];
	const char *env = getenv("SSEQD_RESUME_FD");

	if (!exec_armed || !env)
		harness_fail("execv(%s) outside a restart in place", path);
	exec_armed = false;
	exec_called = true;
	exec_record = atoi(env);
	nexec_fds = 0;
	fz_fds(kept, FZ_FD_MAX);
	for (int fd = 3; fd < FZ_FD_MAX; fd++) {
		if (!kept[fd] || fd_kept_at_start[fd])
			continue;
		if (nexec_fds == sizeof(exec_fds) / sizeof(exec_fds[0]))
			harness_fail("more than %u descriptors kept across the exec", nexec_fds);
		exec_fds[nexec_fds].fd = fd;
		exec_fds[nexec_fds].copy = fcntl(fd, F_DUPFD_CLOEXEC, FZ_FD_MAX);
		if (exec_fds[nexec_fds++].copy < 0)
			harness_fail("F_DUPFD_CLOEXEC: %s", strerror(errno));
	}
	errno = ENOEXEC;
	return -1;
}

/* What a session held at the exec, to find again in the new process. */
struct fz_held {
	uint64_t id;
	bool hello, closing;
	unsigned nfds;
	uint32_t nslots, batch_resume;
	uint64_t stagings, staging_bytes;
	size_t in_len, out_len;
};

static struct fz_held fz_held_of(const struct session *s)
{
	struct fz_held h = {.id = s->ident.id,
		.hello = s->hello,
		.closing = s->closing,
		.nfds = s->in.nfds,
		.nslots = s->handles.nslots,
		.batch_resume = s->pause.batch_resume,
		.in_len = s->closing ? 0 : s->in.len,
		.out_len = out_pending(s)};

	fz_slot_stagings(s, &h.stagings, &h.staging_bytes);
	return h;
}

static void fz_check_adopted(const struct fz *f, const struct fz_held *held, unsigned nheld)
{
	unsigned n = 0;

	for (const struct session *s = f->srv.sessions; s; s = s->next) {
		const struct fz_held *o = NULL;
		struct fz_held now = fz_held_of(s);

		for (unsigned i = 0; i < nheld && !o; i++)
			if (held[i].id == s->ident.id)
				o = &held[i];
		if (!o)
			harness_fail("session %" PRIu64 " adopted, but none such was handed over",
				s->ident.id);
		n++;
		if (now.hello != o->hello || now.closing != o->closing)
			harness_fail("session %" PRIu64 ": Hello %d, closing %d after the restart, "
				     "%d and %d before",
				s->ident.id, now.hello, now.closing, o->hello, o->closing);
		if (now.nfds != o->nfds)
			harness_fail("session %" PRIu64 ": %u memfds ahead of their register "
				     "after the restart, %u before",
				s->ident.id, now.nfds, o->nfds);
		if (now.nslots != o->nslots || now.stagings != o->stagings ||
			now.staging_bytes != o->staging_bytes)
			harness_fail("session %" PRIu64 ": %u handles, %" PRIu64
				     " arenas of %" PRIu64 " bytes after the restart; %u, %" PRIu64
				     ", %" PRIu64 " before",
				s->ident.id, now.nslots, now.stagings, now.staging_bytes, o->nslots,
				o->stagings, o->staging_bytes);
		if (now.batch_resume != o->batch_resume)
			harness_fail("session %" PRIu64 ": its Batch resumes at request %u after "
				     "the restart, %u before",
				s->ident.id, now.batch_resume, o->batch_resume);
		if (now.in_len != o->in_len)
			harness_fail("session %" PRIu64 ": %zu unread input bytes after the "
				     "restart, %zu before",
				s->ident.id, now.in_len, o->in_len);
		if (now.out_len != o->out_len)
			harness_fail("session %" PRIu64 ": %zu unwritten output bytes after the "
				     "restart, %zu before",
				s->ident.id, now.out_len, o->out_len);
		if (s->counts.bytes || s->counts.buffers || s->counts.inflight)
			harness_fail("session %" PRIu64 ": %" PRIu64 " buffers of %" PRIu64
				     " bytes and %" PRIu64 " ops counted on a device it has "
				     "nothing on",
				s->ident.id, s->counts.buffers, s->counts.bytes,
				s->counts.inflight);
	}
	if (n != nheld)
		harness_fail("%u sessions handed over, %u adopted", nheld, n);
}

/* The device is lost and the daemon restarts in place, within this process. */
static void fz_reset(struct fz *f)
{
	struct fz_held held[16];
	unsigned nheld = 0;
	bool owns_socket;

	if (f->reset_done)
		return;
	f->reset_done = true;
	f->no_read = false;
	check_backend_lose(f->cb);
	exec_armed = true;
	exec_called = false;
	reset_device(&f->srv, f->reset_stream % seq_stream_count(f->srv.seq));
	exec_armed = false;
	if (!exec_called)
		harness_fail("a device reset with --device-reset exec did not restart in place");
	/* The exec's moment: what each session holds, to find in the new process. */
	for (const struct session *s = f->srv.sessions; s; s = s->next)
		if (s->connected && nheld < sizeof(held) / sizeof(held[0]))
			held[nheld++] = fz_held_of(s);
	for (unsigned i = 0; log_on && i < nheld; i++)
		fprintf(stderr,
			"fuzz-session: restart in place: session %" PRIu64
			" (Hello %d, closing %d, "
			"batch at %u) hands over %u memfds, %u handles (%" PRIu64
			" arenas), %zu input and %zu output bytes\n",
			held[i].id, held[i].hello, held[i].closing, held[i].batch_resume,
			held[i].nfds, held[i].nslots, held[i].stagings, held[i].in_len,
			held[i].out_len);
	/* The old process goes (its memory, and the descriptors marked close-on-exec) ... */
	while (f->srv.sessions)
		conn_close(f->srv.sessions);
	fz_stop(f);
	/* ... and the exec's survivors are where they were. */
	for (unsigned i = 0; i < nexec_fds; i++) {
		if (dup2(exec_fds[i].copy, exec_fds[i].fd) < 0)
			harness_fail("dup2: %s", strerror(errno));
		close(exec_fds[i].copy);
	}
	/* The new process, as main.c starts it. */
	if (resume_listen_fd(exec_record) != f->opts.listen_fd)
		harness_fail("the hand-over does not name the listening socket");
	fz_start(f);
	/* A new device that refuses an arena makes its handle lost, as documented; what is
	 * checked here is that nothing else goes missing. */
	check_backend_set_faults(f->cb, false);
	if (resume_adopt(&f->srv, exec_record, &owns_socket) < 0)
		harness_fail("the new server could not adopt every session");
	if (owns_socket)
		server_own_socket(&f->srv);
	for (struct session *s = f->srv.sessions; s; s = s->next) {
		if (inject_drop_output)
			s->out.off = s->out.len = 0;
		if (inject_input_large)
			f->srv.limit.input_large_bytes -= fz_input_large(s->in.cap);
	}
	for (unsigned i = 0; i < nexec_fds; i++) {
		int flags = fcntl(exec_fds[i].fd, F_GETFD);

		/* The listening socket is main.c's; the hand-over is read and closed. */
		if (exec_fds[i].fd == f->opts.listen_fd || exec_fds[i].fd == exec_record)
			continue;
		if (flags < 0)
			harness_fail("descriptor %d kept across the exec was closed by the "
				     "adoption (a memfd or connection lost)",
				exec_fds[i].fd);
		if (!(flags & FD_CLOEXEC))
			harness_fail("descriptor %d kept across the exec was not taken over",
				exec_fds[i].fd);
	}
	fz_check_adopted(f, held, nheld);
	fz_check_budget(f, true);
	fz_bystander_sync(f);
	check_backend_set_faults(f->cb, f->cfg & CFG_FAULTS);
}
#else
static void fz_reset(struct fz *f)
{
}
#endif

static void fz_run(struct fz *f, const uint8_t *data, size_t size)
{
	int listen_pipe[2], sv[2];
	const uint8_t cfg = f->cfg;
	size_t off = 0, frame = 0;

	f->opts = (struct server_options){
		.socket_path = "fuzz",
		.module_dir = module_dir,
		.seq = {.n_compute = cfg & CFG_LANES ? 3 : 1,
			.n_h2d = cfg & CFG_LANES ? 2 : 1,
			.n_d2h = cfg & CFG_TWO_D2H ? 2 : 1,
			.n_d2d = cfg & CFG_TWO_D2D ? 2 : 1,
			.window = 2 + (cfg & CFG_WINDOW),
			.legacy_sync_window = inject_sync_window,
			.legacy_early_free = inject_early_free},
#ifdef FUZZ_RESUME
		/* The reset restarts in place at once (the model cannot be built again). */
		.reset_exec = true,
		.argv = (char *const[]){"sseqd", NULL},
#endif
	};
#ifdef SERVER_LIMITS_DEFAULT
	f->opts.limits = (struct server_limits)SERVER_LIMITS_DEFAULT;
	f->opts.account = (struct account_limits)ACCOUNT_LIMITS_DEFAULT;
	/* Timeouts would make a run depend on how fast the machine went. */
	f->opts.limits.hello_timeout_ms = 0;
	f->opts.limits.frame_timeout_ms = 0;
#endif
	/* Nothing connects: the server's listening poll watches a pipe nobody writes. */
	if (pipe2(listen_pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		harness_fail("pipe/socketpair: %s", strerror(errno));
	/* A client that does not read fills a small socket soon: replies stay unwritten. */
	if (f->no_read && setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &(int){4096}, sizeof(int)) < 0)
		harness_fail("SO_SNDBUF: %s", strerror(errno));
	f->opts.listen_fd = listen_pipe[0];
	fz_start(f);
	if (!conn_accept(&f->srv, sv[0]))
		harness_fail("conn_accept");
	f->c.fd = sv[1];
#ifdef FUZZ_RESUME
	int by[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, by) < 0 ||
		!conn_accept(&f->srv, by[0]))
		harness_fail("the bystander's connection: %s", strerror(errno));
	fz_bystander_start(f, by[1]);
	fz_pump(f);
#endif

	while (size - off >= 4) {
		const uint8_t *p = data + off;
		uint32_t len = frame_get_len(p);
		int fds[SESSION_MAX_FDS];
		unsigned nfds;

		if (len > size - off - 4)
			break; /* the rest goes as it is: a torn or oversized frame */
		nfds = fz_inspect(f, p + 4, len, fds);
		if (frame++ == f->reset_frame && !f->reset_done) {
			/* The device goes with this much of the frame read (its memfds
			 * ride with the first byte). */
			size_t first = (4 + (size_t)len) * (f->reset_split & 63) / 64;

			if (first) {
				fz_send(f, p, first, fds, nfds);
				fz_pump(f);
			}
			fz_reset(f);
			fz_send(f, p + first, 4 + (size_t)len - first, first ? NULL : fds,
				first ? 0 : nfds);
		} else {
			fz_send(f, p, 4 + (size_t)len, fds, nfds);
		}
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
#ifdef FUZZ_RESUME
	/* Past the last frame: the device goes now. */
	fz_reset(f);
	fz_pump(f);
#endif

	if (!(cfg & CFG_KILL)) {
		fz_settle(f);
		/* Everything sent has run: every promise to the client is due now. */
		if (!f->c.closed)
			answers_check(&f->c.answers);
		fz_check_budget(f, true);
	}
	close(f->c.fd);
	f->c.fd = -1;
	/* Teardown must finish whatever the device does, so it no longer fails things. */
	check_backend_set_faults(f->cb, false);
	fz_settle(f);
	if (f->by.fd >= 0) {
		/* Whatever the client did, the bystander heard every answer once. */
		if (f->by.closed)
			harness_fail("the bystander's connection was closed");
		answers_check(&f->by.answers);
		close(f->by.fd);
		f->by.fd = -1;
		fz_settle(f);
	}

	if (getenv("SSEQ_FUZZ_LOG"))
		fprintf(stderr,
			"fuzz-session: %" PRIu64 " device commands, %" PRIu64 " frames in, %" PRIu64
			" reply bytes\n",
			check_backend_commands(f->cb), f->srv.count[SSEQ_COUNTER_FRAMES_IN],
			f->c.rx_total);
	fz_stop(f);
	close(listen_pipe[0]);
	close(listen_pipe[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The server is large (its trace ring): one instance, reset by server_init. */
	static struct fz f;
	size_t head, nsched;
	unsigned fds;

#ifdef FUZZ_RESUME
	/* fuzz-resume's own bytes first: the frame the device goes at, how much of it is
	 * sent first (of 64), and the stream seen failing first with, in bit 0, a client
	 * that reads nothing until then. */
	f.reset_frame = size > 0 ? data[0] : 0;
	f.reset_split = size > 1 ? data[1] : 0;
	f.reset_stream = size > 2 ? data[2] >> 1 : 0;
	f.no_read = size > 2 && (data[2] & 1);
	f.reset_done = false;
	head = size < 3 ? size : 3;
	data += head;
	size -= head;
	fds = fz_fds(fd_kept_at_start, FZ_FD_MAX);
#else
	fds = fz_fds(NULL, 0);
#endif
	f.cfg = size > 0 ? data[0] : 0;
	f.fault_seed = size > 1 ? data[1] : 0;
	head = size < 3 ? size : 3;
	nsched = size > 2 ? data[2] : 0;
	if (nsched > size - head)
		nsched = size - head;
	f.sched = (struct fuzz_sched){.p = data + head, .n = nsched};
	f.c = f.by = (struct fz_peer){.fd = -1};
	answers_init(&f.c.answers);
	answers_init(&f.by.answers);
	fz_run(&f, data + head + nsched, size - head - nsched);
	answers_finish(&f.c.answers);
	answers_finish(&f.by.answers);
	free(f.c.rx);
	free(f.by.rx);
	if (fz_fds(NULL, 0) != fds)
		harness_fail("%u descriptors open after the run, %u before", fz_fds(NULL, 0), fds);
	return 0;
}
