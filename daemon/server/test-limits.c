/* What the limits count is what a session holds until it is released, not what its handles
 * name: an arena unregistered while a copy still uses it stays mapped (staging.c), and a
 * freed buffer's memory stays taken while work uses it (buffer.c), so both stay counted,
 * against the session and, once it has gone, against the daemon. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "buffer.h"
#include "session.h"
#include "sseq-frame.h"
#include "staging.h"
#include "test-loop.h"

/* A server under `--client-arena-limit 4 --arena-limit arenas`. */
static struct tl *limits_new(uint64_t arenas)
{
	struct tl *t = tl_new(0);

	t->srv.opts.account.client_arenas = 4;
	t->srv.opts.account.arenas = arenas;
	return t;
}

/* The Reply to tag, skipping Completions: its status, handle and (into why) message. */
static Sseq__Status reply_of(
	struct tl_client *c, uint64_t tag, uint64_t *handle, char *why, size_t size)
{
	Sseq__Message *m;

	while ((m = tl_next(c))) {
		if (m->body_case == SSEQ__MESSAGE__BODY_REPLY && m->reply->tag == tag) {
			Sseq__Status st = m->reply->status;

			if (handle)
				*handle = m->reply->handle;
			if (why)
				snprintf(why, size, "%s",
					m->reply->message ? m->reply->message : "");
			sseq__message__free_unpacked(m, NULL);
			return st;
		}
		sseq__message__free_unpacked(m, NULL);
	}
	ck_abort_msg("no reply to tag %llu", (unsigned long long)tag);
	return SSEQ__STATUS__STATUS_OK;
}

/* Send rq, let the daemon turn, and take its Reply (reply_of). */
static Sseq__Status request_reply(struct tl *t, struct tl_client *c, Sseq__Request *rq,
	uint64_t *handle, char *why, size_t size)
{
	uint64_t tag = tl_send(c, rq);

	tl_pump(t);
	return reply_of(c, tag, handle, why, size);
}

/* Register a sealed memfd of `size` bytes: the Reply's status, handle and message. */
static Sseq__Status staging_register(
	struct tl *t, struct tl_client *c, uint64_t size, uint64_t *handle, char *why, size_t n)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__StagingRegister sr = SSEQ__STAGING_REGISTER__INIT;
	uint8_t buf[256];
	size_t len;
	int fd = memfd_create("test-limits", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	Sseq__Status st;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	sr.size = size;
	sr.label = (char *)"arena";
	rq.tag = c->next_tag++;
	rq.body_case = SSEQ__REQUEST__BODY_STAGING_REGISTER;
	rq.staging_register = &sr;
	len = tl_frame(&rq, buf);
	tl_write(c, buf, len, &fd, 1);
	close(fd); /* the daemon holds its own */
	tl_pump(t);
	st = reply_of(c, rq.tag, handle, why, n);
	return st;
}

static void staging_unregister(struct tl *t, struct tl_client *c, uint64_t h)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__StagingUnregister su = SSEQ__STAGING_UNREGISTER__INIT;
	uint64_t tag;

	su.staging = h;
	rq.body_case = SSEQ__REQUEST__BODY_STAGING_UNREGISTER;
	rq.staging_unregister = &su;
	tag = tl_send(c, &rq);
	tl_pump(t);
	ck_assert_int_eq(reply_of(c, tag, NULL, NULL, 0), SSEQ__STATUS__STATUS_OK);
}

/* A 4-byte D2H from buffer src into arena st: it stays in flight until the test completes
 * it (the harness's device completes nothing by itself, as a long kernel ahead of it). */
static void d2h(struct tl *t, struct tl_client *c, uint64_t src, uint64_t st)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__CopyD2H d = SSEQ__COPY_D2_H__INIT;
	uint64_t tag;

	d.src = src;
	d.staging = st;
	d.length = 4;
	rq.body_case = SSEQ__REQUEST__BODY_COPY_D2H;
	rq.copy_d2h = &d;
	tag = tl_send(c, &rq);
	tl_pump(t);
	ck_assert_int_eq(reply_of(c, tag, NULL, NULL, 0), SSEQ__STATUS__STATUS_OK);
}

