/* A session's hand-over across a restart in place (resume.c): the record of who the client
 * is and whether it has said Hello (a connection that has not keeps its Hello deadline), its
 * lanes, its unread input with the progress of a Batch held back and the bytes read from its
 * socket, its request ring (in an arena that survives: the new process reads on from where
 * the old one stopped), the memfds received ahead of their StagingRegister, the replies and
 * completions not yet written (the new process writes them first: every tag is answered once), and
 * its handle table, in which staging arenas survive (their memfds are kept and mapped again) while
 * buffers, slices and modules become HANDLE_LOST, so that each use says which reset lost it; the
 * handles the client named likewise (a refused name stays refused, with its message). Per session:
 * a fixed part, its slots, its named handles in use, its unread input bytes and its unwritten
 * output bytes. Written and read by the same binary. */
#include "session-handover.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conn.h"
#include "handles.h"
#include "log.h"
#include "out.h"
#include "pause.h"
#include "ring.h"
#include "session-private.h"
#include "staging.h"

struct handover_session {
	int32_t fd;
	uint32_t pid, uid;
	uint64_t id;
	char name[64], worker[32];
	uint32_t nlanes, lanes[SESSION_MAX_LANES];
	uint32_t nslots;
	uint32_t nnamed; /* records of client-named handles in use */
	uint32_t isolated;
	uint32_t hello; /* 0: not yet; its deadline counts from hello_age_ns ago */
	uint32_t closing; /* answered its last: closed once the output is written */
	uint64_t hello_age_ns;
	uint32_t batch_resume; /* the first frame is a Batch this many requests in */
	uint32_t nfds;
	int32_t fds[SESSION_MAX_FDS]; /* memfds ahead of their StagingRegister, in order */
	/* A TRACE follow goes on under its tag, from the new process's first entry. */
	uint32_t following;
	uint64_t follow_tag, follow_dropped;
	uint64_t in_len, out_len;
	/* The bytes read from its socket, and its request ring (ring_size 0: none), which the
	 * new process finds in the arena ring_staging names and reads on from ring_head. */
	uint64_t sock_read;
	uint64_t ring_staging, ring_offset, ring_size, ring_head;
};

struct handover_slot {
	uint32_t kind, gen;
	/* HANDLE_STAGING: */
	int32_t fd;
	uint64_t size;
	char label[48];
};

/* A client-named handle in use: lost (a buffer or slice), or refused with its message. */
struct handover_named {
	uint32_t index; /* the name's index - 1 */
	uint32_t kind, gen;
	char message[HANDLES_REFUSED_MAX];
};
bool session_handover_put(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w <= 0)
			return false;
		c += w;
		n -= (size_t)w;
	}
	return true;
}

bool session_handover_get(int fd, void *p, size_t n)
{
	char *c = p;

	while (n) {
		ssize_t r = read(fd, c, n);

		if (r <= 0)
			return false;
		c += r;
		n -= (size_t)r;
	}
	return true;
}

void session_handover_keep(int fd)
{
	fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) & ~FD_CLOEXEC);
}

