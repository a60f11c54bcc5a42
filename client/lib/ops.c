/* libsseq's requests in flight: the table of them by tag, what the daemon's Reply,
 * Completion and QueryResult messages do to them, and the errors nobody has collected
 * yet. No socket here: conn.c reads the frames and hands them to client_dispatch(). */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "sseq-tables.h"

/* sseq_strerror's text of each status, from the schema (sseq-tables.h). The public header
 * keeps its own enum sseq_error: each of its codes is checked here against the wire's. */
static const char *const status_text[] = {
#define STATUS_TEXT(NAME, number, text) [number] = text,
	SSEQ_STATUSES(STATUS_TEXT)
#undef STATUS_TEXT
};
#define STATUS_MATCHES(NAME, number, text)                                                         \
	_Static_assert(SSEQ_ERR_##NAME == SSEQ_ERR_BASE + SSEQ__STATUS__STATUS_##NAME,             \
		"sseq.h's SSEQ_ERR_" #NAME " is the wire's STATUS_" #NAME);
SSEQ_STATUS_ERRORS(STATUS_MATCHES)
#undef STATUS_MATCHES
_Static_assert(SSEQ_ERR_END == SSEQ_ERR_BASE + SSEQ_STATUS_COUNT,
	"sseq.h's enum sseq_error has every status of the schema");

const char *sseq_strerror(int code)
{
	if (code == 0)
		return status_text[0];
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

int client_fail(struct sseq *s, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
	va_end(ap);
	s->errtag = 0;
	return code;
}

int client_broken(struct sseq *s)
{
	client_set_error(s, "%s", s->brokenmsg);
	return s->broken;
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

int client_ops_reserve(struct sseq *s)
{
	return s->nops >= s->nbuckets ? table_grow(s) : 0;
}

struct op *client_op_new(void)
{
	return calloc(1, sizeof(struct op));
}

void client_op_free(struct op *op)
{
	for (size_t i = 0; i < op->nresults; i++)
		sseq__query_result__free_unpacked(op->results[i], NULL);
	free(op->results);
	free(op->message);
	free(op);
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

void client_op_insert(struct sseq *s, struct op *op, const Sseq__Request *req)
{
	op->kind = req->body_case;
	op->want_completion = req->want_completion || req->body_case == SSEQ__REQUEST__BODY_AWAIT ||
		req->body_case == SSEQ__REQUEST__BODY_SYNC ||
		req->body_case == SSEQ__REQUEST__BODY_COPY_D2H;
	size_t k = bucket_of(s, op->tag);
	op->hnext = s->buckets[k];
	s->buckets[k] = op;
	s->nops++;
	s->nunanswered++;
	if (!op->follow)
		s->nactive++;
}

void client_op_answered(struct sseq *s, struct op *op)
{
	if (!op->replied)
		s->nunanswered--;
	op->replied = true;
}

void client_op_drop(struct sseq *s, struct op *op)
{
	/* Finished without an answer (the connection was lost, a poll failed). */
	if (!op->replied)
		s->nunanswered--;
	struct op **p = &s->buckets[bucket_of(s, op->tag)];
	while (*p != op)
		p = &(*p)->hnext;
	*p = op->hnext;
	s->nops--;
	client_op_free(op);
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

void client_error_push(
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

int client_error_next(struct sseq *s, uint64_t *tag)
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

bool client_error_collect(struct sseq *s, uint64_t tag, int *code)
{
	for (size_t i = 0; i < s->nerrors; i++)
		if (s->errors[i].tag == tag) {
			*code = errors_report(s, i, true);
			return true;
		}
	return false;
}

int sseq_next_error(struct sseq *s, uint64_t *tag)
{
	return client_error_next(s, tag);
}

/* ---- finishing requests ---- */

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
		client_op_release_staging(s, op);
	}
	bool consumed = false;
	if (op->user_tag && s->cb)
		consumed = s->cb(s->cb_data, op->tag, op->status) != 0;
	if (op->waited)
		return;
	if (op->status != 0 && keep_error)
		client_error_push(s, op->tag, op->status, op->message, op->user_tag, consumed);
	client_op_drop(s, op);
}

void client_op_release_staging(struct sseq *s, struct op *op)
{
	if (!op->arena)
		return;
	staging_set_unref(&s->staging, op->arena, op->staging_off);
	/* An Await's word is its only range. */
	if (op->word_off && op->word_off - 1 != op->staging_off)
		staging_set_unref(&s->staging, op->arena, op->word_off - 1);
	op->word_off = 0;
	op->arena = NULL;
}

/* ---- a D2H's done word ----
 *
 * The daemon writes a D2H's tag into its word once the bytes are in place, by
 * compare-and-swap from 0, and then sends no Completion; the Reply still comes. The word
 * holds 0 only while a caller watches it: it starts as CLIENT_WORD_UNWATCHED (never a
 * tag: tags count up from 1), so that a copy nobody waits for by its tag (sseq_sync,
 * sseq_poll, the callback) is answered by its Completion; a wait arms it, and swaps the
 * mark back before it sleeps on the socket, so that the Completion wakes it. With a daemon
 * of protocol 1.12 and $SSEQ_SLEEP_ON_WORD=1 a wait sleeps on the word itself instead
 * (DONE_WORD_SLEEPING, done-word.h): the daemon's completion thread writes the tag and
 * wakes it, with no hand-off to the loop, no Completion and no read; a word the daemon
 * refused (DONE_WORD_REFUSED: its Completion is coming) is neither armed nor slept on. */

static _Atomic uint64_t *op_word(const struct op *op)
{
	return (_Atomic uint64_t *)(void *)(op->arena->base + op->word_off - 1);
}

/* The op has a word and is still waiting for the daemon's last word on it. */
static bool op_word_open(const struct op *op)
{
	return op->word_off && !op->completed && !op->done;
}

bool client_op_word_done(struct sseq *s, struct op *op)
{
	if (!op_word_open(op))
		return false;
	/* Acquire: the daemon's release came after the bytes. */
	if (atomic_load_explicit(op_word(op), memory_order_acquire) != op->tag)
		return false;
	op->completed = true;
	if (op->replied)
		op_finish(s, op, true);
	return true;
}

bool client_op_word_arm(struct op *op)
{
	uint64_t mark = CLIENT_WORD_UNWATCHED;

	if (!op_word_open(op))
		return false;
	/* An Await's word starts armed (submit.c): armed still, or the tag already in. */
	return atomic_compare_exchange_strong_explicit(
		       op_word(op), &mark, 0, memory_order_relaxed, memory_order_relaxed) ||
		mark == 0 || mark == op->tag;
}

enum client_nap client_op_word_nap(struct sseq *s, struct op *op, long timeout_ns)
{
	uint64_t v = 0;
	int r;

	if (!op_word_open(op))
		return CLIENT_NAP_NONE;
	if (!atomic_compare_exchange_strong_explicit(op_word(op), &v, DONE_WORD_SLEEPING,
		    memory_order_acq_rel, memory_order_acquire))
		return client_op_word_done(s, op) ? CLIENT_NAP_DONE : CLIENT_NAP_NONE;
	r = done_word_sleep(op_word(op), timeout_ns);
	s->word_naps++;
	s->word_naps_unwoken += r == -ETIMEDOUT;
	/* Back from the mark: armed again after the time ran out, marked unwatched after a
	 * wake-up without the tag; failing that, the tag or the daemon's refusal (a
	 * Completion is on its way) is there. */
	v = DONE_WORD_SLEEPING;
	if (atomic_compare_exchange_strong_explicit(op_word(op), &v,
		    r == -ETIMEDOUT ? 0 : CLIENT_WORD_UNWATCHED, memory_order_acq_rel,
		    memory_order_acquire))
		return r == -ETIMEDOUT ? CLIENT_NAP_AGAIN : CLIENT_NAP_SOCKET;
	return client_op_word_done(s, op) ? CLIENT_NAP_DONE : CLIENT_NAP_SOCKET;
}

bool client_op_word_sleep(struct sseq *s, struct op *op)
{
	uint64_t zero = 0;

	if (!op_word_open(op))
		return true;
	if (atomic_compare_exchange_strong_explicit(op_word(op), &zero, CLIENT_WORD_UNWATCHED,
		    memory_order_acq_rel, memory_order_acquire))
		return true;
	return !client_op_word_done(s, op);
}

void client_op_fail(struct op *op, int code, const char *message)
{
	if (op->status != 0)
		return;
	op->status = code;
	free(op->message);
	op->message = message && *message ? strdup(message) : NULL;
}

/* These errors are not kept: every later call returns err itself. */
void client_ops_fail_all(struct sseq *s, int err)
{
	for (size_t i = 0; i < s->nbuckets; i++) {
		struct op *op = s->buckets[i];
		while (op) {
			struct op *next = op->hnext;
			if (!op->done) {
				/* With the daemon's last word (a refusal, why it closed). */
				client_op_fail(op, err, s->errmsg);
				op_finish(s, op, false);
			}
			op = next;
		}
	}
}

void client_ops_free_all(struct sseq *s)
{
	for (size_t i = 0; i < s->nbuckets; i++) {
		struct op *op = s->buckets[i];
		while (op) {
			struct op *next = op->hnext;
			client_op_free(op);
			op = next;
		}
	}
	free(s->buckets);
	s->buckets = NULL;
	s->nbuckets = s->nops = 0;
	s->nunanswered = s->nqueued = 0;
	while (s->nerrors)
		errors_remove(s, s->nerrors - 1);
	free(s->errors);
	s->errors = NULL;
}

/* ---- the daemon's messages ---- */

/* A yes/no setting from the environment: "0", "no" or "off" say no, anything else set
 * says yes, unset gives dflt. */
static bool client_env_flag(const char *name, bool dflt)
{
	const char *v = getenv(name);

	if (!v || !*v)
		return dflt;
	return strcmp(v, "0") != 0 && strcmp(v, "no") != 0 && strcmp(v, "off") != 0;
}

static void save_welcome(struct sseq *s, const Sseq__Welcome *w)
{
	s->info.session = w->session;
	s->info.major = w->protocol_major;
	s->info.minor = w->protocol_minor;
	s->word_sleeps = w->protocol_major == SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR &&
		w->protocol_minor >= 12 && client_env_flag("SSEQ_SLEEP_ON_WORD", false);
	s->no_words = !client_env_flag("SSEQ_DONE_WORDS", true);
	s->want_ring = w->protocol_major == SSEQ__PROTOCOL_VERSION__PROTOCOL_MAJOR &&
		w->protocol_minor >= 15 && client_env_flag("SSEQ_REQUEST_RING", false);
	free(s->info.daemon_version);
	s->info.daemon_version = strdup(w->daemon_version ? w->daemon_version : "");
	/* A daemon before protocol 1.2 names no lanes: everything runs on its one. */
	s->info.nlanes = 1;
	s->info.lanes[0] = 0;
	if (w->n_lanes) {
		s->info.nlanes =
			w->n_lanes < SSEQ_MAX_LANES ? (uint32_t)w->n_lanes : SSEQ_MAX_LANES;
		memcpy(s->info.lanes, w->lanes, s->info.nlanes * sizeof(*w->lanes));
	}
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
			snprintf(s->brokenmsg, sizeof(s->brokenmsg), "%s",
				rep->message[0] ? rep->message : sseq_strerror(code));
			client_set_error(s, "%s", s->brokenmsg);
		} else if (code != 0) {
			client_error_push(s, rep->tag, code, rep->message, false, false);
		}
		return;
	}
	client_op_answered(s, op);
	op->handle = rep->handle;
	op->size = rep->size;
	if (op->kind == SSEQ__REQUEST__BODY_HELLO && rep->welcome)
		save_welcome(s, rep->welcome);
	if (code != 0) {
		/* Rejected: no Completion follows. */
		client_op_fail(op, code, rep->message);
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
			client_error_push(s, c->tag, code, c->message, false, false);
		return;
	}
	op->completed = true;
	if (code != 0)
		client_op_fail(op, code, c->message);
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
			client_op_fail(op, -ENOMEM, NULL);
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
	client_op_answered(s, op);
	if (!op->follow)
		op_finish(s, op, true);
}

int client_dispatch(struct sseq *s, const uint8_t *frame, size_t len)
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