static void buffer_free(struct tl *t, struct tl_client *c, uint64_t h)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Free f = SSEQ__FREE__INIT;
	uint64_t tag;

	f.buffer = h;
	rq.body_case = SSEQ__REQUEST__BODY_FREE;
	rq.free = &f;
	tag = tl_send(c, &rq);
	tl_pump(t);
	ck_assert_int_eq(reply_of(c, tag, NULL, NULL, 0), SSEQ__STATUS__STATUS_OK);
}

/* Alloc: the Reply's status, handle and (into why, if given) message. */
static Sseq__Status alloc_why(
	struct tl *t, struct tl_client *c, uint64_t size, uint64_t *h, char *why, size_t n)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__Alloc a = SSEQ__ALLOC__INIT;

	a.size = size;
	a.label = (char *)"buf";
	rq.body_case = SSEQ__REQUEST__BODY_ALLOC;
	rq.alloc = &a;
	return request_reply(t, c, &rq, h, why, n);
}

static Sseq__Status alloc(struct tl *t, struct tl_client *c, uint64_t size, uint64_t *h)
{
	return alloc_why(t, c, size, h, NULL, 0);
}

/* Register an arena, queue a copy into it, unregister it: as often as the daemon lets. How
 * many registrations it took, of `tries`; the refusal's message in why. */
static unsigned churn_arenas(
	struct tl *t, struct tl_client *c, uint64_t src, unsigned tries, char *why, size_t n)
{
	for (unsigned i = 0; i < tries; i++) {
		uint64_t st = 0;

		if (staging_register(t, c, 1 << 20, &st, why, n) != SSEQ__STATUS__STATUS_OK)
			return i;
		d2h(t, c, src, st);
		staging_unregister(t, c, st);
	}
	return tries;
}

START_TEST(test_an_unregistered_arena_counts_until_its_copy_completes)
{
	struct tl *t = limits_new(8);
	struct tl_client c;
	char why[512] = "";
	uint64_t src, st;

	tl_connect(t, &c);
	tl_hello(t, &c, "limits");
	src = tl_alloc(t, &c, 4096, "src");
	/* Each arena stays mapped under its copy: the fifth is this session's fifth. */
	ck_assert_uint_eq(churn_arenas(t, &c, src, 100, why, sizeof(why)), 4);
	ck_assert_msg(strstr(why, "--client-arena-limit"), "refused with: %s", why);
	ck_assert_uint_eq(c.s->counts.stagings, 4);
	ck_assert_uint_eq(c.s->counts.staging_bytes, 4u << 20);
	ck_assert_uint_eq(t->srv.limit.arenas, 4);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_STAGING_BYTES], 4u << 20);
	ck_assert_uint_ge(t->srv.count[SSEQ_COUNTER_STAGING_REFUSED], 1);
	/* The copies complete: their arenas go, and so does their charge. */
	tl_complete_all(t);
	tl_take_replies(&c);
	ck_assert_uint_eq(c.s->counts.stagings, 0);
	ck_assert_uint_eq(c.s->counts.staging_bytes, 0);
	ck_assert_uint_eq(t->srv.limit.arenas, 0);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_STAGING_BYTES], 0);
	ck_assert_int_eq(staging_register(t, &c, 4096, &st, NULL, 0), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(t->srv.limit.arenas, 1);
	tl_close(t, &c);
	ck_assert_uint_eq(t->srv.limit.arenas, 0); /* idle: unmapped at disconnect */
	tl_free(t);
}
END_TEST

