/* A scripted fake sseqd for libsseq's suites: a thread on the other end of a socketpair
 * that answers Hello, Alloc, StagingRegister, copies, executes and Sync, mapping the
 * staging memfds itself, failing or holding back what the test asks it to. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "done-word.h"
#include <sys/socket.h>
#include <unistd.h>

#include "test-client-fake.h"
#include "test-client.h"

unsigned fake_requests(struct fake *f)
{
	return __atomic_load_n(&f->requests, __ATOMIC_SEQ_CST);
}

bool fake_wait_for(unsigned *counter, unsigned n)
{
	for (int i = 0; i < 3000; i++) {
		if (__atomic_load_n(counter, __ATOMIC_SEQ_CST) >= n)
			return true;
		usleep(1000);
	}
	return false;
}

static void fake_send(struct fake *f, Sseq__Message *m)
{
	frame_writer_add(&f->w, &m->base, -1);
	while (frame_writer_send(&f->w, f->sock) == -EAGAIN)
		usleep(100);
}

static void fake_reply(
	struct fake *f, uint64_t tag, int status, uint64_t handle, Sseq__Welcome *welcome)
{
	Sseq__Reply rep = SSEQ__REPLY__INIT;
	rep.tag = tag;
	rep.status = (Sseq__Status)status;
	rep.message = status ? "scripted failure" : "";
	rep.handle = handle;
	rep.welcome = welcome;
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	m.body_case = SSEQ__MESSAGE__BODY_REPLY;
	m.reply = &rep;
	fake_send(f, &m);
}

static void fake_complete(struct fake *f, uint64_t tag, int status)
{
	Sseq__Completion c = SSEQ__COMPLETION__INIT;
	c.tag = tag;
	c.status = (Sseq__Status)status;
	c.message = status ? "scripted late failure" : "";
	Sseq__Message m = SSEQ__MESSAGE__INIT;
	m.body_case = SSEQ__MESSAGE__BODY_COMPLETION;
	m.completion = &c;
	fake_send(f, &m);
}

/* CopyD2H.done_word (and, from minor 13, Await.done_word: no copy range, c NULL) as
 * sseqd writes it (done-word.h): the tag, by compare-and-swap from 0 or, from minor 12,
 * from the sleeping mark, whose sleeper it wakes; from minor 12 a word it cannot write
 * is refused before the Completion goes. */
static bool fake_write_word(
	struct fake *f, uint64_t staging, uint64_t done_word, const Sseq__CopyD2H *c, uint64_t tag)
{
	_Atomic uint64_t *w = (_Atomic uint64_t *)(void *)(f->staging[staging - 1] + done_word - 1);
	uint64_t zero = 0;

	ck_assert_uint_eq((done_word - 1) % 8, 0);
	ck_assert_uint_le(done_word - 1 + 8, f->staging_size[staging - 1]);
	ck_assert(!c || done_word - 1 + 8 <= c->staging_offset ||
		c->staging_offset + c->length <= done_word - 1);

	if (f->minor >= 12) {
		const bool was_asleep = atomic_load(w) == DONE_WORD_SLEEPING;

		if (done_word_write(w, tag)) {
			__atomic_add_fetch(&f->words_written, 1, __ATOMIC_SEQ_CST);
			__atomic_add_fetch(&f->words_woken, was_asleep, __ATOMIC_SEQ_CST);
			return true;
		}
		done_word_refuse(w); /* the Completion follows */
		__atomic_add_fetch(&f->words_refused, 1, __ATOMIC_SEQ_CST);
		return false;
	}

	if (atomic_compare_exchange_strong(w, &zero, tag)) {
		__atomic_add_fetch(&f->words_written, 1, __ATOMIC_SEQ_CST);
		return true;
	}
	__atomic_add_fetch(&f->words_refused, 1, __ATOMIC_SEQ_CST);
	return false;
}

static void fake_maybe_complete(struct fake *f, uint64_t tag, int status)
{
	if (f->hold_completions && f->nheld < 256) {
		f->held[f->nheld] = tag;
		f->held_status[f->nheld++] = status;
	} else {
		fake_complete(f, tag, status);
	}
}

static uint8_t *fake_buf(struct fake *f, uint64_t h)
{
	if (h & 0x80000000u) {
		/* A client-named handle: the latest buffer of that name. */
		for (unsigned i = f->nhandles; i-- > 0;)
			if (f->name[i] == h)
				return f->buf[i];
		ck_abort_msg("no buffer named %#llx", (unsigned long long)h);
	}
	ck_assert_uint_eq(h >> 32, f->handle_gen);
	h &= 0xffffffffu;
	ck_assert(h >= 1 && h <= f->nhandles);
	return f->buf[h - 1];
}