/* Taken over: a later exec keeps it only if it is handed over again. */
static void close_on_exec(int fd)
{
	fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC);
}
bool session_handover_write(int out, struct session *s)
{
	const uint64_t now = server_now_ns();
	uint32_t nslots, nnamed;
	const struct handle_slot *slots = handles_picked(&s->handles, &nslots);
	const struct handle_slot *named = handles_named(&s->handles, &nnamed);
	const uint64_t accepted_ns = conn_accepted_ns(s);
	unsigned nfds;
	const int *fds = conn_fds_held(s, &nfds);
	size_t in_len;
	const uint8_t *unread = conn_input_unread(s, &in_len);
	const struct session_ring *ring = ring_get(s);
	struct handover_session rs = {.fd = s->fd,
		.pid = s->ident.pid,
		.uid = s->ident.uid,
		.id = s->ident.id,
		.nlanes = s->nlanes,
		.nslots = nslots,
		.isolated = s->work.isolated,
		.hello = s->hello,
		.closing = s->closing,
		.hello_age_ns = now > accepted_ns ? now - accepted_ns : 0,
		.batch_resume = s->pause.batch_resume,
		.nfds = nfds,
		.following = s->follow.following,
		.follow_tag = s->follow.tag,
		.follow_dropped = s->follow.dropped,
		/* A closing session's input is dropped: it will not be read. */
		.in_len = s->closing ? 0 : in_len,
		.out_len = out_pending(s),
		.sock_read = conn_sock_read(s)};

	if (ring) {
		rs.ring_staging = ring->staging;
		rs.ring_offset = ring->offset;
		rs.ring_size = ring->size;
		rs.ring_head = ring->head;
	}
	memcpy(rs.name, s->ident.name, sizeof(rs.name));
	memcpy(rs.worker, s->ident.worker, sizeof(rs.worker));
	memcpy(rs.lanes, s->lanes, sizeof(rs.lanes));
	session_handover_keep(s->fd);
	for (unsigned i = 0; i < nfds; i++) {
		rs.fds[i] = fds[i];
		session_handover_keep(fds[i]);
	}
	for (uint32_t i = 0; i < nnamed; i++)
		rs.nnamed += named[i].kind != HANDLE_FREE;
	if (!session_handover_put(out, &rs, sizeof(rs)))
		return false;
	for (uint32_t i = 0; i < nslots; i++) {
		const struct handle_slot *sl = &slots[i];
		struct handover_slot r = {.kind = HANDLE_LOST, .gen = sl->gen, .fd = -1};

		if (sl->kind == HANDLE_FREE) {
			r.kind = HANDLE_FREE;
		} else if (sl->kind == HANDLE_STAGING) {
			const struct staging *st = sl->obj;

			r.kind = HANDLE_STAGING;
			r.fd = st->fd;
			r.size = st->size;
			memcpy(r.label, st->label, sizeof(r.label));
			session_handover_keep(st->fd);
		}
		if (!session_handover_put(out, &r, sizeof(r)))
			return false;
	}
	for (uint32_t i = 0; i < nnamed; i++) {
		const struct handle_slot *sl = &named[i];
		struct handover_named r = {.index = i, .kind = HANDLE_LOST, .gen = sl->gen};

		if (sl->kind == HANDLE_FREE)
			continue;
		if (sl->kind == HANDLE_REFUSED) {
			r.kind = HANDLE_REFUSED;
			snprintf(r.message, sizeof(r.message), "%s", (const char *)sl->obj);
		}
		if (!session_handover_put(out, &r, sizeof(r)))
			return false;
	}
	return session_handover_put(out, unread, rs.in_len) &&
		(!rs.out_len || session_handover_put(out, out_unwritten(s), rs.out_len));
}
static int adopt_staging(struct session *s, const struct handover_slot *r, struct staging **out)
{
	void *addr = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	struct staging *st;

	if (addr == MAP_FAILED)
		return -ENOMEM;
	close_on_exec(r->fd);
	st = calloc(1, sizeof(*st));
	if (!st || backend_staging_register(&s->srv->backend, addr, r->size) < 0) {
		free(st);
		munmap(addr, r->size);
		return -ENOMEM;
	}
	*st = (struct staging){.owner = s, .fd = r->fd, .addr = addr, .size = r->size, .refs = 1};
	/* Counted as StagingRegister counts it: the session's, its uid's and the total. */
	if (staging_charge_adopted(s, st) < 0) {
		backend_staging_unregister(&s->srv->backend, addr, r->size);
		free(st);
		munmap(addr, r->size);
		return -ENOMEM;
	}
	memcpy(st->label, r->label, sizeof(st->label));
	st->label[sizeof(st->label) - 1] = '\0';
	*out = st;
	return 0;
}

/* n bytes of the hand-over read past: false if it ends first. */
static bool skip(int in, uint64_t n)
{
	return n <= INT64_MAX && lseek(in, (off_t)n, SEEK_CUR) >= 0;
}