START_TEST(test_arenas_of_a_session_gone_count_until_their_copies_complete)
{
	struct tl *t = limits_new(6);
	struct tl_client a, b;
	char why[512] = "";
	uint64_t src;

	tl_connect(t, &a);
	tl_hello(t, &a, "gone");
	src = tl_alloc(t, &a, 4096, "src");
	ck_assert_uint_eq(churn_arenas(t, &a, src, 4, why, sizeof(why)), 4);
	/* Its session goes while the copies still use them: still mapped. */
	tl_close(t, &a);
	ck_assert_uint_eq(t->srv.limit.arenas, 4);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_STAGING_BYTES], 4u << 20);

	/* Another user's: the gone session's arenas count against its user's share too. */
	tl_connect(t, &b);
	b.s->ident.uid = getuid() + 1;
	tl_hello(t, &b, "next");
	src = tl_alloc(t, &b, 4096, "src");
	ck_assert_uint_eq(churn_arenas(t, &b, src, 100, why, sizeof(why)), 2);
	ck_assert_msg(strstr(why, "--arena-limit") && strstr(why, "all sessions hold 6"),
		"refused with: %s", why);
	tl_complete_all(t);
	tl_take_replies(&b);
	ck_assert_uint_eq(t->srv.limit.arenas, 0);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_STAGING_BYTES], 0);
	tl_close(t, &b);
	tl_free(t);
}
END_TEST

/* One user's sessions, those gone whose arenas copies still use included, map at most its
 * share of --arena-limit (16 x 4 / 8 = 8 here): another user's arenas are still taken. */
