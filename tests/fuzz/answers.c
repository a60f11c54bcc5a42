/* The ledger of answers owed: requests are queued as the client sends them and crossed off
 * as the daemon's messages arrive; a broken promise is noted, not fatal at once, because a
 * later close of the connection voids them all. */
#include "answers.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a Reply with STATUS_OK promises under its tag. */
enum owed {
	OWED_NOTHING,
	OWED_COMPLETION, /* exactly one Completion (watches, D2H, want_completion) */
	OWED_ON_ERROR, /* one Completion only if the operation fails later (I9) */
	/* A D2H or Await naming a done word: the tag in the word instead of the Completion
	 * (not seen here), or the Completion, OK or not. */
	OWED_COMPLETION_OR_WORD,
};

struct answer_due {
	uint64_t tag;
	bool query; /* a QueryResult is due, not a Reply */
	enum owed owed;
};

struct answer_tag {
	uint64_t tag;
	unsigned min, max; /* Completions owed: at least, at most */
	unsigned max_ok; /* of them OK, at most */
	unsigned got, got_ok;
};

static void *grow(void *p, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return p;
	*cap = *cap ? *cap * 2 : 32;
	if (!(p = realloc(p, *cap * elem))) {
		fputs("answers: out of memory\n", stderr);
		abort();
	}
	return p;
}

static void broken(struct answers *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void broken(struct answers *a, const char *fmt, ...)
{
	va_list ap;

	if (a->broken[0])
		return;
	va_start(ap, fmt);
	vsnprintf(a->broken, sizeof(a->broken), fmt, ap);
	va_end(ap);
}

static struct answer_tag *tag_get(struct answers *a, uint64_t tag)
{
	for (size_t i = 0; i < a->ntags; i++)
		if (a->tags[i].tag == tag)
			return &a->tags[i];
	a->tags = grow(a->tags, &a->captags, a->ntags, sizeof(*a->tags));
	a->tags[a->ntags] = (struct answer_tag){.tag = tag};
	return &a->tags[a->ntags++];
}

void answers_init(struct answers *a)
{
	*a = (struct answers){.due = NULL};
}

void answers_finish(struct answers *a)
{
	free(a->due);
	free(a->tags);
	answers_init(a);
}

void answers_give_up(struct answers *a)
{
	a->unchecked = true;
}

static void due(struct answers *a, uint64_t tag, bool query, enum owed owed)
{
	a->due = grow(a->due, &a->capdue, a->ndue, sizeof(*a->due));
	a->due[a->ndue++] = (struct answer_due){tag, query, owed};
}

static void expect(struct answers *a, const Sseq__Request *rq, bool nested)
{
	if (rq->tag == 0) {
		answers_give_up(a); /* tag 0 is refused and the connection closed */
		return;
	}
	switch (rq->body_case) {
	case SSEQ__REQUEST__BODY_BATCH:
		if (nested) {
			answers_give_up(a); /* batches do not nest: the connection closes */
			return;
		}
		for (size_t i = 0; i < rq->batch->n_requests; i++)
			expect(a, rq->batch->requests[i], true);
		due(a, rq->tag, false, OWED_NOTHING);
		break;
	case SSEQ__REQUEST__BODY_QUERY:
		/* A follower gets QueryResults whenever the trace moves: not in the ledger. */
		if (rq->query->kind == SSEQ__QUERY_KIND__QUERY_KIND_TRACE && rq->query->trace &&
			rq->query->trace->follow)
			answers_give_up(a);
		due(a, rq->tag, true, OWED_NOTHING);
		break;
	case SSEQ__REQUEST__BODY_AWAIT:
		due(a, rq->tag, false,
			rq->await->done_word ? OWED_COMPLETION_OR_WORD : OWED_COMPLETION);
		break;
	case SSEQ__REQUEST__BODY_COPY_D2H:
		due(a, rq->tag, false,
			rq->copy_d2h->done_word ? OWED_COMPLETION_OR_WORD : OWED_COMPLETION);
		break;
	case SSEQ__REQUEST__BODY_SYNC:
		due(a, rq->tag, false, OWED_COMPLETION);
		break;
	case SSEQ__REQUEST__BODY_COPY_H2D:
	case SSEQ__REQUEST__BODY_COPY_D2D:
	case SSEQ__REQUEST__BODY_EXECUTE:
		due(a, rq->tag, false, rq->want_completion ? OWED_COMPLETION : OWED_ON_ERROR);
		break;
	default:
		due(a, rq->tag, false, OWED_NOTHING);
		break;
	}
}

void answers_expect(struct answers *a, const Sseq__Request *rq)
{
	expect(a, rq, false);
}

/* The next answer in line must be of this kind, under this tag. */
static const struct answer_due *answered(struct answers *a, bool query, uint64_t tag)
{
	const struct answer_due *d;

	if (a->next == a->ndue) {
		broken(a, "a %s under tag %" PRIu64 " answers no request",
			query ? "QueryResult" : "Reply", tag);
		return NULL;
	}
	d = &a->due[a->next++];
	if (d->query != query || d->tag != tag) {
		broken(a,
			"answer %zu: a %s under tag %" PRIu64 " where a %s under tag %" PRIu64
			" was due",
			a->next, query ? "QueryResult" : "Reply", tag,
			d->query ? "QueryResult" : "Reply", d->tag);
		return NULL;
	}
	return d;
}

void answers_receive(struct answers *a, const Sseq__Message *m)
{
	const struct answer_due *d;
	struct answer_tag *t;

	switch (m->body_case) {
	case SSEQ__MESSAGE__BODY_REPLY:
		d = answered(a, false, m->reply->tag);
		if (!d || m->reply->status != SSEQ__STATUS__STATUS_OK)
			break; /* a refused request is owed nothing more */
		t = tag_get(a, d->tag);
		if (d->owed == OWED_COMPLETION) {
			t->min++;
			t->max++;
			t->max_ok++;
		} else if (d->owed == OWED_ON_ERROR) {
			t->max++;
		} else if (d->owed == OWED_COMPLETION_OR_WORD) {
			t->max++;
			t->max_ok++;
		}
		break;
	case SSEQ__MESSAGE__BODY_QUERY_RESULT:
		answered(a, true, m->query_result->tag);
		break;
	case SSEQ__MESSAGE__BODY_COMPLETION:
		t = tag_get(a, m->completion->tag);
		t->got++;
		if (m->completion->status == SSEQ__STATUS__STATUS_OK)
			t->got_ok++;
		break;
	default:
		break;
	}
}

void answers_check(const struct answers *a)
{
	const char *why = a->broken;
	char buf[160];

	if (a->unchecked)
		return;
	if (!*why && a->next < a->ndue) {
		snprintf(buf, sizeof(buf),
			"request %zu (tag %" PRIu64 ") of %zu was never answered", a->next + 1,
			a->due[a->next].tag, a->ndue);
		why = buf;
	}
	for (size_t i = 0; !*why && i < a->ntags; i++) {
		const struct answer_tag *t = &a->tags[i];
		/* Only an owed Completion may say OK; an optional one reports a failure
		 * (but the one that stands in for a done word's tag may say either). */
		if (t->got < t->min || t->got > t->max || t->got_ok > t->max_ok) {
			snprintf(buf, sizeof(buf),
				"tag %" PRIu64
				": %u Completion(s) (%u OK), owed %u to %u (at most %u "
				"OK)",
				t->tag, t->got, t->got_ok, t->min, t->max, t->max_ok);
			why = buf;
		}
	}
	if (*why) {
		fprintf(stderr, "fuzz-session: broken promise to the client: %s\n", why);
		abort();
	}
}