/* n slot records read past, their arenas' memfds closed: false if the hand-over ends. */
static bool skip_slots(int in, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		struct handover_slot r;

		if (!session_handover_get(in, &r, sizeof(r)))
			return false;
		if (r.kind == HANDLE_STAGING)
			close(r.fd);
	}
	return true;
}

/* n named records read past: false if the hand-over ends. */
static bool skip_named(int in, uint32_t n)
{
	return skip(in, (uint64_t)n * sizeof(struct handover_named));
}

/* One session's client-named handles: lost ones lost again, refused ones refused again (a
 * record that could not have been written is left out). -ENOMEM with the records read
 * past, -EIO if the hand-over ends. */
static int adopt_named(int in, struct session *s, uint32_t n)
{
	const uint32_t max = handles_name_max(s->srv->opts.account.client_handles);

	for (uint32_t i = 0; i < n; i++) {
		struct handover_named r;
		uint64_t name;
		int err;

		if (!session_handover_get(in, &r, sizeof(r)))
			return -EIO;
		if (r.index >= max || r.gen > HANDLES_NAMED_GEN_MAX)
			continue;
		name = handles_name(r.index, r.gen);
		r.message[sizeof(r.message) - 1] = '\0';
		if (r.kind == HANDLE_LOST)
			err = handles_claim(&s->handles, HANDLE_LOST, NULL, name, max);
		else if (r.kind == HANDLE_REFUSED)
			err = handles_refuse(&s->handles, name, max, r.message);
		else
			continue;
		if (err == -ENOMEM)
			return skip_named(in, n - i - 1) ? -ENOMEM : -EIO;
	}
	return 0;
}

/* One session's slots, as they were: arenas mapped again, everything else lost. -ENOMEM
 * with the records read past (and their memfds closed), -EIO if the hand-over ends. */
static int adopt_slots(int in, struct session *s, uint32_t nslots)
{
	if (handles_adopt(&s->handles, nslots) < 0)
		return skip_slots(in, nslots) ? -ENOMEM : -EIO;
	for (uint32_t i = 0; i < nslots; i++) {
		enum handle_kind kind;
		struct staging *st = NULL;
		struct handover_slot r;
		uint64_t h;

		if (!session_handover_get(in, &r, sizeof(r)))
			return -EIO;
		kind = (enum handle_kind)r.kind;
		if (kind == HANDLE_STAGING && adopt_staging(s, &r, &st) < 0) {
			close(r.fd);
			kind = HANDLE_LOST; /* could not map it again: say so */
		}
		h = handles_adopt_slot(&s->handles, i, kind, r.gen, st);
		if (st)
			st->handle = h;
	}
	return 0;
}

/* A session that could not be taken over: told so under tag 0, then closed once that is
 * written; its requests fail with the connection (every tag is answered). */
static void adopt_failed(struct session *s, int err)
{
	char msg[160];

	log_about(LOG_LVL_ERR, "reset", SESSION_WHO(s),
		"client %" PRIu64 " (pid %u) could not be taken over by the restart in place: "
		"%s; closing it",
		s->ident.id, s->ident.pid, strerror(-err));
	snprintf(msg, sizeof(msg),
		"sseqd restarted in place after a device reset and could not take this "
		"session over (%s): reconnect",
		strerror(-err));
	s->closing = true;
	out_reply(s, 0, SSEQ__STATUS__STATUS_DEVICE_ERROR, msg);
	out_mark_dirty(s);
}

/* One session's record: 0 when it is taken over; -ENOMEM (or another error) when it is
 * not but its record was read to its end, so the next one can be; -EIO when the
 * hand-over ends within it. */