START_TEST(test_one_user_maps_at_most_its_share_of_the_arena_limit)
{
	struct tl *t = limits_new(16);
	struct tl_client a[4], late, b;
	char why[512] = "";
	unsigned mapped = 0;
	uint64_t src;

	t->srv.opts.limits.max_clients = 8;
	t->srv.opts.limits.max_clients_per_uid = 4;
	for (int i = 0; i < 4; i++) {
		tl_connect(t, &a[i]);
		tl_hello(t, &a[i], "greedy");
		src = tl_alloc(t, &a[i], 4096, "src");
		mapped += churn_arenas(t, &a[i], src, 4, why, sizeof(why));
	}
	ck_assert_uint_eq(mapped, 8);
	ck_assert_msg(strstr(why, "--max-clients-per-uid") && strstr(why, "holds 8"),
		"refused with: %s", why);
	ck_assert_uint_eq(t->srv.limit.n_uid_arenas, 1);
	ck_assert_uint_eq(t->srv.limit.uid_arenas[0].arenas, 8);
	/* Its sessions go, their copies still in flight: the arenas still count as its own. */
	for (int i = 0; i < 4; i++)
		tl_close(t, &a[i]);
	ck_assert_uint_eq(t->srv.limit.arenas, 8);
	tl_connect(t, &late);
	tl_hello(t, &late, "greedy");
	src = tl_alloc(t, &late, 4096, "src");
	ck_assert_uint_eq(churn_arenas(t, &late, src, 4, why, sizeof(why)), 0);
	ck_assert_msg(strstr(why, "--max-clients-per-uid"), "refused with: %s", why);
	/* Another user gets what one of its sessions may map. */
	tl_connect(t, &b);
	b.s->ident.uid = getuid() + 1;
	tl_hello(t, &b, "other");
	src = tl_alloc(t, &b, 4096, "src");
	ck_assert_uint_eq(churn_arenas(t, &b, src, 4, why, sizeof(why)), 4);
	ck_assert_uint_eq(t->srv.limit.n_uid_arenas, 2);
	/* The copies complete: every charge goes, and the per-user table with it. */
	tl_complete_all(t);
	tl_take_replies(&late);
	tl_take_replies(&b);
	ck_assert_uint_eq(t->srv.limit.arenas, 0);
	ck_assert_uint_eq(t->srv.limit.n_uid_arenas, 0);
	ck_assert_ptr_null(t->srv.limit.uid_arenas);
	ck_assert_int_eq(staging_register(t, &late, 4096, &src, NULL, 0), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(t->srv.limit.n_uid_arenas, 1);
	tl_close(t, &late);
	ck_assert_ptr_null(t->srv.limit.uid_arenas);
	tl_close(t, &b);
	tl_free(t);
}
END_TEST

START_TEST(test_the_staging_byte_limit_counts_arenas_in_use)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	char why[512] = "";
	uint64_t src;

	t->srv.opts.account.client_staging_bytes = 3u << 20;
	tl_connect(t, &c);
	tl_hello(t, &c, "bytes");
	src = tl_alloc(t, &c, 4096, "src");
	ck_assert_uint_eq(churn_arenas(t, &c, src, 100, why, sizeof(why)), 3);
	ck_assert_msg(strstr(why, "--client-staging-limit"), "refused with: %s", why);
	ck_assert_uint_eq(c.s->counts.staging_bytes, 3u << 20);
	tl_complete_all(t);
	tl_take_replies(&c);
	ck_assert_uint_eq(c.s->counts.staging_bytes, 0);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

/* --client-memory-limit: a freed buffer's memory stays taken while a copy uses it. */
START_TEST(test_a_freed_buffer_counts_until_its_memory_goes_back)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	uint64_t h, other;

	t->srv.opts.account.client_memory_bytes = 8192;
	tl_connect(t, &c);
	tl_hello(t, &c, "quota");
	ck_assert_int_eq(alloc(t, &c, 8192, &h), SSEQ__STATUS__STATUS_OK);
	tl_send_d2d(&c, h, 64);
	tl_pump(t);
	tl_take_replies(&c);
	buffer_free(t, &c, h);
	ck_assert_uint_eq(c.s->counts.buffers, 0); /* no handle ... */
	ck_assert_uint_eq(c.s->counts.bytes, 8192); /* ... but its memory is still taken */
	ck_assert_int_eq(alloc(t, &c, 4096, &other), SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
	tl_complete_all(t);
	tl_take_replies(&c);
	ck_assert_uint_eq(c.s->counts.bytes, 0);
	ck_assert_int_eq(alloc(t, &c, 8192, &h), SSEQ__STATUS__STATUS_OK);
	/* Idle: its memory goes back, and its charge, as it is freed. */
	buffer_free(t, &c, h);
	ck_assert_uint_eq(c.s->counts.bytes, 0);
	ck_assert_int_eq(alloc(t, &c, 8192, &h), SSEQ__STATUS__STATUS_OK);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

START_TEST(test_a_freed_base_counts_while_a_slice_holds_it)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	uint64_t h, sl, other;

	t->srv.opts.account.client_memory_bytes = 8192;
	tl_connect(t, &c);
	tl_hello(t, &c, "slice");
	ck_assert_int_eq(alloc(t, &c, 8192, &h), SSEQ__STATUS__STATUS_OK);
	sl = tl_slice(t, &c, h, 0, 4096);
	buffer_free(t, &c, h);
	ck_assert_uint_eq(c.s->counts.bytes, 8192);
	ck_assert_int_eq(alloc(t, &c, 4096, &other), SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
	buffer_free(t, &c, sl);
	ck_assert_uint_eq(c.s->counts.bytes, 0);
	ck_assert_int_eq(alloc(t, &c, 8192, &h), SSEQ__STATUS__STATUS_OK);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

/* A session that leaves with a freed buffer in use: released once the copy completes,
 * and its record with it (LeakSanitizer checks the last part). */
START_TEST(test_a_session_gone_with_a_freed_buffer_in_use_is_released_later)
{
	struct tl *t = tl_new(0);
	struct tl_client c;
	uint64_t h;

	t->srv.opts.account.client_memory_bytes = 8192;
	tl_connect(t, &c);
	tl_hello(t, &c, "leaves");
	ck_assert_int_eq(alloc(t, &c, 8192, &h), SSEQ__STATUS__STATUS_OK);
	tl_send_d2d(&c, h, 64);
	tl_pump(t);
	buffer_free(t, &c, h);
	tl_close(t, &c);
	ck_assert_uint_eq(seq_pending_count(t->srv.seq), 1);
	tl_complete_all(t);
	ck_assert_uint_eq(seq_pending_count(t->srv.seq), 0);
	tl_free(t);
}
END_TEST

/* Every limit refuses in one format, "<what> refused: <holder> holds <used> of <limit>
 * <unit> (<option>)", counts its refusal where sseqctl stats shows it, and takes nothing:
 * handles, device memory and arenas in turn. */
START_TEST(test_every_limit_refuses_in_one_format_and_counts_it)
{
	struct tl *t = limits_new(8);
	struct tl_client c;
	char why[512] = "";
	uint64_t h[3], st;

	t->srv.opts.account.client_handles = 3;
	t->srv.opts.account.client_memory_bytes = 8192;
	t->srv.opts.account.client_arenas = 1;
	tl_connect(t, &c);
	tl_hello(t, &c, "format");
	ck_assert_int_eq(alloc(t, &c, 4096, &h[0]), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(alloc_why(t, &c, 8192, &h[1], why, sizeof(why)),
		SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(why,
		"alloc of 8192 bytes refused: this session holds 4096 of 8192 bytes of device "
		"memory (--client-memory-limit)");
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_QUOTA_REFUSED], 1);
	ck_assert_uint_eq(c.s->counts.bytes, 4096);
	ck_assert_int_eq(
		staging_register(t, &c, 1 << 20, &st, why, sizeof(why)), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(staging_register(t, &c, 1 << 20, NULL, why, sizeof(why)),
		SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(why,
		"staging arena of 1048576 bytes refused: this session holds 1 of 1 staging "
		"arenas (--client-arena-limit; an unregistered arena counts until the copies "
		"using it complete)");
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_STAGING_REFUSED], 1);
	ck_assert_uint_eq(t->srv.limit.arenas, 1);
	ck_assert_int_eq(alloc(t, &c, 4096, &h[2]), SSEQ__STATUS__STATUS_OK);
	ck_assert_int_eq(alloc_why(t, &c, 16, NULL, why, sizeof(why)),
		SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(why,
		"alloc of 16 bytes refused: this session holds 3 of 3 handles (buffers, slices, "
		"arenas, modules) (--client-handle-limit): free some");
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_HANDLES_REFUSED], 1);
	/* What each held goes back with it. */
	buffer_free(t, &c, h[0]);
	buffer_free(t, &c, h[2]);
	staging_unregister(t, &c, st);
	ck_assert_uint_eq(c.s->counts.bytes, 0);
	ck_assert_uint_eq(c.s->counts.stagings, 0);
	ck_assert_uint_eq(c.s->counts.staging_bytes, 0);
	ck_assert_uint_eq(t->srv.limit.arenas, 0);
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_STAGING_BYTES], 0);
	ck_assert_uint_eq(t->srv.limit.n_uid_arenas, 0);
	tl_close(t, &c);
	tl_free(t);
}
END_TEST