static void fake_handle(struct fake *f, Sseq__Request *q)
{
	int late = q->tag == f->fail_late_tag ? SSEQ__STATUS__STATUS_DEVICE_ERROR : 0;
	bool want = q->want_completion;
	__atomic_fetch_add(&f->requests, 1, __ATOMIC_SEQ_CST);
	if (q->tag == f->fail_reply_tag ||
		(q->body_case == SSEQ__REQUEST__BODY_ALLOC && f->fail_alloc_size &&
			q->alloc->size == f->fail_alloc_size)) {
		fake_reply(f, q->tag, SSEQ__STATUS__STATUS_UNKNOWN_HANDLE, 0, NULL);
		return;
	}
	switch (q->body_case) {
	case SSEQ__REQUEST__BODY_HELLO: {
		Sseq__DeviceInfo d = SSEQ__DEVICE_INFO__INIT;
		d.name = "fake";
		d.backend = "sim";
		d.memory_total = 1 << 30;
		Sseq__Welcome w = SSEQ__WELCOME__INIT;
		w.protocol_major = f->major;
		w.protocol_minor = f->minor;
		w.session = f->session ? f->session : 42;
		w.device = &d;
		w.daemon_version = "test";
		/* Lane k is stream 5 + 4k: ids that are not indexes. */
		uint32_t lanes[16];
		f->hello_lanes = q->hello->lanes;
		w.n_lanes = f->old_daemon ? 0 : q->hello->lanes ? q->hello->lanes : 1;
		for (size_t k = 0; k < w.n_lanes && k < 16; k++)
			lanes[k] = 5 + 4 * (uint32_t)k;
		w.lanes = lanes;
		ck_assert_uint_eq(q->hello->protocol_major, SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR);
		ck_assert_str_eq(q->hello->worker_id, "gw7");
		fake_reply(f, q->tag, 0, 0, &w);
		return;
	}
	case SSEQ__REQUEST__BODY_STAGING_REGISTER: {
		/* Descriptors are taken in arrival order, one per StagingRegister. */
		ck_assert_uint_gt(f->nfds, 0);
		int fd = f->fds[0];
		memmove(&f->fds[0], &f->fds[1], --f->nfds * sizeof(int));
		ck_assert(fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK);
		uint64_t size = q->staging_register->size;
		void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		ck_assert(p != MAP_FAILED);
		close(fd);
		f->staging[f->nstaging] = p;
		f->staging_size[f->nstaging++] = size;
		f->registers++;
		fake_reply(f, q->tag, 0, f->nstaging, NULL);
		return;
	}
	case SSEQ__REQUEST__BODY_ALLOC:
		ck_assert_uint_lt(f->nhandles, FAKE_MAX_HANDLES);
		/* Only a daemon that said it takes them is sent names. */
		ck_assert(q->alloc->handle == 0 || f->minor >= 9);
		f->buf[f->nhandles] = calloc(1, q->alloc->size);
		f->name[f->nhandles] = q->alloc->handle;
		f->named_allocs += q->alloc->handle != 0;
		f->size[f->nhandles++] = q->alloc->size;
		fake_reply(f, q->tag, 0,
			q->alloc->handle ? q->alloc->handle
					 : (uint64_t)f->handle_gen << 32 | f->nhandles,
			NULL);
		return;
	case SSEQ__REQUEST__BODY_FREE:
		f->frees++;
		fake_reply(f, q->tag, 0, 0, NULL);
		return;
	case SSEQ__REQUEST__BODY_COPY_H2D: {
		const Sseq__CopyH2D *c = q->copy_h2d;
		f->copy_lane = c->lane;
		ck_assert_uint_le(c->staging_offset + c->length, f->staging_size[c->staging - 1]);
		memcpy(fake_buf(f, c->dst) + c->dst_offset,
			f->staging[c->staging - 1] + c->staging_offset, c->length);
		fake_reply(f, q->tag, 0, 0, NULL);
		if (want || late)
			fake_maybe_complete(f, q->tag, late);
		return;
	}
	case SSEQ__REQUEST__BODY_COPY_D2H: {
		const Sseq__CopyD2H *c = q->copy_d2h;
		bool written = false;
		f->copy_lane = c->lane;
		f->last_done_word = c->done_word;
		memcpy(f->staging[c->staging - 1] + c->staging_offset,
			fake_buf(f, c->src) + c->src_offset, c->length);
		if (c->done_word && !late && !f->word_delay_ms)
			written = fake_write_word(f, c->staging, c->done_word, c, q->tag);
		fake_reply(f, q->tag, 0, 0, NULL);
		if (c->done_word && !late && f->word_delay_ms) {
			usleep(f->word_delay_ms * 1000u);
			written = fake_write_word(f, c->staging, c->done_word, c, q->tag);
		}
		if (!written)
			fake_maybe_complete(f, q->tag, late);
		return;
	}
	case SSEQ__REQUEST__BODY_AWAIT: {
		const Sseq__Await *aw = q->await;
		bool written = false;
		/* Only a daemon that said it takes them is sent words. */
		ck_assert(aw->done_word == 0 || f->minor >= 13);
		f->last_await_word = aw->done_word;
		fake_reply(f, q->tag, 0, 0, NULL);
		if (aw->done_word && !late) {
			usleep(f->word_delay_ms * 1000u);
			written = fake_write_word(f, aw->staging, aw->done_word, NULL, q->tag);
		}
		if (!written) /* as sseqd: an Await always gets its answer */
			fake_maybe_complete(f, q->tag, late);
		return;
	}
	case SSEQ__REQUEST__BODY_SYNC: {
		fake_reply(f, q->tag, 0, 0, NULL);
		fake_complete(f, q->tag, 0);
		/* Completions in any order, even after the Sync's own. */
		while (f->nheld > 0) {
			f->nheld--;
			fake_complete(f, f->held[f->nheld], f->held_status[f->nheld]);
		}
		return;
	}
	default:
		if (q->body_case == SSEQ__REQUEST__BODY_EXECUTE && !want &&
			__atomic_load_n(&f->hold_replies, __ATOMIC_SEQ_CST)) {
			ck_assert_uint_lt(f->nheld_replies, 64);
			f->held_replies[f->nheld_replies++] = q->tag;
			return;
		}
		if (q->body_case == SSEQ__REQUEST__BODY_EXECUTE)
			f->exec_lane = q->execute->lane;
		if (q->body_case == SSEQ__REQUEST__BODY_COPY_D2D)
			f->copy_lane = q->copy_d2d->lane;
		fake_reply(f, q->tag, 0, 0, NULL);
		if (want || late)
			fake_maybe_complete(f, q->tag, late);
		return;
	}
}