int session_handover_adopt(int in, struct server *srv)
{
	const uint64_t now = server_loop_ns(srv);
	struct handover_session rs;
	struct session *s;
	uint8_t *bytes = NULL;
	int r;

	if (!session_handover_get(in, &rs, sizeof(rs)))
		return -EIO;
	close_on_exec(rs.fd);
	for (uint32_t i = 0; i < rs.nfds && i < SESSION_MAX_FDS; i++)
		close_on_exec(rs.fds[i]);
	s = conn_accept(srv, rs.fd);
	if (!s) {
		/* No session to say it in: the connection closes, as do its memfds. */
		log_err("reset",
			"client %" PRIu64 " (pid %u) could not be taken over by the restart in "
			"place: out of memory; closing it",
			rs.id, rs.pid);
		close(rs.fd);
		for (uint32_t i = 0; i < rs.nfds && i < SESSION_MAX_FDS; i++)
			close(rs.fds[i]);
		return skip_slots(in, rs.nslots) && skip_named(in, rs.nnamed) &&
				skip(in, rs.in_len) && skip(in, rs.out_len)
			? -ENOMEM
			: -EIO;
	}
	s->ident.id = rs.id;
	s->ident.pid = rs.pid;
	s->ident.uid = rs.uid;
	loops_join(srv->loops, srv->loop_index, rs.uid);
	session_admitted(s);
	s->hello = rs.hello != 0;
	s->closing = rs.closing != 0;
	s->work.isolated = rs.isolated != 0;
	s->pause.batch_resume = rs.batch_resume;
	memcpy(s->ident.name, rs.name, sizeof(s->ident.name));
	memcpy(s->ident.worker, rs.worker, sizeof(s->ident.worker));
	s->nlanes = rs.nlanes <= SESSION_MAX_LANES ? rs.nlanes : SESSION_MAX_LANES;
	memcpy(s->lanes, rs.lanes, sizeof(s->lanes));
	if (rs.following && !s->closing) {
		s->follow.following = true;
		s->follow.tag = rs.follow_tag;
		s->follow.dropped = rs.follow_dropped;
		srv->nfollowing++;
	}
	/* Its Hello deadline runs on from when the first process accepted it. */
	conn_adopt(s, now > rs.hello_age_ns ? now - rs.hello_age_ns : 0, rs.fds, rs.nfds);
	r = adopt_slots(in, s, rs.nslots);
	if (r == 0)
		r = adopt_named(in, s, rs.nnamed);
	else if (r == -ENOMEM && !skip_named(in, rs.nnamed))
		r = -EIO;
	/* Its unread input is taken only with the rest: a session closed runs none of it. */
	if (r == 0 && rs.in_len) {
		if (!(bytes = malloc(rs.in_len)))
			r = skip(in, rs.in_len) ? -ENOMEM : -EIO;
		else if (!session_handover_get(in, bytes, rs.in_len))
			r = -EIO;
	} else if (r == -ENOMEM && !skip(in, rs.in_len)) {
		r = -EIO;
	}
	if (r == 0 && rs.out_len) {
		/* Before anything the new process answers: the client reads them in order. */
		uint8_t *room = out_adopt(s, rs.out_len);

		if (!room)
			r = skip(in, rs.out_len) ? -ENOMEM : -EIO;
		else if (!session_handover_get(in, room, rs.out_len))
			r = -EIO;
		else
			out_adopted(s, rs.out_len);
	} else if (r == -ENOMEM && !skip(in, rs.out_len)) {
		r = -EIO;
	}
	if (r < 0) {
		free(bytes);
		adopt_failed(s, r);
		return r;
	}
	conn_sock_read_adopt(s, rs.sock_read);
	if (bytes) {
		conn_input_adopt(s, bytes, rs.in_len);
		pause_set(s, PAUSE_TURN); /* its buffered frames run at the first turn */
	}
	if (rs.ring_size) {
		/* Its arena came across with the slots (checked when the ring was named). What
		 * the client wrote to it meanwhile is taken at the first turn: it saw the old
		 * process awake, and rang no doorbell. */
		const struct staging *st =
			handles_lookup(&s->handles, rs.ring_staging, HANDLE_STAGING);

		if (st) {
			ring_attach(s, (void *)((uint8_t *)st->addr + rs.ring_offset), rs.ring_size,
				rs.ring_staging, rs.ring_offset, rs.ring_head);
			pause_set(s, PAUSE_TURN);
		}
	}
	if (out_pending(s) || s->closing)
		out_mark_dirty(s); /* written, or closed, at the first turn */
	return 0;
}