/* Modules on the test device: any file loads (each a malloc, so that LeakSanitizer sees
 * one never unloaded), and every module has one global of 256 bytes. */
static int fake_module_load(void *ctx, const char *path, void **module)
{
	*module = malloc(1);
	return *module ? 0 : -ENOMEM;
}

static void fake_module_unload(void *ctx, void *module)
{
	free(module);
}

static int fake_module_global(
	void *ctx, void *module, const char *name, uint64_t *addr, uint64_t *size)
{
	*addr = 1ull << 40;
	*size = 256;
	return 0;
}

static Sseq__Status load_module(
	struct tl *t, struct tl_client *c, const char *path, uint64_t *h, char *why, size_t n)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__LoadModule lm = SSEQ__LOAD_MODULE__INIT;

	lm.path = (char *)path;
	rq.body_case = SSEQ__REQUEST__BODY_LOAD_MODULE;
	rq.load_module = &lm;
	return request_reply(t, c, &rq, h, why, n);
}

static Sseq__Status module_global(struct tl *t, struct tl_client *c, uint64_t module, uint64_t *h)
{
	Sseq__Request rq = SSEQ__REQUEST__INIT;
	Sseq__ModuleGlobal mg = SSEQ__MODULE_GLOBAL__INIT;

	mg.module = module;
	mg.name = (char *)"table";
	rq.body_case = SSEQ__REQUEST__BODY_MODULE_GLOBAL;
	rq.module_global = &mg;
	return request_reply(t, c, &rq, h, NULL, 0);
}