/* A byte on the release pipe: answer the executes held back. */
static void fake_release(struct fake *f)
{
	char c;
	ck_assert_int_eq(read(f->release[0], &c, 1), 1);
	for (unsigned i = 0; i < f->nheld_replies; i++)
		fake_reply(f, f->held_replies[i], 0, 0, NULL);
	__atomic_fetch_add(&f->released, f->nheld_replies, __ATOMIC_SEQ_CST);
	f->nheld_replies = 0;
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	struct frame_reader r;
	frame_reader_init(&r);
	frame_writer_init(&f->w);
	for (;;) {
		const uint8_t *fr;
		size_t len;
		int k = frame_reader_next(&r, &fr, &len);
		if (k == 1) {
			Sseq__Request *q = sseq__request__unpack(NULL, len, fr);
			ck_assert_ptr_nonnull(q);
			fake_handle(f, q);
			sseq__request__free_unpacked(q, NULL);
			continue;
		}
		if (f->release[0] >= 0) {
			struct pollfd p[2] = {
				{.fd = f->sock, .events = POLLIN},
				{.fd = f->release[0], .events = POLLIN},
			};
			ck_assert_int_gt(poll(p, 2, -1), 0);
			if (p[1].revents & POLLIN)
				fake_release(f);
			if (!p[0].revents)
				continue;
		}
		/* Read with recvmsg so descriptors are collected in arrival order. */
		if (r.start > 0) {
			memmove(r.data, r.data + r.start, r.len - r.start);
			r.len -= r.start;
			r.start = 0;
		}
		if (r.cap - r.len < 65536) {
			r.cap = r.len + 65536 + FRAME_MAX;
			r.data = realloc(r.data, r.cap);
		}
		struct iovec iov = {.iov_base = r.data + r.len, .iov_len = r.cap - r.len};
		union {
			char b[CMSG_SPACE(sizeof(int) * 4)];
			struct cmsghdr align;
		} ctl;
		struct msghdr mh = {.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = ctl.b,
			.msg_controllen = sizeof(ctl.b)};
		ssize_t n = recvmsg(f->sock, &mh, MSG_CMSG_CLOEXEC);
		if (n <= 0)
			break;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
			if (cm->cmsg_type == SCM_RIGHTS)
				memcpy(&f->fds[f->nfds++], CMSG_DATA(cm), sizeof(int));
		r.len += (size_t)n;
	}
	frame_reader_finish(&r);
	frame_writer_finish(&f->w);
	for (unsigned i = 0; i < f->nhandles; i++)
		free(f->buf[i]);
	for (unsigned i = 0; i < f->nstaging; i++)
		munmap(f->staging[i], f->staging_size[i]);
	close(f->sock);
	return NULL;
}

struct fake *fake_start(void)
{
	struct fake *f = calloc(1, sizeof(*f));
	f->major = SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR;
	f->copy_lane = f->exec_lane = -1;
	f->release[0] = f->release[1] = -1;
	return f;
}

int fake_serve(struct fake *f)
{
	int sv[2];
	make_pair(sv);
	f->sock = sv[1];
	pthread_create(&f->thread, NULL, fake_main, f);
	return sv[0];
}

struct sseq *fake_connect(struct fake *f, uint64_t staging_size)
{
	int fd = fake_serve(f);
	struct sseq_connect_options o = {
		.size = sizeof(o),
		.worker_id = "gw7",
		.staging_size = staging_size,
	};
	struct sseq *s;
	int r = sseq__connect_fd(fd, &o, &s);
	ck_assert_msg(r == 0, "connect: %s", sseq_strerror(r));
	return s;
}

void fake_stop(struct fake *f, struct sseq *s)
{
	sseq_close(s);
	pthread_join(f->thread, NULL);
	for (int i = 0; i < 2; i++)
		if (f->release[i] >= 0)
			close(f->release[i]);
	free(f);
}