/* A session holds at most SESSION_MAX_MODULES (64) modules: the next is refused in the
 * one format and counted (as a handle refused), takes nothing, and the modules go back
 * with the session; a module's global counts as one of its buffers while open. */
START_TEST(test_the_module_limit_refuses_in_one_format_and_counts_it)
{
	struct tl *t = tl_new(0);
	struct backend_ops ops = *t->srv.backend.ops;
	struct tl_client c;
	char dir[] = "/tmp/test-limits-XXXXXX", file[64], why[512] = "";
	uint64_t h = 0, g = 0;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/m.co", dir);
	ck_assert_ptr_nonnull(f = fopen(file, "w"));
	fclose(f);
	ops.module_load = fake_module_load;
	ops.module_unload = fake_module_unload;
	ops.module_global = fake_module_global;
	t->srv.backend.ops = &ops;
	t->srv.opts.module_dir = dir;
	tl_connect(t, &c);
	tl_hello(t, &c, "modules");
	for (unsigned i = 0; i < 64; i++)
		ck_assert_int_eq(
			load_module(t, &c, "m.co", &h, why, sizeof(why)), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(c.s->counts.modules, 64);
	ck_assert_int_eq(load_module(t, &c, "m.co", NULL, why, sizeof(why)),
		SSEQ__STATUS__STATUS_RESOURCE_EXHAUSTED);
	ck_assert_str_eq(why,
		"module 'm.co' refused: this session holds 64 of 64 modules (a fixed limit; a "
		"module stays loaded while its session lasts)");
	ck_assert_uint_eq(t->srv.count[SSEQ_COUNTER_HANDLES_REFUSED], 1);
	ck_assert_uint_eq(c.s->counts.modules, 64);
	ck_assert_uint_eq(module_global(t, &c, h, &g), SSEQ__STATUS__STATUS_OK);
	ck_assert_uint_eq(c.s->counts.buffers, 1);
	buffer_free(t, &c, g);
	ck_assert_uint_eq(c.s->counts.buffers, 0);
	tl_close(t, &c);
	tl_free(t);
	ck_assert_int_eq(unlink(file), 0);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("limits");
	TCase *tc = tcase_create("limits");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_an_unregistered_arena_counts_until_its_copy_completes);
	tcase_add_test(tc, test_arenas_of_a_session_gone_count_until_their_copies_complete);
	tcase_add_test(tc, test_one_user_maps_at_most_its_share_of_the_arena_limit);
	tcase_add_test(tc, test_the_staging_byte_limit_counts_arenas_in_use);
	tcase_add_test(tc, test_a_freed_buffer_counts_until_its_memory_goes_back);
	tcase_add_test(tc, test_a_freed_base_counts_while_a_slice_holds_it);
	tcase_add_test(tc, test_a_session_gone_with_a_freed_buffer_in_use_is_released_later);
	tcase_add_test(tc, test_every_limit_refuses_in_one_format_and_counts_it);
	tcase_add_test(tc, test_the_module_limit_refuses_in_one_format_and_counts_it);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
